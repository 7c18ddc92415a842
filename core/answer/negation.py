"""Questions that ask what does *not* hold ('Which policy does not allow three remote days?'): the offline answer
names the thing for which the asked property is negated, or stated with another value or without it while it holds
for another; else it refuses saying why. A sentence that only states the positive case answers the opposite
question, and a negative sentence about something else answers nothing."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from core.text import tokenize

# Grammatical negation in English and Russian (the languages the offline answer reads): function words of the
# languages, not of any corpus.
_NEG = re.compile(r"(?i)\b(?:not|no|never|cannot|nor|neither|none|without|n't)\b|n't\b|"
                  r"(?<![\w])(?:не|нет|ни|никогда|без)(?![\w])")
# A selection question ('which ... does not ...', 'what is not ...', 'кто не ...'): it asks for the thing a negated
# statement is about, so a sentence stating the positive case answers the opposite question.
_SELECT = re.compile(r"(?i)^\s*(?:which|what|who|whom|whose|какой|какая|какое|какие|каким|какому|кто|что|кому)\b")
# Where a negation's reach ends: punctuation and the coordinating conjunctions ('... without weekends and accepts
# goods' negates the weekends, not the accepting).
_CLAUSE_END = re.compile(r"(?i)[,;:.!?()]|\b(?:and|or|but|while|whereas|и|или|а|но|однако)\b")
SCOPE_WORDS = 5  # a negation's reach in words at most: the verb and its object ('does not support IPv6')

# Numbers written as words (English and Russian, the forms a quantity takes): grammar, not corpus vocabulary.
_EN_NUM = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_EN_NUM.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                "hundred": 100})
_RU_NUM = {}
for _n, _forms in {1: "один одна одно одного одной одному", 2: "два две двух двум двумя", 3: "три трёх трех трём "
                   "трем тремя", 4: "четыре четырёх четырех", 5: "пять пяти", 6: "шесть шести", 7: "семь семи",
                   8: "восемь восьми", 9: "девять девяти", 10: "десять десяти", 20: "двадцать двадцати",
                   30: "тридцать тридцати"}.items():
    _RU_NUM.update({f: _n for f in _forms.split()})
_NUM_WORDS = {**_EN_NUM, **_RU_NUM}
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w])|[^\W\d_]+")


# Words that open a subordinate clause: a negation after one of them is the clause's ('What stock is kept so that
# installations are not held up?', '... customers whose gateways cannot be upgraded'), not the question's.
_SUBORDINATE = re.compile(r"(?i)\b(?:so|because|that|when|whenever|if|unless|while|whose|who|which|where|since|"
                          r"although|though|until|before|after|чтобы|когда|если|потому|хотя|пока|где|котор\w*|"
                          r"чей|чья|чьё|чьи)\b")


def _main_negation(question: str) -> re.Match[str] | None:
    """The question's own negation: the first one in its main clause (before any subordinate clause opens after the
    wh-word), written in lower case or all capitals ('No Greater Glory' is a name, 'NOT' is emphasis)."""
    start = _SELECT.search(question)
    if start is None:
        return None
    sub = _SUBORDINATE.search(question, start.end())
    for m in _NEG.finditer(question, start.end()):
        if sub is not None and m.start() > sub.start():
            return None
        word = m.group(0)
        if word[:1].isupper() and not word.isupper():
            continue
        return m
    return None


def asks_negated(question: str) -> bool:
    """True for a selection question with a negation in its main clause ('Which policy does not allow three remote
    days?'; not 'What stock is kept so installations are not held up?')."""
    return _main_negation(question) is not None


def states_negation(sentence: str) -> bool:
    """True when the sentence itself negates something ('... are therefore not allowed under this policy')."""
    return bool(_NEG.search(sentence))


def values(text: str) -> frozenset[float]:
    """The numbers a text states, in digits or words ('three days', '€30', '28 дней' -> 3, 30, 28)."""
    out: set[float] = set()
    for m in _NUMBER.finditer(text):
        tok = m.group(0)
        if tok[0].isdigit():
            try:
                out.add(float(tok.replace(",", ".")))
            except ValueError:
                pass
        elif tok.lower() in _NUM_WORDS:
            out.add(float(_NUM_WORDS[tok.lower()]))
    return frozenset(out)


def _stems(text: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(text) if not any(ch.isdigit() for ch in t) and t not in _NUM_WORDS)


@dataclass(frozen=True)
class NegatedAsk:
    """A negated selection question split at its negation: what is selected, the property asked to be absent, and
    the quantities that property names."""

    subject: frozenset[str]  # stems before the negation ('policy'), the wh-word and auxiliaries dropped
    prop: frozenset[str]     # stems after it ('allow', 'remot', 'day'), numbers left out
    values: frozenset[float]  # numbers the property names ({3.0})
    words: str               # the property as the question words it ('allow three remote days')


def negated_ask(question: str) -> NegatedAsk | None:
    """The question's parts when it asks what does not hold, else None."""
    m = _main_negation(question)
    if m is None:
        return None
    before, after = question[: m.start()], question[m.end():].strip(" ?!.")
    prop = _stems(after)
    if not prop:  # 'Which ones are not?': nothing to check a sentence against
        return None
    return NegatedAsk(_stems(before), prop, values(after), after)


@dataclass(frozen=True)
class Reading:
    """What one sentence says about the asked property."""

    covered: float          # share of the property's stems the sentence states
    negated: bool           # a negation in the sentence reaches one of the property's stems
    states_value: bool      # it states every number the question asks about (True when none is asked)
    other_value: bool       # it states a number, none of the asked ones


def _negation_scopes(sentence: str) -> list[frozenset[str]]:
    """Stems each negation in the sentence reaches: the words after it up to the clause's end, SCOPE_WORDS at most."""
    out = []
    for m in _NEG.finditer(sentence):
        rest = sentence[m.end():]
        end = _CLAUSE_END.search(rest)
        words = (rest[: end.start()] if end else rest).split()[:SCOPE_WORDS]
        out.append(_stems(" ".join(words)))
    return out


def read(ask: NegatedAsk, sentence: str, context: str = "") -> Reading:
    """The sentence against the asked property; `context` (its document title and heading) counts toward what it
    is about ('... according to the error code reference' names the document), never toward a negation."""
    stems = _stems(sentence) | _stems(context)
    covered = len(ask.prop & stems) / len(ask.prop)
    negated = any(ask.prop & scope for scope in _negation_scopes(sentence))
    vals = values(sentence)
    return Reading(covered, negated, ask.values <= vals, bool(vals) and not (ask.values & vals))


COVER = 0.5  # a sentence is about the asked property when it states at least half of its stems


def similar(a: str, b: str) -> float:
    """How much two sentences are the same statement: shared stems over the shorter one's (numbers left out)."""
    sa, sb = _stems(a), _stems(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))


