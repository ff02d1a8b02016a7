"""Checklist generation: the paper's two-step, task-agnostic meta-prompt.

Step 1 rewrites the task into explicit requirements. Step 2 decomposes them, one dimension at a time,
into atomic yes/no questions (yes = satisfied), each with an example of what a "no" looks like.
Asking per dimension guarantees that every requested dimension gets questions, or a clear error.

The dimensions and their definitions come from :mod:`pytest_bineval.dimensions`.

:func:`generate_for` dispatches on the strategy: ``bineval`` (this module: one checklist per task),
``qworld`` and ``qworld-lite`` (:mod:`pytest_bineval.qworld`: criteria per question, with points).
"""

from __future__ import annotations

import re
from typing import Any

from .dimensions import DimensionsArg, resolve_dimensions
from .errors import (
    ArgumentTypeError,
    CallError,
    CheckError,
    ChecklistGenerationError,
    GeneratedCheckWarning,
    UsageError,
)
from .llm.client import LLMClient
from .llm.local import is_embedded
from .llm.seam import Deferred
from .models import STRATEGIES, Checklist, Question, Usage
from .prompting import load_prompt, prompt_version
from .qworld import QworldConfig
from .qworld import generate as qworld_generate
from .similarity import Similarity
from .untrusted import inert

MAX_QUESTIONS_PER_DIMENSION = 6
MAX_REQUIREMENTS = 12
# Lists invite repetition (small models repeat one question six times): penalise repeated tokens.
LIST_SAMPLING = {"presence_penalty": 0.5, "frequency_penalty": 0.3}
# The embedded 135M model still repeats under those: measured on the perf task (4 dimensions), 778 completion
# tokens for 7 distinct questions, most of them repeats that deduplication threw away; with these, 328 tokens
# for 8 distinct questions (docs/performance.md). Kept to the embedded model: a capable model does not need
# penalties this strong, and they can bend its wording.
EMBEDDED_LIST_SAMPLING = {"presence_penalty": 1.5, "frequency_penalty": 0.8}

REQUIREMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "requirements": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[A-Z][^\"\\\\\\n]{15,160}$"},  # no raw quote/backslash: see below
            "minItems": 1,
            "maxItems": MAX_REQUIREMENTS,
        }
    },
    "required": ["requirements"],
    "additionalProperties": False,
}

# A question starts like one and ends with a question mark (enforced by grammar where supported).
# No raw " or backslash inside: a llama.cpp grammar built from the pattern would otherwise let the model close the
# JSON string early and write extra items past maxItems.
QUESTION_PATTERN = r'^(Does|Is|Are|Do|Has|Have|Did|Was|Were|Can|Could|Would|Will) [^?"\\\n]{10,160}\?$'

QUESTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "requirement": {"type": "string", "maxLength": 160},
                    "question": {"type": "string", "pattern": QUESTION_PATTERN},
                    "no_example": {"type": "string", "maxLength": 160},
                    "scope": {"type": "string", "enum": ["each_turn", "conversation"]},
                },
                "required": ["requirement", "question", "no_example"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": MAX_QUESTIONS_PER_DIMENSION,
        }
    },
    "required": ["questions"],
    "additionalProperties": False,
}


def questions_schema(with_checks: bool) -> dict[str, Any]:
    """:data:`QUESTIONS_SCHEMA`, with an optional ``check`` per question when ``with_checks`` (its ``kind`` one of
    the catalogue's; its parameters are validated after the reply, by :func:`~pytest_bineval.checks.parse_check`)."""
    if not with_checks:
        return QUESTIONS_SCHEMA
    import copy

    from .checks.catalogue import KINDS

    schema = copy.deepcopy(QUESTIONS_SCHEMA)
    schema["properties"]["questions"]["items"]["properties"]["check"] = {
        "type": "object", "properties": {"kind": {"type": "string", "enum": sorted(KINDS)}}, "required": ["kind"]}
    return schema


def catalogue_summary() -> str:
    """The catalogue as the questions prompt lists it: one kind a line, with its parameters."""
    from .checks.catalogue import KINDS

    lines = []
    for name, kind in sorted(KINDS.items()):
        params = [f.alias or key for key, f in kind.params.model_fields.items()]
        lines.append(f"- {name}" + (f": {', '.join(params)}" if params else ""))
    return "\n".join(lines)


NO_CHECKS = "(none: leave \"check\" out)"


