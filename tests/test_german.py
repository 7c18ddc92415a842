"""German questions: cross-lingual by language (a German question over English passages takes the multilingual
reader's path), German nouns are no names in the constraint check, and German months, ordinals, superlatives and roles
are read in their English forms (core/answer/german.py, core/answer/verify.py, core/answer/crosslingual.py)."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from core.answer import german
from core.answer.crosslingual import (
    ANSWER_FLOOR,
    LATIN_CROSS_FLOOR,
    SAME_LANGUAGE_FLOOR,
    NameFinder,
    answer_floor,
    is_cross,
    language,
    reads_across,
)
from core.answer.stage import REFUSAL, answer_question
from core.answer.verify import ChunkText, Evidence, check, question_constraints, verify_quotes
from core.config import AnswerConfig
from core.types import Candidate

# a toy bilingual reader: words are concepts; a German word and its English translation are the same concept
_CONCEPTS = {"hauptstadt": "capital", "capital": "capital", "frankreichs": "france", "frankreich": "france",
             "france": "france", "universität": "university", "university": "university", "gegründet": "found",
             "founded": "found", "harvard": "harvard"}


class _NoLLM:  # the extractive mode never calls it
    available = False
    reason = "offline"


class ToyReader:
    def _concepts(self, text: str) -> set[str]:
        return {_CONCEPTS.get(w.lower(), w.lower()) for w in re.findall(r"[^\W\d_]+", text)}

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        q = self._concepts(question)
        return np.array([0.7 + 0.2 * len(q & self._concepts(t)) / max(1, len(q)) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


PASSAGE = Candidate("c1", "d1", "Paris is the capital of France. Harvard University was founded in 1636 by the "
                    "colony. The river is long.", 1.0, 1)


def _entities(q: str) -> list[str]:
    return [c.text for c in question_constraints(q) if c.kind == "entity" and not c.soft]


def test_language_not_only_script_decides_cross_lingual() -> None:
    assert language("Wann wurde die Universität gegründet?") == "de" and language(PASSAGE.text) == "en"
    assert is_cross("Wann wurde die Universität gegründet?", [PASSAGE.text])
    assert not is_cross("When was the university founded?", [PASSAGE.text])  # English over English: unchanged
    assert not is_cross("Wann wurde sie gegründet?", ["Die Universität wurde 1636 gegründet."])
    assert not is_cross("What is 5?", ["1234 5678"])  # text of no told language reads as any Latin text
    # the lexical support model reads English and Russian: a German question over German passages is read by the
    # multilingual reader too, an English one never
    assert reads_across("Wann wurde sie gegründet?", ["Die Universität wurde 1636 gegründet."])
    assert not reads_across("When was it founded?", [PASSAGE.text])


def test_a_german_question_over_english_text_is_answered_by_the_cross_lingual_path() -> None:
    cfg = AnswerConfig(mode="extractive")
    llm: Any = _NoLLM()
    res = answer_question("Was ist die Hauptstadt Frankreichs?", [PASSAGE], cfg, llm, cross=ToyReader())
    assert not res.answer.refused and res.answer.text.startswith("Paris is the capital of France. [c1]")
    assert any(n.startswith("cross-lingual answer") for n in res.notes)
    same = answer_question("What is the capital of France?", [PASSAGE], cfg, llm, cross=ToyReader())
    assert not any(n.startswith("cross-lingual answer") for n in same.notes)
    # a German question over a German passage: the reader's path too, with the same-language floor
    de = Candidate("c2", "d2", "Paris ist die Hauptstadt von Frankreich. Der Fluss ist lang.", 1.0, 1)
    own = answer_question("Was ist die Hauptstadt Frankreichs?", [de], cfg, llm, cross=ToyReader())
    # German over English: two languages of one script sit closer than two scripts, so their floor is their own
    assert own.threshold == SAME_LANGUAGE_FLOOR and res.threshold == LATIN_CROSS_FLOOR != ANSWER_FLOOR
    assert answer_floor("Какая столица Франции?", ["Paris is the capital of France."]) == ANSWER_FLOOR
    assert any("does not read the question's language" in n for n in own.notes)
    # ... and it is not named a cross-lingual answer (the answer header shows where its cut came from)
    assert any(n.startswith("multilingual answer") for n in own.notes)
    assert not any(n.startswith("cross-lingual answer") for n in own.notes)
    assert own.threshold_from.startswith("multilingual reader's floor") and res.threshold_from.startswith("cross")


def test_german_nouns_are_no_names_and_names_stay_names() -> None:
    assert _entities("Wann wurde die Universität gegründet?") == []
    assert _entities("Welche chemischen Elemente bilden die größte Gruppe?") == []
    assert _entities("Wie unterstützten die Gesellschaften in Europa die Forschung?") == ["Europa"]
    assert _entities("Wann wurde die Universität von Zorvath gegründet?") == ["Zorvath"]
    assert _entities("Wann wurde Harvard gegründet?") == ["Harvard"]
    assert _entities("Was sagte Friedrich Ratzel über Saint-Pierre?") == ["Friedrich Ratzel", "Saint-Pierre"]
    assert german.common_noun("die Entwicklung".split(), 1) and not german.common_noun("von Chicago".split(), 1)
    assert _entities("Welcher Prozess setzte bei gefrorenem Untergrund ein?") == []  # an adjective's shape before it
    assert _entities("Wie werden Zahlen größer als 1 bezeichnet?") == []  # a bare common noun
    # German evidence states a name inside a compound or with another case ending
    v = check("Wo liegt das Delta in den Niederlanden?", Evidence("Es liegt in Nordwesteuropa und den Niederlande.",
                                                                 "Es liegt in Nordwesteuropa und den Niederlande."))
    assert all(x.verdict == "met" for x in v.verdicts if x.constraint.kind == "entity" and not x.constraint.soft)
    # 'das Delta' may be a name or a noun: without the encoder it is left unchecked, never refused
    assert [(x.constraint.text, x.verdict) for x in v.verdicts if x.constraint.soft] == [("Delta", "unchecked")]
    # an English question keeps reading its capitalised words as names
    assert _entities("When did the University of Zorvath open?") == ["University", "Zorvath"]


def test_german_months_ordinals_superlatives_and_roles_are_read_in_their_english_forms() -> None:
    kinds = {(c.kind, c.text) for c in question_constraints(
        "Wer war im März 1850 der erste Präsident und der jüngste Bischof?")}
    assert {("month", "March"), ("year", "1850"), ("ordinal", "first"), ("role", "president"), ("role", "bishop"),
            ("superlative", "youngest"), ("asks", "a person")} <= kinds
    assert german.month("Mai") == 5 and german.ordinal("zweiten") == 2 and german.ordinal("erst") is None
    assert german.superlative("größte") == "largest" and german.superlative("Meister") is None
    # asked for the youngest, an English sentence about the oldest is the neighbouring fact
    v = check("Wer war der jüngste Bischof?", Evidence("The oldest bishop was Henry.", "The oldest bishop was Henry."))
    sup = next(x for x in v.verdicts if x.constraint.kind == "superlative")
    assert sup.verdict == "unmet" and sup.instead == ("oldest",)
    assert not any(c.kind == "attribute" for c in question_constraints("Wann wurde die Universität gegründet?"))


def test_a_german_question_is_answered_over_english_evidence_and_an_invented_name_is_refused() -> None:
    chunks = {"c1": ChunkText(PASSAGE.text, "", "Universities")}
    quoted = "Harvard University was founded in 1636 by the colony. [c1]"
    finder = NameFinder(ToyReader())
    ok = verify_quotes("Wann wurde die Universität gegründet?", quoted, ["c1"], chunks, refusal=REFUSAL,
                       names=finder)
    assert not ok.refused  # 'Universität' is a noun, not a name English never states
    named = verify_quotes("Wann wurde die Universität Harvard gegründet?", quoted, ["c1"], chunks, refusal=REFUSAL,
                          names=finder)
    assert not named.refused and named.info.action == "passed"
    bad = verify_quotes("Wann wurde die Universität von Zorvath gegründet?", quoted, ["c1"], chunks,
                        refusal=REFUSAL, names=finder)
    # refused in the question's language (core.answer.wording)
    assert bad.refused and "Zorvath" in bad.text and "Nächster Fakt (nicht die Antwort)" in bad.text
    year = verify_quotes("Welche Universität wurde 1650 gegründet?", quoted, ["c1"], chunks, refusal=REFUSAL,
                         names=finder)
    assert year.refused and "1636" in year.text
    country = verify_quotes("Was ist die Hauptstadt Frankreichs?", "Paris is the capital of France. [c1]", ["c1"],
                            chunks, refusal=REFUSAL, names=finder)
    assert not country.refused  # a name German writes otherwise, found by its English form


def test_german_ordinals_numbers_and_inflected_words_are_read() -> None:
    from core.answer.verify import numbers
    from core.text import sentence_spans
    t = "Am 1. März 1979 fand ein Referendum statt. Im 20. Jahrhundert wuchs die Stadt. Sie hat 1.000 Einwohner."
    assert [t[s:e] for s, e in sentence_spans(t)][:2] == ["Am 1. März 1979 fand ein Referendum statt.",
                                                         "Im 20. Jahrhundert wuchs die Stadt."]
    en = "He was 1. Then he left."
    assert [en[s:e] for s, e in sentence_spans(en)] == ["He was 1.", "Then he left."]
    assert numbers("Sie hat 22.338.618 Stellen, 1.000 Mann, 2,5 Meter und vier Brücken.") >= \
        {"22338618", "1000", "2.5", "4"}
    assert "1000" not in numbers("Version 1.000 of the tool was released.")  # one group: a decimal in English
    de = "Brocards Vermutung besagt, dass es immer mindestens vier Primzahlen zwischen den Quadraten gibt."
    v = check("Welche Vermutung besagt, dass es mindestens 4 Primzahlen zwischen den Quadraten gibt?", Evidence(de, de))
    assert v.ok
    paare = "Polignacs Vermutung besagt, dass es unendlich viele Paare von Primzahlen gibt."
    v = check("Welche Vermutung besagt, dass es eine unendliche Anzahl von Paaren gibt?", Evidence(paare, paare))
    assert v.ok  # 'Paaren' and 'Paare': one word with another ending


class _NounReader:
    """Reads a word as stated when the evidence has a word of the same first three letters (a stand-in encoder)."""

    def noun_stated(self, word: str, text: str) -> bool:
        return any(w.lower()[:3] == word.lower()[:3] for w in re.findall(r"[^\W\d_]+", text))

    def __call__(self, name: str, question: str, sentence: str, text: str) -> bool:
        return False


def test_a_german_word_that_may_be_a_name_is_checked_softly() -> None:
    soft = [c.text for c in question_constraints("Wo beginnt das Delta in den Niederlanden?") if c.soft]
    assert soft == ["Delta"]
    de = "Das Rhein-Maas-Delta beginnt bei Millingen aan de Rijn in den Niederlanden."
    v = check("Wo beginnt das Flussmaul in den Niederlanden?", Evidence(de, de), names=_NounReader())
    assert [(x.constraint.text, x.verdict) for x in v.verdicts if x.constraint.soft] == [("Flussmaul", "unmet")]
    v = check("Wo beginnt das Delta in den Niederlanden?", Evidence(de, de), names=_NounReader())
    assert v.ok  # 'Delta' inside the compound 'Rhein-Maas-Delta'
    v = check("Wo beginnt das Rheinmaul in den Niederlanden?", Evidence(de, de), names=_NounReader())
    assert v.ok  # not written in the evidence, read by the encoder
    en = "The Rhine-Meuse Delta begins near Millingen aan de Rijn."
    v = check("Wo beginnt das Rheinmaul in den Niederlanden?", Evidence(en, en), names=_NounReader())
    assert all(x.verdict != "unmet" for x in v.verdicts if x.constraint.soft)  # never refused across languages
    e = "Die Bewegung, aus der die Evangelisch-methodistische Kirche hervorgehen sollte, begann 1738."
    assert check("Wann begann die Bewegung der EmK?", Evidence(e, e), names=_NounReader()).ok  # its initials


def test_a_word_where_a_noun_stands_but_no_german_word_is_a_name() -> None:
    # 'das Kelbrin', 'zu Brakkenfield': German puts articles and prepositions before names too ('der Iran'); a word
    # the German word list, its compounds, typos and inflections do not hold is checked as a name, in every language
    for q, name in (("Wo beginnt das Kelbrin in den Niederlanden?", "Kelbrin"),
                    ("Für wie viel Geld wurde Neymar zu Brakkenfield transferiert?", "Brakkenfield")):
        cs = question_constraints(q)
        assert [c.text for c in cs if c.kind == "entity" and c.text == name and not c.soft] == [name]
    en = "The Rhine-Meuse Delta begins near Millingen aan de Rijn."
    assert not check("Wo beginnt das Kelbrin in den Niederlanden?", Evidence(en, en), names=_NounReader()).ok


def test_german_function_words_tell_no_sibling_name() -> None:
    # 'in den Niederlanden' asked; the chunk names them, the sentence names the Rhine beside 'den': no sibling
    chunk = ("Das Delta liegt in den Niederlanden. Da der Rhein den größten Teil des Wassers beiträgt, wird häufig "
             "die kürzere Bezeichnung Rheindelta verwendet.")
    sent = "Da der Rhein den größten Teil des Wassers beiträgt, wird häufig die kürzere Bezeichnung Rheindelta verwendet."
    v = check("Wie lautet der Spitzname für das Delta in den Niederlanden?", Evidence(sent, chunk))
    assert not any(x.verdict == "unmet" for x in v.verdicts if not x.constraint.soft)


def test_set_phrase_nouns_are_no_names_and_peoples_and_faiths_are_read_in_their_english_forms() -> None:
    # 'in Bezug auf' (with respect to), 'mit Hilfe': a bare noun after a preposition in a set phrase
    assert _entities("Die Ausfüllung von Q in Bezug auf was ergibt das Feld?") == ["Q"]
    assert _entities("Wie wurde der Fluss mit Hilfe der Römer überquert?") == ["Römer"]
    assert german.english_names("Gottes") == ("god",) and german.english_names("Spaniern")[0] == "spanish"
    assert german.english_names("Christoph") == ()  # a first name, not 'Christen'
    chunks = {"c1": ChunkText("They are aware that no way is always righteous before God.", "", "Church")}
    v = verify_quotes("Welcher Weg ist nicht immer rechtschaffen vor Gott?",
                      "They are aware that no way is always righteous before God. [c1]", ["c1"], chunks,
                      refusal=REFUSAL, names=NameFinder(ToyReader()))
    assert not v.refused  # 'Gott' is English evidence's 'God'


def test_an_asked_noun_a_people_a_deputy_and_a_name_only_another_passage_states() -> None:
    # the noun an interrogative determiner asks for is the kind of the answer, no name ('Which religion')
    asked = [c.text for c in question_constraints("Welche Religion verbreiteten die Portugiesen in Asien?")]
    assert "Religion" not in asked and "Portugiesen" in asked
    assert "Gesetz" not in [c.text for c in question_constraints("Was für ein Gesetz regelt die Wahl in Bayern?")]
    # a people, its country and its adjective are one name in German evidence
    de = "In Kanada wird heute vielerorts die französische Sprache gesprochen, die mit den Siedlern in das Land kam."
    assert check("Welche Sprache brachten die Franzosen nach Kanada?", Evidence(de, de)).ok
    assert not check("Welche Sprache brachten die Italiener nach Kanada?", Evidence(de, de)).ok
    # 'stellvertretend' before a role is 'deputy'; a deputy asked is met by a deputy read, not by another role
    s = "Im Jahr 1990 wurde Anna Berger seine Stellvertreterin."
    assert check("Wer wurde 1990 zur stellvertretenden Direktorin ernannt?", Evidence(s, s)).ok
    s2 = "Im Jahr 1990 wurde Anna Berger Präsidentin."
    assert not check("Wer wurde 1990 zur stellvertretenden Direktorin ernannt?", Evidence(s2, s2)).ok
    en = "In 1990 Anna Berger became his second in command."
    assert check("Who became the deputy commander in 1990?", Evidence(en, en)).ok
    # a German question: a name the lead sentence's passage never states is not supplied by another passage's quote
    chunks = {"c1": ChunkText("Die Brücke wurde im Jahr 1850 gebaut. Sie ist aus Stein."),
              "c2": ChunkText("Kelbrin lebte lange in Berlin.")}
    q = "Wann wurde die Brücke von Kelbrin gebaut?"
    v = verify_quotes(q, "Die Brücke wurde im Jahr 1850 gebaut. [c1] Kelbrin lebte lange in Berlin. [c2]", ["c1", "c2"],
                      chunks, refusal=REFUSAL)
    assert v.refused
    chunks["c1"] = ChunkText("Die Brücke wurde im Jahr 1850 gebaut. Kelbrin lebte lange in Berlin.")
    v = verify_quotes(q, "Die Brücke wurde im Jahr 1850 gebaut. [c1] Kelbrin lebte lange in Berlin. [c1]", ["c1"],
                      chunks, refusal=REFUSAL)
    assert not v.refused


class _GainReader:
    """A stand-in encoder: a question sits 0.05 further from any sentence for each word of it the sentence lacks and
    English does not translate (a name no evidence states), and no further for a German noun the sentence translates."""

    _TRANSLATED = {"delta": "delta", "spitzname": "name"}

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        words = [w.lower() for w in re.findall(r"[^\W\d_]+", question)]
        out = []
        for t in texts:
            low = t.lower()
            missing = sum(1 for w in words if w[:1] and w in ("kelbrin", "zorvath") and w not in low)
            out.append(0.85 - 0.05 * missing + 0.01 * sum(1 for w in words if self._TRANSLATED.get(w, "#") in low))
        return np.array(out)

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


def test_a_german_word_that_may_be_a_name_is_checked_across_languages_by_the_encoders_gain() -> None:
    en = "The Rhine-Meuse Delta begins near Millingen aan de Rijn in the Netherlands."
    chunks = {"c1": ChunkText(en, "", "Rhine")}
    finder = NameFinder(_GainReader())
    # 'das Kelbrin' may be a German noun or a name: English evidence neither writes it nor reads closer with it
    bad = verify_quotes("Wo beginnt das Kelbrin in den Niederlanden?", f"{en} [c1]", ["c1"], chunks, refusal=REFUSAL,
                        names=finder)
    assert bad.refused and "Kelbrin" in bad.text
    # a German noun the evidence translates ('das Delta') is met
    ok = verify_quotes("Wo beginnt das Delta in den Niederlanden?", f"{en} [c1]", ["c1"], chunks, refusal=REFUSAL,
                       names=finder)
    assert not ok.refused
    # an acronym of German words ('EmK') is written otherwise in English: left unchecked, never refused
    v = check("Wann begann die Bewegung der EmK?", Evidence(en, en), names=finder)
    assert all(x.verdict != "unmet" for x in v.verdicts if x.constraint.soft)
    # the cut off: left unchecked as before
    off = NameFinder(_GainReader(), soft_gain=float("inf"))
    assert not verify_quotes("Wo beginnt das Flussmaul in den Niederlanden?", f"{en} [c1]", ["c1"], chunks,
                             refusal=REFUSAL, names=off).refused


class _NounStub:
    """A stand-in name finder for German evidence: a word is read among the evidence's words only as written."""

    def __call__(self, name: str, question: str, sentence: str, text: str) -> bool:
        return name.lower() in text.lower()

    def noun_stated(self, word: str, text: str) -> bool:
        return word.lower() in text.lower()


