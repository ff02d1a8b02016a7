"""Atomic text writes (:mod:`pytest_bineval.files`), shared by every file bineval writes: the mode a new file
gets comes from the umask (an artifact to share, not a 0600 temp file), an existing file keeps its mode, and a
write that fails leaves the old file as it was, with no temporary file behind."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_bineval import files
from pytest_bineval.errors import PinError
from pytest_bineval.files import write_text_atomic
from pytest_bineval.models import Checklist, Question, Usage
from pytest_bineval.optimize.lessons import save_history
from pytest_bineval.outputs.html import write_html
from pytest_bineval.pins import PinFile, pin
from pytest_bineval.report.document import ReportDocument, Totals

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    old = os.umask(0o022)

    def set_umask(mask: int) -> None:
        os.umask(mask)

    yield set_umask
    os.umask(old)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path: Path, umask: Callable[[int], None], mask: int,
                                                  expected: int) -> None:
    umask(mask)
    path = write_text_atomic(tmp_path / "sub" / "dir" / "out.txt", "héllo\r\nworld\n")
    assert mode(path) == expected
    assert path.read_bytes() == "héllo\r\nworld\n".encode()  # UTF-8, newlines exactly as given
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]  # no temporary file left behind


def test_an_existing_file_keeps_its_own_mode(tmp_path: Path, umask: Callable[[int], None]) -> None:
    umask(0o022)
    path = tmp_path / "prompt.md"
    path.write_text("old")
    path.chmod(0o600)
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and mode(path) == 0o600
    path.chmod(0o664)
    write_text_atomic(path, "newer")
    assert path.read_text() == "newer" and mode(path) == 0o664


def test_a_failed_write_leaves_the_old_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(UnicodeEncodeError):  # fails while writing: a lone surrogate has no UTF-8
        write_text_atomic(path, "half a report \ud800 and the rest")
    assert path.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)  # fails at the rename: the whole text was written
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(path, "a whole new report")
    assert path.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_failed_write_of_a_new_file_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(tmp_path / "page.html", "\udfff")
    assert list(tmp_path.iterdir()) == []


CHECKLIST = Checklist(task="Summarize.", dimensions={"fluency": "Reads well."}, model="fake/judge",
                      questions=[Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])


def _report(path: Path) -> None:
    ReportDocument(evaluations=[], totals=Totals.of([], Usage())).write(path)


def _page(path: Path) -> None:
    write_html(path, ReportDocument(evaluations=[], totals=Totals.of([], Usage())))


def _pins(path: Path) -> None:
    assert pin(path, CHECKLIST, "test_x.py::test_a")
    assert PinFile.read(path).entries


def _history(path: Path) -> None:
    save_history(path, {"prompt": "p.md", "iterations": []})


@pytest.mark.parametrize("write", [_report, _page, _pins, _history], ids=["report", "html", "pins", "history"])
def test_every_writer_writes_through_it(tmp_path: Path, umask: Callable[[int], None],
                                        monkeypatch: pytest.MonkeyPatch, write: Callable[[Path], None]) -> None:
    umask(0o027)
    path = tmp_path / "__bineval__" / "out"
    write(path)
    assert mode(path) == 0o640 and [p.name for p in path.parent.iterdir()] == ["out"]
    before = path.read_bytes()
    calls: list[object] = []

    def refuse(src: object, dst: object) -> None:
        calls.append(dst)
        raise OSError(5, "I/O error")

    monkeypatch.setattr(files.os, "replace", refuse)
    path.chmod(0o644)  # so that the pins writer, which only writes a change, has one to write
    if write is _pins:
        path.write_bytes(before.replace(b"Is it fluent?", b"Was it fluent?"))
        before = path.read_bytes()
    # the pins writer says which pin file it could not write (a PinError), from the OSError
    with pytest.raises(PinError if write is _pins else OSError, match="I/O error"):
        write(path)
    assert calls == [path] and path.read_bytes() == before and mode(path) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["out"]
