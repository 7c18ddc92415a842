"""The answer stage quotes the sentence that states the asked value (issue #42, item 2): when the lead sentence shares
only a verb with the question and misses its name, a sentence that names it (two words or more) and states the kind
of value asked leads instead. Tiny invented fixtures."""
from __future__ import annotations

from core.answer.stage import with_constraints_met
from core.answer.support import sentence_table
from core.types import Candidate


def _picked(question: str, texts: list[str], scores: list[float]) -> list[str]:
    cands = [Candidate(f"c{i}", f"d{i}", t, 1.0, i + 1) for i, t in enumerate(texts)]
    table = sentence_table(question, cands)
    assert [r.text for r in table.rows] == texts
    got = with_constraints_met(question, table.rows, scores, [0], cands, None, {}, max_sentences=3)
    return [table.rows[i].text for i in got]


def test_the_sentence_naming_the_act_and_its_year_leads_over_one_sharing_the_verb() -> None:
    lead = "A petition on the Orsk Synod passed the committee in May 2012."
    act = "Such rules came under the Corvel Trade Act 1975 and the Varn Harbour Act 1981."
    assert _picked("When was the Varn Harbour Act passed?", [lead, act], [2.0, 1.5])[0] == act


def test_a_one_word_name_found_elsewhere_does_not_stand_in() -> None:
    lead = "Tarnholt was captured by the Orsk army in 1760."
    other = "In 2011 the Brellport Society called on its members to abstain."
    assert _picked("When was Society captured?", [lead, other], [2.0, 1.5]) == [lead]
