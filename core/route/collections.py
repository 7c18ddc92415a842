"""Collection routing (issue #29): each collection's profile, and which collections of a workspace a question is
searched in. Offline from the profiles: the question's query likelihood under each collection's vocabulary (a
Dirichlet-smoothed unigram model of its chunks against the workspace's) and its cosine with each collection's
centroid, turned into shares; every collection whose share reaches `min_share` is searched (the best always is).
With a key, Claude picks from the names, descriptions and profiles (JSON output); a failed or malformed reply falls
back to the offline choice, saying so."""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.types import (DEFAULT_COLLECTION, DEFAULT_WORKSPACE, Chunk, Collection, CollectionProfile, StageInfo,
                        TableInfo, Usage)

TOP_TERMS = 25
# Dirichlet prior (in chunks) of a collection's term model: a design value, not fitted. A collection of a few
# chunks leans on the workspace's frequencies; one of thousands speaks for itself.
MU = 10.0


# -- profiles -------------------------------------------------------------------------------------------------------
def build_profiles(chunks: Sequence[Chunk], chunk_coll: Mapping[str, str], doc_coll: Mapping[str, str],
                   vectors: tuple[Sequence[str], np.ndarray], model_id: str, tables: Sequence[TableInfo],
                   corpus_version: int, tokens: Callable[[str], Sequence[str]]) -> dict[str, CollectionProfile]:
    """One profile per collection holding chunks: chunk counts per language, each index term's chunk frequency,
    the most distinctive terms (chunk frequency x workspace idf), the centroid of the chunks' unit vectors under
    `model_id` (the vectors given), and the schemas of the tables whose documents it holds."""
    df: dict[str, Counter[str]] = {}
    words: Counter[str] = Counter()
    langs: dict[str, Counter[str]] = {}
    n_chunks: Counter[str] = Counter()
    for ch in chunks:
        c = chunk_coll.get(ch.chunk_id, DEFAULT_COLLECTION)
        toks = tokens(ch.text)
        words[c] += len(toks)
        df.setdefault(c, Counter()).update(set(toks))
        langs.setdefault(c, Counter())[ch.lang or "?"] += 1
        n_chunks[c] += 1
    total_df: Counter[str] = Counter()
    for d in df.values():
        total_df.update(d)
    n_total = sum(n_chunks.values())
    ids, matrix = vectors
    sums: dict[str, np.ndarray] = {}
    if len(ids):
        unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        for i, cid in enumerate(ids):
            c = chunk_coll.get(cid, DEFAULT_COLLECTION)
            sums[c] = sums[c] + unit[i] if c in sums else unit[i].astype(np.float64).copy()
    n_docs = Counter(doc_coll.values())
    schemas: dict[str, dict[str, tuple[str, ...]]] = {}
    for t in tables:
        c = doc_coll.get(t.doc_id, DEFAULT_COLLECTION)
        schemas.setdefault(c, {})[t.name] = tuple(f"{col} {typ}" for col, typ in t.columns)
    out = {}
    for c in sorted(n_chunks):
        idf = {t: math.log(1 + n_total / total_df[t]) for t in df[c]}
        top = sorted((t for t in df[c] if len(t) > 2 and t.isalpha()), key=lambda t: (-df[c][t] * idf[t], t))
        centroid = ()
        if c in sums:
            v = sums[c] / max(float(np.linalg.norm(sums[c])), 1e-12)
            centroid = tuple(round(float(x), 6) for x in v)
        out[c] = CollectionProfile(n_docs.get(c, 0), n_chunks[c], words[c], dict(langs[c]), tuple(top[:TOP_TERMS]),
                                   dict(df[c]), centroid, model_id, schemas.get(c, {}), corpus_version)
    return out


class ProfileSources(Protocol):
    """What profiling reads: the corpus (chunks, vectors, version), the collections repository and the tables."""

    def chunks(self, workspace: str = ..., doc_id: str | None = None) -> list[Chunk]: ...

    def vectors(self, model_id: str, variant: str = ..., workspace: str = ...) -> tuple[list[str], np.ndarray]: ...

    def corpus_version(self, workspace: str = ...) -> int: ...


