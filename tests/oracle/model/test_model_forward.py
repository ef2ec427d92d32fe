#!/usr/bin/env python3
"""Model oracle: qrt's transformer against an independent numpy reference forward (reference_forward.py).

For random tiny models of every supported architecture (llama with Llama 3 / linear rope scaling, tied
embeddings, biases and MQA; mistral with a sliding window shorter than the sequence; qwen2 with biases and
with a sliding window; qwen3 with q/k norms and an explicit head_dim; mixtral and qwen3-moe with 4 experts,
top-2, with and without renormalization, and YaRN; DeepSeek-V2 / V3 with multi-head latent attention, grouped
routing and shared experts) this script writes a Hugging Face checkpoint
(safetensors + config.json), runs qrt_model_forward, and compares the logits of every position with the float64
reference, within 1e-4 relative:
  * with the prompt as one batch, then the prompt as a batch followed by single tokens through the KV cache,
    and at positions that do not start at 0;
  * with F32 weights and with quantized weights (every matrix in each listed format, and a per-tensor mix):
    the tool dumps the dequantized weights it used and the reference runs on them, isolating the forward pass;
  * in GGUF layout: GGUF tensor names, Q/K rows permuted for interleaved RoPE (llama family), stacked expert
    tensors, rope_freqs factors instead of Llama 3 scaling metadata, and a GGUF metadata description of the
    config; the logits must equal those of the Hugging Face layout. DeepSeek's deepseek2 files come in llama.cpp's
    two forms: kv_b whole (older converters) or split per head into k_b (transposed) and v_b (its current one,
    GGUF_MLA_SPLIT); a split layout's quantized k_b is not kv_b's, so its reference runs on its own dump.

usage: test_model_forward.py <qrt_model_forward> <work dir>
"""

import json
import math
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402

TOLERANCE = 1e-4

# Quantized formats the forward pass is checked with: every matrix that fits the format is quantized by qrt's
# reference quantizer. 32-element formats run on the small dense and MoE models too; every format runs on the
# wide models, whose rows are multiples of 256 (K-quants, 128x128 FP8 blocks). "group" is the group size for
# group-scaled formats. Add a format here when its quantizer lands (i-quants and ternary have none yet).
SMALL_FORMATS = ["q8_0", "f16", "bf16", "q4_0", "q5_1"]
WIDE_FORMATS = [
    {"format": f} for f in ("f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k", "q4_k",
                            "q5_k", "q6_k", "q8_k", "mxfp4", "mxfp8", "nvfp4", "fp8", "fp8_block", "f8q8", "hqq4",
                            "hqq8")
] + [{"format": "afq%d" % bits, "group": 32} for bits in (2, 3, 4, 5, 6, 8)]


