"""Reads the Search Lab's stage row (one st.html block) back into stages, chips and cards for the AppTests."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_COL = re.compile(r"<div class='(sl-col|sl-col sl-empty|sl-skip)' data-stage='([^']*)'([^>]*)>")


@dataclass
class Column:
    stage: str
    skipped: str | None  # the skip reason (from the strip's title) or None when the stage ran
    head: str = ""  # header HTML: name, chips, details
    cards: list[str] = field(default_factory=list)  # one HTML string per candidate card, in rank order

    @property
    def chips(self) -> list[str]:
        return [html.unescape(c) for c in re.findall(r"<span class='sl-chip[^']*'>(.*?)</span>", self.head)]


def row_html(at) -> str:
    bodies = [h.value for h in at.html if "data-testid='stage-row'" in h.value]
    return bodies[-1] if bodies else ""


def columns(at_or_html) -> dict[str, Column]:
    body = at_or_html if isinstance(at_or_html, str) else row_html(at_or_html)
    marks = list(_COL.finditer(body))
    out: dict[str, Column] = {}
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(body)
        chunk = body[m.start():end]
        reason = re.search(r"title='skipped: ([^']*)'", m.group(3))
        col = Column(html.unescape(m.group(2)), html.unescape(reason.group(1)) if reason else None)
        parts = chunk.split("<details class='sl-card'")
        col.head, col.cards = parts[0], parts[1:]
        out[col.stage] = col
    return out


def counters(at) -> dict[str, list[str]]:
    """Counters strip: label ('this query', 'session (2 queries)') -> chips."""
    body = row_html(at)
    out = {}
    for label, inner in re.findall(r"<div class='sl-counters' data-counters='([^']*)'>(.*?)</div>", body):
        out[html.unescape(label)] = [html.unescape(c) for c in re.findall(r"<span class='sl-chip[^']*'>(.*?)</span>",
                                                                          inner)]
    return out
