"""Per-chunk entity and relation extraction: an offline statistical builder (no LLM) and LLM structured extraction."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Protocol, Sequence

from core.graph.model import ChunkExtraction, Mention, Relation
from core.graph.resolve import normalise_name
from core.models.llm import LLMRequest, TextBlock
from core.models.structured import recover_json
from core.text import EN_STOP, RU_STOP, redact, sentence_spans
from core.types import Chunk, Usage

# -- statistical builder ---------------------------------------------------------------------------------------
# In the spirit of LazyGraphRAG: no model reads the text. Nodes are named spans (runs of capitalised words),
# code identifiers (snake_case, camelCase, UPPER_CASE keys, SKU-like tokens) and multi-word lowercase terms
# (a stop-word-delimited stand-in for noun phrases); edges are co-occurrence within a chunk, stronger when the
# two share a sentence.

_TOKEN = re.compile(r"[^\W_][\w.\-]*[^\W_]|[^\W_]|\w+", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s\b")
_CONNECTORS = frozenset("of de da di del der den van von la le du al bin für".split())
# Verbs, adverbs and fillers that the search stop lists keep but that never head a term.
_EXTRA_STOP = frozenset(
    """about above across after again against all almost along already also although always among any anyone
    anything around because been before being below between both but cannot could each either else even ever
    every few first following further here however into just last least less like many may might more most
    much must near neither never next no nor not now off often once one only onto other others otherwise our
    out over own per perhaps rather same second several shall she should since so some still such than that
    their them then there therefore these they this those though three through thus too two under until upon
    us very via we well were whether while whose within without would yet you your our ours his her him he
    its it i me my mine us also new used using use uses based made make makes include includes including
    included per each said says see seen shown show shows within between among whereas whereby""".split()
)
STOP = EN_STOP | RU_STOP | _EXTRA_STOP
# Month and day names are capitalised but are dates, not entities; as nodes they would join everything.
_CALENDAR = frozenset(
    """january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday январь февраль март апрель май июнь июль август сентябрь октябрь
    ноябрь декабрь января февраля марта апреля мая июня июля августа сентября октября ноября декабря""".split()
)
_NUMBERISH = re.compile(r"v?\d+(?:[.,:\-/]\d+)*(?:st|nd|rd|th|[a-zµ%]{1,3})?", re.IGNORECASE)

TYPE_PRIORITY = {"identifier": 3, "named": 2, "phrase": 1}


@lru_cache(maxsize=200_000)
def token_kind(tok: str) -> str:
    """'ident' (code identifier / SKU), 'cap' (capitalised word or PascalCase name), 'word' (lowercase word),
    'stop', or 'other' (numbers, single letters)."""
    low = tok.lower()
    if _NUMBERISH.fullmatch(tok):
        return "other"
    has_alpha = any(ch.isalpha() for ch in tok)
    if not has_alpha:
        return "other"
    if len(tok) >= 3:
        if "_" in tok:
            return "ident"
        if any(ch.isdigit() for ch in tok):
            return "ident"
        if re.fullmatch(r"[^\W\d_]{2,}(?:\.[^\W\d_]{2,})+", tok):  # dotted config paths: ingest.batch_size
            return "ident"
        if re.search(r"[a-zа-яё][A-ZА-ЯЁ]", tok) and tok[0].islower():  # maxRetryCount
            return "ident"
    if low in STOP:
        return "stop"
    if tok[0].isupper():
        return "cap"
    if tok.isalpha() or re.fullmatch(r"[^\W\d_]+(?:-[^\W\d_]+)+", tok):
        return "word" if len(tok) >= 2 and not low.endswith("ly") else "stop"
    return "other"


@dataclass
class _Acc:
    surface_counts: dict[str, int]
    type: str
    count: int
    first: int
    sentences: set[int]


def _add(acc: dict[str, _Acc], surface: str, type_: str, pos: int, sent: int) -> None:
    norm = normalise_name(surface)
    if len(norm) < 2 or norm in STOP or norm in _CALENDAR:
        return
    a = acc.get(norm)
    if a is None:
        acc[norm] = _Acc({surface: 1}, type_, 1, pos, {sent})
        return
    a.surface_counts[surface] = a.surface_counts.get(surface, 0) + 1
    a.count += 1
    a.sentences.add(sent)
    if TYPE_PRIORITY.get(type_, 0) > TYPE_PRIORITY.get(a.type, 0):
        a.type = type_


def _tokens(text: str, start: int, end: int) -> list[tuple[str, int, int, bool]]:
    """(token, start, end, joined_to_previous): joined means only spaces separate it from the previous token."""
    out: list[tuple[str, int, int, bool]] = []
    prev_end = None
    for m in _TOKEN.finditer(text, start, end):
        tok, s, e = m.group(0), m.start(), m.end()
        gap = text[prev_end:s] if prev_end is not None else None
        # A single line break joins (PDF text wraps inside names); punctuation or a blank line separates.
        joined = gap is not None and gap.strip() == "" and gap.count("\n") <= 1
        out.append((tok, s, e, joined))
        prev_end = e
    return out


def _spans(tokens: list[tuple[str, int, int, bool]], mid_caps: set[str]) -> list[tuple[str, str, int]]:
    """Named spans, identifiers and terms of one sentence as (surface, type, char position)."""
    found: list[tuple[str, str, int]] = []
    kinds = [token_kind(t[0]) for t in tokens]
    # A capitalised word opening a sentence is only a name if the chunk also capitalises it mid-sentence.
    if kinds and kinds[0] == "cap" and (tokens[0][0] not in mid_caps) and not tokens[0][0].isupper():
        nxt = kinds[1] if len(kinds) > 1 and tokens[1][3] else None
        via_connector = (len(kinds) > 2 and tokens[1][0].lower() in _CONNECTORS and kinds[2] == "cap"
                         and tokens[2][3])  # "Jan de Wit is ..."
        if nxt != "cap" and not via_connector:
            low = tokens[0][0].lower()
            kinds[0] = "stop" if low in STOP else "word"
    i = 0
    n = len(tokens)
    while i < n:
        k = kinds[i]
        if k == "ident":
            found.append((tokens[i][0], "identifier", tokens[i][1]))
            i += 1
        elif k == "cap":
            j = i + 1
            while j < n and tokens[j][3] and (kinds[j] == "cap" or (tokens[j][0].lower() in _CONNECTORS and j + 1 < n
                                                                   and kinds[j + 1] == "cap" and tokens[j + 1][3])):
                j += 1
            words = [t[0] for t in tokens[i:j]]
            found.append((" ".join(words), "named", tokens[i][1]))
            i = j
        elif k == "word":
            j = i + 1
            while j < n and tokens[j][3] and kinds[j] == "word":
                j += 1
            if j - i >= 2:
                words = [t[0].lower() for t in tokens[max(i, j - 3):j]]  # the head sits at the end of an English term
                found.append((" ".join(words), "phrase", tokens[max(i, j - 3)][1]))
                if j - i >= 3:
                    # Runs often end in the verb ("the data engineer reports"): keep the opening pair as well.
                    found.append((" ".join(t[0].lower() for t in tokens[i:i + 2]), "phrase", tokens[i][1]))
            i = j
        else:
            i += 1
    return found


def _lone_mid_sentence_caps(per_sent: list[list[tuple[str, int, int, bool]]]) -> set[str]:
    """Capitalised words that stand alone (no capitalised neighbour) somewhere other than a sentence start:
    evidence that the word is a name in its own right ('Acme'), not a sentence opener ('Project code names')."""
    out = set()
    for toks in per_sent:
        for i in range(1, len(toks)):
            tok = toks[i][0]
            if not tok[:1].isupper():
                continue
            prev_cap = toks[i][3] and toks[i - 1][0][:1].isupper()
            next_cap = i + 1 < len(toks) and toks[i + 1][3] and toks[i + 1][0][:1].isupper()
            if not prev_cap and not next_cap:
                out.add(tok)
    return out


# What is not prose, blanked (same length, so positions hold) before entities are read: HTML tags with their
# attributes ('img src', 'div class'), fenced code blocks, and contractions, whose fragments otherwise become terms
# ("I'll tell" -> 'll tell', "let's say" -> 'let say').
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>\n]{0,400}?/?>", re.DOTALL)
_FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_CONTRACTION = re.compile(r"\b[^\W\d_]+(?:['’](?:ll|re|ve|d|m)|n['’]t)\b|\b(?:let|it|that|what|there|here|he|she|"
                          r"who|where|how|when|everything|nothing|someone|something)['’]s\b", re.IGNORECASE)


def _blank(m: re.Match[str]) -> str:
    return "".join(ch if ch == "\n" else " " for ch in m.group(0))


def prose(text: str) -> str:
    """The text with markup, fenced code and contractions blanked out (same length: offsets hold)."""
    for pattern in (_FENCED, _MARKUP, _CONTRACTION):
        text = pattern.sub(_blank, text)
    return text


def extract_statistical(chunk: Chunk, *, max_entities: int = 20) -> ChunkExtraction:
    """Entities and co-occurrence relations of one chunk, no model involved. Deterministic: same text, same rows."""
    text = _POSSESSIVE.sub("", prose(chunk.text))  # "Acme's" -> "Acme" keeps offsets stable enough for our use
    sents = sentence_spans(text)
    per_sent = [_tokens(text, s, e) for s, e in sents]
    mid_caps = _lone_mid_sentence_caps(per_sent)
    acc: dict[str, _Acc] = {}
    for si, toks in enumerate(per_sent):
        for surface, type_, pos in _spans(toks, mid_caps):
            _add(acc, surface, type_, pos, si)
    ranked = sorted(acc.items(), key=lambda kv: (-TYPE_PRIORITY[kv[1].type], -kv[1].count, kv[1].first, kv[0]))
    kept = ranked[:max_entities]
    mentions = tuple(
        Mention(max(a.surface_counts.items(), key=lambda sc: (sc[1], sc[0]))[0], norm, a.type, a.count)
        for norm, a in sorted(kept)
    )
    rels = []
    items = sorted(kept)
    for x in range(len(items)):
        for y in range(x + 1, len(items)):
            (na, a), (nb, b) = items[x], items[y]
            rels.append(Relation(na, nb, 1.0 if a.sentences & b.sentences else 0.5))
    return ChunkExtraction(chunk.chunk_id, chunk.doc_id, mentions, tuple(rels), "statistical")


# -- LLM extraction ----------------------------------------------------------------------------------------------
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"}},
            "required": ["name", "type", "description"], "additionalProperties": False}},
        "relations": {"type": "array", "items": {"type": "object", "properties": {
            "source": {"type": "string"}, "target": {"type": "string"}, "description": {"type": "string"},
            "weight": {"type": "number"}},
            "required": ["source", "target", "description", "weight"], "additionalProperties": False}},
    },
    "required": ["entities", "relations"],
    "additionalProperties": False,
}

EXTRACTION_INSTRUCTIONS = (
    "You build a knowledge graph from one passage of a company's documents. List the entities the passage "
    "names (people, organisations, projects, products, places, systems, configuration keys, documents, events) "
    "with a short type word and a one-sentence description grounded in the passage. List the relations between "
    "those entities that the passage states, each with a one-sentence description and a strength from 1 (weak) "
    "to 10 (explicit and central). Use the names as written in the passage. Do not add facts the passage does "
    "not contain. Reply with JSON only."
)


class ExtractionLLM(Protocol):
    """The slice of core.models.llm.LLM this module needs."""

    available: bool

    def complete(self, request: Any, *, workspace: str = ..., run_id: str = ...) -> Any: ...


def extraction_from_json(chunk: Chunk, data: Any, usage: Usage) -> ChunkExtraction:
    """Turn the model's JSON into mentions and relations; malformed items are dropped, never guessed."""
    ents: dict[str, Mention] = {}
    for e in (data or {}).get("entities", []) if isinstance(data, dict) else []:
        if not isinstance(e, dict) or not str(e.get("name", "")).strip():
            continue
        name = str(e["name"]).strip()
        norm = normalise_name(name)
        if not norm:
            continue
        count = max(1, chunk.text.lower().count(name.lower()))
        ents.setdefault(norm, Mention(name, norm, str(e.get("type", "entity")).strip().lower() or "entity", count,
                                      str(e.get("description", "")).strip()))
    rels: dict[tuple[str, str], Relation] = {}
    for r in (data or {}).get("relations", []) if isinstance(data, dict) else []:
        if not isinstance(r, dict):
            continue
        a, b = normalise_name(str(r.get("source", ""))), normalise_name(str(r.get("target", "")))
        if not a or not b or a == b:
            continue
        for name, norm in ((r.get("source"), a), (r.get("target"), b)):
            ents.setdefault(norm, Mention(str(name).strip(), norm, "entity", 1, ""))
        try:
            w = float(r.get("weight", 1.0))
        except (TypeError, ValueError):
            w = 1.0
        key = (min(a, b), max(a, b))
        rel = Relation(key[0], key[1], max(0.1, min(w, 10.0)), str(r.get("description", "")).strip())
        if key not in rels or rel.weight > rels[key].weight:
            rels[key] = rel
    return ChunkExtraction(chunk.chunk_id, chunk.doc_id, tuple(sorted(ents.values(), key=lambda m: m.norm)),
                           tuple(rels[k] for k in sorted(rels)), "llm", usage)


