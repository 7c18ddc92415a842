"""RAPTOR: chunk vectors clustered level by level, each cluster summarised (extractive offline, Claude with a key under
a dollar cap), the tree updated in place for new and removed chunks, and searched at every level as one list of
chunks."""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock, worst_usd
from core.models.pricing import worst_call_usd
from core.models.protocols import Embedder
from core.text import llm_tokens_upper_bound, sentence_spans
from core.types import DEFAULT_WORKSPACE, Candidate, Chunk, RaptorNode

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class RaptorPlan:
    """Known before a build runs: chunks with vectors, the levels and nodes it will make, and about how long."""

    chunks: int
    levels: int
    nodes: int
    est_seconds: float
    worst_usd: float = 0.0  # Claude summaries: every summary call at its worst case (0 when extractive)
    max_usd: float = 0.0  # ... and the cap the build stops at (raptor.max_usd)

    def label(self) -> str:
        cost = (f"; Claude summaries at most ${min(self.worst_usd, self.max_usd):,.4f} (worst case "
                f"${self.worst_usd:,.4f}, cap raptor.max_usd ${self.max_usd:,.2f}; extractive beyond the cap)"
                if self.worst_usd else " (extractive summaries, no cost)")
        return (f"RAPTOR tree over {self.chunks:,} chunks: about {self.nodes:,} summaries on {self.levels} level(s), "
                f"about {self.est_seconds:,.0f} s" + cost)


def plan_raptor(n_chunks: int, *, cluster_size: int, max_levels: int, seconds_per_summary: float,
                llm_model: str = "", max_usd: float = 0.0) -> RaptorPlan:
    """The tree a build makes and about how long embedding its summaries takes (`seconds_per_summary`: the embedder's
    speed measured here, per text); with `llm_model`, the worst case of Claude writing every summary (a level-1 call
    reads its members' chunks cut to MEMBER_CHARS, a higher one its children's summaries at their full allowance)."""
    n, levels, nodes = n_chunks, 0, 0
    sizes: list[int] = []
    while levels < max_levels:
        k = math.ceil(n / cluster_size)
        if n < 2 or k < 1 or (levels and k == n):
            break
        levels, nodes, n = levels + 1, nodes + k, k
        sizes.append(k)
        if k == 1:
            break
    usd = 0.0
    if llm_model and nodes:
        fixed = llm_tokens_upper_bound(SUMMARY_INSTRUCTIONS) + 64 + 512  # framing and the schema's instructions
        members = 2 * cluster_size  # k-means clusters are uneven: twice the mean, as the update splits above it
        leaf = worst_call_usd(llm_model, fixed + members * (MEMBER_CHARS + 40), 0, SUMMARY_TOKENS)
        upper = worst_call_usd(llm_model, fixed + members * (SUMMARY_TOKENS + 40), 0, SUMMARY_TOKENS)
        usd = sizes[0] * leaf + sum(sizes[1:]) * upper
    return RaptorPlan(n_chunks, levels, nodes, nodes * seconds_per_summary, usd, max_usd if llm_model else 0.0)


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


# -- summaries -------------------------------------------------------------------------------------------------------
Summarise = Callable[[Sequence[str]], tuple[str, str]]  # member texts -> (summary, how it was written)
MEMBER_CHARS = 2000  # Claude reads at most this much of each member (a chunk is usually shorter)
SUMMARY_TOKENS = 300  # Claude's summary: output tokens at most
SUMMARY_INSTRUCTIONS = (
    "You summarise a cluster of related passages from one document collection for a search index. Write one short "
    "paragraph (at most five sentences) that states what the passages are about and the main facts they share, "
    "naming the people, organisations, products and figures they name. Use only what the passages say."
)
SUMMARY_SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"],
                  "additionalProperties": False}


def extractive_summariser(sentences: int) -> Summarise:
    return lambda texts: (extractive_summary(texts, sentences=sentences), "extractive")


