#!/usr/bin/env python3
"""qrt's non-GGML formats (AFQ, MXFP4, MXFP8, NVFP4, FP8, FP8-block, F8Q8, HQQ) against spec_model.py, an
independent numpy model of the specs.

    test_formats.py <path to qrt_format_oracle>

Checks, each on fresh random inputs (QRT_TEST_SEED replays a run; the seed is printed first):
  tables    qrt's E2M1 (16), E4M3FN (256) and E8M0 (256) decoders, exhaustively, against values computed from the
            bit definitions (and E2M1 against the value list printed in the spec); the E2M1/E4M3 round-to-nearest-
            even encoders and the E8M0 round-up used by the quantizers, on every float16 value, every midpoint
            between neighbouring codes and random floats.
  sizes     part sizes against the shapes in the specs, and rejection of illegal shapes and params.
  decode    qrt's dequantization of random parts (random bytes for codes, random valid scales) against the
            model, for several shapes, group sizes and scale dtypes. Bit-exact (NaN matches NaN), except AFQ's
            q·scale + bias, which a compiler may fuse: 2 float32 ulps of |q·scale| + |bias|.
  quantize  qrt's quantizer output against the model's quantizer, byte for byte, and decoded by the model
            against the input: the relative RMS error must stay under the format's bound.
  errors    wrong part sizes are refused.

Exit codes: 0 all passed, 1 a check failed, 2 usage or tool error, 77 numpy missing (skipped).
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # the oracle environment is absent: skip, saying why
    print(f"SKIP: {e} (install tests/oracle/requirements.txt)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_model as M  # noqa: E402

F32 = np.float32
SEED = int(os.environ.get("QRT_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
rng = np.random.default_rng(SEED)
TOOL = None
TMP = None
results = []  # (name, ok, detail)

# Relative RMS bounds for the quantizer test input (Gaussian plus a zero, a constant, a one-signed and an outlier
# group; quantize, then decode with the model). Loose: the bit-exact comparison with the model's quantizer is the
# sharp check; these catch a model and a C++ quantizer that agree on nonsense.
ERROR_BOUND = {
    "afq2": 0.55, "afq3": 0.28, "afq4": 0.14, "afq5": 0.07, "afq6": 0.035, "afq8": 0.011,
    "mxfp4": 0.16, "mxfp8": 0.035, "nvfp4": 0.125, "fp8": 0.035, "fp8_block": 0.035, "f8q8": 0.045,
    "hqq4": 0.12, "hqq8": 0.009,
}


def record(name, ok, detail=""):
    results.append((name, ok, detail))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run_tool(*args, expect_rc=0):
    p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        raise RuntimeError(f"qrt_format_oracle {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def path(name):
    return os.path.join(TMP, name)


def write(name, blob):
    with open(path(name), "wb") as f:
        f.write(bytes(blob))
    return path(name)


def read(name):
    with open(path(name), "rb") as f:
        return f.read()


def same_bits(a, b):
    """Bitwise equality of float32 arrays, any NaN matching any NaN."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | (a.view(np.uint32) == b.view(np.uint32))))


def first_bit_mismatch(a, b):
    a, b = np.asarray(a, F32).ravel(), np.asarray(b, F32).ravel()
    bad = ~((np.isnan(a) & np.isnan(b)) | (a.view(np.uint32) == b.view(np.uint32)))
    i = int(np.argmax(bad))
    return f"{int(bad.sum())} of {a.size} differ; first at {i}: qrt {a[i]!r} model {b[i]!r}"


# ---------------------------------------------------------------------------------------------------------------
# tables


