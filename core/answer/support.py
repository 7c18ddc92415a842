"""Support model of the offline answer: does a retrieved sentence answer the question? A small logistic regression over
signals the pipeline already has, with coefficients read from data (core/models/data/support_model.npz, a fitted-linear
record fitted on public question-answering data by python -m train.support), never fitted at import time. The shipped model is a prior:
a workspace with a curated golden set calibrates its refusal cut on it (core.answer.calibration)."""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Protocol, Sequence

import numpy as np

from core.models import DATA_DIR
from core.answer.units import code_after, code_before, list_after, quotable, table_header, units, without_links
from core.models.fitted import FittedLinear, load_fitted, save_fitted, sigmoid
from core.models.tokens import maxsim
from core.text import EN_STOP, RU_STOP, sentence_spans, tokenize
from core.types import Candidate, Span, SpanScorer

SentenceScorer = SpanScorer  # the answer stage's name for the sentence scorer it hands in

DEFAULT_MODEL_PATH = DATA_DIR / "support_model.npz"
REFIT = "python -m train.support"

FEATURES: tuple[str, ...] = (
    "sent_cov",      # rarity-weighted share of the question's terms the sentence itself states
    "ctx_cov",       # ... that the sentence, its chunk or its document title state (a cut-out sentence's context)
    "missing",       # ... that no retrieved passage or title mentions at all (question-level: other quarter, city)
    "spec_ctx",      # share of the question's specific terms (codes, numbers, names, quarters) in the sentence's context
    "spec_sent",     # ... in the sentence itself
    "spec_missing",  # ... that no retrieved passage mentions (question-level: the other quarter, code or city)
    "absent",        # share of the question's terms the whole corpus never uses (question-level; parental, Q4)
    "atype",         # 1 when the sentence holds the kind of thing asked (a number for 'how many', a year for
                     # 'which year', an amount for 'price'), or nothing in particular is asked; else 0
    "novelty",       # share of the sentence's terms the question does not use: an answer adds something (an intro
                     # sentence that restates the question's words does not)
    "li",            # late-interaction MaxSim of question and sentence, read inside its chunk
    "li_rel",        # li minus the best sentence's li (0 for the best)
    "rerank",        # the chunk's rerank score
    "rerank_rel",    # ... minus the top chunk's
    "rerank_gap",    # top rerank score minus the second (question-level: one clear winner or a flat list)
    "agree",         # mean of 1/rank in the BM25 and dense lists (0 when absent): the stages agree on the chunk
    "pos",           # 1 / the chunk's rank in the final list
    "kept",          # 1 when sentence pruning kept the sentence (or the text was not pruned): the pruner's verdict,
                     # now that the answer reads whole chunks
    "head_cov",      # rarity-weighted share of the question's terms the sentence, its heading or its document title
                     # state: the sentence's local subject ('Consumer division' above 'Revenue grew ...')
    "attr_cov",      # ... of the question's general words only (what is asked about: 'project manager', 'salary',
                     # 'lead time'), names and codes left out: a sentence about the right thing but another attribute
                     # (the integration lead, not the project manager) misses exactly these
    "contradict",    # 1 when the question names a quarter, year, code, version or config key that the sentence (with
                     # its heading and document title) does not state while it states a sibling of the same kind
                     # ('Q4' asked, a Q3 report read): the near miss that word overlap alone rewards
    "pair_cov",      # share of the question's attribute phrases (two general words in a row: 'project manager',
                     # 'list price', 'data engineer') that the sentence or its heading says as a phrase (at most one
                     # word between): 'account manager' covers 'manager' but not 'project manager'
    "spec_local",    # share of the question's specific terms (names, codes, numbers, periods) that the sentence, its
                     # heading or its document title state: 'Kafka' asked, a sentence of the Redis reference
                     # read (spec_ctx also counts the rest of the chunk, which may name it in passing)
)
# Signals that come from the embedder's token vectors: meaningless when the embedder does not read the question's
# language, so they are replaced by their training means and the lexical signals decide (see impute).
MODEL_FEATURES = frozenset({"li", "li_rel", "rerank", "rerank_rel", "rerank_gap"})

# Question words that carry no content (on top of the search stop words).
_FILLER_WORDS = ("much many tell me about please list name give describe explain our we you your i there any exist "
                 "сколько какой какая какие каков кто когда где почему "
                 # the cases of 'кто' and 'что' and the relative 'который' (every form stems to котор), as English
                 # 'which', 'that', 'who' are stop words
                 "кого кому кем чему чём который")
_FILLER = frozenset(t for w in _FILLER_WORDS.split() for t in tokenize(w))
_IDENT = re.compile(r"[\w][\w.\-]*[\w]|\w", re.UNICODE)
# The plural of a product code ('the interim XR-200s'): passages write the code itself, so the question's term is the
# code. Letters, an optional hyphen or underscore, digits, then one 's'.
_CODE_PLURAL = re.compile(r"([^\W\d_]+[-_]?\d+)s")
# Words that pin a question to one period: the near-miss questions differ from answerable ones in exactly these.
_PERIOD_WORDS = frozenset(t for w in (
    "first second third fourth q1 q2 q3 q4 january february march april may june july august september october "
    "november december первый второй третий четвёртый четвертый первом втором третьем четвёртом четвертом квартал "
    "январь февраль март апрель май июнь июль август сентябрь октябрь ноябрь декабрь").split() for t in tokenize(w))


_ORDINALS = frozenset(t for w in "first second third fourth первый второй третий четвёртый четвертый первом втором "
                     "третьем четвёртом четвертом".split() for t in tokenize(w))
_QUARTER_AFTER = re.compile(r"(?i)^\W+(quarter|квартал)")


def _names_period(question: str, m: re.Match[str], stem: str) -> bool:
    """Whether this word pins the question to a period: a quarter ('Q3', 'third quarter', 'квартал'), or a month
    written as one ('May', not the verb 'may'; Russian months are lower case). 'first action' or 'первые инженеры'
    name no period."""
    if stem not in _PERIOD_WORDS:
        return False
    if stem in _ORDINALS:
        return bool(_QUARTER_AFTER.match(question[m.end():]))
    raw = m.group(0)
    return not raw.isascii() or raw[:1].isupper() or raw.lower().startswith("q")


@dataclass(frozen=True)
class QuestionTerms:
    """The question's search terms (stems), their surface words for messages, and the specific ones (`codes`: codes,
    numbers, names, period words) that a near-miss question gets wrong."""

    terms: tuple[str, ...]
    words: Mapping[str, str]
    codes: frozenset[str]


@lru_cache(maxsize=8192)
def _word_stems(text: str) -> tuple[str | None, ...]:
    """One stem per word, in order; None for a stop word or a lone letter (it breaks a phrase). Kept per text: the
    same sentences and headings are read for question after question."""
    out: list[str | None] = []
    for m in _IDENT.finditer(text):
        toks = [t for t in tokenize(m.group(0)) if len(t) > 1 or t.isdigit()]
        out.append(toks[0] if toks else None)
    return tuple(out)