def extract_llm(chunk: Chunk, llm: ExtractionLLM, *, model: str, workspace: str, run_id: str = "") -> ChunkExtraction:
    """One structured-output call per chunk; the instructions are a cached system block (identical every call)."""
    req = LLMRequest(model=model, system=(TextBlock(EXTRACTION_INSTRUCTIONS, cache=True),),
                     user=(TextBlock(f"Passage:\n{chunk.text}"),), max_tokens=1500, json_schema=EXTRACTION_SCHEMA,
                     purpose="graph_extract", ref_id=chunk.chunk_id)
    resp = llm.complete(req, workspace=workspace, run_id=run_id)
    data = resp.data
    if data is None:  # a client that left the reply unparsed: recovered here, or a counted failure (fail open)
        got = recover_json(resp.text, EXTRACTION_SCHEMA)
        if not got.ok:
            return ChunkExtraction(chunk.chunk_id, chunk.doc_id, (), (), "llm", resp.usage, redact(got.failure))
        data = got.data
    return extraction_from_json(chunk, data, resp.usage)


def extraction_failure(exts: Sequence[ChunkExtraction]) -> str:
    """Why a batch of LLM extractions is a failed build, or "": no entity from any of its chunks is no graph, and a
    document marked processed with it would never be extracted again. Unusable replies are counted either way."""
    llm = [x for x in exts if x.source == "llm"]
    if not llm or any(x.mentions for x in llm):
        return ""
    bad = [x.failure for x in llm if x.failure]
    why = (f"; {len(bad)} of {len(llm)} replies were not usable JSON (first: {bad[0][:160]})" if bad else
           "; every reply was valid JSON with no entity")
    return f"the LLM extracted 0 entities from {len(llm)} chunk(s){why}"


Extractor = Callable[[Chunk], ChunkExtraction]


def make_extractor(builder: str, *, llm: ExtractionLLM | None, model: str, workspace: str,
                   max_entities: int) -> tuple[Extractor, str, str | None]:
    """The extractor to run, its label, and a notice when the LLM builder was asked for but cannot run."""
    if builder == "llm":
        if llm is not None and getattr(llm, "available", False):
            return (lambda c: extract_llm(c, llm, model=model, workspace=workspace)), "llm", None
        reason = getattr(llm, "reason", "no LLM configured")
        notice = f"graph.builder = llm but no LLM is available ({reason}); built statistically (no LLM) instead"
        return (lambda c: extract_statistical(c, max_entities=max_entities)), "statistical", notice
    return (lambda c: extract_statistical(c, max_entities=max_entities)), "statistical", None


def extract_all(chunks: Sequence[Chunk], extractor: Extractor,
                progress: Callable[[int, int], None] | None = None) -> list[ChunkExtraction]:
    out = []
    for i, c in enumerate(chunks):
        out.append(extractor(c))
        if progress and (i % 200 == 0 or i == len(chunks) - 1):
            progress(i + 1, len(chunks))
    return out
