"""The redaction step: key-like environment values, named secrets and key shapes leave no string; a whole
document is redacted with the environment read once."""

from __future__ import annotations

import pytest

from pytest_bineval import redaction
from pytest_bineval.redaction import REDACTED, redact, redact_known, redact_obj, secret_values

KEY = "k3y-value-0123456789"


def test_environment_keys_named_values_and_key_shapes_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", KEY)
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be taken for a secret: ordinary words would vanish
    text = f"sent {KEY} with passphrase-of-the-day, Bearer abcdefghijkl and sk-proj1234567890 abc"
    out = redact(text, ["passphrase-of-the-day"])
    assert KEY not in out and "passphrase-of-the-day" not in out and "sk-proj" not in out
    assert "abcdefghijkl" not in out and out.endswith(" abc")
    assert out.count(REDACTED) == 4


def test_a_document_is_redacted_with_the_environment_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", KEY)
    reads = []
    real = redaction.secret_values

    def counted(extra: object = ()) -> list[str]:
        reads.append(1)
        return real(extra)  # type: ignore[arg-type]

    monkeypatch.setattr(redaction, "secret_values", counted)
    doc = {"a": [f"x {KEY}"] * 50, "b": {"c": KEY, "d": 3}}
    assert redact_obj(doc) == {"a": [f"x {REDACTED}"] * 50, "b": {"c": REDACTED, "d": 3}}
    assert len(reads) == 1


def test_redact_known_removes_what_it_is_given_and_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", KEY)
    found = secret_values()
    monkeypatch.delenv("MY_API_KEY")  # the list was read before: the value is still removed
    assert redact_known(f"a {KEY} b", found) == f"a {REDACTED} b"
    assert redact_known(f"a {KEY} b", []) == f"a {KEY} b"  # nothing given, nothing env-based removed
    assert redact_known("api_key=abc123def", []) == f"api_key={REDACTED}"  # the shapes still apply
