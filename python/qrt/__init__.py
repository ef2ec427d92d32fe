"""qrt from Python: a thin ctypes wrapper over libruntime's C ABI (runtime/include/qrt/c_api.h).

    import qrt
    model = qrt.Model("stories260K.gguf")                       # device="cuda" for the GPU
    print(model.session().generate_text("Once upon a time", max_tokens=40))
    with model.engine(max_running=8) as engine:                 # continuous batching, paged KV cache
        requests = [engine.submit(prompt=p, max_tokens=40) for p in prompts]
        for piece in requests[0]:                               # streamed text
            print(piece, end="")
        print([r.result().text for r in requests])

The library is found through QRT_LIBRARY (a path to libruntime.so), else beside the package in a build tree
(build/runtime/libruntime.so from the repository root), else by the dynamic loader's search. Errors raise qrt.Error
with the C ABI's code and message.
"""
import ctypes
import os
import queue
import threading
from dataclasses import dataclass, field

__all__ = ["Error", "Model", "Session", "Engine", "Request", "Generation", "load_library"]

OK = 0
ERROR_NAMES = {1: "invalid argument", 2: "not found", 3: "io error", 4: "format error", 5: "unsupported",
               6: "out of range", 7: "cuda error", 8: "internal"}
STOP_REASONS = {0: "max_tokens", 1: "end_of_generation", 2: "stop_string", 3: "callback", 4: "context_full"}


