"""The bundled default model (models/default/, made by tools/train-default-model/) as qrt's tools see it.

  inspect: inspect-model --json on the UQFF export and on the GGUF file: source kind, architecture, the 38
           tensors with their formats and logical shapes, the tokenizer assets; and inspect-model --dump of
           weights against gguf-py's dequantization of the same bytes (read here with safetensors / GGUFReader),
           GGUF Q/K rows against the UQFF rows in GGUF's interleaved RoPE order.
  run:     run-model --ids greedy on the UQFF export and on the GGUF file reproduces the ids recorded in
           expected_greedy.json by the float64 numpy reference (skipped while run-model cannot generate).

usage: test_default_model.py inspect <inspect-model> <models/default> <expected_greedy.json> <work dir>
       test_default_model.py run <run-model> <models/default> <expected_greedy.json>"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

NAME = "war-and-peace-q8_0"
LINEARS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL {what}: {detail}")


def finish(label):
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(f"{label}: all checks passed")
    sys.exit(0)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def expected_shapes(cfg):
    """Logical shapes ([out, in] for linears) keyed by Hugging Face name."""
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    hd = cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": [cfg["vocab_size"], d], "model.norm.weight": [d]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [d], p + "post_attention_layernorm.weight": [d],
                       p + "self_attn.q_proj.weight": [q, d], p + "self_attn.k_proj.weight": [kv, d],
                       p + "self_attn.v_proj.weight": [kv, d], p + "self_attn.o_proj.weight": [d, q],
                       p + "mlp.gate_proj.weight": [f, d], p + "mlp.up_proj.weight": [f, d],
                       p + "mlp.down_proj.weight": [d, f]})
    return shapes


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    _, _, i, rest = hf.split(".", 3)
    module = rest[: -len(".weight")]
    part = LINEARS.get(module, {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}.get(module))
    return f"blk.{i}.{part}.weight"


def expected_format(hf):
    if hf == "model.embed_tokens.weight":
        return "f16"
    return "f32" if hf.endswith("norm.weight") else "q8_0"


def inspect_json(tool, path):
    r = run([tool, path, "--json"])
    check(f"inspect-model {path}", r.returncode == 0, r.stderr)
    return json.loads(r.stdout) if r.returncode == 0 else None


def dump(tool, path, tensor, work, count):
    out = os.path.join(work, tensor.replace("/", "_") + "." + os.path.basename(path) + ".f32")
    r = run([tool, path, "--dump", tensor, "--out", out])
    check(f"inspect-model --dump {tensor} of {path}", r.returncode == 0, r.stderr)
    if r.returncode != 0:
        return None
    values = np.fromfile(out, dtype="<f4")
    check(f"dump size of {tensor}", values.size == count, f"{values.size} values, expected {count}")
    return values


def interleave_rows(w, heads):
    """HF half-split rows -> GGUF llama order (new row 2i+j <- old row i + j*hd/2 within each head)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(w.shape)