def _generated_check(value: object) -> tuple[dict[str, Any] | None, str | None]:
    """The catalogue check the generator attached (its spec), or None with why it was not taken (None: none
    was attached)."""
    if value is None or value == {}:
        return None, None
    from .checks.catalogue import parse_check

    try:
        check = parse_check(value)  # type: ignore[arg-type]  # a non-mapping is a CheckError
    except CheckError as exc:
        return None, str(exc)
    if not check.available:
        return None, f"check {check.kind.name!r} needs a library of the extra `checks`, which is not installed"
    return check.spec(), None


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", re.sub(r"\s+", " ", text.lower())).strip()


def _requirements(obj: dict[str, Any]) -> list[str]:
    reqs = obj.get("requirements")
    if not isinstance(reqs, list):
        raise ValueError("'requirements' must be a list")
    clean = [r.strip() for r in reqs if isinstance(r, str) and r.strip()]
    if not clean:
        raise ValueError("no requirement given")
    return list(dict.fromkeys(clean))[:MAX_REQUIREMENTS]


def _questions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    items = obj.get("questions")
    if not isinstance(items, list):
        raise ValueError("'questions' must be a list")
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        text = str(item.get("question") or "").strip()
        if len(text) < 8:
            continue
        if not text.endswith("?"):
            text = text.rstrip(".") + "?"
        check, problem = _generated_check(item.get("check"))
        out.append({
            "question": text,
            "no_example": str(item.get("no_example") or "").strip(),
            "requirement": str(item.get("requirement") or "").strip(),
            "check": check,
            "check_problem": problem,
            "scope": "each_turn" if item.get("scope") == "each_turn" else "conversation",  # else: the whole output
        })
    if not out:
        raise ValueError("no usable question given")
    return out


async def generate(client: LLMClient, task: str, dimensions: DimensionsArg = None) -> tuple[Checklist, Usage]:
    """Run the two-step meta-prompt with ``client``; returns the checklist and what it cost."""
    if not isinstance(task, str):
        raise ArgumentTypeError(f"task must be a string, not {type(task).__name__}")
    task = task.strip()
    if not task:
        raise UsageError("task is empty: describe what the output under test is supposed to do")
    dims = resolve_dimensions(dimensions)
    usage = Usage()
    sampling = EMBEDDED_LIST_SAMPLING if is_embedded(client.model) else LIST_SAMPLING
    try:
        step1 = await client.complete_json(
            load_prompt("requirements").messages(task=task),
            schema_name="requirements", schema=REQUIREMENTS_SCHEMA, validate=_requirements, max_tokens=700,
            sampling=sampling,
        )
    except CallError as exc:
        raise ChecklistGenerationError(f"step 1 (requirements) failed with {client.model}: {inert(exc.cause)}") from exc
    usage += step1.usage
    requirements = step1.value

    questions: list[Question] = []
    seen: set[str] = set()
    # A capable generator may attach a check of the catalogue to a question it writes; the embedded 135M model is
    # not offered the catalogue (its checks would be noise, and the list would lengthen every step-2 prompt): the
    # extractor still finds the task's checks for it (attach_checks, code_questions).
    offer = not is_embedded(client.model)
    schema = questions_schema(offer)
    catalogue = catalogue_summary() if offer else NO_CHECKS
    attached: list[dict[str, Any]] = []
    refused: list[str] = []
    deferred: Deferred | None = None
    for name, definition in dims.items():
        messages = load_prompt("questions").messages(
            task=task,
            requirements="\n".join(f"- {r}" for r in requirements),
            dimension=name,
            definition=definition,
            max_questions=str(MAX_QUESTIONS_PER_DIMENSION),
            checks=catalogue,
        )
        try:
            step2 = await client.complete_json(
                messages, schema_name="questions", schema=schema, validate=_questions, max_tokens=900,
                sampling=sampling,
            )
        except Deferred as exc:  # --bineval-batch's first pass: every dimension's request is recorded at once
            deferred = exc
            continue
        except CallError as exc:
            raise ChecklistGenerationError(
                f"step 2 (questions for dimension {name!r}) failed with {client.model}: {inert(exc.cause)}"
            ) from exc
        usage += step2.usage
        n = 0
        for item in step2.value:
            norm = _normalise(item["question"])
            if norm in seen:
                continue
            seen.add(norm)
            n += 1
            check = item["check"] if item["check"] not in attached else None  # one question per check
            if item["check_problem"]:
                refused.append(f"[{name}-{n}] {inert(item['question'])}: {inert(item['check_problem'])}")
            if check is not None:
                attached.append(check)
            questions.append(Question(id=f"{name}-{n}", dimension=name, text=item["question"],
                                      no_example=item["no_example"], requirement=item["requirement"], check=check,
                                      scope=item["scope"]))
        if n == 0:
            raise ChecklistGenerationError(
                f"dimension {name!r} got no question that is not a duplicate of another dimension's"
            )
    if deferred is not None:
        raise ChecklistGenerationError(f"step 2 (questions) with {client.model}: {deferred.cause}") from deferred
    if refused:
        import warnings

        warnings.warn(GeneratedCheckWarning(
            f"checklist generation with {client.model}: {len(refused)} check(s) the model attached are not valid "
            f"checks of the catalogue; those questions stay judge questions: " + "; ".join(refused)), stacklevel=2)
    questions, restated = attach_checks(task, questions, attached)
    questions += code_questions(task, dims, skip=attached + restated)
    checklist = Checklist(task=task, dimensions=dims, requirements=requirements, questions=questions,
                          model=client.model, prompt_version=prompt_version())
    return checklist, usage


