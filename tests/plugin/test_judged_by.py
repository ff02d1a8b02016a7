"""#21.3: the report records what judged it (judge model, prompts version, judge-prompt digest, checklist digests),
and a comparison with a baseline judged otherwise says so first: in the terminal, in ``bineval report``, on the HTML
page, in the GitHub job summary and in the PR comment."""

from __future__ import annotations

import json

import pytest
from support import make_project, report_of

from pytest_bineval.cli import main
from pytest_bineval.outputs.github import step_summary
from pytest_bineval.prompting import packaged_judge_prompt, prompt_version
from pytest_bineval.report.comparison import judge_differences
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import JudgedBy

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_summary():
    assert_passes("A summary.", dimension="fluency")
'''


def test_a_baseline_judged_by_another_model_or_prompt_is_said_first(pytester: pytest.Pytester,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    make_project(pytester)
    pytester.makepyfile(test_summary=SUITE)
    pytester.runpytest("--bineval-report=base.json").assert_outcomes(passed=1)
    judged = report_of(pytester, "base.json").judged_by
    assert judged is not None
    assert (judged.model, judged.models, judged.prompt_version) == ("pfake/judge", ["pfake/judge"], prompt_version())
    assert judged.judge_prompt == "judge.md (packaged)" and judged.judge_prompt_digest.startswith("sha256:")
    assert list(judged.checklists) == ["test_summary.py::test_summary"]

    # the same run again: nothing to say
    result = pytester.runpytest("--bineval-baseline=base.json")
    assert "JUDGED DIFFERENTLY" not in result.stdout.str()

    # another judge model and a judge prompt of one's own
    (pytester.path / "my_judge.md").write_text(packaged_judge_prompt() + "\nBe strict.\n", encoding="utf-8")
    result = pytester.runpytest("--bineval-baseline=base.json", "--bineval-model=pfake/other",
                                "--bineval-judge-prompt=my_judge.md", "--bineval-report=now.json",
                                "--bineval-pr-comment=comment.md")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([
        "=+ bineval regressions =+",
        r"JUDGED DIFFERENTLY: the baseline was judged by pfake/judge, this run by pfake/other; an answer that "
        "changed may have changed with the judge",
        r"JUDGED DIFFERENTLY: the baseline was judged with the judge prompt judge\.md \(packaged\) \(sha256 "
        r"[0-9a-f]{12}\), this run with my_judge\.md \(sha256 [0-9a-f]{12}\); .*",
        "baseline: base.json .*",
    ], consecutive=True)
    now = report_of(pytester, "now.json")
    assert now.judged_by is not None and now.judged_by.models == ["pfake/other"]
    assert now.judged_by.judge_prompt == "my_judge.md"
    assert now.judged_by.judge_prompt_digest != judged.judge_prompt_digest
    assert now.regressions is not None and len(now.regressions.judged_differently) == 2
    comment = (pytester.path / "comment.md").read_text(encoding="utf-8").splitlines()
    assert comment[2] == ("> **Judged differently:** the baseline was judged by pfake/judge, this run by "
                          "pfake/other; an answer that changed may have changed with the judge.")
    assert comment[3] == ">"  # each sentence a paragraph of the quote
    assert comment[4].startswith("> **Judged differently:** the baseline was judged with the judge prompt judge.md")

    # bineval report says it before anything else
    capsys.readouterr()  # (the in-process runs' output)
    assert main(["report", str(pytester.path / "now.json"), "--baseline", str(pytester.path / "base.json"),
                 "--html", str(pytester.path / "page.html")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("bineval report: judged differently: the baseline was judged by pfake/judge, this run by "
                      "pfake/other")
    assert out[1].startswith("bineval report: judged differently: the baseline was judged with the judge prompt ")
    assert out[2].startswith("wrote ")
    summary = step_summary(now.evaluations, now.totals, now.regressions).splitlines()
    assert summary[2] == ("**Judged differently**: the baseline was judged by pfake/judge, this run by pfake/other; "
                          "an answer that changed may have changed with the judge.")
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert "Judged differently: the baseline was judged by pfake/judge, this run by pfake/other" in page


def _judged(**changes: object) -> JudgedBy:
    base = JudgedBy(model="m", models=["m"], prompt_version="6", judge_prompt="judge.md (packaged)",
                    judge_prompt_digest="sha256:" + "a" * 64, checklists={"t::a": "sha256:1", "t::b": "sha256:2"})
    return base.model_copy(update=changes)


def test_a_baseline_judged_with_another_stream_mode_is_said_for_a_hosted_judge() -> None:
    hosted = judge_differences(_judged(models=["openai/gpt-4o-mini"], stream="off"),
                               _judged(models=["openai/gpt-4o-mini"], stream="auto"))
    assert hosted == ["the baseline was judged with --bineval-stream off, this run with --bineval-stream auto: a "
                      "hosted judge's requests differ (streamed, its prompt ends with a turn asking for the answer "
                      "and the explanation in one reply)"]
    # the embedded judge continues a prefill whatever the mode; a report that does not record it compares nothing
    assert judge_differences(_judged(models=["bineval/smollm2"], stream="off"),
                             _judged(models=["bineval/smollm2"], stream="auto")) == []
    assert judge_differences(_judged(models=["openai/x"]), _judged(models=["openai/x"], stream="auto")) == []


def test_judge_differences_one_sentence_each() -> None:
    assert judge_differences(_judged(), _judged(), ["t::a", "t::b"]) == []
    lines = judge_differences(_judged(), _judged(models=["m", "n"], prompt_version="7",
                                                 judge_prompt_digest="sha256:" + "b" * 64,
                                                 checklists={"t::a": "sha256:1", "t::b": "sha256:X"}),
                              ["t::a", "t::b"])
    assert lines == [
        "the baseline was judged by m, this run by m, n",
        "the baseline was judged with the judge prompt judge.md (packaged) (sha256 aaaaaaaaaaaa), this run with "
        "judge.md (packaged) (sha256 bbbbbbbbbbbb)",
        "the baseline was judged with version 6 of pytest-bineval's prompts, this run with version 7",
        "1 of 2 compared evaluations was judged with another checklist than in the baseline (re-pinned or edited): "
        "their questions are matched by meaning",
    ]


def test_an_older_baseline_compares_what_it_records() -> None:
    """A report written before judged_by: its settings and records tell the model and the checklists; what they
    do not tell (the judge prompt, the prompts' version) is not compared."""
    old = ReportDocument.parse(json.loads(ReportDocument().to_json()) | {"judged_by": None})
    old = old.model_copy(update={"settings": old.settings.model_copy(update={"model": "m"})})
    assert old.judge().model == "m" and not old.judge().judge_prompt_digest
    assert judge_differences(old.judge(), _judged(), []) == []
    assert judge_differences(old.judge(), _judged(models=["n"], model="n"), []) == [
        "the baseline was judged by m, this run by n"]
