"""Questions that ask what does *not* hold, and the sentences that say something does not: the offline answer
quotes only the latter for the former, or refuses."""
from __future__ import annotations

import re

# Grammatical negation in English and Russian (the languages the offline answer reads): function words of the
# languages, not of any corpus.
_NEG = re.compile(r"(?i)\b(?:not|no|never|cannot|nor|neither|none|without|n't)\b|n't\b|"
                  r"(?<![\w])(?:не|нет|ни|никогда|без)(?![\w])")
# A selection question ('which ... does not ...', 'what is not ...', 'кто не ...'): it asks for the thing a negated
# statement is about, so a sentence stating the positive case answers the opposite question.
_SELECT = re.compile(r"(?i)^\s*(?:which|what|who|whose|какой|какая|какое|какие|кто|что)\b")


def asks_negated(question: str) -> bool:
    """True for a selection question with a negation ('Which policy does not allow three remote days?')."""
    return bool(_SELECT.search(question) and _NEG.search(question))


def states_negation(sentence: str) -> bool:
    """True when the sentence itself negates something ('... are therefore not allowed under this policy')."""
    return bool(_NEG.search(sentence))
