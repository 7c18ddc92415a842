"""Semantic answer cache logic: the guard that decides whether two close questions may share an answer, and lookup.

Why a guard: with the bundled MiniLM a cosine threshold alone cannot separate paraphrases from contradictions
(bench/answer_cache.py: at cosine >= 0.97 16% of NaN-NLI contradictions match and only 4% of true paraphrases do).
So a hit needs a cosine above the threshold AND the same negation polarity and scope (negators and negative verbs),
the same numbers, dates, identifiers and named entities, the same values of closed sets (time unit, season, colour,
size...), the same kind of question word and quantifiers, no antonym or from/to swap, the same direction of change
(increase / reduce, растёт / падает) and no one-word change of a title, role or unit ('data engineer' / 'data
analyst', 'in km' / 'in miles'). A pair where each side
has words the other lacks needs a second, higher cosine (swap_threshold): MiniLM cannot tell a synonym from a
sibling word ('memory' / 'disk'). With the learned verifier (core/answer/cache_verifier.py, the default when the
embedder gives token vectors) the guard keeps only its vetoes (hard_only) and the verifier replaces the swap rule.
Limits (bench/results/answer_cache.json): on hand-written pairs never tuned on, 2-10% of one-fact changes still pass,
most of them a detail added on one side. Everything here is pure: no store, no model; vectors and cached entries come
in as data.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Protocol, Sequence

import numpy as np
import Stemmer

from core.answer.support import model_fingerprint
from core.answer.verify import period_constraints, question_constraints
from core.models.protocols import Embedder
from core.text import EN_STOP, RU_STOP, detect_language
from core.types import (
    DEFAULT_WORKSPACE,
    AgentRecord,
    Answer,
    CachedAnswer,
    CacheKey,
    Candidate,
    InRound,
    StageInfo,
    StageResult,
    Trace,
    Usage,
)

Verdict = Literal["hit", "miss", "guarded_miss"]

# -- lexicons (small, written for this guard; EN + RU) -------------------------------------------------------------
# Words that flip or weaken polarity. Approximate negators (hardly, rarely, few) count too: "rarely" vs "never"
# is a contradiction in NaN-NLI.
_NEG_EN = frozenset("not no never none nobody nothing neither nor nowhere without cannot hardly barely scarcely "
                    "rarely seldom".split())
_NEG_RU = frozenset("не нет ни никогда никто ничто ничего никого никому нигде никуда никак без нельзя "
                    "невозможно едва вряд редко".split())
NEGATORS = _NEG_EN | _NEG_RU
# Verbs that carry the negation themselves ('are employees forbidden to work abroad' vs 'can employees work
# abroad'): their count must match like the negators', but they do not demand the same words (a rewording of 'why
# did the deploy fail' is still the same question). Stems, matched as prefixes.
_NEG_VERBS = ("forbid", "prohibit", "banned", "exclud", "refus", "fail", "lack", "denied", "deny", "unable",
              "avoid", "prevent", "stop",
              "запрещ", "отказ", "исключ")
# Question words: "why" and "how" ask for different answers even about the same thing.
_WH = frozenset("what why how when where who whom whose which почему зачем как что где когда кто какой какая какое "
                "какие сколько куда откуда чей".split())
# ... but only a reason, a time, a place or a person is a different kind of answer: "how do I X" and "what is the
# way to X", "what database" and "which database" ask for the same thing. Question words outside these classes are
# the open class and are not compared.
_WH_CLASS = {"why": "reason", "почему": "reason", "зачем": "reason", "when": "time", "когда": "time",
             "where": "place", "где": "place", "куда": "place", "откуда": "place", "who": "person", "whom": "person",
             "whose": "person", "кто": "person", "чей": "person"}
# Two more kinds of answer asked for by a phrase rather than one word: an amount ('how many employees', 'how long',
# 'сколько') and a point in time ('which year', 'what date', 'в каком году'). 'How many employees work in the office'
# and 'in which year did the office open' share most words and a cosine of 0.78, but not their answer.
_AMOUNT_AFTER_HOW = frozenset("many much long big large far old often tall heavy fast".split())
_TIME_NOUNS = frozenset("year date time day month году год дату дата время день месяц".split())


def _asked_kinds(tokens: Sequence[str], wh: Iterable[str]) -> frozenset[str]:
    kinds = {_WH_CLASS[w] for w in wh if w in _WH_CLASS}
    for t, nxt in zip(tokens, tokens[1:]):
        if t == "how" and nxt in _AMOUNT_AFTER_HOW:
            kinds.add("amount")
        elif t in ("what", "which", "какой", "каком", "какая", "какую", "какого") and nxt in _TIME_NOUNS:
            kinds.add("time")
    if "сколько" in tokens:
        kinds.add("amount")
    return frozenset(kinds)


# Closed-class words whose change changes the question (quantifiers, focus particles, modals of obligation,
# comparison, coordination). Unshared ones cause a guarded miss.
_CRITICAL = frozenset((
    "all every each some any less least fewer few little lots several only even just both too "
    "either than but or nor must should may might ought unless "
    "always often sometimes usually again "
    "все всё каждый каждая каждое некоторые любой много больше меньше мало несколько только даже лишь оба "
    "или либо но должен должна должно можно пока всегда часто иногда обычно снова"
).split())
# Antonym pairs (stems are matched as prefixes so Russian inflections still match).
_ANTONYMS: tuple[tuple[str, str], ...] = tuple(tuple(p.split("/")) for p in (  # type: ignore[misc]
    "increase/decrease raise/lower up/down on/off open/close start/stop enable/disable add/remove add/delete "
    "before/after first/last max/min maximum/minimum high/low higher/lower highest/lowest fast/slow faster/slower "
    "large/small big/small long/short longer/shorter buy/sell win/lose accept/reject allow/deny allow/block "
    "include/exclude import/export upload/download push/pull encrypt/decrypt true/false hot/cold left/right "
    "north/south east/west cheap/expensive cheaper/dearer old/new early/late earlier/later inside/outside "
    "input/output read/write private/public success/failure safe/unsafe valid/invalid legal/illegal "
    "possible/impossible able/unable best/worst better/worse good/bad strong/weak heavy/light wet/dry "
    "above/below over/under min/max in/out inbound/outbound incoming/outgoing send/receive lock/unlock "
    "connect/disconnect install/uninstall mount/unmount show/hide visible/hidden internal/external "
    "increas/decreas warm/cool more/less most/least cheapest/expensive many/few much/little "
    "allow/forbid allow/prohibit allow/ban permit/forbid permit/prohibit cover/exclude start/end begin/end "
    "start/finish succeed/fail pass/fail join/leave arrive/leave arrive/depart boil/freez boiling/freezing "
    "rise/fall rise/drop grow/shrink gain/loss profit/loss income/expense revenue/cost import/export "
    "senior/junior adult/child free/paid accept/decline approve/reject approve/deny present/absent "
    "lost/found before/during during/after between/within online/offline introduc/remov introduc/deprecat add/deprecat "
    "увелич/уменьш включ/выключ добав/удал перв/послед максим/миним высок/низк быстр/медлен больш/маленьк "
    "длин/коротк куп/прода откр/закр нача/останов разреш/запрет вход/выход стар/нов ранн/поздн дешев/дорог "
    "лучш/худш горяч/холод прав/лев север/юг восток/запад внутр/внешн отправ/получ загруз/выгруз "
    "подключ/отключ установ/удал показ/скры можно/нельзя возможн/невозможн безопасн/опасн "
    "разреш/запрещ выигр/проигр начина/заканчива кипен/замерз доход/расход прибыл/убыт"
).split())
# Direction of a change: a question asking whether something goes up and one asking whether it goes down want
# opposite answers ('X increases Y' / 'X reduces Y' embed at cosine 0.99). A closed set written from the verbs of
# change in both languages, not from any corpus: any word of one class against any word of the other on the other
# side is a veto (pairs need not be listed one by one). Whole words with their inflections, not prefixes: 'raisin'
# and 'растение' are not verbs of change.
_UP_EN = ("increase", "raise", "rise", "rose", "risen", "grow", "grew", "grown", "growth", "gain", "boost", "elevate",
          "enhance", "augment", "accelerate", "expand", "amplify", "strengthen", "improve", "promote", "activate",
          "stimulate", "upregulate", "up-regulate", "heighten", "intensify", "lengthen", "widen", "up")
_DOWN_EN = ("decrease", "reduce", "reduction", "lower", "fall", "fell", "fallen", "drop", "decline", "shrink",
            "shrank", "shrunk", "lose", "loss", "lost", "diminish", "attenuate", "slow", "weaken", "worsen", "impair",
            "inhibit", "suppress", "deactivate", "downregulate", "down-regulate", "lessen", "shorten", "narrow", "cut",
            "down")
# Russian: stems with the endings the verbs and their nouns take (matched as prefixes of at least 4 letters; the
# short ones are listed whole).
_UP_RU = ("увелич", "повыш", "повыс", "растёт", "растет", "растут", "рост", "вырос", "выраст", "возраст", "усил",
          "ускор", "улучш", "поднима", "подня", "поднял", "расшир", "активир", "стимулир", "прибав", "прирост")
_DOWN_RU = ("уменьш", "сниж", "сниз", "пониж", "пониз", "пада", "упал", "упад", "паден", "сокращ", "сократ", "ослаб",
            "замедл", "ухудш", "опуска", "опуст", "сужа", "сузи", "подавл", "подав", "ингибир", "убав", "убыва")


def _en_forms(base: str) -> set[str]:
    if base.endswith("e"):
        stem = base[:-1]
        return {base, base + "s", base + "d", stem + "ing", stem + "ion", base + "r", base + "rs"}
    forms = {base, base + "s", base + "ed", base + "ing", base + "er", base + "ers", base + "es"}
    if len(base) >= 3 and base[-1] in "pt" and base[-2] in "aeiou" and base[-3] not in "aeiou":
        forms |= {base + base[-1] + "ed", base + base[-1] + "ing"}  # drop / dropped, cut / cutting
    if base.endswith("y"):
        forms.add(base[:-1] + "ied")
    return forms


_DIRECTION_EN = {**{f: "up" for w in _UP_EN for f in _en_forms(w)}, **{f: "down" for w in _DOWN_EN for f in _en_forms(w)}}
for _w in ("higher", "lower"):  # comparatives: 'lower' is also the verb; 'higher' only the adjective
    _DIRECTION_EN[_w] = "up" if _w == "higher" else "down"


def _direction(word: str) -> str | None:
    """'up', 'down' or None for a lower-case word."""
    if word in _DIRECTION_EN:
        return _DIRECTION_EN[word]
    if re.search(r"[\u0400-\u04FF]", word):
        for stems, d in ((_UP_RU, "up"), (_DOWN_RU, "down")):
            if any(word == s or (len(s) >= 4 and word.startswith(s)) for s in stems):
                return d
    return None


def direction_change(a: QuestionFeatures, b: QuestionFeatures) -> tuple[str, str] | None:
    """A word of change up on one side only against a word of change down on the other side only."""
    only_a = [t for t in a.tokens if t not in b.tokens]
    only_b = [t for t in b.tokens if t not in a.tokens]
    da = {d: w for w in only_a if (d := _direction(w))}
    db = {d: w for w in only_b if (d := _direction(w))}
    for d, other in (("up", "down"), ("down", "up")):
        if d in da and other in db and other not in da and d not in db:
            return da[d], db[other]
    return None


# A one-word change of a title, role or unit: the changed word sits in a noun phrase, i.e. walking back over the
# content words both questions share ('senior data' before 'engineer' / 'analyst') reaches a determiner, a
# preposition or a number ('a senior data engineer', 'in km', '5 miles'), or in Russian (no articles) a verb
# ('зарабатывает старший инженер'). After a pronoun or a question word the run is a verb and its object ('I remove
# mold' / 'mildew'), left to the other checks: a synonym there is common.
_NOUN_SLOT_AFTER = frozenset("a an the this that these those my our your their his her its of in per into as "
                             "в во на для из у о об при к с со от до за под над про".split())
# Endings of verb forms (a changed verb after its subject is not a title or unit: 'fridge staying / getting cold',
# 'выключить / отключить'); a noun with such an ending ('meeting') is merely left to the other checks.
_VERB_ENDING = re.compile(r"(?:ing|ed|ть|ться|тся|ет|ит|ют|ят|ут|ся|ено|ано|ется|ится|ёт)$")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")


def _content(word: str) -> bool:
    return (word.isalpha() and word not in EN_STOP and word not in RU_STOP and word not in _EXTRA_STOP
            and word not in _WH and not word.startswith(("как", "скольк")))


def one_word_swap(a: QuestionFeatures, b: QuestionFeatures) -> tuple[str, str] | None:
    """The two questions are the same words but one ('engineer' / 'analyst', 'km' / 'miles') and that word sits in a
    noun phrase (see _NOUN_SLOT_AFTER): a title, role or unit changed, which changes what is asked however close the
    sentences embed. An inflection is no swap (same stem); verbs are left to the other checks (a verb of change to
    the direction rule)."""
    ta = [t for t in a.tokens if any(ch.isalnum() for ch in t)]
    tb = [t for t in b.tokens if any(ch.isalnum() for ch in t)]
    if len(ta) != len(tb) or len(ta) < 3:
        return None
    diff = [i for i, (x, y) in enumerate(zip(ta, tb)) if x != y]
    if len(diff) != 1:
        return None
    i = diff[0]
    x, y = ta[i], tb[i]
    if i == 0 or _stem(x) == _stem(y) or not (_content(x) and _content(y)) or len(x) < 2 or len(y) < 2:
        return None
    if _direction(x) or _direction(y) or _VERB_ENDING.search(x) or _VERB_ENDING.search(y):
        return None
    j = i - 1
    while j >= 0 and _content(ta[j]) and not (_CYRILLIC.search(ta[j]) and _VERB_ENDING.search(ta[j])):
        j -= 1
    if j < 0:
        return None
    edge = ta[j]
    if edge in _NOUN_SLOT_AFTER or _number_value(edge) is not None or edge.isdigit() or \
            (_CYRILLIC.search(edge) and _VERB_ENDING.search(edge) and j < i - 1):
        return x, y
    return None


_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                      "ninety": 90, "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9,
                      "once": 1, "twice": 2, "half": 0.5, "double": 2, "dozen": 12, "single": 1})
# 'one' / 'single' as a word counts like the article ('one end ripped out' / 'ripped out', 'in one shower' / 'in my
# shower'): SemEval paraphrases use it so, and 'one' against a real count on the other side ('two lights') still
# leaves a number on one side only, a veto. A digit '1' stays a number.
_ONE_AS_ARTICLE = frozenset({"one", "single"})
_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split())}
_RU_NUMBER_STEMS = (("один", 1), ("одн", 1), ("два", 2), ("две", 2), ("двух", 2), ("три", 3), ("трёх", 3),
                    ("трех", 3), ("четыр", 4), ("пят", 5), ("шест", 6), ("сем", 7), ("восем", 8), ("девят", 9),
                    ("десят", 10), ("тысяч", 1000), ("миллион", 10**6), ("перв", 1),
                    ("втор", 2), ("трет", 3), ("половин", 0.5), ("дважды", 2), ("трижды", 3))
_RU_NUMBER_EXACT = {"семь", "семи", "сто", "ста", "пять", "пяти", "шесть", "шести", "восемь", "девять", "десять"}
_MONTHS_DAYS = frozenset((
    "january february march april june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday yesterday today tomorrow "
    "январ феврал март апрел мая май июн июл август сентябр октябр ноябр декабр понедельник вторник сред "
    "четверг пятниц суббот воскресен вчера сегодня завтра").split())

# Closed sets of values: one value swapped for another of the same set ("per month" / "per year", "in summer" /
# "in winter", "yellow" / "red" light) changes the fact asked about, like a changed number. Only a swap counts: a
# value on one side only ("how long" / "how many minutes") is an added detail. Matched by prefix (RU inflections).
# A value of 4+ letters matches as a prefix (plurals, Russian cases); a shorter one only as the whole word.
_VALUE_SETS: dict[str, tuple[str, ...]] = {
    "time unit": ("second", "minute", "hour", "day", "days", "daily", "week", "month", "year", "annual", "decade",
                  "секунд", "минут", "час", "часа", "часов", "сутк", "недел", "месяц", "месячн", "год", "года",
                  "годов", "годовой", "годовая", "лет"),
    "season": ("spring", "summer", "autumn", "fall", "winter", "весн", "весен", "лето", "летом", "летн", "осен",
               "зима", "зимой", "зимн", "зиму"),
    "colour": ("red", "orange", "yellow", "green", "blue", "purple", "black", "white", "grey", "gray", "pink",
               "brown", "красн", "оранжев", "жёлт", "желт", "зелён", "зелен", "сини", "синя", "сине", "голуб",
               "фиолет", "чёрн", "черн", "белы", "бела", "бело", "серы", "сера", "серо", "розов", "коричнев"),
    "size unit": ("kb", "mb", "gb", "tb", "кб", "мб", "гб", "тб"),
    "direction": ("north", "south", "east", "west", "север", "юг", "восток", "запад"),
    "time of day": ("morning", "afternoon", "evening", "night", "noon", "midnight", "утр", "днём", "днем", "вечер",
                    "ночь", "ночью", "ночн"),
    "size": ("tiny", "small", "medium", "large", "huge", "big", "маленьк", "небольш", "средн", "крупн", "огромн"),
    "bound": ("default", "minimum", "maximum", "recommended", "average", "typical", "минимальн", "максимальн",
              "рекомендуем", "средн", "умолчани"),
}

# Words too common to mark a change of topic (beyond core.text's stop lists).
_EXTRA_STOP = frozenset("i me my you your we our they their he she his her it its there is are be been being get got "
                        "make made way use using possible good best really".split())
_TOKEN = re.compile(r"[\w][\w.\-/]*[\w]|\w", re.UNICODE)
_WORD_START = re.compile(r"(?:^|[.!?:;]\s+|[\"'(\[]\s*)$")
_CONTRACTION = re.compile(r"(\w)n't\b", re.IGNORECASE)


@lru_cache(maxsize=2)
def _stemmer(lang: str):  # noqa: ANN202 - PyStemmer object
    return Stemmer.Stemmer(lang)


def _stem(word: str) -> str:
    if re.search(r"[\u0400-\u04FF]", word):
        return _stemmer("russian").stemWord(word)
    return _stemmer("english").stemWord(word)


@dataclass(frozen=True)
class QuestionFeatures:
    """What the guard compares, extracted once per question."""

    tokens: tuple[str, ...]           # lower-case words in order (n't -> not)
    stems: frozenset[str]
    negations: tuple[tuple[str, ...], ...]  # each negator with the two words after it (its scope, roughly)
    numbers: tuple[str, ...]          # sorted normalised numbers, number words, ordinals, months and weekdays
    entities: frozenset[str]          # identifiers, acronyms, capitalised words not opening a sentence
    wh: frozenset[str]
    critical: frozenset[str]
    neg_verbs: int = 0                # negative verbs (_NEG_VERBS)
    keywords: bool = False            # a few words with no question word and no '?': a search, not a question
    values: frozenset[tuple[str, str]] = frozenset()  # (set name, value) from _VALUE_SETS
    from_to: tuple[str | None, str | None] = (None, None)  # the word after 'from' and after 'to'
    roles: tuple[tuple[str, str], ...] = ()  # (preposition, the first word after it) for _ROLE_PREPS
    entity_order: tuple[str, ...] = ()  # names in the order the question says them, the passive's agent first
    asks_object: bool | None = None  # a wh-question asking for the object ('who did X hire') or the subject
    # ('who hired X'); None when it is neither
    periods: frozenset[str] = frozenset()  # relative periods, canonical ('year:+0' this year, 'quarter:-1' last)
    pinned: frozenset[tuple[str, str]] = frozenset()  # roles and superlatives the question pins (core.answer.verify)


def _number_value(tok: str) -> str | None:
    t = tok.lower()
    if re.fullmatch(r"\d+(?:[.,:/\-]\d+)*", t):  # 3, 1,000, 2.4, 2024-05-01, 10:30
        return t.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", t) else t
    if t in _NUMBER_WORDS:
        return str(_NUMBER_WORDS[t])
    if t in _ORDINALS:
        return f"#{_ORDINALS[t]}"
    m = re.fullmatch(r"(\d+)(st|nd|rd|th|й|я|е|го)", t)
    if m:
        return f"#{m.group(1)}"
    if t in _RU_NUMBER_EXACT:
        return t[:4]
    for stem, value in _RU_NUMBER_STEMS:
        if t.startswith(stem) and len(t) <= len(stem) + 4:
            return str(value)
    for m_ in _MONTHS_DAYS:
        if t.startswith(m_) and (len(t) - len(m_)) <= 3:
            return m_
    return None


# Synonyms inside a set are one value: 'how big' and 'how large' ask the same thing.
_VALUE_ALIAS = {"big": "large", "небольш": "маленьк", "annual": "year", "daily": "day", "days": "day", "года": "год",
                "годов": "год", "годовой": "год", "годовая": "год", "лет": "год", "часа": "час", "часов": "час",
                "autumn": "fall", "gray": "grey", "летом": "лето", "летн": "лето", "зимой": "зима", "зимн": "зима",
                "зиму": "зима", "весен": "весн", "ночью": "ночь", "ночн": "ночь", "днем": "днём", "желт": "жёлт",
                "зелен": "зелён", "черн": "чёрн", "синя": "сини", "сине": "сини", "бела": "белы", "бело": "белы",
                "сера": "серы", "серо": "серы", "месячн": "месяц"}


def _value_of(tok: str) -> tuple[str, str] | None:
    for name, values in _VALUE_SETS.items():
        for v in values:
            if tok == v or (len(v) >= 4 and tok.startswith(v) and len(tok) - len(v) <= 4):
                return name, _VALUE_ALIAS.get(v, v)
    return None


def _after(tokens: tuple[str, ...], prep: str) -> str | None:
    """The first word after `prep` that is not an article (the thing moved from / to)."""
    for i, t in enumerate(tokens):
        if t == prep:
            rest = [w for w in tokens[i + 1:i + 3] if w not in ("the", "a", "an", "my", "our", "your")]
            return rest[0] if rest else None
    return None


@lru_cache(maxsize=4096)
def features(text: str) -> QuestionFeatures:
    """What the guard compares of one question (frozen, so shared: a lookup reads each stored question it weighs,
    and the same stored questions come back query after query)."""
    text = _CONTRACTION.sub(r"\1 not", text.replace("’", "'"))
    text = re.sub(r"\bcan not\b", "cannot", text, flags=re.IGNORECASE)
    raw: list[tuple[str, int]] = [(m.group(0), m.start()) for m in _TOKEN.finditer(text)]
    tokens = tuple(t.lower().strip(".-/") or t.lower() for t, _ in raw)
    negs = []
    for i, t in enumerate(tokens):
        if t in NEGATORS or t == "cannot":
            negs.append((t, *tokens[i + 1:i + 3]))
    numbers = []
    entities = set()
    for (tok, start), low in zip(raw, tokens):
        if low in _ONE_AS_ARTICLE:
            continue
        val = _number_value(low)
        if val is not None:
            numbers.append(val)
            continue
        has_digit = any(ch.isdigit() for ch in tok)
        inner_mark = any(ch in "_./-" for ch in tok.strip("_./-"))
        acronym = len(tok) >= 2 and tok.isupper()
        inner_caps = any(ch.isupper() for ch in tok[1:]) and any(ch.islower() for ch in tok)
        capitalised = tok[:1].isupper() and not _WORD_START.search(text[:start]) and tok != "I"
        if has_digit or (inner_mark and tok[:1].isalpha() and any(ch.isupper() for ch in tok)) or acronym \
                or inner_caps or capitalised:
            entities.add(re.sub(r"'s$", "", low).replace(".", ""))
    return QuestionFeatures(
        tokens=tokens,
        stems=frozenset(_stem(t) for t in tokens),
        negations=tuple(sorted(negs)),
        numbers=tuple(sorted(numbers)),
        entities=frozenset(entities),
        # A question word only where it opens a sentence or clause: "when" in "... when I have a visa" is no ask.
        wh=frozenset(("как" if low.startswith("как") else low) for (tok, start), low in zip(raw, tokens)
                     if (low in _WH or low.startswith("как")) and re.search(r"(?:^|[.!?:;,]\s*)$", text[:start])),
        critical=frozenset(t for t in tokens if t in _CRITICAL),
        neg_verbs=sum(any(t.startswith(v) for v in _NEG_VERBS) for t in tokens),
        keywords=len(tokens) <= 4 and "?" not in text and not any(t in _WH or t.startswith("как") for t in tokens),
        values=frozenset(v for t in tokens if _number_value(t) is None and (v := _value_of(t)) is not None),
        from_to=(_after(tokens, "from"), _after(tokens, "to")),
        roles=tuple((p, w) for p in _ROLE_PREPS if (w := _after(tokens, p)) is not None),
        entity_order=_entity_order(raw, tokens, entities),
        asks_object=_asks_object(tokens),
        periods=frozenset(v for c in period_constraints(text) for v in c.values),
        pinned=frozenset((c.kind, c.values[0]) for c in question_constraints(text)
                         if c.kind in ("role", "superlative")),
    )


_BE = frozenset("is are was were be been being am является являлся была был было были".split())
_AUX = frozenset("did does do has have had will would can could should shall may might".split())


def _passive(tokens: Sequence[str]) -> bool:
    """'was Globex acquired by Acme', 'who was hired by X': a form of 'be' and a 'by' after it (the agent comes
    last)."""
    return any(t in _BE for t in tokens[:3]) and ("by" in tokens or "кем" in tokens)


def _entity_order(raw: Sequence[tuple[str, int]], tokens: Sequence[str], entities: Iterable[str]) -> tuple[str, ...]:
    ents = set(entities)
    runs: list[list[str]] = [[]]
    for low in tokens:
        e = re.sub(r"'s$", "", low).replace(".", "")
        if e in ents:
            runs[-1].append(e)
        elif runs[-1]:
            runs.append([])
    runs = [r for r in runs if r]
    if _passive(tokens):  # the agent after 'by' is the subject: runs (whole names) trade places, not their words
        runs = runs[::-1]
    return tuple(dict.fromkeys(e for r in runs for e in r))


def _asks_object(tokens: Sequence[str]) -> bool | None:
    """Whether a who/what/which question asks for the object of its verb ('who did Acme hire') rather than its
    subject ('who hired Acme'); the passive flips it ('who was hired by Acme' asks for the object)."""
    if not tokens or tokens[0] not in ("who", "whom", "what", "which"):
        return None
    i = 1
    if tokens[0] in ("what", "which") and len(tokens) > 2 and tokens[1] not in _AUX and tokens[1] not in _BE:
        i = 2  # 'which company did ...'
    if i >= len(tokens):
        return None
    nxt = tokens[i]
    if nxt in _AUX:
        return True
    if nxt in _BE:
        return True if _passive(tokens) else None
    return False


def _antonym_swap(a: QuestionFeatures, b: QuestionFeatures) -> tuple[str, str] | None:
    only_a = set(a.tokens) - set(b.tokens)
    only_b = set(b.tokens) - set(a.tokens)

    def has(words: Iterable[str], stem: str) -> bool:
        return any(w == stem or (len(stem) >= 4 and w.startswith(stem)) for w in words)

    for x, y in _ANTONYMS:
        if (has(only_a, x) and has(only_b, y)) or (has(only_a, y) and has(only_b, x)):
            return x, y
    # Affixal negation: 'likely' vs 'unlikely', 'правильно' vs 'неправильно'.
    for w in only_a | only_b:
        other = only_b if w in only_a else only_a
        for prefix in ("un", "in", "im", "il", "ir", "dis", "non", "не", "non-", "un-", "не-"):
            if w.startswith(prefix) and len(w) - len(prefix) >= 4 and w[len(prefix):] in other:
                return w[len(prefix):], w
    return None


@dataclass(frozen=True)
class GuardResult:
    ok: bool
    reason: str = ""  # empty when ok; else fit for the trace ("numbers differ: 3 vs 4")


def _fmt(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "none"


RULES = ("keywords", "negation_count", "negation_scope", "negative_verb", "negated_words", "numbers", "names",
         "question_word", "values", "direction", "roles", "quantifier", "antonym")
# Prepositions whose object names a role: 'convert my Roth IRA to a traditional IRA' and 'my traditional IRA to a
# Roth IRA' use the same words, but the two things trade places.
_ROLE_PREPS = ("to", "into", "for", "with", "after", "before", "in", "on", "of", "from", "в", "на", "для", "из")


def _rule_failures(a: QuestionFeatures, b: QuestionFeatures) -> Iterator[tuple[str, str]]:
    """Every word rule the pair breaks, in the guard's order, as (rule, reason). Lazy: the guard stops at the first;
    the verifier (core/answer/cache_verifier.py) reads them all as features."""
    if (a.keywords or b.keywords) and a.stems != b.stems:
        # 'Jane Doe' asks nothing in particular: an answer to it fits no narrower question, and the answer to
        # 'which client does Jane Doe work for?' is no overview of him.
        yield "keywords", "a keyword query (no question) reuses only an answer to the same words"
    na, nb = Counter(t[0] for t in a.negations), Counter(t[0] for t in b.negations)
    if sum(na.values()) != sum(nb.values()):
        yield "negation_count", f"negation differs: {sum(na.values())} negation(s) vs {sum(nb.values())}"
    elif a.negations != b.negations:
        yield "negation_scope", ("negation scope differs: " + "; ".join(" ".join(n) for n in a.negations)
                                 + " vs " + "; ".join(" ".join(n) for n in b.negations))
    if a.neg_verbs != b.neg_verbs:
        yield "negative_verb", f"negative verb differs: {a.neg_verbs} vs {b.neg_verbs} (forbid, exclude, fail...)"
    if a.negations and a.stems != b.stems:
        # In a negated question a single changed word (at/in, must/need, few/none) flips the meaning: require the
        # same words.
        yield "negated_words", f"negated question with different words: {_fmt(a.stems ^ b.stems)}"
    if a.numbers != b.numbers:
        yield "numbers", f"numbers/dates differ: {_fmt(a.numbers)} vs {_fmt(b.numbers)}"
    # A name on one side is shared when the other side has the same word in lower case ('Rough' / 'rough').
    names = {e for e in a.entities - b.entities if _stem(e) not in b.stems} | \
            {e for e in b.entities - a.entities if _stem(e) not in a.stems}
    if names:
        yield "names", f"names/identifiers differ: {_fmt(names)}"
    wa, wb = _asked_kinds(a.tokens, a.wh), _asked_kinds(b.tokens, b.wh)
    if wa != wb:
        yield "question_word", f"question word differs: {_fmt(a.wh)} vs {_fmt(b.wh)}"
    for name in sorted({n for n, _ in a.values} & {n for n, _ in b.values}):
        va, vb = {v for n, v in a.values if n == name}, {v for n, v in b.values if n == name}
        if va != vb:
            yield "values", f"{name} differs: {_fmt(va)} vs {_fmt(vb)}"
            break
    fa, ta = a.from_to
    fb, tb = b.from_to
    if fa and fb and fa != fb and (fa == tb or fb == ta):
        yield "direction", f"direction swapped: from {fa} vs from {fb}"
    else:
        ra, rb = dict(a.roles), dict(b.roles)
        for prep in (p for p in _ROLE_PREPS if p in ra and p in rb):
            wa_, wb_ = ra[prep], rb[prep]
            if wa_ != wb_ and wa_ in b.tokens and wb_ in a.tokens:
                yield "roles", f"roles swapped: {prep} {wa_} vs {prep} {wb_}"
                break
    if a.critical != b.critical:
        yield "quantifier", f"quantifier/modal differs: {_fmt(a.critical ^ b.critical)}"
    swap = _antonym_swap(a, b)
    if swap:
        yield "antonym", f"antonym swap: {swap[0]} / {swap[1]}"
    else:
        turn = direction_change(a, b)
        if turn:
            yield "antonym", f"direction of change differs: {turn[0]} / {turn[1]}"
    if a.periods != b.periods:
        yield "numbers", f"periods differ: {_fmt(a.periods) } vs {_fmt(b.periods)}"
    for kind in ("role", "superlative"):
        va, vb = {v for k, v in a.pinned if k == kind}, {v for k, v in b.pinned if k == kind}
        if va != vb and va and vb:
            yield "values", f"{kind} differs: {_fmt(va)} vs {_fmt(vb)}"
            break
    if a.stems - _AUX_STEMS == b.stems - _AUX_STEMS:
        if a.asks_object is not None and b.asks_object is not None and a.asks_object != b.asks_object:
            yield "roles", "the question asks for the other side of the action (who did X hire / who hired X)"
        shared = [e for e in a.entity_order if e in b.entity_order]
        if len(shared) >= 2 and shared != [e for e in b.entity_order if e in a.entity_order]:
            yield "roles", f"names trade places: {' / '.join(shared)} vs {' / '.join(e for e in b.entity_order if e in a.entity_order)}"
    one = one_word_swap(a, b)
    if one:
        # Counted with the closed-set values (RULES is the verifier's feature list: it keeps its length).
        yield "values", f"one word of a title, role or unit changed: {one[0]} vs {one[1]}"


_AUX_STEMS = frozenset(_stem(w) for w in _AUX | _BE | {"by"})


def guard_flags(a: QuestionFeatures, b: QuestionFeatures) -> dict[str, bool]:
    """Which of the word rules (RULES) the pair breaks: all of them, not only the first."""
    broken = {rule for rule, _ in _rule_failures(a, b)}
    return {rule: rule in broken for rule in RULES}


def one_sided_ids(a: QuestionFeatures, b: QuestionFeatures) -> tuple[set[str], set[str]]:
    """The numbers and names each side has and the other lacks (a name also written in lower case on the other side
    is shared)."""
    ids_a = (set(a.numbers) - set(b.numbers)) | {e for e in a.entities - b.entities if _stem(e) not in b.stems}
    ids_b = (set(b.numbers) - set(a.numbers)) | {e for e in b.entities - a.entities if _stem(e) not in a.stems}
    return ids_a, ids_b


def same_words(a: QuestionFeatures, b: QuestionFeatures) -> bool:
    """The same words in the same order (case and punctuation aside): the same question, nothing to verify."""
    return [t for t in a.tokens if any(ch.isalnum() for ch in t)] == [t for t in b.tokens if any(ch.isalnum() for ch in t)]


# Rules a verifier (core/answer/cache_verifier.py) leaves to itself: a name on ONE side only is often an added detail
# ('my washing machine trips the outlet' / 'trips the GFCI receptacle'), which SemEval paraphrases do; a name on each
# side is still a veto. Numbers stay a veto even on one side: 'an egg' / 'three eggs', 'a year' / 'five years' and
# 'last night' / 'on Tuesday' change the answer (the first held-out run served them when numbers were soft too).
SOFT_RULES = ("names",)


def swapped_words(a: QuestionFeatures, b: QuestionFeatures) -> tuple[list[str], list[str]]:
    """The content words each side has and the other lacks (both non-empty: a word swapped, not only added)."""
    return content_only(a, b), content_only(b, a)


# Words a reworded question adds or drops without changing what it asks: copulas and auxiliaries, personal pronouns.
_FUNCTION_WORDS = frozenset("является являются являлся являлась был была было были будет ли мне мой моя моё мое мои "
                            "меня нам наш наша наше наши вам ваш ваша is are was were be been do does did can could "
                            "will would i me my we our you your it its there".split())


def _content_keys(f: QuestionFeatures) -> frozenset[str]:
    """The question's content words, each by its first five letters (Russian inflects beyond the stemmer:
    'технический' / 'техническим'), function words left out: in a language the embedder does not read, the same
    content words in another grammatical frame are the only rewording the guard can vouch for."""
    return frozenset(t[:5] for t in f.tokens if any(ch.isalnum() for ch in t) and t not in _FUNCTION_WORDS
                     and t not in EN_STOP and t not in RU_STOP)


def guard(new: str | QuestionFeatures, old: str | QuestionFeatures, *, covered_languages: frozenset[str] | None = None,
          word_similarity: WordSimilarity | None = None, min_word_similarity: float = 0.5,
          cosine: float | None = None, swap_threshold: float = 0.0, hard_only: bool = False) -> GuardResult:
    """May the answer to `old` be served for `new`? Only the cheap, explainable checks; the cosine threshold itself is
    checked apart.

    covered_languages: the embedder's languages. Outside them its cosine says little, so the pair must then use the
    same words (after stemming) to pass.
    swap_threshold: when each question has content words the other lacks (a word swapped, not only added or
    dropped), the pair's cosine must reach this higher bar. MiniLM's word vectors cannot tell a synonym
    ('mold' / 'mildew') from a sibling ('laptop' / 'phone', 'summer' / 'winter'), but a one-word swap of a sibling
    leaves the sentence cosine lower than a rewording of the whole question does, on the tuning split.
    hard_only: the vetoes only, for when the learned verifier decides the rest: SOFT_RULES (a name on one side) fire
    only when each side has a name or number the other lacks, and the swap and word checks are the verifier's job."""
    a = features(new) if isinstance(new, str) else new
    b = features(old) if isinstance(old, str) else old
    if covered_languages is not None and isinstance(new, str):
        lang = detect_language(new)
        if lang not in covered_languages and a.stems != b.stems and _content_keys(a) != _content_keys(b):
            return GuardResult(False, f"the embedder does not cover '{lang}': only a question with the same words "
                                      "can reuse an answer")
    for rule, reason in _rule_failures(a, b):
        if hard_only and rule in SOFT_RULES:
            continue
        return GuardResult(False, reason)
    if hard_only:
        ids_a, ids_b = one_sided_ids(a, b)
        if ids_a and ids_b:
            return GuardResult(False, f"names/numbers differ: {_fmt(ids_a)} vs {_fmt(ids_b)}")
        return GuardResult(True)
    if cosine is not None and cosine < swap_threshold:
        only_a, only_b = content_only(a, b), content_only(b, a)
        if only_a and only_b:
            return GuardResult(False, f"words swapped ({_fmt(only_a)} / {_fmt(only_b)}) at cosine {cosine:.3f} < "
                                      f"{swap_threshold:g}")
    if word_similarity is not None:
        sub = _unmatched_substitution(a, b, word_similarity, min_word_similarity)
        if sub:
            return GuardResult(False, f"changed word: {sub[0]} / {sub[1]} (similarity {sub[2]:.2f})")
    return GuardResult(True)


WordSimilarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]
# The learned second check: (new question, cached question, their cosine) -> P(same question).
PairCheck = Callable[[str, str, float], float]


def content_only(f: QuestionFeatures, other: QuestionFeatures) -> list[str]:
    seen: dict[str, None] = {}
    for t in f.tokens:
        if len(t) > 1 and not t.isdigit() and t not in EN_STOP and t not in RU_STOP and t not in _EXTRA_STOP \
                and _stem(t) not in other.stems:
            seen.setdefault(t, None)
    return list(seen)


def _unmatched_substitution(a: QuestionFeatures, b: QuestionFeatures, sim: WordSimilarity, floor: float
                            ) -> tuple[str, str, float] | None:
    """A word swapped for an unrelated one ('paint from hair' vs 'paint from pipes') changes the question, while
    a synonym ('mold' / 'mildew') or an added detail ('a really stuck screw') does not. So when both questions have
    words of their own, each word of the side with fewer must resemble some word of the other side."""
    only_a, only_b = content_only(a, b), content_only(b, a)
    if not only_a or not only_b:
        return None
    few, many = (only_a, only_b) if len(only_a) <= len(only_b) else (only_b, only_a)
    m = np.asarray(sim(few, many), dtype=np.float32)
    for i, w in enumerate(few):
        j = int(np.argmax(m[i]))
        if float(m[i, j]) < floor:
            return w, many[j], float(m[i, j])
    return None