def attribute_pairs(question: str) -> list[tuple[str, str]]:
    """Pairs of general content words that stand side by side in the question ('project manager', 'list price'):
    no name (a capitalised word inside the question), code, number, period or filler word; a stop word between two
    words breaks the pair."""
    seq: list[str | None] = []
    for m in _IDENT.finditer(question):
        raw = m.group(0)
        toks = [t for t in tokenize(raw) if len(t) > 1 or t.isdigit()]
        named = raw[:1].isupper() and m.start() > 0 and question[: m.start()].strip()[-1:] not in ".?!"
        general = bool(toks) and not named and not any(ch.isdigit() or ch in "_.-" for ch in raw) and \
            toks[0] not in _FILLER and toks[0] not in _PERIOD_WORDS
        seq.append(toks[0] if general else None)
    return list(dict.fromkeys((a, b) for a, b in zip(seq, seq[1:]) if a and b and a != b))


def pair_coverage(pairs: Sequence[tuple[str, str]], *texts: str) -> float:
    """Share of `pairs` said as phrases in one of `texts`: both words within three words of each other, in either
    order (Russian moves words freely: 'выросла выручка' / 'Выручка выросла')."""
    if not pairs:
        return 1.0
    found = 0
    seqs = [_word_stems(t) for t in texts if t]
    for a, b in pairs:
        if any(w == a and b in seq[max(0, i - 3): i + 4] for seq in seqs for i, w in enumerate(seq)):
            found += 1
    return found / len(pairs)


def question_terms(question: str) -> QuestionTerms:
    """Stems of the content words (a possessive 's' and other lone letters dropped), each mapped back to the word the
    user typed, so messages show words, never stems."""
    terms: list[str] = []
    words: dict[str, str] = {}
    codes: set[str] = set()
    for m in _IDENT.finditer(question):
        raw = m.group(0)
        plural = _CODE_PLURAL.fullmatch(raw)
        # a capitalised word that does not open the question names something (a city, a person, a product)
        named = raw[:1].isupper() and m.start() > 0 and question[: m.start()].strip()[-1:] not in ".?!"
        toks = tokenize(plural.group(1) if plural else raw)
        for t in toks:
            # a lone letter (the possessive 's') or a one-character part of an identifier (the '2' of Q2) would match
            # anything; a standalone digit ('3 days') stays
            if t in _FILLER or (len(t) == 1 and (not t.isdigit() or len(toks) > 1)):
                continue
            if t not in words:
                terms.append(t)
                # a part of an identifier is shown as the whole identifier the user typed
                words[t] = raw
            if any(ch.isdigit() for ch in t) or any(ch in t for ch in "_.-") or named or _names_period(question, m, t):
                codes.add(t)
    return QuestionTerms(tuple(terms), words, frozenset(codes))


# What a question asks for, by its wording, and how to see it in a sentence (numbers the question itself has do
# not count: 'NX-200' in a sentence does not answer 'how many ... NX-200').
_ASKS = (
    # the German cues say what the English ones say ('wer', 'wann', 'in welchem Jahr', 'wie viele'): a German question
    # over English passages is answered by core.answer.crosslingual, which reads the asked kind too
    ("person", re.compile(r"(?i)^\s*(who|whom)\b|^\s*(кто|кем|кого|кому)\b|^\s*(von |mit |für )?(wer|wem|wen)\b")),
    ("version", re.compile(r"(?i)\b(which|what) (\w+ )?(version|release)\b|как(ой|ая) (верси|выпуск|релиз)")),
    ("amount", re.compile(r"(?i)\b(price|prices|cost|costs|fee|fees|revenue|revenues|budget|turnover|salary|"
                          r"salaries|stipend|allowance|margin|spend|spent)\b|стои|цен[аыу]|выручк|бюджет|зарплат|"
                          r"надбавк|маржа")),
    ("month", re.compile(r"(?i)\b(which|what|in which) month\b|в каком месяце|какого месяца|\bin welchem monat\b")),
    # 'when' opens the question (or a second part of it): 'the first action when a gateway reports ...' asks no date,
    # nor does a 'when' clause before the question proper ('When imperialism impacts ..., what is it called?': the
    # wh-word after the comma asks; core.answer.verify reads it so too)
    ("year", re.compile(r"(?i)\b(which|what) year\b|^\s*(by |since |until )?when\b(?![^?]*,\s*(what|which|who|whom|"
                        r"whose|where|why|how)\b)|\b(and|or),? when\b|"
                        r"в каком году|^\s*когда\b|\bи когда\b|\b(welches|in welchem) jahr\b|"
                        r"^\s*(seit |bis |ab )?wann\b|\b(und|oder),? wann\b")),
    # the Russian cues say what the English ones say: 'how long / often / far / high', 'what percentage / share / rate'
    ("number", re.compile(r"(?i)\bhow (many|much|long|large|big|often|far|high|old)\b|\bwhat (rate|percentage|value|share)"
                          r"\b|\bdefault\b|сколько|на сколько|каким моментом|какое значение|"
                          r"\bкак (долго|часто|далеко|высоко)\b|\bнасколько\b|"
                          r"\bкак(ой|ому|ого|ова|ую|ая|ов)\s+(процент|дол[юиея]|ставк)|"
                          r"\bwie (viele?|lange|groß|oft|weit|hoch)\b|\bwieviele?\b")),
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# Counts written as words answer 'how many' as well as digits do ('up to three days per week').
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty hundred thousand "
    "один одна одно два две двух двум двумя три трёх трех трём трем тремя четыре четырёх четырех четырём четырем "
    "четырьмя пять пяти пятью шесть шести шестью семь семи восемь восьми девять девяти десять десяти двенадцать "
    "пятнадцать двадцать двадцати тридцать тридцати сорок сто".split())
# A rule's 'when' ('When may first-class tickets be booked?') is answered by a condition as well as by a date.
_WHEN_RULE = re.compile(r"(?i)^\s*when\s+(may|must|should|can|do|does)\b|^\s*когда\s+(можно|нужно|следует)")
_CONDITION = re.compile(r"(?i)\b(when|whenever|if|once|after|before|until|within)\b|\b(когда|если|после|пока)\b")
_YEARISH = re.compile(r"\b(19|20)\d\d\b|\b(January|February|March|April|May|June|July|August|September|October|"
                      r"November|December)\b|(?i:январ|феврал|март|апрел|ма[йя]|июн|июл|август|сентябр|октябр|ноябр|декабр)")
_AMOUNT = re.compile(r"(?i)[€$£₸]\s?\d|\b(eur|usd)\s?\d|\d\s?(€|eur|euros?|usd|dollars?|руб\w*|тенге|₸|евро|"
                     r"млн|million|billion)(?!\w)|\d\s?%")
# Two capitalised words in a row (Latin or Cyrillic): a person's name answers 'who'. A surname may follow a particle,
# in either script ('Ludwig van Beethoven', 'Луи-Жозеф де Монкальм') or hyphened to it ('Hassan al-Turabi',
# 'Хасан ат-Тураби').
_NAME = re.compile(r"\b([A-ZА-ЯЁ][a-zа-яё]+(?:-[A-ZА-ЯЁ][a-zа-яё]+)?)\s+((?:(?:van|von|de|der|du|da|di|la|le|ibn|bin|"
                   r"ван|фон|де|дер|дю|да|ди|ла|ле|ибн|бен) )?(?:(?:al|el|ad|an|ar|as|at|ash|аль|эль|ад|ан|ар|ас|ат|аш)-)?"
                   r"[A-ZА-ЯЁ][a-zа-яё]+)")
_VERSION = re.compile(r"\b\d+\.\d+(?:\.\d+)?\b")
_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b|"
                    r"(?i:\b(январ|феврал|март|апрел|ма[йяе]|июн|июл|август|сентябр|октябр|ноябр|декабр)[а-яё]*)")
