"""The answer check (core/answer/verify.py) on public data: near-miss questions refused, answerable ones answered.

Data: XQuAD articles 40-47 (../shared/datasets/xquad_crosslingual), English, Russian and cross-lingual (Russian questions
over the English paragraphs), and German (German questions over the German paragraphs, and over the English ones).
Near misses are made here from each answerable question by changing one thing it pins
down - a year, a number, an ordinal, a month, a superlative (to its opposite), a role, a name (an invented one, or a
real name from another article), the attribute asked ('the population of' -> 'the voltage of'), an event (to its
opposite: 'began' -> 'ended') - to a value its article never states (checked on the article's text). Roles and
attributes are drawn half from the check's own lists and half from words it does not list, so its lexicon is not the
only judge. Russian questions get the same kinds (their own generator; a changed name must be absent from the
Russian article too, which the cross-lingual setting's English article could never show). German questions get a year,
a number, a month, an ordinal, a superlative and a name changed (a name: a capitalised run the English question writes
the same way, replaced by an invented one or another question's; every value checked absent from the German and the
English article). Each answerable question
is also asked with its paragraph left out of the candidates ('omitted': refused is right), reported apart from near
misses. Split by paragraph position in corpus_en.jsonl: even = dev (rules chosen here; the support model was also
fitted on these), odd = report (never tuned on). Every figure is reported on both; the report split is the one to
quote.

Two readings per question:
- ceiling: the check alone on the gold sentence with its paragraph and title (what a near miss's neighbouring fact
  looks like to it; for answerable questions, whether it wrongly rejects the true answer);
- answer: the offline extractive answerer (shipped support model, lexical signals: no embedder) over the top 5
  paragraphs by BM25 (cross-lingual: the English question's list, standing in for multilingual retrieval), then the
  check on the sentences it quotes, exactly as the verify stage runs it. A question in another language than its
  paragraphs, or in one the lexical support model does not read (German), is answered as the pipeline answers it:
  by the multilingual reader (core.answer.crosslingual; over paragraphs in its own language with
  SAME_LANGUAGE_FLOOR; German over English with LATIN_CROSS_FLOOR: core.answer.crosslingual.answer_floor). A question
  the pipeline's embedder does not read (Russian over Russian) has its lexical answer read by the multilingual reader
  too, as the pipeline's answer stage reads a dense-blind query (core.answer.stage.blind_reading: the lead sentence
  checked, the reader's ranking answering below it and on low support; floors from --tune's tune_blind grid).
  Correct = not refused, contains the gold answer string and cites the gold paragraph. 'gold in candidates' (the gold sentence among the quotable
  sentences) is the ceiling beside it.

  nice -n 10 .venv/bin/python bench/verify_nearmiss.py [--out bench/results/verify_nearmiss.json] [--show 50] [--tune]
  nice -n 10 .venv/bin/python bench/verify_nearmiss.py --settings de,de_cross --show 50 --show-split dev --rows /tmp/r.jsonl
  (--settings runs some settings only, for reading; --rows writes every row with its answer text)
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Table, datasets_dir, jsonl, machine_info, write_result  # noqa: E402

from core.answer.crosslingual import (  # noqa: E402
    ANSWER_FLOOR,
    NameFinder,
    answer_floor,
    cross_answer,
    is_cross,
    reads_across,
)
from core.answer.e5_scorer import E5Reader  # noqa: E402
from core.answer.e5_scorer import available as e5_available  # noqa: E402
from core.answer.stage import REFUSAL, extractive_answer  # noqa: E402
from core.answer.support import claim_spans  # noqa: E402
from core.answer.verify import ChunkText, Evidence, check, verify_quotes  # noqa: E402
from core.models.embed import BUNDLED_MODEL  # noqa: E402
from core.models.protocols import declared_languages  # noqa: E402
from core.retrieve.bm25 import BM25Index  # noqa: E402
from core.text import guess_language, sentence_spans  # noqa: E402
from core.types import Candidate  # noqa: E402

# what the pipeline's embedder reads (the bundled MiniLM: English): a question in another language is dense-blind
EMBEDDER_LANGUAGES = declared_languages(BUNDLED_MODEL) or frozenset({"en"})
INVENTED_EN = ["Zorvath", "Kelbrin", "Marovia Tulp", "Quenstad", "Oskevar Plin", "Drubenko", "Vellamy Crost",
               "Thorngate", "Yselde Marr", "Brakkenfield"]
INVENTED_RU = ["Зорвата", "Кельбрина", "Маровии Тулп", "Квенстада", "Оскевара Плина", "Друбенко", "Веламии Крост",
               "Торнгейта", "Изельды Марр", "Браккенфилда"]
MONTHS = "January February March April May June July August September October November December".split()
MONTHS_RU = "января февраля марта апреля мая июня июля августа сентября октября ноября декабря".split()
ORD = "first second third fourth fifth sixth seventh eighth ninth tenth".split()
SUPER = {"largest": "smallest", "smallest": "largest", "oldest": "youngest", "youngest": "oldest",
         "highest": "lowest", "lowest": "highest", "longest": "shortest", "shortest": "longest",
         "earliest": "latest", "latest": "earliest", "most": "least", "least": "most", "best": "worst",
         "worst": "best", "biggest": "smallest", "greatest": "least", "first": "last", "last": "first"}
# half the check's own list, half roles it does not list
ROLES_SWAP = ["treasurer", "bishop", "governor", "chancellor", "admiral", "dean", "abbot", "curator", "registrar",
              "bursar", "chaplain", "steward"]
# an attribute asked of a thing ('the population of'): half the check's own lexicon, half attributes it does not list
ATTR_SWAP = ["population", "area", "height", "weight", "price", "budget", "warranty", "capacity", "speed",
             "temperature", "voltage", "humidity", "thickness", "circumference", "volume", "rent", "tariff", "pressure",
             "density", "lifespan"]
# opposite events, each way
EVENT_SWAP = {"begin": "end", "began": "ended", "start": "end", "started": "ended", "open": "close",
              "opened": "closed", "founded": "dissolved", "arrived": "departed", "won": "lost", "joined": "left",
              "bought": "sold", "imported": "exported", "end": "begin", "ended": "began", "close": "open",
              "closed": "opened", "lost": "won", "left": "joined", "sold": "bought", "exported": "imported"}
SETTINGS = {"en": "English", "ru": "Russian", "cross": "Russian over English", "de": "German",
            "de_cross": "German over English"}
ROLE_WORDS = {"president", "king", "queen", "emperor", "pope", "bishop", "governor", "mayor", "minister", "chancellor",
              "general", "director", "founder", "leader", "head", "chairman", "captain", "commander", "professor",
              "architect", "engineer", "inventor", "author", "composer", "editor", "prince", "duke", "ruler",
              "secretary", "admiral", "judge", "coach", "dean"}


# Russian near misses of the kinds the English ones have: stems with their English words (for the cross-lingual
# setting the English article must lack them too); roles and attributes half from the check's lists, half not.
ORD_RU = {"втор": ("second", "2nd"), "трет": ("third", "3rd"), "пят": ("fifth", "5th"), "шест": ("sixth", "6th"),
          "седьм": ("seventh", "7th"), "восьм": ("eighth", "8th"), "девят": ("ninth", "9th"),
          "десят": ("tenth", "10th"), "перв": ("first", "1st")}
ORD_RU_NOM = {"втор": "второй", "трет": "третий", "пят": "пятый", "шест": "шестой", "седьм": "седьмой",
              "восьм": "восьмой", "девят": "девятый", "десят": "десятый", "перв": "первый"}
ORD_RU_END = re.compile(r"^(перв|втор|трет|четв[её]рт|пят|шест|седьм|восьм|девят|десят)(ый|ой|ий|ая|ое|ые|ого|ому|ом|ую|"
                        r"ых|ым|ыми|ей|ья|ье|ьего|ьей|ьем|ьих)$")
SUPER_RU = {"крупнейш": ("мельчайш", "smallest"), "старейш": ("новейш", "newest"), "наибольш": ("наименьш", "least"),
            "наименьш": ("наибольш", "greatest"), "высочайш": ("низш", "lowest"), "древнейш": ("новейш", "newest"),
            "больш": ("маленьк", "smallest"), "высок": ("низк", "lowest"), "длинн": ("коротк", "shortest"),
            "стар": ("молод", "youngest"), "ранн": ("поздн", "latest"), "богат": ("бедн", "poorest")}
ROLE_RU_SRC = ("президент", "генерал", "губернатор", "министр", "директор", "лидер", "капитан", "командир",
               "профессор", "автор", "архитектор", "инженер", "епископ", "канцлер", "адмирал", "декан")
ROLE_RU_SWAP = {"епископ": "bishop", "губернатор": "governor", "канцлер": "chancellor", "адмирал": "admiral",
                "декан": "dean", "аббат": "abbot", "куратор": "curator", "регистратор": "registrar",
                "капеллан": "chaplain", "ревизор": "auditor", "нотариус": "notary"}
EVENT_RU = {"открыл": ("закрыл", "closed"), "закрыл": ("открыл", "opened"), "начал": ("закончил", "ended"),
            "закончил": ("начал", "began"), "основал": ("распустил", "dissolved"), "прибыл": ("отбыл", "departed"),
            "купил": ("продал", "sold"), "продал": ("купил", "bought"), "выиграл": ("проиграл", "lost"),
            "проиграл": ("выиграл", "won"), "вступил": ("вышел", "left"), "импортировал": ("экспортировал",
                                                                                          "exported")}
ATTR_RU_SWAP = {"какова": ("площадь", "высота", "цена", "вместимость", "скорость", "температура", "влажность",
                           "толщина", "окружность", "плотность"),
                "каково": ("население", "напряжение", "давление"), "каков": ("вес", "бюджет", "объём", "тариф")}
ATTR_RU_EN = {"площадь": "area", "высота": "height", "цена": "price", "вместимость": "capacity", "скорость": "speed",
              "температура": "temperature", "влажность": "humidity", "толщина": "thickness",
              "окружность": "circumference", "плотность": "density", "население": "population",
              "напряжение": "voltage", "давление": "pressure", "вес": "weight", "бюджет": "budget", "объём": "volume",
              "тариф": "tariff"}


# German near misses (a German question over the English paragraphs, and over the German ones): months, ordinals,
# superlatives to their opposite, and names (a name is a capitalised run the English question writes the same way:
# names are spelt alike in English and German). General German words with their English forms, from general knowledge.
MONTHS_DE = "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split()
ORD_DE = {"erst": ("first", "1st"), "zweit": ("second", "2nd"), "dritt": ("third", "3rd"), "viert": ("fourth", "4th"),
          "fünft": ("fifth", "5th"), "sechst": ("sixth", "6th"), "siebt": ("seventh", "7th"),
          "neunt": ("ninth", "9th"), "zehnt": ("tenth", "10th")}
ORD_DE_RX = re.compile(r"^(erst|zweit|dritt|viert|fünft|sechst|siebt|neunt|zehnt)(e|en|er|es|em)$")
SUPER_DE = {"größt": ("kleinst", "smallest"), "kleinst": ("größt", "largest"), "ältest": ("jüngst", "youngest"),
            "jüngst": ("ältest", "oldest"), "höchst": ("niedrigst", "lowest"), "niedrigst": ("höchst", "highest"),
            "längst": ("kürzest", "shortest"), "kürzest": ("längst", "longest"), "frühest": ("spätest", "latest"),
            "spätest": ("frühest", "earliest"), "meist": ("wenigst", "least"), "wenigst": ("meist", "most"),
            "best": ("schlechtest", "worst"), "letzt": ("erst", "first")}
SUPER_DE_RX = re.compile(r"^(größt|kleinst|ältest|jüngst|höchst|niedrigst|längst|kürzest|frühest|spätest|meist|wenigst|"
                         r"best|letzt)(e|en|er|es|em)$")


def _german_near_misses(q: str, article: str, rng: random.Random) -> dict[str, str]:
    """kind -> the German question with a month, ordinal or superlative changed to one its article (German and
    English) never states."""
    out: dict[str, str] = {}
    for m in re.finditer(r"[^\W\d_]+", q):
        w, low = m.group(0), m.group(0).lower()
        if w in MONTHS_DE and "month" not in out:
            for alt in rng.sample(MONTHS_DE, 12):
                en = MONTHS[MONTHS_DE.index(alt)]
                if alt != w and _absent(alt, article) and _absent(en, article):
                    out["month"] = q[: m.start()] + alt + q[m.end():]
                    break
        o = ORD_DE_RX.match(low)
        if o and "ordinal" not in out:
            for stem in rng.sample(sorted(ORD_DE), len(ORD_DE)):
                if stem != o.group(1) and _stem_absent(stem + "e", article) and all(_absent(e, article) for e in
                                                                                     ORD_DE[stem]):
                    word = stem + o.group(2)
                    out["ordinal"] = q[: m.start()] + (word.capitalize() if w[0].isupper() else word) + q[m.end():]
                    break
        s = SUPER_DE_RX.match(low)
        if s and "superlative" not in out and "ordinal" not in out:
            alt, en = SUPER_DE[s.group(1)]
            if _stem_absent(alt, article) and _absent(en, article):
                out["superlative"] = q[: m.start()] + alt + s.group(2) + q[m.end():]
    return out


def _stem_absent(stem: str, article: str) -> bool:
    return re.search(r"(?i)(?<!\w)" + re.escape(stem), article) is None


def _russian_near_misses(q: str, article: str, rng: random.Random) -> dict[str, str]:
    """kind -> the Russian question with an ordinal, superlative, role, event or attribute changed to one its article
    (Russian and English) never states."""
    out: dict[str, str] = {}
    for m in re.finditer(r"[^\W\d_]+", q):
        w, low = m.group(0), m.group(0).lower()
        o = ORD_RU_END.match(low)
        if o and "ordinal" not in out:
            for stem in rng.sample(sorted(ORD_RU), len(ORD_RU)):
                word = ORD_RU_NOM[stem] if o.group(2) in ("ый", "ой", "ий") else stem + o.group(2)
                if not low.startswith(stem) and _stem_absent(stem, article) and all(_absent(e, article) for e in
                                                                                     ORD_RU[stem]):
                    out["ordinal"] = q[: m.start()] + (word.capitalize() if w[0].isupper() else word) + q[m.end():]
                    break
        for stem, (alt, en) in SUPER_RU.items():
            if low.startswith(stem) and "superlative" not in out and len(low) <= len(stem) + 4 and \
                    (stem.endswith("ейш") or stem in ("наибольш", "наименьш") or
                     re.search(r"(?i)\bсам\w+\s+" + re.escape(w), q)) and _stem_absent(alt, article) and \
                    _absent(en, article):
                out["superlative"] = q[: m.start()] + alt + low[len(stem):] + q[m.end():]
        # a title before a name ('генерал Джафар Нимейри') is part of the name, as the English generator leaves
        # 'General Gaafar' alone
        titled = re.match(r"\s+(?:[а-яё]+\s+)?[А-ЯЁ]", q[m.end():]) is not None
        for stem in ROLE_RU_SRC:
            if low.startswith(stem) and len(low) <= len(stem) + 3 and "role" not in out and not titled:
                for alt in rng.sample(sorted(ROLE_RU_SWAP), len(ROLE_RU_SWAP)):
                    if alt != stem and _stem_absent(alt, article) and _absent(ROLE_RU_SWAP[alt], article):
                        out["role"] = q[: m.start()] + alt + low[len(stem):] + q[m.end():]
                        break
        for stem, (alt, en) in EVENT_RU.items():
            if low.startswith(stem) and len(low) <= len(stem) + 3 and "event" not in out and \
                    _stem_absent(alt, article) and _absent(en, article):
                out["event"] = q[: m.start()] + alt + low[len(stem):] + q[m.end():]
    a = re.match(r"(?i)^\s*(какова|каково|каков)\s+([а-яё]+)", q)
    if a:
        for alt in rng.sample(ATTR_RU_SWAP[a.group(1).lower()], len(ATTR_RU_SWAP[a.group(1).lower()])):
            if alt != a.group(2).lower() and _stem_absent(alt[:5], article) and _absent(ATTR_RU_EN[alt], article):
                out["attribute"] = q[: a.start(2)] + alt + q[a.end(2):]
                break
    return out


def gold_sentence(text: str, answer: str) -> str | None:
    a = answer.strip().lower()
    for s, e in sentence_spans(text):
        if a and a in text[s:e].lower():
            return " ".join(text[s:e].split())
    return None


def _absent(value: str, article: str) -> bool:
    return re.search(r"(?i)(?<!\w)" + re.escape(value) + r"(?!\w)", article) is None


def near_misses(q: str, article: str, other_names: list[str], rng: random.Random, lang: str,
                en_q: str | None = None) -> dict[str, str]:
    """kind -> the question with one pinned thing changed to a value the article never states."""
    out: dict[str, str] = {}
    m = re.search(r"(?<!\d)(1[0-9]{3}|20[0-2][0-9])(?!\d)", q)
    if m:
        for d in (7, -7, 13, -13, 23, 31):
            y = str(int(m.group(1)) + d)
            if _absent(y, article):
                out["year"] = q[: m.start()] + y + q[m.end():]
                break
    for m in re.finditer(r"(?<![\w.,])\d+(?:[.,]\d+)?(?![\w])", q):
        if re.fullmatch(r"1[0-9]{3}|20[0-2][0-9]", m.group(0)):
            continue
        n = float(m.group(0).replace(",", ""))
        for v in (n * 3 + 7, n * 7 + 11, n + 97):
            vs = str(int(v)) if v == int(v) else f"{v:g}"
            if _absent(vs, article):
                out["number"] = q[: m.start()] + vs + q[m.end():]
                break
        break
    words = list(re.finditer(r"[^\W\d_]+", q))
    if lang == "en":
        for m in words:
            if m.start() > 0 and m.group(0)[0].isupper():
                continue  # a capitalised word inside the question is a name ('General Gaafar'), not a role
            w = m.group(0)
            low = w.lower()
            if low in ORD and "ordinal" not in out:
                for alt in rng.sample(ORD, len(ORD)):
                    n = ORD.index(alt) + 1
                    if alt != low and _absent(alt, article) and _absent(f"{n}{'st' if n == 1 else 'nd' if n == 2 else 'rd' if n == 3 else 'th'}", article):
                        out["ordinal"] = q[: m.start()] + (alt.capitalize() if w[0].isupper() else alt) + q[m.end():]
                        break
            if w in MONTHS and "month" not in out:
                for alt in rng.sample(MONTHS, 12):
                    if alt != w and _absent(alt, article):
                        out["month"] = q[: m.start()] + alt + q[m.end():]
                        break
            if low in SUPER and "superlative" not in out and _absent(SUPER[low], article):
                out["superlative"] = q[: m.start()] + SUPER[low] + q[m.end():]
            if low in EVENT_SWAP and "event" not in out and _absent(EVENT_SWAP[low], article):
                out["event"] = q[: m.start()] + EVENT_SWAP[low] + q[m.end():]
            if low in ROLE_WORDS and "role" not in out:
                for alt in rng.sample(ROLES_SWAP, len(ROLES_SWAP)):
                    if alt != low and _absent(alt, article):
                        out["role"] = q[: m.start()] + alt + q[m.end():]
                        break
        m = re.search(r"(?i)^\s*(?:what|which)\s+(?:is|was|are|were)\s+the\s+([a-z]+)\s+of\b", q)  # the asked one
        if m and m.group(1).lower() not in ROLE_WORDS and m.group(1).lower() not in SUPER:
            for alt in rng.sample(ATTR_SWAP, len(ATTR_SWAP)):
                if alt != m.group(1).lower() and _absent(alt, article):
                    out["attribute"] = q[: m.start(1)] + alt + q[m.end(1):]
                    break
    elif lang == "de":
        out.update(_german_near_misses(q, article, random.Random(q)))
    else:
        for m in words:
            w = m.group(0)
            if w.lower() in MONTHS_RU and "month" not in out:
                for alt in rng.sample(MONTHS_RU, 12):
                    if alt != w.lower() and _absent(alt[:5], article) and not re.search(alt[:4], article, re.I):
                        out["month"] = q[: m.start()] + alt + q[m.end():]
                        break
        # own generator: the entity near misses below keep the draws they had before these kinds existed
        out.update(_russian_near_misses(q, article, random.Random(q)))
    # a name: a capitalised run that does not open the question (German: one the English question writes the same)
    for m in re.finditer(r"(?<=[\w,] )([A-ZА-ЯЁ][\w\-]+(?: [A-ZА-ЯЁ][\w\-]+)*)", q):
        name = m.group(1)
        if lang == "de" and (en_q is None or re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", en_q) is None):
            continue
        pool = INVENTED_RU if lang == "ru" else INVENTED_EN
        out["entity_invented"] = q[: m.start()] + rng.choice(pool) + q[m.end():]
        for alt in rng.sample(other_names, min(60, len(other_names))):
            if all(re.search(r"(?i)(?<!\w)" + re.escape(p[:4]), article) is None for p in alt.split()) and alt != name:
                out["entity_swap"] = q[: m.start()] + alt + q[m.end():]
                break
        break
    return out


def tune(items: list[dict[str, Any]], corp: dict[str, dict[str, Any]], finder: NameFinder) -> None:
    """The dev split's cross-lingual name signals (core.answer.crosslingual.NameFinder): for each name of an
    answerable question (must be found in its gold paragraph and title) and each changed name of a near miss (must
    not be), the rule's hit rates over a grid of cuts: every word sounds like a word of the text or is its known
    translation (core.answer.translit.name_stated, at a sound cut), or the name's gain passes a cut. The shipped
    cuts were read off this grid."""
    import itertools

    from core.answer.translit import name_stated
    from core.answer.verify import question_constraints
    cuts, gains = (0.7, 0.75, 0.8, 0.85, 9.0), (0.0, 0.005, 0.01, 0.02, 9.0)
    pos, neg = [], []
    for it in items:
        if it["split"] != "dev" or it["setting"] != "cross" or it["kind"] not in ("answerable", "entity_invented",
                                                                                   "entity_swap"):
            continue
        para = corp["en"][it["gold"]]
        title = para["title"].replace("_", " ")
        text = title + " / " + para["text"]
        read = f"{title}: {it['gold_sentence']}"
        cons = [c for c in question_constraints(it["question"]) if c.kind == "entity" and re.search("[а-яё]", c.text,
                                                                                                      re.I)]
        if it["kind"] != "answerable":
            orig = {c.text for c in question_constraints(it["orig_question"]) if c.kind == "entity"}
            cons = [c for c in cons if c.text not in orig]
        (pos if it["kind"] == "answerable" else neg).extend(
            ({cut: name_stated(c.text, text, cut=cut) for cut in cuts}, finder.gain_of(c.text, it["question"], read))
            for c in cons)
    grid = []
    for cut, gain in itertools.product(cuts, gains):
        def hit(x: tuple[dict[float, bool], float]) -> bool:
            return x[0][cut] or x[1] > gain
        found, false = sum(map(hit, pos)) / max(1, len(pos)), sum(map(hit, neg)) / max(1, len(neg))
        grid.append((round(found - false, 3), round(found, 3), round(false, 3), cut, gain))
    print(f"dev names: {len(pos)} asked names, {len(neg)} changed names; best (found - false, found, false, sound "
          "cut, gain cut):", file=sys.stderr)
    for g in sorted(grid, reverse=True)[:10]:
        print("  ", g, file=sys.stderr)


def grid_rates(rows: list[dict[str, Any]]) -> str:
    """Right, wrong, near misses refused and paragraph-left-out refused of a grid point's rows, on one line."""
    ans = [r for r in rows if r["kind"] == "answerable"]
    nm = [r for r in rows if r["kind"] not in ("answerable", "omitted")]
    om = [r for r in rows if r["kind"] == "omitted"]
    return (f"right {sum(r['after']['correct'] for r in ans) / len(ans):.3f} wrong "
            f"{sum(not r['after']['correct'] and not r['after']['refused'] for r in ans) / len(ans):.3f} "
            f"near misses refused {sum(r['after']['refused'] for r in nm) / len(nm):.3f} omitted refused "
            f"{sum(r['after']['refused'] for r in om) / len(om):.3f}")


