"""Meta-evaluation of judges against human judgments (``bineval bench``).

Data flow one way: ``specs`` registers the datasets (:data:`~.specs.DATASETS`, each spec loading itself
through ``datasets``); ``runner`` runs the ``methods`` over a dataset's items and returns a plain
:class:`~.runner.BenchRun`; ``report`` turns that run into figures (with ``stats``), JSON and markdown;
``cli`` wires the command to them.
"""
