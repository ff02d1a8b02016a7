"""The documentation site (mkdocs.yml, docs/): generated parts match the code, every page is in the nav.
``mkdocs build --strict`` itself runs in ``tox -e docs`` and in .ci/run."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_bineval.options import SPECS, dest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def load_hook(name: str = "options_reference") -> ModuleType:
    """A hook of docs/hooks/, loaded as mkdocs loads it (its directory on the path while it runs)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    return module


def test_the_committed_configuration_reference_matches_the_option_definitions() -> None:
    hook = load_hook()
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert committed == hook.fill(committed), (
        "docs/configuration.md is out of date with the options: run `python docs/hooks/options_reference.py`")


def test_the_reference_lists_every_option_with_its_ini_key_and_default() -> None:
    table = load_hook().options_table()
    rows = [line for line in table.splitlines() if line.startswith("| `--bineval-")]
    assert len(rows) == len(SPECS)
    for spec, row in zip(SPECS, rows, strict=True):
        assert row.startswith(f"| `--bineval-{spec.name}") and f"`{dest(spec)}`" in row
        default = "off" if spec.parse is None else str(spec.default)
        assert f"| {default.replace('_', chr(92) + '_')} |" in row, (spec.name, row)
    assert "`bineval_html`" in table and "`--bineval-model MODEL`<br>`bineval_model` | `--model MODEL` |" in table


def test_the_hook_fills_only_between_its_markers() -> None:
    hook = load_hook()
    page = "intro\n<!-- options:start -->\nOLD TABLE\n<!-- options:end -->\noutro\n"
    filled = hook.fill(page)
    assert filled.startswith("intro\n<!-- options:start -->\n| pytest flag") and filled.endswith(
        "<!-- options:end -->\noutro\n") and "OLD TABLE" not in filled
    with pytest.raises(ValueError, match="lacks the markers"):
        hook.fill("no markers here")


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    block = text[text.index("\nnav:\n") + 6:]
    block = block[: re.search(r"^\S", block, re.MULTILINE).start()]  # type: ignore[union-attr]
    listed = re.findall(r":\s*(\S+\.md)\s*$", block, re.MULTILINE)
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
    missing = sorted(set(pages) - set(listed))
    assert not missing, f"pages missing from the nav of mkdocs.yml (add them there): {missing}"
    dangling = sorted(set(listed) - set(pages))
    assert not dangling, f"the nav of mkdocs.yml lists pages that do not exist: {dangling}"


def test_getting_started_carries_the_readme_commands_verbatim() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    commands = re.findall(r"^python3 -m venv .*$", readme, re.MULTILINE)
    assert len(commands) == 2
    for command in commands:
        assert command in page


def test_the_readme_configuration_table_has_every_option() -> None:
    """README.md's own table (what a newcomer reads first) names every --bineval-* option and its ini key."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `--bineval-")]
    missing = [spec.name for spec in SPECS
               if not any(r.startswith(f"| `--bineval-{spec.name}") and f"`{dest(spec)}`" in r for r in rows)]
    assert not missing, f"README.md's configuration table lacks --bineval-{', --bineval-'.join(missing)}"
    assert len(rows) == len(SPECS), "README.md's configuration table has a row for an option that does not exist"


def test_the_committed_labels_tables_are_the_computed_ones() -> None:
    """docs/know-your-judge.md: the interval of an agreement on n labels and the simulated error rates of
    --min-kappa (docs/hooks/labels_table.py)."""
    hook = load_hook("labels_table")
    committed = (DOCS / "know-your-judge.md").read_text(encoding="utf-8")
    assert committed == hook.fill(committed), (
        "docs/know-your-judge.md is out of date with the code: run `python docs/hooks/labels_table.py`")
    assert hook.true_kappa(0.7, hook.accuracy_for(0.8)) == pytest.approx(0.8)
    assert hook.true_kappa(0.7, hook.accuracy_for(0.4)) == pytest.approx(0.4)
    assert hook.true_kappa(0.5, 0.9) == pytest.approx(0.8)  # symmetric errors at a 50% base rate: 2 * 0.9 - 1
    with pytest.raises(ValueError, match=r"know-your-judge\.md lacks the markers"):
        hook.fill("no markers")
