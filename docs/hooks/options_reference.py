"""The configuration reference, generated from the option definitions so that it cannot drift.

``docs/configuration.md`` holds the tables between ``<!-- options:start -->`` and ``<!-- options:end -->``
markers. As an mkdocs hook this module writes them into the page at build time; ``tests/test_docs.py``
fails when the committed file differs from what this module generates (so the page reads right on GitHub
too), and ``python docs/hooks/options_reference.py`` rewrites it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent.parent / "configuration.md"
START, END = "<!-- options:start -->", "<!-- options:end -->"


def _cell(text: object) -> str:
    """Table-cell text: ``|`` and markdown emphasis escaped outside `code spans`."""
    parts = str(text).replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside backticks
        parts[i] = re.sub(r"([\\*_|<])", r"\\\1", parts[i])
    return "`".join(parts)


def options_table() -> str:
    """Markdown: every ``--bineval-*`` option and its ini key, the ``bineval`` command's option, default, meaning."""
    from pytest_bineval.options import SPECS, dest
    from pytest_bineval.settings import SETTING_SPECS

    engine = {s.attr for s in SETTING_SPECS}
    lines = [
        "| pytest flag and ini key | `bineval` command | default | meaning |",
        "|---|---|---|---|",
    ]
    for spec in SPECS:
        arg = f" {spec.metavar}" if spec.parse is not None and spec.metavar else ""
        command = f"`--{spec.name}{arg}`" if spec.attr in engine else ""
        default = "off" if spec.parse is None else spec.default
        lines.append(f"| `--bineval-{spec.name}{arg}`<br>`{dest(spec)}` | {command} | {_cell(default)} "
                     f"| {_cell(spec.help)} |")
    return "\n".join(lines) + "\n"


def fill_between(markdown: str, start: str, end: str, text: str, page: str) -> str:
    """``markdown`` with ``text`` between the markers ``start`` and ``end`` (a ValueError naming ``page`` when a
    marker is missing); the hooks of generated parts of pages share it."""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(markdown):
        raise ValueError(f"{page} lacks the markers {start} ... {end}")
    return pattern.sub(lambda _: f"{start}\n{text}{end}", markdown)


def fill(markdown: str) -> str:
    """``markdown`` with the generated tables between the markers (a ValueError when a marker is missing)."""
    return fill_between(markdown, START, END, options_table(), PAGE.name)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """mkdocs hook: the configuration page always shows the options of the code being documented."""
    return fill(markdown) if page.file.src_uri == PAGE.name else markdown


if __name__ == "__main__":
    PAGE.write_text(fill(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE}", file=sys.stderr)
