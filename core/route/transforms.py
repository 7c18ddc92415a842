"""Query transforms (HyDE, multi-query, decomposition): each turns one question into the queries it retrieves with,
by Claude when a key is set, else by an honest offline method that is labelled as such; nothing here retrieves on
its own: retrieval comes in as a `search` function, so every generated query's list can be shown and fused."""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.retrieve.fusion import rrf
from core.text import EN_STOP, RU_STOP, tokenize
from core.types import DEFAULT_WORKSPACE, Candidate, Usage

Search = Callable[[str], list[Candidate]]


@dataclass(frozen=True)
class Rewrite:
    """The queries one transform produced, how, and what it cost."""

    transform: str
    queries: tuple[str, ...]
    method: str  # "llm" or a named offline method
    notes: tuple[str, ...] = ()
    usage: Usage = Usage()
    rounds: tuple[tuple[str, ...], ...] = ()  # decomposition: the queries of each round (bridge rounds after)


@dataclass(frozen=True)
class TransformResult:
    """One transform stage: its queries, each query's own list, and their RRF fusion (the stage's candidates)."""

    transform: str
    rewrite: Rewrite
    lists: Mapping[str, list[Candidate]] = field(default_factory=dict)
    fused: list[Candidate] = field(default_factory=list)


# -- helpers ---------------------------------------------------------------------------------------------------------
def unique_queries(queries: Sequence[str], question: str, seen: Sequence[str] = (), limit: int = 4) -> tuple[str, ...]:
    """Sub-queries never repeat: not each other, not the question, not a query an earlier transform issued
    (compared case- and space-insensitively)."""
    def key(s: str) -> str:
        return " ".join(s.lower().split()).strip(" ?.!")

    taken = {key(question), *(key(s) for s in seen)}
    out: list[str] = []
    for q in queries:
        q = " ".join(str(q).split())
        if q and key(q) not in taken:
            taken.add(key(q))
            out.append(q)
    return tuple(out[:limit])


def _clean_item(s: str) -> str:
    s = re.sub(r"^(?:the\s+)?(?:films?|movies?|songs?|albums?|books?|novels?|bands?|directors? of films?|"
               r"directors? of|people|persons?)\s+", "", s.strip(), flags=re.I)
    return s.strip(" ,;:?.!\"'«»“”")


# -- multi-query offline: split comparisons into one query per item --------------------------------------------------
_SPLITS = [
    # "Which film came out first, A or B?" (items may hold commas: split at the clause's first comma)
    re.compile(r"^(?:which|who|what|whose|where|when|кто|что|какой|какая|какое|где|когда)\b[^,:]*?[,:]\s*"
               r"(?P<a>.+?)\s+(?:or|или)\s+(?P<b>.+?)\s*\?*$", re.I),
    # "Does A have the same nationality as B?"
    re.compile(r"^(?:does|do|did|is|was|are|were)\s+(?P<a>.+?)\s+(?:have|has|had|share|is|was|hold)\s+the same\s+\w+"
               r"(?:\s+\w+)?\s+as\s+(?P<b>.+?)\s*\?*$", re.I),
    # "Who was born first out of A and B?"  / "between A and B"
    re.compile(r"\b(?:out of|between|among)\s+(?P<a>.+?)\s+(?:and|и)\s+(?P<b>.+?)\s*\??$", re.I),
    # "Are A and B both located ...", "Do both films A and B have ..."
    re.compile(r"^(?:are|were|do|does|did|is)\s+(?:both\s+)?(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?:both\b|from\b|located\b|"
               r"have\b|of the same\b|the same\b|in the same\b)", re.I),
    re.compile(r"\bboth\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?:have|are|were|from|located|in|of|the)\b", re.I),
    # "A vs B", "A versus B", "A против B"
    re.compile(r"(?P<a>[^,:?]+?)\s+(?:vs\.?|versus|против)\s+(?P<b>[^,:?]+)", re.I),
    # "compare A and/with/to B", "difference between A and B" (covered above), Russian "сравните A и B"
    re.compile(r"\b(?:compare|сравни(?:те)?)\s+(?P<a>.+?)\s+(?:and|with|to|и|с)\s+(?P<b>.+?)\s*[.?]?$", re.I),
    # "чем отличается A от B"
    re.compile(r"отлича\w*\s+(?P<a>.+?)\s+от\s+(?P<b>.+?)\s*\??$", re.I),
    # "X или Y" anywhere (Russian), "A or B?" at the end without a comma
    re.compile(r"(?P<a>[^,:?]+?)\s+(?:or|или)\s+(?P<b>[^,?]+?)\s*\??$", re.I),
]


