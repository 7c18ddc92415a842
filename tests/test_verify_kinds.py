"""The constraint check's English kinds (issue #42): a role said with its verb, birth and death, superlatives with
their synonyms and antonyms, 'first' beside 'last', a person's name stated whole, an answer whose sentences each
state a sibling, and the answer stage quoting the sentence that meets the constraints. Tiny invented fixtures."""
from __future__ import annotations

from core.answer.stage import extractive_answer, with_constraints_met
from core.answer.verify import ChunkText, Evidence, check, question_constraints, verify_quotes
from core.types import Candidate

REFUSAL = "The corpus does not say."
FILM = "Gray Harbour is a 1931 drama film directed by Olla Brennik."
PERSON = "Tamsin Vell( born 4 March 1961) is a Welsh harpist."
LIFE = "Odo Marrant( 12 May 1820 – 2 February 1867) was a Breton physician."


def _verdict(q: str, sentence: str, title: str = "", chunk: str = "") -> dict[str, tuple[str, tuple[str, ...]]]:
    ck = check(q, Evidence(sentence, chunk or sentence, "", title))
    return {v.constraint.kind: (v.verdict, v.instead) for v in ck.verdicts}


def test_role_said_with_its_verb_is_met_and_another_role_is_not() -> None:
    assert _verdict("Who was the director of the 1931 film Gray Harbour?", FILM)["role"][0] == "met"
    assert _verdict("Who directed the 1931 film Gray Harbour?", FILM)["role"][0] == "met"
    assert _verdict("Who was the producer of the 1931 film Gray Harbour?", FILM)["role"] == ("unmet", ("director",))
    assert _verdict("Who produced the 1931 film Gray Harbour?", FILM)["role"] == ("unmet", ("director",))
    assert any(c.kind == "role" and c.text == "cinematographer"
               for c in question_constraints("Who was the cinematographer of Gray Harbour?"))


def test_birth_and_death_are_attributes_and_a_lifespan_states_both() -> None:
    assert _verdict("When did Tamsin Vell die?", PERSON)["attribute"] == ("unmet", ("birth",))
    assert _verdict("When was Tamsin Vell born?", PERSON)["attribute"][0] == "met"
    assert _verdict("When did Odo Marrant die?", LIFE)["attribute"][0] == "met"
    assert _verdict("When was Odo Marrant born?", LIFE)["attribute"][0] == "met"


def test_superlative_synonym_met_antonym_refused_and_absent_unmet() -> None:
    s = "Brellport is the largest town in Varnshire."
    assert _verdict("What is the biggest town in Varnshire?", s)["superlative"][0] == "met"
    assert _verdict("What is the smallest town in Varnshire?", s)["superlative"] == ("unmet", ("largest",))
    assert _verdict("What is the oldest town in Varnshire?", s)["superlative"][0] == "unmet"
    assert _verdict("Who was the oldest son of Ged Parrow?", "Col Parrow was the eldest son of Ged Parrow.")[
        "superlative"][0] == "met"


def test_first_is_not_met_beside_the_passages_last() -> None:
    chunk = "The last glacial period ended in Varnshire. By 9000 BP, the valley was forested."
    v = _verdict("When was the valley forested after the first glacial period?", "By 9000 BP, the valley was forested.",
                 chunk=chunk)
    assert v["ordinal"] == ("unmet", ("last",))
    ok = _verdict("When was the valley first forested?", "The valley was initially forested by 9000 BP.")
    assert ok["ordinal"][0] == "met"


def test_a_two_word_name_is_stated_whole() -> None:
    assert _verdict("When did Wenna Chell die?", "Chell died in 2011 in Varnshire.")["entity"][0] == "unmet"
    assert _verdict("When did Wenna Chell die?", "Wenna Chell died in 2011 in Varnshire.")["entity"][0] == "met"


