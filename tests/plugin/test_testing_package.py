"""pytest_bineval.testing as users meet it (docs/testing.md): the scripted judge is an in-process transport that
never imports litellm, and scripted_project writes a project that runs in-process, in a subprocess and under xdist."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pytest_bineval.testing.project import scripted_conftest, scripted_project

pytest_plugins = ["pytester"]

TESTS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_summary():
    assert_passes("A summary.", dimension="consistency", source="An article.")
'''


def test_a_scripted_judge_never_imports_litellm() -> None:
    """Generation, judging, a provider error and its retry, embeddings: all through the transport seam."""
    code = textwrap.dedent('''
        import asyncio, sys
        from pytest_bineval import evaluate, generate_checklist
        from pytest_bineval.llm.providers import aembedding
        from pytest_bineval.testing import ScriptedModel

        calls = []
        def answer(req):
            calls.append(req.question)
            return RuntimeError("503 try again") if len(calls) == 1 else "no"

        fake = ScriptedModel(answers=answer).register()
        checklist = generate_checklist("Summarize.", dimensions="consistency", model=fake.model, cache="off")
        result = evaluate("A summary.", checklist, "An article.", model=fake.model, cache="off", retries=1)
        vectors = asyncio.run(aembedding("fake/embed", ["a b", "a b"]))
        assert vectors[0] == vectors[1] and fake.calls_of("embedding") == 1
        assert [v.answer for v in result.verdicts] == ["no", "no"], result.verdicts
        assert result.usage.failed_requests == 1 and result.usage.unpriced_requests == result.usage.llm_calls
        assert "litellm" not in sys.modules, "a scripted judge imported litellm"
        print("ok")
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_scripted_project_as_the_docs_show_it(pytester: pytest.Pytester) -> None:
    """In one process; its conftest registers the same fake in other processes too (tests/plugin/test_xdist.py runs
    a scripted project under -n 2)."""
    model = scripted_project(pytester, answers={"Does the response meet consistency check 1?": "no"})
    assert model == "scripted/judge"
    pytester.makepyfile(test_summary=TESTS)
    result = pytester.runpytest("--bineval-cache=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Does the response meet consistency check 1?*"])


def test_scripted_project_rule_rules_prelude_and_ini(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="myfake", prelude="WRONG = 'wrong'", rule='''
        def answer(req):
            return "no" if WRONG in req.output else "yes"
    ''', rules={"questions": "lambda req: '{\"questions\": [{\"requirement\": \"r\", \"question\": "
                             "\"Does the summary keep to the article?\", "
                             "\"no_example\": \"\"}]}'"}, ini="bineval_threshold = 1.0")
    pytester.makepyfile(TESTS.replace('"A summary."', "OUT") + '''
OUT = "fine"

@pytest.mark.bineval(task="Summarize the article.")
def test_wrong():
    assert_passes("A wrong summary.", dimension="consistency", source="An article.")
''')
    result = pytester.runpytest("--bineval-cache=off")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_wrong*", "*Does the summary keep to the article?*"])


def test_scripted_conftest_takes_answers_or_a_rule_not_both() -> None:
    with pytest.raises(ValueError, match="answers or rule"):
        scripted_conftest(answers={"q": "no"}, rule="def answer(req):\n    return 'no'\n")
    source = scripted_conftest(answers={"Is it 'quoted'?": "no"}, provider="p", prefill=True)
    compile(source, "conftest.py", "exec")
    assert "ScriptedModel(provider='p', answers={\"Is it 'quoted'?\": 'no'}" in source and "prefill=True" in source
