#!/usr/bin/env python3
"""Oracle for qrt's chat template engine: the real Jinja2 renders every chat template in the shared data
folder with every sample conversation, configured as Hugging Face transformers configures it for
apply_chat_template (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the generation
tag, transformers' tojson, raise_exception and strftime_now), and qrt_chat_render must produce the same text,
or fail where Jinja2 fails.

  chat_template_oracle.py QRT_CHAT_RENDER [--write-expected DIR] [-v]

It also renders random expressions (expression_fuzz.py) in both engines, which must print the same text or
both fail; the seed is fresh each run and printed (QRT_CHAT_FUZZ_SEED=<seed> repeats a run).

Exit status: 0 all passed, 1 a mismatch, 77 skipped (jinja2 or the data folder missing).
--write-expected DIR writes Jinja2's rendering of the sample conversation for the templates whose exact text
the C++ test checks (EXPECTED below) to DIR/<template>.txt, and of the tool-call conversation for
EXPECTED_TOOL_CALLS to DIR/<template>.tool_calls.txt.
"""
import copy
import difflib
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime
from pathlib import Path

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
except ImportError:
    print("SKIP: jinja2 is not installed (pip install -r tests/oracle/requirements.txt)")
    sys.exit(77)

import expression_fuzz  # noqa: E402 - beside this script

# Jinja2 compiles fuzz expressions such as (1)[0] to Python source, which Python warns about while compiling.
warnings.filterwarnings("ignore", category=SyntaxWarning)

HERE = Path(__file__).resolve().parent
CASE_DIR = HERE.parents[1] / "unit" / "chat" / "data"
# strftime_now reads this instant, in UTC, in both engines: 2025-03-14 09:26:53 UTC.
FIXED_NOW = 1741944413
BOS, EOS = "<s>", "</s>"
# Templates whose rendering of the sample conversation the C++ test compares with stored Jinja2 output.
EXPECTED = [
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "meta-llama-Llama-3.3-70B-Instruct",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "Mistral-Small-3.2-24B-Instruct-2506",
    "google-gemma-2-2b-it",
    "microsoft-Phi-3.5-mini-instruct",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "ibm-granite-granite-3.3-2B-Instruct",
    "openai-gpt-oss-120b",
]
# Templates whose rendering of the tool-call conversation the C++ test also compares.
EXPECTED_TOOL_CALLS = [
    "meta-llama-Llama-3.1-8B-Instruct",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "ibm-granite-granite-3.3-2B-Instruct",
    "openai-gpt-oss-120b",
]


