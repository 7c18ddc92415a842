"""Compression after rerank: whole-sentence pruning under a token budget, duplicate collapse, and MMR ordering."""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from core.text import (
    estimate_llm_tokens,
    normalise,
    sentence_spans,
    sha256_text,
    tokenize,
)
from core.types import Candidate, Span, SpanScorer


GAP = " … "  # stands between kept runs that were not adjacent in the chunk


# -- token accounting (what each stage hands to the model) ----------------------------------------------------------
def llm_tokens(candidates: Sequence[Candidate]) -> int:
    return sum(estimate_llm_tokens(c.text) for c in candidates)




# -- sentence units -------------------------------------------------------------------------------------------------
def sentence_units(text: str, max_unit_tokens: int = 80) -> list[Span]:
    """Sentences of a chunk; a sentence longer than max_unit_tokens (code, tables, run-on lists) is split at its
    line breaks, never inside a line, so an identifier is always kept or dropped whole. A fragment without a letter
    (a list number '3.', a bullet) joins the sentence after it."""
    out: list[Span] = []
    for s, e in _split_title_lines(text, _raw_units(text, max_unit_tokens)):
        if out and not any(ch.isalpha() for ch in text[out[-1][0] : out[-1][1]]):
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _split_title_lines(text: str, units: Sequence[Span]) -> list[Span]:
    """A title line glued to the sentence under it ('E-APP-4107 - Batch rejected\nThe batch sent by...') becomes
    its own unit: the sentence can then be kept without it being scored as one with it, and the title still comes
    along as that sentence's heading."""
    out: list[Span] = []
    for s, e in units:
        while True:
            nl = text.find("\n", s, e)
            if nl < 0 or not is_title_like(text[s:nl]) or not text[nl:e].strip():
                break
            out.append(_trim(text, s, nl))
            s = _trim(text, nl, e)[0]
        out.append((s, e))
    return out


def local_headings(text: str, spans: Sequence[Span]) -> list[str]:
    """For each unit, the nearest title-like unit above it in the chunk ('' when none; a title's own is the one
    above it): the sub-heading a sentence sits under, which chunk metadata does not record."""
    out, current = [], ""
    for s, e in spans:
        out.append(current)
        if is_title_like(text[s:e]):
            current = text[s:e].strip()
    return out


def _raw_units(text: str, max_unit_tokens: int) -> list[Span]:
    out: list[Span] = []
    for s, e in sentence_spans(text):
        if estimate_llm_tokens(text[s:e]) <= max_unit_tokens or "\n" not in text[s:e]:
            out.append((s, e))
            continue
        pos = s
        for m in re.finditer(r"\n", text[s:e]):
            cut = s + m.start()
            if cut > pos and text[pos:cut].strip():
                out.append(_trim(text, pos, cut))
            pos = s + m.end()
        if pos < e and text[pos:e].strip():
            out.append(_trim(text, pos, e))
    return out


def _trim(text: str, s: int, e: int) -> Span:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


