"""Reads the Search Lab's stage row (one st.html block) back into stages, chips and cards for the AppTests."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

# A column (a stage with its own list), a skipped strip, or a strip of a stage that ran without a list of its own
# to show (none, or the same list as the stage before: 'sl-same', its label "mmr = rerank (10)").
_COL = re.compile(r"<(?:div|details) class='(sl-col|sl-skip|sl-strip sl-idle|sl-strip sl-same)' data-stage='([^']*)'"
                  r"([^>]*)>")


@dataclass
class Column:
    stage: str
    skipped: str | None  # the skip reason (from the strip's title) or None when the stage ran
    same_as: str | None = None  # a strip standing for the same list as this stage's
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
        same = re.search(r"<summary[^>]*>[^<]* = ([^ <]+) \(", chunk) if m.group(1) == "sl-strip sl-same" else None
        col = Column(html.unescape(m.group(2)), html.unescape(reason.group(1)) if reason else None,
                     html.unescape(same.group(1)) if same else None)
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


@dataclass
class AnswerBox:
    label: str  # 'answer (extractive, ...)', 'refused', ...
    chips: list[str]  # route, stop reason, served from cache
    text: str
    cites: str  # 'citations: id (doc) · ...' or ''


def answer_box(at_or_html) -> AnswerBox | None:
    """The Search Lab's answer box (pages/_answer_box.py), read back from its st.html block."""
    if isinstance(at_or_html, str):
        body = at_or_html
    else:
        bodies = [h.value for h in at_or_html.html if "data-testid='answer-box'" in h.value]
        if not bodies:
            return None
        body = bodies[-1]
    label = re.search(r"<div class='ab-head'><b>(.*?)</b>", body)
    text = re.search(r"<div class='ab-text' data-answer='1'>(.*?)</div>", body, re.S)
    cites = re.search(r"<div class='ab-small' data-cites='1'[^>]*>(.*?)</div>", body, re.S)
    chips = re.findall(r"<span class='ab-chip[^']*'[^>]*>(.*?)</span>", body)
    return AnswerBox(html.unescape(label.group(1)) if label else "", [html.unescape(c) for c in chips],
                     html.unescape(text.group(1)) if text else "", html.unescape(cites.group(1)) if cites else "")
