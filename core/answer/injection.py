"""Instructions addressed to the model inside retrieved text: found in the passages an answer cites, so the answer is
flagged (issue #46 item 10). A flag, not a filter: the passage may be a document about prompt injection.

The phrases are the generic shapes of an instruction to an assistant (override earlier instructions, take a new
role, reveal the prompt or a key, answer only in a given way, hide something from the user), in English and
Russian, written from the attack class, not from any corpus; bench/hostile.py counts how many public passages
(SciFact, the multilingual QA sets) they flag.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

_EN = [
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)?(?:previous|prior|above|earlier|"
    r"preceding|other)\s+(?:instructions|prompts?|rules|directions|messages)",
    r"\b(?:new|updated|real)\s+(?:system\s+)?instructions?\s*:",
    r"\byou\s+(?:are|will)\s+now\s+(?:a|an|the|act|be|respond|answer)\b",
    r"\b(?:system|developer)\s+prompt\b",
    r"\b(?:reveal|print|output|repeat|show|leak|include)\s+(?:your|the)\s+(?:system\s+prompt|instructions|api\s+key|"
    r"secret|password|key)\b",
    r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to|reveal\s+(?:this|it)\s+to)\s+the\s+user\b",
    r"\b(?:assistant|ai|language\s+model|llm|chatbot|claude|gpt)\s*[,:]?\s+(?:must|should|you\s+must)\s+"
    r"(?:answer|respond|reply|say|output|ignore)\b",
    r"\bwhen\s+(?:you\s+are\s+)?asked\s+about\b.{0,80}\b(?:answer|respond|reply|say)\s+(?:with|that|only)\b",
    r"\b(?:respond|answer|reply)\s+only\s+with\b",
    r"</?\s*(?:system|assistant|instructions?)\s*>",
]
_RU = [
    r"(?:игнорируй|игнорируйте|забудь|забудьте|проигнорируй)\w*\s+(?:все\s+)?(?:предыдущие|прошлые|прежние|"
    r"вышеуказанные)\s+(?:инструкции|указания|правила)",
    r"\bты\s+теперь\b",
    r"\bсистемн(?:ый|ая|ого|ой)\s+(?:промпт|подсказк)",
    r"\b(?:покажи|выведи|раскрой)\w*\s+(?:свой\s+|свои\s+)?(?:промпт|инструкции|ключ|пароль)",
    r"\bне\s+(?:говори|сообщай)\w*\s+пользовател",
    r"\bотвечай\w*\s+только\b",
]
_PATTERNS = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in (*_EN, *_RU)]


def instructions_in(text: str) -> list[str]:
    """The phrases of `text` that address an assistant (each cut to 80 characters), in order; [] when none."""
    found: list[tuple[int, str]] = []
    for pat in _PATTERNS:
        for m in pat.finditer(text):
            found.append((m.start(), " ".join(m.group(0).split())[:80]))
    return [phrase for _, phrase in sorted(found)]


def injection_note(cited: Sequence[str], texts: Mapping[str, str]) -> str:
    """The answer's flag when a passage it cites holds instructions addressed to the model, else ""."""
    hits = [(cid, phrases) for cid in cited if (phrases := instructions_in(texts.get(cid, "")))]
    if not hits:
        return ""
    where = "; ".join(f"{cid}: '{phrases[0]}'" for cid, phrases in hits[:3])
    return (f"flag: the cited text contains instructions addressed to the model ({where}); the answer may follow "
            "them rather than the documents - check it against the passages")
