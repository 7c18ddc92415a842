"""Graph retrieval stages: local search (seed entities, weighted 1-2 hop expansion, source chunks) and global
search (map-reduce over community summaries at one level, with its cost bound known before it runs)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from core.graph.extract import STOP
from core.graph.resolve import normalise_name
from core.graph.snapshot import GraphSnapshot
from core.graph.snapshot import name_vectors as text_vectors
from core.graph.sources import GraphSource
from core.graph.summaries import (
    Summary,
    best_sentences,
    estimate_summary_tokens,
    get_summaries,
)
from core.models.llm import LLM, LLMRequest, TextBlock, parse_json
from core.models.pricing import tokens_usd
from core.models.protocols import Embedder
from core.text import estimate_llm_tokens
from core.types import Candidate, Usage

_QTOKEN = re.compile(r"[^\W_][\w.\-]*[^\W_]|[^\W_]", re.UNICODE)
HOP_DECAY = 0.5  # a neighbour counts half as much as the node it was reached from, per hop


# -- local search --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Seed:
    pos: int
    score: float
    how: str  # name | embedding


def find_seeds(query: str, snap: GraphSnapshot, *, query_vec: np.ndarray | None = None,
               name_matrix: np.ndarray | None = None, seed_k: int = 5, seed_min_sim: float = 0.55,
               max_ngram: int = 6) -> list[Seed]:
    """Entities the query names (any run of its words that normalises to a node name or alias; score 1), then the
    `seed_k` nodes whose name vectors are closest to the query (cosine >= seed_min_sim; score = cosine)."""
    toks = [m.group(0) for m in _QTOKEN.finditer(query)]
    found: dict[int, Seed] = {}
    covered: set[int] = set()  # query words inside a longer match: "Project Orion" does not also seed "Project"
    for n in range(min(max_ngram, len(toks)), 0, -1):
        for i in range(len(toks) - n + 1):
            words = toks[i:i + n]
            if n == 1 and (words[0].lower() in STOP or len(words[0]) < 2):
                continue
            if covered.issuperset(range(i, i + n)):
                continue
            pos = snap.alias_index.get(normalise_name(" ".join(words)))
            if pos is None or pos in found:
                continue
            # A lone lower-case word naming a capitalised entity ("the project" vs "Project") is weak evidence.
            weak = n == 1 and words[0].islower() and snap.types[pos] == "named"
            found[pos] = Seed(pos, 0.5 if weak else 1.0, "name")
            covered.update(range(i, i + n))
    if seed_k and query_vec is not None and name_matrix is not None and len(name_matrix):
        q = np.asarray(query_vec, dtype=np.float32).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        sims = name_matrix @ q
        above = np.flatnonzero(sims >= seed_min_sim)  # usually a handful: sort only those
        order = above[np.lexsort((above, -sims[above]))]
        added = 0
        for i in order:
            if added >= seed_k:
                break
            if int(i) not in found:
                found[int(i)] = Seed(int(i), float(sims[i]), "embedding")
                added += 1
    return sorted(found.values(), key=lambda s: (-s.score, s.pos))


@dataclass
class Expansion:
    """Nodes in the order they were taken, with score and hop; the edges that reached them; hubs left unexpanded."""

    order: list[int] = field(default_factory=list)
    score: dict[int, float] = field(default_factory=dict)
    hop: dict[int, int] = field(default_factory=dict)
    edges: list[tuple[int, int, float]] = field(default_factory=list)
    hubs: list[int] = field(default_factory=list)
    capped: bool = False

    def take(self, pos: int, score: float, hop: int) -> None:
        self.order.append(pos)
        self.score[pos] = score
        self.hop[pos] = hop


def expand(snap: GraphSnapshot, seeds: Sequence[Seed], *, hops: int, node_cap: int, hub_threshold: float) -> Expansion:
    """Breadth-first up to `hops`, each hop taking neighbours by edge weight (heaviest first, then the stronger
    parent, then id) until `node_cap` nodes are held. A node whose degree is above `hub_threshold` is kept when
    reached but never expanded: through a hub everything is two hops from everything."""
    ex = Expansion()
    for s in seeds:
        if len(ex.order) >= node_cap:
            ex.capped = True
            break
        ex.take(s.pos, s.score, 0)
    deg = snap.degree
    frontier = list(ex.order)
    for hop in range(1, hops + 1):
        cands: list[tuple[float, float, int, int]] = []
        for u in frontier:
            if deg[u] > hub_threshold:
                ex.hubs.append(u)
                continue
            nb = snap.neighbours(u)
            top_w = nb[0][1] if nb else 1.0
            for v, w in nb:
                if v not in ex.score:
                    cands.append((w, ex.score[u] * (w / top_w) * HOP_DECAY, v, u))
        cands.sort(key=lambda c: (-c[0], -c[1], c[2]))
        nxt = []
        for w, sc, v, u in cands:
            if v in ex.score:
                continue
            if len(ex.order) >= node_cap:
                ex.capped = True
                break
            ex.take(v, sc, hop)
            ex.edges.append((u, v, w))
            nxt.append(v)
        frontier = nxt
        if ex.capped:
            break
    # Links between seeds are the answer to "how are X and Y connected": keep them as used edges too.
    seed_set = {s.pos for s in seeds if s.pos in ex.score}
    have = {(min(a, b), max(a, b)) for a, b, _ in ex.edges}
    for u in sorted(seed_set):
        for v, w in snap.neighbours(u):
            if v in seed_set and u < v and (u, v) not in have:
                ex.edges.append((u, v, w))
    return ex


@dataclass(frozen=True)
class LocalResult:
    candidates: list[Candidate]
    seeds: list[Seed]
    expansion: Expansion
    hub_threshold: float
    notes: list[str]

    def info(self, snap: GraphSnapshot) -> dict[str, Any]:
        """JSON-able record for the trace: what the Graph page highlights."""
        ids = snap.node_ids
        return {
            "graph_version": snap.version,
            "seeds": [{"node": ids[s.pos], "name": snap.names[s.pos], "score": round(s.score, 4), "how": s.how}
                      for s in self.seeds],
            "nodes": [ids[p] for p in self.expansion.order],
            "edges": [[ids[a], ids[b], w] for a, b, w in self.expansion.edges],
            "hubs": [ids[p] for p in self.expansion.hubs],
            "hub_threshold": self.hub_threshold if math.isfinite(self.hub_threshold) else None,
            "capped": self.expansion.capped,
        }


def _clip(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def local_search(query: str, snap: GraphSnapshot, store: GraphSource, *, query_vec: np.ndarray | None = None,
                 name_matrix: np.ndarray | None = None, hops: int = 2, node_cap: int = 40,
                 hub_percentile: float = 95.0, seed_k: int = 5, seed_min_sim: float = 0.55, k: int = 30,
                 workspace: str = "default") -> LocalResult:
    """Chunks that mention the selected entities (and support the edges used), scored by the entities' scores
    damped by how common each entity is: a chunk naming a seed and its neighbour ranks above one naming a hub."""
    notes: list[str] = []
    seeds = find_seeds(query, snap, query_vec=query_vec, name_matrix=name_matrix, seed_k=seed_k,
                       seed_min_sim=seed_min_sim)
    thr = snap.hub_threshold(hub_percentile)
    if not seeds:
        return LocalResult([], [], Expansion(), thr, ["no entity of the graph matches the query"])
    ex = expand(snap, seeds, hops=hops, node_cap=node_cap, hub_threshold=thr)
    if ex.hubs:
        notes.append(f"{len(ex.hubs)} hub(s) not expanded (degree > {thr:g}): "
                     + ", ".join(snap.names[h] for h in ex.hubs[:5]))
    if ex.capped:
        notes.append(f"node cap {node_cap} reached")
    ids = snap.node_ids
    chunk_score: dict[str, float] = {}
    chunk_doc: dict[str, str] = {}
    chunk_nodes: dict[str, list[int]] = {}
    node_chunks: dict[int, set[str]] = {}
    for p, (chunk_id, doc_id, _n) in ((p, c) for p in ex.order for c in snap.node_chunks[p]):
        chunk_score[chunk_id] = chunk_score.get(chunk_id, 0.0) + ex.score[p] / math.log2(1 + int(snap.n_chunks[p]))
        chunk_doc[chunk_id] = doc_id
        chunk_nodes.setdefault(chunk_id, []).append(p)
        node_chunks.setdefault(p, set()).add(chunk_id)
    chunk_rels: dict[str, list[str]] = {}
    if snap.builder == "llm":
        # LLM relations are stated in particular chunks: read their provenance (and descriptions) from the store.
        pairs = {(min(ids[a], ids[b]), max(ids[a], ids[b])): (a, b) for a, b, _ in ex.edges}
        support = [(pairs[(e.a, e.b)], e.chunk_id, e.description)
                   for e in store.graph.edge_chunks(list(pairs), workspace)]
    else:
        # Statistical edges are co-occurrence: an edge's source chunks are exactly the chunks naming both ends,
        # so intersecting the node provenance just read saves a scan of the (large) relation table.
        support = [((a, b), c, "") for a, b, _ in ex.edges for c in sorted(node_chunks.get(a, set()) &
                                                                          node_chunks.get(b, set()))]
    for (a, b), chunk_id, desc in support:
        if chunk_id not in chunk_doc:
            continue
        bonus = min(ex.score[a], ex.score[b])  # a link is only as strong as its weaker end
        chunk_score[chunk_id] = chunk_score.get(chunk_id, 0.0) + bonus
        chunk_rels.setdefault(chunk_id, []).append(
            f"{snap.names[a]} — {snap.names[b]}" + (f": {desc}" if desc else ""))
    best = sorted(chunk_score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    texts = store.corpus.chunks_by_id([c for c, _ in best], workspace)
    cands = []
    for cid, sc in best:
        if cid not in texts:
            continue  # the chunk left the corpus after the graph was built
        nodes = sorted(chunk_nodes.get(cid, []), key=lambda p: (-ex.score[p], p))
        descs = [snap.descriptions[p] for p in nodes if snap.descriptions[p]]
        meta = {"stage": "graph_local", "entities": _clip("; ".join(snap.names[p] for p in nodes)),
                "relations": _clip("; ".join(chunk_rels.get(cid, []))),
                "hop": min((ex.hop[p] for p in nodes), default=1)}
        if descs:
            meta["node_descriptions"] = _clip(" | ".join(descs))
        cands.append(Candidate(cid, chunk_doc[cid], texts[cid].text, sc, len(cands) + 1, meta))
    return LocalResult(cands, seeds, ex, thr, notes)


# -- global search -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GlobalPlan:
    """Known before anything runs: how many communities, how many summaries are cached, what it may cost."""

    level: int
    community_ids: tuple[str, ...]
    total_at_level: int
    cached: int
    to_write: int
    mode: str  # extractive | llm
    est_input_tokens: int
    est_output_tokens: int
    est_usd: float

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "communities": len(self.community_ids), "total_at_level": self.total_at_level,
                "cached_summaries": self.cached, "summaries_to_write": self.to_write, "mode": self.mode,
                "est_input_tokens": self.est_input_tokens, "est_output_tokens": self.est_output_tokens,
                "est_usd": round(self.est_usd, 4)}


def plan_global(snap: GraphSnapshot, store: GraphSource, *, level: int, max_communities: int, use_llm: bool,
                model: str = "", workspace: str = "default") -> GlobalPlan:
    """Communities of at least two entities at `level`, largest first, at most `max_communities` (the bound on
    map calls). With an LLM: summaries still to write + one map call per community + one reduce call."""
    comms = snap.communities.get(level, {})
    eligible = sorted((cid for cid, m in comms.items() if len(m) >= 2), key=lambda c: (-len(comms[c]), c))
    chosen = tuple(eligible[:max_communities])
    hashes = [snap.members_hash[(level, c)] for c in chosen]
    have = store.communities.summaries(hashes, workspace)
    mem = snap.summaries  # made by earlier queries on this snapshot, kept in memory (a query writes no summary)
    cached = sum(1 for h in hashes if any(h in src and (src[h].mode == "llm" or not use_llm) for src in (have, mem)))
    to_write = len(chosen) - cached
    if not use_llm:
        return GlobalPlan(level, chosen, len(comms), cached, to_write, "extractive", 0, 0, 0.0)
    s_in, s_out = estimate_summary_tokens(to_write)
    map_in = len(chosen) * (estimate_llm_tokens(MAP_INSTRUCTIONS) + 400 + 100)
    map_out = len(chosen) * 300
    red_in, red_out = estimate_llm_tokens(REDUCE_INSTRUCTIONS) + min(len(chosen), 10) * 300, 600
    tin, tout = s_in + map_in + red_in, s_out + map_out + red_out
    try:
        usd = tokens_usd(model, input_tokens=tin, output_tokens=tout)
    except Exception:  # an unknown model has no price: say it is unbounded rather than guess
        usd = float("inf")
    return GlobalPlan(level, chosen, len(comms), cached, to_write, "llm", tin, tout, usd)


MAP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"points": {"type": "array", "items": {"type": "object", "properties": {
        "text": {"type": "string"}, "score": {"type": "integer"}}, "required": ["text", "score"],
        "additionalProperties": False}}},
    "required": ["points"], "additionalProperties": False,
}
MAP_INSTRUCTIONS = (
    "You answer part of a question from one community report of a knowledge graph. Give up to three points that "
    "help answer the question, each with a usefulness score from 0 (useless) to 100 (answers it), using only the "
    "report. If the report does not help, return one point with score 0. Reply with JSON only."
)
REDUCE_INSTRUCTIONS = (
    "You combine partial answers, each with a usefulness score and the id of the community it came from, into one "
    "answer to the question. Prefer higher-scored points, drop what does not help, keep it under 200 words, and add "
    "nothing the points do not say. List in `communities` the ids of the partial answers you used."
)
REDUCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "communities": {"type": "array", "items": {"type": "string"}}},
    "required": ["answer", "communities"], "additionalProperties": False,
}


@dataclass(frozen=True)
class Partial:
    community_id: str
    title: str
    text: str
    score: int  # usefulness 0..100


@dataclass(frozen=True)
class GlobalResult:
    candidates: list[Candidate]
    plan: GlobalPlan
    partials: list[Partial]
    answer: str
    usage: Usage
    notes: list[str]
    cited: tuple[str, ...] = ()  # communities the LLM reduce says it used

    def info(self) -> dict[str, Any]:
        return {"plan": self.plan.as_dict(), "answer": self.answer, "cited": list(self.cited),
                "partials": [{"community": p.community_id, "title": p.title, "score": p.score, "text": p.text}
                             for p in self.partials]}


def _map_offline(summaries: Sequence[Summary], query: str, query_vec: np.ndarray | None,
                 summary_vecs: np.ndarray | None) -> list[Partial]:
    """Usefulness = 100 x cosine(query, summary) (0 when negative); the partial answer is the summary's
    sentences sharing most words with the query."""
    out = []
    for i, s in enumerate(summaries):
        if query_vec is not None and summary_vecs is not None:
            q = np.asarray(query_vec, dtype=np.float32).ravel()
            q = q / max(float(np.linalg.norm(q)), 1e-12)
            score = int(round(100 * max(0.0, float(summary_vecs[i] @ q))))
        else:
            score = 0
        out.append(Partial(s.community_id, s.title, best_sentences(s.text, query), score))
    return out


def _map_llm(summaries: Sequence[Summary], query: str, llm: Any, model: str, workspace: str
             ) -> tuple[list[Partial], Usage]:
    out, usage = [], Usage()
    for s in summaries:
        req = LLMRequest(model=model, system=(TextBlock(MAP_INSTRUCTIONS, cache=True),),
                         user=(TextBlock(f"Report: {s.title}\n{s.text}"), TextBlock(f"Question: {query}")),
                         max_tokens=300, json_schema=MAP_SCHEMA, purpose="graph_map", ref_id=s.community_id)
        resp = llm.complete(req, workspace=workspace)
        usage = usage + resp.usage
        data = resp.data if resp.data is not None else parse_json(resp.text)
        pts = [p for p in data.get("points", []) if isinstance(p, dict)]
        best = max((int(p.get("score", 0)) for p in pts), default=0)
        text = " ".join(str(p.get("text", "")) for p in sorted(pts, key=lambda p: -int(p.get("score", 0)))
                        if int(p.get("score", 0)) > 0)
        out.append(Partial(s.community_id, s.title, text, max(0, min(100, best))))
    return out, usage


def global_search(query: str, snap: GraphSnapshot, store: GraphSource, *, query_vec: np.ndarray | None = None,
                  embedder: Embedder | None = None, level: int = 0, max_communities: int = 40, top: int = 5, k: int = 30,
                  max_usd: float = 0.5, llm: LLM | None = None, use_llm: bool = True, model: str = "claude-haiku-4-5",
                  workspace: str = "default") -> GlobalResult:
    """Map-reduce over community summaries. Refuses (empty result, note) when the LLM plan's estimate exceeds
    `max_usd`; offline it costs nothing and is extractive."""
    llm_on = bool(use_llm and llm is not None and llm.available)
    plan = plan_global(snap, store, level=level, max_communities=max_communities, use_llm=llm_on, model=model,
                       workspace=workspace)
    notes = [f"plan: {len(plan.community_ids)} of {plan.total_at_level} communities at level {level}, "
             f"{plan.cached} summaries cached, {plan.to_write} to write, mode {plan.mode}, "
             f"estimate ${plan.est_usd:.4f}"]
    if not plan.community_ids:
        return GlobalResult([], plan, [], "", Usage(), notes + [f"no community of 2+ entities at level {level}"])
    if plan.est_usd > max_usd:
        return GlobalResult([], plan, [], "", Usage(), notes + [
            f"not run: estimate ${plan.est_usd:.4f} is above graph.global_max_usd ${max_usd:.2f}"])
    summaries = get_summaries(snap, store, level, plan.community_ids, llm=llm, model=model, use_llm=llm_on,
                              workspace=workspace)
    usage = Usage()
    for s in summaries:
        usage = usage + s.usage
    if llm_on:
        partials, map_usage = _map_llm(summaries, query, llm, model, workspace)
        usage = usage + map_usage
    else:
        vecs = None
        if embedder is not None and query_vec is not None:
            # Summary vectors are stored like name vectors (keyed by text hash): a query encodes only itself.
            vecs = text_vectors([f"{s.title}. {s.text}" for s in summaries], embedder, store, workspace, write=False)
        partials = _map_offline(summaries, query, query_vec, vecs)
    partials.sort(key=lambda p: (-p.score, p.community_id))
    kept = [p for p in partials[:top] if p.score > 0]
    answer = ""
    cited: tuple[str, ...] = ()
    if kept and llm_on:
        body = "\n".join(f"[{p.score}] (community {p.community_id}) {p.title}: {p.text}" for p in kept)
        resp = llm.complete(LLMRequest(model=model, system=(TextBlock(REDUCE_INSTRUCTIONS, cache=True),),
                                       user=(TextBlock(f"Partial answers:\n{body}"), TextBlock(f"Question: {query}")),
                                       max_tokens=600, json_schema=REDUCE_SCHEMA, purpose="graph_reduce",
                                       ref_id="global"), workspace=workspace)
        usage = usage + resp.usage
        if isinstance(resp.data, dict):
            answer = str(resp.data.get("answer", "")).strip()
            ids = {p.community_id for p in kept}
            cited = tuple(dict.fromkeys(str(c) for c in resp.data.get("communities") or [] if str(c) in ids))
        else:
            answer = resp.text.strip()
    elif kept:
        answer = "\n".join(f"- {p.title} [{p.score}]: {p.text}" for p in kept)
    # Candidates: chunks of the most useful communities, by how many of the community's entities they name.
    chunk_score: dict[str, float] = {}
    chunk_doc: dict[str, str] = {}
    chunk_comm: dict[str, str] = {}
    for p in kept:
        members = snap.communities[level][p.community_id]
        for chunk_id, doc_id, _n in (c for i in members for c in snap.node_chunks[i]):
            chunk_score[chunk_id] = chunk_score.get(chunk_id, 0.0) + p.score / 100 / math.sqrt(len(members))
            chunk_doc[chunk_id] = doc_id
            chunk_comm.setdefault(chunk_id, p.community_id)
    best = sorted(chunk_score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    texts = store.corpus.chunks_by_id([c for c, _ in best], workspace)
    titles = {p.community_id: p.title for p in kept}
    cands = []
    for cid, sc in best:
        if cid in texts:
            comm = chunk_comm[cid]
            cands.append(Candidate(cid, chunk_doc[cid], texts[cid].text, sc, len(cands) + 1,
                                   {"stage": "graph_global", "community": comm, "community_title": titles[comm]}))
    notes.append(f"{len(kept)} partial answers kept of {len(partials)}")
    return GlobalResult(cands, plan, partials, answer, usage, notes, cited)


# -- one entity's neighbours (the agent's graph tool) --------------------------------------------------------------
@dataclass(frozen=True)
class EntityNeighbours:
    """An entity the name resolved to and its neighbours, heaviest edge first: (name, type, weight, the chunk that
    mentions the neighbour most, its document)."""

    name: str
    neighbours: tuple[tuple[str, str, float, str, str], ...]


def entity_neighbours(name: str, snap: GraphSnapshot, store: GraphSource, *, k: int = 10,
                      workspace: str = "default") -> EntityNeighbours | None:
    """The node whose name or alias the text normalises to (else the longest run of its words that does), and its
    `k` heaviest neighbours with the chunk that names each one most. None when no node matches."""
    pos = snap.alias_index.get(normalise_name(name))
    if pos is None:
        seeds = [s for s in find_seeds(name, snap, seed_k=0) if s.how == "name" and s.score >= 1.0]
        pos = seeds[0].pos if seeds else None
    if pos is None:
        return None
    nbrs = snap.neighbours(pos)[:k]
    ids = [snap.node_ids[j] for j, _ in nbrs]
    best: dict[str, tuple[int, str, str]] = {}
    for nc in store.graph.node_chunks(ids, workspace):
        if nc.node_id not in best or nc.mentions > best[nc.node_id][0]:
            best[nc.node_id] = (nc.mentions, nc.chunk_id, nc.doc_id)
    out = tuple((snap.names[j], snap.types[j], float(w), best.get(snap.node_ids[j], (0, "", ""))[1],
                 best.get(snap.node_ids[j], (0, "", ""))[2]) for j, w in nbrs)
    return EntityNeighbours(snap.names[pos], out)