class SummaryMemo(Protocol):
    """Where paid summaries are kept as they are written (core.store's Raptor repository)."""

    def summary(self, workspace: str, key: str) -> str | None: ...

    def keep_summary(self, workspace: str, key: str, text: str) -> None: ...


def summary_key(request: LLMRequest) -> str:
    """The identity of a summary request: model, instructions and passages (what the summary depends on)."""
    body = "\x1f".join([request.model, *(b.text for b in request.system), *(b.text for b in request.user)])
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass
class ClaudeSummaries:
    """Claude writes each cluster's summary while the dollars allow: before every call its worst case (worst_usd of
    the very request) must fit what is left of `max_usd`; a call that does not fit, or fails, gets the extractive
    summary instead, labelled so. Usage is booked in the ledger by the client (purpose raptor_summary). With a
    `memo`, each paid summary is committed as soon as it is written and a request met before is read, not paid
    again: a build killed halfway and run again pays only for what is missing."""

    llm: LLM
    model: str
    max_usd: float
    sentences: int
    workspace: str = DEFAULT_WORKSPACE
    run_id: str = "raptor"  # one build's calls share it (the Costs page groups a build's calls by it)
    spent: float = 0.0
    calls: int = 0
    fallbacks: int = 0
    reused: int = 0  # summaries read from the memo instead of paid for
    notes: list[str] = field(default_factory=list)
    memo: SummaryMemo | None = None

    def request(self, texts: Sequence[str]) -> LLMRequest:
        body = "\n\n".join(f"<passage>\n{t[:MEMBER_CHARS]}\n</passage>" for t in texts)
        return LLMRequest(self.model, (TextBlock(SUMMARY_INSTRUCTIONS, cache=True),), (TextBlock(body),),
                          max_tokens=SUMMARY_TOKENS, json_schema=SUMMARY_SCHEMA, purpose="raptor_summary",
                          ref_id="raptor")

    def __call__(self, texts: Sequence[str]) -> tuple[str, str]:
        req = self.request(texts)
        key = summary_key(req) if self.memo is not None else ""
        if self.memo is not None and (kept := self.memo.summary(self.workspace, key)):
            self.reused += 1
            return kept, "llm"
        worst = worst_usd(req)
        if self.spent + worst > self.max_usd + 1e-12:
            if not any(n.startswith("budget") for n in self.notes):
                left = self.max_usd - self.spent
                self.notes.append(f"budget: a summary's worst case ${worst:.4f} did not fit the ${left:.4f} left of "
                                  f"raptor.max_usd ${self.max_usd:.2f}; extractive from there")
            self.fallbacks += 1
            return extractive_summary(texts, sentences=self.sentences), "extractive"
        try:
            resp = self.llm.complete(req, workspace=self.workspace, run_id=self.run_id)
        except LLMError as exc:
            self.fallbacks += 1
            self.notes.append(f"Claude summary failed ({exc}): extractive instead")
            return extractive_summary(texts, sentences=self.sentences), "extractive"
        self.calls += 1
        self.spent += resp.usage.usd
        text = str((resp.data or {}).get("summary", "") if isinstance(resp.data, dict) else "").strip()
        if not text:
            self.fallbacks += 1
            return extractive_summary(texts, sentences=self.sentences), "extractive"
        if self.memo is not None:
            self.memo.keep_summary(self.workspace, key, text)
        return text, "llm"