# A sentence that opens by pointing back ("It", "This", "However", "Это", "Однако") loses its subject alone.
_BACK_REF = re.compile(
    r"^\W*(it|its|this|these|that|those|they|them|their|he|she|his|her|such|also|however|but|and|or|so|thus|then|"
    r"therefore|hence|meanwhile|instead|otherwise|moreover|furthermore|additionally|likewise|similarly|both|"
    r"as a result|in addition|in contrast|by contrast|for example|for instance|the former|the latter|"
    r"это|этот|эта|эти|этого|он|она|оно|они|его|её|ее|их|однако|но|также|поэтому|при этом|кроме того|"
    r"тем не менее|такой|такая|такие|там|здесь)\b",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^\s*(#{1,6}\s|\S[^\n]{0,80}:$)")
_IDENT_TOKEN = re.compile(r"[\w$€£₽][\w.\-/$€£₽,%]*[\w%]|\w")


def needs_previous(sentence: str) -> bool:
    return bool(_BACK_REF.match(sentence))


def is_heading(sentence: str) -> bool:
    return bool(_HEADING.match(sentence)) and "\n" not in sentence.strip()


def is_title_like(unit: str) -> bool:
    """A heading, or a short single line without closing punctuation ('Consumer division', a report
    title): it matches many queries by its words but carries no fact of its own."""
    s = unit.strip()
    return is_heading(s) or ("\n" not in s and len(s) < 90 and len(s.split()) <= 12 and "|" not in s
                             and not s.endswith((".", "?", "!", ";", ":", ")")))


def exact_terms(query: str) -> list[str]:
    """Query tokens that must match verbatim: anything with a digit, an inner '_', '-', '.' or '/', or mixed case
    inside (SKUs, versions, sums, config keys, camelCase names)."""
    out = []
    for m in _IDENT_TOKEN.finditer(query):
        tok = m.group(0).strip(".,")
        if len(tok) < 2:
            continue
        inner = tok[1:-1]
        if (any(ch.isdigit() for ch in tok) or any(ch in inner for ch in "_-./")
                or (any(ch.isupper() for ch in tok[1:]) and any(ch.islower() for ch in tok))
                or (tok.isupper() and len(tok) >= 3)):
            out.append(tok)
    return out


def pin_terms(query: str) -> list[str]:
    """The query's identifiers strong enough to pin a sentence: config keys, codes, dotted versions, camelCase
    names (CACHE_TTL, NX-0520-X, 4.2.1, maxRetryCount). Bare numbers and years are not: "2024" sits in half
    the corpus, and pinning every sentence that holds it would spend the budget on them."""
    out = []
    for tok in exact_terms(query):
        inner = tok[1:-1]
        letters = any(ch.isalpha() for ch in tok)
        if ((any(ch in inner for ch in "_-/") and letters and len(tok) >= 4) or tok.count(".") >= 2
                or ("." in inner and letters)
                or (any(ch.isupper() for ch in tok[1:]) and any(ch.islower() for ch in tok))):
            out.append(tok)
    return out


@dataclass(frozen=True)
class PruneOutcome:
    candidates: list[Candidate]
    units_in: int
    units_kept: int
    dropped: list[str]  # chunk ids with no sentence kept
    pinned: int  # sentences kept because they hold a query term verbatim
    floored: list[str] = field(default_factory=list)  # chunk ids kept by their best sentence alone (keep_all)
    over_budget_tokens: int = 0  # what those sentences cost beyond token_budget


def prune_sentences(
    query: str, candidates: Sequence[Candidate], scorer: SpanScorer, *, token_budget: int,
    keep_neighbours: bool = True, max_unit_tokens: int = 80, chunk_weight: float = 1.0, keep_all: bool = False,
) -> PruneOutcome:
    """Keep whole sentences, most useful first, until the token budget is spent.

    A sentence's priority is its own score plus `chunk_weight` x (its chunk's score - the best chunk's score): the
    reranker's verdict on the whole chunk still counts, so a sentence of the top chunk beats an equally scored one
    further down. Sentences holding a query term verbatim (an SKU, a version, a config key) claim the budget
    first, then the rest in priority order.
    A kept sentence brings the one before it when it points back ("It", "However", ...) and its section heading,
    so it keeps its subject. Text is never rewritten: each kept run is a verbatim slice of the chunk, and runs
    that were not adjacent are joined by ' … '.
    keep_all: a chunk left with no sentence keeps its best one (a fact sentence, else its best title line) beyond
    the budget, so the list keeps its length; the outcome says which chunks and how many tokens that cost."""
    units = [sentence_units(c.text, max_unit_tokens) for c in candidates]
    scores = scorer(query, [(c.text, u) for c, u in zip(candidates, units)]) if candidates else []
    cost = [[estimate_llm_tokens(c.text[s:e]) for s, e in u] for c, u in zip(candidates, units)]
    kept: list[set[int]] = [set() for _ in candidates]
    spent = 0
    top_score = max((c.score for c in candidates), default=0.0)
    prio = [[float(scores[ci][ui]) + chunk_weight * (c.score - top_score) for ui in range(len(units[ci]))]
            for ci, c in enumerate(candidates)]

    def closure(ci: int, ui: int) -> list[int]:
        need = [ui]
        if keep_neighbours:
            j = ui
            text = candidates[ci].text
            while j > 0 and needs_previous(text[units[ci][j][0]:units[ci][j][1]]):
                j -= 1
                need.append(j)
            # The nearest heading or title line above the run (a title line itself needs no other title).
            for h in range(need[-1] - 1 if not is_title_like(text[units[ci][ui][0]:units[ci][ui][1]]) else -1, -1, -1):
                s, e = units[ci][h]
                if is_title_like(text[s:e]):
                    need.append(h)
                    break
        return need

    def claim(ci: int, ui: int) -> bool:
        nonlocal spent
        need = [j for j in closure(ci, ui) if j not in kept[ci]]
        extra = sum(cost[ci][j] for j in need)
        if not need or spent + extra > token_budget:
            return False
        kept[ci].update(need)
        spent += extra
        return True

    order = sorted(((p, -ci, -ui) for ci in range(len(candidates)) for ui, p in enumerate(prio[ci])), reverse=True)
    order_ids = [(-nci, -nui) for _, nci, nui in order]
    terms = [t.lower() for t in pin_terms(query)]
    pinned = 0
    if terms:
        for ci, ui in order_ids:
            s, e = units[ci][ui]
            if any(t in candidates[ci].text[s:e].lower() for t in terms) and claim(ci, ui):
                pinned += 1
    for ci, ui in order_ids:
        s, e = units[ci][ui]
        # A heading or title line alone tells the model nothing; it comes with the sentences under it (closure).
        if ui not in kept[ci] and not is_title_like(candidates[ci].text[s:e]):
            claim(ci, ui)

    floored: list[str] = []
    over = 0
    if keep_all:
        for ci, c in enumerate(candidates):
            if kept[ci] or not units[ci]:
                continue
            facts_first = sorted(range(len(units[ci])), key=lambda ui: (
                is_title_like(c.text[units[ci][ui][0]:units[ci][ui][1]]), -prio[ci][ui], ui))
            best = facts_first[0]
            kept[ci].add(best)
            over += cost[ci][best]
            floored.append(c.chunk_id)
    out: list[Candidate] = []
    dropped: list[str] = []
    for ci, c in enumerate(candidates):
        if not kept[ci]:
            dropped.append(c.chunk_id)
            continue
        spans = [units[ci][j] for j in sorted(kept[ci])]
        text = join_spans(c.text, spans, units[ci])
        ranked_c = c.with_rank(len(out) + 1, None, stage="prune", rank_before=c.rank, kept_spans=spans,
                               sentences=f"{len(spans)}/{len(units[ci])}")
        out.append(replace(ranked_c, text=text))
    return PruneOutcome(out, sum(len(u) for u in units), sum(len(k) for k in kept), dropped, pinned, floored, over)


def join_spans(text: str, spans: Sequence[Span], all_units: Sequence[Span]) -> str:
    """Verbatim runs of consecutive kept units (original spacing inside a run), runs joined by GAP."""
    index = {u: i for i, u in enumerate(all_units)}
    runs: list[list[int]] = []
    for s, e in spans:
        if runs and index.get((s, e), -2) == index.get((runs[-1][2], runs[-1][3]), -9) + 1:
            runs[-1][1], runs[-1][2], runs[-1][3] = e, s, e
        else:
            runs.append([s, e, s, e])
    return GAP.join(text[a:b] for a, b, _, _ in runs)


# -- sentence scorers ------------------------------------------------------------------------------------------------
def zscores(scores: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Scores of all sentences of one query standardised together (mean 0, sd 1), so scorers of different scales
    can be added. A constant scorer contributes zeros."""
    flat = np.concatenate([np.asarray(a, dtype=np.float64) for a in scores]) if scores else np.zeros(0)
    sd = float(flat.std()) if flat.size > 1 else 0.0
    if sd == 0.0:
        return [np.zeros(len(a)) for a in scores]
    mean = float(flat.mean())
    return [(np.asarray(a, dtype=np.float64) - mean) / sd for a in scores]


def hybrid_span_scorer(parts: Sequence[tuple[SpanScorer, float]]) -> SpanScorer:
    """Weighted sum of standardised sentence scores (contextual cosine, sentence BM25, ...): each scorer misses
    different sentences; on sample_corpus/eval.jsonl the sum kept more gold sentences at 300-400 tokens than either
    alone (bench/cascade.py, archived, budget_sweep in bench/results/cascade.json)."""

    def score(query: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        total = [np.zeros(len(spans)) for _, spans in items]
        for scorer, weight in parts:
            if weight:
                total = [t + weight * z for t, z in zip(total, zscores(scorer(query, items)))]
        return [t.astype(np.float32) for t in total]

    return score


def bm25_span_scorer(prefixes: Mapping[str, str] | None = None, *, k1: float = 1.2, b: float = 0.75) -> SpanScorer:
    """BM25 of each sentence against the query, with document frequencies taken over the candidate sentences of this
    query (what sets a sentence apart from its neighbours, not from the corpus), plus the BM25 of the context it is
    read in: its chunk's prefix (document title and section path, from `prefixes`: chunk text -> prefix) and the
    title line above it in the chunk. 'Revenue grew 2.8%' under 'Q2 2024 > Consumer division' then
    matches a question about Q2 hardware revenue. The context is scored apart from the sentence so a short
    sentence does not win on its context's words alone."""
    pre = dict(prefixes or {})

    def score(query: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        q_terms = set(tokenize(query))
        own: list[list[Counter[str]]] = []
        ctx: list[list[Counter[str]]] = []
        for text, spans in items:
            head = tokenize(pre[text]) if pre.get(text) else []
            own.append([Counter(tokenize(text[s:e])) for s, e in spans])
            ctx.append([Counter(head + tokenize(local)) for local in local_headings(text, spans)])
        return [a + c for a, c in zip(_bm25(q_terms, own, k1, b), _bm25(q_terms, ctx, k1, b))]

    return score


def _bm25(q_terms: set[str], bags: Sequence[Sequence[Counter[str]]], k1: float, b: float) -> list[np.ndarray]:
    flat = [bag for chunk in bags for bag in chunk]
    if not flat or not q_terms:
        return [np.zeros(len(chunk), dtype=np.float32) for chunk in bags]
    n = len(flat)
    df = Counter(t for bag in flat for t in q_terms if t in bag)
    avg = sum(sum(bag.values()) for bag in flat) / n or 1.0
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    out = []
    for chunk in bags:
        vals = []
        for bag in chunk:
            norm = k1 * (1 - b + b * sum(bag.values()) / avg)
            vals.append(sum(w * bag[t] * (k1 + 1) / (bag[t] + norm) for t, w in idf.items() if t in bag))
        out.append(np.asarray(vals, dtype=np.float32))
    return out


def sentence_prefixes(candidates: Sequence[Candidate], titles: Mapping[str, str],
                      heading_paths: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """chunk text -> 'document title > section > subsection', the context a sentence is read in when scored."""
    out = {}
    for c in candidates:
        parts = [titles.get(c.doc_id, ""), *heading_paths.get(c.chunk_id, ())]
        prefix = " > ".join(p.strip() for p in parts if p and p.strip())
        if prefix:
            out[c.text] = prefix
    return out


# -- duplicates and MMR ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Duplicate:
    dropped: str
    kept: str
    similarity: float
    exact: bool


@dataclass(frozen=True)
class DiversifyOutcome:
    candidates: list[Candidate]
    duplicates: list[Duplicate]
    floored: dict[int, int] = field(default_factory=dict)  # survivor index -> the rank MMR had given it


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) if v.size else v


_EN_FACT_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion half "
    "once twice first second third fourth fifth not no never none without cannot".split()
)
# Russian numerals and negations inflect: match by stem. A false match only keeps two texts apart (the safe side).
_RU_FACT_WORD = re.compile(r"^(не|нет|ни|без|никогда|один|одн[аоуий]|дв[аеу]|двух|тр[иеё]|четыр|пят|шест|сем[иь]?$|"
                           r"восем|девят|десят|сорок|сто|тысяч|миллион|половин)", re.IGNORECASE)
_WORD_RE = re.compile(r"\w+", re.UNICODE)


def facts(text: str) -> frozenset[str]:
    """What two near-identical texts must agree on to be duplicates: numbers, versions, sums, codes, keys, number
    words ("two" vs "three days") and negations ("may" vs "may not")."""
    words = {w.lower() for w in _WORD_RE.findall(text)
             if w.lower() in _EN_FACT_WORDS or (not w.isascii() and _RU_FACT_WORD.match(w))}
    return frozenset({t.lower() for t in exact_terms(text)} | words)


def collapse_duplicates(candidates: Sequence[Candidate], vectors: np.ndarray, *, threshold: float,
                        sims: np.ndarray | None = None) -> tuple[list[int], list[Duplicate]]:
    """Indices that survive, best-ranked first, and which chunk each dropped one duplicated. Equal normalised
    text is an exact duplicate. A near duplicate needs cosine >= threshold AND the very same facts (numbers,
    codes, keys): a draft that says "20 days" beside a final that says "30 days" carries news and stays, and so do
    two quarterly reports written from one template. `sims` (n x n) replaces the vectors' cosines when given."""
    vecs = _unit(vectors)
    if sims is None and len(vecs):
        sims = vecs @ vecs.T
    keep: list[int] = []
    seen: dict[str, int] = {}
    dups: list[Duplicate] = []
    for i, c in enumerate(candidates):
        h = sha256_text(normalise(c.text).lower())
        if h in seen:
            dups.append(Duplicate(c.chunk_id, candidates[seen[h]].chunk_id, 1.0, True))
            continue
        if keep and sims is not None and len(sims):
            mine = facts(c.text)
            near = [(float(sims[j, i]), j) for j in keep
                    if float(sims[j, i]) >= threshold and facts(candidates[j].text) == mine]
            if near:
                sim, j = max(near)
                dups.append(Duplicate(c.chunk_id, candidates[j].chunk_id, round(sim, 4), False))
                continue
        seen[h] = i
        keep.append(i)
    return keep, dups


def mmr_order(relevance: np.ndarray, vectors: np.ndarray, *, lam: float, k: int,
              sims: np.ndarray | None = None) -> list[int]:
    """Maximal marginal relevance: repeatedly take argmax of lam*rel - (1-lam)*max cosine to what is taken.
    Relevance is min-max scaled to [0, 1] so lam weighs two quantities of the same range; ties go to the
    earlier item, so lam = 1 returns the incoming order."""
    n = len(relevance)
    if n == 0:
        return []
    rel = np.asarray(relevance, dtype=np.float64)
    span = rel.max() - rel.min()
    rel = (rel - rel.min()) / span if span > 0 else np.ones(n)
    if sims is None:
        vecs = _unit(vectors)
        sims = vecs @ vecs.T if len(vecs) else np.zeros((n, n))
    chosen: list[int] = []
    best_sim = np.full(n, 0.0)
    left = list(range(n))
    while left and len(chosen) < k:
        vals = [lam * rel[i] - (1 - lam) * (best_sim[i] if chosen else 0.0) for i in left]
        pick = left[int(np.argmax(vals))]  # argmax takes the first maximum: incoming order breaks ties
        chosen.append(pick)
        left.remove(pick)
        best_sim = np.maximum(best_sim, sims[pick])
    return chosen


def keep_floor(order: Sequence[int], keep_top: int, keep_within: int) -> tuple[list[int], dict[int, int]]:
    """`order` (incoming indices in their new order) with each of the incoming first `keep_top` that landed below
    position `keep_within` (or was cut) put back at that position, in incoming order; the rest keep their order.
    Returns the order and, per moved index, the 1-based rank the reordering had given it. A reranker then promotes
    what the first stage ranked low without pushing the first stage's best hits out of the top `keep_within`
    (issue #44: on multi-hop questions naming their entities the reranker's reading lost what hybrid had found;
    MMR's diversity pushed the same pages down). Shared by the rerank and MMR stages."""
    out = list(order)
    keep_top = min(keep_top, keep_within)  # more protected than slots cannot all stay within them
    rank = {i: n for n, i in enumerate(out, start=1)}
    floored = {i: rank.get(i, len(out) + 1) for i in range(keep_top) if rank.get(i, len(out) + 1) > keep_within}
    if not floored:
        return out, floored
    rest = [i for i in out if i not in floored]
    top = rest[:keep_within]
    # The moved ones take the slots of the lowest unprotected entries of the top; those move just below it.
    free = [i for i in top if i >= keep_top]
    drop = set(free[len(free) - len(floored):])
    out = [i for i in top if i not in drop] + sorted(floored) + [i for i in top if i in drop] + rest[keep_within:]
    return out, floored



def diversify(candidates: Sequence[Candidate], vectors: np.ndarray, *, lam: float, dedup_threshold: float,
              k: int, sims: np.ndarray | None = None, keep_top: int = 0, keep_within: int = 5) -> DiversifyOutcome:
    """The MMR stage: collapse duplicates (recorded: which was dropped as a duplicate of which), then MMR over
    the survivors using their incoming scores as relevance. `sims` (n x n) replaces the vectors' cosines. With
    `keep_top`, the first keep_top survivors stay within the first keep_within (keep_floor): diversity reorders
    below them and among them, and never trades one of them for a less relevant, more different chunk."""
    if sims is None:
        v = _unit(vectors)
        sims = v @ v.T if len(v) else None
    keep, dups = collapse_duplicates(candidates, vectors, threshold=dedup_threshold, sims=sims)
    by_kept: dict[str, list[str]] = {}
    for d in dups:
        by_kept.setdefault(d.kept, []).append(d.dropped)
    survivors = [candidates[i] for i in keep]
    vecs = np.asarray(vectors)[keep] if len(keep) and len(vectors) else np.zeros((0, 0))
    sub = np.asarray(sims)[np.ix_(keep, keep)] if sims is not None and len(keep) else None
    order = mmr_order(np.array([c.score for c in survivors]), vecs, lam=lam, k=k, sims=sub)
    order, floored = keep_floor(order, keep_top, keep_within)
    order = order[:k]
    out = []
    for r, i in enumerate(order, start=1):
        c = survivors[i]
        extra = {"duplicates_dropped": ", ".join(by_kept[c.chunk_id])} if c.chunk_id in by_kept else {}
        if i in floored:
            extra["mmr_floored"] = floored[i]
        out.append(c.with_rank(r, None, stage="mmr", rank_before=c.rank, **extra))
    return DiversifyOutcome(out, dups, floored)




def lexical_similarity(texts: Sequence[str]) -> np.ndarray:
    """Cosine of TF-IDF word vectors (stemmed tokens, idf over these texts): a similarity that reads any language
    the tokenizer reads, for when the embedder does not cover the texts."""
    bags = [Counter(tokenize(t)) for t in texts]
    n = len(bags)
    df = Counter(w for b in bags for w in b)
    vocab = {w: i for i, w in enumerate(sorted(df))}
    m = np.zeros((n, len(vocab)), dtype=np.float64)
    for r, b in enumerate(bags):
        for w, tf in b.items():
            m[r, vocab[w]] = (1 + math.log(tf)) * math.log(1 + n / df[w])
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return (m @ m.T).astype(np.float32) if n else np.zeros((0, 0), dtype=np.float32)


def language_aware_similarity(vectors: np.ndarray, texts: Sequence[str], foreign: Sequence[bool]) -> np.ndarray:
    """Pairwise similarity for MMR and duplicate collapse: the embedder's cosine where it reads both texts, the
    lexical cosine for every pair that involves a text in a language it does not cover."""
    v = _unit(vectors)
    emb = v @ v.T if len(v) else np.zeros((len(texts), len(texts)), dtype=np.float32)
    f = np.asarray(foreign, dtype=bool)
    if not f.any():
        return emb
    lex = lexical_similarity(texts)
    mask = f[:, None] | f[None, :]
    return np.where(mask, lex, emb).astype(np.float32)
