#!/usr/bin/env python3
"""Writes kernels/quant/iquant_tables.hpp: the constant tables of the GGML i-quants and of MXFP4.

The values are read from gguf-py (gguf/quants.py), which carries the same grids as ggml-common.h (packed there as
2- or 3-bit codes into value maps). They are format constants: run this once and commit the output; the build
never runs it.

    .venv/bin/python scripts/gen-iquant-tables.py            # rewrites kernels/quant/iquant_tables.hpp
    .venv/bin/python scripts/gen-iquant-tables.py --check    # exit 1 when the committed header is stale

Layout of each emitted table (the decoders in ggml_iquants.hpp / ggml_nl.hpp rely on it):
  iq2xxs_grid[256], iq2xs_grid[512], iq2s_grid[1024]  u64: byte j = unsigned magnitude of element j (8, 25 or 43)
  iq3xxs_grid[256], iq3s_grid[512]                    u32: byte j = unsigned magnitude of element j
  iq1s_grid[2048]                                     u32: nibble j (bits 4j..4j+3) = element j + 1 (0, 1 or 2)
                                                           (half the size of ggml's 8 x int8 CPU form)
  ksigns_iq2xs[128]                                   u8:  bits 0..6 = the index, bit 7 = its parity
  kvalues_iq4nl[16], kvalues_mxfp4[16]                i8
"""
import argparse
import os
import sys

import numpy as np
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "kernels", "quant", "iquant_tables.hpp")


def gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # pragma: no cover - metadata missing in an unpacked checkout
        return "unknown"


def grid_of(cls) -> np.ndarray:
    cls.init_grid()
    g = np.asarray(cls.grid).reshape(cls.grid_shape)
    return g


def pack_bytes(grid: np.ndarray, width: int) -> list[int]:
    """Each row of unsigned byte values -> one little-endian integer (byte j = element j)."""
    assert grid.shape[1] == width
    vals = grid.astype(np.int64)
    assert vals.min() >= 0 and vals.max() <= 255 and np.all(vals == grid)
    out = []
    for row in vals:
        x = 0
        for j, b in enumerate(row):
            x |= int(b) << (8 * j)
        out.append(x)
    return out


def pack_iq1s(grid: np.ndarray) -> list[int]:
    """Rows of 8 values in {-1, 0, 1} -> u32 with nibble j = value + 1."""
    assert grid.shape[1] == 8 and set(np.unique(grid).tolist()) <= {-1.0, 0.0, 1.0}
    out = []
    for row in grid.astype(np.int64):
        x = 0
        for j, v in enumerate(row):
            x |= (int(v) + 1) << (4 * j)
        out.append(x)
    return out


def hex_lines(values: list[int], digits: int, per_line: int) -> str:
    cells = [f"0x{v:0{digits}x}" for v in values]
    lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
    return ", \\\n  ".join(lines)


def dec_lines(values: list[int], per_line: int) -> str:
    cells = [str(v) for v in values]
    lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
    return ", \\\n  ".join(lines)


# (name, C element type, values as a macro body, count, what it is)
def tables():
    ksigns = list(np.frombuffer(quants.IQ2_XXS.ksigns, dtype=np.uint8))
    assert len(ksigns) == 128
    for i, s in enumerate(ksigns):  # sanity: bit 7 is the parity of the 7-bit index
        assert s == (i | ((bin(i).count("1") & 1) << 7)), i
    iq1s = grid_of(quants.IQ1_S)
    assert iq1s.shape == (2048, 8)
    return [
        ("iq2xxs_grid", "uint64_t", hex_lines(pack_bytes(grid_of(quants.IQ2_XXS), 8), 16, 5), 256,
         "IQ2_XXS grid: byte j = |element j|"),
        ("iq2xs_grid", "uint64_t", hex_lines(pack_bytes(grid_of(quants.IQ2_XS), 8), 16, 5), 512,
         "IQ2_XS grid: byte j = |element j|"),
        ("iq2s_grid", "uint64_t", hex_lines(pack_bytes(grid_of(quants.IQ2_S), 8), 16, 5), 1024,
         "IQ2_S grid: byte j = |element j|"),
        ("iq3xxs_grid", "uint32_t", hex_lines(pack_bytes(grid_of(quants.IQ3_XXS), 4), 8, 9), 256,
         "IQ3_XXS grid: byte j = |element j|"),
        ("iq3s_grid", "uint32_t", hex_lines(pack_bytes(grid_of(quants.IQ3_S), 4), 8, 9), 512,
         "IQ3_S grid: byte j = |element j|"),
        ("iq1s_grid", "uint32_t", hex_lines(pack_iq1s(iq1s), 8, 9), 2048,
         "IQ1_S / IQ1_M grid: nibble j = element j + 1"),
        ("ksigns_iq2xs", "uint8_t", hex_lines([int(s) for s in ksigns], 2, 16), 128,
         "7 sign bits -> 8 (bit 7 = parity)"),
        ("kvalues_iq4nl", "int8_t", dec_lines(list(quants.IQ4_NL.kvalues), 16), 16,
         "IQ4_NL / IQ4_XS non-linear 4-bit levels"),
        ("kvalues_mxfp4", "int8_t", dec_lines(list(quants.MXFP4.kvalues), 16), 16,
         "E2M1 values, doubled"),
    ]


