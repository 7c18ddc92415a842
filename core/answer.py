"""Cited answers from the pipeline's final candidates — Claude or an offline extractive answerer — that refuse when
the retrieved context does not support an answer."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from core.config import AnswerConfig
from core.llm import LLM, LLMError, LLMRequest, TextBlock
from core.text import sentence_spans, tokenize
from core.types import DEFAULT_WORKSPACE, Answer, Candidate, Usage

REFUSAL = "The corpus does not say."

# Stable text, cached: the instructions (and the corpus glossary) never change between questions, so they sit in
# front of the breakpoint; retrieved passages and the question come after it, most volatile last.
ANSWER_INSTRUCTIONS = (
    "You answer questions about a document collection using only the passages supplied with each question. "
    "Each passage carries an id. Rules: (1) Use only facts stated in the passages, never outside knowledge. "
    "(2) After each claim, the ids of the passages that support it go in `citations`; cite only ids you were "
    "given. (3) If the passages do not contain the answer, or only part of it, set `refused` to true and say in "
    "`answer` that the corpus does not say, naming what is missing; do not guess. (4) Answer in the language of "
    "the question, briefly."
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "string"}},
        "refused": {"type": "boolean"},
    },
    "required": ["answer", "citations", "refused"],
    "additionalProperties": False,
}

# Question words that carry no content (on top of the search stop words), so they do not lower support.
_QUESTION_FILLER = frozenset(
    t for w in ("much many tell me about please list name give describe explain our we you your i there any exist "
                "сколько какой какая какие каков кто когда где почему").split() for t in tokenize(w)
)


@dataclass(frozen=True)
class AnswerResult:
    answer: Answer
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    support: float | None = None  # extractive: best sentence's share of the question's weighted terms


def answer_request(question: str, passages: Sequence[tuple[str, str]], *, model: str, glossary: str = "",
                   max_tokens: int = 600, query_id: str = "") -> LLMRequest:
    """Instructions (+ glossary) behind the cache breakpoint, then the passages, then the question."""
    system = (TextBlock(ANSWER_INSTRUCTIONS, cache=not glossary),)
    if glossary:
        system += (TextBlock(f"Glossary of this corpus:\n{glossary}", cache=True),)
    body = "\n\n".join(f'<passage id="{cid}">\n{text}\n</passage>' for cid, text in passages)
    return LLMRequest(model=model, system=system,
                      user=(TextBlock(f"Passages:\n{body}"), TextBlock(f"Question: {question}")),
                      max_tokens=max_tokens, json_schema=ANSWER_SCHEMA, purpose="answer", ref_id=query_id)


def llm_answer(
    question: str, candidates: Sequence[Candidate], llm: LLM, *, model: str, glossary: str = "",
    max_tokens: int = 600, workspace: str = DEFAULT_WORKSPACE, query_id: str = "",
) -> AnswerResult:
    passages = [(c.chunk_id, c.text) for c in candidates]
    resp = llm.complete(answer_request(question, passages, model=model, glossary=glossary, max_tokens=max_tokens,
                                       query_id=query_id), workspace=workspace, run_id=query_id)
    data = resp.data if isinstance(resp.data, dict) else {}
    given = {cid for cid, _ in passages}
    cited = [str(c) for c in data.get("citations") or []]
    notes = []
    unknown = [c for c in cited if c not in given]
    if unknown:
        notes.append(f"dropped citations of passages the model was not given: {', '.join(unknown)}")
    cited = list(dict.fromkeys(c for c in cited if c in given))
    refused = bool(data.get("refused")) or not str(data.get("answer", "")).strip()
    text = str(data.get("answer", "")).strip() or REFUSAL
    if not refused and not cited:
        notes.append("the model answered without citing a passage")
    if resp.cache_note:
        notes.append(resp.cache_note)
    return AnswerResult(Answer(text, tuple(cited) if not refused else (), refused, "llm"), resp.usage, tuple(notes))


def _terms(text: str) -> list[str]:
    return [t for t in tokenize(text) if t not in _QUESTION_FILLER]


def extractive_answer(
    question: str, candidates: Sequence[Candidate], *, threshold: float = 0.5, max_sentences: int = 3,
) -> AnswerResult:
    """Offline answerer: the sentences of the candidates that cover most of the question's terms (weighted by
    rarity among the candidates' sentences), each with its chunk id. Refuses when even the best sentence covers
    less than `threshold` of the question: the context does not support an answer."""
    q = set(_terms(question))
    sents: list[tuple[str, int, str, set[str], set[str]]] = []  # (chunk id, rank, sentence, its terms, chunk terms)
    for c in candidates:
        chunk_terms = set(_terms(c.text))
        for s, e in sentence_spans(c.text):
            sent = " ".join(c.text[s:e].split())
            # Table rows and headings are poor answers; a claim is a sentence of ordinary length.
            if 4 <= len(sent.split()) <= 80 and not sent.startswith(("|", "#")):
                sents.append((c.chunk_id, c.rank, sent, set(_terms(sent)), chunk_terms))
    if not q or not sents:
        why = "no passages were retrieved" if not sents else "the question has no searchable terms"
        return AnswerResult(Answer(f"{REFUSAL} ({why})", (), True, "extractive"), support=0.0)
    n = len(sents)
    df = {t: sum(t in chunk for *_, chunk in sents) for t in q}
    idf = {t: math.log(1 + n / (1 + df[t])) + (1.0 if df[t] == 0 else 0.0) for t in q}  # unseen terms weigh most
    total = sum(idf.values())

    def score(terms: set[str], chunk: set[str]) -> float:
        # A term the sentence lacks but its chunk has (often the heading: division, quarter) counts half: the
        # chunk is the sentence's context, the very thing a cut-out sentence loses.
        return sum(idf[t] * (1.0 if t in terms else 0.5 if t in chunk else 0.0) for t in q) / total

    scored = sorted(((score(terms, chunk), -rank, i) for i, (_, rank, _, terms, chunk) in enumerate(sents)),
                    reverse=True)
    best = scored[0][0]
    if best < threshold:
        missing = sorted((t for t in q if df[t] == 0), key=lambda t: -idf[t])[:4]
        detail = f"; nothing retrieved mentions {', '.join(missing)}" if missing else ""
        return AnswerResult(Answer(f"{REFUSAL} The best passage covers {best:.0%} of the question{detail}.", (), True,
                                   "extractive"), support=best)
    picked: list[int] = []
    for score, _, i in scored:
        if len(picked) >= max_sentences or score < max(threshold, 0.6 * best):
            break
        if all(sents[i][2] != sents[j][2] for j in picked):
            picked.append(i)
    parts = [f"{sents[i][2]} [{sents[i][0]}]" for i in picked]
    cites = tuple(dict.fromkeys(sents[i][0] for i in picked))
    return AnswerResult(Answer(" ".join(parts), cites, False, "extractive"), support=best)


def answer_question(
    question: str, candidates: Sequence[Candidate], cfg: AnswerConfig, llm: LLM, *,
    workspace: str = DEFAULT_WORKSPACE, query_id: str = "",
) -> AnswerResult:
    """The answer stage: picks the answerer (auto = Claude when available), refuses on an empty context without
    calling anything, and falls back to extractive (saying so) when Claude is unavailable or fails."""
    top = list(candidates)[: cfg.max_chunks]
    if not top:
        return AnswerResult(Answer(f"{REFUSAL} (no passages were retrieved)", (), True,
                                   "llm" if cfg.mode == "llm" and llm.available else "extractive"),
                            notes=("empty context: refused without calling a model",), support=0.0)
    notes: list[str] = []
    use_llm = cfg.mode == "llm" or (cfg.mode == "auto" and llm.available)
    if use_llm and not llm.available:
        notes.append(f"answer.mode = llm but {llm.reason}: extractive answer instead")
        use_llm = False
    if use_llm:
        try:
            res = llm_answer(question, top, llm, model=cfg.model, glossary=cfg.glossary, max_tokens=cfg.max_tokens,
                             workspace=workspace, query_id=query_id)
            return res
        except LLMError as exc:
            notes.append(f"Claude answer failed ({exc}); extractive answer instead")
    res = extractive_answer(question, top, threshold=cfg.refusal_threshold, max_sentences=cfg.max_sentences)
    notes.append("extractive answer (offline): sentences copied from the passages, not generated")
    return AnswerResult(res.answer, res.usage, tuple(notes) + res.notes, res.support)


_CITE = re.compile(r"\s*\[[^\]]{1,80}\]")


def strip_citations(text: str) -> str:
    """Answer text without its [chunk-id] markers (for metrics that compare wording)."""
    return _CITE.sub("", text).strip()
