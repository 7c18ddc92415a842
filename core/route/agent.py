"""Agentic retrieval loop: rounds of the pipeline, a grader, a decision, hard budgets and a closed set of stop reasons.

A round runs the ordinary pipeline (`run_query`, never a copy of it) on the round's query, grades what came back,
adds the useful candidates to an evidence pool and decides: answer, search again with a bridging query, or stop.
Every budget (rounds, LLM calls, tokens, dollars, seconds) is checked before a call with a worst-case estimate and
after it with the real usage, so a run can end early but never overspend.
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence, get_args

import numpy as np

from core.models import DATA_DIR
from core.models.fitted import FittedLinear, load_fitted, sigmoid
from core.models.llm import LLM, LLMError, LLMRequest, TextBlock, call_limits, input_token_bound, worst_usd
from core.route.transforms import (
    decompose_plan,  # the templates the decomposition transform uses
)
from core.text import EN_STOP, RU_STOP, tokenize
from core.types import AgentRecord, Candidate, InRound, StageInfo, StageResult, Trace, Usage

StopReason = Literal["answered", "refused_no_evidence", "no_new_evidence", "budget_rounds", "budget_llm_calls",
                     "budget_tokens", "budget_usd", "budget_time", "error"]
STOP_REASONS: tuple[str, ...] = get_args(StopReason)
Grade = Literal["correct", "ambiguous", "incorrect"]
GRADER_FILE = DATA_DIR / "agent_grader.npz"


# -- budgets ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    max_rounds: int = 2
    max_llm_calls: int = 6
    max_tokens: int = 30_000
    max_usd: float = 0.05
    max_seconds: float = 60.0


@dataclass
class Spend:
    """What a run has used so far. `allows` is asked before every LLM call with a worst-case estimate."""

    budget: Budget
    clock: Callable[[], float] = time.monotonic
    llm_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    @property
    def seconds(self) -> float:
        return self.clock() - self.started

    def allows(self, est_tokens: int = 0, est_usd: float = 0.0, *, llm_call: bool = False,
               est_seconds: float = 0.0) -> StopReason | None:
        """None when the next step fits every budget, else the budget it would break."""
        b = self.budget
        if self.seconds + est_seconds > b.max_seconds:
            return "budget_time"
        if llm_call and self.llm_calls + 1 > b.max_llm_calls:
            return "budget_llm_calls"
        if self.tokens + est_tokens > b.max_tokens:
            return "budget_tokens"
        if self.usd + est_usd > b.max_usd + 1e-12:
            return "budget_usd"
        return None

    def charge(self, usage: Usage) -> None:
        self.llm_calls += usage.calls
        self.tokens += usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.usd += usage.usd

    def as_dict(self) -> dict[str, Any]:
        return {"llm_calls": self.llm_calls, "tokens": self.tokens, "usd": round(self.usd, 6),
                "seconds": round(self.seconds, 3)}


def worst_case(request: LLMRequest) -> tuple[int, float]:
    """An upper bound on a call's tokens and dollars: the client's own bound (core/models/llm.py), which no reply's
    usage is ever booked above (a cache write at its price included), plus max_tokens of output."""
    return input_token_bound(request) + request.max_tokens, worst_usd(request)


def guarded_call(llm: LLM, request: LLMRequest, spend: Spend, workspace: str) -> tuple[Any, StopReason | None]:
    """One LLM call inside the budget: refused beforehand when the worst case would break a budget, charged after."""
    est_tokens, est_usd = worst_case(request)
    why = spend.allows(est_tokens, est_usd, llm_call=True)
    if why:
        return None, why
    resp = llm.complete(request, workspace=workspace)
    spend.charge(resp.usage if resp.usage.calls else Usage(resp.usage.input_tokens, resp.usage.output_tokens,
                                                           resp.usage.cache_write_tokens, resp.usage.cache_read_tokens,
                                                           resp.usage.usd, 1))
    return resp, None


def _flag_note(resp: Any) -> tuple[str, ...]:
    """The trace note of a call whose provider usage was replaced (core/models/llm.py check_usage)."""
    flag = getattr(resp, "usage_flag", "")
    return (flag,) if flag else ()


# -- grading ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grading:
    grades: tuple[tuple[str, Grade, float], ...]  # chunk_id, grade, probability of being useful
    verdict: Grade
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    grader: str = "offline"


class Grader(Protocol):
    name: str

    def grade(self, question: str, candidates: Sequence[Candidate], spend: Spend, workspace: str) -> Grading: ...


def content_terms(text: str) -> set[str]:
    stop = EN_STOP | RU_STOP
    return {t for t in tokenize(text) if t not in stop and len(t) > 1}


GRADE_FEATURES = ("question_terms_in_chunk", "reciprocal_rank", "score_z", "score_gap_to_next")


def grade_features(question: str, candidates: Sequence[Candidate]) -> list[list[float]]:
    """Features the pipeline already has: share of the question's content terms in the chunk, reciprocal rank,
    the score's z-value within the list and its gap to the next one."""
    q = content_terms(question)
    scores = [float(c.score) for c in candidates]
    mu = sum(scores) / len(scores) if scores else 0.0
    sd = math.sqrt(sum((s - mu) ** 2 for s in scores) / len(scores)) if scores else 0.0
    rows = []
    for i, c in enumerate(candidates):
        terms = content_terms(c.text)
        cover = len(q & terms) / len(q) if q else 0.0
        z = (scores[i] - mu) / sd if sd > 0 else 0.0
        gap = (scores[i] - scores[i + 1]) / sd if sd > 0 and i + 1 < len(scores) else 0.0
        rows.append([cover, 1.0 / (i + 1), z, gap])
    return rows