class Error(Exception):
    """A failed qrt call: `code` is the C ABI's QRT_ERR_* value, `name` its meaning."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.name = ERROR_NAMES.get(code, "error")


class _GenerateParams(ctypes.Structure):
    _fields_ = [("max_tokens", ctypes.c_int32), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float), ("repetition_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("penalty_last_n", ctypes.c_int32), ("seed", ctypes.c_uint64),
                ("stop", ctypes.POINTER(ctypes.c_char_p)), ("n_stop", ctypes.c_size_t),
                ("stop_at_end_of_generation", ctypes.c_int32)]


class _ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class _EngineParams(ctypes.Structure):
    _fields_ = [("max_running", ctypes.c_int32), ("max_waiting", ctypes.c_int32), ("context_length", ctypes.c_int64),
                ("kv_cache_bytes", ctypes.c_uint64), ("block_size", ctypes.c_int32), ("prompt_chunk", ctypes.c_int64),
                ("kv_cache_fraction", ctypes.c_double)]


class _RequestResult(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("status", ctypes.c_int), ("error", ctypes.c_char_p),
                ("stop_reason", ctypes.c_int), ("tokens", ctypes.POINTER(ctypes.c_int32)),
                ("n_tokens", ctypes.c_size_t), ("text", ctypes.POINTER(ctypes.c_char)),
                ("text_length", ctypes.c_size_t), ("prompt_tokens", ctypes.c_int64)]


_TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                                   ctypes.c_void_p)
_DONE_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(_RequestResult), ctypes.c_void_p)


class _Request(ctypes.Structure):
    _fields_ = [("prompt", ctypes.c_char_p), ("messages", ctypes.POINTER(_ChatMessage)),
                ("n_messages", ctypes.c_size_t), ("params", _GenerateParams), ("on_token", _TOKEN_CALLBACK),
                ("on_done", _DONE_CALLBACK), ("user_data", ctypes.c_void_p)]


class _EngineCounts(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int32), ("waiting", ctypes.c_int32), ("steps", ctypes.c_uint64),
                ("prompt_tokens", ctypes.c_uint64), ("reused_prompt_tokens", ctypes.c_uint64),
                ("generated_tokens", ctypes.c_uint64), ("finished", ctypes.c_uint64),
                ("preemptions", ctypes.c_uint64), ("kv_blocks", ctypes.c_int64), ("kv_blocks_used", ctypes.c_int64),
                ("kv_blocks_cached", ctypes.c_int64), ("kv_block_size", ctypes.c_int32),
                ("kv_cache_bytes", ctypes.c_uint64)]


_lib = None
_lib_lock = threading.Lock()


def _declare(lib):
    P, c = ctypes.POINTER, ctypes
    sigs = {
        "qrt_last_error": (c.c_char_p, []),
        "qrt_generate_params_init": (None, [P(_GenerateParams)]),
        "qrt_model_open": (c.c_int, [c.c_char_p, c.c_char_p, P(c.c_void_p)]),
        "qrt_model_free": (None, [c.c_void_p]),
        "qrt_model_vocab_size": (c.c_int32, [c.c_void_p]),
        "qrt_model_context_length": (c.c_int64, [c.c_void_p]),
        "qrt_model_tokenize": (c.c_int, [c.c_void_p, c.c_char_p, c.c_int, c.c_int, P(c.c_int32), c.c_size_t,
                                         P(c.c_size_t)]),
        "qrt_model_detokenize": (c.c_int, [c.c_void_p, P(c.c_int32), c.c_size_t, c.c_int, c.c_char_p, c.c_size_t,
                                           P(c.c_size_t)]),
        "qrt_model_render_chat": (c.c_int, [c.c_void_p, P(_ChatMessage), c.c_size_t, c.c_int, c.c_char_p, c.c_size_t,
                                            P(c.c_size_t)]),
        "qrt_session_create": (c.c_int, [c.c_void_p, c.c_int64, P(c.c_void_p)]),
        "qrt_session_free": (None, [c.c_void_p]),
        "qrt_session_add_prompt": (c.c_int, [c.c_void_p, c.c_char_p]),
        "qrt_session_add_tokens": (c.c_int, [c.c_void_p, P(c.c_int32), c.c_size_t]),
        "qrt_session_generate": (c.c_int, [c.c_void_p, P(_GenerateParams), _TOKEN_CALLBACK, c.c_void_p, P(c.c_int)]),
        "qrt_session_reset": (None, [c.c_void_p]),
        "qrt_session_tokens": (c.c_size_t, [c.c_void_p, P(c.c_int32), c.c_size_t]),
        "qrt_engine_params_init": (None, [P(_EngineParams)]),
        "qrt_request_init": (None, [P(_Request)]),
        "qrt_engine_start": (c.c_int, [c.c_void_p, P(_EngineParams), P(c.c_void_p)]),
        "qrt_engine_free": (None, [c.c_void_p]),
        "qrt_engine_submit": (c.c_int, [c.c_void_p, P(_Request), P(c.c_uint64)]),
        "qrt_engine_cancel": (None, [c.c_void_p, c.c_uint64]),
        "qrt_engine_get_counts": (c.c_int, [c.c_void_p, P(_EngineCounts)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load_library(path=None):
    """Loads libruntime (once per process); `path` overrides QRT_LIBRARY and the search."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        candidates = [path, os.environ.get("QRT_LIBRARY")]
        here = os.path.dirname(os.path.abspath(__file__))
        candidates.append(os.path.join(here, "..", "..", "build", "runtime", "libruntime.so"))
        candidates.append("libruntime.so")
        errors = []
        for candidate in candidates:
            if not candidate or (os.sep in candidate and not os.path.exists(candidate)):
                continue
            try:
                _lib = _declare(ctypes.CDLL(candidate))
                return _lib
            except OSError as e:
                errors.append(f"{candidate}: {e}")
        raise Error(2, "libruntime not found (set QRT_LIBRARY to its path): " + "; ".join(errors or ["no candidate"]))


def _check(rc):
    if rc != OK:
        raise Error(rc, _lib.qrt_last_error().decode("utf-8", "replace"))


def _generate_params(max_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                     presence_penalty=0.0, frequency_penalty=0.0, penalty_last_n=None, seed=0, stop=(),
                     stop_at_end_of_generation=True):
    """The C parameters and the objects that must outlive them (the stop strings)."""
    p = _GenerateParams()
    _lib.qrt_generate_params_init(ctypes.byref(p))
    p.max_tokens, p.temperature, p.top_k, p.top_p, p.min_p = max_tokens, temperature, top_k, top_p, min_p
    p.repetition_penalty, p.presence_penalty, p.frequency_penalty = (repetition_penalty, presence_penalty,
                                                                     frequency_penalty)
    if penalty_last_n is not None:
        p.penalty_last_n = penalty_last_n
    p.seed = seed
    p.stop_at_end_of_generation = 1 if stop_at_end_of_generation else 0
    stops = (ctypes.c_char_p * max(len(stop), 1))(*[s.encode() for s in stop])
    p.stop, p.n_stop = ctypes.cast(stops, ctypes.POINTER(ctypes.c_char_p)), len(stop)
    return p, stops


