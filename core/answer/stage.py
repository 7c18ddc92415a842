"""Cited answers from the pipeline's final candidates — Claude or an offline extractive answerer — that refuse when
the retrieved context does not support an answer."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from core.answer import wording
from core.answer.attributes import assigned_default, field_first, field_lines, record_names
from core.answer.calibration import refusal_cut
from core.answer.crosslingual import (SAME_LANGUAGE_FLOOR, CrossReader, NameFinder, answer_floor, cross_answer,
                                      is_cross, reads_across)
from core.answer.e5_scorer import pair_text
from core.answer.injection import injection_note
from core.answer.negation import SAME_STATEMENT, NegatedAsk, negated_answer, negated_ask, similar, values
from core.answer.versions import DocHead, sibling_labels
from core.answer.verify import (
    ChunkText,
    Evidence,
    VerifyInfo,
    asked_roles,
    check,
    constraint_words,
    question_constraints,
    states_role,
    verify_model_answer,
    verify_quotes,
)
from core.answer.support import (
    RowScorer,
    SentenceRow,
    SentenceScorer,
    SentenceTable,
    SupportModel,
    _chunk_reading,
    asked_type,
    continues,
    load_support_model,
    model_fingerprint,
    sentence_table,
)
from core.config import AnswerConfig
from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.text import guess_language, tokenize
from core.types import DEFAULT_WORKSPACE, REFUSAL_LEADS, Answer, AnswerInfo, Calibration, Candidate, Usage

REFUSAL = REFUSAL_LEADS["en"]

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


@dataclass(frozen=True)
class AnswerResult:
    answer: Answer
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    support: float | None = None  # extractive: the support model's probability that the best sentence answers
    threshold: float | None = None  # extractive: the refusal cut used
    threshold_from: str | None = None  # ... and where it came from (core.answer.calibration.refusal_cut)

    def info(self, source: str | None) -> AnswerInfo:
        """What the answer stage shows in the trace; `source` is the stage whose candidates it read."""
        return AnswerInfo.of(self.answer, source, support=self.support, threshold=self.threshold,
                             threshold_from=self.threshold_from)


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


def _quoted(words: Sequence[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


def pick_sentences(rows: Sequence[SentenceRow], scores: Sequence[float], *, support: float, cut: float,
                   max_sentences: int, margin: float) -> list[int]:
    """Indexes of the sentences an extractive answer quotes, best first: none when the question's support is below
    `cut` (refuse); else the best sentence and others whose ranker score is within `margin` of it (distinct texts),
    up to max_sentences."""
    order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i].rank, i))
    if not order or support < cut:
        return []
    best = float(scores[order[0]])
    picked: list[int] = []
    for i in order:
        if len(picked) >= max_sentences or scores[i] < best - margin:
            break
        if all(not _same_claim(rows[i].text, rows[j].text) for j in picked):
            picked.append(i)
    # a quoted sentence that goes on from the one before it ('The default is 5.', 'Первые двое выйдут ...') is
    # quoted with that sentence, which says what it is about
    out: list[int] = []
    for i in picked:
        if i > 0 and continues(rows[i].text) and rows[i - 1].chunk_id == rows[i].chunk_id and \
                rows[i - 1].span[1] <= rows[i].span[0] and i - 1 not in picked and i - 1 not in out:
            out.append(i - 1)
        out.append(i)
    return out


def _same_claim(a: str, b: str) -> bool:
    """Two sentences that say the same thing (the same words, one perhaps extended): quoting both adds nothing."""
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return a == b or (bool(wa and wb) and len(wa & wb) / min(len(wa), len(wb)) >= 0.8)


def extractive_answer(
    question: str, candidates: Sequence[Candidate], *, threshold: float | None = None, max_sentences: int = 3,
    titles: Mapping[str, str] | None = None, li_scorer: SentenceScorer | None = None, blind: bool = False,
    model: SupportModel | None = None, vocabulary: Collection[str] | None = None,
    full_texts: Mapping[str, str] | None = None,
    answer_scorer: Callable[[str, Sequence[SentenceRow]], RowScorer] | None = None,
    documents: Mapping[str, DocHead] | None = None, reader: CrossReader | None = None,
    headings: Mapping[str, Sequence[str]] | None = None,
) -> AnswerResult:
    """Offline answerer: the candidates' sentences that the support model (core.answer.support) ranks most likely to answer
    the question, each with its chunk id. Refuses when the model's support for an answer (its gate's probability
    that the best sentence answers) is below `threshold` (None or negative: the model's fitted one). `blind`: the
    embedder does not read the question's language, so only the lexical and rank signals count. `full_texts` (chunk
    id -> whole chunk text): read whole chunks, not the pruned drafts (pruning keeps what fits a token budget for
    a model, and may drop the one sentence that answers); the pruner's choice stays a feature. `answer_scorer`
    (question, sentence rows) -> RowScorer: an answerability scorer a model fitted with one reads (the fits of
    bench/answer.py hand theirs in; no shipped model reads one, and without it the model imputes its value).
    `documents` (doc id -> name, title, opening): when the quoted sentences come from two versions of a document,
    each is labelled with its version (core.answer.versions). A question asking what does not hold is answered by
    core.answer.negation's reading, or refused. `reader`: a multilingual reader (core.answer.e5_scorer.E5Reader) for a
    question whose language the embedder does not read (see blind_reading): it checks the lead sentence and answers
    when the lexical signals refuse. `headings` (chunk id -> its heading path): a changelog item quoted for a 'which
    release' question is led by the release its section names (release_heads)."""
    model = model or load_support_model()
    cut = model.threshold if threshold is None or threshold < 0 else threshold
    scored = scored_sentences(question, candidates, titles=titles, li_scorer=li_scorer, blind=blind, model=model,
                              vocabulary=vocabulary, full_texts=full_texts, answer_scorer=answer_scorer)
    table, probs, best, notes = scored.table, scored.probs, scored.best, scored.notes
    unseen_words = list(dict.fromkeys(table.terms.words[t] for t in table.unseen))[:4]
    if not table.rows:
        why = ("the question has no searchable terms" if not table.terms.terms
               else "no retrieved passage has a sentence to quote")
        return AnswerResult(Answer(f"{REFUSAL} ({why})", (), True, "extractive"), support=0.0)
    order = sorted(range(len(table.rows)), key=lambda i: (-probs[i], table.rows[i].rank, i))
    rescue = field_rescue(question, table.rows, candidates, full_texts, titles, documents) if best < cut else []
    if rescue:  # the asked attribute's field of the record the question names: answered though support is low
        return AnswerResult(Answer(_quotes(table.rows, rescue, {}), tuple(dict.fromkeys(
            table.rows[i].chunk_id for i in rescue)), False, "extractive"), notes=notes + (
            f"support {best:.0%} below the {cut:.0%} cut: answered by the field line that states the asked attribute "
            "of the record the question names",), support=best)
    if best < cut:
        lang = wording.language_of(question)
        first = table.rows[order[0]]
        detail = (wording.reason("unseen", lang, words=_quoted(unseen_words)) if unseen_words else
                  f"{wording.reason('closest', lang)}: \"{first.text}\" [{first.chunk_id}]")
        low = AnswerResult(Answer(f"{wording.lead(REFUSAL, lang)} "
                                  f"{wording.reason('low', lang, best=f'{best:.0%}', cut=f'{cut:.0%}')}; {detail}.", (),
                                  True, "extractive"), notes=notes, support=best)
        return low if reader is None else blind_reading(question, low, (), candidates, reader, titles=titles,
                                                        full_texts=full_texts, max_sentences=max_sentences,
                                                        floor=BLIND_LOW_FLOOR)
    picked = pick_sentences(table.rows, probs, support=best, cut=cut, max_sentences=max_sentences,
                            margin=model.pick_margin)
    picked = with_value_first(question, table.rows, probs, picked, max_sentences=max_sentences)
    picked = with_field_first(question, table.rows, probs, picked, candidates, full_texts, titles, documents,
                               max_sentences=max_sentences)
    picked = with_constraints_met(question, table.rows, probs, picked, candidates, full_texts, titles,
                                  max_sentences=max_sentences)
    picked = with_statement_first(question, table.rows, probs, picked, candidates, full_texts, titles,
                                  max_sentences=max_sentences)
    texts = [r.text for r in table.rows]
    labels = sibling_labels([r.doc_id for r in table.rows], documents or {})
    ask = negated_ask(question)
    if ask is not None:
        return _negated(ask, table.rows, order, labels, titles or {}, max_sentences=max_sentences, notes=notes,
                        support=best)
    picked = with_other_versions(picked, texts, [r.doc_id for r in table.rows], labels, limit=max_sentences)
    cites = tuple(dict.fromkeys(table.rows[i].chunk_id for i in picked))
    heads = release_heads(question, table.rows, picked, candidates, full_texts, headings)
    got = AnswerResult(Answer(_quotes(table.rows, picked, labels, heads), cites, False, "extractive"), notes=notes,
                       support=best)
    if reader is None:
        return got
    # the lead, and the sentence after it when it goes on from the lead (pick_sentences quotes what a sentence refers
    # back to before it)
    first = table.rows[picked[0]]
    lead = [first] + [table.rows[i] for i in picked[1:2] if i == picked[0] + 1 and continues(table.rows[i].text) and
                      table.rows[i].chunk_id == first.chunk_id]
    return blind_reading(question, got, lead, candidates, reader, titles=titles, full_texts=full_texts,
                         max_sentences=max_sentences)


