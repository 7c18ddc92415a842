"""The 50 generated golden items judged by reading (issue #27 item 3): draws them and writes the verdicts.

    .venv/bin/python bench/golden_judged.py     # -> bench/sets/golden_judged_50.jsonl

17 items from each of the beir_scifact and twowiki_multihop cuts and 16 from anthropic_codebase, generated as
bench/golden_validity.py generates them (seed 0) from corpus cuts of 200, 200 and 40 documents (its first run's
cuts), drawn with seed 1. The verdicts in REJECT were
written by a person reading each question, its answer and its gold sentence: rejected when the question is not
understandable as a question (a fragment without its subject, a list of identifiers), when the gold does not give
its answer or the answer is no fact, when it is ambiguous (a person could not tell which passage is meant), or when
a near-miss or comparison reads as nonsense. They are keyed by position, so they hold for this generator version
only (core/eval/golden.py GENERATOR at the commit that wrote the file).
"""
import json
import random
import sys

sys.path.insert(0, '.')
from pathlib import Path
from core.eval.datasets import load_dataset, subsample
from core.eval.golden import Passage, generate
REJECT = {2: "fragment without a subject", 3: "near-miss reads as nonsense", 4: "near-miss reads as nonsense",
          5: "comparison of unrelated figures", 9: "fragment without a subject", 10: "near-miss reads as nonsense",
          12: "fragment without a subject", 13: "fragment without a subject",
          17: "comparison of unrelated figures (a boilerplate line)", 21: "near-miss reads as nonsense", 22: "comparison names neither subject",
          34: "near-miss reads as nonsense", 37: "near-miss reads as nonsense", 39: "answer is not a fact ('Self')",
          41: "anchor words are a list of identifiers, not a question", 48: "anchor words are a list of identifiers",
          50: "answer is not a fact ('01')"}
rows = []
i = 0
for name,(md,mq,n) in {"beir_scifact":(200,60,60),"twowiki_multihop":(200,60,60),"anthropic_codebase":(40,60,60)}.items():
    gs=subsample(load_dataset(name, Path('../shared/datasets')), max_docs=md, max_questions=mq, seed=0)
    pre=gs.predocs()
    ps=sorted([Passage(c, p.doc.name, p.doc.title or p.doc.name) for p in pre for c in p.chunks], key=lambda p:(p.chunk.doc_id,p.chunk.ordinal))
    items=generate(ps,n,seed=0)
    for it in random.Random(1).sample(items, 17 if name!="anthropic_codebase" else 16):
        i += 1
        rows.append({"n": i, "set": name, "id": it.item_id, "type": it.qtype, "query": it.query, "answer": it.answer,
                     "gold": [g.span for g in it.gold], "swap": it.meta.get("swap", ""),
                     "verdict": "reject" if i in REJECT else "accept", "why": REJECT.get(i, "")})
out = Path("bench/sets/golden_judged_50.jsonl")
out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
from collections import Counter
print(len(rows), Counter(r["verdict"] for r in rows), Counter((r["type"], r["verdict"]) for r in rows))