def check_tables():
    run_tool("tables", path("tables.f32"))
    got = np.fromfile(path("tables.f32"), dtype="<f4")
    e2m1, e4m3, e8m0 = got[:16], got[16:272], got[272:]
    record("tables/e2m1 decode (16 codes)", same_bits(e2m1, M.E2M1), first_bit_mismatch(e2m1, M.E2M1))
    record("tables/e2m1 matches the spec's value list", same_bits(M.E2M1, np.array(M.E2M1_SPEC_LIST, F32)))
    record("tables/e4m3 decode (256 bytes)", same_bits(e4m3, M.E4M3), first_bit_mismatch(e4m3, M.E4M3))
    record("tables/e8m0 decode (256 bytes)", same_bits(e8m0, M.E8M0), first_bit_mismatch(e8m0, M.E8M0))
    # Spot facts stated in the specs.
    facts = [M.E4M3[0x7E] == 448, M.E4M3[0x01] == 2.0**-9, np.isnan(M.E4M3[0x7F]), np.isnan(M.E4M3[0xFF]),
             M.E8M0[127] == 1, M.E8M0[0] == 2.0**-127, np.isnan(M.E8M0[255]), np.signbit(M.E2M1[8])]
    record("tables/spec facts (E4M3 max 448, min 2^-9, NaNs; E8M0 bias 127; E2M1 -0)", all(facts))

    # Encoder inputs: every float16 value, midpoints of neighbouring codes (ties) and their float32 neighbours,
    # random floats over a wide range, and specials.
    f16_all = np.arange(65536, dtype=np.uint16).view(np.float16).astype(F32)
    f16_all = f16_all[np.isfinite(f16_all)]

    def around(v):
        v = np.asarray(v, F32)
        return np.concatenate([v, np.nextafter(v, F32(np.inf)), np.nextafter(v, F32(-np.inf))])

    pos4 = M.E2M1[:8].astype(np.float64)
    pos8 = M.E4M3[:0x7F].astype(np.float64)
    mids4 = ((pos4[1:] + pos4[:-1]) / 2).astype(F32)
    mids8 = ((pos8[1:] + pos8[:-1]) / 2).astype(F32)
    randoms = (rng.standard_normal(20000) * np.exp2(rng.uniform(-12, 10, 20000))).astype(F32)
    specials = np.array([0.0, -0.0, 448, 464, 465, 480, 1e6, -1e6, np.inf, -np.inf, np.nan, 6, 7, 1e-30], F32)
    for kind, mids, model in (("e2m1", mids4, M.encode_e2m1), ("e4m3", mids8, M.encode_e4m3)):
        x = np.concatenate([f16_all, around(mids), -around(mids), randoms, specials])
        write(f"enc_{kind}.f32", x.astype("<f4").tobytes())
        run_tool("encode", kind, path(f"enc_{kind}.f32"), path(f"enc_{kind}.u8"))
        got = np.frombuffer(read(f"enc_{kind}.u8"), np.uint8)
        want = model(x)
        bad = np.flatnonzero(got != want)
        record(f"tables/{kind} encoder, {x.size} values incl. every f16 and every tie",
               bad.size == 0, f"{bad.size} differ, e.g. x={x[bad[:3]]!r} qrt={got[bad[:3]]} model={want[bad[:3]]}")
    pows = np.exp2(np.arange(-140, 128, dtype=np.float64)).astype(F32)
    x = np.concatenate([np.abs(f16_all), around(pows[pows > 0]), np.abs(randoms), [0, np.inf, np.nan, 3e38]])
    x = x.astype(F32)
    write("enc_e8m0.f32", x.astype("<f4").tobytes())
    run_tool("encode", "e8m0_up", path("enc_e8m0.f32"), path("enc_e8m0.u8"))
    got = np.frombuffer(read("enc_e8m0.u8"), np.uint8)
    want = M.encode_e8m0_round_up(x)
    bad = np.flatnonzero(got != want)
    record(f"tables/e8m0 round-up, {x.size} values incl. every power of two ±1 ulp", bad.size == 0,
           f"{bad.size} differ, e.g. x={x[bad[:3]]!r} qrt={got[bad[:3]]} model={want[bad[:3]]}")


# ---------------------------------------------------------------------------------------------------------------
# sizes


SIZE_CASES = [
    # fmt, rows, cols, group, scale_type, global_scale
    *[(f"afq{b}", 3, 384, g, st, 1) for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128) for st in ("F16", "F32")],
    ("afq4", 2, 256, 64, "BF16", 1),
    ("mxfp4", 5, 96, 0, "F32", 1), ("mxfp8", 5, 96, 0, "F32", 1), ("nvfp4", 4, 48, 0, "F32", 1),
    ("fp8", 3, 7, 0, "F32", 0.5), ("fp8_block", 130, 257, 0, "F32", 1), ("fp8_block", 128, 128, 0, "BF16", 1),
    ("f8q8", 3, 45, 0, "F32", 1), ("f8q8", 2, 64, 0, "F32", 1),
    ("hqq4", 6, 40, 16, "F32", 1), ("hqq8", 6, 40, 16, "F16", 1), ("hqq4", 64, 172, 0, "F32", 1),
]

