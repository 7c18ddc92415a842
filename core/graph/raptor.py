"""RAPTOR: chunk vectors clustered level by level, each cluster summarised (extractive offline), the tree searched at
every level as one list of chunks."""
from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from core.models.protocols import Embedder
from core.text import sentence_spans
from core.types import Candidate, Chunk, RaptorNode

_WORD = re.compile(r"\w+", re.UNICODE)
# Seconds to embed one summary with the bundled MiniLM on this CPU class, for the estimate (a summary is ~3 sentences).
EMBED_S_PER_SUMMARY = 0.02


class RaptorSource(Protocol):
    """What a build reads and writes (core.store's corpus and raptor repositories through the Store)."""

    def chunks(self, workspace: str = ...) -> list[Chunk]: ...

    def vectors(self, model_id: str, variant: str = ..., workspace: str = ...) -> tuple[list[str], np.ndarray]: ...

    def corpus_version(self, workspace: str = ...) -> int: ...


@dataclass(frozen=True)
class RaptorPlan:
    """Known before a build runs: chunks with vectors, the levels and nodes it will make, and about how long."""

    chunks: int
    levels: int
    nodes: int
    est_seconds: float

    def label(self) -> str:
        return (f"RAPTOR tree over {self.chunks:,} chunks: about {self.nodes:,} summaries on {self.levels} level(s), "
                f"about {self.est_seconds:,.0f} s")


def plan_raptor(n_chunks: int, *, cluster_size: int, max_levels: int) -> RaptorPlan:
    n, levels, nodes = n_chunks, 0, 0
    while levels < max_levels:
        k = math.ceil(n / cluster_size)
        if n < 2 or k < 1 or (levels and k == n):
            break
        levels, nodes, n = levels + 1, nodes + k, k
        if k == 1:
            break
    return RaptorPlan(n_chunks, levels, nodes, nodes * EMBED_S_PER_SUMMARY)