def comparison_items(question: str) -> list[str]:
    """The compared items, in order, or [] when the question is not a recognisable comparison."""
    q = question.strip()
    for pat in _SPLITS:
        m = pat.search(q)
        if m:
            a, b = _clean_item(m.group("a")), _clean_item(m.group("b"))
            # a leading clause ("Which film came out first") is not an item: keep the tail after the last comma
            a = a.split(",")[-1].strip()
            if a and b and a.lower() != b.lower() and len(a) < 120 and len(b) < 120:
                return [a, b]
    return []


def split_comparison(question: str) -> Rewrite:
    items = comparison_items(question)
    if not items:
        return Rewrite("multi_query", (), "offline: comparison split",
                       ("offline multi-query only splits comparisons ('X or Y', 'X vs Y', 'both X and Y', "
                        "Russian 'или', 'против', 'сравните'); this question is not one, so it is searched as asked",))
    return Rewrite("multi_query", unique_queries(items, question), "offline: comparison split",
                   (f"one query per compared item: {' | '.join(items)}",))


# -- decomposition offline: templates for comparison and bridge questions ---------------------------------------------
RELATIONS = ("director", "composer", "performer", "singer", "author", "writer", "producer", "creator", "founder",
             "father", "mother", "spouse", "husband", "wife", "son", "daughter", "father-in-law", "mother-in-law",
             "grandfather", "grandmother", "child", "sibling", "brother", "sister", "publisher", "editor",
             "cinematographer", "screenwriter", "lyricist", "architect", "designer", "manager", "owner", "lead",
             "account manager", "head", "stepmother", "stepfather", "uncle", "aunt", "sibling-in-law",
             "brother-in-law", "sister-in-law", "son-in-law", "daughter-in-law", "grandson", "granddaughter",
             "nephew", "niece", "half-brother", "half-sister", "company", "record label")
_REL = "|".join(sorted((re.escape(r) for r in RELATIONS), key=len, reverse=True))
_REL_RE = re.compile(rf"\b(?P<rel>{_REL})s?\b", re.I)
# "the R of (the R2 of)* ENTITY" and "ENTITY's R"
_OF_CHAIN = re.compile(rf"\bthe\s+(?P<rel>(?:paternal |maternal )?(?:{_REL}))\s+of\s+(?:the\s+)?(?P<rest>.+?)\s*\??$",
                       re.I)
_POSSESSIVE = re.compile(rf"(?P<ent>.+?)'s\s+(?P<rel>(?:paternal |maternal )?(?:{_REL}))\b", re.I)
_LEAD = re.compile(r"^(?:(?:when|where|who|whom|what|which|how|why|did|does|do|is|was|are|were|country|nationality|"
                   r"place|date|year|the|of|in|from)\b\s*)+", re.I)
# trailing verbs of "Where was the director of film X born?" are not part of X
_TAIL = re.compile(r"\s+(?:born|die|died|dies|from|live|lived|living|work|worked|located|buried|come from|founded|"
                   r"published|based|study|studied|educated|graduate|graduated)\s*\??$", re.I)
