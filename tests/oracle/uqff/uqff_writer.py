"""A UQFF 1.x writer for test fixtures, written from spec/uqff.md (§1, §2, §3) with numpy and the `safetensors`
package. It writes what mistral.rs writes: shards `<stem>-<n>.uqff` of self-describing per-layer entries, the three
version scalars in shard 0, `__metadata__`, residual.safetensors and the JSON assets."""
import json
import os
import struct

import numpy as np
from safetensors.numpy import save_file

VERSION = (1, 2, 0)


def relabel_dtypes(path, relabel):
    """numpy has no float8: such entries are written as U8 and their dtype string rewritten in the header here
    (same bytes; the header is re-padded to a multiple of 8 as the Rust writer does)."""
    if not relabel:
        return
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    for name, dtype in relabel.items():
        header[name]["dtype"] = dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n :])


def u8(v):
    return np.array(v, dtype=np.uint8)


def u32(v):
    return np.array(v, dtype=np.uint32)


def f32(v):
    return np.array(v, dtype=np.float32)


def raw_u8(b):
    return np.frombuffer(bytes(b), dtype=np.uint8).copy()


class Layer:
    """The entries of one module `<key>` and the float32 values a reader must decode them to."""

    def __init__(self, key, entries, expected, fp8=()):
        self.key, self.entries, self.expected, self.fp8 = key, entries, expected, set(fp8)


def ggml_layer(key, ggml_code, shape, raw_blocks, expected):
    return Layer(key, {f"{key}.weight": raw_u8(raw_blocks), f"{key}.weight.format": u8(0),
                       f"{key}.weight.dtype": u32(ggml_code), f"{key}.weight.shape": u32(shape)}, expected)


def unquant_layer(key, w):
    return Layer(key, {f"{key}.weight": w, f"{key}.weight.format": u8(1)}, w.astype(np.float32))


def afq_layer(key, bits, group, shape, parts, scale_dtype, expected):
    data, scales, biases = parts
    lead, cols = list(shape[:-1]), shape[-1]
    sd = np.float16 if scale_dtype == "F16" else np.float32
    return Layer(key, {
        f"{key}.weight": np.frombuffer(data, dtype=np.uint32).reshape(lead + [cols * bits // 32]).copy(),
        f"{key}.weight.scales": np.frombuffer(scales, dtype=sd).reshape(lead + [cols // group]).copy(),
        f"{key}.weight.biases": np.frombuffer(biases, dtype=sd).reshape(lead + [cols // group]).copy(),
        f"{key}.weight.format": u8(4), f"{key}.weight.bits": u8(bits), f"{key}.weight.group_size": u8(group)},
        expected)


def mxfp4_layer(key, shape, parts, expected):
    data, scales, _ = parts
    lead, cols = list(shape[:-1]), shape[-1]
    return Layer(key, {f"{key}.weight": raw_u8(data).reshape(lead + [cols // 2]),
                       f"{key}.weight.scales": raw_u8(scales).reshape(lead + [cols // 32]),
                       f"{key}.weight.format": u8(6)}, expected)


def fp8_layer(key, shape, data, w_scale, expected):
    return Layer(key, {f"{key}.weight": raw_u8(data).reshape(shape), f"{key}.weight.format": u8(3),
                       f"{key}.weight.dequant_w_scale": f32(w_scale), f"{key}.weight.dequant_x_scale": f32(w_scale),
                       f"{key}.weight.quant_scale": f32(1.0 / w_scale), f"{key}.weight.dtype": u32(9)},
                 expected, fp8=[f"{key}.weight"])


def f8q8_layer(key, shape, data, expected):
    n = int(np.prod(shape))
    return Layer(key, {f"{key}.weight": raw_u8(data), f"{key}.weight.format": u8(5),
                       f"{key}.weight.num_blocks": u32(-(-n // 32)), f"{key}.weight.shape": u32(shape)}, expected)


def hqq_layer(key, bits, group, shape, parts, expected):
    data, scales, zeros = parts
    n = int(np.prod(shape))
    rows = group // 2 if bits == 4 else group
    return Layer(key, {f"{key}.weight": raw_u8(data).reshape(rows, n // group),
                       f"{key}.weight.scales": np.frombuffer(scales, np.float32).reshape(1, n // group).copy(),
                       f"{key}.weight.zeros": np.frombuffer(zeros, np.float32).reshape(1, n // group).copy(),
                       f"{key}.weight.shape": u32(shape), f"{key}.weight.bits": u8(bits),
                       f"{key}.weight.group_size": u32(group), f"{key}.weight.axis": u8(0),
                       f"{key}.weight.optimization_steps": u32(0), f"{key}.weight.round_zeros": u8(0),
                       f"{key}.weight.channel_wise": u8(1), f"{key}.weight.format": u8(2)}, expected)


def write_shards(directory, stem, layers, layers_per_shard=3, version=VERSION, version_in_every_shard=False,
                 extra_entries=None):
    """Writes `layers` as shards of at most `layers_per_shard` layers. Returns the shard paths."""
    os.makedirs(directory, exist_ok=True)
    meta = {"uqff.producer": "mistral.rs"}
    if version is not None:
        meta["uqff.version"] = ".".join(map(str, version))
    chunks = [layers[i : i + layers_per_shard] for i in range(0, len(layers), layers_per_shard)] or [[]]
    paths = []
    for index, chunk in enumerate(chunks):
        tensors, relabel = {}, {}
        if version is not None and (index == 0 or version_in_every_shard):
            for name, v in zip(("major", "minor", "patch"), version):
                tensors[f"uqff.version.{name}"] = u32(v)
        for layer in chunk:
            tensors.update(layer.entries)
            relabel.update({name: "F8_E4M3" for name in layer.fp8})
        if extra_entries and index == 0:
            tensors.update(extra_entries)
        path = os.path.join(directory, f"{stem}-{index}.uqff")
        save_file(tensors, path, metadata=meta)
        relabel_dtypes(path, relabel)
        paths.append(path)
    return paths


def write_assets(directory, residual, config, tokenizer_json=None):
    save_file(residual, os.path.join(directory, "residual.safetensors"),
              metadata={"uqff.producer": "mistral.rs", "uqff.version": ".".join(map(str, VERSION))})
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if tokenizer_json is not None:
        with open(os.path.join(directory, "tokenizer.json"), "w") as f:
            f.write(tokenizer_json)