def tune_cross_answer(data: dict[str, Any], reader: E5Reader, finder: NameFinder) -> None:
    """The dev split's cross-lingual answer cuts (core.answer.crosslingual.ANSWER_MARGIN, ANSWER_FLOOR): right, wrong,
    near misses refused and paragraph-left-out refused over a grid, beside English on the same questions. The
    shipped cuts were read off this grid."""
    import core.answer.crosslingual as cl

    dev = {st: [it for it in data["items"] if it["split"] == "dev" and it["setting"] == st] for st in ("en", "cross")}
    print(f"dev English: {grid_rates(run_items(dev['en'], data, None, None))}", file=sys.stderr)
    defaults = dict(cl.cross_answer.__kwdefaults__ or {})
    try:
        for margin, floor in ((0.02, 0.74), (0.04, 0.74), (0.08, 0.74), (0.04, 0.76), (0.04, 0.77), (0.04, 0.78),
                              (0.04, 0.80)):
            assert cl.cross_answer.__kwdefaults__ is not None
            cl.cross_answer.__kwdefaults__.update(margin=margin, floor=floor)
            rows = run_items(dev["cross"], data, reader, finder)
            print(f"dev cross margin {margin} floor {floor}: {grid_rates(rows)}",
                  file=sys.stderr)
    finally:
        cl.cross_answer.__kwdefaults__.update(defaults)
    dev_de = [it for it in data["items"] if it["split"] == "dev" and it["setting"] == "de_cross"]
    latin = cl.LATIN_CROSS_FLOOR
    try:
        for floor in (0.74, 0.75, 0.76, 0.77, 0.78, 0.80):
            cl.LATIN_CROSS_FLOOR = floor
            print(f"dev German over English floor {floor}: {grid_rates(run_items(dev_de, data, reader, finder))}",
                  file=sys.stderr)
    finally:
        cl.LATIN_CROSS_FLOOR = latin