# A question in a language the embedder does not read (Russian with the bundled MiniLM; in the pipeline a dense-blind
# query) is ranked by the support model's lexical signals alone, which accept a sentence about something else that
# shares a few of the question's words ('Кто решает, как следует использовать землю ...' answered with 'Землю
# Руперта'), and refuse a question worded otherwise than its passage ('no retrieved passage mentions ...').
# multilingual-e5 (core.answer.e5_scorer) reads such a question: the lexical answer stands when its lead sentence's
# question-sentence cosine reaches BLIND_LEAD_FLOOR; below it the answer is e5's own sentence ranking
# (core.answer.crosslingual.cross_answer) at BLIND_FLOOR, and so it is when the lexical answer refuses for low support
# (at BLIND_LOW_FLOOR). Read off the dev split's grid (bench/verify_nearmiss.py --tune, tune_blind: Russian over
# Russian, even paragraphs of XQuAD 40-47; answerable questions right, wrong; near misses and paragraph-left-out
# questions refused): without the reader 82.1%, 7.1%, 88.1%, 48.8%; lead 0.80 with e5 0.84: 89.3%, 2.4%, 93.1%,
# 66.7% (English on the same questions: 77.4%, 7.1%, 97.6%, 67.9%). Around it: lead 0.79: 89.3%, 2.4%, 90.1%, 61.9%;
# 0.81: 89.3%, 2.4%, 92.1%, 66.7%; 0.82: 85.7%, 3.6%, 92.1%, 69.0%; e5 0.83: 90.5%, 2.4%, 92.1%, 63.1%; 0.85: 86.9%,
# 2.4%, 93.1%, 69.0% (0.84: paragraph-left-out questions refused within 1.2 points of English, right answers 7 points
# above the lexical answer's). The lead floor alone (no e5 answer) lost right answers (0.80: 77.4%, 1.2%, 95.0%,
# 77.4%); the e5 answer on low support alone kept the wrong ones (86.9%, 7.1%, 87.1%, 44.0%); e5's ranking alone (the
# path a German question takes, forced for Russian) answered fewer right (floor 0.84: 85.7%, 3.6%, 95.0%, 71.4%): the
# lexical signals, when their lead is about the question, pick the sentence that answers more often. A higher floor
# for the low-support case bought little (0.86: 88.1%, 2.4%, 94.1%, 70.2%; never: 84.5%, 2.4%, 94.1%, 71.4%), so it is
# BLIND_FLOOR's.
BLIND_LEAD_FLOOR = 0.80
BLIND_FLOOR = 0.84
BLIND_LOW_FLOOR = BLIND_FLOOR


