"""Answers that synthesize many passages: the graph global reduce as the answer, map-reduce / refine / tree over the
final chunks (offline extractive or Claude, each call its own trace stage) and comparisons, one cited sentence per
compared item."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, Protocol, Sequence

from core.answer.calibration import refusal_cut
from core.answer.crosslingual import CrossReader
from core.answer.stage import (
    ANSWER_INSTRUCTIONS,
    ANSWER_SCHEMA,
    REFUSAL,
    AnswerResult,
    _same_claim,
    answer_question,
    field_rescue,
    scored_sentences,
    with_field_first,
    with_value_first,
)
from core.answer.versions import DocHead
from core.answer.support import SentenceRow, SentenceScorer, load_support_model, model_fingerprint
from core.config import AnswerConfig
from core.models.llm import (
    FRAMING_TOKENS,
    LLM,
    LLMError,
    LLMRequest,
    TextBlock,
    current_limits,
    input_token_bound,
    worst_usd,
)
from core.models.fitted import sigmoid
from core.models.pricing import worst_call_usd
from core.text import llm_tokens_upper_bound, sentence_spans
from core.types import DEFAULT_WORKSPACE, Answer, Calibration, Candidate, StageInfo, StageResult, Usage

# -- the graph global reduce ---------------------------------------------------------------------------------------
GLOBAL_HEAD = "Across the corpus (graph communities most relevant to the question first):"
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset("""a an the of in on at to for and or but with by from as is are was were be been what which who whom
how why when where do does did across all any main this that these those it its their there about into over under than
compare compared versus vs between more less most least much many""".split())


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _content(text: str) -> set[str]:
    return {w for w in _words(text) if w not in _STOP and len(w) > 1}


@dataclass(frozen=True)
class Theme:
    """One community's line of a global answer: its title, the sentence quoted and the chunk it came from."""

    community: str
    title: str
    score: int
    sentence: str
    chunk_id: str


def _is_sentence(sent: str) -> bool:
    """A quotable claim: ordinary length, not a heading line, ends like a sentence."""
    return 30 <= len(sent) <= 400 and not sent.startswith("#") and sent.rstrip()[-1:] in ".!?…"


def _community_sentence(question: str, title: str, chunks: Sequence[Candidate], taken: Sequence[str],
                        retrieved: Mapping[str, int]) -> tuple[str, str] | None:
    """The sentence of a community's chunks that shares most words with the question, then comes from a chunk the
    question's own retrieval ranked highest (`retrieved`: chunk id -> rank), then names most of the community's
    title entities (a 'main themes' question shares none); none said already."""
    q = _content(question)
    names = [n.strip().lower() for n in title.split("·") if n.strip()]
    best: tuple[tuple[int, int, int, int, int], str, str] | None = None
    for rank, c in enumerate(chunks):
        body = "\n".join(line for line in c.text.splitlines() if not line.lstrip().startswith("#"))  # no headings
        for s, e in sentence_spans(body):
            sent = " ".join(body[s:e].split())
            if not _is_sentence(sent) or any(_same_claim(sent, t) for t in taken):
                continue
            low = sent.lower()
            key = (-len(q & _content(sent)), retrieved.get(c.chunk_id, len(retrieved) + 1),
                   -sum(1 for n in names if n and n in low), rank, s)
            if best is None or key < best[0]:
                best = (key, sent, c.chunk_id)
    return None if best is None else (best[1], best[2])


