"""A small byte-level BPE (GPT-2 style) for the default model: corpus normalization, a deterministic merge
trainer, an encoder, and the Hugging Face tokenizer.json / tokenizer_config.json it is saved as.

Pure Python (no third-party packages) so that both the training environment and the test-oracle environment
can import it. The split regex is GPT-2's, written for ASCII text: on ASCII input `\\p{L}` is [A-Za-z] and
`\\p{N}` is [0-9], so the pieces are exactly those of the `ByteLevel` pre-tokenizer the tokenizer.json names.
The encoder refuses non-ASCII text rather than silently splitting it differently.
"""
import json
import re
import unicodedata
from collections import Counter

BOS, EOS = "<s>", "</s>"
SPECIALS = [BOS, EOS]  # ids 0 and 1; the 256 byte tokens follow, then the merged tokens in merge order
GPT2_SPLIT_ASCII = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def byte_to_unicode():
    """GPT-2's reversible byte -> printable character map: printable Latin-1 bytes map to themselves, the
    others (controls, space, ...) to U+0100 upwards in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_CHAR = byte_to_unicode()


def normalize_corpus(raw):
    """The training text: line endings unified, the few accented letters reduced to ASCII (e.g. "é" -> "e"),
    hard-wrapped lines of a paragraph joined with spaces, one paragraph per line. Returns (text, paragraph
    start offsets)."""
    raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    raw = "".join(c for c in unicodedata.normalize("NFKD", raw) if not unicodedata.combining(c))
    if not raw.isascii():
        raise ValueError("the corpus has characters with no ASCII decomposition")
    paragraphs = []
    for block in re.split(r"\n\s*\n", raw):
        line = " ".join(part.strip() for part in block.split("\n") if part.strip())
        if line:
            paragraphs.append(line)
    starts, offset = [], 0
    for p in paragraphs:
        starts.append(offset)
        offset += len(p) + 1
    return "\n".join(paragraphs) + "\n", starts


def split_pieces(text):
    if not text.isascii():
        raise ValueError("the reference encoder handles ASCII text only")
    return GPT2_SPLIT_ASCII.findall(text)


def train(text, vocab_size):
    """Byte-level BPE merges learned on `text`: at each step the most frequent adjacent pair (ties: the pair
    of lower ids) is merged, until the vocabulary (specials + 256 bytes + merges) has `vocab_size` entries.
    Returns the merges as (left id, right id) in rank order; merged token k gets id 258 + k."""
    first_merge_id = len(SPECIALS) + 256
    words = Counter(split_pieces(text))
    seqs = [[len(SPECIALS) + b for b in w.encode()] for w in words]
    freqs = list(words.values())
    pair_count = Counter()
    pair_words = {}
    for wi, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:]):
            pair_count[pair] += freqs[wi]
            pair_words.setdefault(pair, set()).add(wi)
    merges = []
    while first_merge_id + len(merges) < vocab_size and pair_count:
        best = max(pair_count, key=lambda p: (pair_count[p], -p[0], -p[1]))
        if pair_count[best] < 2:
            break
        new_id = first_merge_id + len(merges)
        merges.append(best)
        for wi in list(pair_words.get(best, ())):
            seq, f = seqs[wi], freqs[wi]
            for pair in zip(seq, seq[1:]):
                pair_count[pair] -= f
                if pair_count[pair] <= 0:
                    del pair_count[pair]
            merged, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    merged.append(new_id)
                    i += 2
                else:
                    merged.append(seq[i])
                    i += 1
            seqs[wi] = merged
            for pair in zip(merged, merged[1:]):
                pair_count[pair] += f
                pair_words.setdefault(pair, set()).add(wi)
        pair_words.pop(best, None)
    return merges


class ByteLevelBpe:
    """Token texts (GPT-2 byte characters), merge ranks, encode and decode."""

    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.tokens = list(SPECIALS) + [BYTE_CHAR[b] for b in range(256)]
        for left, right in self.merges:
            self.tokens.append(self.tokens[left] + self.tokens[right])
        self.rank = {pair: r for r, pair in enumerate(self.merges)}
        self.merged_id = {pair: len(SPECIALS) + 256 + r for r, pair in enumerate(self.merges)}
        self.char_byte = {c: b for b, c in BYTE_CHAR.items()}
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.tokens)

    @property
    def bos_id(self):
        return SPECIALS.index(BOS)

    @property
    def eos_id(self):
        return SPECIALS.index(EOS)

    def _encode_piece(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        ids = [len(SPECIALS) + b for b in piece.encode()]
        while len(ids) > 1:
            ranked = [(self.rank.get(p, len(self.rank)), i) for i, p in enumerate(zip(ids, ids[1:]))]
            r, i = min(ranked)
            if r == len(self.rank):
                break
            pair = (ids[i], ids[i + 1])
            out, j = [], 0
            while j < len(ids):  # merge every occurrence of the best pair, left to right
                if j + 1 < len(ids) and (ids[j], ids[j + 1]) == pair:
                    out.append(self.merged_id[pair])
                    j += 2
                else:
                    out.append(ids[j])
                    j += 1
            ids = out
        self._cache[piece] = ids
        return ids

    def encode(self, text, add_bos=False):
        ids = [self.bos_id] if add_bos else []
        for piece in split_pieces(text):
            ids.extend(self._encode_piece(piece))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i < len(SPECIALS):
                continue
            out.extend(self.char_byte[c] for c in self.tokens[i])
        return out.decode("utf-8", errors="replace")

    def tokenizer_json(self):
        """Hugging Face tokenizers' JSON for this vocabulary: ByteLevel pre-tokenizer and decoder, BPE model,
        and a post-processor that puts <s> before every sequence (the model was trained that way)."""
        added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
        doc = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": byte_level,
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {BOS: {"id": BOS, "ids": [self.bos_id], "tokens": [BOS]}},
            },
            "decoder": dict(byte_level),
            "model": {
                "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": {t: i for i, t in enumerate(self.tokens)},
                "merges": [f"{self.tokens[a]} {self.tokens[b]}" for a, b in self.merges],
            },
        }
        return json.dumps(doc, ensure_ascii=False, indent=1)

    def tokenizer_config_json(self, max_length):
        return json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
                           "add_bos_token": True, "add_eos_token": False, "model_max_length": max_length,
                           "clean_up_tokenization_spaces": False}, indent=2)

    @staticmethod
    def from_tokenizer_json(text):
        doc = json.loads(text)
        vocab = doc["model"]["vocab"]
        merges = []
        for m in doc["model"]["merges"]:
            left, right = m.split(" ") if isinstance(m, str) else m
            merges.append((vocab[left], vocab[right]))
        tok = ByteLevelBpe(merges)
        if tok.tokens != sorted(vocab, key=vocab.get):
            raise ValueError("tokenizer.json ids are not in this trainer's order (specials, bytes, merges)")
        return tok
