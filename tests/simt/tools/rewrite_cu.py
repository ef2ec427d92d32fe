#!/usr/bin/env python3
"""Turns a .cu file into C++ for the SIMT layer (docs/simt.md), changing only the two constructs C++ cannot parse:

  kernel<<<grid, block, smem, stream>>>(args)
      -> kernel * ::qrt::simt::launch({"kernel", __FILE__, __LINE__}, grid, block, smem, stream)(args)
  extern __shared__ [__align__(N)] T name[];
      -> T* const name = static_cast<T*>(::qrt::simt::detail::dynamic_shared_memory(N));

Everything else, line breaks included, is kept, and a #line directive names the original file, so compiler messages,
__FILE__/__LINE__ and the layer's fault messages point into the real source.

usage: rewrite_cu.py <input.cu> <output.cpp>
"""
import re
import sys

EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*(\d+)\s*\)\s+)?([A-Za-z_][\w:<>\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def code_spans(text):
    """Yields (start, end) of the text outside comments, string and character literals."""
    i, n, start = 0, len(text), 0
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            yield start, i
            i = text.find("\n", i)
            i = n if i < 0 else i
            start = i
        elif text.startswith("/*", i):
            yield start, i
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            start = i
        elif c in "\"'":
            yield start, i
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            start = i
        else:
            i += 1
    yield start, n


def kernel_name_before(text, pos):
    """The kernel expression that ends at pos: an identifier path, maybe with template arguments."""
    j = pos
    while j > 0 and text[j - 1].isspace():
        j -= 1
    end = j
    if j > 0 and text[j - 1] == ">":
        depth = 0
        while j > 0:
            j -= 1
            if text[j] == ">":
                depth += 1
            elif text[j] == "<":
                depth -= 1
                if depth == 0:
                    break
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_:"):
        j -= 1
    name = " ".join(text[j:end].split())
    return name or "kernel"


def rewrite_launches(text):
    out, last = [], 0
    for start, end in code_spans(text):
        i = start
        while True:
            k = text.find("<<<", i, end)
            if k < 0:
                break
            close = text.find(">>>", k + 3, end)
            if close < 0:
                raise SystemExit(f"rewrite_cu: unmatched <<< at offset {k}")
            name = kernel_name_before(text, k).replace("\\", "\\\\").replace('"', '\\"')
            out.append(text[last:k])
            out.append(f' * ::qrt::simt::launch({{"{name}", __FILE__, __LINE__}}, ')
            out.append(text[k + 3:close])
            out.append(")")
            last = i = close + 3
    out.append(text[last:])
    return "".join(out)


def rewrite_extern_shared(text):
    def repl(m):
        align, type_, name = m.group(1), " ".join(m.group(2).split()), m.group(3)
        alignment = align if align else f"alignof({type_})"
        return (f"{type_}* const {name} = static_cast<{type_}*>("
                f"::qrt::simt::detail::dynamic_shared_memory({alignment}));")
    return EXTERN_SHARED.sub(repl, text)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    body = rewrite_extern_shared(rewrite_launches(text))
    escaped = src.replace("\\", "\\\\").replace('"', '\\"')
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{escaped}"\n')
        f.write(body)


if __name__ == "__main__":
    main()
