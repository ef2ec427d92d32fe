#!/usr/bin/env python3
"""qrt's quantizers for the formats gguf-py cannot quantize (the K-quants and the i-quants), and every quantizer
given an importance matrix, against bytes recorded from ggml's own quantizer (ggml_vectors/, made by
make_vectors.py from a ggml checkout): the same input (and the same column importance) must give the same bytes,
row by row (Gaussian rows and zero, constant, one-signed, outlier, tiny, huge and integer-valued ones). A row ggml
aborts on (the grid-searching i-quants given values near 1e30) must be refused by qrt with an error. Also:

  * the round-trip error of each recorded tensor's Gaussian rows, decoded by gguf-py, against a bound per type;
  * llama.cpp's own quality gate (test-quantize-fns: 4096 values 0.1 + 2 cos(i), RMSE as it computes it) against
    its published thresholds for every type it gates (2-bit 0.0075, 3-bit 0.004, IQ3_XXS 0.005, ternary 0.01,
    the rest 0.002); IQ2_XXS, IQ2_XS and IQ1_S/M have no gate there (ggml quantizes them only with an imatrix).

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
from make_vectors import ABORTS, COLS, FORMATS, ROW_KINDS, ROWS, WEIGHTED_FORMATS  # noqa: E402

BLOCK = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q2_k": (256, 84),
         "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210), "iq4_nl": (32, 18),
         "iq4_xs": (256, 136), "iq2_xxs": (256, 66), "iq2_xs": (256, 74), "iq2_s": (256, 82), "iq3_xxs": (256, 98),
         "iq3_s": (256, 110), "iq1_s": (256, 50), "iq1_m": (256, 56)}
# Relative RMS on the Gaussian rows, decoded by gguf-py (a wrong layout that still matched bytes cannot pass).
ROUNDTRIP_BOUND = {"q4_0": 0.12, "q4_1": 0.11, "q5_0": 0.06, "q5_1": 0.055, "q2_k": 0.35, "q3_k": 0.18,
                   "q4_k": 0.09, "q5_k": 0.045, "q6_k": 0.025, "iq4_nl": 0.09, "iq4_xs": 0.09, "iq2_xxs": 0.395,
                   "iq2_xs": 0.36, "iq2_s": 0.285, "iq3_xxs": 0.235, "iq3_s": 0.175, "iq1_s": 0.56, "iq1_m": 0.60}
# llama.cpp's tests/test-quantize-fns.cpp thresholds (MAX_QUANTIZATION_TOTAL_ERROR*), by the type it gates.
LLAMA_CPP_GATE = {"q4_0": 0.002, "q4_1": 0.002, "q5_0": 0.002, "q5_1": 0.002, "q8_0": 0.002, "q2_k": 0.0075,
                  "q3_k": 0.004, "q4_k": 0.002, "q5_k": 0.002, "q6_k": 0.002, "iq4_nl": 0.002, "iq4_xs": 0.002,
                  "iq2_s": 0.0075, "iq3_xxs": 0.005, "iq3_s": 0.004, "tq1_0": 0.01, "tq2_0": 0.01}

passed = failed = 0


def report(ok, message):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + message)


def quantize(tool, name, x, tmp, importance=None):
    """qrt's bytes for the rows x, or None (and the error) when qrt refuses them."""
    src, out = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.bin")
    x.astype(np.float32).tofile(src)
    args = [tool, "quantize", name, str(x.shape[0]), str(x.shape[1]), src, out]
    r = subprocess.run(args + ([importance] if importance else []), capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.returncode, r.stderr.strip()
    return np.fromfile(out, np.uint8), 0, ""


def check_recorded(tool, tmp, name, x, want, importance, label):
    elems, nbytes = BLOCK[name]
    row_bytes = COLS // elems * nbytes
    aborts = ABORTS.get(name, ())
    expect = np.fromfile(want, np.uint8).reshape(ROWS, row_bytes)
    rows = [r for r in range(ROWS) if r not in aborts]
    got, rc, err = quantize(tool, name, x[rows], tmp, importance)
    if got is None:
        report(False, f"{label}: qrt_quant_oracle quantize failed ({rc}): {err}")
        return
    got = got.reshape(len(rows), row_bytes)
    for i, row in enumerate(rows):
        a, b = got[i], expect[row]
        bad = int(np.argmax(a != b))
        report(np.array_equal(a, b), f"{label} row {row} ({ROW_KINDS[row]}): {int((a != b).sum())} bytes differ, "
               f"first in block {bad // nbytes} at byte {bad % nbytes}: qrt 0x{a[bad]:02x}, ggml 0x{b[bad]:02x}")
    for row in aborts:
        got, rc, err = quantize(tool, name, x[row:row + 1], tmp, importance)
        report(got is None and rc == 3 and "cannot be quantized" in err,
               f"{label} row {row} ({ROW_KINDS[row]}): ggml aborts there; qrt should refuse it, got rc {rc} {err!r}")
    qtype = getattr(gguf.GGMLQuantizationType, name.upper())
    back = gguf_quants.dequantize(expect, qtype).reshape(ROWS, COLS)
    gauss = [i for i, k in enumerate(ROW_KINDS) if k == "gaussian"]
    err = float(np.linalg.norm(back[gauss] - x[gauss]) / np.linalg.norm(x[gauss]))
    report(err < ROUNDTRIP_BOUND[name], f"{label}: round trip {err:.4f} >= {ROUNDTRIP_BOUND[name]}")
    print(f"ok   {label}: bytes compared for {len(rows)} rows, {len(aborts)} refused; round trip {err:.4f}")


def check_llama_cpp_gate(tool, tmp):
    n = 32 * 128
    data = (0.1 + 2 * np.cos(np.arange(n, dtype=np.float64))).astype(np.float32)[None, :]
    for name, bound in LLAMA_CPP_GATE.items():
        got, rc, err = quantize(tool, name, data, tmp)
        if got is None:
            report(False, f"gate {name}: quantize failed ({rc}): {err}")
            continue
        back = gguf_quants.dequantize(got.reshape(1, -1), getattr(gguf.GGMLQuantizationType, name.upper()))
        diff = back.reshape(-1).astype(np.float64) - data.reshape(-1)
        rmse = float(np.sqrt(np.sum(diff * diff)) / n)  # llama.cpp's array_rmse: sqrt of the sum, over n
        report(rmse < bound, f"gate {name}: llama.cpp's total quantization error {rmse:.5f} >= {bound}")
        print(f"ok   gate {name}: {rmse:.5f} < {bound}")


def main():
    tool = sys.argv[1]
    x = np.fromfile(os.path.join(HERE, "input.f32"), np.float32).reshape(ROWS, COLS)
    importance = os.path.join(HERE, "importance.f32")
    with tempfile.TemporaryDirectory() as tmp:
        for name in FORMATS:
            check_recorded(tool, tmp, name, x, os.path.join(HERE, name + ".bin"), None, name)
        for name in WEIGHTED_FORMATS:
            check_recorded(tool, tmp, name, x, os.path.join(HERE, "weighted", name + ".bin"), importance,
                           name + " with importance")
        check_llama_cpp_gate(tool, tmp)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
