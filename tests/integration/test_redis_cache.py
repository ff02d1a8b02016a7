"""The reply cache in a real Redis (``--bineval-cache-url``): a redis-server started per test on a free 127.0.0.1
port, with a password that no message, report or key may show. Two shards on one server lose no entry and a
read-only re-run makes no request; read-only sends no write; a server gone at the start or part way is one
warning and a run judged without the cache, every request counted.

Skipped only where redis-server (the Debian package) is absent and CI is not set: .ci/run installs it, and with
CI set a missing binary fails these tests."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import generate_and_judge

from pytest_bineval import BinevalCacheWarning, Checklist, Engine, Question, Settings, evaluate
from pytest_bineval.errors import UsageError
from pytest_bineval.llm.cache import Signing
from pytest_bineval.llm.redis_cache import RedisCache, display_url
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing import ScriptedModel

pytest_plugins = ["pytester"]

PASSWORD = "Redis-pw-5a9c1e77"  # every URL of these tests carries it
CHECKLIST = Checklist(task="T", dimensions={"fluency": "F"}, questions=[
    Question(id=f"fluency-{i}", dimension="fluency", text=f"Is check {i} met?") for i in (1, 2)])


def _missing(what: str, install: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed and CI is set: the Redis cache tests must run in CI ({install}; "
                    ".ci/run installs it)")
    pytest.skip(f"{what} is not installed ({install}); the Redis cache tests need it")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class RedisServer:
    """A redis-server of one test: no persistence, a password, its log in ``directory``."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=10)

    def dump(self) -> dict[bytes, tuple[bytes, int]]:
        """Every key with its value and its remaining time to live (ms; -1: none)."""
        client = self.client()
        try:
            return {key: (client.get(key), client.pttl(key)) for key in client.scan_iter(count=1000)}
        finally:
            client.close()

    def writes(self) -> int:
        """Write commands the server has run (SET and its kin), from INFO commandstats."""
        client = self.client()
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        names = ("set", "setex", "psetex", "setnx", "mset", "getset", "getex", "expire", "pexpire", "del", "append")
        return sum(int(stats.get(f"cmdstat_{n}", {}).get("calls", 0)) for n in names)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def start_redis(directory: Path) -> RedisServer:
    binary = shutil.which("redis-server")
    assert binary is not None
    directory.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):  # a free port can be taken between finding it and binding it
        port = free_port()
        log = directory / f"redis-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--requirepass", PASSWORD, "--dir", str(directory)],
                cwd=directory, stdout=out, stderr=subprocess.STDOUT)
        server = RedisServer(port, directory, process)
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                client = server.client()
                try:
                    client.ping()
                finally:
                    client.close()
                return server
            except Exception:
                time.sleep(0.05)
        server.stop()
    raise RuntimeError(f"redis-server did not start: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        _missing("redis-server", "apt-get install redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("redis-py", "pip install -e '.[redis]'")
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


def cache_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, BinevalCacheWarning)]


def disk_keys(directory: Path) -> set[str]:
    db = sqlite3.connect(f"file:{directory / 'cache.db'}?immutable=1", uri=True)
    try:
        return {key for (key,) in db.execute("SELECT key FROM Cache")}
    finally:
        db.close()


# -- two shards on one server ----------------------------------------------------------------------------------------
CONFTEST = '''
import os
from pytest_bineval.testing import ScriptedModel

FAKE = ScriptedModel(provider="rfake", answers=lambda req: "no" if "3" in req.output else "yes").register()
'''
SHARD = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", {numbers})
@pytest.mark.bineval(task="Summarize the article.")
def test_many(i):
    assert_passes(f"summary {{i}}", dimension="fluency", threshold=0.0)
