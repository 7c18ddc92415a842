"""Builds the router's labelled set (train/sets/routing.jsonl) from the public shared datasets and the handwritten lines
(train/sets/routing_handwritten.txt): `python -m train.route_data [DATASETS_ROOT]`; `python -m train.route` fits.

Public data only: CLINC chitchat / out-of-scope utterances, 2WikiMultihopQA, SciFact and the Anthropic codebase
questions, and lines written for this repo about those corpora or none. Nothing comes from sample_corpus/ (the demo
corpus is never a fitting target). The split is drawn here, once, per (source, label) stratum with a fixed seed, and
written into the file, so tuning never sees the test rows. Each row also carries the share of its query terms found
in the vocabulary of the corpus it was asked about (the router's corpus feature): questions from a dataset are
measured against that dataset's own corpus; chitchat and out-of-scope lines against one of the public corpora in
turn (a router meets them in front of whatever corpus is loaded).
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Iterable

from core.ingest.parse import parse
from core.route.features import coverage
from core.route.router import ROUTING_FILE
from core.text import tokenize

REPO = Path(__file__).resolve().parents[1]
HANDWRITTEN = REPO / "train" / "sets" / "routing_handwritten.txt"
TEST_SHARE = 0.3
SEED = 16
CORPORA = ("twowiki", "scifact", "codebase")  # the public corpora the rows are measured against

TWOWIKI_CLASS = {"comparison": "comparison", "bridge_comparison": "comparison", "compositional": "multi-hop",
                 "inference": "multi-hop"}
# The sample corpus's eval types as router classes: benches score the router on the demo set, never fit on it.
SAMPLE_CLASS = {"factoid": "factoid", "exact-id": "factoid", "unanswerable": "factoid", "multi-hop": "multi-hop",
                "global": "global-summary"}  # unanswerable questions are still about the corpus: factoid, not refusal


def _jsonl(path: Path) -> Iterable[dict]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def corpus_texts(name: str, root: Path) -> Iterable[str]:
    if name == "twowiki":
        for r in _jsonl(root / "twowiki_multihop" / "corpus.jsonl"):
            yield f"{r['title']}\n{r['text']}"
    elif name == "scifact":
        for r in _jsonl(root / "beir_scifact" / "corpus.jsonl"):
            yield f"{r.get('title', '')}\n{r['text']}"
    elif name == "codebase":
        for d in json.loads((root / "anthropic_codebase" / "codebase_chunks.json").read_text(encoding="utf-8")):
            yield d["content"]
    elif name == "sample":  # benches measure on the demo corpus; the labelled set never uses it
        for p in sorted((REPO / "sample_corpus" / "docs").iterdir()):
            yield parse(p.name, p.read_bytes()).text
    else:
        raise ValueError(f"unknown corpus {name!r}")


def vocabulary(name: str, root: Path) -> frozenset[str]:
    vocab: set[str] = set()
    for text in corpus_texts(name, root):
        vocab.update(tokenize(text))
    return frozenset(vocab)


def raw_rows(root: Path) -> list[dict]:
    """(text, label, source, corpus) for every labelled question; corpus '' means 'ask each corpus in turn'."""
    rows: list[dict] = []
    for r in _jsonl(root / "routing_chitchat" / "utterances.jsonl"):
        label = "chitchat" if r["label"] == "chitchat" else "out-of-scope"
        rows.append({"text": r["text"], "label": label, "source": "clinc", "corpus": ""})
    for r in _jsonl(root / "twowiki_multihop" / "questions.jsonl"):
        rows.append({"text": r["question"], "label": TWOWIKI_CLASS[r["type"]], "source": "twowiki",
                     "corpus": "twowiki", "type": r["type"]})
    seen: set[str] = set()
    for r in _jsonl(root / "anthropic_codebase" / "evaluation_set.jsonl"):
        if r["query"] not in seen:  # two query strings occur twice
            seen.add(r["query"])
            rows.append({"text": r["query"], "label": "factoid", "source": "codebase", "corpus": "codebase"})
    for r in _jsonl(root / "beir_scifact" / "queries.jsonl"):
        rows.append({"text": r["text"], "label": "factoid", "source": "scifact", "corpus": "scifact"})
    for line in HANDWRITTEN.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            label, text = line.split("\t", 1)
            corpus = "" if label in ("chitchat", "out-of-scope") else "*"  # '*': written about one of the corpora
            rows.append({"text": text.strip(), "label": label, "source": "handwritten", "corpus": corpus})
    return rows


def build(root: Path) -> list[dict]:
    rows = raw_rows(root)
    vocabs = {name: vocabulary(name, root) for name in CORPORA}
    turn = 0
    for r in rows:
        toks = tokenize(r["text"])
        if r["corpus"] == "":
            r["corpus"] = CORPORA[turn % len(CORPORA)]
            turn += 1
            r["coverage"] = round(coverage(toks, vocabs[r["corpus"]]), 4)
        elif r["corpus"] == "*":
            best = max(CORPORA, key=lambda c: coverage(toks, vocabs[c]))
            r["corpus"], r["coverage"] = best, round(coverage(toks, vocabs[best]), 4)
        else:
            r["coverage"] = round(coverage(toks, vocabs[r["corpus"]]), 4)
    rng = random.Random(SEED)
    strata: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        strata.setdefault((r["source"], r["label"]), []).append(r)
    for key in sorted(strata):
        members = strata[key]
        test = set(rng.sample(range(len(members)), round(len(members) * TEST_SHARE)))
        for i, r in enumerate(members):
            r["split"] = "test" if i in test else "train"
    return rows


def main(argv: list[str]) -> None:
    root = Path(argv[0]) if argv else REPO.parent / "shared" / "datasets"
    rows = build(root)
    ROUTING_FILE.parent.mkdir(parents=True, exist_ok=True)
    with ROUTING_FILE.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {ROUTING_FILE.relative_to(REPO)}")


if __name__ == "__main__":
    main(sys.argv[1:])
