"""ANN bench: the dense list through an HNSW graph (hnswlib, what ships; usearch, compared) against the exact scan:
build time, index memory, top-50 recall against the exact scan, dense and fused query latency. Candidates are rescored
exactly on the float32 matrix (core.retrieve.dense.DenseIndex).

The vectors (--vectors anchored, the default) are made from real MiniLM embeddings of ~8k public passages (SciFact,
2WikiMultihop, a Rust codebase; --datasets or $RAG_DATASETS) and queried with real questions' embeddings; passages and
questions are split in halves, 'tune' to choose, 'report' to report:

  .venv/bin/python bench/ann.py --split report --sizes 10000 100000 300000 1000000   # bench/results/ann.json

The generator's noise (NOISE) and the query width were chosen on the tune half by the --calibrate and --sweep modes
this bench had (bench/results/ann_sweep_tune.json; the modes and their other results are archived:
`git show b0219cc:bench/ann.py`, see bench/README.md).

The fused query is the product's: BM25 (bm25s over synthetic chunk texts of 20-40 words) + the dense list + RRF, up to
--bm25-max chunks. Graphs, BM25 builds and the real embeddings are cached in --cache and reused.
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
from _common import CAPTION, Table, datasets_dir, dig, grid, machine_info, met, num, utc_now, write_result  # noqa: E402

from core.retrieve import ann as ann_mod  # noqa: E402
from core.retrieve.ann import AnnIndex  # noqa: E402
from core.retrieve.bm25 import BM25Index, BM25Params  # noqa: E402
from core.retrieve.dense import DenseIndex  # noqa: E402
from core.retrieve.fusion import rrf  # noqa: E402
from core.types import Candidate  # noqa: E402

DIM, K, K_FUSED, RRF_K = 384, 50, 20, 60


# -- synthetic chunk texts for the BM25 side (Zipf words with code identifiers), and the questions over them
_STOP = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there been one all we their has would when if so no will more out up who can").split()
_ONSETS = ["", "b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "pl", "r", "s", "sh",
           "st", "t", "tr", "v", "w", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ck"]


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


def candidates(hits: Sequence[tuple[str, float]], stage: str) -> list[Candidate]:
    return [Candidate(cid, "", "", score, rank, {"stage": stage}) for rank, (cid, score) in enumerate(hits, 1)]


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def real_texts(datasets: Path) -> tuple[list[str], list[str]]:
    """Passages and questions of three public sets in ../shared/datasets (SciFact abstracts, 2WikiMultihop
    paragraphs, a Rust codebase's chunks): ~7.4k passages and ~850 questions of three kinds of text."""
    import json

    passages, questions = [], []
    for line in (datasets / "beir_scifact" / "corpus.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            passages.append(f"{d.get('title', '')}\n{d['text']}")
    for line in (datasets / "twowiki_multihop" / "corpus.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            passages.append(f"{d['title']}\n{d['text']}")
    passages += [c["content"] for doc in json.loads((datasets / "anthropic_codebase" / "codebase_chunks.json").read_text())
                 for c in doc["chunks"]]
    for name, key in (("beir_scifact/queries.jsonl", "text"), ("twowiki_multihop/questions.jsonl", "question"),
                      ("anthropic_codebase/evaluation_set.jsonl", "query")):
        questions += [json.loads(x)[key] for x in (datasets / name).read_text().splitlines() if x.strip()]
    return passages, questions


def real_embeddings(datasets: Path, cache: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """The bundled MiniLM's unit vectors of real_texts, each passage cut to its first 64 words (a chunk's size; the
    full abstracts took 4x the time on this busy machine), cached in `cache`."""
    from core.models.embed import BUNDLED_MODEL, load_embedder

    passages, questions = real_texts(datasets)
    passages = [" ".join(t.split()[:64]) for t in passages]
    cache.mkdir(parents=True, exist_ok=True)
    f = cache / f"real-{len(passages)}-{len(questions)}.npz"
    if f.is_file():
        d = np.load(f)
        return d["p"], d["q"], str(d["model"])
    emb = load_embedder(BUNDLED_MODEL).embedder
    p, q = emb.encode(passages), emb.encode(questions)
    np.savez(f, p=p, q=q, model=emb.model_id)
    return p, q, emb.model_id


def split_real(p: np.ndarray, q: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Half of the real passages and questions (a fixed shuffle): 'tune' chooses settings, 'report' reports."""
    rng = np.random.default_rng(0)
    pi, qi = rng.permutation(len(p)), rng.permutation(len(q))
    half = 0 if split == "tune" else 1
    return p[np.array_split(pi, 2)[half]], q[np.array_split(qi, 2)[half]]


def anchored(n: int, anchors: np.ndarray, seed: int, noise: float, neighbours: int = 10) -> np.ndarray:
    """n unit vectors made from real passage embeddings (`anchors`): each is an anchor moved part of the way
    (uniform 0..1/2) towards one of its `neighbours` nearest anchors, plus Gaussian noise shaped like the anchors'
    own covariance (their principal directions and variances) scaled by `noise`. New passages thus lie where real
    passages lie, between related ones, spread the way real embeddings spread; `noise` is set so that the local
    intrinsic dimension of a synthetic set matches that of real passages of the same size (--calibrate)."""
    rng = np.random.default_rng(seed)
    a = np.ascontiguousarray(anchors, dtype=np.float32)
    sims = a @ a.T
    np.fill_diagonal(sims, -np.inf)
    nb = np.argpartition(-sims, neighbours, axis=1)[:, :neighbours]
    centred = a - a.mean(axis=0)
    lam, vecs = np.linalg.eigh(np.cov(centred, rowvar=False).astype(np.float64))
    shape = (vecs * np.sqrt(np.maximum(lam, 0))).T.astype(np.float32)  # g @ shape ~ N(0, cov)
    out = np.empty((n, a.shape[1]), dtype=np.float32)
    for at in range(0, n, 50_000):
        m = min(50_000, n - at)
        i = rng.integers(0, len(a), m)
        j = nb[i, rng.integers(0, neighbours, m)]
        t = rng.uniform(0, 0.5, (m, 1)).astype(np.float32)
        block = a[i] + t * (a[j] - a[i]) + noise * (rng.standard_normal((m, a.shape[1]), dtype=np.float32) @ shape)
        out[at: at + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def lid(x: np.ndarray, qs: np.ndarray, k: int = K) -> dict[str, float]:
    """Local intrinsic dimension around the queries (Levina-Bickel MLE over the k nearest, Euclidean on unit
    vectors), with the cosine of the 1st and k-th neighbour: how hard a top-k is for a graph index (uniform noise in
    384-d: LID ~ 100+, real sentence embeddings: tens)."""
    best = np.full((len(qs), 0), -np.inf, dtype=np.float32)
    for at in range(0, len(x), 100_000):  # blocks: 200 queries x 1M vectors would be 800 MB at once
        sims = np.concatenate([best, qs @ x[at: at + 100_000].T], axis=1)
        best = -np.partition(-sims, k, axis=1)[:, :k] if sims.shape[1] > k else sims
    top = -np.sort(-best, axis=1)
    d = np.sqrt(np.maximum(2 - 2 * top, 1e-12))
    est = -1.0 / np.mean(np.log(d[:, :-1] / d[:, -1:]), axis=1)
    return {"lid_median": round(float(np.median(est)), 1), "cos_1st": round(float(np.median(top[:, 0])), 3),
            f"cos_{k}th": round(float(np.median(top[:, -1])), 3)}


class Usearch:
    """usearch behind AnnIndex's two members DenseIndex reads (ids, search), same M / expansion, f16 storage."""

    def __init__(self, ids: Sequence[str], x: np.ndarray, threads: int) -> None:
        from usearch.index import Index

        self.ids = list(ids)
        self.g = Index(ndim=x.shape[1], metric="ip", dtype="f16", connectivity=ann_mod.CONNECTIVITY,
                       expansion_add=ann_mod.EXPANSION_ADD,
                       expansion_search=ann_mod.expansion(len(x), ann_mod.candidates(K)))
        self.g.add(np.arange(len(x), dtype=np.uint64), x, threads=threads)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.g.search(q, k).keys, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

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


# Noise scale of the anchored generator, chosen by --calibrate on the 'tune' half (bench/results/ann_calibrate.json):
# real passages have a local intrinsic dimension of 26.9 around the tune questions; noise 0 / 0.25 / 0.5 give 26.5 /
# 27.7 / 30.2. The rule: the largest noise (the hardest set for a graph) whose LID is within 5% of the real set's,
# so 0.25 (+3%); 0 would also put every new vector on a segment between two anchors, a degenerate set at 1M.
NOISE = 0.25


def vectors(kind: str, n: int, seed: int, split: str, datasets: Path, cache: Path, noise: float
            ) -> tuple[np.ndarray, np.ndarray, str]:
    """(corpus vectors, query vectors, description)."""
    p, q, _ = real_embeddings(datasets, cache)
    anchors, qs = split_real(p, q, split)
    return (anchored(n, anchors, seed, noise), qs,
            f"anchored on {len(anchors)} real MiniLM passage embeddings ({split} half), noise {noise}; "
            f"queries: {len(qs)} real questions' embeddings ({split} half)")


def graph_for(cache: Path | None, key: str, ids: Sequence[str], x: np.ndarray, threads: int
              ) -> tuple[AnnIndex, dict[str, Any]]:
    """The graph over x, built (timed, with the load) or read from `cache` where an earlier run of the same
    vectors and settings saved it with its build figures."""
    import hashlib
    import json
    import os

    tag = hashlib.sha256(f"{key}|{x.shape}|{ann_mod.CONNECTIVITY}|{ann_mod.EXPANSION_ADD}|{ann_mod.FORMAT}".encode()
                         + x[:: max(1, len(x) // 1000)].tobytes()).hexdigest()[:16]
    path = cache / f"graph-{len(x)}-{tag}.hnsw" if cache is not None else None
    if path is not None and path.with_suffix(".build.json").is_file():
        g = AnnIndex.load(path, "synthetic", x.shape[1])
        if g is not None:
            return g, {**json.loads(path.with_suffix(".build.json").read_text()), "from_cache": True}
    load0 = os.getloadavg()
    t = time.perf_counter()
    g = AnnIndex.build("synthetic", ids, x, threads=threads, progress=lambda done, total: print(
        f"    graph {done:,}/{total:,} in {time.perf_counter() - t:.0f} s (load {os.getloadavg()[0]:.1f})",
        file=sys.stderr, flush=True))
    info = {"build_s": round(time.perf_counter() - t, 1), "build_threads": threads,
            "build_load_start": [round(v, 2) for v in load0], "build_load_end": [round(v, 2) for v in os.getloadavg()],
            "built_at": utc_now()}
    if path is not None:
        g.save(path)
        path.with_suffix(".build.json").write_text(json.dumps(info))
    return g, {**info, "from_cache": False}


def bm25_for(cache: Path | None, n: int, seed: int, ids: Sequence[str], n_queries: int
             ) -> tuple[BM25Index, list[str], dict[str, Any]]:
    """BM25 over n synthetic chunk texts of 20-40 words (bench/query.py's generator) and keyword queries lifted
    from them; built (timed) or read from `cache` (a million chunks take minutes to tokenise here)."""
    import os
    import pickle

    path = cache / f"bm25-{n}-{seed}-{n_queries}.pkl" if cache is not None else None
    if path is not None and path.is_file():
        with open(path, "rb") as f:
            bm25, texts, info = pickle.load(f)
        return bm25, texts, {**info, "from_cache": True}
    load0 = os.getloadavg()
    t = time.perf_counter()
    chunks = synthetic_chunks(n, seed, words_min=20, words_max=40)
    texts = synthetic_queries(chunks, n_queries, seed)
    bm25 = BM25Index(ids, chunks, BM25Params())
    del chunks
    gc.collect()
    info = {"bm25_build_s": round(time.perf_counter() - t, 1),
            "bm25_build_load_start": [round(v, 2) for v in load0]}
    if path is not None:
        with open(path.with_suffix(".tmp"), "wb") as f:
            pickle.dump((bm25, texts, info), f, protocol=pickle.HIGHEST_PROTOCOL)
        path.with_suffix(".tmp").replace(path)
    return bm25, texts, {**info, "from_cache": False}


def run(n: int, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"chunks": n, "load_at_start": [round(v, 2) for v in __import__("os").getloadavg()]}
    t = time.perf_counter()
    x, qpool, desc = vectors(args.vectors, n, args.seed, args.split, datasets_dir(args.datasets), Path(args.cache),
                             args.noise)
    qs = qpool[: args.queries]
    row.update({"queries": len(qs), "vectors": desc})
    ids = [f"c{i}" for i in range(n)]
    row["generate_s"] = round(time.perf_counter() - t, 1)
    row["hardness"] = lid(x, qs)
    base = rss_mib()
    index = DenseIndex("synthetic", ids, x)
    del x
    gc.collect()
    row["matrix_mib"] = round(index.matrix.nbytes / 2**20, 1)
    exact = [[c for c, _ in index.search(q, K)] for q in qs]
    row["exact"] = timed_search(index, qs, None)
    bm25, texts = None, []
    if n <= args.bm25_max:
        bm25, texts, info = bm25_for(Path(args.cache) if args.cache else None, n, args.seed, ids, len(qs))
        row.update(info)
    row["fused_exact"] = fused(bm25, index, texts, qs)
    for lib in args.libs:
        if lib == "usearch" and (n > args.compare_max or importlib.util.find_spec("usearch") is None):
            row["usearch"] = None
            continue
        gc.collect()
        before = rss_mib()
        if lib == "hnswlib":
            graph, r = graph_for(Path(args.cache) if args.cache else None, f"{desc}|{args.seed}", ids, index.matrix,
                                 args.threads)
        else:
            t = time.perf_counter()
            graph, r = Usearch(ids, index.matrix, args.threads), {}
            r["build_s"] = round(time.perf_counter() - t, 1)
        r["rss_growth_mib"] = round(rss_mib() - before, 1)
        index.attach_ann(graph)
        r["ef"] = ann_mod.expansion(n, ann_mod.candidates(K))
        r["candidates"] = ann_mod.candidates(K)
        timed_search(index, qs[:5], None)
        r.update(timed_search(index, qs, exact))
        r["index_mib"] = round(graph.memory_bytes() / 2**20, 1)
        r["fused"] = fused(bm25, index, texts, qs)
        row[lib] = r
        index.ann = None
        del graph
        gc.collect()
        print(f"  {n:,} {lib}: build {r['build_s']} s, recall@50 {r['recall_at_50']}, dense {r['median_ms']} ms, "
              f"fused {r.get('fused', {}).get('median_ms')} ms", file=sys.stderr)
    row["rss_mib_over_start"] = round(rss_mib() - base, 1)
    row["load_at_end"] = [round(v, 2) for v in __import__("os").getloadavg()]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--vectors", choices=["anchored"], default="anchored")
    ap.add_argument("--split", choices=["tune", "report"], default="report")
    ap.add_argument("--noise", type=float, default=NOISE)
    ap.add_argument("--datasets", default=None, help="folder of the public sets (default $RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--cache", default="/tmp/rag_ann_bench", help="real embeddings and built graphs, reused")
    ap.add_argument("--bm25-max", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", nargs="+", default=["hnswlib"])
    ap.add_argument("--compare-max", type=int, default=100_000, help="usearch (compared, not shipped) up to this size")
    ap.add_argument("--note", default="", help="a sentence for the report (e.g. why 1M was not run)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from importlib.metadata import version

    info = machine_info()
    t0 = time.perf_counter()
    rows = []
    for n in args.sizes:
        print(f"{n:,} chunks", file=sys.stderr)
        rows.append(run(n, args))
    payload = {"what": "issue #32 item 5: dense search through an HNSW graph against the exact scan on synthetic "
                       "unit vectors (see each row's 'vectors'); recall@50 of the product's dense list (graph "
                       "candidates rescored exactly) against the exact scan",
               "settings": {"connectivity": ann_mod.CONNECTIVITY, "expansion_add": ann_mod.EXPANSION_ADD,
                            "ef_per_k": ann_mod.EF_PER_K, "candidates_per_k": ann_mod.CANDIDATES_PER_K,
                            "ef_reference_size": ann_mod.EF_REFERENCE_SIZE, "hnswlib_storage": "f32",
                            "shipped": "hnswlib", "threads": args.threads, "k": K, "k_fused": K_FUSED,
                            "rrf_k": RRF_K, "seed": args.seed, "split": args.split, "noise": args.noise},
               "versions": {lib: version(lib) for lib in ("usearch", "hnswlib") if importlib.util.find_spec(lib)},
               "machine": info,
               "when": utc_now(), "total_s": round(time.perf_counter() - t0, 1), "rows": rows,
               "targets": {"1M_fused_ms": 30, "100k_dense_ms": 10, "recall_at_50": 0.99}, "note": args.note}
    print(write_result("ann", payload, Path(args.out) if args.out else None,
                       table=MEASURED_ANN))


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_ann(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: dense search through an HNSW graph (usearch, hnswlib) against the exact scan (bench/ann.py)."""
    st = d.get("settings") or {}
    width = (f"query width {st.get('expansion_search')}, {st.get('min_candidates')} candidates rescored exactly"
             if "expansion_search" in st else
             f"query width {st.get('ef_per_k')} x k at {num(st.get('ef_reference_size'))} vectors growing with log n, "
             f"{st.get('candidates_per_k')} x k candidates rescored exactly (split '{st.get('split')}', seed "
             f"{st.get('seed')})")
    out = ["### ANN index: usearch and hnswlib against the exact scan", "", CAPTION, "",
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
    out.append(grid(heads, rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


def measured_ann_sweep(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32: recall@50 and latency of the graph over query widths, on the tune half (ann.py --sweep)."""
    out = ["### ANN: the query width chosen on the tune half", "", CAPTION, ""]
    for r in d.get("rows") or []:
        h = r.get("hnswlib") or {}
        out += [f"{num(r.get('chunks'))} vectors: {r.get('vectors')}; LID@50 {(r.get('hardness') or {}).get('lid_median')}; "
                f"graph built in {num(h.get('build_s'), 1)} s ({h.get('build_threads')} threads, load "
                f"{(h.get('build_load_start') or [''])[0]}), index {num(h.get('index_mib'), 1)} MiB; exact scan "
                f"{num((r.get('exact') or {}).get('median_ms'), 2)} ms median.", ""]
        rows = [[x.get("ef"), x.get("candidates_per_k"), num(x.get("recall_at_50"), 4), num(x.get("recall_at_50_min"), 2),
                 num(x.get("median_ms"), 3), num(x.get("p95_ms"), 3)] for x in h.get("sweep") or []]
        out += [grid(["query width (ef)", "candidates / k", "recall@50 vs exact", "worst query", "median ms",
                          "p95 ms"], rows), ""]
    if d.get("note"):
        out.append(d["note"])
    return out


def headline_ann(d: dict[str, Any], file: str) -> tuple[str, str | None] | None:
    """The README row of the report run (ann.json): its largest size."""
    if file != "ann.json":
        return None
    big = max(d.get("rows") or [{}], key=lambda r: r.get("chunks") or 0)
    h, tg = big.get("hnswlib") or {}, d.get("targets") or {}
    rec, fms = h.get("recall_at_50"), dig(h, "fused", "median_ms")
    ms_goal, rec_goal = tg.get("1M_fused_ms", 30), tg.get("recall_at_50", 0.99)
    return (f"A query over {num(big.get('chunks'))} chunks: BM25 + dense through the ANN graph (hnswlib) + RRF, "
            "vectors anchored on real embeddings, settings chosen on the other half",
            None if rec is None or fms is None else
            f"**{num(fms, 1)} ms** median fused (exact scan: {num(dig(big, 'fused_exact', 'median_ms'), 0)} ms), "
            f"recall@50 vs exact **{num(rec, 4)}** (targets ≤ {ms_goal} ms, ≥ {rec_goal}: "
            f"{met(fms <= ms_goal and rec >= rec_goal)})")


MEASURED_ANN = Table(measured_ann, 'Query speed', headline=headline_ann)
MEASURED_ANN_SWEEP = Table(measured_ann_sweep, 'Query speed')


if __name__ == "__main__":
    main()
