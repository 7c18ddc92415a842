"""core/answer/crosslingual.py: a question in another script than its passages is answered by a multilingual
reader's sentence ranking, and its names are looked for across scripts (transliteration, the reader's phrases)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from core.answer.crosslingual import NameFinder, cross_answer, is_cross, translit
from core.answer.stage import REFUSAL, answer_question
from core.answer.translit import (
    cyrillic_key,
    english_of,
    latin_key,
    name_stated,
    ru_stem,
    sound_match,
    translated,
)
from core.answer.verify import ChunkText, Evidence, check, verify_quotes
from core.config import AnswerConfig
from core.types import Candidate

# a toy bilingual reader: words are concepts; a Russian word and its English translation are the same concept
_CONCEPTS = {"столица": "capital", "capital": "capital", "франции": "france", "france": "france",
             "франция": "france", "париж": "paris", "paris": "paris", "река": "river", "river": "river",
             "germany": "germany", "германии": "germany", "berlin": "berlin", "берлин": "berlin"}


class _NoLLM:  # the extractive mode never calls it
    available = False
    reason = "offline"


class ToyReader:
    def _concepts(self, text: str) -> set[str]:
        import re
        return {_CONCEPTS.get(w.lower(), w.lower()) for w in re.findall(r"[^\W\d_]+", text)}

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        q = self._concepts(question)
        # cosine-like values in e5's range: 0.7 plus the share of the question's concepts the text has
        return np.array([0.7 + 0.2 * len(q & self._concepts(t)) / max(1, len(q)) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        keys = sorted({k for t in texts for k in [" ".join(sorted(self._concepts(t)))]})
        out = np.zeros((len(texts), len(keys)))
        for i, t in enumerate(texts):
            out[i, keys.index(" ".join(sorted(self._concepts(t))))] = 1.0
        return out


PASSAGE = Candidate("c1", "d1", "Paris is the capital of France. The Seine is a river in Paris. Berlin is the "
                    "capital of Germany.", 1.0, 1)


def test_cross_answer_quotes_the_sentence_the_reader_ranks_first_and_refuses_below_the_floor() -> None:
    a, best, notes = cross_answer("Какая столица Франции?", [PASSAGE], ToyReader(), refusal=REFUSAL, margin=0.01)
    assert not a.refused and a.text == "Paris is the capital of France. [c1]" and a.citations == ("c1",)
    assert abs(best - (0.7 + 0.2 * 2 / 3)) < 1e-9 and "multilingual" in notes[0]  # "какая" is no concept
    off, best, _ = cross_answer("Какая погода?", [PASSAGE], ToyReader(), refusal=REFUSAL)
    # refused in the question's language (core.answer.wording), naming the closest sentence
    assert off.refused and off.text.startswith("В корпусе этого нет.") and "ближайшее предложение" in off.text
    assert best < 0.74 and "Paris is the capital of France." in off.text


def test_a_quoted_sentence_that_points_back_is_quoted_with_the_one_before_it() -> None:
    p = Candidate("c2", "d2", "The Seine flows through many towns. It is a river in Paris. Berlin is in Germany.", 1.0, 1)
    a, _, _ = cross_answer("Какая река?", [p], ToyReader(), refusal=REFUSAL, margin=0.01)
    assert a.text == "The Seine flows through many towns. [c2] It is a river in Paris. [c2]"
    de = Candidate("c3", "d3", "Die Seine fließt durch viele Städte. Diese ist ein river in Paris.", 1.0, 1)
    a, _, _ = cross_answer("Какая река?", [de], ToyReader(), refusal=REFUSAL, margin=0.01)
    assert a.text.startswith("Die Seine fließt durch viele Städte. [c3] Diese")


def test_is_cross_reads_scripts() -> None:
    assert is_cross("Какая столица Франции?", [PASSAGE.text])
    assert not is_cross("What is the capital?", [PASSAGE.text])
    assert not is_cross("Какая столица?", [PASSAGE.text, "Париж - столица Франции."])  # one passage is Russian
    assert translit("Тураби") == "turabi"


def test_name_finder_by_transliteration_by_the_readers_phrases_and_by_the_names_gain() -> None:
    find = NameFinder(ToyReader())
    turabi = "Hassan al-Turabi led the National Islamic Front."
    assert find("Тураби", "Кого возглавлял Тураби?", turabi, turabi)  # transliteration
    berlin = "Berlin is the capital of Germany."
    assert NameFinder(ToyReader(), best=0.9, lift=0.5)("Германии", "Какая столица Германии?", berlin, berlin)  # phrase
    assert not find("Зорвата", "Какая столица Зорвата?", berlin, berlin)  # invented: none
    best, lift, tr = find.signals("Зорвата", berlin)
    assert best == 0.0 and lift == 0.0 and tr < 0.75 and find.gain_of("Зорвата", "Какая столица Зорвата?", berlin) < 0
    # the question is closer to the sentence with the name than without it: the reader reads the name there
    gain = NameFinder(ToyReader(), best=9, lift=9, sound=9)
    assert gain.gain_of("Германии", "Какая столица Германии?", berlin) > 0
    assert gain("Германии", "Какая столица Германии?", berlin, berlin)


def test_the_check_refuses_a_cross_lingual_name_the_passage_does_not_state_and_passes_one_it_does() -> None:
    chunks = {"c1": ChunkText(PASSAGE.text, "", "Capitals")}
    text = "Berlin is the capital of Germany. [c1]"
    ok = verify_quotes("Какая столица Франции?", "Paris is the capital of France. [c1]", ["c1"], chunks,
                       refusal=REFUSAL, names=NameFinder(ToyReader()))
    assert not ok.refused and ok.info.action == "passed"  # 'Франции' is translated: the bilingual list knows it
    assert [v.to_dict() for v in ok.info.verdicts() if v.constraint.kind == "entity"] == [
        {"kind": "entity", "constraint": "Франции", "verdict": "met", "where": "sentence"}]
    bad = verify_quotes("Какая столица Зорвании?", text, ["c1"], chunks, refusal=REFUSAL,
                        names=NameFinder(ToyReader()))
    assert bad.refused and "Зорвании" in bad.text and "Berlin is the capital of Germany." in bad.text
    # without a reader the name in another script stays unchecked: nothing is refused on it
    blind = verify_quotes("Какая столица Зорвании?", text, ["c1"], chunks, refusal=REFUSAL)
    assert not blind.refused


def test_the_answer_stage_takes_the_cross_lingual_path_only_across_scripts() -> None:
    cfg = AnswerConfig(mode="extractive")
    llm: Any = _NoLLM()
    res = answer_question("Какая столица Франции?", [PASSAGE], cfg, llm, cross=ToyReader())
    assert not res.answer.refused and res.answer.text.startswith("Paris is the capital of France. [c1]")
    assert any(n.startswith("cross-lingual answer") for n in res.notes) and res.threshold_from.startswith("cross")
    same = answer_question("What is the capital of France?", [PASSAGE], cfg, llm, cross=ToyReader())
    assert not any(n.startswith("cross-lingual answer") for n in same.notes)


def test_a_name_found_across_scripts_by_its_sound_or_its_known_translation_and_an_invented_one_not() -> None:
    text = "Political geographers such as Friedrich Ratzel of Germany and Lord Loudoun supported it."
    assert name_stated("Фридриха Ратцеля", text)  # inflected, 'ц' for 'tz'
    assert name_stated("Лаудона", text) and name_stated("Германии", text)  # a case ending; a translated country
    assert not name_stated("Браккенфилда", text) and not name_stated("Маровии Тулп", text)  # invented
    assert not name_stated("Фридриха Шумпетера", text)  # one word of two is no match
    assert not name_stated("Франции", text)  # a country the list knows, not in the text
    assert cyrillic_key("Шинцель") == latin_key("Schinzel") and ru_stem("Лаудона") == "лаудон"
    assert sound_match("Эйнштейну", {latin_key("Einstein")}) >= 0.75 > sound_match("Зорвата", {latin_key("Zurich")})
    assert translated("Церкви", {"church"}, "the church") and translated("Зорвата", set(), "") is None


def test_the_check_meets_a_transliterated_name_without_a_reader_and_refuses_an_invented_one_with_one() -> None:
    p = Candidate("c2", "d2", "Turabi built a powerful economic base with money from foreign banks. Ratzel believed "
                  "expansion was necessary.", 1.0, 1)
    chunks = {"c2": ChunkText(p.text, "", "Islamism")}
    quoted = "Turabi built a powerful economic base with money from foreign banks. [c2]"
    ok = verify_quotes("Как построил Тураби крепкую экономическую основу?", quoted, ["c2"], chunks, refusal=REFUSAL)
    assert not ok.refused and ok.info.action == "passed"
    bad = verify_quotes("Как построил Веламии Крост крепкую экономическую основу?", quoted, ["c2"], chunks,
                        refusal=REFUSAL, names=NameFinder(ToyReader()))
    assert bad.refused and "Веламии Крост" in bad.text and "Ближайший факт (не ответ)" in bad.text
    assert "name asked" in bad.info.reason  # the trace keeps English


def test_russian_roles_events_and_superlatives_are_checked_against_english_through_their_english_words() -> None:
    def verdicts(q: str, sentence: str) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(v.constraint.kind, v.verdict, v.instead) for v in check(q, Evidence(sentence, sentence)).verdicts
                if v.constraint.kind in ("role", "event", "superlative", "attribute")]
    assert verdicts("Кто был министром образования?", "Turabi served as minister of education.") == [
        ("role", "met", ())]
    assert verdicts("Кто был деканом факультета?", "Turabi served as minister of education.") == [
        ("role", "unmet", ("minister",))]
    assert verdicts("Когда закрылся завод?", "The plant opened in 1990.") == [("event", "unmet", ("open",))]
    assert verdicts("Когда открылся завод?", "The plant opened in 1990.") == [("event", "met", ())]
    assert verdicts("Какое самое большое озеро?", "The smallest lake is Loch Ness.") == [
        ("superlative", "unmet", ("smallest",))]
    assert verdicts("Какое самое большое озеро?", "The largest lake is Loch Ness.") == [("superlative", "met", ())]
    assert verdicts("Какова площадь Шотландии?", "Scotland has a population of 5 million.") == [
        ("attribute", "unmet", ("population",))]
    # a role word English has no title for stays unchecked, never refused on
    assert verdicts("Кто был лидером движения?", "Turabi led the movement.") == [("role", "unchecked", ())]
    assert english_of("role", "декан") == ("dean",) and english_of("superlative", "крупнейш")[0] == "largest"
    assert english_of("event", "выдумал") == ()


def test_a_german_question_asking_a_kind_of_value_quotes_its_passages_sentence_that_holds_one() -> None:
    from core.answer.support import asked_type
    assert asked_type("Wann wurde die Universität gegründet?") == "year"
    assert asked_type("In welchem Jahr begann der Krieg?") == "year"
    assert asked_type("Wie viele Männer wurden entsandt?") == "number"
    assert asked_type("Wer gründete die Stadt?") == "person"
    assert asked_type("Was ist eine Primzahl?") is None
    p = Candidate("c4", "d4", "Berlin is the capital of Germany. The capital moved to Berlin in 1990.", 1.0, 1)
    # the reader ranks the first sentence first (it repeats the question's concepts); the year is in the second
    a, _, _ = cross_answer("Wann capital Germany Berlin?", [p], ToyReader(), refusal=REFUSAL, margin=0.0)
    assert a.text == "Berlin is the capital of Germany. [c4] The capital moved to Berlin in 1990. [c4]"
    a, _, _ = cross_answer("Was capital Germany Berlin?", [p], ToyReader(), refusal=REFUSAL, margin=0.0)
    assert a.text == "Berlin is the capital of Germany. [c4]"


class _RankReader:
    """Scores each sentence by the first of its listed words it holds (a stand-in encoder with a fixed ranking)."""

    _SCORES = {"movement": 0.85, "attempt": 0.80, "economists": 0.82}

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        return np.array([next((v for w, v in self._SCORES.items() if w in t), 0.5) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


def test_the_asked_kind_of_value_is_looked_for_in_the_passages_of_the_best_sentences_document() -> None:
    # the best sentence holds no year; another passage of the same document (its title) holds one within the window,
    # and a passage of another document holds one ranked higher: the same document's sentence is quoted
    best = Candidate("c1", "d1", "The movement began inside the Church of England.", 1.0, 1)
    same = Candidate("c2", "d2", "There was an attempt to withdraw the membership in 2012.", 0.9, 2)
    other = Candidate("c3", "d3", "The economists lived from 1858 to 1940.", 0.8, 3)
    titles = {"d1": "Methodist Church", "d2": "Methodist Church", "d3": "Imperialism"}
    a, _, _ = cross_answer("In welchem Jahr wurde versucht, die Mitgliedschaft zu beenden?", [best, same, other],
                           _RankReader(), titles=titles, refusal=REFUSAL, margin=0.0)
    assert a.text == ("The movement began inside the Church of England. [c1] There was an attempt to withdraw the "
                      "membership in 2012. [c2]")
    # without a shared title each passage is its own document: no other passage's sentence is quoted for the kind
    a, _, _ = cross_answer("In welchem Jahr wurde versucht, die Mitgliedschaft zu beenden?", [best, same, other],
                           _RankReader(), refusal=REFUSAL, margin=0.0)
    assert a.text == "The movement began inside the Church of England. [c1]"


def test_a_russian_name_the_lead_english_sentence_lacks_is_not_supplied_by_a_later_quote_that_only_reads_it() -> None:
    # the answer stands on its lead sentence: a later quote that states the name in another document, or in which only
    # the reader reads it (met in its passage), does not make an answer about something else one about the name
    def reads(where: str) -> Any:
        return lambda name, question, sentence, text: where in sentence
    two = {"c1": ChunkText("The bridge was built in 1850 by the city.", "", "Bridges"),
           "c2": ChunkText("France declared war on England in 1756.", "", "Wars")}
    q = "Когда был построен мост Франции?"
    quoted = "The bridge was built in 1850 by the city. [c1] France declared war on England in 1756. [c2]"
    assert verify_quotes(q, quoted, ["c1", "c2"], two, refusal=REFUSAL, names=reads("~")).refused
    two["c2"] = ChunkText("France declared war on England in 1756.", "", "Bridges")  # one document: a second part
    assert not verify_quotes(q, quoted, ["c1", "c2"], two, refusal=REFUSAL, names=reads("~")).refused
    one = {"c1": ChunkText("Turabi built a powerful economic base with foreign money. He also built a cadre of "
                           "loyalists.", "", "Islamism")}
    q = "Как построил Маровии Тулп крепкую экономическую основу?"
    quoted = "Turabi built a powerful economic base with foreign money. [c1] He also built a cadre of loyalists. [c1]"
    assert verify_quotes(q, quoted, ["c1"], one, refusal=REFUSAL, names=reads("cadre")).refused
    assert not verify_quotes(q, quoted, ["c1"], one, refusal=REFUSAL, names=reads("Turabi")).refused


class _TableReader:
    """A stand-in encoder: each text's cosine from a table (0.5 for any other text: a passage, a clause)."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.table.get(t, 0.5) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