_CODE_WORD = re.compile(r"(?<![\w-])(?=[\w-]*[^\W\d_])(?=[\w-]*\d)\w+(?:-\w+)+|(?<![\w-])[^\W\d_]+\d\w*|"
                        r"(?<![\w.,-])\d+[^\W\d_]\w*")


def asked_type(question: str) -> str | None:
    """'person', 'version', 'amount', 'year', 'number' or None: the kind of thing the question asks for."""
    for kind, pattern in _ASKS:
        if pattern.search(question):
            return kind
    return None


_HOW_MANY = re.compile(r"(?i)\bhow many\s+((?:[\w-]+\s+){0,2}[\w-]+)|сколько\s+(\w+)")
# Words that end the counted phrase ('how many AB-12 modules did ...'): a verb or auxiliary after the noun.
_COUNT_STOP = frozenset("did do does is are was were have has had can could will would should may must".split())
# 'one' is mostly a determiner ('receives one gateway'): on its own it does not answer 'how much' or 'what value'.
_DETERMINER_NUMBERS = frozenset("one один одна одно".split())
_WHICH_YEAR = re.compile(r"(?i)\b(which|what) year\b|в каком году|\b(welches|in welchem) jahr\b")
_YEAR = re.compile(r"\b(19|20)\d\d\b")


def _counted(question: str) -> set[str]:
    """Stems of what a 'how many' question counts ('how many weeks of leave' -> week), to find it beside a number."""
    m = _HOW_MANY.search(question)
    if not m:
        return set()
    out: set[str] = set()
    for w in (m.group(1) or m.group(2) or "").split():
        if w.lower() in _COUNT_STOP:
            break
        if not any(ch.isdigit() for ch in w):  # a code ('AB-12') names what is counted, the noun after it is counted
            out.update(tokenize(w))
    return out


def holds_type(sentence: str, kind: str | None, question: str) -> bool:
    """Whether the sentence holds an answer of that kind that the question does not already contain: a person's name
    (two capitalised words), a version number, an amount of money or a percentage, a year (or a date for 'when'), a
    number — for 'how many X', a number within three words of X."""
    if kind is None:
        return True
    if kind == "person":
        asked = {w.lower() for w in re.findall(r"\w+", question)}
        return any({m.group(1).lower(), m.group(2).split()[-1].lower()} - asked for m in _NAME.finditer(sentence))
    if kind == "version":
        return any(v not in question for v in _VERSION.findall(sentence))
    if kind == "month":  # a month the question does not name ('a pilot for 2025' does not say which month)
        return any(m.group(0).lower() not in question.lower() for m in _MONTH.finditer(sentence))
    # the digits of a code ('NX-0200-R', 'AB-12', '5G') are no quantity
    sentence = _CODE_WORD.sub(" ", sentence)
    own = set(_NUMBER.findall(question)) | {w for w in re.findall(r"\w+", question.lower()) if w in _NUMBER_WORDS}
    new_numbers = [n for n in _NUMBER.findall(sentence) if n not in own]
    if kind == "year" and not _WHICH_YEAR.search(question):
        # a date ('in September', 'on 14 May 2024'), or for a rule's 'when' also a condition
        return bool(_YEARISH.search(sentence)) or bool(_WHEN_RULE.search(question) and _CONDITION.search(sentence))
    if kind == "number":
        new_numbers += [w for w in re.findall(r"\w+", sentence.lower()) if w in _NUMBER_WORDS and w not in own]
    if not new_numbers:
        return False
    if kind == "amount":
        return bool(_AMOUNT.search(sentence))
    if kind == "year":  # 'which year': a year the question does not name
        return any(y.group(0) not in own for y in _YEAR.finditer(sentence))
    counted = _counted(question)
    if not counted:
        return any(n.lower() not in _DETERMINER_NUMBERS for n in new_numbers)
    words = re.findall(r"\w+(?:[.,]\d+)?", sentence)
    for i, w in enumerate(words):
        if (_NUMBER.fullmatch(w) or w.lower() in _NUMBER_WORDS) and w.lower() not in own:
            near = words[max(0, i - 3): i + 4]
            if any(t in counted for x in near for t in tokenize(x)):
                return True
    return False


# Specific terms by kind, each reduced to a canonical form so two spellings of one thing agree ('Q3', 'third
# quarter', 'III квартал', 'третьем квартале' -> q3; 'NX-200' and 'NX-0200-R' -> NX 200) and siblings of one kind
# can be told apart ('Q3' vs 'Q4', 'E-APP-4107' vs 'E-APP-4108', 'CACHE_TTL' vs 'CACHE_SIZE').
_Q_ORD = {"first": 1, "second": 2, "third": 3, "fourth": 4, "перв": 1, "втор": 2, "трет": 3, "четв": 4,
          "i": 1, "ii": 2, "iii": 3, "iv": 4}
_QUARTER = re.compile(r"(?i)\bq([1-4])\b|\b(first|second|third|fourth)\s+quarter|\b(i{1,3}|iv)\s+квартал|"
                      r"\b(перв|втор|трет|четв)[а-яё]*\s+квартал")
_YEAR_TERM = re.compile(r"\b(19[89]\d|20\d\d)\b")
_CODE_TERM = re.compile(r"\b([A-Z]{1,4}(?:-[A-Z]{1,4})*)-(\d+)((?:-\d+)*)(?:-[A-Z]{1,2})?\b")
_KEY_TERM = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
# A named project ('Project Orion', 'проект «Северный ветер»'): a staffing plan's 'Jane Doe is the data engineer' under
# the heading 'Project Vega' does not answer who the data engineer of Project Orion is. Words that follow 'Project'
# in a document's title ('Project Brief') name no project.
_PROJECT = re.compile(r"\bProject\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)|\bпроект[а-яё]*\s+«([^»]{2,40})»", re.IGNORECASE)
_NOT_PROJECT = frozenset("brief status update report plan passport manager office code name team".split())
# A name directly followed by a dotted version ('Python 3.11', 'TLS 1.3', 'AcmeOS 3.9.1'): a capitalised, CamelCase
# or all-capital word, each name its own kind (version:python), so one product's versions are siblings of each other
# only. An amount is no version ('EUR 2.4 million', 'grew 7.3%'), nor a function word opening a sentence ('Since 3.2').
_PRODUCT_VERSION = re.compile(r"\b([^\W\d_][^\W_]*)\s+v?(\d+(?:\.\d+)+)"
                              r"(?!\d|\s*(?:%|percent|million|billion|bn\b|млн|млрд))")
# Function words on top of the stop words, then currency codes.
_NOT_PRODUCT = EN_STOP | RU_STOP | frozenset("since after before until till than into over under about up down then "
                                             "also only "
                                             "eur usd gbp chf jpy cny rub kzt sek nok dkk pln cad aud".split())


