"""Community summaries, written lazily for the communities a query touches and cached by membership hash
(LLM with structured output when a key exists, extractive otherwise)."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from core.graph.snapshot import GraphSnapshot
from core.graph.sources import GraphSource
from core.models.llm import LLMRequest, TextBlock, parse_json
from core.text import estimate_llm_tokens, sentence_spans
from core.types import Usage


@dataclass(frozen=True)
class CommunityContext:
    """What a summary is written from: the community's main entities, its strongest links and evidence chunks."""

    level: int
    community_id: str
    members_hash: str
    entities: tuple[tuple[str, str, int, int], ...]  # name, type, chunks, degree inside the community
    relations: tuple[tuple[str, str, float], ...]  # name, name, weight
    chunks: tuple[tuple[str, str, int], ...]  # chunk id, text, members mentioned

    def prompt_text(self, max_chars: int = 6000) -> str:
        ents = "\n".join(f"- {n} ({t}, {c} chunks)" for n, t, c, _ in self.entities)
        rels = "\n".join(f"- {a} -- {b} (strength {w:g})" for a, b, w in self.relations)
        body = "\n\n".join(f"[{cid}] {text}" for cid, text, _ in self.chunks)
        return f"Entities:\n{ents}\n\nRelations:\n{rels}\n\nPassages:\n{body}"[:max_chars]


@dataclass(frozen=True)
class Summary:
    level: int
    community_id: str
    members_hash: str
    title: str
    text: str
    mode: str  # extractive | llm
    cached: bool
    usage: Usage = Usage()


def community_context(snap: GraphSnapshot, store: GraphSource, level: int, community_id: str, *, max_entities: int = 12,
                      max_relations: int = 10, max_chunks: int = 5) -> CommunityContext:
    return community_contexts(snap, store, level, [community_id], max_entities=max_entities,
                              max_relations=max_relations, max_chunks=max_chunks)[0]


def community_contexts(snap: GraphSnapshot, store: GraphSource, level: int, community_ids: Sequence[str], *,
                       max_entities: int = 12, max_relations: int = 10, max_chunks: int = 5) -> list[CommunityContext]:
    """community_context of several communities, their evidence texts read in one query (one per community was
    most of an incremental update's summary time)."""
    parts = [_context_parts(snap, level, cid, max_entities=max_entities, max_relations=max_relations,
                            max_chunks=max_chunks) for cid in community_ids]
    texts = store.corpus.chunks_by_id(sorted({c for p in parts for c, _ in p[2]}), snap.workspace)
    return [CommunityContext(level, cid, snap.members_hash[(level, cid)], ents, relations,
                             tuple((c, texts[c].text, n) for c, n in best if c in texts))
            for cid, (ents, relations, best) in zip(community_ids, parts)]


def _context_parts(snap: GraphSnapshot, level: int, community_id: str, *, max_entities: int, max_relations: int,
                   max_chunks: int) -> tuple[tuple[tuple[str, str, int, int], ...], tuple[tuple[str, str, float], ...],
                                             list[tuple[str, int]]]:
    members = snap.communities[level][community_id]
    member_set = set(members)
    inside_degree = Counter()
    rels = []
    for i in members:
        for j, w in snap.neighbours(i):
            if j in member_set:
                inside_degree[i] += 1
                if i < j:
                    rels.append((w, snap.names[i], snap.names[j]))
    ranked_nodes = sorted(members, key=lambda i: (-inside_degree[i], -int(snap.n_chunks[i]), snap.names[i]))
    ents = tuple((snap.names[i], snap.types[i], int(snap.n_chunks[i]), inside_degree[i])
                 for i in ranked_nodes[:max_entities])
    rels.sort(key=lambda r: (-r[0], r[1], r[2]))
    relations = tuple((a, b, w) for w, a, b in rels[:max_relations])
    per_chunk = Counter()
    for i in members:
        for chunk_id, _doc, _n in snap.node_chunks[i]:
            per_chunk[chunk_id] += 1
    best = sorted(per_chunk.items(), key=lambda kv: (-kv[1], kv[0]))[:max_chunks]
    return ents, relations, best