# Shapes or params the specs make illegal: the tool must exit 3 (check_params refused them).
REJECT_CASES = [
    ("afq4", 2, 96, 64, "F16", 1),     # cols not a multiple of the group
    ("afq4", 2, 256, 16, "F16", 1),    # group 16 is not an AFQ group size
    ("afq3", 2, 256, 256, "F16", 1),   # nor is 256
    ("afq8", 2, 256, 64, "I8", 1),     # scale dtype
    ("afq2", 0, 256, 64, "F16", 1),    # empty
    ("mxfp4", 2, 48, 0, "F32", 1),     # cols not a multiple of 32
    ("mxfp8", 2, 16, 0, "F32", 1),
    ("nvfp4", 2, 40, 0, "F32", 1),     # cols not a multiple of 16
    ("nvfp4", 2, 32, 0, "F32", "inf"),  # global scale must be finite
    ("fp8", 2, 32, 0, "F32", "nan"),
    ("fp8_block", 2, 32, 0, "U8", 1),
    ("hqq4", 3, 5, 0, "F32", 1),       # 15 elements, group 64
    ("hqq8", 7, 9, 16, "F32", 1),      # 63 elements do not split into groups of 16
    ("hqq4", 3, 7, 7, "F32", 1),       # odd group for 4-bit
    ("hqq8", 4, 64, 64, "I32", 1),
]


def check_sizes():
    for case in SIZE_CASES:
        fmt, rows, cols, g, st, gs = case
        out = run_tool("sizes", *case).stdout.split()
        got = tuple(int(v) for v in out)
        want = M.part_sizes(fmt, rows, cols, g, st)
        record(f"sizes/{fmt} [{rows},{cols}] g{g} {st}", got == want, f"qrt {got} spec {want}")
    for case in REJECT_CASES:
        p = run_tool("sizes", *case, expect_rc=None)
        record(f"sizes/rejects {case}", p.returncode == 3, f"exit {p.returncode}, stdout {p.stdout.strip()!r}")


# ---------------------------------------------------------------------------------------------------------------
# decode of random parts


def random_scales(n, scale_type, lo=0.001, hi=2.0, signed=True):
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(F32)
    v = (mag * np.where(rng.random(n) < 0.5, -1, 1)).astype(F32) if signed else mag
    return M.store_floats(v, scale_type)