class Partial(Protocol):
    """One community's partial answer from graph global search's map (core.graph.stages.PartialHit)."""

    @property
    def community(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def score(self) -> int: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class GlobalReduce:
    """Graph global search's map as the answer stage reads it: the stage, its community chunks, the partial answers,
    and Claude's cited reduce when the map's plan was Claude's ('' and () otherwise)."""

    stage: str
    candidates: tuple[Candidate, ...]
    partials: tuple[Partial, ...]
    llm_answer: str = ""
    cited: tuple[str, ...] = ()


def global_themes(question: str, partials: Sequence[Partial], candidates: Sequence[Candidate], *,
                  max_themes: int = 5, retrieved: Sequence[Candidate] = ()) -> list[Theme]:
    """The offline reduce: the useful partial answers (score > 0) ranked by usefulness, one quoted sentence from each
    community's own chunks, communities that only repeat an earlier one's sentence dropped."""
    by_comm: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_comm.setdefault(str(c.meta.get("community", "")), []).append(c)
    themes: list[Theme] = []
    for p in sorted(partials, key=lambda p: (-int(p.score), str(p.community))):
        if int(p.score) <= 0 or len(themes) >= max_themes:
            continue
        comm, title = str(p.community), str(p.title)
        picked = _community_sentence(question, title, by_comm.get(comm, []), [t.sentence for t in themes],
                                     {c.chunk_id: i for i, c in enumerate(retrieved)})
        if picked is not None:
            themes.append(Theme(comm, title, int(p.score), picked[0], picked[1]))
    return themes


def global_answer(question: str, partials: Sequence[Partial], candidates: Sequence[Candidate], *,
                  llm_answer: str = "", llm_cited: Sequence[str] = (), max_themes: int = 5,
                  retrieved: Sequence[Candidate] = ()) -> AnswerResult:
    """The answer when graph global search ran: Claude's cited reduce (`llm_answer`, citing community ids
    `llm_cited`: each becomes that community's best chunk), or the offline extractive reduce over the partials."""
    top_chunk: dict[str, str] = {}
    for c in candidates:
        top_chunk.setdefault(str(c.meta.get("community", "")), c.chunk_id)
    if llm_answer.strip():
        comms = [c for c in llm_cited if c in top_chunk]
        cites = tuple(dict.fromkeys(top_chunk[c] for c in comms))
        notes = ["graph global search: Claude's reduce over the community partial answers is the answer",
                 f"cited communities {', '.join(comms) or 'none'} -> their top chunks"]
        return AnswerResult(Answer(llm_answer.strip(), cites, False, "llm"), notes=tuple(notes))
    themes = global_themes(question, partials, candidates, max_themes=max_themes, retrieved=retrieved)
    if not themes:
        return AnswerResult(Answer(f"{REFUSAL} (graph global search found no community useful to the question)", (),
                                   True, "extractive"), notes=("graph global search: no partial answer to reduce",))
    lines = [f"{i}. {t.title}: {t.sentence} [{t.chunk_id}]" for i, t in enumerate(themes, 1)]
    notes = ("graph global search: extractive reduce (offline) - the partial answers ranked by usefulness, one "
             "sentence quoted from each community's chunks, repeats dropped",
             "communities: " + ", ".join(f"{t.community} ({t.score})" for t in themes))
    return AnswerResult(Answer(GLOBAL_HEAD + "\n" + "\n".join(lines), tuple(dict.fromkeys(t.chunk_id for t in themes)),
                               False, "extractive"), notes=notes)


# -- comparisons ---------------------------------------------------------------------------------------------------
_QUARTERS = {"q1": "first quarter", "q2": "second quarter", "q3": "third quarter", "q4": "fourth quarter"}
# 'and' joins compared items only in a question that says it compares; 'or' in any question; 'versus' always.
_SPLIT_AND = re.compile(r"\s+(?:versus|vs\.?|compared (?:with|to)|against|or|and|или|и|против)\s+", re.IGNORECASE)
_SPLIT_OR = re.compile(r"\s+(?:versus|vs\.?|compared (?:with|to)|against|or|или|против)\s+", re.IGNORECASE)
_ASKS_AND = re.compile(r"\b(?:compare|comparison|versus|vs\.?|compared|differ|difference|between)\b|сравн|разниц",
                       re.IGNORECASE)
_DET = {"the", "a", "an"}
_TOKEN = re.compile(r"[\w€$£%.\-]+", re.UNICODE)


def _itemish(tok: str) -> bool:
    """A token that names an item by itself: has a digit or a capital (Q2, 2024, AB-100, Software)."""
    return any(ch.isdigit() for ch in tok) or tok[:1].isupper()


def _run(tokens: Sequence[str]) -> list[str]:
    out: list[str] = []
    for t in tokens:
        if not _itemish(t):
            break
        out.append(t)
    return out


def compared_items(question: str) -> list[str]:
    """The two items a comparison question sets side by side ('Q1 2024' and 'Q2 2024', 'draft' and 'final'), or []
    when it is not one. The right item is read at the start of the part after the last 'and / or / versus' (its
    leading capitalised or numbered words, else its first content word); the left item is the same number of
    words just before the conjunction, or (the right part starting with an article) the word after the left part's
    last article."""
    q = question.strip().rstrip("?.!")
    parts = (_SPLIT_AND if _ASKS_AND.search(q) else _SPLIT_OR).split(q)
    if len(parts) < 2:
        return []
    left, right = " ".join(parts[:-1]), parts[-1]
    lt = [t.strip(".,;:") for t in _TOKEN.findall(left)]
    rt = [t.strip(".,;:") for t in _TOKEN.findall(right)]
    lt, rt = [t for t in lt if t], [t for t in rt if t]
    parallel = bool(rt) and rt[0].lower() in _DET  # 'the draft ... versus the final ...': items follow articles
    while rt and rt[0].lower() in _DET:
        rt = rt[1:]
    if not rt or not lt:
        return []
    ry = _run(rt)
    lx = _run(list(reversed(lt)))[::-1]
    if ry and lx:
        n = min(len(ry), len(lx))
        return [" ".join(lx[-n:]), " ".join(ry[:n])]
    rw = next((t for t in rt if t.lower() not in _STOP), "")
    dets = [i for i, t in enumerate(lt) if t.lower() in _DET and i + 1 < len(lt)]
    lw = lt[dets[-1] + 1] if dets and parallel else lt[-1]
    if not rw or not lw or rw.lower() == lw.lower():
        return []
    return [lw, rw]


def _item_terms(item: str) -> list[set[str]]:
    """Ways a passage may name an item: its words, and a quarter's spelled-out name ('Q2 2024': 'second quarter
    2024'); any one of them, all of its words, counts."""
    words = _words(item)
    out = [words]
    for short, long in _QUARTERS.items():
        if short in words:
            out.append((words - {short}) | set(long.split()))
    return out


def _names(row: SentenceRow, item: str) -> bool:
    text = _words(f"{row.context} {row.text}")
    return any(ts and ts <= text for ts in _item_terms(item))


def compare_answer(question: str, items: Sequence[str], rows: Sequence[SentenceRow], probs: Sequence[float], *,
                   floor: float) -> AnswerResult:
    """One cited sentence per compared item: the best-supported sentence whose text or its document title and
    heading names the item (one naming no other item first), held to `floor`; an item no such sentence reaches is said to be missing. Refuses only
    when every item is missing."""
    lines, cites, missing = [], [], []
    for item in items:
        named = [i for i, r in enumerate(rows) if _names(r, item)]
        # a sentence about this item alone says more about it than one naming every item
        alone = [i for i in named if not any(_names(rows[i], other) for other in items if other != item)]
        best = max(alone or named, key=lambda i: (probs[i], -rows[i].rank), default=None)
        if best is None or probs[best] < floor:
            missing.append(item)
            lines.append(f"{item}: {REFUSAL[:-1]} (no retrieved passage about {item} answers this).")
            continue
        lines.append(f"{item}: {rows[best].text} [{rows[best].chunk_id}]")
        cites.append(rows[best].chunk_id)
    notes = [f"comparison of {' vs '.join(repr(i) for i in items)}: one sentence per item (support >= {floor:.2f})"]
    if missing:
        notes.append(f"the corpus lacks: {', '.join(missing)}")
    refused = len(missing) == len(items)
    return AnswerResult(Answer("\n".join(lines), tuple(dict.fromkeys(cites)), refused, "extractive"),
                        notes=tuple(notes), support=max(probs, default=0.0))


# -- map-reduce, refine, tree --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Synthesis:
    """A synthesized answer and the calls that made it, each a trace stage (map·1, reduce, refine·2, tree·1 ...)."""

    result: AnswerResult
    calls: tuple[StageResult, ...] = ()  # their usage is theirs: the answer stage's own usage does not repeat it
    source: str | None = None  # the stage that answered instead of the final candidates (graph_global)


@dataclass(frozen=True)
class ReadChunk:
    """A chunk a synthesis call read or kept: its id, the first 300 characters, and its support when scored."""

    chunk_id: str
    text: str
    support: Any = None  # the chunk's support (candidate meta "support"), None when it has none

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "text": self.text,
                **({"support": self.support} if self.support is not None else {})}


