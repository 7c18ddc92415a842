"""ANN bench: the dense list through an HNSW graph (hnswlib, what ships; usearch, compared) against the exact scan,
on synthetic clustered unit vectors: build time, index memory, top-50 recall against the exact scan, dense and fused
query latency. Candidates are rescored exactly on the float32 matrix in both (core.retrieve.dense.DenseIndex).

  .venv/bin/python bench/ann.py --sizes 10000 100000 300000 --queries 100 --bm25-max 100000

The fused query is the product's: BM25 (bm25s over synthetic chunk texts) + the dense list + RRF, up to --bm25-max
chunks (BM25's own build over synthetic text takes minutes past it); above it the row gives dense + RRF only and says
so. Settings (M, expansion) were chosen on --seed 7's vectors before this run; the report runs --seed 13.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import machine_info, utc_now, write_result  # noqa: E402
from query import candidates, synthetic_chunks, synthetic_queries  # noqa: E402

from core.retrieve import ann as ann_mod  # noqa: E402
from core.retrieve.ann import AnnIndex  # noqa: E402
from core.retrieve.bm25 import BM25Index, BM25Params  # noqa: E402
from core.retrieve.dense import DenseIndex  # noqa: E402
from core.retrieve.fusion import rrf  # noqa: E402

DIM, K, K_FUSED, RRF_K = 384, 50, 20, 60


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def clustered(n: int, seed: int, clusters: int, latent: int = 24, noise: float = 0.05) -> np.ndarray:
    """Unit vectors around `clusters` random centres (topics), each topic varying along its own `latent`-dimensional
    subspace plus a little isotropic noise: a low intrinsic dimension, as sentence embeddings have (an isotropic
    cloud in 384-d has no near neighbours to find). Written in blocks to keep the peak low."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIM)).astype(np.float32) / np.sqrt(DIM)
    basis = rng.normal(size=(clusters, latent, DIM)).astype(np.float32) / np.sqrt(DIM)
    out = np.empty((n, DIM), dtype=np.float32)
    for at in range(0, n, 50_000):
        m = min(50_000, n - at)
        c = rng.integers(0, clusters, m)
        z = rng.normal(size=(m, latent)).astype(np.float32) * 0.5
        block = centres[c] + np.einsum("ml,mld->md", z, basis[c]) + noise * rng.normal(size=(m, DIM)).astype(
            np.float32) / np.sqrt(DIM)
        out[at: at + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def queries_near(x: np.ndarray, n: int, seed: int) -> np.ndarray:
    """A query near a corpus point (a question near the passage that answers it)."""
    rng = np.random.default_rng(seed + 1)
    q = x[rng.integers(0, len(x), n)] + 0.3 * rng.normal(size=(n, DIM)).astype(np.float32) / np.sqrt(DIM)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


class Usearch:
    """usearch behind AnnIndex's two members DenseIndex reads (ids, search), same M / expansion, f16 storage."""

    def __init__(self, ids: Sequence[str], x: np.ndarray, threads: int) -> None:
        from usearch.index import Index

        self.ids = list(ids)
        self.g = Index(ndim=x.shape[1], metric="ip", dtype="f16", connectivity=ann_mod.CONNECTIVITY,
                       expansion_add=ann_mod.EXPANSION_ADD, expansion_search=ann_mod.EXPANSION_SEARCH)
        self.g.add(np.arange(len(x), dtype=np.uint64), x, threads=threads)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.g.search(q, k).keys, dtype=np.int64)

    def memory_bytes(self) -> int:
        return int(self.g.memory_usage)


def timed_search(index: DenseIndex, qs: np.ndarray, exact: list[list[str]] | None) -> dict[str, Any]:
    ms, rec = [], []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        hits = index.search(q, K)
        ms.append((time.perf_counter() - t) * 1000)
        if exact is not None:
            rec.append(len({c for c, _ in hits} & set(exact[i])) / K)
    out: dict[str, Any] = {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}
    if rec:
        out.update({"recall_at_50": round(float(np.mean(rec)), 4), "recall_at_50_min": round(float(np.min(rec)), 4)})
    return out


def fused(bm25: BM25Index | None, dense: DenseIndex, texts: Sequence[str], qs: np.ndarray) -> dict[str, Any]:
    ms = []
    for i, q in enumerate(qs):
        t = time.perf_counter()
        lists = [candidates(dense.search(q, K), "dense")]
        if bm25 is not None:
            lists.insert(0, candidates(bm25.search(texts[i % len(texts)], K), "bm25"))
        rrf(lists, k=RRF_K)[:K_FUSED]
        ms.append((time.perf_counter() - t) * 1000)
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3),
            "lists": "bm25 + dense + rrf" if bm25 is not None else "dense + rrf (no BM25 at this size)"}


