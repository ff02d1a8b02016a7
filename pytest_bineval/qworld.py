"""Qworld: question-specific criteria by recursive expansion, with importance points.

BinEval writes one checklist per *task*. For an open-ended question (advice, an explanation, a user's
question with its context) what a good answer must contain depends on the question itself, so Qworld
(Gao et al., 2026) writes criteria per question, with a **recursive expansion tree**::

    question ─► scenarios (who asks, in which situation)
                  ─► perspectives (what an expert would check in that scenario)
                        ─► criteria (binary yes/no questions, each with importance points)

At every level the tree grows in two ways: *decomposition* (each node of the level above gets its
children, one call per parent) and *horizontal expansion* ("what else is missing?" calls over the whole
level, each adding only new siblings). ``widths[level]`` is the number of generation rounds of a level:
one decomposition and ``width - 1`` expansion rounds. After each level a **cross-branch review** merges
duplicates and fills gaps: a similarity pre-filter (:mod:`pytest_bineval.similarity`) folds near-identical
nodes together without a call, then one consolidation call sees the whole level, names the duplicates to
merge and adds what is missing. ``top_k`` keeps the K most important criteria (by |points|).

Points (the convention, once): every criterion is a yes/no question where *yes* means satisfied.
Positive points are earned when the answer is *yes*. Negative points are a **penalty**: such a criterion
is always asked as "Does the response avoid ...?", and the penalty applies when the answer is *no*. E.g.
``"Does the response avoid giving an insulin dose without knowing the insulin type?"``, points ``-8``:
*yes* costs nothing, *no* subtracts 8. The points-weighted score is
:func:`pytest_bineval.models.points_score`.

``strategy="qworld-lite"`` is the paper's one-call distilled variant: one request writes scenarios,
perspectives and weighted criteria together (then the similarity pre-filter and top-K apply).

Every node, every merge and the counts per stage are kept in :class:`~pytest_bineval.models.QworldTree`,
which is part of the checklist (and so of its pinned file): a reviewer sees where each criterion came from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .dimensions import DimensionsArg, parse_dimensions, resolve_dimensions
from .errors import ArgumentTypeError, CallError, ChecklistGenerationError, UsageError
from .llm.client import LLMClient
from .models import Checklist, Merge, Question, QworldTree, TreeNode, Usage
from .prompting import delimit, load_prompt, prompt_version
from .similarity import Similarity, make_similarity, opposite

Level = Literal["scenario", "perspective", "criterion"]
LEVELS: tuple[Level, ...] = ("scenario", "perspective", "criterion")
Origin = Literal["decompose", "expand", "review"]

# The default dimension of question-specific criteria (a checklist of your own dimensions is also possible:
# each criterion is then assigned to one of them).
QWORLD_DIMENSION = "quality"
QWORLD_DEFINITION = ("What a good answer to this question must do, in the user's situation: the criteria an "
                     "expert would check, each weighted by its importance.")
DEFAULT_TASK = "Answer the user's question."

# Generation rounds per level (one decomposition + width-1 "what else?" expansions). The paper's reference
# implementation runs 1 + 3 scenario, 1 + 4 perspective and 1 + 3 criteria rounds (widths 4/5/4) and keeps
# every node (its case study: 13 scenarios, 26 perspectives, 36 criteria; 56.4 calls per question).
DEFAULT_WIDTHS = (3, 3, 3)
PAPER_WIDTHS = (4, 5, 4)
DEFAULT_BREADTH = (3, 3, 3)  # new nodes one call may write: scenarios, perspectives, criteria
DEFAULT_MAX_NODES = (5, 8)  # scenarios and perspectives carried down to the next level (the rest: "cut")
MAX_PENALTIES_PER_CALL = 2
POINTS = list(range(1, 11))  # magnitudes; penalties are stored negative
LIST_SAMPLING = {"presence_penalty": 0.5, "frequency_penalty": 0.3}  # as in checklist.py: lists invite repetition

# No raw quote or backslash inside (a llama.cpp grammar would otherwise let a string close early).
CREDIT_PATTERN = r'^(Does|Is|Are|Do|Has|Have|Can|Would|Will) [^?"\\\n]{10,180}\?$'
PENALTY_PATTERN = r'^Does the response avoid [^?"\\\n]{6,160}\?$'
NAME_PATTERN = r'^[A-Za-z0-9][^"\\\n]{2,60}$'
DESCRIPTION_MAX = 200
TAG_PATTERN = r'^[a-z][a-z -]{1,24}$'


@dataclass(frozen=True)
class QworldConfig:
    """How big the tree grows (``widths``, ``breadth``, ``max_nodes``), how many criteria are kept (``top_k``),
    and the duplicate pre-filter (``similarity``: lexical, minilm, embedding:<model> or off)."""

    widths: tuple[int, int, int] = DEFAULT_WIDTHS
    breadth: tuple[int, int, int] = DEFAULT_BREADTH
    max_nodes: tuple[int, int] = DEFAULT_MAX_NODES
    top_k: int | None = None
    similarity: str = "lexical"
    threshold: float | None = None
    max_tokens: int = 900  # per reply; the one reply of qworld-lite gets twice as many

    def __post_init__(self) -> None:
        for name in ("widths", "breadth"):
            values = getattr(self, name)
            if len(values) != 3 or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in values):
                raise UsageError(f"qworld {name} are three whole numbers >= 1 (scenarios, perspectives, criteria), "
                                 f"not {values!r}")
        if len(self.max_nodes) != 2 or any(v < 1 for v in self.max_nodes):
            raise UsageError(f"qworld max_nodes are two whole numbers >= 1, not {self.max_nodes!r}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or self.top_k < 1):
            raise UsageError(f"top_k must be a whole number >= 1 (or None for all criteria), not {self.top_k!r}")
        make_similarity(self.similarity, self.threshold)  # validates the spec


def qworld_dimensions(dimensions: DimensionsArg) -> dict[str, str]:
    """The dimensions of question-specific criteria: yours when given, else the one ``quality`` dimension."""
    if parse_dimensions(dimensions) is None:
        return {QWORLD_DIMENSION: QWORLD_DEFINITION}
    return resolve_dimensions(dimensions)


def parse_widths(text: str | Sequence[int]) -> tuple[int, int, int]:
    """``"3,4,3"`` or ``"3/4/3"`` or ``"2"`` (all levels) or ``(3, 4, 3)`` -> (scenarios, perspectives, criteria)."""
    if not isinstance(text, str):
        text = ",".join(str(v) for v in text)
    parts = [p.strip() for p in text.strip("()[] ").replace("/", ",").split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"widths are whole numbers like 3,4,3 (scenarios, perspectives, criteria), not {text!r}") \
            from None
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or any(v < 1 for v in values):
        raise UsageError(f"widths are three whole numbers >= 1 like 3,4,3, not {text!r}")
    return values[0], values[1], values[2]


# -- schemas (the structured-output names are what ScriptedModel routes on) ------------------------------------
def _node_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "pattern": NAME_PATTERN},
                        "description": {"type": "string", "maxLength": DESCRIPTION_MAX},
                    },
                    "required": ["name", "description"],
                    "additionalProperties": False,
                },
                "minItems": 0,
                "maxItems": count,
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    }


def _criterion_item(pattern: str, dimensions: Sequence[str]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "question": {"type": "string", "pattern": pattern},
        "points": {"type": "integer", "enum": POINTS},
        "tag": {"type": "string", "pattern": TAG_PATTERN},
    }
    if len(dimensions) > 1:
        props["dimension"] = {"type": "string", "enum": list(dimensions)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _criteria_props(count: int, dimensions: Sequence[str]) -> dict[str, Any]:
    return {
        "criteria": {"type": "array", "items": _criterion_item(CREDIT_PATTERN, dimensions),
                     "minItems": 0, "maxItems": count},
        "penalties": {"type": "array", "items": _criterion_item(PENALTY_PATTERN, dimensions),
                      "minItems": 0, "maxItems": min(MAX_PENALTIES_PER_CALL, count)},
    }


def _criteria_schema(count: int, dimensions: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": _criteria_props(count, dimensions),
            "required": ["criteria", "penalties"], "additionalProperties": False}


def _review_schema(level: Level, ids: Sequence[str], count: int, dimensions: Sequence[str]) -> dict[str, Any]:
    if level == "criterion":
        missing: dict[str, Any] = {"type": "object", "properties": _criteria_props(count, dimensions),
                                   "required": ["criteria", "penalties"], "additionalProperties": False}
    else:
        missing = _node_schema(count)
    id_enum: dict[str, Any] = {"type": "string", "enum": list(ids)}
    return {
        "type": "object",
        "properties": {
            "duplicates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"keep": id_enum,
                                   "drop": {"type": "array", "items": id_enum, "minItems": 1, "maxItems": 4}},
                    "required": ["keep", "drop"],
                    "additionalProperties": False,
                },
                "minItems": 0,
                "maxItems": max(1, len(ids) // 2),
            },
            "missing": missing,
        },
        "required": ["duplicates", "missing"],
        "additionalProperties": False,
    }


def _lite_schema(breadth: tuple[int, int, int], dimensions: Sequence[str]) -> dict[str, Any]:
    perspective = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": NAME_PATTERN}, **_criteria_props(breadth[2], dimensions)},
        "required": ["name", "criteria", "penalties"],
        "additionalProperties": False,
    }
    scenario = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": NAME_PATTERN},
            "description": {"type": "string", "maxLength": DESCRIPTION_MAX},
            "perspectives": {"type": "array", "items": perspective, "minItems": 1, "maxItems": breadth[1]},
        },
        "required": ["name", "description", "perspectives"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"scenarios": {"type": "array", "items": scenario, "minItems": 1, "maxItems": breadth[0]}},
        "required": ["scenarios"],
        "additionalProperties": False,
    }


# -- reply validation -----------------------------------------------------------------------------------------
@dataclass
class _Criterion:
    question: str
    points: int  # signed: negative = penalty ("Does the response avoid ...?")
    tag: str = ""
    dimension: str = ""


def _clean(text: Any, limit: int = 300) -> str:
    return " ".join(str(text or "").split())[:limit]


def _nodes(obj: dict[str, Any]) -> list[tuple[str, str]]:
    items = obj.get("items")
    if not isinstance(items, list):
        raise ValueError("'items' must be a list")
    out = []
    for item in items:
        if isinstance(item, dict):
            name = _clean(item.get("name"), 80)
            if len(name) >= 3:
                out.append((name, _clean(item.get("description"), DESCRIPTION_MAX)))
    return out


def _points(raw: Any) -> int:
    try:
        value = abs(int(raw))
    except (TypeError, ValueError):
        return 5
    return min(10, max(1, value))


def _criteria(obj: dict[str, Any], dimensions: Sequence[str]) -> list[_Criterion]:
    out: list[_Criterion] = []
    for key, sign in (("criteria", 1), ("penalties", -1)):
        items = obj.get(key, [])
        if not isinstance(items, list):
            raise ValueError(f"'{key}' must be a list")
        for item in items:
            if not isinstance(item, dict):
                continue
            text = _clean(item.get("question"))
            if len(text) < 12:
                continue
            if not text.endswith("?"):
                text = text.rstrip(".") + "?"
            if sign < 0 and not text.lower().startswith("does the response avoid "):
                # a penalty must be asked so that "yes" is good: otherwise it cannot be scored by this convention
                continue
            dim = str(item.get("dimension") or "")
            out.append(_Criterion(text, sign * _points(item.get("points")), _clean(item.get("tag"), 30).lower(),
                                  dim if dim in dimensions else dimensions[0]))
    return out


def _criteria_reply(dimensions: Sequence[str]) -> Callable[[dict[str, Any]], list[_Criterion]]:
    def validate(obj: dict[str, Any]) -> list[_Criterion]:
        return _criteria(obj, dimensions)

    return validate


@dataclass
class _Review:
    duplicates: list[tuple[str, list[str]]]
    nodes: list[tuple[str, str]] = field(default_factory=list)
    criteria: list[_Criterion] = field(default_factory=list)


def _review_reply(level: Level, ids: Sequence[str], dimensions: Sequence[str]) -> Callable[[dict[str, Any]], _Review]:
    known = set(ids)

    def validate(obj: dict[str, Any]) -> _Review:
        dups = obj.get("duplicates", [])
        if not isinstance(dups, list):
            raise ValueError("'duplicates' must be a list")
        out = _Review([])
        for d in dups:
            if not isinstance(d, dict) or d.get("keep") not in known or not isinstance(d.get("drop"), list):
                continue
            drop = [str(x) for x in d["drop"] if x in known and x != d["keep"]]
            if drop:
                out.duplicates.append((str(d["keep"]), list(dict.fromkeys(drop))))
        missing = obj.get("missing") or {}
        if not isinstance(missing, dict):
            raise ValueError("'missing' must be an object")
        if level == "criterion":
            out.criteria = _criteria(missing, dimensions)
        else:
            out.nodes = _nodes(missing if "items" in missing else {"items": []})
        return out

    return validate


# -- the tree -------------------------------------------------------------------------------------------------
class _Builder:
    """Grows one tree; every call goes through ``ask`` (usage and failures are recorded)."""

    def __init__(self, client: LLMClient, question: str, task: str, dims: dict[str, str], config: QworldConfig,
                 similarity: Similarity | None, concurrency: int) -> None:
        self.client = client
        self.question = question
        self.task = task
        self.dims = dims
        self.dim_names = list(dims)
        self.config = config
        self.similarity = similarity
        self.semaphore = asyncio.Semaphore(max(1, concurrency))
        self.usage = Usage()
        self.nodes: list[TreeNode] = []
        self.merges: list[Merge] = []
        self.failures: list[str] = []
        self._next = {"scenario": 0, "perspective": 0, "criterion": 0}

    # -- calls ------------------------------------------------------------------------------------------------
    async def ask(self, what: str, prompt: str, values: dict[str, str], schema_name: str, schema: dict[str, Any],
                  validate: Callable[[dict[str, Any]], Any], *, fatal: bool = False,
                  max_tokens: int | None = None) -> Any:
        messages = load_prompt(prompt).messages(question=delimit(self.question), task=self.task, **values)
        async with self.semaphore:
            try:
                reply = await self.client.complete_json(messages, schema_name=schema_name, schema=schema,
                                                        validate=validate,
                                                        max_tokens=max_tokens or self.config.max_tokens,
                                                        sampling=LIST_SAMPLING)
            except CallError as exc:
                self.usage += exc.usage or Usage()
                if fatal:
                    raise ChecklistGenerationError(f"qworld {what} failed with {self.client.model}: {exc.cause}") \
                        from exc
                self.failures.append(f"{what}: {exc.cause}")
                return None
        self.usage += reply.usage
        return reply.value

    # -- nodes ------------------------------------------------------------------------------------------------
    def add(self, level: Level, text: str, parent: str | None, origin: Origin, round_: int,
            criterion: _Criterion | None = None) -> TreeNode:
        self._next[level] += 1
        node = TreeNode(id=f"{level[0]}{self._next[level]}", level=level, text=text, parent=parent, origin=origin,
                        round=round_)
        if criterion is not None:
            node.points, node.tag, node.dimension = criterion.points, criterion.tag, criterion.dimension
        self.nodes.append(node)
        return node

    def kept(self, level: Level) -> list[TreeNode]:
        return [n for n in self.nodes if n.level == level and n.status == "kept"]

    def get(self, node_id: str | None) -> TreeNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    @staticmethod
    def listing(nodes: Sequence[TreeNode], *, points: bool = False) -> str:
        if not nodes:
            return "(none yet)"
        lines = []
        for n in nodes:
            extra = f" [{n.points:+d}]" if points and n.points is not None else ""
            lines.append(f"{n.id}{extra}: {n.text}")
        return "\n".join(lines)

    def _criterion_values(self, count: int) -> dict[str, str]:
        dims = "\n".join(f"- {name}: {definition}" for name, definition in self.dims.items())
        return {"count": str(count), "penalties": str(min(MAX_PENALTIES_PER_CALL, count)), "dimensions": dims}

    # -- one level --------------------------------------------------------------------------------------------
    async def grow(self, level: Level) -> None:
        """Decompose every kept parent, then ``width - 1`` expansion rounds over the whole level."""
        i = LEVELS.index(level)
        width, breadth = self.config.widths[i], self.config.breadth[i]
        parents: list[TreeNode | None] = [None] if level == "scenario" else [*self.kept(LEVELS[i - 1])]
        results = await asyncio.gather(*(self._decompose(level, p, breadth) for p in parents))
        for parent, items in zip(parents, results, strict=True):
            self._store(level, items, parent.id if parent is not None else None, "decompose", 0)
        for round_ in range(1, width):
            items = await self._expand(level, breadth, round_)
            self._store(level, items, None, "expand", round_)

    def _store(self, level: Level, items: Any, parent: str | None, origin: Origin, round_: int) -> None:
        for item in items or []:
            if isinstance(item, _Criterion):
                self.add(level, item.question, parent, origin, round_, item)
            else:
                name, description = item
                self.add(level, f"{name}: {description}" if description else name, parent, origin, round_)

    async def _decompose(self, level: Level, parent: TreeNode | None, breadth: int) -> Any:
        fatal = level == "scenario"
        if level == "scenario":
            return await self.ask("scenario decomposition", "qworld_scenarios",
                                  {"existing": "(none yet)", "count": str(breadth)},
                                  "qworld_scenarios", _node_schema(breadth), _nodes, fatal=fatal)
        assert parent is not None
        siblings = [n for n in self.kept(level) if n.parent == parent.id]
        if level == "perspective":
            return await self.ask(f"perspectives of {parent.id}", "qworld_perspectives",
                                  {"scenarios": f"{parent.id}: {parent.text}", "existing": self.listing(siblings),
                                   "count": str(breadth)},
                                  "qworld_perspectives", _node_schema(breadth), _nodes)
        scenario = self.get(parent.parent)
        return await self.ask(f"criteria of {parent.id}", "qworld_criteria",
                              {"scenario": scenario.text if scenario is not None else "(any situation)",
                               "perspectives": f"{parent.id}: {parent.text}", "existing": self.listing(siblings),
                               **self._criterion_values(breadth)},
                              "qworld_criteria", _criteria_schema(breadth, self.dim_names),
                              _criteria_reply(self.dim_names))

    async def _expand(self, level: Level, breadth: int, round_: int) -> Any:
        existing = self.listing(self.kept(level), points=level == "criterion")
        what = f"{level} expansion round {round_}"
        if level == "scenario":
            return await self.ask(what, "qworld_scenarios", {"existing": existing, "count": str(breadth)},
                                  "qworld_scenarios", _node_schema(breadth), _nodes)
        if level == "perspective":
            return await self.ask(what, "qworld_perspectives",
                                  {"scenarios": self.listing(self.kept("scenario")), "existing": existing,
                                   "count": str(breadth)},
                                  "qworld_perspectives", _node_schema(breadth), _nodes)
        return await self.ask(what, "qworld_criteria",
                              {"scenario": self.listing(self.kept("scenario")),
                               "perspectives": self.listing(self.kept("perspective")), "existing": existing,
                               **self._criterion_values(breadth)},
                              "qworld_criteria", _criteria_schema(breadth, self.dim_names),
                              _criteria_reply(self.dim_names))

    # -- the cross-branch review ------------------------------------------------------------------------------
    def merge(self, level: Level, keep: TreeNode, drop: Sequence[TreeNode], by: str) -> None:
        for d in drop:
            d.status, d.merged_into = "merged", keep.id
        if level == "criterion" and keep.points is not None:
            same_sign = [abs(d.points) for d in drop if d.points is not None and (d.points > 0) == (keep.points > 0)]
            magnitude = max([abs(keep.points), *same_sign])
            keep.points = magnitude if keep.points > 0 else -magnitude
        self.merges.append(Merge(level=level, kept=keep.id, removed=[d.id for d in drop], by=by))

    async def prefilter(self, level: Level) -> None:
        """Fold near-identical nodes of the level into the first of them (no call)."""
        if self.similarity is None:
            return
        nodes = self.kept(level)
        if len(nodes) < 2:
            return
        matrix = await self.similarity.matrix([n.text for n in nodes])
        kept: list[int] = []
        for i, node in enumerate(nodes):
            best, best_j = -1.0, -1
            for j in kept:
                same_polarity = level != "criterion" or (
                    ((node.points or 1) > 0) == ((nodes[j].points or 1) > 0) and not opposite(node.text, nodes[j].text))
                if same_polarity and matrix[i][j] > best:
                    best, best_j = matrix[i][j], j
            if best_j >= 0 and best >= self.similarity.threshold:
                self.merge(level, nodes[best_j], [node], f"similarity {best:.2f}")
            else:
                kept.append(i)

    async def review(self, level: Level) -> None:
        """The consolidation call: duplicates across branches are merged, missing nodes added."""
        nodes = self.kept(level)
        if not nodes:
            return
        i = LEVELS.index(level)
        breadth = self.config.breadth[i]
        ids = [n.id for n in nodes]
        values: dict[str, str] = {"level": {"scenario": "scenarios", "perspective": "perspectives",
                                            "criterion": "criteria"}[level],
                                  "items": self.listing(nodes, points=level == "criterion"), "count": str(breadth)}
        if level == "criterion":
            values.update(self._criterion_values(breadth))
        result: _Review | None = await self.ask(
            f"{level} review", f"qworld_review_{'criteria' if level == 'criterion' else 'nodes'}", values,
            f"qworld_review_{level}", _review_schema(level, ids, breadth, self.dim_names),
            _review_reply(level, ids, self.dim_names))
        if result is None:
            return
        for keep_id, drop_ids in result.duplicates:
            keep = self.get(keep_id)
            drop = [d for d in (self.get(x) for x in drop_ids) if d is not None and d.status == "kept"]
            if keep is None or keep.status != "kept" or not drop:
                continue
            self.merge(level, keep, drop, "review")
        self._store(level, result.criteria if level == "criterion" else result.nodes, None, "review", 0)

    def cap(self, level: Level, limit: int) -> None:
        for node in self.kept(level)[limit:]:
            node.status = "cut"

    def top_k(self) -> None:
        ranked = sorted(self.kept("criterion"), key=lambda n: -abs(n.points or 0))  # stable: earlier first on ties
        if self.config.top_k is not None:
            for node in ranked[self.config.top_k:]:
                node.status = "cut"

    def branch(self, node: TreeNode) -> str:
        path = [node.id]
        parent = self.get(node.parent)
        while parent is not None:
            path.append(parent.id)
            parent = self.get(parent.parent)
        if len(path) == 1:
            return "review" if node.origin == "review" else f"expansion round {node.round}"
        return " > ".join(reversed(path[1:]))


async def _run_full(b: _Builder) -> dict[str, int]:
    counts: dict[str, int] = {}
    for level in LEVELS:
        await b.grow(level)
        counts[f"{level}_generated"] = len([n for n in b.nodes if n.level == level])
        await b.prefilter(level)
        counts[f"{level}_after_similarity"] = len(b.kept(level))
        await b.review(level)
        counts[f"{level}_after_review"] = len(b.kept(level))
        if level != "criterion":
            b.cap(level, b.config.max_nodes[LEVELS.index(level)])
    return counts


async def _run_lite(b: _Builder) -> dict[str, int]:
    breadth = b.config.breadth
    schema = _lite_schema(breadth, b.dim_names)
    dims = b.dim_names

    def validate(obj: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[_Criterion]]]]]:
        scenarios = obj.get("scenarios")
        if not isinstance(scenarios, list):
            raise ValueError("'scenarios' must be a list")
        out = []
        for s in scenarios:
            if not isinstance(s, dict) or len(_clean(s.get("name"))) < 3:
                continue
            text = _clean(s.get("name"), 80)
            if _clean(s.get("description")):
                text += ": " + _clean(s.get("description"), DESCRIPTION_MAX)
            persp = []
            for p in s.get("perspectives") or []:
                if isinstance(p, dict) and len(_clean(p.get("name"))) >= 3:
                    persp.append((_clean(p.get("name"), 80), _criteria(p, dims)))
            out.append((text, persp))
        if not any(c for _, ps in out for _, c in ps):
            raise ValueError("no usable criterion given")
        return out

    tree = await b.ask("the one-call tree", "qworld_lite",
                       {"scenarios": str(breadth[0]), "perspectives": str(breadth[1]),
                        **b._criterion_values(breadth[2])},
                       "qworld_lite", schema, validate, fatal=True, max_tokens=2 * b.config.max_tokens)
    for scenario_text, perspectives in tree:
        s = b.add("scenario", scenario_text, None, "decompose", 0)
        for name, criteria in perspectives:
            p = b.add("perspective", name, s.id, "decompose", 0)
            for c in criteria:
                b.add("criterion", c.question, p.id, "decompose", 0, c)
    counts = {f"{level}_generated": len([n for n in b.nodes if n.level == level]) for level in LEVELS}
    await b.prefilter("criterion")
    counts["criterion_after_similarity"] = len(b.kept("criterion"))
    return counts


async def generate(client: LLMClient, question: str, task: str | None = None, dimensions: DimensionsArg = None, *,
                   lite: bool = False, config: QworldConfig | None = None, similarity: Similarity | None = None,
                   concurrency: int = 1) -> tuple[Checklist, Usage]:
    """Question-specific criteria for ``question`` (the user's question, with its context if any).

    ``task``: what the answers are made for (default: "Answer the user's question."); ``dimensions``: one
    dimension ``quality`` by default, else each criterion is assigned to one of yours. ``similarity``: a
    pre-filter instance (else made from ``config.similarity``). Returns the checklist and what it cost.
    """
    if not isinstance(question, str):
        raise ArgumentTypeError(f"the question must be a string, not {type(question).__name__}")
    question = question.strip()
    if not question:
        raise UsageError("the question is empty: criteria='qworld' writes criteria for a question (pass it as source=)")
    task = (task or "").strip() or DEFAULT_TASK
    config = config or QworldConfig()
    dims = qworld_dimensions(dimensions)
    if similarity is None:
        similarity = make_similarity(config.similarity, config.threshold, api_base=client.settings.api_base)
    b = _Builder(client, question, task, dims, config, similarity, concurrency)
    counts = await (_run_lite(b) if lite else _run_full(b))
    b.top_k()
    final = sorted(b.kept("criterion"), key=lambda n: -abs(n.points or 0))
    counts["criterion_after_top_k"] = len(final)
    if not final:
        raise ChecklistGenerationError(
            f"qworld wrote no usable criterion with {client.model}"
            + (f" ({'; '.join(b.failures[:3])})" if b.failures else ""))
    questions = [Question(id=n.id, dimension=n.dimension or b.dim_names[0], text=n.text, points=n.points,
                          branch=b.branch(n), tag=n.tag) for n in final]
    missing = [d for d in dims if not any(q.dimension == d for q in questions)]
    if missing:
        raise ChecklistGenerationError(f"qworld wrote no criterion for dimension(s) {', '.join(map(repr, missing))}")
    sim_name = "off" if similarity is None else f"{similarity.name} >= {similarity.threshold:g}"
    tree = QworldTree(question=question, widths=[] if lite else list(config.widths), top_k=config.top_k,
                      similarity=sim_name, nodes=b.nodes, merges=b.merges, counts=counts, failures=b.failures)
    checklist = Checklist(task=task, dimensions=dims, questions=questions, model=client.model,
                          prompt_version=prompt_version(), strategy="qworld-lite" if lite else "qworld",
                          question=question, tree=tree)
    return checklist, b.usage
