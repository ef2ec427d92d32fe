"""An independent numpy reference forward pass for decoder-only transformers, written from the Hugging Face
modeling code conventions (modeling_llama / mistral / mixtral / qwen2 / qwen3 / qwen3_moe / phi3 / gemma2 /
gemma3 and modeling_rope_utils; DeepSeek-V2 / V3 from DeepSeek's own modeling_deepseek.py), in float64. It reads
the Hugging Face config.json dict and Hugging Face tensor names.

forward(config, weights, tokens, positions) -> logits [tokens, vocab] for every position, all tokens processed
at once with a causal (and, where configured, sliding-window) mask over positions.
"""

import math

import numpy as np


def rms_norm(x, weight, eps):
    # LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(variance + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    # gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def soft_cap(x, cap):
    return cap * np.tanh(x / cap)


GEMMA = ("gemma2", "gemma3_text")
DEEPSEEK = ("deepseek_v2", "deepseek_v3")


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def head_dim_of(cfg):
    if cfg["model_type"] == "qwen3":
        return cfg.get("head_dim", 128)
    if cfg["model_type"] == "gpt_oss":
        return cfg.get("head_dim", 64)
    if cfg["model_type"] in GEMMA:
        return cfg.get("head_dim", 256)
    if cfg["model_type"] in DEEPSEEK:  # the query/key head: the unrotated part, then the rotated one
        return cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    hd = cfg.get("head_dim")
    return hd if hd else cfg["hidden_size"] // cfg["num_attention_heads"]


