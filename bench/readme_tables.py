"""Write docs/measured.md and the README's headline table from bench/results/*.json, so no number in either is
typed by hand.

    .venv/bin/python bench/readme_tables.py           # rewrite docs/measured.md and the README's headline region
    .venv/bin/python bench/readme_tables.py --check   # exit 1 when either differs (tests/test_readme.py does this)

Every table cell and every number in a sentence below is read from a results file; each table is captioned with the
file, the command, the UTC time, the git commit and the load average of its run. Files written before results
carried a run record (bench/_common.write_result) say "commit not recorded" instead of a guessed commit. Pure JSON
reading: no model, no database, a few milliseconds.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
MEASURED = ROOT / "docs" / "measured.md"


class MarkerError(ValueError):
    """README.md lacks the pair of markers that delimit the generated section."""


# -- provenance -----------------------------------------------------------------------------------------------------
def _when(d: dict[str, Any]) -> str | None:
    run = d.get("run") or {}
    for v in (run.get("finished_at"), d.get("measured_at"), d.get("when"), d.get("timestamp")):
        if v:
            return str(v).replace("+00:00", "")[:16].replace("T", " ")
    return None


def _load(d: dict[str, Any]) -> str:
    run = d.get("run") or {}
    start = run.get("load_avg_start") or (d.get("machine") or {}).get("load_avg_at_start")
    end = run.get("load_avg_end") or d.get("load_avg_at_end")
    if not start:
        return "load average not recorded"
    text = f"load average {start[0]:.1f} at start"
    return text + (f", {end[0]:.1f} at end" if end else "")


def caption(file: str, d: dict[str, Any]) -> str:
    """One line naming where a table's numbers come from: file, command, time, commit, machine load."""
    run = d.get("run") or {}
    command = run.get("command") or d.get("command") or "command not recorded"
    commit = run.get("commit")
    if commit:
        commit_s = f"commit `{commit[:12]}`" + (" (tree had uncommitted changes)" if run.get("dirty") else "")
        if run.get("commit_at_end"):
            commit_s += f", HEAD at `{run['commit_at_end'][:12]}` by its end"
    else:
        commit_s = "commit not recorded"
    when = _when(d) or "time not recorded"
    return f"*`bench/results/{file}` · `{command.strip()}` · {when} UTC · {commit_s} · {_load(d)}*"


# -- formatting -----------------------------------------------------------------------------------------------------
def num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def loss(points: float) -> str:
    """A recall drop in points, signed as a change ("−1.29"; exactly 0 carries no sign)."""
    return "0.00" if round(points, 2) == 0 else f"−{points:.2f}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _row_time(r: dict[str, Any]) -> str:
    t = r.get("measured_at")
    return str(t).replace("+00:00", "")[:16].replace("T", " ") if t else "–"


# -- sections -------------------------------------------------------------------------------------------------------
def quality_codebase(d: dict[str, Any], file: str) -> list[str]:
    out = [f"### Quality: `{d['dataset']}` ({d['questions']} queries, Pass@k as the cookbook scores it)", "",
           caption(file, d), "",
           "Rows were measured at the times in the last column (the bench keeps rows of earlier runs of other "
           "configurations). `heur-` rows search chunks with the heuristic context (title, heading path, lead "
           "sentence; no LLM); `wX` is the BM25 weight in weighted RRF, `rrfN` the RRF constant, `dN` the candidate "
           "depth, `+rerank-li` the late-interaction rerank.", ""]
    rows = [[f"*published: {name.replace(' (published)', '')}*", "", num(m.get("pass@5")), num(m.get("pass@10")),
             num(m.get("pass@20")), "", ""] for name, m in (d.get("reference") or {}).items()]
    for r in d["rows"]:
        m = r["metrics"]
        rows.append([r["name"], f"`{r.get('config_hash', '')}`", num(m.get("pass@5")), num(m.get("pass@10")),
                     num(m.get("pass@20")), num(m.get("ndcg@10"), 3), _row_time(r)])
    out.append(md_table(["configuration", "hash", "Pass@5", "Pass@10", "Pass@20", "nDCG@10", "measured (UTC)"], rows))
    checks = d.get("selection_check") or []
    if checks:
        out += ["", "Held-out check (the best row picked on half the queries, reported on the other half):"]
        for c in checks:
            m = c["metrics"]
            out.append(f"- chosen on {c['chosen_on']} queries: **{c['chosen']}** → on {c['reported_on']} queries "
                       f"{num(m['pass@5'])} / {num(m['pass@10'])} / {num(m['pass@20'])}")
    return out


def quality_beir(d: dict[str, Any], file: str) -> list[str]:
    refs = d.get("reference") or {}
    ref_s = "; ".join(f"{name.replace(' (published)', '')} nDCG@10 {num(m.get('ndcg@10'), 3)}"
                      for name, m in refs.items())
    out = [f"### Quality: BEIR `{d['dataset']}` ({d['questions']} queries" + (f"; published: {ref_s}" if ref_s else "")
           + ")", "", caption(file, d), ""]
    rows = [[r["name"], r.get("description", ""), f"`{r.get('config_hash', '')}`", num(r["metrics"].get("ndcg@10"), 3),
             num(r["metrics"].get("recall@100"), 3), _row_time(r)] for r in d["rows"]]
    out.append(md_table(["configuration", "what", "hash", "nDCG@10", "recall@100", "measured (UTC)"], rows))
    return out


def cascade_quality(d: dict[str, Any], file: str) -> list[str]:
    out = ["### Compression cascade", "", f"Rerank quality on `{d['dataset']}` (Pass@k):", "", caption(file, d), ""]
    rows = [[r["name"], r.get("description", ""), f"`{r.get('config_hash', '')}`", num(r["metrics"].get("pass@5")),
             num(r["metrics"].get("pass@10")), num(r["metrics"].get("pass@20"))] for r in d["rows"]]
    out.append(md_table(["configuration", "what", "hash", "Pass@5", "Pass@10", "Pass@20"], rows))
    return out


def cascade_compression(d: dict[str, Any], file: str) -> list[str]:
    out = [f"Compression on `{d['dataset']}` ({d['rows'][0]['questions']} answerable questions; tokens: "
           f"{d.get('tokens', 'estimated LLM tokens')}; default budget {d.get('token_budget')}):", "", caption(file, d),
           ""]
    rows = [[r["name"], r.get("description", ""), num(r["metrics"].get("recall@10"), 3),
             num(r.get("tokens_to_model_mean"), 0), num((r.get("stage_ms_median") or {}).get("prune"), 1)]
            for r in d["rows"]]
    out.append(md_table(["configuration", "what", "recall@10", "tokens to the model (mean)", "prune ms (median)"],
                        rows))
    sweep = d.get("budget_sweep") or []
    if sweep:
        budgets = sorted({s["token_budget"] for s in sweep})
        scorers = list(dict.fromkeys(s["scorer"] for s in sweep))
        cell = {(s["scorer"], s["token_budget"]): s for s in sweep}
        head = ["scorer (`prune.scorer`)"]
        for b in budgets:
            reds = [cell[(sc, b)].get("token_reduction_vs_rerank_top10") for sc in scorers if (sc, b) in cell]
            red = reds[0] if reds and all(r == reds[0] for r in reds) and reds[0] is not None else None
            head.append(f"{b} tokens" + (f" (−{red * 100:.0f}%)" if red is not None else ""))
        head.append("prune ms (median, min–max over budgets)")
        rows = []
        for sc in scorers:
            ms = [cell[(sc, b)].get("prune_ms_median") for b in budgets if (sc, b) in cell]
            ms = [m for m in ms if m is not None]
            rows.append([f"`{sc}`", *[num(cell[(sc, b)].get("recall@10"), 3) if (sc, b) in cell else "–"
                                       for b in budgets],
                         f"{num(min(ms), 1)}–{num(max(ms), 1)}" if ms else "–"])
        out += ["", "Budget sweep by sentence scorer: recall@10 after pruning the rerank top-10 (same run; the "
                "reduction is the share of tokens saved against the rerank top-10):", "", md_table(head, rows)]
        drops = [s for s in sweep if s.get("recall@10_drop_points_vs_rerank_top10") is not None]
        if drops:
            best = {}
            for s in drops:
                b = s["token_budget"]
                if b not in best or s["recall@10_drop_points_vs_rerank_top10"] < best[b]["recall@10_drop_points_vs_rerank_top10"]:
                    best[b] = s
            out += ["", "Smallest recall@10 loss per budget against the rerank top-10: " + "; ".join(
                f"{b} tokens: `{s['scorer']}` {loss(s['recall@10_drop_points_vs_rerank_top10'])} points"
                for b, s in sorted(best.items())) + "."]
    comps = d.get("comparisons") or []
    if comps:
        out += ["", "Compared with its baseline (same run):", ""]
        out.append(md_table(["baseline", "compressed", "tokens saved", "recall@10 change (points)"],
                            [[c["baseline"], c["compressed"], f"{c['token_reduction'] * 100:.1f}%",
                              loss(c["recall@10_drop_points"])] for c in comps]))
    return out


