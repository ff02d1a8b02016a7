"""GitHub Actions output as pure functions: detection, workflow-command escaping, repository paths, markdown."""

from __future__ import annotations

import pytest

from pytest_bineval.outputs.github import command, escape_data, escape_property, md, repo_path
from pytest_bineval.outputs.github_summary import GithubEnv, detect


@pytest.mark.parametrize(("mode", "env", "expected"), [
    ("auto", {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/s.md", "GITHUB_WORKSPACE": "/w"},
     GithubEnv("/s.md", "/w")),
    ("auto", {"GITHUB_ACTIONS": "false", "GITHUB_STEP_SUMMARY": "/s.md"}, None),
    ("auto", {}, None),
    ("on", {}, GithubEnv(None, None)),
    ("off", {"GITHUB_ACTIONS": "true"}, None),
])
def test_detect(mode: str, env: dict[str, str], expected: GithubEnv | None) -> None:
    assert detect(mode, env) == expected


def test_workflow_command_escaping_follows_the_actions_toolkit() -> None:
    # data: % first (so that the escapes themselves are not escaped again), then CR and LF
    assert escape_data("100%\r\nnext: a, b") == "100%25%0D%0Anext: a, b"
    # properties: also the separators of the property list
    assert escape_property("a:b,c%d\n") == "a%3Ab%2Cc%25d%0A"
    assert command("error", "line 1\nline 2 ::warning::x", file="dir,x/t.py", line=7, title="t::a") == (
        "::error file=dir%2Cx/t.py,line=7,title=t%3A%3Aa::line 1%0Aline 2 ::warning::x")
    assert command("warning", "m", file=None, line=None, title="t") == "::warning title=t::m"
    assert command("error", "m") == "::error::m"


def test_a_message_cannot_start_a_command_of_its_own() -> None:
    line = command("warning", "ok\n::error file=x::injected\r\n::stop-commands::t")
    # one line: GitHub reads commands only at the start of a line, so the rest is the warning's text
    assert line == "::warning::ok%0A::error file=x::injected%0D%0A::stop-commands::t"


@pytest.mark.parametrize(("file", "rootdir", "workspace", "expected"), [
    ("tests/test_x.py", "/repo/example_project", "/repo", "example_project/tests/test_x.py"),
    ("tests/test_x.py", "/repo", "/repo/", "tests/test_x.py"),
    ("tests/test_x.py", "/repo", None, "tests/test_x.py"),
    ("tests/test_x.py", "/elsewhere", "/repo", "tests/test_x.py"),  # outside the checkout: as pytest names it
    ("../lib/test_y.py", "/repo/app", "/repo", "lib/test_y.py"),
])
def test_repo_path(file: str, rootdir: str, workspace: str | None, expected: str) -> None:
    assert repo_path(file, rootdir, workspace) == expected


def test_markdown_text_stays_text() -> None:
    assert md("a | b\n<script>x</script> *bold* [link](http://x) `code` _i_ # h") == (
        "a \\| b &lt;script&gt;x&lt;/script&gt; \\*bold\\* \\[link\\](http://x) \\`code\\` \\_i\\_ \\# h")
    assert md("AT&T ~x~ !img") == "AT&amp;T \\~x\\~ \\!img"


def test_example_workflow_saves_the_baseline_on_main_and_compares_pull_requests() -> None:
    """The example project's CI loop: main saves its report under a key a pull request's restore matches."""
    from pathlib import Path

    yaml = pytest.importorskip("yaml")  # installed with litellm
    path = Path(__file__).parents[2] / "example_project" / ".github" / "workflows" / "llm-tests.yml"
    steps = {s.get("name"): s for s in yaml.safe_load(path.read_text())["jobs"]["llm-tests"]["steps"]}
    restore = steps["Restore the baseline report of main"]
    save = steps["Save the baseline report"]
    keep = steps["Keep the report as the baseline of pull requests"]
    run = steps["Run the LLM tests"]["run"]
    assert "pull_request" in restore["if"] and "refs/heads/main" in save["if"] and "refs/heads/main" in keep["if"]
    assert restore["with"]["path"] == save["with"]["path"] == "example_project/bineval-baseline.json"
    prefix = restore["with"]["restore-keys"].strip()
    assert save["with"]["key"].startswith(prefix) and restore["with"]["key"].startswith(prefix)
    assert "cp bineval-report.json bineval-baseline.json" in keep["run"]
    assert "--bineval-report bineval-report.json" in run
    assert "--bineval-baseline bineval-baseline.json --bineval-fail-on-regression" in run
    assert "'read-only'" in steps["Run the LLM tests"]["env"]["BINEVAL_CACHE_MODE"]  # forks: read-only cache
    order = list(steps)
    assert order.index("Restore the baseline report of main") < order.index("Run the LLM tests") < order.index(
        "Keep the report as the baseline of pull requests") < order.index("Save the baseline report")


INJECTED = ("looks wrong\n::error file=README.md,line=1,title=INJECTED::attacker text\n::add-mask::x\r\n  ::warning::y"
            " and ##[error]v1 command and ##vso[task.setvariable variable=x]1")


def commands_a_runner_would_run(stdout: str) -> list[str]:
    """The lines a CI runner reads as commands: GitHub's '::cmd::' at the start (leading blanks trimmed) except
    between ``::stop-commands::TOKEN`` and ``::TOKEN::``, its older '##[cmd]' and Azure's '##vso[' anywhere."""
    out: list[str] = []
    stop: str | None = None
    for raw in stdout.splitlines():
        line = raw.strip()
        if stop is not None:
            if line == f"::{stop}::":
                stop = None
            continue
        if line.startswith("::stop-commands::"):
            stop = line.split("::stop-commands::", 1)[1]
        elif line.startswith("::") or "##[" in line or "##vso[" in line:
            out.append(line)
    return out


def test_judge_text_cannot_issue_workflow_commands(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An explanation or error cause carrying '\\n::error ...' must not become a command of the job: the summary
    keeps model text on one line, model text everywhere (failure message, section, summary) carries no command
    marker, and bineval's summary is fenced with stop-commands but its own annotations."""
    pytester.makeconftest(f'''
from pytest_bineval.testing import ScriptedModel

def answer(req):
    if "check 2" in req.question:
        return RuntimeError({INJECTED!r})
    return '{{"answer": "no", "explanation": ' + __import__("json").dumps({INJECTED!r}) + '}}'

FAKE = ScriptedModel(provider="ghfake", answers=answer).register()
''')
    pytester.makeini("[pytest]\nbineval_model = ghfake/judge\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_fails():
            assert_passes("A summary.", dimension="fluency", source="An article.")
    ''')
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("--bineval-cache=off", "--bineval-retries=0")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "attacker text" in out  # the text is shown ...
    commands = commands_a_runner_would_run(out)
    assert commands, "bineval's own annotation is expected"
    assert all(c.startswith("::error file=") for c in commands), commands  # ... but only ours are commands
    assert len(commands) == 1 and "test_fails" in commands[0]  # one annotation, at the failing assertion