@dataclass(frozen=True, eq=False)
class CallInfo(StageInfo):
    """What one synthesis call records (map, map·n, reduce, refine·n, tree·n, compare): the chunks it read or kept,
    and what the call said of them: a refine's draft refusing, a map's notes, the items a comparison compared."""

    chunks: tuple[ReadChunk, ...]
    refused: bool | None = None  # refine·n: the draft after this call refuses
    notes: str | None = None  # map·n (Claude): the notes the call took
    compared: tuple[str, ...] | None = None  # compare: the items compared (its key is "items")

    def to_dict(self) -> dict[str, Any]:
        return {"chunks": [c.to_dict() for c in self.chunks],
                **({"refused": self.refused} if self.refused is not None else {}),
                **({"notes": self.notes} if self.notes is not None else {}),
                **({"items": list(self.compared)} if self.compared is not None else {})}


@dataclass
class _Calls:
    stages: list[StageResult] = field(default_factory=list)

    def add(self, name: str, cands: Sequence[Candidate], t0: float, usage: Usage = Usage(),
            notes: Sequence[str] = (), *, refused: bool | None = None, said: str | None = None,
            items: Sequence[str] | None = None) -> None:
        # The chunks a call read or kept go in its info, not its candidate list: the trace's final candidates (what
        # evaluation scores) stay those of the retrieval stage the answer read.
        read = tuple(ReadChunk(c.chunk_id, c.text[:300], c.meta.get("support")) for c in cands)
        self.stages.append(StageResult(name, (), (time.perf_counter() - t0) * 1000, usage, None, tuple(notes),
                                       CallInfo(read, refused, said, None if items is None else tuple(items))))

    @property
    def usage(self) -> Usage:
        return sum((s.usage for s in self.stages), Usage())