def base_config(model_type, **overrides):
    cfg = {
        "model_type": model_type,
        "vocab_size": 97,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 96,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    cfg.update(overrides)
    return cfg


CASES = {
    "llama": base_config("llama"),
    "llama_tied_llama3": base_config(
        "llama",
        tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16}),
    "tinyllama_mqa_linear_bias": base_config(
        "llama", num_key_value_heads=1, attention_bias=True, mlp_bias=True,
        rope_scaling={"type": "linear", "factor": 2.0}),
    "mistral_swa": base_config("mistral", sliding_window=4, head_dim=16),
    "qwen2": base_config("qwen2", rope_theta=1000000.0, tie_word_embeddings=True),
    "qwen2_swa": base_config("qwen2", use_sliding_window=True, sliding_window=5, max_window_layers=0),
    "qwen3": base_config("qwen3", head_dim=32),
    "mixtral": base_config("mixtral", num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
                           rope_theta=1000000.0),
    "qwen3moe_norm_yarn": base_config(
        "qwen3_moe", head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
        norm_topk_prob=True,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
    "qwen3moe_no_norm": base_config("qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                    norm_topk_prob=False),
    # Phi-3: fused qkv_proj and gate_up_proj. LongRoPE beyond an original context of 8 (SEQ_LEN 11: the long factors,
    # cos/sin scaled by sqrt(1 + ln 8 / ln 8)); within one of 64 (the short factors); a sliding window.
    "phi3_longrope": base_config("phi3", original_max_position_embeddings=8, rope_scaling={
        "type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.6, 3.3, 4.0],
        "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0, 20.0]}),
    "phi3_longrope_short_swa": base_config("phi3", original_max_position_embeddings=64, sliding_window=5,
                                           rope_scaling={"type": "longrope",
                                                         "short_factor": [1.0, 1.2, 1.7, 2.4, 3.0, 4.5, 6.0, 8.0],
                                                         "long_factor": [1.0] * 8}),
    # Gemma 2: sqrt(hidden) embeddings, (1 + w) norms, post-norms, GeGLU, a window on the even layers, attention
    # and final soft-capping at caps small enough to bend these logits; q·k scaled by query_pre_attn_scalar^-1/2
    # (= head_dim here, as llama.cpp assumes for GGUF; 24 in the HF-only case, which is also untied).
    "gemma2": base_config("gemma2", head_dim=32, query_pre_attn_scalar=32, sliding_window=4,
                          attn_logit_softcapping=3.0, final_logit_softcapping=5.0, hidden_act="gelu_pytorch_tanh",
                          hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
    "gemma2_scalar_untied": base_config("gemma2", head_dim=32, query_pre_attn_scalar=24, sliding_window=3,
                                        attn_logit_softcapping=2.0, final_logit_softcapping=None,
                                        hidden_act="gelu_pytorch_tanh", num_hidden_layers=3),
    # Gemma 3: q/k norms, a global layer every third (layers 2 and 5) on the scaled 1e6 base, the windowed layers on
    # their unscaled local base, no soft-capping.
    "gemma3": base_config("gemma3_text", head_dim=32, query_pre_attn_scalar=32, sliding_window=6,
                          sliding_window_pattern=3, num_hidden_layers=6, rope_theta=1000000.0,
                          rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 4.0},
                          attn_logit_softcapping=None, final_logit_softcapping=None,
                          hidden_activation="gelu_pytorch_tanh", hidden_act=None, tie_word_embeddings=True),
    # gpt-oss: q/k/v/o biases, sink logits, a window on the even layers, a router with a bias (softmax over the
    # top-k logits), 4 experts with biases and the clamped SwiGLU (the experts' gate/up weights scaled by the limit,
    # so that it clamps here; gpt_oss_truncated at llama.cpp's 7), YaRN; in
    # Hugging Face's form (experts stored [in, out], gate and up interleaved). Without truncating YaRN's correction
    # range (as the published config), which GGUF cannot say, and with it (llama.cpp's only behaviour).
    "gpt_oss": base_config("gpt_oss", head_dim=16, num_local_experts=4, num_experts_per_tok=2, intermediate_size=64,
                           sliding_window=3, swiglu_limit=1.5, attention_bias=True, rope_theta=100.0,
                           rope_scaling={"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                         "truncate": False, "original_max_position_embeddings": 64}),
    "gpt_oss_truncated": base_config("gpt_oss", head_dim=32, num_local_experts=4, num_experts_per_tok=2,
                                     intermediate_size=64, sliding_window=5, swiglu_limit=7.0, attention_bias=True,
                                     layer_types=["sliding_attention", "full_attention"],
                                     rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 8}),
}


def deepseek_config(model_type, **overrides):
    """A tiny DeepSeek: multi-head latent attention (32 + 32 query/key dims per head, 32 value dims, a 64-wide kv
    latent), layer 0 dense, layers 1-2 MoE with 8 experts of 32, top-2, shared experts. rms_norm_eps 1e-6: the
    latent norms' eps in DeepSeek's code, which llama.cpp replaces by rms_norm_eps, so the GGUF layout agrees."""
    fields = dict(num_hidden_layers=3, num_key_value_heads=4, qk_nope_head_dim=32, qk_rope_head_dim=32,
                  v_head_dim=32, kv_lora_rank=64, q_lora_rank=None, n_routed_experts=8, num_experts_per_tok=2,
                  moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1, moe_layer_freq=1,
                  attention_bias=False, rms_norm_eps=1e-6)
    fields.update(overrides)
    return base_config(model_type, **fields)


CASES.update({
    # DeepSeek-V2-Lite's form: q_proj without a q latent, softmax scores, plain top-k, weights scaled by
    # routed_scaling_factor (not normalized); YaRN with mscale == mscale_all_dim (cos/sin unscaled) and the
    # softmax scale times mscale(4, 0.707)^2. An original context of 16 puts YaRN's correction range at [-4.4, 1.6]
    # before DeepSeek floors/ceils it (at 8 the truncated and exact ranges give the same ramp), and
    # max_position_embeddings = factor x original as in DeepSeek's configs (some Hugging Face versions take YaRN's
    # factor from that ratio when the original context is given).
    "deepseek_v2_lite": deepseek_config(
        "deepseek_v2", scoring_func="softmax", topk_method="greedy", norm_topk_prob=False, routed_scaling_factor=1.5,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}),
    # DeepSeek-V2's form: the q latent (q_a -> norm -> q_b), group-limited routing (the experts of the group with
    # the largest max score only: with max as the group score, keeping 2 groups would never exclude either of the
    # top-2 experts, so routing would equal plain top-k), two shared experts (width 64).
    "deepseek_v2": deepseek_config(
        "deepseek_v2", q_lora_rank=64, scoring_func="softmax", topk_method="group_limited_greedy", n_group=4,
        topk_group=1, norm_topk_prob=False, routed_scaling_factor=2.0, n_shared_experts=2),
    # DeepSeek-V3's form: sigmoid scores, noaux_tc routing (bias-corrected choice, groups ranked by the sum of their
    # two best), normalized weights times routed_scaling_factor; YaRN with mscale == mscale_all_dim = 1.
    "deepseek_v3": deepseek_config(
        "deepseek_v3", q_lora_rank=64, scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2,
        norm_topk_prob=True, routed_scaling_factor=2.5,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}),
})
# Cases GGUF cannot describe: llama.cpp derives Gemma's q·k scale from the model size, not a key, and always
# truncates YaRN's correction range. (The DeepSeek cases all have a GGUF form: rms_norm_eps equal to the latent
# norms' 1e-6, YaRN with mscale == mscale_all_dim, which llama.cpp's unscaled cos/sin assume, and V2 without
# norm_topk_prob, whose weights llama.cpp would scale where DeepSeek's code does not. A DeepSeek case that breaks
# one of these belongs here.)
HF_ONLY = {"gemma2_scalar_untied", "gpt_oss"}
# The DeepSeek cases whose GGUF layout is llama.cpp's current one (kv_b split per head into k_b, transposed, and
# v_b; the latent-width key/value lengths with the per-head ones in *_mla keys; one KV head); the others get the
# older one (kv_b whole, per-head key/value lengths, a KV head per query head). Split: one case without a q latent
# and one with, both with YaRN; whole: the one with a q latent and no YaRN.
GGUF_MLA_SPLIT = {"deepseek_v2_lite", "deepseek_v3"}
WIDE_CASES = {
    "wide_llama": base_config("llama", hidden_size=256, intermediate_size=256, num_hidden_layers=1),
    "wide_qwen3moe": base_config("qwen3_moe", hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                                 head_dim=64, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                                 norm_topk_prob=True),
}

SEQ_LEN = 11


def make_weights(cfg, rng):
    """Random Hugging Face weights (float32), scaled so that activations stay O(1)."""
    mt = cfg["model_type"]
    hidden, n_heads = cfg["hidden_size"], cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_heads)
    hd = ref.head_dim_of(cfg)
    W = {}

    def mat(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(cols)

    gemma = mt in ref.GEMMA

    def norm(n):
        # Gemma stores w of (1 + w).
        return (0.0 if gemma else 1.0) + 0.2 * rng.standard_normal(n)

    def bias(n):
        return 0.2 * rng.standard_normal(n)

    W["model.embed_tokens.weight"] = rng.standard_normal((cfg["vocab_size"], hidden))
    W["model.norm.weight"] = norm(hidden)
    if not cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = mat(cfg["vocab_size"], hidden)
    qkv_bias = mt == "qwen2" or cfg.get("attention_bias", False)
    o_bias = mt != "qwen2" and cfg.get("attention_bias", False)
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        W[p + "input_layernorm.weight"] = norm(hidden)
        W[p + "post_attention_layernorm.weight"] = norm(hidden)
        if gemma:
            W[p + "pre_feedforward_layernorm.weight"] = norm(hidden)
            W[p + "post_feedforward_layernorm.weight"] = norm(hidden)
        if mt in ref.DEEPSEEK:
            W.update(deepseek_layer_weights(cfg, layer, rng, mat, norm))
            continue
        for name, rows in (("q_proj", n_heads * hd), ("k_proj", n_kv * hd), ("v_proj", n_kv * hd)):
            W[p + "self_attn.%s.weight" % name] = mat(rows, hidden)
            if qkv_bias:
                W[p + "self_attn.%s.bias" % name] = bias(rows)
        if mt == "phi3":  # one fused [q; k; v] projection
            W[p + "self_attn.qkv_proj.weight"] = np.concatenate([W.pop(p + "self_attn.%s.weight" % n)
                                                                 for n in ("q_proj", "k_proj", "v_proj")])
        W[p + "self_attn.o_proj.weight"] = mat(hidden, n_heads * hd)
        if o_bias:
            W[p + "self_attn.o_proj.bias"] = bias(hidden)
        if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
            W[p + "self_attn.q_norm.weight"] = norm(hd)
            W[p + "self_attn.k_norm.weight"] = norm(hd)
        if mt == "gpt_oss":
            n_exp, ffn = cfg["num_local_experts"], cfg["intermediate_size"]
            W[p + "self_attn.sinks"] = rng.standard_normal(n_heads)
            W[p + "mlp.router.weight"] = 2.0 * mat(n_exp, hidden)
            W[p + "mlp.router.bias"] = bias(n_exp)
            # [experts, in, out], gate and up interleaved in the outputs, as GptOssExperts holds them.
            W[p + "mlp.experts.gate_up_proj"] = (rng.standard_normal((n_exp, hidden, 2 * ffn)) / math.sqrt(hidden) *
                                                 cfg["swiglu_limit"])
            W[p + "mlp.experts.gate_up_proj_bias"] = bias((n_exp, 2 * ffn))
            W[p + "mlp.experts.down_proj"] = rng.standard_normal((n_exp, ffn, hidden)) / math.sqrt(ffn)
            W[p + "mlp.experts.down_proj_bias"] = bias((n_exp, hidden))
        elif mt == "mixtral":
            ffn = cfg["intermediate_size"]
            W[p + "block_sparse_moe.gate.weight"] = 2.0 * mat(cfg["num_local_experts"], hidden)
            for e in range(cfg["num_local_experts"]):
                pe = p + "block_sparse_moe.experts.%d." % e
                W[pe + "w1.weight"] = mat(ffn, hidden)
                W[pe + "w3.weight"] = mat(ffn, hidden)
                W[pe + "w2.weight"] = mat(hidden, ffn)
        elif mt == "qwen3_moe":
            ffn = cfg["moe_intermediate_size"]
            W[p + "mlp.gate.weight"] = 2.0 * mat(cfg["num_experts"], hidden)
            for e in range(cfg["num_experts"]):
                pe = p + "mlp.experts.%d." % e
                W[pe + "gate_proj.weight"] = mat(ffn, hidden)
                W[pe + "up_proj.weight"] = mat(ffn, hidden)
                W[pe + "down_proj.weight"] = mat(hidden, ffn)
        else:
            ffn = cfg["intermediate_size"]
            W[p + "mlp.gate_proj.weight"] = mat(ffn, hidden)
            W[p + "mlp.up_proj.weight"] = mat(ffn, hidden)
            W[p + "mlp.down_proj.weight"] = mat(hidden, ffn)
            if mt == "phi3":  # one fused [gate; up] projection
                W[p + "mlp.gate_up_proj.weight"] = np.concatenate([W.pop(p + "mlp.gate_proj.weight"),
                                                                   W.pop(p + "mlp.up_proj.weight")])
            if cfg.get("mlp_bias", False):
                W[p + "mlp.gate_proj.bias"] = bias(ffn)
                W[p + "mlp.up_proj.bias"] = bias(ffn)
                W[p + "mlp.down_proj.bias"] = bias(hidden)
    return {k: v.astype(np.float32) for k, v in W.items()}


def deepseek_layer_weights(cfg, layer, rng, mat, norm):
    """One DeepSeek layer's attention and MLP tensors (Hugging Face names); the layer norms are the caller's."""
    p = "model.layers.%d." % layer
    hidden, n_heads = cfg["hidden_size"], cfg["num_attention_heads"]
    q_dim = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    rank = cfg["kv_lora_rank"]
    W = {}
    a = p + "self_attn."
    if cfg.get("q_lora_rank") is None:
        W[a + "q_proj.weight"] = mat(n_heads * q_dim, hidden)
    else:
        W[a + "q_a_proj.weight"] = mat(cfg["q_lora_rank"], hidden)
        W[a + "q_a_layernorm.weight"] = norm(cfg["q_lora_rank"])
        W[a + "q_b_proj.weight"] = mat(n_heads * q_dim, cfg["q_lora_rank"])
    W[a + "kv_a_proj_with_mqa.weight"] = mat(rank + cfg["qk_rope_head_dim"], hidden)
    W[a + "kv_a_layernorm.weight"] = norm(rank)
    W[a + "kv_b_proj.weight"] = mat(n_heads * (cfg["qk_nope_head_dim"] + cfg["v_head_dim"]), rank)
    W[a + "o_proj.weight"] = mat(hidden, n_heads * cfg["v_head_dim"])

    def swiglu(prefix, ffn):
        W[prefix + "gate_proj.weight"] = mat(ffn, hidden)
        W[prefix + "up_proj.weight"] = mat(ffn, hidden)
        W[prefix + "down_proj.weight"] = mat(hidden, ffn)

    m = p + "mlp."
    if not ref.deepseek_moe_layer(cfg, layer):
        swiglu(m, cfg["intermediate_size"])
        return W
    # Router logits of standard deviation ~2: scores spread enough that the top-k and group choices are clear.
    W[m + "gate.weight"] = 2.0 * mat(cfg["n_routed_experts"], hidden)
    if cfg.get("topk_method") == "noaux_tc":
        # Small against the sigmoid scores' spread, as trained biases are, yet enough to reorder close experts.
        W[m + "gate.e_score_correction_bias"] = 0.05 * rng.standard_normal(cfg["n_routed_experts"])
    for e in range(cfg["n_routed_experts"]):
        swiglu(m + "experts.%d." % e, cfg["moe_intermediate_size"])
    if cfg.get("n_shared_experts"):
        swiglu(m + "shared_experts.", cfg["moe_intermediate_size"] * cfg["n_shared_experts"])
    return W


# ---- GGUF layout (spec/ggml.md §4) ---------------------------------------------------------------------------

HF_TO_GGUF_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "block_sparse_moe.gate": "ffn_gate_inp",
    "self_attn.qkv_proj": "attn_qkv",
    "mlp.gate_up_proj": "ffn_gate_up",  # qrt's canonical name; llama.cpp's GGUF calls the fused tensor ffn_up
    "mlp.router": "ffn_gate_inp",  # gpt-oss
    # DeepSeek's multi-head latent attention and shared experts (llama.cpp's deepseek2 names)
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
}
EXPERT_PROJ = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps",
               "w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}
GGUF_ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
             "qwen3_moe": "qwen3moe", "phi3": "phi3", "gemma2": "gemma2", "gemma3_text": "gemma3",
             "gpt_oss": "gpt-oss", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2"}
# Gemma's norms before and after each block (llama.cpp's names).
SANDWICH_LAYER = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                  "post_feedforward_layernorm": "post_ffw_norm"}


def permute_for_interleaved_rope(w, n_head):
    """convert_hf_to_gguf's Q/K permutation: within each head, new row 2i <- row i, 2i+1 <- row i + hd/2."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def split_kv_b(kv_b, n_heads, nope):
    """llama.cpp's converter for MLA: kv_b_proj [heads * (nope + v), kv_lora] -> k_b [heads, kv_lora, nope] (each
    head's key rows transposed, for the query absorption q_nope · K_h) and v_b [heads, v, kv_lora]."""
    per_head = kv_b.reshape(n_heads, -1, kv_b.shape[1])
    return (np.ascontiguousarray(np.swapaxes(per_head[:, :nope], 1, 2)),
            np.ascontiguousarray(per_head[:, nope:]))


def merge_kv_b(k_b, v_b):
    """split_kv_b's inverse: k_b [heads, kv_lora, nope], v_b [heads, v, kv_lora] -> kv_b [heads * (nope + v),
    kv_lora]."""
    per_head = np.concatenate([np.swapaxes(k_b, 1, 2), v_b], axis=1)
    return per_head.reshape(-1, per_head.shape[2])


def hf_to_canonical(name, sandwich=False):
    """Hugging Face name -> (GGUF base name without .weight/.bias, expert index or None, is_bias). `sandwich`:
    Gemma's names, where post_attention_layernorm is the attention output's norm."""
    base, _, kind = name.rpartition(".")
    is_bias = kind == "bias"
    if kind == "sinks":  # gpt-oss's self_attn.sinks, a parameter without .weight
        return "blk.%d.attn_sinks" % int(name.split(".")[2]), None, False
    if kind == "e_score_correction_bias":  # DeepSeek-V3's router bias: llama.cpp's exp_probs_b.bias
        return "blk.%d.exp_probs_b" % int(name.split(".")[2]), None, True
    if base == "model.embed_tokens":
        return "token_embd", None, is_bias
    if base == "model.norm":
        return "output_norm", None, is_bias
    if base == "lm_head":
        return "output", None, is_bias
    parts = base.split(".")
    layer = int(parts[2])
    module = ".".join(parts[3:])
    if sandwich and module in SANDWICH_LAYER:
        return "blk.%d.%s" % (layer, SANDWICH_LAYER[module]), None, is_bias
    if module in HF_TO_GGUF_LAYER:
        return "blk.%d.%s" % (layer, HF_TO_GGUF_LAYER[module]), None, is_bias
    # mlp.experts.E.proj / block_sparse_moe.experts.E.proj
    expert, proj = int(parts[-2]), parts[-1]
    return "blk.%d.%s" % (layer, EXPERT_PROJ[proj]), expert, is_bias


GPT_OSS_EXPERTS = ("mlp.experts.gate_up_proj", "mlp.experts.gate_up_proj_bias", "mlp.experts.down_proj",
                   "mlp.experts.down_proj_bias")


def gpt_oss_expert_from_canonical(hf, get):
    """gpt-oss's expert parameters from the canonical stacks: gate_up [experts, in, 2 out] interleaved, down
    [experts, in, out]; their biases [experts, out]. `get(name)` reads a canonical tensor."""
    layer = int(hf.split(".")[2])
    blk = "blk.%d." % layer
    if hf.endswith("gate_up_proj_bias"):
        gate, up = get(blk + "ffn_gate_exps.bias"), get(blk + "ffn_up_exps.bias")  # [E, F] each
        return np.stack([gate, up], axis=-1).reshape(gate.shape[0], -1)
    if hf.endswith("gate_up_proj"):
        gate, up = get(blk + "ffn_gate_exps"), get(blk + "ffn_up_exps")  # [E, F, H] each
        rows = np.stack([gate, up], axis=2).reshape(gate.shape[0], -1, gate.shape[2])  # [E, 2F, H], gate rows even
        return np.swapaxes(rows, 1, 2)
    if hf.endswith("down_proj_bias"):
        return get(blk + "ffn_down_exps.bias")
    return np.swapaxes(get(blk + "ffn_down_exps"), 1, 2)


def canonical_to_hf_weights(hf_names, dumped):
    """The tool's dump (canonical names, stacked experts) back to Hugging Face names for the reference. A dump of
    the GGUF layout may hold DeepSeek's kv_b split (attn_k_b, attn_v_b): it is reassembled."""
    out = {}
    sandwich = any(".pre_feedforward_layernorm." in n for n in hf_names)
    for hf in hf_names:
        if hf.endswith(GPT_OSS_EXPERTS):
            out[hf] = gpt_oss_expert_from_canonical(hf, lambda n: dumped[n]).astype(np.float64)
            continue
        base, expert, is_bias = hf_to_canonical(hf, sandwich)
        key = base + (".bias" if is_bias else "")
        if base.endswith(".attn_kv_b") and key not in dumped:
            blk = base[: -len("kv_b")]
            out[hf] = merge_kv_b(dumped[blk + "k_b"], dumped[blk + "v_b"]).astype(np.float64)
            continue
        out[hf] = (dumped[key] if expert is None else dumped[key][expert]).astype(np.float64)
    return out


def to_gguf_layout(cfg, W, mla_split=False):
    """Hugging Face weights -> GGUF names, stacked experts, (llama family) permuted Q/K rows and (Gemma) norms
    stored as 1 + w, as llama.cpp's converter writes them; `mla_split` (DeepSeek): kv_b split into k_b and v_b as
    its current converter does, instead of kv_b whole as older ones did. deepseek2's rotated q/k rows keep their
    order: llama.cpp rotates adjacent pairs (rope type NORM) there, as DeepSeek's code does."""
    llama_family = GGUF_ARCH[cfg["model_type"]] == "llama"
    gemma = cfg["model_type"] in ref.GEMMA
    n_heads = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_heads)
    G = {}
    stacked = {}
    if cfg["model_type"] == "gpt_oss":
        W = dict(W)
        for name in [n for n in W if n.endswith(".mlp.experts.gate_up_proj")]:
            prefix, layer = name[: -len("gate_up_proj")], int(name.split(".")[2])
            gu, gub = W.pop(prefix + "gate_up_proj"), W.pop(prefix + "gate_up_proj_bias")
            blk = "blk.%d." % layer
            G[blk + "ffn_gate_exps.weight"] = np.ascontiguousarray(np.swapaxes(gu[:, :, 0::2], 1, 2))
            G[blk + "ffn_up_exps.weight"] = np.ascontiguousarray(np.swapaxes(gu[:, :, 1::2], 1, 2))
            G[blk + "ffn_gate_exps.bias"] = np.ascontiguousarray(gub[:, 0::2])
            G[blk + "ffn_up_exps.bias"] = np.ascontiguousarray(gub[:, 1::2])
            G[blk + "ffn_down_exps.weight"] = np.ascontiguousarray(np.swapaxes(W.pop(prefix + "down_proj"), 1, 2))
            G[blk + "ffn_down_exps.bias"] = W.pop(prefix + "down_proj_bias")
            # llama.cpp's gpt-oss names the MLP's input norm post_attention_norm.
            G[blk + "post_attention_norm.weight"] = W.pop("model.layers.%d.post_attention_layernorm.weight" % layer)
    for name, w in W.items():
        base, expert, is_bias = hf_to_canonical(name, gemma)
        if gemma and name.endswith("norm.weight"):
            w = w + 1.0
        if llama_family and base.endswith(".attn_q"):
            w = permute_for_interleaved_rope(w, n_heads)
        elif llama_family and base.endswith(".attn_k"):
            w = permute_for_interleaved_rope(w, n_kv)
        suffix = ".bias" if is_bias else ".weight"
        if base.endswith(".ffn_gate_up"):  # llama.cpp's phi3: the fused [gate; up] is ffn_up
            base = base[: -len("_gate_up")] + "_up"
        if expert is None:
            G[base + suffix] = w
        else:
            stacked.setdefault(base + suffix, {})[expert] = w
    for name, experts in stacked.items():
        G[name] = np.stack([experts[e] for e in range(len(experts))])
    if mla_split:
        assert cfg["model_type"] in ref.DEEPSEEK, cfg["model_type"]
        for layer in range(cfg["num_hidden_layers"]):
            blk = "blk.%d." % layer
            G[blk + "attn_k_b.weight"], G[blk + "attn_v_b.weight"] = split_kv_b(
                G.pop(blk + "attn_kv_b.weight"), n_heads, cfg["qk_nope_head_dim"])
    rope = cfg.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) == "llama3":
        G["rope_freqs.weight"] = llama3_rope_factors(cfg).astype(np.float32)
    if rope.get("rope_type", rope.get("type")) in ("longrope", "su"):  # llama.cpp's phi3 LongRoPE tensors
        G["rope_factors_long.weight"] = np.asarray(rope["long_factor"], np.float32)
        G["rope_factors_short.weight"] = np.asarray(rope["short_factor"], np.float32)
    return G


