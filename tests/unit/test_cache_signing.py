"""Signed cache entries (``--bineval-cache-key-env NAME``): whoever can write an unsigned cache decides the verdicts
read from it (the probe rewrote entries to "yes": 2 failing tests passed with 0 requests). With signing, an entry
carries an HMAC of its key and value with the secret in ``$NAME``; an unsigned or forged one is a miss (asked again,
counted, said once); a runner without the secret cannot write (so cannot forge) and reads unchecked, said once;
the secret is in no cache, report or output."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from support import make_project, report_of

from pytest_bineval import Checklist, Engine, Question, Settings
from pytest_bineval.errors import UsageError
from pytest_bineval.llm.cache import BinevalCacheWarning, Signing, key_env_value
from pytest_bineval.testing import ScriptedModel

pytest_plugins = ["pytester"]

SECRET = "cache-signing-secret-3f9a1c0d7e"  # 30 characters; no message, file or report may hold it
ENV = "BINEVAL_CACHE_SECRET"
CHECKLIST = Checklist(task="T", dimensions={"fluency": "F"}, questions=[
    Question(id=f"fluency-{i}", dimension="fluency", text=f"Is check {i} met?") for i in (1, 2)])


def entries(directory: Path) -> dict[str, dict[str, Any]]:
    """Every entry of a cache directory as stored (JSON text read back)."""
    import diskcache

    cache = diskcache.Cache(str(directory))
    try:
        return {key: json.loads(cache[key]) for key in cache}
    finally:
        cache.close()


def rewrite(directory: Path, change: Any) -> int:
    """Rewrite every verdict entry with ``change(entry)`` as someone with write access to the cache would; the
    number of entries changed."""
    import diskcache

    cache = diskcache.Cache(str(directory))
    changed = 0
    try:
        for key in list(cache):
            entry = json.loads(cache[key])
            if "answer" in entry["value"]:
                change(entry)
                cache[key] = json.dumps(entry)
                changed += 1
    finally:
        cache.close()
    return changed


def judge(fake: ScriptedModel, directory: Path, mode: str = "on", key_env: str | None = ENV) -> tuple[Any, Engine]:
    engine = Engine(Settings(model=fake.model, cache=mode, cache_dir=str(directory),  # type: ignore[arg-type]
                             cache_key_env=key_env))
    try:
        return engine.evaluate("An output.", CHECKLIST), engine
    finally:
        engine.close()


def forge_yes(entry: dict[str, Any]) -> None:
    entry["value"]["answer"] = "yes"  # the signature is kept: it no longer matches


def cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, BinevalCacheWarning)]


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(ENV, SECRET)
    return SECRET


def test_signed_entries_carry_an_hmac_of_key_and_value_and_never_the_secret(fake: ScriptedModel, cache_dir: Path,
                                                                            secret: str) -> None:
    judge(fake, cache_dir)
    stored = entries(cache_dir)
    assert stored and all(e["sig"].startswith("sha256:") and len(e["sig"]) == 7 + 64 for e in stored.values())
    signing = Signing(ENV)
    for key, entry in stored.items():
        assert entry["sig"] == signing.sign(key, entry["value"])
    assert not [f for f in cache_dir.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert secret not in repr(signing) and "secret=set" in repr(signing)


@pytest.mark.parametrize(("forgery", "why", "rejected"), [
    (forge_yes, "signature does not match", 1),  # the "yes" entry is unchanged: its signature still holds
    (lambda e: e.pop("sig"), "unsigned", 2),  # written without signing, or by a runner without the secret
    (lambda e: (forge_yes(e), e.update(sig="sha256:" + "0" * 64)), "signature does not match", 2),
], ids=["value-changed", "unsigned", "signature-made-up"])
def test_a_forged_or_unsigned_entry_is_a_miss_asked_again_counted_and_said_once(
        fake: ScriptedModel, cache_dir: Path, secret: str, forgery: Any, why: str, rejected: int) -> None:
    fake.answers = {"Is check 2 met?": "no"}
    first, _ = judge(fake, cache_dir)
    assert [v.answer for v in first.verdicts] == ["yes", "no"]
    assert rewrite(cache_dir, forgery) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, engine = judge(fake, cache_dir)
    assert [v.answer for v in again.verdicts] == ["yes", "no"]  # the forgery decided nothing
    # each refused entry is asked again (the no with its explanation), every request counted
    assert (again.usage.llm_calls, again.usage.cache_hits) == ((1 if rejected == 1 else 2) + 1, 2 - rejected)
    assert engine.cache is not None and engine.cache.rejected == rejected
    assert engine.ledger.cache_rejected == rejected  # counted where the run's usage is: summary and report say it
    assert engine.ledger.totals().cache_rejected == rejected
    messages = cache_warnings(caught)
    assert len(messages) == 1, messages
    assert f"is not used: {why} (--bineval-cache-key-env {ENV}: only entries signed with the secret count)" in (
        messages[0])
    assert "asked again and its reply stored signed" in messages[0] and secret not in messages[0]
    third, _ = judge(fake, cache_dir)  # the replies asked again were stored signed: hits now
    assert (third.usage.llm_calls, third.usage.cache_hits) == (0, 2)


def test_without_signing_whoever_writes_the_cache_decides(fake: ScriptedModel, cache_dir: Path) -> None:
    """The threat signing answers (what the probe did): an unsigned cache rewritten to "yes" passes, 0 requests."""
    fake.answers = {"Is check 2 met?": "no"}
    judge(fake, cache_dir, key_env=None)
    rewrite(cache_dir, forge_yes)
    forged, _ = judge(fake, cache_dir, key_env=None)
    assert [v.answer for v in forged.verdicts] == ["yes", "yes"] and forged.usage.llm_calls == 0


def test_a_runner_without_the_secret_cannot_write_and_reads_unchecked(fake: ScriptedModel, cache_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, SECRET)
    fake.answers = {"Is check 2 met?": "no"}
    judge(fake, cache_dir)
    before = entries(cache_dir)
    monkeypatch.setenv(ENV, "")  # a fork's pull request: the secret is empty
    with pytest.raises(UsageError, match=rf"--bineval-cache-key-env {ENV}: \${ENV} is empty or unset, so this run "
                                         r"could not sign .*or run with --bineval-cache read-only or replay"):
        judge(fake, cache_dir, mode="on")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read, _ = judge(fake, cache_dir, mode="read-only")
        missed, _ = judge(fake, cache_dir.parent / "empty", mode="replay")
    assert [v.answer for v in read.verdicts] == ["yes", "no"] and read.usage.llm_calls == 0
    assert all(v.answer == "error" for v in missed.verdicts)  # replay: a miss is never asked
    messages = cache_warnings(caught)
    assert len(messages) == 1 and "the signatures of the cache entries are not checked in this run" in messages[0]
    assert "cannot forge an entry" in messages[0]
    assert entries(cache_dir) == before  # nothing written


def test_a_short_secret_is_refused_and_the_option_takes_a_name_never_the_secret(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    monkeypatch.setenv(ENV, "short")
    with pytest.raises(UsageError, match=rf"\${ENV} has 5 characters; give one of at least 16"):
        Signing(ENV)
    assert key_env_value(f" {ENV} ") == ENV
    with pytest.raises(argparse.ArgumentTypeError) as info:
        key_env_value(SECRET)  # the secret given where its variable's name belongs
    assert SECRET not in str(info.value) and "not the secret itself" in str(info.value)


CONFTEST_NO = {"Does the response meet fluency check 2?"}


def test_a_forged_cache_fails_the_test_it_failed_and_the_secret_is_nowhere(pytester: pytest.Pytester,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Through pytest: the failing test stays failing after its verdicts are rewritten to yes in the cache (the
    probe's attack), its questions are asked again, and the secret is in no output, report, JUnit or cache file."""
    monkeypatch.setenv(ENV, SECRET)
    make_project(pytester, no=tuple(CONFTEST_NO), ini=f"bineval_cache_key_env = {ENV}")
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_bad():
            assert_passes("A wrong summary.", dimension="fluency", source="An article.")
    ''')
    args = ["--bineval-cache-dir=cache", "--bineval-report=report.json", "--junitxml=junit.xml", "--color=no"]
    pytester.runpytest(*args).assert_outcomes(failed=1)
    assert rewrite(pytester.path / "cache", forge_yes) >= 1
    result = pytester.runpytest(*args, "-W", "default")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*BinevalCacheWarning: cache entry * is not used: signature does not match*"])
    report = report_of(pytester)
    (ev,) = report.evaluations
    assert ev.usage.llm_calls >= 1 and "no" in [v.answer for v in ev.verdicts]
    assert report.totals.cache_rejected == 1  # the "no" rewritten to yes; the "yes" entry's signature still holds
    result.stdout.fnmatch_lines(["reply cache: 1 entry not used, unsigned or forged (--bineval-cache-key-env): each "
                                 "was asked again (counted above)"])
    texts = [result.stdout.str(), result.stderr.str(),
             *((pytester.path / n).read_text() for n in ("report.json", "junit.xml"))]
    assert not [t for t in texts if SECRET in t]
    files = [f for f in (pytester.path / "cache").rglob("*") if f.is_file()]
    assert files and not [f for f in files if SECRET.encode() in f.read_bytes()]


def test_a_writing_run_without_the_secret_stops_at_the_start(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    make_project(pytester)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(f"--bineval-cache-key-env={ENV}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--bineval-cache-key-env {ENV}: ${ENV} is empty or unset*"])
    ok = pytester.runpytest(f"--bineval-cache-key-env={ENV}", "--bineval-cache=read-only")
    ok.assert_outcomes(passed=1)
