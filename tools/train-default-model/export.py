"""Exports a finished train.py run as the files qrt ships and loads:

  <out>/<name>/        a UQFF 1.x export (spec/uqff.md): q8_0-0.uqff with every linear layer as GGML Q8_0
                       (tag 0, GGML type 8; Unquant where the input dim is not a multiple of 32),
                       residual.safetensors (embedding F16, norms F32), config.json, tokenizer.json,
                       tokenizer_config.json, README.md, training.json (settings, losses, samples)
  <out>/<name>.gguf    the same model as GGUF (llama architecture, Q/K rows in GGUF's interleaved RoPE order,
                       gpt2-style BPE vocabulary with pre-tokenizer "gpt-2"), written with gguf-py
  --hf-out DIR         (optional) a Hugging Face checkpoint of the float32 weights, for tests
  --expected FILE      (optional) the reference greedy continuation of --prompt, computed here with the numpy
                       forward (llama_numpy.py) on exactly the weights the files hold (Q8_0 dequantized, F16
                       embedding), for qrt's end-to-end test

Runs in the oracle environment (.venv: numpy, gguf-py, safetensors):
    .venv/bin/python tools/train-default-model/export.py --run build-default-model/train --out models/default \\
        --hf-out build-default-model/hf --expected tests/e2e/default_model/expected_greedy.json
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle", "uqff"))
import bpe  # noqa: E402
import llama_numpy  # noqa: E402
import uqff_writer  # noqa: E402

import gguf  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402

Q8_0 = gguf.GGMLQuantizationType.Q8_0
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
GGUF_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


TOKENIZER_CASES = [
    "The prince",
    "\"Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes.\"",
    "It was in July, 1805, and the speaker was the well-known Anna Pavlovna Scherer.",
    "I don't know--I'll tell you what they've done!\nCHAPTER XII\n\nNatasha  smiled...   ",
    "Pierre's 100,000 rubles; Count Rostov's 3 daughters?!",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="train.py output directory")
    p.add_argument("--out", required=True, help="where the UQFF directory and the GGUF file go")
    p.add_argument("--name", default="war-and-peace-q8_0")
    p.add_argument("--hf-out", help="also write a float32 Hugging Face checkpoint here")
    p.add_argument("--expected", help="write the reference greedy continuation here (JSON)")
    p.add_argument("--prompt", default="The prince")
    p.add_argument("--tokens", type=int, default=60)
    return p.parse_args()


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def rope_interleave_rows(w, heads):
    """HF half-split Q/K rows -> GGUF `llama` order: within each head, new row 2i <- old row i and new row
    2i+1 <- old row i + hd/2 (spec/ggml.md §4.3). w: [heads * hd, in]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class QuantizedModel:
    """The weights as stored: for each linear either Q8_0 blocks or float32, the embedding as F16, the norms as
    F32, and `effective`: the float values a correct reader computes with."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.q8 = {}          # HF weight name -> Q8_0 bytes [out, in/32*34] (uint8)
        self.unquant = {}     # HF weight name -> float32 [out, in]
        self.effective = {}
        for name, w in weights.items():
            w = np.asarray(w, np.float32)
            if name == "model.embed_tokens.weight":
                self.embedding = w.astype(np.float16)
                self.effective[name] = self.embedding.astype(np.float32)
            elif w.ndim == 1:
                self.effective[name] = w
            elif w.shape[1] % 32 == 0:
                self.q8[name] = quantize(w, Q8_0)
                self.effective[name] = dequantize(self.q8[name], Q8_0).reshape(w.shape)
            else:
                self.unquant[name] = w
                self.effective[name] = w
        self.norms = {k: v for k, v in self.effective.items() if v.ndim == 1}


def write_uqff(qm, directory, assets):
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    layers = []
    for name in sorted(qm.q8):
        key = name[: -len(".weight")]
        layers.append(uqff_writer.ggml_layer(key, int(Q8_0), list(qm.effective[name].shape),
                                             qm.q8[name].tobytes(), None))
    for name in sorted(qm.unquant):
        layers.append(uqff_writer.unquant_layer(name[: -len(".weight")], qm.unquant[name]))
    # The lowest minor whose features the file uses (spec/uqff.md §9): Unquant entries need 1.1.
    version = (1, 1 if qm.unquant else 0, 0)
    uqff_writer.write_shards(directory, "q8_0", layers, layers_per_shard=len(layers), version=version)
    residual = {"model.embed_tokens.weight": qm.embedding}
    residual.update(qm.norms)
    save_file(residual, os.path.join(directory, "residual.safetensors"),
              metadata={"uqff.producer": "mistral.rs", "uqff.version": ".".join(map(str, version))})
    for file_name, text in assets.items():
        write_text(os.path.join(directory, file_name), text)
    return version


def write_gguf(qm, tok, path, name):
    cfg = qm.cfg
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")  # exactly GPT-2's split regex, as the tokenizer.json's ByteLevel step
    w.add_token_list(tok.tokens)
    w.add_token_types([gguf.TokenType.CONTROL if i < len(bpe.SPECIALS) else gguf.TokenType.NORMAL
                       for i in range(tok.vocab_size)])
    w.add_token_merges([f"{tok.tokens[a]} {tok.tokens[b]}" for a, b in tok.merges])
    w.add_bos_token_id(tok.bos_id)
    w.add_eos_token_id(tok.eos_id)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    w.add_tensor("token_embd.weight", qm.embedding)  # tied: no output.weight
    w.add_tensor("output_norm.weight", qm.norms["model.norm.weight"])
    for i in range(cfg.num_hidden_layers):
        for part in ("input_layernorm", "post_attention_layernorm"):
            w.add_tensor(f"blk.{i}.{GGUF_NAMES[part]}.weight", qm.norms[f"model.layers.{i}.{part}.weight"])
        for lin in LINEARS:
            hf = f"model.layers.{i}.{lin}.weight"
            heads = {"self_attn.q_proj": cfg.num_attention_heads, "self_attn.k_proj": cfg.num_key_value_heads}
            gname = f"blk.{i}.{GGUF_NAMES[lin]}.weight"
            if hf in qm.q8:
                blocks = qm.q8[hf]
                if lin in heads:  # rows are quantized independently, so permuting blocks = permuting rows
                    blocks = rope_interleave_rows(blocks, heads[lin])
                w.add_tensor(gname, blocks, raw_dtype=Q8_0)
            else:
                dense = qm.unquant[hf]
                w.add_tensor(gname, rope_interleave_rows(dense, heads[lin]) if lin in heads else dense)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_gguf(path, qm):
    """Reads the GGUF back with gguf-py: every tensor, un-permuted, must equal what the UQFF holds."""
    cfg = qm.cfg
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    expected_count = 2 + cfg.num_hidden_layers * (2 + len(LINEARS))
    if len(tensors) != expected_count:
        raise SystemExit(f"{path}: {len(tensors)} tensors, expected {expected_count}")
    for i in range(cfg.num_hidden_layers):
        for lin in LINEARS:
            t = tensors[f"blk.{i}.{GGUF_NAMES[lin]}.weight"]
            values = dequantize(np.asarray(t.data), t.tensor_type).reshape(qm.effective[f"model.layers.{i}.{lin}.weight"].shape)
            heads = {"self_attn.q_proj": cfg.num_attention_heads, "self_attn.k_proj": cfg.num_key_value_heads}
            if lin in heads:  # undo: new row 2i+j <- old row i + j*hd/2
                h = heads[lin]
                values = values.reshape(h, values.shape[0] // h // 2, 2, -1).swapaxes(1, 2).reshape(values.shape)
            if not np.array_equal(values, qm.effective[f"model.layers.{i}.{lin}.weight"]):
                raise SystemExit(f"{path}: blk.{i}.{GGUF_NAMES[lin]} does not match the UQFF weights")
    emb = np.asarray(tensors["token_embd.weight"].data).reshape(cfg.vocab_size, cfg.hidden_size)
    if not np.array_equal(emb.astype(np.float32), qm.effective["model.embed_tokens.weight"]):
        raise SystemExit(f"{path}: token_embd does not match")


def model_card(cfg, n_params, train_settings, summary, version):
    a = train_settings["args"]
    return f"""# war-and-peace-q8_0