def extractive_synthesis(mode: str, question: str, candidates: Sequence[Candidate], rows: Sequence[SentenceRow],
                         scores: Sequence[float], *, support: float, cut: float, margin: float,
                         max_sentences: int, lead: Callable[[list[int]], list[int]] | None = None) -> Synthesis:
    """Offline map-reduce / refine / tree over the support model's sentence scores (its ranker's log-odds) and its
    support for an answer (the gate's probability, held to `cut` as the stuff answer is).
    map: each chunk's best sentence for the question (one stage lists them); reduce: those within `margin` of the
    best, best first, one per chunk, repeats dropped, cited. refine: chunks in rank order, a sentence (within the
    margin) kept only when it brings question words the answer does not have yet. tree: chunks in groups of four,
    each group's best sentence, then the reduce over the groups' winners. `lead`: reorders the picked sentences (the
    line that states the asked attribute first, core.answer.stage.with_field_first)."""
    calls = _Calls()
    t0 = time.perf_counter()
    by_chunk: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_chunk.setdefault(r.chunk_id, []).append(i)
    order = list(dict.fromkeys(c.chunk_id for c in candidates if c.chunk_id in by_chunk))
    best = {cid: max(by_chunk[cid], key=lambda i: (scores[i], -i)) for cid in order}
    docs = {c.chunk_id: c.doc_id for c in candidates}
    mapped = [Candidate(cid, docs[cid], rows[best[cid]].text, float(scores[best[cid]]), n,
                        {"stage": "map", "support": round(sigmoid(float(scores[best[cid]])), 4)})
              for n, cid in enumerate(order, 1)]
    calls.add("map", mapped, t0, notes=[f"offline map: the best sentence of each of {len(mapped)} chunks"])
    t0 = time.perf_counter()
    pool = order
    if mode == "tree":
        pool = [max(order[g:g + 4], key=lambda cid: scores[best[cid]]) for g in range(0, len(order), 4)]
        calls.add("tree·1", [m for m in mapped if m.chunk_id in pool], t0,
                  notes=[f"{(len(order) + 3) // 4} group(s) of up to 4 chunks: each group's best sentence"])
        t0 = time.perf_counter()
    step = "refine" if mode == "refine" else "reduce"
    if support < cut:
        calls.add(step, [], t0, notes=[f"support {support:.2f} below the cut {cut:.2f}: refused"])
        return Synthesis(AnswerResult(Answer(f"{REFUSAL} Support for an answer is {support:.0%}, below the {cut:.0%} "
                                             "an answer needs.", (), True, "extractive"), support=support),
                         tuple(calls.stages))
    top = max(scores[best[cid]] for cid in pool)
    near = [cid for cid in pool if scores[best[cid]] >= top - margin]
    picked: list[int] = []
    have: set[str] = set()
    q = _content(question)
    for cid in (near if mode == "refine" else sorted(near, key=lambda c: -scores[best[c]])):
        i = best[cid]
        if len(picked) >= max_sentences:
            break
        if any(_same_claim(rows[i].text, rows[j].text) for j in picked):
            continue
        if mode == "refine" and picked and not ((q & _content(rows[i].text)) - have):
            continue  # adds no question word the answer lacks
        picked.append(i)
        have |= q & _content(rows[i].text)
    if lead is not None:
        picked = lead(picked)
    kept_ids = {rows[i].chunk_id for i in picked}
    calls.add(step, [m for m in mapped if m.chunk_id in kept_ids], t0,
              notes=[f"{len(picked)} sentence(s) within {margin:.2f} of the best score, one per chunk, repeats dropped"])
    text = " ".join(f"{rows[i].text} [{rows[i].chunk_id}]" for i in picked)
    return Synthesis(AnswerResult(Answer(text, tuple(dict.fromkeys(rows[i].chunk_id for i in picked)), False,
                                         "extractive"), notes=(f"answer.synthesis = {mode} (offline, extractive)",),
                                  support=support), tuple(calls.stages))


