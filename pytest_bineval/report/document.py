"""The run's finished document: :class:`ReportDocument` (the versioned ``--bineval-report`` JSON, what every
output reads), its parts (:class:`Totals`, :class:`ReportSettings`, :class:`ChecklistGeneration`, :class:`PinAction`,
:class:`OptimizeOutcome`), and the file reader with its checks: ``ReportDocument.load`` reads every format this
package has written (format 1 records were plain dicts; they are converted) and refuses, naming the place, what is
not a report. :func:`diff_reports` compares two finished documents.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._version import __version__
from ..calibrate import Calibration
from ..errors import UsageError
from ..files import write_text_atomic
from ..gate_stats import DEFAULT_ALPHA
from ..kinds import FailOn, Gate
from ..models import Question, Usage, Verdict, no_impossible_counts
from ..redaction import redact_obj
from .batch import BatchSummary
from .comparison import RegressionReport, diff_runs
from .reading import REPORT_KIND as REPORT_KIND  # the report's marker, read by the tests
from .reading import (
    check_kind,
    check_scores,
    check_unique,
    items_of,
    json_type,
    models_of,
    non_finite,
    validation_text,
)
from .record import (
    ConfirmationSummary,
    DimensionResult,
    EvaluationRecord,
    JudgedBy,
    Outcome,
    UnscoredTest,
    UnstableQuestion,
    pin_key,
    text_digest,
)

REPORT_FORMAT = 2


class Totals(BaseModel):
    """Run totals; the usage is everything the run's engines spent (checklists and evaluations)."""

    evaluations: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = Field(default=0, description="evaluations that ended in a judge error")
    unscored_tests: int = Field(default=0, description="tests that errored before any evaluation (see unscored)")
    rerun_evaluations: int = Field(default=0, description="evaluations of attempts a re-run plugin replaced "
                                                          "(pytest-rerunfailures); their requests are in the usage")
    questions: int = 0
    judge_errors: int = Field(default=0, description="questions the judge gave no answer to")
    llm_calls: int = Field(default=0, description="requests sent to models, failed ones included")
    failed_requests: int = Field(default=0, description="requests that gave no usable reply")
    cache_hits: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = Field(default=0, description="of the prompt tokens, read from providers' prompt "
                                                             "caches")
    cache_write_tokens: int = Field(default=0, description="of the prompt tokens, written to providers' prompt "
                                                           "caches")
    completion_tokens: int = 0
    cost_usd: float | None = None
    unpriced_requests: int = Field(default=0, description="replies whose cost is unknown (not in cost_usd)")
    estimated_requests: int = Field(default=0, description="streamed replies closed after the answer (or without a "
                                                           "usage report): their tokens are estimated")
    batch_requests: int = Field(default=0, description="of the requests, those sent through a provider's batch API "
                                                       "(--bineval-batch), at its batch price")
    structured_output: dict[str, str] = Field(
        default_factory=dict, description="models whose provider rejected json_schema -> the form used instead")
    below_cache_minimum: dict[str, int] = Field(
        default_factory=dict, description="models -> evaluations whose shared prompt prefix is below the "
                                          "provider's minimum for prompt caching")
    not_streamed: dict[str, str] = Field(
        default_factory=dict, description="models that could not stream the judge's replies -> why (two requests "
                                          "per explained question instead of one)")
    budget_refused: int = Field(default=0, description="evaluations and checklist generations refused because "
                                                       "--bineval-budget was spent (their tests are errors)")
    cache_rejected: int = Field(default=0, description="reply-cache entries not used because they were unsigned or "
                                                       "their signature did not match (--bineval-cache-key-env): "
                                                       "each was asked again (in llm_calls)")
    unpinned_checklists: int = 0
    pinned_checklists_written: int = 0
    unstable_questions: int = Field(default=0, description="questions whose repeats got both answers")
    regressions: int = Field(default=0, description="vs the baseline: stable questions answered yes, now no")
    unstable_flips: int = Field(default=0, description="vs the baseline: unstable questions whose answer flipped")
    fixes: int = Field(default=0, description="vs the baseline: questions answered no, now yes")
    new_judge_errors: int = Field(default=0, description="vs the baseline: answers that became judge errors")
    score_drops: int = Field(default=0, description="vs the baseline: dimension scores down by more than the "
                                                    "tolerance")
    regressed_cases: int = Field(default=0, description="vs the baseline: evaluations with a confirmed regression")
    confirmed_flips: int = Field(default=0, description="vs the baseline: yes -> no flips confirmed by re-asking (or "
                                                        "decided by a code check)")
    noise_flips: int = Field(default=0, description="vs the baseline: yes -> no flips that re-asking did not keep, or "
                                                    "whose judge input had not changed")
    unsettled_flips: int = Field(default=0, description="vs the baseline: yes -> no flips that could not be confirmed "
                                                        "(no judge, a cut text) or got a judge error on re-asking")
    regressed_dimensions: int = Field(default=0, description="vs the baseline: dimensions regressed across the suite")
    check_counts = model_validator(mode="after")(no_impossible_counts)  # negative or absurd counts: no report

    @classmethod
    def of(cls, records: Iterable[EvaluationRecord], usage: Usage, *, pins_written: int = 0,
           regressions: RegressionReport | None = None, unscored: int = 0, reruns: int = 0,
           unpinned: int | None = None, budget_refused: int = 0, cache_rejected: int = 0) -> Totals:
        """``unpinned``: the pin entries a run's unpinned or stale checklists would be (the plugin knows them);
        None: estimated from the records."""
        recs = list(records)
        diff = regressions or RegressionReport(baseline="")
        if unpinned is None:
            unpinned = len({pin_key(r) for r in recs if r.checklist_status in ("unpinned", "stale")})
        return cls(
            evaluations=len(recs),
            unscored_tests=unscored,
            rerun_evaluations=reruns,
            passed=sum(r.outcome == "passed" for r in recs),
            failed=sum(r.outcome == "failed" for r in recs),
            errors=sum(r.outcome == "error" for r in recs),
            questions=sum(len(r.verdicts) for r in recs),
            judge_errors=sum(sum(v.answer == "error" for v in r.verdicts) for r in recs),
            llm_calls=usage.llm_calls,
            failed_requests=usage.failed_requests,
            cache_hits=usage.cache_hits,
            prompt_tokens=usage.prompt_tokens,
            cached_prompt_tokens=usage.cached_prompt_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            unpriced_requests=usage.unpriced_requests,
            estimated_requests=usage.estimated_requests,
            batch_requests=usage.batch_requests,
            structured_output=dict(usage.structured_output),
            below_cache_minimum=dict(usage.below_cache_minimum),
            not_streamed=dict(usage.not_streamed),
            budget_refused=budget_refused,
            cache_rejected=cache_rejected,
            unpinned_checklists=unpinned,
            pinned_checklists_written=pins_written,
            unstable_questions=sum(len(r.unstable()) for r in recs),
            **cls.comparison_counts(diff),
        )

    @staticmethod
    def comparison_counts(diff: RegressionReport) -> dict[str, int]:
        """The totals of a comparison with a baseline (regressions, fixes, ...)."""
        return {"regressions": len(diff.changes("regression")), "unstable_flips": len(diff.changes("unstable flip")),
                "fixes": len(diff.changes("fix")), "new_judge_errors": len(diff.changes("judge error")),
                "score_drops": len(diff.score_drops()), "regressed_cases": len(diff.regressed_cases()),
                "confirmed_flips": len(diff.flips("confirmed", "code check")),
                "noise_flips": len(diff.flips("unstable", "same input")),
                "unsettled_flips": len(diff.flips("unconfirmed", "error", "pending")),
                "regressed_dimensions": len(diff.regressed_dimensions())}



