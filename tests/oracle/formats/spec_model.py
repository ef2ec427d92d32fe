"""An independent numpy model of the non-GGML quantization formats, written from the spec text
(spec/uqff.md §3.2–3.8, spec/ollama.md §2.5–2.6 and §3), not from qrt's C++.

Decoders take the raw parts (bytes) and return float32 [rows, cols]. Quantizers return the parts as bytes.
Arithmetic that the specs define in float32 is done in float32, in the order the spec (or MLX, where the spec
defers to it) gives, so results can be compared bit for bit. Where the C++ uses bit tricks, this model uses
tables and searches instead, so the two share no code path.
"""
import numpy as np

F32 = np.float32

# ---------------------------------------------------------------------------------------------------------------
# Small floats, from their bit definitions.


def e2m1_from_bits(code):
    """E2M1: sign = bit 3, exponent = bits 2..1 (bias 1), mantissa = bit 0; exponent 0 is subnormal m·2^-1."""
    s, e, m = (code >> 3) & 1, (code >> 1) & 3, code & 1
    mag = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
    return -mag if s else mag


def e4m3_from_bits(b):
    """E4M3FN: sign = bit 7, exponent = bits 6..3 (bias 7), mantissa = bits 2..0; e = 0 subnormal m/8·2^-6;
    S.1111.111 is NaN; no infinities."""
    s, e, m = (b >> 7) & 1, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    mag = m / 8 * 2.0 ** -6 if e == 0 else 2.0 ** (e - 7) * (1 + m / 8)
    return -mag if s else mag


def e8m0_from_bits(s):
    """E8M0: 2^(s-127); 255 is NaN."""
    return float("nan") if s == 255 else 2.0 ** (s - 127)


E2M1 = np.array([e2m1_from_bits(c) for c in range(16)], dtype=F32)
E4M3 = np.array([e4m3_from_bits(b) for b in range(256)], dtype=F32)
E8M0 = np.array([e8m0_from_bits(s) for s in range(256)], dtype=F32)

# The value list printed in spec/uqff.md §3.3, as a cross-check of the bit definition above.
E2M1_SPEC_LIST = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def _nearest_even(a, mags):
    """Index of the value in `mags` (ascending, non-negative) nearest to each a >= 0; ties go to the even index
    (= even code, since index = code for these tables). Values beyond the last saturate to it."""
    a = a.astype(np.float64)
    m = mags.astype(np.float64)
    hi = np.clip(np.searchsorted(m, a, side="left"), 0, len(m) - 1)
    lo = np.clip(hi - 1, 0, len(m) - 1)
    d_lo, d_hi = np.abs(a - m[lo]), np.abs(m[hi] - a)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return np.where(a >= m[-1], len(m) - 1, np.where(pick_hi, hi, lo))


def encode_e2m1(x):
    """Round to nearest even, saturating at ±6; the sign bit of x is kept (small negatives give -0 = code 8)."""
    x = np.asarray(x, dtype=F32)
    code = _nearest_even(np.abs(x), E2M1[:8]).astype(np.uint8)
    code = np.where(np.signbit(x), code | 8, code)
    return np.where(np.isnan(x), 0, code).astype(np.uint8)


def encode_e4m3(x):
    """Round to nearest even, saturating at ±448 (codes 0x00..0x7E); NaN gives 0x7F."""
    x = np.asarray(x, dtype=F32)
    code = _nearest_even(np.abs(x), E4M3[:0x7F]).astype(np.uint8)
    code = np.where(np.signbit(x), code | 0x80, code)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)


def encode_e8m0_round_up(x):
    """Smallest E8M0 (bytes 0..254) whose value is >= x, capped at 254; NaN gives 255."""
    x = np.asarray(x, dtype=F32)
    s = np.minimum(np.searchsorted(E8M0[:255].astype(np.float64), x.astype(np.float64), side="left"), 254)
    return np.where(np.isnan(x), 255, s).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# Scale dtypes.

SCALE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


def load_floats(raw, dtype):
    raw = bytes(raw)
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(F32)
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(F32)
    if dtype == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(F32)
    raise ValueError(dtype)