def llama3_rope_factors(cfg):
    """convert_hf_to_gguf's rope_freqs for Llama 3.1: a divisor per frequency."""
    rope = cfg["rope_scaling"]
    hd = ref.head_dim_of(cfg)
    base = cfg.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    factors = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(factors)


def gguf_metadata(cfg, variant, mla_split=False):
    """GGUF metadata keys (spec/ggml.md §4.1) describing cfg; `mla_split`: DeepSeek's attention sizes as llama.cpp's
    converter writes them with kv_b split (to_gguf_layout)."""
    arch = GGUF_ARCH[cfg["model_type"]]
    a = arch + "."
    n_heads = cfg["num_attention_heads"]
    hd = ref.head_dim_of(cfg)
    md = {
        "general.architecture": arch,
        a + "block_count": cfg["num_hidden_layers"],
        a + "embedding_length": cfg["hidden_size"],
        a + "feed_forward_length": cfg["intermediate_size"],
        a + "context_length": cfg["max_position_embeddings"],
        a + "attention.head_count": n_heads,
        a + "attention.head_count_kv": cfg.get("num_key_value_heads", n_heads),
        a + "attention.layer_norm_rms_epsilon": cfg["rms_norm_eps"],
        a + "rope.freq_base": cfg.get("rope_theta", 10000.0),
    }
    if hd != cfg["hidden_size"] // n_heads or variant % 2 == 0:
        md[a + "attention.key_length"] = hd
        md[a + "attention.value_length"] = hd
    # Alternate between the explicit vocabulary size and the token list, and scalar vs per-layer head counts.
    if variant % 2 == 0:
        md[a + "vocab_size"] = cfg["vocab_size"]
    else:
        md["tokenizer.ggml.tokens"] = ["t%d" % i for i in range(cfg["vocab_size"])]
        md[a + "attention.head_count"] = [n_heads] * cfg["num_hidden_layers"]
    window = ref.sliding_window_of(cfg)
    if window:
        md[a + "attention.sliding_window"] = window
    if cfg["model_type"] in ref.GEMMA:
        md[a + "attention.sliding_window"] = cfg["sliding_window"]
        md[a + "attention.key_length"] = hd
        md[a + "attention.value_length"] = hd
        if cfg["model_type"] == "gemma2":
            md[a + "attn_logit_softcapping"] = cfg["attn_logit_softcapping"]
            md[a + "final_logit_softcapping"] = cfg["final_logit_softcapping"]
        elif cfg.get("sliding_window_pattern", 6) != 6:
            md[a + "attention.sliding_window_pattern"] = cfg["sliding_window_pattern"]
    if cfg["model_type"] == "mixtral":
        md[a + "expert_count"] = cfg["num_local_experts"]
        md[a + "expert_used_count"] = cfg["num_experts_per_tok"]
    if cfg["model_type"] == "gpt_oss":
        md[a + "expert_count"] = cfg["num_local_experts"]
        md[a + "expert_used_count"] = cfg["num_experts_per_tok"]
        md[a + "expert_feed_forward_length"] = cfg["intermediate_size"]
        md[a + "attention.sliding_window"] = cfg["sliding_window"]
    if cfg["model_type"] == "qwen3_moe":
        md[a + "expert_count"] = cfg["num_experts"]
        md[a + "expert_used_count"] = cfg["num_experts_per_tok"]
        md[a + "expert_feed_forward_length"] = cfg["moe_intermediate_size"]
        md[a + "expert_weights_norm"] = cfg.get("norm_topk_prob", False)
    rope = cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type"))
    if kind == "linear":
        md[a + "rope.scaling.type"] = "linear"
        md[a + "rope.scaling.factor"] = rope["factor"]
    elif kind in ("longrope", "su"):
        # llama.cpp's phi3: no scaling type (the factor tensors carry it), the original context and the cos/sin
        # factor its converter computes.
        original = cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / original
        md[a + "rope.scaling.original_context_length"] = original
        md[a + "rope.scaling.attn_factor"] = (1.0 if factor <= 1 else
                                              math.sqrt(1 + math.log(factor) / math.log(original)))
    elif kind == "yarn":
        md[a + "rope.scaling.type"] = "yarn"
        md[a + "rope.scaling.factor"] = rope["factor"]
        md[a + "rope.scaling.original_context_length"] = rope["original_max_position_embeddings"]
    if cfg["model_type"] in ref.DEEPSEEK:
        md.update(deepseek_gguf_metadata(cfg, a, mla_split))
    return md


