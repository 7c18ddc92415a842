"""The router's dense-evidence guard: a no-retrieval decision yields when one passage is close to the question in the
dense embedding space, whatever words it uses (issue #34: "What topic do private bills typically have?" went to
out-of-scope over a corpus whose passage says "Private bills normally relate to large-scale development projects":
two of its four terms, below the BM25 evidence guard's four).

    nice -n 10 .venv/bin/python bench/route_dense_guard.py [--datasets DIR] [--report]

Every routing-set row (train/sets/routing.jsonl: corpus questions, chitchat and out-of-scope lines, each
asked in front of one corpus) is taken through the product's offline decision with every existing guard (the
thresholds, keyword, name and BM25 evidence guards at their shipped settings; the train split scored by 5-fold CV
probabilities as bench/route_evidence.py does, the test split by the shipped model). For the rows still sent to
no retrieval, the guard's feature is the best cosine between the question and a passage of that corpus under the
product's dense embedder (all-MiniLM-L6-v2, the corpora chunked as ingest does).

Rule, fixed before any test number and applied to the train split of the PUBLIC corpora only (twowiki, scifact,
codebase; the sample corpus's rows never choose anything): among thresholds that send at most 2% of those train
chitchat / out-of-scope lines to retrieval in addition, the lowest (it fires on the most corpus questions). --report
then gives the chosen threshold on the test split (public corpora, and the sample corpus apart), on xquad's 177
English questions over its English paragraphs, and on the sample corpus's question sets.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, datasets_dir, grid, num, table, write_result  # noqa: E402
from route import cv_probs  # noqa: E402
from route_evidence import CORPUS_CLASSES, SAMPLE_SETS, build_indexes, routed  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.ingest.chunk import chunk_document  # noqa: E402
from core.ingest.parse import parse  # noqa: E402
from core.retrieve.bm25 import BM25Index, BM25Params  # noqa: E402
from train.route_data import corpus_texts  # noqa: E402
from core.route.features import coverage  # noqa: E402
from core.route.router import (  # noqa: E402
    ABSTAIN,
    NO_RETRIEVAL,
    ROUTING_FILE,
    Example,
    ShippedRouter,
    evidence_guard,
    load_examples,
)

THRESHOLDS = tuple(round(0.30 + 0.025 * i, 3) for i in range(21))  # 0.30 .. 0.80
MAX_EXTRA_SENT = 0.02
PUBLIC = ("twowiki", "scifact", "codebase")


def chunk_texts(name: str, texts: Sequence[str]) -> list[str]:
    c = PipelineConfig().chunking
    out: list[str] = []
    for i, t in enumerate(texts):
        doc = parse(f"{name}-{i}.txt", t.encode("utf-8"))
        out += [ch.text for ch in chunk_document(doc, f"{name}-{i}", strategy=c.strategy, size=c.size_tokens,
                                                 overlap=c.overlap_tokens)]
    return out


class DenseTop:
    """The best cosine of a question against each corpus's chunk vectors (the product's embedder)."""

    def __init__(self, embedder: Any, corpora: dict[str, list[str]]) -> None:
        self.embedder = embedder
        self.mats = {}
        for name, texts in corpora.items():
            m = np.asarray(embedder.encode(texts), dtype=np.float32)
            self.mats[name] = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
            print(f"  {name}: {len(texts)} chunks embedded", flush=True)

    def top(self, corpus: str, questions: Sequence[str]) -> list[float]:
        q = np.asarray(self.embedder.encode(list(questions)), dtype=np.float32)
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        return [float(v) for v in (q @ self.mats[corpus].T).max(axis=1)]


def decided(rows: list[dict[str, Any]], index: dict[str, BM25Index]) -> None:
    """Each row's decision with every shipped guard (the BM25 evidence guard included): 'final'."""
    rc = PipelineConfig().router
    for r in rows:
        ev = r.pop("ev")
        fired = r["base"] in NO_RETRIEVAL and bool(evidence_guard(
            ev, min_terms=rc.evidence_min_terms, min_share=rc.evidence_min_share,
            unknown_weight=rc.evidence_unknown_weight))
        r["final"] = ABSTAIN if fired else r["base"]


def rows_for(examples: Sequence[Example], corpora: Sequence[str], probs: Sequence[dict[str, float]],
             indexes: dict[str, BM25Index]) -> list[dict[str, Any]]:
    rc = PipelineConfig().router
    out = []
    for e, c, p in zip(examples, corpora, probs):
        idx = indexes[c]
        out.append({"text": e.text, "label": e.label, "corpus": c,
                    "base": routed(e.text, p, e.coverage, idx, rc.min_confidence, rc.refuse_confidence,
                                   weighted=False),
                    "ev": idx.best_passage_terms(e.text)})
    decided(out, indexes)
    return out


