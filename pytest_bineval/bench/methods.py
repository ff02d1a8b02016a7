"""The judging methods compared by ``bineval bench``, all on the same judge model.

* ``bineval`` -- the library itself: a checklist generated once per dataset from the task prompt,
  every question answered by the engine's judge; score per dimension = share of yes (variant
  ``bineval-pyes``: mean P(yes) when the provider returns logprobs).
* ``geval`` -- one prompt per dimension with definition and evaluation steps, one score on the
  dimension's scale, probability-weighted over the score token's alternatives when logprobs are
  available (variant ``geval-int``: the generated integer).
* ``unieval`` -- one Boolean question per dimension, score = P(yes) (the 0/1 answer without logprobs).
* ``likelihood`` -- mean token log-probability of the output given the source (GPTScore-style), from
  the embedded model's logits; "n/a" for other models.
* ``overlap`` -- no model: share of the output's lowercased word tokens found in the source.

Every model call of bineval, geval and unieval goes through :class:`~pytest_bineval.llm.client.LLMClient`
(litellm, the reply cache, bounded retries); likelihood results are kept in the same cache.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine
from ..errors import BinevalError, CallError, ChecklistGenerationError
from ..judge import ANSWER_SCHEMA, AnswerReply
from ..llm.cache import cache_key
from ..llm.client import LLMClient
from ..llm.parsing import read_reply
from ..llm.providers import is_embedded
from ..models import Checklist, Evaluation, Question, Usage
from ..prompting import Prompt, delimit, load_prompt
from .datasets import Item
from .specs import IFBENCH_TASK, DatasetSpec, Dimension, Scale, ifbench_question

__all__ = [
    "VARIANTS",
    "BinevalMethod",
    "GevalMethod",
    "ItemResult",
    "LikelihoodMethod",
    "Method",
    "OverlapMethod",
    "ScoreClient",
    "UnievalMethod",
    "Variant",
    "checklist_name",
    "expected_score",
    "load_bench_prompt",
    "make_method",
    "overlap_score",
]

GEVAL_SCHEMA_NAME = "geval_score"
UNIEVAL_SCHEMA_NAME = "unieval_answer"
LIKELIHOOD_VERSION = "2"

_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------------------------------
# prompts


def load_bench_prompt(name: str) -> Prompt:
    """A prompt file of ``pytest_bineval/bench/prompts/`` (same format and loader as the engine's prompts)."""
    return load_prompt(name, "bench/prompts")


def _judge_values(spec: DatasetSpec, item: Item) -> dict[str, str]:
    return {
        "task": spec.task,
        "source_label": spec.source_label,
        "source": delimit(item.source),
        "output_label": spec.output_label,
        "output": delimit(item.output),
    }


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def geval_messages(spec: DatasetSpec, item: Item, dim: Dimension) -> list[dict[str, str]]:
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(dim.geval_steps, start=1)) or "1. Judge as defined."
    return load_bench_prompt("geval").messages(
        **_judge_values(spec, item),
        dimension=dim.name,
        definition=dim.definition,
        steps=steps,
        low=_number(dim.geval_scale.low),
        high=_number(dim.geval_scale.high),
    )


def unieval_messages(spec: DatasetSpec, item: Item, question: str) -> list[dict[str, str]]:
    return load_bench_prompt("unieval").messages(**_judge_values(spec, item), question=question)


def likelihood_messages(spec: DatasetSpec, item: Item) -> list[dict[str, str]]:
    return load_bench_prompt("likelihood").messages(task=spec.task, source_label=spec.source_label, source=item.source)


# --------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Variant:
    """One score a method reports; ``bounded`` scores live on a known scale (for distribution figures)."""

    name: str
    method: str
    description: str
    bounded: bool = True


VARIANTS: dict[str, tuple[Variant, ...]] = {
    "bineval": (
        Variant("bineval", "bineval", "share of checklist questions answered yes"),
        Variant("bineval-pyes", "bineval", "mean P(yes) over the dimension's questions"),
    ),
    "geval": (
        Variant("geval", "geval", "score on the dimension's scale, probability-weighted when logprobs exist"),
        Variant("geval-int", "geval", "the generated integer score"),
    ),
    "bineval-turns": (
        Variant("bineval-turns", "bineval-turns", "share of yes of the reply's turn, every question asked of each "
                "assistant turn of the dialogue"),
        Variant("bineval-turns-pyes", "bineval-turns", "mean P(yes) of the reply's turn, asked turn by turn"),
    ),
    "unieval": (Variant("unieval", "unieval", "P(yes) of one Boolean question (0/1 without logprobs)"),),
    "likelihood": (Variant("likelihood", "likelihood", "mean token log-probability of the output", bounded=False),),
    "overlap": (Variant("overlap", "overlap", "share of output words found in the source"),),
}


