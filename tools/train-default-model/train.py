"""Trains qrt's bundled default model: a small Llama (RMSNorm, half-split RoPE, grouped-query attention,
SwiGLU, tied embeddings) on Tolstoy's War and Peace, with JAX on the CPU.

    .venv-train/bin/python tools/train-default-model/train.py --corpus ../shared/data/corpus/war-and-peace.txt \\
        --out build-default-model/train

Steps: normalize the corpus (bpe.normalize_corpus), train a byte-level BPE tokenizer (bpe.py), encode, then
train with AdamW for --steps steps on random 256-token windows that start at a paragraph, each behind <s>.
Everything random derives from --seed; the data order of step s depends only on (seed, s), so a run stopped
by --max-minutes resumes from its last checkpoint (rerun the same command) to the same result. Writes
<out>/weights.npz (float32, Hugging Face names), config.json, tokenizer.json, tokenizer_config.json,
train_config.json (every setting) and train_log.jsonl. export.py turns those into the files qrt loads.
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import llama_numpy  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True, help="war-and-peace.txt")
    p.add_argument("--out", required=True, help="run directory (checkpoints, weights, tokenizer, logs)")
    p.add_argument("--seed", type=int, default=1805)
    p.add_argument("--vocab-size", type=int, default=1024)
    p.add_argument("--hidden-size", type=int, default=192)
    p.add_argument("--intermediate-size", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=0.1, help="final learning rate / peak (cosine decay)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--val-fraction", type=float, default=0.04, help="last paragraphs held out for validation")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--max-minutes", type=float, default=0, help="stop (with a checkpoint) after this wall time")
    return p.parse_args()


# ---- data -----------------------------------------------------------------------------------------------

def prepare_data(args):
    """Tokenizer (trained once, then reused from <out>) and the encoded corpus with paragraph starts."""
    with open(args.corpus, encoding="utf-8") as f:
        text, starts = bpe.normalize_corpus(f.read())
    tok_path = os.path.join(args.out, "tokenizer.json")
    if os.path.exists(tok_path):
        with open(tok_path, encoding="utf-8") as f:
            tok = bpe.ByteLevelBpe.from_tokenizer_json(f.read())
    else:
        t0 = time.time()
        tok = bpe.ByteLevelBpe(bpe.train(text, args.vocab_size))
        print(f"tokenizer: {tok.vocab_size} tokens in {time.time() - t0:.1f}s", flush=True)
        with open(tok_path, "w", encoding="utf-8") as f:
            f.write(tok.tokenizer_json())
        with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
            f.write(tok.tokenizer_config_json(args.context))
    if tok.vocab_size != args.vocab_size:
        raise SystemExit(f"tokenizer has {tok.vocab_size} tokens, --vocab-size is {args.vocab_size}")
    # Paragraphs never share a split piece (each ends in "\n", the next starts with a non-space), so encoding
    # them one by one gives the ids of the whole text and the token offset of every paragraph.
    ids, para_starts = [], []
    ends = starts[1:] + [len(text)]
    for s, e in zip(starts, ends):
        para_starts.append(len(ids))
        ids.extend(tok.encode(text[s:e]))
    return tok, np.asarray(ids, dtype=np.int32), np.asarray(para_starts, dtype=np.int64)


def windows(ids, starts, context, bos):
    """inputs [n, context] = <s> + ids[s : s+context-1], targets [n, context] = ids[s : s+context]."""
    idx = starts[:, None] + np.arange(context)[None, :]
    targets = ids[idx]
    inputs = np.concatenate([np.full((len(starts), 1), bos, dtype=np.int32), targets[:, :-1]], axis=1)
    return inputs, targets


# ---- model ----------------------------------------------------------------------------------------------

def init_params(cfg, seed):
    rng = np.random.default_rng([seed, 0])
    out_scale = 1.0 / math.sqrt(2 * cfg.num_hidden_layers)  # residual-branch outputs start smaller
    params = {}
    for name, shape in llama_numpy.parameter_shapes(cfg).items():
        if len(shape) == 1:
            params[name] = np.ones(shape, np.float32)
        else:
            std = 0.02 * (out_scale if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0)
            params[name] = (rng.standard_normal(shape) * std).astype(np.float32)
    return params


def make_forward(cfg):
    hd, h_q, h_kv = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads

    def rms(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + cfg.rms_norm_eps) * w

    def rot(x):
        return jnp.concatenate([-x[..., hd // 2:], x[..., : hd // 2]], axis=-1)

    def forward(params, tokens):
        """logits [b, t, vocab] for tokens [b, t], causal from position 0."""
        b, t = tokens.shape
        cos, sin = (jnp.asarray(a, jnp.float32) for a in llama_numpy.rope_tables(cfg, np.arange(t)))
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]  # [1, t, 1, hd]
        causal = jnp.tril(jnp.ones((t, t), bool))
        x = params["model.embed_tokens.weight"][tokens]  # [b, t, hidden]
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            h = rms(x, params[p + "input_layernorm.weight"])
            q = (h @ params[p + "self_attn.q_proj.weight"].T).reshape(b, t, h_q, hd)
            k = (h @ params[p + "self_attn.k_proj.weight"].T).reshape(b, t, h_kv, hd)
            v = (h @ params[p + "self_attn.v_proj.weight"].T).reshape(b, t, h_kv, hd)
            q = q * cos + rot(q) * sin
            k = k * cos + rot(k) * sin
            q = q.reshape(b, t, h_kv, h_q // h_kv, hd)  # query head j = kv head j // group, member j % group
            scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k) / math.sqrt(hd)
            scores = jnp.where(causal, scores, -1e30)
            probs = jax.nn.softmax(scores, axis=-1)
            attn = jnp.einsum("bkgqs,bskd->bqkgd", probs, v).reshape(b, t, h_q * hd)
            x = x + attn @ params[p + "self_attn.o_proj.weight"].T
            h = rms(x, params[p + "post_attention_layernorm.weight"])
            gate = h @ params[p + "mlp.gate_proj.weight"].T
            up = h @ params[p + "mlp.up_proj.weight"].T
            x = x + (jax.nn.silu(gate) * up) @ params[p + "mlp.down_proj.weight"].T
        x = rms(x, params["model.norm.weight"])
        return x @ params["model.embed_tokens.weight"].T

    return forward


def make_train_step(cfg, args):
    forward = make_forward(cfg)

    def loss_fn(params, inputs, targets):
        logits = forward(params, inputs)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    def lr_at(step):
        warm = (step + 1) / args.warmup
        progress = jnp.clip((step - args.warmup) / max(1, args.steps - args.warmup), 0.0, 1.0)
        cosine = args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + jnp.cos(math.pi * progress))
        return args.lr * jnp.where(step < args.warmup, warm, cosine)

    @jax.jit
    def step_fn(params, m, v, step, inputs, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, inputs, targets)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
        scale = jnp.minimum(1.0, args.grad_clip / (norm + 1e-6))
        lr = lr_at(step)
        b1, b2, eps = 0.9, 0.95, 1e-8
        t = step + 1
        new_p, new_m, new_v = {}, {}, {}
        for name, g in grads.items():
            g = g * scale
            new_m[name] = b1 * m[name] + (1 - b1) * g
            new_v[name] = b2 * v[name] + (1 - b2) * g * g
            update = (new_m[name] / (1 - b1 ** t)) / (jnp.sqrt(new_v[name] / (1 - b2 ** t)) + eps)
            decay = args.weight_decay if params[name].ndim == 2 else 0.0  # matrices only, not norms
            new_p[name] = params[name] - lr * (update + decay * params[name])
        return new_p, new_m, new_v, loss, norm, lr

    @jax.jit
    def eval_fn(params, inputs, targets):
        return loss_fn(params, inputs, targets)

    return step_fn, eval_fn, jax.jit(forward)


def sample_greedy(forward_jit, params, tok, prompt, steps, context):
    """Greedy text after <s> + prompt. The sequence is padded on the right to `context` so that one compiled
    forward serves every length (causal attention: the padding never reaches the positions read)."""
    ids = tok.encode(prompt, add_bos=True)
    for _ in range(steps):
        if len(ids) >= context:
            break
        buf = np.zeros((1, context), np.int32)
        buf[0, : len(ids)] = ids
        logits = forward_jit(params, jnp.asarray(buf))[0, len(ids) - 1]
        ids.append(int(jnp.argmax(logits)))
    return tok.decode(ids[1:])


# ---- checkpoints ----------------------------------------------------------------------------------------

def save_checkpoint(path, params, m, v, step):
    arrays = {f"p/{k}": np.asarray(a) for k, a in params.items()}
    arrays.update({f"m/{k}": np.asarray(a) for k, a in m.items()})
    arrays.update({f"v/{k}": np.asarray(a) for k, a in v.items()})
    arrays["step"] = np.asarray(step)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def load_checkpoint(path):
    with np.load(path) as z:
        def part(prefix):
            return {k[len(prefix):]: jnp.asarray(z[k]) for k in z.files if k.startswith(prefix)}
        return part("p/"), part("m/"), part("v/"), int(z["step"])


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    cfg = llama_numpy.LlamaConfig(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size, intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.context)
    settings = {"args": vars(args), "model": dataclasses.asdict(cfg), "jax": jax.__version__,
                "numpy": np.__version__, "devices": [str(d) for d in jax.devices()]}
    settings_path = os.path.join(args.out, "train_config.json")
    if os.path.exists(settings_path):
        with open(settings_path) as f:
            before = json.load(f)["args"]
        changed = {k: (before.get(k), v) for k, v in vars(args).items()
                   if k != "max_minutes" and before.get(k) != v}
        if changed:
            raise SystemExit(f"{args.out} holds a run with other settings: {changed}")
    with open(settings_path, "w") as f:
        json.dump(settings, f, indent=2)

    tok, ids, para_starts = prepare_data(args)
    n_val = max(1, int(len(para_starts) * args.val_fraction))
    val_begin = int(para_starts[-n_val])
    train_starts = para_starts[para_starts + args.context <= val_begin]
    val_starts = para_starts[(para_starts >= val_begin) & (para_starts + args.context <= len(ids))]
    val_starts = val_starts[np.linspace(0, len(val_starts) - 1, 32).astype(int)]
    val_inputs, val_targets = windows(ids, val_starts, args.context, tok.bos_id)
    n_params = sum(int(np.prod(s)) for s in llama_numpy.parameter_shapes(cfg).values())
    print(f"corpus: {len(ids)} tokens ({val_begin} train), {len(train_starts)} train windows; "
          f"model: {n_params} parameters", flush=True)

    step_fn, eval_fn, forward_jit = make_train_step(cfg, args)
    ckpt = os.path.join(args.out, "checkpoint.npz")
    if os.path.exists(ckpt):
        params, m, v, start = load_checkpoint(ckpt)
        print(f"resuming at step {start}", flush=True)
    else:
        params = {k: jnp.asarray(a) for k, a in init_params(cfg, args.seed).items()}
        m = {k: jnp.zeros_like(a) for k, a in params.items()}
        v = {k: jnp.zeros_like(a) for k, a in params.items()}
        start = 0
    log = open(os.path.join(args.out, "train_log.jsonl"), "a")
    t_begin = time.time()
    step = start
    while step < args.steps:
        rng = np.random.default_rng([args.seed, 1, step])  # this step's batch depends on (seed, step) only
        inputs, targets = windows(ids, rng.choice(train_starts, args.batch), args.context, tok.bos_id)
        params, m, v, loss, norm, lr = step_fn(params, m, v, jnp.asarray(step), jnp.asarray(inputs),
                                               jnp.asarray(targets))
        step += 1
        record = {"step": step, "loss": float(loss), "grad_norm": float(norm), "lr": float(lr),
                  "elapsed_s": round(time.time() - t_begin, 1)}
        if step % args.eval_every == 0 or step == args.steps:
            record["val_loss"] = float(eval_fn(params, jnp.asarray(val_inputs), jnp.asarray(val_targets)))
            record["sample"] = sample_greedy(forward_jit, params, tok, "The prince", 40, args.context)
        log.write(json.dumps(record) + "\n")
        log.flush()
        if step % 10 == 0 or "val_loss" in record:
            print(json.dumps(record), flush=True)
        timed_out = args.max_minutes and time.time() - t_begin > args.max_minutes * 60
        if step % args.checkpoint_every == 0 or step == args.steps or timed_out:
            save_checkpoint(ckpt, params, m, v, step)
        if timed_out and step < args.steps:
            print(f"stopped at step {step} after {args.max_minutes} minutes; rerun to resume", flush=True)
            return

    weights = {k: np.asarray(a, np.float32) for k, a in params.items()}
    np.savez(os.path.join(args.out, "weights.npz"), **weights)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg.hf_config(), f, indent=2)
    # The JAX model and the independent float64 numpy forward must agree on the trained weights.
    check = val_inputs[0, :64]
    jax_logits = np.asarray(forward_jit(params, jnp.asarray(check[None])))[0]
    ref_logits = llama_numpy.forward(cfg, weights, check)
    diff = float(np.max(np.abs(jax_logits - ref_logits)))
    same_argmax = bool(np.all(jax_logits.argmax(-1) == ref_logits.argmax(-1)))
    summary = {"done": True, "steps": args.steps, "val_loss": float(eval_fn(params, jnp.asarray(val_inputs),
               jnp.asarray(val_targets))), "parameters": n_params, "jax_vs_numpy_max_abs_logit_diff": diff,
               "jax_vs_numpy_same_argmax": same_argmax}
    log.write(json.dumps(summary) + "\n")
    print(json.dumps(summary), flush=True)
    if diff > 1e-3 * max(1.0, float(np.max(np.abs(ref_logits)))) or not same_argmax:
        raise SystemExit("the JAX model and the numpy reference disagree")


if __name__ == "__main__":
    main()
