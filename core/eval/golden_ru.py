"""Russian question forms from a subject–verb sentence: who or what did it (Кто/Что + the predicate), what the
subject did (Что + verb + subject), when (Когда), and what a thing is called (Как называется).

Russian word order is free, so a question puts its word in front and keeps the rest of the clause; the verb is put
in the form the question word needs (Кто takes the masculine past, Что the neuter: 'захватила' -> 'Кто захватил',
'повысил' -> 'Что повысило'). Only the past tense and the third person singular present are rewritten; any other
verb form gives no question rather than a wrong one. Nothing here knows any corpus.
"""
from __future__ import annotations

import re

from core.eval.golden_forms import Draft

__all__ = ["russian_svo_drafts", "strip_ru_lead"]

_LEAD = re.compile(r"^(?:например|однако|кроме того|таким образом|при этом|в то же время|поначалу|также|тем не менее|"
                   r"в частности|в основном|в итоге|в результате|впоследствии|позднее|позже|сегодня|"
                   r"исторически|в целом|наконец|затем|потом|ещё|еще|к примеру|по сути),?\s+", re.I)
_PAST = re.compile(r"^(?P<stem>[а-яё]{2,}[аяиеыуо])(?P<end>л|ла|ло|ли)(?P<refl>ся|сь)?$")
_PRES = re.compile(r"^[а-яё]{3,}(?:ет|ит|ёт|ют|ят)(?:ся)?$")
_NOT_VERB = frozenset("стол пол угол сол посол генерал материал канал сигнал идеал интервал капитал период "
                      "совет ответ предмет объект проект бюджет кабинет билет портрет этот тот весь свет цвет "
                      "завет запрет комитет факультет университет парламент президент элемент момент аргумент "
                      "документ процент эксперимент инструмент".split())
_PREP = frozenset("в во на по с со к ко из от до для при о об у за над под про без через между перед после около "
                  "вокруг против среди вдоль благодаря согласно вместо кроме вне внутри сквозь ради из-за".split())
_NOT_START = frozenset("он она оно они это этот эта эти тот та те все всё его её их который которая которые что "
                       "как когда где если хотя и а но или же ли бы не ни так".split())


def strip_ru_lead(s: str) -> str:
    """A sentence without its opening connective ('Например, ', 'Кроме того, ')."""
    m = _LEAD.match(s)
    if not m:
        return s
    rest = s[m.end():]
    return rest[:1].upper() + rest[1:]


_MODAL = frozenset("может могут мог могла могло могли должен должна должно должны можно нельзя следует стал стала "
                   "стало стали начал начала начали является являются был была было были будет".split())
_SAYING = frozenset("считал считала считали считает полагал полагала полагает утверждал утверждала утверждает заявил "
                    "заявила отметил отметила отмечает сказал сказала говорит писал писала пишет".split())
_ADVERB_SUBJ = frozenset("и а но или не также тоже всегда обычно уже ещё еще лишь только довольно очень часто "
                         "именно почти впервые вновь снова затем".split())


def _verb_at(ws: list[str]) -> int | None:
    for i, w in enumerate(ws[:6]):
        lw = w.lower()
        m = _PAST.match(lw)
        if m and m.group("end") == "л" and m.group("stem")[-1] in "ео":
            continue  # 'чисел', 'узел': a genitive plural or a noun far more often than a verb
        if i and lw not in _NOT_VERB and (m or _PRES.match(lw)) and not w[:1].isupper():
            return i
    return None


def _is_name(w: str, names: frozenset[str]) -> bool:
    """A word the passage writes capitalised mid-sentence, in any case form ('Аристотель' / 'Аристотеля')."""
    k = max(4, len(w) - 2)
    return w[:1].isupper() and any(n[:k] == w[:k] for n in names)


def _as(verb: str, who: bool) -> str:
    """The verb agreeing with Кто (masculine singular) or Что (neuter singular); the present stays."""
    m = _PAST.match(verb)
    if not m:  # the present: a plural agrees with Кто/Что in the singular ('имеют' -> 'имеет', 'стоят' -> 'стоит')
        return re.sub(r"ют$", "ет", re.sub(r"ят$", "ит", verb))
    refl = m.group("refl") or ""
    if who:
        return m.group("stem") + "л" + ("ся" if refl else "")
    return m.group("stem") + "ло" + ("сь" if refl else "")


def _np(ws: list[str], limit: int) -> list[str]:
    """Words of a phrase up to a comma, a conjunction or a preposition after its head (at most `limit`)."""
    out: list[str] = []
    for w in ws:
        bare = w.strip(",;:.()«»\"")
        if out and len(out) >= 2 and out[-2].lower() == "между" and bare.lower() == "и":
            out.append(bare)  # 'между Бингеном и Бонном': the pair is one phrase
            continue
        if not bare or (out and (bare.lower() in _PREP or bare.lower() in ("и", "а", "но", "или", "что", "чтобы", "как",
                                                                          "который", "которая", "которые"))):
            break
        out.append(bare)
        if w.endswith((",", ";", ":", ")")) or len(out) >= limit:
            break
    return out


