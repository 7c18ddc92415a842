"""GraphRAG benchmark: offline (statistical) graph build time and memory on beir_scifact, incremental update time,
local-search latency, and multi-hop recall on sample_corpus/eval.jsonl with the graph stages on vs off.

    .venv/bin/python bench/graph.py [--datasets DIR] [--queries N] [--skip-scifact] [--skip-multihop]

SciFact: corpus.jsonl is read directly, one chunk per abstract (title + text), written without vectors (the
builder needs none). Name embeddings (merge suggestions, embedding seeds) use the bundled MiniLM and are timed on
their own. Multi-hop: the sample corpus is ingested with the bundled MiniLM; the same pipeline runs with the graph
off and on (local search fused by RRF), scored by core.eval.metrics's span rule. Writes bench/results/graph.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from _common import (
    ROOT,
    PeakRSS,
    datasets_dir,
    machine_info,
    table,
    timed,
    utc_now,
    write_result,
)
from _common import CAPTION, Table, num  # noqa: E402

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import Deps  # noqa: E402
from core.eval.datasets import sample_set, scifact_predocs  # noqa: E402
from core.eval.run import NamedConfig, prepare, run_config  # noqa: E402
from core.graph.build import build_graph, refresh_suggestions  # noqa: E402
from core.graph.search import local_search  # noqa: E402
from core.graph.snapshot import GraphCache, active_graph, name_vectors  # noqa: E402
from core.models.embed import load_embedder  # noqa: E402
from core.store import Store  # noqa: E402
from core.types import Document  # noqa: E402

WS = "default"


def load_scifact(root: Path, store: Store) -> int:
    """Every SciFact abstract as one stored chunk (core.eval.datasets, as the evaluation lab loads it), no vectors."""
    docs = scifact_predocs(root / "beir_scifact", WS)
    for p in docs:
        store.corpus.put_document(p.doc, list(p.chunks), None, "none")
    return len(docs)


def _graph_counts(store: Store) -> dict:
    c = store.graph.counts(WS)
    return {k: c[k] for k in ("chunks", "mentions", "relations", "nodes", "edges", "communities")}


def bench_scifact(root: Path, n_queries: int, embedder) -> dict:
    store = Store(":memory:")
    with timed() as t_load:
        n_docs = load_scifact(root, store)
    print(f"scifact: {n_docs} documents loaded in {t_load[0]:.1f} s", file=sys.stderr)
    cfg = PipelineConfig().graph

    rss = PeakRSS()
    with rss.measure(), timed() as t_build:
        rep = build_graph(store, cfg, embedder=None, workspace=WS)  # extraction .. communities, no name vectors
    counts = _graph_counts(store)
    # Same build again under tracemalloc (it slows Python down, so it is not the timed run): Python heap peak.
    tracemalloc.start()
    with timed() as t_traced:
        build_graph(store, cfg, embedder=None, workspace=WS, full=True)
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert _graph_counts(store) == counts, "a full rebuild must reproduce the graph"

    # Merge suggestions over the whole graph, as the first build with an embedder does them: every active name
    # embedded once (then stored), then all pairs compared.
    active = [n[1] for n in active_graph(store, WS, cfg.min_phrase_chunks).nodes]
    with timed() as t_names_first:
        name_vectors(active, embedder, store, WS)
    with timed() as t_sugg:
        n_sugg = refresh_suggestions(store, cfg, embedder, WS, None)
    queue = store.review.queue("pending", WS)
    sample = [(q.keep_name, q.other_name, round(q.score, 3)) for q in queue[:15] + queue[-15:]]

    # Incremental: 50 documents leave, then come back; each update touches only their chunks.
    docs = store.corpus.documents(WS)[:50]
    saved = [(store.corpus.document_text(d.doc_id, WS), store.corpus.chunks(WS, d.doc_id), d) for d in docs]
    for d in docs:
        store.corpus.delete_document(d.doc_id, WS)
    with timed() as t_del:
        r_del = build_graph(store, cfg, embedder=None, workspace=WS)
    for text, chunks, d in saved:
        store.corpus.put_document(Document(d.doc_id, d.name, d.kind, d.size_bytes, d.content_hash, d.lang, text, d.chunker,
                                    WS, d.title, d.n_chunks), chunks, None, "none")
    with timed() as t_add:
        r_add = build_graph(store, cfg, embedder=None, workspace=WS)
    same = _graph_counts(store) == counts

    # Local search latency over the test claims (query encoding included, as the stage does it).
    snap = GraphCache().get(store, WS, cfg.min_phrase_chunks)
    with timed() as t_names:
        names = snap.name_matrix(embedder)
    queries = [json.loads(x)["text"] for x in (root / "beir_scifact" / "queries.jsonl").read_text().splitlines()
               if x.strip()][:n_queries]
    stage_ms, search_ms, n_cands, n_seeds = [], [], [], []
    for q in queries:
        t0 = time.perf_counter()
        qv = embedder.encode([q])[0]
        t1 = time.perf_counter()
        res = local_search(q, snap, store, query_vec=qv, name_matrix=names, hops=cfg.hops, node_cap=cfg.node_cap,
                           hub_percentile=cfg.hub_percentile, seed_k=cfg.seed_k, seed_min_sim=cfg.seed_min_sim,
                           k=cfg.k, workspace=WS)
        t2 = time.perf_counter()
        stage_ms.append((t2 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
        n_cands.append(len(res.candidates))
        n_seeds.append(len(res.seeds))

    def pct(xs: list[float], p: float) -> float:
        s = sorted(xs)
        return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]

    return {
        "documents": n_docs, "chunks": counts["chunks"], "load_s": round(t_load[0], 2),
        "build": {"builder": rep.builder, "seconds": round(t_build[0], 2), "peak_rss_mib": round(rss.peak_mib, 1),
                  "rss_method": rss.method, "retained_rss_mib": round(rss.retained_mib, 1),
                  "python_heap_peak_mib": round(py_peak / 2**20, 1), "traced_rebuild_s": round(t_traced[0], 2),
                  **counts, "active_nodes": rep.active_nodes, "levels": rep.levels},
        "merge_suggestions": {"model": embedder.model_id, "names_embedded": len(active),
                              "embed_names_s": round(t_names_first[0], 2), "all_pairs_s": round(t_sugg[0], 2),
                              "threshold": cfg.merge_threshold, "suggestions": n_sugg, "top": sample},
        "incremental": {"delete_50_docs_s": round(t_del[0], 2), "removed_chunks": r_del.chunks_removed,
                        "readd_50_docs_s": round(t_add[0], 2), "added_chunks": r_add.chunks_added,
                        "equals_full_build": same},
        "local_search": {"queries": len(queries), "name_vectors_s": round(t_names[0], 2), "nodes": len(snap),
                         "stage_ms_p50": round(pct(stage_ms, 50), 2), "stage_ms_p95": round(pct(stage_ms, 95), 2),
                         "stage_ms_mean": round(statistics.mean(stage_ms), 2),
                         "search_only_ms_p50": round(pct(search_ms, 50), 2),
                         "search_only_ms_p95": round(pct(search_ms, 95), 2),
                         "mean_candidates": round(statistics.mean(n_cands), 1),
                         "mean_seeds": round(statistics.mean(n_seeds), 2),
                         "queries_without_seed": sum(1 for s in n_seeds if s == 0),
                         "settings": {k: getattr(cfg, k) for k in ("hops", "node_cap", "hub_percentile", "seed_k",
                                                                  "seed_min_sim", "k")}},
    }


def bench_multihop(embedder) -> dict:
    store = Store(":memory:")
    deps = Deps(store=store, embedder=embedder)
    gs = sample_set()
    base = PipelineConfig().with_overrides({"answer.enabled": False})
    gs, notes = prepare(gs, deps, workspace=WS, config=base)
    with timed() as t_build:
        rep = build_graph(store, base.graph, embedder=embedder, workspace=WS)
    configs = {
        "graph off": base,
        "graph local, fused": base.with_overrides({"graph.enabled": True, "graph.mode": "local"}),
        "graph local+global, fused": base.with_overrides({"graph.enabled": True, "graph.mode": "both"}),
    }
    out: dict = {"documents": len(store.corpus.documents(WS)), "chunks": store.corpus.count("chunks", WS),
                 "graph_build_s": round(t_build[0], 2), "graph_nodes": rep.nodes, "graph_active_nodes": rep.active_nodes,
                 "notes": notes, "runs": {}}
    for qtype in ("multi-hop", "all"):
        sub = gs if qtype == "all" else type(gs)(**{**gs.__dict__, "queries": [q for q in gs.queries if q.qtype == qtype]})
        out["runs"][qtype] = {}
        for name, cfg in configs.items():
            run = run_config(sub, NamedConfig(name, cfg), deps, workspace=WS)
            m = run.metrics
            stage = {s: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items()}
                     for s, d in run.stage_recall.items()}
            out["runs"][qtype][name] = {
                "questions": len([q for q in sub.queries if q.gold]), "final_stage": run.results[0].get("final_stage")
                if run.results else None,
                **{k: round(m[k], 3) for k in ("recall@5", "recall@10", "recall@20", "mrr") if m.get(k) is not None},
                "stage_recall": stage,
                "per_question_recall@10": {r["qid"]: r["metrics"].get("recall@10") for r in run.results}
                if qtype == "multi-hop" else None,
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", help="folder holding beir_scifact (default $RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--queries", type=int, default=300, help="SciFact claims for the local-search latency")
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-multihop", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    embedder = load_embedder(PipelineConfig().embedding.model).embedder
    result: dict = {"bench": "graph", "when": utc_now(), "machine": machine_info(),
                    "command": "python bench/graph.py " + " ".join(sys.argv[1:])}
    if not args.skip_scifact:
        root = datasets_dir(args.datasets)
        if (root / "beir_scifact" / "corpus.jsonl").is_file():
            result["scifact"] = sf = bench_scifact(root, args.queries, embedder)
            b, ls = sf["build"], sf["local_search"]
            print(table(["docs", "build s", "peak RSS MiB", "py heap MiB", "nodes", "active", "edges", "communities",
                         "levels"], [[sf["documents"], b["seconds"], b["peak_rss_mib"], b["python_heap_peak_mib"],
                                      b["nodes"], b["active_nodes"], b["edges"], b["communities"], b["levels"]]]))
            print(table(["queries", "stage p50 ms", "stage p95 ms", "search p50 ms", "search p95 ms", "no seed"],
                        [[ls["queries"], ls["stage_ms_p50"], ls["stage_ms_p95"], ls["search_only_ms_p50"],
                          ls["search_only_ms_p95"], ls["queries_without_seed"]]]))
        else:
            result["scifact"] = {"skipped": f"beir_scifact not found under {root}"}
    if not args.skip_multihop:
        result["multihop"] = mh = bench_multihop(embedder)
        rows = [[qt, name, r["questions"], r.get("recall@5"), r.get("recall@10"), r.get("recall@20"), r.get("mrr")]
                for qt, runs in mh["runs"].items() for name, r in runs.items()]
        print(table(["questions", "config", "n", "recall@5", "recall@10", "recall@20", "MRR"], rows))
    path = write_result("graph", result, args.out, table=MEASURED_GRAPH)
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_graph(d: dict[str, Any], file: str) -> list[str]:
    out = ["### GraphRAG", "", CAPTION, ""]
    sf = d.get("scifact") or {}
    b = sf.get("build") or {}
    if b:
        out.append(f"- {b.get('builder')} builder on SciFact ({num(sf.get('documents'))} docs): {num(b.get('seconds'), 1)} s, "
                   f"peak RSS {num(b.get('peak_rss_mib'), 0)} MiB, {num(b.get('nodes'))} nodes / {num(b.get('edges'))} "
                   f"edges, {num(b.get('communities'))} communities in {b.get('levels')} levels")
    inc = sf.get("incremental") or {}
    if inc:
        out.append(f"- incremental: delete {inc.get('removed_chunks')} docs {num(inc.get('delete_50_docs_s'), 1)} s, "
                   f"re-add {num(inc.get('readd_50_docs_s'), 1)} s, equals a full rebuild: {num(inc.get('equals_full_build'))}")
    ls = sf.get("local_search") or {}
    if ls:
        out.append(f"- local search over {ls.get('queries')} queries: {num(ls.get('search_only_ms_p50'), 0)} ms median / "
                   f"{num(ls.get('search_only_ms_p95'), 0)} ms p95 (search only), {num(ls.get('stage_ms_p50'), 0)} ms "
                   "median as a pipeline stage")
    ms = sf.get("merge_suggestions") or {}
    if ms:
        out.append(f"- merge suggestions: {num(ms.get('suggestions'))} pairs at cosine ≥ {ms.get('threshold')} among "
                   f"{num(ms.get('names_embedded'))} active names (all pairs {num(ms.get('all_pairs_s'), 0)} s; "
                   f"embedding the names {num(ms.get('embed_names_s'), 0)} s)")
    mh = (d.get("multihop") or {}).get("runs") or {}
    for subset, runs in mh.items():
        for name, r in runs.items():
            out.append(f"- {subset} questions of the sample set ({r['questions']}), {name}: recall@5 "
                       f"{num(r['recall@5'], 3)}, recall@10 {num(r['recall@10'], 3)}")
    return out


MEASURED_GRAPH = Table(measured_graph, 'Contextual retrieval and GraphRAG')


if __name__ == "__main__":
    raise SystemExit(main())