# A capitalised name; lower-case particles (of, de, von...) only between capitalised words ("Ermengarde of Tours").
# A word of a name is capitalised; a full stop belongs only to an initial ("Robert A. Stemmle"), so "Bhandal. The"
# stops at the sentence end.
_NAME_WORD = r"(?:[A-Z]\.|[A-Z][\w\-']+)"
_NAME = rf"{_NAME_WORD}(?:\s+(?:(?:de|da|von|van|of|del|la|le|di|bin|ibn|y)\s+)?{_NAME_WORD})*"
# where a passage names the person a relation points to
_BRIDGE_CUES = {
    "director": [rf"directed by\s+(?P<n>{_NAME})", rf"director\s+(?P<n>{_NAME})", rf"(?P<n>{_NAME})'s\s+film"],
    "composer": [rf"composed by\s+(?P<n>{_NAME})", rf"music by\s+(?P<n>{_NAME})"],
    "performer": [rf"(?:performed|recorded|sung|released) by\s+(?P<n>{_NAME})", rf"by\s+(?P<n>{_NAME})"],
    "singer": [rf"(?:performed|recorded|sung) by\s+(?P<n>{_NAME})", rf"by\s+(?P<n>{_NAME})"],
    "author": [rf"(?:written|authored) by\s+(?P<n>{_NAME})", rf"by\s+(?P<n>{_NAME})"],
    "writer": [rf"(?:written|authored) by\s+(?P<n>{_NAME})", rf"by\s+(?P<n>{_NAME})"],
    "producer": [rf"produced by\s+(?P<n>{_NAME})"],
    "father": [rf"(?:son|daughter|child) of\s+(?P<n>{_NAME})", rf"father,?\s+(?P<n>{_NAME})"],
    "mother": [rf"mother,?\s+(?P<n>{_NAME})", rf"(?:son|daughter|child) of\s+[^.]*?\band\s+(?P<n>{_NAME})",
               rf"(?:son|daughter|child) of\s+(?P<n>{_NAME})"],
    "spouse": [rf"married\s+(?:to\s+)?(?P<n>{_NAME})", rf"(?:wife|husband|spouse)\s+(?:of\s+)?(?P<n>{_NAME})"],
    "husband": [rf"married\s+(?:to\s+)?(?P<n>{_NAME})", rf"husband\s+(?P<n>{_NAME})"],
    "wife": [rf"married\s+(?:to\s+)?(?P<n>{_NAME})", rf"wife\s+(?P<n>{_NAME})"],
}


def _relation_in(question: str) -> str:
    m = _REL_RE.search(question)
    return m.group("rel").lower() if m else ""


def bridge_name(passage: str, relation: str, exclude: str = "") -> str:
    """The person a passage names for `relation` ('directed by X' for director...), or '' when no cue matches.
    Offline stand-in for reading the passage: cue phrases, not understanding."""
    base = relation.split()[-1].replace("-in-law", "")
    for pat in _BRIDGE_CUES.get(base, [rf"{re.escape(base)}\s+(?:is|was)?\s*(?P<n>{_NAME})"]):
        for m in re.finditer(pat, passage):
            name = m.group("n").strip(" .,;")
            name = re.split(r"\s+(?:and|in|on|for|from|with|at|who|which|that)\s+", name)[0].strip(" .,;")
            if name and name.lower() != exclude.lower() and len(name) > 2:
                return name
    return ""


def decompose_plan(question: str) -> tuple[list[str], str, str]:
    """(first-round queries, relation to bridge on or '', kind) from the question's shape alone."""
    items = comparison_items(question)
    rel = _relation_in(question)
    if items:
        if rel:  # bridge comparison: each item, then the related person of each (bridge round)
            return [f"{it}" for it in items], rel, "comparison+bridge"
        return list(items), "", "comparison"
    m = _OF_CHAIN.search(question)
    if m:
        rest = _TAIL.sub("", m.group("rest"))
        nested = rest.lower().startswith(tuple(r + " of" for r in RELATIONS))
        inner = _OF_CHAIN.search("the " + rest) if nested else None
        target = inner.group("rest") if inner else rest
        first_rel = inner.group("rel") if inner else m.group("rel")
        return [_clean_item(target), f"{first_rel} of {_clean_item(target)}"], first_rel.lower(), "bridge"
    m = _POSSESSIVE.search(question)
    if m:
        ent = _LEAD.sub("", m.group("ent").strip()).strip()
        return [ent, f"{ent} {m.group('rel')}"], m.group("rel").lower(), "bridge"
    m = re.search(r"^who did\s+(?P<ent>.+?)\s+marry\s*\??$", question, re.I)
    if m:
        return [m.group("ent"), f"{m.group('ent')} spouse"], "spouse", "bridge"
    return [], "", ""