MAP_INSTRUCTIONS = (
    "You read one passage of a document collection and note what in it helps answer the question: the facts, "
    "briefly, in the passage's own terms. If nothing helps, return an empty string. Use only the passage."
)
MAP_SCHEMA = {"type": "object", "properties": {"notes": {"type": "string"}}, "required": ["notes"],
              "additionalProperties": False}
REFINE_INSTRUCTIONS = (
    "You improve a draft answer with one more passage. Keep what the draft says, add what the passage adds, cite "
    "the ids of the passages that support each claim (the draft's citations stay valid), and set `refused` only if "
    "neither the draft nor the passage answers the question. Use only what you were given."
)


class SynthesisBudget(LLMError):
    """A Claude synthesis stopped before a call whose worst case did not fit its dollars; `calls` are the stages of
    the calls it made (paid, so they stay in the trace)."""

    def __init__(self, message: str, calls: Sequence[StageResult] = ()) -> None:
        super().__init__(message, "budget")
        self.calls = tuple(calls)


@dataclass
class _Spend:
    """answer.max_usd for one synthesis, and the caller's own dollars (call_limits, e.g. the agentic loop's) when it
    set any: the less of the two is what a call's worst case must fit."""

    usd: float
    spent: float = 0.0

    def left(self) -> float:
        lim = current_limits()
        outer = lim.usd() if lim is not None else None
        own = self.usd - self.spent
        return own if outer is None else min(own, outer)


def _request(model: str, system: str, user: Sequence[str], schema: Mapping[str, Any], max_tokens: int,
             purpose: str, ref: str) -> LLMRequest:
    return LLMRequest(model=model, system=(TextBlock(system, cache=True),), user=tuple(TextBlock(u) for u in user),
                      max_tokens=max_tokens, json_schema=dict(schema), purpose=purpose, ref_id=ref)


def _ask(llm: LLM, req: LLMRequest, *, workspace: str, spend: _Spend | None = None,
         calls: "_Calls | None" = None) -> tuple[dict[str, Any], Usage]:
    if spend is not None:  # the worst case of this very request, before it is sent (core.models.llm.worst_usd)
        worst = worst_usd(req)
        if worst > spend.left() + 1e-12:
            raise SynthesisBudget(f"{req.purpose} call not started: its worst case ${worst:.4f} is above the "
                                  f"${max(spend.left(), 0.0):.4f} left of the synthesis budget", calls.stages if calls
                                  else ())
    resp = llm.complete(req, workspace=workspace, run_id=req.ref_id)
    if spend is not None:
        spend.spent += resp.usage.usd
    return (resp.data if isinstance(resp.data, dict) else {}), resp.usage


