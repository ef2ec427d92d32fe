"""llama.cpp's current deepseek2 layout from its older one, with gguf-py: each layer's attn_kv_b
[heads * (nope + v), kv_lora] split into attn_k_b [heads, kv_lora, nope] (each head's key rows transposed) and attn_v_b
[heads, v, kv_lora], in F32 from the decoded blocks, and the attention keys of the absorbed form (key_length kv_lora +
rope, value_length kv_lora, the per-head sizes in key_length_mla / value_length_mla, one KV head). Every other key and
tensor is copied unchanged."""

import numpy as np
import gguf
from gguf import GGUFReader, GGUFValueType


def split_kv_b(src, dst):
    r = GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    p = arch + "."

    def scalar(key):
        return r.fields[p + key].contents()

    heads, rope, lora = scalar("attention.head_count"), scalar("rope.dimension_count"), scalar("attention.kv_lora_rank")
    key_length, v = scalar("attention.key_length"), scalar("attention.value_length")
    nope = key_length - rope
    replaced = {p + "attention.key_length": lora + rope, p + "attention.value_length": lora,
                p + "attention.key_length_mla": key_length, p + "attention.value_length_mla": v,
                p + "attention.head_count_kv": 1}
    w = gguf.GGUFWriter(dst, arch=arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in replaced:
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vtype, sub_type=sub)
    for name, value in replaced.items():
        w.add_key_value(name, value, GGUFValueType.UINT32)
    for t in r.tensors:
        if t.name.endswith(".attn_kv_b.weight"):
            kv_b = gguf.dequantize(t.data, t.tensor_type).reshape(heads, nope + v, lora).astype(np.float32)
            base = t.name[: -len("attn_kv_b.weight")]
            w.add_tensor(base + "attn_k_b.weight", np.ascontiguousarray(kv_b[:, :nope, :].transpose(0, 2, 1)))
            w.add_tensor(base + "attn_v_b.weight", np.ascontiguousarray(kv_b[:, nope:, :]))
            continue
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)  # quantized data come as [rows, row bytes]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