def embedder_word_similarity(embedder: Embedder) -> WordSimilarity:
    """Cosine of the embedder's vectors of single words (a model call over a handful of words)."""
    def sim(xs: Sequence[str], ys: Sequence[str]) -> np.ndarray:
        v = np.asarray(embedder.encode([*xs, *ys]), dtype=np.float32)
        return v[: len(xs)] @ v[len(xs):].T
    return sim


# -- the cache: key, entries, lookup ---------------------------------------------------------------------------------
# Sections that do not change what the answer says: the cache's own settings and input limits.
_NOT_ANSWER_RELEVANT = ("answer_cache", "limits")


def answer_config_hash(config: Any, embedder_id: str = "") -> str:
    """Hash of the answer-relevant configuration: every section but the cache's own and the input limits, so
    changing the threshold or TTL keeps the cache, and any retrieval or answer setting starts a fresh one. The
    embedder actually in use is part of it: cached question vectors of another model (another dimension) never meet
    this one's, whatever the configuration names."""
    data = {k: v for k, v in config.model_dump(mode="json").items() if k not in _NOT_ANSWER_RELEVANT}
    data["embedder_in_use"] = embedder_id
    data["support_model"] = model_fingerprint()  # the offline answerer's fitted model decides answers too
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CacheLookup:
    verdict: Verdict
    nearest_question: str | None = None
    cosine: float | None = None
    reason: str = ""
    entry: CachedAnswer | None = None
    compared: int = 0

    def info(self, *, embed_cache_misses: int = 0, embed_cache_hits: int = 0) -> "CacheInfo":
        """The stage info the trace records (and the counters read); the stage adds whether it encoded the query."""
        return CacheInfo(self.verdict, self.nearest_question, None if self.cosine is None else round(self.cosine, 4),
                         self.reason, self.compared,
                         self.entry.stored_at.isoformat(timespec="seconds") if self.entry else None,
                         round(self.entry.ms, 1) if self.verdict == "hit" and self.entry else 0.0,
                         round(self.entry.cost_usd, 6) if self.verdict == "hit" and self.entry else 0.0,
                         embed_cache_misses, embed_cache_hits)


