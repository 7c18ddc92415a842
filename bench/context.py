"""Contextual retrieval benchmark on anthropic_codebase: prompt-cache read share through the loopback stub, and
offline Pass@5/10/20 for context variants none / heuristic / late chunking (bundled MiniLM, hybrid pipeline).

    .venv/bin/python bench/context.py [--datasets DIR] [--db FILE] [--limit N]

The cache part runs the real SDK against tests/anthropic_stub.py (no network, no key): it measures how the
contextualiser orders its calls (a document's chunks back to back behind one cached prefix), not a real model's
contexts, whose text is a placeholder and is never searched. Writes bench/results/context.json.
"""
from __future__ import annotations

import argparse
import sys

from _common import (
    ROOT,
    datasets_dir,
    machine_info,
    table,
    timed,
    utc_now,
    write_result,
)
from _common import CAPTION, Table, grid, num  # noqa: E402

sys.path.insert(0, str(ROOT))

from core.app.costs import cache_read_share
from core.config import PipelineConfig  # noqa: E402
from core.deps import Deps  # noqa: E402
from core.eval.datasets import anthropic_set, ingest_predocs  # noqa: E402
from core.eval.metrics import pass_at_k  # noqa: E402
from core.ingest.context import (
    CONTEXT_INSTRUCTIONS,
    build_heuristic,
    build_late,
    build_llm_contexts,
    coverage,
    embed_variant,
    estimate_llm_contexts,
)
from core.models.embed import BUNDLED_MODEL, load_embedder  # noqa: E402
from core.models.llm import AnthropicLLM  # noqa: E402
from core.models.pricing import price_for  # noqa: E402
from core.models.tokens import TransformerTokenEncoder
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402
from tests.anthropic_stub import start_stub, stub_tokens  # noqa: E402

MODEL = "claude-haiku-4-5"
KS = (5, 10, 20)


def cache_share(predocs: list, limit_docs: int | None, model: str = MODEL) -> dict:
    """Contextualise every chunk through the stub and read the cache counters back from the usage ledger."""
    store = Store(":memory:")
    ws = "cache_bench"
    docs = predocs[:limit_docs] if limit_docs else predocs
    for p in docs:
        store.corpus.put_document(p.doc.__class__(**{**p.doc.__dict__, "workspace": ws}), p.chunks, None, "none")
    stub = start_stub()
    try:
        llm = AnthropicLLM(stub.key, base_url=stub.base_url, ledger=store.ledger, sleep=lambda s: None)
        est, warnings = estimate_llm_contexts(store, model=model, workspace=ws)
        with timed() as t:
            rep = build_llm_contexts(store, llm, model=model, budget_usd=1000.0, workspace=ws)
    finally:
        stub.stop()
    minimum = price_for(model).min_cacheable_tokens
    rows = store.ledger.usage_ledger(ws, run_id=rep.run_id)
    by_doc: dict[str, list] = {}
    for e in rows:
        by_doc.setdefault(e.ref_id, []).append(e)
    texts = {p.doc.doc_id: p.doc.text for p in docs}

    def prefix(doc_id: str) -> int:  # counted the way the stub counts: ceil(bytes / 4) per block
        return stub_tokens(CONTEXT_INSTRUCTIONS) + stub_tokens(f"<document>\n{texts[doc_id]}\n</document>")

    def agg(entries: list) -> dict:
        i = sum(e.input_tokens for e in entries)
        w = sum(e.cache_write_tokens for e in entries)
        r = sum(e.cache_read_tokens for e in entries)
        return {"calls": len(entries), "input_tokens": i, "cache_write_tokens": w, "cache_read_tokens": r,
                "cache_read_share": round(cache_read_share(i, w, r), 4),
                "usd": round(sum(e.usd for e in entries), 4), "usd_uncached": round(sum(e.usd_uncached for e in entries), 4)}

    long_docs = [d for d in by_doc if prefix(d) >= minimum]
    multi = [d for d in long_docs if len(by_doc[d]) > 1]
    return {
        "model": model, "min_cacheable_tokens": minimum, "documents": len(docs), "chunks": rep.written,
        "seconds": round(t[0], 1), "stopped": rep.stopped,
        "all_documents": agg(rows),
        "documents_over_minimum": {"documents": len(long_docs), **agg([e for d in long_docs for e in by_doc[d]])},
        "documents_over_minimum_with_2plus_chunks": {"documents": len(multi),
                                                     **agg([e for d in multi for e in by_doc[d]])},
        "estimate": {"with_cache_usd": round(est.with_cache_usd, 4), "without_cache_usd": round(est.without_cache_usd, 4),
                     "short_documents_warned": len(warnings)},
        "note": "dollars are what the calls would cost at list price; the stub's replies are placeholders",
    }


