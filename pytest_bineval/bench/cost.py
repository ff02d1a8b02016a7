"""``bineval bench cost``: what one assertion costs on the hosted path, beside a one-call G-Eval-style metric.

Every SummEval summary is judged twice through the real request path (:class:`~pytest_bineval.engine.Engine`,
litellm, HTTP on 127.0.0.1): by bineval with a fixed 8-question consistency checklist (``explain=failing``), and
by the one-call G-Eval-style metric of ``bineval bench`` (definition and evaluation steps given, one score).

The target is a *recording* fake OpenAI-compatible server started here (:class:`CostRecorder`), or a server of
your own (``--api-base``, e.g. llama.cpp's: ``bineval serve``). The recorder answers deterministically (about 30%
of the questions "no", by a hash of the question and the summary), counts tokens as characters / 4 (a stated
estimate, the same for both methods) and reports as cached, OpenAI-style, the prefix it has already seen in an
earlier request (in 128-token steps from 1024 tokens), so the plugin's cached-token accounting runs for real.

Billing at named providers' price ratios (from litellm's price table, relative to the model's input price) is
computed from the recorded requests: *no cache* (every prompt token at 1x), OpenAI's automatic cache (cached
tokens at the cache-read ratio), Anthropic with the judge's two breakpoints (after the source: an assertion about a
source an earlier one wrote reads it at the read ratio; after the output: the first question of an assertion writes
what is not read yet at the write ratio, the others read it; only a prefix of >= 1024 tokens is cached; the one-call
metric sends none), completion tokens at the output ratio. Figures are per assertion (per summary for the one-call
metric).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..llm.caching import CACHE_MINIMUM_TOKENS
from ..testing.faults import FaultServer, Received, Reply, completion

__all__ = ["CostRecorder", "billed", "measure_cost", "render_cost"]

QUESTIONS = (
    "Is every person named in the summary also named in the article?",
    "Is every number in the summary also in the article?",
    "Does the summary attribute each statement to the person who made it in the article?",
    "Are the events in the summary in an order the article supports?",
    "Does the summary avoid claims the article does not make?",
    "Are the places named in the summary the ones the article names?",
    "Does the summary keep the article's meaning when it paraphrases?",
    "Does the summary avoid contradicting the article?",
)
# price ratios to the model's input price, from litellm's table: (label, litellm model, caching kind)
PROVIDERS = (
    ("Anthropic claude-haiku-4-5", "claude-haiku-4-5", "anthropic"),
    ("OpenAI gpt-4.1-mini", "gpt-4.1-mini", "openai"),
    ("OpenAI gpt-4o-mini", "gpt-4o-mini", "openai"),
)
CACHE_STEP = 128  # OpenAI caches in 128-token increments past the first 1024


def tokens_of(chars: int) -> int:
    return math.ceil(chars / 4)


def _text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Request:
    """One recorded request: its kind, prompt tokens, the prefix already seen (tokens), completion tokens."""

    kind: str  # answer | explanation | geval
    prompt: int
    seen: int
    completion: int
    text: str = field(default="", repr=False)


@dataclass
class CostRecorder:
    """The responder of the recording fake server (see the module)."""

    requests: list[Request] = field(default_factory=list)
    _texts: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, req: Received, index: int) -> Reply:
        body = req.body
        text = _text(body)
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        name = fmt.get("name", "") if isinstance(fmt, dict) else ""
        if name == "explanation":
            kind, content = "explanation", json.dumps({"explanation": "The summary states what the article "
                                                                      "does not."})
        elif name == "verdict":
            user = next((str(m["content"]) for m in body["messages"] if m.get("role") == "user"), "")
            digest = hashlib.sha256(user.encode("utf-8")).digest()[0]
            answer = "no" if digest % 10 < 3 else "yes"
            kind, content = "answer", json.dumps({"answer": answer})
            if body.get("stream"):  # one streamed reply: the answer, then the explanation
                kind = "streamed"
                content = json.dumps({"answer": answer, "explanation": "The summary states what the article "
                                                                       "does not."})
        else:
            kind, content = "geval", "3"
        with self._lock:
            seen = max((_common(text, t) for t in self._texts), default=0)
            self._texts.append(text)
            prompt = tokens_of(len(text))
            seen_tokens = min(prompt, seen // 4)
            cached = (seen_tokens // CACHE_STEP) * CACHE_STEP if seen_tokens >= CACHE_MINIMUM_TOKENS else 0
            # a streamed "yes" is closed by the client after its answer (explain=failing): billed up to there
            generated = '{"answer": "yes", ' if kind == "streamed" and '"answer": "yes"' in content else content
            self.requests.append(Request(kind, prompt, seen_tokens, tokens_of(len(generated)), text))
        reply = completion(content, model="recorder")
        reply["usage"] = {"prompt_tokens": prompt, "completion_tokens": tokens_of(len(content)),
                          "total_tokens": prompt + tokens_of(len(content)),
                          "prompt_tokens_details": {"cached_tokens": cached}}
        return Reply(200, reply)


def _ratios(model: str) -> dict[str, float]:
    from ..llm._litellm import import_litellm

    prices = import_litellm().model_cost[model]
    base = float(prices["input_cost_per_token"])
    return {"read": float(prices.get("cache_read_input_token_cost") or base) / base,
            "write": float(prices.get("cache_creation_input_token_cost") or base) / base,
            "output": float(prices["output_cost_per_token"]) / base}


def _source_end(text: str) -> str | None:
    """The judge request's text up to the end of its source (where the judge's source breakpoint goes)."""
    at = text.find("<response>")
    return text[:at] if at > 0 else None


def billed(requests: list[Request], kind: str, ratios: dict[str, float],
           cached_sources: set[str] | None = None) -> float:
    """The billed tokens (in input-token units) of one assertion's requests (or one one-call metric's).
    ``cached_sources`` (Anthropic, the judge's requests): the source prefixes earlier assertions of the run have
    written to the cache (the judge's first breakpoint, after the source); this assertion's is added."""
    total = 0.0
    # Anthropic: what the assertion's requests share up to the second breakpoint (after the output)
    shared = min((_common(requests[0].text, r.text) for r in requests[1:]), default=0) // 4
    source = _source_end(requests[0].text) if cached_sources is not None else None
    source_tokens = len(source) // 4 if source is not None else 0
    source_read = source is not None and source_tokens >= CACHE_MINIMUM_TOKENS and source in (cached_sources or ())
    if source is not None and source_tokens >= CACHE_MINIMUM_TOKENS and cached_sources is not None:
        cached_sources.add(source)
    for i, r in enumerate(requests):
        total += ratios["output"] * r.completion
        if kind == "none":
            total += r.prompt
        elif kind == "openai":
            cached = (r.seen // CACHE_STEP) * CACHE_STEP if r.seen >= CACHE_MINIMUM_TOKENS else 0
            total += (r.prompt - cached) + ratios["read"] * cached
        else:  # anthropic: a breakpoint after the shared prefix, cached when it is long enough
            if shared < CACHE_MINIMUM_TOKENS:
                total += r.prompt
            elif i == 0 and source_read:  # the source read from an earlier assertion's write, the output written
                total += ratios["read"] * source_tokens + ratios["write"] * (shared - source_tokens) + (r.prompt
                                                                                                      - shared)
            elif i == 0:
                total += ratios["write"] * shared + (r.prompt - shared)
            else:
                total += ratios["read"] * shared + (r.prompt - shared)
    return total


@dataclass
class Row:
    method: str
    requests: float
    prompt: float
    cached: float
    completion: float
    billed: dict[str, float]
    explanation_share: float  # of the prompt tokens, those of explanation requests (which re-send the prompt)


def _row(method: str, groups: list[list[Request]], reported_cached: float, *, breakpoints: bool = True,
         new_sources: bool = False) -> Row:
    """``breakpoints``: the method sends the judge's Anthropic breakpoints (the one-call metric sends none);
    ``new_sources``: bill every assertion as if its source were new to the cache (a suite whose tests each judge
    another input), not as read where an earlier assertion about the same source wrote it."""
    n = max(1, len(groups))
    bills: dict[str, float] = {}
    for label, model, kind in PROVIDERS:
        sources: set[str] | None = set() if breakpoints else None
        bills[label] = sum(billed(g, kind, _ratios(model), set() if new_sources and breakpoints else sources)
                           for g in groups) / n
    prompt = sum(r.prompt for g in groups for r in g)
    explained = sum(r.prompt for g in groups for r in g if r.kind == "explanation")
    return Row(method, sum(len(g) for g in groups) / n, prompt / n, reported_cached / n,
               sum(r.completion for g in groups for r in g) / n, bills, explained / max(1, prompt))


def measure_cost(items: list[Any], *, settings: Any = None) -> dict[str, Any]:
    """Judge ``items`` (SummEval :class:`~pytest_bineval.bench.datasets.Item`) with bineval and the one-call
    metric against the recording server (``settings`` None) or the server of ``settings`` (model, api_base);
    the per-assertion figures."""
    from ..engine import Engine, run_sync
    from ..models import Checklist, Question
    from ..settings import Settings
    from .methods import geval_messages
    from .specs import DATASETS

    if not items:
        raise ValueError("no summaries to judge")
    spec = DATASETS["summeval"]
    dim = spec.dimension("consistency")
    checklist = Checklist(task=spec.task, dimensions={"consistency": dim.definition},
                          questions=[Question(id=f"consistency-{i}", dimension="consistency", text=q)
                                     for i, q in enumerate(QUESTIONS, start=1)])
    recorder = CostRecorder()
    server: FaultServer | None = None
    if settings is None:
        server = FaultServer(recorder).start()
        settings = Settings(model="openai/recorder", api_base=server.base_url)
    settings = settings.with_overrides(cache="off", concurrency=1, explain="failing")
    engine = Engine(settings)
    two = Engine(settings.with_overrides(stream="off"))  # the two-request path, for comparison
    out: dict[str, Any] = {"target": "recording fake server" if server is not None else str(settings.api_base),
                           "model": settings.judge_model, "summaries": len(items), "questions": len(QUESTIONS),
                           "source_tokens": sum(tokens_of(len(i.source)) for i in items) / max(1, len(items))}
    try:
        bineval_groups: list[list[Request]] = []
        two_groups: list[list[Request]] = []
        geval_groups: list[list[Request]] = []
        usages = []
        two_usages = []
        geval_usages = []
        no = 0
        for item in items:
            start = len(recorder.requests)
            result = engine.evaluate(item.output, checklist, item.source)
            no += sum(v.answer == "no" for v in result.verdicts)
            usages.append(result.usage)
            bineval_groups.append(recorder.requests[start:])
            start = len(recorder.requests)
            two_usages.append(two.evaluate(item.output, checklist, item.source).usage)
            two_groups.append(recorder.requests[start:])
            start = len(recorder.requests)
            client = engine.client(settings.judge_model)
            reply = run_sync(client.complete_text(geval_messages(spec, item, dim), max_tokens=5))
            geval_usages.append(reply.usage)
            geval_groups.append(recorder.requests[start:])
        out["no_share"] = no / max(1, len(items) * len(QUESTIONS))
        n = max(1, len(items))

        def reported(us: list[Any]) -> dict[str, float]:
            return {"requests": sum(u.llm_calls for u in us) / n, "prompt": sum(u.prompt_tokens for u in us) / n,
                    "cached": sum(u.cached_prompt_tokens for u in us) / n,
                    "completion": sum(u.completion_tokens for u in us) / n,
                    "seconds": sum(u.seconds for u in us) / n}

        out["reported"] = {"bineval": reported(usages), "bineval, two requests": reported(two_usages),
                           "one-call": reported(geval_usages)}
        out["estimated"] = sum(u.estimated_requests for u in usages) / n
        if server is not None:
            out["rows"] = [_row("bineval (8 questions, explain=failing), streamed", bineval_groups,
                                out["reported"]["bineval"]["cached"] * n).__dict__,
                           _row("bineval streamed, each source new to the cache", bineval_groups,
                                out["reported"]["bineval"]["cached"] * n, new_sources=True).__dict__,
                           _row("bineval, two requests (--bineval-stream off)", two_groups,
                                out["reported"]["bineval, two requests"]["cached"] * n).__dict__,
                           _row("one-call G-Eval-style metric", geval_groups,
                                out["reported"]["one-call"]["cached"] * n, breakpoints=False).__dict__]
    finally:
        engine.close()
        two.close()
        if server is not None:
            server.stop()
    return out


def render_cost(result: dict[str, Any]) -> str:
    lines = [f"target: {result['target']} (model {result['model']}), {result['summaries']} summaries, "
             f"{result['questions']} questions, {result.get('no_share', 0):.0%} answered no, source "
             f"~{result['source_tokens']:.0f} tokens", ""]
    rows = result.get("rows")
    if rows:
        labels = list(rows[0]["billed"])
        lines.append("| per assertion | requests | prompt tokens | of which cached (OpenAI-style) | completion tokens "
                     "| "
                     + " | ".join(f"billed, {label}" for label in labels) + " |")
        lines.append("|---|---:|---:|---:|---:|" + "---:|" * len(labels))
        for r in rows:
            lines.append(f"| {r['method']} | {r['requests']:.2f} | {r['prompt']:.0f} | {r['cached']:.0f} | "
                         f"{r['completion']:.1f} | " + " | ".join(f"{r['billed'][k]:.0f}" for k in labels) + " |")
        one = rows[-1]["billed"]
        for r, name in ((rows[0], "bineval streamed / one-call"), (rows[1], "each source new / one-call"),
                        (rows[2], "two requests / one-call")):
            lines.append(f"| {name} | {r['requests'] / rows[-1]['requests']:.1f}x | "
                         f"{r['prompt'] / max(1, rows[-1]['prompt']):.1f}x | | | "
                         + " | ".join(f"{r['billed'][k] / max(1e-9, one[k]):.1f}x" for k in labels) + " |")
        lines.append("")
        lines.append(f"Explanation requests re-send {rows[0]['explanation_share']:.0%} of bineval's prompt tokens "
                     f"when streamed ({rows[2]['explanation_share']:.0%} on the two-request path). "
                     f"{result.get('estimated', 0):.1f} streamed replies per assertion were closed after their answer "
                     "(their completion is billed up to the answer; the plugin estimated their usage). "
                     "Billed: tokens in input-token units at each provider's price ratios from litellm's table "
                     "(cache read, cache write, output); tokens are characters / 4 at the recording server.")
    else:
        lines.append("| per assertion (as the server reported) | requests | prompt tokens | cached | completion tokens "
                     "| seconds |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for method, r in result["reported"].items():
            lines.append(f"| {method} | {r['requests']:.2f} | {r['prompt']:.0f} | {r['cached']:.0f} | "
                         f"{r['completion']:.1f} | {r['seconds']:.2f} |")
    return "\n".join(lines) + "\n"


def joined_sources(items: list[Any], k: int) -> list[Any]:
    """``items`` with each source followed by the next ``k - 1`` articles of the data (a long multi-document
    source: SummEval's articles are truncated to ~800 tokens, below the 1024-token caching minimum)."""
    if k <= 1:
        return items
    from dataclasses import replace

    articles = list(dict.fromkeys(i.source for i in items))
    out = []
    for item in items:
        at = articles.index(item.source)
        more = [articles[(at + j) % len(articles)] for j in range(1, k)]
        out.append(replace(item, source="\n\n".join([item.source, *more])))
    return out


def cmd_cost(args: argparse.Namespace) -> int:
    from ..settings import settings_from_args
    from .datasets import load_summeval

    items = joined_sources(load_summeval(args.data_dir), args.join_articles)[: args.limit or 8]
    given = settings_from_args(args)
    result = measure_cost(items, settings=given if given.api_base else None)
    text = render_cost(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "cost-recorder" if not given.api_base else "cost-server"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / f"{name}.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0
