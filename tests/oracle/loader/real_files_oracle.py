"""The real files in the shared data folder read by qrt_loader_check and compared with gguf-py's GGUFReader (every
key, type and value; every tensor's name, type, ne, offset, size and sample values) and with the safetensors
package (stories260K-hf).

usage: real_files_oracle.py <qrt_loader_check> [<k>/<n>]
  k/n: check only the k-th of n slices of the file list (GGUFReader is slow on large vocabularies, so ctest runs
  the slices in parallel).
"""
import glob
import os
import sys

from oracle_common import (Failures, SKIP, compare_metadata_with_reader, compare_tensors_with_reader,
                           require_modules, run_check, same_float, test_data_dir)

require_modules()

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from safetensors import safe_open  # noqa: E402

checker = sys.argv[1]
part, parts = (int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "0/1").split("/"))
data = test_data_dir()
if data is None:
    print("skipped: QRT_TEST_DATA is not set to the shared data folder")
    sys.exit(SKIP)
failures = Failures()

gguf_files = [os.path.join(data, "stories260K", "stories260K.gguf"),
              os.path.join(data, "llama-2-tiny-random", "llama-2-tiny-random.gguf")]
gguf_files += sorted(glob.glob(os.path.join(data, "ggml-vocab", "*.gguf")))
safetensors_files = [os.path.join(data, "stories260K-hf", "model.safetensors")]
every_file = gguf_files + safetensors_files
mine = set(every_file[part::parts])
failures.check(len(gguf_files) == 14, f"expected 14 GGUF files, found {len(gguf_files)}")
for path in [p for p in gguf_files if p in mine]:
    label = os.path.basename(path)
    rc, ours = run_check(checker, "gguf", path)
    if not failures.check(rc == 0 and ours["ok"], f"{label}: {ours.get('message')}"):
        continue
    reader = gguf.GGUFReader(path)
    failures.check(ours["version"] == int(reader.fields["GGUF.version"].parts[-1][0]), f"{label}: version")
    compare_metadata_with_reader(ours["metadata"], reader, failures, label)
    compare_tensors_with_reader(ours["tensors"], reader, failures, label)
    print(f"{label}: {len(ours['metadata'])} keys, {len(ours['tensors'])} tensors")


def check_safetensors(path):
    rc, ours = run_check(checker, "safetensors", path)
    if not failures.check(rc == 0 and ours["ok"], f"model.safetensors: {ours.get('message')}"):
        return
    with safe_open(path, framework="np") as f:
        keys = sorted(f.keys())
        failures.check([e["name"] for e in ours["entries"]] == keys, "model.safetensors: names")
        failures.check(ours["metadata"] == (f.metadata() or {}), "model.safetensors: metadata")
        with open(path, "rb") as raw_file:
            raw = raw_file.read()
        for e in ours["entries"]:
            arr = f.get_tensor(e["name"])
            failures.check(e["shape"] == list(arr.shape), f"model.safetensors: {e['name']} shape")
            failures.check(e["dtype"] == "F32" and arr.dtype == np.float32, f"model.safetensors: {e['name']} dtype")
            span = raw[e["file_offset"]:e["file_offset"] + e["end"] - e["begin"]]
            failures.check(span == arr.tobytes(), f"model.safetensors: {e['name']} bytes")
            rows = arr.reshape(-1, arr.shape[-1])
            failures.check(all(same_float(a, b) for a, b in zip(e["values"]["last_row"], rows[-1][:16])),
                           f"model.safetensors: {e['name']} values")
    print(f"model.safetensors: {len(ours['entries'])} entries")


for path in safetensors_files:
    if path in mine:
        check_safetensors(path)

failures.finish("real_files_oracle")