def tune_noun(data: dict[str, Any], reader: E5Reader) -> None:
    """The dev split's cut for a German question's words that may be names or nouns (core.answer.crosslingual.NOUN_BEST):
    German over German answered right, wrong, near misses and paragraph-left-out questions refused over a grid. The
    shipped cut was read off this grid."""
    dev = [it for it in data["items"] if it["split"] == "dev" and it["setting"] == "de"]
    for cut in (0.86, 0.88, 0.9, 0.92, float("inf")):
        print(f"dev German noun cut {cut}: {grid_rates(run_items(dev, data, reader, NameFinder(reader, noun=cut)))}",
              file=sys.stderr)


def tune_blind(data: dict[str, Any], reader: E5Reader) -> None:
    """The dev split's floors for a question the embedder does not read (core.answer.stage.BLIND_LEAD_FLOOR, the e5
    similarity the lexical answer's lead sentence needs, and BLIND_FLOOR, at which e5's own ranking answers): Russian
    over Russian answered right, wrong, near misses and paragraph-left-out questions refused over a grid (lead 0: no
    lead check; e5 inf: no e5 answer). The shipped floors were read off this grid."""
    import core.answer.stage as stage

    dev = [it for it in data["items"] if it["split"] == "dev" and it["setting"] == "ru"]
    shipped = stage.BLIND_LEAD_FLOOR, stage.BLIND_FLOOR, stage.BLIND_LOW_FLOOR
    inf = float("inf")
    try:
        for lead, floor, low in [(lead, floor, floor) for lead in (0.0, 0.78, 0.79, 0.80, 0.81, 0.82)
                                 for floor in (inf, 0.82, 0.83, 0.84, 0.85, 0.86)] + \
                [(0.80, floor, low) for floor in (0.82, 0.83, 0.84, 0.85, 0.86) for low in (0.86, 0.88, 0.90, inf)]:
            stage.BLIND_LEAD_FLOOR, stage.BLIND_FLOOR, stage.BLIND_LOW_FLOOR = lead, floor, low
            print(f"dev Russian lead floor {lead} e5 floor {floor} (low support: {low}): "
                  f"{grid_rates(run_items(dev, data, reader, None))}", file=sys.stderr)
    finally:
        stage.BLIND_LEAD_FLOOR, stage.BLIND_FLOOR, stage.BLIND_LOW_FLOOR = shipped