def specific_terms(text: str) -> dict[str, set[str]]:
    """The text's quarters, years, product codes (by prefix), versions (by product) and config keys, canonical."""
    out: dict[str, set[str]] = {}
    for m in _QUARTER.finditer(text):
        key = next(g for g in m.groups() if g)
        out.setdefault("quarter", set()).add(f"q{_Q_ORD.get(key.lower(), key)}")
    for m in _YEAR_TERM.finditer(text):
        out.setdefault("year", set()).add(m.group(1))
    for m in _CODE_TERM.finditer(text):
        if m.group(1).lower() == "q" or _YEAR_TERM.fullmatch(m.group(2)) and not m.group(3):
            continue
        nums = ".".join(str(int(n)) for n in [m.group(2)] + m.group(3).split("-")[1:])
        out.setdefault("code:" + m.group(1), set()).add(nums)
    for m in _PRODUCT_VERSION.finditer(text):
        name = m.group(1)
        if name[:1].isupper() and name.lower() not in _NOT_PRODUCT:
            out.setdefault("version:" + name.lower(), set()).add(m.group(2))
    for m in _KEY_TERM.finditer(text):
        out.setdefault("key", set()).add(m.group(0))
    for m in _PROJECT.finditer(text):
        if m.group(1):
            name = m.group(1)
            if not name[:1].isupper():
                continue
            words = [w for w in name.split() if w[:1].isupper()]
            if not words or words[0].lower() in _NOT_PROJECT:
                continue
            out.setdefault("project:latin", set()).add(" ".join(words[:2]).lower() if len(words) > 1 and
                                                       words[1].lower() not in _NOT_PROJECT else words[0].lower())
        else:  # by script: 'North Wind' asked in English is not contradicted by «Северный ветер» in a Russian text
            out.setdefault("project:cyrillic", set()).add(" ".join(m.group(2).lower().split()))
    return out


def contradicts(asked: Mapping[str, set[str]], stated: Mapping[str, set[str]]) -> bool:
    """True when, for some kind, none of the question's terms is stated but another term of that kind is: a report
    on another quarter, the neighbouring error code, another config key."""
    return any(kind in stated and not (terms & stated[kind]) for kind, terms in asked.items())


@dataclass(frozen=True)
class SentenceRow:
    """One candidate sentence with its features (in FEATURES order)."""

    chunk_id: str
    doc_id: str
    rank: int
    text: str
    span: Span
    features: tuple[float, ...]
    # the sentence's local subject as a reader sees it: document title and nearest heading ('Acme Server 4.9
    # Configuration Reference / CACHE_TTL'); what an answerability scorer (train/answer_scorer.py) reads before it
    context: str = ""


@dataclass(frozen=True)
class SentenceTable:
    rows: tuple[SentenceRow, ...]
    terms: QuestionTerms
    unseen: tuple[str, ...]  # question stems no retrieved passage (or its title) mentions, rarest first
    matrix: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, len(FEATURES))))


def _is_claim(sent: str) -> bool:
    # Table rows, headings and title lines are poor answers on their own: a claim is a sentence of ordinary length
    # that ends like one (a short line without closing punctuation is a heading). The pruner's gap mark is no text.
    sent = sent.strip(" …")
    n = len(re.findall(r"\w+", sent))
    if len(re.findall(r"\w+", without_links(sent))) < 2:
        return False  # a web address with a word or none around it (':target: https://…') states nothing
    if 2 <= n < 4:  # a short sentence that states a value ('Defaults to 600.', 'Default: 30 s.') answers on its own
        return any(ch.isdigit() for ch in sent) and sent[-1:] in ".!" and not sent.startswith(("|", "#"))
    return 4 <= n <= 80 and not sent.startswith(("|", "#")) and (sent[-1:] in '.!?:;)»"' or n >= 8)


def _strip_heading_lines(text: str, s: int, e: int) -> int:
    """Start of the span past its leading heading and decoration lines ('Supply chain' glued above 'The quoted lead
    time ...', a release's '-----' rule and 'AcmeOS 3.9.1 - released ...' line, a memo's 'Date: ...' line): they
    are the sentence's context (see _headings), not part of a quotable claim. A short line followed by one that goes
    on in lower case is a wrapped sentence (PDF), not a heading."""
    while True:
        nl = text.find("\n", s, e)
        if nl < 0:
            return s
        line = text[s:nl].strip()
        rest = text[nl + 1:e].lstrip()
        if not rest:
            return s
        decoration = bool(line) and not line.strip("-=*_#| ")
        if not (decoration or not line or (_heading_line(line) and not _wrapped(line) and not rest[:1].islower())):
            return s
        s = nl + 1


def claim_spans(text: str) -> list[Span]:
    """The units of a passage an extractive answer may quote: its sentences without the heading lines glued above
    them, and in line-structured text its field lines, list items and docstring lines (a line of code only with the
    sentence that introduces it or points back to it)."""
    out = []
    us = units(text)
    for j, u in enumerate(us):  # line-structured text (fields, lists, code blocks) read line by line (core.answer.units)
        s, e = u.start, u.end
        ok = quotable(" ".join(text[s:e].split()), u.kind)
        if ok is None:
            s = _strip_heading_lines(text, s, e)
            while s < e and text[s].isspace():
                s += 1
            ok = s < e and _is_claim(" ".join(text[s:e].split()))
        if ok:
            # a sentence that introduces a short code line or a short list, or points back to a code line ('This will
            # install ...'), quotes it
            out.append((code_before(text, us, j) or s, code_after(text, us, j) or list_after(text, us, j) or e))
    return out


def claim_text(text: str, s: int, e: int) -> str:
    """A claim's text as an answer quotes it: the span with its white space collapsed; a Markdown table's body row
    read with its header, each value after its column's name ('chardet: 99th percentile 2.7 ms; 95th percentile
    1.0 ms'), for '| chardet | 2.7 ms | 1.0 ms |' alone does not say which value is which."""
    plain = " ".join(text[s:e].split())
    head = table_header(text, s) if plain.startswith("|") else None
    if not head:
        return plain
    cells = [c.strip() for c in plain.strip("|").split("|")]
    if len(cells) != len(head):
        return plain
    pairs = [f"{h} {c}" if h else c for h, c in zip(head[1:], cells[1:]) if c]
    return f"{cells[0]}: " + "; ".join(pairs) if cells[0] else "; ".join(pairs)


def reading_texts(candidates: Sequence[Candidate], full_texts: Mapping[str, str] | None) -> list[Candidate]:
    """The candidates as the answer reads them: each chunk's whole text when `full_texts` has it (sentence pruning
    may have cut the very sentence that answers), else the text the pipeline handed on."""
    if not full_texts:
        return list(candidates)
    return [replace(c, text=full_texts[c.chunk_id]) if full_texts.get(c.chunk_id) else c for c in candidates]


def _kept_mask(c: Candidate, spans: Sequence[Span]) -> list[float]:
    """1 for each sentence the pruner kept (its kept spans are offsets into the whole chunk text); a chunk that was
    never pruned is all kept."""
    kept = c.meta.get("kept_spans")
    if not kept:
        return [1.0] * len(spans)
    return [1.0 if any(s < ke and e > ks for ks, ke in kept) else 0.0 for s, e in spans]


_CYRILLIC = re.compile(r"[а-яё]")
# Russian inflects names and nouns beyond what the stemmer folds ('Самара' -> самар, 'самарского' -> самарск,
# 'инженеров'/'инженеры'): a Cyrillic stem is matched by its first five letters, on both sides.
_RU_KEY = 5


def _key(term: str) -> str:
    return term[:_RU_KEY] if len(term) > _RU_KEY and _CYRILLIC.search(term) else term


# A percentage written as a sign ('51.6%') states what 'what percentage / percent' asks about; and British and
# American spellings ('favour' / 'favor', 'colour' / 'color') are one word: a text's stems carry the other form too.
_PERCENT_SIGN = re.compile(r"\d\s?%")
_PERCENT_STEMS = frozenset(tokenize("percent percentage"))
_OUR = re.compile(r"^[a-z]{2,}[^aeiou]our$")  # colour, favour, honour, labour, behaviour (not 'hour', 'four', 'tour')
_OR = re.compile(r"^[a-z]{2,}[^aeiou]or$")    # color, favor, honor, labor, behavior