@dataclass(frozen=True)
class GraderModel:
    """Logistic coefficients over grade_features, fitted by `python -m train.agent_grader` (data, not code)."""

    weights: tuple[float, ...] = (4.0, 2.0, 0.6, 0.2)
    bias: float = -3.0
    upper: float = 0.6  # >= upper: correct
    lower: float = 0.25  # < lower: incorrect
    fitted_on: str = "defaults (not fitted)"

    @classmethod
    def load(cls, path: Path = GRADER_FILE) -> "GraderModel":
        if not path.is_file():
            return cls()
        rec = load_fitted(path, features=GRADE_FEATURES, recipe="python -m train.agent_grader")
        return cls(tuple(float(w) for w in rec.coef), float(rec.intercept), float(rec.threshold or cls.upper),
                   float(rec.meta.get("lower", cls.lower)), str(rec.provenance.get("source", path.name)))

    def record(self, provenance: Mapping[str, str]) -> FittedLinear:
        """The shipped file's form: `upper` is the record's threshold, `lower` rides in meta."""
        return FittedLinear(GRADE_FEATURES, np.asarray(self.weights), np.asarray(self.bias), threshold=self.upper,
                            provenance=provenance, meta={"lower": self.lower})

    def prob(self, row: Sequence[float]) -> float:
        return sigmoid(self.bias + sum(w * f for w, f in zip(self.weights, row)))


class OfflineGrader:
    """CRAG-style grades without an LLM: a calibrated probability from what the pipeline computed."""

    name = "offline"

    def __init__(self, model: GraderModel | None = None) -> None:
        self.model = model or GraderModel.load()

    def grade(self, question: str, candidates: Sequence[Candidate], spend: Spend, workspace: str) -> Grading:
        rows = grade_features(question, candidates)
        grades = []
        for c, row in zip(candidates, rows):
            p = self.model.prob(row)
            g: Grade = "correct" if p >= self.model.upper else "incorrect" if p < self.model.lower else "ambiguous"
            grades.append((c.chunk_id, g, round(p, 4)))
        return Grading(tuple(grades), pool_verdict([g for _, g, _ in grades]))


def pool_verdict(grades: Sequence[Grade]) -> Grade:
    if "correct" in grades:
        return "correct"
    return "ambiguous" if "ambiguous" in grades else "incorrect"


GRADE_SCHEMA = {
    "type": "object",
    "properties": {"grades": {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"}, "grade": {"type": "string", "enum": ["correct", "ambiguous", "incorrect"]}},
        "required": ["id", "grade"], "additionalProperties": False}}},
    "required": ["grades"],
    "additionalProperties": False,
}
GRADE_INSTRUCTIONS = ("Grade each passage for the question: correct (it states a fact the answer needs), ambiguous "
                      "(related, not enough), incorrect (unrelated). Return JSON with one grade per passage id.")


class LLMGrader:
    """One Claude call per round grades every candidate (batched in one prompt); malformed output falls back to the
    offline grader and says so."""

    name = "llm"

    def __init__(self, llm: LLM, model: str, fallback: Grader | None = None, max_chars: int = 1200) -> None:
        self.llm, self.model, self.fallback, self.max_chars = llm, model, fallback or OfflineGrader(), max_chars

    def grade(self, question: str, candidates: Sequence[Candidate], spend: Spend, workspace: str) -> Grading:
        body = "\n\n".join(f'<passage id="{c.chunk_id}">\n{c.text[: self.max_chars]}\n</passage>' for c in candidates)
        req = LLMRequest(self.model, (TextBlock(GRADE_INSTRUCTIONS, cache=True),),
                         (TextBlock(f"Passages:\n{body}"), TextBlock(f"Question: {question}")),
                         max_tokens=24 + 16 * len(candidates), json_schema=GRADE_SCHEMA, purpose="grade")
        before = spend.usd, spend.llm_calls, spend.tokens
        try:
            resp, why = guarded_call(self.llm, req, spend, workspace)
        except LLMError as exc:
            return self._fallback(question, candidates, spend, workspace, f"grader call failed ({exc})")
        if why:
            return self._fallback(question, candidates, spend, workspace, f"grader call skipped: {why}")
        usage = Usage(0, 0, 0, 0, spend.usd - before[0], spend.llm_calls - before[1])
        try:
            items = resp.data["grades"] if isinstance(resp.data, Mapping) else json.loads(resp.text)["grades"]
            by_id = {str(i["id"]): str(i["grade"]) for i in items}
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            g = self._fallback(question, candidates, spend, workspace, f"grader reply malformed ({type(exc).__name__})")
            return Grading(g.grades, g.verdict, usage, g.notes, g.grader)
        grades = []
        for c in candidates:
            grade = by_id.get(c.chunk_id, "ambiguous")
            grade = grade if grade in ("correct", "ambiguous", "incorrect") else "ambiguous"
            grades.append((c.chunk_id, grade, {"correct": 1.0, "ambiguous": 0.5, "incorrect": 0.0}[grade]))
        return Grading(tuple(grades), pool_verdict([g for _, g, _ in grades]), usage, _flag_note(resp), "llm")

    def _fallback(self, question: str, candidates: Sequence[Candidate], spend: Spend, workspace: str,
                  why: str) -> Grading:
        g = self.fallback.grade(question, candidates, spend, workspace)
        return Grading(g.grades, g.verdict, g.usage, (*g.notes, f"{why}; offline grader used"), g.grader)