def cands(data: dict[str, Any], lang: str, text: str, k: int = 5) -> list[Candidate]:
    """The top k paragraphs of `lang` by BM25 for `text`."""
    docs = data["corp"][lang]
    return [Candidate(cid, cid, docs[cid]["text"], float(s), i + 1)
            for i, (cid, s) in enumerate(data["index"][lang].search(text, k))]


def build(datasets: str | None, seed: int = 0) -> dict[str, Any]:
    """The items (answerable questions and their near misses, each setting), the paragraphs by language and id, and
    a BM25 index per language: what the run and the dev-split analyses read."""
    root = datasets_dir(datasets) / "xquad_crosslingual"
    en = jsonl(root / "corpus_en.jsonl")
    ru = jsonl(root / "corpus_ru.jsonl")
    de = jsonl(root / "corpus_de.jsonl")
    questions = jsonl(root / "questions.jsonl")
    split = {d["id"]: ("dev" if i % 2 == 0 else "report") for i, d in enumerate(en)}
    corp = {"en": {d["id"]: d for d in en}, "ru": {d["id"]: d for d in ru}, "de": {d["id"]: d for d in de}}
    article = {lang: defaultdict(str) for lang in ("en", "ru", "de")}
    for lang, docs in (("en", en), ("ru", ru), ("de", de)):
        for d in docs:
            article[lang][d["id"].split("-p")[0]] += "\n" + d["text"]
    index = {lang: BM25Index([d["id"] for d in docs], [d["text"] for d in docs]) for lang, docs in
             (("en", en), ("ru", ru), ("de", de))}
    names = {lang: sorted({m.group(1) for q in questions if q["lang"] == lang for m in
                           re.finditer(r"(?<=[\w,] )([A-ZА-ЯЁ][\w\-]+(?: [A-ZА-ЯЁ][\w\-]+)*)", q["question"])})
             for lang in ("en", "ru")}
    by_id = {q["id"]: q for q in questions}
    names["de"] = sorted({m.group(1) for q in questions if q["lang"] == "de" for m in
                          re.finditer(r"(?<=[\w,] )([A-Z][\w\-]+(?: [A-Z][\w\-]+)*)", q["question"])
                          if m.group(1) in (by_id.get(q["id"].rsplit("-", 1)[0] + "-en") or {}).get("question", "")})
    rng = random.Random(seed)

    items: list[dict[str, Any]] = []
    for q in questions:
        if q["lang"] not in ("en", "ru", "de"):
            continue
        base = q["id"].rsplit("-", 1)[0]
        gold = q["gold"][0]
        en_q = by_id.get(base + "-en")
        settings = {"en": [("en", "en")], "ru": [("ru", "ru"), ("cross", "en")],
                    "de": [("de", "de"), ("de_cross", "en")]}[q["lang"]]
        for setting, doc_lang in settings:
            ans = q["answer"] if doc_lang == q["lang"] else (en_q or {}).get("answer", "")
            para = corp[doc_lang][gold]
            gs = gold_sentence(para["text"], ans)
            if gs is None:
                continue
            # a changed value must be absent from the article in the question's language too (a Russian name is
            # looked for in the Russian article: the English one never holds Cyrillic letters)
            art = article[doc_lang][gold.split("-p")[0]] + "\n" + article[q["lang"]][gold.split("-p")[0]]
            variants = {"answerable": q["question"], **near_misses(
                q["question"], art, names[q["lang"]], rng if q["lang"] != "de" else random.Random(q["id"] + setting),
                q["lang"], (en_q or {}).get("question"))}
            for kind, text in variants.items():
                retr = text if setting not in ("cross", "de_cross") else (en_q or {}).get("question", text)
                items.append({"id": q["id"], "setting": setting, "kind": kind, "question": text, "answer": ans,
                              "orig_question": q["question"],
                              "gold": gold, "gold_sentence": gs, "split": split[gold], "doc_lang": doc_lang,
                              "retrieve": retr if kind == "answerable" or setting in ("cross", "de_cross") else text})
            # the answerable question with its paragraph left out of the candidates: the corpus no longer says
            items.append({**items[-len(variants)], "kind": "omitted"})
    return {"items": items, "corp": corp, "index": index}