@dataclass
class ItemResult:
    """What one method said about one item.

    ``scores``: variant -> dimension -> score (None when unavailable); ``decisions``: dimension ->
    yes (True) / no (False) for methods with a binary verdict; ``answers``: checklist question id ->
    yes/no/None (bineval, for the question audit); ``errors``: messages of failed calls.
    """

    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    decisions: dict[str, bool | None] = field(default_factory=dict)
    answers: dict[str, bool | None] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)


def variant_scale(variant: str, dim: Dimension) -> Scale | None:
    """The scale a variant's scores live on (None when unbounded)."""
    if variant in ("geval", "geval-int"):
        return dim.geval_scale
    if variant == "likelihood":
        return None
    return Scale(0.0, 1.0)


def checklist_name(dimension: str) -> str:
    """A dimension name the checklist accepts (custom score keys may hold dots)."""
    name = re.sub(r"[^\w-]", "_", dimension)
    if not name or not name[0].isalpha():
        name = "d_" + name
    return name[:41]


class Method:
    """Base class: ``prepare`` once per dataset, then ``score`` each item."""

    name = ""
    unavailable: str | None = None  # why the method cannot run with this model ("n/a")

    def __init__(self, engine: Engine, model: str, spec: DatasetSpec) -> None:
        self.engine = engine
        self.model = model
        self.spec = spec
        self.prepare_usage = Usage()
        self.notes: dict[str, Any] = {}

    @property
    def variants(self) -> tuple[Variant, ...]:
        return VARIANTS[self.name]

    async def prepare(self) -> None:
        return None

    async def score(self, item: Item) -> ItemResult:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------------
# bineval


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class BinevalMethod(Method):
    """The library's checklist method (the engine's checklist generation and judge)."""

    name = "bineval"

    def __init__(self, engine: Engine, model: str, spec: DatasetSpec, pinned: Checklist | None = None) -> None:
        super().__init__(engine, model, spec)
        self.pinned = pinned
        self.checklist: Checklist | None = None
        self._to_spec = {checklist_name(d.name): d.name for d in spec.dimensions}

    async def prepare(self) -> None:
        if self.spec.protocol == "ifbench":
            return  # one question per constraint, built per item
        if self.pinned is not None:
            names = [n for n in self._to_spec if n in self.pinned.dimensions]
            if not names:
                raise ValueError(
                    f"the --checklist has none of the dataset's dimensions {sorted(self._to_spec)}; "
                    f"it has {sorted(self.pinned.dimensions)}"
                )
            self.checklist = self.pinned.select(names)
            self.notes["checklist source"] = "pinned (--checklist)"
            return
        dims = {checklist_name(d.name): d.definition for d in self.spec.dimensions}
        writer = self.engine.settings.generator_model  # the judge model unless --checklist-model
        by = "the judge model" if writer == self.model else f"{writer} (--checklist-model)"
        before = self.engine.usage
        try:
            self.checklist = await self.engine.achecklist(self.spec.task, dims, model=writer)
            self.notes["checklist source"] = f"generated by {by}"
        except ChecklistGenerationError as exc:
            # A weak model may write the same question for every dimension, which the joint generation
            # rejects; generate one dimension at a time instead (duplicates across dimensions stay).
            parts = [await self.engine.achecklist(self.spec.task, {n: d}, model=writer) for n, d in dims.items()]
            self.checklist = Checklist(
                task=parts[0].task,
                dimensions=dims,
                requirements=parts[0].requirements,
                questions=[q for part in parts for q in part.questions],
                model=parts[0].model,
                prompt_version=parts[0].prompt_version,
            )
            self.notes["checklist source"] = (
                f"generated by {by} one dimension at a time (joint generation failed: {exc})"
            )
        self.prepare_usage = self.engine.usage.since(before)

    def item_checklist(self, item: Item) -> Checklist:
        if self.spec.protocol != "ifbench":
            assert self.checklist is not None, "prepare() first"
            return self.checklist
        instruction = str(item.extra.get("instruction_id", "constraint"))
        kwargs = item.extra.get("kwargs")
        text = ifbench_question(instruction, kwargs if isinstance(kwargs, dict) else None)
        dim = self.spec.dimensions[0]
        return Checklist(
            task=IFBENCH_TASK,
            dimensions={checklist_name(dim.name): dim.definition},
            questions=[Question(id=instruction, dimension=checklist_name(dim.name), text=text)],
            model=self.model,
        )

    async def score(self, item: Item) -> ItemResult:
        checklist = self.item_checklist(item)
        try:
            ev = await self.engine.aevaluate(item.output, checklist, item.source, model=self.model)
        except BinevalError as exc:
            return ItemResult(errors=[f"{type(exc).__name__}: {exc}"])
        return self._result(ev)

    def _result(self, ev: Evaluation) -> ItemResult:
        shares: dict[str, float | None] = {}
        pyes: dict[str, float | None] = {}
        decisions: dict[str, bool | None] = {}
        for cname, dim in self._to_spec.items():
            verdicts = [v for v in ev.verdicts if v.dimension == cname]
            shares[dim] = ev.scores.get(cname)
            pyes[dim] = _mean([v.p_yes for v in verdicts if v.answer != "error" and v.p_yes is not None])
            if len(verdicts) == 1:
                decisions[dim] = None if verdicts[0].answer == "error" else verdicts[0].answer == "yes"
        answers = {v.question_id: None if v.answer == "error" else v.answer == "yes" for v in ev.verdicts}
        errors = [f"{v.question_id}: {v.error}" for v in ev.verdicts if v.answer == "error"]
        return ItemResult(
            scores={"bineval": shares, "bineval-pyes": pyes},
            decisions=decisions,
            answers=answers,
            usage=ev.usage,
            errors=errors,
        )