def blind_reading(question: str, got: AnswerResult, lead: Sequence[SentenceRow], candidates: Sequence[Candidate],
                  reader: CrossReader, *, titles: Mapping[str, str] | None = None,
                  full_texts: Mapping[str, str] | None = None, max_sentences: int = 3,
                  floor: float | None = None) -> AnswerResult:
    """The lexical answer `got` to a question whose language the embedder does not read, read by the multilingual
    `reader` (see BLIND_LEAD_FLOOR): kept when its lead sentence (`lead`: it, and the next quoted when that goes on
    from it) is about the question; else (and when `got` refused for low support, `lead` empty) the reader's own
    sentence ranking answers at BLIND_FLOOR, or the refusal says why. A reader that fails leaves `got` as it is, with
    a note saying so."""
    floor = BLIND_FLOOR if floor is None else floor
    try:
        if lead and not got.answer.refused:
            sim = float(np.max(reader.score(question, [pair_text(r.context, r.text) for r in lead])))
            roles = asked_roles(question) if asked_type(question) == "person" else []  # who holds the role
            if sim >= BLIND_LEAD_FLOOR and roles and not any(states_role(roles, r.text) for r in lead):
                # the lead is about the question but does not state the role it asks about ('Кто финансовый директор
                # ...?' answered with where the company sits): the reader's ranking answers when its lead states it
                # (cross_answer's role rule, ROLE_WINDOW)
                other, best, _ = cross_answer(question, candidates, reader, titles=titles, full_texts=full_texts,
                                              max_sentences=max_sentences, floor=floor, refusal=REFUSAL)
                if not other.refused and states_role(roles, other.text):
                    return AnswerResult(other, notes=got.notes + (
                        f"the lexical answer's lead sentence does not state the role asked; answered by "
                        f"multilingual-e5's sentence ranking, led by the sentence that states it (best similarity "
                        f"{best:.2f}, floor {floor:.2f})",), support=best, threshold=floor,
                                        threshold_from="multilingual-e5 floor for a language the embedder does not "
                                        "read (core/answer/stage.py)")
            if sim >= BLIND_LEAD_FLOOR:
                return replace(got, notes=got.notes + (
                    f"multilingual-e5 reads the lead sentence as about the question (similarity {sim:.2f}, floor "
                    f"{BLIND_LEAD_FLOOR:.2f}; the embedder does not read the question's language)",))
            got = AnswerResult(Answer(
                f"{REFUSAL} The sentence the lexical signals rank first is not about the question (multilingual-e5 "
                f"similarity {sim:.2f}, below {BLIND_LEAD_FLOOR:.2f}): \"{lead[0].text}\" [{lead[0].chunk_id}].", (),
                True, "extractive"), notes=got.notes, support=got.support)
        other, best, _ = cross_answer(question, candidates, reader, titles=titles, full_texts=full_texts,
                                      max_sentences=max_sentences, floor=floor, refusal=REFUSAL)
    except Exception as exc:  # noqa: BLE001 - the reader is a second opinion: without it the lexical answer stands
        return replace(got, notes=got.notes + (f"multilingual reader failed ({type(exc).__name__}: {exc}): the lexical "
                                               "answer stands unchecked",))
    if other.refused:
        return replace(got, notes=got.notes + (
            f"multilingual-e5's sentence ranking does not answer either (best similarity {best:.2f}, below "
            f"{floor:.2f})",))
    return AnswerResult(other, notes=got.notes + (
        f"the lexical answer refused ({wording.after_lead(got.answer.text)[:160]}); answered by multilingual-e5's "
        f"sentence ranking (best similarity {best:.2f}, floor {floor:.2f}; the embedder does not read the "
        "question's language)",), support=best, threshold=floor,
                        threshold_from="multilingual-e5 floor for a language the embedder does not read "
                        "(core/answer/stage.py)")


_ASKS_RELEASE = re.compile(r"(?i)\b(which|what) (\w+ )?(version|release)\b")
_VERSION_NO = re.compile(r"\b\d+\.\d+(?:\.\d+)?\b")


def release_heads(question: str, rows: Sequence[SentenceRow], picked: Sequence[int], candidates: Sequence[Candidate],
                  full_texts: Mapping[str, str] | None,
                  headings: Mapping[str, Sequence[str]] | None = None) -> dict[int, str]:
    """Asked which version did something, a changelog's item ('- Removed support for Python 3.8') states no version
    of its own: the release heading its list sits under ('0.20.0 (2026-05-02)', '## v2.1', 'Version 3.0') does. Row
    -> that heading, for each picked row that states no version the question does not, whose list (the items, blank
    lines and heading underlines right above it) opens under such a heading in its chunk. When none does (the list
    sits under a subheading, 'New features', below its release's heading), the nearest heading line above the row in
    its chunk that names a version the question does not, else the deepest part of the chunk's heading path
    (`headings`: chunk id -> its section path, what the chunker recorded) that names one."""
    if not _ASKS_RELEASE.search(question):
        return {}
    asked = set(_VERSION_NO.findall(question))
    texts = {c.chunk_id: (full_texts or {}).get(c.chunk_id) or c.text for c in candidates}
    out: dict[int, str] = {}
    for i in picked:
        r = rows[i]
        text = texts.get(r.chunk_id, "")
        if set(_VERSION_NO.findall(r.text)) - asked or not text or not _ITEM_LINE.match(text[r.span[0]:r.span[1]]):
            continue
        for line in reversed(text[:r.span[0]].split("\n")[:-1]):
            if not line.strip() or _ITEM_LINE.match(line) or _UNDERLINE.match(line) or line[:1] in (" ", "\t"):
                continue  # the list's other items (and their wrapped lines), blank lines, a heading's underline
            m = _RELEASE_HEAD.match(line)
            if m and set(_VERSION_NO.findall(line)) - asked:
                out[i] = line.strip(" #=")
            break
        if i not in out:
            got = _section_release(text[:r.span[0]], (headings or {}).get(r.chunk_id, ()), asked)
            if got:
                out[i] = got
    return out


