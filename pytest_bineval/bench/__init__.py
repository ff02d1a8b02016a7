"""Meta-evaluation of judges against human judgments (the model-free part of ``bineval bench``).

``stats`` holds the correlation protocols and agreement figures; ``datasets`` reads the benchmark
data (SummEval, Topical-Chat, QAGS, IFBench, custom JSONL) from a data directory.
"""