# --------------------------------------------------------------------------------------------------
# geval


_SCORE_PREFIX = re.compile(r'"score"\s*:\s*$')


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _score_mass(entry: Any, allowed: range) -> dict[int, float]:
    """Probability of each allowed score among an entry's alternatives and its own (sampled) token."""
    alternatives = list(_get(entry, "top_logprobs") or [])
    sampled = str(_get(entry, "token") or "")
    if all(str(_get(alt, "token") or "") != sampled for alt in alternatives):
        # A grammar may force a token the model did not rank among its top alternatives.
        alternatives.append(entry)
    mass: dict[int, float] = {}
    for alt in alternatives:
        word = str(_get(alt, "token") or "").strip().strip('"')
        lp = _get(alt, "logprob")
        if lp is None or not word.isdigit() or int(word) not in allowed:
            continue
        mass[int(word)] = mass.get(int(word), 0.0) + math.exp(float(lp))
    return mass


def expected_score(logprobs: Any, allowed: range) -> float | None:
    """Probability-weighted score at the score position of a ``{"score": N}`` reply (G-Eval's weighting).

    The score position is the first non-blank token after ``"score":``. The probabilities of its
    alternatives (and of the sampled token itself) that read as an allowed integer (surrounding spaces
    and quotes ignored) are normalised and averaged. None when the provider gave no logprobs or no
    alternative is an allowed score.
    """
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    text = ""
    for entry in content:
        token = str(_get(entry, "token") or "")
        if token.strip() and _SCORE_PREFIX.search(text):
            mass = _score_mass(entry, allowed)
            total = sum(mass.values())
            return None if total == 0 else sum(k * p for k, p in mass.items()) / total
        text += token
    return None


def _scale_range(scale: Scale) -> range:
    return range(math.ceil(scale.low), math.floor(scale.high) + 1)


def geval_schema(scale: Scale) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"score": {"type": "integer", "enum": list(_scale_range(scale))}},
        "required": ["score"],
        "additionalProperties": False,
    }