def russian_svo_drafts(sentence: str, names: frozenset[str] = frozenset()) -> list[Draft]:
    """Кто/Что + predicate (the subject the answer), Что + verb + subject (the object the answer), Когда (a year in
    the first clause) and Как называется, from one sentence whose subject opens it."""
    out: list[Draft] = []
    s = strip_ru_lead(re.sub(r"\s*\([^()]*\)", "", " ".join(sentence.split())).rstrip(".!? "))
    fy = re.match(r"^(?:в|к|с|до|после)\s+(?:\d{1,2}\s+[а-яё]+\s+)?(\d{3,4})\s*(?:году|года|г\.)?,?\s+(?=[А-ЯЁ])", s)
    fp = re.match(r"^(?:в|во|на|по|при|после|до|с|со|для|среди|согласно|благодаря|в ходе|в течение)\s+[^,]{2,40},\s+"
                  r"(?=[А-ЯЁа-яё])", s, re.I)
    year_front = ""
    if fy:  # 'В 1830 году Франция захватила Алжир': the subject first, the year kept for Когда
        year_front, s = fy.group(1), s[fy.end():]
    elif fp:
        s = s[fp.end():]
        s = s[:1].upper() + s[1:]
    first = re.split(r";|:|,\s+(?:однако|но|а|который|которая|которое|которые|где|когда|что|чтобы|хотя|поскольку|"
                     r"так как)\b|\s[—–]\s", s)[0]
    ws = first.split()
    at = _verb_at(ws)
    if at is None or ws[0].lower() in _PREP or ws[0].lower() in _NOT_START or any(
            w.endswith(",") for w in ws[:at]) or not 1 <= at <= 5:
        return out
    subj_ws = ws[:at]
    verb = ws[at].lower()
    pred0 = _np(ws[at + 1:], 6)
    if verb in ("является", "являлся", "являлась", "являлось") and pred0 and not any(
            w.lower() in _ADVERB_SUBJ for w in subj_ws):  # 'X является столицей Y' -> Чем является X?
        subj_q0 = subj_ws[0][:1].lower() + " ".join(subj_ws)[1:] if not _is_name(subj_ws[0], names) and \
            sum(w[:1].isupper() for w in subj_ws) < 2 else " ".join(subj_ws)
        out.append(Draft(f"Чем {verb} {{S}}?", subj_q0, " ".join(pred0), "definition", "is", sentence=sentence))
        return out
    if verb in _MODAL or any(w.lower() in _ADVERB_SUBJ or w.lower() in _PREP or
                             re.search(r"(?:ых|их|ого|его|ому|ему|ую|юю|ыми|ими)$", w.lower()) or
                             (w[1:].islower() and w.lower().endswith("о") and len(w) > 3) for w in subj_ws):
        return out  # 'может', 'Группировка также', 'Глобально уменьшающийся': no plain subject and verb
    subj = " ".join(subj_ws)
    named = sum(w[:1].isupper() for w in subj_ws) >= 2 or any(_is_name(w, names) for w in subj_ws)
    # a common noun opening the sentence loses its capital ('Тензор напряжений' -> 'тензор напряжений'); one word
    # alone may be a name the passage declines elsewhere ('Тураби'), so it keeps it
    subj_q = subj if named or len(subj_ws) == 1 else subj[:1].lower() + subj[1:]
    pred = _np(ws[at + 1:], 6)
    if re.search(r"\d", " ".join(pred)) and not re.search(r"\d{4}", " ".join(pred)):
        pred = []
    called = re.match(r"^(?:называ(?:ется|ются|лся|лась|лось|лись)|известн(?:ы|а|о|ый)\s+как)$", verb)
    if called and pred:
        out.append(Draft("Как называется {S}?" if not verb.endswith(("лся", "лась", "лось", "лись")) else
                         "Как назывался {S}?", subj_q, " ".join(pred), "what", "name", sentence=sentence))
        return out
    if pred and len(pred) >= (2 if pred[0].lower() in _PREP else 1) and not verb.endswith(("ся", "сь")):
        who = named
        q = f"{'Кто' if who else 'Что'} {_as(verb, who)} {' '.join(pred)}?"
        out.append(Draft(q.replace("{", "{{").replace("}", "}}"), subj, subj, "who" if who else "what",
                         f"agent:{verb}", sentence=sentence))
        obj = _np(ws[at + 1:], 5)
        if len(obj) >= 2 and verb not in _SAYING and obj[0][:1].islower() and not re.search(r"\d", " ".join(obj)) and \
                re.search(r"(?:ую|юю|ое|ее|ые|ие|ый|ий|ой)$", obj[0]) and obj[0] != "собой":
            out.append(Draft(f"Что {verb} {{S}}?", subj_q, " ".join(obj), "what", f"verb:{verb}", sentence=sentence))
    year = re.search(r"\b(?:в|с|до)\s+(\d{3,4})\s*(?:году|года|г\.)", first)
    if (year or year_front) and not any(d.form == "when" for d in out):
        rest = (first[: year.start()] + " " + first[year.end():]).split() if year else ws
        if _verb_at(rest) == at:
            tail = _np(rest[at + 1:], 5)
            core = " ".join([subj_q, verb, *tail])
            out.append(Draft("Когда {S}?", core, year.group(1) if year else year_front, "when", "date",
                             sentence=sentence))
    return out