def _section_release(above: str, path: Sequence[str], asked: set[str]) -> str:
    """The release a changelog item sits under when no heading right above its list names it: the nearest heading
    line above it in its chunk that names a version the question does not ('FieldX 3.8.0 - released 22 April 2024'
    above 'New features'), else the deepest section of the chunk's heading path that does; '' when none."""
    for line in reversed(above.split("\n")[:-1]):
        if _ITEM_LINE.match(line) or line[:1] in (" ", "\t"):
            continue
        h = line.strip().strip("#=-+~*| ").strip()
        if h and len(h.split()) <= 9 and not h.endswith((".", "!", "?", ";", ":", ",")) and \
                set(_VERSION_NO.findall(h)) - asked:
            return h
    for h in reversed([str(x).strip(" #=") for x in path]):
        if set(_VERSION_NO.findall(h)) - asked:
            return h
    return ""


_ITEM_LINE = re.compile(r"^\s*[-*+•]\s+\S")
_UNDERLINE = re.compile(r"^\s*([=\-+~^*#\"'`:._])\1{2,}\s*$")
_RELEASE_HEAD = re.compile(r"^\s*(?:#{1,6}\s*)?\[?(?:v(?:ersion)?\.?\s*)?\d+\.\d+(?:\.\d+)?\b.{0,50}$", re.I)


_ASKS_DEFAULT = re.compile(r"(?i)\bdefaults?\b|\bby default\b|по умолчанию")
# A sentence that states a default's value: '[default: 0.1]', 'Defaults to 600', 'the default is 5', 'по умолчанию 30'.
_STATES_DEFAULT = re.compile(r"(?i)\[default:\s*[^\]]+\]|\bdefaults?\s+(?:to|is|was|of|value\s+is|:)\s*\S|"
                             r"\bdefault(?:s)?\s*[:=]\s*\S|по умолчанию\s*(?:[—:=-]|равн\w*|составляет)?\s*\S*\d")


def with_value_first(question: str, rows: Sequence[SentenceRow], scores: Sequence[float], picked: Sequence[int], *,
                     max_sentences: int) -> list[int]:
    """The sentence that states the asked default's value quoted first ('Defaults to 600', not the description line
    that repeats the question's words): for a question about a default, when the best sentence states none, the
    best-scored sentence that does and whose sentence or heading names the question's rarest term (the setting asked
    about) leads the answer."""
    if not picked or not _ASKS_DEFAULT.search(question) or assigned_default(rows[picked[0]].text, question):
        return list(picked)
    # a signature's or call's default of the setting the question names as code ('allow_inf_nan: bool = True,'),
    # before a lead that states another setting's default ('Defaults to True.')
    assigned = [i for i, r in enumerate(rows) if assigned_default(r.text, question)]
    if assigned:
        best = max(assigned, key=lambda i: (scores[i], -rows[i].rank, -i))
        return ([best] + [i for i in picked if i != best])[:max_sentences]
    if _STATES_DEFAULT.search(rows[picked[0]].text):
        return list(picked)
    terms = [t for t in tokenize(question) if t not in ("default", "valu", "value", "умолчан")]
    local = [set(tokenize(f"{r.context} {r.text}")) for r in rows]
    df = {t: sum(t in x for x in local) for t in terms}
    present = [t for t in terms if df[t]]
    if not present:
        return list(picked)
    rare = min(present, key=lambda t: (df[t], t))
    fits = [i for i, r in enumerate(rows) if _STATES_DEFAULT.search(r.text) and rare in local[i]]
    if not fits:
        return list(picked)
    best = max(fits, key=lambda i: (scores[i], -rows[i].rank, -i))
    return ([best] + [i for i in picked if i != best])[:max_sentences]