def test_answer_whose_sentences_each_state_a_sibling_is_refused() -> None:
    q = "Which Welsh harpist was born in June 1961?"
    a = "Tamsin Vell( born 4 March 1961) is a Welsh harpist. [c1] Ifor Daw( born 9 June 1948) is a Welsh harpist. [c2]"
    chunks = {"c1": ChunkText(PERSON), "c2": ChunkText("Ifor Daw( born 9 June 1948) is a Welsh harpist.")}
    v = verify_quotes(q, a, ["c1", "c2"], chunks, refusal=REFUSAL)
    assert v.refused and "not the answer" in v.text
    assert v.info.action == "refused"


def test_the_sentence_that_meets_the_constraints_is_quoted_first() -> None:
    near = "The director of the 1934 film Gray Harbour Nights was Pell Orry, the film's director."
    cands = [Candidate("c1", "d1", near + " It was shot at sea.", 2.0, 1),
             Candidate("c2", "d2", FILM + " It starred Ash Tolley.", 1.5, 2)]
    q = "Who was the director of the 1931 film Gray Harbour?"
    a = extractive_answer(q, cands, threshold=0.0, titles={"d1": "Gray Harbour Nights", "d2": "Gray Harbour"}).answer
    assert not a.refused
    assert a.text.startswith(FILM) and "Pell Orry" not in a.text  # the neighbouring 1934 film's line is not quoted


def test_with_constraints_met_leaves_a_passing_lead_alone() -> None:
    from core.answer.support import sentence_table
    cands = [Candidate("c2", "d2", FILM, 1.0, 1)]
    table = sentence_table("Who directed Gray Harbour?", cands)
    picked = with_constraints_met("Who directed Gray Harbour?", table.rows, [1.0] * len(table.rows), [0], cands,
                                  None, {"d2": "Gray Harbour"}, max_sentences=3)
    assert picked == [0]


def test_a_default_stated_with_its_verb_carries_its_value() -> None:
    from core.answer.attributes import asked_attribute, states_value
    q = "What does the parser default to when no FLAG is given?"
    attr = asked_attribute(q)
    assert attr is not None and attr.value == "default"
    assert states_value("If no flag is given, it will default to ``FLAG``.", attr, question=q)
    assert states_value("The default value is set to 3.", attr, question=q)
    assert not states_value("The default precision is configurable.", attr, question=q)


def test_an_ordinal_counts_its_noun() -> None:
    title = "Ewan Rusk, 3rd Earl of Dunmallow"
    v = _verdict("Who was the 6th Earl of Dunmallow?", "Ewan married Isla Vane, 6th Lady Vane.", title=title)
    assert v["ordinal"] == ("unmet", ("third",))
    v = _verdict("Who was the ninth son of Hald Brenn?", "Gray Harbour is the ninth drama film by Olla Brennik.")
    assert v["ordinal"][0] == "unmet"
    assert _verdict("Who was the second son of Hald Brenn?", "Orm was the second son of Hald Brenn.")["ordinal"][0] == "met"


def test_where_born_asks_a_place_and_a_clipped_first_name_is_read() -> None:
    assert not any(c.kind == "attribute" for c in question_constraints("Where was Halm Brenn born?"))
    assert any(c.kind == "attribute" and c.text == "birth" for c in question_constraints("When was Halm Brenn born?"))
    assert _verdict("Who served under Lor Vantry?", "Ash Tolley served under Lord Vantry.")["entity"][0] == "met"


def test_a_superlative_counts_its_noun_and_a_long_name_keeps_its_last_word() -> None:
    s = "Ash Tolley( the oldest grandson of Ged Parrow) ran the mill."
    assert _verdict("Who was the oldest child of Ged Parrow?", s)["superlative"][0] == "unmet"
    assert _verdict("Who was the oldest grandson of Ged Parrow?", s)["superlative"][0] == "met"
    assert _verdict("When did Odo Vell Marrant die?", "Odo Vell( 1820 – 1867) was a Breton physician.")[
        "entity"][0] == "unmet"