def run_items(items: list[dict[str, Any]], data: dict[str, Any], reader: E5Reader | None,
              finder: NameFinder | None) -> list[dict[str, Any]]:
    """Each item answered as the pipeline answers it (cross-lingual path when no passage is in the question's script),
    checked, and read against its gold: one row per item."""
    corp, index = data["corp"], data["index"]
    rows = []
    for it in items:
        lang = it["doc_lang"]
        cs = cands(data, lang, it["retrieve"]) if it["kind"] != "omitted" else \
            [c for c in cands(data, lang, it["retrieve"], 6) if c.doc_id != it["gold"]][:5]
        titles = {c.doc_id: corp[lang][c.doc_id]["title"].replace("_", " ") for c in cs}
        para = corp[lang][it["gold"]]
        ceil = check(it["question"], Evidence(it["gold_sentence"], para["text"], "", para["title"].replace("_", " ")),
                     names=finder if it["setting"] in ("cross", "de_cross", "de") else None) if it["gold_sentence"] \
            else None  # (no gold sentence: bench/verify_germanquad.py's questions carry no answer span)
        cross = reader is not None and is_cross(it["question"], [c.text for c in cs])
        across = reader is not None and reads_across(it["question"], [c.text for c in cs])
        if across:  # the pipeline's path for a
            # question in another language than its passages, or in one the lexical support model does not read
            # the floor as the pipeline chooses it (core.answer.crosslingual.answer_floor; the cross-lingual floors:
            # --tune's grids); a run of tune_cross_answer's grid sets the across-scripts one
            fl = answer_floor(it["question"], [c.text for c in cs])
            same = {"floor": fl} if fl != ANSWER_FLOOR else {}
            a = cross_answer(it["question"], cs, reader, titles=titles, refusal=REFUSAL, **same)[0]
        else:  # a question the embedder does not read (Russian) is read by the multilingual reader too, as the
            # pipeline's answer stage reads a dense-blind query (core.answer.stage.blind_reading)
            blind = guess_language(it["question"]) not in EMBEDDER_LANGUAGES
            a = extractive_answer(it["question"], cs, titles=titles, vocabulary=index[lang].vocabulary(), blind=blind,
                                  reader=reader if blind else None).answer
        chunks = {c.chunk_id: ChunkText(c.text, "", titles[c.doc_id]) for c in cs}
        v = verify_quotes(it["question"], a.text, a.citations, chunks, refusal=REFUSAL,
                          names=finder if across else None) if not a.refused else None
        after_refused = a.refused or (v is not None and v.refused)
        after_text = a.text if v is None else v.text
        after_cites = a.citations if v is None else v.citations

        def correct(text: str, cites: tuple[str, ...], refused: bool) -> bool:
            return not refused and it["answer"].lower() in text.lower() and it["gold"] in cites
        in_cands = any(" ".join(c.text[s:e].split()) == it["gold_sentence"] for c in cs for s, e in
                       claim_spans(c.text)) or any(it["gold_sentence"] in " ".join(c.text.split()) for c in cs)
        rows.append({**{k: it[k] for k in ("id", "setting", "kind", "split", "question", "answer")},
                     "ceiling_ok": ceil.ok if ceil else None,
                     "ceiling_unmet": [v_.to_dict() for v_ in ceil.unmet] if ceil else [],
                     "gold_in_candidates": in_cands,
                     "before": {"refused": a.refused, "correct": correct(a.text, a.citations, a.refused)},
                     "after": {"refused": after_refused, "correct": correct(after_text, after_cites, after_refused),
                               "text": after_text[:400], "action": v.info.action if v else "answer refused"}})
    return rows


