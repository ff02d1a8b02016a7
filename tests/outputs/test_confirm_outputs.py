"""--bineval-confirm in the outputs read from the finished document: the HTML page (the cost in the totals, each
re-asked verdict's asks) and the PR comment (the unstable section's wording, the cost paragraph)."""

from __future__ import annotations

from pytest_bineval.assertions import failure_message
from pytest_bineval.confirm import confirmed
from pytest_bineval.models import ConfirmCost, Evaluation, Usage, Verdict
from pytest_bineval.outputs.github import step_summary
from pytest_bineval.outputs.html import build_view, render_html
from pytest_bineval.outputs.pr_comment import render
from pytest_bineval.report.comparison import diff_evaluation
from pytest_bineval.report.document import ReportDocument, Totals
from pytest_bineval.report.record import Asked, ConfirmationSummary, EvaluationRecord, UnstableQuestion


def verdict(i: int, answer: str) -> Verdict:
    return Verdict(question_id=f"consistency-{i}", dimension="consistency", question=f"Is check {i} met?",
                   answer=answer, explanation=f"scripted {answer}" if answer == "no" else "")  # type: ignore[arg-type]


def confirmed_document() -> ReportDocument:
    split = confirmed(verdict(1, "no"), [verdict(1, "yes"), verdict(1, "no")], 0.95)  # no by 2 of 3: unstable
    steady = confirmed(verdict(2, "no"), [verdict(2, "no"), verdict(2, "no")], 0.95)  # no x3: confirmed
    verdicts = [split, steady, verdict(3, "yes")]
    ev = Evaluation(task="T", model="fake/judge", dimensions=["consistency"], verdicts=verdicts,
                    usage=Usage(llm_calls=9))
    rec = EvaluationRecord.build(Asked(), ev, [], thresholds={"consistency": 0.5}, status="pinned", test="t.py::test_a")
    cost = ConfirmCost(questions=3, reasked=2, reasks=4, usage=Usage(llm_calls=4))
    return ReportDocument(evaluations=[rec], totals=Totals.of([rec], Usage(llm_calls=9)),
                          unstable=UnstableQuestion.of([rec]),
                          confirmation=ConfirmationSummary.of(2, 0.95, cost, [rec]))


def test_the_html_page_shows_the_confirmation_and_each_verdict_s_asks() -> None:
    doc = confirmed_document()
    split, steady, plain = build_view(doc).rows[0].verdict_cells
    assert split.unstable and split.repeats == "no, yes, no; agreement 0.67"
    assert not steady.unstable and steady.repeats == "no, no, no; agreement 1.00"
    assert plain.repeats == ""
    page = render_html(doc)
    assert "<dt>unstable answers</dt><dd>1</dd>" in page
    assert '<span class="a no">no <small class="rep">(unstable: no, yes, no; agreement 0.67)</small></span>' in page
    assert '<small class="rep" title="no, no, no; agreement 1.00">(&times;3)</small></span>' in page
    assert ('<div id="confirmation"><dt>confirmed (--bineval-confirm 2)</dt><dd title="4 re-asks, 4 requests, 0 '
            'decided, 1 unstable; 7 asks in all, where --bineval-repeats 3 would make 9">2 of 3 re-asked, 4 '
            'requests</dd></div>') in page


def test_the_pr_comment_says_why_a_confirmed_question_is_unstable_and_what_confirmation_cost() -> None:
    body = render(confirmed_document())
    assert ("### Unstable questions\n\nTheir asks got both answers and no answer won at 95% confidence "
            "(`--bineval-confirm`): the verdict is a coin toss.\n") in body
    assert "| `t.py::test_a` | consistency | Is check 1 met? | no yes no | 0.67 |" in body
    assert body.rstrip().endswith("Of which confirmation (`--bineval-confirm 2`): 2 of 3 questions re-asked, 4 "
                                  "re-asks (4 requests sent); 7 asks in all, where `--bineval-repeats 3` would "
                                  "make 9.")
    assert "--bineval-confirm" not in render(ReportDocument())  # off: not a word of it


def test_the_failure_message_gives_each_confirmed_question_its_asks() -> None:
    (rec,) = confirmed_document().evaluations
    message = failure_message(rec)
    assert "      -> no (1 of 3 yes, unstable): scripted no" in message
    assert "      -> no (0 of 3 yes): scripted no" in message


def test_the_github_job_summary_lists_a_confirmed_unstable_question_with_its_asks() -> None:
    doc = confirmed_document()
    text = step_summary(doc.evaluations, doc.totals)
    assert "Unstable questions (the judge's asks gave both answers, and none won (--bineval-confirm)): 1" in text
    assert "- t.py::test\\_a \\[consistency\\] Is check 1 met?: 1 of 3 yes" in text


def test_against_a_baseline_a_change_shows_the_asks_of_a_confirmed_question() -> None:
    (now,) = confirmed_document().evaluations
    ev = Evaluation(task="T", model="fake/judge", dimensions=["consistency"],
                    verdicts=[verdict(1, "yes"), verdict(2, "yes"), verdict(3, "yes")])
    before = EvaluationRecord.build(Asked(), ev, [], thresholds={"consistency": 0.5}, status="pinned",
                                    test="t.py::test_a")
    changes = {c.question_id: c for c in diff_evaluation(before, now).changes}
    flip, regression = changes["consistency-1"], changes["consistency-2"]
    assert (flip.kind, flip.repeats, flip.baseline_repeats) == ("unstable flip", ["no", "yes", "no"], [])
    assert (regression.kind, regression.repeats) == ("regression", ["no", "no", "no"])
