"""The run's data, split by reader: :mod:`.record` (one evaluation's record and its parts), :mod:`.comparison` (this
run against a baseline), :mod:`.document` (the finished report every output reads, and its file reader),
:mod:`.ledger` (what a run found and spent, with its one merge), :mod:`.relay` (the ledger's pytest-xdist relay),
:mod:`.shards` (one report from a suite's shards).

Imports run one way: record <- comparison <- document <- ledger <- relay, shards. Nothing here imports the session,
the engine or an output.
"""
