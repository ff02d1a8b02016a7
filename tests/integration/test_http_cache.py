"""The reply cache under CI conditions: read-only writes nothing (healthy or corrupt), several processes share one
directory without losing entries, and a writer killed mid-write leaves a usable cache."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from support import generate_and_judge

from pytest_bineval import BinevalCacheWarning, Checklist, Evaluation, Question, Settings, evaluate
from pytest_bineval.bench.reliability import kill_mid_write, stress
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

CHECKLIST = Checklist(task="T", dimensions={"fluency": "F"}, questions=[
    Question(id=f"fluency-{i}", dimension="fluency", text=f"Is check {i} met?") for i in (1, 2)])


def tree(directory: Path) -> dict[str, Any]:
    """Every file and folder under ``directory`` with its content digest, size and modification time."""
    if not directory.exists():
        return {}
    out: dict[str, Any] = {}
    for path in sorted(directory.rglob("*")):
        stat = path.stat()
        key = str(path.relative_to(directory))
        if path.is_file():
            out[key] = (hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_size, stat.st_mtime_ns)
        else:
            out[key] = ("dir", stat.st_mtime_ns)
    return out


def test_read_only_cache_writes_nothing_healthy(fake: ScriptedModel, cache_dir: Path) -> None:
    # A requirements reply of 40 kB is stored by diskcache in a file (verdicts are small: their explanations are
    # clipped), read back below.
    fake.rules["requirements"] = lambda req: json.dumps({"requirements": ["Be fluent."], "notes": "x" * 40000})
    fake.answers = {"Is check 2 met?": "no"}

    def run(output: str, cache: str) -> tuple[Checklist, Evaluation]:
        return generate_and_judge(Settings(model=fake.model, cache=cache, cache_dir=str(cache_dir)), output, CHECKLIST)

    generated, first = run("A", "on")
    assert first.usage.llm_calls == 3  # two answers, the explanation of the no
    before = tree(cache_dir)
    assert any(name.endswith(".val") for name in before)  # a value in a file
    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)
        (again_generated, served) = run("A", "read-only")
        _, missed = run("B", "read-only")
        _, again = run("B", "read-only")
    assert again_generated == generated  # the file's value, read back
    assert (served.usage.llm_calls, served.usage.cache_hits) == (0, 2)
    assert [v.answer for v in served.verdicts] == [v.answer for v in first.verdicts] == ["yes", "no"]
    assert missed.usage.llm_calls == again.usage.llm_calls == 3  # misses are computed, never written
    assert tree(cache_dir) == before


def test_read_only_cache_ignores_a_corrupt_database_and_writes_nothing(fake: ScriptedModel, cache_dir: Path) -> None:
    evaluate("A", CHECKLIST, model=fake.model, cache_dir=str(cache_dir))
    (cache_dir / "cache.db").write_bytes(b"this is not a sqlite database\x00" * 200)
    before = tree(cache_dir)
    with pytest.warns(BinevalCacheWarning, match="read-only cache .* is unreadable .*ignored for this run"):
        result = evaluate("A", CHECKLIST, model=fake.model, cache_dir=str(cache_dir), cache="read-only")
    assert [v.answer for v in result.verdicts] == ["yes", "yes"] and result.usage.llm_calls == 2
    assert tree(cache_dir) == before  # nothing moved aside, nothing created
    assert not list(cache_dir.glob("cache.db.corrupt-*"))


def test_read_only_cache_creates_no_directory(fake: ScriptedModel, cache_dir: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)
        evaluate("A", CHECKLIST, model=fake.model, cache_dir=str(cache_dir), cache="read-only")
    assert not cache_dir.exists()


ANSWER = '''
def answer(req):
    return "no" if "3" in req.output else "yes"
'''
TESTS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", range(6))
@pytest.mark.bineval(task="Summarize the article.")
def test_many(i):
    assert_passes(f"summary {i}", dimension="fluency", threshold=0.0)
'''


def test_two_xdist_workers_share_one_cache_then_a_rerun_makes_no_request(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="xfake", rule=ANSWER)
    pytester.makepyfile(test_many=TESTS)
    runs = []
    for name in ("first.json", "second.json"):
        result = pytester.runpytest("-p", "xdist", "-n", "2", f"--bineval-report={name}",
                                    "--bineval-cache-dir=shared-cache")
        result.assert_outcomes(passed=6)
        runs.append(ReportDocument.load(pytester.path / name))
    first, second = runs
    assert first.totals.llm_calls > 0
    assert second.totals.llm_calls == 0  # checklists and verdicts all from the shared cache
    assert second.totals.cache_hits >= second.totals.questions == 12

    def verdicts(doc: ReportDocument) -> dict[str, list[tuple[str, str]]]:
        return {r.test: [(v.question, v.answer) for v in r.verdicts] for r in doc.evaluations}

    assert verdicts(first) == verdicts(second)
    assert any(a == "no" for vs in verdicts(first).values() for _, a in vs)


def test_four_processes_on_one_cache_lose_nothing(tmp_path: Path) -> None:
    outcome = stress(tmp_path / "cache", processes=4, outputs=8, questions=3)
    assert outcome.lost == 0 and outcome.entries_found == 8 * 3
    assert outcome.identical_verdicts
    assert outcome.rerun_requests == 0
    assert outcome.requests >= 8 * 3  # every entry was asked for at least once


def test_a_writer_killed_mid_write_leaves_a_usable_cache(tmp_path: Path) -> None:
    outcome = kill_mid_write(tmp_path / "cache", after=1.0)
    assert outcome.entries > 20  # it was killed while writing, after many writes
    assert outcome.integrity == "ok"
    assert outcome.unreadable == 0
    assert outcome.writes_after
    assert outcome.warnings == []


def test_a_cache_directory_that_cannot_be_made_says_so_and_moves_nothing(fake: ScriptedModel, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.warns(BinevalCacheWarning, match=r"cannot open the cache at .*a-file.*: this run is judged without "
                                                 r"it \(is the directory writable\?"):
        result = evaluate("x", CHECKLIST, model=fake.model, cache_dir=str(blocker / "cache"))
    assert [v.answer for v in result.verdicts] == ["yes", "yes"] and not any(v.cached for v in result.verdicts)
    assert blocker.read_text() == "not a directory" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]