def with_constraints_met(question: str, rows: Sequence[SentenceRow], scores: Sequence[float], picked: Sequence[int],
                         candidates: Sequence[Candidate], full_texts: Mapping[str, str] | None,
                         titles: Mapping[str, str] | None, *, max_sentences: int, depth: int = 8,
                         margin: float = 2.0) -> list[int]:
    """When the leading sentence fails the question's constraints (core.answer.verify: another year, role, month,
    the antonym of the asked superlative), the best-scored of the top `depth` sentences that meets them all leads,
    followed by the picked ones that meet them too: the sentence that answers, not the one that repeats the
    question's words beside a neighbouring fact. Unchanged when the lead meets them or no sentence does (the verify
    stage then refuses with the nearest fact)."""
    cons = question_constraints(question)
    if not picked or not cons:
        return list(picked)
    texts = {c.chunk_id: (full_texts or {}).get(c.chunk_id) or c.text for c in candidates}
    seen: dict[int, bool] = {}
    itself: dict[int, bool] = {}  # the sentence itself names every asked name and states the asked kind of value

    def ok(i: int) -> bool:
        if i not in seen:
            r = rows[i]
            ck = check(question, Evidence(r.text, texts.get(r.chunk_id, ""), "", (titles or {}).get(r.doc_id, ""),
                                          r.chunk_id), cons)
            # a stand-in must state each value itself (its sentence, heading or title), a name at least in its chunk
            seen[i] = ck.ok and all(v.where in ("sentence", "heading", "title") or
                                    (v.constraint.kind == "entity" and v.where == "chunk") for v in ck.verdicts
                                    if v.constraint.kind not in ("asks", "negation", "direction", "period"))
            # (a name of two words or more: one capitalised word, 'Society', is found in sentences about other things)
            itself[i] = seen[i] and all(v.where == "sentence" for v in ck.verdicts
                                        if v.constraint.kind in ("entity", "asks")) and \
                any(v.constraint.kind == "asks" for v in ck.verdicts) and \
                any(v.constraint.kind == "entity" and len(v.constraint.text.split()) >= 2 for v in ck.verdicts)
        return seen[i]
    lead_ck = check(question, Evidence(rows[picked[0]].text, texts.get(rows[picked[0]].chunk_id, ""), "",
                                       (titles or {}).get(rows[picked[0]].doc_id, ""), rows[picked[0]].chunk_id), cons)
    if lead_ck.ok or guess_language(question) != "en":  # (Russian and cross-lingual selection are read elsewhere)
        return list(picked)
    # a lead that misses only the asked name: its stand-in must say all the question's other words the lead says (a
    # sentence found by the name alone answers another question); one that states another value: at least half
    name_only = not any(v.constraint.kind not in ("entity", "asks", "negation", "period") for v in lead_ck.unmet)
    order = sorted(range(len(rows)), key=lambda i: (-scores[i], rows[i].rank, i))[:depth]
    floor = scores[picked[0]] - margin  # a stand-in still reads as an answer to the question, not only its values
    # the question's words beyond what its constraints name ('regime', 'ruled' of 'What regime ruled X?'): a stand-in
    # that says only the asked name or year is no answer to the rest of the question
    terms = set(tokenize(question)) - set(tokenize(constraint_words(question, cons)))

    def covers(i: int) -> int:  # the question's other words the sentence and its title say
        return len(terms & set(tokenize(f"{(titles or {}).get(rows[i].doc_id, '')} {rows[i].text}")))
    least = covers(picked[0])

    def reads(i: int) -> bool:  # a stand-in for a lead that missed the name must say some of the rest of the question
        if name_only:
            # ... unless the lead shares at most one other word with the question ('passed' of 'When was the X Act
            # passed?') and the stand-in itself names what is asked about (a name of two words or more) and states
            # the kind of value asked (the date, the number, the person): the sentence that answers is the one that
            # states the value
            return covers(i) >= max(least, 1 if len(terms) >= 2 else 0) or (least <= 1 and ok(i) and itself[i])
        return least <= 1 or 2 * covers(i) >= least
    lead = next((i for i in order if scores[i] >= floor and reads(i) and ok(i)), None)
    if lead is None:
        return list(picked)
    return ([lead] + [i for i in picked if i != lead and ok(i)])[:max_sentences]


def with_statement_first(question: str, rows: Sequence[SentenceRow], scores: Sequence[float], picked: Sequence[int],
                         candidates: Sequence[Candidate], full_texts: Mapping[str, str] | None,
                         titles: Mapping[str, str] | None, *, max_sentences: int, reach: int = 12) -> list[int]:
    """A lead that ends with a colon introduces what follows it ('these types have the following meanings:'): the
    best-scored of the next `reach` units of its chunk that names one of the question's names itself, and meets every
    constraint with its chunk, leads instead (the list item '`Ge(x)` - value must be "Greater than or Equal"')."""
    if not picked or not rows[picked[0]].text.rstrip().endswith(":"):
        return list(picked)
    cons = question_constraints(question)
    if not any(c.kind == "entity" for c in cons):
        return list(picked)
    lead = rows[picked[0]]
    text = next(((full_texts or {}).get(c.chunk_id) or c.text for c in candidates if c.chunk_id == lead.chunk_id), "")
    after = sorted((i for i, r in enumerate(rows) if r.chunk_id == lead.chunk_id and r.span[0] >= lead.span[1]),
                   key=lambda i: rows[i].span[0])[:reach]

    def states(i: int) -> bool:
        ck = check(question, Evidence(rows[i].text, text, "", (titles or {}).get(rows[i].doc_id, ""), rows[i].chunk_id),
                   cons)
        return ck.ok and any(v.constraint.kind == "entity" and v.where == "sentence" for v in ck.verdicts)
    best = max((i for i in after if states(i)), key=lambda i: scores[i], default=None)
    if best is None:
        return list(picked)
    return ([best] + [i for i in picked if i != best])[:max_sentences]


def with_field_first(question: str, rows: Sequence[SentenceRow], scores: Sequence[float], picked: Sequence[int],
                      candidates: Sequence[Candidate], full_texts: Mapping[str, str] | None,
                      titles: Mapping[str, str] | None, documents: Mapping[str, DocHead] | None, *,
                      max_sentences: int) -> list[int]:
    """The `Key: Value` line that states the asked attribute quoted first (core.answer.attributes.field_first), each
    sentence read with its chunk's whole text and its document's name and title (where a package names itself)."""
    if not picked:
        return list(picked)
    texts = {c.chunk_id: (full_texts or {}).get(c.chunk_id) or c.text for c in candidates}
    docs = documents or {}
    homes = [" ".join((texts.get(r.chunk_id, ""), (titles or {}).get(r.doc_id, ""),
                       docs[r.doc_id].name if r.doc_id in docs else "")) for r in rows]
    return field_first(question, [r.text for r in rows], homes, list(scores), list(picked),
                       max_sentences=max_sentences)


