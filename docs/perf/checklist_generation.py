"""Issue 11, item 3: where checklist generation time goes on the embedded model.

Generates ``bineval perf``'s task's checklist (one requirements call, one call per default dimension) without a
cache and prints, per call: prompt tokens (and how many were reused from the KV cache), completion tokens against
max_tokens, seconds, and how often the JSON grammar had to mask the whole vocabulary (``full_masks``) rather than
accept the chosen token (``checks``). Optional arguments override the embedded list penalties (presence,
frequency), e.g. ``0.5 0.3`` for the hosted models' values. Not part of the package; results in
docs/performance.md.

    python docs/perf/checklist_generation.py [PRESENCE FREQUENCY]
"""

import json
import sys
import time

from pytest_bineval import Engine, Settings
from pytest_bineval import checklist as C
from pytest_bineval.engine import run_sync
from pytest_bineval.llm import local
from pytest_bineval.llm.providers import embedded_model

m = embedded_model()
calls = []
orig_chat = m.chat
masks = {"n": 0, "allows": 0}
orig_mask = local._Grammar.mask
orig_allows = local._Grammar.allows


def mask(self, logits):
    masks["n"] += 1
    return orig_mask(self, logits)


def allows(self, t):
    masks["allows"] += 1
    return orig_allows(self, t)


local._Grammar.mask = mask
local._Grammar.allows = allows
orig_eval = m._eval_prompt


def chat(messages, **kw):
    llm = m._load()
    before = llm.input_ids[: llm.n_tokens].tolist()
    toks = m.prompt_tokens(messages)
    reused = 0
    for a, b in zip(before, toks, strict=False):
        if a != b:
            break
        reused += 1
    masks["n"] = 0
    masks["allows"] = 0
    t = time.perf_counter()
    out = orig_chat(messages, **kw)
    calls.append(
        {
            "prompt": len(toks),
            "reused": reused,
            "completion": out[3],
            "max_tokens": kw["max_tokens"],
            "seconds": round(time.perf_counter() - t, 2),
            "full_masks": masks["n"],
            "checks": masks["allows"],
            "schema": bool(kw.get("schema")),
            "text": out[0],
        }
    )
    return out


m.chat = chat

if len(sys.argv) > 2:
    C.EMBEDDED_LIST_SAMPLING.update(presence_penalty=float(sys.argv[1]), frequency_penalty=float(sys.argv[2]))
e = Engine(Settings(cache="off"))
t = time.perf_counter()
cl = run_sync(e.achecklist("Summarize the news article in 2-3 sentences for a busy reader."))
total = time.perf_counter() - t
for c in calls:
    print(json.dumps(c))
print(f"total {total:.1f}s, questions {len(cl.questions)}, usage {e.usage}")
