"""The HTML report: its view (grid, bars, histograms, baseline diff), escaping, self-containment and size;
``--bineval-html`` through pytester (and pytest-xdist); ``bineval report``. The page in a real browser is
tests/test_html_browser.py."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

import pytest

from pytest_bineval.cli import main
from pytest_bineval.models import Evaluation, Usage, Verdict
from pytest_bineval.outputs.html import build_view, histogram, render_html
from pytest_bineval.report.comparison import BaselineDiff
from pytest_bineval.report.document import ReportDocument, Totals, diff_reports
from pytest_bineval.report.record import Asked, DimensionResult, EvaluationRecord
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

EVIL = '<script>window.__pwned = 1</script><img src=x onerror="alert(1)">"\'&'


def record(test: str, answers: dict[str, list[str]], *, thresholds: dict[str, float] | None = None,
           output: str = "A summary.", source: str | None = "An article.", index: int = 0,
           question: str = "Does the response meet {d} check {i}?", explanation: str = "scripted {a}",
           task: str = "Summarize the article.", repeats: dict[str, list[str]] | None = None) -> EvaluationRecord:
    """A record as assert_passes makes it: ``answers`` maps a dimension to its answers in checklist order,
    ``repeats`` a question id to the answers of its repeats (--bineval-repeats)."""
    def verdict(d: str, i: int, a: str) -> Verdict:
        asked = (repeats or {}).get(f"{d}-{i}", [])
        agreement = max(asked.count("yes"), asked.count("no")) / len(asked) if asked else None
        return Verdict(question_id=f"{d}-{i}", dimension=d, question=question.format(d=d, i=i), answer=a,  # type: ignore[arg-type]
                       explanation="" if a == "error" else explanation.format(a=a),
                       error="provider exploded: 503" if a == "error" else None, repeats=asked,  # type: ignore[arg-type]
                       agreement=agreement)

    verdicts = [verdict(d, i, a) for d, seq in answers.items() for i, a in enumerate(seq, 1)]
    evaluation = Evaluation(task=task, model="fake/judge", dimensions=list(answers), verdicts=verdicts,
                            usage=Usage(llm_calls=len(verdicts)))
    return EvaluationRecord.build(Asked(output=output, source=source), evaluation, [],
                                  thresholds=thresholds or dict.fromkeys(answers, 0.8), status="pinned", test=test,
                                  index=index)


def document(*records: EvaluationRecord) -> ReportDocument:
    usage = Usage(llm_calls=12, cache_hits=3, prompt_tokens=1000, completion_tokens=50, cost_usd=0.0123)
    return ReportDocument(evaluations=list(records), totals=Totals.of(records, usage))


# -- escaping and self-containment --------------------------------------------------------------------------

def test_untrusted_text_is_escaped_everywhere() -> None:
    rec = record(f"tests/test_x.py::test_{EVIL}", {"consistency": ["yes", "no"], "fluency": ["error"]},
                 output=f"output {EVIL}", source=f"source {EVIL}", question=f"question {{d}} {{i}} {EVIL}",
                 explanation=f"because {EVIL}", task=f"task {EVIL}")
    page = render_html(document(rec), diff_reports(document(rec), document(rec), f"base {EVIL}.json"))
    assert page.count("<script") == 1, "only the report's own script element"
    assert "<img" not in page and "onerror=\"" not in page
    escaped = ("&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"
               "&#34;&#39;&amp;")
    for where in ("output ", "source ", "because ", "task ", "question consistency 2 ", "base ", "test_"):
        assert where + escaped in page, where


def test_the_page_loads_nothing_and_its_inline_assets_are_pinned_by_the_csp() -> None:
    page = render_html(document(record("t::a", {"consistency": ["yes", "no"]})))
    assert not re.search(r"\b(?:src|href|action|srcset)\s*=", page, re.IGNORECASE)
    assert not re.search(r"https?://|url\(|@import|<link|<iframe|<object|<embed", page, re.IGNORECASE)
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert found is not None
    csp = html.unescape(found.group(1))
    assert csp.startswith("default-src 'none';")

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    style = re.search(r"<style>(.*?)</style>", page, re.DOTALL)
    script = re.search(r"<script>(.*?)</script>", page, re.DOTALL)
    assert style and script
    assert f"style-src {digest(style.group(1))};" in csp
    assert f"script-src {digest(script.group(1))};" in csp


def test_a_format_1_report_renders(tmp_path: Path) -> None:
    old = {"format": 1, "evaluations": [{
        "test": "t::old", "task": "T", "model": "m", "thresholds": {"fluency": 0.5}, "scores": {"fluency": 0.5},
        "verdicts": [{"question_id": "fluency-1", "dimension": "fluency", "question": "Fluent?", "answer": "no",
                      "explanation": "choppy"},
                     {"question_id": "fluency-2", "dimension": "fluency", "question": "Clear?", "answer": "yes"}],
        "outcome": "passed"}], "totals": {"evaluations": 1, "passed": 1}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    page = render_html(ReportDocument.load(path))
    assert page.count('<tr class="test ') == 1 and page.count('<td class="cell ') == 2
    assert "choppy" in page


# -- the view -----------------------------------------------------------------------------------------------

def test_grid_columns_follow_the_checklists_and_align_by_position() -> None:
    a = record("t::a", {"consistency": ["yes", "no", "yes"], "fluency": ["yes"]})
    b = record("t::b", {"consistency": ["no"]}, question="Other question {d} {i}?")
    view = build_view(document(a, b))
    assert [(c.dimension, len(c.headers)) for c in view.columns] == [("consistency", 3), ("fluency", 1)]
    assert view.columns[0].headers[0] == "[consistency] question 1 (2 different questions)"
    assert view.columns[0].headers[1] == "[consistency] Does the response meet consistency check 2?"
    row_a, row_b = view.rows
    assert [c.verdict.answer if c else None for c in row_a.cells] == ["yes", "no", "yes", "yes"]
    assert [c.verdict.answer if c else None for c in row_b.cells] == ["no", None, None, None]
    assert view.cells == 5 and view.failing == 2
    assert len({c.id for r in view.rows for c in r.verdict_cells}) == 5  # one DOM id per verdict


def test_dimension_bars_are_scaled_and_coloured_by_outcome() -> None:
    rec = record("t::a", {"consistency": ["yes", "no", "no", "no"], "fluency": ["yes", "error"]},
                 thresholds={"consistency": 0.8, "fluency": 0.5})
    consistency, fluency = build_view(document(rec)).rows[0].bars
    assert (consistency.fill, consistency.marker, consistency.text) == (30.0, 96.0, "0.25 / 0.80")
    assert consistency.dim.outcome == "failed" and fluency.dim.outcome == "error"
    page = render_html(document(rec))
    assert '<div class="bar failed"><span class="dn">consistency</span>' in page
    assert '<rect class="fill" width="30.0" height="10"/><line class="mark" x1="96.0"' in page


def test_histogram_counts_scores_per_bin_and_outcome() -> None:
    dims = [DimensionResult(name="c", score=s, threshold=t, outcome=o) for s, t, o in [
        (0.0, 0.8, "failed"), (0.55, 0.5, "passed"), (0.5, 0.8, "failed"), (1.0, 0.8, "passed"),
        (1.0, 0.8, "passed"), (None, 0.8, "error")]]
    h = histogram("c", dims)
    counts = [{s.outcome: s.count for s in b.stacks} for b in h.bins]
    assert counts[0] == {"failed": 1} and counts[5] == {"passed": 1, "failed": 1} and counts[9] == {"passed": 2}
    assert sum(len(c) for c in counts) == 4
    assert (h.count, h.missing, h.top) == (5, 1, 2)
    assert h.mean == pytest.approx((0.0 + 0.55 + 0.5 + 1.0 + 1.0) / 5)
    assert [t for _, t in h.thresholds] == [0.5, 0.8]
    tallest = h.bins[9].stacks[0]
    assert tallest.y == h.plot_top and tallest.y + tallest.height == h.baseline_y  # the top bin fills the plot


def test_diff_marks_regressions_fixes_and_new_or_removed_evaluations() -> None:
    base = document(record("t::a", {"consistency": ["yes", "no", "yes"]}),
                    record("t::gone", {"consistency": ["yes"]}),
                    record("t::a", {"fluency": ["yes"]}, index=1))
    now = document(record("t::a", {"consistency": ["no", "yes", "error"]}, output="Another summary."),
                   record("t::new", {"consistency": ["no"]}),
                   record("t::a", {"fluency": ["yes"]}, index=1))
    comparison = diff_reports(now, base, "base.json")  # the flip of a changed output: pending, not noise
    diff = BaselineDiff.of(comparison)
    assert sorted((c.question_id, c.kind) for d in diff.report.compared for c in d.changes) == [
        ("consistency-1", "regression"), ("consistency-2", "fix"), ("consistency-3", "judge error")]
    assert diff.new_keys == {"t::new"} and diff.removed_keys == ("t::gone",) and diff.compared == 4
    view = build_view(now, comparison)
    first = view.rows[0]
    assert first.regressed and [c.css for c in first.verdict_cells] == ["cell no regressed", "cell yes fixed",
                                                                         "cell error"]
    change = first.verdict_cells[0].change
    assert change is not None and change.baseline_explanation == "scripted yes"
    assert view.rows[1].new and not view.rows[1].regressed and view.regressed == 1
    assert first.bars[0].delta == "-0.17"  # 0.50 (1 of 2 answered) - 0.67
    page = render_html(now, comparison)
    assert "1 regressed question(s)" in page and "1 new judge error(s)" in page and "1 gone: t::gone" in page
    assert '<input type="radio" name="show" value="regressed">' in page  # the filter is enabled
    assert '<span class="was">regression; baseline: yes &ndash; scripted yes</span>' in page


def test_repeats_mark_unstable_answers_and_an_unstable_flip_is_not_a_regression() -> None:
    base = document(record("t::a", {"consistency": ["yes", "yes"]}))
    now = document(record("t::a", {"consistency": ["no", "no"]},
                          repeats={"consistency-1": ["no", "yes", "no"], "consistency-2": ["no", "no", "no"]}))
    view = build_view(now, diff_reports(now, base))
    unstable, stable = view.rows[0].verdict_cells
    # the same output and source: both flips are the judge's noise (a flip of a stable question too)
    assert unstable.css == "cell no flipped unstable" and stable.css == "cell no flipped"
    assert unstable.repeats == "no, yes, no; agreement 0.67" and stable.repeats == "no, no, no; agreement 1.00"
    assert (view.unstable, view.flipped, view.regressed) == (1, 2, 1)  # regressed: the row's score drop
    page = render_html(now, diff_reports(now, base))
    assert "<dt>unstable answers</dt><dd>1</dd>" in page and "1 unstable flip(s)" in page
    assert '<span class="a no">no <small class="rep">(unstable: no, yes, no; agreement 0.67)</small></span>' in page
    assert '<small class="rep" title="no, no, no; agreement 1.00">(&times;3)</small></span>' in page


def test_no_evaluations_still_makes_a_page() -> None:
    page = render_html(document())
    assert "No evaluation in this run." in page and "<table" not in page


def sample_document(tests: int = 100, questions: int = 10) -> ReportDocument:
    """``tests`` evaluations of ``questions`` questions over two dimensions, with outputs (~600 characters)
    and sources (~2,000) of a realistic length: the size figure of docs/html-report.md."""
    records = []
    for t in range(tests):
        answers = ["no" if (t * 7 + q) % 5 == 0 else "yes" for q in range(questions)]
        if t % 17 == 0:
            answers[3] = "error"
        half = questions // 2
        records.append(record(
            f"tests/test_summaries.py::test_summary[article_{t:03d}]",
            {"consistency": answers[:half], "relevance": answers[half:]},
            thresholds={"consistency": 0.8, "relevance": 0.7},
            question="Does the summary state the {d} fact number {i} of the article correctly and completely?",
            explanation="The summary says {a} because the article reports the figure in its second paragraph.",
            output=("The city council approved the new ferry timetable on Monday after a two-week strike. " * 7),
            source=("The ferry workers' union ended its strike after the council agreed to hire staff. " * 24)))
    return document(*records)


def test_size_of_a_100_tests_by_10_questions_report() -> None:
    page = render_html(sample_document())
    size = len(page.encode("utf-8"))
    print(f"100 tests x 10 questions: {size} bytes ({size / 1024:.0f} KiB)")
    assert page.count('<td class="cell ') == 1000
    assert size < 1_000_000, f"{size} bytes for 100 x 10: the page grew; keep it small (docs/html-report.md)"


# -- --bineval-html through pytest --------------------------------------------------------------------------

ANSWER = '''
def answer(req):
    if req.output.startswith("A wrong") and req.question.endswith("consistency check 2?"):
        return "no"
    return "yes"
'''

TESTS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_good():
    assert_passes("A fine summary.", dimension=["consistency", "fluency"], source="An article.")

@pytest.mark.bineval(task="Summarize the article.")
def test_bad():
    assert_passes("A wrong summary.", dimension="consistency", source="An article.")
'''


def make_project(pytester: pytest.Pytester, ini: str = "") -> None:
    scripted_project(pytester, provider="hfake", rule=ANSWER, ini=ini)
    pytester.makepyfile(TESTS)


def rows_and_cells(page: str) -> tuple[int, int]:
    return page.count('<tr class="test '), page.count('<td class="cell ')


def test_bineval_html_writes_the_page_relative_to_the_rootdir(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(pytester)
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = pytester.runpytest("--bineval-html=out/report.html", str(pytester.path))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*= bineval summary =*", "bineval html report: out/report.html"])
    assert not (pytester.path / "elsewhere" / "out").exists()
    page = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert rows_and_cells(page) == (2, 6)
    assert "scripted no for: Does the response meet consistency check 2?" in page
    assert "::test_bad" in page and "A wrong summary." in page


def test_ini_bineval_html_and_the_json_report_from_one_run(pytester: pytest.Pytester) -> None:
    make_project(pytester, ini="bineval_html = from_ini.html")
    pytester.runpytest("--bineval-report=report.json").assert_outcomes(passed=1, failed=1)
    page = (pytester.path / "from_ini.html").read_text(encoding="utf-8")
    doc = ReportDocument.load(pytester.path / "report.json")
    assert page == render_html(doc)  # the page of the very document the JSON report holds
    assert f"{doc.generator} &middot; {doc.created}" in page


def test_a_run_with_a_baseline_shows_its_regressions_in_the_page(pytester: pytest.Pytester,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    make_project(pytester)
    pytester.runpytest("--bineval-report=base.json").assert_outcomes(passed=1, failed=1)
    base = json.loads((pytester.path / "base.json").read_text())
    (bad,) = [e for e in base["evaluations"] if e["test"].endswith("::test_bad")]
    (no,) = [v for v in bad["verdicts"] if v["answer"] == "no"]
    no.update(answer="yes", explanation="it was fine before")  # so this run's "no" is a regression
    bad["output_digest"] = "0" * 16  # of another output, which the report does not keep: a flip not confirmed
    (pytester.path / "base.json").write_text(json.dumps(base))
    pytester.runpytest("--bineval-baseline=base.json", "--bineval-report=now.json",
                       "--bineval-html=now.html").assert_outcomes(passed=1, failed=1)
    page = (pytester.path / "now.html").read_text(encoding="utf-8")
    assert page.count('<td class="cell no regressed"') == 1 and "1 regressed question(s)" in page
    assert "regression; baseline: yes &ndash; it was fine before" in page
    # bineval report shows the comparison the saved report holds, and renders the same page from it
    assert main(["report", str(pytester.path / "now.json"), "--html", str(pytester.path / "again.html")]) == 0
    assert "compared with base.json: 1 regressed question(s)" in capsys.readouterr().out
    assert (pytester.path / "again.html").read_text(encoding="utf-8") == page


# -- bineval report -----------------------------------------------------------------------------------------

def test_bineval_report_renders_a_saved_report_against_a_baseline(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base, now = tmp_path / "base.json", tmp_path / "now.json"
    document(record("t::a", {"consistency": ["yes", "yes"]})).write(base)
    document(record("t::a", {"consistency": ["no", "yes"]}, output="Another summary."),
             record("t::b", {"fluency": ["yes"]})).write(now)
    out = tmp_path / "html" / "report.html"
    assert main(["report", str(now), "--baseline", str(base), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: 2 evaluations (1 passed, 1 below threshold, 0 judge error)" in printed
    assert (f"compared with {base}: 1 regressed question(s) (yes -> no), 0 fixed, 0 unstable flip(s), "
            "1 score drop(s) beyond tolerance 0.00, 2 questions compared") in printed
    page = out.read_text(encoding="utf-8")
    assert rows_and_cells(page) == (2, 3) and '<td class="cell no regressed"' in page
    assert main(["report", str(now), "--html", str(tmp_path / "plain.html")]) == 0
    plain = (tmp_path / "plain.html").read_text(encoding="utf-8")
    assert '<td class="cell no regressed"' not in plain and 'value="regressed" disabled' in plain


def test_bineval_report_marks_score_drops_beyond_the_tolerance(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # no answer flips: a question answered no is added to t::a (1.00 -> 0.50) and a question answered yes is
    # gone from t::b (0.67 -> 0.50)
    base, now = tmp_path / "base.json", tmp_path / "now.json"
    document(record("t::a", {"consistency": ["yes"]}),
             record("t::b", {"consistency": ["yes", "no", "yes"]}, thresholds={"consistency": 0.0})).write(base)
    document(record("t::a", {"consistency": ["yes", "no"]}),
             record("t::b", {"consistency": ["yes", "no"]}, thresholds={"consistency": 0.0})).write(now)

    def regressed_rows(page: str) -> list[tuple[str, str]]:
        return sorted(re.findall(r'<tr class="test .*? data-regressed="(\d)".*?<span class="tn">([^<]+)</span>',
                                 page, re.DOTALL))

    out = tmp_path / "strict.html"
    assert main(["report", str(now), "--baseline", str(base), "--html", str(out)]) == 0
    assert ("0 regressed question(s) (yes -> no), 0 fixed, 0 unstable flip(s), 2 score drop(s) beyond tolerance "
            "0.00, 3 questions compared") in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert regressed_rows(page) == [("1", "a"), ("1", "b")] and "regressed (2)" in page
    assert page.count('title="score drop beyond the tolerance 0.00"') == 2  # the two bars' deltas

    out = tmp_path / "between.html"
    assert main(["report", str(now), "--baseline", str(base), "--tolerance", "0.4", "--html", str(out)]) == 0
    assert "1 score drop(s) beyond tolerance 0.40" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert regressed_rows(page) == [("0", "b"), ("1", "a")] and "regressed (1)" in page
    assert page.count('title="score drop beyond the tolerance 0.40"') == 1 and 'class="delta down"' in page  # b
    assert "score drop beyond tolerance 0.40" in page

    out = tmp_path / "tolerant.html"  # a drop of exactly the tolerance is not counted
    assert main(["report", str(now), "--baseline", str(base), "--tolerance", "0.5", "--html", str(out)]) == 0
    assert "0 score drop(s) beyond tolerance 0.50" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert regressed_rows(page) == [("0", "a"), ("0", "b")]
    assert 'class="delta down dropped"' not in page and "score drop beyond tolerance" not in page


def test_bineval_report_tolerance_needs_a_baseline_and_a_share(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    now = tmp_path / "now.json"
    document(record("t::a", {"consistency": ["yes"]})).write(now)
    out = tmp_path / "out.html"
    assert main(["report", str(now), "--tolerance", "0.1", "--html", str(out)]) == 2
    assert "--tolerance applies to a comparison with --baseline" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", str(now), "--baseline", str(now), "--tolerance", "1.5", "--html", str(out)])
    assert exc.value.code == 2
    assert "a tolerance is a score difference within [0, 1], not 1.5" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("content", ["not json", '{"format": 9}', "[]"])
def test_bineval_report_names_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = tmp_path / "out.html"
    assert main(["report", str(bad), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bineval: error: ") and str(bad) in err
    assert not out.exists()


def test_the_page_is_written_atomically_with_the_usual_permissions(tmp_path: Path) -> None:
    import os

    from pytest_bineval.outputs.html import write_html

    old = os.umask(0o022)
    try:
        path = write_html(tmp_path / "new" / "report.html", document(record("t::a", {"fluency": ["yes"]})))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644  # an artifact others may read, not a private temp file
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]  # no temporary file left behind