def deepseek_gguf_metadata(cfg, a, mla_split):
    """llama.cpp's deepseek2 keys (DeepseekV2Model.set_gguf_parameters; V3 is the same architecture), replacing the
    generic key/value lengths and KV head count."""
    n_heads = cfg["num_attention_heads"]
    nope, rot, v_dim, rank = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    v3 = cfg["model_type"] == "deepseek_v3"
    md = {a + "attention.kv_lora_rank": rank, a + "rope.dimension_count": rot}
    if mla_split:
        # The absorbed form: one head of [rope key | latent] serves every query head, its values the latent.
        md.update({a + "attention.head_count_kv": 1, a + "attention.key_length": rank + rot,
                   a + "attention.value_length": rank, a + "attention.key_length_mla": nope + rot,
                   a + "attention.value_length_mla": v_dim})
    else:
        md.update({a + "attention.head_count_kv": n_heads, a + "attention.key_length": nope + rot,
                   a + "attention.value_length": v_dim})
    if cfg.get("q_lora_rank") is not None:
        md[a + "attention.q_lora_rank"] = cfg["q_lora_rank"]
    # The same defaults as reference_forward.deepseek_route's.
    scoring = cfg.get("scoring_func", "sigmoid" if v3 else "softmax")
    md.update({
        a + "leading_dense_block_count": cfg.get("first_k_dense_replace", 0),
        a + "expert_count": cfg["n_routed_experts"],
        a + "expert_used_count": cfg["num_experts_per_tok"],
        a + "expert_feed_forward_length": cfg["moe_intermediate_size"],
        a + "expert_shared_count": cfg.get("n_shared_experts") or 0,
        a + "expert_weights_scale": cfg.get("routed_scaling_factor", 1.0),
        a + "expert_weights_norm": cfg.get("norm_topk_prob", v3),
        a + "expert_gating_func": {"softmax": 1, "sigmoid": 2}[scoring],  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_*
    })
    # Groups only where the routing uses them: the Hugging Face code ignores n_group under "greedy".
    grouped = cfg.get("topk_method", "noaux_tc" if v3 else "greedy") in ("group_limited_greedy", "noaux_tc")
    if grouped and (cfg.get("n_group") or 1) > 1:
        md[a + "expert_group_count"] = cfg["n_group"]
        md[a + "expert_group_used_count"] = cfg["topk_group"]
    rope = cfg.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) == "yarn":
        # llama.cpp's softmax scale (1 + yarn_log_multiplier ln factor)^2 / sqrt(nope + rope) is DeepSeek's
        # mscale(factor, mscale_all_dim)^2 factor; its cos/sin stay unscaled, as mscale == mscale_all_dim gives.
        assert rope.get("mscale", 1.0) == rope.get("mscale_all_dim", 0.0), "llama.cpp cannot express this YaRN"
        md[a + "rope.scaling.yarn_log_multiplier"] = 0.1 * rope["mscale_all_dim"]
    return md


