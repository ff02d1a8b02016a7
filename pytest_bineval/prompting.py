"""The prompts are files in the package (``prompts/*.md``), versioned by ``prompts/VERSION``.

A prompt file holds a ``## system`` and a ``## user`` section; ``{{name}}`` placeholders are filled
by plain substitution (never ``str.format``: outputs under test are full of braces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import UsageError

_SECTION = re.compile(r"^## (system|user|assistant)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

@dataclass(frozen=True)
class Prompt:
    """A chat prompt: a system section, optional example turns, and the final user turn."""

    name: str
    turns: tuple[tuple[str, str], ...]

    def messages(self, **values: str) -> list[dict[str, str]]:
        return [{"role": role, "content": _fill(text, values, self.name)} for role, text in self.turns]


def _fill(template: str, values: dict[str, str], name: str) -> str:
    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise UsageError(f"prompt {name!r} needs a value for {{{{{key}}}}}")
        return values[key]

    return _PLACEHOLDER.sub(sub, template)


@cache
def prompt_version() -> str:
    """The version of the packaged prompts; part of every cache key."""
    return resources.files(__package__).joinpath("prompts/VERSION").read_text("utf-8").strip()


def strip_comments(text: str) -> str:
    """A prompt file's text without its ``<!-- -->`` comments (what the model sees)."""
    return re.sub(r"<!--.*?-->\n?", "", text, flags=re.DOTALL)


def parse_prompt(name: str, text: str) -> Prompt:
    """A prompt from its file text: ``## system``, optional example turns, ``## user`` last."""
    text = strip_comments(text)
    parts = _SECTION.split(text)
    turns = tuple((parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2))
    roles = [role for role, _ in turns]
    if not roles or roles[0] != "system" or roles[-1] != "user":
        raise UsageError(f"prompt file {name} must start with '## system' and end with '## user'")
    return Prompt(name, turns)


@cache
def load_prompt(name: str, folder: str = "prompts") -> Prompt:
    """The prompt file ``<folder>/<name>.md`` of the package (``bench/prompts`` for the benchmark's)."""
    text = resources.files(__package__).joinpath(f"{folder}/{name}.md").read_text("utf-8")
    return parse_prompt(f"{name}.md", text)


JUDGE_PLACEHOLDERS = frozenset({"task", "source", "output", "question", "no_example"})


def packaged_judge_prompt() -> str:
    """The text of the packaged evaluator prompt (the starting point of a prompt of your own)."""
    return resources.files(__package__).joinpath("prompts/judge.md").read_text("utf-8")


def check_judge_prompt(prompt: Prompt) -> Prompt:
    """``prompt`` if it can serve as an evaluator prompt: ``{{output}}`` and ``{{question}}`` present, no
    placeholder the judge cannot fill; else UsageError."""
    used = {m for _, body in prompt.turns for m in _PLACEHOLDER.findall(body)}
    missing = {"output", "question"} - used
    unknown = used - JUDGE_PLACEHOLDERS
    if missing or unknown:
        def names(keys: set[str] | frozenset[str]) -> str:
            return ", ".join("{{" + k + "}}" for k in sorted(keys))

        problems = ([f"needs {names(missing)}"] if missing else []) + ([f"unknown {names(unknown)}"] if unknown else [])
        raise UsageError(f"judge prompt {prompt.name}: {'; '.join(problems)}; it may use {names(JUDGE_PLACEHOLDERS)}")
    return prompt


def load_judge_prompt(path: str) -> Prompt:
    """An evaluator prompt file of your own (``--bineval-judge-prompt``), in the packaged ``judge.md``'s format."""
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the judge prompt {path}: {exc}") from exc
    return check_judge_prompt(parse_prompt(path, text))


_CLOSERS = re.compile(r"</?\s*(input|response|task|prompt|lesson|explanation)\s*>", re.IGNORECASE)


def delimit(text: str) -> str:
    """Neutralise marker tags inside untrusted text so it cannot close its own delimiters."""
    return _CLOSERS.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), text)
