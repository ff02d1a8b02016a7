"""Every exception the package defines is a BinevalError, and bad data files and settings raise one naming the
place."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_bineval.errors import BinevalError, PinError


def test_every_exception_the_package_defines_is_a_bineval_error() -> None:
    import inspect

    import pytest_bineval.errors as errors

    defined = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    warnings = [c for c in defined if issubclass(c, Warning)]
    assert warnings and all(issubclass(c, errors.BinevalWarning) for c in warnings)
    classes = [c for c in defined if c not in warnings]
    assert classes and all(issubclass(c, BinevalError) for c in classes)
    assert issubclass(PinError, BinevalError)


def test_data_files_and_settings_raise_bineval_errors_naming_the_place(tmp_path: Path) -> None:
    """Review finding: bad data files and a bad cache mode raised a bare ValueError (a BinevalError now)."""
    from pytest_bineval.errors import DataFileError, UsageError
    from pytest_bineval.jsonl import field_text, iter_records
    from pytest_bineval.llm.cache import ResponseCache

    bad = tmp_path / "outputs.jsonl"
    bad.write_text('{"summary": "ok"}\n{"summary": \n', encoding="utf-8")
    with pytest.raises(DataFileError, match=r"outputs.jsonl, line 2: invalid JSON"):
        list(iter_records(bad))
    with pytest.raises(DataFileError, match=r"here: missing key 'article'"):
        field_text({"summary": "ok"}, "article", "here")
    with pytest.raises(UsageError, match="cache mode must be one of"):
        ResponseCache(tmp_path / "cache", mode="sometimes")  # type: ignore[arg-type]
