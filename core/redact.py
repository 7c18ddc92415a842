"""Secret redaction at the boundary: API keys never reach an error text, trace, log, database row or export."""
from __future__ import annotations

import re
import threading

# Anthropic keys look like sk-ant-api03-...; anything of that shape is hidden even when we never saw the key.
SECRET_PATTERN = re.compile(r"sk-ant-[A-Za-z0-9_\-]{4,}")
MASK = "[redacted]"
_known: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a configured key so it is hidden even when it does not look like an Anthropic key."""
    if value and len(value) >= 8:
        with _lock:
            _known.add(value)


def redact(text: str) -> str:
    """text with every registered secret and every sk-ant-... token replaced by [redacted]."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return SECRET_PATTERN.sub(MASK, text)