def asked_rows(questions: Sequence[str], corpus: str, indexes: dict[str, BM25Index], router: ShippedRouter,
               dense: DenseTop) -> list[dict[str, Any]]:
    """Corpus questions asked in front of one corpus: the shipped router's decision and the dense top cosine."""
    idx = indexes[corpus]
    ex = [Example(q, "factoid", coverage(idx.tokens(q), idx.vocabulary())) for q in questions]
    pr = [dict(zip(router.classes, map(float, p))) for p in router.probabilities([e.text for e in ex],
                                                                              [e.coverage for e in ex])]
    rows = rows_for(ex, [corpus] * len(ex), pr, indexes)
    for r, v in zip(rows, dense.top(corpus, [r["text"] for r in rows])):
        r["top"] = v
    return rows


def stats(rows: Sequence[dict[str, Any]], t: float | None) -> dict[str, Any]:
    corpus = [r for r in rows if r["label"] in CORPUS_CLASSES]
    other = [r for r in rows if r["label"] not in CORPUS_CLASSES]
    fires = (lambda r: t is not None and r["final"] in NO_RETRIEVAL and r["top"] >= t)
    return {"threshold": t, "corpus_questions": len(corpus),
            "corpus_without_retrieval_before": sum(r["final"] in NO_RETRIEVAL for r in corpus),
            "corpus_without_retrieval_after": sum(r["final"] in NO_RETRIEVAL and not fires(r) for r in corpus),
            "non_corpus_lines": len(other),
            "non_corpus_without_retrieval_before": sum(r["final"] in NO_RETRIEVAL for r in other),
            "extra_sent_to_retrieval": sum(fires(r) for r in other),
            "extra_sent_rate": round(sum(fires(r) for r in other) / max(1, len(other)), 4)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    cfg = PipelineConfig()
    b = cfg.bm25
    params = BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem)
    root = datasets_dir(args.datasets)
    print("indexes:")
    indexes = build_indexes(root, params)
    embedder = build_deps(cfg).embedder
    print(f"embedder: {embedder.model_id}")
    texts = {"sample": [], **{n: chunk_texts(n, list(corpus_texts(n, root))) for n in PUBLIC}}
    for p in sorted((ROOT / "sample_corpus" / "docs").iterdir()):
        doc = parse(p.name, p.read_bytes())
        c = cfg.chunking
        texts["sample"] += [ch.text for ch in chunk_document(doc, p.stem, strategy=c.strategy, size=c.size_tokens,
                                                             overlap=c.overlap_tokens)]
    xq = [json.loads(x) for x in (root / "xquad_crosslingual" / "questions.jsonl").read_text().splitlines() if x]
    xq_corpus = [json.loads(x) for x in (root / "xquad_crosslingual" / "corpus_en.jsonl").read_text().splitlines()
                 if x]
    texts["xquad_en"] = [f"{r['title']}\n{r['text']}" for r in xq_corpus]
    indexes["xquad_en"] = BM25Index([str(i) for i in range(len(texts["xquad_en"]))], texts["xquad_en"], params)
    dense = DenseTop(embedder, texts)

    raw = [json.loads(x) for x in ROUTING_FILE.read_text(encoding="utf-8").splitlines() if x.strip()]
    train, test = load_examples("train"), load_examples("test")
    train_c = [r["corpus"] for r in raw if r["split"] == "train"]
    test_c = [r["corpus"] for r in raw if r["split"] == "test"]
    rows = rows_for(train, train_c, cv_probs(train), indexes)
    for c in set(train_c):
        sel = [r for r in rows if r["corpus"] == c]
        for r, v in zip(sel, dense.top(c, [r["text"] for r in sel])):
            r["top"] = v
    public = [r for r in rows if r["corpus"] in PUBLIC]
    sweep = [stats(public, t) for t in THRESHOLDS]
    ok = [s for s in sweep if s["extra_sent_rate"] <= MAX_EXTRA_SENT]
    chosen = min(ok, key=lambda s: s["threshold"])["threshold"] if ok else None
    print(table(["threshold", "corpus no-retrieval before", "after", "extra lines sent", "rate"],
                [[s["threshold"], s["corpus_without_retrieval_before"], s["corpus_without_retrieval_after"],
                  s["extra_sent_to_retrieval"], s["extra_sent_rate"]] for s in sweep]))
    print(f"chosen on the public corpora's train split: {chosen}")
    shipped = cfg.router.dense_guard_min_cosine
    result: dict[str, Any] = {
        "benchmark": "route_dense_guard", "embedder": embedder.model_id,
        "rule": "train split (5-fold CV probabilities), public corpora only (twowiki, scifact, codebase): the lowest "
                "threshold that sends at most 2% of their chitchat / out-of-scope lines to retrieval in addition to "
                "what the shipped guards already send",
        "train_public": {"sweep": sweep, "chosen": chosen},
        "shipped": shipped,
    }
    if args.report:
        sr = ShippedRouter()
        tp = [dict(zip(sr.classes, map(float, p))) for p in sr.probabilities([e.text for e in test],
                                                                          [e.coverage for e in test])]
        trows = rows_for(test, test_c, tp, indexes)
        for c in set(test_c):
            sel = [r for r in trows if r["corpus"] == c]
            for r, v in zip(sel, dense.top(c, [r["text"] for r in sel])):
                r["top"] = v
        tpub = [r for r in trows if r["corpus"] in PUBLIC]
        tsam = [r for r in trows if r["corpus"] == "sample"]
        result["test"] = {
            "public": {"without": stats(tpub, None), "chosen": stats(tpub, chosen)},
            "sample": {"without": stats(tsam, None), "chosen": stats(tsam, chosen)},
            "sent_lines": [r["text"] for r in trows if r["label"] not in CORPUS_CLASSES
                           and r["final"] in NO_RETRIEVAL and chosen is not None and r["top"] >= chosen],
            "still_without_retrieval": [r["text"] for r in trows if r["label"] in CORPUS_CLASSES
                                        and r["final"] in NO_RETRIEVAL and (chosen is None or r["top"] < chosen)]}
        xrows = asked_rows([q["question"] for q in xq if q["lang"] == "en"], "xquad_en", indexes, sr, dense)
        result["xquad_en"] = {"chosen": stats(xrows, chosen), "without": stats(xrows, None),
                              "rows_without_retrieval": [{"text": r["text"], "top": round(r["top"], 3)}
                                                         for r in xrows if r["final"] in NO_RETRIEVAL]}
        per_set = {}
        for name in SAMPLE_SETS:
            qs = [json.loads(x) for x in (ROOT / "sample_corpus" / name).read_text(encoding="utf-8").splitlines()
                  if x.strip()]
            srows = asked_rows([q["query"] for q in qs], "sample", indexes, sr, dense)
            per_set[name] = {"before": sum(r["final"] in NO_RETRIEVAL for r in srows),
                             "after": sum(r["final"] in NO_RETRIEVAL and (chosen is None or r["top"] < chosen)
                                          for r in srows), "n": len(srows)}
        result["sample_sets"] = per_set
        print(json.dumps({k: result[k] for k in ("test", "xquad_en", "sample_sets")}, indent=1)[:3000])
    path = write_result("route_dense_guard", result, args.out, argv=argv, table=MEASURED_ROUTE_DENSE_GUARD)
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_route_dense_guard(d: dict[str, Any], file: str) -> list[str]:
    """The router's dense-evidence guard: threshold chosen on the public corpora's train split, reported apart."""
    tr = d.get("train_public") or {}
    out = ["### The router's dense-evidence guard", "", CAPTION, "",
           f"Rule: {d.get('rule', 'not recorded')}. Chosen: {num(tr.get('chosen'))} (the product ships "
           "`router.dense_guard_min_cosine`; see docs/config.md). Counts are decisions left without retrieval "
           "after every other shipped guard.", ""]
    rows = []
    for label, key in (("test, public corpora", "public"), ("test, sample corpus", "sample")):
        t = ((d.get("test") or {}).get(key) or {})
        w, c = t.get("without") or {}, t.get("chosen") or {}
        rows.append([label, f"{num(w.get('corpus_without_retrieval_before'))} → "
                            f"{num(c.get('corpus_without_retrieval_after'))} of {num(w.get('corpus_questions'))}",
                     f"{num(c.get('extra_sent_to_retrieval'))} of {num(w.get('non_corpus_lines'))}"])
    x = d.get("xquad_en") or {}
    if x:
        rows.append(["xquad English questions", f"{num((x.get('without') or {}).get('corpus_without_retrieval_before'))}"
                     f" → {num((x.get('chosen') or {}).get('corpus_without_retrieval_after'))} of "
                     f"{num((x.get('chosen') or {}).get('corpus_questions'))}", "–"])
    for name, st in (d.get("sample_sets") or {}).items():
        rows.append([f"sample `{name}`", f"{num(st.get('before'))} → {num(st.get('after'))} of {num(st.get('n'))}",
                     "–"])
    out.append(grid(["rows", "corpus questions without retrieval (before → after)",
                         "chitchat / out-of-scope lines sent to retrieval"], rows))
    return out


MEASURED_ROUTE_DENSE_GUARD = Table(measured_route_dense_guard, 'Routing and query transforms')


if __name__ == "__main__":
    raise SystemExit(main())