def code_questions(task: str, dimensions: dict[str, str], skip: list[dict[str, Any]] | None = None) -> list[Question]:
    """The questions that code answers: one per constraint the extractor finds in ``task`` ("in 2-3 sentences",
    "as JSON", ...), in the dimension that holds the task's form (a name with format, instruction or constraint in
    it, else relevance; none when the checklist has neither: a length is not a matter of consistency or fluency);
    ids ``<dimension>-check-<n>``. Checks that need a library of the extra ``checks`` that is not installed (sentence
    counts, language) are left out, and so are the checks in ``skip`` (already attached to a written question)."""
    from .checks.extract import extract_checks

    home = next((n for n in dimensions if re.search(r"format|instruction|constraint", n, re.I)),
                "relevance" if "relevance" in dimensions else None)
    # a check whose library (the optional extra `checks`) is missing stays a judge question
    checks = [c for c in extract_checks(task) if c.available and c.spec() not in (skip or [])] if home else []
    return [Question(id=f"{home}-check-{i}", dimension=str(home), text=c.question, requirement="stated in the task",
                     check=c.spec()) for i, c in enumerate(checks, 1)]


def attach_checks(task: str, questions: list[Question],
                  taken: list[dict[str, Any]] | None = None) -> tuple[list[Question], list[dict[str, Any]]]:
    """The written questions, each one that restates a constraint of ``task`` with the task's check attached ("Is
    the response 2-3 sentences long?" for "in 2-3 sentences": code decides it, not the judge), and the checks so
    attached. A question gets a check only when its text states exactly one constraint and the task states the same
    one, so a check is never guessed from a question alone; any other question stays a judge question. A check in
    ``taken`` (one the generator attached already) is not attached twice."""
    from .checks.extract import extract_checks

    stated = [c.spec() for c in extract_checks(task) if c.available]
    out: list[Question] = []
    attached: list[dict[str, Any]] = []
    for q in questions:
        found = [c.spec() for c in extract_checks(q.text)]
        if (q.check is None and len(found) == 1 and found[0] in stated and found[0] not in attached
                and found[0] not in (taken or [])):
            q = q.model_copy(update={"check": found[0]})
            attached.append(found[0])
        out.append(q)
    return out, attached


async def generate_for(client: LLMClient, task: str | None, dimensions: DimensionsArg = None, *,
                       strategy: str = "bineval", question: str | None = None, config: QworldConfig | None = None,
                       similarity: Similarity | None = None, concurrency: int = 1) -> tuple[Checklist, Usage]:
    """A checklist by ``strategy``: ``bineval`` (per task), ``qworld`` or ``qworld-lite`` (per ``question``)."""
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown checklist strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    if strategy == "bineval":
        if question is not None:
            raise UsageError("question= is for strategy='qworld' or 'qworld-lite' (criteria written per question); "
                             "the bineval strategy writes one checklist per task")
        return await generate(client, task, dimensions)  # type: ignore[arg-type]  # it rejects a non-str task
    if question is None:
        raise UsageError(f"strategy={strategy!r} writes criteria for a question: pass question=...")
    return await qworld_generate(client, question, task, dimensions, lite=strategy == "qworld-lite", config=config,
                                 similarity=similarity, concurrency=concurrency)
