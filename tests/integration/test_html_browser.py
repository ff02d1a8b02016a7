"""The HTML report in a real browser: headless Chromium (the system's, e.g. Debian's package ``chromium``)
driven by Playwright's Python package, which never downloads a browser of its own here.

A pytester run with the scripted fake judge makes the report (passing, failing, judge-error, regressed and
unstable tests, and an output holding ``<script>``; three repeats, compared with a baseline run); the checks
run on the DOM after the page's script ran. Outside CI the tests skip, saying why, when no Chromium (or
Playwright) is found; with ``CI`` set they fail.

The checks also run on any report from the command line::

    python tests/test_html_browser.py example_project/report.html
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import REAL_CHECKLIST

from pytest_bineval.cli import main
from pytest_bineval.labels import question_digest
from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Offline: no background requests, no component updates, nothing the closed network would refuse.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 900}


def find_chromium() -> str | None:
    """``$BINEVAL_CHROMIUM``, else the first Chromium on the PATH."""
    explicit = os.environ.get("BINEVAL_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def browser_or_skip() -> str:
    """The Chromium to use; a skip (a failure in CI, where this test must run) when there is none."""
    missing = None
    chromium = find_chromium()
    if chromium is None:
        missing = ("no Chromium found (looked for $BINEVAL_CHROMIUM, then " + ", ".join(CHROMIUM_NAMES) +
                   " on the PATH): install Debian's package with `apt-get install -y chromium`")
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the Python package playwright (the [test] extra) is not installed"
    if missing is None:
        assert chromium is not None
        return chromium
    if os.environ.get("CI"):
        pytest.fail(f"the HTML report's browser test must run in CI, but {missing} (.ci/run installs it)")
    pytest.skip(f"HTML report browser test skipped: {missing}")


class Chromium:
    """One headless Chromium, started at its first use and kept for the module (a launch, and Playwright's driver,
    cost seconds); each use gets a fresh browser context: its own storage, as a fresh profile had."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._playwright: Any = None
        self._browser: Any = None

    @contextlib.contextmanager
    def context(self) -> Iterator[Any]:
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(executable_path=self.executable, headless=True,
                                                             args=CHROMIUM_FLAGS)
        context = self._browser.new_context(viewport=VIEWPORT, accept_downloads=True)
        try:
            yield context
        finally:
            context.close()

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._playwright.stop()
            self._browser = self._playwright = None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    """The module's Chromium (a skip, or in CI a failure, when there is none)."""
    browser = Chromium(browser_or_skip())
    try:
        yield browser
    finally:
        browser.close()


@dataclass
class Opened:
    """A report page and what its console said."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def js(self, expression: str, arg: Any = None) -> Any:
        return self.page.evaluate(expression, arg)

    def visible_rows(self) -> list[str]:
        return list(self.js("Array.from(document.querySelectorAll('tr.test:not([hidden]) .testid'))"
                            ".map(e => e.textContent)"))

    def inspector(self) -> str:
        return str(self.page.inner_text(".detail.shown .inspector"))

    def show(self, mode: str) -> None:
        self.page.check(f'input[name="show"][value="{mode}"]')

    def console_errors(self) -> list[str]:
        return [f"{kind}: {text}" for kind, text in self.console if kind in ("error", "assert")] + self.errors


def open_report(context: Any, path: Path) -> Opened:
    page = context.new_page()
    opened = Opened(page)
    page.on("console", lambda m: opened.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: opened.errors.append(f"page error: {e}"))
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return opened


def check_report(opened: Opened, screenshot: Path) -> dict[str, Any]:
    """The checks every report passes: the script ran, one row per evaluation and one cell per verdict,
    a failing question's explanation appears on click and on hover, the filter works, and no page script
    but the report's own ran; returns what the page holds (for checks of a known report)."""
    facts: dict[str, Any] = opened.js("""() => ({
        js: document.documentElement.classList.contains('js'),
        rows: document.querySelectorAll('tr.test').length,
        evaluations: Number(document.getElementById('total-evaluations').textContent),
        cells: document.querySelectorAll('td.cell').length,
        verdicts: document.querySelectorAll('.detail li.verdict').length,
        failing: document.querySelectorAll('tr.test:not([data-outcome="passed"])').length,
        shownDetails: document.querySelectorAll('.detail.shown').length,
        scripts: document.scripts.length,
        images: document.images.length,
        pwned: typeof window.__pwned,
    })""")
    assert facts["js"] and facts["shownDetails"] == 1, "the report's script did not run"
    assert facts["rows"] == facts["evaluations"]
    assert facts["cells"] == facts["verdicts"]
    assert facts["scripts"] == 1 and facts["images"] == 0 and facts["pwned"] == "undefined"

    no = opened.page.locator("td.cell.no").first
    if no.count():
        cell_id = no.get_attribute("data-cell")
        explanation = opened.page.inner_text(f"#v-{cell_id} .x")
        question = opened.page.inner_text(f"#v-{cell_id} .q")
        no.click()
        assert explanation in opened.inspector() and question in opened.inspector()
        no.hover()
        title = no.get_attribute("title") or ""
        assert question in title and "answer: no" in title and explanation in title
    opened.show("failing")
    assert len(opened.visible_rows()) == facts["failing"]
    opened.show("all")
    assert len(opened.visible_rows()) == facts["rows"]
    opened.page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert opened.console_errors() == []
    return facts