def test_a_word_read_as_a_noun_by_its_letters_alone_is_not_supplied_by_another_passage() -> None:
    # 'von Einstein': no article before it, a noun only by its letters ('ei'); the lead sentence's passage lacks it,
    # another article's sentence states it: that quote is about someone else
    assert german.placed_noun(["über", "das", "Delta"], 2) and not german.placed_noun(["von", "Einstein"], 1)
    lead = "Die Brücke ist aus Stein."
    for q, other, refused in (("Aus welchem Material ist die Brücke von Einstein?", "Einstein lebte in Berlin.", True),
                              # a word read as a noun by its place ('über das Delta') is still met there, as before
                              ("Aus welchem Material ist die Brücke über das Delta?", "Das Delta liegt im Norden.",
                               False)):
        chunks = {"c1": ChunkText(lead), "c2": ChunkText(other)}
        v = verify_quotes(q, f"{lead} [c1] {other} [c2]", ["c1", "c2"], chunks, refusal=REFUSAL, names=_NounStub())
        assert v.refused is refused, q


def test_a_first_name_before_a_surname_particle_is_a_name() -> None:
    # 'Brakkenfield' has the letters of a German noun ('ie'), but a surname particle follows it ('al-Nimeiry',
    # 'van Dijk'): it is a first name, checked as a name, not softly as a word that may be a noun
    words = ["Welche", "Organisation", "hat", "Brakkenfield", "al-Nimeiry", "Mitglieder", "eingeladen"]
    assert not german.common_noun(words, 3) and not german.strong_noun(words, 3)
    assert not german.common_noun(["Reise", "von", "Weiland", "van", "Dijk"], 2)
    assert german.common_noun(["die", "Mitglieder", "der", "Partei"], 1)  # a German article is no particle
    cons = question_constraints("Welche Organisation hat Brakkenfield al-Nimeiry Mitglieder eingeladen?")
    assert [(c.text, c.soft) for c in cons if c.kind == "entity"][0] == ("Brakkenfield", False)