# ---- running and comparing -----------------------------------------------------------------------------------

class Failures:
    def __init__(self):
        self.items = []
        self.checks = 0

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.items.append(what)
            print("FAIL:", what)


def run_tool(tool, args):
    proc = subprocess.run([tool] + args, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError("qrt_model_forward %s failed (%d):\n%s" % (" ".join(args), proc.returncode, proc.stderr))
    return proc


def compare(name, got, want, failures):
    assert got.shape == want.shape, (got.shape, want.shape)
    worst = 0.0
    for t in range(want.shape[0]):
        rel = np.linalg.norm(got[t] - want[t]) / np.linalg.norm(want[t])
        max_rel = np.max(np.abs(got[t] - want[t])) / np.max(np.abs(want[t]))
        worst = max(worst, rel, max_rel)
    failures.check(worst <= TOLERANCE, "%s: worst relative error %.3g > %g" % (name, worst, TOLERANCE))
    return worst


def run_case(tool, work, case, cfg, seed, format_args, failures, gguf=True, schedules=None):
    rng = np.random.default_rng(seed)
    case_dir = os.path.join(work, case)
    os.makedirs(case_dir, exist_ok=True)
    W = make_weights(cfg, rng)
    weights = os.path.join(case_dir, "model.safetensors")
    save_file(W, weights)
    config_path = os.path.join(case_dir, "config.json")
    with open(config_path, "w") as f:
        json.dump(cfg, f)
    tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
    tokens_arg = ",".join(str(int(t)) for t in tokens)
    fmt_tag = "_".join(a.replace("--", "").replace("=", "-") for a in format_args) or "f32"
    dump = os.path.join(case_dir, "dequant_%s.safetensors" % fmt_tag)
    config_out = os.path.join(case_dir, "config_%s.json" % fmt_tag)
    mla_split = case in GGUF_MLA_SPLIT
    gguf_dump = os.path.join(case_dir, "dequant_gguf_%s.safetensors" % fmt_tag)
    for stale in (dump, config_out, gguf_dump):
        if os.path.exists(stale):
            os.remove(stale)
    if schedules is None:
        schedules = [
            ("batch", None, None),
            ("prompt6+single", "6,1,1,1,1,1", None),
            ("offset7,chunks3+4+1x4", "3,4,1,1,1,1", 7),
        ]
    reference_cache = {}
    worst = 0.0
    for layout in (["hf", "gguf"] if gguf else ["hf"]):
        if layout == "hf":
            source = ["--weights", weights, "--hf-config", config_path]
        else:
            gw = os.path.join(case_dir, "gguf_layout.safetensors")
            save_file(to_gguf_layout(cfg, W, mla_split), gw)
            md_path = os.path.join(case_dir, "gguf_metadata.json")
            with open(md_path, "w") as f:
                json.dump(gguf_metadata(cfg, seed, mla_split), f)
            source = ["--weights", gw, "--gguf-metadata", md_path]
        # DeepSeek's split layout: a format quantizes k_b in rows of qk_nope_head_dim where kv_b has rows of
        # kv_lora_rank, so its reference runs on the weights this layout's own run used. Every other layout holds
        # the Hugging Face layout's rows (or permutes whole rows), quantized alike.
        layout_dump = gguf_dump if layout == "gguf" and mla_split else dump
        for sched_name, chunks, offset in schedules:
            positions = np.arange(SEQ_LEN) + (offset or 0)
            out = os.path.join(case_dir, "logits_%s_%s_%s.f32" % (layout, fmt_tag, sched_name.replace("+", "_")))
            args = source + ["--tokens", tokens_arg, "--positions", ",".join(str(int(p)) for p in positions),
                             "--logits", out] + format_args
            if chunks:
                args += ["--chunks", chunks]
            if layout == "hf" and not os.path.exists(dump):
                args += ["--dump-weights", dump, "--print-config", config_out]
            new_layout_dump = layout_dump != dump and not os.path.exists(layout_dump)
            if new_layout_dump:
                args += ["--dump-weights", layout_dump]
            run_tool(tool, args)
            if new_layout_dump and not format_args:
                # Unquantized, the split layout read back (k_b / v_b reassembled) must be the checkpoint exactly.
                back = canonical_to_hf_weights(W.keys(), load_file(layout_dump))
                differ = [k for k in W if not np.array_equal(back[k], W[k].astype(np.float64))]
                failures.check(not differ, "%s: GGUF layout weights read back differ: %s" % (case, differ[:3]))
            if layout == "hf" and "--format" in format_args:
                # The format must really have been applied (to the q projection at least).
                wanted = format_args[format_args.index("--format") + 1]
                applied = json.load(open(config_out))["tensor_formats"]
                # Phi-3: the fused attn_qkv; DeepSeek: the latent's expansion attn_kv_b.
                k = next((n for n in ("blk.0.attn_k", "blk.0.attn_kv_b") if n in applied), "blk.0.attn_qkv")
                failures.check(applied[k] == wanted, "%s: %s is %s, not %s" % (case, k, applied[k], wanted))
            got = np.fromfile(out, dtype=np.float32).reshape(SEQ_LEN, cfg["vocab_size"]).astype(np.float64)
            key = (layout_dump, tuple(positions))
            if key not in reference_cache:
                used = canonical_to_hf_weights(W.keys(), load_file(layout_dump))
                reference_cache[key] = ref.forward(cfg, used, tokens, positions)
            name = "%s [%s, %s, %s]" % (case, layout, fmt_tag, sched_name)
            worst = max(worst, compare(name, got, reference_cache[key], failures))
    print("ok  %-28s %-30s worst rel error %.2e" % (case, fmt_tag, worst))


def check_gguf_config_matches(tool, work, failures):
    """config_from_gguf and config_from_hf must agree on the transformer's flags (all but the RoPE layout)."""
    for case in ("llama", "tinyllama_mqa_linear_bias", "qwen2", "qwen3", "mixtral", "qwen3moe_norm_yarn",
                 "phi3_longrope", "phi3_longrope_short_swa", "gemma2", "gemma3", "gpt_oss_truncated",
                 "deepseek_v2_lite", "deepseek_v2", "deepseek_v3"):
        d = os.path.join(work, case)
        hf = json.load(open(os.path.join(d, "config_f32.json")))
        probe = os.path.join(d, "config_gguf.json")
        run_tool(tool, ["--weights", os.path.join(d, "gguf_layout.safetensors"), "--gguf-metadata",
                        os.path.join(d, "gguf_metadata.json"), "--tokens", "1", "--logits",
                        os.path.join(d, "probe.f32"), "--print-config", probe])
        gg = json.load(open(probe))
        # DeepSeek rotates adjacent pairs in both layouts (its code de-interleaves before a half-split rotation).
        deepseek = CASES[case]["model_type"] in ref.DEEPSEEK
        want_hf = "interleaved" if deepseek else "half_split"
        want_layout = "interleaved" if deepseek or GGUF_ARCH[CASES[case]["model_type"]] == "llama" else "half_split"
        failures.check(gg["rope_layout"] == want_layout, "%s: GGUF rope layout %s" % (case, gg["rope_layout"]))
        failures.check(hf["rope_layout"] == want_hf, "%s: HF rope layout %s" % (case, hf["rope_layout"]))
        for key in hf:
            # Gemma's norm offset is 1 in config.json checkpoints and 0 in GGUF, whose converter stored 1 + w;
            # DeepSeek-V3 is deepseek3 from config.json and deepseek2 (llama.cpp's one name for both) from GGUF.
            if key in ("rope_layout", "architecture", "rope_attn_factor", "tensor_formats", "norm_weight_offset"):
                continue
            same = abs(hf[key] - gg[key]) <= 1e-6 * abs(hf[key]) if isinstance(hf[key], float) else hf[key] == gg[key]
            failures.check(same, "%s: %s is %r from config.json but %r from GGUF metadata" % (case, key, hf[key], gg[key]))


def check_sensitivity(failures):
    """The features under test must change the logits of these tiny models far beyond the tolerance; otherwise a
    passing comparison would prove nothing about them."""
    ablations = [
        ("llama_tied_llama3", {"rope_scaling": None}),
        ("tinyllama_mqa_linear_bias", {"rope_scaling": None}),
        ("mistral_swa", {"sliding_window": None}),
        ("qwen2_swa", {"use_sliding_window": False}),
        ("qwen3moe_norm_yarn", {"norm_topk_prob": False}),
        ("qwen3moe_norm_yarn", {"rope_scaling": None}),
        ("qwen3moe_no_norm", {"norm_topk_prob": True}),
        ("phi3_longrope", {"rope_scaling": None}),
        ("phi3_longrope_short_swa", {"rope_scaling": None}),
        ("phi3_longrope_short_swa", {"sliding_window": None}),
        ("gemma2", {"attn_logit_softcapping": None}),
        ("gemma2", {"final_logit_softcapping": None}),
        ("gemma2", {"sliding_window": None}),
        ("gemma2_scalar_untied", {"query_pre_attn_scalar": 96}),
        ("gemma3", {"rope_local_base_freq": 1000000.0}),
        ("gemma3", {"sliding_window_pattern": 2}),
        ("gemma3", {"rope_scaling": None}),
        ("gpt_oss", {"swiglu_limit": 1000.0}),
        ("gpt_oss", {"sliding_window": None}),
        ("gpt_oss", {"rope_scaling": dict(CASES["gpt_oss"]["rope_scaling"], truncate=True)}),
        ("gpt_oss_truncated", {"swiglu_limit": 1000.0}),
        # DeepSeek: the routing method, the weights' scaling and V2's normalize-or-scale rule, the shared experts,
        # YaRN's mscale_all_dim (softmax scale and cos/sin) and its floored/ceiled correction range.
        ("deepseek_v2_lite", {"routed_scaling_factor": 1.0}),
        ("deepseek_v2_lite", {"n_shared_experts": None}),
        ("deepseek_v2_lite", {"rope_scaling": dict(CASES["deepseek_v2_lite"]["rope_scaling"], mscale_all_dim=0)}),
        ("deepseek_v2_lite", {"rope_scaling": dict(CASES["deepseek_v2_lite"]["rope_scaling"], truncate=False)}),
        ("deepseek_v2", {"topk_method": "greedy"}),
        ("deepseek_v2", {"routed_scaling_factor": 1.0}),
        ("deepseek_v2", {"norm_topk_prob": True}),
        ("deepseek_v2", {"n_shared_experts": None}),
        ("deepseek_v3", {"topk_group": 4}),
        ("deepseek_v3", {"routed_scaling_factor": 1.0}),
        ("deepseek_v3", {"norm_topk_prob": False}),
        ("deepseek_v3", {"n_shared_experts": None}),
        ("deepseek_v3", {"rope_scaling": dict(CASES["deepseek_v3"]["rope_scaling"], mscale_all_dim=0)}),
    ]
    for case, change in ablations:
        cfg = CASES[case]
        rng = np.random.default_rng(5)
        W = {k: v.astype(np.float64) for k, v in make_weights(cfg, rng).items()}
        tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
        positions = np.arange(SEQ_LEN)
        base = ref.forward(cfg, W, tokens, positions)
        ablated = ref.forward(dict(cfg, **change), W, tokens, positions)
        diff = np.max(np.abs(base - ablated)) / np.max(np.abs(base))
        failures.check(diff > 100 * TOLERANCE, "%s: %r changes the logits by only %.2g" % (case, change, diff))
    # gpt-oss's sink logits: without them (a sink of -inf) the attention, hence the logits, change.
    cfg = CASES["gpt_oss"]
    rng = np.random.default_rng(7)
    W = {k: v.astype(np.float64) for k, v in make_weights(cfg, rng).items()}
    tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
    no_sinks = {k: (np.full_like(v, -1e30) if k.endswith("self_attn.sinks") else v) for k, v in W.items()}
    a = ref.forward(cfg, W, tokens, np.arange(SEQ_LEN))
    b = ref.forward(cfg, no_sinks, tokens, np.arange(SEQ_LEN))
    diff = np.max(np.abs(a - b)) / np.max(np.abs(a))
    failures.check(diff > 100 * TOLERANCE, "gpt_oss: the sinks change the logits by only %.2g" % diff)
    # DeepSeek-V3's e_score_correction_bias: it must change which experts are chosen.
    cfg = CASES["deepseek_v3"]
    rng = np.random.default_rng(9)
    W = {k: v.astype(np.float64) for k, v in make_weights(cfg, rng).items()}
    tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
    no_bias = {k: (0.0 * v if k.endswith("e_score_correction_bias") else v) for k, v in W.items()}
    a = ref.forward(cfg, W, tokens, np.arange(SEQ_LEN))
    b = ref.forward(cfg, no_bias, tokens, np.arange(SEQ_LEN))
    diff = np.max(np.abs(a - b)) / np.max(np.abs(a))
    failures.check(diff > 100 * TOLERANCE, "deepseek_v3: the router bias changes the logits by only %.2g" % diff)
    # DeepSeek rotates pairs (2i, 2i+1): q_pe / k_pe rows regrouped into halves must give different logits.
    for case in ("deepseek_v2_lite", "deepseek_v3"):
        cfg = CASES[case]
        rng = np.random.default_rng(10)
        W = {k: v.astype(np.float64) for k, v in make_weights(cfg, rng).items()}
        tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
        a = ref.forward(cfg, W, tokens, np.arange(SEQ_LEN))
        b = ref.forward(cfg, deepseek_rope_rows_halved(cfg, W), tokens, np.arange(SEQ_LEN))
        diff = np.max(np.abs(a - b)) / np.max(np.abs(a))
        failures.check(diff > 100 * TOLERANCE, "%s: regrouped rope rows change the logits by only %.2g" % (case, diff))
    # Interleaved pairs on GGUF-permuted Q/K rows are what makes the GGUF layout agree: the same rows under
    # half-split RoPE must give different logits.
    cfg = CASES["llama"]
    rng = np.random.default_rng(6)
    W = {k: v.astype(np.float64) for k, v in make_weights(cfg, rng).items()}
    P = dict(W)
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d.self_attn." % layer
        P[p + "q_proj.weight"] = permute_for_interleaved_rope(W[p + "q_proj.weight"], cfg["num_attention_heads"])
        P[p + "k_proj.weight"] = permute_for_interleaved_rope(W[p + "k_proj.weight"], cfg["num_key_value_heads"])
    tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
    a = ref.forward(cfg, W, tokens, np.arange(SEQ_LEN))
    b = ref.forward(cfg, P, tokens, np.arange(SEQ_LEN))
    diff = np.max(np.abs(a - b)) / np.max(np.abs(a))
    failures.check(diff > 100 * TOLERANCE, "permuted Q/K rows under half-split RoPE change the logits by only %.2g" % diff)


def deepseek_rope_rows_halved(cfg, W):
    """W with the rows that make q_pe (each head's tail) and k_pe (kv_a_proj_with_mqa's tail) reordered from
    interleaved pairs to halves, as a half-split rotation would want them."""
    rot, nope = cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"]
    order = np.concatenate([np.arange(0, rot, 2), np.arange(1, rot, 2)])
    out = dict(W)
    for layer in range(cfg["num_hidden_layers"]):
        a = "model.layers.%d.self_attn." % layer
        q_name = a + ("q_proj.weight" if cfg.get("q_lora_rank") is None else "q_b_proj.weight")
        q = W[q_name].reshape(cfg["num_attention_heads"], nope + rot, -1).copy()
        q[:, nope:] = q[:, nope + order]
        out[q_name] = q.reshape(W[q_name].shape)
        kv = W[a + "kv_a_proj_with_mqa.weight"].copy()
        kv[-rot:] = kv[-rot:][order]
        out[a + "kv_a_proj_with_mqa.weight"] = kv
    return out


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4_decode(blocks, scales):
    """openai's MXFP4 pairs: blocks [..., rows, n, 16] (element 2i in the low nibble of byte i), scales [..., rows, n]
    E8M0 -> values [..., rows, 32 n]."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    values = E2M1[codes] * np.exp2(scales.astype(np.float64) - 127)[..., None]
    return values.reshape(*blocks.shape[:-2], -1)


def check_gpt_oss_mxfp4_checkpoint(tool, work, failures):
    """The experts as openai publishes them: MXFP4 _blocks/_scales pairs ([experts, out, in], gate and up rows
    interleaved). Random codes and exponents; qrt on that checkpoint must give the logits of the dense checkpoint
    holding the decoded values (and the reference's)."""
    cfg = CASES["gpt_oss_truncated"]
    rng = np.random.default_rng(11)
    W = make_weights(cfg, rng)
    E, F, H = cfg["num_local_experts"], cfg["intermediate_size"], cfg["hidden_size"]
    quantized, dense = dict(W), dict(W)
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d.mlp.experts." % layer
        for name, rows, cols in (("gate_up_proj", 2 * F, H), ("down_proj", H, F)):
            blocks = rng.integers(0, 256, size=(E, rows, cols // 32, 16), dtype=np.uint8)
            scales = rng.integers(124, 129, size=(E, rows, cols // 32), dtype=np.uint8)
            del quantized[p + name]
            quantized[p + name + "_blocks"], quantized[p + name + "_scales"] = blocks, scales
            dense[p + name] = np.ascontiguousarray(np.swapaxes(mxfp4_decode(blocks, scales), 1, 2), np.float32)
    tokens = ",".join(str(int(t)) for t in rng.integers(0, cfg["vocab_size"], size=SEQ_LEN))
    logits = {}
    for kind, weights in (("mxfp4", quantized), ("dense", dense)):
        d = os.path.join(work, "gpt_oss_" + kind + "_checkpoint")
        os.makedirs(d, exist_ok=True)
        save_file(weights, os.path.join(d, "model.safetensors"))
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        out = os.path.join(d, "logits.f32")
        run_tool(tool, ["--model", d, "--tokens", tokens, "--logits", out])
        logits[kind] = np.fromfile(out, dtype=np.float32).reshape(SEQ_LEN, -1).astype(np.float64)
    compare("gpt_oss MXFP4 checkpoint vs its decoded values", logits["mxfp4"], logits["dense"], failures)
    # Blocks without their scales: refused, naming them.
    d = os.path.join(work, "gpt_oss_mxfp4_no_scales")
    os.makedirs(d, exist_ok=True)
    save_file({k: v for k, v in quantized.items() if not k.endswith("layers.1.mlp.experts.down_proj_scales")},
              os.path.join(d, "model.safetensors"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    proc = subprocess.run([tool, "--model", d, "--tokens", tokens, "--logits", os.path.join(d, "x.f32")],
                          capture_output=True, text=True, timeout=120)
    failures.check(proc.returncode != 0 and "layers.1.mlp.experts.down_proj_scales" in proc.stderr,
                   "MXFP4 blocks without scales: " + proc.stderr)
    want = ref.forward(cfg, {k: v.astype(np.float64) for k, v in dense.items()},
                       [int(t) for t in tokens.split(",")], np.arange(SEQ_LEN))
    worst = compare("gpt_oss MXFP4 checkpoint vs the reference", logits["mxfp4"], want, failures)
    print("ok  %-28s %-30s worst rel error %.2e" % ("gpt_oss_mxfp4_checkpoint", "mxfp4 experts", worst))


def check_gemma3_multimodal_layout(tool, work, failures):
    """Gemma 3's multimodal checkpoints: the text model's config under text_config, its tensors under
    language_model. (older transformers) or model.language_model. (newer), a vision tower beside them that qrt
    ignores: the logits of the text model."""
    cfg = CASES["gemma3"]
    rng = np.random.default_rng(12)
    W = make_weights(cfg, rng)
    tokens = rng.integers(0, cfg["vocab_size"], size=SEQ_LEN)
    want = ref.forward(cfg, {k: v.astype(np.float64) for k, v in W.items()}, tokens, np.arange(SEQ_LEN))
    for scheme in ("language_model.", "model.language_model."):
        def renamed(name):
            if scheme == "language_model.":
                return scheme + name
            return scheme + name[len("model."):] if name.startswith("model.") else name
        d = os.path.join(work, "gemma3_multimodal_" + scheme.replace(".", "_"))
        os.makedirs(d, exist_ok=True)
        tensors = {renamed(k): v for k, v in W.items()}
        tensors["vision_tower.vision_model.embeddings.patch_embedding.weight"] = rng.standard_normal(
            (8, 3, 2, 2)).astype(np.float32)
        save_file(tensors, os.path.join(d, "model.safetensors"))
        text = {k: v for k, v in cfg.items() if k != "model_type"}
        json.dump({"model_type": "gemma3", "text_config": dict(text, model_type="gemma3_text"),
                   "vision_config": {"model_type": "siglip_vision_model"}}, open(os.path.join(d, "config.json"), "w"))
        out = os.path.join(d, "logits.f32")
        run_tool(tool, ["--model", d, "--tokens", ",".join(str(int(t)) for t in tokens), "--positions",
                        ",".join(str(p) for p in range(SEQ_LEN)), "--logits", out])
        got = np.fromfile(out, dtype=np.float32).reshape(SEQ_LEN, -1).astype(np.float64)
        worst = compare("gemma3 multimodal checkpoint (%s)" % scheme, got, want, failures)
        print("ok  %-28s %-30s worst rel error %.2e" % ("gemma3_multimodal", scheme, worst))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures = Failures()
    check_sensitivity(failures)
    for i, (case, cfg) in enumerate(CASES.items()):
        run_case(tool, work, case, cfg, 1000 + i, [], failures, gguf=case not in HF_ONLY)
        run_case(tool, work, case, cfg, 1000 + i, ["--format", "q8_0"], failures, gguf=case not in HF_ONLY)
    check_gguf_config_matches(tool, work, failures)
    check_gpt_oss_mxfp4_checkpoint(tool, work, failures)
    check_gemma3_multimodal_layout(tool, work, failures)
    # Every listed format on two architectures (dense and MoE), batch and cache schedules, HF layout.
    quick = [("batch", None, None), ("prompt6+single", "6,1,1,1,1,1", None)]
    for fmt in SMALL_FORMATS:
        for case in ("qwen2", "mixtral"):
            run_case(tool, work, case, CASES[case], 7, ["--format", fmt], failures, gguf=False, schedules=quick)
    for spec in WIDE_FORMATS:
        args = ["--format", spec["format"]] + (["--group-size", str(spec["group"])] if "group" in spec else [])
        for case, cfg in WIDE_CASES.items():
            run_case(tool, work, case, cfg, 8, args, failures, gguf=False, schedules=quick)
    # A per-tensor mix of formats.
    mix = ["--format", "q8_0", "--tensor-format", "blk.0.attn_q=f16", "--tensor-format", "token_embd=bf16",
           "--tensor-format", "blk.1.ffn_down_exps=f32"]
    run_case(tool, work, "qwen3moe_norm_yarn", CASES["qwen3moe_norm_yarn"], 1008, mix, failures, gguf=False)
    print("%d checks, %d failures" % (failures.checks, len(failures.items)))
    return 1 if failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