# a count written in words or digits is one term ('four primes', '4 primes')
_COUNT_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()
_COUNT_STEMS = [tokenize(w)[0] for w in _COUNT_WORDS]  # as the stemmer has them ('twelv', 'twenti')
_COUNT_FORMS = {**{w: str(i) for i, w in enumerate(_COUNT_STEMS)}, **{str(i): w for i, w in enumerate(_COUNT_STEMS)}}


def _spellings(t: str) -> tuple[str, ...]:
    if t in _COUNT_FORMS:
        return (t, _COUNT_FORMS[t])
    if _OUR.match(t):
        return (t, t[:-2] + "r")
    if _OR.match(t):
        return (t, t[:-1] + "ur")
    return (t,)


@lru_cache(maxsize=8192)
def _plain_terms(text: str) -> frozenset[str]:
    """A text's stems as it writes them (what the novelty feature counts: another spelling adds no new word)."""
    return frozenset(_key(t) for t in tokenize(text))


@lru_cache(maxsize=8192)
def _terms(text: str) -> frozenset[str]:
    """A text's stems, Cyrillic ones by their key (see _key): what a question's (keyed) term is looked up in. Kept
    per text (a chunk, a sentence, a title is read again for every question that retrieves it). An English stem
    carries its other spelling ('favour' and 'favor'), a percent sign the stems of 'percent' and 'percentage'."""
    out = {_key(v) for t in _plain_terms(text) for v in _spellings(t)}
    if _PERCENT_SIGN.search(text):
        out |= _PERCENT_STEMS
    return frozenset(out)


# An acronym the question writes ('UMC', 'MSP') is spelled out in a passage as the initials of a run of capitalised
# words, small words between them skipped ('the United Methodist Church'): the passage states it.
_ACRONYM = re.compile(r"[A-Z]{2,6}")
_ACRONYM_SMALL = frozenset("of the and for de la von van der du des".split())


@lru_cache(maxsize=8192)
def _initials(text: str) -> tuple[str, ...]:
    """The initials of each run of capitalised words in the text (upper-case), small words inside a run skipped."""
    runs, run = [], ""
    for w in re.findall(r"[^\W\d_]+", text):
        if w[:1].isupper():
            run += w[0].upper()
        elif w.lower() not in _ACRONYM_SMALL:
            if len(run) >= 2:
                runs.append(run)
            run = ""
    if len(run) >= 2:
        runs.append(run)
    return tuple(runs)


def _spelled_out(qt: "QuestionTerms", text: str) -> set[str]:
    """The question's acronym terms whose letters a run of capitalised words in the text spells out."""
    acr = [t for t in qt.terms if _ACRONYM.fullmatch(qt.words.get(t, ""))]
    if not acr:
        return set()
    runs = _initials(text)
    return {t for t in acr if any(qt.words[t] in r for r in runs)}


@lru_cache(maxsize=8192)
def _specific(text: str) -> dict[str, frozenset[str]]:
    """specific_terms of a chunk's sentence, heading or title, kept per text (read-only: never changed by a caller)."""
    return {k: frozenset(v) for k, v in specific_terms(text).items()}


@lru_cache(maxsize=2048)
def _chunk_reading(text: str, versioned: bool) -> tuple[tuple[Span, ...], tuple[str, ...], tuple[str, ...]]:
    """A chunk's quotable sentence spans, each sentence's text and its heading (what does not depend on the
    question), kept per chunk text."""
    spans = tuple(claim_spans(text))
    return spans, tuple(claim_text(text, s, e) for s, e in spans), tuple(_headings(text, spans,
                                                                                       versioned=versioned))


_VOCAB_KEYS: dict[int, tuple[Collection[str], frozenset[str]]] = {}


def _vocabulary_keys(vocabulary: Collection[str]) -> frozenset[str]:
    """The keys (see _key) of a corpus vocabulary's Cyrillic stems, built once per vocabulary object (an index's
    vocabulary is one frozenset for its life; the object is kept beside its keys so its id is never reused)."""
    got = _VOCAB_KEYS.get(id(vocabulary))
    if got is None or got[0] is not vocabulary:
        if len(_VOCAB_KEYS) >= 8:
            _VOCAB_KEYS.clear()
        got = (vocabulary, frozenset(_key(t) for t in vocabulary if len(t) >= _RU_KEY and _CYRILLIC.search(t)))
        _VOCAB_KEYS[id(vocabulary)] = got
    return got[1]


def _keyed(qt: QuestionTerms) -> QuestionTerms:
    """The question's terms by key; each key keeps the word the user typed (messages show words, never stems)."""
    if not any(_CYRILLIC.search(t) for t in qt.terms):
        return qt
    terms = tuple(dict.fromkeys(_key(t) for t in qt.terms))
    words: dict[str, str] = {}
    for t in qt.terms:
        words.setdefault(_key(t), qt.words[t])
    return QuestionTerms(terms, words, frozenset(_key(t) for t in qt.codes))


