"""The benchmark datasets: one :class:`DatasetSpec` per dataset, registered in :data:`DATASETS`, the one list
of datasets (the command's choices, the runner). A spec knows what the dataset is judged on (the task a
user would write, the dimensions, the scales, the correlation protocol, the per-dimension texts of the
G-Eval- and UniEval-style baselines) and how to load itself (:meth:`DatasetSpec.load`). User data
(``bineval bench custom``) gets its spec from the command line's keys (:class:`CustomData`).

The task prompts are written the way a user would write them for the task; they are not tuned on the
data. The dimension definitions of SummEval/QAGS are the library's built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from ..dimensions import BUILTIN_DIMENSIONS
from .datasets import (
    Item,
    PathLike,
    load_custom,
    load_ifbench,
    load_qags,
    load_summeval,
    load_topical_chat,
    select_items,
)

Protocol = Literal["summary-level", "pooled", "ifbench"]

#: Reads every item of a dataset from a data directory (None: :func:`~.datasets.resolve_data_dir`).
Loader = Callable[[PathLike | None], list[Item]]

#: All methods, in the order they are run and reported.
METHODS: tuple[str, ...] = ("bineval", "bineval-turns", "geval", "unieval", "likelihood", "overlap")
#: The methods of a dataset of texts (``bineval-turns`` judges a dialogue turn by turn: Topical-Chat's only).
TEXT_METHODS: tuple[str, ...] = tuple(m for m in METHODS if m != "bineval-turns")


@dataclass(frozen=True)
class Scale:
    """A closed score range ``[low, high]``."""

    low: float
    high: float

    def map_to(self, value: float, other: Scale) -> float:
        """The affine image of ``value`` on ``other`` (the paper's S' = S (b - a) + a, generalised)."""
        if self.high == self.low:
            return other.low
        return other.low + (value - self.low) / (self.high - self.low) * (other.high - other.low)


@dataclass(frozen=True)
class Dimension:
    """One judged dimension: its definition, the human scale, and the baseline texts."""

    name: str
    definition: str
    human_scale: Scale
    geval_scale: Scale
    geval_steps: tuple[str, ...]
    unieval_question: str


@dataclass(frozen=True)
class DatasetSpec:
    """How a dataset is benchmarked, and how its items are read (``loader``, through :meth:`load`)."""

    name: str
    task: str
    dimensions: tuple[Dimension, ...]
    protocol: Protocol
    source_label: str
    output_label: str
    loader: Loader
    binary_dimension: str | None = None  # human labels 0/1: also report AUROC
    methods: tuple[str, ...] = TEXT_METHODS
    reference: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def load(self, data_dir: PathLike | None = None, *, limit: int | None = None,
             docs: int | None = None) -> list[Item]:
        """The items, in file order: the first ``docs`` groups with all their items, then the first ``limit``."""
        return select_items(self.loader(data_dir), limit=limit, docs=docs)

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def dimension_names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def select(self, names: Sequence[str] | None) -> DatasetSpec:
        """The spec restricted to the named dimensions (all when None or empty)."""
        if not names:
            return self
        known = self.dimension_names
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"dataset {self.name!r} has no dimension {unknown}; it has {known}")
        keep = tuple(d for d in self.dimensions if d.name in names)
        binary = self.binary_dimension if self.binary_dimension in names else None
        return replace(self, dimensions=keep, binary_dimension=binary)


FIVE = Scale(1.0, 5.0)
THREE = Scale(1.0, 3.0)
UNIT = Scale(0.0, 1.0)

SUMMARY_TASK = "Summarize the news article in a few sentences for a busy reader."
XSUM_TASK = "Summarize the news article in one sentence for a busy reader."
DIALOGUE_TASK = "Continue the conversation with an engaging, natural reply that uses the given fact."
IFBENCH_TASK = "Respond to the prompt in the input and follow every instruction it gives."

_SUMMARY_STEPS: dict[str, tuple[str, ...]] = {
    "coherence": (
        "Read the article and note its main topic and key points.",
        "Read the summary and check that it presents them in a clear, logical order.",
        "Give a low score to a summary that is a heap of disconnected facts.",
    ),
    "consistency": (
        "Read the article and note its main facts.",
        "Check each statement of the summary against the article.",
        "Give a low score for each statement the article does not support.",
    ),
    "fluency": (
        "Read the summary.",
        "Check grammar, spelling, punctuation, word choice and sentence structure.",
        "Give a low score to a summary that is hard to read.",
    ),
    "relevance": (
        "Read the article and note its most important points.",
        "Check that the summary covers them and leaves out unimportant details.",
        "Give a low score to a summary with redundant or off-topic content.",
    ),
}

_SUMMARY_UNIEVAL: dict[str, str] = {  # UniEval's Boolean questions (relevance: against the article)
    "coherence": "Is this a coherent summary of the document?",
    "consistency": "Is this summary consistent with the document?",
    "fluency": "Is this a fluent paragraph?",
    "relevance": "Is this summary relevant to the document?",
}


def _summary_dimensions(names: Sequence[str]) -> tuple[Dimension, ...]:
    return tuple(Dimension(n, BUILTIN_DIMENSIONS[n], FIVE, FIVE, _SUMMARY_STEPS[n], _SUMMARY_UNIEVAL[n]) for n in names)


def _qags_dimensions() -> tuple[Dimension, ...]:
    d = _summary_dimensions(["consistency"])[0]
    return (Dimension(d.name, d.definition, UNIT, FIVE, d.geval_steps, d.unieval_question),)


DIALOGUE_DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        "naturalness",
        "The reply sounds like something a person would naturally say at this point of the conversation.",
        THREE,
        THREE,
        ("Read the dialogue and the reply.", "Judge whether a person could naturally say this reply here."),
        "Is this a natural response in the dialogue?",
    ),
    Dimension(
        "coherence",
        "The reply follows from the dialogue history: it continues what was said and stays on topic.",
        THREE,
        THREE,
        (
            "Read the dialogue and the reply.",
            "Check that the reply follows from the last turns and stays on topic.",
        ),
        "Is this a coherent response given the dialogue history?",
    ),
    Dimension(
        "engagingness",
        "The reply is interesting: it adds something to the conversation and invites the other person to go on.",
        THREE,
        THREE,
        (
            "Read the dialogue and the reply.",
            "Judge whether the reply is interesting and keeps the conversation going.",
        ),
        "Is this an engaging and informative response according to the dialogue history and fact?",
    ),
    Dimension(
        "groundedness",
        "The reply uses the given fact: the information it gives comes from the fact.",
        UNIT,
        UNIT,
        (
            "Read the fact and the reply.",
            "Check whether the reply uses the information of the fact (1) or not (0).",
        ),
        "Is this response consistent with knowledge in the fact?",
    ),
)

IFBENCH_DIMENSION = Dimension(
    "follows",
    "The response follows the instruction of the prompt that is being checked.",
    UNIT,
    UNIT,
    (),
    "Does the response follow every instruction of the prompt?",
)

#: Reference figures quoted in docs (SummEval summary-level Spearman).
SUMMEVAL_REFERENCE: dict[str, dict[str, float]] = {
    "UniEval": {"coherence": 0.575, "consistency": 0.446, "fluency": 0.449, "relevance": 0.426},
    "BinEval (Claude Sonnet 4)": {"consistency": 0.655, "avg": 0.563},
    "G-Eval (GPT-4)": {"avg": 0.514},
}

#: The benchmark datasets by the name given on the command line: the one list of datasets. A spec
#: added here is a choice of ``bineval bench`` and runs with every method it lists.
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "summeval",
            SUMMARY_TASK,
            _summary_dimensions(["coherence", "consistency", "fluency", "relevance"]),
            "summary-level",
            "Article",
            "Summary",
            load_summeval,
            reference=SUMMEVAL_REFERENCE,
        ),
        DatasetSpec(
            "topical-chat",
            DIALOGUE_TASK,
            DIALOGUE_DIMENSIONS,
            "pooled",
            "Fact and dialogue",
            "Reply",
            load_topical_chat,
            methods=METHODS,
        ),
        DatasetSpec(
            "qags-cnndm",
            SUMMARY_TASK,
            _qags_dimensions(),
            "pooled",
            "Article",
            "Summary",
            partial(load_qags, which="cnndm"),
        ),
        DatasetSpec(
            "qags-xsum",
            XSUM_TASK,
            _qags_dimensions(),
            "pooled",
            "Article",
            "Summary",
            partial(load_qags, which="xsum"),
            binary_dimension="consistency",
        ),
        DatasetSpec(
            "ifbench",
            IFBENCH_TASK,
            (IFBENCH_DIMENSION,),
            "ifbench",
            "Prompt",
            "Response",
            load_ifbench,
            binary_dimension="follows",
            methods=("bineval", "unieval", "overlap"),
        ),
    )
}

#: The name of user data (``bineval bench custom --data FILE ...``): its spec comes from :class:`CustomData`.
CUSTOM = "custom"


def dataset_names() -> list[str]:
    """Every name ``bineval bench`` accepts: the registered datasets, then ``custom``."""
    return [*DATASETS, CUSTOM]


@dataclass(frozen=True)
class CustomData:
    """User data: ``--data FILE --source-key K --output-key K --score-key K... [--group-key K] --task TEXT``.

    One dimension per score key (named as given). A dimension's definition comes from ``definitions``
    (``--dimension NAME=DEFINITION``), else from the built-in dimension of the same name (the last dotted
    part of the key), else a generic sentence. Its human scale is the range of the loaded scores.
    """

    path: str
    source_key: str
    output_key: str
    score_keys: tuple[str, ...]
    task: str
    group_key: str | None = None
    definitions: dict[str, str] = field(default_factory=dict)
    scale: tuple[float, float] = (1.0, 5.0)

    def read(self, limit: int | None = None) -> list[Item]:
        """The first ``limit`` records of the file (all when None)."""
        return load_custom(self.path, self.source_key, self.output_key, list(self.score_keys),
                           group_key=self.group_key, limit=limit)

    def load(self, *, limit: int | None = None, docs: int | None = None) -> tuple[DatasetSpec, list[Item]]:
        """The spec (human scales from the scores read) and the selected items."""
        items = self.read(limit if docs is None else None)
        return self.spec(items), select_items(items, limit=limit, docs=docs)

    def spec(self, items: Sequence[Item]) -> DatasetSpec:
        dims: list[Dimension] = []
        for key in self.score_keys:
            short = key.rsplit(".", 1)[-1]
            definition = self.definitions.get(key) or self.definitions.get(short) or BUILTIN_DIMENSIONS.get(short)
            if not definition:
                definition = f"The response is good with respect to {short.replace('_', ' ')}."
            values = [it.human[key] for it in items if key in it.human]
            dims.append(
                Dimension(
                    key,
                    definition,
                    Scale(min(values), max(values)) if values else UNIT,
                    Scale(*self.scale),
                    (
                        "Read the input and the response.",
                        f"Judge the response on {short.replace('_', ' ')} as defined.",
                    ),
                    f"Is this a good response with respect to {short.replace('_', ' ')}?",
                )
            )
        protocol: Protocol = "summary-level" if self.group_key is not None else "pooled"
        return DatasetSpec(CUSTOM, self.task, tuple(dims), protocol, "Input", "Response", lambda _dir: self.read())


def ifbench_question(instruction_id: str, kwargs: Mapping[str, object] | None) -> str:
    """One yes/no question for an IFBench constraint, from its id and arguments.

    The constraint is stated in the prompt in its own words; the question names it and its arguments
    so that the judge can find it there, e.g. ``Does the response follow the prompt's instruction on
    "count: keywords multiple" (keyword1: kaleidoscope, keyword2: nebula)?``.
    """
    group, _, name = instruction_id.partition(":")
    readable = f"{group.replace('_', ' ')}: {name.replace('_', ' ')}" if name else group.replace("_", " ")
    args = ""
    if kwargs:
        parts = [f"{k}: {v}" for k, v in kwargs.items() if v not in (None, "", [], {})]
        if parts:
            args = " (" + ", ".join(parts) + ")"
    return f'Does the response follow the prompt\'s instruction on "{readable}"{args}?'