class ReportSettings(BaseModel):
    """The settings a report was made with (no secret: keys stay in the environment)."""

    model: str = ""
    checklist_model: str = ""
    cache: str = ""
    temperature: float | None = None
    concurrency: int | None = None
    timeout: float | None = None
    retries: int | None = None
    judge_prompt: str | None = None
    repeats: int | None = None
    gate: Gate | None = None
    budget: str | None = Field(default=None, description="--bineval-budget: dollars (0.50) or tokens (200000tok)")
    budget_workers: int = Field(default=1, description="the pytest-xdist workers the budget was split between "
                                                      "(each kept budget / N, counted in its own process); 1 "
                                                      "without a budget")


class OptimizeOutcome(BaseModel):
    """What ``--bineval-optimize`` did to one generator prompt file."""

    prompt: str
    status: str  # updated | unchanged | no failures | rolled back | not run | cut | error
    message: str = ""
    score: float | None = None
    failures: int = 0
    lessons: list[dict[str, Any]] = Field(default_factory=list)
    chars_before: int = 0
    chars_after: int = 0
    history: str = ""
    usage: Usage = Field(default_factory=Usage)
    train: list[str] = Field(default_factory=list, description="tests whose failures the lessons came from")
    held_out: list[str] = Field(default_factory=list, description="tests that judged each candidate, unseen")
    iterations: list[dict[str, Any]] = Field(default_factory=list, description="the loop's iterations, in order")
    notes: list[str] = Field(default_factory=list)


