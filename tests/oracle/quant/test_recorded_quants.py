#!/usr/bin/env python3
"""qrt's quantizers for the formats gguf-py cannot quantize (the K-quants, IQ4_NL, IQ4_XS) against bytes recorded
from ggml's own quantizer (ggml_vectors/, made by make_vectors.py from a ggml checkout): the same input must give
the same bytes, row by row (Gaussian rows and zero, constant, one-signed, outlier, tiny, huge and integer-valued
ones). Also the round-trip error of each recorded tensor's Gaussian rows, decoded by gguf-py, against a bound per
type.

usage: test_recorded_quants.py QRT_QUANT_ORACLE
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import quants as gguf_quants
except ImportError as e:  # pragma: no cover
    print(f"skipped: cannot import the oracle ({e})")
    sys.exit(77)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ggml_vectors")
sys.path.insert(0, HERE)
from make_vectors import COLS, FORMATS, ROW_KINDS, ROWS  # noqa: E402

BLOCK = {"q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
         "iq4_nl": (32, 18), "iq4_xs": (256, 136)}
# Relative RMS on the Gaussian rows, decoded by gguf-py (a wrong layout that still matched bytes cannot pass).
ROUNDTRIP_BOUND = {"q2_k": 0.35, "q3_k": 0.18, "q4_k": 0.09, "q5_k": 0.045, "q6_k": 0.025, "iq4_nl": 0.09,
                   "iq4_xs": 0.09}


def main():
    tool = sys.argv[1]
    x = np.fromfile(os.path.join(HERE, "input.f32"), np.float32).reshape(ROWS, COLS)
    failed = passed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in FORMATS:
            want = np.fromfile(os.path.join(HERE, name + ".bin"), np.uint8)
            out = os.path.join(tmp, name + ".bin")
            r = subprocess.run([tool, "quantize", name, str(ROWS), str(COLS), os.path.join(HERE, "input.f32"), out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: qrt_quant_oracle quantize failed: {r.stderr.strip()}")
                failed += 1
                continue
            got = np.fromfile(out, np.uint8)
            elems, nbytes = BLOCK[name]
            row_bytes = COLS // elems * nbytes
            if got.size != want.size:
                print(f"FAIL {name}: {got.size} bytes, ggml wrote {want.size}")
                failed += 1
                continue
            for row in range(ROWS):
                a, b = got[row * row_bytes:(row + 1) * row_bytes], want[row * row_bytes:(row + 1) * row_bytes]
                if np.array_equal(a, b):
                    passed += 1
                else:
                    bad = int(np.argmax(a != b))
                    print(f"FAIL {name} row {row} ({ROW_KINDS[row]}): {int((a != b).sum())} bytes differ, first in "
                          f"block {bad // nbytes} at byte {bad % nbytes}: qrt 0x{a[bad]:02x}, ggml 0x{b[bad]:02x}")
                    failed += 1
            qtype = getattr(gguf.GGMLQuantizationType, name.upper())
            back = gguf_quants.dequantize(want.reshape(ROWS, row_bytes), qtype).reshape(ROWS, COLS)
            gauss = [i for i, k in enumerate(ROW_KINDS) if k == "gaussian"]
            err = float(np.linalg.norm(back[gauss] - x[gauss]) / np.linalg.norm(x[gauss]))
            if err < ROUNDTRIP_BOUND[name]:
                passed += 1
                print(f"ok   {name}: bytes compared for {ROWS} rows; round trip {err:.4f}")
            else:
                print(f"FAIL {name}: round trip {err:.4f} >= {ROUNDTRIP_BOUND[name]}")
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