class CollectionStore(Protocol):
    def list(self, workspace: str = ...) -> list[Collection]: ...

    def chunk_collections(self, workspace: str = ...) -> dict[str, str]: ...

    def doc_collections(self, workspace: str = ...) -> dict[str, str]: ...

    def put_profiles(self, workspace: str, profiles: Mapping[str, CollectionProfile]) -> None: ...


def stale(collections: Sequence[Collection], corpus_version: int, model_id: str) -> bool:
    """Whether any collection lacks a profile of this corpus version and embedder."""
    return any(c.profile is None or c.profile.corpus_version != corpus_version or c.profile.model_id != model_id
               for c in collections)


def refresh_profiles(corpus: ProfileSources, repo: CollectionStore,
                     tables: Sequence[TableInfo] | Callable[[], Sequence[TableInfo]], workspace: str,
                     model_id: str, tokens: Callable[[str], Sequence[str]], *, write: bool = True,
                     listed: Sequence[Collection] | None = None) -> list[Collection]:
    """The workspace's collections with profiles of its current corpus version (computed and, with `write`, stored
    when any is stale). `listed`: the collections as the caller just listed them (not read again); `tables` may be
    a callable, read only when a profile is rebuilt."""
    cols = list(listed) if listed is not None else repo.list(workspace)
    version = corpus.corpus_version(workspace)
    if not stale(cols, version, model_id):
        return cols
    profiles = build_profiles(corpus.chunks(workspace), repo.chunk_collections(workspace),
                              repo.doc_collections(workspace), corpus.vectors(model_id, "raw", workspace), model_id,
                              tables() if callable(tables) else tables, version, tokens)
    if write:
        repo.put_profiles(workspace, profiles)
        return repo.list(workspace)
    return [Collection(c.workspace, c.name, c.description, c.n_docs, profiles.get(c.name)) for c in cols]


# -- the choice -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectionScore:
    """One collection's evidence for a question: the mean log-likelihood ratio per question term of its term model
    against the workspace's (lexical), the cosine with its centroid (None when not usable), and the share."""

    name: str
    lexical: float
    centroid: float | None
    share: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lexical": round(self.lexical, 4),
                "centroid": None if self.centroid is None else round(self.centroid, 4), "share": round(self.share, 4)}


@dataclass(frozen=True)
class CollectionChoice:
    """Which collections the question is searched in and why."""

    searched: tuple[str, ...]
    available: tuple[str, ...]
    method: str  # offline | llm | all | forced
    reason: str
    scores: tuple[CollectionScore, ...] = ()
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    terms: int = 0  # question terms the workspace knows

    @property
    def filters(self) -> bool:
        return set(self.searched) != set(self.available)

    def info(self) -> "CollectionsInfo":
        return CollectionsInfo(self.searched, self.available, self.method, self.reason, self.scores, self.terms)


