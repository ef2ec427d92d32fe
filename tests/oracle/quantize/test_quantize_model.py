#!/usr/bin/env python3
"""quantize-model: a Hugging Face checkpoint into a UQFF export (spec/uqff.md), checked without qrt's reader.

Random checkpoints (a dense llama whose MLP width 352 is a multiple of 32 only, a qwen3-moe with per-expert
tensors) are quantized to one type of every UQFF family. Then, reading the files with the `safetensors` package:
  * layout: version scalars (1.2.0) in shard 0 only, `uqff.version` metadata, each module's exact entry set, tag,
    dtypes and shapes per §2.6, expert stacks [E, out, in] under mistral.rs' stacked keys;
  * values: GGML blocks equal gguf-py's quantizers byte for byte where it has one (q8_0, q4_0, q4_1, q5_x);
    every module decoded independently (gguf-py for GGML, the spec model for the others) is within the format's
    error of the source; residual tensors are the source's bytes; config.json lost its quantization_config; the
    tokenizer files are copied; lm_head is promoted (q4k -> q6k, afq4 -> afq6), an override wins, fallbacks are
    reported (q4k -> q4_1 and afq4 -> unquant for rows of 352);
  * qrt reads it: qrt_model_forward --model on the export gives the numpy reference forward's logits over the
    independently decoded weights (1e-4);
  * refusals: an existing export without --force, a type with no UQFF family, HQQ for experts, a directory that is
    not a checkpoint; a refused run leaves no staging directory behind.

usage: test_quantize_model.py <quantize-model> <qrt_model_forward> <work dir>
"""

import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from gguf import GGMLQuantizationType, quants
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
sys.path.insert(0, os.path.join(HERE, "..", "formats"))
import reference_forward as ref  # noqa: E402
import spec_model  # noqa: E402
from test_model_forward import base_config, make_weights  # noqa: E402

QUANTIZE, FORWARD, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e"))
from e2e_checks import check, finish  # noqa: E402