class ChecklistGeneration(BaseModel):
    """The checklists the run generated and what generating them cost: requests no evaluation record carries, so
    that the run's totals are the records' usage plus this (plus the requests of re-run attempts replaced)."""

    generated: int = Field(default=0, description="checklists generated (not read from a pinned file)")
    usage: Usage = Field(default_factory=Usage)



PinActionKind = Literal["created", "rewritten", "listed", "kept"]


class PinAction(BaseModel):
    """What an update run (``--bineval-update-checklists``) did to one pin entry: ``created``, ``rewritten`` (new
    questions), ``listed`` (a test added to the tests the entry lists) or ``kept`` (edited by hand, so not
    rewritten; ``why`` says more)."""

    model_config = ConfigDict(frozen=True)

    action: PinActionKind
    path: str = Field(description="the pin file, relative to the rootdir (POSIX) when inside it")
    dimensions: tuple[str, ...] = ()
    task: str = Field(default="", description="the entry's task (or question, for criteria written per question)")
    why: str = ""
    test: str = Field(default="", description="listed: the test added to the entry's tests")


class ReportDocument(BaseModel):
    """The ``--bineval-report`` JSON document (``format`` 2)."""

    format: Literal[2] = 2
    kind: Literal["bineval-report"] = Field(default=REPORT_KIND, description="what this JSON document is "
                                            "(reports written before this marker existed have none)")
    generator: str = f"pytest-bineval {__version__}"
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    settings: ReportSettings = Field(default_factory=lambda: ReportSettings())
    totals: Totals = Field(default_factory=lambda: Totals())
    evaluations: list[EvaluationRecord] = Field(default_factory=list)
    optimize: list[OptimizeOutcome] | None = None
    regressions: RegressionReport | None = Field(default=None, description="this run vs --bineval-baseline")
    unstable: list[UnstableQuestion] = Field(default_factory=list,
                                             description="questions whose repeats got both answers")
    unscored: list[UnscoredTest] = Field(default_factory=list,
                                         description="tests that errored before any evaluation was recorded")
    failed_tests: list[str] = Field(default_factory=list, description="ids of the tests whose call failed or "
                                    "errored (an evaluation below threshold in a test that expects it is no news)")
    notes: list[str] = Field(default_factory=list, description="problems the run met, as the terminal showed them")
    ran_tests: list[str] | None = Field(default=None, description="ids of the tests whose call ran (None: a report "
                                        "written before reports kept them): compared with a baseline later "
                                        "(bineval report --baseline), a baseline test the run did not run is "
                                        "not run, not removed")
    collected_tests: list[str] | None = Field(default=None, description="ids of the tests the run collected, "
                                              "deselected ones included (None: not kept)")
    partial: bool = Field(default=False, description="the run was cut short (interrupted, stopped by "
                          "-x/--maxfail, an internal error): its tests are not all here")
    partial_reason: str | None = Field(default=None, description="why the run is partial")
    checklists: ChecklistGeneration = Field(default_factory=lambda: ChecklistGeneration(),
                                            description="checklist generation: its requests are in the totals")
    judged_by: JudgedBy | None = Field(default=None, description="what judged the run (None: a report written "
                                       "before reports recorded it)")
    pins: list[PinAction] = Field(default_factory=list, description="what --bineval-update-checklists did: each "
                                  "pin entry created, rewritten, listed (a test added) or kept because edited by hand")
    confirmation: ConfirmationSummary | None = Field(
        default=None, description="--bineval-confirm: what it re-asked and cost (its requests are in the totals)")
    calibration: Calibration | None = Field(
        default=None, description="--bineval-labels: the run's verdicts against people's labels (agreement, kappa, "
                                  "TPR, TNR per dimension and question; stale labels; the gate's trust)")
    batch: BatchSummary | None = Field(
        default=None, description="--bineval-batch: what was sent through the provider's batch API and what it cost "
                                  "(its requests are in the totals)")

    def compared_with(self, diff: RegressionReport) -> ReportDocument:
        """This document holding ``diff`` (this run against a baseline) as its comparison, its totals counting it."""
        totals = self.totals.model_copy(update=Totals.comparison_counts(diff))
        return self.model_copy(update={"regressions": diff, "totals": totals})

    @classmethod
    def parse(cls, data: Any) -> ReportDocument:
        """A document from its decoded JSON, format 1 or 2; UsageError naming what is wrong, and where
        (``evaluations[3].dimensions[0].score``), otherwise.

        A file is a report when it says so (``"kind": "bineval-report"``, which every report of this version
        has) or, written before that marker, when it has the keys every report of its format has: any other
        JSON object with ``"format": 2`` (a pinned-checklist file, say) is refused, never read as an empty
        baseline. Numbers must be finite (no ``NaN``, ``Infinity``), and each evaluation (test id and index)
        appears once."""
        if not isinstance(data, dict):
            raise UsageError(f"a bineval report is a JSON object, not {type(data).__name__}")
        fmt = data.get("format")
        if fmt not in (1, REPORT_FORMAT):
            raise UsageError(f"unknown bineval report format {fmt!r}: this version reads formats 1 and "
                             f"{REPORT_FORMAT}")
        check_kind(data, fmt)
        number = non_finite(data)
        if number is not None:
            raise UsageError(f"not a valid bineval report: {number}; a report holds finite numbers only")
        try:
            document = cls._from_format_1(data) if fmt == 1 else cls.model_validate(data)
        except ValidationError as exc:
            raise UsageError(f"not a valid bineval report (format {fmt}): {validation_text(exc, '')}") from None
        except RecursionError:
            raise UsageError("not a valid bineval report: it is nested too deeply to be one") from None
        check_scores(document.evaluations)
        check_unique(document.evaluations)
        return document

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReportDocument:
        """Read a report file written by any version of this plugin; UsageError naming the file and the place
        otherwise."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the bineval report {os.fspath(path)}: {exc}") from None
        except RecursionError:
            raise UsageError(f"cannot read the bineval report {os.fspath(path)}: its JSON is nested too deeply "
                             "to be a report") from None
        try:
            return cls.parse(data)
        except UsageError as exc:
            raise UsageError(f"{os.fspath(path)}: {exc}") from None

    def judge(self) -> JudgedBy:
        """What judged the run: as recorded, or for an older report what its settings and records tell (the judge
        prompt and the prompts' version unknown)."""
        if self.judged_by is not None:
            return self.judged_by
        return JudgedBy.of_records(self.evaluations, model=self.settings.model)

    def to_json(self) -> str:
        """The document as JSON, every string through the redaction step (records are redacted when built; this
        covers what was loaded or assembled otherwise)."""
        return json.dumps(redact_obj(self.model_dump(mode="json")), indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a reader never sees half a report)."""
        write_text_atomic(path, self.to_json())

    @classmethod
    def _from_format_1(cls, data: dict[str, Any]) -> ReportDocument:
        records = []
        counts: dict[str, int] = {}
        for i, old in enumerate(items_of(data, "evaluations", "")):
            try:
                records.append(cls._record_of_format_1(old, f"evaluations[{i}]", counts))
            except ValidationError as exc:
                raise UsageError(f"not a valid bineval report (format 1): "
                                 f"{validation_text(exc, f'evaluations[{i}]')}") from None
        for name in ("settings", "totals"):
            if not isinstance(data.get(name) or {}, dict):
                raise UsageError(f"not a valid bineval report (format 1): {name} is a "
                                 f"{json_type(data[name])}, not an object")
        totals = dict(data.get("totals") or {})
        totals.setdefault("errors", sum(r.outcome == "error" for r in records))
        optimize = data.get("optimize")
        return cls(
            generator="pytest-bineval (format 1)", created="",
            settings=ReportSettings.model_validate({k: v for k, v in dict(data.get("settings") or {}).items()
                                                    if k in ReportSettings.model_fields}),
            totals=Totals.model_validate({k: v for k, v in totals.items() if k in Totals.model_fields}),
            evaluations=records,
            optimize=None if optimize is None else models_of(OptimizeOutcome, data, "optimize", ""),
        )

    @staticmethod
    def _record_of_format_1(old: Any, place: str, counts: dict[str, int]) -> EvaluationRecord:
        """One format-1 evaluation entry as a record; UsageError naming ``place`` when it has not its shape."""
        def bad(what: str) -> UsageError:
            return UsageError(f"not a valid bineval report (format 1): {place}{what}")

        if not isinstance(old, dict):
            raise bad(f" is {json_type(old)}, not an object")
        for name in ("thresholds", "scores", "usage"):
            if not isinstance(old.get(name) or {}, dict):
                raise bad(f".{name} is {json_type(old[name])}, not an object")
        if "test" not in old:
            raise bad(": it has no 'test'")
        verdicts = models_of(Verdict, old, "verdicts", place)
        dims = []
        for name, limit in dict(old.get("thresholds") or {}).items():
            score = (old.get("scores") or {}).get(name)
            if isinstance(limit, bool) or not isinstance(limit, (int, float)):
                raise bad(f".thresholds.{name} is {json_type(limit)}, not a number")
            if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
                raise bad(f".scores.{name} is {json_type(score)}, not a number")
            errored = any(v.answer == "error" for v in verdicts if v.dimension == name)
            outcome: Outcome = "error" if errored else (
                "passed" if score is not None and score >= limit else "failed")
            dims.append(DimensionResult(name=name, score=score, threshold=float(limit), outcome=outcome))
        test = str(old["test"])
        index = counts.get(test, 0)
        counts[test] = index + 1
        output = str(old.get("output") or "")
        return EvaluationRecord(
            test=test, index=index, task=str(old.get("task", "")), prompt=old.get("prompt"),
            model=str(old.get("model", "")), checklist_model=str(old.get("checklist_model") or ""),
            checklist_status=old.get("checklist_status", "unpinned"), dimensions=dims,
            overall=old.get("overall"), outcome=old.get("outcome", "failed"),
            questions=models_of(Question, old, "questions", place),
            verdicts=verdicts, output=output, output_digest=text_digest(output) if output else "",
            source=old.get("source"), usage=Usage.model_validate(old.get("usage") or {}),
        )


def diff_reports(current: ReportDocument, baseline: ReportDocument, label: str = "baseline", *,
                 tolerance: float = 0.0, alpha: float | None = None, fail_on: FailOn = "significant",
                 ) -> RegressionReport:
    """This report against a baseline report, question by question (:func:`~.comparison.diff_runs`: yes -> no of a
    stable question is a regression, no -> yes a fix, a flip of an unstable one apart); a dimension score that fell
    by more than ``tolerance`` is a score drop. The tests ``current`` ran and collected tell a baseline test that
    was not run from one that was removed; what judged each run is compared too."""
    return diff_runs(baseline.evaluations, current.evaluations, baseline=label, tolerance=tolerance,
                     created=baseline.created, generator=baseline.generator,
                     alpha=DEFAULT_ALPHA if alpha is None else alpha, fail_on=fail_on, ran=current.ran_tests,
                     collected=current.collected_tests, judged=(baseline.judge(), current.judge()))


# -- reading a report file: what is wrong, and where --------------------------------------------------------------
