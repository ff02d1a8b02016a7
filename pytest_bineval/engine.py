"""The engine: one cache, the clients, the ledger it adds its usage into, and the two operations (checklist generation,
evaluation). Its :class:`~pytest_bineval.settings.Settings` are the one definition of every default.

Sync callers run the engine's coroutines with :meth:`Engine.run`: on one event loop per thread, kept until
:meth:`Engine.close`, so that the HTTP clients (:class:`~pytest_bineval.llm.http.HttpClients`: connection pools,
keep-alive, one SSL context) serve every evaluation of a pytest worker. On any other loop (``aevaluate`` in a
user's ``asyncio.run``, pytest-asyncio's loops) the clients live while an evaluation runs on it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
import time
import weakref
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from . import checklist as _checklist
from . import confirm as _confirm
from . import judge as _judge
from .budget import Budget, parse_budget
from .conversation import Conversation, OutputArg, as_output
from .dimensions import DimensionsArg
from .errors import BinevalError, BudgetReachedError, InputTooLargeError
from .llm.cache import ResponseCache, cache_signing
from .llm.client import LLMClient, ModelSettings
from .llm.http import HttpClients
from .llm.local import is_embedded
from .llm.negotiation import FormatNegotiator
from .llm.retry import RetryPolicy
from .llm.seam import RequestSeam
from .models import Checklist, ConfirmCost, Evaluation, ExplainMode, Usage, Verdict
from .prompting import Prompt, load_judge_prompt
from .qworld import QworldConfig, parse_widths
from .repeats import combine_repeats
from .report.ledger import RunLedger
from .settings import Settings
from .similarity import Similarity, make_similarity
from .sources import SourceArg, source_text

__all__ = ["Engine", "Settings", "run_sync"]

T = TypeVar("T")


def reply_cache(s: Settings) -> ResponseCache:
    """The reply cache of the settings: Redis at ``cache_url`` when it is given, else the cache directory (signed
    entries with ``cache_key_env``)."""
    signing = cache_signing(s.cache_key_env, s.cache)
    if s.cache_url:
        from .llm.redis_cache import RedisCache

        return RedisCache(s.cache_url, s.cache, prefix=s.cache_prefix, ttl=s.cache_ttl, signing=signing)
    return ResponseCache(Path(os.path.expanduser(s.cache_dir)), s.cache, ttl=s.cache_ttl, signing=signing)


class Engine:
    """Generates checklists and evaluates outputs; adds what it spends (every request made) into its
    :class:`~pytest_bineval.report.ledger.RunLedger` (the one it is given: the session's in a pytest run; else a
    private one), and keeps the session's structured-output negotiation (``formats``: what each model's provider
    accepts, learned once)."""

    def __init__(self, settings: Settings | None = None, *, cache: ResponseCache | None = None,
                 ledger: RunLedger | None = None) -> None:
        self.settings = settings or Settings()
        if cache is None and self.settings.cache != "off":
            cache = reply_cache(self.settings)
        self.cache = cache
        self.ledger = ledger if ledger is not None else RunLedger()
        if cache is not None:  # a refused (unsigned or forged) entry is counted where the run's usage is
            cache.on_rejected = lambda: self.ledger.add(RunLedger(cache_rejected=1))
        s = self.settings
        self.budget: Budget | None = None
        if s.budget is not None:
            b = parse_budget(s.budget)
            self.budget = Budget(b.amount, b.unit, workers=max(1, s.budget_workers))
        self.formats = FormatNegotiator()
        self.http = HttpClients()
        self._runners: dict[int, Any] = {}  # thread -> its asyncio.Runner (run())
        self._runners_lock = threading.Lock()
        # an engine dropped without close(): its loops and clients are closed when it is collected
        weakref.finalize(self, _close_loops, self._runners, self.http, self._runners_lock)
        self.batch: RequestSeam | None = None  # --bineval-batch: set by pytest_bineval.batch, given to every client
        self._judge_prompt: Prompt | None = None
        self._similarity: dict[tuple[str, float | None], Similarity | None] = {}  # loaded once (MiniLM: 90 MB)
        if self.settings.judge_prompt is not None:
            self._judge_prompt = load_judge_prompt(os.path.expanduser(self.settings.judge_prompt))

    def judge_prompt_digest(self) -> str:
        """The :func:`~pytest_bineval.prompting.prompt_digest` of the judge prompt in use: the packaged ``judge.md``
        or the file of ``--bineval-judge-prompt``."""
        from .prompting import load_prompt, prompt_digest

        return prompt_digest(self._judge_prompt if self._judge_prompt is not None else load_prompt("judge"))

    @property
    def usage(self) -> Usage:
        """Everything spent so far, as the ledger counts it (read-only: :meth:`add_usage` adds to it)."""
        return self.ledger.usage

    def add_usage(self, usage: Usage, *, checklist: bool = False, confirm: ConfirmCost | None = None) -> None:
        """Add ``usage`` to the ledger, atomically (assert_passes may run in several threads of one test, each with
        its event loop: no request, token or cache hit of a concurrent evaluation is lost); ``checklist``: spent
        generating a checklist (counted apart too: ``ledger.checklist_usage``); ``confirm``: what confirming an
        evaluation asked (``usage`` is its re-asks'; counted apart too: ``ledger.confirm_cost``)."""
        self.ledger.add(RunLedger(usage=usage, checklist_usage=usage if checklist else Usage(),
                                  confirm_cost=confirm or ConfirmCost()))

    def check_budget(self) -> None:
        """Raise :class:`BudgetReachedError` (and count the refusal) when the budget is spent (:mod:`.budget`)."""
        if self.budget is None:
            return
        u = self.ledger.usage
        why = self.budget.refusal(u.cost_usd, u.prompt_tokens + u.completion_tokens, u.unpriced_requests)
        if why is not None:
            self.ledger.add(RunLedger(budget_refused=1))
            raise BudgetReachedError(why)

    def cache_notes(self) -> list[str]:
        """A read-only (or replay) cache directory that holds no cache: said plainly, since nothing else fails (in
        CI it means the step that restores the cache found none, or put it elsewhere)."""
        s = self.settings
        if s.cache not in ("read-only", "replay") or s.cache_url:
            return []
        directory = Path(s.cache_dir)
        if (directory / "cache.db").is_file():
            return []
        what = "it holds no cache.db" if directory.is_dir() else "no such directory"
        then = ("every question was sent to the judge" if s.cache == "read-only"
                else "every reply was missing (replay sends no request)")
        return [f"bineval: --bineval-cache {s.cache} (or the bineval_cache ini key), but there is no cache at "
                f"{directory} ({what}): {then} and nothing was written. In CI this means the cache was not restored: "
                f"the restore step found no cache for its key, or restored it to another path than the cache "
                f"directory (--bineval-cache-dir / bineval_cache_dir); check that step's log."]

    def client(self, model: str, *, repeat: int = 0, deadline: float | None = None) -> LLMClient:
        """A client of ``model`` sharing this engine's cache and negotiation; ``repeat`` > 0 keys its cache entries
        apart (``Settings.repeats``); ``deadline``: a ``time.monotonic()`` instant none of its requests goes past."""
        s = self.settings
        return LLMClient(
            ModelSettings(model=model, temperature=s.temperature, timeout=s.timeout, retries=s.retries,
                          api_base=s.api_base, extra=dict(s.extra), repeat=repeat,
                          replay=s.cache == "replay", stream=s.stream),
            self.cache, formats=self.formats, deadline=deadline, http=self.http, batch=self.batch,
        )

    def assertion_deadline(self) -> float:
        """The deadline of one evaluation: its budget, ``timeout * (retries + 1) + 1`` seconds, from now (all its
        questions' requests, retries and waits end by then)."""
        return time.monotonic() + RetryPolicy(retries=self.settings.retries, timeout=self.settings.timeout).budget

    def qworld_config(self, **overrides: Any) -> QworldConfig:
        """The Qworld settings (widths, top-K, pre-filter) of these settings, with ``overrides`` (None: kept)."""
        s = self.settings
        values: dict[str, Any] = {"widths": parse_widths(s.qworld_widths), "top_k": s.qworld_top_k,
                                  "similarity": s.qworld_similarity}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return QworldConfig(**values)

    def similarity(self, config: QworldConfig) -> Similarity | None:
        key = (config.similarity, config.threshold)
        if key not in self._similarity:
            self._similarity[key] = make_similarity(config.similarity, config.threshold,
                                                    api_base=self.settings.api_base)
        return self._similarity[key]

    async def achecklist(self, task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                         strategy: str = "bineval", question: str | None = None,
                         qworld: QworldConfig | None = None) -> Checklist:
        """A checklist: per task (``strategy="bineval"``) or per ``question`` (``"qworld"``, ``"qworld-lite"``;
        ``qworld``: its config, default from the settings)."""
        async with self.http.scope():  # the HTTP clients of this loop serve every request of it
            return await self._achecklist(task, dimensions, model=model, strategy=strategy, question=question,
                                          qworld=qworld)

    async def _achecklist(self, task: str | None, dimensions: DimensionsArg, *, model: str | None, strategy: str,
                          question: str | None, qworld: QworldConfig | None) -> Checklist:
        self.check_budget()
        name = model or self.settings.generator_model
        config = None
        if strategy != "bineval":
            config = qworld or self.qworld_config()
        try:
            result, usage = await _checklist.generate_for(
                self.client(name), task, dimensions, strategy=strategy, question=question, config=config,
                similarity=self.similarity(config) if config is not None else None,
                concurrency=1 if is_embedded(name) else self.settings.concurrency,
            )
        except BinevalError as exc:  # the failed requests were made all the same
            self.add_usage(_judge.usage_of_error(exc), checklist=True)
            raise
        self.add_usage(usage, checklist=True)
        return result

    async def aevaluate(self, output: OutputArg, checklist: Checklist, source: SourceArg = None, *,
                        model: str | None = None, prompt: Prompt | None = None,
                        question_first: bool = False, explain: ExplainMode | None = None) -> Evaluation:
        """Judge ``output`` (a text, or a conversation: a list of chat messages or a
        :class:`~pytest_bineval.Conversation`); ``source``: a text or a list of documents
        (:mod:`pytest_bineval.sources`); ``prompt``: an evaluator prompt for this call (default: the settings' judge
        prompt, else the packaged one); ``explain``: the explain mode for this call (default: the settings'). The
        input is checked by the caller, where it came in (:meth:`evaluate` checks it; so do ``assert_passes`` and
        ``pytest_bineval.evaluate``); a list of messages given here is read as a conversation (checked once)."""
        output = as_output(output)  # a str or a Conversation as it is
        async with self.http.scope():  # the HTTP clients of this loop serve every request of it
            return await self._aevaluate(output, checklist, source, model=model, prompt=prompt,
                                         question_first=question_first, explain=explain)

    async def _aevaluate(self, output: str | Conversation, checklist: Checklist, source: SourceArg, *,
                         model: str | None, prompt: Prompt | None, question_first: bool,
                         explain: ExplainMode | None) -> Evaluation:
        text = source_text(source)  # documents: numbered and delimited, as the judge reads them
        self.check_budget()
        name = model or self.settings.judge_model
        # The embedded model is one in-process instance: ask its questions back to back.
        embedded = is_embedded(name)
        concurrency = 1 if embedded else self.settings.concurrency
        repeats = self.settings.repeats

        async def once(repeat: int, limit: int) -> Evaluation:
            # each evaluation (each repeat of it) has its deadline: timeout * (retries + 1) + 1 s from its start
            client = self.client(name, repeat=repeat, deadline=self.assertion_deadline())
            return await _judge.judge(client, output, checklist, text, concurrency=limit,
                                      question_first=question_first, prompt=prompt or self._judge_prompt,
                                      explain=explain or self.settings.explain)

        if repeats == 1:
            try:
                result = await once(0, concurrency)
            except InputTooLargeError as exc:  # what finding out cost is spent all the same
                self.add_usage(_judge.usage_of_error(exc))
                raise
            self.add_usage(result.usage)
            if self.settings.confirm:
                result = await self._confirm(result, output, checklist, text, name, concurrency=concurrency,
                                             question_first=question_first, prompt=prompt or self._judge_prompt)
            return result
        # Every repeat asks the whole checklist again, with its own cache entries; hosted models share the
        # concurrency among the repeats, the embedded model takes them one after the other.
        loop = asyncio.get_running_loop()
        started = loop.time()
        runs: list[Evaluation] = []
        failures: list[BaseException] = []
        if embedded:
            for k in range(repeats):  # a repeat that raised: the repeats after it are not asked
                try:
                    runs.append(await once(k, 1))
                except Exception as exc:
                    failures.append(exc)
                    break
        else:
            limit = max(1, concurrency // repeats)
            runs, failures = await _judge.settle([once(k, limit) for k in range(repeats)])
        if failures:
            # what the finished repeats and the failed ones spent is spent all the same
            usage = Usage.total([*(r.usage for r in runs), *(_judge.usage_of_error(e) for e in failures)])
            usage.seconds = loop.time() - started
            self.add_usage(usage)
            failure = next((e for e in failures if isinstance(e, InputTooLargeError)), failures[0])
            if isinstance(failure, InputTooLargeError):
                raise InputTooLargeError(str(failure), usage) from failure
            raise failure
        result = combine_repeats(runs, seconds=loop.time() - started)
        self.add_usage(result.usage)
        return result

    async def _confirm(self, result: Evaluation, output: str | Conversation, checklist: Checklist, source: str | None,
                       name: str,
                       *, concurrency: int, question_first: bool, prompt: Prompt | None) -> Evaluation:
        """``result`` with its failing (and borderline) verdicts confirmed (:mod:`pytest_bineval.confirm`): each
        re-asked one re-ask at a time, re-ask k with the cache key of repeat k and no explanation; the questions
        share the concurrency (the embedded model takes them one after the other)."""
        s = self.settings
        questions = {q.id: q for q in checklist.questions}
        semaphore = asyncio.Semaphore(max(1, concurrency))
        deadline = self.assertion_deadline()  # the confirmation's requests have one evaluation's budget
        spent: list[Usage] = []  # what the re-asks spent, the failed ones too

        async def confirm(first: Verdict) -> tuple[Verdict, int]:
            question = questions[first.question_id]
            messages = _judge.judge_messages(checklist.task, source, output, question,
                                             question_first=question_first, prompt=prompt, turn=first.turn)
            reasks: list[Verdict] = []
            while _confirm.ask_again([first.answer, *(r.answer for r in reasks)], s.confirm, s.confidence):
                client = self.client(name, repeat=len(reasks) + 1, deadline=deadline)
                reasks.append(await _judge.reask(client, messages, question, semaphore, spent))
            return _confirm.confirmed(first, reasks, s.confidence), len(reasks)

        asked = [v for v in result.verdicts if v.decided_by == "judge"]
        chosen = [v for v in asked if _confirm.needs_confirmation(v)]
        outcomes, failures = await _judge.settle([confirm(v) for v in chosen])
        usage = Usage.total(spent)
        cost = ConfirmCost(questions=len(asked), reasked=len(chosen), reasks=sum(n for _, n in outcomes),
                           usage=usage)
        self.add_usage(usage, confirm=cost)
        if failures:
            raise failures[0]
        by_id = {(v.question_id, v.turn): v for v, _ in outcomes}
        verdicts = [by_id.get((v.question_id, v.turn), v) for v in result.verdicts]
        return result.model_copy(update={"verdicts": verdicts, "usage": result.usage + usage})

    def checklist(self, task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                  strategy: str = "bineval", question: str | None = None,
                  qworld: QworldConfig | None = None) -> Checklist:
        return self.run(self.achecklist(task, dimensions, model=model, strategy=strategy, question=question,
                                        qworld=qworld))

    def evaluate(self, output: OutputArg, checklist: Checklist, source: SourceArg = None, *,
                 model: str | None = None) -> Evaluation:
        judged = _judge.check_output(output, source)
        return self.run(self.aevaluate(judged, checklist, source, model=model))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of this engine from sync code: on the calling thread's event loop of this engine (made
        at its first call, kept until :meth:`close`, its HTTP clients kept open with it); inside a running event
        loop (or on Python 3.10), as :func:`run_sync` does."""
        runner = None if _loop_running() else self._runner()
        if runner is None:
            return run_sync(coro)
        result: T = runner.run(coro)
        return result

    def _runner(self) -> Any:
        factory = getattr(asyncio, "Runner", None)  # Python 3.11
        if factory is None:
            return None
        thread = threading.get_ident()
        with self._runners_lock:
            runner = self._runners.get(thread)
            if runner is not None and not runner.get_loop().is_closed():
                return runner
            # loop_factory: the loop is not made the thread's current one (pytest-asyncio may close that one)
            runner = self._runners[thread] = factory(loop_factory=asyncio.new_event_loop)
        self.http.keep(runner.get_loop())
        return runner

    def close(self) -> None:
        """Close the HTTP clients, the event loops of :meth:`run` and the cache (the engine can be used again: it
        opens what it needs). An engine dropped without it closes its loops and clients when it is collected."""
        _close_loops(self._runners, self.http, self._runners_lock)
        if self.cache is not None:
            self.cache.close()


def _close_loops(runners: dict[int, Any], http: HttpClients, lock: threading.Lock) -> None:
    """Close the event loops of :meth:`Engine.run` (``runners``) and their HTTP clients."""
    with lock:
        todo = list(runners.values())
        runners.clear()

    def close() -> None:
        for runner in todo:
            loop = runner.get_loop()
            if loop.is_running():  # a thread still inside run(): its loop is left to it
                continue
            http.close_loop(loop)
            runner.close()

    if todo and _loop_running():  # (closed from a coroutine: another thread may drive those loops)
        closer = threading.Thread(target=close, name="bineval-engine-close")
        closer.start()
        closer.join()
    else:
        close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True



def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code (on a new event loop), also when an event loop is already running in this
    thread (then in a worker thread). :meth:`Engine.run` keeps its loop for the engine's next calls."""
    running = _loop_running()
    if not running:  # outside the except block: the coroutine's own errors carry no chained RuntimeError
        return asyncio.run(coro)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()
