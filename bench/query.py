"""Query benchmark: per-query latency of BM25, dense and fused search on synthetic chunks vs rank_bm25 + numpy.

Run from the repo root:  .venv/bin/python bench/query.py [--sizes 10000 100000] [--queries 200]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    PeakRSS,
    datasets_dir,
    machine_info,
    table,
    timed,
    utc_now,
    write_result,
)
from _common import CAPTION, Table, dig, grid, num  # noqa: E402

from core.retrieve.bm25 import BM25Index, BM25Params  # noqa: E402
from core.retrieve.dense import DenseIndex  # noqa: E402
from core.retrieve.fusion import rrf  # noqa: E402
from core.text import tokenize  # noqa: E402
from core.types import Candidate  # noqa: E402

DIM = 384  # the bundled MiniLM's width, so the matrix is the size a real corpus would have
K_STAGE, K_FUSED, RRF_K = 50, 20, 60  # the PipelineConfig defaults for bm25.k / dense.k, fusion.k and rrf_k

_STOP = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there been one all we their has would when if so no will more out up who can").split()
_ONSETS = ["", "b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "pl", "r", "s", "sh",
           "st", "t", "tr", "v", "w", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ck"]


# -- synthetic corpus ---------------------------------------------------------------------------------------------

def vocabulary(rng: np.random.Generator, size: int, identifiers: int) -> list[str]:
    """Word list in Zipf rank order: stopwords first, then made-up English-ish words with code identifiers
    (camelCase, snake_case, UPPER_SNAKE, dotted keys) scattered through the middle ranks."""
    words: list[str] = []
    seen = set(_STOP)
    while len(words) < size:
        n = int(rng.integers(1, 4))
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
                    + _CODAS[rng.integers(len(_CODAS))] for _ in range(n))
        if len(w) > 2 and w not in seen:
            seen.add(w)
            words.append(w)
    idents: list[str] = []
    for i in range(identifiers):
        a, b, c = (words[int(j)] for j in rng.integers(0, 3000, size=3))
        style = i % 4
        ident = (a + b.capitalize() + c.capitalize() if style == 0 else f"{a}_{b}_{c}" if style == 1
                 else f"{a}_{b}".upper() if style == 2 else f"{a}.{b}.{c}")
        idents.append(ident)
    positions = sorted(rng.choice(np.arange(200, size), size=identifiers, replace=False).tolist(), reverse=True)
    for pos, ident in zip(positions, idents):
        words.insert(pos, ident)
    return list(_STOP) + words


def synthetic_chunks(n: int, seed: int, vocab_size: int = 30_000, identifiers: int = 400,
                     words_min: int = 60, words_max: int = 160, zipf_s: float = 1.07) -> list[str]:
    """n chunks of words_min..words_max words drawn from a Zipf(s) law over the vocabulary, with sentence ends."""
    rng = np.random.default_rng(seed)
    vocab = np.asarray(vocabulary(rng, vocab_size, identifiers), dtype=object)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = 1.0 / ranks ** zipf_s
    p /= p.sum()
    lengths = rng.integers(words_min, words_max + 1, size=n)
    draws = vocab[rng.choice(len(vocab), size=int(lengths.sum()), p=p)]
    ends = rng.random(len(draws)) < 1 / 14  # about one sentence end every 14 words
    draws = np.where(ends, draws + ".", draws)
    out, start = [], 0
    for length in lengths.tolist():
        out.append(" ".join(draws[start:start + length].tolist()))
        start += length
    return out


def synthetic_queries(chunks: Sequence[str], n: int, seed: int) -> list[str]:
    """2-5 words lifted from a random chunk (stopwords mostly skipped), so every query has real matches."""
    rng = np.random.default_rng(seed + 1)
    stop = set(_STOP)
    out = []
    for _ in range(n):
        words = [w.rstrip(".") for w in chunks[int(rng.integers(len(chunks)))].split()]
        content = [w for w in words if w not in stop] or words
        take = min(len(content), int(rng.integers(2, 6)))
        out.append(" ".join(content[int(i)] for i in rng.choice(len(content), size=take, replace=False)))
    return out


# -- the two sides ------------------------------------------------------------------------------------------------

def candidates(hits: Sequence[tuple[str, float]], stage: str) -> list[Candidate]:
    return [Candidate(cid, "", "", score, rank, {"stage": stage}) for rank, (cid, score) in enumerate(hits, 1)]


def naive_bm25_top(bm25: Any, ids: Sequence[str], query: str, k: int) -> list[tuple[str, float]]:
    scores = bm25.get_scores(tokenize(query))
    order = np.argsort(-scores)[:k]  # a full sort: what one writes without thinking about top-k
    return [(ids[i], float(scores[i])) for i in order if scores[i] > 0]


def naive_dense_top(matrix: np.ndarray, ids: Sequence[str], q: np.ndarray, k: int) -> list[tuple[str, float]]:
    sims = matrix @ q
    order = np.argsort(-sims)[:k]
    return [(ids[i], float(sims[i])) for i in order]


def naive_rrf(lists: Sequence[Sequence[tuple[str, float]]], k: int, top: int) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for hits in lists:
        for rank, (cid, _) in enumerate(hits, 1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])[:top]


def summary(ms: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(ms)
    return {"n": int(len(arr)), "median_ms": float(np.median(arr)), "p95_ms": float(np.percentile(arr, 95)),
            "mean_ms": float(arr.mean()), "min_ms": float(arr.min())}


def clock(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def overlap(a: Sequence[tuple[str, float]], b: Sequence[tuple[str, float]], k: int = 10) -> float:
    sa, sb = {c for c, _ in a[:k]}, {c for c, _ in b[:k]}
    return len(sa & sb) / max(1, min(k, len(sa), len(sb)))


def after_encode(embedder: Any, dense: DenseIndex, matrix: np.ndarray, ids: Sequence[str],
                 queries: Sequence[str], n: int) -> dict[str, dict[str, float]]:
    """Dense search timed right after the real model embedded the query, as run_query does. torch's threads have
    just been busy, which is when numpy's BLAS threads (used by `@`) have to wait for a core."""
    lat: dict[str, list[float]] = {"dense": [], "naive_dense": []}
    for i, q in enumerate(queries[:n]):
        for name in (("dense", "naive_dense") if i % 2 == 0 else ("naive_dense", "dense")):
            v = embedder.encode([q])[0]
            ms, _ = clock((lambda: dense.search(v, K_STAGE)) if name == "dense"
                          else (lambda: naive_dense_top(matrix, ids, v, K_STAGE)))
            lat[name].append(ms)
    return {k: summary(v) for k, v in lat.items()}