qrt's bundled default model: a {n_params:,}-parameter Llama (RMSNorm, RoPE, grouped-query attention, SwiGLU,
tied embeddings) trained from scratch on Tolstoy's *War and Peace* (public domain), with a {cfg.vocab_size}-token
byte-level BPE vocabulary trained on the same text. It writes English phrases in the novel's manner, not sense.

- hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, {cfg.num_attention_heads} heads ({cfg.num_key_value_heads} KV heads, head dim {cfg.head_dim}),
  FFN {cfg.intermediate_size}, context {cfg.max_position_embeddings}, RoPE theta {cfg.rope_theta:g}
- training: {a['steps']} steps of {a['batch']} x {a['context']} tokens, AdamW (peak lr {a['lr']}), seed {a['seed']};
  validation loss {summary.get('val_loss', float('nan')):.3f} nats/token on the held-out last chapters
- this directory: UQFF {'.'.join(map(str, version))} (linear layers Q8_0; embedding F16 and norms F32 in
  residual.safetensors); the same weights as GGUF in `../war-and-peace-q8_0.gguf`

Reproduce with `tools/train-default-model/` (see its README.md).
"""


def main():
    args = parse_args()
    cfg = llama_numpy.LlamaConfig.from_json(read_text(os.path.join(args.run, "config.json")))
    tok_json = read_text(os.path.join(args.run, "tokenizer.json"))
    tok_config = read_text(os.path.join(args.run, "tokenizer_config.json"))
    tok = bpe.ByteLevelBpe.from_tokenizer_json(tok_json)
    with np.load(os.path.join(args.run, "weights.npz")) as z:
        weights = {k: z[k] for k in z.files}
    shapes = llama_numpy.parameter_shapes(cfg)
    if {k: v.shape for k, v in weights.items()} != shapes:
        raise SystemExit("weights.npz does not hold the tensors config.json describes")
    with open(os.path.join(args.run, "train_config.json")) as f:
        train_settings = json.load(f)
    summary, evaluations = {}, []
    with open(os.path.join(args.run, "train_log.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("done"):
                summary = record
            elif "val_loss" in record:
                evaluations.append(record)
    n_params = sum(int(np.prod(s)) for s in shapes.values())
    config_json = json.dumps(cfg.hf_config(), indent=2)

    if args.hf_out:
        os.makedirs(args.hf_out, exist_ok=True)
        save_file({k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()},
                  os.path.join(args.hf_out, "model.safetensors"), metadata={"format": "pt"})
        for file_name, text in (("config.json", config_json), ("tokenizer.json", tok_json),
                                ("tokenizer_config.json", tok_config)):
            write_text(os.path.join(args.hf_out, file_name), text)

    qm = QuantizedModel(cfg, weights)
    os.makedirs(args.out, exist_ok=True)
    uqff_dir = os.path.join(args.out, args.name)
    version = (1, 1 if qm.unquant else 0, 0)
    provenance = dict(train_settings, result=summary, evaluations=evaluations)
    assets = {"config.json": config_json, "tokenizer.json": tok_json, "tokenizer_config.json": tok_config,
              "README.md": model_card(cfg, n_params, train_settings, summary, version),
              "training.json": json.dumps(provenance, indent=1) + "\n"}
    write_uqff(qm, uqff_dir, assets)
    gguf_path = os.path.join(args.out, args.name + ".gguf")
    write_gguf(qm, tok, gguf_path, args.name)
    check_gguf(gguf_path, qm)
    sizes = {p: os.path.getsize(os.path.join(uqff_dir, p)) for p in sorted(os.listdir(uqff_dir))}
    sizes[os.path.basename(gguf_path)] = os.path.getsize(gguf_path)
    print(json.dumps({"parameters": n_params, "q8_0_layers": len(qm.q8), "unquant_layers": len(qm.unquant),
                      "bytes": sizes}, indent=2))

    if args.expected:
        prompt_ids = tok.encode(args.prompt, add_bos=True)
        ids, margins = list(prompt_ids), []
        for _ in range(args.tokens):
            logits = llama_numpy.forward(cfg, qm.effective, ids)[-1]
            top2 = np.sort(logits)[-2:]
            margins.append(float(top2[1] - top2[0]))
            ids.append(int(np.argmax(logits)))
        generated = ids[len(prompt_ids):]
        float_ids = llama_numpy.greedy(cfg, weights, prompt_ids, args.tokens)
        doc = {
            "about": "Greedy continuation of the prompt by the default model, computed by "
                     "tools/train-default-model/export.py with an independent float64 numpy forward on the weights "
                     "exactly as the UQFF and GGUF files hold them (Q8_0 dequantized, F16 embedding).",
            "prompt": args.prompt,
            "prompt_ids": prompt_ids,
            "generated_ids": generated,
            "generated_text": tok.decode(generated),
            "min_top2_logit_margin": min(margins),
            "float32_weights_agree": float_ids == generated,
            # The trained vocabulary on text with contractions, digits, punctuation runs, newlines and repeated
            # spaces: ids from this directory's reference encoder (bpe.py), without special tokens.
            "tokenizer_cases": [{"text": t, "ids": tok.encode(t)} for t in TOKENIZER_CASES],
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.expected)), exist_ok=True)
        text = json.dumps(doc, indent=1)
        text = re.sub(r"\[\s+([-\d,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
        write_text(args.expected, text + "\n")
        print(json.dumps({k: doc[k] for k in ("prompt_ids", "generated_text", "min_top2_logit_margin",
                                               "float32_weights_agree")}, indent=2))


if __name__ == "__main__":
    main()