# -- a report made by a real pytester run --------------------------------------------------------------------

CONFTEST = '''
from pathlib import Path
from pytest_bineval.testing import ScriptedModel

FLAKY = iter(["yes", "no"] * 100)  # the repeats of the flaky question: yes, no, yes (run 1); no, yes, no ...

def answer(req):
    out, q = req.output, req.question
    if out.startswith("A wrong") and q.endswith("consistency check 2?"):
        return "no"
    if out.startswith("An unjudgeable") and q.endswith("consistency check 1?"):
        return RuntimeError("provider exploded: 503")
    if out.startswith("A changed") and q.endswith("consistency check 1?"):  # the second run's output
        return "no"
    if out.startswith("A flaky") and q.endswith("consistency check 1?"):
        return next(FLAKY)
    return "yes"

FAKE = ScriptedModel(provider="browserfake", answers=answer).register()
'''

EVIL = ("<script>window.__pwned = 1; console.error('pwned')</script>"
        "<img src=\"x\" onerror=\"window.__pwned = 2\">")

TESTS = f'''
import pytest
from pytest_bineval import assert_passes

ARTICLE = "The council approved the new ferry timetable on Monday."
pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_passing():
    assert_passes("A fine summary.", dimension=["consistency", "fluency"], source=ARTICLE)

def test_failing():
    assert_passes("A wrong summary.", dimension=["consistency", "fluency"], source=ARTICLE)

def test_judge_error():
    assert_passes("An unjudgeable summary.", dimension="consistency", source=ARTICLE)

def test_untrusted_output():
    assert_passes({EVIL!r}, dimension="fluency")

def test_regressed():  # still passes its threshold: only the baseline shows what got worse
    from pathlib import Path
    output = Path(__file__).with_name("output.txt").read_text()  # the output changes between the two runs
    assert_passes(output, dimension="consistency", threshold=0.5, source=ARTICLE)

def test_unstable():  # the judge's repeats disagree on one question
    assert_passes("A flaky summary.", dimension="consistency", threshold=0.5, source=ARTICLE)
'''