SAME_STATEMENT = 0.6  # two sentences sharing this share of the shorter one's stems state the same thing


@dataclass(frozen=True)
class NegatedAnswer:
    """Sentence indexes that answer a negated question: `direct` ones negate the property; a `contrast` pair is
    (the sentence where the property is stated otherwise or missing, the sentence where it holds)."""

    direct: tuple[int, ...] = ()
    contrast: tuple[tuple[int, int], ...] = ()
    holds: tuple[int, ...] = ()  # sentences where the property holds (what a refusal can point to)


def negated_answer(ask: NegatedAsk, texts: Sequence[str], order: Sequence[int], *, limit: int = 3,
                   contexts: Sequence[str] | None = None) -> NegatedAnswer:
    """Read the candidate sentences (`order`: indexes best first) against the negated question. A sentence answers
    directly when a negation reaches the property, it states at least half the property and the asked numbers; a
    contrast is a sentence stating the same thing as one where the property holds, but with another number than the
    asked one, or without a property word the other states."""
    reads = {i: read(ask, texts[i], contexts[i] if contexts else "") for i in order}
    direct: list[int] = []
    for i in order:
        r = reads[i]
        if r.negated and r.covered >= COVER and r.states_value and len(direct) < limit and \
                all(similar(texts[i], texts[j]) < 0.8 for j in direct):
            direct.append(i)
    holds = [i for i in order if not reads[i].negated and reads[i].covered >= COVER and reads[i].states_value]
    pairs: list[tuple[int, int]] = []
    used: set[int] = set(holds)
    for h in holds:
        for i in order:
            if i in used or reads[i].negated or texts[i] == texts[h]:
                continue
            if similar(texts[i], texts[h]) < SAME_STATEMENT:
                continue
            r = reads[i]
            if ask.values:
                differs = r.other_value
            else:  # without a number: the other states the same thing but not the property's words
                differs = bool((ask.prop & _stems(texts[h])) - _stems(texts[i]))
            if differs:
                pairs.append((i, h))
                used.add(i)
                break
        if len(pairs) >= limit:
            break
    return NegatedAnswer(tuple(direct), tuple(pairs), tuple(holds))