# -- next queries ------------------------------------------------------------------------------------------------------
_NAME = re.compile(r"(?:[A-ZÀ-ÖØ-ÞА-ЯЁ][\w'’\-]*)(?:[ \t]+(?:(?:of|the|de|von|van|da|di|la|le|du|del|and|y|у|и)[ \t]+)?"
                   r"[A-ZÀ-ÖØ-ÞА-ЯЁ0-9][\w'’\-]*)*")
_SENT = re.compile(r"(?<=[.!?])\s+")
_LEAD_STOP = {"Are", "Is", "Was", "Were", "Do", "Does", "Did", "Both", "How", "The", "A", "An", "In", "On", "He", "She", "It", "They", "His", "Her", "Its", "This", "That", "After",
              "Before", "During", "When", "As", "At", "By", "For", "From", "With", "Who", "What", "Which", "Where"}


def names_in(text: str) -> list[str]:
    out = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0] in _LEAD_STOP:
            words = words[1:]
        if words:
            out.append(" ".join(words).rstrip(".'’"))
    return out


@dataclass(frozen=True)
class NextQueries:
    queries: tuple[str, ...]
    why: str
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    writer: str = "offline-bridge"
    blocked: StopReason | None = None  # a budget refused the writer's call
    targeted: int = 0  # the first `targeted` queries each name the one entity a hop points to (see hop_queries)


class Writer(Protocol):
    name: str

    def next_queries(self, question: str, evidence: Sequence[Candidate], tried: Sequence[str], spend: Spend,
                     workspace: str) -> NextQueries: ...


# The first hop of a relation the question asks about: "X's father-in-law" is the father of X's spouse, so X's own
# passage names the spouse, not the father-in-law; "paternal grandmother" goes through the father.
_HOP = {"father-in-law": "spouse", "mother-in-law": "spouse", "sibling-in-law": "spouse", "brother-in-law": "spouse",
        "sister-in-law": "spouse", "child-in-law": "child", "son-in-law": "child", "daughter-in-law": "child",
        "paternal grandfather": "father", "paternal grandmother": "father", "maternal grandfather": "mother",
        "maternal grandmother": "mother", "grandfather": "father", "grandmother": "father", "stepmother": "father",
        "stepfather": "mother", "uncle": "father", "aunt": "father", "grandson": "child", "granddaughter": "child",
        "husband": "spouse", "wife": "spouse", "singer": "performer", "writer": "author", "screenwriter": "author"}
# Where a passage names the entity of a hop: the cue, then a capitalised name within a few words after it. Cue
# phrases, not reading: a stand-in for "search again with what you learned" without a model.
_CUES = {"director": r"direct\w*(?: and \w+)?(?: by)?", "composer": r"(?:compos\w*|music|score)(?: \w+)?(?: by)?",
         "performer": r"(?:perform\w*|sung|recorded|released|single|song|album) by|by",
         "father": r"(?:son|daughter|child|heir) of|father,?",
         "mother": r"mother,?|(?:son|daughter|child) of [^.]*? and",
         "spouse": r"married(?: to)?|marriage to|(?:wife|husband|spouse|consort)(?: of)?|wed",
         "child": r"(?:son|daughter|children|child|heir)s?,?|(?:mother|father) of",
         "author": r"(?:written|authored|writer|author|novel) by|by", "producer": r"produc\w*(?: by)?",
         "founder": r"found\w*(?: by)?", "creator": r"creat\w*(?: by)?", "publisher": r"publish\w*(?: by)?"}
_TITLES = re.compile(r"^(?:(?:King|Queen|Emperor|Empress|Holy Roman Emperor|Caliph|Pope|Sir|Dame|Archduke|Archduchess|"
                     r"Prince|Princess|Duke|Duchess|Count|Countess|Lord|Lady)\s+)+(?=\S+\s+\S)")