@dataclass(frozen=True, eq=False)
class CollectionsInfo(StageInfo):
    """The collections stage's record: the collections searched of those available, how and why they were chosen,
    each one's evidence, and how many question terms the workspace knows."""

    searched: tuple[str, ...]
    available: tuple[str, ...]
    method: str
    reason: str
    scores: tuple[CollectionScore, ...] = ()
    terms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"searched": list(self.searched), "available": list(self.available), "method": self.method,
                "reason": self.reason, "scores": [s.to_dict() for s in self.scores], "terms": self.terms}


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def score_collections(query_terms: Sequence[str], query_vec: np.ndarray | None, cols: Sequence[Collection], *,
                      temperature: float, centroid_weight: float) -> tuple[list[CollectionScore], int]:
    """Each collection's evidence and share; the number of distinct question terms the workspace knows.

    lexical: mean over known terms of log P_c(t) / P_ws(t), P_c Dirichlet-smoothed toward the workspace (MU chunks);
    its share is the posterior of the question's terms under the collections' models (uniform prior). centroid: the
    cosine with each centroid; its share a softmax at `temperature`. The share mixes the two by `centroid_weight`
    (the lexical share alone when there is no usable vector)."""
    profs = [c.profile for c in cols]
    n_ws = sum(p.n_chunks for p in profs if p is not None)
    terms = list(dict.fromkeys(query_terms))
    df_ws = {t: sum(p.df.get(t, 0) for p in profs if p is not None) for t in terms}
    known = [t for t in terms if df_ws[t] > 0]
    loglik = np.zeros(len(cols))
    for i, p in enumerate(profs):
        if p is None:
            continue
        for t in known:
            bg = df_ws[t] / n_ws
            loglik[i] += math.log((p.df.get(t, 0) + MU * bg) / (p.n_chunks + MU) / bg)
    lex_share = _softmax(loglik) if known else np.full(len(cols), 1 / len(cols))
    cos: list[float | None] = [None] * len(cols)
    if query_vec is not None:
        q = np.asarray(query_vec, dtype=np.float64).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        for i, p in enumerate(profs):
            if p is not None and len(p.centroid) == len(q):
                cos[i] = float(np.dot(q, np.asarray(p.centroid)))
    usable = all(c is not None for c in cos)
    share = lex_share
    if usable and centroid_weight > 0:
        cos_share = _softmax(np.asarray(cos, dtype=np.float64) / max(temperature, 1e-6))
        w = centroid_weight if known else 1.0
        share = (1 - w) * lex_share + w * cos_share
    mean = loglik / max(len(known), 1)
    return [CollectionScore(c.name, float(mean[i]), cos[i], float(share[i])) for i, c in enumerate(cols)], len(known)


def choose_offline(query_terms: Sequence[str], query_vec: np.ndarray | None, cols: Sequence[Collection], *,
                   min_share: float, temperature: float, centroid_weight: float) -> CollectionChoice:
    """The best collection, and every other whose share reaches `min_share` (the router is unsure between them)."""
    names = tuple(c.name for c in cols)
    scores, known = score_collections(query_terms, query_vec, cols, temperature=temperature,
                                      centroid_weight=centroid_weight)
    ranked = sorted(scores, key=lambda s: -s.share)
    picked = [ranked[0].name] + [s.name for s in ranked[1:] if s.share >= min_share]
    signals = "vocabulary" + (" + centroid" if all(s.centroid is not None for s in scores) and centroid_weight > 0
                              else "")
    if not known and query_vec is None:
        return CollectionChoice(names, names, "offline", "no question term is in any collection and no vector: every "
                                "collection searched", tuple(scores), terms=0)
    why = (f"{signals}: {ranked[0].name} {ranked[0].share:.2f}"
           + "".join(f", {s.name} {s.share:.2f}" for s in ranked[1:])
           + (f"; searched every collection with share >= {min_share:g}" if len(picked) > 1
              else f"; the others are below {min_share:g}"))
    return CollectionChoice(tuple(n for n in names if n in picked), names, "offline", why, tuple(scores), terms=known)


COLLECTIONS_INSTRUCTIONS = (
    "You route a question to the knowledge bases (collections) of one workspace that can answer it. You get each "
    "collection's name, its owner's description and a profile (size, languages, characteristic terms, tables). "
    "Reply with the names of the collections to search, best first: one when the question clearly belongs to one, "
    "several when it may need them or you are unsure. Use only the names given.")
COLLECTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"collections": {"type": "array", "items": {"type": "string"}}, "reason": {"type": "string"}},
    "required": ["collections", "reason"], "additionalProperties": False}


def describe_collections(cols: Sequence[Collection]) -> str:
    """The collections as Claude reads them."""
    lines = []
    for c in cols:
        p = c.profile
        lines.append(f"- {c.name}: {c.description or '(no description)'}")
        if p is not None:
            langs = ", ".join(f"{k} {v}" for k, v in sorted(p.languages.items(), key=lambda kv: -kv[1]))
            lines.append(f"  {p.n_docs} documents, {p.n_chunks} chunks ({langs}); terms: {', '.join(p.top_terms)}")
            for t, schema in p.tables.items():
                lines.append(f"  table {t}({', '.join(schema)})")
    return "\n".join(lines)