def test_report_of_a_pytester_run_in_headless_chromium(pytester: pytest.Pytester, chromium: Chromium,
                                                       request: pytest.FixtureRequest) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nbineval_model = browserfake/judge\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_summaries=TESTS)
    changing = pytester.path / "output.txt"
    changing.write_text("A changing summary.")
    run = ("--bineval-cache=off", "--bineval-repeats=3")
    pytester.runpytest(*run, "--bineval-report=base.json").assert_outcomes(passed=4, failed=1, errors=1)
    changing.write_text("A changed summary.")  # a yes -> no flip of a changed output: the gate confirms it
    result = pytester.runpytest(*run, "--bineval-baseline=base.json", "--bineval-report=report.json",
                                "--bineval-html=report.html")
    result.assert_outcomes(passed=4, failed=1, errors=1)
    result.stdout.fnmatch_lines(["bineval html report: report.html"])
    assert main(["report", "report.json", "--baseline", "base.json", "--html", "vs-baseline.html"]) == 0
    document = ReportDocument.load(pytester.path / "report.json")
    verdicts = sum(len(r.verdicts) for r in document.evaluations)
    assert (len(document.evaluations), verdicts) == (6, 16)
    assert document.regressions is not None and len(document.regressions.changes("regression")) == 1
    assert [u.key.split("::")[-1] for u in document.unstable] == ["test_unstable"]

    with chromium.context() as context:
        page = open_report(context, pytester.path / "report.html")
        facts = check_report(page, pytester.path / "report.png")
        assert (facts["rows"], facts["cells"], facts["failing"]) == (6, 16, 2)
        # the page opens on the first test that did not pass
        assert page.js("document.querySelector('tr.test.selected .testid').textContent").endswith("::test_failing")
        failing = page.page.locator("tr.test.failed td.cell.no")
        assert failing.count() == 1
        failing.click()
        assert "scripted no for: Does the response meet consistency check 2?" in page.inspector()
        page.page.locator("tr.test.error td.cell.error").click()
        assert "provider exploded: 503" in page.inspector()
        # the untrusted output is text: shown as written, never run
        page.page.locator("tr.test", has_text="test_untrusted_output").locator("th.name").click()
        assert page.page.inner_text(".detail.shown pre.output") == EVIL
        assert page.js("typeof window.__pwned") == "undefined" and page.js("document.images.length") == 0
        # repeats that disagree: the unstable cell, its answers on hover and in the inspector
        unstable = page.page.locator("td.cell.unstable")
        assert unstable.count() == 1
        unstable.hover()
        assert "answer: yes (unstable: yes, no, yes; agreement 0.67)" in (unstable.get_attribute("title") or "")
        unstable.click()
        assert "unstable: yes, no, yes" in page.inspector()
        # the run's own comparison with --bineval-baseline
        assert "1 regressed question(s) (yes \u2192 no)" in page.page.inner_text("#baseline")
        page.show("regressed")
        assert [t.split("::")[-1] for t in page.visible_rows()] == ["test_regressed"]
        regressed = page.page.locator("td.cell.regressed")
        assert regressed.count() == 1
        regressed.click()
        assert "regression; baseline: yes" in page.inspector()
        assert "scripted no for: Does the response meet consistency check 1?" in page.inspector()
        page.show("failing")
        assert [t.split("::")[-1] for t in page.visible_rows()] == ["test_failing", "test_judge_error"]
        assert page.page.inner_text("#shown") == "showing 2 of 6"
        assert page.console_errors() == []

        # bineval report --baseline: the same comparison, made from the two saved reports
        diff = open_report(context, pytester.path / "vs-baseline.html")
        check_report(diff, pytester.path / "report-vs-baseline.png")
        assert "1 regressed question(s) (yes \u2192 no)" in diff.page.inner_text("#baseline")
        diff.show("regressed")
        assert [t.split("::")[-1] for t in diff.visible_rows()] == ["test_regressed"]
        diff.show("all")
        diff.page.locator("tr.test.failed td.cell.no").click()  # the picture of docs/html-report.md
        diff.page.screenshot(path=str(pytester.path / "report-vs-baseline.png"), full_page=True)
        assert diff.console_errors() == []
    target = os.environ.get("BINEVAL_SCREENSHOT_TO")
    if target:  # BINEVAL_SCREENSHOT_TO=docs/img/html-report.png refreshes the documentation's picture
        shutil.copyfile(pytester.path / "report-vs-baseline.png", request.config.invocation_params.dir / target)


@pytest.mark.local_model
def test_report_of_the_real_embedded_judge_in_headless_chromium(pytester: pytest.Pytester,
                                                               chromium: Chromium, tmp_path: Path) -> None:
    """A run against the real embedded judge (a pinned hand-written checklist: no generation)."""
    checklist = {**REAL_CHECKLIST, "questions": REAL_CHECKLIST["questions"][:2]}
    pin = pytester.path / "__bineval__" / "test_real" / "test_real_judge.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 1, "checklists": [checklist]}))
    pytester.makepyfile(test_real=textwrap.dedent('''
        import pytest
        from pytest_bineval import assert_passes

        ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."

        @pytest.mark.bineval(task="Summarize the article in one sentence.",
                             dimensions=[{"consistency": "The summary states only facts from the article."}])
        def test_real_judge():
            assert_passes("Lyon opened a 40 million euro bridge. <b>bold?</b>", source=ARTICLE, threshold=0.0)
    '''))
    result = pytester.runpytest_inprocess("--bineval-strict", "--bineval-report=report.json",
                                          "--bineval-html=report.html", f"--bineval-cache-dir={tmp_path / 'c'}")
    result.assert_outcomes(passed=1)
    (record,) = ReportDocument.load(pytester.path / "report.json").evaluations
    assert record.model == "bineval/smollm2-135m-instruct" and len(record.verdicts) == 2
    with chromium.context() as context:
        page = open_report(context, pytester.path / "report.html")
        facts = check_report(page, pytester.path / "report.png")
        assert (facts["rows"], facts["cells"]) == (1, 2)
        assert page.page.inner_text(".detail.shown pre.output") == record.output
        for n, verdict in enumerate(record.verdicts):
            page.page.locator("td.cell").nth(n).click()
            shown = page.inspector()
            assert verdict.question in shown and verdict.answer in shown
            assert " ".join(verdict.explanation.split()) in " ".join(shown.split())


