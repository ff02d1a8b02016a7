"""Checks: questions that code answers exactly (the catalogue) and the extractor that finds them in a task text."""

from __future__ import annotations

from ..errors import CheckError, CheckTimeout
from .catalogue import KINDS, Check, CheckResult, Kind, parse_check, run_check

__all__ = ["KINDS", "Check", "CheckError", "CheckResult", "CheckTimeout", "Kind", "parse_check", "run_check"]