def cascade_scifact(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 2: the default configuration on the whole SciFact corpus, ingest then eval, each phase in its own
    process with its own peak RSS (bench/cascade.py --only scifact)."""
    ing, ev = d.get("ingest") or {}, d.get("eval") or {}
    m = ev.get("metrics") or {}
    out = [f"### The default configuration on the whole SciFact corpus ({num(ing.get('documents'))} abstracts): "
           "ingest, eval, rerank", "", caption(file, d), ""]
    out.append(md_table(["phase (own process)", "work", "seconds", "peak RSS MB"], [
        ["ingest into an empty database", f"{num(ing.get('documents'))} abstracts, {num(ing.get('chunks'))} chunks "
         f"embedded with token vectors ({ing.get('runtime', '')})", num(ing.get("seconds"), 1),
         num(ing.get("peak_rss_mb"), 0)],
        ["eval: product defaults", f"{num(ev.get('questions'))} queries: nDCG@10 **{num(m.get('ndcg@10'), 3)}**, "
         f"recall@100 {num(m.get('recall@100'), 3)}, recall@10 {num(m.get('recall@10'), 3)}, MRR {num(m.get('mrr'), 3)}",
         num(ev.get("eval_seconds"), 1), num(ev.get("peak_rss_mb"), 0)],
    ]))
    rows = [[name, num(r.get("median_ms"), 1), num(r.get("p95_ms"), 1), num(r.get("cpu_median_ms"), 1),
             num(r.get("chunks_encoded"))] for name, r in (ev.get("rerank") or {}).items()]
    out += ["", f"Late-interaction rerank of the fused top-{ev.get('candidates_per_call')} for the first "
                f"{ev.get('rerank_queries')} queries (in the eval process, after the eval):", ""]
    out.append(md_table(["late-interaction rerank", "median ms", "p95 ms", "CPU median ms", "chunks encoded"], rows))
    out += ["", f"Token vectors: {num(ing.get('token_vector_rows'))} texts, {num(ing.get('token_vector_file_mb'), 1)} MB "
                f"of float16 in the append-only file beside the database (the DuckDB file itself "
                f"{num(ing.get('duckdb_file_mb'), 1)} MB); memory cache bounded at {num(ev.get('memory_cache_max_mb'), 1)} "
                f"MB. Peak RSS is ru_maxrss of each phase's process (ingest includes the model load, "
                f"{num(ing.get('rss_after_model_load_mb'), 0)} MB). Target: {d.get('target')} — met: "
                f"{', '.join(f'{k} {v}' for k, v in (d.get('meets_target') or {}).items())}."]
    return out


def cascade_latency(d: dict[str, Any], file: str) -> list[str]:
    per = d.get("candidates_per_call") or {}
    n = per.get("max") if per.get("min") == per.get("max") else f"{per.get('min')}–{per.get('max')}"
    out = [f"Rerank latency, {n} candidates per call:", "", caption(file, d), ""]
    rows = [[name, num(r.get("n")), num(r.get("median_ms"), 1), num(r.get("p95_ms"), 1), r.get("note", "")]
            for name, r in (d.get("rerankers") or {}).items()]
    out.append(md_table(["reranker", "n", "median ms", "p95 ms", "note"], rows))
    return out


def ingest(d: dict[str, Any], file: str) -> list[str]:
    p = d.get("parameters") or {}
    out = [f"### Ingest speed ({p.get('files')} files, {num(d.get('chunks'))} chunks, {p.get('model')})", "",
           caption(file, d), ""]
    out.append(f"- whole ingest path vs bare `SentenceTransformer.encode` on the same chunk texts, interleaved in "
               f"{len(d.get('ratio_per_slice') or [])} slices: **ratio {num(d.get('ratio_ingest_to_bare'))}** "
               f"(per slice {', '.join(num(x) for x in d.get('ratio_per_slice') or [])}; goal ≥ "
               f"{num(d.get('ratio_goal'), 1)})")
    out.append(f"- {num(d.get('ingest_chunks_per_s'), 1)} chunks/s ingest vs {num(d.get('bare_chunks_per_s'), 1)} "
               "chunks/s bare encode")
    if p.get("runtime"):
        tokens = p.get("token_vectors_at_ingest")
        out.append(f"- ingest embeds with `embedding.runtime={p['runtime']}` (`{p.get('model_id')}`); bare encode is "
                   "torch" + ("; ingest also stores every chunk's late-interaction token vectors, taken from the same "
                              "forward pass" if tokens else "" if tokens is None else "; no token vectors stored"))
    other = RESULTS / "ingest_b16.json"
    if file == "ingest.json" and other.exists():
        # The baseline runs at the configured batch size; torch is faster at a smaller one, so say what that gives.
        b = json.loads(other.read_text())
        out.append(f"- with both sides at batch {(b.get('parameters') or {}).get('batch_size')} instead of "
                   f"{p.get('batch_size')} (torch's bare encode was faster there): ratio "
                   f"{num(b.get('ratio_ingest_to_bare'))} (per slice "
                   f"{', '.join(num(x) for x in b.get('ratio_per_slice') or [])}; `bench/results/ingest_b16.json`, "
                   f"`{(b.get('run') or {}).get('command', '')}`)")
    rows = [[ph["phase"], num(ph.get("seconds"), 1), num(ph.get("encode_seconds"), 1), num(ph.get("chunks")),
             num(ph.get("embedded")), num(ph.get("cache_hits"))] for ph in d.get("phases") or []]
    if rows:
        out += ["", md_table(["phase", "seconds", "of which encoding", "chunks", "embedded", "cache hits"], rows)]
    return out


def query(d: dict[str, Any], file: str) -> list[str]:
    p = d.get("parameters") or {}
    kind = ("vectors anchored on real MiniLM passage embeddings, real questions' vectors" if p.get("vectors") == "anchored"
            else f"random {p.get('dim')}-d vectors")
    out = [f"### Query latency (synthetic chunks, {kind}, {p.get('queries')} queries)", "", caption(file, d), ""]
    rows = []
    for r in d.get("runs") or []:
        lat = r["latency"]
        naive = (lat.get("naive_bm25") or {}).get("median_ms")
        rows.append([num(r["chunks"]), num(lat["bm25"]["median_ms"]), num(naive, 1),
                     f"{num((r.get('speedup_vs_naive_median') or {}).get('bm25'), 0)}×" if naive else "–",
                     num(lat["dense"]["median_ms"]), num(lat["fused"]["median_ms"]),
                     "– (built in bench/ann.py's cache)" if r.get("vectors") == "anchored"
                     else num((r.get("peak_mem_mib") or {}).get("bm25s"), 0)])
    out.append(md_table(["chunks", "BM25 (bm25s) median ms", "rank_bm25 median ms", "speed-up", "dense (exact) median ms",
                         "fused (exact dense) median ms", "bm25s peak MiB"], rows))
    graphed = [r for r in d.get("runs") or [] if r.get("ann")]
    if graphed:
        out += ["", "The same queries with the dense list through the ANN graph (hnswlib; keys rescored exactly):", ""]
        out.append(md_table(
            ["chunks", "dense via graph median ms", "fused via graph median ms", "fused p95 ms", "recall@50 vs exact",
             "worst query", "query width", "graph build s", "graph MiB", "vector matrix MiB"],
            [[num(r["chunks"]), num(_dig(r, "latency", "dense_ann", "median_ms")),
              num(_dig(r, "latency", "fused_ann", "median_ms")), num(_dig(r, "latency", "fused_ann", "p95_ms")),
              num(r["ann"].get("recall_at_50_vs_exact"), 4), num(r["ann"].get("recall_at_50_min"), 2),
              num(r["ann"].get("ef")), num(r["ann"].get("build_s"), 1), num(r["ann"].get("index_mib"), 0),
              num(r.get("dense_matrix_mib"), 0)] for r in graphed]))
    after = [(r["chunks"], r["dense_after_query_embedding"]) for r in d.get("runs") or []
             if r.get("dense_after_query_embedding")]
    if after:
        out += ["", "Dense search right after a query embedding (torch has just used both cores), median ms: " + "; ".join(
            f"{num(n)} chunks: `einsum` on the calling thread {num(a['dense']['median_ms'])}, `@` (BLAS threads) "
            f"{num(a['naive_dense']['median_ms'])}" for n, a in after) + "."]
    scale = d.get("contexts_scaling")
    if scale:
        out += ["", f"Query time against the number of contexts ({scale.get('method', '')}):", ""]
        srows = [[num(r["documents"]), num(r["chunks"]), num(r["contexts"]), num(r.get("first_query_ms"), 0),
                  num(r["query_ms"]["median_ms"], 1), num(r["query_ms"]["p95_ms"], 1),
                  num(r.get("prepare_ms", {}).get("median_ms"), 2), num(r.get("old_count_ms", {}).get("median_ms"), 2)]
                 for r in scale.get("runs") or []]
        out.append(md_table(["documents", "chunks", "heuristic contexts", "first query ms (builds the indexes)",
                             "query median ms", "query p95 ms", "context check median ms",
                             "loading every context (before) median ms"], srows))
        if scale.get("ratio_median"):
            out += ["", f"Median query time at {num(scale['runs'][-1]['documents'])} over "
                    f"{num(scale['runs'][0]['documents'])} documents: **×{num(scale['ratio_median'])}** (documents "
                    f"×{num(scale['runs'][-1]['documents'] / scale['runs'][0]['documents'], 1)})."]
    return out


def context(d: dict[str, Any], file: str) -> list[str]:
    out = ["### Contextual retrieval", "", caption(file, d), ""]
    pc = d.get("prompt_cache")
    if pc:
        out.append(f"Prompt caching through the loopback Messages API stub: {pc['model']} (minimum cacheable prefix "
                   f"{num(pc['min_cacheable_tokens'])} tokens), {pc['documents']} documents, {pc['chunks']} calls; "
                   f"dollars are list-price equivalents of the stub's token counts.")
        for key, label in (("documents_over_minimum", "documents over the minimum"), ("all_documents", "all documents")):
            g = pc.get(key)
            if g:
                out.append(f"- {label}: cache-read share of input tokens **{g['cache_read_share'] * 100:.0f}%**, "
                           f"${num(g['usd'])} with caching vs ${num(g['usd_uncached'])} without")
    retr = d.get("retrieval") or []
    if retr:
        stages = ["bm25", "dense", "fused", "final"]
        out += ["", f"Pass@5 / 10 / 20 offline by context variant ({retr[0]['queries']} queries):", ""]
        rows = [[r["variant"], *[" / ".join(num(r["pass"][s][f"pass@{k}"], 1) for k in (5, 10, 20))
                                 if s in r["pass"] else "–" for s in stages]] for r in retr]
        out.append(md_table(["variant", "BM25", "dense", "fused", "final (default cascade)"], rows))
    return out


def graph(d: dict[str, Any], file: str) -> list[str]:
    out = ["### GraphRAG", "", caption(file, d), ""]
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


def generalise(d: dict[str, Any], file: str) -> list[str]:
    """Issue #11: the default vs BM25, dense and hybrid on every dev set, document level; rerank with and without
    its blend with the fused order."""
    sets = d.get("sets") or {}
    lists = [("bm25", "BM25"), ("dense", "dense"), ("fused", "hybrid"), ("rerank", "rerank alone"),
             ("previous-cascade", "previous default cascade"), ("default-cascade", "default cascade"),
             ("default", "product default")]
    out = ["### Generalisation: every dev set at document level", "", caption(file, d), "",
           "Each set's own cut is listed below the tables. *hybrid* is the fused list (BM25 + dense, RRF); *rerank "
           "alone* the late-interaction order that replaces it; the *default cascade* is the default retrieval "
           "(hybrid, rerank blended with the fused order by RRF, pruning that keeps every chunk, MMR) with the router "
           "and query transforms off; *previous default cascade* is the same before issue #11 (rerank order alone, "
           "pruning may drop chunks); *product default* is every default setting, router and transforms included. "
           "Answers and the answer cache are off in every row.", ""]
    for metric, title in (("recall@5", "recall@5 (%)"), ("hit@1", "first document is gold (%)")):
        rows = [[name, *[num((r["metrics"].get(key) or {}).get(metric)) for key, _ in lists]]
                for name, r in sets.items()]
        out += [f"**{title}**", "", md_table(["set", *[label for _, label in lists]], rows), ""]
    # Issue #11's target: the default's recall@5 >= the fused list's - 0.5 point. The stage lists are 50 chunks deep
    # and the default hands on 10, so the check is shown against the 50-deep list, against the fused list the default
    # itself builds (fusion.k), and with every list cut to the default's depth (the order alone).
    tgt = []
    for name, r in sets.items():
        m = r["metrics"]
        d5 = (m.get("default") or {}).get("recall@5")

        def gap(key: str) -> str:
            f5 = (m.get(key) or {}).get("recall@5")
            return "–" if d5 is None or f5 is None else f"{num(d5 - f5)} ({'met' if d5 >= f5 - 0.5 else 'missed'})"
        depth = next((k.split("@")[1] for k in m if k.startswith("fused@")), None)
        tgt.append([name, r["questions"], num((m.get("fused") or {}).get("recall@5")),
                    num((m.get("default-fused") or {}).get("recall@5")),
                    num((m.get(f"fused@{depth}") or {}).get("recall@5")) if depth else "–",
                    num((m.get(f"rerank-rrf-w1-k60@{depth}") or {}).get("recall@5")) if depth else "–",
                    num(d5), gap("fused"), gap("default-fused"), gap(f"fused@{depth}") if depth else "–"])
    out += ["**the target: product default vs the fused list, recall@5 (%)** (*hybrid 50*: the stage list, 50 chunks; "
            "*hybrid as built*: the fused list of the default retrieval, `fusion.k` chunks; *@10*: cut to the default's final "
            "depth of 10 chunks before collapsing to documents, so only the order differs; *gap*: product default "
            "minus that list, met when >= -0.5; –: not recorded by that run)", "",
            md_table(["set", "questions", "hybrid 50", "hybrid as built", "hybrid @10", "rerank blend @10",
                      "product default", "gap vs hybrid 50", "gap vs as built", "gap vs @10"], tgt), ""]
    blends = [k for k in next(iter(sets.values()), {}).get("metrics", {}) if k.startswith("rerank-rrf")
              and "@" not in k]
    if blends:
        rows = [[name, num(r["metrics"]["fused"]["recall@5"]), num(r["metrics"]["rerank"]["recall@5"]),
                 *[num(r["metrics"][b]["recall@5"]) for b in blends]] for name, r in sets.items()
                if "rerank" in r["metrics"]]
        out += ["**rerank blends, recall@5 (%)** (`wX-kY`: RRF of the fused order, weight X, and the rerank order, "
                "constant Y; computed from the same rerank lists)", "",
                md_table(["set", "hybrid", "rerank alone", *[b.replace("rerank-rrf-", "") for b in blends]], rows), ""]
    for name, r in sets.items():
        run = r.get("run") or {}
        where = (f" — run `{run['command']}`, {_when({'run': run})} UTC, commit `{(run.get('commit') or '?')[:12]}`"
                 + (" (uncommitted changes)" if run.get("dirty") else "") if run.get("command") else "")
        out.append(f"- `{name}`: {r['cut']}; {r['questions']} questions scored in {num(r.get('seconds'), 0)} s{where}")
    for name, r in sets.items():
        if r.get("chunk_pass@5"):
            out.append(f"- `{name}` at chunk level (Pass@5, exact chunk text as the cookbook scores it): "
                       + ", ".join(f"{k} {num(v)}" for k, v in r["chunk_pass@5"].items()))
    costs = {name: r["prune_tokens_mean"].get("default-cascade") or r["prune_tokens_mean"]["default"]
             for name, r in sets.items() if any((r.get("prune_tokens_mean") or {}).get(k)
                                                 for k in ("default-cascade", "default"))}
    if costs:
        out += ["", "What keeping every chunk costs (`prune.keep_all`, default cascade or product default, mean per question): "
                + "; ".join(f"`{n}` {num(c['over_budget_tokens'], 1)} tokens over the budget for "
                            f"{num(c['floored_chunks'], 1)} chunks kept by one sentence "
                            f"(pruned list {num(c['tokens_out'], 0)} tokens)" for n, c in costs.items())]
    return out


def hostile(d: dict[str, Any], file: str) -> list[str]:
    """Issue #12: hostile files, concurrency and the fault server (bench/hostile.py)."""
    out = ["### Hostile input", "", caption(file, d), ""]
    f = d.get("files")
    if f:
        c = f["consistency"]
        out += [f"{f['files']} generated hostile files, ingested one at a time with the {f['embedder']} as embedder "
                "(the run measures parsing, chunking and storing, not the model):", "",
                md_table(["crashes", "hangs > 30 s", "reported errors", "ingested", "peak RSS bench (MB)",
                          "peak RSS parse worker (MB)", "slowest file (s)", "database consistent"],
                         [[f["crashes"], f["hangs_over_30s"], f["errors_reported"], f["ingested"],
                           num(f["peak_rss_mb_bench_process"], 0), num(f["peak_rss_mb_parse_workers"], 0),
                           num(f["slowest"][0]["seconds"], 1) if f.get("slowest") else "",
                           "yes" if f["consistent"] else f"no: {c}"]]), "",
                md_table(["class", "outcomes"], [[k, ", ".join(f"{n} {s}" for s, n in v.items())]
                                                 for k, v in f["by_class"].items()]), ""]
    cc = d.get("concurrency")
    if cc:
        out += [f"Concurrency: {cc['query_threads']} query threads + 1 ingest thread + a second process "
                f"(`python -m core docs`, snapshot read) for {num(cc['seconds'], 0)} s: {cc['queries']} queries, "
                f"{cc['stale_results']} stale results, {cc['errors']} errors, {cc['ingested_during']} files ingested "
                f"meanwhile, {cc['second_process_runs']} second-process runs ({cc['second_process_failures']} failed).",
                ""]
    fl = d.get("faults")
    if fl:
        out += [f"Fault server: {fl['runs']} runs (a query with answer.mode=llm or an LLM context build under a "
                f"small budget) against {', '.join(fl['faults'])}: {fl['tracebacks']} tracebacks, "
                f"{fl['budget_overshoots']} budget overshoots, key in database files: "
                f"{'yes' if fl['secret_in_db_files'] else 'no'}, key in traces or messages: "
                f"{'yes' if fl['secret_in_traces_or_messages'] else 'no'}."]
    return out


def hostile_llm(d: dict[str, Any], file: str) -> list[str]:
    """Issue #33 items 1-3: key echo, provider usage, a trickling server (bench/hostile.py --parts llm)."""
    ke, us, tr = d["key_echo"], d["usage"], d["trickle"]
    out = ["### Hostile LLM endpoint", "", caption(file, d), "",
           "An endpoint quoting the request headers (the key among them) in every reply and in 4xx/5xx bodies; key "
           f"occurrences in total: **{ke['key_occurrences_total']}** (database and token-vector bytes, traces, "
           "exported spans, error texts, stdout and stderr). Streamed replies: " + ke["streamed"] + ".", "",
           md_table(["path", "LLM calls", "key occurrences", "texts showing [redacted]"],
                    [[k, v["llm_calls"], v["key_occurrences"], v["texts_with_a_redaction"]]
                     for k, v in ke["paths"].items()]), "",
           f"Provider usage under a context-build budget of ${us['context_budget_usd']} and an agent budget of "
           f"${us['agent_budget_usd']}: largest overshoot **{num(us['max_overshoot_pct'], 2)} %**, rows with a "
           f"negative cost: {us['negative_rows']}.", "",
           md_table(["usage reported", "context calls", "context $", "flagged rows", "agent calls", "agent $",
                     "agent stop", "overshoot % (context / agent)"],
                    [[r["usage_fault"], r["context_calls"], num(r["context_ledger_usd"], 4), r["context_rows_flagged"],
                      r["agent_calls"], num(r["agent_ledger_usd"], 4), r["agent_stop"],
                      f"{num(r['context_overshoot_pct'], 2)} / {num(r['agent_overshoot_pct'], 2)}"]
                     for r in us["rows"]]), "",
           f"A server sending one byte every {tr['byte_every_s']} s against `llm.timeout_s` = {tr['timeout_s']:g}: "
           + "; ".join(f"{k.replace('_retries', ', retries ')}: {num(v['seconds'], 2)} s ({v['result']})"
                       for k, v in tr.items() if isinstance(v, dict) and "attempts" in v)
           + f"; the agent loop with a {tr['agent_trickle']['max_seconds']:g} s budget: "
           f"{num(tr['agent_trickle']['seconds'], 2)} s under trickling, {num(tr['agent_500s']['seconds'], 2)} s "
           f"under repeated 500s; hangs over 30 s: {tr['hangs_over_30s']}."]
    return out


def hostile_ingest(d: dict[str, Any], file: str) -> list[str]:
    """Issue #33: files on disk and the ingest path (bench/hostile.py --parts ingest)."""
    out = ["### Hostile files on disk and kill -9", "", caption(file, d), ""]
    sm, sn, sp = d["summary"], d["same_names"], d["special_files"]
    fi = d["first_ingest"]
    out += [md_table(["files lost", "hangs", "tracebacks", "file outside the folder ingested", "files capped",
                      "most texts embedded twice after a kill", "peak RSS first ingest (MB)"],
                     [[sm["files_lost"], sm["hangs"], sm["tracebacks"], "yes" if sm["outside_file_ingested"] else "no",
                       sm["capped_files"], sm["max_texts_embedded_twice_after_kill"], sm["peak_rss_mb_first_ingest"]]]),
            "",
            f"Same-named files: {sn['files']} files (a README.md and an index.html in each of {sn['files'] // 2} "
            f"folders) gave {sn['documents']} documents. Special files, refused by name: "
            + "; ".join(f"{r['case']}: {len(r['messages'])} refused in {num(r['seconds'], 1)} s" for r in sp["runs"])
            + ".", ""]
    am = d["amplification"]
    out += [f"Files under the size limit that cut into many chunks (per-file cap {am['max_chunks_per_file']:,}; parsed "
            "and chunked in the sandbox, embedded by the hash fake):", "",
            md_table(["file", "bytes", "outcome", "chunks", "seconds"],
                     [[r["file"], f"{r['bytes']:,}", r["status"] + (" (chunk cap)" if "max_chunks_per_file" in
                                                                     r["message"] else ""), r["chunks"],
                       num(r["seconds"], 1)] for r in am["files"]]), ""]
    kr = d["kill_resume"]
    out += [f"`kill -9` of `python -m core ingest` ({kr['files']} files in 5 folders, the shipped embedder) after "
            "the n-th printed file line and a pause (0 lines: during start-up), then the same command again; texts "
            "embedded twice = texts sent into the model before the kill + texts the resume embeds - chunks (groups "
            f"of at most {kr['group_chunks']} chunks are committed at a time):", "",
            md_table(["kill after lines + s", "killed at (s)", "documents kept", "resume: unchanged",
                      "resume: ingested", "into the model before kill", "embedded by resume", "chunks",
                      "embedded twice"],
                     [[f"{k['kill_after_lines']} + {num(k['then_s'], 1)}", num(k["killed_at_s"], 1),
                       k["documents_kept"], k["resume_unchanged"], k["resume_ingested"],
                       k["texts_into_model_before_kill"], k["vectors_made_by_resume"], k["chunks_in_corpus"],
                       k["texts_embedded_twice"]] for k in kr["kills"]]), "",
            "First ingest of sample_corpus/docs: " + "; ".join(
                f"{label.replace('_', ' ')}: peak RSS {v['peak_rss_mb']} MB in {num(v['seconds'], 0)} s"
                for label, v in fi.items()) + "."]
    return out


def _agent_prev(d: dict[str, Any]) -> list[str]:
    """The earlier evidence merge measured in the same run (bench/agent.py's agentprev row), when present."""
    types = {t: v for t, v in (d.get("by_type") or {}).items() if v.get("agentprev_recall@5") is not None}
    held = {t: v for t, v in (d.get("held_out_even") or {}).items() if v.get("agentprev_recall@5") is not None}
    if not types:
        return []
    def cells(by: dict[str, Any]) -> str:
        return "; ".join(f"{t} {num(v.get('agent_recall@5'), 1)} / {num(v.get('agent_allgold@10'), 1)} vs "
                         f"{num(v.get('agentprev_recall@5'), 1)} / {num(v.get('agentprev_allgold@10'), 1)}"
                         for t, v in by.items())
    return ["", "Evidence merge, this run's loop vs the earlier merge (the first round's rest only after the later "
                "queries' lists; chosen on the odd questions), recall@5 / all-gold@10: " + cells(types)
            + (". Held-out even half: " + cells(held) if held else "") + "."]


def agent(d: dict[str, Any], file: str) -> list[str]:
    """Issue #17: the agentic loop vs single-shot and the crude bridge on twowiki_multihop, by question type."""
    types = d.get("by_type") or {}
    cols = ["single_recall@5", "crude_recall@5", "agent_recall@5", "nohop_recall@5", "single_allgold@10",
            "crude_allgold@10", "agent_allgold@10", "nohop_allgold@10"]
    head = ["type", "n", "single recall@5", "crude recall@5", "loop recall@5", "loop without hops recall@5",
            "single all-gold@10", "crude all-gold@10", "loop all-gold@10", "loop without hops all-gold@10",
            "loop rounds", "single ms", "loop ms", "loop without hops ms"]

    def rows(by: dict[str, Any]) -> list[list[Any]]:
        return [[t, v["n"], *[num(v.get(c), 1) for c in cols], num(v.get("agent_mean_rounds")),
                 num(v.get("single_ms_mean"), 0), num(v.get("agent_ms_mean"), 0), num(v.get("nohop_ms_mean"), 0)]
                for t, v in by.items()]
    held = d.get("held_out") or {}
    au = d.get("grader_auroc") or {}
    ag = d.get("agent") or {}
    out = ["### Agentic loop: twowiki_multihop by question type", "", caption(file, d), "",
           f"{d.get('questions')} questions over 2,086 passages, document level; retrieval per round: hybrid "
           "(BM25 + dense, RRF) without the cascade. *single*: the multi-hop route's first round alone "
           "(decomposition on, agent off); *crude bridge*: one extra BM25 round over the capitalised names of "
           "single's top 3 passages that the question does not name, after that top 3; *loop*: the product's "
           "multi-hop route through `run_query` (routes.toml's overrides: "
           f"per_round {ag.get('per_round')}, stop_when_found {ag.get('stop_when_found')}, bridge_dense "
           f"{ag.get('bridge_dense')}; at most {ag.get('max_rounds')} rounds), forced on for every type, offline "
           "grader and entity bridging with targeted hops (the name a cue for the relation's first hop points to "
           "in each passage about the question's subject, searched alone); *loop without hops*: the same loop with "
           "the wide bag-of-names query only. Latency is wall-clock on a shared machine: compare rows of this run "
           "only.", "", md_table(head, rows(types)), ""]
    if held:
        out += [f"Held out ({d.get('held_out_label', 'test split')}; the hops were chosen on the train split):", "",
                md_table(head, rows(held)), ""]
    plain = types.get("all") or {}
    if plain.get("plain_recall@5") is not None:
        out.append("For reference, plain hybrid single-shot (no transforms) over all questions: recall@5 "
                   f"{num(plain.get('plain_recall@5'), 1)}, all-gold@10 {num(plain.get('plain_allgold@10'), 1)}; "
                   f"the crude bridge over it {num(plain.get('crude_plain_recall@5'), 1)} / "
                   f"{num(plain.get('crude_plain_allgold@10'), 1)}.")
    if au:
        out += ["", "Offline grader AUROC against gold passages (plain round-1 candidates), by router split: "
                    + ", ".join(f"{k} {num(v, 3)}" for k, v in au.items()) + " (fitted on odd-numbered questions). "
                    "Stop reasons: " + ", ".join(f"{k} {v}" for k, v in (d.get("stop_reasons") or {}).items()) + "."]
    return out + _agent_prev(d)


# -- issues #13-#17: answers, caches, router, transforms, runtimes, UI ------------------------------------------------
def _pct(v: Any, digits: int = 1) -> str:
    """A 0-1 share as a percentage ("–" when absent)."""
    return "–" if v is None else f"{v * 100:.{digits}f}%"


def _met(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "**not met**")


def synthesis(d: dict[str, Any], file: str) -> list[str]:
    """bench/synthesis.py: comparison, multi-hop and global questions answered offline (before / after #30)."""
    out = [f"### Synthesis answers offline: {d.get('label')}", "", caption(file, d), "",
           f"Multi-hop and global questions of `sample_corpus/eval.jsonl` and `eval_holdout*.jsonl`; comparisons and "
           f"global questions of `eval_synthesis.jsonl` (the comparison answer's dev set); \"comparison (holdout)\": "
           f"`eval_synthesis_holdout.jsonl`, written before the comparison answer's one revision. {d.get('config')}."
           + (f" Code: {d['code']}." if d.get("code") else "") + " Milliseconds were taken on a shared 2-core machine "
           "under heavy load (see the load averages): compare them within a run only.", ""]
    ceil = "ceiling_read" in ((d.get("summary") or {}).get("all") or {})
    rows = [[t, v.get("n"), num(v.get("correct"), 1), num(v.get("gold_coverage"), 1), num(v.get("refused"), 1),
             num(v.get("median_ms"), 0)] + ([num(v.get("ceiling_read"), 1), num(v.get("ceiling_top50"), 1)]
                                             if ceil else []) for t, v in (d.get("summary") or {}).items()]
    out.append(md_table(["type", "questions", "answered correctly %", "gold spans covered %", "refused %",
                         "median ms"] + (["ceiling: gold sentence in the chunks read %",
                                          "ceiling: in some stage's top 50 %"] if ceil else []), rows))
    if ceil:
        out += ["", "Ceiling: the share of questions with a sentence of a gold span in the chunks the answer read "
                "(the final list's top answer.max_chunks, or graph global search's community chunks when its reduce "
                "answered), and in the top 50 of any stage: what an answer that never refused and always quoted the "
                "right sentence could score under the same test."]
    return out


def raptor_incremental(d: dict[str, Any], file: str) -> list[str]:
    """bench/raptor_incremental.py: RAPTOR's incremental update against a full rebuild."""
    s = d.get("summary") or {}
    out = ["### RAPTOR: incremental update against a full rebuild", "", caption(file, d), "",
           f"{s.get('chunks')} chunks; the tree built without the last {len(s.get('new_documents') or [])} documents, "
           f"then their {s.get('new_chunks')} chunks arrive ({d.get('config')}). Retrieval: raptor_search's top 10 "
           f"for {s.get('questions')} global questions of the sample sets; the two trees' top 10 overlap "
           f"{num(s.get('top10_overlap'), 1)}%.", ""]
    out.append(md_table(["tree", "seconds", "summaries written", "nodes", "gold recall@10 %"],
                        [[k, num((s.get(k) or {}).get("seconds"), 2), (s.get(k) or {}).get("summaries_written"),
                          (s.get(k) or {}).get("nodes"), num((s.get(k) or {}).get("gold_recall@10"), 1)]
                         for k in ("incremental", "full rebuild")]))
    return out


def raptor(d: dict[str, Any], file: str) -> list[str]:
    """bench/raptor.py: RAPTOR beside graph global search and plain retrieval."""
    t = d.get("tree") or {}
    out = ["### RAPTOR, graph global search and plain retrieval on global and comparison questions", "",
           caption(file, d), "", f"{d.get('config')}; tree: {t.get('nodes')} summaries ({t.get('embedder')}).", ""]
    out.append(md_table(["configuration / questions", "n", "gold recall@10 %", "answered correctly %", "refused %",
                         "median ms"], [[k, v.get("n"), num(v.get("recall@10"), 1), num(v.get("correct"), 1),
                                         num(v.get("refused"), 1), num(v.get("median_ms"), 0)]
                                        for k, v in (d.get("summary") or {}).items()]))
    return out


def conversation(d: dict[str, Any], file: str) -> list[str]:
    """bench/conversation.py: follow-ups condensed offline against their standalone forms."""
    s = d.get("summary") or {}
    name = file[len("conversation_"):-len(".json")].replace("_", ", ")
    out = [f"### Conversation: {s.get('turns')} scripted turns over the sample corpus ({name})", "",
           caption(file, d), "", *([f"Code: {d['code']}.", ""] if d.get("code") else []),
           f"`{d.get('set')}`; {d.get('config')}. A follow-up scores when its answer cites the same first chunk as "
           "its standalone form (both refusing counts).", ""]
    out.append(md_table(["follow-ups", "both answered", "same first citation %", "any common citation %",
                         "condensed vs standalone word F1", "control: as written, no history, same first citation %"],
                        [[s.get("follow_ups"), s.get("both_answered"), num(s.get("same_first_citation"), 1),
                          num(s.get("any_common_citation"), 1), num(s.get("mean_word_f1"), 3),
                          num(s.get("no_history_same_first_citation"), 1)]]))
    return out


def quality_sample(d: dict[str, Any], file: str) -> list[str]:
    """bench/quality.py on sample_corpus/eval.jsonl (chunk-level recall, product rows with answer metrics)."""
    out = [f"### Quality: `sample_corpus` ({d.get('questions')} questions of `eval.jsonl`)", "", caption(file, d), "",
           "Chunk-level retrieval metrics by configuration; the answer columns exist only for rows that produce an "
           "answer. The rows' own measurement times are in the last column (the offline answer section below has "
           "the answer rates of the current support model).", ""]
    rows = []
    for r in d.get("rows") or []:
        m = r.get("metrics") or {}
        rows.append([r.get("name", ""), r.get("description", ""), num(m.get("recall@5"), 3), num(m.get("recall@10"), 3),
                     num(m.get("mrr"), 3), num(m.get("ndcg@10"), 3), num(m.get("ms"), 0),
                     num(m.get("faithfulness"), 3), num(m.get("refusal_accuracy"), 3), _row_time(r)])
    out.append(md_table(["configuration", "what", "recall@5", "recall@10", "MRR", "nDCG@10", "ms (mean)",
                         "faithfulness", "refusal accuracy", "measured (UTC)"], rows))
    return out


def ingest_runtime(d: dict[str, Any], file: str) -> list[str]:
    """bench/ingest.py --runtime X: the same table as ingest.json, titled with the runtime it embedded with."""
    out = ingest(d, file)
    runtime = (d.get("parameters") or {}).get("runtime")
    if out and runtime:
        out[0] = out[0].replace("### Ingest speed (", f"### Ingest speed, `embedding.runtime={runtime}` (", 1)
    return out


def _sci(v: Any) -> str:
    return f"{v:.1e}" if isinstance(v, (int, float)) else "–"


def ray_ingest(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 3: bench/ray_ingest.py, local vs ray ingest on this machine."""
    s, a = d.get("summary") or {}, d.get("agreement") or {}
    out = [f"### Ingest on Ray vs local ({d.get('corpus', '')})", "", caption(file, d), "",
           "Each engine in a fresh process on the same abstracts into a fresh database; Ray is a local runtime on this "
           "2-core machine (one embedding actor per CPU, one ONNX thread each). Memory: peak summed PSS of the "
           "process tree (driver, parse sandbox, and for Ray its GCS, raylet and workers).", ""]
    rows = [[r.get("engine"), r.get("round"), num(r.get("ingest_s"), 1), num(r.get("chunks_per_s"), 1),
             num(r.get("ray_start_s"), 1) if r.get("ray_start_s") is not None else "–", num(r.get("peak_tree_mib"), 0),
             r.get("peak_tree_processes")] for r in d.get("runs") or []]
    out.append(md_table(["engine", "round", "ingest s", "chunks/s", "Ray start s", "peak MiB", "processes"], rows))
    if s:
        out += ["", f"Ray / local ingest time **{num(s.get('overhead_ratio'), 2)}×** "
                f"({num(s.get('overhead_ratio_with_start'), 2)}× counting the runtime's start); peak memory "
                f"{num(s.get('memory_ratio'), 2)}× ({num(s.get('ray_peak_mib'), 0)} vs {num(s.get('local_peak_mib'), 0)} MiB)."
                f" Same documents: {a.get('documents_equal')}; same chunk ids and texts: {a.get('chunks_equal')}; "
                f"largest vector difference {_sci(a.get('max_abs_vector_diff'))} ({a.get('vector_model')})"
                + (f"; token vectors held {a.get('token_vectors_held')} of {num(a.get('token_vector_texts'))} chunk "
                   f"texts, same token ids and spans: {a.get('token_ids_spans_equal')}, largest difference "
                   f"{_sci(a.get('max_abs_token_vector_diff'))}" if "token_vectors_held" in a else "") + ". "
                "Seconds here depend mostly on the other jobs sharing the machine (load average in the caption); "
                "the two engines ran one after the other, not side by side."]
    return out


def ray_eval(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 3: bench/ray_eval.py, batch eval over two configurations, local vs ray, on this machine."""
    s, snap = d.get("summary") or {}, d.get("snapshot_methods") or {}
    out = [f"### Batch eval on Ray vs local ({d.get('corpus', '')}, {num(d.get('questions'))} questions x "
           f"{len(d.get('configs') or [])} configurations)", "", caption(file, d), "",
           "Configurations " + ", ".join(f"`{c}`" for c in d.get("configs") or []) + " over the same questions; each "
           "engine in a fresh process, the corpus already in the database. Ray is a local runtime on this 2-core "
           "machine: one eval actor per CPU on a read-only snapshot of the database, one ONNX thread each; local-1t "
           "is the local engine with OMP_NUM_THREADS=1, the thread setting Ray gives those workers. Eval s: "
           "run_eval's wall time (for Ray: snapshot, actor start and model loads, fan-out, aggregation), without "
           "the runtime's start. CPU s: user + system seconds of the whole process tree (model loads included). "
           "Memory: peak summed PSS of the process tree.", ""]
    rows = [[r.get("engine"), r.get("round"), num(r.get("eval_s"), 1),
             num(r.get("ray_start_s"), 1) if r.get("ray_start_s") is not None else "–", num(r.get("tree_cpu_s"), 1),
             num(r.get("peak_tree_mib"), 0), r.get("peak_tree_processes"),
             " / ".join(num((r.get("metrics") or {}).get(c, {}).get("ndcg@10"), 4) for c in d.get("configs") or [])]
            for r in d.get("runs") or []]
    out.append(md_table(["engine", "round", "eval s", "Ray start s", "CPU s", "peak MiB", "processes",
                         "nDCG@10 " + " / ".join(d.get("configs") or [])], rows))
    if s:
        agree = d.get("agreement") or {}
        same = "; ".join(f"`{c}` {num(a.get('same_final_list'))}/{num(a.get('questions'))} same final lists, largest "
                         f"metric difference {num(a.get('max_metric_diff'), 4)}"
                         + (f" ({num(a['n_differing'])} metric values differ, listed in the file)"
                            if a.get("n_differing") else "") for c, a in agree.items())
        one_t = d.get("agreement_local_1t") or {}
        if one_t:
            same += "; local-1t against local: " + ", ".join(
                f"`{c}` {num(a.get('same_final_list'))}/{num(a.get('questions'))} same final lists, largest metric "
                f"difference {num(a.get('max_metric_diff'), 4)}" for c, a in one_t.items())
        same_threads = (f" Against local-1t: **{num(s.get('ratio_vs_local_1t'), 2)}×** "
                        f"({num(s.get('ratio_vs_local_1t_with_start'), 2)}× with the start; local-1t / local "
                        f"{num(s['local_1t_eval_s'] / s['local_eval_s'], 2)}×): what Ray itself gains or costs here."
                        if s.get("ratio_vs_local_1t") and s.get("local_eval_s") else "")
        out += ["", f"Ray / local eval time **{num(s.get('overhead_ratio'), 2)}×** "
                f"({num(s.get('overhead_ratio_with_start'), 2)}× counting the runtime's start of "
                f"{num(s.get('ray_start_s'), 1)} s).{same_threads} CPU seconds: Ray {num(s.get('ray_cpu_s'), 0)}, local "
                f"{num(s.get('local_cpu_s'), 0)}"
                + (f", local-1t {num(s.get('local_1t_cpu_s'), 0)}" if s.get("local_1t_cpu_s") is not None else "")
                + f"; peak memory {num(s.get('memory_ratio'), 2)}× "
                f"({num(s.get('ray_peak_mib'), 0)} vs {num(s.get('local_peak_mib'), 0)} MiB). Last Ray run: "
                f"{s.get('actors')} actors, {s.get('tasks')} tasks of up to {s.get('chunk')} questions, snapshot "
                f"{num(s.get('snapshot_s'), 3)} s, actors ready after {num(s.get('actor_start_s'), 1)} s, "
                f"{s.get('duplicates')} duplicate results dropped. Agreement, Ray against local: {same}. "
                f"Snapshot of the {num(snap.get('db_mib'), 1)} MiB database: checkpoint + copy + token-vector link "
                f"{num(snap.get('copy_s'), 3)} s; DuckDB EXPORT + IMPORT DATABASE {num(snap.get('export_import_s'), 3)} "
                "s (without the token vectors). Seconds depend on the other jobs sharing the machine (load average in "
                "the caption); the engines ran one after the other, not side by side."]
    return out


def blas_threads(d: dict[str, Any], file: str) -> list[str]:
    """numpy's BLAS threads during queries (bench/blas_threads.py): OpenBLAS's default vs one thread, side by side."""
    p, st = d.get("parameters") or {}, d.get("settings") or {}
    busy = p.get("busy_processes") or 0
    out = [f"### Query time by BLAS threads ({p.get('corpus')}, {num(p.get('documents'))} documents, "
           f"{num(p.get('questions'))} questions"
           + (f", {busy} busy-looping processes beside it" if busy else ", nothing else started") + ")", "",
           caption(file, d), "",
           "The default configuration's queries in one process, the two settings alternating per question in rotating "
           "order (threadpoolctl). `core.deps.build_deps` limits BLAS to one thread since this run.", ""]
    rows = [[k, st[k].get("threads"), num(st[k].get("wall_ms_mean"), 1), num(st[k].get("wall_ms_median"), 1),
             num(st[k].get("cpu_ms_mean"), 1)] for k in st]
    out.append(md_table(["setting", "BLAS threads", "wall ms mean", "wall ms median", "CPU ms mean"], rows))
    out += ["", f"Default / one thread: wall **{num(d.get('wall_ratio_default_to_1'), 2)}×**, CPU "
            f"{num(d.get('cpu_ratio_default_to_1'), 2)}×; identical final lists {d.get('identical_final_lists')}."]
    return out


def route_names(d: dict[str, Any], file: str) -> list[str]:
    """The router's name guard (bench/route_names.py): what it changes on the routing set, per split and in Russian."""
    p = d.get("parameters") or {}
    out = ["### Router name guard (chitchat / out-of-scope overruled when the question names a corpus term)", "",
           caption(file, d), "",
           f"Every question of `{p.get('file')}` against the vocabulary of the corpus it was asked about, the shipped "
           f"router at min_confidence {p.get('min_confidence')} / refuse_confidence {p.get('refuse_confidence')}. A "
           "rule, not a fitted threshold: nothing was chosen on these questions. *costly*: corpus questions sent to "
           "chitchat or out-of-scope; *refusals kept*: chitchat / out-of-scope questions given their own route.", ""]
    rows = []
    for part in ("train", "test", "russian"):
        for k in ("without", "with"):
            r = (d.get(part) or {}).get(k) or {}
            rows.append([part, k, num(r.get("questions")), f"{num(r.get('costly'))}/{num(r.get('corpus_questions'))}",
                         f"{num(r.get('no_retrieval_kept'))}/{num(r.get('no_retrieval_questions'))}",
                         num(r.get("abstain_rate"), 4)])
    out.append(md_table(["questions", "guard", "n", "costly", "refusals kept", "abstain rate"], rows))
    out += ["", f"Decisions the guard overruled: {len(d.get('overruled') or [])} (listed in the file). It was added "
            "for a question seen in the browser, not in this set: \"Какой максимальный размер пакета в Tidewater?\" "
            "on the sample corpus went to out-of-scope; with the guard it runs the default pipeline "
            "(tests/test_router.py)."]
    return out


def _router_splits(d: dict[str, Any], variants: Sequence[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(split label, variant, its stats) for the router's train (CV) and test splits, those present."""
    out = []
    for part, label in (("train_cv", "router train (5-fold CV)"), ("test", "router test")):
        for k in variants:
            r = (d.get(part) or {}).get(k) or {}
            if r:
                out.append((label, k, r))
    return out


def route_evidence(d: dict[str, Any], file: str) -> list[str]:
    """The router's evidence guard (bench/route_evidence.py): chosen on router-train CV, reported on the test split
    and on the sample corpus's question sets."""
    p = d.get("parameters") or {}
    ch = (d.get("train_cv") or {}).get("chosen") or {}
    out = ["### Router evidence guard (chitchat / out-of-scope overruled when one passage is about the question)", "",
           caption(file, d), "",
           f"The shipped router at min_confidence {p.get('min_confidence')} / refuse_confidence "
           f"{p.get('refuse_confidence')}, with the keyword and name guards; each question against the BM25 index of "
           f"the corpus it was asked about. Rule ({p.get('rule')}) chose `router.evidence_min_terms` "
           f"{ch.get('min_terms')}, `evidence_min_share` {ch.get('min_share')}, `evidence_unknown_weight` "
           f"{ch.get('unknown_weight')}. *fires on*: corpus questions whose best passage meets the guard, whatever "
           "the classifier said; *extra sent*: chitchat / out-of-scope lines it sends to retrieval (the answer stage "
           "can still refuse them)."
           + (f" The product ships `evidence_unknown_weight` {d['shipped_setting'].get('unknown_weight')} "
              f"(*shipped* rows): {d['shipped_setting'].get('note')}." if d.get("shipped_setting") and
              d["shipped_setting"].get("unknown_weight") != ch.get("unknown_weight") else ""), ""]
    rows = [[label, {"without_guard": "without", "chosen": "with (rule's choice)", "shipped": "with (shipped)"}[k],
             f"{num(r.get('costly'))}/{num(r.get('corpus_questions'))}", _pct(r.get("fire_rate_on_corpus_questions")),
             f"{num(r.get('extra_sent_to_retrieval'))}/{num(r.get('non_corpus_lines'))}"]
            for label, k, r in _router_splits(d, ("without_guard", "chosen", "shipped"))]
    out.append(md_table(["questions", "guard", "costly", "fires on", "extra sent"], rows))
    kg = d.get("keyword_guard") or {}
    if kg:
        out += ["", f"Keyword guard by plain term count (the product's) vs weighted by idf (evidence guard off; "
                f"{kg.get('rule')}). *plain_without_conversation_rule*: the plain guard before session 8, which also "
                "held for short queries worded as conversation ('hi, how are you?'); since then such a query "
                "(core/route/router.py conversational) gets no keyword guard. "
                "*left without retrieval*: chitchat / out-of-scope lines the router answers without searching. The routed "
                "figures of \"Router: six classes\" (`route.json`) have the plain keyword guard and no evidence guard; "
                "the product's router adds the evidence guard above.", ""]
        krows = [[label, k, f"{num(r.get('costly'))}/{num(r.get('corpus_questions'))}",
                  f"{num(r.get('non_corpus_without_retrieval'))}/{num(r.get('non_corpus_lines'))}"]
                 for label, k, r in _router_splits(kg, ("plain_without_conversation_rule", "plain", "weighted"))]
        out.append(md_table(["questions", "keyword guard", "costly", "left without retrieval"], krows))
    sets = d.get("sample_sets") or {}
    if sets:
        out += ["", "Sample corpus question sets, questions sent to a no-retrieval route without → with the guard "
                "(`eval_holdout4.jsonl`'s four were seen before this guard was written: they are why it exists):", ""]
        srows = [[f"`{name}`", f"{num(st['answerable']['no_retrieval_without_guard'])} → "
                  f"{num(st['answerable']['no_retrieval_with_guard'])} of {num(st['answerable']['n'])}",
                  f"{num(st['unanswerable']['no_retrieval_without_guard'])} → "
                  f"{num(st['unanswerable']['no_retrieval_with_guard'])} of {num(st['unanswerable']['n'])}",
                  num(st['answerable'].get('no_retrieval_with_shipped_guard')),
                  num(st['unanswerable'].get('no_retrieval_with_shipped_guard'))]
                 for name, st in sets.items()]
        out.append(md_table(["set", "answerable", "unanswerable", "answerable, shipped guard",
                             "unanswerable, shipped guard"], srows))
    return out


def onnx(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14: torch vs onnx vs onnx-int8 encode speed and ranking agreement (bench/embed_runtime.py)."""
    p = d.get("parameters") or {}
    bar = d.get("bar") or {}
    split = {"tail": "; report split: taken from the end of the corpus and queries",
             "head": ", taken from the start of the corpus and queries"}.get(p.get("split"), "")
    out = [f"### Embedding runtimes (SciFact subsample: {p.get('docs')} abstracts, {p.get('queries')} queries{split})",
           "",
           caption(file, d), "",
           f"All runtimes in one process, slice by slice in rotating order ({p.get('slices')} slices); speed-up is bare "
           f"encode against torch in the same run (not the whole ingest path); int8: {p.get('int8', '–')}. Bar for "
           f"the default: mean top-10 overlap with torch's ranking ≥ {bar.get('top10_overlap_min')} and nDCG@10 "
           f"within {bar.get('ndcg_delta_max')} of torch.", ""]
    rows = []
    for name, r in (d.get("runtimes") or {}).items():
        rows.append([f"`{name}`", num(r.get("docs_per_s"), 2), f"{num(r.get('speedup_vs_torch'), 2)}×",
                     num(r.get("query_latency_ms_median"), 1), num(r.get("worst_cosine_to_torch_docs"), 4),
                     num(r.get("top10_overlap_with_torch"), 3), num(r.get("min_top10_overlap"), 2),
                     num(r.get("ndcg@10"), 4), num(r.get("ndcg_delta_vs_torch"), 4), num(r.get("meets_bar"))])
    out.append(md_table(["runtime", "docs/s", "speed-up vs torch", "query ms (median)", "worst cosine to torch",
                         "top-10 overlap (mean)", "top-10 overlap (min)", "nDCG@10", "Δ nDCG@10", "meets bar"], rows))
    moved = [(n, r) for n, r in (d.get("runtimes") or {}).items() if r.get("ndcg_changed_queries")]
    if moved:
        def extremes(r: dict[str, Any]) -> str:
            ch = r.get("ndcg_changes_sorted") or []
            return ", ".join(num(x, 2) for x in (ch if len(ch) <= 4 else ch[:1] + ch[-3:]))

        out += ["", "Queries whose nDCG@10 changed against torch: "
                + "; ".join(f"`{n}` {r['ndcg_changed_queries']} (largest changes {extremes(r)})" for n, r in moved)
                + f"; one query's full swing moves the mean by {num(1 / max(p.get('queries') or 1, 1), 4)}."]
    if d.get("fastest_meeting_bar"):
        out += ["", f"Fastest runtime meeting the bar: `{d['fastest_meeting_bar']}`. The issue's ≥ 1.3× target is for "
                "the whole ingest path against bare torch encode (`ingest.json`, default runtime)."]
    return out


def onnx_runs(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14: how the ONNX embedder cuts texts into session.run calls (bench/onnx_runs.py)."""
    p = d.get("parameters") or {}
    mt = p.get("mean_tokens") or {}
    busy = f" Note: {p['note']}." if p.get("note") else ""
    out = [f"### ONNX run plans ({p.get('chunks')} chunks, {p.get('sentences')} sentences"
           f"{', busy machine' if busy else ''})", "", caption(file, d), "",
           f"The same fp32 model, one embedder per plan, every plan on both workloads in each of {p.get('rounds')} "
           f"rounds (order reversed every round), median seconds; chunks average {num(mt.get('chunks'), 0)} tokens, "
           f"sentences {num(mt.get('sentences'), 0)}. Both outputs as ingest asks for them (sentence vectors and "
           "token vectors). Padding: padded tokens run / real tokens. Speed-up against the plan the embedder had "
           "before; the last column checks that the cut changes no vector." + busy, ""]
    rows = []
    for r in d.get("plans") or []:
        pad, med, sp = r.get("padded_over_real_tokens") or {}, r.get("median_s") or {}, r.get("speedup_vs_before") or {}
        name = r.get("plan", "?")
        rows.append([f"**{name}**" if name == p.get("default") else name,
                     num(pad.get("chunks"), 2), num(med.get("chunks"), 2), f"{num(sp.get('chunks'), 2)}×",
                     num(pad.get("sentences"), 2), num(med.get("sentences"), 2), f"{num(sp.get('sentences'), 2)}×",
                     f"{max((r.get('max_abs_diff_vs_default') or {0: 0.0}).values()):.1e}"])
    out.append(md_table(["plan", "chunks: padding", "s", "speed-up", "sentences: padding", "s", "speed-up",
                         "max abs diff to default"], rows))
    return out


def int8_recipes(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14: int8 recipe candidates on the dev split (bench/int8_recipes.py); the chosen one is reported in
    onnx.json on the other split."""
    p = d.get("parameters") or {}
    out = [f"### int8 recipes on the {p.get('split', '?')} (dev) split ({p.get('docs')} abstracts, "
           f"{p.get('queries')} queries)", "", caption(file, d), "",
           "Each candidate against torch (computed in the same run) and against the fp32 ONNX model timed in the same "
           f"slices; torch nDCG@10 {num(d.get('torch_ndcg@10'), 4)}. The recipe is chosen here and reported once on "
           "the tail split (Embedding runtimes).", ""]
    rows = [[n, num(r.get("top10_overlap_with_torch"), 3), num(r.get("ndcg_delta_vs_torch"), 4),
             num(r.get("worst_cosine_to_torch_docs"), 4), f"{num(r.get('speedup_vs_onnx_fp32'), 2)}×",
             num(r.get("meets_bar"))] for n, r in (d.get("recipes") or {}).items()]
    out.append(md_table(["recipe", "top-10 overlap", "Δ nDCG@10", "worst cosine to torch", "speed-up vs onnx fp32",
                         "meets bar"], rows))
    return out


def generalise_more(d: dict[str, Any], file: str) -> list[str]:
    """Another generalise.py run with the same shape (e.g. anthropic_codebase, beir_scifact), retitled."""
    sets = d.get("sets") or {}
    merged = json.loads((RESULTS / "generalise.json").read_text()) if (RESULTS / "generalise.json").exists() else {}
    parts = {Path(p.get("file", "")).name for p in merged.get("parts") or []}
    if file in parts:
        return [f"*`bench/results/{file}` ({', '.join(f'`{s}`' for s in sets)}): a part merged into "
                "`generalise.json` by `bench/generalise.py --merge`; its sets are in the generalisation tables above.*"]
    try:
        out = generalise(d, file)
    except (KeyError, TypeError, StopIteration):
        out = ["### Generalisation", "", caption(file, d), "", "*(results incomplete: the bench may still be running)*"]
    out[0] = "### Generalisation: " + ", ".join(f"`{s}`" for s in sets) + " at document level"
    for name, r in sets.items():
        cp = r.get("chunk_pass@5")
        if cp:
            out += ["", f"`{name}` chunk-level Pass@5 (exact chunk text, as the cookbook scores it): "
                    + "; ".join(f"{k} {num(v, 1)}" for k, v in cp.items())]
    return out


_AGENT_TYPES = ("compositional", "inference", "comparison", "bridge_comparison")


def agent_targets(d: dict[str, Any]) -> list[str]:
    """Issue #17's targets checked against by_type: recall@5 >= crude + 3 (compositional, inference,
    bridge_comparison), all-gold@10 >= 75 / 75 / 30, comparison never below single-shot, mean rounds <= 2.2."""
    t = d.get("by_type") or {}
    checks = []
    for typ in ("compositional", "inference", "bridge_comparison"):
        v = t.get(typ) or {}
        if v.get("agent_recall@5") is not None and v.get("crude_recall@5") is not None:
            checks.append(f"{typ} recall@5 {num(v['agent_recall@5'], 1)} ≥ crude {num(v['crude_recall@5'], 1)} + 3: "
                          + _met(v["agent_recall@5"] >= v["crude_recall@5"] + 3))
    for typ, goal in (("compositional", 75), ("inference", 75), ("bridge_comparison", 30)):
        v = (t.get(typ) or {}).get("agent_allgold@10")
        if v is not None:
            checks.append(f"{typ} all-gold@10 {num(v, 1)} ≥ {goal}: {_met(v >= goal)}")
    c = t.get("comparison") or {}
    if c.get("agent_recall@5") is not None and c.get("single_recall@5") is not None:
        ok = c["agent_recall@5"] >= c["single_recall@5"] and c.get("agent_allgold@10", 0) >= c.get("single_allgold@10", 0)
        checks.append(f"comparison not below single-shot (recall@5 {num(c['agent_recall@5'], 1)} vs "
                      f"{num(c['single_recall@5'], 1)}, all-gold@10 {num(c.get('agent_allgold@10'), 1)} vs "
                      f"{num(c.get('single_allgold@10'), 1)}): {_met(ok)}")
    rounds = (t.get("all") or {}).get("agent_mean_rounds")
    if rounds is not None:
        checks.append(f"mean rounds {num(rounds)} ≤ 2.2: {_met(rounds <= 2.2)}")
    return ["Issue #17 targets (all 300 questions): " + "; ".join(checks) + "."] if checks else []


def agent_decompose(d: dict[str, Any], file: str) -> list[str]:
    """bench/agent.py --decompose: the same three rows with transforms.decompose on in every round."""
    types = d.get("by_type") or {}
    cols = ["single_recall@5", "crude_recall@5", "agent_recall@5", "single_allgold@10", "crude_allgold@10",
            "agent_allgold@10"]
    rows = [[t, v.get("n"), *[num(v.get(c), 1) for c in cols], num(v.get("agent_mean_rounds")),
             num(v.get("single_ms_mean"), 0), num(v.get("agent_ms_mean"), 0)] for t, v in types.items()]
    au = d.get("grader_auroc") or {}
    out = ["### Agentic loop with decomposition in every round: twowiki_multihop", "", caption(file, d), "",
           f"Same rows as the agentic-loop table above ({d.get('questions')} questions), but single-shot, the crude "
           "bridge's first round and every agent round run with `transforms.decompose=on` (offline templates); at "
           f"most {(d.get('agent') or {}).get('max_rounds')} rounds.", "",
           md_table(["type", "n", "single recall@5", "crude recall@5", "agent recall@5", "single all-gold@10",
                     "crude all-gold@10", "agent all-gold@10", "agent rounds", "single ms", "agent ms"], rows), ""]
    out += agent_targets(d)
    if au or d.get("stop_reasons"):
        out += ["", f"Grader AUROC: odd (fitting half) {num(au.get('odd'), 3)}, even (held out) {num(au.get('even'), 3)}. "
                "Stop reasons: " + ", ".join(f"{k} {v}" for k, v in (d.get("stop_reasons") or {}).items()) + "."]
    return out + _agent_prev(d)


def agent_sample(d: dict[str, Any], file: str) -> list[str]:
    """bench/agent.py --dataset sample: grader AUROC on sample_corpus and its multi-hop questions, single-shot vs
    the loop (recall@5, all-gold@10, rounds, latency) and what each round of the loop added."""
    by = d.get("by_config") or {}
    rows = [[name, v.get("n"), num(v.get("recall@5"), 1), num(v.get("allgold@10"), 1), num(v.get("mean_rounds")),
             num(v.get("ms_mean"), 0),
             " · ".join(f"r{r.get('round')} {num(r.get('recall@10'), 1)} ({'+' if (r.get('added@10') or 0) >= 0 else ''}"
                        f"{num(r.get('added@10'), 1)})" for r in v.get("per_round") or []) or "–"]
            for name, v in by.items()]
    au = d.get("grader_auroc") or {}
    out = ["### Agentic loop: sample_corpus multi-hop questions", "", caption(file, d), "",
           f"The {d.get('multi_hop_questions')} multi-hop questions of `sample_corpus/eval.jsonl`, chunk level (gold = "
           "a text span, the Evaluate rule), through the product's `run_query` with the default cascade (rerank, "
           "prune, MMR), answers off; *loop*: agent.enabled with the offline grader and entity bridging, at most "
           f"{(d.get('agent') or {}).get('max_rounds')} rounds; *default (routed)*: the product default, whose router "
           "sends the questions it calls multi-hop to the loop over decomposition. Per round: recall@10 of the "
           "evidence pool after each round (gain over the round before). Latency is wall-clock on a shared machine: "
           "compare rows of this run only.", "",
           md_table(["configuration", "n", "recall@5", "all-gold@10", "rounds", "ms", "loop: recall@10 per round"],
                    rows), ""]
    if au:
        parts = []
        for which, label in (("final", "the list the loop grades (after rerank, prune, MMR)"),
                             ("fused", "the fused list")):
            a = au.get(which) or {}
            parts.append(f"{label}: all {num((a.get('all') or {}).get('auroc'), 3)} "
                         f"({(a.get('all') or {}).get('candidates')} candidates), odd {num((a.get('odd') or {}).get('auroc'), 3)}, "
                         f"even {num((a.get('even') or {}).get('auroc'), 3)}, multi-hop "
                         f"{num((a.get('multi-hop') or {}).get('auroc'), 3)}")
        out.append(f"Offline grader AUROC against gold spans on the {d.get('auroc_questions')} answerable questions "
                   "(fitted on twowiki odd questions only, so every sample question is held out; goal ≥ 0.85): "
                   + "; ".join(parts) + ".")
    return out


def agent_with_targets(d: dict[str, Any], file: str) -> list[str]:
    """agent.json's table plus the issue's targets; a file missing keys (a bench still writing it) gets the tolerant
    table of agent_decompose instead of a traceback."""
    try:
        out = agent(d, file)
    except (KeyError, TypeError):
        out = agent_decompose(d, file)
        out[0], out[4] = "### Agentic loop: twowiki_multihop by question type", "*(results incomplete)*"
        return out
    targets = agent_targets(d)
    return out + [""] + targets if targets else out


def router_refit(d: dict[str, Any], file: str) -> list[str]:
    """Issue #41 item 4: the router refitted without sample-corpus rows, before / after (python -m train.route)."""
    out = ["### Router refitted on public data only (before / after)", "", caption(file, d), "",
           "The previous model (" + ", ".join(f"{k} {v}" for k, v in (d.get("old_training_rows") or {}).items())
           + " training rows) against the refit (" + str((d.get("new_provenance") or {}).get("source", "")) + "), "
           "the classifier's best class before thresholds, then the route taken at the shipped thresholds "
           f"({', '.join(f'{k} {v}' for k, v in (d.get('thresholds') or {}).items())}). 'test_in_both_splits': the "
           "rows neither fit saw.", ""]
    rows = []
    for part in ("test", "test_in_both_splits"):
        for side in ("before", "after"):
            r = _dig(d, part, side) or {}
            rows.append([part, side, num(r.get("n")), _pct(r.get("accuracy")), num(r.get("macro_f1"), 3),
                         r.get("costly", "–"), _pct(r.get("abstain_rate"))])
    return out + [md_table(["test rows", "model", "n", "accuracy", "macro-F1", "corpus questions refused",
                            "abstained"], rows), ""]


def route(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: the offline router's test-split scores (bench/route.py --part router)."""
    r = d.get("router") or {}
    t = r.get("test") or {}
    th = r.get("thresholds") or {}
    out = ["### Router: six classes, offline classifier", "", caption(file, d), "",
           f"Trained on {num(r.get('train_examples'))} labelled questions, scored once on the {num(r.get('test_examples'))}"
           f"-question test split (split by source and label). Thresholds chosen by 5-fold CV on the train split: "
           f"`router.min_confidence` {th.get('min_confidence')}, `router.refuse_confidence` {th.get('refuse_confidence')}"
           f" ({th.get('rule', '')}). Prediction {num(r.get('predict_ms_per_question'), 1)} ms per question."
           + (f" Queries load the fitted model shipped as data (`core/models/data/router_model.npz`, "
              f"{num(r.get('shipped_model_bytes', 0) / 1e6, 2)} MB) in {num(r.get('shipped_load_ms_median_of_5'), 1)} ms"
              f" instead of fitting it ({num(r.get('train_seconds_median_of_3'), 2)} s); largest probability difference "
              f"from the fit on the test split {r.get('shipped_vs_fitted_max_abs_diff'):.1e}."
              if r.get("shipped_load_ms_median_of_5") is not None else ""), ""]
    rows = [[c, num(v.get("precision"), 3), num(v.get("recall"), 3), num(v.get("f1"), 3), v.get("n")]
            for c, v in (t.get("per_class") or {}).items()]
    if rows:
        out.append(md_table(["class", "precision", "recall", "F1", "n"], rows))
    if t:
        mf, cr = t.get("macro_f1"), t.get("costly_rate")
        out += ["", f"Test split: macro-F1 **{num(mf, 3)}** (target ≥ 0.90: {_met(mf >= 0.90 if mf is not None else None)}); "
                f"corpus questions routed to chitchat or out-of-scope {t.get('costly')} of {t.get('corpus_questions')} "
                f"= **{_pct(cr, 2)}** (target ≤ 1%: {_met(cr <= 0.01 if cr is not None else None)}); abstained "
                f"{_pct(t.get('abstain_rate'))}; accuracy {num(t.get('accuracy'), 3)}."]
    conf = t.get("confusion_routed") or {}
    if conf:
        cols = list(next(iter(conf.values())))
        out += ["", "Confusion after thresholds (rows: true class, columns: route taken):", "",
                md_table(["true \\ routed", *cols], [[c, *[v.get(k, 0) for k in cols]] for c, v in conf.items()])]
    src = t.get("by_source") or {}
    if src:
        out += ["", "Accuracy by source: " + "; ".join(f"{s} {num(v.get('accuracy'), 3)} (n {v.get('n')})"
                                                        for s, v in src.items()) + "."]
    return out


def route_twowiki(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: twowiki_multihop by question type: default, each transform forced on, routed."""
    tw = d.get("twowiki") or {}
    rows_in = tw.get("rows") or {}
    types = ["comparison", "compositional", "inference", "bridge_comparison", "all"]
    out = [f"### Query transforms and routing: twowiki_multihop ({tw.get('questions')} questions, document level)", "",
           caption(file, d), "",
           "Retrieval only (rerank, prune, MMR, answers, answer cache and agent off); *default* has the router off, "
           "each transform row forces that transform on with the router off, *routed* has the router on and "
           "transforms on auto. Cells: recall@5 / all-gold@10 (%), mean ms in the last column.", ""]
    rows = []
    for name, r in rows_in.items():
        bt = r.get("by_type") or {}
        fr = r.get("firing_rate") or {}
        rows.append([name, *[f"{num((bt.get(t) or {}).get('recall@5'), 1)} / {num((bt.get(t) or {}).get('allgold@10'), 1)}"
                             for t in types],
                     ", ".join(f"{k} {_pct(v, 0)}" for k, v in fr.items() if v) or "none",
                     num((bt.get("all") or {}).get("ms_mean"), 0)])
    out.append(md_table(["row", *types, "transforms fired", "ms (mean)"], rows))
    dflt = (rows_in.get("default") or {}).get("by_type") or {}
    routed = (rows_in.get("routed") or {}).get("by_type") or {}
    if dflt and routed:
        checks = []
        b0, b1 = (dflt.get("bridge_comparison") or {}).get("allgold@10"), (routed.get("bridge_comparison") or {}).get("allgold@10")
        if b0 is not None and b1 is not None:
            checks.append(f"bridge_comparison all-gold@10 {num(b1, 1)} vs default {num(b0, 1)} + 25: {_met(b1 >= b0 + 25)}")
        worst = [(t, routed[t][m] - dflt[t][m]) for t in types[:4] if t in routed and t in dflt
                 for m in ("recall@5", "allgold@10") if m in routed[t] and m in dflt[t]]
        if worst:
            t, gap = min(worst, key=lambda x: x[1])
            checks.append(f"no type more than 1 point below default (largest drop {num(-gap, 1) if gap < 0 else '0.0'} "
                          f"points, {t}): {_met(gap >= -1)}")
        out += ["", "Issue #16 targets, routed vs default (all 300): " + "; ".join(checks) + "."]
    rt = (rows_in.get("routed") or {})
    test, dtest = rt.get("test_split_only") or {}, rt.get("default_on_test_split") or {}
    if test and dtest:
        out += ["", f"The router was trained on 70% of these questions; on the {(test.get('all') or {}).get('n')} "
                "test-split questions alone, routed vs default recall@5 / all-gold@10: " + "; ".join(
                    f"{t} {num((test.get(t) or {}).get('recall@5'), 1)} / {num((test.get(t) or {}).get('allgold@10'), 1)}"
                    f" vs {num((dtest.get(t) or {}).get('recall@5'), 1)} / {num((dtest.get(t) or {}).get('allgold@10'), 1)}"
                    for t in types if t in test) + "."]
    rbt = rt.get("routes_by_type") or {}
    if rbt:
        out += ["", "Routes taken: " + "; ".join(f"{t} → " + ", ".join(f"{c} {n}" for c, n in v.items())
                                                 for t, v in rbt.items()) + "."]
    return out


def route_scifact(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: beir_scifact nDCG@10 with routing on vs the default."""
    s = d.get("scifact") or {}
    dflt, routed = s.get("default") or {}, s.get("routed") or {}
    out = [f"### Routing on `beir_scifact` ({s.get('questions')} questions, {num(s.get('docs') or s.get('max_docs'))} abstracts)", "",
           caption(file, d), "", f"{s.get('note', '')}.", ""]
    rows = [[name, num(r.get("ndcg@10"), 4), num(r.get("recall@10"), 3), num(r.get("mrr"), 4),
             ", ".join(f"{st} {num((v or {}).get('p50'), 0)}" for st, v in (r.get("latency") or {}).items())]
            for name, r in (("default (router off)", dflt), ("routed", routed)) if r]
    out.append(md_table(["row", "nDCG@10", "recall@10", "MRR", "stage ms (median)"], rows))
    a, b = dflt.get("ndcg@10"), routed.get("ndcg@10")
    if a is not None and b is not None:
        out += ["", f"Routed minus default nDCG@10: {(b - a) * 100:+.2f}".replace("-", "−") + " points (target: not below by more than 0.5 "
                f"point: {_met(b >= a - 0.005)})"
                + (" — on this subsample, not the full corpus." if s.get("note", "").startswith("subsample") else ".")]
    return out


def route_tune_loop(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: bridging queries per round of the multi-hop route's loop, chosen on the router-train split."""
    t = d.get("tune_loop") or {}
    out = ["### Multi-hop route: bridging queries per round of the loop", "", caption(file, d), "",
           f"{num(t.get('questions'))} twowiki questions of the multi-hop class from the router's train split, each "
           f"through the loop over decomposition with `agent.per_round` 1, 2 and 3 (rotating order). Rule: "
           f"{t.get('rule', '')}. Chosen: **{(t.get('chosen') or {}).get('per_round')}**.", ""]
    rows = [[r.get("per_round"), num(r.get("recall@5"), 1), num(r.get("allgold@10"), 1), num(r.get("ms_mean"), 0),
             num(r.get("ms_median"), 0)] for r in t.get("grid") or []]
    if rows:
        out.append(md_table(["per_round", "recall@5", "all-gold@10", "ms mean", "ms median"], rows))
    return out


def route_tune_gate(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: the multi-hop route's savings (early stop, BM25-only bridging), chosen on the router-train split."""
    t = d.get("tune_gate") or {}
    out = ["### Multi-hop route: early stop and BM25-only bridging rounds", "", caption(file, d), "",
           f"{num(t.get('questions'))} twowiki questions of the multi-hop class from the router's train split, each "
           "through the loop over decomposition with and without `agent.stop_when_found` (no second round when "
           "decomposition's item and every bridge name it read head a passage in the top 5) and `agent.bridge_dense` "
           "false (bridging rounds search BM25 alone), rotating order.", ""]
    grid = t.get("grid") or []
    if grid:  # the rule bench/route.py states (computed here too for a file written before it recorded its choice)
        r5, a10 = max(r["recall@5"] for r in grid), max(r["allgold@10"] for r in grid)
        ok = [r for r in grid if r["recall@5"] >= r5 - 1 and r["allgold@10"] >= a10 - 1]
        chosen = t.get("chosen") or min(ok, key=lambda r: r["ms_mean"])["config"]
        out[-1] += (f"Rule: the fastest (mean ms) within 1 point of the best recall@5 and all-gold@10. Chosen: "
                    f"**{chosen}** (the multi-hop route's setting).")
        out.append("")
    rows = [[r.get("config"), num(r.get("recall@5"), 1), num(r.get("allgold@10"), 1), num(r.get("ms_mean"), 0),
             num(r.get("ms_median"), 0), num(r.get("mean_rounds"), 2)] for r in grid]
    if rows:
        out.append(md_table(["configuration", "recall@5", "all-gold@10", "ms mean", "ms median", "rounds"], rows))
    return out


def route_latency(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: routed against every single configuration, per class best in hindsight, and mean latency."""
    t = d.get("latency") or {}
    split = f" ({t['split']}-split questions)" if t.get("split") in ("test", "train") else ""
    out = [f"### Routed vs every single configuration on `{t.get('dataset', '?')}`{split}", "", caption(file, d), "",
           f"{num(t.get('questions'))} questions with gold, each through every configuration in rotating order "
           "(retrieval only: rerank, prune, MMR, answers and the answer cache off; the ratios hold under load, the "
           "absolute ms do not). Quality is document-level recall@5 and all-gold@10 of the final list. "
           + ("*loop (agent + decompose)* is the agentic loop over decomposition for every question; *loop as the "
              "multi-hop route* is that route's configuration (routes.toml) for every question."
              if any(n.startswith("loop as the multi-hop route") for n in t.get("configs") or {}) else
              "The loop row is the multi-hop route's configuration for every question.")
           + (f" Questions: the router's {t['split']}-split questions only (the router and the route settings were "
              "chosen on the train split)." if t.get("split") in ("test", "train") else ""), ""]
    cfgs = t.get("configs") or {}
    if cfgs:
        out.append(md_table(["configuration", "recall@5", "all-gold@10", "ms mean"],
                            [[n, num(v.get("recall@5"), 1), num(v.get("allgold@10"), 1), num(v.get("ms_mean"), 0)]
                             for n, v in cfgs.items()]))
    by = t.get("by_class") or {}
    if by:
        rows = [[c, v.get("n"), f"{v.get('best_single_recall@5')} {num((v.get('recall@5') or {}).get(v.get('best_single_recall@5')), 1)}",
                 num((v.get("recall@5") or {}).get("routed"), 1),
                 f"{v.get('best_single_allgold@10')} {num((v.get('allgold@10') or {}).get(v.get('best_single_allgold@10')), 1)}",
                 num((v.get("allgold@10") or {}).get("routed"), 1),
                 num((v.get("ms_mean") or {}).get("routed"), 0)] for c, v in by.items()]
        out += ["", "Per gold class (the router's classes, from each question's type): the best single configuration "
                "in hindsight and routed.", "",
                md_table(["class", "n", "best single, recall@5", "routed recall@5", "best single, all-gold@10",
                          "routed all-gold@10", "routed ms"], rows)]
    r5, a10, lat = (t.get("routed_over_hindsight_recall@5"), t.get("routed_over_hindsight_allgold@10"),
                    t.get("routed_over_heaviest_ms"))
    if r5 is not None and lat is not None:
        out += ["", f"Routed quality over the per-class best in hindsight: recall@5 **{_pct(r5)}**, all-gold@10 "
                f"**{_pct(a10)}** (target ≥ 95%: {_met(r5 >= 0.95)} / {_met(a10 is not None and a10 >= 0.95)}); routed "
                f"mean latency **{_pct(lat)}** of the heaviest single configuration ({t.get('heaviest_single')}) "
                f"(target ≤ 60%: {_met(lat <= 0.60)}). Routes taken by gold class: "
                + "; ".join(f"{c}: " + ", ".join(f"{k} {n}" for k, n in v.items() if n) for c, v in
                            (t.get("routes") or {}).items()) + "."]
    if t.get("routed_over_single_ms"):
        out += ["", "Routed mean latency over each single configuration's: " + ", ".join(
            f"{n} {_pct(v)}" for n, v in t["routed_over_single_ms"].items()) + "."]
    if t.get("routed_floor_over_heaviest_ms") is not None:
        out += ["", f"{_pct(t.get('multi_hop_share'))} of these questions take the multi-hop route: its loop "
                f"({t.get('routed_floor_config', 'loop (agent + decompose)')}) on them alone is "
                f"{_pct(t.get('routed_floor_over_heaviest_ms'))} of the heaviest configuration's mean, a floor for "
                "routed even if every other question cost nothing."]
    w = t.get("what_if_multi_hop_decompose") or {}
    if w:
        out += ["", "What-if from the same run (each question routed multi-hop scored with its own decomposition row "
                f"instead of the loop): recall@5 {num(w.get('recall@5'), 1)} ({_pct(w.get('over_hindsight_recall@5'))} "
                f"of hindsight), all-gold@10 {num(w.get('allgold@10'), 1)} ({_pct(w.get('over_hindsight_allgold@10'))}),"
                f" latency {_pct(w.get('over_heaviest_ms'))} of the heaviest."]
    st = t.get("routed_stage_ms_mean") or {}
    if st:
        out += ["", "Routed, mean ms per question by stage (a loop's rounds are inside `evidence`): "
                + ", ".join(f"{k} {num(v, 1)}" for k, v in sorted(st.items(), key=lambda kv: -kv[1])[:8]) + "."]
    return out


def route_tune(d: dict[str, Any], file: str) -> list[str]:
    """Issue #16: transform fusion weight / depth, tuned on router-train twowiki questions only."""
    t = d.get("tune") or {}
    grid = t.get("grid") or []
    out = [f"### Transform fusion tuning ({t.get('questions')} twowiki questions of the {t.get('split', '')})", "",
           caption(file, d), ""]
    keys = ["allgold@10 comparison", "allgold@10 compositional", "allgold@10 inference", "allgold@10 bridge_comparison"]
    rows = [[g.get("weight"), g.get("per_query_k"), num(g.get("recall@5"), 1), num(g.get("allgold@10"), 1),
             *[num(g.get(k), 1) for k in keys]] for g in grid]
    out.append(md_table(["`transforms.weight`", "`transforms.per_query_k`", "recall@5", "all-gold@10",
                         *[k.replace("allgold@10 ", "all-gold@10 ") for k in keys]], rows))
    ch = t.get("chosen") or {}
    if ch:
        out += ["", f"Chosen: weight {ch.get('weight')}, per_query_k {ch.get('per_query_k')} ({t.get('rule', '')}); "
                "the twowiki table above reports the test-split questions separately."]
    return out


def answer_public(d: dict[str, Any], file: str) -> list[str]:
    """Issue #27 item 4: the shipped support model fitted on public data, before (sample-fitted) and after, on the
    public report splits and on the sample corpus's sets (report only)."""
    after = d.get("after") or {}
    meta = after.get("meta") or {}
    before = d.get("before") or {}
    cv = d.get("cv") or {}
    out = ["### Offline answer: the shipped support prior, fitted on public data", "", caption(file, d), "",
           f"Before: the model fitted on {before.get('fitted_on', 'the sample corpus')} (threshold "
           f"{num(before.get('threshold'), 3)}). After: fitted on {meta.get('fitted_on', 'public data')} "
           f"({num(meta.get('questions'))} questions; threshold {num(after.get('threshold'), 3)}; settings chosen by "
           f"5-fold CV on the public fitting split: answered {_pct(cv.get('answered_correctly'))} / refused "
           f"{_pct(cv.get('refused_unanswerable'))} there). Both models decide on the same collected features (one "
           "pipeline run per question). Cells: answered correctly among answerable / refused among unanswerable; "
           "ceiling = answerable questions with a correct sentence among those the answer read.", ""]
    rows = []
    for label, r in (d.get("splits") or {}).items():
        b, a = r.get("before") or {}, r.get("after") or {}
        before_cell = "not run" if r.get("before") is None else \
            f"{_pct(b.get('answered_correctly'))} / {_pct(b.get('refused_unanswerable'))}"
        n = a.get("answerable") or 0
        rows.append([label, r.get("kind"), f"{num(a.get('answerable'))} / {num(a.get('unanswerable'))}",
                     before_cell,
                     f"{_pct(a.get('answered_correctly'))} / {_pct(a.get('refused_unanswerable'))}",
                     "–" if not n else f"{_pct((a.get('gold_sentence_retrieved') or 0) / n)}"])
    out.append(md_table(["rows", "what they are", "answerable / unanswerable", "before: answered / refused",
                         "after: answered / refused", "ceiling"], rows))
    grid = d.get("cv_grid") or []
    if grid:
        out += ["", "Settings cross-validated (5 folds) on the public fitting split only; the chosen one maximises the "
                    "worse of the two rates, then their sum (penalties: the contradiction, kind and attribute "
                    "penalties together; scorer k: e5's read of the ranker's top k sentences, 0 = none):", ""]
        out.append(md_table(["ranker L2", "gate L2", "penalties", "scorer k", "threshold rule", "CV answered",
                             "CV refused"],
                            [[num(g.get("l2"), 0), num(g.get("gate_l2"), 0), num(g.get("penalty"), 0),
                              g.get("scorer_k"), g.get("threshold_rule"), _pct(g.get("answered_correctly")),
                              _pct(g.get("refused_unanswerable"))] for g in grid]))
    cal = d.get("sample_calibrated") or {}
    if cal:
        ap, ac = cal.get("held_out_at_prior") or {}, cal.get("held_out_calibrated") or {}
        cv = cal.get("dev_cv") or {}
        out += ["", f"Per-workspace calibration of the public prior on the sample corpus (the product's "
                    f"`core.answer.calibration.cross_validate`): the refusal cut chosen by 5-fold CV on the sample's "
                    f"{num(cal.get('dev_questions'))} dev questions (the sets the old model was fitted on, with their "
                    f"twins) moves {num(cal.get('prior_threshold'), 3)} → {num(cal.get('calibrated_threshold'), 3)} "
                    f"(CV there: answered {_pct(cv.get('answered_correctly'))} / refused "
                    f"{_pct(cv.get('refused_unanswerable'))}); on the {num(cal.get('held_out_questions'))} held-out "
                    f"questions: answered / refused {_pct(ap.get('answered_correctly'))} / "
                    f"{_pct(ap.get('refused_unanswerable'))} at the prior's cut, {_pct(ac.get('answered_correctly'))} / "
                    f"{_pct(ac.get('refused_unanswerable'))} at the calibrated cut."]
    return out


def answer_support(d: dict[str, Any], file: str) -> list[str]:
    """Issue #13: the offline answer's support model, answered-correctly and refusal rates by split."""
    res = d.get("product_end_to_end") or d.get("from_collected_features") or {}
    meth = d.get("method") or {}
    meta = (d.get("model") or {}).get("meta") or {}
    out = ["### Offline answer: support model", "", caption(file, d), "",
           f"*Answered correctly*: {meth.get('answered_correctly', 'answerable questions answered from a gold span')}; "
           f"*refused*: {meth.get('refused_unanswerable', 'unanswerable questions refused')}. Fitted on "
           f"{meta.get('fitted_on', 'the fit split')}; threshold {num((d.get('model') or {}).get('threshold'), 3)} "
           f"({meta.get('threshold_rule', '')}). Rows run end to end through the product with the fitted model.", ""]
    sim = d.get("from_collected_features") or {}
    rows = [[split, v.get("answerable"), _pct(v.get("answered_correctly")),
             _pct((sim.get(split) or {}).get("answered_correctly_if_never_refused")), v.get("unanswerable"),
             _pct(v.get("refused_unanswerable")), num(v.get("median_query_ms"), 0)] for split, v in res.items()]
    out.append(md_table(["split", "answerable", "answered correctly", "ceiling (never refusing)", "unanswerable",
                         "refused", "median query ms"], rows))
    out += ["", "*Ceiling*: answerable questions whose answer would quote a gold sentence if no question were refused "
                "(retrieval and the sentence ranking alone); no refusal threshold can answer more."]
    prev = d.get("previous_models") or []
    if prev:
        held_labels = [k for k in sim if not k.startswith("fit")]
        out += ["", "The session's earlier support models on the same collected features (answered correctly / "
                    "refused):", ""]
        out.append(md_table(["model", "fitted on", *held_labels], [
            [p.get("file"), p.get("fitted_on"), *[
                f"{_pct((p['from_collected_features'].get(k) or {}).get('answered_correctly'))} / "
                f"{_pct((p['from_collected_features'].get(k) or {}).get('refused_unanswerable'))}" for k in held_labels]]
            for p in prev] + [["shipped (core/models/data/support_model.json)", meta.get("fitted_on"), *[
                f"{_pct(sim[k].get('answered_correctly'))} / {_pct(sim[k].get('refused_unanswerable'))}"
                for k in held_labels]]]))
    held = {k: v for k, v in res.items() if not k.startswith("fit")}
    if held:
        out += ["", "Targets (≥ 85% each, held-out questions): " + "; ".join(
            f"{k}: answered {_pct(v.get('answered_correctly'))} ({_met((v.get('answered_correctly') or 0) >= 0.85)}), "
            f"refused {_pct(v.get('refused_unanswerable'))} of {v.get('unanswerable')} "
            f"({_met((v.get('refused_unanswerable') or 0) >= 0.85)})" for k, v in held.items()) + "."]
    cv = d.get("crossval_on_fitting_questions") or {}
    if cv:
        out += ["", f"{cv.get('folds')}-fold cross-validation on the fitting questions (how features and settings "
                f"were chosen): answered {_pct(cv.get('answered_correctly'))} of {cv.get('ans')}, refused "
                f"{_pct(cv.get('refused_unanswerable'))} of {cv.get('un')}"
                + (f" ({_pct(cv['refused_unanswerable_written'])} of the {cv.get('un_written')} written by hand, "
                   "near-miss twins left out)" if cv.get("refused_unanswerable_written") is not None else "") + "."]
    if meth.get("disclosure"):
        out += ["", f"Disclosure: {meth['disclosure']}."]
    if d.get("held_out_looks"):
        out += ["", "Held-out sets seen: " + "; ".join(f"{k}: {v}" for k, v in d["held_out_looks"].items()) + "."]
    return out


def answer_cache(d: dict[str, Any], file: str) -> list[str]:
    """Issue #15: answer-cache guard on cache_pairs plus pairs of our own: false hits vs paraphrase hits."""
    tg = d.get("targets") or {}
    fmax, hmin = tg.get("false_hit_max", 0.005), tg.get("paraphrase_hit_min", 0.5)
    by_origin = d.get("pairs_by_origin") or {}
    counts = ", ".join(f"{k} {v.get('neg')} / {v.get('pos')}" for k, v in by_origin.items() if k != "all")
    out = [f"### Semantic answer cache: threshold vs guard ({num(d.get('pairs'))} pairs)", "", caption(file, d), "",
           f"Split: {d.get('split', '')}. Chosen {d.get('selection', 'on dev')}. *False hit*: a pair that must not "
           "share an answer (NaN-NLI contradiction / neutral, SemEval scored ≤ 2, our negation / antonym / number / "
           "name / swapped-object pairs) served; *hit*: a paraphrase (SemEval ≥ 4, our rewordings) served. "
           + (f"Pairs (must-not-share / paraphrase): {counts}. " if counts else "")
           + "*written*: hand-written batch 1 (its dev half tuned the guard); *fresh*: hand-written batch 2, never "
           "tuned on; *fresh 2*: batch 4, written after the verifier's first held-out run and never run before this "
           f"one. Targets: false hits ≤ {_pct(fmax)} (all test pairs), SemEval hits ≥ {_pct(hmin, 0)}. The "
           f"guard costs {num(d.get('guard_ms_per_pair'), 2)} ms per pair."
           + (f" The verifier (`vetoes+verifier`: the guard's vetoes, then a logistic regression over both questions' "
              f"token vectors and the guard's rules) costs {num(ver['ms_per_pair_encode_features_score'].get('median'), 1)}"
              f" ms per pair (median; one forward over both questions), fitted on {ver.get('fitted_on_dev_pairs')} dev "
              "pairs." if (ver := d.get("verifier") or {}).get("ms_per_pair_encode_features_score") else "")
           + (f" In the product the query's token vectors come from the cache stage's own forward: a check then costs "
              f"{num(vm['cached_encoded'].get('median'), 1)} ms (median, the cached question encoded) or "
              f"{num(vm['both_known'].get('median'), 1)} ms (a cached question read before), measured interleaved "
              "with the first." if "cached_encoded" in (vm := (d.get("verifier") or {}).get(
                  "ms_per_pair_encode_features_score") or {}) else "")
           + (f" Product default: `{d['default_variant']}`." if d.get("default_variant") and not d.get(
               "product_default") else "")
           + (f" The dev rule ranks `{d.get('default_variant')}` first; product default: "
              f"`{d['product_default'].get('variant')}`. Why: {d['product_default'].get('why')}"
              if isinstance(d.get("product_default"), dict) else ""), ""]
    if d.get("disclosure"):
        out += [f"Disclosure: {d['disclosure']}", ""]
    if isinstance(b6 := d.get("shipped_before_on_batch6"), dict):
        def cell_k(g: dict[str, Any] | None) -> str:
            g = g or {}
            return f"{g.get('k')}/{g.get('n')} ({_pct(g.get('rate'))})"

        out += [f"*semeval_dev* (batch 6, dev only): unscored SemEval pairs labelled by us "
                "(`bench/sets/cache_pairs_semeval_dev.jsonl`). The verifier and thresholds shipped before it "
                f"({num(b6.get('threshold'))} / P {num(b6.get('verifier_threshold'))}) serve "
                f"{cell_k(b6.get('paraphrase_hits'))} of its paraphrases and {cell_k(b6.get('false_hits'))} of its "
                "must-not-share pairs, which it was never fitted on.", ""]

    def cell(g: dict[str, Any] | None) -> str:
        g = g or {}
        ci = g.get("ci95") or [None, None]
        return f"{g.get('k')}/{g.get('n')} = {_pct(g.get('rate'))} [{_pct(ci[0])}–{_pct(ci[1])}]" if g else "–"

    rows = []
    for name, v in (d.get("variants") or {}).items():
        te = v.get("test") or {}
        tp, both = v.get("test_public") or {}, v.get("test_public_plus_own_test") or {}
        fh, h = (both.get("false_hit") or {}).get("rate"), (tp.get("hit") or {}).get("rate")
        rows.append([f"`{name}`", num(v.get("chosen_threshold")), num(v.get("chosen_swap_threshold")),
                     num(v.get("chosen_verifier_threshold")), cell(tp.get("false_hit")), cell(tp.get("hit")),
                     cell((te.get("written") or {}).get("false_hit")), cell((te.get("fresh") or {}).get("false_hit")),
                     cell((te.get("fresh") or {}).get("hit")), cell((te.get("fresh2") or {}).get("false_hit")),
                     cell((te.get("fresh2") or {}).get("hit")), cell(both.get("false_hit")),
                     _met(fh <= fmax and h >= hmin) if fh is not None and h is not None else "–"])
    out.append(md_table(["variant", "threshold (dev)", "swap threshold (dev)", "verifier P (dev)",
                         "public test: false hits", "public test: SemEval hits", "written test: false hits",
                         "fresh: false hits", "fresh: paraphrase hits", "fresh 2: false hits",
                         "fresh 2: paraphrase hits", "all test: false hits", "targets"], rows))
    t97 = d.get("threshold_only_at_0.97") or {}
    if t97:
        out += ["", f"The threshold alone at 0.97 (public pairs): {_pct(t97.get('public_pos_hit'))} of paraphrases "
                f"hit, {_pct(t97.get('public_neg_false_hit'))} of must-not-share pairs served."]
    marks = [0.6, 0.7, 0.73, 0.8, 0.85, 0.9, 0.95, 0.97]
    for key, what in (("curve_public_test", "public test pairs: false hits / SemEval hits"),
                      ("curve_all_test", "all test pairs (public + ours): false hits / paraphrase hits")):
        curves = {n: {c["threshold"]: c for c in v.get(key) or []} for n, v in (d.get("variants") or {}).items()}
        if any(curves.values()):
            out += ["", f"Curve over the threshold, {what} (`guard+swap` at its chosen swap threshold, "
                    "`vetoes+verifier` at its chosen verifier P):", "",
                    md_table(["variant", *[str(m) for m in marks]],
                             [[f"`{n}`", *[f"{_pct(c[m]['false_hit'])} / {_pct(c[m]['hit'])}" if m in c else "–"
                                           for m in marks]] for n, c in curves.items() if c])]
    if isinstance(dt := d.get("direction_and_title"), dict):
        out += ["", f"Direction of change and one-word title / role / unit changes (issue #33 item 12), reported apart "
                f"and never chosen on: {dt.get('pairs', {}).get('scifact_contradict')} SciFact claim pairs "
                f"({dt.get('scifact_rule')}) and {dt.get('pairs', {}).get('direction_own')} of our own (EN + RU), "
                f"through the product's lookup at threshold {num((dt.get('settings') or {}).get('threshold'))} and "
                f"verifier P {num((dt.get('settings') or {}).get('verifier_threshold'))}; {dt.get('lookups')}. "
                f"*before*: the same run with the two new rules off. {dt.get('note', '')}.", ""]
        groups = ("scifact_contradict", "scifact_contradict_test", "own_en", "own_ru")
        out.append(md_table(["guard", *[f"{g}: false hits" for g in groups], "own_en: paraphrases served",
                             "own_ru: paraphrases served"],
                            [[phase, *[cell((dt.get(phase) or {}).get(g, {}).get("false_hit")) for g in groups],
                              cell((dt.get(phase) or {}).get("own_en", {}).get("served_paraphrases")),
                              cell((dt.get(phase) or {}).get("own_ru", {}).get("served_paraphrases"))]
                             for phase in ("before", "after")]))
        if isinstance(mp := dt.get("main_pairs_product_lookup"), dict):
            def split_cells(phase: str) -> list[str]:
                m = mp.get(phase) or {}
                return [cell((m.get(sp) or {}).get(k)) for sp in ("dev", "test")
                        for k in ("false_hit", "served_paraphrases")]

            out += ["", "The bench's own pairs above through the same product lookup (the shipped verifier at the "
                    f"default thresholds; {mp.get('asked')}), before / after the two rules: must-not-share pairs "
                    f"served {(mp.get('after') or {}).get('newly_refused_must_not_share')} fewer; paraphrases newly "
                    f"refused: {len((mp.get('after') or {}).get('newly_refused_paraphrases') or [])}.", "",
                    md_table(["guard", "dev: false hits", "dev: paraphrases served", "test: false hits",
                              "test: paraphrases served"],
                             [[phase, *split_cells(phase)] for phase in ("before", "after")])]
    return out


def cache_embedders(d: dict[str, Any], file: str) -> list[str]:
    """Issue #15: MiniLM against multilingual-e5 as the answer cache's paraphrase signal, dev pairs only."""
    out = ["### Answer cache: MiniLM vs multilingual-e5 as the paraphrase signal (dev pairs)", "", caption(file, d), "",
           f"{d.get('method', '')}. {d.get('pairs_dev')} dev pairs, {d.get('passed_vetoes')} past the vetoes, "
           f"{d.get('paraphrases')} paraphrases ({d.get('semeval_paraphrases')} SemEval pairs scored >= 4).", ""]
    rows = [[name, num(m.get("auroc_after_vetoes"), 3), num(m.get("threshold_at_0.5pct_false_hits"), 3),
             _pct(m.get("false_hit_rate")), m.get("paraphrases_hit"), m.get("semeval_paraphrases_hit")]
            for name, m in (d.get("models") or {}).items()]
    out.append(md_table(["model", "AUROC after vetoes", "lowest cosine with <= 0.5% false hits", "false hits",
                         "paraphrases hit", "SemEval paraphrases hit"], rows))
    return out


def answer_cache_replay(d: dict[str, Any], file: str) -> list[str]:
    """Issue #15: replayed log of sample questions (first asks, repeats, paraphrases, changed questions)."""
    cfg = d.get("config") or {}
    out = ["### Semantic answer cache: replayed sample log", "", caption(file, d), "",
           f"The sample questions asked once (*first*), again (*repeat*), in our own paraphrases (*paraphrase*) and "
           f"with one fact changed (*changed*: must not hit), threshold {cfg.get('threshold')}, guard "
           f"{num(cfg.get('guard'))}, word check {num(cfg.get('word_check'))}"
           + (f", verifier {num(cfg.get('verifier_active'))} (P ≥ {cfg.get('verifier_threshold')})"
              if "verifier_active" in cfg else "") + f". {d.get('note', '')}.", ""]
    rows = []
    for kind, s in (d.get("summary") or {}).items():
        ci = s.get("ci95") or [None, None]
        rows.append([kind, s.get("n"), s.get("hits"), s.get("guarded_misses"),
                     f"{_pct(s.get('hit_rate'))} [{_pct(ci[0])}–{_pct(ci[1])}]",
                     num((s.get("saved_ms") or 0) / 1000, 1), num(s.get("saved_usd")),
                     num(s.get("median_wall_ms_hit"), 0), num(s.get("median_wall_ms_miss"), 0),
                     num(s.get("cache_stage_ms_median"), 1), num(s.get("cache_stage_ms_max"), 1)])
    out.append(md_table(["kind", "n", "hits", "guarded misses", "hit rate [95% CI]", "saved s", "saved $",
                         "median ms (hit)", "median ms (miss)", "cache stage ms (median)", "cache stage ms (max)"],
                        rows))
    fh = d.get("false_hits")
    if fh is not None:
        out += ["", f"False hits in the replay: {len(fh)}" + (": " + "; ".join(
            f"“{x.get('query')}” served the answer to “{x.get('nearest')}” (cosine {num(x.get('cosine'), 3)})"
            for x in fh) if fh else "") + "."]
    return out


def costs_page(d: dict[str, Any], file: str) -> list[str]:
    """Issue #28: the Costs page opened on a ledger of 10,000 calls (bench/costs_page.py)."""
    s, b, before = d.get("seeded") or {}, d.get("browser") or {}, d.get("before") or {}
    out = ["### Costs page on a large ledger", "", caption(file, d), "",
           f"{num(s.get('ledger_rows'))} ledger rows and {num(s.get('queries'))} logged queries; the page's script "
           f"(Streamlit AppTest) median **{num(d.get('open_median_seconds'), 2)} s**"
           + (f", in Chromium from the click to a drawn, responsive page median **{num(b.get('open_median_seconds'), 2)}"
              f" s** (target ≤ {num(d.get('target_seconds'), 1)} s: {_met(b['open_median_seconds'] <= d['target_seconds'])}"
              f"; a light page, Corpus, {num(b.get('corpus_open_median_seconds'), 2)} s at the same time)"
              if b.get("open_median_seconds") is not None and d.get("target_seconds") is not None else "") + "."]
    bb = before.get("browser") or {}
    if before:
        out += ["", f"Before (every tab built on each open; run record kept in the file): script "
                f"{num(before.get('open_median_seconds'), 2)} s, Chromium {num(bb.get('open_median_seconds'), 2)} s, "
                f"longest main-thread task {num(max(bb.get('longest_task_ms') or [0]), 0)} ms against "
                f"{num(max(b.get('longest_task_ms') or [0]), 0)} ms now. Load averages differ between the two runs "
                "(both in their run records)."]
    return out


def build_estimate(d: dict[str, Any], file: str) -> list[str]:
    """Issue #28: a context build's estimate against its wall time (bench/build_estimate.py)."""
    r, lo_hi = d.get("ratio_measured_to_estimate"), d.get("target_ratio") or [None, None]
    ok = r is not None and lo_hi[0] is not None and lo_hi[0] <= r <= lo_hi[1]
    return ["### Build estimate against the build", "", caption(file, d), "",
            f"The Search Lab's offer for the {d.get('variant')} context variant on {num(d.get('chunks'))} chunks "
            f"of {d.get('corpus', 'sample_corpus')} "
            f"(contexts, their vectors, then the token vectors rerank reads): estimated "
            f"{num(d.get('estimate_seconds'), 1)} s, took **{num(d.get('measured_seconds'), 1)} s** (contexts and "
            f"vectors {num(d.get('context_build_seconds'), 1)} s), ratio **{num(r, 2)}** (target within "
            f"{num(lo_hi[1], 1)}x: {_met(ok)}); the progress bar moved past 0 after "
            f"{num(d.get('first_progress_past_zero_seconds'), 1)} s ({d.get('progress_calls')} updates)."]


def build_halves(d: dict[str, Any], file: str) -> list[str]:
    """Issue #44: a build's estimate against its real time on two halves of a corpus (bench/ml_estimate.py)."""
    rows = [[b.get("workspace"), b.get("chunks"), b.get("source"), num(b.get("estimate_s"), 1), num(b.get("real_s"), 1),
             f"**{num(b.get('ratio_real_over_estimate'), 2)}**", b.get("load_before")] for b in d.get("builds") or []]
    return [f"### {d.get('kind', 'multilingual').capitalize()} build estimate on two halves ({file})", "",
            caption(file, d), "", f"Corpus {d.get('corpus')}; the first half's estimate from a probe (multilingual) "
            "or the constant (graph), the second's from the rate the first build kept, read by a process that "
            "forgot its own. Target: real within 1.5x of the estimate either way.", "",
            md_table(["half", "chunks", "estimate from", "estimate s", "real s", "real / estimate", "load before"],
                     rows), ""]


def generalise_paired(d: dict[str, Any], file: str) -> list[str]:
    """Issue #44: the default (and its cascade alone, and a candidate change) against its own parts, paired
    (bench/generalise_paired.py)."""
    out = [f"### The default against its own parts, paired ({file})", "", caption(file, d), "",
           "Recall@5 (document level) of the shipped default, of its cascade alone (router and transforms off), of "
           "a candidate change where given, and of the default's own bm25 / dense / dense_ml / hybrid lists on the "
           "same questions; each configuration minus each part with a paired bootstrap 95% interval. Drops: where a "
           "gold document the configuration's own fused top 5 held left the top 5.", ""]
    rows = []
    for name, r in (d.get("sets") or {}).items():
        a = r.get("all") or {}
        rec = a.get("recall@5") or {}
        for c in ("default", "default-cascade", "candidate", "candidate-cascade"):
            if c not in rec:
                continue
            diffs = a.get("default_minus" if c == "default" else f"{c}_minus") or {}
            met = a.get("target_met" if c == "default" else f"{c}_target_met")
            vs = a.get(f"{c}_minus_{c.replace('candidate', 'default')}") if c.startswith("candidate") else None
            rows.append([name, c + (f" ({', '.join(r.get('candidate') or [])})" if c.startswith("candidate") else ""),
                         a.get("questions"), num(rec.get(c), 2)]
                        + [f"{num(rec.get(p), 2)} ({num(x.get('diff'), 2)} [{num(x.get('lo'), 2)}, "
                           f"{num(x.get('hi'), 2)}])" if (x := diffs.get(p)) else "–"
                           for p in ("bm25", "dense", "dense_ml", "fused")]
                        + [_met(met), f"{num(vs.get('diff'), 2)} [{num(vs.get('lo'), 2)}, {num(vs.get('hi'), 2)}]"
                           if vs else "–", (r.get("drops_by_stage") or {}).get(c)])
    out += [md_table(["set", "configuration", "questions", "recall@5", "bm25 (diff [95%])", "dense", "dense_ml",
                      "hybrid", ">= best part - 1 or within noise", "candidate minus shipped", "drops by stage"],
                     rows), ""]
    return out


def negation(d: dict[str, Any], file: str) -> list[str]:
    """Issue #28 item 5: negated questions and version-labelled answers (bench/negation.py)."""
    rows = [[k.split("/")[0], k.split("/")[1], v.get("questions"), v.get("answer_expected_correct"),
             v.get("refuse_expected_correct")] for k, v in (d.get("summary") or {}).items()]
    title = ("### Negated questions and versions: before the mechanism (the question set's commit, run from its "
             "git archive)" if "before" in file else "### Negated questions and versions in the offline answer")
    return [title, "", caption(file, d), "",
            "Questions written before the mechanism (bench/sets/negation_versions.jsonl) over the sample corpus and "
            "a fixture corpus of six EN/RU documents (tests/fixtures/negation/), run through the default pipeline "
            "(offline answer, answer cache off). A negation question is correct when it is refused as expected, or "
            "answered citing the expected document with the expected words; a version question when the answer "
            "names every version's label.", "",
            md_table(["kind", "corpus", "questions", "answerable: correct", "unanswerable: refused"], rows), ""]


def ui_latency(d: dict[str, Any], file: str) -> list[str]:
    """Issue #13: Search Lab toggle -> updated stage row, and the Graph page, in Chromium (bench/ui_latency.py)."""
    tg = d.get("targets") or {}
    out = ["### Search Lab responsiveness", "", caption(file, d), "",
           f"{d.get('what', '')}: {d.get('toggles')} toggles over {d.get('rounds')} rounds, each timed from "
           f"{d.get('timed_from', 'the click')} to the updated stage row; builds are never part of it.", ""]
    rows = [[name, len(v), num(min(v), 2), num(max(v), 2)] for name, v in (d.get("per_toggle_s") or {}).items() if v]
    if rows:
        out += [md_table(["toggle", "times", "fastest s", "slowest s"], rows), ""]
    checks = []
    for key, label, unit in (("median_s", "toggle median", "s"), ("max_s", "toggle max", "s"),
                             ("graph_page_load_s", "Graph page load", "s"),
                             ("graph_js_probe_max_ms", "JS call right after", "ms")):
        v, goal = d.get(key), tg.get(key)
        if v is not None:
            checks.append(f"{label} **{num(v, 2 if unit == 's' else 1)} {unit}**"
                          + (f" (target ≤ {num(goal, 1 if unit == 's' else 0)} {unit}: {_met(v <= goal)})" if goal is not None else ""))
    if checks:
        out.append("; ".join(checks) + ".")
    if d.get("first_query_s") is not None or d.get("search_lab_first_load_s") is not None:
        out += ["", f"Search Lab first load {num(d.get('search_lab_first_load_s'), 1)} s, first query "
                f"{num(d.get('first_query_s'), 1)} s (model loads; not toggles)."]
    if d.get("token_build_s"):
        out += ["", f"Token vectors built on the page's offer before the toggles (confirmed, as a user would): "
                f"{num(d['token_build_s'], 1)} s."]
    if d.get("popover_open_s"):
        po = d["popover_open_s"]
        out += ["", f"Opening the cascade popover (browser only, no script runs): median "
                f"{num(statistics.median(po), 2)} s, slowest {num(max(po), 2)} s."]
    if d.get("context_heuristic_unbuilt_s") is not None:
        out += ["", f"Switching to the heuristic context before its vectors exist (the issue's 131 s freeze): the "
                f"build is offered and raw text searched in {num(d['context_heuristic_unbuilt_s'], 2)} s; back to "
                f"none in {num(d.get('context_back_to_none_s'), 2)} s."]
    for part, err in (d.get("errors") or {}).items():
        out += ["", f"**{part} failed**: {err}"]
    return out


def collections_kb(d: dict[str, Any], file: str) -> list[str]:
    """bench/kb_collections.py: two collections in one workspace; routing share and recall@5 against the right one."""
    out = ["### Collections: the sample corpus and beir_scifact in one workspace", "", caption(file, d), ""]
    ch = d.get("chosen_on_A") or {}
    out.append(f"Router settings chosen on split A ({d.get('splits', {}).get('A')} questions): min_share "
               f"{ch.get('min_share')}, temperature {ch.get('temperature')}, centroid_weight "
               f"{ch.get('centroid_weight')}; every figure below is split B ({d.get('splits', {}).get('B')} questions).")
    out.append("")
    rb = d.get("routing_B") or {}
    rows = [[k.replace("_", " "), _pct(v.get("right_searched")), _pct(v.get("right_alone")), v.get("missed"),
             num(v.get("mean_collections"))] for k, v in rb.items()]
    if rows:
        out += [md_table(["offline router", "right collection searched", "right one alone", "missed",
                          "collections searched (mean)"], rows), ""]
    rec = d.get("recall_at_5_B") or {}
    rows = [[k.replace("_", " "), v.get("questions"), num(v.get("routed")), num(v.get("right_alone")), num(v.get("all")),
             num(v.get("routed_minus_right_alone"))] for k, v in rec.items()]
    if rows:
        out += [md_table(["questions (split B)", "n", "recall@5 routed", "right collection alone", "every collection",
                          "routed - right alone (points)"], rows), ""]
    t = d.get("targets") or {}
    if t:
        rs, dr = t.get("right_searched_B"), t.get("recall_at_5_routed_minus_right_alone_B")
        out.append(f"Targets: right collection searched **{_pct(rs)}** (goal >= 95%: {_met(rs is not None and rs >= 0.95)}); "
                   f"recall@5 routed minus right-alone **{num(dr)}** points (goal within 1: "
                   f"{_met(dr is not None and dr >= -1.0)}).")
    return out


def tables_sql(d: dict[str, Any], file: str) -> list[str]:
    """bench/tables.py: the template translator on the forms it claims, what it declines, text/table/mixed routing."""
    out = ["### Tables: the offline SQL translator and the text / table / mixed route", "", caption(file, d), ""]
    summary = d.get("summary") or {}
    rows = []
    for split, s in summary.items():
        c, r = s.get("claimed_forms") or {}, s.get("routing") or {}
        jm = s.get("join_and_mixed_sql") or {}
        rows.append([split, s.get("questions"), c.get("questions"), c.get("correct"), c.get("wrong"), c.get("declined"),
                     _pct((c.get("answered_correctly_pct") or 0) / 100) if c else "-",
                     f"{jm.get('correct', 0)} / {jm.get('wrong', 0)} / {jm.get('declined', 0)}",
                     _pct((r.get("accuracy_pct") or 0) / 100) if r else "-"])
    if rows:
        out += [md_table(["split", "questions", "on claimed forms", "correct", "wrong", "declined",
                          "answered correctly", "joins + mixed: correct / wrong / declined", "routing accuracy"], rows),
                ""]
    targets = d.get("targets") or {}
    held = summary.get(targets.get("split", "")) or {}
    if targets and held:
        acc = (held.get("claimed_forms") or {}).get("answered_correctly_pct")
        rt = (held.get("routing") or {}).get("accuracy_pct")
        out.append(f"On the `{targets['split']}` split (written before it was ever run): answered correctly "
                   f"**{num(acc, 1)}%** on the claimed forms (target ≥ {num(targets.get('answered_pct'), 0)}%: "
                   f"{_met(acc is not None and acc >= targets.get('answered_pct', 0))}), routing **{num(rt, 1)}%** "
                   f"(target ≥ {num(targets.get('routing_pct'), 0)}%: "
                   f"{_met(rt is not None and rt >= targets.get('routing_pct', 0))}).")
    stub = d.get("stub_plumbing") or {}
    if stub:
        out.append(f"With the loopback stub (plumbing only): {stub.get('questions')} questions, "
                   f"{stub.get('llm_calls')} LLM calls, outcomes "
                   + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted((stub.get("outcomes") or {}).items()))
                   + ".")
    for note in d.get("notes") or []:
        out.append(f"- {note}")
    return out


def agent_tools(d: dict[str, Any], file: str) -> list[str]:
    """bench/agent_tools.py: the agent's offline planner per split and form, routing, and the stub's plumbing."""
    out = ["### Agent tools: the offline planner on mixed text + table questions", "", caption(file, d), ""]
    rows = []
    for split, s in (d.get("summary") or {}).items():
        forms = "; ".join(f"{f} {c.get('correct', 0)}/{sum(c.values())}" for f, c in (s.get("by_form") or {}).items()
                          if f != "text")
        rows.append([split, s.get("questions"), s.get("with_table_part"), s.get("correct"), s.get("wrong"),
                     s.get("declined"), _pct((s.get("answered_correctly_pct") or 0) / 100), forms,
                     _pct((s.get("routing_planner_pct") or 0) / 100), _pct((s.get("routing_classify_pct") or 0) / 100)])
    if rows:
        out += [md_table(["split", "questions", "with a table part", "correct", "wrong", "declined",
                          "answered correctly", "per form (correct / questions)", "routing: planner",
                          "routing: classify"], rows), ""]
    tp = ((d.get("summary") or {}).get("mixed") or {}).get("text_part")
    if tp:
        out.append(f"Mixed set, text part: a cited passage of the right document holds the expected words for "
                   f"{tp.get('cited')} of {tp.get('questions')}; the words are in the answer's text for "
                   f"{tp.get('in_answer')}.")
    stub = d.get("stub_plumbing") or {}
    if stub:
        out.append(f"With the loopback stub (plumbing only): {stub.get('questions')} questions, "
                   f"{stub.get('tool_calls')} tool calls ({stub.get('tool_errors')} malformed, each answered with its "
                   f"reason), {stub.get('messages_api_calls')} Messages API calls, budgets held in "
                   f"{stub.get('budgets_held')} of {stub.get('questions')}, stop reasons "
                   + ", ".join(f"{k[5:]} {v}" for k, v in sorted(stub.items()) if k.startswith("stop_")) + ".")
    for note in d.get("notes") or []:
        out.append(f"- {note}")
    return out


def answer_scorer(d: dict[str, Any], file: str) -> list[str]:
    """A learned answerability scorer for the offline answer, tried and not shipped (bench/answer_scorer.py): the
    support model's cross-validation with and without it, and what reading k sentences costs per query."""
    out = ["### Offline answer: learned answerability scorer (not shipped)", "", caption(file, d), ""]
    if d.get("note"):
        out += [f"{d['note']}", ""]
    rows = [[name, f"{_pct(v.get('answered_correctly'))} ({v.get('ans_ok')} of {v.get('ans')})",
             f"{_pct(v.get('refused_unanswerable'))} ({v.get('un_ref')} of {v.get('un')})"]
            for name, v in (d.get("cv") or {}).items()]
    if rows:
        out.append(md_table(["support model with", "answered correctly (CV)", "refused (CV)"], rows))
    lat_file = RESULTS / "answer_scorer_latency.json"
    if file == "answer_scorer.json" and lat_file.exists():
        lat = json.loads(lat_file.read_text())
        med = lat.get("ms_median") or {}
        out += ["", f"Cost per query (`bench/results/answer_scorer_latency.json`, `{(lat.get('run') or {}).get('command', '')}`; "
                f"{lat.get('model', '')}): median ms by sentences read, "
                + ", ".join(f"k={k}: {num(v, 1)}" for k, v in med.items()) + "."]
    return out


Section = Callable[[dict[str, Any], str], list[str]]

def xquad(d: dict[str, Any], file: str) -> list[str]:
    """Cross-lingual retrieval (bench/xquad.py): recall@1 / @5 per stage and direction, routes, costs, weight choice."""
    title = "Cross-lingual retrieval (xquad_crosslingual)" + {
        "xquad.json": "", "xquad_readme.json": ", after only the README's ingest"}.get(file, ", multilingual list off")
    out = [f"### {title}", "", caption(file, d), "",
           "Questions in one language over paragraphs in another (issue #34), shipped defaults (answer off: it reads "
           f"the final list and changes none); settings {d.get('config')}. Document-level recall@1 / @5 of each stage; a stage that did not run "
           "for a question counts as a miss.", ""]
    stages = ("bm25", "dense", "dense_ml", "fused", "final")
    rows = []
    for name, r in (d.get("directions") or {}).items():
        rec = r.get("recall") or {}
        rows.append([name, r.get("questions"), r.get("no_retrieval")]
                    + [f"{num(rec.get(s, {}).get('recall@1'), 1)} / {num(rec.get(s, {}).get('recall@5'), 1)}"
                       for s in stages])
    out += [md_table(["direction", "questions", "no retrieval", *stages], rows), ""]
    cost = d.get("encode_cost") or {}
    if cost:
        out += [f"Embedding cost per chunk ({cost.get('chunks')} chunks, no cache): main embedder "
                f"{num(cost.get('main_s_per_chunk'), 3)} s, multilingual-e5 {num(cost.get('multilingual_s_per_chunk'), 3)}"
                f" s ({num(cost.get('ratio'), 1)}x).", ""]
    wc = d.get("weight_choice") or {}
    if wc.get("grid"):
        heads = list(wc["grid"])
        weights = list(next(iter(wc["grid"].values())))
        out += [f"fusion.cross_lingual_bm25_weight: chosen {wc.get('chosen')}, shipped {wc.get('shipped')} "
                "(recall@1 / @5 of RRF(BM25 x weight, dense_ml) from this run's own lists):", "",
                md_table(["weight", *heads], [[w] + [f"{num(wc['grid'][h][w].get('recall@1'), 1)} / "
                                                      f"{num(wc['grid'][h][w].get('recall@5'), 1)}" for h in heads]
                                               for w in weights]), ""]
    rr = d.get("routing_russian_lines") or {}
    if rr:
        out += ["Router on the routing set's Russian lines (all asked of English corpora): corpus questions refused "
                "and small talk / out-of-scope lines refused, before issue #34 and now:", "",
                md_table(["rule / split", "corpus questions refused", "no-retrieval lines refused"],
                         [[k, f"{v.get('corpus_questions_refused')} of {v.get('corpus_questions')}",
                           f"{v.get('no_retrieval_lines_refused')} of {v.get('no_retrieval_lines')}"]
                          for k, v in rr.items()]), ""]
    return out


# docs/measured.md, part by part: (part title, [(results file, renderer), ...]).
def house_proof(d: dict[str, Any], file: str) -> list[str]:
    """A refactor's proof of no behaviour change (bench/house_proof.py): query --json and the sample eval, two commits."""
    out = ["### No behaviour change across a refactor", "", caption(file, d), "",
           f"`{d.get('before')}` against `{d.get('after')}`, each exported and run from its own code on a fresh "
           f"sample-corpus database: {d.get('note', '')}.", ""]
    rows = [["query --json outputs identical", f"{d.get('queries_identical')} of {d.get('queries_compared')}"],
            ["queries that failed at the later commit", d.get("queries_failed")],
            ["sample eval metrics identical", "yes" if d.get("eval_metrics_identical") else "**no**"]]
    m = d.get("eval_metrics") or {}
    for key in ("recall@5", "mrr", "ndcg@10", "answered_correctly", "refused_unanswerable"):
        if key in m:
            rows.append([f"sample eval {key}", num(m[key], 3)])
    out += [md_table(["check", "result"], rows), ""]
    out.append("Settings: " + "; ".join(f"{k} ({', '.join(v) or 'defaults'})" for k, v in (d.get("settings") or {}).items())
               + ".")
    for diff in d.get("differing") or []:
        out += ["", f"- differs: {diff.get('setting')} / {diff.get('query')}"]
    return out


def route_dense_guard(d: dict[str, Any], file: str) -> list[str]:
    """The router's dense-evidence guard: threshold chosen on the public corpora's train split, reported apart."""
    tr = d.get("train_public") or {}
    out = ["### The router's dense-evidence guard", "", caption(file, d), "",
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
    out.append(md_table(["rows", "corpus questions without retrieval (before → after)",
                         "chitchat / out-of-scope lines sent to retrieval"], rows))
    return out


def calibration(d: dict[str, Any], file: str) -> list[str]:
    """Issue #27 item 4: the refusal threshold calibrated by k-fold CV on a corpus's own questions vs the prior."""
    out = ["### Per-workspace calibration of the offline answer", "", caption(file, d), "",
           "The refusal cut chosen by k-fold CV on the *fit* split of each set (questions split by gold document), "
           "both cuts judged on the *report* split. Answerable questions carry a gold sentence containing the "
           "data set's answer; unanswerable ones are near-miss twins made by bench/calibrate.py (one name, year or "
           "number swapped for one the corpus does not hold, checked by search). Rates in %: answered correctly "
           "where the gold passage was retrieved / refused among unanswerable; ceiling = answered correctly (gold passage "
           "retrieved) if no question were refused, as bench/answer.py reports it (older runs: at the calibrated "
           "cut among questions whose gold sentence was read).", ""]
    rows = []
    for name, r in (d.get("sets") or {}).items():
        rep = r.get("report_split") or {}
        pr, ca = rep.get("prior") or {}, rep.get("calibrated") or {}
        q = r.get("questions") or {}
        rows.append([name, f"{q.get('fit')} / {q.get('report')}",
                     f"{num(r.get('prior_threshold'), 3)} → {num(r.get('calibrated_threshold'), 3)}",
                     f"{num(pr.get('answered_correctly_retrieved'), 1)} / {num(pr.get('refused_correctly'), 1)}",
                     f"{num(ca.get('answered_correctly_retrieved'), 1)} / {num(ca.get('refused_correctly'), 1)}",
                     _ceiling(r),
                     _met(r.get("calibrated_beats_prior_on_both")), _met(r.get("goal_met"))])
    out.append(md_table(["set", "questions fit / report", "threshold prior → calibrated", "prior: answered / refused",
                         "calibrated: answered / refused", "ceiling", "beats prior on both", "goal ≥ 70 / ≥ 80"],
                        rows))
    return out


def _ceiling(r: dict[str, Any]) -> str:
    never = r.get("ceiling_never_refusing")
    if isinstance(never, dict):
        return f"{num(never.get('answered_correctly_retrieved'), 1)} (gold sentence read: " \
               f"{num(r.get('gold_sentence_retrieved'), 1)})"
    return num(r.get("ceiling_answered_correctly_sentence_retrieved"), 1)


def sweep(d: dict[str, Any], file: str) -> list[str]:
    """Issue #27 item 5: the standard grid over one golden set, ranked, with no-clear-difference bands."""
    out = [f"### Sweep: which technique helps on {d.get('set', 'a golden set')}", "", caption(file, d), "",
           f"{d.get('questions', '?')} questions ({d.get('unanswerable', '?')} unanswerable; {d.get('cut', '')}), "
           f"ranked by {', then '.join(d.get('rank_by') or ['recall@5'])}; band 1 = no clear difference from the "
           "best (paired per-question noise). Rates in %. Median ms are read on a shared, loaded machine and in grid "
           "order (the first configurations pay the caches' warm-up): compare them within one run only, loosely.", ""]
    rows = [[r.get("rank"), r.get("band"), r.get("config"), _pct(r.get("recall@5")), _pct(r.get("recall@10")),
             num(r.get("mrr"), 3), _pct(r.get("answered_correctly")), _pct(r.get("refused_unanswerable")),
             num(r.get("median ms"), 0), num(r.get("$ / query"), 4)] for r in d.get("table") or []]
    out.append(md_table(["rank", "band", "configuration", "recall@5", "recall@10", "MRR", "answered correctly",
                         "refused", "median ms", "$ / query"], rows))
    return out


def incremental(d: dict[str, Any], file: str) -> list[str]:
    """Issue #31: what an edit of 1% of the documents redoes, against a full rebuild."""
    out = ["### Incremental re-indexing", "", caption(file, d), "",
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
    out.append(md_table(["corpus", "edited docs", "chunks", "unchanged / changed / new / removed", "re-embedded",
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
        out += incremental_kill(d, "")[3:]
    return out


def incremental_kill(d: dict[str, Any], file: str) -> list[str]:
    """Issue #31: each incremental step killed with SIGKILL mid-way, then run again (tests/test_incremental_kill.py)."""
    k = d.get("kill9") or {}
    cases = k.get("cases") or {}
    return ["### Incremental re-indexing: kill -9 mid-step", "", caption(file, d) if file else "", "",
            f"- `{k.get('command')}`: " + ", ".join(f"{c} {v.lower()}" for c, v in cases.items())
            + f" ({num(k.get('seconds'), 0)} s); each case: the step (ingest of edits with the graph update that "
              "follows it, or the llm context build) forked, SIGKILLed at the named write, run again, and compared "
              "with a run that was never killed"]
def answer_speed(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: the offline answer stage before / after, warm and in fresh processes (bench/answer_speed.py)."""
    tg = d.get("targets") or {}
    out = ["### Answer stage speed, before and after stored sentence vectors", "", caption(file, d), "",
           f"Two warm workers, the code of `{str((d.get('before') or {}).get('commit', ''))[:12]}` and this run's, one "
           f"question to each in turn ({d.get('questions')} questions: {', '.join(d.get('sets') or [])}); then "
           "`python -m core query --json` in a fresh process per question, the two trees alternating.", ""]
    rows = []
    for side in ("before", "after"):
        w = ((d.get("warm") or {}).get(side) or {}).get("all") or {}
        f = (d.get("fresh") or {}).get(side) or {}
        rows.append([side, num(w.get("answer_ms_median"), 1), num(w.get("answer_ms_p90"), 1),
                     num(w.get("query_ms_median"), 1), f"{w.get('answered_correctly')}/{w.get('answerable')}",
                     f"{w.get('refused_unanswerable')}/{w.get('unanswerable')}", num(f.get("answer_ms_median"), 1),
                     num(f.get("wall_s_median"), 2)])
    out.append(md_table(["code", "answer ms median (warm)", "answer ms p90", "query ms median", "answered correctly",
                         "refused (unanswerable)", "answer ms (fresh process)", "CLI query s (fresh)"], rows))
    a = ((d.get("warm") or {}).get("after") or {}).get("all") or {}
    fa = (d.get("fresh") or {}).get("after") or {}
    checks = []
    if a.get("answer_ms_median") is not None and tg.get("answer_ms_median_warm"):
        checks.append(f"warm answer median {num(a['answer_ms_median'], 1)} ms (target ≤ {tg['answer_ms_median_warm']}: "
                      f"{_met(a['answer_ms_median'] <= tg['answer_ms_median_warm'])})")
    if fa.get("answer_ms_max") is not None and tg.get("answer_ms_fresh"):
        checks.append(f"fresh-process answer at most {num(fa['answer_ms_max'], 1)} ms (target ≤ {tg['answer_ms_fresh']}: "
                      f"{_met(fa['answer_ms_max'] <= tg['answer_ms_fresh'])})")
    if fa.get("wall_s_median") is not None and tg.get("cli_query_s"):
        checks.append(f"fresh CLI query median {num(fa['wall_s_median'], 2)} s (target ≤ {tg['cli_query_s']}: "
                      f"{_met(fa['wall_s_median'] <= tg['cli_query_s'])})")
    out += ["", f"Identical answers before and after: {d.get('identical_answers')}/{d.get('questions')}. "
            + "; ".join(checks) + "."]
    if d.get("note"):
        out += ["", d["note"]]
    b = d.get("build") or {}
    if b.get("sentence_vectors"):
        out += ["", "Sentence vectors built after ingest: " + "; ".join(b["sentence_vectors"]) + "."]
    return out


def ann(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: dense search through an HNSW graph (usearch, hnswlib) against the exact scan (bench/ann.py)."""
    st = d.get("settings") or {}
    width = (f"query width {st.get('expansion_search')}, {st.get('min_candidates')} candidates rescored exactly"
             if "expansion_search" in st else
             f"query width {st.get('ef_per_k')} x k at {num(st.get('ef_reference_size'))} vectors growing with log n, "
             f"{st.get('candidates_per_k')} x k candidates rescored exactly (split '{st.get('split')}', seed "
             f"{st.get('seed')})")
    out = ["### ANN index: usearch and hnswlib against the exact scan", "", caption(file, d), "",
           f"{d.get('what', '')}. HNSW M={st.get('connectivity')}, build width {st.get('expansion_add')}, {width}; "
           "versions " + ", ".join(f"{k} {v}" for k, v in (d.get("versions") or {}).items()) + ".", ""]
    rows = []
    for r in d.get("rows") or []:
        h = r.get("hardness") or {}
        hard = f"{h.get('lid_median')}" if h else ""
        rows.append([num(r.get("chunks")), hard, "exact", "–", "–", "1.0000",
                     num((r.get("exact") or {}).get("median_ms"), 2), num((r.get("fused_exact") or {}).get("median_ms"), 2),
                     (r.get("fused_exact") or {}).get("lists"), str((r.get("load_at_start") or [""])[0])])
        for lib in ("usearch", "hnswlib"):
            x = r.get(lib)
            if x:
                rows.append([num(r.get("chunks")), hard, lib + (f" (ef {x['ef']})" if x.get("ef") else ""),
                             num(x.get("build_s"), 1),
                             num(x.get("index_mib", x.get("rss_growth_mib")), 1) + ("" if "index_mib" in x else " (RSS)"),
                             num(x.get("recall_at_50"), 4), num(x.get("median_ms"), 2),
                             num((x.get("fused") or {}).get("median_ms"), 2), (x.get("fused") or {}).get("lists"),
                             str((x.get("build_load_start") or [""])[0]) + " (build)" if x.get("build_load_start")
                             else ""])
    heads = ["chunks", "LID@50", "dense search", "build s", "index MiB", "recall@50 vs exact", "dense ms median",
             "fused ms median", "fused lists", "load"]
    if not any(r.get("hardness") for r in d.get("rows") or []):  # older files: no hardness or load per row
        heads, rows = [h for i, h in enumerate(heads) if i not in (1, 9)], [[c for i, c in enumerate(r) if i not in (1, 9)]
                                                                           for r in rows]
    out.append(md_table(heads, rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


def ann_calibrate(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: how hard each synthetic vector set is for a graph index, against real passages (--calibrate)."""
    out = ["### ANN: the synthetic vectors against real passage embeddings", "", caption(file, d), "",
           f"{d.get('what', '')} (model `{d.get('model', '')}`). LID@50: local intrinsic dimension around the real "
           "tune-half questions (Levina-Bickel over the 50 nearest); the cosines of the 1st and 50th neighbour.", ""]
    rows = [[r.get("set"), num(r.get("n")), num(r.get("lid_median"), 1), num(r.get("cos_1st"), 3),
             num(r.get("cos_50th"), 3)] for r in d.get("rows") or []]
    out.append(md_table(["vector set", "vectors", "LID@50", "cos 1st", "cos 50th"], rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


def ann_sweep(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: recall@50 and latency of the graph over query widths, on the tune half (ann.py --sweep)."""
    out = ["### ANN: the query width chosen on the tune half", "", caption(file, d), ""]
    for r in d.get("rows") or []:
        h = r.get("hnswlib") or {}
        out += [f"{num(r.get('chunks'))} vectors: {r.get('vectors')}; LID@50 {(r.get('hardness') or {}).get('lid_median')}; "
                f"graph built in {num(h.get('build_s'), 1)} s ({h.get('build_threads')} threads, load "
                f"{(h.get('build_load_start') or [''])[0]}), index {num(h.get('index_mib'), 1)} MiB; exact scan "
                f"{num((r.get('exact') or {}).get('median_ms'), 2)} ms median.", ""]
        rows = [[x.get("ef"), x.get("candidates_per_k"), num(x.get("recall_at_50"), 4), num(x.get("recall_at_50_min"), 2),
                 num(x.get("median_ms"), 3), num(x.get("p95_ms"), 3)] for x in h.get("sweep") or []]
        out += [md_table(["query width (ef)", "candidates / k", "recall@50 vs exact", "worst query", "median ms",
                          "p95 ms"], rows), ""]
    if d.get("note"):
        out.append(d["note"])
    return out


def test_suite(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32 item 6: the README's test command timed whole (bench/test_suite.py)."""
    out = ["### The test suite", "", caption(file, d), "", f"`{d.get('command')}` on {d.get('cpu')}; budget "
           f"{d.get('budget_s')} s on 2 quiet cores.", ""]
    rows = [[i + 1, num(r.get("wall_s"), 1), ", ".join(f"{v} {k}" for k, v in (r.get("counts") or {}).items()),
             r.get("load_start", [""])[0], num(r.get("within_budget")),
             "; ".join(f"{x['test'].split('::')[-1]} {x['seconds']:.0f} s" for x in (r.get("slowest") or [])[:3])]
            for i, r in enumerate(d.get("runs") or [])]
    out.append(md_table(["run", "wall s", "tests", "load at start", "within budget", "three slowest"], rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


def ann_hardness(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: what the older clustered vectors' exact top-50 is made of, per size (bench/ann.py --hardness)."""
    out = ["### ANN: why recall falls with size on the clustered vectors", "", caption(file, d), "", d.get("what", ""), ""]
    rows = [[num(r.get("chunks")), num(r.get("topics")), num(r.get("off_topic_share_of_exact_top50"), 3),
             num(r.get("cos_1st"), 3), num(r.get("cos_50th"), 3), num(r.get("lid_median"), 1)] for r in d.get("rows") or []]
    out.append(md_table(["chunks", "topics", "share of exact top-50 off the query's topic", "cos 1st", "cos 50th",
                         "LID@50"], rows))
    out += ["", "Off-topic neighbours are points of unrelated topics whose cosine to the query ties the 50th on-topic "
            "one; no graph edge leads towards them, and their share grows with n (the largest of n background cosines "
            "grows with n): the graph's recall@50 at fixed settings fell from 0.996 at 100k (ann.json) to 0.967 at "
            "300k (ann_300k.json) on these vectors."]
    if d.get("note"):
        out += ["", d["note"]]
    return out


def eval_speed(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32 items 3/4: the cold A/B with and without shared stage results, and the router's cost split by whether
    the route changed the result (bench/eval_speed.py)."""
    out = ["### Evaluation speed and the router's cost", "", caption(file, d), ""]
    a = d.get("ab") or {}
    if a:
        out += ["`python -m core eval --dataset sample --config default --config router_off` in a fresh process: the "
                "configurations sharing their stage results (a stage whose inputs the first configuration had is "
                "reused) against `--no-reuse` (every stage computed for both), order alternating.", ""]
        rows = []
        for key, label in (("shared", "shared stage results"), ("no_reuse", "--no-reuse")):
            x = a.get(key) or {}
            walls = a.get(f"{key}_wall_s") or []
            for r in x.get("runs") or []:
                rows.append([label, " / ".join(num(w, 1) for w in walls), r.get("config"),
                             f"{r.get('stages_reused', 0)} / {r.get('stages_computed', 0)}",
                             num(r.get("recall@5"), 3), num(r.get("answered_correctly"), 3)])
        out.append(md_table(["run", "A/B wall s (cold)", "configuration", "stages reused / computed", "recall@5",
                             "answered correctly"], rows))
        out += ["", f"Wall time without / with shared results: **{num(a.get('speedup'), 2)}×**; per-question "
                f"metrics identical: {a.get('identical_per_question_metrics')}."]
    r = d.get("router") or {}
    if r:
        out += ["", "The router's cost per question (routed / unrouted, sum of per-question medians, warm, order "
                "alternating), split by whether the route changed the result (final top-5 or answer); target ≤ "
                f"{(d.get('targets') or {}).get('router_cost_ratio_unchanged')}× where it did not.", ""]
        rows = []
        for ds, sides in r.items():
            for side in ("before", "after"):
                x = sides.get(side) or {}
                for grp, label in (("route_did_not_change_result", "unchanged"), ("route_changed_result", "changed")):
                    g = x.get(grp) or {}
                    if not g.get("n"):
                        continue
                    rows.append([ds, side, label, g.get("n"), num(g.get("routed_ms_mean"), 0),
                                 num(g.get("unrouted_ms_mean"), 0), f"**{num(g.get('cost_ratio'), 2)}×**",
                                 num(g.get("routed_recall@5"), 3), num(g.get("unrouted_recall@5"), 3)])
        out.append(md_table(["dataset", "code", "route changed result", "questions", "routed ms", "unrouted ms",
                             "cost ratio", "routed recall@5", "unrouted recall@5"], rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


def local_llm(d: dict[str, Any], file: str) -> list[str]:
    """A local model through the LLM stages (bench/local_llm.py, issue #45)."""
    run = (d.get("run") or {}).get("load_avg_start") or [None]
    out = [f"### A local model through the LLM stages ({d.get('model')}"
           + (f", load {num(run[0], 1)} at start" if file != "local_llm.json" else "") + ")", "", caption(file, d), "",
           f"{d.get('data')}: {len(d.get('articles') or [])} articles as documents, {d.get('chunks')} chunks, "
           f"{d.get('questions')} questions; OMP_WAIT_POLICY={d.get('omp_wait_policy')}, model load "
           f"{num(d.get('model_load_s'), 2)} s. Contexts with the document prefix's state reused across its chunks "
           "and without:", ""]
    rows = [[("on" if r.get("reuse_prefix") else "off"), r.get("written"), num(r.get("seconds"), 1),
             num(r.get("seconds_per_context"), 2), r.get("prompt_tokens_evaluated"), r.get("prompt_tokens_reused"),
             r.get("output_tokens")] for r in d.get("contexts") or []]
    out += [md_table(["prefix reuse", "contexts", "s", "s / context", "prompt tokens evaluated",
                      "prompt tokens reused", "output tokens"], rows), ""]
    a, x = d.get("answers_local") or {}, d.get("answers_extractive") or {}
    g = d.get("golden") or {}
    rn, rc = d.get("recall_no_context") or {}, d.get("recall_llm_context") or {}
    out += [f"Recall@1 / @5 without contexts {num(rn.get('recall@1'), 3)} / {num(rn.get('recall@5'), 3)}, with "
            f"the model's contexts {num(rc.get('recall@1'), 3)} / {num(rc.get('recall@5'), 3)}. Answers: local "
            f"model {a.get('right')} right, {a.get('refused')} refused of {a.get('questions')} "
            f"({num(a.get('seconds_per_answer'), 1)} s each); extractive {x.get('right')} right, {x.get('refused')} "
            f"refused. Golden questions: {g.get('items')} kept of {g.get('asked')} asked from {g.get('calls')} calls "
            f"in {num(g.get('seconds'), 1)} s (rejected: {g.get('rejected')}).", ""]
    return out


PARTS: list[tuple[str, list[tuple[str, Section]]]] = [
    ("Retrieval quality", [
        ("quality_anthropic_codebase.json", quality_codebase),
        ("quality_beir_scifact.json", quality_beir),
        ("quality_sample.json", quality_sample),
        ("generalise.json", generalise),
        ("generalise_twowiki.json", generalise_more),
        ("generalise_sample.json", generalise_more),
        ("generalise_ac.json", generalise_more),
        ("generalise_sf.json", generalise_more),
        ("xquad.json", xquad),
        ("xquad_off.json", xquad),
        ("xquad_readme.json", xquad),
        ("generalise_paired_twowiki.json", generalise_paired),
        ("generalise_paired_rest.json", generalise_paired),
        ("local_llm.json", local_llm),
        ("local_llm_quiet.json", local_llm),
    ]),
    ("Compression cascade", [
        ("cascade_quality.json", cascade_quality),
        ("cascade_compression.json", cascade_compression),
        ("cascade_latency.json", cascade_latency),
        ("cascade_scifact.json", cascade_scifact),
    ]),
    ("Ingest and embedding runtimes", [
        ("ingest.json", ingest),
        ("ingest_onnx.json", ingest_runtime),
        ("ingest_int8.json", ingest_runtime),
        ("onnx.json", onnx),
        ("onnx_runs.json", onnx_runs),
        ("onnx_runs_busy.json", onnx_runs),
        ("int8_recipes.json", int8_recipes),
        ("int8_recipes_tensor.json", int8_recipes),
    ]),
    ("Query speed", [
        ("query.json", query),
        ("blas_threads.json", blas_threads),
        ("blas_threads_scifact.json", blas_threads),
        ("blas_threads_scifact_busy.json", blas_threads),
        ("ann.json", ann),
        ("ann_300k.json", ann),
        ("ann_compare.json", ann),
        ("ann_hardness.json", ann_hardness),
        ("ann_calibrate.json", ann_calibrate),
        ("ann_sweep_tune.json", ann_sweep),
        ("ann_sweep_tune_1m.json", ann_sweep),
        ("ann_sweep_tune_m24.json", ann_sweep),
        ("ann_sweep_tune_1m_m24.json", ann_sweep),
        ("query_scale.json", query),
        ("test_suite.json", test_suite),
    ]),
    ("Ray", [
        ("ray_ingest.json", ray_ingest),
        ("ray_eval.json", ray_eval),
    ]),
    ("Contextual retrieval and GraphRAG", [
        ("context.json", context),
        ("graph.json", graph),
        ("incremental.json", incremental),
        ("incremental_sample.json", incremental),
        ("incremental_kill.json", incremental_kill),
    ]),
    ("Hostile input", [
        ("hostile.json", hostile),
        ("hostile_llm.json", hostile_llm),
        ("hostile_ingest.json", hostile_ingest),
    ]),
    ("Agentic loop", [
        ("agent.json", agent_with_targets),
        ("agent_sample.json", agent_sample),
    ]),
    ("Routing and query transforms", [
        ("route.json", route),
        ("router_refit.json", router_refit),
        ("route_names.json", route_names),
        ("route_evidence.json", route_evidence),
        ("route_dense_guard.json", route_dense_guard),
        ("route_tune.json", route_tune),
        ("route_twowiki.json", route_twowiki),
        ("route_scifact.json", route_scifact),
        ("route_tune_loop.json", route_tune_loop),
        ("route_tune_gate.json", route_tune_gate),
        ("route_latency_sample.json", route_latency),
        ("route_latency_twowiki.json", route_latency),
        ("route_latency_twowiki_train.json", route_latency),
    ]),
    ("Offline answer and answer cache", [
        ("answer.json", answer_support),
        ("answer_public.json", answer_public),
        ("answer_scorer.json", answer_scorer),
        ("answer_cache.json", answer_cache),
        ("answer_cache_replay.json", answer_cache_replay),
        ("cache_embedders.json", cache_embedders),
        ("synthesis_before.json", synthesis),
        ("synthesis_after.json", synthesis),
        ("synthesis_ceiling.json", synthesis),
        ("conversation_holdout3_before.json", conversation),
        ("conversation_holdout3_after.json", conversation),
        ("conversation_holdout2_before.json", conversation),
        ("conversation_holdout2_after.json", conversation),
        ("conversation_holdout_head.json", conversation),
        ("conversation_holdout_after.json", conversation),
        ("conversation_holdout.json", conversation),
        ("conversation_dev.json", conversation),
        ("raptor.json", raptor),
        ("raptor_incremental.json", raptor_incremental),
        ("answer_speed.json", answer_speed),
        ("answer_speed_noprefetch.json", answer_speed),
        ("answer_speed_final.json", answer_speed),
        ("negation_before.json", negation),
        ("negation.json", negation),
    ]),
    ("Evaluation speed", [
        ("eval_speed.json", eval_speed),
        ("eval_speed_router.json", eval_speed),
        ("eval_speed_memo_only.json", eval_speed),
        ("eval_speed_final.json", eval_speed),
    ]),
    ("Tuning on a workspace's own golden set", [
        ("calibration.json", calibration),
        ("sweep_sample.json", sweep),
        ("sweep_xquad.json", sweep),
        ("sweep_twowiki.json", sweep),
    ]),
    ("Tables and SQL", [
        ("tables.json", tables_sql),
        ("agent_tools.json", agent_tools),
        ("collections.json", collections_kb),
    ]),
    ("Search Lab responsiveness", [
        ("ui_latency.json", ui_latency),
        ("costs_page.json", costs_page),
        ("build_estimate.json", build_estimate),
        ("build_estimate_b.json", build_estimate),
        ("ml_estimate_before_quiet.json", build_halves),
        ("ml_estimate_chars_a.json", build_halves),
        ("ml_estimate_share_a.json", build_halves),
        ("ml_estimate_share_b.json", build_halves),
        ("ml_estimate_share_c.json", build_halves),
        ("graph_estimate_a.json", build_halves),
        ("graph_estimate_b.json", build_halves),
    ]),
    ("Refactors", [
        ("house_proof.json", house_proof),
    ]),
]
SECTIONS: list[tuple[str, Section]] = [s for _, sections in PARTS for s in sections]
# Read inside another file's section (ingest.json, answer_scorer.json), so not listed as unshown.
READ_BY_OTHERS = ("ingest_b16.json", "answer_scorer_latency.json")

INTRO = ("Generated by `bench/readme_tables.py` from `bench/results/*.json`: edit the results (by running a bench), "
         "never this text. Each caption names the results file, the command, the UTC time and the commit of its run "
         "(\"commit not recorded\": the file predates run records) and the 1-minute load average; the machine has 2 "
         "cores shared with other jobs, so absolute milliseconds are pessimistic and ratios measured side by side in "
         "one run are the steadier numbers. The bundled MiniLM is the embedder throughout. Notes inside a results "
         "file may name modules by their paths at the time of the run (before core/ was grouped into packages).")

MEASURED_NOTE = "<!-- generated by bench/readme_tables.py from bench/results/*.json; do not edit by hand -->"


def anchor(title: str) -> str:
    """GitHub's heading anchor for a plain title (lower case, spaces to hyphens, punctuation dropped)."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def render(results: Path = RESULTS) -> str:
    """docs/measured.md: every results file's section, grouped by part, with a contents list."""
    parts = ["# Measured", "", MEASURED_NOTE, "", INTRO, "", "Contents: " + " · ".join(
        f"[{title}](#{anchor(title)})" for title, _ in PARTS) + "."]
    titles: set[str] = set()
    for title, sections in PARTS:
        parts += ["", f"## {title}"]
        for file, fn in sections:
            path = results / file
            parts.append("")
            if not path.exists():
                parts.append(f"*`bench/results/{file}`: no results file yet.*")
                continue
            lines = fn(json.loads(path.read_text()), file)
            if lines and lines[0].startswith("### "):
                if lines[0] in titles:  # a second run of the same bench: name its file in the heading
                    lines = [f"{lines[0]} · `{file}`", *lines[1:]]
                titles.add(lines[0])
            parts.extend(lines)
    shown = {f for f, _ in SECTIONS} | set(READ_BY_OTHERS)
    rest = sorted(p.name for p in results.glob("*.json") if p.name not in shown)
    if rest:
        parts += ["", "## Results files not shown here", "",
                  "Kept for the record, not rendered (side runs of the benches above): "
                  + ", ".join(f"`bench/results/{f}`" for f in rest) + "."]
    return "\n".join(parts) + "\n"


# -- the README's headline table --------------------------------------------------------------------------------------
def _read(results: Path, file: str) -> dict[str, Any]:
    path = results / file
    return json.loads(path.read_text()) if path.exists() else {}


def _dig(d: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(d, dict):
            d = d.get(k)
        elif isinstance(d, list) and isinstance(k, int) and -len(d) <= k < len(d):
            d = d[k]
        else:
            return None
    return d


def _headline_rows(results: Path) -> list[tuple[str, str, str, str]]:
    """(what, figure, part of docs/measured.md, results file): at most 8 rows, every number read from its file, each
    beside the reference or target it is judged against (a missed target says so)."""
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, figure: str | None, part: str, file: str) -> None:
        rows.append((what, figure if figure is not None else "not recorded", part, file))

    d = _read(results, "ingest.json")
    r, goal = d.get("ratio_ingest_to_bare"), d.get("ratio_goal")
    row("Ingest, the whole path (parse, chunk, embed on ONNX, store), against bare `SentenceTransformer.encode` "
        "(torch) of the same texts", None if r is None or goal is None else
        f"**{num(r)}×** bare encode's chunks/s (goal ≥ {num(goal, 1)}: {_met(r >= goal)})",
        "Ingest and embedding runtimes", "ingest.json")

    d = _read(results, "ann.json")
    big = max(d.get("rows") or [{}], key=lambda r: r.get("chunks") or 0)
    h, tg = big.get("hnswlib") or {}, d.get("targets") or {}
    rec, fms = h.get("recall_at_50"), _dig(h, "fused", "median_ms")
    row(f"A query over {num(big.get('chunks'))} chunks: BM25 + dense through the ANN graph (hnswlib) + RRF, vectors "
        "anchored on real embeddings, settings chosen on the other half", None if rec is None or fms is None else
        f"**{num(fms, 1)} ms** median fused (exact scan: {num(_dig(big, 'fused_exact', 'median_ms'), 0)} ms), "
        f"recall@50 vs exact **{num(rec, 4)}** (targets ≤ {tg.get('1M_fused_ms', 30)} ms, ≥ "
        f"{tg.get('recall_at_50', 0.99)}: {_met(fms <= tg.get('1M_fused_ms', 30) and rec >= tg.get('recall_at_50', 0.99))})",
        "Query speed", "ann.json")

    d = _read(results, "quality_beir_scifact.json")
    prod = next((x for x in d.get("rows") or [] if x.get("name") == "product-defaults"), {})
    nd = _dig(prod, "metrics", "ndcg@10")
    refs = "; ".join(f"{n.replace(' (published)', '')} {num(m.get('ndcg@10'), 3)}"
                     for n, m in (d.get("reference") or {}).items())
    row(f"BEIR SciFact ({num(d.get('questions'))} queries), the shipped defaults", None if nd is None else
        f"nDCG@10 **{num(nd, 3)}**" + (f" (published: {refs})" if refs else ""), "Retrieval quality",
        "quality_beir_scifact.json")

    d = _read(results, "generalise.json")
    ru = _dig(d, "sets", "ru_seed") or {}
    h1 = _dig(ru, "metrics", "default", "hit@1")
    row(f"Russian questions on Russian documents (`ru_seed`, {num(ru.get('questions'))} questions): first document "
        "is gold", None if h1 is None else
        f"**{num(h1)}%** (dense alone: {num(_dig(ru, 'metrics', 'dense', 'hit@1'))}%)", "Retrieval quality",
        "generalise.json")

    d = _read(results, "agent.json")
    allq = _dig(d, "held_out", "all") or {}
    s5, a5 = allq.get("single_recall@5"), allq.get("agent_recall@5")
    row(f"Agentic loop on 2WikiMultihopQA, held-out {d.get('held_out_label', 'split')} ({num(allq.get('n'))} "
        "questions): recall@5", None if s5 is None or a5 is None else
        f"single-shot {num(s5, 1)} → loop **{num(a5, 1)}**", "Agentic loop", "agent.json")

    # the shipped support prior (fitted on public data) on the sample corpus's blind-written set, report only; the
    # sample-fitted model's end-to-end figures (answer.json) until that file exists
    d, file = _read(results, "answer_public.json"), "answer_public.json"
    h6 = _dig(d, "splits", "sample eval_holdout6.jsonl", "after") or {}
    if not h6:
        d, file = _read(results, "answer.json"), "answer.json"
        h6 = _dig(d, "product_end_to_end", "holdout6 (eval_holdout6.jsonl)") or {}
    ac, rf = h6.get("answered_correctly"), h6.get("refused_unanswerable")
    row(f"Offline (extractive) answer on questions written blind (`eval_holdout6.jsonl`: {num(h6.get('answerable'))} "
        f"answerable, {num(h6.get('unanswerable'))} not)" + (", shipped prior fitted on public data only"
                                                             if file == "answer_public.json" else ""),
        None if ac is None or rf is None else
        f"answered **{_pct(ac)}**, refused **{_pct(rf)}** (target ≥ 85% each: {_met(ac >= 0.85)} / {_met(rf >= 0.85)})",
        "Offline answer and answer cache", file)

    d = _read(results, "answer_cache.json")
    tg = d.get("targets") or {}
    pv = _dig(d, "product_default", "variant") or d.get("default_variant")
    fh = _dig(d, "variants", pv, "test_public_plus_own_test", "false_hit") or {}
    ph = _dig(d, "variants", pv, "test_public", "hit") or {}
    fmax, hmin = tg.get("false_hit_max", 0.005), tg.get("paraphrase_hit_min", 0.5)
    row("Semantic answer cache on test pairs: wrong answers served (must-not-share pairs) and SemEval paraphrases "
        "served", None if not fh or not ph else
        f"**{fh.get('k')} of {num(fh.get('n'))}** wrong (target ≤ {_pct(fmax)}: {_met(fh['rate'] <= fmax)}); "
        f"**{ph.get('k')} of {ph.get('n')}** paraphrases (target ≥ {_pct(hmin, 0)}: {_met(ph['rate'] >= hmin)})",
        "Offline answer and answer cache", "answer_cache.json")

    d = _read(results, "ui_latency.json")
    med, tmed = d.get("median_s"), _dig(d, "targets", "median_s")
    row("Search Lab, a setting toggled to the updated stage row (Chromium, median)",
        None if med is None or tmed is None else f"**{num(med, 2)} s** (target ≤ {num(tmed, 1)} s: {_met(med <= tmed)})",
        "Search Lab responsiveness", "ui_latency.json")
    return rows


BEGIN = "<!-- headline:begin (generated by bench/readme_tables.py from bench/results/*.json; do not edit by hand) -->"
END = "<!-- headline:end -->"


# Where a headline figure's own run record sits when it is not the file's (a merged file keeps each part's run).
FIGURE_RUN = {"generalise.json": ("sets", "ru_seed", "run")}
AGE = re.compile(r"\d[\d,]* commits? old")


def figure_run(results: Path, file: str) -> dict[str, Any]:
    d = _read(results, file)
    return (_dig(d, *FIGURE_RUN[file]) if file in FIGURE_RUN else d.get("run")) or {}


def commits_since(commit: str | None) -> int | None:
    """Commits on HEAD since `commit` (None: unknown here, e.g. not in this clone's history)."""
    if not commit:
        return None
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count", f"{commit}..HEAD"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def age(results: Path, file: str) -> str:
    n = commits_since(figure_run(results, file).get("commit"))
    return "age not recorded" if n is None else f"{n:,} commit{'s' if n != 1 else ''} old"


def headline(results: Path = RESULTS) -> str:
    """The README's headline region, markers included: one table, each row naming its results file and how many
    commits old its figure was when the README was generated (`make bench-headline` re-runs them)."""
    rows = [[what, fig, f"[`{file}`](bench/results/{file}) · [{part}](docs/measured.md#{anchor(part)}) · "
                        f"{age(results, file)}"]
            for what, fig, part, file in _headline_rows(results)]
    return "\n".join([BEGIN, md_table(["measured", "figure", "results file · section · age"], rows), END])


def headline_commands(results: Path = RESULTS) -> list[str]:
    """The commands that made the headline's figures, in row order: the figure's own run, then the file's when it
    differs (a merge)."""
    out: list[str] = []
    for *_, file in _headline_rows(results):
        for run in (figure_run(results, file), _read(results, file).get("run") or {}):
            cmd = (run.get("command") or "").strip()
            if cmd and cmd not in out:
                out.append(cmd)
    return out


def unaged(text: str) -> str:
    """The text with every headline age masked: the age moves with each commit, the figures do not."""
    return AGE.sub("N commits old", text)


def splice(readme: str, section: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise MarkerError(f"README.md needs exactly one {BEGIN!r} … {END!r} pair, in that order")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + section + tail


def expected(readme: str, results: Path = RESULTS) -> dict[str, str]:
    """What each generated file should hold: README.md (its headline region spliced) and docs/measured.md."""
    return {"README.md": splice(readme, headline(results)), "docs/measured.md": render(results)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md or docs/measured.md is out of date")
    ap.add_argument("--headline-commands", action="store_true",
                    help="print the commands behind the README's headline rows, one a line (make bench-headline)")
    args = ap.parse_args(argv)
    if args.headline_commands:
        print("\n".join(headline_commands()))
        return 0
    targets = {"README.md": README, "docs/measured.md": MEASURED}
    want = expected(README.read_text())
    # --check ignores the headline's ages (they move with every commit); a rewrite refreshes them
    same = (lambda a, b: unaged(a) == unaged(b)) if args.check else (lambda a, b: a == b)
    stale = [name for name, path in targets.items() if not path.exists() or not same(path.read_text(), want[name])]
    if args.check:
        for name in stale:
            print(f"{name} is out of date: run .venv/bin/python bench/readme_tables.py", file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        targets[name].parent.mkdir(parents=True, exist_ok=True)
        targets[name].write_text(want[name])
        print(f"rewrote {name}")
    if not stale:
        print("README.md and docs/measured.md are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
