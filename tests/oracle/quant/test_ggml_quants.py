#!/usr/bin/env python3
"""qrt's GGML block formats against gguf-py (gguf.quants), a reference we did not write.

For every format `qrt_quant_oracle list` reports with a GGML type id that gguf-py can dequantize:
  * block geometry (elements, bytes) must equal gguf.constants.GGML_QUANT_SIZES;
  * decode of random blocks (random bytes, scale fields forced to finite values) and of edge cases (all-zero
    scales, negative-zero scales, subnormal scales, largest finite scales, maximal and minimal codes) must equal
    gguf.quants.dequantize: bit for bit where both sides evaluate the same float32 expression, within 1 ulp where
    they do not (the DECODE_TOLERANCE table says which; formats not in it are held to bit-exactness);
and for every such format where both qrt and gguf-py have a reference quantizer (unless QUANTIZE_SKIP names it),
quantizing Gaussian data (plus tiny, huge, constant, sparse and integer-valued blocks) must give identical bytes.

Formats gguf-py cannot handle are reported as skipped, by name. Prints a closing "N passed, M failed, K skipped"
line; exits 1 on any mismatch, 77 when numpy or gguf cannot be imported.

usage: test_ggml_quants.py QRT_QUANT_ORACLE [--seed N]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    import gguf
    from gguf import quants as gguf_quants
    from gguf.constants import GGML_QUANT_SIZES
except ImportError as e:  # the oracle is unavailable here: skipped, not passed
    print(f"skipped: cannot import the oracle ({e})")
    sys.exit(77)

# Byte offsets of the scale fields inside one block, per GGML type id, as (offset, "f16" | "f32"). Random blocks get
# these forced finite (a NaN scale would only test NaN propagation) and the edge cases set them to special values.
# Types without an entry get pure random bytes (the comparison then treats NaN == NaN).
SCALE_FIELDS = {
    2: [(0, "f16")],                 # Q4_0: d
    3: [(0, "f16"), (2, "f16")],     # Q4_1: d, m
    6: [(0, "f16")],                 # Q5_0: d
    7: [(0, "f16"), (2, "f16")],     # Q5_1: d, m
    8: [(0, "f16")],                 # Q8_0: d
    9: [(0, "f16"), (2, "f16")],     # Q8_1: d, s
    10: [(80, "f16"), (82, "f16")],  # Q2_K: d, dmin
    11: [(108, "f16")],              # Q3_K: d
    12: [(0, "f16"), (2, "f16")],    # Q4_K: d, dmin
    13: [(0, "f16"), (2, "f16")],    # Q5_K: d, dmin
    14: [(208, "f16")],              # Q6_K: d
    15: [(0, "f32")],                # Q8_K: d
    16: [(0, "f16")], 17: [(0, "f16")], 18: [(0, "f16")], 19: [(0, "f16")],  # IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S
    20: [(0, "f16")], 21: [(0, "f16")], 22: [(0, "f16")], 23: [(0, "f16")],  # IQ4_NL, IQ3_S, IQ2_S, IQ4_XS
    34: [(52, "f16")],               # TQ1_0: d after qs[48], qh[4]
    35: [(64, "f16")],               # TQ2_0: d after qs[64]
}

# How closely qrt's decode must match gguf-py's, per GGML type id: "exact" (bit for bit: both compute the same
# float32 expression in the same order) or "ulp1" (within one unit in the last place). Unlisted types: "exact".
DECODE_TOLERANCE = {
    0: "exact",   # F32: a copy
    1: "exact",   # F16: exact widening
    30: "exact",  # BF16: exact widening
    2: "exact",   # Q4_0: d * (q - 8)
    3: "exact",   # Q4_1: (d * q) + m, no fused multiply-add on the CPU path
    6: "exact",   # Q5_0: d * (q - 16)
    7: "exact",   # Q5_1: (d * q) + m
    8: "exact",   # Q8_0: d * q
    10: "exact",  # Q2_K: (d * sc) * q - (dmin * m)
    11: "exact",  # Q3_K: (d * sc) * q
    12: "exact",  # Q4_K: (d * sc) * q - (dmin * m)
    13: "exact",  # Q5_K: same with the fifth bit
    14: "exact",  # Q6_K: (d * sc) * q
}

# Formats whose gguf-py quantizer is known not to follow ggml's reference algorithm: ggml type id -> reason.
QUANTIZE_SKIP = {}

# Block sizes where gguf-py's GGML_QUANT_SIZES is known to disagree with ggml itself: ggml type id -> (gguf-py's
# (elements, bytes), reason). Any other disagreement fails.
KNOWN_SIZE_DIFFERENCES = {
    9: ((32, 40), "gguf-py's GGML_QUANT_SIZES still lists Q8_1 with f32 d and s (40 bytes); ggml's block_q8_1 "
                  "holds two f16 halves (36 bytes, spec/ggml.md §2.1), and gguf-py has no Q8_1 codec to compare"),
}

RANDOM_BLOCKS = 512
EDGE_BLOCKS = 16  # per edge case
MAX_REPORTED = 8  # mismatches printed per check


def fail_usage(msg):
    print(f"test_ggml_quants: {msg}", file=sys.stderr)
    sys.exit(2)


class Oracle:
    def __init__(self, tool, workdir):
        self.tool = tool
        self.workdir = workdir

    def run(self, *args):
        return subprocess.run([self.tool, *map(str, args)], capture_output=True, text=True)

    def formats(self):
        r = self.run("list")
        if r.returncode != 0:
            fail_usage(f"'{self.tool} list' failed: {r.stderr.strip()}")
        out = []
        for line in r.stdout.splitlines():
            name, ggml_type, elems, nbytes, has_q = line.split()
            out.append((name, int(ggml_type), int(elems), int(nbytes), has_q == "1"))
        return out

    def dequant(self, name, rows, cols, data):
        src = os.path.join(self.workdir, f"{name}.bin")
        dst = os.path.join(self.workdir, f"{name}.f32")
        data.tofile(src)
        r = self.run("dequant", name, rows, cols, src, dst)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return np.fromfile(dst, dtype=np.float32).reshape(rows, cols), None

    def quantize(self, name, x):
        src = os.path.join(self.workdir, f"{name}.in.f32")
        dst = os.path.join(self.workdir, f"{name}.out.bin")
        np.ascontiguousarray(x, dtype=np.float32).tofile(src)
        r = self.run("quantize", name, x.shape[0], x.shape[1], src, dst)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return np.fromfile(dst, dtype=np.uint8), None


# ---------------------------------------------------------------------------------------------------- scale fields
def _field_view(blocks, offset, kind):
    """The scale field at `offset` of every block as a 1-D copy of uint16/uint32 values."""
    width = 2 if kind == "f16" else 4
    raw = np.ascontiguousarray(blocks[:, offset:offset + width])
    return raw.view(np.uint16 if kind == "f16" else np.uint32).reshape(-1)


def _store_field(blocks, offset, kind, values):
    width = 2 if kind == "f16" else 4
    dtype = np.dtype("<u2") if kind == "f16" else np.dtype("<u4")
    blocks[:, offset:offset + width] = np.asarray(values, dtype=dtype).view(np.uint8).reshape(-1, width)


def force_finite(blocks, fields):
    for offset, kind in fields:
        v = _field_view(blocks, offset, kind)
        if kind == "f16":
            inf_nan = ((v >> 10) & 0x1F) == 0x1F
            v = np.where(inf_nan, v ^ 0x4000, v)  # exponent 31 -> 15
        else:
            inf_nan = ((v >> 23) & 0xFF) == 0xFF
            v = np.where(inf_nan, v ^ 0x40000000, v)  # exponent 255 -> 127
        _store_field(blocks, offset, kind, v)


def special_scales(rng, n, kind, case):
    """n scale bit patterns of one edge case."""
    if kind == "f16":
        sign, mant_bits, max_finite = 0x8000, 0x3FF, 0x7BFF
        dtype = np.uint16
    else:
        sign, mant_bits, max_finite = 0x80000000, 0x7FFFFF, 0x7F7FFFFF
        dtype = np.uint32
    signs = rng.integers(0, 2, n).astype(np.uint64) * sign
    if case == "zero_scales":
        v = np.zeros(n, np.uint64)
    elif case == "negative_zero_scales":
        v = np.full(n, sign, np.uint64)
    elif case == "subnormal_scales":
        v = rng.integers(1, mant_bits + 1, n).astype(np.uint64) | signs
    elif case == "largest_scales":
        v = np.full(n, max_finite, np.uint64) | signs
    else:
        raise ValueError(case)
    return v.astype(dtype)


def make_blocks(rng, ggml_type, block_bytes):
    """Random blocks plus edge cases: returns (blocks [n, block_bytes] uint8, labels [n])."""
    fields = SCALE_FIELDS.get(ggml_type, [])
    scale_bytes = np.zeros(block_bytes, bool)
    for offset, kind in fields:
        scale_bytes[offset:offset + (2 if kind == "f16" else 4)] = True
    parts, labels = [], []

    def add(blocks, label):
        parts.append(blocks)
        labels.extend([label] * len(blocks))

    def random_blocks(n):
        b = rng.integers(0, 256, (n, block_bytes), dtype=np.uint8)
        force_finite(b, fields)
        return b

    add(random_blocks(RANDOM_BLOCKS), "random")
    if fields:
        for case in ("zero_scales", "negative_zero_scales", "subnormal_scales", "largest_scales"):
            b = random_blocks(EDGE_BLOCKS)
            for offset, kind in fields:
                _store_field(b, offset, kind, special_scales(rng, EDGE_BLOCKS, kind, case))
            add(b, case)
    for case, code in (("maximal_codes", 0xFF), ("minimal_codes", 0x00)):
        b = random_blocks(EDGE_BLOCKS)
        b[:, ~scale_bytes] = code
        add(b, case)
    if fields:
        b = random_blocks(EDGE_BLOCKS)
        b[:, ~scale_bytes] = 0xFF
        for offset, kind in fields:
            _store_field(b, offset, kind, special_scales(rng, EDGE_BLOCKS, kind, "subnormal_scales"))
        add(b, "maximal_codes_subnormal_scales")
    return np.concatenate(parts), labels


# ------------------------------------------------------------------------------------------------------ comparison
def ordered_bits(f):
    """float32 -> int64 keys whose difference counts ulps (+0 and -0 share a key)."""
    b = f.view(np.uint32).astype(np.int64)
    mag = b & 0x7FFFFFFF
    return np.where(b & 0x80000000, -mag, mag)


def mismatches(ours, ref, tolerance):
    ours = ours.reshape(-1)
    ref = ref.reshape(-1)
    same = ours.view(np.uint32) == ref.view(np.uint32)
    both_nan = np.isnan(ours) & np.isnan(ref)
    ok = same | both_nan
    if tolerance == "ulp1":
        finite = np.isfinite(ours) & np.isfinite(ref)
        close = np.abs(ordered_bits(ours) - ordered_bits(ref)) <= 1
        ok |= finite & close
    return np.flatnonzero(~ok)


def gguf_type(ggml_type):
    try:
        return gguf.GGMLQuantizationType(ggml_type)
    except ValueError:
        return None


def gguf_can_dequantize(qtype, block_bytes):
    try:
        gguf_quants.dequantize(np.zeros((1, block_bytes), np.uint8), qtype)
        return True
    except NotImplementedError:
        return False


def gguf_can_quantize(qtype, block_elems):
    try:
        gguf_quants.quantize(np.ones((1, block_elems), np.float32), qtype)
        return True
    except NotImplementedError:
        return False


def check_decode(oracle, rng, name, ggml_type, elems, nbytes, qtype):
    tolerance = DECODE_TOLERANCE.get(ggml_type, "exact")
    blocks, labels = make_blocks(rng, ggml_type, nbytes)
    per_row = 4 if elems > 1 else 64  # several blocks per row, so row strides are exercised
    pad = (-len(blocks)) % per_row
    if pad:
        extra = rng.integers(0, 256, (pad, nbytes), dtype=np.uint8)
        force_finite(extra, SCALE_FIELDS.get(ggml_type, []))
        blocks = np.concatenate([blocks, extra])
        labels += ["random"] * pad
    rows, cols = len(blocks) // per_row, per_row * elems
    data = blocks.reshape(rows, per_row * nbytes)
    ours, err = oracle.dequant(name, rows, cols, data)
    if ours is None:
        return [f"{name}: qrt_quant_oracle dequant failed: {err}"]
    with np.errstate(all="ignore"):
        ref = np.asarray(gguf_quants.dequantize(data, qtype), dtype=np.float32).reshape(rows, cols)
    bad = mismatches(ours, ref, tolerance)
    msgs = []
    for idx in bad[:MAX_REPORTED]:
        blk, elem = divmod(int(idx), elems)
        o, r = ours.reshape(-1)[idx], ref.reshape(-1)[idx]
        msgs.append(f"{name}: decode mismatch ({tolerance}) in block {blk} ({labels[blk]}), element {elem}: "
                    f"qrt {o!r} (0x{o.view(np.uint32):08x}) vs gguf-py {r!r} (0x{r.view(np.uint32):08x}); "
                    f"block bytes {blocks[blk].tobytes().hex()}")
    if len(bad) > MAX_REPORTED:
        msgs.append(f"{name}: ... {len(bad)} mismatching elements in all")
    if not msgs:
        print(f"ok   {name}: decode of {len(blocks)} blocks matches gguf-py ({tolerance})")
    return msgs


def quantize_inputs(rng, elems):
    """[rows, cols] float32 with one kind of data per row group; returns (x, row labels)."""
    per_row = 32 if elems > 1 else 256
    cols = per_row * max(elems, 1)
    n_blocks = cols // max(elems, 1)

    def gaussian(scale=1.0):
        return (rng.standard_normal(cols) * scale).astype(np.float32)

    rows, labels = [], []
    for _ in range(8):
        rows.append(gaussian()); labels.append("gaussian")
    for scale, label in ((1e-6, "tiny (f16 subnormal scales)"), (1e-9, "tinier (scales round to zero in f16)"),
                         (1e3, "large"), (1e6, "huge (f16 scales overflow)")):
        rows.append(gaussian(scale)); labels.append(label)
    # Blocks that are all zeros, constant, or a single non-zero value.
    blocks = gaussian().reshape(n_blocks, -1)
    blocks[0::3] = 0.0
    blocks[1::3] = rng.standard_normal((len(blocks[1::3]), 1)).astype(np.float32)
    rows.append(blocks.reshape(-1)); labels.append("zero / constant blocks")
    sparse = np.zeros((n_blocks, max(elems, 1)), np.float32)
    sparse[np.arange(n_blocks), rng.integers(0, max(elems, 1), n_blocks)] = rng.standard_normal(n_blocks)
    rows.append(sparse.reshape(-1)); labels.append("one non-zero per block")
    # Integer values put many x/d products on exact .5 ties.
    rows.append(rng.integers(-16, 17, cols).astype(np.float32)); labels.append("integers (rounding ties)")
    rows.append(rng.uniform(-1, 1, cols).astype(np.float32)); labels.append("uniform")
    x = np.stack(rows)
    x[x == 0] = 0.0  # only +0: which of two equal zeros a max() scan keeps is unspecified in numpy
    return x, labels


def check_quantize(oracle, rng, name, ggml_type, elems, nbytes, qtype):
    x, labels = quantize_inputs(rng, elems)
    ours, err = oracle.quantize(name, x)
    if ours is None:
        return [f"{name}: qrt_quant_oracle quantize failed: {err}"]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = np.ascontiguousarray(gguf_quants.quantize(x, qtype)).view(np.uint8).reshape(-1)
    if ours.size != ref.size:
        return [f"{name}: quantized size {ours.size} bytes, gguf-py {ref.size}"]
    bad = np.flatnonzero(ours != ref)
    blocks_per_row = x.shape[1] // elems
    msgs = []
    for idx in bad[:MAX_REPORTED]:
        blk, off = divmod(int(idx), nbytes)
        row = blk // blocks_per_row
        msgs.append(f"{name}: quantize mismatch in block {blk} (row {row}: {labels[row]}), byte {off}: "
                    f"qrt 0x{ours[idx]:02x} vs gguf-py 0x{ref[idx]:02x}")
    if len(bad) > MAX_REPORTED:
        msgs.append(f"{name}: ... {len(bad)} mismatching bytes in all")
    if not msgs:
        print(f"ok   {name}: quantizer bytes match gguf-py ({x.size // elems} blocks)")
    return msgs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if not os.access(args.tool, os.X_OK):
        fail_usage(f"{args.tool} is not an executable")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed} (rerun with --seed {seed})")
    rng = np.random.default_rng(seed)

    passed = failed = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        oracle = Oracle(args.tool, tmp)
        for name, ggml_type, elems, nbytes, has_quantizer in oracle.formats():
            if ggml_type < 0:
                continue
            qtype = gguf_type(ggml_type)
            if qtype is None:
                print(f"skip {name}: gguf {gguf.__version__} does not know GGML type {ggml_type}")
                skipped += 1
                continue
            known = KNOWN_SIZE_DIFFERENCES.get(ggml_type)
            if known is not None and GGML_QUANT_SIZES.get(qtype) == known[0]:
                print(f"skip {name}: {known[1]}")
                skipped += 1
                continue
            if GGML_QUANT_SIZES.get(qtype) != (elems, nbytes):
                print(f"FAIL {name}: block ({elems} elements, {nbytes} bytes) but gguf-py says "
                      f"{GGML_QUANT_SIZES.get(qtype)}")
                failed += 1
                continue
            if gguf_can_dequantize(qtype, nbytes):
                msgs = check_decode(oracle, rng, name, ggml_type, elems, nbytes, qtype)
                for m in msgs:
                    print(f"FAIL {m}")
                failed += bool(msgs)
                passed += not msgs
            else:
                print(f"skip {name}: gguf-py has no dequantizer for {qtype.name}")
                skipped += 1
            if not has_quantizer:
                continue
            if ggml_type in QUANTIZE_SKIP:
                print(f"skip {name} quantizer: {QUANTIZE_SKIP[ggml_type]}")
                skipped += 1
            elif gguf_can_quantize(qtype, elems):
                msgs = check_quantize(oracle, rng, name, ggml_type, elems, nbytes, qtype)
                for m in msgs:
                    print(f"FAIL {m}")
                failed += bool(msgs)
                passed += not msgs
            else:
                print(f"skip {name} quantizer: gguf-py has no quantizer for {qtype.name}")
                skipped += 1

    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