def synthesis_worst_usd(mode: str, question: str, candidates: Sequence[Candidate], *, model: str, max_tokens: int,
                        reduce_instructions: str) -> float:
    """The most a Claude synthesis over these candidates can cost: every map (or refine) request's own worst case,
    and every reduce with each note it reads at its full allowance (a note is an earlier call's output, at most
    max_tokens, re-read as input). Checked against answer.max_usd before the first call."""
    def bound(system: str, user: Sequence[str], schema: Mapping[str, Any]) -> int:
        return input_token_bound(_request(model, system, user, schema, max_tokens, "answer", ""))

    def priced(tokens: int) -> float:
        return worst_call_usd(model, tokens, 0, max_tokens)

    note = max_tokens + llm_tokens_upper_bound('<passage id="">\n\n</passage>\n\n') + 8  # a note and its framing
    if mode == "refine":
        return sum(priced(bound(REFINE_INSTRUCTIONS, ["Draft:  (citations: )", f'<passage id="{c.chunk_id}">\n'
                                                      f'{c.text}\n</passage>', f"Question: {question}"],
                                ANSWER_SCHEMA) + note) for c in candidates)
    maps = sum(worst_usd(_request(model, MAP_INSTRUCTIONS, [f'<passage id="{c.chunk_id}">\n{c.text}\n</passage>',
                                                            f"Question: {question}"], MAP_SCHEMA, max_tokens,
                                  "answer_map", "")) for c in candidates)
    base = bound(reduce_instructions, ["Passages:\n", f"Question: {question}"], ANSWER_SCHEMA) + FRAMING_TOKENS
    n = len(candidates)
    if mode == "tree" and n > 4:
        groups = (n + 3) // 4
        return maps + sum(priced(base + min(4, n - 4 * g) * note) for g in range(groups)) + priced(base + groups * note)
    return maps + priced(base + n * note)


def llm_synthesis(mode: str, question: str, candidates: Sequence[Candidate], llm: LLM, *, model: str,
                  max_tokens: int, workspace: str, query_id: str, reduce_instructions: str,
                  max_usd: float | None = None) -> Synthesis:
    """Claude's map-reduce / refine / tree: every call a stage with its usage and time. The number of calls is
    bounded by the candidates handed in (answer.max_chunks) and each call's output by answer.max_tokens. With
    `max_usd` (answer.max_usd) no call starts unless the whole synthesis's worst case (synthesis_worst_usd) fits
    it and the caller's call_limits, and each call's own worst case fits what is left: else SynthesisBudget, carrying
    the calls already made."""
    calls = _Calls()
    given = {c.chunk_id for c in candidates}
    spend = None
    if max_usd is not None:
        spend = _Spend(max_usd)
        worst = synthesis_worst_usd(mode, question, candidates, model=model, max_tokens=max_tokens,
                                    reduce_instructions=reduce_instructions)
        if worst > spend.left() + 1e-12:
            outer = " or the caller's budget" if current_limits() is not None else ""
            raise SynthesisBudget(f"Claude {mode} not started: its worst case ${worst:.4f} over {len(candidates)} "
                                  f"chunk(s) is above the ${max(spend.left(), 0.0):.4f} it may spend (answer.max_usd "
                                  f"${max_usd:.2f}{outer})")

    def final(data: Mapping[str, Any]) -> AnswerResult:
        cited = [str(c) for c in data.get("citations") or [] if str(c) in given]
        refused = bool(data.get("refused")) or not str(data.get("answer", "")).strip()
        return AnswerResult(Answer(str(data.get("answer", "")).strip() or REFUSAL, () if refused else
                                   tuple(dict.fromkeys(cited)), refused, "llm"), Usage(),
                            (f"answer.synthesis = {mode}: {len(calls.stages)} Claude call(s)",))

    if mode == "refine":
        draft: dict[str, Any] = {"answer": "", "citations": [], "refused": True}
        for n, c in enumerate(candidates, 1):
            t0 = time.perf_counter()
            data, usage = _ask(llm, _request(model, REFINE_INSTRUCTIONS,
                                             [f"Draft: {draft.get('answer', '')} (citations: "
                                              f"{', '.join(map(str, draft.get('citations') or []))})",
                                              f'<passage id="{c.chunk_id}">\n{c.text}\n</passage>',
                                              f"Question: {question}"], ANSWER_SCHEMA, max_tokens, "answer_refine",
                                             f"{query_id}:refine{n}"), workspace=workspace, spend=spend, calls=calls)
            draft = data or draft
            calls.add(f"refine·{n}", [c], t0, usage, refused=bool(draft.get("refused")))
        return Synthesis(final(draft), tuple(calls.stages))
    notes: list[tuple[str, str]] = []
    for n, c in enumerate(candidates, 1):
        t0 = time.perf_counter()
        data, usage = _ask(llm, _request(model, MAP_INSTRUCTIONS, [f'<passage id="{c.chunk_id}">\n{c.text}\n'
                                                                   f'</passage>', f"Question: {question}"],
                                         MAP_SCHEMA, max_tokens, "answer_map", f"{query_id}:map{n}"),
                           workspace=workspace, spend=spend, calls=calls)
        note = str(data.get("notes", "")).strip()
        calls.add(f"map·{n}", [c], t0, usage, said=note)
        if note:
            notes.append((c.chunk_id, note))

    def reduce(name: str, part: Sequence[tuple[str, str]]) -> dict[str, Any]:
        t0 = time.perf_counter()
        body = "\n\n".join(f'<passage id="{cid}">\n{text}\n</passage>' for cid, text in part)
        data, usage = _ask(llm, _request(model, reduce_instructions, [f"Passages:\n{body}", f"Question: {question}"],
                                         ANSWER_SCHEMA, max_tokens, "answer_reduce", f"{query_id}:{name}"),
                           workspace=workspace, spend=spend, calls=calls)
        calls.add(name, [c for c in candidates if c.chunk_id in {p[0] for p in part}], t0, usage)
        return data

    if not notes:
        return Synthesis(AnswerResult(Answer(f"{REFUSAL} (no passage had anything for the question)", (), True, "llm")),
                         tuple(calls.stages))
    if mode == "tree" and len(notes) > 4:
        level = []
        for g in range(0, len(notes), 4):
            data = reduce(f"tree·{g // 4 + 1}", notes[g:g + 4])
            if not data.get("refused") and str(data.get("answer", "")).strip():
                cites = [str(x) for x in data.get("citations") or [] if str(x) in given] or [notes[g][0]]
                level.append((cites[0], str(data["answer"]).strip()))
        notes = level or notes
    return Synthesis(final(reduce("reduce", notes)), tuple(calls.stages))