def check_inspect(tool, model_dir, expected_path, work):
    os.makedirs(work, exist_ok=True)
    uqff_dir = os.path.join(model_dir, NAME)
    gguf_path = os.path.join(model_dir, NAME + ".gguf")
    with open(os.path.join(uqff_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(expected_path) as f:
        expected = json.load(f)
    shapes = expected_shapes(cfg)
    check("config describes the recorded model", cfg["model_type"] == "llama" and cfg["tie_word_embeddings"]
          and cfg["vocab_size"] == 1024, str(cfg))

    # UQFF: names as stored (HF), linears Q8_0 from the shard, embedding F16 and norms F32 from the residual.
    j = inspect_json(tool, uqff_dir)
    if j:
        check("uqff source", j.get("source") == "uqff", j.get("source"))
        check("uqff architecture", j.get("architecture") == "LlamaForCausalLM", j.get("architecture"))
        check("uqff tokenizer assets", j["tokenizer"]["tokenizer_json"] and j["tokenizer"]["tokenizer_config_json"],
              j["tokenizer"])
        got = {t["name"]: t for t in j["tensors"]}
        check("uqff tensor names", sorted(got) == sorted(shapes), f"{sorted(set(got) ^ set(shapes))}")
        for name, shape in shapes.items():
            t = got.get(name)
            if t is None:
                continue
            check(f"uqff {name} format", t["format"] == expected_format(name), t["format"])
            check(f"uqff {name} shape", t["shape"] == shape, f"{t['shape']} vs {shape}")
            want_file = "residual.safetensors" if expected_format(name) != "q8_0" else "q8_0-0.uqff"
            check(f"uqff {name} file", os.path.basename(t["file"]) == want_file, t["file"])

    # Memory: the KV cache of a token is f32 K and V of every layer's KV heads plus its position, from config.json.
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv_per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 4 + 4
    if j:
        m = j.get("memory", {})
        check("uqff memory: weights are the tensor bytes", m.get("weights") == j["tensor_bytes"], m)
        check("uqff memory: KV cache per token", m.get("kv_cache_per_token") == kv_per_token,
              f"{m.get('kv_cache_per_token')} vs {kv_per_token}")

    # GGUF: llama architecture, gpt2-style vocabulary, the same 38 tensors under GGUF names.
    g = inspect_json(tool, gguf_path)
    if g:
        m = g.get("memory", {})
        check("gguf memory: KV cache per token", m.get("kv_cache_per_token") == kv_per_token, m)
        check("gguf memory: at the trained context",
              m.get("kv_cache_at_trained_context") == kv_per_token * cfg["max_position_embeddings"], m)
    if g:
        check("gguf source", g.get("source") == "gguf", g.get("source"))
        check("gguf architecture", g.get("architecture") == "llama", g.get("architecture"))
        tok = g["tokenizer"]
        check("gguf tokenizer", tok.get("gguf_model") == "gpt2" and tok.get("gguf_pre") == "gpt-2"
              and tok.get("tokens") == cfg["vocab_size"], tok)
        got = {t["name"]: t for t in g["tensors"]}
        check("gguf tensor count", len(got) == len(shapes), len(got))
        for name, shape in shapes.items():
            t = got.get(gguf_name(name))
            check(f"gguf {gguf_name(name)} present", t is not None)
            if t is None:
                continue
            check(f"gguf {gguf_name(name)} format", t["format"] == expected_format(name), t["format"])
            check(f"gguf {gguf_name(name)} shape", t["shape"] == shape, f"{t['shape']} vs {shape}")

    # Values: qrt's decode of the files against gguf-py's decode of the same bytes, and the GGUF rows against
    # the UQFF rows (same model, Q/K permuted for interleaved RoPE).
    shard = load_file(os.path.join(uqff_dir, "q8_0-0.uqff"))
    residual = load_file(os.path.join(uqff_dir, "residual.safetensors"))
    reader = gguf.GGUFReader(gguf_path)
    gguf_tensors = {t.name: t for t in reader.tensors}
    last = cfg["num_hidden_layers"] - 1
    for name, heads in (("model.layers.0.self_attn.q_proj.weight", cfg["num_attention_heads"]),
                        (f"model.layers.{last}.self_attn.k_proj.weight", cfg["num_key_value_heads"]),
                        (f"model.layers.{last}.mlp.down_proj.weight", None)):
        key = name[: -len(".weight")]
        shape = shapes[name]
        check(f"{key} stored as GGML type 8", int(shard[f"{key}.weight.format"]) == 0
              and int(shard[f"{key}.weight.dtype"]) == 8 and list(shard[f"{key}.weight.shape"]) == shape)
        reference = gguf.quants.dequantize(shard[f"{key}.weight"].reshape(shape[0], -1),
                                           gguf.GGMLQuantizationType.Q8_0).reshape(shape)
        ours = dump(tool, uqff_dir, name, work, reference.size)
        if ours is not None:
            check(f"uqff {name} values", np.array_equal(ours.reshape(shape), reference), "differ from gguf-py")
        t = gguf_tensors[gguf_name(name)]
        from_gguf = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(shape)
        rows = interleave_rows(reference, heads) if heads else reference
        check(f"gguf {gguf_name(name)} rows = uqff rows", np.array_equal(from_gguf, rows))
        ours = dump(tool, gguf_path, gguf_name(name), work, reference.size)
        if ours is not None:
            check(f"gguf {gguf_name(name)} values", np.array_equal(ours.reshape(shape), from_gguf))
    emb = residual["model.embed_tokens.weight"]
    ours = dump(tool, uqff_dir, "model.embed_tokens.weight", work, emb.size)
    if ours is not None:
        check("uqff embedding values", np.array_equal(ours.reshape(emb.shape), emb.astype(np.float32)))
    check("recorded continuation is long enough to mean something", len(expected["generated_ids"]) >= 32)
    finish("inspect")


def parse_ids(stdout, label):
    for line in stdout.splitlines():
        if line.startswith(label + ":"):
            return [int(x) for x in line[len(label) + 1:].split()]
    return None


def check_run(tool, model_dir, expected_path):
    with open(expected_path) as f:
        expected = json.load(f)
    n = len(expected["generated_ids"])
    for path in (os.path.join(model_dir, NAME), os.path.join(model_dir, NAME + ".gguf")):
        r = run([tool, path, "-p", expected["prompt"], "-n", str(n), "--ids"])
        if r.returncode != 0 and "not implemented" in r.stderr:
            print(f"skipped: run-model cannot generate yet ({r.stderr.strip()})")
            sys.exit(77)
        check(f"run-model {path}", r.returncode == 0, r.stderr)
        if r.returncode != 0:
            continue
        prompt_ids, generated = parse_ids(r.stdout, "prompt_ids"), parse_ids(r.stdout, "generated_ids")
        check(f"{path}: prompt ids", prompt_ids == expected["prompt_ids"], f"{prompt_ids} vs {expected['prompt_ids']}")
        check(f"{path}: greedy ids", generated == expected["generated_ids"],
              f"\n  got      {generated}\n  expected {expected['generated_ids']}")
        r = run([tool, path, "-p", expected["prompt"], "-n", str(n)])
        check(f"{path}: text", r.returncode == 0 and expected["generated_text"] in r.stdout,
              f"\n  got      {r.stdout!r}\n  expected {expected['generated_text']!r}")
    finish("run")


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "inspect":
        check_inspect(*sys.argv[2:6])
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        check_run(*sys.argv[2:5])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