def test_a_lower_case_word_of_a_german_question_that_is_no_german_word_is_a_name() -> None:
    # German capitalises every noun: a lower-case word the German word list does not hold is a package or a program
    for w in ("cloudpickle", "pandas", "jsonschema", "h11", "macOS", "python-dateutil"):
        assert german.foreign_word(w), w
    # German words, compounds of them, a typo of one and an adjective's shape are German
    for w in ("ist", "bedeutet", "unterstützt", "aufeinanderfolgender", "selbstkonsistenten", "werdem", "p-adischen",
              "eingezäunten", "verargumentierte"):  # (inflected forms the list lacks: a participle, a prefixed past)
        assert not german.foreign_word(w), w
    names = lambda q: [(c.kind, c.text) for c in question_constraints(q)]  # noqa: E731
    assert ("entity", "pydantic") in names("Welche Mindestversion von pydantic benötigt jsonschema?")
    assert ("entity", "jsonschema") in names("Welche Mindestversion von pydantic benötigt jsonschema?")
    # a hyphenated compound's name is the part before its German head noun, as English writes 'the pandas version'
    got = names("Welches ist die älteste pandas-Version, die joblib unterstützt?")
    assert ("entity", "pandas") in got and ("entity", "joblib") in got
    got = names("Welche Python-Version benötigt cloudpickle?")
    assert ("entity", "Python") in got and ("entity", "Python-Version") not in got
    # a compound of German words only is no name with its head: 'Raum-Zeit-Weg' stays whole
    assert ("entity", "Raum-Zeit") not in names("Welcher Raum-Zeit-Weg wird als gekrümmte Linie gesehen?")
    assert not [t for k, t in names("Was gibt wcwidth() für Steuerzeichen zurück?") if t == "gibt"]


