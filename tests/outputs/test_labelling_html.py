"""The HTML page's labelling data (pytest_bineval.outputs.labelling_html and its templates), rendered without a
browser: each row's test id, index and output digest in one escaped attribute, the labels of the run's file on their
verdicts, questions decided by code marked as such; the browser test drives the page itself."""

from __future__ import annotations

import html
import json
import re

from labelled import document, label, record

from pytest_bineval.calibrate import calibrate
from pytest_bineval.labels import parse_labels
from pytest_bineval.outputs.html import render_html

Q1, Q2 = "Is the date right?", "Is it at most 40 words?"


def test_rows_labels_and_code_checks_are_in_the_page() -> None:
    hostile = 'tests/test_x.py::test_a["></section><script>window.__pwned=1</script>]'
    rec = record(hostile, {Q1: "yes", Q2: "no"}, output="out")
    code = rec.verdicts[1].model_copy(update={"decided_by": "code"})
    rec = rec.model_copy(update={"verdicts": [rec.verdicts[0], code]})
    labels = parse_labels(label(rec, Q1, "no", labeler="ana", note="wrong <b>date</b>").to_line(), "l")
    doc = document([rec]).model_copy(update={"calibration": calibrate([rec], labels, "l.jsonl")})
    page = render_html(doc)
    found = re.search(r'<section class="labelling" id="labelling" data-report="[^"]*" data-rows="([^"]*)"', page)
    assert found is not None
    assert json.loads(html.unescape(found.group(1))) == [[hostile, 0, rec.output_digest]]
    assert "<script>window.__pwned" not in page and page.count("<script") == 1
    assert ('<span class="lab" data-answer="no" data-labeler="ana" data-note="wrong &lt;b&gt;date&lt;/b&gt;">'
            '</span>') in page
    assert page.count('<span class="lab" data-code="1"></span>') == 1
    assert 'id="calibration"' in page and "1 labels: 1 used" in page


def test_a_page_without_labels_has_no_calibration_and_no_marks() -> None:
    page = render_html(document([record("t.py::test_a", {Q1: "yes"})]))
    assert 'id="labelling"' in page and 'id="calibration"' not in page and 'class="lab"' not in page
