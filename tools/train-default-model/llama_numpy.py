"""The default model's architecture and an independent float64 numpy forward of it, with Hugging Face Llama
conventions: weights named and shaped as in a LlamaForCausalLM checkpoint (linear weights [out, in], y = x·Wᵀ),
RMSNorm, half-split RoPE (rotate_half), grouped-query attention, SwiGLU MLP, tied embeddings.

Used by train.py (to check the JAX model against it) and by export.py (to record reference greedy ids)."""
import dataclasses
import json

import numpy as np


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 1024
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    bos_token_id: int = 0
    eos_token_id: int = 1

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def hf_config(self):
        """config.json of a Hugging Face LlamaForCausalLM with these sizes (tied embeddings: no lm_head)."""
        fields = dataclasses.asdict(self)
        fields.update({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "head_dim": self.head_dim,
                       "hidden_act": "silu", "tie_word_embeddings": True, "attention_bias": False,
                       "mlp_bias": False, "rope_scaling": None, "initializer_range": 0.02,
                       "torch_dtype": "float32", "use_cache": True})
        return fields

    @staticmethod
    def from_json(text):
        doc = json.loads(text)
        names = {f.name for f in dataclasses.fields(LlamaConfig)}
        return LlamaConfig(**{k: v for k, v in doc.items() if k in names})


def parameter_shapes(cfg):
    """Every weight of the model, HF name -> shape."""
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, d), "model.norm.weight": (d,)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (cfg.num_attention_heads * hd, d),
            p + "self_attn.k_proj.weight": (cfg.num_key_value_heads * hd, d),
            p + "self_attn.v_proj.weight": (cfg.num_key_value_heads * hd, d),
            p + "self_attn.o_proj.weight": (d, cfg.num_attention_heads * hd),
            p + "post_attention_layernorm.weight": (d,),
            p + "mlp.gate_proj.weight": (f, d),
            p + "mlp.up_proj.weight": (f, d),
            p + "mlp.down_proj.weight": (d, f),
        })
    return shapes


def rope_tables(cfg, positions):
    """cos, sin: [n, head_dim], the half-split layout (frequencies repeated for both halves)."""
    inv_freq = cfg.rope_theta ** (-np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [n, hd/2]
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def forward(cfg, weights, ids):
    """Logits [n, vocab] for token ids [n] (one sequence from position 0, causal), in float64."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    n, hd = len(ids), cfg.head_dim
    h_q, h_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    x = w["model.embed_tokens.weight"][np.asarray(ids)]  # x: [n, hidden]
    cos, sin = rope_tables(cfg, np.arange(n))  # [n, hd]
    mask = np.triu(np.full((n, n), -np.inf), k=1)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], cfg.rms_norm_eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, h_q, hd)  # [n, heads, hd]
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, h_kv, hd)  # [n, kv_heads, hd]
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, h_kv, hd)
        q = q * cos[:, None] + rotate_half(q) * sin[:, None]
        k = k * cos[:, None] + rotate_half(k) * sin[:, None]
        group = h_q // h_kv
        k = np.repeat(k, group, axis=1)  # query head j reads kv head j // group
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask  # [heads, n, n]
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        attn = np.einsum("hqk,khd->qhd", probs, v).reshape(n, h_q * hd)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.rms_norm_eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], cfg.rms_norm_eps)
    return x @ w["model.embed_tokens.weight"].T


def greedy(cfg, weights, prompt_ids, steps):
    """Greedy continuation (recomputes the whole prefix each step: simple, and n stays small)."""
    ids = list(prompt_ids)
    out = []
    for _ in range(steps):
        logits = forward(cfg, weights, ids[-cfg.max_position_embeddings:])[-1]
        nxt = int(np.argmax(logits))
        out.append(nxt)
        ids.append(nxt)
    return out
