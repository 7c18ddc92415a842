"""What a question asks, read as English says it (issue #42): a 'when' clause before the question proper asks no date,
'how old' asks a number, a percent sign states a percentage and British and American spellings are one word. Tiny
invented fixtures."""
from __future__ import annotations

from core.answer.support import FEATURES, asked_type, question_terms, sentence_table
from core.text import tokenize
from core.types import Candidate


def test_a_when_clause_before_the_question_asks_no_date() -> None:
    assert asked_type("When a river floods its delta, what is the plain called?") is None
    assert asked_type("When a river floods its delta, who pays for the dikes?") != "year"
    assert asked_type("When did the river flood its delta?") == "year"
    assert asked_type("When was the dike built, and who paid for it?") == "year"


def test_how_old_asks_a_number() -> None:
    assert asked_type("How old must a member of the Varn Council be?") == "number"


def test_a_percent_sign_and_the_other_spelling_state_the_question_s_words() -> None:
    q = "What percentage of the vote was in favor of the Varn Council?"
    s = "The vote was 51.6% in favour of the Varn Council."
    table = sentence_table(q, [Candidate("c1", "d1", s, 1.0, 1)])
    assert not table.unseen, [question_terms(q).words[u] for u in table.unseen]
    # 'hour', 'four' and 'tour' are no British spellings
    table = sentence_table("How many hours did the tour take?", [Candidate("c1", "d1", "It takes four hrs.", 1.0, 1)])
    assert {question_terms("How many hours did the tour take?").words[u] for u in table.unseen} == {"hours", "tour"}


def test_an_acronym_spelled_out_by_capitalised_words_is_stated() -> None:
    q = "What does the VHC oppose?"
    s = "The Varn Harbour Council opposes the toll."
    table = sentence_table(q, [Candidate("c1", "d1", s, 1.0, 1)], vocabulary=frozenset(tokenize(s)))
    assert not table.unseen
    assert table.matrix[0][FEATURES.index("absent")] == 0.0
    # initials that do not run in order are no spelling of it
    table = sentence_table(q, [Candidate("c1", "d1", "The Council of Varn opposes the harbour toll.", 1.0, 1)])
    assert {question_terms(q).words[u] for u in table.unseen} == {"VHC"}


def test_a_count_in_words_states_the_question_s_digits() -> None:
    q = "Which rule holds that there are always 4 wells between the dams?"
    s = "Varn's rule says that there are always four wells between the dams; twelve dams stand."
    table = sentence_table(q, [Candidate("c1", "d1", s, 1.0, 1)])
    assert {question_terms(q).words[u] for u in table.unseen} == {"holds"}
    q = "Are there 12 dams?"
    assert not sentence_table(q, [Candidate("c1", "d1", s, 1.0, 1)]).unseen


def test_another_spelling_is_no_new_word_for_novelty() -> None:
    q = "How many wells does the dam have?"
    s = "The Varn dam has 4 wells and twelve gates in colour."
    table = sentence_table(q, [Candidate("c1", "d1", s, 1.0, 1)])
    plain = set(tokenize(s))
    want = len(plain - set(question_terms(q).terms)) / len(plain)
    assert abs(table.matrix[0][FEATURES.index("novelty")] - want) < 1e-9