def pass_table(store: Store, deps: Deps, gs, variant: str, limit: int | None) -> dict:
    cfg = PipelineConfig().with_overrides({"context.variant": variant, "answer.enabled": False})
    sums: dict[str, dict[int, float]] = {}
    queries = gs.queries[:limit] if limit else gs.queries
    # Pass@k matches chunk TEXT; pruning stages shorten candidate text, so score every stage by the stored chunk.
    text_of = {c.chunk_id: c.text for c in store.corpus.chunks(gs.workspace)}
    with timed() as t:
        for q in queries:
            trace = run_query(q.query, cfg, deps, workspace=gs.workspace, log=False)
            golden = [g.text for g in q.gold]
            stages = {s.stage: s for s in trace.stages if s.skipped is None and s.candidates}
            final = trace.final()
            if final is not None:
                stages = {**stages, "final": final}
            for name, s in stages.items():
                texts = [text_of.get(c.chunk_id, c.text) for c in s.candidates]
                for k in KS:
                    sums.setdefault(name, {}).setdefault(k, 0.0)
                    sums[name][k] += pass_at_k(texts, golden, k)
    n = len(queries)
    return {"variant": variant, "queries": n, "seconds": round(t[0], 1), "config_hash": cfg.stable_hash(),
            "stages_ran": [s for s in sums if s != "final"],
            "pass": {name: {f"pass@{k}": round(100 * v / n, 2) for k, v in ks.items()} for name, ks in sums.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench_context.duckdb"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions only (smoke runs)")
    ap.add_argument("--limit-docs", type=int, default=None, help="first N documents in the cache part")
    ap.add_argument("--cache-only", action="store_true", help="only the prompt-cache part (merged into the results)")
    args = ap.parse_args()
    gs = anthropic_set(datasets_dir(args.datasets))
    predocs = gs.predocs()
    out: dict = {"bench": "context", "when": utc_now(), "machine": machine_info(),
                 "command": "python bench/context.py" + (f" --limit {args.limit}" if args.limit else "")}

    out["prompt_cache"] = cache_share(predocs, args.limit_docs)
    # The same run with a 1,024-token minimum shows how much the model's minimum decides the overall share.
    out["prompt_cache_min_1024"] = cache_share(predocs, args.limit_docs, "claude-sonnet-4-5")
    for key in ("prompt_cache", "prompt_cache_min_1024"):
        pc = out[key]
        print(f"prompt cache through the stub, {pc['model']} (minimum {pc['min_cacheable_tokens']:,} tokens; "
              f"{pc['documents']} documents, {pc['chunks']} calls, {pc['seconds']} s):")
        print(table(["documents", "n", "calls", "cache-read share", "$ with cache", "$ without"],
                    [[k, pc[k].get("documents", pc["documents"]), pc[k]["calls"], pc[k]["cache_read_share"],
                      pc[k]["usd"], pc[k]["usd_uncached"]]
                     for k in ("all_documents", "documents_over_minimum", "documents_over_minimum_with_2plus_chunks")]))
    if args.cache_only:
        import json

        from _common import RESULTS

        old = json.loads((RESULTS / "context.json").read_text()) if (RESULTS / "context.json").exists() else {}
        write_result("context", {**old, "prompt_cache": out["prompt_cache"],
                                 "prompt_cache_min_1024": out["prompt_cache_min_1024"]}, table=MEASURED_CONTEXT)
        return 0

    store = Store(args.db)
    emb = load_embedder(BUNDLED_MODEL).embedder
    deps = Deps(store=store, embedder=emb)
    ws = gs.workspace
    with timed() as t_ing:
        ingest_predocs(predocs, store=store, embedder=emb, workspace=ws)
    builds = {}
    # Build times count only what this run built (a reused --db keeps earlier contexts and vectors).
    with timed() as t:
        written = build_heuristic(store, workspace=ws).written
        embedded = embed_variant(store, emb, "heuristic", workspace=ws)
    builds["heuristic"] = {"seconds": round(t[0], 1), "contexts_written": written, "vectors_embedded": embedded,
                           "coverage": coverage(store, "heuristic", ws)}
    with timed() as t:
        rep = build_late(store, TransformerTokenEncoder(emb), workspace=ws)
    builds["late"] = {"seconds": round(t[0], 1), "vectors_written": rep.written,
                      "coverage": coverage(store, "late", ws, emb.model_id)}
    out["ingest_seconds"] = round(t_ing[0], 1)
    out["builds"] = builds
    out["retrieval"] = [pass_table(store, deps, gs, v, args.limit) for v in ("none", "heuristic", "late")]
    rows = []
    for r in out["retrieval"]:
        for stage in ("bm25", "dense", "fused", "rerank", "final"):
            p = r["pass"].get(stage)
            if p:
                rows.append([r["variant"], stage, *(p[f"pass@{k}"] for k in KS)])
    print(f"\nPass@k on anthropic_codebase ({out['retrieval'][0]['queries']} questions, bundled MiniLM, offline):")
    print(table(["variant", "stage", "Pass@5", "Pass@10", "Pass@20"], rows))
    path = write_result("context", out, table=MEASURED_CONTEXT)
    print(f"\nwrote {path.relative_to(ROOT)}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_context(d: dict[str, Any], file: str) -> list[str]:
    out = ["### Contextual retrieval", "", CAPTION, ""]
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
        out.append(grid(["variant", "BM25", "dense", "fused", "final (default cascade)"], rows))
    return out


MEASURED_CONTEXT = Table(measured_context, 'Contextual retrieval and GraphRAG')


if __name__ == "__main__":
    raise SystemExit(main())