@dataclass(frozen=True, eq=False)
class CacheInfo(StageInfo):
    """The answer_cache stage: the verdict, the nearest stored question and its cosine, why the guard refused it, how
    many entries were compared, when the served answer was stored and what serving it saved, and whether the query
    was encoded here (one embedding computed) or lent by a question met before."""

    verdict: str
    nearest_question: str | None
    cosine: float | None
    guard_reason: str
    compared: int
    stored_at: str | None
    saved_ms: float
    saved_usd: float
    embed_cache_misses: int = 0
    embed_cache_hits: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "nearest_question": self.nearest_question, "cosine": self.cosine,
                "guard_reason": self.guard_reason, "compared": self.compared, "stored_at": self.stored_at,
                "saved_ms": self.saved_ms, "saved_usd": self.saved_usd,
                "embed_cache_misses": self.embed_cache_misses, "embed_cache_hits": self.embed_cache_hits}


def lookup(question: str, vector: np.ndarray, entries: Sequence[CachedAnswer], key: CacheKey, *, threshold: float,
           now: datetime, ttl_s: float, covered_languages: frozenset[str] | None = None,
           use_guard: bool = True, word_similarity: WordSimilarity | None = None, word_floor: float = 0.3,
           swap_threshold: float = 0.0, verifier: PairCheck | None = None, verifier_threshold: float = 0.5,
           vet: Callable[[CachedAnswer], str | None] | None = None) -> CacheLookup:
    """Find a stored answer for `question`. Entries under another key or older than the TTL are never served, even if
    the store handed them in. Above the threshold the nearest entry that passes the guard is a hit; if none passes,
    the verdict is a guarded miss with the nearest one's reason.
    verifier: the learned second check (P(same question) of a pair). With it the guard keeps only its vetoes
    (hard_only) and a pair that passes them needs P >= verifier_threshold, unless both use the same words.
    vet: the answer check (core/answer/verify.py) of a stored answer against the new question: the reason it fails
    (a constraint the new question pins down that the stored answer's evidence does not state), or None; an entry
    that fails is never served."""
    fresh = [e for e in entries if e.key == key and (ttl_s <= 0 or (now - e.stored_at) <= timedelta(seconds=ttl_s))]
    if not fresh:
        return CacheLookup("miss", reason="no cached answer under this workspace, corpus version and configuration")
    matrix = np.stack([np.asarray(e.vector, dtype=np.float32) for e in fresh])
    q = np.asarray(vector, dtype=np.float32)
    sims = matrix @ q
    order = np.argsort(-sims, kind="stable")
    best = fresh[int(order[0])]
    best_sim = float(sims[order[0]])
    if best_sim < threshold:
        return CacheLookup("miss", best.question, best_sim, f"cosine {best_sim:.3f} < threshold {threshold:g}",
                           compared=len(fresh))
    first_reason = ""
    qf = features(question)
    for i in order:
        sim = float(sims[i])
        if sim < threshold:
            break
        entry = fresh[int(i)]
        if not use_guard:
            return CacheLookup("hit", entry.question, sim, "", entry, len(fresh))
        if verifier is not None:
            ef = features(entry.question)
            g = guard(question if covered_languages is not None else qf, ef, covered_languages=covered_languages,
                      hard_only=True)
            # in a language the embedder does not read, the verifier (fitted on English token vectors) says little;
            # the same content words are what vouches there
            vouched = covered_languages is not None and detect_language(question) not in covered_languages and \
                _content_keys(qf) == _content_keys(ef)
            if g.ok and not same_words(qf, ef) and not vouched:
                p = verifier(question, entry.question, sim)
                if p < verifier_threshold:
                    g = GuardResult(False, f"verifier: P(same question) {p:.2f} < {verifier_threshold:g}")
        else:
            g = guard(question if covered_languages is not None else qf, entry.question,
                      covered_languages=covered_languages, word_similarity=word_similarity,
                      min_word_similarity=word_floor, cosine=sim, swap_threshold=swap_threshold)
        if g.ok and vet is not None:
            why = vet(entry)
            if why:
                g = GuardResult(False, f"constraint check: {why}")
        if g.ok:
            return CacheLookup("hit", entry.question, sim, "", entry, len(fresh))
        first_reason = first_reason or g.reason
    return CacheLookup("guarded_miss", best.question, best_sim, first_reason, compared=len(fresh))


