"""``bineval batch status`` and ``bineval batch cancel``: the batches written down beside a reply cache.

``status`` lists every batch of the record (pending ones with their status asked of the provider, unless
``--local``); ``cancel`` asks the provider to cancel pending batches. A cancelled batch stays written down: the next
``--bineval-batch`` run that needs its requests finds it cancelled, takes the replies it finished, and asks the rest
directly (or makes them judge errors: ``--bineval-batch-failures``). The key is the judge's (``OPENAI_API_KEY``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from ..errors import UsageError
from .registry import BatchEntry, Registry, registry_for


def _registry(args: argparse.Namespace) -> Registry:
    return registry_for(args.cache_dir, args.cache_url, args.cache_prefix)


def _ago(seconds: float) -> str:
    from ..outputs.batch import duration_text

    return f"{duration_text(seconds)} ago"


def _line(entry: BatchEntry, status: str) -> str:
    where = f" at {entry.api_base}" if entry.api_base else ""
    counts = (f"{entry.completed} done, {entry.failed} failed of {len(entry.keys)}" if entry.state == "fetched"
              or entry.completed or entry.failed else f"{len(entry.keys)} requests")
    return (f"{entry.id}  {entry.state:<8} {status:<12} {entry.model}{where}: {counts}; submitted "
            f"{_ago(time.time() - entry.submitted)} by {entry.by or '?'}")


async def _ask(entry: BatchEntry) -> str:
    from .provider import BatchAPI, Endpoint, describe

    api = BatchAPI(Endpoint(entry.provider, entry.api_base))
    try:
        status = await api.retrieve(entry.id)
    except Exception as exc:
        return f"unknown ({describe(exc, api.endpoint, api.secrets)})"
    return f"{status.status} ({status.completed} done, {status.failed} failed of {status.total})"


def cmd_batch_status(args: argparse.Namespace) -> int:
    data = _registry(args).read()
    if not data.batches:
        print(f"no batch is written down in {_registry(args).where}")
        return 0
    for entry in sorted(data.batches.values(), key=lambda e: e.submitted):
        status = entry.status
        if entry.state == "pending" and not args.local:
            status = asyncio.run(_ask(entry))
        print(_line(entry, status))
    pending = sum(e.state == "pending" for e in data.batches.values())
    print(f"{len(data.batches)} batch(es), {pending} pending: a --bineval-batch run with this cache waits for the "
          "pending ones instead of submitting their requests again")
    return 0


def cmd_batch_cancel(args: argparse.Namespace) -> int:
    from .provider import BatchAPI, Endpoint, describe

    data = _registry(args).read()
    pending = {i: e for i, e in data.batches.items() if e.state == "pending"}
    if not args.ids and not args.all:
        raise UsageError("name the batches to cancel (their ids: `bineval batch status`), or --all")
    unknown = [i for i in args.ids if i not in pending]
    if unknown:
        raise UsageError(f"no pending batch {', '.join(unknown)} in {_registry(args).where} (`bineval batch status` "
                         "lists them)")
    chosen = [pending[i] for i in args.ids] if args.ids else list(pending.values())
    failed = 0
    for entry in chosen:
        api = BatchAPI(Endpoint(entry.provider, entry.api_base))
        try:
            status = asyncio.run(api.cancel(entry.id))
        except Exception as exc:
            print(f"bineval batch cancel: {entry.id}: {describe(exc, api.endpoint, api.secrets)}", file=sys.stderr)
            failed += 1
            continue
        print(f"{entry.id}: {status} (the next --bineval-batch run takes what it finished and asks the rest directly)")
    if not chosen:
        print("no pending batch to cancel")
    return 1 if failed else 0


def add_batch_parser(sub: Any) -> None:
    """``bineval batch status|cancel`` (the record of the cache directory, or of Redis with --cache-url)."""
    p = sub.add_parser("batch", help="the batches of --bineval-batch written down beside a reply cache")
    batch_sub = p.add_subparsers(dest="batch_command", required=True)

    def where(q: argparse.ArgumentParser) -> None:
        q.add_argument("--cache-dir", default=".bineval_cache", metavar="DIR",
                       help="the cache directory whose batches to show (default: .bineval_cache)")
        q.add_argument("--cache-url", default=None, metavar="URL",
                       help="a Redis cache (redis://...): its batches instead of the directory's")
        q.add_argument("--cache-prefix", default="bineval:", metavar="PREFIX",
                       help="with --cache-url: the key prefix of the cache (default: bineval:)")

    q = batch_sub.add_parser("status", help="list the batches written down, pending ones with the provider's status",
                             description="List every batch written down beside the reply cache: pending ones (a "
                                         "run waits for them) with their status asked of the provider, fetched ones "
                                         "with what they answered.")
    where(q)
    q.add_argument("--local", action="store_true", help="do not ask the provider: what the record says")
    q.set_defaults(func=cmd_batch_status)
    q = batch_sub.add_parser("cancel", help="cancel pending batches at the provider",
                             description="Ask the provider to cancel pending batches. The next --bineval-batch run "
                                         "takes the replies they finished and asks the rest directly.")
    where(q)
    q.add_argument("ids", nargs="*", metavar="ID", help="the batches to cancel")
    q.add_argument("--all", action="store_true", help="every pending batch")
    q.set_defaults(func=cmd_batch_cancel)