class GenerationTag(Extension):
    """transformers' {% generation %} tag (AssistantTracker) without the index tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(cls):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(FIXED_NOW).strftime(format)

    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_cases():
    """({conversation name: context}, {template stem: extra variables})."""
    spec = json.loads((CASE_DIR / "sample_conversations.json").read_text(encoding="utf-8"))
    contexts = {}
    for name, conv in spec["conversations"].items():
        use_tools = conv.get("use_tools", False)
        tools = None
        if use_tools == "functions":
            tools = [tool["function"] for tool in spec["tools"]]
        elif use_tools:
            tools = spec["tools"]
        ctx = {"messages": conv["messages"], "add_generation_prompt": conv["add_generation_prompt"],
               "bos_token": BOS, "eos_token": EOS, "tools": tools}
        for key, value in conv.items():
            if key not in ("messages", "add_generation_prompt", "use_tools"):
                ctx[key] = value
        contexts[name] = ctx
    return contexts, spec.get("template_variables", {})


_compiled = {}


def compile_cached(env, source):
    key = (id(env), source)
    if key not in _compiled:
        _compiled[key] = env.from_string(source)
    return _compiled[key]


def jinja_render(env_immutable, env_mutable, source, ctx):
    """(ok, text or error message, note). transformers passes documents=None; tools is None without tools."""
    # A deep copy: the mutable sandbox lets a template change the messages, which other renderings share.
    kwargs = copy.deepcopy(ctx)
    kwargs.setdefault("documents", None)
    try:
        return True, compile_cached(env_immutable, source).render(**kwargs), ""
    except jinja2.exceptions.SecurityError:
        # transformers' immutable sandbox refuses list.append/pop; qrt allows them (as llama.cpp does), so the
        # reference for those templates is the same environment with mutation allowed.
        try:
            return True, compile_cached(env_mutable, source).render(**kwargs), "mutable sandbox"
        except Exception as e:  # noqa: BLE001 - any template failure is a result to compare
            return False, f"{type(e).__name__}: {e}", "mutable sandbox"
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}", ""


# Random expressions per run: enough to reach most operator/filter pairs, well under a second in each engine.
FUZZ_COUNT = 1500


class SetResult(Exception):
    """A fuzz expression made a Python set (dict view minus an iterable): qrt has no set type, and Python prints a
    set of strings in an order that changes with every process (hash randomization), so there is no text to
    compare."""


class SetDetectingEnvironment(ImmutableSandboxedEnvironment):
    """Raises SetResult where `-` would make a set. Only used to explain a mismatch: intercepting `-` also stops
    Jinja2 from folding constant subtractions, which changes other results."""

    intercepted_binops = frozenset(["-"])

    def call_binop(self, context, operator, left, right):
        if operator == "-" and isinstance(left, (type({}.keys()), type({}.items()))):
            raise SetResult()
        return super().call_binop(context, operator, left, right)


def jinja_expression(env, source):
    """(ok, text or error) for one fuzz expression. The variables are copied for every rendering (Jinja2's
    indent filter appends to a list in place)."""
    try:
        return True, env.from_string(source).render(**copy.deepcopy(expression_fuzz.VARIABLES))
    except Exception as e:  # noqa: BLE001 - a failure is a result to compare
        return False, f"{type(e).__name__}: {e}"


# What qrt's values cannot hold, where Jinja2 has Python's: integers past 64 bits, complex numbers (a negative
# number to a fractional power). qrt fails with these messages; Jinja2 prints a number.
KNOWN_LIMITS = ("integer result does not fit in 64 bits", "a negative number raised to a fractional power is complex")


# qrt refuses a template naming an unknown filter or test when it parses it. Jinja2 usually does too, at compile
# time, but not where it evaluates the expression as a constant first and never reaches the name (the
# unknown filter behind a constant-false `and`): then both agree the name is unknown and only the timing differs.
UNKNOWN_NAME = re.compile(r"no (filter|test) named '([^']*)'$")


def compare_fuzz(env, set_detecting_env, sources, results, seed):
    """(agreeing, at a known limit, failed) for the fuzz expressions; prints each mismatch with the seed that
    reproduces it."""
    passed = limited = failed = 0
    for source, got in zip(sources, results):
        if not got["ok"] and got["error"].endswith(KNOWN_LIMITS):
            limited += 1
            continue
        ok, text = jinja_expression(env, source)
        agree = (ok == got["ok"]) and (not ok or text == got["output"])
        if not agree and jinja_expression(set_detecting_env, source)[1].startswith("SetResult"):
            limited += 1
            continue
        unknown = None if got["ok"] else UNKNOWN_NAME.search(got["error"])
        if unknown and unknown.group(2) not in (env.filters if unknown.group(1) == "filter" else env.tests):
            agree = True
        if agree:
            passed += 1
            continue
        failed += 1
        print(f"FAIL fuzz expression (QRT_CHAT_FUZZ_SEED={seed}): {source}")
        print(f"  jinja2: {text!r}")
        print(f"  qrt:    {got['output'] if got['ok'] else got['error']!r}")
    return passed, limited, failed


def run_qrt(binary, cases):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
        path = f.name
    try:
        env = dict(os.environ, TZ="UTC")
        proc = subprocess.run([binary, "--batch", path, "--now", str(FIXED_NOW)], capture_output=True, env=env,
                              timeout=300)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return json.loads(proc.stdout.decode("utf-8"))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    write_dir = Path(sys.argv[sys.argv.index("--write-expected") + 1]) if "--write-expected" in sys.argv else None
    data = os.environ.get("QRT_TEST_DATA", str(HERE.parents[3] / "shared" / "data"))
    template_dir = Path(data) / "chat-templates"
    templates = sorted(template_dir.glob("*.jinja"))
    if not templates:
        print(f"SKIP: no chat templates under {template_dir}")
        return 77
    os.environ["TZ"] = "UTC"
    time.tzset()
    # A runaway expression fails fast with MemoryError (in both engines) instead of filling the machine.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))

    env_immutable = make_environment(ImmutableSandboxedEnvironment)
    env_mutable = make_environment(SandboxedEnvironment)
    contexts, template_variables = load_cases()
    cases, expected = [], []
    for path in templates:
        source = path.read_text(encoding="utf-8")
        for conv_name, conv_ctx in contexts.items():
            ctx = dict(conv_ctx, **template_variables.get(path.stem, {}))
            cases.append({"template": str(path), "context": ctx})
            expected.append((path.stem, conv_name) + jinja_render(env_immutable, env_mutable, source, ctx))
    seed = int(os.environ.get("QRT_CHAT_FUZZ_SEED") or random.SystemRandom().randrange(1 << 31))
    fuzz_sources = expression_fuzz.cases(seed, FUZZ_COUNT)
    fuzz_first = len(cases)
    cases += [{"source": source, "variables": expression_fuzz.VARIABLES} for source in fuzz_sources]
    results = run_qrt(binary, cases)
    fuzz_results = results[fuzz_first:]
    results = results[:fuzz_first]

    passed = failed = both_failed = 0
    sample_ok = {}
    for (stem, conv, ok, text, note), got in zip(expected, results):
        label = f"{stem} / {conv}" + (f" ({note})" if note else "")
        if ok and got["ok"] and got["output"] == text:
            passed += 1
            if conv in ("basic", "basic_no_system", "basic_with_tools"):
                sample_ok[stem] = True
            continue
        if not ok and not got["ok"]:
            # Both failed: qrt's message must end with Jinja2's (raise_exception's text, the TypeError, ...).
            message = text.split(": ", 1)[1] if ": " in text else text
            if got["error"].endswith(message):
                passed += 1
                both_failed += 1
                if "-v" in sys.argv:
                    print(f"both failed: {label}\n  jinja2: {text}\n  qrt:    {got['error']}")
                continue
        failed += 1
        print(f"FAIL {label}")
        if ok and got["ok"]:
            diff = difflib.unified_diff(text.splitlines(True), got["output"].splitlines(True), "jinja2", "qrt", n=1)
            print("".join(list(diff)[:40]))
        else:
            print(f"  jinja2: {'ok' if ok else text}")
            print(f"  qrt:    {'ok' if got['ok'] else got['error']}")
    for path in templates:
        if not sample_ok.get(path.stem):
            failed += 1
            print(f"FAIL {path.stem}: neither sample conversation renders without error")

    # The language cases the C++ unit test checks qrt against must still be what Jinja2 produces.
    language_cases = [c for c in json.loads((CASE_DIR / "language_cases.json").read_text(encoding="utf-8"))
                      if not c.get("qrt_only")]
    for case in language_cases:
        try:
            text = env_immutable.from_string(case["template"]).render(**case["variables"])
            good = case.get("expected") == text
            detail = f"jinja2 rendered {text!r}, the case expects {case.get('expected', case.get('error'))!r}"
        except Exception as e:  # noqa: BLE001
            good = "error" in case
            detail = f"jinja2 failed ({type(e).__name__}: {e}), the case expects {case.get('expected')!r}"
        if good:
            passed += 1
        else:
            failed += 1
            print(f"FAIL language case {case['name']}: {detail}")

    if write_dir is not None:
        write_dir.mkdir(parents=True, exist_ok=True)
        for stem, conv, ok, text, _ in expected:
            if stem in EXPECTED and conv == ("basic_no_system" if stem == "google-gemma-2-2b-it" else "basic") and ok:
                (write_dir / f"{stem}.txt").write_bytes(text.encode("utf-8"))
            if stem in EXPECTED_TOOL_CALLS and conv == "tool_calls" and ok:
                (write_dir / f"{stem}.tool_calls.txt").write_bytes(text.encode("utf-8"))
        print(f"wrote expected outputs to {write_dir}")

    fuzz_passed, fuzz_limited, fuzz_failed = compare_fuzz(
        env_immutable, make_environment(SetDetectingEnvironment), fuzz_sources, fuzz_results, seed)
    print(f"{len(templates)} templates x {len(contexts)} conversations ({passed - both_failed - len(language_cases)} "
          f"identical renderings, {both_failed} failing in both engines), {len(language_cases)} language cases, "
          f"{fuzz_passed} of {len(fuzz_sources)} random expressions agree and {fuzz_limited} reach a value qrt "
          f"does not have (big integer, complex, set) (QRT_CHAT_FUZZ_SEED={seed})")
    passed += fuzz_passed + fuzz_limited
    failed += fuzz_failed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