def test_a_german_ordinal_in_digits_is_an_ordinal_and_a_day_before_a_month_is_not() -> None:
    got = [(c.kind, c.text) for c in question_constraints("Wie hoch ist das 99. Perzentil der Laufzeit von chardet?")]
    assert ("ordinal", "99th") in got and not [c for c in got if c[0] == "number"]
    ck = check("Wie hoch ist das 99. Perzentil der Laufzeit von chardet?",
               Evidence("chardet: 99th percentile 2.7 ms; 95th percentile 1.0 ms", "", "", "charset-normalizer"))
    assert not [v for v in ck.unmet if v.constraint.kind in ("ordinal", "number")]
    got = [(c.kind, c.text) for c in question_constraints("Wann erklärte England am 18. Mai 1756 den Krieg?")]
    assert ("number", "18") in got and not [c for c in got if c[0] == "ordinal"]


def test_the_cross_lingual_floor_follows_most_passages_not_one_german_line() -> None:
    q = "Wer ist der Autor von Narwhals?"
    en = ["Author: Marco Gorelli", "Narwhals is a lightweight compatibility layer between dataframe libraries."]
    de = "Die deutsche Übersetzung der Anleitung ist hier zu finden und wird von der Gemeinschaft gepflegt."
    assert answer_floor(q, en + [de]) == LATIN_CROSS_FLOOR
    assert answer_floor(q, [de, de, en[0]]) == SAME_LANGUAGE_FLOOR