GGML = {0: "F32", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K"}
# Relative L2 error of a decoded module against its source, per stored type (loose: they catch a wrong layout,
# not a slightly worse quantizer).
ERROR = {"F32": 0, "Q8_0": 0.01, "Q4_0": 0.15, "Q4_1": 0.12, "Q5_0": 0.07, "Q5_1": 0.06, "Q4_K": 0.1, "Q6_K": 0.03,
         "afq4": 0.12, "afq6": 0.03, "mxfp4": 0.2, "fp8": 0.05, "f8q8": 0.04, "hqq4": 0.2, "unquant": 0}
SUFFIXES = {0: {"weight", "weight.format", "weight.dtype", "weight.shape"},
            1: {"weight", "weight.format"},
            2: {"weight", "weight.format", "weight.scales", "weight.zeros", "weight.shape", "weight.bits",
                "weight.group_size", "weight.axis", "weight.optimization_steps", "weight.round_zeros",
                "weight.channel_wise"},
            3: {"weight", "weight.format", "weight.dequant_w_scale", "weight.dequant_x_scale", "weight.quant_scale",
                "weight.dtype"},
            4: {"weight", "weight.format", "weight.bits", "weight.group_size", "weight.scales", "weight.biases"},
            5: {"weight", "weight.format", "weight.num_blocks", "weight.shape"},
            6: {"weight", "weight.format", "weight.scales"}}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


def read_set(directory, shards):
    """{name: (dtype string, numpy array or raw bytes)} over the shards, plus each file's metadata."""
    entries, metadata, version_shards = {}, [], []
    for i, shard in enumerate(shards):
        path = os.path.join(directory, shard)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            data = f.read()
        metadata.append(header.pop("__metadata__", {}))
        if "uqff.version.major" in header:
            version_shards.append(i)
        for name, e in header.items():
            b, end = e["data_offsets"]
            entries[name] = (e["dtype"], e["shape"], data[b:end])
    return entries, metadata, version_shards


def scalar(entry):
    dtype, shape, raw = entry
    assert shape == [], shape
    return {"U8": np.uint8, "U32": np.uint32, "F32": np.float32}[dtype](np.frombuffer(raw, {"U8": np.uint8,
                                                                                            "U32": "<u4",
                                                                                            "F32": "<f4"}[dtype])[0])


def decode(entries, key):
    """(stored type name, float64 weights [.., out, in]) decoded without qrt."""
    w = key + ".weight"
    tag = int(scalar(entries[w + ".format"]))
    dtype, shape, raw = entries[w]
    if tag == 0:
        code = int(scalar(entries[w + ".dtype"]))
        logical = [int(v) for v in np.frombuffer(entries[w + ".shape"][2], "<u4")]
        name = GGML[code]
        if name == "F32":
            return name, np.frombuffer(raw, "<f4").reshape(logical).astype(np.float64)
        blocks = np.frombuffer(raw, np.uint8).reshape(-1, len(raw) // int(np.prod(logical[:-1])))
        return name, quants.dequantize(blocks, getattr(GGMLQuantizationType, name)).reshape(logical).astype(np.float64)
    if tag == 1:
        assert dtype == "F32", dtype
        return "unquant", np.frombuffer(raw, "<f4").reshape(shape).astype(np.float64)
    if tag == 4:
        bits, group = int(scalar(entries[w + ".bits"])), int(scalar(entries[w + ".group_size"]))
        cols = shape[-1] * 32 // bits
        rows = int(np.prod(shape[:-1]))
        st = entries[w + ".scales"][0]
        out = spec_model.dequantize("afq%d" % bits, (raw, entries[w + ".scales"][2], entries[w + ".biases"][2]), rows,
                                    cols, group, st)
        return "afq%d" % bits, np.asarray(out, np.float64).reshape(shape[:-1] + [cols])
    if tag == 6:
        cols = shape[-1] * 2
        rows = int(np.prod(shape[:-1]))
        out = spec_model.dequantize("mxfp4", (raw, entries[w + ".scales"][2], b""), rows, cols)
        return "mxfp4", np.asarray(out, np.float64).reshape(shape[:-1] + [cols])
    if tag == 3:
        s = float(scalar(entries[w + ".dequant_w_scale"]))
        out = spec_model.dequantize("fp8", (raw, b"", b""), shape[0], shape[1], global_scale=s)
        return "fp8", np.asarray(out, np.float64).reshape(shape)
    if tag == 5:
        logical = [int(v) for v in np.frombuffer(entries[w + ".shape"][2], "<u4")]
        out = spec_model.dequantize("f8q8", (raw, b"", b""), logical[0], logical[1])
        return "f8q8", np.asarray(out, np.float64).reshape(logical)
    if tag == 2:
        bits, group = int(scalar(entries[w + ".bits"])), int(scalar(entries[w + ".group_size"]))
        logical = [int(v) for v in np.frombuffer(entries[w + ".shape"][2], "<u4")]
        out = spec_model.dequantize("hqq%d" % bits, (raw, entries[w + ".scales"][2], entries[w + ".zeros"][2]),
                                    logical[0], logical[1], group, "F32")
        return "hqq%d" % bits, np.asarray(out, np.float64).reshape(logical)
    raise ValueError(tag)


def module_keys(W):
    """The export's module keys and, per key, the source array (experts stacked as mistral.rs does)."""
    out = {}
    for name, w in W.items():
        if not name.endswith(".weight"):
            continue
        base = name[:-7]
        parts = base.split(".")
        if base == "lm_head" or any(base.endswith(m) for m in ("q_proj", "k_proj", "v_proj", "o_proj")) or \
                (parts[-1] in ("gate_proj", "up_proj", "down_proj", "gate_up_proj") and "experts" not in parts):
            out[base] = w
        elif "experts" in parts:
            i = parts.index("experts")
            key = ".".join(parts[:i + 1] + [parts[-1]])
            out.setdefault(key, {})[int(parts[i + 1])] = w
    return {k: (np.stack([v[e] for e in sorted(v)]) if isinstance(v, dict) else v) for k, v in out.items()}


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def make_checkpoint(name, cfg, seed):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    W = make_weights(cfg, np.random.default_rng(seed))
    save_file(W, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, quantization_config={"quant_method": "none"}), f)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0", "note": "not read by quantize-model"}')
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        f.write('{"temperature": 0.7}')
    return d, W


def check_export(case, cfg, src, W, out, types, expect_types, seed):
    report = json.load(open(os.path.join(out, "uqff_report.json")))
    check(f"{case}: report lists the outputs", [o["quant"] for o in report["outputs"]] == types, report)
    with safe_open(os.path.join(out, "residual.safetensors"), "np") as f:
        residual = {k: f.get_tensor(k) for k in f.keys()}
        check(f"{case}: residual metadata", f.metadata().get("uqff.version") == "1.2.0", f.metadata())
    keys = module_keys(W)
    want_residual = {n for n in W if not any(n == k + ".weight" for k in keys) and "experts." not in n}
    check(f"{case}: residual holds the other tensors", set(residual) == want_residual,
          sorted(set(residual) ^ want_residual))
    check(f"{case}: residual bytes unchanged", all(np.array_equal(residual[n], W[n]) for n in residual))
    config = json.load(open(os.path.join(out, "config.json")))
    check(f"{case}: config.json without quantization_config", config == cfg, config)
    for name in ("tokenizer.json", "generation_config.json"):
        check(f"{case}: {name} copied", open(os.path.join(out, name)).read() == open(os.path.join(src, name)).read())
    tokens = np.random.default_rng(seed).integers(0, cfg["vocab_size"], size=9)
    for output in report["outputs"]:
        quant = output["quant"]
        entries, metadata, version_shards = read_set(out, output["shards"])
        check(f"{case} {quant}: version scalars in shard 0 only", version_shards == [0], version_shards)
        check(f"{case} {quant}: versions 1.2.0", [int(scalar(entries["uqff.version." + p])) for p in
                                                   ("major", "minor", "patch")] == [1, 2, 0])
        check(f"{case} {quant}: metadata", all(m.get("uqff.version") == "1.2.0" and m.get("uqff.producer") == "qrt"
                                              for m in metadata), metadata)
        decoded = {}
        for key, source in keys.items():
            have = {n[len(key) + 1:] for n in entries if n.startswith(key + ".weight")}
            tag = int(scalar(entries[key + ".weight.format"]))
            check(f"{case} {quant} {key}: entries of tag {tag}", have == SUFFIXES[tag], sorted(have))
            stored, values = decode(entries, key)
            decoded[key] = values
            check(f"{case} {quant} {key}: shape", list(values.shape) == list(source.shape), values.shape)
            want = expect_types[quant](key)
            check(f"{case} {quant} {key}: stored as {want}", stored == want, stored)
            err = rel(values, source.astype(np.float64))
            check(f"{case} {quant} {key}: error {err:.3g} within {ERROR[stored]}", err <= ERROR[stored] + 1e-12)
            if stored in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
                ref_blocks = quants.quantize(source.reshape(-1, source.shape[-1]).astype(np.float32),
                                             getattr(GGMLQuantizationType, stored))
                check(f"{case} {quant} {key}: blocks equal gguf-py's", entries[key + ".weight"][2] ==
                      ref_blocks.tobytes())
        check(f"{case} {quant}: fallbacks reported", output["fallback_count"] == len(output["fallbacks"]) and
              all(f.split(":")[0] in keys for f in output["fallbacks"]), output["fallbacks"])
        # qrt reads the export: its logits are the reference forward's over the weights decoded above.
        logits_path = os.path.join(WORK, f"{case}-{quant}.f32")
        r = run([FORWARD, "--model", os.path.join(out, quant), "--tokens", ",".join(map(str, tokens)),
                 "--logits", logits_path])
        check(f"{case} {quant}: qrt_model_forward --model", r.returncode == 0, r.stderr[-2000:])
        if r.returncode != 0:
            continue
        used = dict(residual)
        for key, values in decoded.items():
            if values.ndim == 3:
                parts = key.split(".")
                for e in range(values.shape[0]):
                    used[".".join(parts[:-1] + [str(e), parts[-1]]) + ".weight"] = values[e]
            else:
                used[key + ".weight"] = values
        used = {k: np.asarray(v, np.float64) for k, v in used.items()}
        want = ref.forward(cfg, used, tokens, np.arange(len(tokens)))
        got = np.fromfile(logits_path, np.float32).reshape(len(tokens), cfg["vocab_size"]).astype(np.float64)
        err = max(rel(got[t], want[t]) for t in range(len(tokens)))
        check(f"{case} {quant}: qrt logits = reference over the decoded export ({err:.2e})", err <= 1e-4)


# ---- a dense llama: every family, an override, promotion and fallbacks -------------------------------------------
os.makedirs(WORK, exist_ok=True)
dense_cfg = base_config("llama", hidden_size=256, intermediate_size=352, num_hidden_layers=2)  # 352 = 11 x 32
src, W = make_checkpoint("llama", dense_cfg, 1)
out = os.path.join(WORK, "llama-uqff")
shutil.rmtree(out, ignore_errors=True)
types = ["q8_0", "q4k", "afq4", "mxfp4", "fp8", "f8q8", "hqq4"]
r = run([QUANTIZE, src, "-o", out, "--threads", "2", "--override", r"layers\.1\.self_attn\.v_proj=q8_0"] +
        sum((["--type", t] for t in types), []), env=dict(os.environ, QRT_PROGRESS_AFTER="0"))
check("dense: quantize-model exit", r.returncode == 0, r.stderr[-3000:])
check("dense: progress lines on a pipe", "quantizing: 100%" in r.stderr, r.stderr[-500:])


def dense_types(quant):
    def f(key):
        if key == "model.layers.1.self_attn.v_proj":
            return "Q8_0"
        if quant == "q8_0":
            return "Q8_0"
        if quant == "q4k":
            return "Q6_K" if key == "lm_head" else ("Q4_1" if key.endswith("down_proj") else "Q4_K")
        if quant == "afq4":
            return "afq6" if key == "lm_head" else ("unquant" if key.endswith("down_proj") else "afq4")
        return quant
    return f


if r.returncode == 0:
    check_export("dense", dense_cfg, src, W, out, types, {t: dense_types(t) for t in types}, 2)
    # Again without --force: refused, the export untouched; with --force: replaced.
    before = sorted(os.listdir(out))
    again = run([QUANTIZE, src, "-o", out, "--type", "q8_0", "--quiet"])
    check("existing export refused without --force", again.returncode == 1 and "--force" in again.stderr,
          again.stderr)
    check("refused run leaves the export as it was", sorted(os.listdir(out)) == before)
    forced = run([QUANTIZE, src, "-o", out, "--type", "q8_0", "--quiet", "--force"])
    check("--force replaces it", forced.returncode == 0 and sorted(os.listdir(out)) == sorted(
        ["q8_0-0.uqff", "residual.safetensors", "config.json", "tokenizer.json", "generation_config.json",
         "uqff_report.json"]) and forced.stderr == "", (forced.stderr, os.listdir(out)))

# ---- a qwen3-moe checkpoint: per-expert tensors stacked under mistral.rs' keys ------------------------------------
moe_cfg = base_config("qwen3_moe", hidden_size=256, intermediate_size=256, num_hidden_layers=1, head_dim=64,
                      num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256, norm_topk_prob=True)
msrc, MW = make_checkpoint("qwen3moe", moe_cfg, 3)
mdir = os.path.join(WORK, "moe-out")
shutil.rmtree(mdir, ignore_errors=True)
r = run([QUANTIZE, msrc, "-o", os.path.join(mdir, "model-q4k.uqff"), "--type", "q4k", "--no-promote"])
check("moe: quantize-model to a .uqff path", r.returncode == 0, r.stderr[-3000:])
if r.returncode == 0:
    check("moe: shards named by the path's stem", "model-q4k-0.uqff" in os.listdir(mdir), os.listdir(mdir))
    with safe_open(os.path.join(mdir, "model-q4k-0.uqff"), "np") as f:
        names = set(f.keys())
    check("moe: experts stacked under mlp.experts.gate_proj", "model.layers.0.mlp.experts.gate_proj.weight" in names
          and not any(".experts.0." in n for n in names), sorted(names)[:8])
    # --no-promote: lm_head in q4k too. qrt finds the shards through the report's quant name.
    check_export("moe", moe_cfg, msrc, MW, mdir, ["q4k"], {"q4k": lambda key: "Q4_K"}, 4)

# ---- Phi-3: the fused qkv_proj and gate_up_proj are one module each (as mistral.rs quantizes them); LongRoPE -------
pairs = 32  # head_dim 64
phi_cfg = base_config("phi3", hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                      original_max_position_embeddings=4, rope_scaling={
                          "type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(pairs)],
                          "long_factor": [1.0 + 0.7 * i for i in range(pairs)]})
psrc, PW = make_checkpoint("phi3", phi_cfg, 5)
pdir = os.path.join(WORK, "phi3-uqff")
shutil.rmtree(pdir, ignore_errors=True)
r = run([QUANTIZE, psrc, "-o", pdir, "--type", "q8_0", "--quiet"])
check("phi3: quantize-model exit", r.returncode == 0, r.stderr[-3000:])
if r.returncode == 0:
    check_export("phi3", phi_cfg, psrc, PW, pdir, ["q8_0"], {"q8_0": lambda key: "Q8_0"}, 6)

# ---- refusals ------------------------------------------------------------------------------------------------
for label, args, expect in (
        ("a type with no UQFF family", [src, "-o", os.path.join(WORK, "x1"), "--type", "nvfp4"], "no UQFF encoding"),
        ("an unknown type", [src, "-o", os.path.join(WORK, "x2"), "--type", "q4_9"], "unknown type"),
        ("HQQ for experts", [msrc, "-o", os.path.join(WORK, "x3"), "--type", "hqq4"], "stack of expert weights"),
        ("not a checkpoint", [WORK, "-o", os.path.join(WORK, "x4"), "--type", "q8_0"], "not a Hugging Face"),
        ("several types into one .uqff", [src, "-o", os.path.join(WORK, "x5.uqff"), "--type", "q8_0", "--type",
                                          "q4k"], "names one output")):
    r = run([QUANTIZE] + args)
    lines = r.stderr.strip().splitlines()
    check(f"{label}: refused with one error line", r.returncode == 1 and len(lines) == 1 and
          lines[0].startswith("error: ") and expect in lines[0], r.stderr)
check("refused runs leave no staging directory", not any(n.startswith(".qrt-staging") for n in os.listdir(WORK)),
      os.listdir(WORK))
check("refused runs write no output", not any(os.path.exists(os.path.join(WORK, n)) for n in ("x1", "x2", "x3", "x4")))

finish()