'''


def project(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nbineval_model = rfake/judge\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_shard_a=SHARD.format(numbers=[0, 1, 2]), test_shard_b=SHARD.format(numbers=[3, 4, 5]))


def test_two_shards_on_one_redis_lose_no_entry_and_a_read_only_rerun_asks_nothing(
        pytester: pytest.Pytester, redis_server: RedisServer) -> None:
    project(pytester)
    # What one machine would store: the whole suite on a disk cache.
    pytester.runpytest_inprocess("--bineval-cache-dir=disk").assert_outcomes(passed=6)
    expected = disk_keys(pytester.path / "disk")
    # Two shards at once on one Redis, the second with two xdist workers (three processes writing).
    url = f"--bineval-cache-url={redis_server.url}"
    shards = [pytester.popen([sys.executable, "-m", "pytest", "test_shard_a.py", url, "--bineval-report=a.json"],
                             stdin=subprocess.DEVNULL),
              pytester.popen([sys.executable, "-m", "pytest", "test_shard_b.py", "-p", "xdist", "-n", "2", url,
                              "--bineval-report=b.json"], stdin=subprocess.DEVNULL)]
    outputs = []
    for shard in shards:
        out, err = shard.communicate(timeout=600)
        outputs.append(out.decode() + err.decode())
        assert shard.returncode == 0, outputs[-1]
    stored = redis_server.dump()
    assert all(key.startswith(b"bineval:") for key in stored)
    assert {key.decode()[len("bineval:"):] for key in stored} == expected  # no entry lost, none extra
    assert all(ttl == -1 for _, ttl in stored.values())  # no TTL given: none set
    for name in ("a.json", "b.json"):
        assert ReportDocument.load(pytester.path / name).totals.llm_calls > 0

    writes = redis_server.writes()
    result = pytester.runpytest_inprocess(url, "--bineval-cache=read-only", "--bineval-report=again.json")
    result.assert_outcomes(passed=6)
    again = ReportDocument.load(pytester.path / "again.json")
    assert again.totals.llm_calls == 0  # checklists and verdicts, all from Redis
    assert again.totals.cache_hits >= again.totals.questions == 12
    assert redis_server.dump() == stored and redis_server.writes() == writes
    assert [v.answer for r in again.evaluations if r.test.endswith("[3]") for v in r.verdicts] == ["no"] * 2

    texts = [*outputs, *result.outlines, *result.errlines,
             *((pytester.path / n).read_text() for n in ("a.json", "b.json", "again.json"))]
    assert not [t for t in texts if PASSWORD in t]
    assert not [k for k, (v, _) in stored.items() if PASSWORD.encode() in k + v]


# -- read-only ---------------------------------------------------------------------------------------------------------
def test_read_only_sends_no_write(fake: ScriptedModel, redis_server: RedisServer) -> None:
    fake.answers = {"Is check 2 met?": "no"}

    def run(output: str, mode: str) -> Any:
        settings = Settings(model=fake.model, cache=mode, cache_url=redis_server.url)  # type: ignore[arg-type]
        return generate_and_judge(settings, output, CHECKLIST)

    generated, first = run("A", "on")
    assert first.usage.llm_calls == 3  # two answers, the explanation of the no
    before, writes = redis_server.dump(), redis_server.writes()
    assert len(before) == 4  # the requirements, the questions, two verdicts with one explanation
    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)
        again_generated, served = run("A", "read-only")
        _, missed = run("B", "read-only")
        _, missed_again = run("B", "read-only")
    assert again_generated == generated
    assert (served.usage.llm_calls, served.usage.cache_hits) == (0, 2)
    assert [v.answer for v in served.verdicts] == [v.answer for v in first.verdicts] == ["yes", "no"]
    assert missed.usage.llm_calls == missed_again.usage.llm_calls == 3  # misses are asked, never written
    assert redis_server.dump() == before
    assert redis_server.writes() == writes


# -- the server gone ---------------------------------------------------------------------------------------------------
def test_redis_down_at_the_start_is_one_warning_and_every_request_counted(fake: ScriptedModel) -> None:
    pytest.importorskip("redis", reason="the Redis cache needs redis-py (pip install -e '.[redis]')")
    port = free_port()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"  # nothing listens there
    engine = Engine(Settings(model=fake.model, cache_url=url))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [engine.evaluate(output, CHECKLIST) for output in ("A", "B", "A")]
    engine.close()
    assert [r.usage.llm_calls for r in results] == [2, 2, 2]  # no cache: "A" is asked again, and counted
    assert sum(r.usage.cache_hits for r in results) == 0 and engine.usage.llm_calls == 6
    messages = cache_messages(caught)
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"the shared cache at redis://:***@127.0.0.1:{port}/0 cannot be used "
                                  "(ConnectionError")
    assert "judged without the cache" in messages[0] and PASSWORD not in messages[0]


def test_a_wrong_password_is_said_without_either_password(fake: ScriptedModel, redis_server: RedisServer) -> None:
    wrong = "Wrong-pw-0d3b2a9f"
    with pytest.warns(BinevalCacheWarning, match=r"redis://:\*\*\*@127\.0\.0\.1:\d+/0 cannot be used") as caught:
        result = evaluate("A", CHECKLIST, model=fake.model,
                          cache_url=redis_server.url.replace(PASSWORD, wrong))
    assert result.usage.llm_calls == 2
    assert not [m for m in cache_messages(caught.list) if wrong in m or PASSWORD in m]
    assert redis_server.dump() == {}


def test_rediss_speaks_tls(fake: ScriptedModel, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server of these tests speaks no TLS: a rediss:// URL fails its handshake (one warning), a redis:// works.
    # The server waits for the rest of a "command" that is a TLS hello: the handshake ends at the client's timeout
    # (twice 5 s, with its retry), here shortened.
    monkeypatch.setattr(RedisCache, "timeout", 1.0)
    with pytest.warns(BinevalCacheWarning, match=r"rediss://:\*\*\*@127\.0\.0\.1:\d+/0 cannot be used"):
        result = evaluate("A", CHECKLIST, model=fake.model, cache_url=redis_server.url.replace("redis:", "rediss:"))
    assert result.usage.llm_calls == 2 and redis_server.dump() == {}


STOPPED_MID_RUN = '''
import os
import time