def test_a_name_german_writes_as_english_is_not_met_by_the_encoder_where_the_evidence_states_it_elsewhere() -> None:
    # the chunk names pdfly in another line; the Author field is pypdf's own: the encoder's reading does not undo that
    chunk = "Name: pypdf\nAuthor-email: Mathieu Fenniak <biziqe@mathieu.fenniak.net>\npdfly is a CLI using pypdf."
    ev = Evidence("Author-email: Mathieu Fenniak <biziqe@mathieu.fenniak.net>", chunk, "", "pypdf")
    always = lambda *a: True  # noqa: E731
    ck = check("Wer ist der Autor von pdfly?", ev, names=always)
    assert [v.constraint.text for v in ck.unmet if v.constraint.kind == "entity"] == ["pdfly"]


def _roles(q: str) -> list[str]:
    return [c.text for c in question_constraints(q) if c.kind == "role"]


def test_a_title_before_a_name_is_the_name_and_a_feminine_title_its_own_role() -> None:
    # 'Königin' is a queen, not a king
    assert german.role("Königin") == "queen" and german.role("Königs") == "king" and german.role("Kaiserin") == "empress"
    # a title before the name asked pins nobody the name does not: the evidence need not repeat it
    assert _roles("Wann starb der Mann von Königin Victoria?") == []
    assert _roles("When did Queen Victoria's husband die?") == []
    assert _roles("Wann wurde Papst Franziskus gewählt?") == []
    e = "Albert verstarb am 14. Dezember 1861 in Anwesenheit Victorias."
    assert check("Wann starb der Mann von Queen Victoria?", Evidence(e, e)).ok
    # a role of a place or a body is asked: after an article in German, in lower case in English
    assert _roles("Wer war der Präsident Frankreichs 1990?") == ["president"]
    assert _roles("Who was the president of France in 1990?") == ["president"]
    assert _roles("Who was Queen of England in 1600?") == ["queen"]


