"""A pytester project whose judge is a :class:`~pytest_bineval.testing.ScriptedModel`: one call writes the
``conftest.py`` that registers the fake and the ini that points the plugin at it, so a test of your suite (or of
a plugin built on pytest-bineval) only adds its test files and runs them::

    from pytest_bineval.testing import scripted_project

    def test_a_wrong_summary_fails(pytester):
        scripted_project(pytester, answers={"Does the response meet consistency check 1?": "no"})
        pytester.makepyfile(test_summary=TESTS)
        pytester.runpytest().assert_outcomes(passed=1, failed=1)

The conftest is source code (so that ``runpytest_subprocess`` and ``-n 2`` workers register the same fake):
``answers`` are written with ``repr``; ``rule`` and ``rules`` are Python source. Importing this module imports
neither pytest-bineval's engine nor litellm.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = ["scripted_conftest", "scripted_project"]


def scripted_conftest(*, answers: Mapping[str, Any] | None = None, rule: str | None = None,
                      rules: Mapping[str, str] | None = None, provider: str = "scripted", prefill: bool = False,
                      questions_per_dimension: int = 2, prelude: str = "") -> str:
    """The source of a ``conftest.py`` that registers ``FAKE = ScriptedModel(...)`` under ``provider``.

    - ``answers``: question text -> ``"yes"``/``"no"``/raw reply (a literal; unlisted questions get ``"yes"``);
    - ``rule``: instead, the source of a module-level ``def answer(req): ...`` (``req``: a
      :class:`~pytest_bineval.testing.Request`) that returns the reply, an exception to raise or seconds to sleep;
    - ``rules``: request kind (``"questions"``, ``"lesson"``, ``"qworld_criteria"`` ...) -> the source of a callable
      ``Request -> reply`` (a lambda or the name of a function defined in ``prelude`` or ``rule``);
    - ``prelude``: source put first (imports, constants, helpers the rules use);
    - ``prefill``: the fake continues a prefilled answer, as the embedded model does.
    """
    if answers is not None and rule is not None:
        raise ValueError("give answers or rule, not both")
    parts = ["from pytest_bineval.testing import ScriptedModel"]
    if prelude:
        parts.append(textwrap.dedent(prelude).strip("\n"))
    if rule is not None:
        parts.append(textwrap.dedent(rule).strip("\n"))
    answer = "answer" if rule is not None else repr(dict(answers or {}))
    rules_src = "{" + ", ".join(f"{kind!r}: {src}" for kind, src in (rules or {}).items()) + "}"
    parts.append(f"FAKE = ScriptedModel(provider={provider!r}, answers={answer}, rules={rules_src}, "
                 f"prefill={prefill!r}, questions_per_dimension={questions_per_dimension!r}).register()")
    return "\n\n".join(parts) + "\n"


def scripted_project(pytester: Any, *, answers: Mapping[str, Any] | None = None, rule: str | None = None,
                     rules: Mapping[str, str] | None = None, provider: str = "scripted", prefill: bool = False,
                     questions_per_dimension: int = 2, prelude: str = "", ini: str = "",
                     model_in_ini: bool = True) -> str:
    """Write the scripted judge's ``conftest.py`` (:func:`scripted_conftest`) and a ``[pytest]`` ini into
    ``pytester``'s directory; returns the fake's model string (``<provider>/judge``).

    The ini sets ``bineval_model`` to the fake (unless ``model_in_ini`` is False: then pass ``--bineval-model``),
    ``asyncio_default_fixture_loop_scope = function`` (quiet pytest-asyncio) and the lines of ``ini``.
    """
    pytester.makeconftest(scripted_conftest(answers=answers, rule=rule, rules=rules, provider=provider,
                                            prefill=prefill, questions_per_dimension=questions_per_dimension,
                                            prelude=prelude))
    model = f"{provider}/judge"
    lines = ["[pytest]", "asyncio_default_fixture_loop_scope = function"]
    if model_in_ini:
        lines.append(f"bineval_model = {model}")
    lines.extend(line for line in textwrap.dedent(ini).strip("\n").splitlines())
    pytester.makeini("\n".join(lines) + "\n")
    return model