import pytest
import redis

from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_1_before():
    assert_passes("summary 1", dimension="fluency")

@pytest.mark.skipif(not os.environ.get("STOP_REDIS"), reason="Redis stays")
def test_2_redis_goes_away():
    client = redis.Redis.from_url(os.environ["BINEVAL_TEST_REDIS"])
    client.shutdown(nosave=True)
    for _ in range(600):  # until it refuses connections
        try:
            redis.Redis.from_url(os.environ["BINEVAL_TEST_REDIS"], socket_timeout=1).ping()
        except redis.exceptions.ConnectionError:
            return
        time.sleep(0.05)
    raise AssertionError("redis-server is still answering")

@pytest.mark.bineval(task="Summarize the article.")
def test_3_after():
    assert_passes("summary 2", dimension="fluency")

@pytest.mark.bineval(task="Summarize the article.")
def test_4_after_a_no():
    assert_passes("summary 3", dimension="fluency")
'''


def test_redis_stopped_mid_run_is_one_warning_and_the_rest_is_judged_and_counted(
        pytester: pytest.Pytester, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nbineval_model = rfake/judge\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_stop=STOPPED_MID_RUN)
    monkeypatch.setenv("BINEVAL_TEST_REDIS", redis_server.url)
    url = f"--bineval-cache-url={redis_server.url}"
    primed = pytester.runpytest_inprocess(url, "--bineval-report=primed.json")  # every entry in Redis
    primed.assert_outcomes(passed=2, failed=1, skipped=1)
    calls = {r.test.split("::")[1]: r.usage.llm_calls for r in ReportDocument.load(pytester.path / "primed.json")
             .evaluations}

    monkeypatch.setenv("STOP_REDIS", "1")
    result = pytester.runpytest_inprocess(url, "--bineval-report=stopped.json", "-rA")
    result.assert_outcomes(passed=3, failed=1)  # test_4 still fails: its no is asked again, not lost
    result.stdout.fnmatch_lines([
        "*warnings summary*",
        "*BinevalCacheWarning: the shared cache at redis://:[*][*][*]@127.0.0.1:*/0 stopped answering (*): "
        "the rest of this run is judged without the cache (every question is asked and every request counted)",
        "FAILED test_stop.py::test_4_after_a_no*",
    ])
    assert result.stdout.str().count("BinevalCacheWarning") == 1
    stopped = ReportDocument.load(pytester.path / "stopped.json")
    by_test = {r.test.split("::")[1]: r for r in stopped.evaluations}
    assert by_test["test_1_before"].usage.llm_calls == 0 and by_test["test_1_before"].usage.cache_hits == 2
    for name in ("test_3_after", "test_4_after_a_no"):  # asked as on an empty cache, every request counted
        assert by_test[name].usage.llm_calls == calls[name] > 0 and by_test[name].usage.cache_hits == 0
    assert stopped.totals.llm_calls == calls["test_3_after"] + calls["test_4_after_a_no"]
    assert [v.answer for v in by_test["test_4_after_a_no"].verdicts] == ["no"] * 2
    assert PASSWORD not in result.stdout.str() + result.stderr.str() + (pytester.path / "stopped.json").read_text()


# -- prefix and TTL ----------------------------------------------------------------------------------------------------
def test_a_prefix_keeps_caches_apart_and_a_ttl_expires_entries(fake: ScriptedModel, redis_server: RedisServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)
        first = evaluate("A", CHECKLIST, model=fake.model, cache_url=redis_server.url, cache_prefix="team-a:",
                         cache_ttl=600)
        other = evaluate("A", CHECKLIST, model=fake.model, cache_url=redis_server.url, cache_prefix="team-b:")
        again = evaluate("A", CHECKLIST, model=fake.model, cache_url=redis_server.url, cache_prefix="team-a:")
    assert (first.usage.llm_calls, other.usage.llm_calls, again.usage.llm_calls) == (2, 2, 0)
    stored = redis_server.dump()
    team_a = {k: ttl for k, (_, ttl) in stored.items() if k.startswith(b"team-a:")}
    team_b = {k: ttl for k, (_, ttl) in stored.items() if k.startswith(b"team-b:")}
    assert len(team_a) == len(team_b) == 2 and len(stored) == 4
    assert all(0 < ttl <= 600_000 for ttl in team_a.values()) and set(team_b.values()) == {-1}
    assert {k[len("team-a:"):] for k in team_a} == {k[len("team-b:"):] for k in team_b}  # same digests


def test_the_disk_cache_takes_the_ttl_too(fake: ScriptedModel, cache_dir: Path) -> None:
    evaluate("A", CHECKLIST, model=fake.model, cache_dir=str(cache_dir), cache_ttl=600)
    db = sqlite3.connect(str(cache_dir / "cache.db"))
    expiries = [e for (e,) in db.execute("SELECT expire_time FROM Cache")]
    db.close()
    assert len(expiries) == 2 and all(e is not None and 0 < e - time.time() <= 600 for e in expiries)


# -- the URL: checked up front, never shown with its password ----------------------------------------------------------
@pytest.mark.parametrize(("url", "message"), [
    ("http://:{pw}@127.0.0.1:6379/0", "a cache URL is redis://*, not http://:[*][*][*]@127.0.0.1:6379/0"),
    ("redis://:{pw}@127.0.0.1:6379/cache", "the database of a cache URL is a number *, not 'cache' in "
                                           "redis://:[*][*][*]@127.0.0.1:6379/cache"),
    ("redis://:{pw}@127.0.0.1:99999/0", "a cache URL is redis://*, not (an unreadable URL)"),
    ("redis://:{pw}@/0", "a cache URL is redis://*, not redis://:[*][*][*]@/0"),
])
def test_a_bad_url_is_a_usage_error_without_its_password(pytester: pytest.Pytester, url: str, message: str) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(f"--bineval-cache-url={url.format(pw=PASSWORD)}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument --bineval-cache-url: {message}*"])
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    with pytest.raises(UsageError) as raised:
        Settings(cache_url=url.format(pw=PASSWORD))
    assert PASSWORD not in str(raised.value) and str(raised.value).startswith("cache_url: ")


def test_display_url_hides_the_password_and_the_query() -> None:
    assert display_url(f"rediss://ci:{PASSWORD}@cache.example:6380/3?password={PASSWORD}") == \
        "rediss://ci:***@cache.example:6380/3"
    assert display_url("redis://[::1]:6379") == "redis://[::1]:6379/0"
    assert display_url("redis://127.0.0.1:6379/0?db=4") == "redis://127.0.0.1:6379/4"  # redis-py reads ?db=
    # a password written %-quoted in the URL is hidden in both spellings in what an error says
    cache = RedisCache("redis://:pa%40ss-word-1@127.0.0.1:6379/0")
    assert cache._say(ValueError("auth pa@ss-word-1 / pa%40ss-word-1 failed")) == "ValueError: auth *** / *** failed"
    assert PASSWORD not in repr(Settings(cache_url=f"redis://:{PASSWORD}@127.0.0.1:6379/0"))


def test_only_mode_on_writes(redis_server: RedisServer) -> None:
    for mode, writes in (("on", True), ("read-only", False), ("off", False)):
        cache = RedisCache(redis_server.url, mode, prefix=f"{mode}:")  # type: ignore[arg-type]
        assert cache.writes is writes
        cache.set("k", {"content": "{}"})
        assert (cache.get("k") is not None) is writes
        cache.close()
    assert list(redis_server.dump()) == [b"on:k"]


# -- signed entries ----------------------------------------------------------------------------------------------------
SECRET = "redis-signing-secret-8d2e41b07a"
SECRET_ENV = "BINEVAL_CACHE_SECRET"


def test_a_forged_entry_in_redis_is_a_miss_asked_again_and_stored_signed(
        fake: ScriptedModel, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever can SET under the prefix decided verdicts; with --bineval-cache-key-env, a rewritten entry is
    refused (asked again, counted, said once) and a runner without the secret writes nothing."""
    import json

    monkeypatch.setenv(SECRET_ENV, SECRET)
    fake.answers = {"Is check 2 met?": "no"}
    settings = Settings(model=fake.model, cache_url=redis_server.url, cache_key_env=SECRET_ENV)

    def run(s: Settings = settings) -> Any:
        engine = Engine(s)
        try:
            return engine.evaluate("A", CHECKLIST), engine.cache
        finally:
            engine.close()

    first, _ = run()
    assert [v.answer for v in first.verdicts] == ["yes", "no"]
    client = redis_server.client()
    try:
        signed = {key: json.loads(value) for key, (value, _) in redis_server.dump().items()}
        assert all(entry["sig"].startswith("sha256:") for entry in signed.values())
        for key, entry in signed.items():  # every verdict rewritten to yes, the signature kept
            if entry["value"].get("answer") == "no":
                entry["value"]["answer"] = "yes"
                client.set(key, json.dumps(entry))
    finally:
        client.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, cache = run()
    assert [v.answer for v in again.verdicts] == ["yes", "no"]  # the forgery decided nothing
    assert (again.usage.llm_calls, again.usage.cache_hits, cache.rejected) == (2, 1, 1)
    (message,) = cache_messages(caught)
    assert "is not used: signature does not match" in message and SECRET not in message
    stored = {key.decode()[len("bineval:"):]: json.loads(value) for key, (value, _) in redis_server.dump().items()}
    signing = Signing(SECRET_ENV)  # the reply asked again was stored over the forgery, signed
    assert all(entry["sig"] == signing.sign(key, entry["value"]) for key, entry in stored.items())
    assert sorted(e["value"]["answer"] for e in stored.values() if "answer" in e["value"]) == ["no", "yes"]
    third, _ = run()
    assert (third.usage.llm_calls, third.usage.cache_hits) == (0, 2)

    monkeypatch.setenv(SECRET_ENV, "")  # a fork: no secret; it may only read, unchecked
    writes = redis_server.writes()
    with pytest.raises(UsageError, match="is empty or unset"):
        Engine(settings)
    read, _ = run(Settings(model=fake.model, cache_url=redis_server.url, cache_key_env=SECRET_ENV,
                           cache="read-only"))
    assert (read.usage.llm_calls, read.usage.cache_hits) == (0, 2) and redis_server.writes() == writes
    assert not [k for k, (v, _) in redis_server.dump().items() if SECRET.encode() in k + v]