def test_a_names_genitive_before_its_noun_is_the_name_alone() -> None:
    assert _entities("Wo wurde Queen Victorias Mann beerdigt?") == ["Victorias"]
    assert "Mars Express" in _entities("Wann startete Mars Express?")


def test_an_acronym_is_met_by_a_german_compound_of_its_initials_or_by_the_states_name() -> None:
    e = "Die französische Nationalmannschaft, die bei der Weltmeisterschaft 1998 den Titel gewann, hatte elf Spieler."
    assert check("Wie viele Spieler hatte Frankreich bei der WM 1998?", Evidence(e, e)).ok
    assert not check("Wie viele Spieler hatte Frankreich bei der EM 1998?", Evidence(e, e)).ok
    us = "Laut Artikel IV der US-Verfassung hat der Kongress die Möglichkeit, neue Bundesstaaten aufzunehmen."
    assert check("Wie kann die USA einen neuen Bundesstaat aufnehmen?", Evidence(us, us)).ok
    en = "Under Article IV of the United States Constitution, Congress may admit new states."
    assert check("How can the USA admit a new state?", Evidence(en, en)).ok
    assert not check("How can the UAE admit a new state?", Evidence(en, en)).ok


def test_a_place_without_an_article_is_a_name_and_a_compound_of_german_words_is_met_by_its_words() -> None:
    assert "Neuseeland" in _entities("Wie heißt die Methode des Regenwassersammelns in Neuseeland?")
    assert "Bundesland" not in _entities("Wie viele Einwohner hat das Bundesland?")
    e = "Die Beobachtung von Hautreaktionen bei Tuberkulin führte später zur Entwicklung eines Testverfahrens."
    chunk = e + " Koch beschrieb die Tuberkulose 1882."
    assert check("Was führte zur Entwicklung des ersten Tuberkulose-Testes?", Evidence(e, chunk)).ok
    assert not check("Was führte zur Entwicklung des ersten Tuberkulose-Impfstoffs?", Evidence(e, chunk)).ok


