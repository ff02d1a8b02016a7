"""What each benchmark dataset is judged on: the task a user would write, the dimensions, the scales,
the correlation protocol, and the per-dimension texts of the G-Eval- and UniEval-style baselines.

The task prompts are written the way a user would write them for the task; they are not tuned on the
data. The dimension definitions of SummEval/QAGS are the library's built-in ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..dimensions import BUILTIN_DIMENSIONS

Protocol = Literal["summary-level", "pooled", "ifbench"]

#: Dataset names as given on the command line -> names of :func:`datasets.load_dataset`.
BENCH_DATASETS: dict[str, str] = {
    "summeval": "summeval",
    "topical-chat": "topical_chat",
    "qags-cnndm": "qags_cnndm",
    "qags-xsum": "qags_xsum",
    "ifbench": "ifbench",
    "custom": "custom",
}

#: All methods, in the order they are run and reported.
METHODS: tuple[str, ...] = ("bineval", "geval", "unieval", "likelihood", "overlap")


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
    """How a dataset is benchmarked."""

    name: str
    task: str
    dimensions: tuple[Dimension, ...]
    protocol: Protocol
    source_label: str
    output_label: str
    binary_dimension: str | None = None  # human labels 0/1: also report AUROC
    methods: tuple[str, ...] = METHODS
    reference: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

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
        return DatasetSpec(
            self.name,
            self.task,
            keep,
            self.protocol,
            self.source_label,
            self.output_label,
            self.binary_dimension if self.binary_dimension in names else None,
            self.methods,
            self.reference,
        )


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

SPECS: dict[str, DatasetSpec] = {
    "summeval": DatasetSpec(
        "summeval",
        SUMMARY_TASK,
        _summary_dimensions(["coherence", "consistency", "fluency", "relevance"]),
        "summary-level",
        "Article",
        "Summary",
        reference=SUMMEVAL_REFERENCE,
    ),
    "topical-chat": DatasetSpec(
        "topical-chat",
        DIALOGUE_TASK,
        DIALOGUE_DIMENSIONS,
        "pooled",
        "Fact and dialogue",
        "Reply",
    ),
    "qags-cnndm": DatasetSpec("qags-cnndm", SUMMARY_TASK, _qags_dimensions(), "pooled", "Article", "Summary"),
    "qags-xsum": DatasetSpec(
        "qags-xsum",
        XSUM_TASK,
        _qags_dimensions(),
        "pooled",
        "Article",
        "Summary",
        binary_dimension="consistency",
    ),
    "ifbench": DatasetSpec(
        "ifbench",
        IFBENCH_TASK,
        (IFBENCH_DIMENSION,),
        "ifbench",
        "Prompt",
        "Response",
        binary_dimension="follows",
        methods=("bineval", "unieval", "overlap"),
    ),
}


def custom_spec(
    task: str,
    score_keys: Sequence[str],
    definitions: Mapping[str, str],
    human_ranges: Mapping[str, Scale],
    geval_scale: Scale,
    grouped: bool,
) -> DatasetSpec:
    """The spec of a custom JSONL: one dimension per score key (named as given).

    A dimension's definition comes from ``definitions`` (``--dimension NAME=DEFINITION``), else from the
    built-in dimension of the same name (the last dotted part of the key), else a generic sentence.
    """
    dims: list[Dimension] = []
    for key in score_keys:
        short = key.rsplit(".", 1)[-1]
        definition = definitions.get(key) or definitions.get(short) or BUILTIN_DIMENSIONS.get(short)
        if not definition:
            definition = f"The response is good with respect to {short.replace('_', ' ')}."
        dims.append(
            Dimension(
                key,
                definition,
                human_ranges[key],
                geval_scale,
                (
                    "Read the input and the response.",
                    f"Judge the response on {short.replace('_', ' ')} as defined.",
                ),
                f"Is this a good response with respect to {short.replace('_', ' ')}?",
            )
        )
    return DatasetSpec("custom", task, tuple(dims), "summary-level" if grouped else "pooled", "Input", "Response")


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