def build_tree(chunk_ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, embedder: Embedder, *,
               cluster_size: int, max_levels: int, summary_sentences: int, seed: int, corpus_version: int,
               progress: Callable[[int, int], None] | None = None,
               summarise: Summarise | None = None) -> tuple[list[RaptorNode], np.ndarray]:
    """Level 1 clusters the chunk vectors, each higher level clusters the summaries' vectors, until a level has one
    cluster or `max_levels`. Each node: its summary (`summarise`, extractive by default), its children, every chunk
    under it, its vector."""
    summarise = summarise or extractive_summariser(summary_sentences)
    plan = plan_raptor(len(chunk_ids), cluster_size=cluster_size, max_levels=max_levels, seconds_per_summary=0.0)
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
            text, how = summarise([txt[i] for i in members])
            chunks = tuple(dict.fromkeys(c for i in members for c in under[i]))
            node = RaptorNode(f"R{level}-{len(level_nodes)}", level, text, tuple(ids[i] for i in members), chunks,
                              how, embedder.model_id, corpus_version)
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


# -- incremental update ----------------------------------------------------------------------------------------------
# More of the leaves new or gone than this share, and the old clusters no longer describe the corpus: build afresh.
REBUILD_SHARE = 0.5


@dataclass(frozen=True)
class TreeUpdate:
    """What an update did: full (built afresh, `why`), incremental, or unchanged; the leaves it added and removed and
    the summaries it rewrote (the rest kept their text, vector and corpus version)."""

    mode: str
    added: int = 0
    removed: int = 0
    rewritten: int = 0
    why: str = ""