def _evidence_sentences(ctx: CommunityContext, limit: int = 3) -> list[str]:
    """Sentences of the evidence chunks that name the most community entities (ties: earlier chunk first)."""
    names = [n.lower() for n, *_ in ctx.entities]
    scored = []
    for rank, (_cid, text, _n) in enumerate(ctx.chunks):
        for s, e in sentence_spans(text):
            sent = " ".join(text[s:e].split())
            low = sent.lower()
            hits = sum(1 for n in names if n and n in low)
            if hits and 30 <= len(sent) <= 400:
                scored.append((-hits, rank, s, sent))
    scored.sort()
    out: list[str] = []
    for *_, sent in scored:
        if sent not in out:
            out.append(sent)
        if len(out) == limit:
            break
    return out


def extractive_summary(ctx: CommunityContext) -> tuple[str, str]:
    """Title from the three most connected entities; body lists entities, strongest links and evidence sentences
    copied verbatim from the corpus. No text is invented."""
    title = " · ".join(n for n, *_ in ctx.entities[:3]) or ctx.community_id
    parts = ["Entities: " + ", ".join(f"{n} ({c} chunks)" for n, _t, c, _d in ctx.entities[:8]) + "."]
    if ctx.relations:
        parts.append("Strongest links: " + "; ".join(f"{a} — {b}" for a, b, _ in ctx.relations[:5]) + ".")
    ev = _evidence_sentences(ctx)
    if ev:
        parts.append("Evidence: " + " ".join(ev))
    return title, "\n".join(parts)


SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["title", "summary"], "additionalProperties": False,
}
SUMMARY_INSTRUCTIONS = (
    "You write a report on one community of a knowledge graph built from a company's documents: a short title "
    "naming its main entities, and a summary of at most 150 words of what connects them, using only the entities, "
    "relations and passages given. Cite no facts that are not in them. Reply with JSON only."
)


def llm_summary(ctx: CommunityContext, llm: Any, *, model: str, workspace: str) -> tuple[str, str, Usage]:
    req = LLMRequest(model=model, system=(TextBlock(SUMMARY_INSTRUCTIONS, cache=True),),
                     user=(TextBlock(ctx.prompt_text()),), max_tokens=400, json_schema=SUMMARY_SCHEMA,
                     purpose="graph_summary", ref_id=f"{ctx.level}:{ctx.community_id}")
    resp = llm.complete(req, workspace=workspace)
    data = resp.data if resp.data is not None else parse_json(resp.text)
    return str(data.get("title", "")).strip() or ctx.community_id, str(data.get("summary", "")).strip(), resp.usage


def estimate_summary_tokens(n_communities: int, chars_per_context: int = 6000) -> tuple[int, int]:
    """(input, output) tokens an LLM summary pass over n communities would take at most."""
    per_in = estimate_llm_tokens("x" * chars_per_context) + estimate_llm_tokens(SUMMARY_INSTRUCTIONS)
    return n_communities * per_in, n_communities * 400