# A lone capitalised word that is a nationality or a language ("American", "Polish") is not an entity to look up;
# leading ones ("Trinidadian-American Nicki Minaj") are dropped only when they are in this list (a first name such
# as Brian or Susan ends the same way).
_DEMONYM = re.compile(r"^[A-ZÀ-Þ][a-zà-ÿ]+(?:ian|ean|can|ese|ish|ic|an|i)$")
_NATIONALITIES = frozenset(
    "American British English French German Italian Spanish Indian Canadian Australian Japanese Chinese Russian Polish "
    "Swedish Danish Norwegian Dutch Irish Scottish Welsh Mexican Brazilian Argentine Argentinian Korean Greek Turkish "
    "Austrian Swiss Belgian Hungarian Czech Finnish Portuguese Iranian Persian Egyptian Israeli Filipino Indonesian "
    "Pakistani Bengali Tamil Telugu Malayalam Kannada Hindi Soviet Trinidadian Nigerian African Venezuelan Colombian "
    "Chilean Cuban Romanian Bulgarian Serbian Croatian Ukrainian Armenian Estonian Latvian Lithuanian Icelandic "
    "Jamaican Kenyan Thai Vietnamese Malaysian Singaporean Lebanese Syrian Iraqi Saudi Moroccan Algerian Tunisian "
    "Catalan Basque Flemish Slovak Slovenian Albanian Macedonian Bosnian Georgian Peruvian Uruguayan Bolivian "
    "Ecuadorian Hollywood Bollywood".split())


def _drop_nationality(name: str) -> str:
    words = name.split()
    while len(words) > 1 and all(p in _NATIONALITIES or _DEMONYM.match(p) for p in words[0].split("-")) and (
            "-" in words[0] or words[0] in _NATIONALITIES):
        words = words[1:]
    return " ".join(words)


def hop_relation(question: str) -> str:
    """The relation whose entity the question's own subject passage names ('director' for "Where was the director
    of film X born?", 'spouse' for "Who is X's father-in-law?"), or '' when the question names none."""
    rel = decompose_plan(question)[1].lower().strip()
    return _HOP.get(rel, rel.split()[-1] if rel else "")


def hop_names(text: str, hop: str, exclude: set[str], limit: int = 1) -> list[str]:
    """Names a passage gives right after a cue for `hop` ('directed by X', 'son of X', 'married X'), skipping names
    made only of the question's words (the subject itself) and lone nationality words."""
    cue = _CUES.get(hop) or (rf"{re.escape(hop)}\w*(?: of| by| is| was)?" if hop else "")
    out: list[str] = []
    for m in re.finditer(rf"\b(?:{cue})\s+", text, re.I) if cue else ():
        tail = text[m.end(): m.end() + 80]
        for n in names_in(tail):
            if tail.find(n) > 40:
                break
            n = _TITLES.sub("", _drop_nationality(re.split(r"\s+and\s+", n)[0])).strip()
            terms = content_terms(n)
            if len(n) < 3 or not terms or terms <= exclude or (" " not in n and (
                    _DEMONYM.match(n) or all(_DEMONYM.match(p) for p in n.split("-")))):
                continue
            if n not in out:
                out.append(n)
            break
        if len(out) >= limit:
            break
    return out


def subject_passages(question: str, evidence: Sequence[Candidate], top: int = 6) -> list[Candidate]:
    """The passages about an entity the question names: their leading name is made of the question's words."""
    q = content_terms(question)
    out = []
    for c in evidence[:top]:
        lead = names_in(c.text[:120])
        if lead and content_terms(lead[0]) and content_terms(lead[0]) <= q:
            out.append(c)
    return out


def hop_queries(question: str, evidence: Sequence[Candidate], limit: int = 2) -> list[str]:
    """One query per subject passage (two for a comparison of two items): the name its hop cue points to, alone, so
    that entity's own passage comes first (the relation's other words would pull the subject's passage back)."""
    hop = hop_relation(question)
    if not hop:
        return []
    q_terms = content_terms(question)
    out: list[str] = []
    for c in subject_passages(question, evidence)[:limit]:
        out += [n for n in hop_names(c.text, hop, q_terms) if n not in out]
    return out[:limit]