def run_size(n: int, n_queries: int, n_naive: int, seed: int, embedder: Any = None,
             n_after: int = 60, words: Sequence[int] = (60, 160), vectors: str = "random",
             ann_cache: Path | None = None, datasets: Path | None = None) -> dict[str, Any]:
    """`n_naive` 0: no rank_bm25 peer (its build over a million chunks takes hours here). `vectors` 'anchored':
    bench/ann.py's vectors made from real MiniLM passage embeddings, queried with real questions' embeddings, and the
    dense list also through the ANN graph (built, or read from `ann_cache`), side by side with the exact scan."""
    from rank_bm25 import BM25Okapi

    print(f"\n== {n:,} chunks ==", flush=True)
    anchored = vectors == "anchored"
    if anchored:  # bench/ann.py's texts (20-40 words), ids and cached BM25 build: the graph's keys are its ids
        words = (20, 40)
    with timed() as t_gen:
        texts = synthetic_chunks(n, seed, words_min=words[0], words_max=words[1]) if n_naive or not anchored else []
        queries = synthetic_queries(texts, n_queries, seed) if texts else []
    ids = [f"c{i}" if anchored else f"c{i:07d}" for i in range(n)]
    print(f"generated {n:,} chunks and {n_queries} queries "
          f"in {t_gen[0]:.1f}s", flush=True)
    rng = np.random.default_rng(seed + 2)

    # Tiny builds first, so lazy imports and stemmer start-up are not billed to the first real index.
    BM25Index(["a", "b"], ["warm up the stemmer", "and the tokenizer"], BM25Params())
    BM25Okapi([tokenize(x) for x in ["warm up the stemmer", "and the tokenizer"]])
    ann_vecs: Any = None
    mem: dict[str, PeakRSS] = {k: PeakRSS() for k in ("bm25s", "dense", "rank_bm25")}
    build: dict[str, float] = {}
    if anchored:
        import ann as ann_bench  # bench/ann.py (imported here: it imports this module)

        ann_vecs = ann_bench.vectors("anchored", n, seed, "report", datasets or datasets_dir(None),
                                     ann_cache or Path("/tmp/rag_ann_bench"), ann_bench.NOISE)
        bm25, queries, info = ann_bench.bm25_for(ann_cache, n, seed, ids, n_queries)
        build["bm25s"] = info["bm25_build_s"]
        print(f"BM25Index (bm25s): {info}", flush=True)
    else:
        with mem["bm25s"].measure(), timed() as t:
            bm25 = BM25Index(ids, texts, BM25Params())
        build["bm25s"] = t[0]
        print(f"BM25Index (bm25s) built in {t[0]:.1f}s", flush=True)
    if ann_vecs is None:
        raw = rng.standard_normal((n, DIM)).astype(np.float32)  # stands in for the store's vectors (not billed)
        raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    else:
        raw = ann_vecs[0]
    with mem["dense"].measure(), timed() as t:
        dense = DenseIndex("random-384", ids, raw)
        del raw  # the index keeps its own normalised copy; the loaded rows are dropped, as IndexCache does
    build["dense"] = t[0]
    naive = None
    if n_naive:
        with mem["rank_bm25"].measure(), timed() as t:
            naive = BM25Okapi([tokenize(x) for x in texts], k1=1.2, b=0.75)
        build["rank_bm25"] = t[0]
        print(f"rank_bm25.BM25Okapi built in {t[0]:.1f}s (same tokenizer)", flush=True)
    words_total = sum(len(t.split()) for t in texts) if texts else sum(words) / 2 * n
    del texts
    qvecs = rng.standard_normal((n_queries, DIM)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    matrix = dense.matrix  # the naive peer searches the very same normalised matrix
    graphed, ann_build = None, None
    if ann_vecs is not None:
        import copy

        qvecs = ann_vecs[1][np.arange(n_queries) % len(ann_vecs[1])]
        graph, ann_build = ann_bench.graph_for(ann_cache, f"{ann_vecs[2]}|{seed}", ids, matrix, 2)
        graphed = copy.copy(dense)  # the same matrix, searched through the graph
        graphed.attach_ann(graph)
        ann_build["index_mib"] = round(graph.memory_bytes() / 2**20, 1)
        print(f"ANN graph: {ann_build}", flush=True)
        del ann_vecs

    # Warm both sides (first calls allocate scratch arrays). Then, query by query, the methods run in a shuffled
    # order: a noisy neighbour hurts every method alike, and none always runs right after another (numpy's BLAS
    # threads stay awake for a moment after a product, which would favour whichever method came second).
    for q, v in zip(queries[:3], qvecs[:3]):
        bm25.search(q, K_STAGE), dense.search(v, K_STAGE), naive_dense_top(matrix, ids, v, K_STAGE)
        if graphed is not None:
            graphed.search(v, K_STAGE)
    if naive is not None:
        naive_bm25_top(naive, ids, queries[0], K_STAGE)

    lat: dict[str, list[float]] = {k: [] for k in ("bm25", "dense", "fused", "rrf_only", "naive_bm25",
                                                   "naive_dense", "naive_fused", "dense_ann", "fused_ann")}
    agree_bm25, agree_dense, recall_ann = [], [], []
    order_rng = np.random.default_rng(seed + 3)
    for i, (q, v) in enumerate(zip(queries, qvecs)):
        jobs: dict[str, Callable[[], Any]] = {
            "bm25": lambda: bm25.search(q, K_STAGE),
            "dense": lambda: dense.search(v, K_STAGE),
            "fused": lambda: rrf([candidates(bm25.search(q, K_STAGE), "bm25"),
                                  candidates(dense.search(v, K_STAGE), "dense")],
                                 k=RRF_K, names=["bm25", "dense"], top=K_FUSED),
            "naive_dense": lambda: naive_dense_top(matrix, ids, v, K_STAGE),
        }
        if graphed is not None:
            jobs["dense_ann"] = lambda: graphed.search(v, K_STAGE)
            jobs["fused_ann"] = lambda: rrf([candidates(bm25.search(q, K_STAGE), "bm25"),
                                             candidates(graphed.search(v, K_STAGE), "dense")],
                                            k=RRF_K, names=["bm25", "dense"], top=K_FUSED)
        if i < n_naive:
            jobs["naive_bm25"] = lambda: naive_bm25_top(naive, ids, q, K_STAGE)
            jobs["naive_fused"] = lambda: naive_rrf([naive_bm25_top(naive, ids, q, K_STAGE),
                                                     naive_dense_top(matrix, ids, v, K_STAGE)], RRF_K, K_FUSED)
        names = list(jobs)
        out: dict[str, Any] = {}
        for j in order_rng.permutation(len(names)).tolist():
            ms, out[names[j]] = clock(jobs[names[j]])
            lat[names[j]].append(ms)
        ms_r, _ = clock(lambda: rrf([candidates(out["bm25"], "bm25"), candidates(out["dense"], "dense")],
                                    k=RRF_K, names=["bm25", "dense"], top=K_FUSED))
        lat["rrf_only"].append(ms_r)
        agree_dense.append(overlap(out["dense"], out["naive_dense"]))
        if graphed is not None:
            recall_ann.append(len({c for c, _ in out["dense_ann"]} & {c for c, _ in out["dense"]}) / K_STAGE)
        if i < n_naive:
            agree_bm25.append(overlap(out["bm25"], out["naive_bm25"]))

    stats = {k: summary(v) for k, v in lat.items() if v}
    after = after_encode(embedder, dense, matrix, ids, queries, n_after) if embedder is not None else None
    # Ratios on the same queries: the naive BM25 / fused peers only ran the first n_naive of them.
    same = {k: summary(v[:n_naive]) for k, v in lat.items() if k in ("bm25", "fused")} if n_naive else {}
    ratios = {
        "bm25": statistics.median(lat["naive_bm25"]) / same["bm25"]["median_ms"] if n_naive else None,
        "dense": stats["naive_dense"]["median_ms"] / stats["dense"]["median_ms"],
        "fused": statistics.median(lat["naive_fused"]) / same["fused"]["median_ms"] if n_naive else None,
    }
    return {
        "chunks": n, "queries": n_queries, "naive_bm25_queries": n_naive, "mean_words_per_chunk": words_total / n,
        "vectors": vectors, "load_at_end": [round(x, 2) for x in __import__("os").getloadavg()],
        "ann": None if graphed is None else {**(ann_build or {}), "recall_at_50_vs_exact": float(np.mean(recall_ann)),
                                             "recall_at_50_min": float(np.min(recall_ann)),
                                             "ef": __import__("core.retrieve.ann", fromlist=["x"]).expansion(
                                                 n, __import__("core.retrieve.ann", fromlist=["x"]).candidates(K_STAGE))},
        "generate_s": t_gen[0], "build_s": build,
        "peak_mem_mib": {k: round(m.peak_mib, 1) for k, m in mem.items()},
        "retained_mem_mib": {k: round(m.retained_mib, 1) for k, m in mem.items()},
        "mem_method": mem["bm25s"].method,
        "dense_matrix_mib": round(dense.matrix.nbytes / 2**20, 1),
        "bm25s_arrays_mib": round(sum(a.nbytes for a in (bm25.to_arrays() or {}).values()) / 2**20, 1),
        "latency": stats, "speedup_vs_naive_median": ratios,
        "dense_after_query_embedding": after,
        "agreement_at_10": {"bm25s_vs_rank_bm25": float(np.mean(agree_bm25)) if agree_bm25 else None,
                            "dense_vs_numpy": float(np.mean(agree_dense))},
    }


# -- query time against the number of contexts ----------------------------------------------------------------------

class RandomEmbedder:
    """Deterministic random unit vectors keyed by the text (no model): the contexts scaling run measures what grows
    with the corpus around the query (counting contexts, index freshness checks, the run-log row), not the model."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.model_id = f"random-{dim}"
        self.languages = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import hashlib

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def contexts_scaling(datasets: Path, sizes: Sequence[int], n_queries: int) -> dict[str, Any]:
    """run_query with context.variant = heuristic on the first N SciFact documents (one chunk each, the BEIR way),
    each size in its own temporary DuckDB file: documents stored with random vectors, heuristic contexts written at
    ingest as the product does. The first query builds the indexes (once per corpus version) and is reported apart;
    then n_queries SciFact queries are timed end to end (validation, the context check, BM25 + dense + RRF, the
    run-log row). `old_count_ms` times what every query did before: loading all contexts to count them."""
    import json
    import tempfile

    from core.config import PipelineConfig
    from core.deps import Deps
    from core.eval.datasets import ingest_predocs, scifact_predocs
    from core.ingest.context import prepare_variant
    from core.pipeline import run_query
    from core.store import Store

    sf = datasets / "beir_scifact"
    predocs = scifact_predocs(sf, "bench")
    queries = [json.loads(x)["text"] for x in (sf / "queries.jsonl").read_text().splitlines() if x.strip()][:n_queries]
    cfg = PipelineConfig().with_overrides({
        "context.variant": "heuristic", "rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False,
        "expand.enabled": False, "answer.enabled": False, "graph.enabled": False})
    runs = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(str(Path(tmp) / f"scifact_{n}.duckdb"))
            emb = RandomEmbedder()
            with timed() as t_ingest:
                rep = ingest_predocs(predocs[:n], store=store, embedder=emb, workspace="bench")
            deps = Deps(store=store, embedder=emb)
            with timed() as t_first:
                first = run_query(queries[0], cfg, deps, workspace="bench")
            assert not first.notes or not any("heuristic" in x for x in first.notes), first.notes
            ms, prep, old = [], [], []
            for q in queries:
                t0 = time.perf_counter()
                run_query(q, cfg, deps, workspace="bench")
                ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                prepare_variant(store, "heuristic", "bench", emb.model_id)
                prep.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                len(store.ledger.contexts("heuristic", "bench"))
                old.append((time.perf_counter() - t0) * 1000)
            runs.append({
                "documents": n, "chunks": store.corpus.count("chunks", "bench"),
                "contexts": sum(store.ledger.context_models("heuristic", "bench").values()),
                "ingest_s": round(t_ingest[0], 2), "stored_documents": rep.added,
                "first_query_ms": round(t_first[0] * 1000, 1),
                "query_ms": _summary(ms), "prepare_ms": _summary(prep), "old_count_ms": _summary(old),
            })
            store.close()
        print(f"  contexts scaling {n:,} docs: query median {runs[-1]['query_ms']['median_ms']:.1f} ms, "
              f"context check {runs[-1]['prepare_ms']['median_ms']:.2f} ms, old count "
              f"{runs[-1]['old_count_ms']['median_ms']:.1f} ms", file=sys.stderr)
    base, top = runs[0], runs[-1]
    return {
        "method": "SciFact documents in a temporary DuckDB, random vectors, heuristic contexts written at ingest; "
                  "rerank, prune, MMR, expand, answer and graph off; first query (index build) excluded",
        "queries": len(queries), "runs": runs,
        "ratio_median": round(top["query_ms"]["median_ms"] / base["query_ms"]["median_ms"], 2),
        "old_count_ratio_median": round(top["old_count_ms"]["median_ms"] / base["old_count_ms"]["median_ms"], 2),
    }


def _summary(ms: Sequence[float]) -> dict[str, float]:
    xs = sorted(ms)
    return {"n": len(xs), "median_ms": round(statistics.median(xs), 3),
            "p95_ms": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))], 3), "mean_ms": round(statistics.fmean(xs), 3)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200, help="queries per size for the product stages")
    ap.add_argument("--naive-queries", type=int, nargs="+", default=None,
                    help="queries for rank_bm25 per size (default: 100 up to 20k chunks, else 20)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--no-model", action="store_true",
                    help="skip the 'dense right after embedding the query' rows (they load the bundled MiniLM)")
    ap.add_argument("--after-queries", type=int, default=60, help="queries for those rows (default 60)")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default bench/results/query.json)")
    ap.add_argument("--context-docs", type=int, nargs="*", default=[1000, 5000],
                    help="SciFact document counts for the query-time-vs-contexts run (none: skip it)")
    ap.add_argument("--context-queries", type=int, default=100)
    ap.add_argument("--datasets", help="folder holding beir_scifact (default $RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--words", type=int, nargs=2, default=[60, 160], help="words per synthetic chunk (min max)")
    ap.add_argument("--naive-max", type=int, default=100_000, help="no rank_bm25 peer above this many chunks")
    ap.add_argument("--vectors", choices=["random", "anchored"], default="random",
                    help="anchored: bench/ann.py's vectors from real MiniLM embeddings, with ANN rows beside exact")
    ap.add_argument("--ann-cache", type=Path, default=Path("/tmp/rag_ann_bench"),
                    help="bench/ann.py's cache of real embeddings and built graphs")
    args = ap.parse_args(argv)

    naive_q = args.naive_queries or [100 if n <= 20_000 else 20 for n in args.sizes]
    if len(naive_q) == 1:
        naive_q = naive_q * len(args.sizes)
    naive_q = [0 if n > args.naive_max else q for n, q in zip(args.sizes, naive_q)]
    machine = machine_info()
    started = time.perf_counter()
    embedder = None
    if not args.no_model:
        from core.models.embed import BUNDLED_MODEL, load_embedder

        embedder = load_embedder(BUNDLED_MODEL).embedder
        embedder.encode(["warm-up query"])
    runs = [run_size(n, args.queries, min(nq, args.queries), args.seed, embedder, args.after_queries, args.words,
                     args.vectors, args.ann_cache, datasets_dir(args.datasets))
            for n, nq in zip(args.sizes, naive_q)]
    scaling = (contexts_scaling(datasets_dir(args.datasets), args.context_docs, args.context_queries)
               if args.context_docs else None)
    total_s = time.perf_counter() - started

    lat_rows, build_rows = [], []
    for r in runs:
        L = r["latency"]
        for stage, peer in (("bm25", "naive_bm25"), ("dense", "naive_dense"), ("fused", "naive_fused"),
                            ("dense_ann", "dense"), ("fused_ann", "fused")):
            if stage not in L:
                continue
            up = (r["speedup_vs_naive_median"].get(stage) if peer.startswith("naive")
                  else L[peer]["median_ms"] / L[stage]["median_ms"])
            lat_rows.append([f"{r['chunks']:,}", stage.replace("_ann", " (ANN)"), L[stage]["median_ms"],
                             L[stage]["p95_ms"], *((L[peer]["median_ms"], L[peer]["p95_ms"], L[peer]["n"])
                                                   if peer in L else ("", "", "")),
                             f"{up:.1f}x" if up else ""])
        lat_rows.append([f"{r['chunks']:,}", "rrf alone", L["rrf_only"]["median_ms"], L["rrf_only"]["p95_ms"],
                         "", "", "", ""])
        A = r["dense_after_query_embedding"]
        if A:
            lat_rows.append([f"{r['chunks']:,}", "dense after embed", A["dense"]["median_ms"], A["dense"]["p95_ms"],
                             A["naive_dense"]["median_ms"], A["naive_dense"]["p95_ms"], A["naive_dense"]["n"],
                             f"{A['naive_dense']['median_ms'] / A['dense']['median_ms']:.1f}x"])
        for name in [x for x in ("bm25s", "dense", "rank_bm25") if x in r["build_s"]]:
            build_rows.append([f"{r['chunks']:,}", name, r["build_s"][name], r["peak_mem_mib"][name],
                               r["retained_mem_mib"][name]])
    print()
    print(table(["chunks", "stage", "median ms", "p95 ms", "naive median ms", "naive p95 ms", "naive n",
                 "speed-up"], lat_rows))
    print("(ANN) rows: the product's dense list through the hnswlib graph; their 'naive' columns are the exact "
          "scan's, on the same queries")
    for r in runs:
        if r.get("ann"):
            print(f"{r['chunks']:,}: ANN recall@50 vs exact {r['ann']['recall_at_50_vs_exact']:.4f} (min "
                  f"{r['ann']['recall_at_50_min']:.2f}), graph {r['ann']['index_mib']} MiB, built in "
                  f"{r['ann']['build_s']} s (load {r['ann']['build_load_start']})")
    print("\nproduct: bm25s BM25Index / DenseIndex (einsum + argpartition) / both + core rrf; naive peer: "
          "rank_bm25.BM25Okapi + numpy `@` and full argsort + a dict RRF; same tokenizer, same matrix, same "
          "queries. 'dense after embed': each search right after the bundled MiniLM embedded the query.")
    print()
    print(table(["chunks", "index", "build s", "peak RSS +MiB", "retained +MiB"], build_rows))
    print(f"\nmemory: {runs[0]['mem_method']} (resident-set high-water mark of each build minus RSS before it); "
          "payload: " + ", ".join(f"{r['chunks']:,}: dense matrix {r['dense_matrix_mib']} MiB, bm25s score arrays "
                                  f"{r['bm25s_arrays_mib']} MiB" for r in runs))
    for r in runs:
        a = r["agreement_at_10"]
        if a["bm25s_vs_rank_bm25"] is not None:
            print(f"{r['chunks']:,}: top-10 agreement bm25s vs rank_bm25 {a['bm25s_vs_rank_bm25']:.2f} "
                  f"(lucene vs okapi idf), dense vs numpy {a['dense_vs_numpy']:.2f}")
    print(f"total {total_s:.0f}s")

    payload = {
        "benchmark": "query",
        "timestamp": utc_now(),
        "command": "python bench/query.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine,
        "parameters": {"sizes": args.sizes, "queries": args.queries, "naive_bm25_queries": naive_q,
                       "words_per_chunk": args.words, "vectors": args.vectors,
                       "seed": args.seed, "dim": DIM, "k_stage": K_STAGE, "k_fused": K_FUSED, "rrf_k": RRF_K,
                       "bm25": BM25Params().__dict__},
        "total_s": total_s,
        "load_avg_at_end": list(__import__("os").getloadavg()),
        "runs": runs,
        **({"contexts_scaling": scaling} if scaling else {}),
    }
    if scaling:
        print()
        print(table(["documents", "contexts", "first query ms", "query median ms", "query p95 ms",
                     "context check median ms", "old count median ms"],
                    [[r["documents"], r["contexts"], r["first_query_ms"], r["query_ms"]["median_ms"],
                      r["query_ms"]["p95_ms"], r["prepare_ms"]["median_ms"], r["old_count_ms"]["median_ms"]]
                     for r in scaling["runs"]]))
    path = write_result("query", payload, args.out, argv=argv, table=MEASURED_QUERY)
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_query(d: dict[str, Any], file: str) -> list[str]:
    p = d.get("parameters") or {}
    kind = ("vectors anchored on real MiniLM passage embeddings, real questions' vectors" if p.get("vectors") == "anchored"
            else f"random {p.get('dim')}-d vectors")
    out = [f"### Query latency (synthetic chunks, {kind}, {p.get('queries')} queries)", "", CAPTION, ""]
    rows = []
    for r in d.get("runs") or []:
        lat = r["latency"]
        naive = (lat.get("naive_bm25") or {}).get("median_ms")
        rows.append([num(r["chunks"]), num(lat["bm25"]["median_ms"]), num(naive, 1),
                     f"{num((r.get('speedup_vs_naive_median') or {}).get('bm25'), 0)}×" if naive else "–",
                     num(lat["dense"]["median_ms"]), num(lat["fused"]["median_ms"]),
                     "– (built in bench/ann.py's cache)" if r.get("vectors") == "anchored"
                     else num((r.get("peak_mem_mib") or {}).get("bm25s"), 0)])
    out.append(grid(["chunks", "BM25 (bm25s) median ms", "rank_bm25 median ms", "speed-up", "dense (exact) median ms",
                         "fused (exact dense) median ms", "bm25s peak MiB"], rows))
    graphed = [r for r in d.get("runs") or [] if r.get("ann")]
    if graphed:
        out += ["", "The same queries with the dense list through the ANN graph (hnswlib; keys rescored exactly):", ""]
        out.append(grid(
            ["chunks", "dense via graph median ms", "fused via graph median ms", "fused p95 ms", "recall@50 vs exact",
             "worst query", "query width", "graph build s", "graph MiB", "vector matrix MiB"],
            [[num(r["chunks"]), num(dig(r, "latency", "dense_ann", "median_ms")),
              num(dig(r, "latency", "fused_ann", "median_ms")), num(dig(r, "latency", "fused_ann", "p95_ms")),
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
        out.append(grid(["documents", "chunks", "heuristic contexts", "first query ms (builds the indexes)",
                             "query median ms", "query p95 ms", "context check median ms",
                             "loading every context (before) median ms"], srows))
        if scale.get("ratio_median"):
            out += ["", f"Median query time at {num(scale['runs'][-1]['documents'])} over "
                    f"{num(scale['runs'][0]['documents'])} documents: **×{num(scale['ratio_median'])}** (documents "
                    f"×{num(scale['runs'][-1]['documents'] / scale['runs'][0]['documents'], 1)})."]
    return out


MEASURED_QUERY = Table(measured_query, 'Query speed')


if __name__ == "__main__":
    raise SystemExit(main())
