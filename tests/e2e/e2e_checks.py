"""The pass/fail bookkeeping the end-to-end scripts share: check() prints one line per check ("ok   name" or
"FAIL name detail"), finish() prints the totals and exits 1 when any check failed."""
import sys

_counts = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    if ok:
        _counts["passed"] += 1
        print(f"ok   {name}")
    else:
        _counts["failed"] += 1
        print(f"FAIL {name} {detail}")


def finish():
    print(f"{_counts['passed']} passed, {_counts['failed']} failed")
    sys.exit(1 if _counts["failed"] else 0)
