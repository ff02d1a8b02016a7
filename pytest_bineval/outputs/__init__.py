"""Outputs of a run, each a pure function of :class:`~pytest_bineval.record.EvaluationRecord` objects
(or a :class:`~pytest_bineval.record.ReportDocument`): terminal sections and summary, ..."""