def sentence_table(question: str, candidates: Sequence[Candidate], *, titles: Mapping[str, str] | None = None,
                   li_scorer: SentenceScorer | None = None,
                   li_scores: Sequence[np.ndarray] | None = None,
                   vocabulary: Collection[str] | None = None,
                   full_texts: Mapping[str, str] | None = None) -> SentenceTable:
    """Every claim-like sentence of the candidates with the support features. `titles` (doc id -> title) are part of
    a sentence's context (the quarter or product often lives only there); `li_scorer` gives late-interaction
    sentence scores (or `li_scores`, already computed over claim_spans of the texts read), None when no embedder
    reads the question's language (those features are then imputed). `vocabulary`: every index term of the corpus
    (BM25's), for the share of the question the corpus never mentions; None imputes it. `full_texts` (chunk id ->
    whole chunk text): read whole chunks instead of their pruned drafts (see reading_texts)."""
    qt = question_terms(question)
    # the corpus's words for the share the corpus never uses: the stems as the index has them, a Cyrillic stem by its
    # key as every other feature reads it ('организация' -> организац is in a corpus that indexes организаци)
    if vocabulary is not None and qt.terms:
        keys = _vocabulary_keys(vocabulary) if any(_CYRILLIC.search(t) for t in qt.terms) else frozenset()
        # (an acronym a retrieved passage spells out is no word the corpus lacks)
        spelled = set().union(*(_spelled_out(qt, c.text) for c in candidates)) if candidates else set()
        absent = sum(1 for t in qt.terms if t not in vocabulary and _key(t) not in keys and t not in spelled
                     ) / len(qt.terms)
    else:
        absent = math.nan
    qt = _keyed(qt)
    titles = titles or {}
    asked_specific = specific_terms(question)
    per_cand: list[tuple[Candidate, list[Span], set[str]]] = []
    kept_masks: list[list[float]] = []
    for orig in candidates:
        c = reading_texts([orig], full_texts)[0]
        spans = list(_chunk_reading(c.text, False)[0])
        ctx_terms = _terms(c.text) | _terms(titles.get(c.doc_id, "")) | _spelled_out(qt, c.text) | \
            _spelled_out(qt, titles.get(c.doc_id, ""))
        per_cand.append((c, spans, ctx_terms))
        # a chunk handed on whole with the pruner's verdict beside it (a cross-lingual chunk) keeps that verdict
        kept_masks.append(_kept_mask(orig, spans) if c.text != orig.text or orig.meta.get("kept_spans")
                          else [1.0] * len(spans))
    q = qt.terms
    if not q:
        return SentenceTable((), qt, ())
    n = max(1, len(per_cand))
    df = {t: sum(t in ctx for *_, ctx in per_cand) for t in q}
    # rarity among the retrieved passages; a term none of them has weighs most
    idf = {t: math.log(1 + n / (1 + df[t])) + (1.0 if df[t] == 0 else 0.0) for t in q}
    total = sum(idf.values())
    unseen = tuple(sorted((t for t in q if df[t] == 0), key=lambda t: -idf[t]))
    missing = sum(idf[t] for t in unseen) / total
    spec = [t for t in q if t in qt.codes]
    general = [t for t in q if t not in qt.codes]
    general_total = sum(idf[t] for t in general)
    spec_missing = sum(1 for t in spec if df[t] == 0) / len(spec) if spec else 0.0
    kind = asked_type(question)
    pairs = attribute_pairs(question)

    li_all: list[np.ndarray] | None = list(li_scores) if li_scores is not None else None
    if li_all is None and li_scorer is not None and per_cand:
        li_all = li_scorer(question, [(c.text, spans) for c, spans, _ in per_cand])
    rr = [float(c.meta.get("rerank_score", c.score)) for c, *_ in per_cand]
    top_rr = max(rr) if rr else 0.0
    ordered = sorted(rr, reverse=True)
    gap = ordered[0] - ordered[1] if len(ordered) > 1 else 0.0
    best_li = max((float(a.max()) for a in li_all or [] if len(a)), default=0.0)

    rows: list[SentenceRow] = []
    for ci, (c, spans, ctx) in enumerate(per_cand):
        _, sents, heads = _chunk_reading(c.text, False)
        release_heads = _chunk_reading(c.text, True)[2] if kind == "version" else heads
        title_specific = _specific(titles.get(c.doc_id, ""))
        title_terms = _terms(titles.get(c.doc_id, ""))
        agree = 0.0
        for key in ("rank_bm25", "rank_dense"):
            r = c.meta.get(key)
            agree += 0.5 / float(r) if isinstance(r, (int, float)) and r > 0 else 0.0
        for si, (s, e) in enumerate(spans):
            sent = sents[si]
            st = _terms(sent) | _spelled_out(qt, sent)
            sent_cov = sum(idf[t] for t in q if t in st) / total
            ctx_cov = sum(idf[t] for t in q if t in st or t in ctx) / total
            spec_ctx = sum(1 for t in spec if t in st or t in ctx) / len(spec) if spec else 1.0
            spec_sent = sum(1 for t in spec if t in st) / len(spec) if spec else 1.0
            li = float(li_all[ci][si]) if li_all is not None and si < len(li_all[ci]) else math.nan
            atype = 1.0 if holds_type(sent + (" " + release_heads[si] if kind == "version" else ""), kind,
                                      question) else 0.0
            stated: dict[str, set[str]] = {}
            for part in (_specific(sent), _specific(heads[si]), title_specific):
                for k, v in part.items():
                    stated.setdefault(k, set()).update(v)
            if "quarter" in title_specific:  # a report's period is its title's ('fourth quarter in a row' is not)
                stated["quarter"] = set(title_specific["quarter"])
            contra = 1.0 if contradicts(asked_specific, stated) else 0.0
            local = st | _terms(heads[si]) | title_terms
            head_cov = sum(idf[t] for t in q if t in local) / total
            attr_cov = sum(idf[t] for t in general if t in local) / general_total if general else 1.0
            plain = _plain_terms(sent)
            novelty = len(plain - set(q)) / len(plain) if plain else 0.0
            feats = (sent_cov, ctx_cov, missing, spec_ctx, spec_sent, spec_missing, absent, atype, novelty, li, li - best_li if li_all is not None else math.nan,
                     rr[ci], rr[ci] - top_rr, gap, agree, 1.0 / max(1, c.rank), kept_masks[ci][si], head_cov,
                     attr_cov, contra, pair_coverage(pairs, sent, heads[si], titles.get(c.doc_id, "")),
                     sum(1 for t in spec if t in local) / len(spec) if spec else 1.0)
            title = titles.get(c.doc_id, "")
            context = " / ".join(dict.fromkeys(x for x in (title, heads[si]) if x))
            rows.append(SentenceRow(c.chunk_id, c.doc_id, c.rank, sent, (s, e), feats, context))
    matrix = np.array([r.features for r in rows], dtype=np.float64).reshape(len(rows), len(FEATURES))
    return SentenceTable(tuple(rows), qt, unseen, matrix)


def sentence_contexts(text: str, title: str = "") -> list[tuple[str, str]]:
    """(sentence, context) of each claim-like sentence of a whole chunk text, as sentence_table's rows hold them
    (context: the document title and the sentence's heading): what a sentence scorer reads does not depend on the
    question, so its vectors can be computed once per chunk."""
    spans = claim_spans(text)
    heads = _headings(text, spans)
    return [(claim_text(text, s, e), " / ".join(dict.fromkeys(x for x in (title, h) if x)))
            for (s, e), h in zip(spans, heads)]


# A sentence that goes on from the one before it ('It ...', 'The default is 5.', 'Первые двое ...', 'Если ошибка
# повторяется ...'): read alone it does not say what it is about.
_CONTINUES = re.compile(r"(?i)^\W*(it|its|this|these|those|they|their|he|she|his|her|such|both|the default (is|was)|"
                        r"that is|that means|in other words|"
                        r"the (same|latter|former|rest|remaining)|он|она|оно|они|его|её|ее|их|это|этот|эта|эти|"
                        r"первые|если ошибка)\b")


def continues(sentence: str) -> bool:
    """Whether the sentence opens with a word that points back to the sentence before it."""
    return bool(_CONTINUES.match(sentence))


def _wrapped(line: str) -> bool:
    """Whether a line that has a next line is a sentence wrapped mid-way, not a heading: a link or bracket left open
    ('... by [Jake Vanderplas](...) and [Brian'), or a last word that leads into the next line ('and', 'the')."""
    line = line.strip()
    return line.count("[") > line.count("]") or line.count("(") > line.count(")") or \
        bool(re.search(r"\s(and|or|the|of|with|by|to|in|for|a|an)$", line))


def _heading_line(line: str) -> str:
    """The line as a heading ('' when it is not one): short, no closing punctuation, decorations stripped."""
    line = line.strip().strip("#=-| ").strip()
    return line if line and len(line.split()) <= 9 and not line.endswith((".", "!", "?", ";", ":", ",")) else ""