def field_rescue(question: str, rows: Sequence[SentenceRow], candidates: Sequence[Candidate],
                 full_texts: Mapping[str, str] | None, titles: Mapping[str, str] | None,
                 documents: Mapping[str, DocHead] | None) -> list[int]:
    """Rows of the `Key: Value` lines that state the asked attribute of the record the question names
    (core.answer.attributes.field_lines), each read with its chunk's name fields and its document's name and title."""
    texts = {c.chunk_id: (full_texts or {}).get(c.chunk_id) or c.text for c in candidates}
    docs = documents or {}
    records = [record_names(texts.get(r.chunk_id, ""), (titles or {}).get(r.doc_id, ""),
                            docs[r.doc_id].name if r.doc_id in docs else "") for r in rows]
    return field_lines(question, [r.text for r in rows], records)


def _label(row: SentenceRow, labels: Mapping[str, str], also: Sequence[str] = ()) -> str:
    """The version label a quoted sentence is led by when another version was retrieved beside it (with the labels
    of `also`, the other versions that state the very same sentence); '' when none."""
    return " & ".join(dict.fromkeys(([labels[row.doc_id]] if row.doc_id in labels else []) + list(also)))


def _quotes(rows: Sequence[SentenceRow], picked: Sequence[int], labels: Mapping[str, str],
            heads: Mapping[int, str] | None = None) -> str:
    """Quoted sentences with their chunk ids, each run of sentences from one version on a line of its own, led once
    by its label; a changelog item led by its release heading (`heads`, see release_heads)."""
    out, last = "", ""
    for i in picked:
        label = _label(rows[i], labels, _also_in(i, rows, labels))
        # The label is the sentence's source, not a claim of it: in brackets, like a citation, so that whatever reads
        # the answer's claims (faithfulness, gold matching) strips it with the chunk ids.
        lead = f"[{label[:78]}] " if label and label != last else ""
        if (heads or {}).get(i):
            lead += f"[{(heads or {})[i][:78]}] "
        sep = "\n" if lead and out else " " if out else ""
        out += f"{sep}{lead}{rows[i].text} [{rows[i].chunk_id}]"
        last = label
    return out


def _also_in(i: int, rows: Sequence[SentenceRow], labels: Mapping[str, str]) -> list[str]:
    """Labels of the other versions whose retrieved text has row i's sentence word for word."""
    if rows[i].doc_id not in labels:
        return []
    return [labels[r.doc_id] for r in rows if r.doc_id != rows[i].doc_id and r.doc_id in labels and r.text == rows[i].text]


def with_other_versions(picked: Sequence[int], texts: Sequence[str], doc_ids: Sequence[str],
                        labels: Mapping[str, str], *, limit: int = 3) -> list[int]:
    """The picked sentences, each from a versioned document followed by the same statement in its other versions
    when they word it differently (the draft's 'two days' beside the final's 'three'), so the answer shows both;
    `limit` sentences in all, a sentence never cut from the other version's wording after it."""
    out = list(picked)
    for i in picked:
        if out.index(i) >= limit:
            break
        if doc_ids[i] not in labels:
            continue
        best, best_sim = None, SAME_STATEMENT
        for j in range(len(texts)):
            if j in out or doc_ids[j] == doc_ids[i] or doc_ids[j] not in labels or texts[j] == texts[i]:
                continue
            sim = similar(texts[i], texts[j])
            if sim >= best_sim:
                best, best_sim = j, sim
        if best is not None:
            out.insert(out.index(i) + 1, best)
    keep = max(limit, 2)
    if len(out) > keep and out[keep - 1] in picked and out[keep] not in picked:
        keep += 1  # the sentence at the cut keeps its other version's wording beside it: one over the limit, never
        # a picked sentence dropped for it (leaving both out lost the answering sentence)
    return out[:keep]


def _asked(ask: NegatedAsk) -> str:
    """What the question asks to be absent, as it words it: its numbers when it names some ('three'), else the
    property ('require a hardware security key')."""
    if ask.values:
        nums = [w for w in re.findall(r"[\w.,€$£%]+", ask.words) if values(w)]
        return " / ".join(nums) if nums else ", ".join(f"{v:g}" for v in sorted(ask.values))
    return f"'{ask.words}'"


def _entity(doc_id: str, labels: Mapping[str, str], titles: Mapping[str, str]) -> str:
    title = titles.get(doc_id, doc_id)
    return f"{title}, {labels[doc_id]}" if doc_id in labels else title


def _negated(ask: NegatedAsk, rows: Sequence[SentenceRow], order: Sequence[int], labels: Mapping[str, str],
             titles: Mapping[str, str], *, max_sentences: int, notes: tuple[str, ...], support: float
             ) -> AnswerResult:
    """The answer to 'which ... does not ...': sentences that negate the property, else the thing that states it
    otherwise (another number) or without it, named beside the one where it holds; else a refusal saying why."""
    texts = [r.text for r in rows]
    got = negated_answer(ask, texts, order, limit=max_sentences, contexts=[r.context for r in rows])
    if got.direct:
        shown: list[int] = []
        for i in got.direct:  # a sentence that goes on from the one before ('It does not ...') comes with it
            if i > 0 and continues(texts[i]) and rows[i - 1].chunk_id == rows[i].chunk_id and i - 1 not in shown:
                shown.append(i - 1)
            shown.append(i)
        parts = [_quotes(rows, shown, labels)]
        cites = [rows[i].chunk_id for i in shown]
        note = "negated question: quoted sentences that negate the asked property"
    elif got.contrast:
        parts, cites = [], []
        for c, h in got.contrast:
            parts.append(f"{_entity(rows[c].doc_id, labels, titles)}: \"{texts[c]}\" [{rows[c].chunk_id}] — not "
                         f"{_asked(ask)}; {_entity(rows[h].doc_id, labels, titles)} says: \"{texts[h]}\" "
                         f"[{rows[h].chunk_id}].")
            cites += [rows[c].chunk_id, rows[h].chunk_id]
        note = ("negated question: named where the asked property is stated otherwise or missing, beside where it "
                "holds")
    else:
        why = (f"the retrieved sentences say only where it holds (\"{texts[got.holds[0]]}\" "
               f"[{rows[got.holds[0]].chunk_id}]), none where it does not" if got.holds else
               "no retrieved sentence negates it, or states it for one thing and otherwise for another")
        return AnswerResult(Answer(f"{REFUSAL} The question asks what does not hold ('not {ask.words}'); {why}.", (), True,
                                   "extractive"), notes=notes + ("negated question: refused",), support=support)
    return AnswerResult(Answer("\n".join(parts), tuple(dict.fromkeys(cites)), False, "extractive"),
                        notes=notes + (note,), support=support)


