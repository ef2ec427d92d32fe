#!/usr/bin/env python3
"""Records ggml's quantizer output for the formats gguf-py cannot quantize (the K-quants and the i-quants), and for
every format that takes an importance matrix with one (weighted/), as reference vectors for test_recorded_quants.py.
Run by hand when a format is added; the files it writes are committed.

  1. a ggml checkout (https://github.com/ggml-org/ggml; the vectors here come from commit d99724f2), built without
     host-specific code or FMA contraction so that its float arithmetic is plain IEEE single precision:
       cmake -S ggml -B ggml/build -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DCMAKE_BUILD_TYPE=Release \\
             -DCMAKE_C_FLAGS=-ffp-contract=off -DCMAKE_CXX_FLAGS=-ffp-contract=off
       cmake --build ggml/build --target ggml-base
       cc -O2 -Iggml/include ggml_quantize_driver.c -Lggml/build/src -lggml-base -lm -o ggml_quantize_driver
  2. LD_LIBRARY_PATH=ggml/build/src python3 make_vectors.py ./ggml_quantize_driver

Writes input.f32 ([ROWS, COLS] float32: Gaussian rows and hand-made ones, see ROW_KINDS), <format>.bin (no
importance matrix), importance.f32 ([COLS] float32, positive with a wide range like a real imatrix's mean squared
activations) and weighted/<format>.bin (ggml given importance.f32, as llama-quantize passes an imatrix's column).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROWS, COLS = 16, 512
GGML_TYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q2_k": 10, "q3_k": 11, "q4_k": 12, "q5_k": 13, "q6_k": 14,
              "iq2_xxs": 16, "iq2_xs": 17, "iq3_xxs": 18, "iq1_s": 19, "iq4_nl": 20, "iq3_s": 21, "iq2_s": 22,
              "iq4_xs": 23, "iq1_m": 29}
# Without an importance matrix (ggml asserts one for IQ2_XXS, IQ2_XS and IQ1_S; the legacy types are in gguf-py).
FORMATS = {k: GGML_TYPES[k] for k in ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "iq3_xxs", "iq3_s",
                                     "iq2_s", "iq1_m"]}
# With one: every type whose ggml quantizer reads it.
WEIGHTED_FORMATS = dict(GGML_TYPES)
# Rows ggml aborts on (GGML_ASSERT(grid_index >= 0): squares of 1e30 overflow in the grid search); qrt refuses them.
ABORTS = {k: (13,) for k in ["iq2_xs", "iq3_xxs", "iq3_s", "iq2_s", "iq1_m"]}
ROW_KINDS = ["gaussian"] * 7 + ["zeros", "constant 0.3", "positive", "negative", "outlier 10 at 7",
                                 "tiny (1e-20, below ggml's zero threshold)", "huge (1e30)", "integers -8..7",
                                 "half-integers"]


def inputs():
    rng = np.random.default_rng(20261126)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[7] = 0
    x[8] = 0.3
    x[9] = np.abs(x[9])
    x[10] = -np.abs(x[10])
    x[11, 7] = 10
    x[12] *= np.float32(1e-20)
    x[13] *= np.float32(1e30)
    x[14] = rng.integers(-8, 8, COLS)
    x[15] = rng.integers(-8, 8, COLS) + 0.5
    return x


def importance():
    rng = np.random.default_rng(20261127)
    return np.exp(rng.normal(0.0, 1.5, COLS)).astype(np.float32)


def main():
    driver = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    x = inputs()
    x.tofile(os.path.join(here, "input.f32"))
    importance().tofile(os.path.join(here, "importance.f32"))
    os.makedirs(os.path.join(here, "weighted"), exist_ok=True)
    for name, ggml_type in FORMATS.items():
        record(driver, ggml_type, x, os.path.join(here, name + ".bin"), None)
        print("wrote", name)
    for name, ggml_type in WEIGHTED_FORMATS.items():
        record(driver, ggml_type, x, os.path.join(here, "weighted", name + ".bin"),
               os.path.join(here, "importance.f32"))
        print("wrote weighted", name)


def record(driver, ggml_type, x, out, importance):
    """Quantizes row by row, so that a row ggml aborts on (ABORTS) leaves zero bytes and the others their bytes."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROWS):
            x[r].tofile(os.path.join(tmp, "row.f32"))
            args = [driver, str(ggml_type), "1", str(COLS), os.path.join(tmp, "row.f32"), os.path.join(tmp, "row.bin")]
            done = subprocess.run(args + ([importance] if importance else []), capture_output=True)
            name = out.split(os.sep)[-1][:-4]
            if r in ABORTS.get(name, ()):
                assert done.returncode != 0, f"ggml no longer aborts on row {r} of {name}"
                rows.append(None)
                continue
            assert done.returncode == 0, f"ggml failed on row {r} of {out}: {done.stderr[-300:]}"
            rows.append(np.fromfile(os.path.join(tmp, "row.bin"), np.uint8))
    size = max(len(b) for b in rows if b is not None)
    np.concatenate([b if b is not None else np.zeros(size, np.uint8) for b in rows]).tofile(out)


if __name__ == "__main__":
    main()