SIZES = {"uint64_t": 8, "uint32_t": 4, "uint8_t": 1, "int8_t": 1}


def render() -> str:
    ts = tables()
    total = sum(SIZES[t] * n for _, t, _, n, _ in ts)
    # Every nvcc module that includes this header holds one copy of the device tables.
    assert total <= 32 * 1024, total
    out = []
    out.append("// GENERATED by scripts/gen-iquant-tables.py from gguf-py " + gguf_version() +
               " (gguf/quants.py) -- do not edit by hand.")
    out.append("// Regenerate: .venv/bin/python scripts/gen-iquant-tables.py   (--check verifies this file)")
    out.append("//")
    out.append("// Constant tables of the GGML i-quants (spec/ggml.md §2.5) and of IQ4_NL / MXFP4 (§2.2). Each table")
    out.append("// exists twice: a constexpr host array and, under nvcc, a device copy in global memory read through")
    out.append("// the read-only data cache (__ldg). Not __constant__ memory: the lanes of a warp look up different")
    out.append("// entries (one per code), and the constant cache serves one address per request, replaying the rest.")
    out.append("// The QRT_HD accessors pick the copy for the side they run on.")
    out.append(f"// Device memory used: {total} bytes per module.")
    out.append("#pragma once")
    out.append("")
    out.append("#include <cstdint>")
    out.append("")
    out.append('#include "kernels/quant/common.hpp"')
    out.append("")
    for name, ctype, body, n, what in ts:
        macro = f"QRT_IQ_TABLE_{name.upper()}"
        out.append(f"// {name}[{n}] ({ctype}): {what}")
        out.append(f"#define {macro} \\\n  {body}")
        out.append("")
    out.append("namespace qrt::quant::iq_tables {")
    out.append("namespace detail {")
    for name, ctype, _, n, _ in ts:
        out.append(f"inline constexpr {ctype} {name}_host[{n}] = {{QRT_IQ_TABLE_{name.upper()}}};")
    out.append("#if defined(__CUDACC__)")
    for name, ctype, _, n, _ in ts:
        out.append(f"[[maybe_unused]] static __device__ const {ctype} {name}_dev[{n}] = "
                   f"{{QRT_IQ_TABLE_{name.upper()}}};")
    out.append("#endif")
    out.append("}  // namespace detail")
    out.append("")
    out.append("// Accessors: `i` must be in range (every caller masks its index to the table size).")
    for name, ctype, _, n, _ in ts:
        out.append(f"QRT_HD {ctype} {name}(unsigned i) {{")
        out.append("#if defined(__CUDA_ARCH__)")
        out.append(f"  return __ldg(&detail::{name}_dev[i]);")
        out.append("#else")
        out.append(f"  return detail::{name}_host[i];")
        out.append("#endif")
        out.append("}")
    out.append("")
    out.append("}  // namespace qrt::quant::iq_tables")
    out.append("")
    for name, _, _, _, _ in ts:
        out.append(f"#undef QRT_IQ_TABLE_{name.upper()}")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed header instead of writing")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    text = render()
    if args.check:
        try:
            with open(args.out) as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        print("up to date" if same else f"{args.out} differs from what the generator writes")
        return 0 if same else 1
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
