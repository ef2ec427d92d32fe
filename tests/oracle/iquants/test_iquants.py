#!/usr/bin/env python3
"""qrt's GGML i-quant, ternary, IQ4_NL and MXFP4 decoders against gguf-py's numpy dequantizers.

    test_iquants.py <path to qrt_iquant_decode>

Every case builds a batch of blocks (fresh random bytes plus edge cases chosen for the format), decodes it with
qrt's CPU reference (through the tool) and with gguf.quants.dequantize, and compares.

Tolerance: bit-exact for every format (NaN matches NaN). Both sides evaluate the same float32 expression in the
same order: f16 -> f32 scale, one or two float32 multiplies by small integers or 0.5/0.25, the grid value (plus
±0.125 for IQ1_S/IQ1_M, an exact sum) and a sign, so there is no rounding difference to allow for.

A few cases do not use gguf's dequantizer: TQ1_0/TQ2_0 element order is checked by decoding blocks that gguf's
quantizer made from a known ternary pattern, and IQ1_M's reassembled f16 super-scale against a direct model.

Exit codes: 0 all passed, 1 a case failed (a tool error fails its case), 2 usage error, 77 numpy or gguf missing
(skipped).
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import quants
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
except ImportError as e:  # the oracle environment is absent: skip, saying why
    print(f"SKIP: {e} (install tests/oracle/requirements.txt)")
    sys.exit(77)

QK = 256
# qrt display name -> gguf type
FORMATS = {
    "iq1_s": T.IQ1_S, "iq1_m": T.IQ1_M, "iq2_xxs": T.IQ2_XXS, "iq2_xs": T.IQ2_XS, "iq2_s": T.IQ2_S,
    "iq3_xxs": T.IQ3_XXS, "iq3_s": T.IQ3_S, "iq4_nl": T.IQ4_NL, "iq4_xs": T.IQ4_XS, "tq1_0": T.TQ1_0,
    "tq2_0": T.TQ2_0, "mxfp4_ggml": T.MXFP4,
}
# Byte offset of the f16 super-scale d, where the format has one as a field.
D_OFFSET = {"iq1_s": 0, "iq2_xxs": 0, "iq2_xs": 0, "iq2_s": 0, "iq3_xxs": 0, "iq3_s": 0, "iq4_nl": 0, "iq4_xs": 0,
            "tq1_0": 52, "tq2_0": 64}
# f16 bit patterns worth a block each: ±1, ±0, smallest and largest subnormal, largest normal, ±inf, NaN, small.
SPECIAL_F16 = [0x3C00, 0xBC00, 0x0000, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x1400, 0x9234]

# Fresh blocks every run; QRT_TEST_SEED replays a run (the seed is printed first).
SEED = int(os.environ.get("QRT_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
rng = np.random.default_rng(SEED)

TOOL = None
results = []  # (name, ok, detail)


def sizes(fmt):
    return GGML_QUANT_SIZES[FORMATS[fmt]]  # (block elems, block bytes)


def random_blocks(fmt, n):
    return rng.integers(0, 256, size=(n, sizes(fmt)[1]), dtype=np.uint8)


def finite_d(blocks, off):
    """Replaces d with a random finite, normal f16 of either sign (magnitude 2^-10 .. 2^4)."""
    d = (rng.uniform(-4, 4, size=len(blocks)) * 2.0 ** rng.integers(-10, 2, size=len(blocks))).astype(np.float16)
    d[d == 0] = np.float16(0.5)
    put_u16(blocks, off, d.view(np.uint16))
    return blocks


def put_u16(blocks, off, values):
    v = np.asarray(values, dtype=np.uint16).reshape(-1, 1) if np.ndim(values) else np.full((len(blocks), 1), values,
                                                                                             np.uint16)
    blocks[:, off:off + 2] = v.astype("<u2").view(np.uint8).reshape(len(blocks), 2)


def put_u32(blocks, off, values):
    v = np.broadcast_to(np.asarray(values, dtype=np.uint32), (len(blocks),)).astype("<u4")
    blocks[:, off:off + 4] = v.view(np.uint8).reshape(len(blocks), 4)


def qrt_decode(fmt, blocks):
    elems = sizes(fmt)[0]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.f32")
        np.ascontiguousarray(blocks, dtype=np.uint8).tofile(src)
        r = subprocess.run([TOOL, fmt, src, dst], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{TOOL} {fmt} failed ({r.returncode}): {r.stderr.strip()}")
        return np.fromfile(dst, dtype=np.float32).reshape(len(blocks), elems)


def gguf_decode(fmt, blocks):
    out = quants.dequantize(np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1), FORMATS[fmt])
    return np.asarray(out, dtype=np.float32).reshape(len(blocks), -1)


def same_bits(a, b):
    """Element-wise: identical float32 bits, or both NaN."""
    a = np.ascontiguousarray(a, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def record(name, ok, detail=""):
    results.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}{(': ' + detail) if detail and not ok else ''}")


def check_vs_gguf(fmt, case, blocks):
    got = qrt_decode(fmt, blocks)
    want = gguf_decode(fmt, blocks)
    eq = same_bits(got, want)
    detail = ""
    if not eq.all():
        bi, ei = np.argwhere(~eq)[0]
        detail = (f"{int((~eq).sum())} of {eq.size} elements differ; first at block {bi} element {ei}: "
                  f"qrt {got[bi, ei]!r} gguf {want[bi, ei]!r}; block bytes {blocks[bi].tobytes().hex()}")
    record(f"{fmt} {case}", eq.all(), detail)


def with_special_d(fmt, n_random=8):
    """Random payloads with every special f16 value as d."""
    blocks = random_blocks(fmt, len(SPECIAL_F16) * n_random)
    put_u16(blocks, D_OFFSET[fmt], np.repeat(SPECIAL_F16, n_random))
    return blocks


def all_indices(fmt, count, per_block, setter):
    """Blocks whose grid index slots enumerate 0..count-1 (rest random, d finite)."""
    nblk = count // per_block
    blocks = finite_d(random_blocks(fmt, nblk), D_OFFSET[fmt]) if fmt in D_OFFSET else random_blocks(fmt, nblk)
    idx = np.arange(count).reshape(nblk, per_block)
    setter(blocks, idx)
    return blocks


# ----------------------------------------------------------------------------------------------- per-format cases

def sign_words(sign_indices, scale):
    """u32 aux word of IQ2_XXS / IQ3_XXS: four 7-bit sign indices, 4-bit scale in bits 28-31."""
    w = np.uint32(scale) << np.uint32(28)
    for g, s in enumerate(sign_indices):
        w |= np.uint32(s) << np.uint32(7 * g)
    return w


def cases_iq2_xxs(fmt="iq2_xxs"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "random, finite d", finite_d(random_blocks(fmt, 256), 0))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):  # sub-block ib: bytes 2+8ib .. +3 are its 4 grid indices
        for k in range(32):
            b[:, 2 + 8 * (k // 4) + k % 4] = idx[:, k]
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 256, 32, set_idx))
    # Sign indices with odd popcount get their 8th sign from the parity bit: 127 -> all 8 negative, 1 -> two.
    patterns = [(127, 127, 127, 127), (0, 0, 0, 0), (1, 2, 4, 64), (3, 126, 85, 42)]
    blocks = finite_d(random_blocks(fmt, 4 * len(patterns)), 0)
    for i, b in enumerate(blocks):
        pat, scale = patterns[i % len(patterns)], (15, 0, 7, 8)[i // len(patterns)]
        for ib in range(8):
            put_u32(b[None, :], 2 + 8 * ib + 4, sign_words(pat, scale))
    check_vs_gguf(fmt, "sign parity and scale extremes", blocks)
    blocks = finite_d(random_blocks(fmt, 8), 0)
    blocks[:, 2:66] = 0xFF  # grid index 255, sign index 127, scale 15 everywhere
    check_vs_gguf(fmt, "max grid index", blocks)


def cases_iq2_xs(fmt="iq2_xs"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):
        q = (b[:, 2:66].copy().view("<u2") & np.uint16(0xFE00)) | idx.astype(np.uint16)
        b[:, 2:66] = q.astype("<u2").view(np.uint8)
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 512, 32, set_idx))
    blocks = finite_d(random_blocks(fmt, 8), 0)
    signs = np.array([127, 0, 1, 64, 127, 3, 0x55, 0x2A] * 4, dtype=np.uint16)
    for i, b in enumerate(blocks):
        q = (np.roll(signs, i) << np.uint16(9)) | np.uint16(511 if i % 2 else 0)
        b[2:66] = q.astype("<u2").view(np.uint8)
        b[66:74] = (0xFF, 0x00, 0xF0, 0x0F, 0x5A, 0xA5, 0xFF, 0x00)
    check_vs_gguf(fmt, "sign parity, max index, scale nibbles", blocks)


def cases_iq2_s(fmt="iq2_s"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):  # low 8 bits in qs[0..31], bits 8-9 in qh[group/4] at 2*(group%4)
        b[:, 2:34] = (idx & 0xFF).astype(np.uint8)
        hi = (idx >> 8).reshape(len(b), 8, 4) << np.array([0, 2, 4, 6])
        b[:, 66:74] = hi.sum(axis=-1).astype(np.uint8)
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 1024, 32, set_idx))
    blocks = finite_d(random_blocks(fmt, 4), 0)
    blocks[:, 2:34] = 0xFF
    blocks[:, 66:74] = 0xFF  # index 1023 everywhere
    blocks[0, 34:66] = 0xFF  # all negative
    blocks[1, 34:66] = 0x00
    blocks[:, 74:82] = np.array([0xFF, 0x00, 0x0F, 0xF0, 0xFF, 0x00, 0x0F, 0xF0], np.uint8)
    check_vs_gguf(fmt, "max grid index, sign bytes, scale nibbles", blocks)


def cases_iq3_xxs(fmt="iq3_xxs"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):
        b[:, 2:66] = idx.astype(np.uint8)
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 256, 64, set_idx))
    patterns = [(127, 127, 127, 127), (0, 0, 0, 0), (1, 2, 4, 64), (3, 126, 85, 42)]
    blocks = finite_d(random_blocks(fmt, 8), 0)
    for i, b in enumerate(blocks):
        b[2:66] = 0xFF if i % 2 else 0x00
        for ib in range(8):
            put_u32(b[None, :], 66 + 4 * ib, sign_words(patterns[(i + ib) % 4], (15, 0)[ib % 2]))
    check_vs_gguf(fmt, "sign parity, max index, scale extremes", blocks)


def cases_iq3_s(fmt="iq3_s"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):  # qs[8ib+k] low bits, qh[ib] bit k the 9th
        b[:, 2:66] = (idx & 0xFF).astype(np.uint8)
        hi = (idx >> 8).reshape(len(b), 8, 8) << np.arange(8)
        b[:, 66:74] = hi.sum(axis=-1).astype(np.uint8)
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 512, 64, set_idx))
    blocks = finite_d(random_blocks(fmt, 4), 0)
    blocks[:, 2:74] = 0xFF  # index 511 everywhere
    blocks[0, 74:106] = 0xFF
    blocks[1, 74:106] = 0x0F
    blocks[:, 106:110] = np.array([0xF0, 0x0F, 0xFF, 0x00], np.uint8)
    check_vs_gguf(fmt, "max grid index, sign halves, scale nibbles", blocks)


def cases_iq1_s(fmt="iq1_s"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))

    def set_idx(b, idx):  # qs[4ib+g] low 8 bits; qh[ib] bits 3g..3g+2 the high 3; keep scale/delta bits random
        b[:, 2:34] = (idx & 0xFF).astype(np.uint8)
        qh = b[:, 34:50].copy().view("<u2") & np.uint16(0xF000)
        hi = ((idx >> 8).reshape(len(b), 8, 4) << np.array([0, 3, 6, 9])).sum(axis=-1).astype(np.uint16)
        b[:, 34:50] = (qh | hi).astype("<u2").view(np.uint8)
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 2048, 32, set_idx))
    blocks = finite_d(random_blocks(fmt, 4), 0)
    qh = np.array([0x8000, 0x0000, 0xFFFF, 0x7FFF, 0xF000, 0x7000, 0x8FFF, 0x0FFF], dtype="<u2")
    for i, b in enumerate(blocks):
        b[34:50] = np.roll(qh, i).view(np.uint8)
    check_vs_gguf(fmt, "delta sign, max scale, max index", blocks)


def iq1m_scales(d_bits, sub_scales):
    """The 4 scale words of IQ1_M: 16 three-bit sub-scales, top nibbles carrying the f16 super-scale."""
    words = np.zeros(4, dtype=np.uint16)
    for k, s in enumerate(sub_scales):
        words[k // 4] |= np.uint16((s & 7) << (3 * (k % 4)))
    for w in range(4):
        words[w] |= np.uint16(((d_bits >> (4 * w)) & 0xF) << 12)
    return words.astype("<u2").view(np.uint8)


def cases_iq1_m(fmt="iq1_m"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    # The super-scale is spread over four nibbles: every special f16 value, reassembled.
    blocks = random_blocks(fmt, len(SPECIAL_F16) * 4)
    for i, b in enumerate(blocks):
        b[48:56] = iq1m_scales(SPECIAL_F16[i // 4], rng.integers(0, 8, 16))
    check_vs_gguf(fmt, "reassembled super-scale, special values", blocks)

    def set_idx(b, idx):  # qs[group] low 8 bits; qh nibble of the group: bits 0-2 high index bits, bit 3 delta
        b[:, 0:32] = (idx & 0xFF).astype(np.uint8)
        nib = (idx >> 8).astype(np.uint8) | (rng.integers(0, 2, idx.shape, dtype=np.uint8) << 3)
        b[:, 32:48] = nib[:, 0::2] | (nib[:, 1::2] << 4)
        for blk in b:
            blk[48:56] = iq1m_scales(0x3C00, rng.integers(0, 8, 16))
    check_vs_gguf(fmt, "every grid index", all_indices(fmt, 2048, 32, set_idx))
    blocks = random_blocks(fmt, 4)
    for i, b in enumerate(blocks):
        b[32:48] = (0x88, 0x00, 0x8F, 0xF8, 0x7F, 0xF7, 0x08, 0x80)[i] if i < 8 else 0
        b[48:56] = iq1m_scales(0x2E66, [7, 0] * 8 if i % 2 else [0, 7] * 8)
    check_vs_gguf(fmt, "delta signs, sub-scale extremes", blocks)

    # Direct model, no gguf dequantizer: index 0 of the grid is all -1; sub-scales 0 give dl = d; delta bits clear
    # give +0.125, so every element is d * (-1 + 0.125) = -0.875 d.
    d_vals = np.array([1.0, -2.5, 0.0009765625, 6.0e-5, 65504.0], dtype=np.float16)
    blocks = np.zeros((len(d_vals), 56), dtype=np.uint8)
    for b, dv in zip(blocks, d_vals):
        b[48:56] = iq1m_scales(int(dv.view(np.uint16)), [0] * 16)
    got = qrt_decode(fmt, blocks)
    want = (d_vals.astype(np.float32) * np.float32(-0.875)).reshape(-1, 1) * np.ones((1, 256), np.float32)
    record(f"{fmt} super-scale reassembly (direct model)", same_bits(got, want).all(),
           f"got {got[:, 0]} want {want[:, 0]}")


def cases_iq4_nl(fmt="iq4_nl"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 512))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))
    blocks = finite_d(random_blocks(fmt, 16), 0)
    for i, b in enumerate(blocks):  # every nibble value in both halves
        b[2:18] = (np.arange(16) + i) % 16 | (((np.arange(16) * 7 + i) % 16) << 4)
    check_vs_gguf(fmt, "every code", blocks)


def cases_iq4_xs(fmt="iq4_xs"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))
    blocks = finite_d(random_blocks(fmt, 4), 0)
    # Six-bit sub-block scales 0 (-> -32) and 63 (-> +31) alternating, then 31/32 (-> -1, 0).
    put_u16(blocks[:2], 2, [0xCCCC, 0x3333])
    blocks[0, 4:8] = 0xF0
    blocks[1, 4:8] = 0x0F
    put_u16(blocks[2:], 2, [0x5555, 0xAAAA])
    blocks[2, 4:8] = 0xFF
    blocks[3, 4:8] = 0x00
    check_vs_gguf(fmt, "scale extremes", blocks)


def ternary_pattern(n):
    """Ternary rows with every element position hit by every value, d = 1 after quantization."""
    base = (np.arange(QK) * 7 + np.arange(n).reshape(-1, 1) * 5) % 3 - 1
    base[:, 0] = 1  # max |x| = 1 so d is exactly 1
    return base.astype(np.float32)


def check_ternary_order(fmt, gtype):
    x = ternary_pattern(6)
    blocks = np.asarray(quants.quantize(x, gtype), dtype=np.uint8).reshape(len(x), -1)
    got = qrt_decode(fmt, blocks)
    ok = same_bits(got, x).all()
    detail = "" if ok else f"first mismatch at element {np.argwhere(~same_bits(got, x))[0].tolist()}"
    record(f"{fmt} element order (gguf quantizer, known pattern)", ok, detail)


def cases_tq1_0(fmt="tq1_0"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))
    blocks = finite_d(random_blocks(fmt, 5), 52)
    allbytes = np.arange(256, dtype=np.uint8)  # every byte value, 243..255 (past 3^5) included
    for i, b in enumerate(blocks):
        b[0:52] = np.roll(allbytes, 52 * i)[:52]
    check_vs_gguf(fmt, "every byte value in every slot kind", blocks)
    check_ternary_order(fmt, T.TQ1_0)


def cases_tq2_0(fmt="tq2_0"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 256))
    check_vs_gguf(fmt, "special d", with_special_d(fmt))
    blocks = finite_d(random_blocks(fmt, 2), 64)
    blocks[0, 0:64] = 0xFF  # code 3 -> +2, outside the ternary range but decodable
    blocks[1, 0:64] = 0x00
    check_vs_gguf(fmt, "code extremes", blocks)
    check_ternary_order(fmt, T.TQ2_0)


def cases_mxfp4(fmt="mxfp4_ggml"):
    check_vs_gguf(fmt, "random bytes", random_blocks(fmt, 1024))
    exps = [0, 1, 2, 3, 126, 127, 128, 129, 253, 254, 255]
    blocks = random_blocks(fmt, len(exps) * 4)
    blocks[:, 0] = np.repeat(exps, 4)
    for i, b in enumerate(blocks):
        b[1:17] = (np.arange(16) + i) % 16 | (((15 - np.arange(16)) + i) % 16 << 4)
    check_vs_gguf(fmt, "exponent extremes (subnormal, 0xFF) and every code", blocks)


CASES = {
    "iq1_s": cases_iq1_s, "iq1_m": cases_iq1_m, "iq2_xxs": cases_iq2_xxs, "iq2_xs": cases_iq2_xs,
    "iq2_s": cases_iq2_s, "iq3_xxs": cases_iq3_xxs, "iq3_s": cases_iq3_s, "iq4_nl": cases_iq4_nl,
    "iq4_xs": cases_iq4_xs, "tq1_0": cases_tq1_0, "tq2_0": cases_tq2_0, "mxfp4_ggml": cases_mxfp4,
}


def main():
    global TOOL
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        print(__doc__)
        return 2
    TOOL = sys.argv[1]
    print(f"seed {SEED} (set QRT_TEST_SEED={SEED} to replay)")
    for fmt, fn in CASES.items():
        try:
            fn()
        except Exception as e:  # a crash in one format's cases is a failure of that format, not of the run
            record(f"{fmt} (cases aborted)", False, f"{type(e).__name__}: {e}")
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    with np.errstate(all="ignore"):  # inf/NaN scales are part of the cases
        sys.exit(main())
