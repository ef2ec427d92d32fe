"""Hugging Face checkpoint directories written with the `safetensors` package: a sharded checkpoint with
model.safetensors.index.json, dense F32/F16 tensors, and block-wise FP8 weights (F8_E4M3 with a
weight_scale_inv companion, possibly in another shard), read back through inspect-model and compared with the
numpy model of the spec; plus malformed checkpoints.

usage: test_hf_checkpoint.py <inspect-model> <work dir>"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import save_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "formats"))
sys.path.insert(0, os.path.join(HERE, "..", "uqff"))
import spec_model  # noqa: E402
from uqff_writer import relabel_dtypes  # noqa: E402

TOOL, WORK = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(11)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    if not ok:
        print(f"FAIL {name}: {detail}")


def inspect(path, *args):
    return subprocess.run([TOOL, path, *args], capture_output=True, text=True)


def write_checkpoint(d, fp8_scale_in_other_shard=True, drop_scale=False, bad_scale_shape=False):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    expected = {}
    x = rng.standard_normal((200, 300)).astype(np.float32)  # not multiples of 128: partial scale tiles
    data, scales, _ = spec_model.quantize("fp8_block", x, scale_type="F32")
    expected["model.layers.0.mlp.up_proj.weight"] = spec_model.dequantize("fp8_block", (data, scales, b""), 200, 300,
                                                                          scale_type="F32")
    scale_arr = np.frombuffer(scales, np.float32).reshape(2, 3).copy()
    if bad_scale_shape:
        scale_arr = scale_arr[:, :2].copy()
    shard1 = {"model.layers.0.mlp.up_proj.weight": np.frombuffer(data, np.uint8).reshape(200, 300).copy(),
              "model.norm.weight": rng.standard_normal(64).astype(np.float32)}
    shard2 = {"model.embed_tokens.weight": rng.standard_normal((16, 64)).astype(np.float16)}
    target = shard2 if fp8_scale_in_other_shard else shard1
    if not drop_scale:
        target["model.layers.0.mlp.up_proj.weight_scale_inv"] = scale_arr
    expected["model.norm.weight"] = shard1["model.norm.weight"]
    expected["model.embed_tokens.weight"] = shard2["model.embed_tokens.weight"].astype(np.float32)
    names = {"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}
    weight_map = {}
    for fname, tensors in names.items():
        save_file(tensors, os.path.join(d, fname))
        weight_map.update({k: fname for k in tensors})
    relabel_dtypes(os.path.join(d, "model-00001-of-00002.safetensors"),
                   {"model.layers.0.mlp.up_proj.weight": "F8_E4M3"})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
    return expected


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    for other_shard in (True, False):
        d = os.path.join(WORK, f"ckpt-{other_shard}")
        expected = write_checkpoint(d, fp8_scale_in_other_shard=other_shard)
        r = inspect(d, "--json")
        check("open sharded checkpoint", r.returncode == 0, r.stderr)
        if r.returncode:
            continue
        info = json.loads(r.stdout)
        formats = {t["name"]: t["format"] for t in info["tensors"]}
        check("source kind", info["source"] == "hf", info["source"])
        check("fp8 format", formats.get("model.layers.0.mlp.up_proj.weight") == "fp8_block", formats)
        check("no separate scale tensor", "model.layers.0.mlp.up_proj.weight_scale_inv" not in formats, formats)
        for name, want in expected.items():
            out = os.path.join(WORK, "dump.f32")
            r = inspect(d, "--dump", name, "--out", out)
            if r.returncode:
                check(f"dump {name}", False, r.stderr)
                continue
            got = np.fromfile(out, np.float32).reshape(want.shape)
            check(f"values {name} (scale in other shard: {other_shard})", np.array_equal(got, want),
                  f"max diff {np.max(np.abs(got - want))}")
    for name, kwargs, phrase in (("missing scale", {"drop_scale": True}, "has no weight_scale_inv"),
                                 ("wrong scale shape", {"bad_scale_shape": True}, "weight_scale_inv")):
        d = os.path.join(WORK, name.replace(" ", "-"))
        write_checkpoint(d, **kwargs)
        r = inspect(d)
        check(f"rejects {name}", r.returncode != 0 and phrase in r.stderr, r.stderr)
    d = os.path.join(WORK, "escape")
    write_checkpoint(d)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"a": "../outside.safetensors"}}, f)
    r = inspect(d)
    check("rejects a shard outside the directory", r.returncode != 0 and "not a file name" in r.stderr, r.stderr)
    # The config as qrt runs it: Phi-3's LongRoPE fields, Gemma 3's, gpt-oss's, DeepSeek-V3's; an architecture it does
    # not run.
    from safetensors.numpy import save_file
    for model_type, extra in (("phi3", {"original_max_position_embeddings": 16, "sliding_window": 2047,
                                        "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                         "long_factor": [2.0] * 8}}),
                              ("gemma3_text", {"sliding_window": 512, "query_pre_attn_scalar": 256,
                                               "rope_scaling": {"rope_type": "linear", "factor": 8.0}}),
                              ("gpt_oss", {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 128,
                                           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "truncate": False,
                                                            "original_max_position_embeddings": 64}}),
                              ("deepseek_v3", {"kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16,
                                               "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 8,
                                               "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                               "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 4,
                                               "topk_group": 2, "norm_topk_prob": True,
                                               "routed_scaling_factor": 2.5, "num_nextn_predict_layers": 1}),
                              ("jamba", {})):
        d = os.path.join(WORK, "config-" + model_type)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        save_file({"model.norm.weight": np.ones(64, np.float32)}, os.path.join(d, "model.safetensors"))
        cfg = dict({"model_type": model_type, "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                    "max_position_embeddings": 128}, **extra)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        r = inspect(d, "--json")
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        if model_type == "phi3":
            m = j.get("model", {})
            check("inspect-model shows phi3's LongRoPE and window", m.get("architecture") == "phi3" and
                  m.get("sliding_window") == 2047 and m.get("rope", {}).get("scaling") == "longrope" and
                  m["rope"].get("original_context") == 16 and m["rope"].get("factor") == 8.0 and
                  m["rope"].get("long_factors") == 8 and
                  abs(m["rope"]["attn_factor"] - (1 + np.log(8) / np.log(16)) ** 0.5) < 1e-6, j)
        elif model_type == "gemma3_text":
            m = j.get("model", {})
            check("inspect-model shows gemma3's features", m.get("architecture") == "gemma3" and
                  m.get("sliding_window") == 512 and m.get("global_attention_every") == 6 and
                  m.get("rope", {}).get("local_theta") == 10000.0 and m["rope"].get("theta") == 1000000.0 and
                  m["rope"].get("scaling") == "linear" and m.get("activation") == "gelu_tanh" and
                  m.get("embedding_scale") == 8.0 and m.get("norm_weight_offset") == 1.0 and
                  m.get("post_norms") is True and m.get("qk_norm") is True and m.get("tied_embeddings") is True and
                  m.get("attention_scale") == 0.0625 and "attn_softcap" not in m, j)
        elif model_type == "gpt_oss":
            m = j.get("model", {})
            check("inspect-model shows gpt-oss's features", m.get("architecture") == "gpt-oss" and
                  m.get("attention_sinks") is True and m.get("router_bias") is True and
                  m.get("expert_bias") is True and m.get("activation") == "swiglu_clamped" and
                  m.get("swiglu_limit") == 7.0 and m.get("global_attention_every") == 2 and
                  m.get("rope", {}).get("yarn_truncate") is False and m.get("experts", {}).get("count") == 4, j)
        elif model_type == "deepseek_v3":
            m = j.get("model", {})
            e = m.get("experts", {})
            check("inspect-model shows deepseek_v3's latent attention and routing", m.get("architecture") ==
                  "deepseek3" and m.get("latent_attention") == {"q_lora_rank": 48, "kv_lora_rank": 32,
                                                               "qk_nope_dim": 16, "qk_rope_dim": 8, "v_head_dim": 16,
                                                               "cache_row": 40} and
                  m.get("head_dim") == 24 and m.get("rope", {}).get("rotary_dims") == 8 and
                  m["rope"].get("layout") == "interleaved" and e.get("scores") == "sigmoid" and
                  e.get("choice_bias") is True and e.get("groups") == {"count": 4, "used": 2, "score": "top2_sum"} and
                  e.get("scale") == 2.5 and e.get("shared_ffn") == 32 and e.get("leading_dense_layers") == 1 and
                  m.get("extra_layers_skipped") == 1, j)
        else:
            check("inspect-model says why it would not run jamba", "model" not in j and
                  'model_type "jamba"' in j.get("model_unsupported", ""), j)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