def served_label(lookup_: CacheLookup) -> str:
    """The visible label on an answer served from the cache."""
    e = lookup_.entry
    assert e is not None and lookup_.cosine is not None
    return (f"served from cache (question: {e.question}, similarity {lookup_.cosine:.2f}, "
            f"stored at {e.stored_at.isoformat(sep=' ', timespec='seconds')} UTC)")


# -- the stage's two calls (the pipeline wires them; the store comes in as this narrow Protocol) ---------------------
class AnswerCacheStore(Protocol):
    def cached_answers(self, key: CacheKey, *, limit: int = ...) -> list[CachedAnswer]: ...

    def put_answer(self, entry: CachedAnswer) -> None: ...

    def prune_answers(self, workspace: str, below_version: int) -> int: ...

    def record_lookup(self, workspace: str, verdict: str, cosine: float | None, saved_ms: float = ...,
                      saved_usd: float = ...) -> None: ...


class CacheSettings(Protocol):
    threshold: float
    swap_threshold: float
    guard: bool
    word_check: bool
    word_floor: float
    ttl_s: float
    max_entries: int
    verifier: bool
    verifier_threshold: float


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def check_cache(question: str, vector: np.ndarray, store: AnswerCacheStore, key: CacheKey, settings: CacheSettings,
                *, covered_languages: frozenset[str] | None, writable: bool = True,
                now: datetime | None = None, word_similarity: WordSimilarity | None = None,
                verifier: PairCheck | None = None, vet: Callable[[CachedAnswer], str | None] | None = None
                ) -> CacheLookup:
    """Look the question up under its key and count the verdict (when the store can be written). `verifier` is used
    when the settings ask for it; without one (an embedder without token vectors) the full guard decides."""
    entries = store.cached_answers(key, limit=settings.max_entries)
    use_verifier = verifier is not None and settings.verifier
    res = lookup(question, vector, entries, key, threshold=settings.threshold, now=now or utc_now(),
                 ttl_s=settings.ttl_s, covered_languages=covered_languages, use_guard=settings.guard,
                 word_similarity=word_similarity if settings.word_check else None, word_floor=settings.word_floor,
                 swap_threshold=settings.swap_threshold, verifier=verifier if use_verifier else None,
                 verifier_threshold=settings.verifier_threshold, vet=vet)
    if writable:
        info = res.info()
        store.record_lookup(key.workspace, res.verdict, res.cosine, info.saved_ms, info.saved_usd)
    return res