def test_no_sentence_ends_at_an_abbreviation_or_an_initial() -> None:
    from core.text import sentence_spans
    t = ("Insbesondere die Pneumothorax-Technik bzw. Pneumolyse fand Anwendung. Man erzeugt sie z. B. mit Dipolen. "
         "John F. Kennedy met Mr. Smith. Es war 1812 г. Новая фраза. Es endet hier. For every integer n. It holds. "
         "It is hypothesis H. Brocard's came later, from J. R. R. Tolkien.")
    assert [t[s:e] for s, e in sentence_spans(t)] == [
        "Insbesondere die Pneumothorax-Technik bzw. Pneumolyse fand Anwendung.", "Man erzeugt sie z. B. mit Dipolen.",
        "John F. Kennedy met Mr. Smith.", "Es war 1812 г.", "Новая фраза.", "Es endet hier.", "For every integer n.",
        "It holds.", "It is hypothesis H.", "Brocard's came later, from J. R. R. Tolkien."]


def test_the_most_common_is_no_answer_to_the_fewest_and_a_capitalised_first_word_is_read() -> None:
    s = "Häufigste Herkunftsländer waren das Vereinigte Königreich (60.000 Personen) sowie Australien."
    chunk = "Zypern hat viele Migranten. " + s
    v = check("Aus welchen Ländern kommen die wenigsten Migranten in Zypern?", Evidence(s, chunk))
    assert [(x.constraint.text, x.verdict) for x in v.verdicts if x.constraint.kind == "superlative"] == \
        [("least", "unmet")]
    assert check("Aus welchen Ländern kommen die meisten Migranten in Zypern?", Evidence(s, chunk)).ok


