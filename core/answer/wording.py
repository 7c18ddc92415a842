"""What an offline refusal says to the user, in the question's language: English, German or Russian.

The offline answer quotes the corpus, so its answers are in the corpus's language; its refusals are the workbench's
own words, and a German or Russian question gets them in German or Russian ('Das steht nicht im Korpus. Der Korpus
nennt 1921, 1923, nicht 1925 (gefragt: Jahr). Nächster Fakt (nicht die Antwort): ...'). The trace keeps English
(core.answer.verify's reasons): it is read by whoever tunes the pipeline, beside the constraint names it shows.
Any other language reads the English words."""
from __future__ import annotations

from core.text import guess_language
from core.types import REFUSAL_LEADS as LEAD

NEAREST = {"en": "Nearest fact (not the answer)", "de": "Nächster Fakt (nicht die Antwort)",
           "ru": "Ближайший факт (не ответ)"}
# the constraint kinds of core.answer.verify, as the reason names what was asked
LABELS = {
    "en": {"entity": "name", "role": "role or title", "year": "year", "month": "month", "number": "number",
           "attribute": "attribute", "event": "event", "ordinal": "ordinal", "superlative": "superlative",
           "period": "period", "asks": "kind of answer"},
    "de": {"entity": "Name", "role": "Rolle oder Titel", "year": "Jahr", "month": "Monat", "number": "Zahl",
           "attribute": "Merkmal", "event": "Ereignis", "ordinal": "Ordnungszahl", "superlative": "Superlativ",
           "period": "Zeitraum", "asks": "Art der Antwort"},
    "ru": {"entity": "имя", "role": "должность или титул", "year": "год", "month": "месяц", "number": "число",
           "attribute": "характеристика", "event": "событие", "ordinal": "порядковый номер",
           "superlative": "превосходная степень", "period": "период", "asks": "вид ответа"},
}
# what an 'asks' constraint names (core.answer.verify.question_constraints: 'a year', 'a person', ...)
ASKED = {
    "de": {"a company": "ein Unternehmen", "a person": "eine Person", "a month": "einen Monat", "a year": "ein Jahr",
           "a date or year": "ein Datum oder Jahr", "a number": "eine Zahl"},
    "ru": {"a company": "компанию", "a person": "человека", "a month": "месяц", "a year": "год",
           "a date or year": "дату или год", "a number": "число"},
}
# (what the corpus gives instead, what the text never mentions, the asked value stated for something else, none
# stated, the attribute, the opposite event, no negation, the opposite direction, none states everything)
REASONS = {
    "en": {"instead": "the corpus gives {instead}, not {text} ({label} asked)",
           "absent": "the retrieved text never mentions {text} ({label} asked)",
           "asks_elsewhere": "the question asks for {text}; the closest sentence states one, but of something else",
           "asks_none": "the question asks for {text}; the closest sentence states none",
           "attribute_instead": "the question asks for the {text}; the closest sentence states the {instead} instead",
           "attribute_none": "the question asks for the {text}; the closest sentence states no {text}",
           "event": "the question asks about '{text}…'; the closest sentence states the opposite event ('{instead}…')",
           "negation": "the question asks what does not hold; the closest sentence states no negation or exclusion",
           "direction": "the question asks about a change {text}; the closest sentence states the opposite "
                        "({instead})",
           "all": "no quoted sentence states everything the question pins down",
           "far": "No sentence of the retrieved passages is close to the question (similarity {best}, below {floor})",
           "low": "Support for an answer is {best}, below the {cut} an answer needs",
           "unseen": "no retrieved passage mentions {words}", "closest": "closest sentence"},
    "de": {"instead": "der Korpus nennt {instead}, nicht {text} (gefragt: {label})",
           "absent": "der gefundene Text erwähnt {text} nirgends (gefragt: {label})",
           "asks_elsewhere": "die Frage fragt nach {text}; der nächste Satz nennt eines, aber zu etwas anderem",
           "asks_none": "die Frage fragt nach {text}; der nächste Satz nennt keines",
           "attribute_instead": "die Frage fragt nach: {text}; der nächste Satz nennt stattdessen: {instead}",
           "attribute_none": "die Frage fragt nach: {text}; der nächste Satz nennt es nicht",
           "event": "die Frage fragt nach '{text}…'; der nächste Satz nennt das Gegenteil ('{instead}…')",
           "negation": "die Frage fragt, was nicht zutrifft; der nächste Satz nennt keine Verneinung oder Ausnahme",
           "direction": "die Frage fragt nach einer Änderung ({text}); der nächste Satz nennt das Gegenteil "
                        "({instead})",
           "all": "kein zitierter Satz nennt alles, was die Frage festlegt",
           "far": "Kein Satz der gefundenen Abschnitte liegt nahe an der Frage (Ähnlichkeit {best}, unter {floor})",
           "low": "Die Belege stützen eine Antwort zu {best}, unter den {cut}, die eine Antwort braucht",
           "unseen": "kein gefundener Abschnitt erwähnt {words}", "closest": "nächster Satz"},
    "ru": {"instead": "в корпусе указано {instead}, а не {text} (спрошено: {label})",
           "absent": "в найденном тексте нигде нет {text} (спрошено: {label})",
           "asks_elsewhere": "вопрос спрашивает {text}; ближайшее предложение называет его, но для другого",
           "asks_none": "вопрос спрашивает {text}; ближайшее предложение его не называет",
           "attribute_instead": "вопрос спрашивает: {text}; ближайшее предложение называет вместо этого: {instead}",
           "attribute_none": "вопрос спрашивает: {text}; ближайшее предложение этого не называет",
           "event": "вопрос спрашивает о '{text}…'; ближайшее предложение называет противоположное ('{instead}…')",
           "negation": "вопрос спрашивает, что не выполняется; ближайшее предложение не называет ни отрицания, ни "
                       "исключения",
           "direction": "вопрос спрашивает об изменении ({text}); ближайшее предложение называет противоположное "
                        "({instead})",
           "all": "ни одно процитированное предложение не называет всего, что задаёт вопрос",
           "far": "Ни одно предложение найденных фрагментов не близко к вопросу (сходство {best}, ниже {floor})",
           "low": "Опора для ответа {best}, ниже нужных для ответа {cut}",
           "unseen": "ни один найденный фрагмент не упоминает {words}", "closest": "ближайшее предложение"},
}
# how the question's own words are quoted inside a refusal (a role: 'erwähnt „Bürgermeister“ nirgends')
QUOTES = {"en": "'{}'", "de": "„{}“", "ru": "«{}»"}
# the German and Russian words of an asked direction ('up', 'down')
DIRECTION = {"de": {"up": "nach oben", "down": "nach unten"}, "ru": {"up": "вверх", "down": "вниз"}}


def language_of(question: str) -> str:
    """'en', 'de' or 'ru': the language a refusal to this question is worded in (English for any other)."""
    lang = guess_language(question)
    return lang if lang in LEAD else "en"


def lead(refusal: str, lang: str) -> str:
    """The refusal's opening words in `lang` when `refusal` is the workbench's own (LEAD's English); a caller's own
    words stay as they are."""
    return LEAD.get(lang, refusal) if refusal == LEAD["en"] else refusal


def reason(key: str, lang: str, **values: str) -> str:
    """One of REASONS' sentences in `lang` (English for a language it lacks), its blanks filled."""
    return REASONS.get(lang, REASONS["en"])[key].format(**values)


def after_lead(text: str) -> str:
    """A refusal's words after its opening ones (LEAD, in any language); the text itself when it has none."""
    return next((text[len(s):].strip() for s in LEAD.values() if text.startswith(s)), text)