def to_bf16_bits(v):
    """float32 -> bfloat16 bits, round to nearest even (finite inputs)."""
    u = np.asarray(v, dtype=F32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def store_floats(v, dtype):
    v = np.asarray(v, dtype=F32)
    if dtype == "F32":
        return v.astype("<f4").tobytes()
    if dtype == "F16":
        return v.astype("<f2").tobytes()
    return to_bf16_bits(v).tobytes()


def round_to(v, dtype):
    return load_floats(store_floats(v, dtype), dtype).reshape(np.shape(v))


def round_half_away(v):
    """Round half away from zero, exactly (float64 holds every float32 + 0.5)."""
    v = np.asarray(v, dtype=np.float64)
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


# ---------------------------------------------------------------------------------------------------------------
# Part sizes in bytes (data, scales, biases), from the shapes in the specs.


def part_sizes(fmt, rows, cols, group=0, scale_type="F32"):
    n = rows * cols
    sb = SCALE_BYTES[scale_type]
    if fmt.startswith("afq"):
        bits = int(fmt[3:])
        return n * bits // 8, rows * (cols // group) * sb, rows * (cols // group) * sb
    if fmt == "mxfp4":
        return n // 2, n // 32, 0
    if fmt == "mxfp8":
        return n, n // 32, 0
    if fmt == "nvfp4":
        return n // 2, n // 16, 0
    if fmt == "fp8":
        return n, 0, 0
    if fmt == "fp8_block":
        return n, -(-rows // 128) * -(-cols // 128) * sb, 0
    if fmt == "f8q8":
        return 33 * -(-n // 32), 0, 0
    if fmt in ("hqq4", "hqq8"):
        bits = int(fmt[3:])
        g = group or 64
        return n * bits // 8, n // g * sb, n // g * sb
    raise ValueError(fmt)


# ---------------------------------------------------------------------------------------------------------------
# Decoders. data/scales/biases are bytes; the result is float32 [rows, cols].


def afq_codes(data, rows, cols, bits):
    """Per row a little-endian bit stream: element j = stream bits [j·bits, (j+1)·bits), bit 0 = LSB of byte 0."""
    d = np.frombuffer(bytes(data), dtype=np.uint8).reshape(rows, cols * bits // 8)
    stream = np.unpackbits(d, axis=1, bitorder="little").reshape(rows, cols, bits).astype(np.uint32)
    return (stream << np.arange(bits, dtype=np.uint32)).sum(axis=2, dtype=np.uint32)


def afq_pack(codes, bits):
    rows, cols = codes.shape
    stream = ((codes[:, :, None].astype(np.uint32) >> np.arange(bits, dtype=np.uint32)) & 1).astype(np.uint8)
    return np.packbits(stream.reshape(rows, cols * bits), axis=1, bitorder="little").tobytes()


def dequant_afq(bits, data, scales, biases, rows, cols, group, scale_type):
    q = afq_codes(data, rows, cols, bits).astype(F32)
    s = np.repeat(load_floats(scales, scale_type).reshape(rows, cols // group), group, axis=1)
    b = np.repeat(load_floats(biases, scale_type).reshape(rows, cols // group), group, axis=1)
    return q * s + b


def fp4_codes(data, rows, cols):
    """Two E2M1 codes per byte, even element in the low nibble."""
    d = np.frombuffer(bytes(data), dtype=np.uint8).reshape(rows, cols // 2)
    return np.stack([d & 0xF, d >> 4], axis=2).reshape(rows, cols)


def dequant_mxfp4(data, scales, rows, cols):
    s = np.repeat(E8M0[np.frombuffer(bytes(scales), np.uint8)].reshape(rows, cols // 32), 32, axis=1)
    return E2M1[fp4_codes(data, rows, cols)] * s


def dequant_mxfp8(data, scales, rows, cols):
    s = np.repeat(E8M0[np.frombuffer(bytes(scales), np.uint8)].reshape(rows, cols // 32), 32, axis=1)
    return E4M3[np.frombuffer(bytes(data), np.uint8).reshape(rows, cols)] * s


def dequant_nvfp4(data, scales, rows, cols, global_scale):
    # E2M1 · (E4M3 scale · global): the block scale is folded first, as MLX's fp_dequantize does.
    block = E4M3[np.frombuffer(bytes(scales), np.uint8)].reshape(rows, cols // 16) * F32(global_scale)
    return E2M1[fp4_codes(data, rows, cols)] * np.repeat(block, 16, axis=1)


def dequant_fp8(data, rows, cols, global_scale):
    return E4M3[np.frombuffer(bytes(data), np.uint8).reshape(rows, cols)] * F32(global_scale)


def dequant_fp8_block(data, scales, rows, cols, scale_type):
    tr, tc = -(-rows // 128), -(-cols // 128)
    s = load_floats(scales, scale_type).reshape(tr, tc)
    s_full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:rows, :cols]
    return E4M3[np.frombuffer(bytes(data), np.uint8).reshape(rows, cols)] * s_full


def dequant_f8q8(data, rows, cols):
    blocks = np.frombuffer(bytes(data), np.uint8).reshape(-1, 33)
    d = E4M3[blocks[:, 0]] / F32(448)
    qs = blocks[:, 1:].view(np.int8).astype(F32)
    return (qs * d[:, None]).reshape(-1)[: rows * cols].reshape(rows, cols)


def hqq_codes(data, bits, n, g):
    """Codes as the [g, n/g] matrix M of spec/uqff.md §3.4."""
    d = np.frombuffer(bytes(data), np.uint8)
    if bits == 8:
        return d.reshape(g, n // g)
    w = d.reshape(g // 2, n // g)
    return np.concatenate([w >> 4, w & 0xF], axis=0)  # first half in the high nibbles


def dequant_hqq(bits, data, scales, zeros, rows, cols, group, scale_type):
    n, g = rows * cols, group or 64
    q = hqq_codes(data, bits, n, g).astype(F32)
    s = load_floats(scales, scale_type)
    z = load_floats(zeros, scale_type)
    return ((q - z[None, :]) * s[None, :]).reshape(rows, cols)


def dequantize(fmt, parts, rows, cols, group=0, scale_type="F32", global_scale=1.0):
    data, scales, biases = parts
    if fmt.startswith("afq"):
        return dequant_afq(int(fmt[3:]), data, scales, biases, rows, cols, group, scale_type)
    if fmt == "mxfp4":
        return dequant_mxfp4(data, scales, rows, cols)
    if fmt == "mxfp8":
        return dequant_mxfp8(data, scales, rows, cols)
    if fmt == "nvfp4":
        return dequant_nvfp4(data, scales, rows, cols, global_scale)
    if fmt == "fp8":
        return dequant_fp8(data, rows, cols, global_scale)
    if fmt == "fp8_block":
        return dequant_fp8_block(data, scales, rows, cols, scale_type)
    if fmt == "f8q8":
        return dequant_f8q8(data, rows, cols)
    if fmt in ("hqq4", "hqq8"):
        return dequant_hqq(int(fmt[3:]), data, scales, biases, rows, cols, group, scale_type)
    raise ValueError(fmt)


# ---------------------------------------------------------------------------------------------------------------
# Quantizers, as the specs describe the writers. x: float32 [rows, cols]. Returns (data, scales, biases) bytes.


def quant_afq(bits, x, group, scale_type):
    """MLX affine_quantize, GPU variant (spec/ollama.md §3.1, spec/uqff.md §3.2 "Metal path")."""
    rows, cols = x.shape
    w = x.reshape(rows, cols // group, group).astype(F32)
    n_bins = F32(2**bits - 1)
    w_min = w.min(axis=2)
    w_max = np.maximum(w.max(axis=2), F32(0))  # the GPU kernels start the max at 0
    scale = np.maximum((w_max - w_min) / n_bins, F32(1e-7))
    side = np.abs(w_min) > np.abs(w_max)
    scale = np.where(side, scale, -scale).astype(F32)
    edge = np.where(side, w_min, w_max).astype(F32)
    q0 = round_half_away(edge / scale).astype(F32)
    at_zero = q0 == 0
    scale = np.where(at_zero, scale, edge / np.where(at_zero, F32(1), q0)).astype(F32)
    bias = np.where(at_zero, F32(0), edge).astype(F32)
    q = round_half_away((w - bias[..., None]) / scale[..., None])
    q = np.clip(q, 0, float(n_bins)).astype(np.uint32).reshape(rows, cols)
    return afq_pack(q, bits), store_floats(scale, scale_type), store_floats(bias, scale_type)


def _fp_blocks(x, block):
    return np.asarray(x, dtype=F32).reshape(-1, block)


def quant_mx(elem, x):
    """MLX fp_quantize, MX modes (group 32, E8M0 scale): scale = smallest power of two >= amax/M (current MLX
    rounds up; spec/ollama.md §3.3 describes round(log2), see the report), element = RNE(w / scale)."""
    w = _fp_blocks(x, 32)
    amax = np.abs(w).max(axis=1)
    m = F32(6) if elem == "e2m1" else F32(448)
    s = encode_e8m0_round_up(amax / m)
    dec = E8M0[s]
    mult = np.where(dec == 0, F32(0), F32(1) / dec).astype(F32)
    y = w * mult[:, None]
    if elem == "e2m1":
        c = encode_e2m1(y).reshape(-1, 2)
        data = (c[:, 0] | (c[:, 1] << 4)).astype(np.uint8)
    else:
        data = encode_e4m3(y)
    return data.tobytes(), s.tobytes(), b""


def quant_nvfp4(x, global_scale):
    """MLX fp_quantize, nvfp4 (group 16, E4M3 scale) with the stored dequant multiplier G = global_scale:
    scale byte = E4M3(amax/6 · (1/G)), element = RNE(w · (1/G)/decoded)."""
    w = _fp_blocks(x, 16)
    enc = F32(1) / F32(global_scale)
    amax = np.abs(w).max(axis=1)
    s = encode_e4m3(amax / F32(6) * enc)
    dec = E4M3[s]
    mult = np.where(dec == 0, F32(0), enc / np.where(dec == 0, F32(1), dec)).astype(F32)
    c = encode_e2m1(w * mult[:, None]).reshape(-1, 2)
    return (c[:, 0] | (c[:, 1] << 4)).astype(np.uint8).tobytes(), s.tobytes(), b""


def quant_fp8(x, global_scale):
    return encode_e4m3(np.asarray(x, F32) * (F32(1) / F32(global_scale))).tobytes(), b"", b""


def quant_fp8_block(x, scale_type):
    rows, cols = x.shape
    tr, tc = -(-rows // 128), -(-cols // 128)
    scales = np.zeros((tr, tc), dtype=F32)
    codes = np.zeros((rows, cols), dtype=np.uint8)
    for i in range(tr):
        for j in range(tc):
            t = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].astype(F32)
            amax = np.abs(t).max()
            s = round_to(np.array([amax / F32(448) if amax > 0 else F32(1)], F32), scale_type)[0]
            if not s > 0:
                s = F32(1)
            scales[i, j] = s
            codes[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = encode_e4m3(t / s)
    return codes.tobytes(), store_floats(scales, scale_type), b""


def quant_f8q8(x):
    """spec/uqff.md §3.6 writer: dq = amax/127, d = fp8(dq·448), qs = round_half_away(x/dq)."""
    flat = np.asarray(x, F32).reshape(-1)
    nb = -(-flat.size // 32)
    w = np.zeros(nb * 32, dtype=F32)
    w[: flat.size] = flat
    w = w.reshape(nb, 32)
    dq = np.abs(w).max(axis=1) / F32(127)
    d = encode_e4m3(dq * F32(448))
    with np.errstate(divide="ignore", invalid="ignore"):
        qs = np.where(dq[:, None] != 0, round_half_away(w / dq[:, None]), 0)
    qs = np.clip(qs, -127, 127).astype(np.int8)
    out = np.concatenate([d[:, None], qs.view(np.uint8)], axis=1)
    return out.tobytes(), b"", b""


def quant_hqq(bits, x, group, scale_type):
    """HQQ's initial min/max scale and zero (no proximal optimizer): s = (2^b−1)/(max−min) capped at 2e4,
    z = −min·s, q = clip(round_half_even(w·s + z)); stored scale = 1/s, zero = z."""
    g = group or 64
    n = x.size
    m = np.asarray(x, F32).reshape(g, n // g)
    mn, mx = m.min(axis=0), m.max(axis=0)
    maxc = F32(2**bits - 1)
    with np.errstate(divide="ignore"):
        s = np.minimum(maxc / (mx - mn), F32(2e4)).astype(F32)
    z = (-mn * s).astype(F32)
    q = np.clip(np.rint(m * s[None, :] + z[None, :]), 0, float(maxc)).astype(np.uint8)
    if bits == 4:
        q = ((q[: g // 2] << 4) | q[g // 2:]).astype(np.uint8)
    return q.tobytes(), store_floats(F32(1) / s, scale_type), store_floats(z, scale_type)


def quantize(fmt, x, group=0, scale_type="F32", global_scale=1.0):
    if fmt.startswith("afq"):
        return quant_afq(int(fmt[3:]), x, group, scale_type)
    if fmt == "mxfp4":
        return quant_mx("e2m1", x)
    if fmt == "mxfp8":
        return quant_mx("e4m3", x)
    if fmt == "nvfp4":
        return quant_nvfp4(x, global_scale)
    if fmt == "fp8":
        return quant_fp8(x, global_scale)
    if fmt == "fp8_block":
        return quant_fp8_block(x, scale_type)
    if fmt == "f8q8":
        return quant_f8q8(x)
    if fmt in ("hqq4", "hqq8"):
        return quant_hqq(int(fmt[3:]), x, group, scale_type)
    raise ValueError(fmt)
