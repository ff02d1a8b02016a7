"""The run's data, split by reader: :mod:`.record` (one evaluation's record and its parts, what judged it),
:mod:`.matching` (the questions of two runs matched), :mod:`.suite` (the gate's suite-level verdicts and what
confirming flips cost), :mod:`.comparison` (this run against a baseline), :mod:`.reading` (the report file's
checks), :mod:`.document` (the finished report every output reads), :mod:`.ledger` (what a run found and spent,
with its one merge), :mod:`.relay` (the ledger's pytest-xdist relay), :mod:`.shards` (one report from a suite's
shards), :mod:`.source_change` and :mod:`.batch` (parts of the document).

Imports run one way: record <- matching <- suite <- comparison <- reading, document <- ledger <- relay, shards.
Nothing here imports the session, the engine or an output.
"""