class _RoleReader:
    """A stand-in encoder: the company's seat ranks first, the sentence naming its finance chief close behind."""

    _SCORES = {"headquartered": 0.86, "financial": 0.83, "product": 0.84}

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        return np.array([next((v for w, v in self._SCORES.items() if w in t), 0.5) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


def test_a_sentence_is_read_clause_by_clause() -> None:
    from core.answer.crosslingual import clauses  # noqa: F401
    assert clauses("It is conjectured that there are infinitely many twin primes, pairs of primes with difference 2 "
                   "(twin prime conjecture).") == ["It is conjectured that there are infinitely many twin primes",
                                                   "pairs of primes with difference 2"]
    assert clauses("Rapid warming began about 13,000 BP.") == []  # a comma inside a number cuts nothing
    assert clauses("By 9000 BP, Europe was fully forested.") == ["Europe was fully forested."]  # parts under four
    # words are not read apart


def test_a_long_sentence_whose_clause_is_about_the_question_outranks_a_short_one_on_its_topic() -> None:
    long = "Mathematicians conjecture that there are infinitely many twin primes, pairs of primes with difference 2."
    short = "Twin primes are studied."
    c = Candidate("c1", "d1", f"{short} {long}", 1.0, 1)
    reader = _TableReader({short: 0.85, long: 0.805, "pairs of primes with difference 2.": 0.90})
    a, best, _ = cross_answer("Что такое простые числа-близнецы?", [c], reader, refusal=REFUSAL)
    assert a.text == f"{long} [c1]" and best == 0.85  # the floor reads the sentences' own cosine
    # a sentence further than CLAUSE_WINDOW below the best is not read clause by clause
    reader.table[long] = 0.79
    a, _, _ = cross_answer("Что такое простые числа-близнецы?", [c], reader, refusal=REFUSAL)
    assert a.text == f"{short} [c1]"


def test_the_passage_about_the_question_leads_between_two_close_sentences() -> None:
    one = Candidate("c1", "d1", "The fort was built in 1754.", 1.0, 1)
    two = Candidate("c2", "d2", "The fort was named Fort Duquesne.", 0.9, 2)
    reader = _TableReader({one.text: 0.80, two.text: 0.79})
    # each passage is one sentence here: its passage cosine is its own; a passage read apart scores 0.5 in the table
    a, _, _ = cross_answer("Как назвали форт?", [one, two], reader, refusal=REFUSAL, max_sentences=1)
    assert a.text == "The fort was built in 1754. [c1]"
    one = Candidate("c1", "d1", "The fort was built in 1754. It stood by the river.", 1.0, 1)
    two = Candidate("c2", "d2", "The fort was named Fort Duquesne.\n\nIt  stood by the river.", 0.9, 2)
    # a passage is read as the embedding cache keys it (whitespace collapsed): its stored vector, not a new one
    reader.table.update({one.text: 0.70, "The fort was named Fort Duquesne. It stood by the river.": 0.85})
    a, best, _ = cross_answer("Как назвали форт?", [one, two], reader, refusal=REFUSAL, max_sentences=1)
    assert a.text == "The fort was named Fort Duquesne. [c2]" and best == 0.80


def test_a_clause_above_the_floor_does_not_answer_when_its_sentence_is_below_it() -> None:
    sent = "In the north of the country, the river runs through the old capital."
    c = Candidate("c1", "d1", sent, 1.0, 1)
    reader = _TableReader({sent: 0.70, "the river runs through the old capital": 0.90})
    a, best, _ = cross_answer("Где течёт река?", [c], reader, refusal=REFUSAL, floor=0.74)
    assert a.refused and best == 0.70


def test_a_sentence_that_states_the_asked_role_leads_when_the_best_does_not() -> None:
    p = Candidate("c1", "d1", "Velmont Labs is headquartered in Tarvik and employs 200 people. Velmont Labs makes "
                  "product scanners. Lena Ostrova is the chief financial officer of Velmont Labs.", 1.0, 1)
    a, _, _ = cross_answer("Кто финансовый директор Velmont?", [p], _RoleReader(), refusal=REFUSAL, margin=0.0)
    assert a.text.startswith("Lena Ostrova is the chief financial officer of Velmont Labs. [c1]"), a.text
    # no role asked: the best sentence leads as before
    a, _, _ = cross_answer("Где находится Velmont?", [p], _RoleReader(), refusal=REFUSAL, margin=0.0)
    assert a.text.startswith("Velmont Labs is headquartered"), a.text
    # the role sentence below the window does not lead
    far = Candidate("c2", "d1", "Velmont Labs is headquartered in Tarvik. Lena Ostrova is the chief financial officer "
                    "and owns product pricing.", 1.0, 1)

    class _Far(_RoleReader):
        _SCORES = {"headquartered": 0.95, "financial": 0.80}

    a, _, _ = cross_answer("Кто финансовый директор Velmont?", [far], _Far(), refusal=REFUSAL, margin=0.0)
    assert a.text.startswith("Velmont Labs is headquartered"), a.text
    # a title before a name in a question that asks no holder ('Какую компанию возглавлял директор Velmont?')
    a, _, _ = cross_answer("Где находится компания, которую основал финансовый директор Velmont?", [p], _RoleReader(),
                           refusal=REFUSAL, margin=0.0)
    assert a.text.startswith("Velmont Labs is headquartered"), a.text


def test_a_russian_name_opened_by_a_capitalised_adjective_is_checked_whole_across_scripts() -> None:
    from core.answer.verify import question_constraints

    def names(q: str) -> list[str]:
        return [c.text for c in question_constraints(q) if c.kind == "entity"]
    # Russian capitalises a proper name's first word only: the adjective and the noun it agrees with are one name
    assert names("Какой период времени охватывает Семилетняя война?") == ["Семилетняя война"]
    assert names("Как долго длились бои в Семилетней войне?") == ["Семилетней войне"]
    assert names("Когда закончился последний Ледниковый период?") == ["Ледниковый период"]
    # a noun and its genitive ('Палатой общин'), a name and its verb ('Толстой написал') are not read so
    assert names("Что общего у парламента с Палатой общин?") == ["Палатой"]
    assert names("Когда Толстой написал роман?") == ["Толстой"]
    # a numeral-and-time compound reads as English writes it ('seven years', 'seven-year', '7 years')
    text = "The entire international conflict is known as the Seven Years' War. It began in 1756."
    assert name_stated("Семилетняя война", text) and name_stated("Семилетней войне", text)
    assert not name_stated("Тридцатилетняя война", text) and not name_stated("Семидневная война", text)
    chunks = {"c5": ChunkText(text, "", "French and Indian War")}
    quoted = "The entire international conflict is known as the Seven Years' War. [c5]"
    finder = NameFinder(ToyReader())
    ok = verify_quotes("Когда началась Семилетняя война?", quoted, ["c5"], chunks, refusal=REFUSAL, names=finder)
    assert not ok.refused
    bad = verify_quotes("Когда началась Столетняя война?", quoted, ["c5"], chunks, refusal=REFUSAL, names=finder)
    assert bad.refused and "Столетняя война" in bad.text


def test_a_cyrillic_acronym_is_found_in_english_by_its_letters_or_their_translated_words() -> None:
    from core.answer.translit import acronym_stated
    text = "There was an attempt to withdraw the United Methodist Church from the Religious Coalition."
    assert acronym_stated("ОМЦ", text)  # Объединённая (united) Методистская Церковь
    assert acronym_stated("ЮНЕСКО", "UNESCO listed the site.")  # the Latin acronym transliterated
    assert not acronym_stated("ЮНЕСКО", text) and not acronym_stated("НАТО", text)
    chunks = {"c6": ChunkText(text, "", "Methodism")}
    quoted = "There was an attempt to withdraw the United Methodist Church from the Religious Coalition. [c6]"
    finder = NameFinder(ToyReader())
    ok = verify_quotes("Откуда пытались вывести ОМЦ?", quoted, ["c6"], chunks, refusal=REFUSAL, names=finder)
    assert not ok.refused
    bad = verify_quotes("Откуда пытались вывести НАТО?", quoted, ["c6"], chunks, refusal=REFUSAL, names=finder)
    assert bad.refused and "НАТО" in bad.text


def test_a_russian_deputy_of_a_role_is_met_by_english_second_in_command() -> None:
    s = "Newcastle replaced him in 1756 with Lord Loudoun, with Major General James Abercrombie as his second in command."
    roles = [(v.constraint.text, v.verdict) for v in check("Кто был назначен заместителем командующего в 1756 году?",
                                                            Evidence(s, s)).verdicts if v.constraint.kind == "role"]
    assert ("командующ", "met") in roles
    # the role alone, not a deputy's, is still refused by the general and the deputy the sentence names
    alone = [v.verdict for v in check("Кто был назначен командующим в 1756 году?", Evidence(s, s)).verdicts
             if v.constraint.kind == "role"]
    assert alone == ["unmet"]


def test_an_acronym_russian_translates_and_a_noun_the_list_does_not_know_are_still_read_as_before() -> None:
    from core.answer.verify import _entity_in, _read, question_constraints
    ent = next(c for c in question_constraints("Когда вступили США в войну?") if c.kind == "entity")
    assert _entity_in(ent, _read("The United States entered the war in 1917."), True)  # by translation, not initials
    # a capitalised adjective's noun the bilingual list has no English for is left to the adjective
    assert name_stated("Шотландская ассамблея", "A devolved Scottish Assembly failed.")
    assert name_stated("Религиозной коалиции", "the Religious Coalition for Reproductive Choice")
    assert not name_stated("Семилетняя война", "The Seven Years' peace.")  # a noun the list knows must be stated