def get_mscale(scale, mscale=1.0):
    # YaRN's magnitude correction (DeepSeek's yarn_get_mscale): none without extension.
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_parameters(cfg, seq_len=None):
    """(inv_freq [dim/2], attention_scaling, dim) as Hugging Face's ROPE_INIT_FUNCTIONS compute them; `seq_len` (the
    forward's largest position + 1) picks LongRoPE's factor set as Phi-3's dynamic update does. DeepSeek rotates only
    the qk_rope_head_dim tail of each head, with its own YaRN defaults."""
    base = cfg.get("rope_theta", 10000.0)
    deepseek = cfg["model_type"] in DEEPSEEK
    head_dim = cfg["qk_rope_head_dim"] if deepseek else head_dim_of(cfg)
    dim = int(head_dim * cfg.get("partial_rotary_factor", 1.0))
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    scaling = cfg.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    attention_scaling = 1.0
    if rope_type == "default":
        pass
    elif rope_type == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif rope_type == "llama3":
        factor = scaling["factor"]
        low_freq_factor = scaling["low_freq_factor"]
        high_freq_factor = scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
        inv_freq = np.where(is_medium, smoothed, inv_freq_llama)
    elif rope_type == "yarn":
        factor = scaling["factor"]
        original = scaling.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        attention_scaling = scaling.get("attention_factor")
        if deepseek:
            # DeepseekV2YarnRotaryEmbedding: cos/sin always scaled by the ratio, with defaults mscale 1 and
            # mscale_all_dim 0 (whose mscale is 1), where Hugging Face's generic YaRN falls back to get_mscale(factor)
            # unless both are set. The two agree for mscale 1 / mscale_all_dim 0 and for mscale == mscale_all_dim.
            original = scaling.get("original_max_position_embeddings", 4096)
            attention_scaling = (get_mscale(factor, scaling.get("mscale", 1.0)) /
                                 get_mscale(factor, scaling.get("mscale_all_dim", 0.0)))
        if attention_scaling is None:
            if scaling.get("mscale") and scaling.get("mscale_all_dim"):
                attention_scaling = get_mscale(factor, scaling["mscale"]) / get_mscale(factor, scaling["mscale_all_dim"])
            else:
                attention_scaling = get_mscale(factor)
        beta_fast = scaling.get("beta_fast") or 32
        beta_slow = scaling.get("beta_slow") or 1

        def correction_dim(num_rotations):
            return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if scaling.get("truncate", True):  # gpt-oss keeps the fractional range
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        inv_extrapolation = 1.0 / pos_freqs
        inv_interpolation = 1.0 / (factor * pos_freqs)
        inv_freq = inv_interpolation * (1 - extrapolation_factor) + inv_extrapolation * extrapolation_factor
    elif rope_type in ("longrope", "su"):
        # Phi-3: with a top-level original context, factor = max_position_embeddings / original.
        original = cfg.get("original_max_position_embeddings")
        if original:
            factor = cfg["max_position_embeddings"] / original
        else:
            original = cfg["max_position_embeddings"]
            factor = scaling.get("factor", 1.0)
        attention_scaling = scaling.get("attention_factor")
        if attention_scaling is None:
            attention_scaling = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        ext = scaling["long_factor"] if seq_len is not None and seq_len > original else scaling["short_factor"]
        inv_freq = 1.0 / (np.asarray(ext, dtype=np.float64) * base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    else:
        raise ValueError("rope type " + rope_type)
    return inv_freq, attention_scaling, dim


def apply_rotary(x, positions, inv_freq, attention_scaling, dim):
    """x: [tokens, heads, head_dim]; Hugging Face rotate_half over the first `dim` elements."""
    freqs = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)  # [tokens, dim/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos = (np.cos(emb) * attention_scaling)[:, None, :]
    sin = (np.sin(emb) * attention_scaling)[:, None, :]
    rot, rest = x[..., :dim], x[..., dim:]
    x1, x2 = rot[..., : dim // 2], rot[..., dim // 2 :]
    rotate_half = np.concatenate([-x2, x1], axis=-1)
    return np.concatenate([rot * cos + rotate_half * sin, rest], axis=-1)


def sliding_window_of(cfg):
    mt = cfg["model_type"]
    if mt in ("mistral", "mixtral"):
        return cfg.get("sliding_window", 4096 if mt == "mistral" else None) or 0
    if mt == "phi3":
        return cfg.get("sliding_window") or 0
    if mt in ("qwen2", "qwen3", "qwen3_moe"):
        if cfg.get("use_sliding_window", False) and cfg.get("max_window_layers", 28) == 0:
            return cfg.get("sliding_window", 4096)
        return 0
    return 0


def layer_window(cfg, layer):
    """The sliding window of one layer (0 = full attention): Gemma 2 windows the even layers, Gemma 3 all but every
    sliding_window_pattern-th; the others use one window for every layer."""
    mt = cfg["model_type"]
    if mt == "gemma2":
        return cfg.get("sliding_window", 4096) if layer % 2 == 0 else 0
    if mt == "gemma3_text":
        return cfg.get("sliding_window", 4096) if (layer + 1) % cfg.get("sliding_window_pattern", 6) else 0
    if mt == "gpt_oss":
        types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention"
                                           for i in range(cfg["num_hidden_layers"])]
        return cfg.get("sliding_window", 128) if types[layer] == "sliding_attention" else 0
    return sliding_window_of(cfg)