class BridgeWriter:
    """Offline next query by entity bridging (IRCoT-style, no LLM). First the targeted hops: in each passage about
    the question's subject, the name a cue for the question's relation points to ("directed by X" for "the director
    of film ..."), searched alone. Then one wide query with every new name of the best passages, then the sentence
    that covers most of the question, asked about a name the question does not give."""

    name = "offline-bridge"

    def __init__(self, per_round: int = 2, passages: int = 3, hops: int = 2) -> None:
        self.per_round, self.passages, self.hops = per_round, passages, hops

    def next_queries(self, question: str, evidence: Sequence[Candidate], tried: Sequence[str], spend: Spend,
                     workspace: str) -> NextQueries:
        q_terms = content_terms(question)
        q_lower = question.lower()
        # The question's relation words (what it asks about the names it gives) find the bridging sentence:
        # "When did Lothair II's mother die?" -> the sentence with "mother", not the one that repeats "Lothair II".
        named = set().union(*(content_terms(n) for n in names_in(question))) if names_in(question) else set()
        relation = q_terms - named
        picks: list[tuple[tuple[int, int], str, str]] = []
        for c in evidence[: self.passages]:
            for sent in _SENT.split(c.text):
                s_terms = content_terms(sent)
                overlap = (len(relation & s_terms), len(q_terms & s_terms))
                if not overlap[1]:
                    continue
                missing = q_terms - s_terms - content_terms(c.text[:80])
                unresolved = [w for w in re.findall(r"\w+", question) if content_terms(w) & missing]
                for name in names_in(sent):
                    if name.lower() in q_lower or len(name) < 3 or content_terms(name) <= q_terms:
                        continue
                    picks.append((overlap, name, " ".join(unresolved)))
        picks.sort(key=lambda p: (-p[0][0], -p[0][1]))
        out: list[str] = []
        seen = {normalise_query(t) for t in tried}

        def add(query: str) -> None:
            if query and normalise_query(query) not in seen:
                out.append(query)
                seen.add(normalise_query(query))

        # The targeted hops do not count against per_round: they are what the question needs next.
        hops = [h for h in hop_queries(question, evidence, self.hops) if normalise_query(h) not in seen]
        for h in hops:
            add(h)
        targeted = len(out)
        # One wide query with every new name of the best passages (what any of them may lead to), then the
        # best-placed names with the question's unresolved words.
        wide = [n for c in evidence[: self.passages] for n in names_in(c.text)
                if n.lower() not in q_lower and len(n) >= 3]
        add(" ".join(dict.fromkeys(wide))[:1000])
        used: list[str] = []
        for _, name, rest in picks:
            if len(out) >= targeted + self.per_round:
                break
            if any(name in u for u in used):
                continue
            used.append(name)
            add(f"{name} {rest}".strip())
        why = (f"hop to {', '.join(out[:targeted])}; " if targeted else "") + (
            f"bridging on {', '.join(used) or 'the names found'}" if len(out) > targeted else "")
        return NextQueries(tuple(out[: targeted + self.per_round]), why.strip("; ") or "no new name to bridge on",
                           targeted=targeted)


NEXT_SCHEMA = {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
               "required": ["queries"], "additionalProperties": False}


class LLMWriter:
    """Claude writes the next search queries (JSON list) from the question and the evidence so far; a malformed
    reply falls back to entity bridging with a note."""

    name = "llm"

    def __init__(self, llm: LLM, model: str, per_round: int = 2) -> None:
        self.llm, self.model, self.per_round = llm, model, per_round
        self.fallback = BridgeWriter(per_round)

    def next_queries(self, question: str, evidence: Sequence[Candidate], tried: Sequence[str], spend: Spend,
                     workspace: str) -> NextQueries:
        found = "\n".join(f"- {c.text[:400]}" for c in evidence[:5])
        req = LLMRequest(self.model, (TextBlock("Write at most two search queries for the facts still missing to "
                                                "answer the question. JSON only.", cache=True),),
                         (TextBlock(f"Found so far:\n{found}\nAlready searched: {list(tried)}"),
                          TextBlock(f"Question: {question}")), max_tokens=120, json_schema=NEXT_SCHEMA,
                         purpose="agent")
        before = spend.usd, spend.llm_calls
        try:
            resp, why = guarded_call(self.llm, req, spend, workspace)
            if why:
                return NextQueries((), f"writer call skipped: {why}", blocked=why)
            data = resp.data if isinstance(resp.data, Mapping) else json.loads(resp.text)
            queries = [str(q).strip() for q in data["queries"] if str(q).strip()][: self.per_round]
        except (LLMError, KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            fb = self.fallback.next_queries(question, evidence, tried, spend, workspace)
            return NextQueries(fb.queries, fb.why, Usage(0, 0, 0, 0, spend.usd - before[0], spend.llm_calls - before[1]),
                               (f"writer failed ({type(exc).__name__}); entity bridging instead",), fb.writer)
        usage = Usage(0, 0, 0, 0, spend.usd - before[0], spend.llm_calls - before[1])
        return NextQueries(tuple(queries), "the model's next queries", usage, _flag_note(resp), "llm")


def normalise_query(text: str) -> str:
    return " ".join(sorted(content_terms(text)))


def too_close(query: str, tried: Sequence[str], threshold: float = 0.8) -> str | None:
    """The earlier query this one repeats (same normalised terms, or Jaccard of terms >= threshold), else None."""
    a = content_terms(query)
    for t in tried:
        b = content_terms(t)
        if normalise_query(query) == normalise_query(t) or (a and b and len(a & b) / len(a | b) >= threshold):
            return t
    return None


# -- the loop ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentOutcome:
    stages: tuple[StageResult, ...]
    evidence: tuple[Candidate, ...]
    rounds: int
    stop_reason: StopReason
    spent: Mapping[str, Any]
    per_round_evidence: tuple[tuple[str, ...], ...]  # chunk ids in the pool after each round

    def record(self) -> AgentRecord:
        """Trace.agent's record of the loop."""
        return AgentRecord(self.rounds, self.stop_reason, dict(self.spent))

    def as_dict(self) -> dict[str, Any]:
        return self.record().to_dict()


@dataclass(frozen=True, eq=False)
class EvidenceInfo(StageInfo):
    """The evidence stage after the agentic loop: its rounds, stop reason and spend."""

    rounds: int
    stop_reason: str
    spent: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "stop_reason": self.stop_reason, "spent": dict(self.spent)}


