"""Checks: questions that code answers exactly (the catalogue, the tool-call kinds that read a conversation) and the
extractor that finds them in a task text."""

from __future__ import annotations

from ..errors import CheckError, CheckTimeout
from .catalogue import KINDS, Check, CheckResult, Kind, parse_check, run_check
from .tools import TOOL_KINDS

KINDS.update({k.name: k for k in TOOL_KINDS})  # one catalogue: the tool kinds are checks like the others

__all__ = ["KINDS", "Check", "CheckError", "CheckResult", "CheckTimeout", "Kind", "parse_check", "run_check"]
