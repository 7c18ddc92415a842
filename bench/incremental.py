"""Incremental re-indexing (issue #31): edit 1% of the documents (one sentence each, scripted) and measure what the
incremental path redoes against a full rebuild, on the sample corpus and a beir_scifact subsample.

    nice -n 10 .venv/bin/python bench/incremental.py [--datasets DIR] [--scifact-docs 500] [--queries 100]
        [--skip-scifact] [--skip-sample] [--skip-kill]

Per corpus: ingest the documents (bundled MiniLM, default chunker), write llm contexts for every chunk through
tests/anthropic_stub.py (the loopback Messages API: the real SDK, no key, no network), build the entity graph
(statistical). Then edit ceil(1%) of the documents (at least one): the middle sentence of the text gets a clause
inserted before its final stop. Re-ingest every file as `python -m core ingest` would (the graph follows the
ingest), write the missing llm contexts again through the stub, and count: chunks changed (changed + new), chunks
re-embedded (model calls, not cache hits), contexts re-written, graph update time against the full build's,
summaries invalidated against the communities (two or more members, any level) that contain a node of a changed
chunk (old or new version). The full build is timed as `graph build` runs it (with the embedder: the first build
embeds every node name for merge suggestions), and again, the conservative denominator, as a full rebuild of the
same store after the edit, when the names are already embedded. Each is timed on the wall clock and in
process CPU seconds (all threads: what the work costs when the shared machine's load stretches the wall clock),
and the update's fixed cost is measured as the same update run again with nothing left to do. A second store ingests the edited files from scratch and builds its graph in full:
recall@5 (document level, first five distinct documents of the fused list of a hybrid BM25 + dense configuration:
rerank, pruning, MMR, router and the answer off on both sides) over the corpus's questions must match. The local
community update is compared with a full re-clustering of the same graph (level-0 modularity, NMI and adjusted Rand
index) and with the fresh store's communities; as the baseline of Leiden's own sensitivity, the full clustering
before the edit is compared with the full re-clustering after it. Heuristic contexts (free, recomputed for every chunk of an edited
document) say whether a neighbour's context depends on the change: the unchanged chunks whose heuristic context
text changed are counted. Last, the kill -9 tests (tests/test_incremental_kill.py, marked slow) run and their
outcome is recorded. Writes bench/results/incremental.json (`--kill-only`: the kill -9 tests alone, into
bench/results/incremental_kill.json).

SciFact: the abstracts of the first --queries test claims' gold documents, filled up to --scifact-docs with other
abstracts in a seeded random order, one file each (title, blank line, text): a subsample, to stay within minutes on
a shared 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import CAPTION, ROOT, Table, datasets_dir, grid, num, utc_now, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.datasets import sample_set  # noqa: E402
from core.graph.build import build_graph, cluster, stored_communities  # noqa: E402
from core.graph.communities import agreement, modularity  # noqa: E402
from core.ingest.context import build_llm_contexts, estimate_llm_contexts  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.models.llm import AnthropicLLM  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402
from core.text import sentence_spans  # noqa: E402
from tests.anthropic_stub import start_stub  # noqa: E402

WS = "default"
HAIKU = "claude-haiku-4-5"
# What both sides search with: hybrid retrieval only, so recall compares the indexes, not the cascade's noise.
SEARCH = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "router.enabled": False,
          "answer.enabled": False, "answer_cache.enabled": False, "cascade_guard.enabled": False,
          "graph.min_phrase_chunks": 2}
EDIT = ", as revised in this edition"


def edit_one_sentence(text: str) -> str | None:
    """The middle sentence of at least six words gets a clause before its final stop (None: no such sentence)."""
    spans = [(s, e) for s, e in sentence_spans(text) if len(text[s:e].split()) >= 6 and text[s:e].rstrip()[-1:] in ".!?"]
    if not spans:
        return None
    s, e = spans[len(spans) // 2]
    sent = text[s:e].rstrip()
    cut = s + len(sent) - 1
    return text[:cut] + EDIT + text[cut:]


def pick_edits(files: list[tuple[str, bytes]], share: float, seed: int) -> dict[str, bytes]:
    """ceil(share x documents) text documents (at least one), seeded, each with one sentence edited."""
    rng = random.Random(seed)
    names = [n for n, _ in files if n.endswith((".md", ".txt"))]
    rng.shuffle(names)
    want = max(1, math.ceil(share * len(files)))
    data = dict(files)
    out: dict[str, bytes] = {}
    for n in names:
        edited = edit_one_sentence(data[n].decode("utf-8"))
        if edited is not None:
            out[n] = edited.encode("utf-8")
        if len(out) == want:
            break
    return out


def recall_at_5(deps: Any, cfg: PipelineConfig, questions: list[tuple[str, set[str]]]) -> float:
    names = {d.doc_id: d.name for d in deps.store.corpus.documents(WS)}
    hits = 0.0
    for text, gold in questions:
        trace = run_query(text, cfg, deps)
        fused = trace.stage("fused")
        docs: list[str] = []
        for c in (fused.candidates if fused else []):
            name = names.get(c.doc_id, "")
            if name not in docs:
                docs.append(name)
            if len(docs) == 5:
                break
        hits += len(gold & set(docs)) / len(gold)
    return round(100 * hits / max(1, len(questions)), 2)


def changed_chunk_communities(store: Store, chunk_ids: set[str], before: dict[str, set[str]]) -> int:
    """Communities (two or more members, any level) holding a node that a changed chunk (its new version, or the
    old one it replaced: `before`, node ids per chunk read before the update) mentions."""
    nodes = {n for _, n in store.graph.chunk_nodes(sorted(chunk_ids), WS)} | set().union(*before.values())
    return sum(1 for c in stored_communities(store, WS) if len(c.members) >= 2 and nodes & set(c.members))


def run_corpus(label: str, files: list[tuple[str, bytes]], questions: list[tuple[str, set[str]]], *,
               share: float, seed: int, embedder: Any = None) -> tuple[dict[str, Any], Any]:
    cfg = PipelineConfig().with_overrides(SEARCH)
    edits = pick_edits(files, share, seed)
    edited_files = [(n, edits.get(n, b)) for n, b in files]
    stub = start_stub()
    out: dict[str, Any] = {"documents": len(files), "edited_documents": len(edits),
                           "edited_share": round(len(edits) / len(files), 4), "questions": len(questions)}
    try:
        store = Store(":memory:")
        deps = build_deps(cfg, store=store, embedder=embedder)
        llm = AnthropicLLM(stub.key, base_url=stub.base_url, ledger=store.ledger, sleep=lambda s: None)
        t0 = time.perf_counter()
        base = ingest_files(files, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        out["base_ingest_s"] = round(time.perf_counter() - t0, 2)
        out["chunks"] = store.corpus.count("chunks", WS)
        out["base_embedded"] = base.embedded
        t0 = time.perf_counter()
        ctx0 = build_llm_contexts(store, llm, model=HAIKU, budget_usd=100.0, workspace=WS)
        out["base_contexts"] = {"written": ctx0.written, "seconds": round(time.perf_counter() - t0, 2)}
        t0 = time.perf_counter()
        # With the embedder, as `graph build` runs by default: merge suggestions embed the node names once.
        full = build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        t_full = time.perf_counter() - t0
        out["graph_full_build"] = {"seconds": round(t_full, 3), "cpu_seconds": round(full.cpu_seconds, 3),
                                   "nodes": full.nodes, "edges": full.edges,
                                   "communities": full.communities, "levels": full.levels,
                                   "summaries_written": full.summaries_written}
        full_before = stored_communities(store, WS)  # the full clustering before the edit: Leiden's own baseline
        heur_before = store.ledger.contexts("heuristic", WS)
        old_chunks = {c.chunk_id for c in store.corpus.chunks(WS)}
        old_nodes: dict[str, set[str]] = {}
        for cid, nid in store.graph.chunk_nodes(sorted(old_chunks), WS):
            old_nodes.setdefault(cid, set()).add(nid)

        # -- the edit, through the ingest path (the graph follows it) --
        t0 = time.perf_counter()
        rep = ingest_files(edited_files, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        t_ingest = time.perf_counter() - t0
        ch = rep.chunk_changes()
        changed = ch["changed"] + ch["new"]
        new_ids = {c.chunk_id for c in store.corpus.chunks(WS)}
        gone = old_chunks - new_ids
        fresh = new_ids - old_chunks
        g = rep.graph
        out["edit"] = {**ch, "replaced_documents": sum(r.status == "replaced" for r in rep.results),
                       "re_embedded": rep.embedded, "re_embedded_per_changed": round(rep.embedded / max(1, changed), 3),
                       "ingest_s": round(t_ingest, 2)}
        est, plan = estimate_llm_contexts(store, model=HAIKU, workspace=WS)
        out["estimate"] = {"calls": est.calls, "usd": round(est.with_cache_usd, 6),
                           "plan": [p for p in plan if p.startswith("plan: ")]}
        t0 = time.perf_counter()
        ctx1 = build_llm_contexts(store, llm, model=HAIKU, budget_usd=100.0, workspace=WS)
        events = [e for e in store.caches.cache_events(WS) if e.cache == "llm_context"]
        out["contexts"] = {"reindex": cfg.context.reindex, "rewritten": ctx1.written,
                           "rewritten_per_changed": round(ctx1.written / max(1, changed), 3),
                           "kept": rep.chunk_changes()["contexts_kept"],
                           "full_reindex_would_write": sum(r.chunks for r in rep.results if r.status == "replaced"),
                           "seconds": round(time.perf_counter() - t0, 2),
                           "ledger_llm_context_events": [{"hits": e.hits, "misses": e.misses} for e in events]}
        heur_after = store.ledger.contexts("heuristic", WS)
        kept = new_ids & old_chunks
        edited_doc_ids = {r.doc_id for r in rep.results if r.status == "replaced"}
        kept_in_edited = {c.chunk_id for d in edited_doc_ids for c in store.corpus.chunks(WS, d)} & kept
        out["heuristic_neighbours"] = {
            "unchanged_chunks_in_edited_documents": len(kept_in_edited),
            "their_heuristic_context_changed": sum(1 for c in kept_in_edited if heur_before.get(c) != heur_after.get(c))}
        assert g is not None, "the graph must follow the ingest"
        hit = changed_chunk_communities(store, fresh, {c: old_nodes.get(c, set()) for c in gone})
        # The fixed cost of an update: the same update again with nothing left to do (no chunk added or removed).
        noop = build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        out["graph_update"] = {"seconds": round(g.seconds, 3), "share_of_full_build": round(g.seconds / t_full, 3),
                               "cpu_seconds": round(g.cpu_seconds, 3),
                               "share_of_full_build_cpu": round(g.cpu_seconds / max(full.cpu_seconds, 1e-9), 3),
                               "noop_update_seconds": round(noop.seconds, 3),
                               "noop_update_cpu_seconds": round(noop.cpu_seconds, 3),
                               "noop_share_of_full_build": round(noop.seconds / t_full, 3),
                               "chunks_added": g.chunks_added, "chunks_removed": g.chunks_removed,
                               "summaries_invalidated": g.summaries_invalidated,
                               "communities_with_a_changed_chunk": hit,
                               "invalidated_per_touched_community": round(g.summaries_invalidated / max(1, hit), 3)}
        # -- local vs full re-clustering of the same graph --
        local = stored_communities(store, WS)
        whole, ag = cluster(store, cfg.graph.model_copy(update={"communities": "full"}), WS)
        lo, hi = np.minimum(ag.a, ag.b), np.maximum(ag.a, ag.b)
        out["communities"] = {"modularity_local": round(modularity(ag.ids, lo, hi, ag.w, local), 4),
                              "modularity_full": round(modularity(ag.ids, lo, hi, ag.w, whole), 4),
                              **{f"{k}_local_vs_full": round(v, 4) for k, v in agreement(ag.ids, local, whole).items()},
                              **{f"{k}_full_before_vs_full_after": round(v, 4)
                                 for k, v in agreement(ag.ids, full_before, whole).items()},
                              **{f"{k}_full_before_vs_local_after": round(v, 4)
                                 for k, v in agreement(ag.ids, full_before, local).items()},
                              "level0_local": sum(1 for c in local if c.level == 0),
                              "level0_full": sum(1 for c in whole if c.level == 0)}
        r_inc = recall_at_5(deps, cfg, questions)
        # The conservative denominator: a full rebuild of the same store, whose node names are already embedded.
        t0 = time.perf_counter()
        rebuilt_here = build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS, full=True)
        t_rebuild = time.perf_counter() - t0
        out["graph_update"]["full_rebuild_names_cached_s"] = round(t_rebuild, 3)
        out["graph_update"]["share_of_full_rebuild_names_cached"] = round(g.seconds / t_rebuild, 3)
        out["graph_update"]["full_rebuild_names_cached_cpu_s"] = round(rebuilt_here.cpu_seconds, 3)
        out["graph_update"]["share_of_full_rebuild_names_cached_cpu"] = round(
            g.cpu_seconds / max(rebuilt_here.cpu_seconds, 1e-9), 3)

        # -- the full rebuild of the edited corpus --
        fresh_store = Store(":memory:")
        deps2 = build_deps(cfg, store=fresh_store, embedder=deps.embedder)
        t0 = time.perf_counter()
        ingest_files(edited_files, store=fresh_store, embedder=deps.embedder, config=cfg, workspace=WS)
        out["rebuild_ingest_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        build_graph(fresh_store, cfg.graph, embedder=deps.embedder, workspace=WS)
        out["rebuild_graph_s"] = round(time.perf_counter() - t0, 3)
        same_chunks = sorted(c.text for c in store.corpus.chunks(WS)) == sorted(c.text for c in fresh_store.corpus.chunks(WS))
        rebuilt = stored_communities(fresh_store, WS)
        out["versus_rebuild"] = {
            "same_chunk_texts": same_chunks,
            "same_nodes": store.graph.nodes(WS) == fresh_store.graph.nodes(WS),
            "same_edges": [e[:2] + (round(e[2], 6),) + e[3:] for e in store.graph.edges(WS)]
            == [e[:2] + (round(e[2], 6),) + e[3:] for e in fresh_store.graph.edges(WS)],
            **{f"{k}_communities": round(v, 4) for k, v in agreement(ag.ids, local, rebuilt).items()},
            "recall@5_incremental": r_inc, "recall@5_rebuild": recall_at_5(deps2, cfg, questions)}
        out["versus_rebuild"]["recall@5_diff"] = round(out["versus_rebuild"]["recall@5_incremental"]
                                                       - out["versus_rebuild"]["recall@5_rebuild"], 2)
        store.close()
        fresh_store.close()
    finally:
        stub.stop()
    e, gu, c = out["edit"], out["graph_update"], out["contexts"]
    out["targets"] = {
        "re_embedded <= 1.1x changed": e["re_embedded"] <= 1.1 * max(1, changed),
        "re_contextualised <= 1.5x changed": c["rewritten"] <= 1.5 * max(1, changed),
        "graph update <= 10% of a full build": gu["share_of_full_build"] <= 0.10,
        "graph update <= 10% of a full build (cpu)": gu["share_of_full_build_cpu"] <= 0.10,
        "graph update <= 10% of a full rebuild (names cached)": gu["share_of_full_rebuild_names_cached"] <= 0.10,
        "invalidated summaries <= 2x touched communities": gu["summaries_invalidated"] <= 2 * max(1, gu["communities_with_a_changed_chunk"]),
        "recall@5 within 0.5 of a rebuild": abs(out["versus_rebuild"]["recall@5_diff"]) <= 0.5}
    print(f"{label}: {json.dumps(out, indent=1)}", file=sys.stderr)
    return out, deps.embedder


def sample_corpus() -> tuple[list[tuple[str, bytes]], list[tuple[str, set[str]]]]:
    gs = sample_set()
    docs = sorted(p for p in Path(gs.corpus_dir).iterdir() if p.is_file())
    files = [(p.name, p.read_bytes()) for p in docs]
    qs = [(q.query, {g.doc for g in q.gold if g.doc}) for q in gs.queries if q.answerable and any(g.doc for g in q.gold)]
    return files, qs


def scifact(root: Path, n_docs: int, n_queries: int, seed: int) -> tuple[list[tuple[str, bytes]], list[tuple[str, set[str]]]]:
    base = root / "beir_scifact"
    corpus = {}
    for line in (base / "corpus.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
    qrels: dict[str, set[str]] = {}
    for i, row in enumerate((base / "qrels" / "test.tsv").read_text().splitlines()):
        parts = row.split("\t")
        if i == 0 and parts[0] == "query-id":
            continue
        if int(parts[2]) > 0:
            qrels.setdefault(parts[0], set()).add(parts[1])
    queries = [json.loads(x) for x in (base / "queries.jsonl").read_text().splitlines() if x.strip()]
    qs = [(q["text"], qrels[str(q["_id"])]) for q in queries if str(q["_id"]) in qrels][:n_queries]
    keep = sorted({d for _, gold in qs for d in gold})
    rest = sorted(set(corpus) - set(keep))
    random.Random(seed).shuffle(rest)
    chosen = keep + rest[: max(0, n_docs - len(keep))]
    files = [(f"{d}.txt", f"{corpus[d][0]}\n\n{corpus[d][1]}\n".encode()) for d in chosen]
    return files, [(t, {f"{d}.txt" for d in gold}) for t, gold in qs]


def run_kill_tests() -> dict[str, Any]:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider", "-rA",
           "tests/test_incremental_kill.py"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    cases = {m.group(2): m.group(1) for m in re.finditer(r"^(PASSED|FAILED|ERROR) \S+::\S+\[([^\]]+)\]", proc.stdout, re.M)}
    return {"command": " ".join(["python"] + cmd[1:]), "returncode": proc.returncode, "cases": cases,
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--scifact-docs", type=int, default=500)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--share", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-sample", action="store_true")
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--kill-only", action="store_true", help="only the kill -9 tests, into incremental_kill.json")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.kill_only:
        path = write_result("incremental_kill", {"kill9": run_kill_tests()}, Path(args.out) if args.out else None,
                            table=MEASURED_INCREMENTAL_KILL)
        print(f"wrote {path}", file=sys.stderr)
        return
    out: dict[str, Any] = {"started_at": utc_now(), "share": args.share, "seed": args.seed,
                           "search_config": SEARCH, "edit": f"one sentence: {EDIT!r} inserted before its final stop"}
    emb = None
    if not args.skip_sample:
        files, qs = sample_corpus()
        out["sample"], emb = run_corpus("sample", files, qs, share=args.share, seed=args.seed)
    if not args.skip_scifact:
        files, qs = scifact(datasets_dir(args.datasets), args.scifact_docs, args.queries, args.seed)
        out["beir_scifact"], emb = run_corpus("beir_scifact", files, qs, share=args.share, seed=args.seed,
                                              embedder=emb)
        out["beir_scifact"]["subsample"] = (f"{len(files)} of 5,183 abstracts: the gold documents of the first "
                                            f"{len(qs)} test claims, filled with seeded random others")
    if not args.skip_kill:
        out["kill9"] = run_kill_tests()
    path = write_result("incremental", out, Path(args.out) if args.out else None, table=MEASURED_INCREMENTAL)
    print(f"wrote {path}", file=sys.stderr)


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_incremental(d: dict[str, Any], file: str) -> list[str]:
    """Issue #31: what an edit of 1% of the documents redoes, against a full rebuild."""
    out = ["### Incremental re-indexing", "", CAPTION, "",
           f"Edit: {d.get('edit', 'one sentence per document')}; retrieval compared with the hybrid configuration "
           "(BM25 + dense, fused) on both sides; llm contexts written through the loopback Messages API stub.", ""]
    rows = []
    for key, label in (("sample", "sample corpus"), ("beir_scifact", "beir_scifact")):
        r = d.get(key)
        if not r:
            continue
        e, c, g, v, cm = r["edit"], r["contexts"], r["graph_update"], r["versus_rebuild"], r["communities"]
        changed = e["changed"] + e["new"]
        rows.append([label, f"{r['edited_documents']} of {num(r['documents'])}", f"{num(r['chunks'])}",
                     f"{e['unchanged']:,} / {e['changed']} / {e['new']} / {e['removed']}",
                     f"{e['re_embedded']} ({num(e['re_embedded_per_changed'])}x)",
                     f"{c['rewritten']} ({num(c['rewritten_per_changed'])}x; full: {c['full_reindex_would_write']})",
                     f"{num(g['seconds'], 2)} s = {num(100 * g['share_of_full_build'], 0)}% of the first build "
                     f"({num(r['graph_full_build']['seconds'], 2)} s), "
                     f"{num(100 * g.get('share_of_full_rebuild_names_cached', float('nan')), 0)}% of a rebuild "
                     f"({num(g.get('full_rebuild_names_cached_s'), 2)} s)"
                     + (f"; CPU {num(g['cpu_seconds'], 2)} s = {num(100 * g['share_of_full_build_cpu'], 1)}% of the "
                        f"first build's, {num(100 * g['share_of_full_rebuild_names_cached_cpu'], 0)}% of a rebuild's; "
                        f"fixed cost (the update again, nothing to do) {num(g['noop_update_seconds'], 2)} s, CPU "
                        f"{num(g['noop_update_cpu_seconds'], 2)} s" if "cpu_seconds" in g else ""),
                     f"{g['summaries_invalidated']} / {g['communities_with_a_changed_chunk']}",
                     f"{num(v['recall@5_incremental'], 2)} / {num(v['recall@5_rebuild'], 2)}",
                     f"{num(cm['modularity_local'], 3)} / {num(cm['modularity_full'], 3)}, NMI "
                     f"{num(cm['nmi_local_vs_full'], 3)}, ARI {num(cm['ari_local_vs_full'], 3)}"])
        _ = changed
    out.append(grid(["corpus", "edited docs", "chunks", "unchanged / changed / new / removed", "re-embedded",
                         "llm contexts rewritten", "graph update vs full build",
                         "summaries invalidated / communities with a changed chunk", "recall@5 incremental / rebuild",
                         "modularity local / full re-clustering"], rows))
    out.append("")
    for key in ("sample", "beir_scifact"):
        r = d.get(key)
        if r:
            t = r.get("targets") or {}
            missed = [k for k, ok in t.items() if not ok]
            out.append(f"- {key}: targets met {sum(t.values())} of {len(t)}" + (f" (missed: {'; '.join(missed)})"
                                                                               if missed else ""))
            cm = r.get("communities") or {}
            if "ari_full_before_vs_full_after" in cm:
                out.append(f"  - Leiden's own sensitivity: a full clustering before the edit against a full re-clustering "
                           f"after it: NMI {num(cm['nmi_full_before_vs_full_after'], 3)}, ARI "
                           f"{num(cm['ari_full_before_vs_full_after'], 3)} (the local update against the full "
                           f"clustering before the edit: NMI {num(cm['nmi_full_before_vs_local_after'], 3)}, ARI "
                           f"{num(cm['ari_full_before_vs_local_after'], 3)})")
            h = r.get("heuristic_neighbours") or {}
            if h:
                out.append(f"  - neighbours: {h['their_heuristic_context_changed']} of "
                           f"{h['unchanged_chunks_in_edited_documents']} unchanged chunks of the edited documents got a "
                           "different heuristic context")
            if r.get("subsample"):
                out.append(f"  - subsample: {r['subsample']}")
    k = d.get("kill9")
    if k:
        out += measured_incremental_kill(d, "")[3:]
    return out


def measured_incremental_kill(d: dict[str, Any], file: str) -> list[str]:
    """Issue #31: each incremental step killed with SIGKILL mid-way, then run again (tests/test_incremental_kill.py)."""
    k = d.get("kill9") or {}
    cases = k.get("cases") or {}
    return ["### Incremental re-indexing: kill -9 mid-step", "", CAPTION if file else "", "",
            f"- `{k.get('command')}`: " + ", ".join(f"{c} {v.lower()}" for c, v in cases.items())
            + f" ({num(k.get('seconds'), 0)} s); each case: the step (ingest of edits with the graph update that "
              "follows it, or the llm context build) forked, SIGKILLed at the named write, run again, and compared "
              "with a run that was never killed"]


MEASURED_INCREMENTAL = Table(measured_incremental, 'Contextual retrieval and GraphRAG')
MEASURED_INCREMENTAL_KILL = Table(measured_incremental_kill, 'Contextual retrieval and GraphRAG')


if __name__ == "__main__":
    main()