def _chat_messages(messages):
    encoded = [(m["role"].encode(), m["content"].encode()) for m in messages]
    array = (_ChatMessage * max(len(encoded), 1))(*[_ChatMessage(r, c) for r, c in encoded])
    return array, encoded


def _text_out(call):
    """Runs a C function that writes text through (buffer, capacity, *length): asks for the length, then the text."""
    length = ctypes.c_size_t(0)
    _check(call(None, 0, ctypes.byref(length)))
    buf = ctypes.create_string_buffer(length.value + 1)
    _check(call(buf, len(buf), ctypes.byref(length)))
    return buf.raw[:length.value].decode("utf-8", "replace")


@dataclass
class Generation:
    text: str
    tokens: list
    stop_reason: str
    prompt_tokens: int = -1


class Model:
    def __init__(self, path, device="cpu", library=None):
        self._handle = None
        load_library(library)
        handle = ctypes.c_void_p()
        _check(_lib.qrt_model_open(str(path).encode(), device.encode(), ctypes.byref(handle)))
        self._handle = handle

    def close(self):
        if self._handle:
            _lib.qrt_model_free(self._handle)
            self._handle = None

    def __del__(self):
        if _lib is not None:
            self.close()

    @property
    def vocab_size(self):
        return _lib.qrt_model_vocab_size(self._handle)

    @property
    def context_length(self):
        return _lib.qrt_model_context_length(self._handle)

    def tokenize(self, text, add_special=True, parse_special=False):
        count = ctypes.c_size_t(0)
        raw = text.encode()
        _check(_lib.qrt_model_tokenize(self._handle, raw, int(add_special), int(parse_special), None, 0,
                                       ctypes.byref(count)))
        ids = (ctypes.c_int32 * max(count.value, 1))()
        _check(_lib.qrt_model_tokenize(self._handle, raw, int(add_special), int(parse_special), ids, count.value,
                                       ctypes.byref(count)))
        return list(ids[:count.value])

    def detokenize(self, ids, skip_special=False):
        array = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        return _text_out(lambda buf, cap, n: _lib.qrt_model_detokenize(self._handle, array, len(ids),
                                                                        int(skip_special), buf, cap, n))

    def render_chat(self, messages, add_generation_prompt=True):
        array, _keep = _chat_messages(messages)
        return _text_out(lambda buf, cap, n: _lib.qrt_model_render_chat(self._handle, array, len(messages),
                                                                         int(add_generation_prompt), buf, cap, n))

    def session(self, context_length=0):
        return Session(self, context_length)

    def engine(self, **options):
        return Engine(self, **options)


class Session:
    """One context on a model (qrt::Session); not for use from two threads at once."""

    def __init__(self, model, context_length=0):
        self._handle = None
        handle = ctypes.c_void_p()
        _check(_lib.qrt_session_create(model._handle, context_length, ctypes.byref(handle)))
        self._handle, self.model = handle, model

    def close(self):
        if self._handle:
            _lib.qrt_session_free(self._handle)
            self._handle = None

    def __del__(self):
        if _lib is not None:
            self.close()

    def add_prompt(self, text):
        _check(_lib.qrt_session_add_prompt(self._handle, text.encode()))

    def add_tokens(self, ids):
        array = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        _check(_lib.qrt_session_add_tokens(self._handle, array, len(ids)))

    @property
    def tokens(self):
        n = _lib.qrt_session_tokens(self._handle, None, 0)
        ids = (ctypes.c_int32 * max(n, 1))()
        _lib.qrt_session_tokens(self._handle, ids, n)
        return list(ids[:n])

    def reset(self):
        _lib.qrt_session_reset(self._handle)

    def generate(self, on_text=None, **params):
        """Continues the context; on_text(piece) sees the text as it becomes final (return False to stop)."""
        p, _stops = _generate_params(**params)
        pieces, ids = [], []

        def on_token(token, text, length, _user):
            piece = ctypes.string_at(text, length)
            pieces.append(piece)
            if token >= 0:
                ids.append(token)
            return 0 if on_text is not None and on_text(piece.decode("utf-8", "replace")) is False else 1

        callback = _TOKEN_CALLBACK(on_token)
        reason = ctypes.c_int(0)
        _check(_lib.qrt_session_generate(self._handle, ctypes.byref(p), callback, None, ctypes.byref(reason)))
        return Generation(b"".join(pieces).decode("utf-8", "replace"), ids, STOP_REASONS[reason.value])

    def generate_text(self, prompt, **params):
        self.add_prompt(prompt)
        return self.generate(**params).text


