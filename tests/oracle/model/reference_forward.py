"""An independent numpy reference forward pass for decoder-only transformers, written from the Hugging Face
modeling code conventions (modeling_llama / mistral / mixtral / qwen2 / qwen3 / qwen3_moe / phi3 / gemma2 /
gemma3 and modeling_rope_utils), in float64. It reads the Hugging Face config.json dict and Hugging Face tensor names.

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
    hd = cfg.get("head_dim")
    return hd if hd else cfg["hidden_size"] // cfg["num_attention_heads"]


def rope_parameters(cfg, seq_len=None):
    """(inv_freq [dim/2], attention_scaling, dim) as Hugging Face's ROPE_INIT_FUNCTIONS compute them; `seq_len` (the
    forward's largest position + 1) picks LongRoPE's factor set as Phi-3's dynamic update does."""
    base = cfg.get("rope_theta", 10000.0)
    head_dim = head_dim_of(cfg)
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

        def get_mscale(scale, mscale=1.0):
            return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

        attention_scaling = scaling.get("attention_factor")
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
        q = linear(h, W[p + "self_attn.q_proj.weight"], get(p + "self_attn.q_proj.bias")).reshape(T, n_heads, hd)
        k = linear(h, W[p + "self_attn.k_proj.weight"], get(p + "self_attn.k_proj.bias")).reshape(T, n_kv, hd)
        v = linear(h, W[p + "self_attn.v_proj.weight"], get(p + "self_attn.v_proj.bias")).reshape(T, n_kv, hd)
        if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
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
            sinks = np.broadcast_to(W[p + "self_attn.sinks"][:, None, None], (n_heads, T, 1))
            probs = softmax(np.concatenate([scores, sinks], axis=-1), axis=-1)[..., :-1]
        else:
            probs = softmax(scores, axis=-1)
        attn = np.einsum("hts,shd->thd", probs, v).reshape(T, n_heads * hd)
        out = linear(attn, W[p + "self_attn.o_proj.weight"], get(p + "self_attn.o_proj.bias"))
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
        else:
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