def choose_llm(question: str, cols: Sequence[Collection], llm: LLM, *, model: str, fallback: CollectionChoice,
               workspace: str = DEFAULT_WORKSPACE) -> CollectionChoice:
    """Claude's choice (JSON {collections, reason}); a failed call, a malformed reply or no known name keeps the
    offline choice, and the notes say why."""
    names = tuple(c.name for c in cols)
    req = LLMRequest(model, (TextBlock(COLLECTIONS_INSTRUCTIONS),),
                     (TextBlock(f"Collections:\n{describe_collections(cols)}\n\nQuestion: {question}"),),
                     max_tokens=300, json_schema=COLLECTIONS_SCHEMA, purpose="route", ref_id=question[:80])
    start = time.perf_counter()
    try:
        resp = llm.complete(req, workspace=workspace)
    except LLMError as exc:
        return _fallback(fallback, f"the LLM call failed ({str(exc)[:160]}): the offline choice stands")
    data = resp.data
    picked = data.get("collections") if isinstance(data, Mapping) else None
    if not isinstance(picked, list):
        return _fallback(fallback, "the LLM's reply was not the JSON asked for ({collections, reason}): the offline "
                                   "choice stands", resp.usage)
    known = [n for n in dict.fromkeys(str(x) for x in picked) if n in names]
    unknown = [str(x)[:40] for x in picked if str(x) not in names]
    if not known:
        return _fallback(fallback, "the LLM named no collection of this workspace"
                         + (f" ({', '.join(unknown)})" if unknown else "") + ": the offline choice stands", resp.usage)
    notes = [f"{(time.perf_counter() - start) * 1000:.0f} ms"]
    if unknown:
        notes.append(f"ignored names that are no collection here: {', '.join(unknown)}")
    reason = str(data.get("reason", ""))[:300] or "chosen by the LLM"
    return CollectionChoice(tuple(n for n in names if n in known), names, "llm", reason, fallback.scores, resp.usage,
                            tuple(notes), fallback.terms)


def _fallback(offline: CollectionChoice, why: str, usage: Usage = Usage()) -> CollectionChoice:
    return CollectionChoice(offline.searched, offline.available, offline.method, offline.reason, offline.scores,
                            usage, (*offline.notes, why), offline.terms)


def forced(cols: Sequence[Collection], only: Sequence[str]) -> CollectionChoice:
    """The collections a setting names (collections.only), or every one (collections.enabled = false)."""
    names = tuple(c.name for c in cols)
    if not only:
        return CollectionChoice(names, names, "all", "collections.enabled = false: every collection searched")
    missing = [n for n in only if n not in names]
    picked = tuple(n for n in names if n in only)
    notes = (f"no collection named {', '.join(missing)} here",) if missing else ()
    if not picked:
        return CollectionChoice(names, names, "all", f"collections.only names no collection of this workspace "
                                f"({', '.join(only)}): every collection searched", notes=notes)
    return CollectionChoice(picked, names, "forced", f"collections.only = {', '.join(only)}", notes=notes)


@dataclass
class ChunkFilter:
    """The retrieval stages' filter: chunk_id -> collection, and the collections searched. `mask` gives an index's
    rows that may be returned (memoised per index row list)."""

    chunk_coll: Mapping[str, str]
    searched: frozenset[str]
    _masks: dict[int, tuple[Sequence[str], np.ndarray]] = field(default_factory=dict)

    def allows(self, chunk_id: str) -> bool:
        return self.chunk_coll.get(chunk_id, DEFAULT_COLLECTION) in self.searched

    def mask(self, chunk_ids: Sequence[str]) -> np.ndarray:
        got = self._masks.get(id(chunk_ids))
        if got is not None and got[0] is chunk_ids:
            return got[1]
        m = np.fromiter((self.allows(c) for c in chunk_ids), dtype=bool, count=len(chunk_ids))
        self._masks[id(chunk_ids)] = (chunk_ids, m)
        return m