def measured_verify_nearmiss(d: dict[str, Any], file: str) -> list[Any]:
    """The answer check by language (bench/verify_nearmiss.py): answerable questions answered right / wrong, near
    misses refused, the same questions with their paragraph left out refused, and the check's ceilings."""
    from _common import CAPTION, grid, num

    def pct(v: Any) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"
    rows = []
    for sp in ("report", "dev"):
        for st, label in SETTINGS.items():
            x = (d.get("summary") or {}).get(sp, {}).get(st) or {}
            rows.append([sp, label, num(x.get("answerable")), pct(x.get("after_correct")), pct(x.get("after_wrong")),
                         pct(x.get("ceiling_check_passes_gold")), num(x.get("near_miss")),
                         pct(x.get("after_nearmiss_refused")), pct(x.get("ceiling_check_rejects_neighbour")),
                         pct(x.get("after_omitted_refused"))])
    return ["### The answer check by language: English, Russian, German, a Russian or German question over English "
            "(XQuAD 40-47)", "",
            "Offline extractive answer (lexical support model; the cross-lingual path ranks by multilingual-e5, which "
            "also reads a Russian question's lexical answer) over BM25's top 5 paragraphs, then the verify check. Near misses change one thing the question pins down to a "
            "value its article never states; 'omitted' is each answerable question with its paragraph left out "
            "(refused is right). Cuts chosen on the dev split (even paragraphs); the report split is the one to "
            "quote.", "", CAPTION, "",
            grid(["split", "language", "answerable", "right", "wrong", "check passes gold", "near misses",
                  "refused", "check rejects neighbour", "omitted refused"], rows)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--show", type=int, default=0, help="print N report-split items (answers and refusals)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tune", action="store_true", help="print the cross-lingual cuts' and the blind floors' grids on the dev split first")
    ap.add_argument("--settings", help="comma-separated settings to run (of " + ",".join(SETTINGS) + "); all when "
                    "left out (a run of some settings is for reading, never for --out)")
    ap.add_argument("--show-split", default="report", choices=("report", "dev"), help="the split --show reads")
    ap.add_argument("--rows", type=Path, help="write every row (question, kind, verdicts, answer text) as JSON lines")
    args = ap.parse_args()
    data = build(args.datasets, args.seed)
    if args.settings:
        keep = set(args.settings.split(","))
        assert keep <= set(SETTINGS), f"unknown settings: {keep - set(SETTINGS)}"
        assert not args.out, "--out writes all settings' rows: run without --settings"
        data["items"] = [it for it in data["items"] if it["setting"] in keep]
    items, corp = data["items"], data["corp"]
    reader = E5Reader() if e5_available() else None
    finder = NameFinder(reader) if reader is not None else None
    if args.tune and finder is not None and reader is not None:
        tune(items, corp, finder)
        tune_cross_answer(data, reader, finder)
        tune_noun(data, reader)
        tune_blind(data, reader)
    t0 = time.perf_counter()
    rows = run_items(items, data, reader, finder)
    ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))

    def rates(sel: list[dict[str, Any]]) -> dict[str, Any]:
        ans = [r for r in sel if r["kind"] == "answerable"]
        nm = [r for r in sel if r["kind"] not in ("answerable", "omitted")]
        om = [r for r in sel if r["kind"] == "omitted"]
        out: dict[str, Any] = {"answerable": len(ans), "near_miss": len(nm)}
        if ans:
            for when in ("before", "after"):
                out[f"{when}_correct"] = round(sum(r[when]["correct"] for r in ans) / len(ans), 3)
                out[f"{when}_wrong"] = round(sum(not r[when]["correct"] and not r[when]["refused"] for r in ans)
                                             / len(ans), 3)
                out[f"{when}_refused"] = round(sum(r[when]["refused"] for r in ans) / len(ans), 3)
            out["gold_in_candidates"] = round(sum(r["gold_in_candidates"] for r in ans) / len(ans), 3)
            out["ceiling_check_passes_gold"] = round(sum(r["ceiling_ok"] for r in ans) / len(ans), 3)
        if om:  # the answerable questions with their paragraph left out: refused is right
            out["omitted"] = len(om)
            for when in ("before", "after"):
                out[f"{when}_omitted_refused"] = round(sum(r[when]["refused"] for r in om) / len(om), 3)
        if nm:
            for when in ("before", "after"):
                out[f"{when}_nearmiss_refused"] = round(sum(r[when]["refused"] for r in nm) / len(nm), 3)
            out["ceiling_check_rejects_neighbour"] = round(sum(not r["ceiling_ok"] for r in nm) / len(nm), 3)
            kinds = Counter(r["kind"] for r in nm)
            out["by_kind"] = {k: {"n": n, "before": round(sum(r["before"]["refused"] for r in nm if r["kind"] == k) / n, 3),
                                  "after": round(sum(r["after"]["refused"] for r in nm if r["kind"] == k) / n, 3),
                                  "ceiling": round(sum(not r["ceiling_ok"] for r in nm if r["kind"] == k) / n, 3)}
                              for k, n in sorted(kinds.items())}
        return out

    summary = {sp: {st: rates([r for r in rows if r["split"] == sp and r["setting"] == st])
                    for st in SETTINGS} for sp in ("dev", "report")}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if args.show:
        shown = [r for r in rows if r["split"] == args.show_split]
        random.Random(1).shuffle(shown)
        for r in shown[: args.show]:
            print(f"\n[{r['setting']}/{r['kind']}] {r['question']}  (gold: {r['answer']})\n  before: "
                  f"{'refused' if r['before']['refused'] else 'correct' if r['before']['correct'] else 'WRONG'}; "
                  f"after: {'refused' if r['after']['refused'] else 'correct' if r['after']['correct'] else 'WRONG'}"
                  f" ({r['after']['action']})\n  {r['after']['text'][:300]}")
    if args.rows:
        args.rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "ms_per_question": ms,
                                     "machine": machine_info(), "rows": rows}, args.out,
                     table=Table(measured_verify_nearmiss, "Offline answer and answer cache"))


if __name__ == "__main__":
    main()