@dataclass(frozen=True)
class ScoredSentences:
    """The candidates' sentences with the support model's probability that each answers the question."""

    table: SentenceTable
    probs: Sequence[float]  # each sentence's ranker score (log-odds), what pick_sentences orders by
    best: float  # the model's support for an answer (its gate's probability)
    notes: tuple[str, ...] = ()


def scored_sentences(
    question: str, candidates: Sequence[Candidate], *, titles: Mapping[str, str] | None = None,
    li_scorer: SentenceScorer | None = None, blind: bool = False, model: SupportModel | None = None,
    vocabulary: Collection[str] | None = None, full_texts: Mapping[str, str] | None = None,
    answer_scorer: Callable[[str, Sequence[SentenceRow]], RowScorer] | None = None,
) -> ScoredSentences:
    """Every quotable sentence of the candidates scored by the support model (see extractive_answer's arguments)."""
    model = model or load_support_model()
    table = sentence_table(question, candidates, titles=titles, li_scorer=None if blind else li_scorer,
                           vocabulary=vocabulary, full_texts=full_texts)
    if not table.rows:
        return ScoredSentences(table, [], 0.0)
    reader = None
    if answer_scorer is not None and model.scorer_reads(blind or li_scorer is None):
        reader = answer_scorer(question, table.rows)
    probs, best = model.support(table.matrix, blind=blind or li_scorer is None, row_scorer=reader)
    notes: tuple[str, ...] = ()
    if blind or li_scorer is None:
        notes = (("support model: lexical and rank signals, and multilingual-e5's sentence match (the embedder does "
                  "not read this language)",) if reader is not None else
                 ("support model: lexical and rank signals only (the embedder does not read this language)",))
    return ScoredSentences(table, [float(p) for p in probs], float(best), notes)


def answer_question(
    question: str, candidates: Sequence[Candidate], cfg: AnswerConfig, llm: LLM, *,
    workspace: str = DEFAULT_WORKSPACE, query_id: str = "", titles: Mapping[str, str] | None = None,
    li_scorer: SentenceScorer | None = None, blind: bool = False, vocabulary: Collection[str] | None = None,
    full_texts: Mapping[str, str] | None = None, calibration: Calibration | None = None,
    documents: Mapping[str, DocHead] | None = None, cross: CrossReader | None = None,
    headings: Mapping[str, Sequence[str]] | None = None,
) -> AnswerResult:
    """The answer stage: picks the answerer (auto = Claude when available), refuses on an empty context without
    calling anything, and falls back to extractive (saying so) when Claude is unavailable or fails. The extractive
    answerer reads `titles` (doc id -> title) as context and `li_scorer`'s late-interaction sentence scores, unless
    `blind` (the embedder does not read the question's language); it reads whole chunks from `full_texts` (chunk id
    -> text) when given. Claude reads what the pipeline handed on (the pruned, budgeted context). Its refusal cut is
    the config's when set, else the workspace's `calibration` (core.answer.calibration), else the model's prior.
    `cross`: a multilingual reader; when no passage is written in the question's script, the offline answer ranks
    sentences by its similarity (core.answer.crosslingual), since word overlap does not reach across languages; when
    `blind`, it also reads the lexical answer (extractive_answer's `reader`, BLIND_LEAD_FLOOR)."""
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
            return _flag_instructions(res, top)
        except LLMError as exc:
            notes.append(f"Claude answer failed ({exc}); extractive answer instead")
    foreign = [c for c in top if cross is not None and
               reads_across(question, [(full_texts or {}).get(c.chunk_id) or c.text])]

    def across(why: tuple[str, ...]) -> AnswerResult:
        assert cross is not None
        floor = answer_floor(question, [(full_texts or {}).get(c.chunk_id) or c.text for c in foreign])
        got, best, said_cross = cross_answer(question, foreign, cross, titles=titles, full_texts=full_texts,
                                             max_sentences=cfg.max_sentences, refusal=REFUSAL, floor=floor)
        answer, said = quoted_language(question, got)
        # a question in its passages' own language that the lexical model does not read (German over German) is
        # read by the same multilingual reader, but is not asked across languages: its floor is named for what it is
        source = ("multilingual reader's floor for a language the lexical model does not read"
                  if floor == SAME_LANGUAGE_FLOOR else "cross-lingual floor")
        return _flag_instructions(AnswerResult(answer, Usage(), tuple(notes) + why + said_cross + said, best,
                                               floor, f"{source} (core/answer/crosslingual.py)"), top)
    if foreign and len(foreign) == len(top):
        return across(())
    cut = refusal_cut(cfg.refusal_threshold, calibration, load_support_model().threshold, model_fingerprint())
    if blind and cross is None:
        notes.append("the embedder does not read the question's language and no multilingual reader is loaded: the "
                     "lexical answer stands unchecked")
    res = extractive_answer(question, top, threshold=cut.value, max_sentences=cfg.max_sentences,
                            titles=titles, li_scorer=li_scorer, blind=blind, vocabulary=vocabulary,
                            full_texts=full_texts, documents=documents, reader=cross if blind else None,
                            headings=headings)
    notes.append("extractive answer (offline): sentences copied from the passages, not generated")
    notes.append(f"refusal threshold {cut.value:.2f}: {cut.source}")
    if foreign and res.answer.refused:  # nothing in the question's language supports an answer: the other passages
        other = across((f"no passage in the question's language supports an answer ({res.answer.text[:160]}); "
                        f"the {len(foreign)} passage(s) in another language read across languages",))
        if not other.answer.refused:
            return other
    answer, said = quoted_language(question, res.answer)
    return _flag_instructions(AnswerResult(answer, res.usage, tuple(notes) + res.notes + said, res.support,
                                           cut.value if res.threshold is None else res.threshold,
                                           cut.source if res.threshold_from is None else res.threshold_from), top)


