"""A task whose length and format are stated in it, decided by code: no judge request, the same verdict on every
run and every machine, the toy judge included.

The pinned checklist (__bineval__/test_form/) holds the questions the extractor found in FORM_TASK, each with its
check: "at most 40 words" (max_words) and "as a JSON object" (json). Neither needs the optional extra
`pytest-bineval[checks]` (sentence counts and language detection do). Checklist generation adds them the
same way to a generated checklist; a test of your own may also write them by hand in a pin.
"""

from __future__ import annotations

import json

import pytest
from pytest_bineval import BinevalAssertionError, assert_passes

FORM_TASK = 'Summarize the news article in at most 40 words, as a JSON object with a "summary" field.'
FORMAT = {"format": "The response has the length and the format the task asks for."}


@pytest.mark.bineval(task=FORM_TASK, dimensions=[FORMAT])
def test_length_and_format_are_decided_by_code() -> None:
    card = json.dumps({"summary": "Ferry crews in Port Ellin strike for 48 hours from Thursday. "
                                  "Emergency medical trips still run."})
    evaluation = assert_passes(card, threshold=1.0)
    assert [v.decided_by for v in evaluation.verdicts] == ["code", "code"]
    assert evaluation.usage.llm_calls == 0  # the judge was never asked

    rambling = ("The ferry strike starts on Thursday and lasts two days, so the crossings between Skarra and Port "
                "Ellin stop, the school on Skarra closes, trips are cancelled, only emergency medical trips still "
                "run, and talks between the union and the company go on all week.")
    with pytest.raises(BinevalAssertionError) as failure:
        assert_passes(rambling, threshold=1.0)
    reasons = {v.question: v.explanation for v in failure.value.evaluation.failed}  # type: ignore[union-attr]
    assert reasons == {"Does the response have at most 40 words?": "45 words; the limit is 40",
                       "Is the response valid JSON?": "not valid JSON: Expecting value at line 1, column 1"}
