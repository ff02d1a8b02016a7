"""Model text is inert (no CI command), and test ids in it stay copyable (issue 20, item 14a)."""

from __future__ import annotations

import pytest

from pytest_bineval.untrusted import WORD_JOINER, inert, one_line


@pytest.mark.parametrize("text", [
    "tests/test_x.py::test_a[p1] failed",
    "the checklist of tests/test_x.py::TestC::test_b is not pinned",
    "a::b::c and c++::std",
])
def test_a_double_colon_inside_a_line_is_kept_so_a_copied_test_id_runs(text: str) -> None:
    """Bug: every '::' got an invisible U+2060, so a node id copied from a NOT SCORED line did not run. GitHub
    reads '::cmd::' only at the start of a line: inside one it is no command."""
    assert inert(text) == text
    assert one_line(f"{text}\nsecond line") == f"{text} \u23ce second line"


@pytest.mark.parametrize("text", [
    "::error::x", "  ::warning::y", "ok\n::add-mask::x", "ok\r\n\t::stop-commands::t", "ok\r::error::x",
    "ok\u2028::error::x", "ok\u0085::error::x", "ok\n\u00a0::error::x", "ok\n\n  ::error::x",
])
def test_a_double_colon_at_the_start_of_a_line_is_still_broken(text: str) -> None:
    """Any line break a runner or str.splitlines knows, after any blanks (the runner trims them)."""
    shown = inert(text)
    assert f":{WORD_JOINER}:" in shown
    assert all(not line.strip().startswith("::") for line in shown.splitlines())


@pytest.mark.parametrize("text", ["v ##[error]x", "##vso[task.setvariable variable=x]1", "id::t ##[group]"])
def test_the_anywhere_markers_are_still_broken(text: str) -> None:
    shown = inert(text)
    assert "##[" not in shown and "##vso[" not in shown
