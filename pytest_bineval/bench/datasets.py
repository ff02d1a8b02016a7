"""Loaders for the meta-evaluation data (SummEval, Topical-Chat, QAGS, IFBench, any JSONL).

The data is read in place from a data directory and never copied into the repository. The directory is
resolved by :func:`resolve_data_dir`: an explicit argument, else ``$BINEVAL_DATA_DIR``, else
``../shared/data`` relative to the working directory, else ``<repo root>/../shared/data``.

Every loader returns a list of :class:`Item` in file order. ``limit`` always means "the first N" (of
articles for SummEval, of constraints for IFBench, of items otherwise): deterministic, no sampling.
Which loader reads which benchmark dataset is said once, by the dataset's spec in
:data:`~pytest_bineval.bench.specs.DATASETS`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import DataNotFoundError
from ..jsonl import field_text, get_field, iter_jsonl, iter_records, read_json_list

__all__ = [
    "DATA_DIR_ENV",
    "SUMMEVAL_DIMENSIONS",
    "TOPICAL_CHAT_DIMENSIONS",
    "DataNotFoundError",
    "Item",
    "PathLike",
    "load_custom",
    "load_ifbench",
    "load_qags",
    "load_summeval",
    "load_topical_chat",
    "resolve_data_dir",
    "select_items",
]

#: Environment variable naming the data directory.
DATA_DIR_ENV = "BINEVAL_DATA_DIR"

#: Human dimensions of SummEval (mean of 3 expert ratings, 1-5).
SUMMEVAL_DIMENSIONS: tuple[str, ...] = ("coherence", "consistency", "fluency", "relevance")

#: Human dimensions of Topical-Chat (understandability and groundedness 0-1, naturalness, coherence and
#: engagingness 1-3, overall 1-5; means over annotators).
TOPICAL_CHAT_DIMENSIONS: tuple[str, ...] = (
    "understandability",
    "naturalness",
    "coherence",
    "engagingness",
    "groundedness",
    "overall",
)

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Item:
    """One judged output with its human judgments.

    Attributes:
        id: Unique id within the dataset (e.g. ``"A0:S3"`` for SummEval).
        group: Correlation group (SummEval article, Topical-Chat dialogue context, IFBench prompt key).
        source: What the output was produced from (article, fact + dialogue, prompt).
        output: The text being judged (summary, response).
        human: Human scores by dimension (IFBench: ``{"follows": 1.0 | 0.0}`` from the verifier).
        extra: Dataset-specific fields (system id, IFBench constraint id and kwargs, ...).
    """

    id: str
    group: str
    source: str
    output: str
    human: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# data directory


def _default_candidates() -> list[tuple[Path, str]]:
    """The fallback locations: ``../shared/data`` from the working directory, then from the repo root."""
    repo_root = Path(__file__).resolve().parents[2]
    from_cwd = (Path.cwd().parent / "shared" / "data").resolve()
    from_repo = (repo_root.parent / "shared" / "data").resolve()
    if from_cwd == from_repo:
        return [(from_cwd, "../shared/data from the working directory and the repository root")]
    return [
        (from_cwd, "../shared/data from the working directory"),
        (from_repo, "../shared/data from the repository root"),
    ]


def _not_found(
    looked: Sequence[tuple[Path, str]], what: str = "benchmark data directory"
) -> DataNotFoundError:
    places = "; ".join(f"{path} ({how})" for path, how in looked)
    return DataNotFoundError(
        f"{what} not found; looked in: {places}. Point at the data with --data-dir PATH "
        f"or the {DATA_DIR_ENV} environment variable."
    )


def resolve_data_dir(data_dir: PathLike | None = None) -> Path:
    """Find the benchmark data directory.

    Order: ``data_dir`` if given, else ``$BINEVAL_DATA_DIR`` if set, else ``../shared/data`` relative to
    the working directory, else ``../shared/data`` next to the repository root. An explicit argument or
    environment variable that does not name a directory is an error (no silent fallback).

    Raises:
        DataNotFoundError: Saying where it looked and how to point at the data.
    """
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if path.is_dir():
            return path
        raise _not_found([(path, "given explicitly")])
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            return path
        raise _not_found([(path, f"${DATA_DIR_ENV}")])
    candidates = _default_candidates()
    for path, _ in candidates:
        if path.is_dir():
            return path
    raise _not_found(candidates)


def _data_file(data_dir: PathLike | None, relative: str) -> Path:
    base = resolve_data_dir(data_dir)
    path = base / relative
    if not path.is_file():
        raise _not_found([(path, f"{relative} under the data directory")], what=f"data file {relative}")
    return path


# --------------------------------------------------------------------------------------------------
# reading helpers


def _check_limit(limit: int | None, name: str = "limit") -> None:
    if limit is not None and limit < 0:
        raise ValueError(f"{name} must be >= 0, got {limit}")


def _score(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: score {key!r} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{where}: score {key!r} is not finite: {value!r}")
    return number


def _field(record: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in record:
        raise ValueError(f"{where}: missing key {key!r}")
    return record[key]


def select_items(items: Sequence[Item], *, limit: int | None = None, docs: int | None = None) -> list[Item]:
    """The first ``docs`` groups with all their items (in order), then the first ``limit`` items."""
    _check_limit(limit)
    _check_limit(docs, "docs")
    out = list(items)
    if docs is not None:
        keep: set[str] = set()
        grouped: list[Item] = []
        for item in out:
            if item.group not in keep:
                if len(keep) >= docs:
                    continue
                keep.add(item.group)
            grouped.append(item)
        out = grouped
    return out if limit is None else out[:limit]


# --------------------------------------------------------------------------------------------------
# benchmark datasets


def load_summeval(data_dir: PathLike | None = None, limit_docs: int | None = None) -> list[Item]:
    """SummEval (``summeval/summeval.jsonl``): 100 CNN/DM articles x 16 summaries.

    ``group`` is the ``article_id``; ``human`` holds coherence, consistency, fluency and relevance
    (mean of 3 experts, 1-5). ``limit_docs`` keeps the first N articles in file order with all their
    summaries. ``summary_id`` (only the position within the article) is kept in ``extra``.
    """
    _check_limit(limit_docs, "limit_docs")
    path = _data_file(data_dir, "summeval/summeval.jsonl")
    items: list[Item] = []
    seen: set[str] = set()
    for number, record in iter_jsonl(path):
        where = f"{path}, line {number}"
        article_id = str(_field(record, "article_id", where))
        if article_id not in seen:
            if limit_docs is not None and len(seen) >= limit_docs:
                continue  # articles are contiguous in the file, but do not rely on it
            seen.add(article_id)
        summary_id = str(_field(record, "summary_id", where))
        items.append(
            Item(
                id=f"{article_id}:{summary_id}",
                group=article_id,
                source=str(_field(record, "article", where)),
                output=str(_field(record, "summary", where)),
                human={k: _score(_field(record, k, where), where, k) for k in SUMMEVAL_DIMENSIONS},
                extra={"summary_id": summary_id},
            )
        )
    return items


def _dialogue_text(history: str) -> str:
    """Dialogue history with one turn per line (the file separates turns by `` \\n `` and ends in blanks)."""
    return "\n".join(turn.strip() for turn in history.split("\n") if turn.strip())


def load_topical_chat(data_dir: PathLike | None = None, limit: int | None = None) -> list[Item]:
    """Topical-Chat (``topical_chat/topical_chat.json``): 60 dialogue contexts x 6 responses.

    ``source`` composes the knowledge fact and the dialogue history as
    ``"Fact: ...\\n\\nDialogue:\\n..."`` (one turn per line); both also stay in ``extra`` (``fact``,
    ``dialogue``) with ``system_id``. ``group`` numbers the dialogue contexts in file order
    (``"C0"``, ...); ``human`` is the ``scores`` dict as present. ``limit`` keeps the first N items.
    """
    _check_limit(limit)
    path = _data_file(data_dir, "topical_chat/topical_chat.json")
    records = read_json_list(path)
    contexts: dict[tuple[str, str], str] = {}
    items: list[Item] = []
    for index, record in enumerate(records):
        if limit is not None and len(items) >= limit:
            break
        where = f"{path}: item {index + 1}"
        dialogue = _dialogue_text(str(_field(record, "source", where)))
        fact = str(_field(record, "context", where)).strip()
        group = contexts.setdefault((dialogue, fact), f"C{len(contexts)}")
        scores = _field(record, "scores", where)
        if not isinstance(scores, Mapping):
            raise ValueError(f"{where}: 'scores' is not an object")
        items.append(
            Item(
                id=str(index),
                group=group,
                source=f"Fact: {fact}\n\nDialogue:\n{dialogue}",
                output=str(_field(record, "system_output", where)).strip(),
                human={str(k): _score(v, where, str(k)) for k, v in scores.items()},
                extra={"fact": fact, "dialogue": dialogue, "system_id": str(record.get("system_id", ""))},
            )
        )
    return items


def load_qags(
    data_dir: PathLike | None = None, which: Literal["cnndm", "xsum"] = "cnndm", limit: int | None = None
) -> list[Item]:
    """QAGS (``qags/qags_{cnndm,xsum}.json``): summaries with ``human = {"consistency": ...}``.

    CNN/DM consistency is the share of summary sentences judged supported (in [0, 1]); XSum is 0 or 1.
    ``group`` is the ``doc_id`` (one summary per document); ``limit`` keeps the first N items.
    """
    if which not in ("cnndm", "xsum"):
        raise ValueError(f"which must be 'cnndm' or 'xsum', got {which!r}")
    _check_limit(limit)
    path = _data_file(data_dir, f"qags/qags_{which}.json")
    items: list[Item] = []
    for index, record in enumerate(read_json_list(path)):
        if limit is not None and len(items) >= limit:
            break
        where = f"{path}: item {index + 1}"
        scores = _field(record, "scores", where)
        if not isinstance(scores, Mapping):
            raise ValueError(f"{where}: 'scores' is not an object")
        doc_id = str(record.get("doc_id", index))
        items.append(
            Item(
                id=f"{which}:{doc_id}",
                group=doc_id,
                source=str(_field(record, "source", where)),
                output=str(_field(record, "system_output", where)),
                human={"consistency": _score(_field(scores, "consistency", where), where, "consistency")},
                extra={"doc_id": doc_id, "system_id": str(record.get("system_id", ""))},
            )
        )
    return items


def _join_ifbench(evals: Sequence[Mapping[str, Any]], tests: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """Index into ``tests`` for each eval row: by prompt, by stripped prompt, then by position.

    The positional fallback takes the only unused test row with the same constraint ids between the
    neighbouring matched rows (the eval file follows the test file's order); it recovers a row whose
    prompt was mangled upstream.
    """
    exact = {str(t["prompt"]): i for i, t in enumerate(tests)}
    stripped = {str(t["prompt"]).strip(): i for i, t in enumerate(tests)}
    matches: list[int | None] = []
    for row in evals:
        prompt = str(row["prompt"])
        index = exact.get(prompt, stripped.get(prompt.strip()))
        if index is not None and tests[index]["instruction_id_list"] != row["instruction_id_list"]:
            index = None
        matches.append(index)
    used = {m for m in matches if m is not None}
    for k, row in enumerate(evals):
        if matches[k] is not None:
            continue
        low = next((m for m in reversed(matches[:k]) if m is not None), -1)
        high = next((m for m in matches[k + 1 :] if m is not None), len(tests))
        candidates = [
            j
            for j in range(low + 1, high)
            if j not in used and tests[j]["instruction_id_list"] == row["instruction_id_list"]
        ]
        if len(candidates) == 1:
            matches[k] = candidates[0]
            used.add(candidates[0])
    return matches


def load_ifbench(
    data_dir: PathLike | None = None,
    limit: int | None = None,
    *,
    variant: Literal["strict", "loose"] = "strict",
) -> list[Item]:
    """IFBench: one item per (prompt, constraint) of ``ifbench/eval_results_{variant}.jsonl``.

    ``source`` is the prompt, ``output`` the model's response, ``human = {"follows": 1.0 | 0.0}`` the
    official verifier's verdict (a gold label, not a human score). ``extra`` holds ``instruction_id``,
    ``kwargs`` (from ``IFBench_test.jsonl``, joined by prompt; ``None`` values dropped; ``None`` if the
    row could not be joined), ``gold_pass``, the prompt ``key``, the constraint ``index`` within the
    prompt and ``n_constraints``. ``group`` is the prompt key. When the join succeeds the test file's
    prompt is used as ``source`` (``extra["prompt_mismatch"]`` is True when the eval file's prompt
    differs beyond surrounding whitespace). ``limit`` keeps the first N constraints.
    """
    _check_limit(limit)
    eval_path = _data_file(data_dir, f"ifbench/eval_results_{variant}.jsonl")
    test_path = _data_file(data_dir, "ifbench/IFBench_test.jsonl")
    evals: list[dict[str, Any]] = []
    for number, record in iter_jsonl(eval_path):
        where = f"{eval_path}, line {number}"
        ids = list(_field(record, "instruction_id_list", where))
        follows = list(_field(record, "follow_instruction_list", where))
        if len(ids) != len(follows):
            raise ValueError(f"{where}: instruction_id_list and follow_instruction_list differ in length")
        _field(record, "prompt", where)
        _field(record, "response", where)
        evals.append({**record, "_line": number})
    tests = [record for _, record in iter_jsonl(test_path)]
    matches = _join_ifbench(evals, tests)
    items: list[Item] = []
    for row, match in zip(evals, matches, strict=True):
        test = tests[match] if match is not None else None
        key = str(test["key"]) if test is not None else f"line{row['_line']}"
        prompt = str(test["prompt"]) if test is not None else str(row["prompt"])
        kwargs_list = list(test.get("kwargs") or []) if test is not None else []
        ids = [str(i) for i in row["instruction_id_list"]]
        for index, (instruction_id, follows) in enumerate(
            zip(ids, row["follow_instruction_list"], strict=True)
        ):
            if limit is not None and len(items) >= limit:
                return items
            kwargs: dict[str, Any] | None = None
            if test is not None:
                raw = kwargs_list[index] if index < len(kwargs_list) else {}
                kwargs = {k: v for k, v in (raw or {}).items() if v is not None}
            extra: dict[str, Any] = {
                "instruction_id": instruction_id,
                "kwargs": kwargs,
                "gold_pass": bool(follows),
                "key": key,
                "index": index,
                "n_constraints": len(ids),
            }
            if test is not None and str(row["prompt"]).strip() != prompt.strip():
                extra["prompt_mismatch"] = True
            items.append(
                Item(
                    id=f"{key}:{index}",
                    group=key,
                    source=prompt,
                    output=str(row["response"]),
                    human={"follows": 1.0 if follows else 0.0},
                    extra=extra,
                )
            )
    return items


# --------------------------------------------------------------------------------------------------
# custom data

def load_custom(
    path: PathLike,
    source_key: str,
    output_key: str,
    score_keys: Sequence[str],
    group_key: str | None = None,
    limit: int | None = None,
) -> list[Item]:
    """Load any JSONL file (or a ``.json`` file holding a list of records).

    Keys may be dotted to reach nested fields (``"scores.consistency"``; digits index lists); a key
    that literally contains a dot is found first. ``human`` is keyed by the score keys exactly as given.
    ``id`` is the 1-based line number (for a ``.json`` list, the 1-based position) and ``group`` the
    value under ``group_key`` (``"all"`` without one). Non-string source/output values are
    JSON-encoded. ``limit`` keeps the first N records.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: Naming the line (or position) and the key, when a key is missing, null or a score
            is not a finite number, or the JSON is invalid.
    """
    _check_limit(limit)
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"custom data file not found: {file}")
    if not score_keys:
        raise ValueError("score_keys must name at least one human score")
    unit = "item" if file.suffix.lower() == ".json" else "line"
    items: list[Item] = []
    for number, where, record in iter_records(file, limit):
        items.append(
            Item(
                id=str(number),
                group="all" if group_key is None else field_text(record, group_key, where),
                source=field_text(record, source_key, where),
                output=field_text(record, output_key, where),
                human={key: _score(get_field(record, key, where), where, key) for key in score_keys},
                extra={unit: number},
            )
        )
    return items