class ScoreClient(LLMClient):
    """An :class:`LLMClient` whose transport adds ``"expected"`` to G-Eval replies.

    When logprobs come back, the probability-weighted score over the score token's alternatives is
    written into the JSON reply (``{"score": 4, "expected": 3.71}``) before it is validated and
    cached, so that a rerun served from the cache gives the same weighted score.
    """

    async def _call(self, request: dict[str, Any], until: Callable[[str], bool] | None = None) -> Any:
        response = await super()._call(request, until)
        fmt = request.get("response_format") or {}
        if (fmt.get("json_schema") or {}).get("name") != GEVAL_SCHEMA_NAME or not request.get("logprobs"):
            return response
        try:
            schema = fmt["json_schema"]["schema"]
            allowed = range(min(schema["properties"]["score"]["enum"]), max(schema["properties"]["score"]["enum"]) + 1)
            choice = response.choices[0]
            message = _get(choice, "message")
            obj = json.loads(str(_get(message, "content") or ""))
            if not isinstance(obj, dict):
                return response
            obj["expected"] = expected_score(_get(choice, "logprobs"), allowed)
            message.content = json.dumps(obj)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            pass  # leave the reply as it is; validation decides
        return response


def _geval_validator(scale: Scale) -> Any:
    allowed = _scale_range(scale)

    def validate(obj: dict[str, Any]) -> tuple[int, float | None]:
        raw = obj.get("score")
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise ValueError(f'"score" must be a number, not {raw!r}')
        value = float(raw)
        if not value.is_integer() or int(value) not in allowed:
            raise ValueError(f'"score" must be an integer from {allowed.start} to {allowed.stop - 1}')
        expected = obj.get("expected")
        weighted = float(expected) if isinstance(expected, (int, float)) and not isinstance(expected, bool) else None
        return int(value), weighted

    return validate


class GevalMethod(Method):
    """G-Eval-style: one prompt per dimension, a score on its scale, probability-weighted if possible."""

    name = "geval"

    def __init__(self, engine: Engine, model: str, spec: DatasetSpec) -> None:
        super().__init__(engine, model, spec)
        base = engine.client(model)
        self.client = ScoreClient(base.settings, base.cache)

    async def score(self, item: Item) -> ItemResult:
        result = ItemResult(scores={"geval": {}, "geval-int": {}})
        for dim in self.spec.dimensions:
            try:
                reply = await self.client.complete_json(
                    geval_messages(self.spec, item, dim),
                    schema_name=GEVAL_SCHEMA_NAME,
                    schema=geval_schema(dim.geval_scale),
                    validate=_geval_validator(dim.geval_scale),
                    max_tokens=24,
                    want_p_yes=True,
                )
            except (CallError, BinevalError) as exc:
                result.usage += getattr(exc, "usage", Usage(llm_calls=1))
                result.errors.append(f"{dim.name}: {getattr(exc, 'cause', exc)}")
                result.scores["geval"][dim.name] = result.scores["geval-int"][dim.name] = None
                continue
            result.usage += reply.usage
            integer, weighted = reply.value
            result.scores["geval-int"][dim.name] = float(integer)
            result.scores["geval"][dim.name] = weighted if weighted is not None else float(integer)
            key = "probability-weighted scores" if weighted is not None else "integer scores (no usable logprobs)"
            self.notes[key] = self.notes.get(key, 0) + 1
        return result


# --------------------------------------------------------------------------------------------------
# unieval


def _yes_no(obj: dict[str, Any]) -> bool:
    """The UniEval reply is the judge's answer-only reply (one definition: :class:`~pytest_bineval.judge.AnswerReply`,
    whose schema is :data:`~pytest_bineval.judge.ANSWER_SCHEMA`)."""
    return read_reply(AnswerReply, obj).answer == "yes"


class UnievalMethod(Method):
    """UniEval-style: one yes/no question per dimension; score = P(yes), or 0/1 without logprobs.

    On IFBench the one question asks whether the response follows every instruction of the prompt
    (the holistic counterpart of bineval's one question per constraint).
    """

    name = "unieval"

    async def score(self, item: Item) -> ItemResult:
        client = self.engine.client(self.model)
        result = ItemResult(scores={"unieval": {}})
        for dim in self.spec.dimensions:
            try:
                reply = await client.complete_json(
                    unieval_messages(self.spec, item, dim.unieval_question),
                    schema_name=UNIEVAL_SCHEMA_NAME,
                    schema=ANSWER_SCHEMA,
                    validate=_yes_no,
                    max_tokens=16,
                    want_p_yes=True,
                )
            except (CallError, BinevalError) as exc:
                result.usage += getattr(exc, "usage", Usage(llm_calls=1))
                result.errors.append(f"{dim.name}: {getattr(exc, 'cause', exc)}")
                result.scores["unieval"][dim.name] = None
                result.decisions[dim.name] = None
                continue
            result.usage += reply.usage
            result.decisions[dim.name] = reply.value
            key = "P(yes) scores" if reply.p_yes is not None else "0/1 scores (no usable logprobs)"
            self.notes[key] = self.notes.get(key, 0) + 1
            result.scores["unieval"][dim.name] = reply.p_yes if reply.p_yes is not None else float(reply.value)
        return result