def split_fused(cfg, W):
    """Phi-3's qkv_proj ([q; k; v] rows) and gate_up_proj ([gate; up] rows, chunked in half as Phi3MLP does)."""
    n_heads = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_heads
    hd = head_dim_of(cfg)
    out = dict(W)
    for name, w in W.items():
        if name.endswith("self_attn.qkv_proj.weight"):
            p = name[: -len("qkv_proj.weight")]
            q, k, v = np.split(w, [n_heads * hd, (n_heads + n_kv) * hd])
            out.update({p + "q_proj.weight": q, p + "k_proj.weight": k, p + "v_proj.weight": v})
        elif name.endswith("mlp.gate_up_proj.weight"):
            p = name[: -len("gate_up_proj.weight")]
            gate, up = np.split(w, 2)
            out.update({p + "gate_proj.weight": gate, p + "up_proj.weight": up})
    return out


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def forward(cfg, W, tokens, positions):
    mt = cfg["model_type"]
    gemma = mt in GEMMA
    hidden = cfg["hidden_size"]
    n_heads = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_heads
    hd = head_dim_of(cfg)
    eps = cfg.get("rms_norm_eps", 1e-5 if mt == "mixtral" else 1e-6)
    positions = np.asarray(positions)
    seq_len = int(positions.max()) + 1
    rope_global = rope_parameters(cfg, seq_len)
    # Gemma 3's windowed layers: their own base, unscaled (Gemma3RotaryEmbedding for the local layers).
    rope_local = rope_global
    if mt == "gemma3_text":
        rope_local = rope_parameters(dict(cfg, rope_theta=cfg.get("rope_local_base_freq", 10000.0), rope_scaling=None))
    scaling = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if gemma else 1.0 / math.sqrt(hd)
    attn_cap = cfg.get("attn_logit_softcapping", 50.0 if mt == "gemma2" else None) if gemma else None
    final_cap = cfg.get("final_logit_softcapping", 30.0 if mt == "gemma2" else None) if gemma else None
    T = len(tokens)
    dist = positions[:, None] - positions[None, :]

    def norm(x, name):
        # Gemma's RMSNorm scales by (1 + weight).
        w = W[name]
        return rms_norm(x, 1.0 + w if gemma else w, eps)

    W = split_fused(cfg, W)
    x = W["model.embed_tokens.weight"][np.asarray(tokens)]
    if gemma:
        x = x * math.sqrt(hidden)
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        get = W.get
        # Mask over positions: key s visible to query t when pos[s] <= pos[t] (and within the window).
        window = layer_window(cfg, layer)
        visible = dist >= 0
        if window:
            visible &= dist < window
        inv_freq, attention_scaling, rot_dim = rope_local if window and mt == "gemma3_text" else rope_global
        h = norm(x, p + "input_layernorm.weight")
        if mt in DEEPSEEK:
            out = mla_attention(cfg, W, p, h, positions, visible, rope_global)
        else:
            a = p + "self_attn."
            q = linear(h, W[a + "q_proj.weight"], get(a + "q_proj.bias")).reshape(T, n_heads, hd)
            k = linear(h, W[a + "k_proj.weight"], get(a + "k_proj.bias")).reshape(T, n_kv, hd)
            v = linear(h, W[a + "v_proj.weight"], get(a + "v_proj.bias")).reshape(T, n_kv, hd)
            if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
                q = norm(q, a + "q_norm.weight")
                k = norm(k, a + "k_norm.weight")
            q = apply_rotary(q, positions, inv_freq, attention_scaling, rot_dim)
            k = apply_rotary(k, positions, inv_freq, attention_scaling, rot_dim)
            # repeat_kv: each kv head serves n_heads / n_kv consecutive query heads.
            k = np.repeat(k, n_heads // n_kv, axis=1)
            v = np.repeat(v, n_heads // n_kv, axis=1)
            scores = np.einsum("thd,shd->hts", q, k) * scaling
            if attn_cap:
                scores = soft_cap(scores, attn_cap)
            scores = np.where(visible[None, :, :], scores, -np.inf)
            if mt == "gpt_oss":
                # GptOss's sinks: one more logit per head in the softmax, dropped after it.
                sinks = np.broadcast_to(W[a + "sinks"][:, None, None], (n_heads, T, 1))
                probs = softmax(np.concatenate([scores, sinks], axis=-1), axis=-1)[..., :-1]
            else:
                probs = softmax(scores, axis=-1)
            attn = np.einsum("hts,shd->thd", probs, v).reshape(T, n_heads * hd)
            out = linear(attn, W[a + "o_proj.weight"], get(a + "o_proj.bias"))
        if gemma:
            x = x + norm(out, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + out
            h = norm(x, p + "post_attention_layernorm.weight")
        if mt in ("mixtral", "qwen3_moe"):
            x = x + moe_block(cfg, W, p, h)
        elif mt == "gpt_oss":
            x = x + gpt_oss_moe(cfg, W, p, h)
        elif mt in DEEPSEEK and deepseek_moe_layer(cfg, layer):
            x = x + deepseek_moe(cfg, W, p, h)
        else:  # DeepSeek's dense layers too: DeepseekV2MLP of intermediate_size
            gate = linear(h, W[p + "mlp.gate_proj.weight"], get(p + "mlp.gate_proj.bias"))
            up = linear(h, W[p + "mlp.up_proj.weight"], get(p + "mlp.up_proj.bias"))
            act = gelu_tanh(gate) if gemma else silu(gate)
            mlp = linear(act * up, W[p + "mlp.down_proj.weight"], get(p + "mlp.down_proj.bias"))
            x = x + (norm(mlp, p + "post_feedforward_layernorm.weight") if gemma else mlp)

    x = norm(x, "model.norm.weight")
    tied = cfg.get("tie_word_embeddings", gemma)
    lm_head = W["model.embed_tokens.weight"] if tied else W["lm_head.weight"]
    logits = x @ lm_head.T
    return soft_cap(logits, final_cap) if final_cap else logits


def gpt_oss_moe(cfg, W, p, h):
    """GptOssMLP: a router with a bias, softmax over the top-k logits; experts with biases on [in, out] parameters,
    gate and up interleaved, the clamped SwiGLU."""
    limit, alpha = cfg.get("swiglu_limit", 7.0), 1.702
    logits = h @ W[p + "mlp.router.weight"].T + W[p + "mlp.router.bias"]
    gate_up, gate_up_b = W[p + "mlp.experts.gate_up_proj"], W[p + "mlp.experts.gate_up_proj_bias"]
    down, down_b = W[p + "mlp.experts.down_proj"], W[p + "mlp.experts.down_proj_bias"]
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        selected = np.argsort(-logits[t], kind="stable")[: cfg["num_experts_per_tok"]]
        weights = softmax(logits[t, selected])
        for e, w in zip(selected, weights):
            gu = h[t] @ gate_up[e] + gate_up_b[e]
            gate, up = np.minimum(gu[0::2], limit), np.clip(gu[1::2], -limit, limit)
            glu = gate / (1.0 + np.exp(-alpha * gate))
            out[t] += w * ((up + 1.0) * glu @ down[e] + down_b[e])
    return out


def moe_block(cfg, W, p, h):
    """MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock: softmax router, top-k, optional renormalization."""
    if cfg["model_type"] == "mixtral":
        router = W[p + "block_sparse_moe.gate.weight"]
        n_experts, top_k, renorm = cfg["num_local_experts"], cfg["num_experts_per_tok"], True

        def expert(e, x):
            pe = p + "block_sparse_moe.experts.%d." % e
            return linear(silu(linear(x, W[pe + "w1.weight"])) * linear(x, W[pe + "w3.weight"]), W[pe + "w2.weight"])
    else:
        router = W[p + "mlp.gate.weight"]
        n_experts, top_k, renorm = cfg["num_experts"], cfg["num_experts_per_tok"], cfg.get("norm_topk_prob", False)

        def expert(e, x):
            pe = p + "mlp.experts.%d." % e
            return linear(silu(linear(x, W[pe + "gate_proj.weight"])) * linear(x, W[pe + "up_proj.weight"]),
                          W[pe + "down_proj.weight"])

    assert router.shape[0] == n_experts
    probs = softmax(h @ router.T, axis=-1)  # [T, E]
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        # torch.topk order: largest first; random weights make ties impossible in practice.
        selected = np.argsort(-probs[t], kind="stable")[:top_k]
        weights = probs[t, selected]
        if renorm:
            weights = weights / weights.sum()
        for e, w in zip(selected, weights):
            out[t] += w * expert(int(e), h[t : t + 1])[0]
    return out


# ---- DeepSeek-V2 / V3 (DeepSeek's modeling_deepseek.py; Hugging Face's modeling_deepseek_v2 / v3 agree on these
# test configurations, see the notes at deepseek_route) ---------------------------------------------------------

# The latent norms (q_a_layernorm, kv_a_layernorm) are built without an eps argument in DeepSeek's code and in
# Hugging Face's, so they keep DeepseekV2RMSNorm's default rather than rms_norm_eps.
LATENT_NORM_EPS = 1e-6


def deinterleave(x):
    """DeepSeek's apply_rotary_pos_emb views the rotated part as pairs (2i, 2i+1) and moves them to (i, i + d/2)
    before the half-split rotation: each consecutive pair turns by frequency i. q and k are permuted alike, so
    their dot products need no inverse permutation."""
    return np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)


def deepseek_softmax_scale(cfg):
    """(qk_nope_head_dim + qk_rope_head_dim)^-1/2, times mscale^2 for YaRN's mscale_all_dim: DeepSeek moves that
    part of YaRN's attention temperature from cos/sin (which carry only mscale / mscale_all_dim) onto the scores."""
    scale = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
    rope_scaling = cfg.get("rope_scaling")
    if rope_scaling and rope_scaling.get("mscale_all_dim"):
        m = get_mscale(rope_scaling["factor"], rope_scaling["mscale_all_dim"])
        scale *= m * m
    return scale


def mla_attention(cfg, W, p, h, positions, visible, rope):
    """DeepseekV2Attention (V3's is the same), multi-head latent attention computed without weight absorption:
    q from q_proj or the low-rank q_a -> norm -> q_b path; one compressed kv latent and one rotated key part k_pe
    shared by every head; kv_b expands the normed latent into each head's unrotated key and value."""
    T = h.shape[0]
    n_heads = cfg["num_attention_heads"]
    nope, rot, v_dim, rank = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    a = p + "self_attn."
    get = W.get
    if cfg.get("q_lora_rank") is None:
        q = linear(h, W[a + "q_proj.weight"], get(a + "q_proj.bias"))
    else:
        q_latent = linear(h, W[a + "q_a_proj.weight"], get(a + "q_a_proj.bias"))
        q = linear(rms_norm(q_latent, W[a + "q_a_layernorm.weight"], LATENT_NORM_EPS), W[a + "q_b_proj.weight"])
    q = q.reshape(T, n_heads, nope + rot)
    kv_a = linear(h, W[a + "kv_a_proj_with_mqa.weight"], get(a + "kv_a_proj_with_mqa.bias"))
    compressed, k_pe = kv_a[:, :rank], kv_a[:, None, rank:]  # k_pe: [T, 1, rot], one head for all
    kv = linear(rms_norm(compressed, W[a + "kv_a_layernorm.weight"], LATENT_NORM_EPS), W[a + "kv_b_proj.weight"])
    kv = kv.reshape(T, n_heads, nope + v_dim)
    k_nope, v = kv[..., :nope], kv[..., nope:]
    inv_freq, attention_scaling, dim = rope
    assert dim == rot
    q_pe = apply_rotary(deinterleave(q[..., nope:]), positions, inv_freq, attention_scaling, dim)
    k_pe = apply_rotary(deinterleave(k_pe), positions, inv_freq, attention_scaling, dim)
    query = np.concatenate([q[..., :nope], q_pe], axis=-1)
    key = np.concatenate([k_nope, np.broadcast_to(k_pe, (T, n_heads, rot))], axis=-1)
    scores = np.einsum("thd,shd->hts", query, key) * deepseek_softmax_scale(cfg)
    probs = softmax(np.where(visible[None, :, :], scores, -np.inf), axis=-1)
    attn = np.einsum("hts,shd->thd", probs, v).reshape(T, n_heads * v_dim)
    return linear(attn, W[a + "o_proj.weight"], get(a + "o_proj.bias"))


def deepseek_moe_layer(cfg, layer):
    """DeepseekV2DecoderLayer's choice: MoE when routed experts exist, past the first dense layers, every
    moe_layer_freq-th layer."""
    return (cfg.get("n_routed_experts") is not None and layer >= cfg.get("first_k_dense_replace", 0)
            and layer % cfg.get("moe_layer_freq", 1) == 0)


def deepseek_route(cfg, logits, bias=None):
    """MoEGate for one token's router logits [experts] -> (expert ids, weights).

    Scores: softmax or sigmoid. Selection: "greedy" = top-k of the scores; "group_limited_greedy" (V2) keeps the
    topk_group groups with the largest max score; "noaux_tc" (V3) chooses on scores + e_score_correction_bias,
    ranks groups by the sum of their two largest choice scores, and weights with the unbiased scores. Experts of
    dropped groups are -inf here, as in Hugging Face's DeepseekV3TopkRouter; DeepSeek's own code (and Hugging
    Face's DeepseekV2TopkRouter) fill them with 0, which differs only when fewer than top_k kept experts have a
    positive choice score (a kept noaux_tc score can be negative through its bias): then 0 picks a dropped expert,
    which the group limit means to exclude.
    Weights: V3 normalizes (norm_topk_prob, top_k > 1) and then always multiplies by routed_scaling_factor; V2
    (DeepSeek's code) multiplies only when it does not normalize. Hugging Face's DeepseekV2TopkRouter ignores
    norm_topk_prob and always multiplies; the cases here do not normalize on V2, where both agree."""
    v3 = cfg["model_type"] == "deepseek_v3"
    top_k = cfg["num_experts_per_tok"]
    if cfg.get("scoring_func", "sigmoid" if v3 else "softmax") == "softmax":
        scores = softmax(logits)
    else:
        scores = 1.0 / (1.0 + np.exp(-logits))
    method = cfg.get("topk_method", "noaux_tc" if v3 else "greedy")
    choice = scores + bias if method == "noaux_tc" and bias is not None else scores
    if method in ("group_limited_greedy", "noaux_tc"):
        groups = choice.reshape(cfg.get("n_group") or 1, -1)
        if method == "group_limited_greedy":
            group_scores = groups.max(axis=-1)
        else:
            group_scores = np.sort(groups, axis=-1)[:, -2:].sum(axis=-1)
        kept = np.zeros(groups.shape[0], dtype=bool)
        kept[np.argsort(-group_scores, kind="stable")[: cfg.get("topk_group") or groups.shape[0]]] = True
        choice = np.where(np.repeat(kept, groups.shape[1]), choice, -np.inf)
    elif method != "greedy":
        raise ValueError("topk_method " + method)
    selected = np.argsort(-choice, kind="stable")[:top_k]
    weights = scores[selected]
    normalize = top_k > 1 and cfg.get("norm_topk_prob", v3)
    if normalize:
        weights = weights / weights.sum()
    if v3 or not normalize:
        weights = weights * cfg.get("routed_scaling_factor", 1.0)
    return selected, weights


def deepseek_moe(cfg, W, p, h):
    """DeepseekV2MoE / DeepseekV3MoE: the routed experts' weighted SwiGLU outputs plus the shared experts' (one
    SwiGLU MLP of moe_intermediate_size * n_shared_experts)."""
    m = p + "mlp."

    def swiglu(prefix, x):
        return linear(silu(linear(x, W[prefix + "gate_proj.weight"])) * linear(x, W[prefix + "up_proj.weight"]),
                      W[prefix + "down_proj.weight"])

    router = W[m + "gate.weight"]
    assert router.shape[0] == cfg["n_routed_experts"]
    logits = h @ router.T
    bias = W.get(m + "gate.e_score_correction_bias")
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        selected, weights = deepseek_route(cfg, logits[t], bias)
        for e, w in zip(selected, weights):
            out[t] += w * swiglu(m + "experts.%d." % e, h[t : t + 1])[0]
    if cfg.get("n_shared_experts"):
        width = W[m + "shared_experts.gate_proj.weight"].shape[0]
        assert width == cfg["moe_intermediate_size"] * cfg["n_shared_experts"], width
        out = out + swiglu(m + "shared_experts.", h)
    return out