def _flag_instructions(res: AnswerResult, passages: Sequence[Candidate]) -> AnswerResult:
    """The answer flagged (a note) when a passage it cites holds instructions addressed to the model."""
    note = injection_note(res.answer.citations, {c.chunk_id: c.text for c in passages})
    return replace(res, notes=(*res.notes, note)) if note else res


LANGUAGE_NAMES = {"en": "English", "ru": "Russian", "de": "German", "fr": "French", "es": "Spanish"}


def quoted_language(question: str, answer: Answer) -> tuple[Answer, tuple[str, ...]]:
    """An extractive answer quotes the documents; when they are in another language than the question, the answer
    says which ("(quoted in English)") and the trace notes both languages. Refusals and same-language answers pass."""
    if answer.refused:
        return answer, ()
    body = re.sub(r"(?i)\b(?:https?|ftp)://\S+|\bwww\.\S+", " ", strip_citations(answer.text))  # an address's
    # letters are no language ('?si=y-wN1uCsAuJOKlOT' read as Spanish)
    if len(re.findall(r"[^\W\d_]{2,}", re.sub(r"(?m)(^|\s)[A-Za-z][\w\-]*:\s", " ", body))) < 4:
        return answer, ()  # a value and a field key ('License-Expression: MIT') are too few words to tell a language
    q_lang, a_lang = guess_language(question), guess_language(body)
    if q_lang == a_lang or a_lang == "other":
        return answer, ()
    name = LANGUAGE_NAMES.get(a_lang, a_lang)
    return (replace(answer, text=f"{answer.text} (quoted in {name})"),
            (f"quoted in {name}, the document's language; the question is in "
             f"{LANGUAGE_NAMES.get(q_lang, q_lang)}",))


_CITE = re.compile(r"\s*\[[^\]]{1,80}\]")


def strip_citations(text: str) -> str:
    """Answer text without its [chunk-id] markers (for metrics that compare wording)."""
    return _CITE.sub("", text).strip()


# Answers whose text is no run of quoted sentences: a comparison (one line per item), the negated reading's contrast,
# the graph's global reduce. Their own rules chose each line; the check reads only quoted answers and Claude's.
_NOT_QUOTES = ("comparison of ", "negated question", "graph global search")


def verify_skip(answer: Answer | None, notes: Sequence[str], source: str | None) -> str | None:
    """Why the verify stage does not run on this answer (None: it runs)."""
    if answer is None:
        return "no answer to check"
    if answer.refused:
        return "the answer refused: nothing to check"
    if answer.mode not in ("extractive", "llm"):
        return f"a {answer.mode} answer (not quoted from passages)"
    for n in notes:
        for mark in _NOT_QUOTES:
            if n.startswith(mark):
                return f"{mark.strip()} answer: one line per item, each chosen by its own rule"
    return None


@dataclass(frozen=True)
class VerifiedAnswer:
    answer: Answer
    info: VerifyInfo
    notes: tuple[str, ...]


def verify_answer(question: str, answer: Answer, chunks: Mapping[str, ChunkText],
                  cross: CrossReader | None = None, known: Iterable[str] = ()) -> VerifiedAnswer:
    """The verify stage's adapter: an offline answer's quoted sentences checked against the question's constraints
    (refused with the reason and the nearest fact when none meets them all), or Claude's answer checked against the
    passages it cites (flagged at its head when one is unmet). `cross`: a multilingual reader that looks for the
    question's names in passages written in another script, or a German question's words that may be names
    (core.answer.crosslingual.NameFinder). `known`: the titles of the documents the query read; a title written in
    lower case ('greenlet') is a name when the question writes it (core.answer.verify.question_constraints)."""
    known = tuple(known)
    names = NameFinder(cross) if cross is not None and reads_across(question, [c.text for c in chunks.values()]) \
        else None  # (a German question over German passages: its words that may be names, core.answer.verify)
    if answer.mode == "llm":
        v = verify_model_answer(question, answer.text, answer.citations, dict(chunks), names=names, known=known)
    else:
        v = verify_quotes(question, answer.text, answer.citations, dict(chunks), refusal=REFUSAL, names=names,
                          known=known)
    out = replace(answer, text=v.text, citations=v.citations, refused=v.refused)
    verdicts = v.info.verdicts()
    notes = [f"{len(v.info.constraints)} constraint(s): " + ", ".join(
        f"{x.constraint.kind} '{x.constraint.text}' {x.verdict}" for x in verdicts)] if verdicts else []
    if v.info.reason:
        notes.append(f"{v.info.action}: {v.info.reason}")
    return VerifiedAnswer(out, v.info, tuple(notes))