@dataclass(frozen=True, eq=False)
class GradeInfo(StageInfo):
    """A round's grade record ('r2.grade'): the grader, the pool's verdict and each shown passage's grade."""

    grader: str
    verdict: str
    grades: tuple[tuple[str, Any, Any], ...]  # (chunk id, grade, the grader's probability)

    def to_dict(self) -> dict[str, Any]:
        return {"grader": self.grader, "verdict": self.verdict, "grades": [list(g) for g in self.grades]}


@dataclass(frozen=True, eq=False)
class DecideInfo(StageInfo):
    """A round's decision ('r2.decide'): stop or search again (with the next queries), why it stopped and the spend
    so far. A round whose search failed records only the stop and its `reason`."""

    action: str
    next_queries: tuple[str, ...] = ()
    stop_reason: str | None = None
    spent: Mapping[str, Any] | None = None
    reason: str | None = None  # a failed search: the stop it caused

    def to_dict(self) -> dict[str, Any]:
        if self.reason is not None:
            return {"action": self.action, "reason": self.reason}
        return {"action": self.action, "next_queries": list(self.next_queries), "stop_reason": self.stop_reason,
                "spent": dict(self.spent or {})}


Search = Callable[[str], Trace]
_IDLE = ("answer_cache", "route", "cag", "evidence", "answer", "verify")  # off inside a round: their skips would
# only repeat


def _renamed(stage: StageResult, rnd: int, query: str, nth: int = 0) -> StageResult:
    """Round r's stages are 'r<r>.<stage>'; when a round runs several queries, each has its own prefix
    ('r2.q1.bm25', 'r2.q2.bm25'), so a per-stage table does not merge them into one row."""
    name = stage.stage if rnd == 1 else f"r{rnd}.q{nth}.{stage.stage}" if nth else f"r{rnd}.{stage.stage}"
    return StageResult(name, stage.candidates, stage.ms, stage.usage, stage.skipped, stage.notes,
                       InRound(rnd, stage.info, query))


def merge_evidence(lists: Sequence[Sequence[Candidate]], *, head: int, k: int,
                   rest_in_turn: bool = True, priority: Sequence[int] = ()) -> list[Candidate]:
    """The evidence pool: the first round's top `head` first (what one search already found well stays on top),
    then turns of one candidate from each list, deduplicated by chunk: the rest of the first round first in each
    turn, then the later queries' lists in order. A bridging query's best hit still lands in the top 5, and the
    first round's next candidates are no longer pushed under every later list. Chosen on twowiki's odd questions
    (bench/agent.py, row agentprev = rest_in_turn=False, the earlier order: the first round's rest only after the
    later lists run dry); the held-out figures are in bench/results/agent*.json.

    `priority`: indexes of lists from a targeted hop (the entity a relation points to, searched alone): right after
    the head, each gives its first new candidate, before any turn, because that passage is the one the next hop
    of the question reads."""
    out: list[Candidate] = []
    seen: set[str] = set()

    def take(c: Candidate) -> None:
        if c.chunk_id not in seen and len(out) < k:
            seen.add(c.chunk_id)
            out.append(c.with_rank(len(out) + 1, None))

    first = list(lists[0]) if lists else []
    for c in first[:head]:
        take(c)
    for i in priority:
        if 0 < i < len(lists):
            for c in lists[i]:
                if c.chunk_id not in seen:
                    take(c)
                    break
    rest = list(first[head:])
    queues = ([rest] if rest_in_turn else []) + [list(x) for x in lists[1:]]
    while len(out) < k and any(queues):
        for qu in queues:
            while qu:
                c = qu.pop(0)
                if c.chunk_id not in seen:
                    take(c)
                    break
    for c in rest if not rest_in_turn else ():
        take(c)
    return out


_RELATION = frozenset(
    "director directed father mother wife husband spouse son daughter child children parent sibling brother sister "
    "performer composer producer author writer founder creator grandfather grandmother uncle aunt"
    " режиссёр режиссер отец мать жена муж сын дочь автор основатель".split())


def comparison_found(question: str, evidence: Sequence[Candidate], top: int = 5) -> bool:
    """A comparison of named items ("X or Y?", "both X and Y") that asks about the items themselves, not about a
    relative of each (no relation word such as director or mother), is complete once every item is among the top
    passages: a bridging round would only push one of them out."""
    names = [n for n in names_in(question) if content_terms(n)]
    words = {w.lower() for w in re.findall(r"\w+", question)}
    if len(names) < 2 or not ({"or", "and", "или", "и"} & words) or words & _RELATION:
        return False
    seen = [content_terms(c.text) for c in evidence[:top]]
    return all(any(content_terms(n) <= terms for terms in seen) for n in names)