def _headings(text: str, spans: Sequence[Span], *, versioned: bool = False) -> list[str]:
    """For each sentence, the nearest heading line above it in the chunk (a config key's '### CACHE_TTL', a
    release's 'AcmeOS 3.8.2 - released ...', a PDF's 'Summary' glued to the sentence after it): the local subject
    a sentence does not repeat. A heading is a short unit of its own or the short first line of a longer unit.
    `versioned`: the nearest heading above that names a version (a release's heading above its 'Security' and
    'Fixes' subheadings): what a 'which release' question is answered by."""
    marks: list[tuple[int, str]] = []
    for s, e in sentence_spans(text):
        lines = [ln for ln in text[s:e].split("\n") if ln.strip(" -=")]
        for k, ln in enumerate(lines[:-1] if len(lines) > 1 else lines):
            h = _heading_line(ln)
            # a PDF wraps sentences mid-way: a short line whose next line goes on in lower case is no heading
            if not h or (k + 1 < len(lines) and (lines[k + 1].strip()[:1].islower() or _wrapped(ln))):
                break
            if not versioned or _VERSION.search(h):
                marks.append((s, h))
    out, j, current = [], 0, ""
    for s, e in spans:
        while j < len(marks) and marks[j][0] < e:
            current = marks[j][1]
            j += 1
        head = None if versioned else table_header(text, s)
        # a Markdown table's row is read under its header ('Package · 99th percentile · 95th percentile'): the
        # columns say what each value is
        out.append(" / ".join(x for x in (current, " · ".join(c for c in head or () if c)) if x) if head else current)
    return out


# The gate reads the question as a whole, through its best sentence: is there an answer at all?
GATE_FEATURES: tuple[str, ...] = ("best_score", "absent", "spec_missing", "best_atype", "best_ctx_cov", "best_li",
                                  "best_spec_ctx", "best_contradict", "best_sent_cov", "best_attr_cov",
                                  "best_pair_cov", "best_spec_local")
# With an answerability scorer (train/answer_scorer.py, train/e5_scorer.py; no shipped model reads one): its
# standardised score of the best sentence.
SCORER_GATE_FEATURES: tuple[str, ...] = GATE_FEATURES + ("best_xenc",)
# Sentence scores the scorer is asked for, by row index -> one score per index (NaN: not scored).
RowScorer = Callable[[Sequence[int]], np.ndarray]


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def gate_features(matrix: np.ndarray, probs: np.ndarray, xenc: np.ndarray | None = None) -> np.ndarray:
    """GATE_FEATURES of a question from its sentence matrix and the ranker's probabilities (best sentence's row;
    best_score is the logit of its probability, i.e. its ranker score); with `xenc` (the scorer's standardised score
    per sentence), SCORER_GATE_FEATURES."""
    b = int(np.argmax(probs))
    row = matrix[b]
    f = {n: row[FEATURES.index(n)] for n in FEATURES}
    base = [_logit(float(probs[b])), f["absent"], f["spec_missing"], f["atype"], f["ctx_cov"], f["li"],
            f["spec_ctx"], f["contradict"], f["sent_cov"], f["attr_cov"], f["pair_cov"], f["spec_local"]]
    if xenc is not None:
        base.append(float(xenc[b]))
    return np.array(base, dtype=np.float64)


