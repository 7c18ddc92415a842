"""'A minimum of N' is a bound (issue #42): 'at least N' states it, 'at most' or 'up to' the contrary. Tiny invented
fixtures."""
from __future__ import annotations

from core.answer.verify import Evidence, check


def _super(q: str, sentence: str) -> tuple[str, tuple[str, ...]]:
    ck = check(q, Evidence(sentence, sentence, "", ""))
    return next((v.verdict, v.instead) for v in ck.verdicts if v.constraint.kind == "superlative")


def test_a_minimum_of_is_said_as_at_least_and_a_maximum_as_at_most() -> None:
    s = "Varn's rule says that there are always at least four wells between the two dams."
    assert _super("Which rule holds that there are always a minimum of 4 wells between the dams?", s)[0] == "met"
    assert _super("Which rule holds that there are always a maximum of 4 wells between the dams?", s)[0] == "unmet"
    s = "The Orsk permit allows up to six boats on the lake."
    assert _super("What allows a maximum of six boats on the lake?", s)[0] == "met"
    assert _super("What allows a minimum of six boats on the lake?", s)[0] == "unmet"