def decompose_offline(question: str, search: Search | None, *, limit: int = 4) -> Rewrite:
    """Templates: a comparison becomes one sub-question per item; a bridge question ('the R of X', "X's R") becomes
    X, then a bridge round that reads X's best passage for the person R points to and searches for that person."""
    first, rel, kind = decompose_plan(question)
    first_q = unique_queries(first, question, limit=limit)
    if not first_q:
        return Rewrite("decompose", (), "offline: templates",
                       ("no template matched (comparison, 'the R of X', \"X's R\"): searched as asked",))
    notes = [f"template: {kind}"]
    rounds = [first_q]
    bridge: list[str] = []
    if rel and search is not None:
        items = comparison_items(question) or [first[0]]
        for it in items:
            hits = search(it)
            name = ""
            for c in hits[:2]:  # the item's own page is usually first; the second catches a near-duplicate title
                name = bridge_name(c.text, rel, exclude=it)
                if name:
                    break
            if name:
                bridge.append(name)
                notes.append(f"bridge: the {rel} of {it!r} read as {name!r} from {hits[0].chunk_id}")
            else:
                notes.append(f"bridge: no '{rel}' cue found in the passages for {it!r}")
        bridge_q = unique_queries(bridge, question, seen=first_q, limit=limit)
        if bridge_q:
            rounds.append(bridge_q)
    queries = tuple(q for r in rounds for q in r)
    return Rewrite("decompose", queries, "offline: templates" + (" + bridge round" if len(rounds) > 1 else ""),
                   tuple(notes), rounds=tuple(rounds))


# -- HyDE offline analogue: pseudo-relevance feedback (RM3-style) -----------------------------------------------------
def prf_expansion(question: str, feedback: Sequence[Candidate], *, docs: int = 3, terms: int = 8) -> Rewrite:
    """RM3-style expansion: weight each term of the top `docs` passages by sum(P(t|d) * P(d|q)), with P(d|q) from the
    passages' scores (softmax over their ranks when scores are not comparable), keep the best `terms` that are not
    already in the question, and append them. No writer offline: this is the honest analogue of HyDE, not HyDE."""
    top = list(feedback[:docs])
    if not top:
        return Rewrite("hyde", (), "offline: pseudo-relevance feedback (RM3-style)",
                       ("no passages to learn from: the first retrieval found nothing",))
    q_terms = set(tokenize(question))
    weights = [math.exp(-i / 2) for i in range(len(top))]  # rank-based P(d|q): RRF scores are not probabilities
    z = sum(weights)
    score: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for c, w in zip(top, weights):
        words = re.findall(r"\w+", c.text)
        toks = tokenize(c.text)
        if not toks:
            continue
        tf = Counter(toks)
        for t, n in tf.items():
            if t not in q_terms and len(t) > 2 and not t.isdigit():
                score[t] += (n / len(toks)) * (w / z)
        for wd in words:  # a readable form of each stemmed term for the query text
            for t in tokenize(wd):
                surface.setdefault(t, wd.lower())
    best = [surface.get(t, t) for t, _ in score.most_common(terms)
            if surface.get(t, t) not in EN_STOP and surface.get(t, t) not in RU_STOP]
    if not best:
        return Rewrite("hyde", (), "offline: pseudo-relevance feedback (RM3-style)", ("no expansion terms found",))
    expanded = f"{question} {' '.join(best)}"
    return Rewrite("hyde", (expanded,), "offline: pseudo-relevance feedback (RM3-style)",
                   (f"HyDE needs an LLM; offline it expands the question with {len(best)} terms from the top "
                    f"{len(top)} passages: {', '.join(best)}",))


# -- LLM versions ----------------------------------------------------------------------------------------------------
_LIST_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
    "required": ["queries"], "additionalProperties": False,
}
_HYDE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"passage": {"type": "string"}}, "required": ["passage"],
    "additionalProperties": False,
}
_PROMPTS = {
    "multi_query": "Write up to {n} different search queries that together find the passages needed to answer the "
                   "question: for a comparison one query per compared item, otherwise paraphrases using other words. "
                   "Never repeat the question. Reply as JSON {{\"queries\": [...]}}.",
    "decompose": "Break the question into up to {n} simpler sub-questions that can each be answered from one passage, "
                 "in the order they must be answered. Never repeat the question. Reply as JSON {{\"queries\": [...]}}.",
    "hyde": "Write one short passage (3-4 sentences) that would answer the question, in the style of the documents. "
            "It is used only as a search query, so plausible detail is fine. Reply as JSON {{\"passage\": \"...\"}}.",
}