# --------------------------------------------------------------------------------------------------
# likelihood


class LikelihoodMethod(Method):
    """GPTScore-style: mean token log-probability of the output given the source (embedded model only)."""

    name = "likelihood"

    def __init__(self, engine: Engine, model: str, spec: DatasetSpec) -> None:
        super().__init__(engine, model, spec)
        if not is_embedded(model):
            self.unavailable = (
                f"{model} is reached through a chat API that cannot score a given text "
                "(no prompt logprobs); only the embedded model gives them"
            )
        self._model: Any = None

    async def prepare(self) -> None:
        if self.unavailable is None:
            from ..llm.providers import embedded_model

            self._model = embedded_model()

    def _measure(self, messages: list[dict[str, str]], output: str) -> dict[str, Any]:
        logprobs = self._model.continuation_logprobs(messages, output)
        n_prompt = len(self._model.prompt_tokens(messages))
        return {"mean": _mean(logprobs), "n_tokens": len(logprobs), "prompt_tokens": n_prompt}

    async def score(self, item: Item) -> ItemResult:
        names = [d.name for d in self.spec.dimensions]
        if self.unavailable is not None or not item.output.strip():
            return ItemResult(scores={"likelihood": dict.fromkeys(names)})
        messages = likelihood_messages(self.spec, item)
        key = cache_key(
            {
                "method": "likelihood",
                "version": LIKELIHOOD_VERSION,
                "model": self.model,
                "messages": messages,
                "continuation": item.output,
            }
        )
        cache_ = self.engine.cache
        hit = cache_.get(key) if cache_ is not None else None
        if hit is not None and ("mean" in hit):
            value = hit["mean"]
            return ItemResult(
                scores={"likelihood": dict.fromkeys(names, None if value is None else float(value))},
                usage=Usage(cache_hits=1),
            )
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            measured = await asyncio.to_thread(self._measure, messages, item.output)
        except Exception as exc:  # the context is too small, the model failed: one missing score
            return ItemResult(
                scores={"likelihood": dict.fromkeys(names)},
                usage=Usage(llm_calls=1),
                errors=[f"{type(exc).__name__}: {exc}"],
            )
        if cache_ is not None:
            cache_.set(key, measured)
        usage = Usage(
            llm_calls=1,
            prompt_tokens=measured["prompt_tokens"] + measured["n_tokens"],
            seconds=loop.time() - started,
        )
        return ItemResult(scores={"likelihood": dict.fromkeys(names, measured["mean"])}, usage=usage)


# --------------------------------------------------------------------------------------------------
# overlap


def overlap_score(output: str, source: str) -> float | None:
    """Share of the output's lowercased word tokens that occur in the source (None for no words)."""
    words = _WORD.findall(output.lower())
    if not words:
        return None
    vocabulary = set(_WORD.findall(source.lower()))
    return sum(w in vocabulary for w in words) / len(words)


class OverlapMethod(Method):
    """No model: word overlap between output and source (a sanity row)."""

    name = "overlap"

    async def score(self, item: Item) -> ItemResult:
        value = overlap_score(item.output, item.source)
        return ItemResult(scores={"overlap": {d.name: value for d in self.spec.dimensions}})


def make_method(name: str, engine: Engine, model: str, spec: DatasetSpec, pinned: Checklist | None = None) -> Method:
    """The method called ``name`` for a dataset."""
    if name == "bineval":
        return BinevalMethod(engine, model, spec, pinned)

    classes: dict[str, type[Method]] = {
        "geval": GevalMethod,
        "unieval": UnievalMethod,
        "likelihood": LikelihoodMethod,
        "overlap": OverlapMethod,
    }
    if name not in classes:
        raise ValueError(f"unknown method {name!r}")
    return classes[name](engine, model, spec)