def trace_json(trace: Trace, *, text_chars: int = 300) -> str:
    """The trace of a freshly cached answer as the JSON stored beside it, each candidate's text cut to `text_chars`
    (what a stage column shows of it)."""
    d = trace.to_dict()
    for s in d["stages"]:
        for c in s["candidates"]:
            c["text"] = c["text"][:text_chars]
    return json.dumps(d, default=str)


def _info(d: Mapping[str, Any]) -> Mapping[str, Any]:
    """A stored stage's info: a record of an agentic round as the InRound it was written from, the rest as read."""
    return InRound.from_dict(d) if "round" in d else dict(d)


def trace_from_json(text: str) -> Trace:
    """A stored trace read back for display: stages, candidates, notes and answer (stage infos as plain mappings,
    an agentic round's records as InRound, so the views group them by round)."""
    d = json.loads(text)
    stages = []
    for s in d.get("stages", []):
        cands = tuple(Candidate(c["chunk_id"], c["doc_id"], c.get("text", ""), float(c["score"]), int(c["rank"]),
                                {k: v for k, v in c.items() if k not in ("chunk_id", "doc_id", "text", "score", "rank")})
                      for c in s.get("candidates", []))
        stages.append(StageResult(s["stage"], cands, float(s.get("ms", 0.0)), Usage(**s.get("usage", {})),
                                  s.get("skip_reason") if s.get("skipped") else None, tuple(s.get("notes", ())),
                                  _info(s.get("info") or {})))
    a = d.get("answer")
    answer = Answer(a["text"], tuple(a.get("citations", ())), bool(a.get("refused")), a.get("mode", "extractive")) \
        if a else None
    return Trace(d.get("query", ""), d.get("config_hash", ""), int(d.get("corpus_version", 0)), tuple(stages),
                 d.get("workspace", DEFAULT_WORKSPACE), d.get("query_lang", "en"), tuple(d.get("notes", ())), answer,
                 AgentRecord.from_dict(d["agent"]) if d.get("agent") else None)


def remember(store: AnswerCacheStore, key: CacheKey, question: str, vector: np.ndarray, answer: Answer | None, *,
             cost_usd: float, ms: float, now: datetime | None = None) -> bool:
    """Store a fresh answer under its key. Refusals are not stored: they are cheap to redo, and serving one would
    repeat a retrieval miss."""
    if answer is None or answer.refused or not answer.text:
        return False
    store.prune_answers(key.workspace, key.corpus_version)  # answers of an older corpus can never be served again
    store.put_answer(CachedAnswer(key, question, np.asarray(vector, dtype=np.float32), answer.text,
                                  tuple(answer.citations), False, answer.mode, now or utc_now(), cost_usd, ms))
    return True