def test_a_refusal_is_worded_in_the_question_s_language_and_the_trace_keeps_english() -> None:
    from core.answer.wording import after_lead, language_of
    from core.types import is_refusal_text

    chunks = {"c1": ChunkText("Die Universität wurde 1636 gegründet. Sie liegt in Cambridge.", "", "Harvard")}
    quoted = "Die Universität wurde 1636 gegründet. [c1]"
    de = verify_quotes("Wann wurde die Universität 1650 gegründet?", quoted, ["c1"], chunks, refusal=REFUSAL)
    assert de.refused and de.text.startswith("Das steht nicht im Korpus. Der Korpus nennt 1636, nicht 1650 "
                                             "(gefragt: Jahr). Nächster Fakt (nicht die Antwort): ")
    assert de.info.reason == "the corpus gives 1636, not 1650 (year asked)"
    en = verify_quotes("When was the university founded in 1650?", "The university was founded in 1636. [c1]",
                       ["c1"], {"c1": ChunkText("The university was founded in 1636.", "", "Harvard")}, refusal=REFUSAL)
    assert en.refused and en.text.startswith("The corpus does not say. The corpus gives 1636, not 1650 (year asked). "
                                             "Nearest fact (not the answer): ")
    # a caller's own refusal words stay as they are; any other language reads English
    own = verify_quotes("Wann wurde die Universität 1650 gegründet?", quoted, ["c1"], chunks, refusal="Nein.")
    assert own.text.startswith("Nein. Der Korpus nennt 1636")
    assert language_of("¿Cuándo se fundó la universidad?") == "en" and language_of("Когда основан?") == "ru"
    assert all(is_refusal_text(v.text) for v in (de, en)) and not is_refusal_text(quoted)
    assert after_lead(de.text).startswith("Der Korpus nennt 1636")


def test_a_refused_role_is_named_by_the_question_s_own_words() -> None:
    from core.answer.verify import role_words

    assert role_words("Wer ist der stellvertretende Befehlshaber der Armee?") == {
        "deputy commander": "stellvertretende Befehlshaber"}
    assert role_words("Кто является генеральным директором компании?") == {
        "chief executive officer": "генеральным директором"}
    chunks = {"c1": ChunkText("Version: 1.2.4", "", "sniffio")}
    de = verify_quotes("Wer ist der Bürgermeister von sniffio?", "Version: 1.2.4 [c1]", ["c1"], chunks, refusal=REFUSAL)
    assert de.refused and "Der gefundene Text erwähnt „Bürgermeister“ nirgends (gefragt: Rolle oder Titel)" in de.text
    assert de.info.reason == "the retrieved text never mentions mayor (role or title asked)"  # the trace: English
    ru = verify_quotes("Кто является генеральным директором sniffio?", "Version: 1.2.4 [c1]", ["c1"], chunks,
                       refusal=REFUSAL)
    assert ru.refused and "нигде нет «генеральным директором»" in ru.text, ru.text
