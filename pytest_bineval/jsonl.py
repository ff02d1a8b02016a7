"""Reading records from JSONL files (or ``.json`` lists), with dotted keys for nested fields and errors that
name the file, the line and the key. Used by ``bineval align`` and by ``bineval bench`` custom data."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import DataFileError

__all__ = ["field_text", "get_field", "iter_jsonl", "iter_records", "read_json_list"]


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line_number, record)`` for each non-blank line (1-based line numbers)."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(f"{path}, line {number}: invalid JSON ({exc.msg})") from exc


def read_json_list(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, list):
        raise DataFileError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


_MISSING = object()


def _lookup(record: Any, key: str) -> Any:
    """``record[key]``, or the nested value for a dotted key (``"scores.consistency"``, ``"a.0.b"``)."""
    if isinstance(record, Mapping) and key in record:
        return record[key]
    current = record
    for part in key.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif (
            isinstance(current, list)
            and part.lstrip("-").isdigit()
            and -len(current) <= int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def get_field(record: Mapping[str, Any], key: str, where: str) -> Any:
    value = _lookup(record, key)
    if value is _MISSING:
        raise DataFileError(f"{where}: missing key {key!r}")
    return value


def _text(value: Any, where: str, key: str) -> str:
    if value is None:
        raise DataFileError(f"{where}: key {key!r} is null")
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def iter_records(path: Path, limit: int | None = None) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """``(number, where, record)`` for the first ``limit`` records of a JSONL file (numbered by line) or
    of a ``.json`` list (by position); ``where`` names the file and number for error messages.

    Raises:
        DataFileError: If the JSON is invalid or a record is not a JSON object (a ValueError too).
    """
    records: Iterator[tuple[int, Any]]
    if path.suffix.lower() == ".json":
        records, unit = iter(list(enumerate(read_json_list(path), start=1))), "item"
    else:
        records, unit = iter_jsonl(path), "line"
    for count, (number, record) in enumerate(records):
        if limit is not None and count >= limit:
            return
        where = f"{path}, {unit} {number}"
        if not isinstance(record, Mapping):
            raise DataFileError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield number, where, record


def field_text(record: Mapping[str, Any], key: str, where: str) -> str:
    """The text under ``key`` (dotted keys reach nested fields; non-strings are JSON-encoded)."""
    return _text(get_field(record, key, where), where, key)