def pick_mode(setting: str, route: str | None, items: Sequence[str]) -> str:
    """The synthesis a question gets: the setting, or for auto its route's (comparison with two items found:
    compare; multi-hop: map_reduce; otherwise stuff)."""
    if setting != "auto":
        return setting
    if len(items) == 2:
        return "compare"
    if route == "multi-hop":
        return "map_reduce"
    return "stuff"



def synthesized_answer(
    question: str, candidates: Sequence[Candidate], cfg: AnswerConfig, llm: LLM, *, route: str | None = None,
    global_reduce: GlobalReduce | None = None, workspace: str = DEFAULT_WORKSPACE, query_id: str = "",
    titles: Mapping[str, str] | None = None, li_scorer: SentenceScorer | None = None, blind: bool = False,
    vocabulary: Collection[str] | None = None, full_texts: Mapping[str, str] | None = None,
    calibration: Calibration | None = None, documents: Mapping[str, DocHead] | None = None,
    cross: CrossReader | None = None, headings: Mapping[str, Sequence[str]] | None = None,
) -> Synthesis:
    """The answer stage with synthesis: graph global search's reduce when `global_reduce` has partial answers;
    else answer.synthesis (auto: by the route and the question's shape); stuff is core.answer.stage's answer."""
    if global_reduce is not None and global_reduce.partials:
        g = global_reduce
        return Synthesis(global_answer(question, g.partials, g.candidates, llm_answer=g.llm_answer,
                                       llm_cited=list(g.cited), retrieved=candidates), source=g.stage)
    items = compared_items(question) if cfg.synthesis == "auto" else []
    mode = pick_mode(cfg.synthesis, route, items)
    top = list(candidates)[: cfg.max_chunks]
    use_llm = cfg.mode == "llm" or (cfg.mode == "auto" and llm.available)
    if mode == "stuff" or not top or (mode == "compare" and use_llm and llm.available):
        res = answer_question(question, candidates, cfg, llm, workspace=workspace, query_id=query_id, titles=titles,
                              li_scorer=li_scorer, blind=blind, vocabulary=vocabulary, full_texts=full_texts,
                              calibration=calibration, documents=documents, cross=cross, headings=headings)
        return Synthesis(res)
    paid: tuple[StageResult, ...] = ()  # Claude calls made before a budget stop: paid, so they stay in the trace
    if use_llm and llm.available:
        try:
            return llm_synthesis(mode, question, top, llm, model=cfg.model, max_tokens=cfg.max_tokens,
                                 workspace=workspace, query_id=query_id, reduce_instructions=ANSWER_INSTRUCTIONS,
                                 max_usd=cfg.max_usd)
        except SynthesisBudget as exc:
            fallback, paid = (f"{exc}; extractive {mode} instead",), exc.calls
        except LLMError as exc:
            fallback = (f"Claude {mode} failed ({exc}); extractive {mode} instead",)
    else:
        fallback = (f"answer.mode = llm but {llm.reason}: extractive {mode} instead",) if cfg.mode == "llm" else ()
    model = load_support_model()
    cut = refusal_cut(cfg.refusal_threshold, calibration, model.threshold, model_fingerprint())
    scored = scored_sentences(question, top, titles=titles, li_scorer=li_scorer, blind=blind, model=model,
                              vocabulary=vocabulary, full_texts=full_texts)
    rows, scores = scored.table.rows, scored.probs
    row_p = [sigmoid(float(z)) for z in scores]  # each sentence's own probability
    if not rows:
        return Synthesis(answer_question(question, candidates, cfg, llm, workspace=workspace, query_id=query_id,
                                         titles=titles, li_scorer=li_scorer, blind=blind, vocabulary=vocabulary,
                                         full_texts=full_texts, calibration=calibration),
                         paid)
    if scored.best < cut.value and field_rescue(question, rows, top, full_texts, titles, documents):
        # the field line that states the asked attribute of the record named: the plain answer quotes it
        return Synthesis(answer_question(question, candidates, cfg, llm, workspace=workspace, query_id=query_id,
                                         titles=titles, li_scorer=li_scorer, blind=blind, vocabulary=vocabulary,
                                         full_texts=full_texts, calibration=calibration, documents=documents,
                                         cross=cross), paid)
    common = fallback + (f"refusal threshold {cut.value:.2f}: {cut.source}",) + scored.notes
    if mode == "compare":
        t0 = time.perf_counter()
        res = compare_answer(question, items, rows, row_p, floor=COMPARE_FLOOR * cut.value)
        if res.answer.refused:  # no item found by name: the items may be named otherwise; the plain answer reads it
            plain = answer_question(question, candidates, cfg, llm, workspace=workspace, query_id=query_id,
                                    titles=titles, li_scorer=li_scorer, blind=blind, vocabulary=vocabulary,
                                    full_texts=full_texts, calibration=calibration)
            return Synthesis(AnswerResult(plain.answer, plain.usage, plain.notes + res.notes + (
                "no compared item named in a retrieved sentence: the plain answer instead",), plain.support,
                plain.threshold, plain.threshold_from))
        calls = _Calls()
        calls.add("compare", [], t0, items=items)
        return Synthesis(AnswerResult(res.answer, res.usage, common + res.notes, scored.best, cut.value, cut.source),
                         tuple(calls.stages))
    syn = extractive_synthesis(mode, question, top, rows, scores, support=scored.best, cut=cut.value,
                               margin=model.pick_margin, max_sentences=cfg.max_sentences,
                               lead=lambda p: with_field_first(
                                   question, rows, scores, with_value_first(question, rows, scores, p,
                                                                            max_sentences=cfg.max_sentences),
                                   top, full_texts, titles, documents, max_sentences=cfg.max_sentences))
    r = syn.result
    return Synthesis(AnswerResult(r.answer, r.usage, common + r.notes, r.support, cut.value, cut.source),
                     paid + syn.calls)


# A compared item's sentence needs half the support a whole answer needs: it answers one side of the question, so the
# support model (fitted on whole questions) scores it lower. Set before measuring; not tuned on any question set.
COMPARE_FLOOR = 0.5