def llm_rewrite(transform: str, question: str, llm: LLM, model: str, *, limit: int = 4,
                workspace: str = DEFAULT_WORKSPACE) -> tuple[tuple[str, ...], str, Usage]:
    """(queries, problem, usage): problem is '' when the reply was usable. Never raises on a bad reply."""
    schema = _HYDE_SCHEMA if transform == "hyde" else _LIST_SCHEMA
    req = LLMRequest(model, (TextBlock(_PROMPTS[transform].format(n=limit)),), (TextBlock(f"Question: {question}"),),
                     max_tokens=400, json_schema=schema, purpose=f"transform:{transform}", ref_id=question[:80])
    try:
        resp = llm.complete(req, workspace=workspace)
    except LLMError as exc:
        return (), str(exc), Usage()
    data = resp.data
    if transform == "hyde":
        passage = data.get("passage") if isinstance(data, dict) else None
        if not isinstance(passage, str) or not passage.strip():
            return (), f"expected {{'passage': text}}, got {str(data)[:80]!r}", resp.usage
        return (passage.strip()[:2000],), "", resp.usage
    raw = data.get("queries") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        return (), f"expected {{'queries': [text, ...]}}, got {str(data)[:80]!r}", resp.usage
    queries = unique_queries(raw, question, limit=limit)
    if not queries:
        return (), "the list was empty or only repeated the question", resp.usage
    return queries, "", resp.usage


def rewrite(transform: str, question: str, *, llm: LLM | None, model: str, search: Search | None,
            feedback: Sequence[Candidate] = (), suggested: Sequence[str] = (), limit: int = 4,
            prf_docs: int = 3, prf_terms: int = 8, seen: Sequence[str] = (),
            workspace: str = DEFAULT_WORKSPACE) -> Rewrite:
    """One transform's queries: the LLM router's suggestion when it made one (no extra call), else the LLM when one
    is available, else (or when the LLM's reply is unusable) the offline method, with a note saying which."""
    notes: list[str] = []
    usage = Usage()
    if suggested and transform in ("multi_query", "decompose"):
        qs = unique_queries(suggested, question, seen=seen, limit=limit)
        if qs:
            return Rewrite(transform, qs, "llm (from the router's reply)", ("sub-queries came with the route: no "
                                                                            "extra LLM call",))
    if llm is not None and llm.available:
        qs, problem, usage = llm_rewrite(transform, question, llm, model, limit=limit, workspace=workspace)
        qs = unique_queries(qs, question, seen=seen, limit=limit) if transform != "hyde" else qs
        if qs and not problem:
            return Rewrite(transform, qs, "llm", (), usage)
        notes.append(f"LLM {transform} unusable ({(problem or 'nothing new')[:160]}): fell back to the offline method")
    if transform == "hyde":
        rw = prf_expansion(question, feedback, docs=prf_docs, terms=prf_terms)
    elif transform == "multi_query":
        rw = split_comparison(question)
    else:
        rw = decompose_offline(question, search, limit=limit)
    qs = unique_queries(rw.queries, question, seen=seen, limit=2 * limit if rw.rounds else limit)
    repeats = [q for q in rw.queries if q not in qs]
    if repeats and seen:
        notes.append(f"not repeated (an earlier transform searched them): {' | '.join(repeats)}")
    rounds = tuple(r for r in (tuple(q for q in rnd if q in qs) for rnd in rw.rounds) if r)
    return Rewrite(transform, qs, rw.method, (*notes, *rw.notes), usage, rounds)


def run_transform(rw: Rewrite, search: Search, *, rrf_k: int = 60, top: int = 50,
                  per_query: int | None = None) -> TransformResult:
    """Each query's own list from `search`, fused by RRF into the stage's candidates. `per_query` keeps only the head
    of each list: a sub-query's best passage is often in no other list, and over full lists RRF ranks it below
    passages that sit lower in several (the archived bench/route.py measured the bridge passages falling out of the top 10)."""
    lists = {q: search(q) for q in rw.queries}
    heads = [lst[:per_query] if per_query else lst for lst in lists.values()]
    fused = rrf(heads, k=rrf_k, names=[f"q{i + 1}" for i in range(len(lists))], top=top) if lists else []
    return TransformResult(rw.transform, rw, lists, fused)