@dataclass
class _Run:
    """The loop's state across rounds: its spend, its trace stages, the queries tried, each graded list and the pool."""

    spend: Spend
    stages: list[StageResult] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    lists: list[list[Candidate]] = field(default_factory=list)  # one graded list per query run, in order
    priority: list[int] = field(default_factory=list)  # indexes of `lists` that come from targeted hops
    evidence: list[Candidate] = field(default_factory=list)
    per_round: list[tuple[str, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class _Decision:
    """What a round ends with: answer, stop or refine (search again with `queries`); `stop` set ends the loop."""

    action: Literal["answer", "stop", "refine"]
    stop: StopReason | None
    reason: str = ""
    queries: tuple[str, ...] = ()
    targeted: int = 0  # how many of `queries` are targeted hops (their lists get priority in the pool)


def _prefix(rnd: int) -> str:
    return "" if rnd == 1 else f"r{rnd}."


def _out_of_budget(rnd: int, budget: Budget, spend: Spend, round_seconds: float) -> StopReason | None:
    """Before a round: the budget another one would break (rounds, or time at the last round's pace)."""
    if rnd >= budget.max_rounds:
        return "budget_rounds"
    return spend.allows(est_seconds=round_seconds)


def _search_round(run: _Run, search: Search, queries: Sequence[str], rnd: int) -> list[tuple[str, list[Candidate]]]:
    """Each of the round's queries through the pipeline: its stages join the trace, its usage the spend; what it
    found is its final list. An LLMError from a search ends the round (the caller stops)."""
    found: list[tuple[str, list[Candidate]]] = []
    for nth, query in enumerate(queries, start=1):
        run.tried.append(query)
        trace = search(query)
        run.stages.extend(_renamed(s, rnd, query, nth if len(queries) > 1 else 0)
                          for s in trace.stages if not (s.skipped and s.stage in _IDLE))
        run.spend.charge(trace.usage)
        final = trace.final()
        found.append((query, list(final.candidates) if final else []))
    return found


def _grade_round(run: _Run, found: Sequence[tuple[str, list[Candidate]]], rnd: int, targeted: int, grader: Grader,
                 workspace: str, *, k: int, head: int, rest_in_turn: bool, clock: Callable[[], float]
                 ) -> list[Candidate]:
    """Grade each list, add it to the lists, merge the pool and record the round's grade stage; the candidates
    this round added to the pool come back."""
    before = {c.chunk_id for c in run.evidence}
    g0 = clock()
    graded: list[Candidate] = []
    verdicts: list[Grade] = []
    usage, notes, grader_name = Usage(), [], grader.name
    run.priority += [len(run.lists) + j for j in range(min(targeted, len(found)))]
    for query, cands in found:
        # Each list is graded against the query that found it: a bridging hit answers the sub-question,
        # not the words of the original one.
        grading = grader.grade(query, cands, run.spend, workspace) if cands else Grading((), "incorrect")
        usage, notes, grader_name = usage + grading.usage, notes + list(grading.notes), grading.grader
        verdicts.append(grading.verdict)
        grade_of = {cid: (g, p) for cid, g, p in grading.grades}
        kept = [c.with_rank(i, None, grade=grade_of[c.chunk_id][0], grade_p=grade_of[c.chunk_id][1])
                for i, c in enumerate(cands, start=1) if c.chunk_id in grade_of]
        graded.extend(kept)
        # Later rounds: what the grader calls incorrect goes behind the rest of its list, not out of it (a
        # query that is a bag of names matches few of its own words even in the passage it was looking for).
        run.lists.append(kept if rnd == 1 else [c for c in kept if c.meta.get("grade") != "incorrect"]
                         + [c for c in kept if c.meta.get("grade") == "incorrect"])
    verdict = pool_verdict(verdicts) if verdicts else "incorrect"
    # What the first round already found well stays on top: at least `head`, more when the grader calls more of
    # its list correct (a decomposed comparison often has all four passages there), never the whole pool.
    first_correct = sum(1 for c in run.lists[0][:k] if c.meta.get("grade") == "correct") if run.lists else 0
    run.evidence = merge_evidence(run.lists, head=max(0, min(max(head, first_correct), k - 3)), k=k,
                                  rest_in_turn=rest_in_turn, priority=run.priority)
    run.per_round.append(tuple(c.chunk_id for c in run.evidence))
    shown = graded[: k * len(found)]
    run.stages.append(StageResult(f"{_prefix(rnd)}grade", tuple(shown), (clock() - g0) * 1000, usage, None,
                                  tuple(notes), InRound(rnd, GradeInfo(grader_name, verdict, tuple(
                                      (c.chunk_id, c.meta.get("grade"), c.meta.get("grade_p")) for c in shown)))))
    return [c for c in run.evidence if c.chunk_id not in before]


def _decide(question: str, run: _Run, rnd: int, new: Sequence[Candidate], budget: Budget, writer: Writer,
            workspace: str, repeat_threshold: float,
            enough: Callable[[Sequence[StageResult], Sequence[Candidate]], str | None] | None) -> _Decision:
    """After a round's grades: the stop reason, if the loop should end, else the next queries."""
    over_time = run.spend.allows()
    if over_time:
        return _Decision("answer", over_time, "the time budget ran out during this round")
    if not run.evidence:
        return _Decision("stop", "refused_no_evidence", "nothing was retrieved")
    if rnd > 1 and not new:
        return _Decision("stop", "no_new_evidence", "the round added nothing to the pool")
    if rnd == 1 and comparison_found(question, run.evidence):
        return _Decision("answer", "answered", "every compared item is among the top passages")
    if rnd == 1 and enough is not None and (found_why := enough(run.stages, run.evidence)):
        return _Decision("answer", "answered", found_why)
    if rnd >= budget.max_rounds:
        return _Decision("answer", "budget_rounds", f"{rnd} of {budget.max_rounds} rounds used")
    return _plan_next(question, run, writer, workspace, repeat_threshold)


def _plan_next(question: str, run: _Run, writer: Writer, workspace: str, repeat_threshold: float) -> _Decision:
    """The writer's next queries, less those too close to one already run, targeted hops first; none left: answer
    (or the budget that refused the writer's call)."""
    nxt = writer.next_queries(question, run.evidence, run.tried, run.spend, workspace)
    fresh: list[str] = []
    repeats: list[str] = []
    for q in nxt.queries:
        (repeats if too_close(q, run.tried + fresh, repeat_threshold) else fresh).append(q)
    reason = nxt.why + (f"; not run again (too close to an earlier query): {repeats}" if repeats else "")
    if not fresh:
        return _Decision("answer", nxt.blocked or "answered", reason)
    hop_set = set(nxt.queries[: nxt.targeted])
    hops = [q for q in fresh if q in hop_set]
    return _Decision("refine", None, reason, (*hops, *(q for q in fresh if q not in hop_set)), len(hops))


def run_agent(question: str, search: Search, *, budget: Budget, grader: Grader, writer: Writer,
              workspace: str, k: int = 10, head: int = 3, repeat_threshold: float = 0.8,
              clock: Callable[[], float] = time.monotonic, rest_in_turn: bool = True,
              enough: Callable[[Sequence[StageResult], Sequence[Candidate]], str | None] | None = None
              ) -> AgentOutcome:
    """Rounds of search -> grade -> decide until the evidence answers, nothing new turns up, or a budget ends it.
    `search` runs the ordinary pipeline (answer off) on one query; the caller answers from `evidence`. `enough`
    (the route's early stop) reads the first round's stages and evidence and names why no second round is needed."""
    run = _Run(Spend(budget, clock))
    # Every LLM call of the loop (its searches' transforms included) and every retry starts only if it can end
    # before the time budget and fits the dollars left: the loop ends within one call's timeout of max_seconds.
    with call_limits(deadline=time.monotonic() + budget.max_seconds, usd=budget.max_usd):
        return _loop(question, search, run, budget=budget, grader=grader, writer=writer, workspace=workspace, k=k,
                     head=head, repeat_threshold=repeat_threshold, clock=clock, rest_in_turn=rest_in_turn,
                     enough=enough)


def _loop(question: str, search: Search, run: _Run, *, budget: Budget, grader: Grader, writer: Writer,
          workspace: str, k: int, head: int, repeat_threshold: float, clock: Callable[[], float], rest_in_turn: bool,
          enough: Callable[[Sequence[StageResult], Sequence[Candidate]], str | None] | None) -> AgentOutcome:
    queries: Sequence[str] = (question,)
    targeted, rnd, round_seconds = 0, 0, 0.0
    stop: StopReason | None = None
    while stop is None:
        stop = _out_of_budget(rnd, budget, run.spend, round_seconds)
        if stop is not None:
            break
        rnd += 1
        t0 = clock()
        try:
            found = _search_round(run, search, queries, rnd)
        except LLMError as exc:
            stop = {"deadline": "budget_time", "budget": "budget_usd"}.get(exc.kind, "error")
            run.stages.append(StageResult(f"{_prefix(rnd)}decide", (), 0.0, Usage(), None, (f"search failed: {exc}",),
                                          InRound(rnd, DecideInfo("stop", reason=stop))))
            break
        new = _grade_round(run, found, rnd, targeted, grader, workspace, k=k, head=head, rest_in_turn=rest_in_turn,
                           clock=clock)
        round_seconds = clock() - t0
        d = _decide(question, run, rnd, new, budget, writer, workspace, repeat_threshold, enough)
        run.stages.append(StageResult(f"{_prefix(rnd)}decide", tuple(run.evidence), 0.0, Usage(), None,
                                      (d.reason,) if d.reason else (),
                                      InRound(rnd, DecideInfo(d.action, tuple(d.queries), d.stop,
                                                              run.spend.as_dict()))))
        stop, queries, targeted = d.stop, d.queries, d.targeted
    return AgentOutcome(tuple(run.stages), tuple(run.evidence), rnd, stop or "answered", run.spend.as_dict(),
                        tuple(run.per_round))