def get_summaries(snap: GraphSnapshot, store: GraphSource, level: int, community_ids: Sequence[str], *, llm: Any = None,
                  model: str = "", use_llm: bool = False, workspace: str = "default", write: bool = False,
                  unstored: bool = False, sink: list[Any] | None = None) -> list[Summary]:
    """Summaries for these communities: stored ones as they are, then ones this snapshot already made, and the
    missing ones written now. A query (write=False) keeps new ones in the snapshot's memory only: it reads the store
    and never writes it, and an LLM summary is still paid once per snapshot, not once per query. build_summaries
    (write=True) stores them. `unstored`: the caller has just read that none of these memberships has a stored
    summary (build_summaries): they are not read again. `sink`: the rows to store are appended to it (the
    caller stores them in its own transaction) instead of being stored here."""
    hashes = {cid: snap.members_hash[(level, cid)] for cid in community_ids}
    cached = {} if unstored else store.communities.summaries(list(hashes.values()), workspace)
    out = []
    rows: list[tuple[str, int, str, str, str, str, dict[str, Any]]] = []
    todo = []
    for cid in community_ids:
        mh = hashes[cid]
        hit = cached.get(mh)
        if hit is not None and (hit.mode == "llm" or not use_llm):
            continue
        mem = snap.summaries.get(mh)
        if mem is not None and (mem.mode == "llm" or not use_llm) and not write:
            continue
        todo.append(cid)
    contexts = dict(zip(todo, community_contexts(snap, store, level, todo)))
    for cid in community_ids:
        mh = hashes[cid]
        hit = cached.get(mh)
        if hit is not None and (hit.mode == "llm" or not use_llm):
            out.append(Summary(level, cid, mh, hit.title, hit.summary, hit.mode, True))
            continue
        mem = snap.summaries.get(mh)
        if mem is not None and (mem.mode == "llm" or not use_llm) and not write:
            out.append(Summary(level, cid, mh, mem.title, mem.text, mem.mode, True))
            continue
        ctx = contexts[cid]
        usage = Usage()
        if use_llm and llm is not None and llm.available:
            title, text, usage = llm_summary(ctx, llm, model=model, workspace=workspace)
            mode = "llm"
        else:
            title, text = extractive_summary(ctx)
            mode = "extractive"
        made = Summary(level, cid, mh, title, text, mode, False, usage)
        snap.summaries[mh] = made
        if write:
            rows.append((mh, level, cid, title, text, mode, usage.__dict__))
        out.append(made)
    if rows and sink is not None:
        sink.extend(rows)
    elif rows:  # one transaction for all of them: a commit per summary was most of an incremental update's time
        store.communities.put_summaries(rows, workspace)
    return out


def build_summaries(snap: GraphSnapshot, store: GraphSource, *, levels: Sequence[int] | None = None, llm: Any = None,
                    model: str = "", use_llm: bool = False, workspace: str = "default",
                    sink: list[Any] | None = None) -> int:
    """Build time: write the summaries of every community of two or more entities (at `levels`, default all), so
    queries find them stored. Returns how many were written. `sink` (extractive only): the rows are appended to
    it for the caller to store (an update stores them with its state row), not stored here."""
    if sink is not None and use_llm:
        raise ValueError("build_summaries: a sink takes extractive summaries only")
    written = 0
    wanted = {level: sorted(cid for cid, m in snap.communities.get(level, {}).items() if len(m) >= 2)
              for level in (snap.levels() if levels is None else levels)}
    if not any(wanted.values()):
        return 0  # no community of two or more entities (an update that re-clustered nothing): nothing to read
    # Extractive summaries already stored serve as they are: only the missing memberships are looked at (an
    # incremental update changes a few communities of thousands).
    stored = set() if use_llm else store.communities.summary_hashes(workspace)
    for level, cids in wanted.items():
        ids = [cid for cid in cids if snap.members_hash[(level, cid)] not in stored]
        made = [s for s in get_summaries(snap, store, level, ids, llm=llm, model=model, use_llm=use_llm,
                                         workspace=workspace, write=True, unstored=not use_llm, sink=sink)
                if not s.cached]
        written += len(made)
        if not use_llm:  # stored now: a community of the same members on another level finds it stored
            stored |= {s.members_hash for s in made}
    return written


_WORD = re.compile(r"\w+", re.UNICODE)


def best_sentences(text: str, query: str, limit: int = 2) -> str:
    """The sentences of a summary sharing the most words with the query (extractive partial answer)."""
    q = {w.lower() for w in _WORD.findall(query) if len(w) > 2}
    sents = [" ".join(text[s:e].split()) for s, e in sentence_spans(text)]
    scored = sorted(enumerate(sents), key=lambda t: (-len(q & {w.lower() for w in _WORD.findall(t[1])}), t[0]))
    keep = sorted(i for i, _ in scored[:limit])
    return " ".join(sents[i] for i in keep)