def random_parts(fmt, rows, cols, g, st):
    """Random codes everywhere; scales random but valid for the format."""
    nd, ns, nb = M.part_sizes(fmt, rows, cols, g, st)
    data = rng.integers(0, 256, nd, dtype=np.uint8).tobytes()
    sb = M.SCALE_BYTES[st]
    if fmt.startswith("afq"):
        return data, random_scales(ns // sb, st), random_scales(nb // sb, st, 0.01, 4.0)
    if fmt in ("mxfp4", "mxfp8"):
        # Every E8M0 byte but NaN (255): extreme exponents exercise subnormal and overflowing products.
        s = rng.integers(0, 255, ns, dtype=np.uint8)
        s[: min(ns, 3)] = [0, 254, 127][: min(ns, 3)]
        return data, s.tobytes(), b""
    if fmt == "nvfp4":
        return data, rng.integers(0, 256, ns, dtype=np.uint8).tobytes(), b""  # NaN scale bytes decode to NaN
    if fmt == "fp8_block":
        return data, random_scales(ns // sb, st, 1e-4, 1.0, signed=False), b""
    if fmt in ("hqq4", "hqq8"):
        maxc = 15 if fmt == "hqq4" else 255
        z = rng.uniform(0, maxc, ns // sb).astype(F32)
        return data, random_scales(ns // sb, st, 1e-4, 1.0), M.store_floats(z, st)
    return data, b"", b""


def decode_matches(fmt, got, want, parts, rows, cols, g, st):
    """Bit-exact, except that AFQ's q·scale + bias may be one fused multiply-add: then allow 2 float32 ulps of
    |q·scale| + |bias|. Every other decode is a chain of products (or a subtraction then a product) that no
    compiler may fuse, so it must match exactly."""
    if not fmt.startswith("afq"):
        return same_bits(got, want), first_bit_mismatch(got, want)
    q = M.afq_codes(parts[0], rows, cols, int(fmt[3:])).astype(np.float64)
    sc = np.repeat(M.load_floats(parts[1], st).reshape(rows, cols // g), g, axis=1).astype(np.float64)
    b = np.repeat(M.load_floats(parts[2], st).reshape(rows, cols // g), g, axis=1).astype(np.float64)
    tol = 2 * float(np.finfo(F32).eps) * (np.abs(q * sc) + np.abs(b))
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    exact = same_bits(got, want)
    return bool(np.all(diff <= tol)), f"max |diff| {diff.max():.3g}; bit-exact: {exact}"


DECODE_CASES = [
    *[(f"afq{b}", 3, 384, g, st, 1)
      for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128) for st in ("F16", "BF16", "F32")],
    ("mxfp4", 5, 96, 0, "F32", 1), ("mxfp4", 1, 32, 0, "F32", 1), ("mxfp8", 5, 96, 0, "F32", 1),
    ("mxfp8", 2, 32, 0, "F32", 1), ("nvfp4", 4, 48, 0, "F32", 1), ("nvfp4", 3, 32, 0, "F32", 0.0123),
    ("fp8", 3, 7, 0, "F32", 1), ("fp8", 5, 33, 0, "F32", 0.0371),
    ("fp8_block", 130, 257, 0, "F32", 1), ("fp8_block", 129, 128, 0, "BF16", 1), ("fp8_block", 3, 5, 0, "F16", 1),
    ("f8q8", 3, 45, 0, "F32", 1), ("f8q8", 4, 64, 0, "F32", 1), ("f8q8", 1, 7, 0, "F32", 1),
    ("hqq4", 6, 40, 16, "F32", 1), ("hqq8", 6, 40, 16, "F32", 1), ("hqq4", 64, 172, 0, "F16", 1),
    ("hqq8", 8, 96, 64, "BF16", 1), ("hqq4", 4, 64, 128, "F32", 1),
]


def check_decode():
    for fmt, rows, cols, g, st, gs in DECODE_CASES:
        parts = random_parts(fmt, rows, cols, g, st)
        files = [write(f"p{i}.bin", p) if (p or i == 0) else "-" for i, p in enumerate(parts)]
        run_tool("dequant", fmt, rows, cols, g, st, gs, *files, path("out.f32"))
        got = np.fromfile(path("out.f32"), dtype="<f4").reshape(rows, cols)
        with np.errstate(over="ignore", invalid="ignore"):
            want = M.dequantize(fmt, parts, rows, cols, g, st, gs).astype(F32)
        ok, detail = decode_matches(fmt, got, want, parts, rows, cols, g, st)
        record(f"decode/{fmt} [{rows},{cols}] g{g} {st} gs{gs}", ok, detail)


# ---------------------------------------------------------------------------------------------------------------
# quantizer


QUANT_CASES = [
    *[(f"afq{b}", 8, 512, g, st, 1) for b in (2, 3, 4, 5, 6, 8) for g, st in ((64, "F16"), (32, "BF16"), (128, "F32"))],
    ("mxfp4", 8, 512, 0, "F32", 1), ("mxfp8", 8, 512, 0, "F32", 1),
    ("nvfp4", 8, 512, 0, "F32", 1), ("nvfp4", 8, 512, 0, "F32", 0.05),
    ("fp8", 8, 509, 0, "F32", 1), ("fp8", 8, 512, 0, "F32", 0.5),
    ("fp8_block", 200, 300, 0, "F32", 1), ("fp8_block", 130, 128, 0, "BF16", 1),
    ("f8q8", 8, 512, 0, "F32", 1), ("f8q8", 7, 45, 0, "F32", 1),
    ("hqq4", 64, 96, 64, "F32", 1), ("hqq8", 64, 96, 64, "F32", 1), ("hqq4", 64, 172, 0, "F16", 1),
    ("hqq8", 32, 48, 32, "BF16", 1),
]


def quant_input(fmt, rows, cols):
    """Gaussian data with a few hand-made groups: all zero, constant, all positive, all negative, one outlier."""
    x = rng.standard_normal((rows, cols)).astype(F32)
    special = x.reshape(-1)
    if fmt.startswith("hqq"):
        return x  # HQQ groups are strided; Gaussian only (constant groups are covered by the 2e4 cap below)
    k = 32 if cols % 32 == 0 else 1
    if k == 32 and special.size >= 5 * 128:
        special[0:128] = 0
        special[128:256] = 0.3
        special[256:384] = np.abs(special[256:384])
        special[384:512] = -np.abs(special[384:512])
        special[512 + 7] = 10.0
    return x


def check_quantize():
    for fmt, rows, cols, g, st, gs in QUANT_CASES:
        name = f"quantize/{fmt} [{rows},{cols}] g{g} {st} gs{gs}"
        x = quant_input(fmt, rows, cols)
        write("x.f32", x.astype("<f4").tobytes())
        outs = [path("q0.bin"), path("q1.bin"), path("q2.bin")]
        for o in outs:
            if os.path.exists(o):
                os.remove(o)
        run_tool("quant", fmt, rows, cols, g, st, gs, path("x.f32"), *outs)
        got = tuple(read(f"q{i}.bin") for i in range(3))
        want = M.quantize(fmt, x, g, st, gs)
        sizes_ok = tuple(len(p) for p in got) == M.part_sizes(fmt, rows, cols, g, st)
        spec_sizes = M.part_sizes(fmt, rows, cols, g, st)
        record(name + " part sizes", sizes_ok, f"qrt {[len(p) for p in got]} spec {spec_sizes}")
        for i, label in enumerate(("data", "scales", "biases")):
            a, b = np.frombuffer(got[i], np.uint8), np.frombuffer(want[i], np.uint8)
            same = a.size == b.size and np.array_equal(a, b)
            if same:
                detail = ""
            elif a.size != b.size:
                detail = f"{a.size} vs {b.size} bytes"
            else:
                detail = f"{int((a != b).sum())} of {a.size} bytes differ, first at {int(np.argmax(a != b))}"
            record(f"{name} {label} equal the model's quantizer", same, detail)
        back = M.dequantize(fmt, got, rows, cols, g, st, gs)
        err = float(np.sqrt(np.sum((back.astype(np.float64) - x) ** 2) / np.sum(x.astype(np.float64) ** 2)))
        record(f"{name} relative RMS {err:.4f} < {ERROR_BOUND[fmt]}", err < ERROR_BOUND[fmt], f"error {err:.4f}")
    # A constant tensor: every format must give it back closely (HQQ's capped scale, AFQ's exact edge, ...).
    # F8Q8's scale byte is an E4M3 of amax·448/127, so it may miss by half an E4M3 step (6%).
    for fmt, g, tol in (("afq4", 64, 1e-6), ("hqq4", 64, 1e-4), ("hqq8", 64, 1e-4), ("mxfp4", 0, 0), ("nvfp4", 0, 0),
                        ("mxfp8", 0, 0), ("fp8_block", 0, 0), ("f8q8", 0, 0.0625)):
        x = np.full((4, 128), 0.75, F32)
        write("x.f32", x.tobytes())
        run_tool("quant", fmt, 4, 128, g, "F32", 1, path("x.f32"), *[path(f"q{i}.bin") for i in range(3)])
        got = tuple(read(f"q{i}.bin") for i in range(3))
        back = M.dequantize(fmt, got, 4, 128, g, "F32", 1)
        err = float(np.max(np.abs(back - x))) / 0.75
        record(f"quantize/{fmt} constant 0.75 comes back within {tol}", err <= tol, f"max relative error {err}")


def check_errors():
    # A data part one byte short must be refused, not read out of bounds.
    parts = random_parts("afq4", 2, 64, 64, "F16")
    files = [write("s0.bin", parts[0][:-1]), write("s1.bin", parts[1]), write("s2.bin", parts[2])]
    p = run_tool("dequant", "afq4", 2, 64, 64, "F16", 1, *files, path("out.f32"), expect_rc=None)
    record("errors/short data part refused", p.returncode == 2 and "bytes" in p.stderr, p.stderr.strip())
    p = run_tool("quant", "nvfp4", 1, 16, 0, "F32", 0, write("x.f32", np.ones(16, F32).tobytes()), "-", "-", "-",
                 expect_rc=None)
    record("errors/nvfp4 quantizer refuses global scale 0", p.returncode == 3, p.stderr.strip())


def main():
    global TOOL, TMP
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    TOOL = sys.argv[1]
    print(f"seed {SEED} (QRT_TEST_SEED={SEED} replays this run)")
    with tempfile.TemporaryDirectory(prefix="qrt_formats_") as tmp:
        TMP = tmp
        try:
            check_tables()
            check_sizes()
            check_decode()
            check_quantize()
            check_errors()
        except RuntimeError as e:
            print(f"ERROR: {e}")
            return 2
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
