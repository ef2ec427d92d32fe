#!/usr/bin/env python3
"""Records ggml's quantizer output for the formats gguf-py cannot quantize (the K-quants, IQ4_NL, IQ4_XS), as
reference vectors for test_recorded_quants.py. Run by hand when a format is added; the files it writes are committed.

  1. a ggml checkout (https://github.com/ggml-org/ggml; the vectors here come from commit d99724f2), built without
     host-specific code or FMA contraction so that its float arithmetic is plain IEEE single precision:
       cmake -S ggml -B ggml/build -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DCMAKE_BUILD_TYPE=Release \\
             -DCMAKE_C_FLAGS=-ffp-contract=off -DCMAKE_CXX_FLAGS=-ffp-contract=off
       cmake --build ggml/build --target ggml-base
       cc -O2 -Iggml/include ggml_quantize_driver.c -Lggml/build/src -lggml-base -lm -o ggml_quantize_driver
  2. LD_LIBRARY_PATH=ggml/build/src python3 make_vectors.py ./ggml_quantize_driver

Writes input.f32 ([ROWS, COLS] float32: Gaussian rows and hand-made ones, see ROW_KINDS) and <format>.bin.
"""
import os
import subprocess
import sys

import numpy as np

ROWS, COLS = 16, 512
FORMATS = {"q2_k": 10, "q3_k": 11, "q4_k": 12, "q5_k": 13, "q6_k": 14, "iq4_nl": 20, "iq4_xs": 23}
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


def main():
    driver = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    x = inputs()
    x.tofile(os.path.join(here, "input.f32"))
    for name, ggml_type in FORMATS.items():
        subprocess.run([driver, str(ggml_type), str(ROWS), str(COLS), os.path.join(here, "input.f32"),
                        os.path.join(here, name + ".bin")], check=True)
        print("wrote", name)


if __name__ == "__main__":
    main()