def run(n: int, n_queries: int, seed: int, bm25_max: int, threads: int, libs: Sequence[str],
        compare_max: int) -> dict[str, Any]:
    row: dict[str, Any] = {"chunks": n, "queries": n_queries}
    t = time.perf_counter()
    x = clustered(n, seed, clusters=max(50, n // 100))  # topics of ~100 chunks
    ids = [f"c{i}" for i in range(n)]
    qs = queries_near(x, n_queries, seed)
    row["generate_s"] = round(time.perf_counter() - t, 1)
    base = rss_mib()
    index = DenseIndex("synthetic", ids, x)
    del x
    gc.collect()
    row["matrix_mib"] = round(index.matrix.nbytes / 2**20, 1)
    exact = [[c for c, _ in index.search(q, K)] for q in qs]
    row["exact"] = timed_search(index, qs, None)
    bm25, texts = None, []
    if n <= bm25_max:
        t = time.perf_counter()
        chunks = synthetic_chunks(n, seed, words_min=20, words_max=40)
        texts = synthetic_queries(chunks, n_queries, seed)
        bm25 = BM25Index(ids, chunks, BM25Params())
        del chunks
        row["bm25_build_s"] = round(time.perf_counter() - t, 1)
    row["fused_exact"] = fused(bm25, index, texts, qs)
    for lib in libs:
        if lib == "usearch" and (n > compare_max or importlib.util.find_spec("usearch") is None):
            row["usearch"] = None
            continue
        gc.collect()
        before = rss_mib()
        t = time.perf_counter()
        graph: Any = (AnnIndex.build("synthetic", ids, index.matrix, threads=threads) if lib == "hnswlib"
                      else Usearch(ids, index.matrix, threads))
        build_s = time.perf_counter() - t
        grew = rss_mib() - before
        index.attach_ann(graph)
        r = {"build_s": round(build_s, 1), "rss_growth_mib": round(grew, 1), **timed_search(index, qs, exact)}
        r["index_mib"] = round(graph.memory_bytes() / 2**20, 1)
        r["fused"] = fused(bm25, index, texts, qs)
        row[lib] = r
        index.ann = None
        del graph
        print(f"  {n:,} {lib}: build {r['build_s']} s, recall@50 {r['recall_at_50']}, dense {r['median_ms']} ms, "
              f"fused {r['fused']['median_ms']} ms", file=sys.stderr)
    row["rss_mib_over_start"] = round(rss_mib() - base, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--bm25-max", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", nargs="+", default=["hnswlib", "usearch"])
    ap.add_argument("--compare-max", type=int, default=100_000, help="usearch (compared, not shipped) up to this size")
    ap.add_argument("--note", default="", help="a sentence for the report (e.g. why 1M was not run)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    info = machine_info()
    rows = []
    t0 = time.perf_counter()
    for n in args.sizes:
        print(f"{n:,} chunks", file=sys.stderr)
        rows.append(run(n, args.queries, args.seed, args.bm25_max, args.threads, args.libs, args.compare_max))
    from importlib.metadata import version

    payload = {"what": "issue #32 item 5: dense search through an HNSW graph against the exact scan, synthetic "
                       "clustered unit vectors (384-d, one topic per 100 chunks, each along its own 24-d subspace, plus noise), "
                       "queries near corpus points",
               "settings": {"connectivity": ann_mod.CONNECTIVITY, "expansion_add": ann_mod.EXPANSION_ADD,
                            "expansion_search": ann_mod.EXPANSION_SEARCH, "min_candidates": ann_mod.MIN_CANDIDATES,
                            "usearch_dtype": "f16", "hnswlib_storage": "f32", "shipped": "hnswlib", "threads": args.threads,
                            "k": K, "k_fused": K_FUSED, "rrf_k": RRF_K, "seed": args.seed},
               "versions": {lib: version(lib) for lib in ("usearch", "hnswlib") if importlib.util.find_spec(lib)},
               "machine": info,
               "when": utc_now(), "total_s": round(time.perf_counter() - t0, 1), "rows": rows,
               "targets": {"1M_fused_ms": 30, "100k_fused_ms": 10, "recall_at_50": 0.99}, "note": args.note}
    print(write_result("ann", payload, Path(args.out) if args.out else None))


if __name__ == "__main__":
    main()
