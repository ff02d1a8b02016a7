"""``bineval cache merge DIR... -o DIR``: the cache directories of several shards become one, the sources unchanged;
a directory or an entry that cannot be read is said, skipped, and the exit code is 1."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import BinevalCacheWarning, Checklist, Engine, Question, Settings, evaluate
from pytest_bineval.cli import main
from pytest_bineval.llm.cache import ResponseCache
from pytest_bineval.testing import ScriptedModel

CHECKLIST = Checklist(task="T", dimensions={"fluency": "F"}, questions=[
    Question(id=f"fluency-{i}", dimension="fluency", text=f"Is check {i} met?") for i in (1, 2)])


def tree(directory: Path) -> dict[str, Any]:
    return {str(p.relative_to(directory)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def shard(fake: ScriptedModel, directory: Path, outputs: list[str], **settings: Any) -> int:
    """Evaluate ``outputs`` into the cache at ``directory`` (and write a checklist of 40 kB requirements, which
    diskcache keeps in a file of its own); the requests made."""
    engine = Engine(Settings(model=fake.model, cache_dir=str(directory), **settings))
    try:
        engine.checklist("T", ["fluency"])
        for output in outputs:
            engine.evaluate(output, CHECKLIST)
        return engine.usage.llm_calls
    finally:
        engine.close()


def entries(directory: Path) -> dict[str, float | None]:
    db = sqlite3.connect(f"file:{directory / 'cache.db'}?immutable=1", uri=True)
    try:
        return dict(db.execute("SELECT key, expire_time FROM Cache").fetchall())
    finally:
        db.close()


@pytest.fixture
def script(fake: ScriptedModel) -> ScriptedModel:
    fake.rules["requirements"] = lambda req: json.dumps({"requirements": ["Be fluent."], "notes": "x" * 40000})
    fake.answers = lambda req: "no" if req.output == "C" and "2" in req.question else "yes"
    return fake


def test_merge_keeps_the_entries_of_every_shard(script: ScriptedModel, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    a, b, out = tmp_path / "shard-a", tmp_path / "shard-b", tmp_path / "merged"
    shard(script, a, ["A", "B"])
    shard(script, b, ["B", "C"], cache_ttl=3600)  # "B" in both shards; these entries expire
    before = (tree(a), tree(b))
    assert main(["cache", "merge", str(a), str(b), "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # a: requirements, questions, A x 2, B x 2; b: the same checklist and B, then C x 2 (the no with its explanation)
    assert lines == [f"{a}: 6 entries added, 0 already in {out}", f"{b}: 2 entries added, 4 already in {out}",
                     f"{out}: 8 entries"]
    assert (tree(a), tree(b)) == before  # the sources are only read
    merged = entries(out)
    assert set(merged) == set(entries(a)) | set(entries(b))
    # b's own entries keep their expiry; those a brought first have none
    assert {k for k, e in merged.items() if e is not None} == set(entries(b)) - set(entries(a))
    assert all(e is None or 0 < e - time.time() <= 3600 for e in merged.values())

    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)
        assert shard(script, out, ["A", "B", "C"], cache="read-only") == 0  # the whole suite, from the merge
    result = evaluate("C", CHECKLIST, model=script.model, cache_dir=str(out), cache="read-only")
    assert [v.answer for v in result.verdicts] == ["yes", "no"] and result.verdicts[1].explanation


def test_a_corrupt_or_missing_source_is_said_and_skipped(script: ScriptedModel, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    good, corrupt, missing, out = (tmp_path / n for n in ("good", "corrupt", "missing", "merged"))
    shard(script, good, ["A"])
    corrupt.mkdir()
    (corrupt / "cache.db").write_bytes(b"this is not a sqlite database\x00" * 200)
    assert main(["cache", "merge", str(corrupt), str(good), str(missing), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{good}: 4 entries added, 0 already in {out}", f"{out}: 4 entries"]
    err = captured.err.splitlines()
    assert err[0].startswith(f"bineval cache merge: skipped {corrupt}: unreadable (DatabaseError(")
    assert err[1] == f"bineval cache merge: skipped {missing}: {missing} holds no cache.db (not a cache directory)"
    assert err[2].startswith("bineval cache merge: incomplete (see above)")
    assert set(entries(out)) == set(entries(good))


def test_a_corrupt_entry_is_counted_and_skipped(script: ScriptedModel, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import diskcache

    source, out = tmp_path / "source", tmp_path / "merged"
    shard(script, source, ["A"])
    with diskcache.Cache(str(source)) as raw:
        raw.set("f" * 64, json.dumps({"key": "0" * 64, "value": {}}))  # an entry under another entry's key
        raw.set("e" * 64, "not json")
        raw.set(("a", "tuple"), "a key diskcache pickles: not ours")
    assert main(["cache", "merge", str(source), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert f"{source}: 4 entries added, 0 already in {out}" in captured.out
    assert f"bineval cache merge: {source}: 3 unreadable entries skipped (not copied)" in captured.err
    assert len(entries(out)) == 4


def test_the_target_may_not_be_a_source(script: ScriptedModel, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a"
    shard(script, a, ["A"])
    before = tree(a)
    assert main(["cache", "merge", str(a), str(tmp_path / "b"), "-o", str(tmp_path / "." / "a")]) == 2
    assert "is both a source and the target" in capsys.readouterr().err
    assert tree(a) == before and not (tmp_path / "b").exists()


def test_an_existing_target_keeps_its_entries(script: ScriptedModel, tmp_path: Path) -> None:
    a, out = tmp_path / "a", tmp_path / "merged"
    shard(script, a, ["A"])
    kept = ResponseCache(out)
    kept.set("k" * 64, {"content": "{}"})
    kept.close()
    assert main(["cache", "merge", str(a), "-o", str(out)]) == 0
    assert set(entries(out)) == set(entries(a)) | {"k" * 64}