if __name__ == "__main__":  # python tests/test_html_browser.py REPORT.html [...]: the checks on any report
    executable = find_chromium()
    if executable is None:
        raise SystemExit("no Chromium found: apt-get install -y chromium, or set BINEVAL_CHROMIUM")
    browser = Chromium(executable)
    try:
        with browser.context() as context:
            for arg in sys.argv[1:]:
                shot = Path(arg).with_suffix(".png")
                found = check_report(open_report(context, Path(arg)), shot)
                print(f"{arg}: ok ({found['rows']} rows, {found['cells']} cells, {found['failing']} not passed); "
                      f"screenshot {shot}")
    finally:
        browser.close()


# -- a conversation under test -------------------------------------------------------------------------------------

CHAT_CONFTEST = '''
import re
from pytest_bineval.testing import ScriptedModel

def answer(req):
    turn = re.search(r"\\(Answer about turn (\\d+),", req.user)
    return "no" if turn and turn.group(1) == "4" else "yes"

FAKE = ScriptedModel(provider="chatfake", answers=answer).register()
'''

CHAT_TESTS = f'''
import os
from pytest_bineval import Checklist, assert_passes

CHECKLIST = Checklist(task="Help the customer in a support chat.", dimensions={{"tone": "polite"}}, questions=[
    {{"id": "tone-1", "dimension": "tone", "text": "Is the reply polite?", "scope": "each_turn"}},
    {{"id": "tone-2", "dimension": "tone", "text": "Does the assistant avoid refunds?",
      "check": {{"kind": "tool_not_called", "name": "refund"}}}}])
CHAT = [
    {{"role": "user", "content": {EVIL!r}}},
    {{"role": "assistant", "content": None, "tool_calls": [{{"id": "c1", "type": "function", "function": {{
        "name": {EVIL!r}, "arguments": '{{"q": "</pre><script>window.__pwned = 3</script>"}}'}}}}]}},
    {{"role": "tool", "tool_call_id": "c1", "content": "not found"}},
    {{"role": "assistant", "content": {EVIL!r}}},
    {{"role": "assistant", "content": "Anything else?"}},
]

def test_chat():
    turns = int(os.environ.get("CHAT_TURNS", "5"))
    assert_passes(CHAT[:turns], checklist=CHECKLIST, threshold=0.5)
'''