@dataclass(frozen=True)
class Gate:
    """Question-level logistic regression over GATE_FEATURES (standardised): the probability that the best sentence
    answers the question. Its refusal cut is SupportModel.threshold."""

    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    impute: Mapping[str, float]
    features: tuple[str, ...] = GATE_FEATURES

    def probability(self, g: np.ndarray, *, blind: bool = False, scorer_blind: bool | None = None) -> float:
        """`blind`: the embedder does not read the question's language (best_li is imputed); `scorer_blind`: nor
        does the answerability scorer (best_xenc is imputed; default: the same as `blind`)."""
        x = np.array(g, dtype=np.float64, copy=True)
        scorer_blind = blind if scorer_blind is None else scorer_blind
        for j, name in enumerate(self.features):
            if (blind and name == "best_li") or (scorer_blind and name == "best_xenc") or not np.isfinite(x[j]):
                x[j] = self.impute.get(name, 0.0)
        z = float(((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.coef) + self.intercept)
        return sigmoid(z)

    def to_json(self) -> dict[str, Any]:
        return {"features": list(self.features), "coef": list(self.coef), "intercept": self.intercept,
                "mean": list(self.mean), "scale": list(self.scale), "impute": dict(self.impute)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Gate":
        feats = tuple(data["features"])
        if feats not in (GATE_FEATURES, SCORER_GATE_FEATURES):
            raise ValueError(f"support gate features {data['features']} do not match this code's {GATE_FEATURES}: "
                             "re-run python -m train.support")
        return cls(tuple(map(float, data["coef"])), float(data["intercept"]), tuple(map(float, data["mean"])),
                   tuple(map(float, data["scale"])), {k: float(v) for k, v in data["impute"].items()}, feats)


@dataclass(frozen=True)
class SupportModel:
    """Two standardised logistic regressions: a sentence ranker over FEATURES (which sentence answers best) and a
    question-level gate (does it answer at all); `threshold` is the refusal cut on the gate's probability, chosen on
    the fitting questions the model was fitted on (the prior; a workspace's calibration may replace it). Without a
    gate, the best sentence's probability decides."""

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    impute: Mapping[str, float]
    threshold: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    gate: Gate | None = None
    # An answer quotes the best sentence and those whose score is within this margin of it (log-odds; ln 10: at
    # least a tenth as likely to be the answer under the ranker's softmax over the question's sentences).
    pick_margin: float = math.log(10)
    # Log-odds taken off a sentence that contradicts a specific term of the question (another quarter, code, key):
    # a fixed prior, not a fitted weight, since such a sentence cannot answer however well its words match; with
    # other candidates it drops out of the ranking, and when every sentence contradicts, support falls.
    contradiction_penalty: float = 0.0
    # Log-odds taken off a sentence that does not hold the kind of thing asked (no date for 'when', no amount for
    # 'how much does it cost'): the answer then quotes a sentence that does, and when none does, the gate reads a
    # weak best sentence and support falls (the natural unanswerable question asks an attribute the corpus lacks).
    kind_penalty: float = 0.0
    # Log-odds taken off a sentence whose local context (the sentence, its heading, its document title) holds none
    # of the question's general words (what is asked about: 'power', 'weigh', 'data engineer'): a sentence about the
    # right thing that states another attribute of it, the near miss ('the NX-200's power draw' read from its
    # temperature range) that names and codes alone reward.
    attr_penalty: float = 0.0
    # An answerability scorer (train/), when the fit found it worth its cost: it reads the k best
    # sentences by the ranker; their score is standardised (mean, scale) and a sentence's final score is
    # a * ranker score + w * that (fill: the value of a sentence it did not read, impute: every sentence's value
    # when it reads nothing, e.g. in a language the embedder does not read). Keys: k, a, w, mean, scale, fill,
    # impute, file.
    scorer: Mapping[str, Any] | None = None

    def combined(self, matrix: np.ndarray, *, blind: bool = False, row_scorer: "RowScorer | None" = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
        """(each sentence's final score, the scorer's standardised value per sentence or None without a scorer).
        Without `row_scorer` (or when blind) the scorer's part is the same constant for every sentence: the ranking
        is the ranker's and the gate imputes the scorer's value."""
        z = self.scores(matrix, blind=blind)
        sc = self.scorer
        if not sc or len(z) == 0:
            return z, None
        x = np.full(len(z), float(sc["impute"]))
        if row_scorer is not None and self.scorer_reads(blind):
            x[:] = float(sc["fill"])
            top = [int(i) for i in np.argsort(-z, kind="stable")[: int(sc["k"])]]
            raw = np.asarray(row_scorer(top), dtype=np.float64)
            std = (raw - float(sc["mean"])) / float(sc["scale"])
            x[top] = np.where(np.isfinite(std), std, float(sc["fill"]))
        return float(sc["a"]) * z + float(sc["w"]) * x, x

    def scorer_reads(self, blind: bool) -> bool:
        """Whether the answerability scorer reads a question whose language the embedder does not read (`blind`):
        a multilingual scorer (scorer['all_languages']) does, one made from the embedder does not."""
        return bool(self.scorer) and (not blind or bool(self.scorer.get("all_languages")))

    def scores(self, matrix: np.ndarray, *, blind: bool = False) -> np.ndarray:
        """The ranker's linear score of each sentence (higher: more likely the answer)."""
        if len(matrix) == 0:
            return np.zeros(0)
        z = self.prepare(matrix, blind=blind) @ np.asarray(self.coef) + self.intercept
        m = np.asarray(matrix, dtype=np.float64).reshape(-1, len(self.features))
        if self.contradiction_penalty:
            z = z - self.contradiction_penalty * np.nan_to_num(m[:, FEATURES.index("contradict")])
        if self.kind_penalty:
            z = z - self.kind_penalty * (1.0 - np.nan_to_num(m[:, FEATURES.index("atype")], nan=1.0))
        if self.attr_penalty:
            z = z - self.attr_penalty * (np.nan_to_num(m[:, FEATURES.index("attr_cov")], nan=1.0) <= 0.0)
        return z

    def support(self, matrix: np.ndarray, *, blind: bool = False, row_scorer: "RowScorer | None" = None
                ) -> tuple[np.ndarray, float]:
        """(each sentence's score, the question's support: the gate's probability that the best answers).
        `row_scorer` gives the answerability scorer's values when the model uses it (see `scorer`)."""
        z, x = self.combined(matrix, blind=blind, row_scorer=row_scorer)
        if len(z) == 0:
            return z, 0.0
        probs = sigmoid(z)
        if self.gate is None:
            return z, float(probs.max())
        return z, self.gate.probability(gate_features(matrix, probs, x), blind=blind,
                                        scorer_blind=not self.scorer_reads(blind))

    def prepare(self, matrix: np.ndarray, *, blind: bool = False) -> np.ndarray:
        """Model-feature columns replaced by their imputed value when `blind` (or missing), then standardised."""
        x = np.array(matrix, dtype=np.float64, copy=True).reshape(-1, len(self.features))
        for j, name in enumerate(self.features):
            if name in self.impute and (blind and name in MODEL_FEATURES):
                x[:, j] = self.impute[name]
            bad = ~np.isfinite(x[:, j])
            if bad.any():
                x[bad, j] = self.impute.get(name, 0.0)
        return (x - np.asarray(self.mean)) / np.asarray(self.scale)

    def probability(self, matrix: np.ndarray, *, blind: bool = False) -> np.ndarray:
        if len(matrix) == 0:
            return np.zeros(0)
        return sigmoid(self.scores(matrix, blind=blind))

    def to_json(self) -> dict[str, Any]:
        return {"features": list(self.features), "coef": list(self.coef), "intercept": self.intercept,
                "mean": list(self.mean), "scale": list(self.scale), "impute": dict(self.impute),
                "threshold": self.threshold, "meta": dict(self.meta),
                "pick_margin": self.pick_margin, "contradiction_penalty": self.contradiction_penalty,
                "kind_penalty": self.kind_penalty, "attr_penalty": self.attr_penalty,
                **({"gate": self.gate.to_json()} if self.gate else {}),
                **({"scorer": dict(self.scorer)} if self.scorer else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SupportModel":
        feats = tuple(data["features"])
        if feats != FEATURES:
            raise ValueError(f"support model features {feats} do not match this code's {FEATURES}: re-run "
                             "python -m train.support")
        return cls(feats, tuple(map(float, data["coef"])), float(data["intercept"]), tuple(map(float, data["mean"])),
                   tuple(map(float, data["scale"])), {k: float(v) for k, v in data["impute"].items()},
                   float(data["threshold"]), dict(data.get("meta", {})),
                   Gate.from_json(data["gate"]) if data.get("gate") else None,
                   float(data.get("pick_margin", math.log(10))), float(data.get("contradiction_penalty", 0.0)),
                   float(data.get("kind_penalty", 0.0)), float(data.get("attr_penalty", 0.0)),
                   dict(data["scorer"]) if data.get("scorer") else None)


    def to_record(self, provenance: Mapping[str, str] | None = None) -> FittedLinear:
        """The shipped file's form: the sentence ranker as the fitted-linear record (features, standardisation,
        coefficients, the refusal threshold); its imputed values, the gate, the scorer and the priors in meta."""
        rest = {k: v for k, v in self.to_json().items()
                if k not in ("features", "coef", "intercept", "mean", "scale", "threshold")}
        return FittedLinear(self.features, np.asarray(self.coef), np.asarray(self.intercept), np.asarray(self.mean),
                            np.asarray(self.scale), self.threshold,
                            provenance=dict(provenance or self.meta.get("provenance", {})), meta=rest)

    @classmethod
    def from_record(cls, rec: FittedLinear) -> "SupportModel":
        return cls.from_json({**rec.meta, "features": list(rec.features), "coef": rec.coef.tolist(),
                              "intercept": float(rec.intercept), "mean": rec.mean.tolist() if rec.mean is not None
                              else [0.0] * len(rec.features), "scale": rec.scale.tolist() if rec.scale is not None
                              else [1.0] * len(rec.features), "threshold": rec.threshold})


def save_support_model(model: SupportModel, path: str | Path = DEFAULT_MODEL_PATH,
                       provenance: Mapping[str, str] | None = None) -> None:
    save_fitted(path, model.to_record(provenance))
    _CACHE.pop(str(path), None)


_CACHE: dict[str, SupportModel] = {}


def model_fingerprint(path: str | Path = DEFAULT_MODEL_PATH) -> str:
    """A short hash of the fitted model file: part of the answer cache's key, so a refit never serves answers the
    previous model gave."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    except OSError:
        return "missing"


def load_support_model(path: str | Path = DEFAULT_MODEL_PATH) -> SupportModel:
    """The fitted model from its fitted-linear record (read once per path); a .json file is the format shipped before
    the record (benches read earlier models from git history)."""
    key = str(path)
    if key not in _CACHE:
        if Path(path).suffix == ".json":
            _CACHE[key] = SupportModel.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        else:
            _CACHE[key] = SupportModel.from_record(load_fitted(path, features=FEATURES, recipe=REFIT))
    return _CACHE[key]


class TokenVectorSource(Protocol):
    """What the late-interaction sentence scorer needs from core.cascade.rerank.LateInteractionReranker."""

    def query_matrix(self, query: str, workspace: str = ...) -> tuple[np.ndarray, np.ndarray]: ...
    def token_matrices(self, texts: Sequence[str], workspace: str = ..., *, persist: bool = True) -> Any: ...


def late_sentence_scorer(late: TokenVectorSource, *, workspace: str) -> SentenceScorer:
    """MaxSim of the question against each sentence's token vectors, sliced from its whole (pruned) passage so the
    sentence is read in context. Passage vectors stay in memory (persist=False): a query writes nothing."""
    def score(question: str, items: Sequence[tuple[str, Sequence[Span]]]) -> list[np.ndarray]:
        q, w = late.query_matrix(question, workspace)
        mats = late.token_matrices([t for t, _ in items], workspace, persist=False)[0]
        return [maxsim(q, w, [tm.vecs[tm.rows_in(s, e)] for s, e in spans]) if spans else np.zeros(0)
                for (_, spans), tm in zip(items, mats)]

    return score
