"""Rerankers: reorder a candidate list by reading query and chunk together (late interaction, cross-encoder, LLM)."""
from __future__ import annotations

import hashlib
import math
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from core.cascade.prune import keep_floor, local_headings
from core.models.embed import cache_first, one_torch_thread, require_on_disk
from core.models.llm import LLM, LLMError, LLMRequest, TextBlock, parse_json
from core.models.protocols import Embedder, declared_languages, model_languages
from core.models.tokens import (
    HeldTokenKeys,
    ReadOnlyTokens,
    TokenCache,
    TokenEncoder,
    TokenMatrix,
    TokenStore,
    encode_token_matrices,
    maxsim,
    text_key,
    window_encoder_for,
)
from core.text import EN_STOP, RU_STOP, detect_language
from core.types import CONTEXT_KEY, DEFAULT_WORKSPACE, Candidate, Span, SpanScorer, Usage


@dataclass(frozen=True)
class RerankScores:
    """Scores for the texts of one call (higher = more relevant), plus what the call cost."""

    scores: np.ndarray
    cache_hits: int = 0  # texts whose token vectors came from a cache
    computed: int = 0  # texts the model had to read
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, text) pairs. `name` says what really ran (method:model) and is shown in the trace."""

    name: str

    def score(self, query: str, texts: Sequence[str], *, workspace: str = DEFAULT_WORKSPACE) -> RerankScores: ...


@runtime_checkable
class SpanReranker(Protocol):
    """Optional capability of a Reranker: scores character spans (sentences) of texts read whole, so a sentence is
    scored in context (late interaction does; the others score one pair per sentence)."""

    def score_spans(self, query: str, items: Sequence[tuple[str, Sequence[Span]]], *,
                    workspace: str = DEFAULT_WORKSPACE) -> tuple[list[np.ndarray], RerankScores]: ...


@runtime_checkable
class QueryTokensReranker(Protocol):
    """Optional capability of a Reranker: its texts' side is cached between calls and a query is encoded on its own
    (late interaction), so one more query costs that query's encoding alone. The rerank stage reads the transforms'
    generated queries only with such a reranker; a cross-encoder or an LLM would pay a whole scoring pass per query."""

    def query_matrix(self, query: str, workspace: str = ...) -> tuple[np.ndarray, np.ndarray]: ...


def rerank_text(candidate: Candidate, use_context: bool = True) -> str:
    """What the reranker reads: the context prefix (contextual retrieval) and a blank line before the chunk text.
    Generation reads `candidate.text` alone."""
    ctx = candidate.meta.get(CONTEXT_KEY) if use_context else None
    return f"{ctx}\n\n{candidate.text}" if ctx else candidate.text


def covers(languages: frozenset[str] | None, lang: str | None) -> bool:
    """Whether a model that declares `languages` reads text in `lang`. None on either side means no known gap
    (a multilingual or undeclared model; a text whose language was not detected)."""
    return languages is None or lang is None or lang in languages


def blend_scores(rerank_scores: np.ndarray, *, input_weight: float, rrf_k: int) -> np.ndarray:
    """Reciprocal-rank fusion of the incoming order (index order) and the reranker's order, scaled so that an item
    first in both scores 1. The reranker alone can push a strong first-stage hit far down when its model reads the
    corpus poorly (multi-hop questions, another language, code); fusing the two orders keeps such a hit near the
    top while still letting the reranker promote what the first stage ranked low."""
    n = len(rerank_scores)
    if n == 0:
        return np.zeros(0)
    order = sorted(range(n), key=lambda i: (-float(rerank_scores[i]), i))
    pos = np.empty(n)
    pos[order] = np.arange(1, n + 1)
    fused = input_weight / (rrf_k + np.arange(1, n + 1)) + 1.0 / (rrf_k + pos)
    return fused / ((input_weight + 1.0) / (rrf_k + 1))


def rerank(
    query: str, candidates: Sequence[Candidate], reranker: Reranker, *, k: int, use_context: bool = True,
    workspace: str = DEFAULT_WORKSPACE, query_lang: str | None = None, combine: str = "replace",
    input_weight: float = 1.0, rrf_k: int = 60, keep_top: int = 0, keep_within: int = 5,
    queries: Sequence[str] = (),
) -> tuple[list[Candidate], RerankScores]:
    """The rerank stage: score every candidate, keep the best k. Ties keep the incoming order; each kept candidate
    records the rank it came in with (meta 'rank_before') and the reranker's own score (meta 'rerank_score').

    `queries`: other queries the incoming list was searched with (the transforms' sub-questions and rewrites). Each
    candidate is also scored against each of them and keeps its best score, the query that gave it in meta
    'rerank_query' when it is not `query`: a page a sub-question found (the second hop of a compositional question,
    one side of a comparison) is judged by the question it answers, which the whole question may not resemble.

    combine='rrf' orders by blend_scores (incoming order fused with the reranker's) instead of the reranker alone.
    Language: a reranker that declares languages (`languages`) does not reorder what it cannot read. A query outside
    them passes the list through in its incoming order; candidates outside them keep their incoming places while
    the others are reordered around them. Both are said in the notes."""
    if not candidates:
        return [], RerankScores(np.zeros(0, dtype=np.float32))
    languages = model_languages(reranker)
    if not covers(languages, query_lang):
        out = [c.with_rank(r, None, rank_before=c.rank, stage="rerank") for r, c in enumerate(candidates[:k], start=1)]
        note = (f"{reranker.name} reads {', '.join(sorted(languages or ()))} only, not the query's '{query_lang}': "
                "passed through in the incoming order")
        return out, RerankScores(np.zeros(0, dtype=np.float32), notes=(note,))
    foreign = [not covers(languages, detect_language(c.text)) for c in candidates] if languages is not None \
        else [False] * len(candidates)
    readable = [i for i, f in enumerate(foreign) if not f]
    texts = [rerank_text(candidates[i], use_context) for i in readable]
    res = reranker.score(query, texts, workspace=workspace)
    raw = np.asarray(res.scores, dtype=np.float64)
    extra = [x for x in dict.fromkeys(queries) if x.strip() and x != query]
    best_by = np.zeros(len(readable), dtype=np.int64)  # 0: the question; j: extra[j - 1]
    for j, other in enumerate(extra, start=1):
        more = reranker.score(other, texts, workspace=workspace)
        got = np.asarray(more.scores, dtype=np.float64)
        better = got > raw
        raw, best_by = np.where(better, got, raw), np.where(better, j, best_by)
        res = RerankScores(raw, res.cache_hits + more.cache_hits, res.computed + more.computed,
                           res.usage + more.usage, (*res.notes, *more.notes))
    by_query = {readable[j]: extra[int(best_by[j]) - 1] for j in range(len(readable)) if best_by[j]}
    final = blend_scores(raw, input_weight=input_weight, rrf_k=rrf_k) if combine == "rrf" else raw
    order_in = sorted(range(len(readable)), key=lambda j: (-final[j], j))
    # Foreign candidates hold their slots; the readable ones fill the other slots in their new order.
    slots = iter(readable[j] for j in order_in)
    placed = [i if foreign[i] else next(slots) for i in range(len(candidates))]
    placed, floored = keep_floor(placed, keep_top, keep_within)
    placed = placed[:k]
    score_of = {readable[j]: (float(final[j]), float(raw[j])) for j in range(len(readable))}
    out: list[Candidate] = []
    for r, i in enumerate(placed, start=1):
        c = candidates[i]
        if i in by_query:
            c = replace(c, meta={**c.meta, "rerank_query": by_query[i]})
        if i in floored:
            # Level with the candidate it displaced, so MMR's relevance does not push it down again.
            below = placed[r] if r < len(placed) else None
            level = max(score_of.get(i, (c.score,))[0], score_of[below][0] if below in score_of else 0.0)
            out.append(c.with_rank(r, level, rank_before=c.rank, stage="rerank", floored=floored[i],
                                   rerank_score=score_of[i][1] if i in score_of else None))
        elif foreign[i]:
            # On the reranker's scale (prune and MMR read scores): level with the candidate above it.
            level = out[-1].score if out else max((v[0] for v in score_of.values()), default=c.score)
            out.append(c.with_rank(r, level, rank_before=c.rank, stage="rerank", not_reranked="language"))
        else:
            out.append(c.with_rank(r, score_of[i][0], rank_before=c.rank, stage="rerank", rerank_score=score_of[i][1]))
    notes = res.notes
    if extra:
        lifted = sorted((r, c.chunk_id, c.meta["rerank_query"]) for r, c in enumerate(out, start=1)
                        if "rerank_query" in c.meta)
        notes = (*notes, f"read {len(extra)} generated quer{'y' if len(extra) == 1 else 'ies'} beside the question; "
                         f"{len(by_query)} of {len(readable)} candidates scored best by one"
                         + (": " + ", ".join(f"#{r} {cid} by {q[:60]!r}" for r, cid, q in lifted[:5]) if lifted
                            else ""))
    if any(foreign):
        notes = (*notes, f"{sum(foreign)} candidate(s) in a language {reranker.name} does not read kept their "
                         "incoming places")
    if combine == "rrf":
        notes = (*notes, f"order: RRF of the incoming order (weight {input_weight:g}) and the reranker's (k={rrf_k})")
    if keep_top:
        moved = ", ".join(f"#{i + 1} (reranked to #{floored[i]})" for i in sorted(floored))
        notes = (*notes, f"floor: the incoming first {keep_top} stay within the first {keep_within}"
                         + (f"; moved back up: {moved}" if floored else "; none had to move"))
    return out, RerankScores(res.scores, res.cache_hits, res.computed, res.usage, tuple(notes))


# -- late interaction (ColBERT-style MaxSim over the token vectors of core.models.tokens) ----------------------
class CorpusSource(Protocol):
    """Where corpus-wide token statistics come from (core.store's corpus repository, `store.corpus`)."""

    def corpus_version(self, workspace: str = ...) -> int: ...

    def chunks(self, workspace: str = ..., doc_id: str | None = None) -> Sequence[Any]: ...

    def chunk_fingerprint(self, workspace: str = ...) -> str: ...


class TableFiles(Protocol):
    """Arrays per corpus version beside the database (core.store.IndexFiles): the IDF table a fresh process loads."""

    def load(self, kind: str, workspace: str, key: str, version: int) -> dict[str, np.ndarray] | None: ...

    def save(self, kind: str, workspace: str, key: str, version: int, arrays: Mapping[str, np.ndarray]) -> bool: ...


_STOP = EN_STOP | RU_STOP


def _is_stopword(text: str, s: int, e: int) -> bool:
    # Whole-word tokens only: a word piece of a longer word is never a stop word.
    whole = (s == 0 or not text[s - 1].isalnum()) and (e >= len(text) or not text[e].isalnum())
    return whole and text[s:e].lower() in _STOP


class LateInteractionReranker:
    """ColBERT-style late interaction over the active embedder's token vectors (no extra model). Query tokens are
    weighted by their inverse document frequency in the workspace's corpus (stop words weigh 0), every chunk is read
    whole in windows, and chunk token vectors are cached (memory LRU, then the store), so a query pays only for
    its own tokens once its candidates have been seen."""

    def __init__(
        self, encoder: TokenEncoder, *, cache: TokenCache | None = None, persist: TokenStore | None = None,
        corpus: CorpusSource | None = None, idf_sample: int = 5000, languages: frozenset[str] | None = None,
        files: TableFiles | None = None,
    ) -> None:
        self.encoder = encoder
        self.model_id = encoder.model_id
        self.name = f"late-interaction:{encoder.model_id}"
        self.languages = languages  # the embedder's: its token vectors carry no more language than it does
        self.cache = cache if cache is not None else TokenCache()
        self.persist = persist
        self.corpus = corpus
        self.idf_sample = idf_sample
        self.files = files
        self._idf: dict[str, tuple[int, dict[int, float], float]] = {}
        self._idf_lock = threading.Lock()

    # token vectors, cache first
    def token_matrices(self, texts: Sequence[str], workspace: str = DEFAULT_WORKSPACE, *, persist: bool = True
                       ) -> tuple[list[TokenMatrix], int, int]:
        """(matrices, cache hits, computed): memory LRU, then the persistent store, then the model. Queries pass
        persist=False: they are cached in memory only, so the store holds chunk texts and does not grow per query."""
        store = self.persist if persist else None

        def lookup(keys: list[str]) -> dict[str, TokenMatrix]:
            found = {k: tm for k in keys if (tm := self.cache.get(self.model_id, k)) is not None}
            rest = [k for k in keys if k not in found]
            if rest and store is not None:
                for k, (ids, vecs, spans) in store.cached_token_vectors(self.model_id, rest, workspace).items():
                    found[k] = TokenMatrix(ids, vecs, spans)
                    self.cache.put(self.model_id, k, found[k])
            return found

        def save(fresh: dict[str, TokenMatrix]) -> None:
            for k, tm in fresh.items():
                self.cache.put(self.model_id, k, tm)
            if store is not None:
                store.cache_token_vectors(
                    self.model_id, {k: (tm.ids, tm.vecs, tm.spans) for k, tm in fresh.items()}, workspace)

        res = cache_first([text_key(self.model_id, t) for t in texts], texts, lookup=lookup, save=save,
                          compute=lambda todo: encode_token_matrices(self.encoder, todo))
        return res.values, res.stats.cache_hits, res.stats.computed

    def warm(self, texts: Sequence[str], workspace: str = DEFAULT_WORKSPACE, batch: int = 64,
             progress: Callable[[int, int], None] | None = None) -> int:
        """Encode and cache texts ahead of queries (bench, or after an ingest); returns how many were computed.
        progress(done, total) after each batch."""
        computed = 0
        for i in range(0, len(texts), batch):
            computed += self.token_matrices(texts[i : i + batch], workspace)[2]
            if progress:
                progress(min(i + batch, len(texts)), len(texts))
        return computed

    def unseen(self, texts: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        """The texts warm() would still encode: in neither the memory cache nor the store (whose vectors are not
        read here, only their keys)."""
        keys = {text_key(self.model_id, t): t for t in texts}
        rest = [k for k in keys if self.cache.get(self.model_id, k) is None]
        stored = (self.persist.held_token_vectors(self.model_id, rest, workspace)
                  if rest and isinstance(self.persist, HeldTokenKeys) else set())
        return [keys[k] for k in rest if k not in stored]

    # query side
    def _idf_table(self, workspace: str) -> tuple[dict[int, float], float]:
        """Token id -> log(1 + N / (1 + df)) over the workspace's chunks (a fixed sample of at most idf_sample),
        from the tokenizer alone; rebuilt when the corpus version moves, and kept in an index file per version (when
        `files` is given) so a fresh process reads it instead of tokenising the corpus. Without a corpus every token
        weighs 1."""
        if self.corpus is None:
            return {}, 1.0
        version = self.corpus.corpus_version(workspace)
        with self._idf_lock:
            hit = self._idf.get(workspace)
            if hit is not None and hit[0] == version:
                return hit[1], hit[2]
            key = f"{self.model_id}\x1f{self.idf_sample}"
            stamp = self.corpus.chunk_fingerprint(workspace) if self.files is not None else ""
            saved = self.files.load("idf", workspace, key, version) if self.files is not None else None
            if saved is not None and saved.get("stamp", np.zeros(0, np.uint8)).tobytes().decode("utf-8", "replace") \
                    == stamp and {"ids", "df", "n"} <= saved.keys():
                n = int(saved["n"][0])
                df = dict(zip(saved["ids"].tolist(), saved["df"].tolist()))
            else:
                chunks = list(self.corpus.chunks(workspace))
                if len(chunks) > self.idf_sample:
                    step = len(chunks) / self.idf_sample
                    chunks = [chunks[int(i * step)] for i in range(self.idf_sample)]
                df = {}
                for c in chunks:
                    for tid in set(self.encoder.tokenize(c.text)[0]):
                        df[tid] = df.get(tid, 0) + 1
                n = max(len(chunks), 1)
                if self.files is not None:
                    self.files.save("idf", workspace, key, version, {
                        "ids": np.fromiter(df.keys(), dtype=np.int64, count=len(df)),
                        "df": np.fromiter(df.values(), dtype=np.int64, count=len(df)), "n": np.array([n]),
                        "stamp": np.frombuffer(stamp.encode(), dtype=np.uint8)})
            table = {tid: math.log(1 + n / (1 + d)) for tid, d in df.items()}
            unseen = math.log(1 + n)
            self._idf[workspace] = (version, table, unseen)
            return table, unseen

    def query_matrix(self, query: str, workspace: str = DEFAULT_WORKSPACE) -> tuple[np.ndarray, np.ndarray]:
        """(query token vectors, weights): stop words weigh 0 unless the query has nothing else."""
        with one_torch_thread():
            tm = self.token_matrices([query], workspace, persist=False)[0][0]
        table, unseen = self._idf_table(workspace)
        w = np.array([table.get(int(t), unseen) if table else 1.0 for t in tm.ids], dtype=np.float32)
        stop = np.array([_is_stopword(query, int(s), int(e)) for s, e in tm.spans], dtype=bool)
        if len(stop) and not stop.all():
            w[stop] = 0.0
        return tm.vecs.astype(np.float32), w

    def score(self, query: str, texts: Sequence[str], *, workspace: str = DEFAULT_WORKSPACE) -> RerankScores:
        q, w = self.query_matrix(query, workspace)
        mats, hits, computed = self.token_matrices(texts, workspace)
        return RerankScores(maxsim(q, w, [m.vecs for m in mats]), hits, computed)

    def score_spans(self, query: str, items: Sequence[tuple[str, Sequence[Span]]], *,
                    workspace: str = DEFAULT_WORKSPACE) -> tuple[list[np.ndarray], RerankScores]:
        """MaxSim of each character span (a sentence) using the token vectors of its whole text: sentences are
        scored in context and cost no model call when the text is cached."""
        q, w = self.query_matrix(query, workspace)
        mats, hits, computed = self.token_matrices([t for t, _ in items], workspace)
        out = []
        for (text, spans), tm in zip(items, mats):
            subs = []
            for s, e in spans:
                subs.append(tm.vecs[tm.rows_in(s, e)])
            out.append(maxsim(q, w, subs))
        return out, RerankScores(np.concatenate(out) if out else np.zeros(0), hits, computed)


# -- cross-encoder ------------------------------------------------------------------------------------------------
class CrossEncoderReranker:
    """sentence-transformers CrossEncoder over (query, text) pairs: the strongest reader, one forward pass per
    pair, so its cost grows with top_n."""

    def __init__(self, model_name_or_path: str, *, max_length: int = 512, batch_size: int = 16,
                 local_files_only: bool = True, device: str = "cpu") -> None:
        require_on_disk(model_name_or_path)  # a missing model is reported at once, never fetched
        from sentence_transformers import CrossEncoder
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.model_name = model_name_or_path
        self.name = f"cross-encoder:{model_name_or_path}"
        self.languages = declared_languages(model_name_or_path)  # ms-marco models: English
        self.batch_size = batch_size
        self.model = CrossEncoder(model_name_or_path, device=device, max_length=max_length,
                                  local_files_only=local_files_only)

    def score(self, query: str, texts: Sequence[str], *, workspace: str = DEFAULT_WORKSPACE) -> RerankScores:
        if not texts:
            return RerankScores(np.zeros(0, dtype=np.float32))
        raw = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False,
                                 convert_to_numpy=True)
        raw = np.asarray(raw, dtype=np.float32)
        # A model with several labels: the last one is "relevant" by the usual convention.
        scores = raw[:, -1] if raw.ndim == 2 else raw
        return RerankScores(scores, 0, len(texts))


# -- fallback when the embedder has no token vectors ----------------------------------------------------------------
class EmbedderCosineReranker:
    """Bi-encoder cosine of query and text with the active embedder: the honest last resort when late interaction
    is impossible (an embedder without token vectors). Reported by name, never passed off as late interaction."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.name = f"embedder-cosine:{embedder.model_id}"
        self.languages = model_languages(embedder)

    def score(self, query: str, texts: Sequence[str], *, workspace: str = DEFAULT_WORKSPACE) -> RerankScores:
        if not texts:
            return RerankScores(np.zeros(0, dtype=np.float32))
        vecs = np.asarray(self.embedder.encode([query, *texts]), dtype=np.float32)
        vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return RerankScores(vecs[1:] @ vecs[0], 0, len(texts) + 1)


# -- LLM listwise ---------------------------------------------------------------------------------------------------
_LISTWISE_SYSTEM = (
    "You rank passages by how well they help answer a search query. Read every numbered passage, then return "
    "the passage numbers from most to least useful. Put passages that do not help at the end. Return JSON only."
)
_LISTWISE_SCHEMA = {
    "type": "object",
    "properties": {"ranking": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ranking"],
    "additionalProperties": False,
}


class LLMListwiseReranker:
    """Listwise rerank by an LLM with structured output (one call per query; cost in the trace and the ledger).
    When the call fails, `fallback` scores the list instead and the notes say so."""

    def __init__(self, llm: LLM, model: str, fallback: Reranker, *, max_chars: int = 1200) -> None:
        self.llm = llm
        self.model = model
        self.fallback = fallback
        self.max_chars = max_chars
        self.name = f"llm:{model}"
        self.languages: frozenset[str] | None = None  # reads any language the corpus is written in

    def request(self, query: str, texts: Sequence[str]) -> LLMRequest:
        passages = "\n\n".join(f"[{i}] {t[: self.max_chars]}" for i, t in enumerate(texts, start=1))
        return LLMRequest(
            model=self.model, system=(TextBlock(_LISTWISE_SYSTEM, cache=True),),
            user=(TextBlock(f"Query: {query}\n\nPassages:\n{passages}\n\n"
                            f'Answer as {{"ranking": [passage numbers 1..{len(texts)}, best first]}}'),),
            max_tokens=16 + 6 * len(texts), json_schema=_LISTWISE_SCHEMA, purpose="rerank",
            ref_id="q" + hashlib.sha1(query.encode()).hexdigest()[:12],
        )

    def score(self, query: str, texts: Sequence[str], *, workspace: str = DEFAULT_WORKSPACE) -> RerankScores:
        if not texts:
            return RerankScores(np.zeros(0, dtype=np.float32))
        try:
            resp = self.llm.complete(self.request(query, texts), workspace=workspace)
            data = resp.data if resp.data is not None else parse_json(resp.text)
            ranking = data["ranking"] if isinstance(data, dict) else data
            return RerankScores(listwise_scores(ranking, len(texts)), 0, len(texts), resp.usage)
        except (LLMError, KeyError, TypeError, ValueError) as exc:
            res = self.fallback.score(query, texts, workspace=workspace)
            note = f"LLM rerank failed ({str(exc)[:120]}); {self.fallback.name} ranked this list instead"
            return RerankScores(res.scores, res.cache_hits, res.computed, res.usage, (*res.notes, note))


def listwise_scores(ranking: Sequence[Any], n: int) -> np.ndarray:
    """Scores from a 1-based ranking: listed passages first in their order, unlisted ones after in input order;
    duplicates and numbers out of range are ignored."""
    scores = np.zeros(n, dtype=np.float32)
    seen: list[int] = []
    for r in ranking:
        try:
            i = int(r) - 1
        except (TypeError, ValueError):
            continue
        if 0 <= i < n and i not in seen:
            seen.append(i)
    rest = [i for i in range(n) if i not in seen]
    for pos, i in enumerate(seen + rest):
        scores[i] = float(n - pos) / n
    return scores


# -- span scoring for sentence pruning ------------------------------------------------------------------------------


def attach_contexts(candidates: Sequence[Candidate], contexts: Mapping[str, str]) -> list[Candidate]:
    """Candidates carrying their chunk's context prefix in meta[CONTEXT_KEY] (those that have one)."""
    return [replace(c, meta={**c.meta, CONTEXT_KEY: contexts[c.chunk_id]}) if contexts.get(c.chunk_id) else c
            for c in candidates]


def _as_read(items: Sequence[tuple[str, Sequence[Span]]], contexts: Mapping[str, str]
             ) -> list[tuple[str, list[Span]]]:
    """Items as the rerank stage read them: 'context\n\nchunk' with the spans moved along, when a chunk has a
    context prefix (contextual retrieval on), so their cached token vectors are found."""
    out = []
    for text, spans in items:
        ctx = contexts.get(text)
        off = len(ctx) + 2 if ctx else 0
        out.append((f"{ctx}\n\n{text}" if ctx else text, [(s + off, e + off) for s, e in spans]))
    return out


def reranker_span_scorer(reranker: Reranker, *, workspace: str = DEFAULT_WORKSPACE,
                         contexts: Mapping[str, str] | None = None) -> SpanScorer:
    """Sentence scores from the reranker: in-context token slices for late interaction, one pair per sentence for
    the others. `contexts` (chunk text -> context prefix) makes late interaction read the same text the rerank
    stage read, so its cached token vectors are reused instead of encoding the chunk again."""
    prefixes = dict(contexts or {})

    def score(query: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        if isinstance(reranker, SpanReranker):
            return reranker.score_spans(query, _as_read(items, prefixes), workspace=workspace)[0]
        flat = [t[s:e] for t, spans in items for s, e in spans]
        scores = reranker.score(query, flat, workspace=workspace).scores if flat else np.zeros(0)
        out, pos = [], 0
        for _, spans in items:
            out.append(np.asarray(scores[pos : pos + len(spans)], dtype=np.float32))
            pos += len(spans)
        return out

    return score


def pooled_span_scorer(late: "LateInteractionReranker", embedder: Embedder, *, fallback: SpanScorer,
                       workspace: str = DEFAULT_WORKSPACE, contexts: Mapping[str, str] | None = None,
                       query_vec: np.ndarray | None = None) -> SpanScorer:
    """Cosine of the query embedding and each sentence's mean token vector, sliced from its chunk's contextual token
    vectors (the ones late interaction cached at rerank): a sentence read in its chunk, with no model call for it.
    Far cheaper than encoding 'title. sentence' texts at about the same recall after pruning when summed with
    sentence BM25 (measured on sample_corpus/eval.jsonl when it was chosen). Token vectors that do
    not live in the space of the query embedding (another width) cannot be compared: `fallback` scores instead.
    `query_vec` is the query's embedding when the dense stage already made it (it is not encoded twice)."""
    prefixes = dict(contexts or {})

    def score(query: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        read = _as_read(items, prefixes)
        mats, _, _ = late.token_matrices([t for t, _ in read], workspace)
        if query_vec is None:
            with one_torch_thread():
                q = np.asarray(embedder.encode([query]), dtype=np.float32)[0]
        else:
            q = np.asarray(query_vec, dtype=np.float32).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        if any(len(tm) and tm.vecs.shape[1] != q.shape[0] for tm in mats):
            return fallback(query, items)
        out = []
        for (_, spans), tm in zip(read, mats):
            vecs = tm.vecs.astype(np.float32)
            vals = []
            for s, e in spans:
                inside = tm.rows_in(s, e)
                if not inside.any():
                    vals.append(0.0)
                    continue
                m = vecs[inside].mean(axis=0)
                vals.append(float(m @ q) / max(float(np.linalg.norm(m)), 1e-12))
            out.append(np.asarray(vals, dtype=np.float32))
        return out

    return score


def embedder_span_scorer(embedder: Embedder, prefixes: Mapping[str, str] | None = None) -> SpanScorer:
    """Sentence scores as cosine of query and sentence vectors from the active embedder. With `prefixes` (chunk text
    -> document title and section path) each sentence is embedded as 'prefix. sentence', so a sentence that never
    names its subject ('Revenue grew 2.8%') is read with the report and section it belongs to."""
    pre = dict(prefixes or {})

    def score(query: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        flat = [". ".join(p for p in (pre.get(t, ""), local, t[s:e]) if p)
                for t, spans in items for (s, e), local in zip(spans, local_headings(t, spans))]
        if not flat:
            return [np.zeros(0, dtype=np.float32) for _ in items]
        with one_torch_thread():  # a few dozen short sentences per query
            vecs = np.asarray(embedder.encode([query, *flat]), dtype=np.float32)
        vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        sims = vecs[1:] @ vecs[0]
        out, pos = [], 0
        for _, spans in items:
            out.append(sims[pos : pos + len(spans)])
            pos += len(spans)
        return out

    return score


# -- construction with honest fallbacks -----------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadedReranker:
    reranker: Reranker
    requested: str
    notice: str | None = None  # set when the requested reranker could not be used and another one runs instead


def late_interaction_or_cosine(embedder: Embedder, *, store: Any = None, cache: TokenCache | None = None
                               ) -> tuple[Reranker, str | None]:
    try:
        encoder = window_encoder_for(embedder)
    except (ValueError, AttributeError, TypeError) as exc:
        return EmbedderCosineReranker(embedder), (
            f"late-interaction rerank needs token vectors, which {embedder.model_id} does not give ({exc}); "
            f"reranking by embedder cosine instead")
    # `store` offers the token-vector cache and the corpus as two repositories (TokenStore, CorpusSource).
    # A read-only store (a second process scoring beside the app, a Ray eval worker's snapshot) is read for IDF and
    # for its stored token vectors, but never written to: without the read, every candidate was re-encoded on every
    # query.
    caches = getattr(store, "caches", None)
    persist = ReadOnlyTokens(caches) if caches is not None and getattr(store, "read_only", False) else caches
    return LateInteractionReranker(encoder, cache=cache, persist=persist,
                                   corpus=getattr(store, "corpus", None),
                                   languages=model_languages(embedder), files=getattr(store, "index_files", None)), None


def load_reranker(
    method: str, *, model: str = "", embedder: Embedder, store: Any = None, llm: LLM | None = None, llm_model: str = "",
    local_files_only: bool = True, cache: TokenCache | None = None,
) -> LoadedReranker:
    """Build the configured reranker; when it cannot run here (model not loadable, no LLM key, no token vectors),
    build the best offline one instead and say which, and why, in `notice`."""
    if method == "cross-encoder":
        try:
            return LoadedReranker(CrossEncoderReranker(model, local_files_only=local_files_only), method)
        except Exception as exc:  # any load failure (bad name, no hub, corrupt files) is reported, never hidden
            fallback, why = late_interaction_or_cosine(embedder, store=store, cache=cache)
            reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            note = f"cross-encoder '{model}' could not be loaded ({reason}); {fallback.name} reranks instead"
            return LoadedReranker(fallback, method, f"{note}. {why}" if why else note)
    if method == "llm":
        fallback, why = late_interaction_or_cosine(embedder, store=store, cache=cache)
        if llm is None or not llm.available:
            reason = llm.reason if llm is not None else "no LLM configured"
            note = f"LLM rerank needs an LLM ({reason}); {fallback.name} reranks instead"
            return LoadedReranker(fallback, method, f"{note}. {why}" if why else note)
        return LoadedReranker(LLMListwiseReranker(llm, llm_model or model, fallback), method, why)
    if method == "late-interaction":
        reranker, why = late_interaction_or_cosine(embedder, store=store, cache=cache)
        return LoadedReranker(reranker, method, why)
    raise ValueError(f"unknown rerank method {method!r}")


def describe(scores: RerankScores) -> dict[str, Any]:
    """Trace info of one rerank call."""
    return {"cache_hits": scores.cache_hits, "computed": scores.computed}