def update_tree(old: Sequence[RaptorNode], old_vecs: np.ndarray, chunk_ids: Sequence[str], texts: Sequence[str],
                vectors: np.ndarray, embedder: Embedder, *, cluster_size: int, max_levels: int, summary_sentences: int,
                seed: int, corpus_version: int, progress: Callable[[int, int], None] | None = None,
                summarise: Summarise | None = None) -> tuple[list[RaptorNode], np.ndarray, TreeUpdate]:
    """The stored tree brought up to the chunks given. A new chunk joins the level-1 cluster whose centroid (mean of
    its members' vectors) is nearest; a removed one leaves its cluster; a cluster grown past twice `cluster_size` is
    split by k-means; an emptied node is dropped. Only the nodes whose members changed, and their ancestors, are
    summarised and embedded again. A full build instead when there is no tree, it was made with another embedder,
    or more than REBUILD_SHARE of the leaves changed."""
    summarise = summarise or extractive_summariser(summary_sentences)
    ids = list(chunk_ids)
    text_of = dict(zip(ids, texts))
    leaves_old = {c for n in old if n.level == 1 for c in n.children}
    added = [c for c in ids if c not in leaves_old]
    removed = leaves_old - set(ids)

    def full(why: str) -> tuple[list[RaptorNode], np.ndarray, TreeUpdate]:
        nodes, vecs = build_tree(ids, texts, vectors, embedder, cluster_size=cluster_size, max_levels=max_levels,
                                 summary_sentences=summary_sentences, seed=seed, corpus_version=corpus_version,
                                 progress=progress, summarise=summarise)
        return nodes, vecs, TreeUpdate("full", len(added), len(removed), len(nodes), why)

    if not old:
        return full("no tree yet")
    if any(n.model_id != embedder.model_id for n in old):
        return full(f"the tree's vectors are another embedder's ({old[0].model_id})")
    if len(added) + len(removed) > REBUILD_SHARE * max(1, len(leaves_old)):
        return full(f"{len(added)} new and {len(removed)} removed of {len(leaves_old)} leaves: more than "
                    f"{REBUILD_SHARE:.0%} changed")
    if not added and not removed:
        return list(old), old_vecs, TreeUpdate("unchanged")
    x = _unit(np.asarray(vectors, dtype=np.float32))
    row = {c: i for i, c in enumerate(ids)}
    vec_of = {n.node_id: old_vecs[i] for i, n in enumerate(old)}
    by_level: dict[int, list[RaptorNode]] = {}
    for n in old:
        by_level.setdefault(n.level, []).append(n)
    top = max(by_level)
    children: dict[str, list[str]] = {n.node_id: [c for c in n.children if c not in removed] for n in old}
    dirty = {n.node_id for n in by_level[1] if len(children[n.node_id]) != len(n.children)}
    # level 1: each new chunk to the nearest centroid of the clusters as they were
    l1 = [n.node_id for n in by_level[1] if children[n.node_id]]
    if l1:
        cent = _unit(np.vstack([x[[row[c] for c in children[nid]]].mean(axis=0) for nid in l1]))
        for c in added:
            nid = l1[int(np.argmax(cent @ x[row[c]]))]
            children[nid].append(c)
            dirty.add(nid)
    else:  # every old leaf is gone: one cluster of the new ones, split below
        nid = by_level[1][0].node_id
        children[nid] = list(added)
        dirty.add(nid)
    # a grown cluster splits; the new parts join the old node's parent
    next_no = {lv: 1 + max(int(n.node_id.rsplit("-", 1)[1]) for n in ns if n.node_id.rsplit("-", 1)[1].isdigit())
               for lv, ns in by_level.items()}
    parent = {c: n.node_id for n in old if n.level > 1 for c in n.children}
    level_of = {n.node_id: n.level for n in old}
    for nid in sorted(dirty):
        members = children[nid]
        if len(members) <= 2 * cluster_size:
            continue
        labels = kmeans(x[[row[c] for c in members]], math.ceil(len(members) / cluster_size), seed=seed + 1)
        groups = [[c for c, lab in zip(members, labels) if lab == j] for j in sorted(set(int(v) for v in labels))]
        children[nid] = groups[0]
        for g in groups[1:]:
            new_id = f"R1-{next_no[1]}"
            next_no[1] += 1
            children[new_id], level_of[new_id] = g, 1
            dirty.add(new_id)
            if nid in parent:
                parent[new_id] = parent[nid]
                children[parent[nid]].append(new_id)
    # levels above: a node whose children changed (or were rewritten) is rewritten; emptied nodes go
    under: dict[str, tuple[str, ...]] = {}
    text: dict[str, str] = {n.node_id: n.text for n in old}
    mode: dict[str, str] = {n.node_id: n.mode for n in old}
    version: dict[str, int] = {n.node_id: n.corpus_version for n in old}
    new_vec: dict[str, np.ndarray] = {}
    alive: set[str] = set()
    done, total = 0, len(dirty)
    for level in range(1, top + 1):
        here = [nid for nid, lv in level_of.items() if lv == level]
        if level > 1:
            for nid in here:
                kept = [c for c in children[nid] if c in alive]
                if kept != [c for c in children[nid]] or any(c in dirty for c in kept):
                    dirty.add(nid)
                children[nid] = kept
        here = [nid for nid in here if children[nid]]
        alive |= set(here)
        for nid in here:
            under[nid] = tuple(dict.fromkeys(c for ch in children[nid] for c in ((ch,) if level == 1 else under[ch])))
        todo = sorted(nid for nid in here if nid in dirty)
        for nid in todo:
            member_texts = [text_of[c] for c in children[nid]] if level == 1 else [text[c] for c in children[nid]]
            text[nid], mode[nid] = summarise(member_texts)
            version[nid] = corpus_version
        if todo:
            for nid, v in zip(todo, _unit(np.asarray(embedder.encode([text[n] for n in todo]), dtype=np.float32))):
                new_vec[nid] = v
            done += len(todo)
            if progress is not None:
                progress(done, max(total, done))
    order = sorted(alive, key=lambda nid: (level_of[nid], int(nid.rsplit("-", 1)[1]) if nid.rsplit("-", 1)[1].isdigit()
                                           else 0, nid))
    nodes = [RaptorNode(nid, level_of[nid], text[nid], tuple(children[nid]), under[nid], mode[nid],
                        embedder.model_id, version[nid]) for nid in order]
    vecs = np.vstack([new_vec[nid] if nid in new_vec else vec_of[nid] for nid in order]).astype(np.float32)
    return nodes, vecs, TreeUpdate("incremental", len(added), len(removed), len(new_vec))


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