# -- superlatives in more of English's forms (dev: bench/verify_kinds.py --wide-superlatives) --------------------------
def test_a_hyphenated_ordinal_superlative_is_read_on_both_sides() -> None:
    s = "Brellport is the second-largest town in Varnshire."
    assert _verdict("What is the second-largest town in Varnshire?", s)["superlative"][0] == "met"
    assert _verdict("What is the second largest town in Varnshire?", s)["ordinal"][0] == "met"
    assert _verdict("What is the second-smallest town in Varnshire?", s)["superlative"] == ("unmet", ("largest",))
    assert _verdict("What is the third-largest town in Varnshire?", s)["ordinal"][0] == "unmet"
    # a compound that ranks ('best-selling', 'highest-paid') carries its superlative; 'first-class' is no ranking
    assert ("superlative", "highest") in [(c.kind, c.text) for c in question_constraints(
        "Who is the highest-paid actor in Varnshire?")]
    assert not any(c.kind in ("superlative", "ordinal") for c in question_constraints(
        "Which first-class cricket ground is in Varnshire?"))
    assert not any(c.kind == "superlative" for c in question_constraints("What is the worst-case running time?"))
    assert ("superlative", "best") in [(c.kind, c.text) for c in question_constraints(
        "What is the best-selling album of Varnshire?")]


def test_any_est_adjective_after_the_is_a_superlative_and_an_est_noun_is_not() -> None:
    s = "Brellport is the busiest port in Varnshire."
    assert _verdict("What is the quietest port in Varnshire?", s)["superlative"][0] == "unmet"
    assert _verdict("What is the wettest town in Varnshire?", "Brellport is the driest town in Varnshire.")[
        "superlative"] == ("unmet", ("driest",))
    assert _verdict("What is the wettest town in Varnshire?", "Brellport is the wettest town in Varnshire.")[
        "superlative"][0] == "met"
    for q in ("What is the forest of Varnshire?", "Who led the protest in Varnshire?", "What is the modest rise?",
              "Which test did Varnshire pass?", "What lies to the west of Varnshire?", "What is the interest rate?"):
        assert not any(c.kind == "superlative" for c in question_constraints(q)), q


def test_most_and_least_with_an_adjective_count_their_noun() -> None:
    s = "Butoxamine was the least potent antagonist in the assay."
    assert _verdict("What was the least potent antagonist in the assay?", s)["superlative"][0] == "met"
    assert _verdict("What was the least potent effect in the assay?", s)["superlative"][0] == "unmet"
    # 'the least aggressive one' ranks the noun the question counts
    assert _verdict("What is the least aggressive subtype?", "The least aggressive one lived longest.")[
        "superlative"][0] == "met"


def test_a_superlative_of_another_named_whole_is_the_neighbouring_fact() -> None:
    s = "Irene Vell is the youngest child and second daughter of King Paul of Varnshire."
    assert _verdict("Who is the youngest child of Constantine Harl?", s)["superlative"][0] == "unmet"
    assert _verdict("Who is the youngest child of King Paul?", s)["superlative"][0] == "met"
    assert _verdict("Who is the youngest child of Paul?", s)["superlative"][0] == "met"
    assert _verdict("Who was the youngest son of Johann Wilhelm?", "He was the youngest son of Adolf Wilhelm, Duke of "
                    "Tulm.")["superlative"][0] == "unmet"
    assert _verdict("Who was the eldest son of Ged Parrow?", "Col was the eldest son of Ged Parrow of Tulm.")[
        "superlative"][0] == "met"
    # a description of the same person ('of the king') is no other whole
    assert _verdict("Who was the eldest son of King Paul?", "Col was the eldest son of the king.")[
        "superlative"][0] == "met"


def test_a_predicative_superlative_ranks_its_subject_not_the_asked_noun() -> None:
    s = "Ibuprofen ranked lowest or equal lowest for risk in 10 of the 11 studies."
    assert _verdict("What is the lowest sensitivity?", s)["superlative"][0] == "unmet"
    assert _verdict("Which drug ranked lowest for risk?", s)["superlative"][0] == "met"
    assert _verdict("Which test has the lowest sensitivity?", "The sensitivity of the swab test was the lowest.")[
        "superlative"][0] == "met"