def test_a_conversation_as_a_transcript_in_headless_chromium(pytester: pytest.Pytester, chromium: Chromium,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The transcript of a conversation: its turns, the failing turn marked as the first step that went wrong, tool
    calls shown, every text of the caller escaped (content, tool name, arguments); a baseline with fewer turns."""
    pytester.makeconftest(CHAT_CONFTEST)
    pytester.makeini("[pytest]\nbineval_model = chatfake/judge\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_chat=CHAT_TESTS)
    monkeypatch.setenv("CHAT_TURNS", "4")
    pytester.runpytest("--bineval-cache=off", "--bineval-report=base.json").assert_outcomes(passed=1)
    monkeypatch.setenv("CHAT_TURNS", "5")
    pytester.runpytest("--bineval-cache=off", "--bineval-baseline=base.json",
                       "--bineval-html=report.html").assert_outcomes(passed=1)
    with chromium.context() as context:
        page = open_report(context, pytester.path / "report.html")
        facts = check_report(page, pytester.path / "chat.png")
        assert (facts["rows"], facts["cells"]) == (1, 4)  # the tool check and three assistant turns
        turns = page.js("""() => Array.from(document.querySelectorAll('.detail.shown .transcript li')).map(li => ({
            cls: li.className, head: li.querySelector('.turnhead').textContent.replace(/\\s+/g, ' ').trim(),
            content: (li.querySelector('pre.content') || {}).textContent || '',
            calls: Array.from(li.querySelectorAll('.call')).map(c => c.textContent.replace(/\\s+/g, ' ').trim()),
            failing: Array.from(li.querySelectorAll('.turnfail')).map(f => f.textContent.trim())}))""")
        assert [t["cls"] for t in turns] == ["turn user", "turn assistant", "turn tool", "turn assistant failing first",
                                             "turn assistant"]
        assert turns[0]["content"] == EVIL and turns[3]["content"] == EVIL  # shown as written, never run
        assert turns[1]["calls"] == [f'calls {EVIL} {{"q": "</pre><script>window.__pwned = 3</script>"}} id c1']
        assert turns[2]["head"] == "turn 3 tool answers c1"
        assert turns[3]["head"] == "turn 4 assistant first step that went wrong"
        assert turns[3]["failing"] == ["\u2717 [tone] Is the reply polite?: scripted no for: Is the reply polite?"]
        assert page.page.inner_text(".detail.shown .firststep") == "First step that went wrong: turn 4 (assistant)"
        assert page.js("typeof window.__pwned") == "undefined" and page.js("document.images.length") == 0
        headers = page.js("Array.from(document.querySelectorAll('th.qn')).map(th => th.title)")
        assert "[tone] turn 4 (assistant): Is the reply polite?" in headers
        assert ("Conversation changed in test_chat.py::test_chat: the conversation gained turns: 5 now, 4 in the "
                "baseline; turn 5 is new, its verdicts are not compared") in page.page.inner_text("p.baseline.turns")
        assert page.console_errors() == []


# -- labelling in the page: marks, download, and the file through bineval calibrate ----------------------------

ODD_QUESTION = "Does the summary keep \u00abcaf\u00e9\u00bb\u00a0and  the\u2003em space \u2014 \u65e5\u672c\ttogether?"
LABELLING_CONFTEST = f'''
import json
from pytest_bineval.testing import ScriptedModel

ODD = {ODD_QUESTION!r}

def questions(req):  # fluency's second question has odd whitespace and characters: its digest is made in the page
    second = ODD if req.dimension == "fluency" else f"Does the response meet {{req.dimension}} check 2?"
    return json.dumps({{"questions": [
        {{"requirement": "r1", "question": f"Does the response meet {{req.dimension}} check 1?", "no_example": ""}},
        {{"requirement": "r2", "question": second, "no_example": ""}}]}})
''' + '''

def answer(req):
    if req.output in ("summary 0", "summary 1") and req.question.endswith("consistency check 1?"):
        return "no"
    if req.output == "broken" and req.question.endswith("fluency check 1?"):
        return RuntimeError("provider exploded: 503")
    return "yes"

FAKE = ScriptedModel(provider="labelfake", answers=answer, rules={"questions": questions}).register()
'''

LABELLING_TESTS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", range(5))
@pytest.mark.bineval(task="Summarize the article.")
def test_summary(i):
    assert_passes(f"summary {i}", dimension=["consistency", "fluency"], threshold=0.0)

@pytest.mark.bineval(task="Summarize the article.")
def test_broken():
    assert_passes("broken", dimension="fluency", threshold=0.0)
'''


def test_labels_made_in_the_page_round_trip_through_bineval_calibrate(pytester: pytest.Pytester, chromium: Chromium,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """20 verdicts marked agree / disagree in the page (one through the inspector's copy, one with a note), a judge
    error answered no, the download read by bineval calibrate; the marks survive a reload; a run with the file
    shows the agreement and the labelled verdicts."""
    pytester.makeconftest(LABELLING_CONFTEST)
    pytester.makeini("[pytest]\nbineval_model = labelfake/judge\nasyncio_default_fixture_loop_scope = function\n"
                     "bineval_cache = off\n")
    pytester.makepyfile(test_summaries=LABELLING_TESTS)
    pytester.runpytest("--bineval-report=report.json", "--bineval-html=report.html").assert_outcomes(
        passed=5, errors=1)
    # disagree: consistency check 2 of summaries 0-2 (judged yes, labelled no), fluency check 1 of summary 4
    disagree = {("0", "consistency check 2"), ("1", "consistency check 2"), ("2", "consistency check 2"),
                ("4", "fluency check 1")}
    downloaded = pytester.path / "bineval-labels.jsonl"
    with chromium.context() as context:
        page = open_report(context, pytester.path / "report.html")
        check_report(page, pytester.path / "report.png")
        p = page.page
        p.fill("#labeler", "ana")
        # the page computes each question's digest (SHA-256 in its script) as pytest_bineval.labels does
        shown = p.evaluate("Array.from(document.querySelectorAll('ol.verdicts > li.verdict > .lab'))"
                           ".map(s => [s.getAttribute('data-question'), s.getAttribute('data-qd')])")
        assert len(shown) == 22 and ODD_QUESTION in {q for q, _ in shown}
        assert all(digest == question_digest(q) for q, digest in shown)
        for i in range(5):
            p.locator("tr.test", has_text=f"test_summary[{i}]").locator("th.name").click()
            items = p.locator(".detail.shown ol.verdicts li.verdict")
            assert items.count() == 4
            for n in range(4):
                item = items.nth(n)
                question = item.locator(".q").inner_text()
                wrong = any(i == int(t) and question.endswith(f"{q}?") for t, q in disagree)
                if wrong and i == 1:  # through the inspector's copy of the verdict
                    cell = item.get_attribute("id").removeprefix("v-")  # type: ignore[union-attr]
                    p.locator(f'td.cell[data-cell="{cell}"]').click()
                    p.locator(".detail.shown .inspector .lab button[data-mark='disagree']").click()
                    assert item.locator("button[data-mark='disagree']").get_attribute("aria-pressed") == "true"
                    assert p.locator(f'td.cell.labelled[data-cell="{cell}"]').count() == 1
                    continue
                item.locator(f"button[data-mark='{'disagree' if wrong else 'agree'}']").click()
                if wrong and i == 0:
                    item.locator(".lab-note").fill("the summary drops the date")
        assert p.inner_text("#lab-count") == "20 marked (16 agree, 4 disagree)"
        p.locator("tr.test", has_text="test_broken").locator("th.name").click()
        error_item = p.locator(".detail.shown li.verdict.error")
        error_item.locator("button[data-mark='no']").click()
        assert "label: no" in error_item.inner_text()
        with p.expect_download() as info:
            p.click("#lab-download")
        assert info.value.suggested_filename == "bineval-labels.jsonl"
        info.value.save_as(downloaded)
        p.reload()
        p.wait_for_load_state("load")
        assert p.inner_text("#lab-count") == ("21 marked (16 agree, 4 disagree, 1 answered where the judge "
                                               "erred)")  # kept in the browser
        assert p.input_value("#labeler") == "ana"
        assert page.console_errors() == []

    lines = [json.loads(line) for line in downloaded.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 21 and {x["labeler"] for x in lines} == {"ana"}
    assert sum(x.get("note") == "the summary drops the date" for x in lines) == 1
    assert main(["calibrate", "report.json", "--labels", str(downloaded), "--min-kappa", "0.5"]) == 1
    out, err = capsys.readouterr()
    assert "21 labels: 20 used, 0 stale, 0 not in this report, 0 superseded, 1 of judge errors" in out
    # consistency: labelled yes 5 (all judged yes), labelled no 5 (2 judged no): p_o 0.7, p_e 0.5, kappa 0.4
    row = next(line for line in out.splitlines() if line.startswith("| consistency "))
    assert "0.70 [0.40, 0.89] (7/10)" in row and "| 0.40 [" in row and "(5/5)" in row and "(2/5)" in row
    assert "the summary drops the date" in out
    assert "consistency: kappa 0.40 < 0.50 on 10 labels" in err

    result = pytester.runpytest("--bineval-labels=bineval-labels.jsonl", "--bineval-html=labelled.html")
    result.stdout.fnmatch_lines(["*consistency: kappa 0.40 [[]*agreement 0.70*"])
    with chromium.context() as context:
        page = open_report(context, pytester.path / "labelled.html")
        check_report(page, pytester.path / "labelled.png")
        p = page.page
        assert "0.70 [0.40, 0.89] (7/10)" in p.inner_text("#calibration tr[data-dimension='consistency']")
        assert p.inner_text("#lab-count") == "0 marked (0 agree, 0 disagree); 21 labelled in the run's labels file"
        assert p.locator(".detail ol.verdicts li.verdict .lab.marked").count() == 21
        assert p.locator("td.cell.labelled").count() == 21 and p.is_disabled("#lab-download")
        # a mark of the page replaces the file's label until pressed again
        item = p.locator(".detail.shown ol.verdicts li.verdict").first
        pressed = item.locator("button[aria-pressed='true']").get_attribute("data-mark")
        other = {"agree": "disagree", "disagree": "agree", "yes": "no", "no": "yes"}[pressed or ""]
        item.locator(f"button[data-mark='{other}']").click()
        assert p.inner_text("#lab-count").startswith("1 marked") and "(from the labels file)" not in item.inner_text()
        item.locator(f"button[data-mark='{other}']").click()
        assert p.inner_text("#lab-count").startswith("0 marked") and "(from the labels file)" in item.inner_text()
        assert item.locator("button[aria-pressed='true']").get_attribute("data-mark") == pressed
        assert page.console_errors() == []