class Request:
    """A request submitted to an Engine: iterate it for the streamed text; result() waits for the whole of it."""

    def __init__(self):
        self.id = 0
        self._pieces = queue.Queue()
        self._done = threading.Event()
        self._result = None
        self._error = None
        self._engine = None
        self._keep = ()  # the C callbacks and strings, alive until the request is done
        self._user_on_token = None

    def _on_token(self, token, text, length, _user):
        piece = ctypes.string_at(text, length).decode("utf-8", "replace")
        self._pieces.put(piece)
        if self._user_on_token is not None and self._user_on_token(piece) is False:
            return 0  # the caller cancels the request
        return 1

    def _on_done(self, result, _user):
        r = result.contents
        if r.status == OK:
            self._result = Generation(ctypes.string_at(r.text, r.text_length).decode("utf-8", "replace"),
                                      list(r.tokens[:r.n_tokens]), STOP_REASONS[r.stop_reason], r.prompt_tokens)
        else:
            self._error = Error(r.status, r.error.decode("utf-8", "replace"))
        self._pieces.put(None)
        self._done.set()

    def __iter__(self):
        while True:
            piece = self._pieces.get()
            if piece is None:
                return
            yield piece

    def done(self):
        return self._done.is_set()

    def result(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.id} still running")
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self):
        self._engine._cancel(self.id)


class Engine:
    """Continuous batching on a model (qrt::Engine): submit() from any thread; callbacks run on the engine's thread.

    Options: max_running, max_waiting, context_length, kv_cache_bytes, block_size, prompt_chunk, kv_cache_fraction
    (see c_api.h)."""

    def __init__(self, model, **options):
        self._handle = None
        p = _EngineParams()
        _lib.qrt_engine_params_init(ctypes.byref(p))
        for name, value in options.items():
            if not hasattr(p, name):
                raise Error(1, f"unknown engine option {name!r}")
            setattr(p, name, value)
        handle = ctypes.c_void_p()
        _check(_lib.qrt_engine_start(model._handle, ctypes.byref(p), ctypes.byref(handle)))
        self._handle, self.model = handle, model
        # Requests whose C callbacks the engine may still call: a ctypes callback freed while C holds it would
        # crash. A finished request is let go one submit() later, when its on_done has surely returned.
        self._live, self._finished = {}, []
        self._lock = threading.Lock()

    def close(self):
        """Stops the engine; requests still pending end with an Error."""
        if self._handle:
            _lib.qrt_engine_free(self._handle)  # joins the engine's thread: no callback runs after this
            self._handle = None
            self._live, self._finished = {}, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if _lib is not None:
            self.close()

    def submit(self, prompt=None, messages=None, on_token=None, **params):
        """Queues a request. on_token(piece), when given, is called on the engine's thread with each piece of text
        as it is generated (it must not block the engine for long); returning False cancels the request."""
        if (prompt is None) == (messages is None):
            raise Error(1, "submit takes a prompt or messages")
        request = Request()
        request._engine = self
        request._user_on_token = on_token
        c = _Request()
        _lib.qrt_request_init(ctypes.byref(c))
        c.params, stops = _generate_params(**params)
        prompt_bytes = prompt.encode() if prompt is not None else None
        array, encoded = _chat_messages(messages or [])
        c.prompt = prompt_bytes
        if messages is not None:
            c.messages, c.n_messages = ctypes.cast(array, ctypes.POINTER(_ChatMessage)), len(messages)
        token_cb, done_cb = _TOKEN_CALLBACK(request._on_token), _DONE_CALLBACK(request._on_done)
        c.on_token, c.on_done = token_cb, done_cb
        request._keep = (token_cb, done_cb, stops, array, encoded, prompt_bytes)
        rid = ctypes.c_uint64(0)
        with self._lock:
            _check(_lib.qrt_engine_submit(self._handle, ctypes.byref(c), ctypes.byref(rid)))
            request.id = rid.value
            self._finished = [r for r in self._live.values() if r.done()]
            for r in self._finished:
                del self._live[r.id]
            self._live[request.id] = request
        return request

    def _cancel(self, rid):
        if self._handle:
            _lib.qrt_engine_cancel(self._handle, rid)

    def counts(self):
        c = _EngineCounts()
        _check(_lib.qrt_engine_get_counts(self._handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _EngineCounts._fields_}