def kmeans(x: np.ndarray, k: int, *, seed: int, iters: int = 25) -> np.ndarray:
    """Cluster labels of unit vectors by spherical k-means (k-means++ start, seeded): deterministic for a seed."""
    n = len(x)
    if k >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    centres = [int(rng.integers(n))]
    d = 1.0 - x @ x[centres[0]]
    for _ in range(1, k):
        p = np.clip(d, 0, None) ** 2
        nxt = int(rng.choice(n, p=p / p.sum())) if p.sum() > 0 else int(rng.integers(n))
        centres.append(nxt)
        d = np.minimum(d, 1.0 - x @ x[nxt])
    c = x[centres].copy()
    labels = np.full(n, -1)
    for _ in range(iters):
        new = np.argmax(x @ c.T, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = x[labels == j]
            if len(members):
                m = members.sum(axis=0)
                c[j] = m / max(float(np.linalg.norm(m)), 1e-12)
    return labels


def extractive_summary(texts: Sequence[str], *, sentences: int = 3) -> str:
    """The cluster's most central sentences, verbatim: each scored by how many of the cluster's members use its
    words (mean over its words), the best `sentences` distinct ones, in the members' order. No text is invented."""
    df: Counter[str] = Counter()
    for t in texts:
        df.update({w.lower() for w in _WORD.findall(t) if len(w) > 2})
    scored = []
    for mi, t in enumerate(texts):
        body = "\n".join(line for line in t.splitlines() if not line.lstrip().startswith("#"))
        for s, e in sentence_spans(body):
            sent = " ".join(body[s:e].split())
            words = [w.lower() for w in _WORD.findall(sent) if len(w) > 2]
            if not 30 <= len(sent) <= 400 or not words:
                continue
            scored.append((-sum(df[w] for w in words) / len(words), mi, s, sent))
    scored.sort()
    chosen: list[tuple[int, int, str]] = []
    for score, mi, s, sent in scored:
        if all(sent != c[2] for c in chosen):
            chosen.append((mi, s, sent))
        if len(chosen) == sentences:
            break
    return " ".join(c[2] for c in sorted(chosen))


def build_tree(chunk_ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, embedder: Embedder, *,
               cluster_size: int, max_levels: int, summary_sentences: int, seed: int, corpus_version: int,
               progress: Callable[[int, int], None] | None = None) -> tuple[list[RaptorNode], np.ndarray]:
    """Level 1 clusters the chunk vectors, each higher level clusters the summaries' vectors, until a level has one
    cluster or `max_levels`. Each node: its extractive summary, its children, every chunk under it, its vector."""
    plan = plan_raptor(len(chunk_ids), cluster_size=cluster_size, max_levels=max_levels)
    ids, txt = list(chunk_ids), list(texts)
    under: list[tuple[str, ...]] = [(c,) for c in ids]
    x = _unit(np.asarray(vectors, dtype=np.float32))
    nodes: list[RaptorNode] = []
    vecs: list[np.ndarray] = []
    done = 0
    for level in range(1, plan.levels + 1):
        k = math.ceil(len(ids) / cluster_size)
        labels = kmeans(x, k, seed=seed + level)
        level_nodes, level_texts, level_under = [], [], []
        for j in sorted(set(int(v) for v in labels)):
            members = [i for i in range(len(ids)) if labels[i] == j]
            text = extractive_summary([txt[i] for i in members], sentences=summary_sentences)
            chunks = tuple(dict.fromkeys(c for i in members for c in under[i]))
            node = RaptorNode(f"R{level}-{len(level_nodes)}", level, text, tuple(ids[i] for i in members), chunks,
                              "extractive", embedder.model_id, corpus_version)
            level_nodes.append(node)
            level_texts.append(text)
            level_under.append(chunks)
        lv = _unit(np.asarray(embedder.encode(level_texts), dtype=np.float32))
        nodes += level_nodes
        vecs.append(lv)
        done += len(level_nodes)
        if progress is not None:
            progress(done, plan.nodes)
        ids, txt, under, x = [n.node_id for n in level_nodes], level_texts, level_under, lv
        if len(level_nodes) == 1:
            break
    return nodes, (np.vstack(vecs) if vecs else np.zeros((0, 0), dtype=np.float32))


def _unit(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class RaptorHits:
    candidates: list[Candidate]
    nodes_hit: list[tuple[str, int, float]]  # (node id, level, cosine) of the best summary nodes


def raptor_search(query_vec: np.ndarray, nodes: Sequence[RaptorNode], node_vecs: np.ndarray,
                  leaf_ids: Sequence[str], leaf_vecs: np.ndarray, fetch: Callable[[list[str]], dict[str, Chunk]],
                  *, k: int) -> RaptorHits:
    """The collapsed tree: every summary node and every leaf chunk scored by cosine to the query; a chunk scores its
    own cosine or its best ancestor's, whichever is higher (a summary that matches lifts the chunks under it).
    `fetch` (chunk ids -> chunks) reads the texts of the best only."""
    q = np.asarray(query_vec, dtype=np.float32).ravel()
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    score: dict[str, float] = {}
    via: dict[str, tuple[str, int]] = {}
    if len(leaf_ids):
        for cid, s in zip(leaf_ids, _unit(leaf_vecs) @ q):
            score[cid] = float(s)
    node_s = (node_vecs @ q) if len(nodes) else np.zeros(0)
    for n, s in zip(nodes, node_s):
        for cid in n.chunk_ids:
            if float(s) > score.get(cid, -2.0):
                score[cid], via[cid] = float(s), (n.node_id, n.level)
    ranked = sorted(score.items(), key=lambda t: (-t[1], t[0]))[: k + 10]  # a few spare for chunks since deleted
    chunks = fetch([c for c, _ in ranked])
    best = [(c, s) for c, s in ranked if c in chunks][:k]
    cands = [Candidate(cid, chunks[cid].doc_id, chunks[cid].text, s, r, {
        "stage": "raptor", "level": via[cid][1] if cid in via else 0,
        **({"raptor_node": via[cid][0]} if cid in via else {})}) for r, (cid, s) in enumerate(best, 1)]
    top_nodes = sorted(((n.node_id, n.level, float(s)) for n, s in zip(nodes, node_s)), key=lambda t: -t[2])[:5]
    return RaptorHits(cands, top_nodes)


def timed_build(chunks: Sequence[Chunk], ids: Sequence[str], matrix: np.ndarray, embedder: Embedder, *,
                cluster_size: int, max_levels: int, summary_sentences: int, seed: int, corpus_version: int,
                progress: Callable[[int, int], None] | None = None) -> tuple[list[RaptorNode], np.ndarray, float]:
    """build_tree over the chunks that have vectors (in the vectors' order); returns the seconds it took too."""
    by_id = {c.chunk_id: c for c in chunks}
    keep = [i for i, cid in enumerate(ids) if cid in by_id]
    t0 = time.perf_counter()
    nodes, vecs = build_tree([ids[i] for i in keep], [by_id[ids[i]].text for i in keep], matrix[keep], embedder,
                             cluster_size=cluster_size, max_levels=max_levels, summary_sentences=summary_sentences,
                             seed=seed, corpus_version=corpus_version, progress=progress)
    return nodes, vecs, time.perf_counter() - t0
