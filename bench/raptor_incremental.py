"""RAPTOR's incremental update against a full rebuild when documents arrive: time, summaries rewritten, and how close
the updated tree's retrieval stays to the rebuilt one's.

    .venv/bin/python bench/raptor_incremental.py --db FILE [--new 2]

In memory (nothing is written to --db, a sample-corpus database with vectors): the tree is built over the chunks of
all documents but the last --new (by document id), then those documents' chunks arrive: update_tree (new chunks join
their nearest level-1 cluster, only changed branches rewritten) against build_tree over all chunks. Extractive
summaries, default raptor.* settings, the active embedder. Retrieval: raptor_search's top 10 for every global
question of the sample sets (the same set bench/raptor.py uses), as overlap@10 between the two trees, and each tree's
gold-span recall@10. Writes bench/results/raptor_incremental.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import CAPTION, ROOT, Table, grid, num, table, write_result

sys.path.insert(0, str(ROOT))

from raptor import questions  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.metrics import span_in_text  # noqa: E402
from core.graph.raptor import build_tree, raptor_search, update_tree  # noqa: E402
from core.store import Store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--new", type=int, default=2, help="documents that arrive after the first build")
    args = ap.parse_args()
    cfg = PipelineConfig()
    r = cfg.raptor
    store = Store(args.db, read_only=True)
    deps = build_deps(cfg, store=store)
    ids, matrix = store.corpus.vectors(deps.embedder.model_id, "raw", "default")
    chunks = {c.chunk_id: c for c in store.corpus.chunks("default")}
    keep = [i for i, c in enumerate(ids) if c in chunks]
    ids, matrix = [ids[i] for i in keep], matrix[keep]
    docs = sorted({chunks[c].doc_id for c in ids})
    late = set(docs[-args.new:])
    first = [i for i, c in enumerate(ids) if chunks[c].doc_id not in late]
    kw = dict(cluster_size=r.cluster_size, max_levels=r.max_levels, summary_sentences=r.summary_sentences, seed=r.seed)
    texts = [chunks[c].text for c in ids]
    old, ov = build_tree([ids[i] for i in first], [texts[i] for i in first], matrix[first], deps.embedder,
                         corpus_version=1, **kw)
    t = time.perf_counter()
    inc, iv, rep = update_tree(old, ov, ids, texts, matrix, deps.embedder, corpus_version=2, **kw)
    inc_s = time.perf_counter() - t
    t = time.perf_counter()
    full, fv = build_tree(ids, texts, matrix, deps.embedder, corpus_version=2, **kw)
    full_s = time.perf_counter() - t
    qs = questions()
    qv = deps.embedder.encode([q["query"] for q in qs])

    def fetch(want: list[str]) -> dict:
        return {c: chunks[c] for c in want if c in chunks}

    overlap, rec = [], {"incremental": [], "full rebuild": []}
    for q, v in zip(qs, qv):
        a = [c.chunk_id for c in raptor_search(v, inc, iv, ids, matrix, fetch, k=10).candidates]
        b = [c.chunk_id for c in raptor_search(v, full, fv, ids, matrix, fetch, k=10).candidates]
        overlap.append(len(set(a) & set(b)) / 10)
        spans = [g["span"] for g in q["gold"]]
        for name, got in (("incremental", a), ("full rebuild", b)):
            hit = sum(1 for s in spans if any(span_in_text(s, chunks[c].text) for c in got))
            rec[name].append(hit / len(spans) if spans else 0.0)
    summary = {
        "chunks": len(ids), "new_chunks": rep.added, "new_documents": sorted(late), "update_mode": rep.mode,
        "incremental": {"seconds": round(inc_s, 3), "summaries_written": rep.rewritten, "nodes": len(inc),
                        "gold_recall@10": round(100 * statistics.mean(rec["incremental"]), 1)},
        "full rebuild": {"seconds": round(full_s, 3), "summaries_written": len(full), "nodes": len(full),
                         "gold_recall@10": round(100 * statistics.mean(rec["full rebuild"]), 1)},
        "top10_overlap": round(100 * statistics.mean(overlap), 1), "questions": len(qs)}
    print(table(["tree", "seconds", "summaries written", "nodes", "gold recall@10 %"],
                [[k, summary[k]["seconds"], summary[k]["summaries_written"], summary[k]["nodes"],
                  summary[k]["gold_recall@10"]] for k in ("incremental", "full rebuild")]))
    print(f"top-10 overlap of the two trees' raptor lists: {summary['top10_overlap']}% over {len(qs)} questions")
    write_result("raptor_incremental", {"db": args.db, "config": "default raptor.* settings, extractive summaries",
                                        "summary": summary}, table=MEASURED_RAPTOR_INCREMENTAL)


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_raptor_incremental(d: dict[str, Any], file: str) -> list[str]:
    """bench/raptor_incremental.py: RAPTOR's incremental update against a full rebuild."""
    s = d.get("summary") or {}
    out = ["### RAPTOR: incremental update against a full rebuild", "", CAPTION, "",
           f"{s.get('chunks')} chunks; the tree built without the last {len(s.get('new_documents') or [])} documents, "
           f"then their {s.get('new_chunks')} chunks arrive ({d.get('config')}). Retrieval: raptor_search's top 10 "
           f"for {s.get('questions')} global questions of the sample sets; the two trees' top 10 overlap "
           f"{num(s.get('top10_overlap'), 1)}%.", ""]
    out.append(grid(["tree", "seconds", "summaries written", "nodes", "gold recall@10 %"],
                        [[k, num((s.get(k) or {}).get("seconds"), 2), (s.get(k) or {}).get("summaries_written"),
                          (s.get(k) or {}).get("nodes"), num((s.get(k) or {}).get("gold_recall@10"), 1)]
                         for k in ("incremental", "full rebuild")]))
    return out


MEASURED_RAPTOR_INCREMENTAL = Table(measured_raptor_incremental, 'Offline answer and answer cache')


if __name__ == "__main__":
    main()
