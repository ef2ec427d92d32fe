#!/usr/bin/env python3
"""Test fixture: dumps the `tokenizer.*` metadata of every ggml-vocab GGUF to JSON with gguf-py's GGUFReader.

The tokenizer oracle tests read these JSON files, so the values they check against come from a reader we did
not write. Usage: dump_gguf_vocab.py <output dir>. Reads $QRT_TEST_DATA/ggml-vocab/*.gguf; a file whose JSON is
newer than both the GGUF and this script is left alone. Exit 77 (skipped) without the data or gguf-py.

JSON layout per file: {"<key>": value} for each tokenizer.* key, where strings (and string arrays) are
hex-encoded bytes, numbers and booleans (and their arrays) are JSON numbers / booleans.
"""
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def dump(gguf_path, json_path):
    import gguf  # imported here so that worker processes import it too

    reader = gguf.GGUFReader(gguf_path)
    out = {}
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        types = field.types
        if types[0] == gguf.GGUFValueType.ARRAY:
            elem = types[1] if len(types) > 1 else None
            if elem == gguf.GGUFValueType.STRING:
                out[key] = [bytes(field.parts[i]).hex() for i in field.data]
            elif elem == gguf.GGUFValueType.BOOL:
                out[key] = [bool(field.parts[i][0]) for i in field.data]
            elif elem in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
                out[key] = [float(field.parts[i][0]) for i in field.data]
            elif elem is not None:
                out[key] = [int(field.parts[i][0]) for i in field.data]
        elif types[0] == gguf.GGUFValueType.STRING:
            out[key] = bytes(field.parts[field.data[0]]).hex()
        elif types[0] == gguf.GGUFValueType.BOOL:
            out[key] = bool(field.parts[field.data[0]][0])
        elif types[0] in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
            out[key] = float(field.parts[field.data[0]][0])
        else:
            out[key] = int(field.parts[field.data[0]][0])
    tmp = json_path + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, json_path)  # atomic: a concurrent reader never sees half a file
    return os.path.basename(gguf_path)


def main():
    if len(sys.argv) != 2:
        print("usage: dump_gguf_vocab.py <output dir>", file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    data = os.environ.get("QRT_TEST_DATA", "")
    vocab_dir = os.path.join(data, "ggml-vocab")
    if not data or not os.path.isdir(vocab_dir):
        print(f"skipped: no ggml-vocab folder under QRT_TEST_DATA ({data!r})")
        return 77
    try:
        import gguf  # noqa: F401
    except ImportError as e:
        print(f"skipped: gguf-py is not installed ({e})")
        return 77
    os.makedirs(out_dir, exist_ok=True)
    script_time = os.path.getmtime(__file__)
    jobs = []
    for name in sorted(os.listdir(vocab_dir)):
        if not name.endswith(".gguf"):
            continue
        src = os.path.join(vocab_dir, name)
        dst = os.path.join(out_dir, name + ".json")
        if os.path.exists(dst) and os.path.getmtime(dst) > max(os.path.getmtime(src), script_time):
            continue
        jobs.append((src, dst))
    if jobs:
        with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            for name in pool.map(dump, *zip(*jobs)):
                print("dumped", name)
    print(f"{len(jobs)} dumped, the others up to date, in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
