"""One evaluation's record: :class:`EvaluationRecord` (one ``assert_passes`` evaluation, what every output and
the ``pytest_bineval_evaluated`` hook take), its parts (:class:`DimensionResult`, :class:`Location`), the digests that
tell two runs' outputs and checklists apart, :class:`JudgedBy` (what judged a run), :class:`UnscoredTest` (a test that
errored before any evaluation), and the views of records that a report keeps (unstable questions, what
``--bineval-confirm`` did).

Every text in a record passes the redaction step (and lone surrogates are replaced): records are what leaves the
process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..conversation import Conversation, turn_label
from ..kinds import GATES as GATES  # re-exported
from ..kinds import Gate as Gate
from ..models import (
    Answer,
    Checklist,
    ConfirmCost,
    Evaluation,
    Question,
    ScoreKind,
    Strategy,
    Usage,
    Verdict,
    points_score,
    share_of_yes,
    yes_count,
)
from ..redaction import redact_known, replace_surrogates, secret_values
from ..repeats import wilson_interval
from ..sources import NO_SOURCE_DIGEST, Source, SourceArg, heading, read_source

SOURCE_IN_REPORT = 4000  # characters of the source kept in a record
PARAM_IN_REPORT = 300  # characters of each parameter's repr kept in a record
OUTPUT_IN_REPORT = 20000  # characters of the output kept in a record (the digest covers all of it)
UNSCORED_MESSAGE = 2000  # characters of an unscored test's error message kept in the report
MESSAGE_IN_REPORT = 4000  # characters of each text of a conversation kept in a record (the digest covers all)

Outcome = Literal["passed", "failed", "error"]
ChecklistStatus = Literal["pinned", "written", "unpinned", "stale", "explicit"]


def text_digest(text: str) -> str:
    """A short digest of a text (an output under test: did it change between two runs?)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def questions_digest(questions: Sequence[Question]) -> str:
    """``sha256:<hex>`` of a checklist's questions (ids, dimensions, texts and the rest): an edit to any question
    changes it. A pin entry records it of its generated questions; a report, of each evaluation's checklist."""
    body = json.dumps([q.model_dump(mode="json") for q in questions], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def clean(text: str, secrets: list[str] | None = None) -> str:
    """A string fit to leave the process: secrets redacted, lone surrogates (not valid UTF-8) replaced.
    ``secrets``: what :func:`~pytest_bineval.redaction.secret_values` returned (read once per record); None: read
    now."""
    return redact_known(replace_surrogates(text)[0], secret_values() if secrets is None else secrets)


def _clean_verdict(v: Verdict, secrets: list[str]) -> Verdict:
    return v.model_copy(update={
        "question": clean(v.question, secrets), "explanation": clean(v.explanation, secrets),
        "error": None if v.error is None else clean(v.error, secrets),
    })


def _repr(value: object) -> str:
    """A parameter as the report shows it: its repr (a repr that raises is named so)."""
    try:
        return repr(value)
    except Exception as exc:  # a user's object: its repr is its own code
        return f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"


def excerpt(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


class DimensionResult(BaseModel):
    """One checked dimension of an evaluation: its score against its threshold."""

    name: str
    score: float | None = Field(description="share of yes over the answered questions x repeats (score_kind 'share'), "
                                "or the points-weighted score (score_kind 'points'); None if nothing was answered")
    threshold: float
    outcome: Outcome = Field(description="error: a question of this dimension got no answer from the judge")
    answers: int = Field(default=0, description="the answers the score is a share of: answered questions x repeats")
    low: float | None = Field(default=None, description="lower end of the score's 95% Wilson interval (share only)")
    high: float | None = Field(default=None, description="upper end of the score's 95% Wilson interval (share only)")
    score_kind: ScoreKind = Field(default="share", description="share: yeses / answered questions; points: "
                                  "points earned minus penalties over the positive points, clipped to [0, 1]")

    def gated(self, gate: Gate) -> float | None:
        """What the threshold is compared with: the score (gate ``mean``) or its interval's lower end."""
        return self.score if gate == "mean" else self.low


class Location(BaseModel):
    """Where the ``assert_passes`` call is: rootdir-relative file (POSIX) and 1-based line."""

    file: str
    line: int


class SourceDocument(BaseModel):
    """One document of a source given as a list of documents (``source=[...]``), as a record keeps it: where the
    judge read it, its id and title (redacted, one line) and the digest of its text."""

    number: int = Field(description="its position in the list, from 1: the judge read it as [number]")
    id: str | None = None
    title: str | None = None
    digest: str = Field(description="digest of its text")
    chars: int = Field(default=0, description="length of its text")

    @property
    def heading(self) -> str:
        """``[2] Refund policy (id: kb-7)``, as the judge read it."""
        return heading(self.number, self.id, self.title)

    @classmethod
    def of(cls, source: Source | None, secrets: list[str]) -> list[SourceDocument] | None:
        if source is None or source.documents is None:
            return None
        return [cls(number=n, id=None if d.id is None else clean(d.id, secrets),
                    title=None if d.title is None else clean(d.title, secrets), digest=d.digest, chars=len(d.text))
                for n, d in enumerate(source.documents, 1)]


class RecordRequest(Protocol):
    """What an evaluation's record keeps of what was asked: the output and its source, where the call is, the
    generator prompt the test names, what each threshold is compared with and the kind of score.
    :class:`~pytest_bineval.assertions.AssertionRequest` is one; :class:`Asked` is the plain one (an evaluation
    made outside an assertion: a benchmark's, a test's)."""

    @property
    def output(self) -> str | Conversation: ...
    @property
    def source(self) -> SourceArg: ...
    @property
    def location(self) -> Location | None: ...
    @property
    def prompt(self) -> str | None: ...
    @property
    def gate(self) -> Gate: ...
    @property
    def score_kind(self) -> ScoreKind: ...


@dataclass(frozen=True)
class Asked:
    """A plain :class:`RecordRequest`."""

    output: str | Conversation = ""
    source: SourceArg = None
    location: Location | None = None
    prompt: str | None = None
    gate: Gate = "mean"
    score_kind: ScoreKind = "share"


class EvaluationRecord(BaseModel):
    """One evaluation made by ``assert_passes`` (or the ``bineval`` fixture) during a test."""

    model_config = ConfigDict(extra="forbid")

    test: str = Field(description="pytest node id")
    index: int = Field(default=0, description="which evaluation of the test this is (0 for the first)")
    task: str
    prompt: str | None = Field(default=None, description="the generator prompt file the test names (for optimize)")
    model: str
    checklist_model: str = ""
    checklist_status: ChecklistStatus
    prompt_version: str = Field(default="", description="version of the packaged prompts that made the checklist")
    dimensions: list[DimensionResult]
    overall: float | None = None
    outcome: Outcome
    questions: list[Question] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    output: str = Field(default="", description=f"the output under test (first {OUTPUT_IN_REPORT} characters)")
    output_digest: str = ""
    source: str | None = Field(default=None, description=f"the source as the judge read it (first {SOURCE_IN_REPORT} "
                               "characters; documents numbered and delimited)")
    source_digest: str | None = Field(default=None, description="digest of the whole source: of its text, or of its "
                                      f"documents' ids, titles and texts in order; '{NO_SOURCE_DIGEST}' when no source "
                                      "was given; absent in older reports (unknown, never unchanged)")
    documents: list[SourceDocument] | None = Field(default=None, description="the source's documents, when source= "
                                                   "was a list of documents (None: one text, or no source)")
    usage: Usage = Field(default_factory=Usage)
    location: Location | None = None
    params: dict[str, str] = Field(default_factory=dict, description="the test's parameters (pytest's "
                                   f"parametrize values): name -> repr, at most {PARAM_IN_REPORT} characters each")
    repeats: int = Field(default=1, description="how many times each question was asked (--bineval-repeats)")
    gate: Gate = Field(default="mean", description="what each threshold was compared with: the score (mean) or "
                                                   "the lower end of its 95% Wilson interval (lower-bound)")
    score_kind: ScoreKind = Field(default="share", description="the kind of the dimension scores and of overall")
    strategy: Strategy = Field(default="bineval", description="what wrote the checklist: bineval (per task), "
                               "qworld or qworld-lite (per question, with points)")
    conversation: list[dict[str, Any]] | None = Field(
        default=None, description="a conversation under test: its messages in the OpenAI format (each text's first "
                                  f"{MESSAGE_IN_REPORT} characters); output is then its transcript. None: a text")
    first_failing_turn: int | None = Field(
        default=None, description="a conversation: the first turn with a failing verdict of a checked dimension "
                                  "(the first step that went wrong)")

    @classmethod
    def build(cls, request: RecordRequest, evaluation: Evaluation, checklist: Checklist | Sequence[Question], *,
              thresholds: dict[str, float], status: ChecklistStatus, test: str = "",
              index: int = 0, params: Mapping[str, object] | None = None) -> EvaluationRecord:
        """The record of ``evaluation`` of what ``request`` asked (its output, source, call, gate and score kind),
        judged with ``checklist`` (or just its questions) against ``thresholds`` (its outcome is computed here);
        ``test``: the pytest node id, ``index``: which evaluation of the test it is, ``params``: the test's
        parametrize values. The scores are shares of yes, or
        with the request's ``score_kind="points"`` points-weighted (:func:`points_score`, which has no interval: the
        ``lower-bound`` gate needs shares). Every text in it passes the redaction step (and lone surrogates are
        replaced): records are what leaves the process."""
        made = checklist if isinstance(checklist, Checklist) else None
        questions = checklist.questions if isinstance(checklist, Checklist) else list(checklist)
        score_kind, gate, output, source = request.score_kind, request.gate, request.output, request.source

        def score_of(verdicts: Sequence[Verdict]) -> float | None:
            return points_score(verdicts, questions) if score_kind == "points" else share_of_yes(verdicts)

        dims: list[DimensionResult] = []
        for name, limit in thresholds.items():
            of_dim = [v for v in evaluation.verdicts if v.dimension == name]
            score = score_of(of_dim)
            yes, answers = yes_count(of_dim)
            interval = wilson_interval(yes, answers) if score_kind == "share" else None
            low, high = interval if interval is not None else (None, None)
            gated = score if gate == "mean" else low
            errored = any(v.answer == "error" for v in of_dim)
            outcome: Outcome = "error" if errored else ("passed" if gated is not None and gated >= limit else "failed")
            dims.append(DimensionResult(name=name, score=score, threshold=limit, outcome=outcome, answers=answers,
                                        low=low, high=high, score_kind=score_kind))
        overall: Outcome = (
            "error" if any(d.outcome == "error" for d in dims)
            else "passed" if all(d.outcome == "passed" for d in dims) else "failed"
        )
        secrets = secret_values()
        src = read_source(source)  # a list of documents: rendered as the judge read it, and each one's digest
        kept_source = excerpt(None if src is None else src.text, SOURCE_IN_REPORT)
        messages: list[dict[str, Any]] | None = None
        digest = text_digest(output) if isinstance(output, str) else output.digest()
        if isinstance(output, Conversation):
            messages = output.to_openai(lambda text: clean(excerpt(text, MESSAGE_IN_REPORT) or "", secrets))
            output = output.transcript()
        steps = [v.step for v in evaluation.verdicts if v.dimension in thresholds and v.answer == "no"]
        return cls(
            test=test, index=index, task=clean(evaluation.task, secrets), prompt=request.prompt,
            model=evaluation.model, checklist_model=made.model if made else "", checklist_status=status,
            prompt_version=made.prompt_version if made else "",
            dimensions=dims, overall=score_of(evaluation.verdicts), outcome=overall, questions=list(questions),
            verdicts=[_clean_verdict(v, secrets) for v in evaluation.verdicts],
            output=clean(excerpt(output, OUTPUT_IN_REPORT) or "", secrets), output_digest=digest,
            source=None if kept_source is None else clean(kept_source, secrets), usage=evaluation.usage,
            source_digest=NO_SOURCE_DIGEST if src is None else src.digest, documents=SourceDocument.of(src, secrets),
            location=request.location, repeats=max((len(v.repeats) for v in evaluation.verdicts), default=0) or 1,
            gate=gate, score_kind=score_kind, strategy=made.strategy if made else "bineval",
            params={str(k): clean(excerpt(_repr(v), PARAM_IN_REPORT) or "", secrets)
                    for k, v in (params or {}).items()},
            conversation=messages,
            first_failing_turn=min((s for s in steps if s is not None), default=None) if messages else None,
        )

    # -- views ------------------------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """Identity across runs: the test id, and the evaluation's index when it is not the first."""
        return self.test if self.index == 0 else f"{self.test} #{self.index}"

    @property
    def scores(self) -> dict[str, float | None]:
        return {d.name: d.score for d in self.dimensions}

    @property
    def thresholds(self) -> dict[str, float]:
        return {d.name: d.threshold for d in self.dimensions}

    def turn_label(self, turn: int) -> str:
        """``turn 3 (assistant)``: a turn of the conversation under test, with its role."""
        messages = self.conversation or []
        role = messages[turn - 1].get("role", "assistant") if 0 < turn <= len(messages) else "assistant"
        return turn_label(turn, str(role))

    def points(self) -> dict[str, int]:
        """Question id -> points, for the questions that have them (question-specific criteria)."""
        return {q.id: q.points for q in self.questions if q.points is not None}

    def checked(self) -> list[Verdict]:
        """Verdicts of the checked dimensions, failing first (error, then no, then yes); within each group the
        criteria with the most points (or penalty) first, then a conversation's turns in order."""
        dims = {d.name for d in self.dimensions}
        rank = {"error": 0, "no": 1, "yes": 2}
        points = self.points()
        return sorted((v for v in self.verdicts if v.dimension in dims),
                      key=lambda v: (rank[v.answer], -abs(points.get(v.question_id, 0)), v.step or 0))

    def failing(self) -> list[Verdict]:
        """The questions of the checked dimensions answered *no*: each one is a reason."""
        return [v for v in self.checked() if v.answer == "no"]

    def errors(self) -> list[Verdict]:
        return [v for v in self.checked() if v.answer == "error"]

    def unstable(self) -> list[Verdict]:
        """The questions of the checked dimensions whose repeats got both answers."""
        return [v for v in self.checked() if v.unstable]


class UnstableQuestion(BaseModel):
    """A question whose repeats got both answers (``--bineval-repeats``), or whose asks split without deciding
    (``--bineval-confirm``): its verdict is not reproducible."""

    key: str = Field(description="the evaluation's EvaluationRecord.key")
    dimension: str
    question_id: str
    question: str
    answers: list[Answer]
    agreement: float | None
    turn: int | None = Field(default=None, description="the assistant turn of a conversation it was asked of")

    @property
    def asked(self) -> str:
        """The question as outputs show it (``turn 3 (assistant): ...`` when asked of one turn)."""
        return self.question if self.turn is None else f"{turn_label(self.turn)}: {self.question}"

    @classmethod
    def of(cls, records: Iterable[EvaluationRecord]) -> list[UnstableQuestion]:
        return [cls(key=r.key, dimension=v.dimension, question_id=v.question_id, question=v.question,
                    answers=v.asks, agreement=v.agreement, turn=v.turn) for r in records for v in r.unstable()]


class ConfirmationSummary(BaseModel):
    """What ``--bineval-confirm K`` did and cost, next to what ``--bineval-repeats K+1`` would have asked."""

    rounds: int = Field(description="K: re-asks allowed per question (--bineval-confirm)")
    level: float = Field(description="confidence level of the Wilson interval that stops the re-asks")
    questions: int = Field(description="questions the judge answered (first asks; code checks not counted)")
    reasked: int = Field(description="of them, questions re-asked (answered no, or P(yes) near 0.5)")
    reasks: int = Field(description="re-asks made (cache hits included)")
    decided: int = Field(default=0, description="re-asked questions whose interval ended on one side of 0.5")
    unstable: int = Field(default=0, description="re-asked questions whose asks split without deciding")
    requests: int = Field(description="requests the re-asks sent (cache hits not counted), failed ones included")
    cache_hits: int = Field(default=0, description="re-asks answered from the reply cache")
    asks: int = Field(description="asks in all: questions + reasks")
    repeats_asks: int = Field(description="asks --bineval-repeats K+1 would have made: questions x (K + 1)")

    @classmethod
    def of(cls, rounds: int, level: float, cost: ConfirmCost,
           records: Iterable[EvaluationRecord] = ()) -> ConfirmationSummary:
        confirmed = [v.confirmation for r in records for v in r.verdicts if v.confirmation is not None]
        return cls(rounds=rounds, level=level, questions=cost.questions, reasked=cost.reasked, reasks=cost.reasks,
                   decided=sum(c.decided for c in confirmed), unstable=sum(c.unstable for c in confirmed),
                   requests=cost.usage.llm_calls, cache_hits=cost.usage.cache_hits,
                   asks=cost.questions + cost.reasks, repeats_asks=cost.questions * (rounds + 1))


class UnscoredTest(BaseModel):
    """A test that errored before any evaluation of it was recorded: no task, no checklist (its generation
    failed), a pin error under ``--bineval-strict``, a usage error. It has no record, yet it is no pass."""

    test: str = Field(description="pytest node id")
    error: str = Field(description="the exception type")
    message: str = Field(default="", description=f"what it said (redacted, first {UNSCORED_MESSAGE} characters)")

    @classmethod
    def build(cls, test: str, error: str, message: str) -> UnscoredTest:
        return cls(test=test, error=error, message=clean(message)[:UNSCORED_MESSAGE])


def pin_key(rec: EvaluationRecord) -> tuple[str, ...]:
    """Which pin entry a record's checklist would be: one per test function (its parameters share the pin file)
    and task; criteria written per question (qworld) are one entry per question."""
    base = rec.test.split("[", 1)[0]
    dims = tuple(sorted({q.dimension for q in rec.questions}))
    if rec.strategy == "bineval":
        return (base, rec.task, rec.strategy, *dims)
    return (base, rec.task, rec.strategy, *dims, *sorted(q.text for q in rec.questions))


class JudgedBy(BaseModel):
    """What judged a run: the judge model(s), the judge prompt and the prompts' version, and the checklist of each
    evaluation. A baseline judged otherwise is compared all the same, but its answers may differ because the judge
    did: every output says so first (:func:`judge_differences`)."""

    model: str = Field(default="", description="the run's judge model (--bineval-model)")
    models: list[str] = Field(default_factory=list, description="every judge model the run's evaluations used (an "
                              "assertion may name its own), sorted")
    prompt_version: str = Field(default="", description="version of the packaged prompts (prompts/VERSION)")
    judge_prompt: str = Field(default="", description="the judge prompt: 'judge.md (packaged)' or the file of "
                              "--bineval-judge-prompt")
    judge_prompt_digest: str = Field(default="", description="sha256 of the judge prompt's turns, as sent")
    stream: str = Field(default="", description="--bineval-stream: auto (a hosted judge answers in one streamed "
                        "request, its prompt ending with the turn that asks for the answer and the explanation) or "
                        "off (two requests)")
    checklists: dict[str, str] = Field(default_factory=dict, description="evaluation key -> digest of the questions "
                                       "it was judged with (questions_digest; none for a record without them)")

    @classmethod
    def of_records(cls, records: Iterable[EvaluationRecord], *, model: str = "", prompt_version: str = "",
                   judge_prompt: str = "", judge_prompt_digest: str = "", stream: str = "") -> JudgedBy:
        recs = list(records)
        return cls(model=model, models=sorted({r.model for r in recs if r.model}), prompt_version=prompt_version,
                   judge_prompt=judge_prompt, judge_prompt_digest=judge_prompt_digest, stream=stream,
                   checklists={r.key: questions_digest(r.questions) for r in recs if r.questions})


def _digest(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]


def judge_differences(before: JudgedBy, after: JudgedBy, compared: Collection[str] = ()) -> list[str]:
    """How what judged the baseline (``before``) differs from what judged this run, one sentence each (none: the
    same, as far as both record it); ``compared``: the keys of the evaluations both runs made, whose checklists
    are compared. What a report does not record (an older one) is not compared."""
    lines: list[str] = []
    was = ", ".join(before.models) or before.model
    now = ", ".join(after.models) or after.model
    if was and now and set(before.models or [before.model]) != set(after.models or [after.model]):
        lines.append(f"the baseline was judged by {was}, this run by {now}")
    digests = (before.judge_prompt_digest, after.judge_prompt_digest)
    if all(digests) and digests[0] != digests[1]:
        lines.append(f"the baseline was judged with the judge prompt {before.judge_prompt} (sha256 "
                     f"{_digest(before.judge_prompt_digest)}), this run with {after.judge_prompt} (sha256 "
                     f"{_digest(after.judge_prompt_digest)})")
    if before.prompt_version and after.prompt_version and before.prompt_version != after.prompt_version:
        lines.append(f"the baseline was judged with version {before.prompt_version} of pytest-bineval's prompts, "
                     f"this run with version {after.prompt_version}")
    hosted = [m for m in (after.models or [after.model]) if m and not m.startswith("bineval/")]
    if before.stream and after.stream and before.stream != after.stream and hosted:
        lines.append(f"the baseline was judged with --bineval-stream {before.stream}, this run with "
                     f"--bineval-stream {after.stream}: a hosted judge's requests differ (streamed, its prompt ends "
                     "with a turn asking for the answer and the explanation in one reply)")
    keys = [k for k in compared if k in before.checklists and k in after.checklists]
    other = sum(before.checklists[k] != after.checklists[k] for k in keys)
    if other:
        lines.append(f"{other} of {len(keys)} compared evaluation{'s' if len(keys) != 1 else ''} "
                     f"{'were' if other != 1 else 'was'} judged with another checklist than in the baseline "
                     "(re-pinned or edited): their questions are matched by meaning")
    return lines


def same_judging(before: JudgedBy, after: JudgedBy) -> bool:
    """Both runs were judged alike, as far as both record it: judge models, judge prompt, prompts' version."""
    models = (set(before.models or [before.model]) - {""}, set(after.models or [after.model]) - {""})
    return ((not all(models) or models[0] == models[1])
            and (not (before.judge_prompt_digest and after.judge_prompt_digest)
                 or before.judge_prompt_digest == after.judge_prompt_digest)
            and (not (before.prompt_version and after.prompt_version) or before.prompt_version == after.prompt_version))
