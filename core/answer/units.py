"""Answer units that respect a document's line structure: a `Key: Value` field line, a list item, a docstring line
inside a code block and an ordinary sentence are units an answer may quote; a line of code is not.

Why: reference documents (package metadata, README files, man pages, config references, pydoc output) state facts
one per line. Sentence splitting glues a run of `Key: Value` lines into one "sentence" ("Classifier: ... License-File:
LICENSE Project-URL: ...") and a fenced example into another, so the line that answers ("License-Expression: MIT")
was never a candidate and a code block was quoted as the answer. Pure text in, spans out (no store, no model)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Sequence

from core.text import FIELD_LINE, field_blocks, sentence_spans

Kind = Literal["sentence", "field", "item", "doc", "code", "row"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_FENCE_LINE = re.compile(r"(?m)^\s*(```|~~~)")
# RST / markdown literal blocks: '.. code-block:: python', '.. code::', or a paragraph ending in '::'
_RST_CODE = re.compile(r"^\s*\.\.\s+(code-block|code|sourcecode|highlight)::")
FIELD = FIELD_LINE  # a `Key: Value` line (core.text)
_MARGIN = re.compile(r"[|│]+[ \t]*")
ITEM_LINE = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+\S")
# A line that reads as code: an interpreter prompt, a statement, an assignment, a call standing alone, a comment,
# a bracket or decorator line, a shell command.
_CODE_LINE = re.compile(
    r"^\s*(>>>|\.\.\.(\s|$)|\$\s|%\s|#|//|@\w|import\s|from\s+[\w.]+\s+import\b|def\s|class\s+\w+[(:]|return\b|"
    r"raise\b|if\s.*:$|elif\s|else:|for\s.*:$|while\s.*:$|try:|except\b|with\s.*:$|print\(|pip\s+install\b|"
    r"(python3?|pip3?|conda|git|cd|source|export|npm|sudo|apt-get|apt|brew|docker|curl|wget)\s+[-\w./\"'\[]|"
    r"[\w.\[\]'\"]+\s*(=|\+=|-=)\s*[^=]|[\w.]+\(.*\)\s*([;,]|#.*|//.*)?$|[{}\[\]()]+[,;]?\s*$|<[/!]?\w)")


# a signature's parameter line with its default ('float_mode: Literal[...] = \'float\',') and a method's signature
# with defaults as pydoc prints it ('__init__(self, max_width=80)')
_DEFAULT_PARAM = re.compile(r"^[A-Za-z_]\w*\s*:\s*[^=\n]{1,80}?\s=\s*[^\s=,)][^=]*,?$|"
                            r"^\w+\((?:self|cls)\b[^()]*\w\s*=\s*[^\s=,)][^()]*\)$")


@dataclass(frozen=True)
class Unit:
    """One quotable (or not) unit of a text: its span and what it is."""

    start: int
    end: int
    kind: Kind


def code_lines(text: str) -> list[tuple[int, int]]:
    """Character ranges of the text's code blocks: fenced (``` / ~~~), RST literal blocks (after '::' or a
    '.. code-block::' directive, while indented) and markdown indented blocks after a blank line."""
    out: list[tuple[int, int]] = []
    lines = text.splitlines(keepends=True)
    pos = 0
    fence: str | None = None
    start = 0
    literal_after = False  # the previous paragraph ended in '::': an indented block follows
    in_literal = False
    prev_blank = True
    for ln in lines:
        body = ln.rstrip("\r\n")
        m = _FENCE.match(body)
        if fence is not None:
            if m and m.group(1) == fence:
                out.append((start, pos + len(ln)))
                fence = None
            pos += len(ln)
            continue
        if m:
            fence, start = m.group(1), pos
            pos += len(ln)
            continue
        indented = body.startswith(("    ", "\t")) and body.strip() != ""
        if in_literal:
            if indented or not body.strip():
                if indented:
                    out.append((pos, pos + len(ln)))
                pos += len(ln)
                continue
            in_literal = False
        if (literal_after or _RST_CODE.match(body)) and not body.strip():
            in_literal = True
        elif _RST_CODE.match(body):
            literal_after = True
            out.append((pos, pos + len(ln)))
            pos += len(ln)
            prev_blank = False
            continue
        elif indented and prev_blank and _CODE_LINE.match(body):  # a markdown indented block that reads as code
            out.append((pos, pos + len(ln)))
        if body.strip():
            literal_after = body.rstrip().endswith("::") and not _RST_CODE.match(body)
        prev_blank = not body.strip()
        pos += len(ln)
    if fence is not None:  # an unclosed fence runs to the end
        out.append((start, len(text)))
    first = _FENCE_LINE.search(text) if fence is not None else None
    if first is not None:  # an odd number of fences: the chunk may open inside a code block (its first fence closes)
        at = text.rfind("\n", 0, first.start()) + 1
        head = [ln for ln in text[:at].splitlines() if ln.strip()]
        if head and any(_reads_as_code(ln.strip()) for ln in head) and not any(
                len(ln.split()) > 12 and ln.rstrip().endswith(".") for ln in head):
            rest = code_lines(text[text.find("\n", first.end()) + 1:]) if "\n" in text[first.end():] else []
            off = text.find("\n", first.end()) + 1
            return [(0, text.find("\n", first.end()) + 1 or len(text))] + [(a + off, b + off) for a, b in rest]
    return out


def _prose_in_code(body: str) -> bool:
    """A line of a code block that reads as prose (a docstring or pydoc line, a man page's description): it opens
    with a word (or a list mark), is no statement, and is mostly letters and spaces."""
    comment = re.match(r"^\s*(?:#|//)\s+(?=[^\W\d_])", body)
    if comment:  # a comment that says something ('# BM25+ needs a delta parameter (default is 0.5)')
        said = body[comment.end():]
        return bool(re.search(r"(?i)\bdefaults?\b", said)) and len(re.findall(r"[^\W\d_]{2,}", said)) >= 4
    if not re.match(r"^\s*(?:[-*•]\s+)?[^\W\d_]", body) or _CODE_LINE.match(body) or _RST_CODE.match(body):
        return False
    plain = sum(1 for ch in body if ch.isalpha() or ch == " ")
    return plain >= 0.8 * len(body.strip()) and len(re.findall(r"[^\W\d_]{2,}", body)) >= 3


def _reads_as_code(body: str) -> bool:
    """A line outside any block that still reads as code (a chunk may open inside a code block): a statement, not a
    markdown heading, not prose."""
    return bool(_CODE_LINE.match(body)) and not re.match(r"^\s*#{1,6}\s", body) and not _prose_in_code(body)


def kind_of_line(body: str) -> Kind:
    """A line read on its own: a field, a list item, or a sentence."""
    return "field" if FIELD.match(body) else "item" if ITEM_LINE.match(body) else "sentence"


def _inside(s: int, e: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= s and e <= b for a, b in ranges)


def _line_units(text: str, s: int, e: int, code: list[tuple[int, int]]) -> list[Unit]:
    """A multi-line span read line by line: field lines, items and docstring lines are units of their own, a line that
    goes on from the one before (indented, or a lower-case wrap) joins it, code lines are code."""
    out: list[Unit] = []
    pos = s
    for ln in text[s:e].split("\n"):
        a, b = pos, pos + len(ln)
        pos = b + 1
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        in_code = _inside(a, b, code)
        if in_code:  # pydoc's and man pages' left margin ' |  - default value is set to 3': decoration, not text
            m = _MARGIN.match(text, a, b)
            a = m.end() if m else a
        if a >= b:
            continue
        body = text[a:b]
        if not in_code and _TABLE_ROW.match(body):  # a Markdown table's line: a body row is a unit of its own, read
            # with the table's header (core.answer.support's headings); the header and the rule under it are not
            out.append(Unit(a, b, "row" if table_row(text, a) else "code"))
            continue
        if in_code and _DEFAULT_PARAM.match(body):  # a parameter with its default, as a signature or pydoc writes it
            out.append(Unit(a, b, "doc"))  # ('allow_inf_nan: bool = True,', '__init__(self, max_width=80)'): it
            continue  # states the default, and is quoted for it
        if _FENCE.match(body) or _RST_CODE.match(body) or (in_code and not _prose_in_code(body)) or \
                (_reads_as_code(body) and kind_of_line(body) != "field"):
            out.append(Unit(a, b, "code"))
            continue
        kind: Kind = "field" if FIELD.match(body) else "item" if ITEM_LINE.match(body) else "doc" if in_code else "sentence"
        prev = out[-1] if out else None
        indented = text[a - 1:a] in (" ", "\t")
        goes_on = prev is not None and prev.kind != "code" and kind in ("sentence", "doc") and \
            not text[prev.start:prev.end].endswith((".", "!", "?", ":")) and (
                (prev.kind == kind and kind == "sentence") or body[:1].islower() or
                (indented and prev.kind in ("field", "item")))
        if goes_on and prev is not None:
            out[-1] = Unit(prev.start, b, prev.kind)
        else:
            out.append(Unit(a, b, kind))
    return out


def _line_structured(text: str, s: int, e: int, code: list[tuple[int, int]]) -> bool:
    lines = [ln.strip() for ln in text[s:e].split("\n") if ln.strip()]
    if len(lines) < 2:
        return False
    fields = sum(1 for ln in lines if FIELD.match(ln))
    return fields >= 2 or any(_TABLE_RULE.match(ln) for ln in lines) or any(_FENCE.match(ln) for ln in lines) or any(
        a < e and s < b for a, b in code) or sum(1 for ln in lines if ITEM_LINE.match(ln) or re.fullmatch(r"\d{1,2}[.)]", ln)) >= 2 or \
        sum(1 for ln in lines if _reads_as_code(ln)) >= 2


# a Markdown table's line ('| chardet | 2.7 ms | 1.0 ms |') and the rule under its header ('|------|:---:|')
_TABLE_ROW = re.compile(r"^\|.*\|$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?$")


def _line_at(text: str, pos: int) -> tuple[int, int]:
    a = text.rfind("\n", 0, pos) + 1
    b = text.find("\n", pos)
    return a, len(text) if b < 0 else b


def table_header(text: str, pos: int) -> list[str] | None:
    """The header cells of the Markdown table whose body row holds `pos` (None when the line is no such row): the
    line above the rule ('|---|---|') that the rows above this one lead up to, in the same text."""
    a, b = _line_at(text, pos)
    if not _TABLE_ROW.match(text[a:b].strip()) or _TABLE_RULE.match(text[a:b].strip()):
        return None
    while a > 0:
        pa, pb = _line_at(text, a - 1)
        line = text[pa:pb].strip()
        if _TABLE_RULE.match(line):
            if pa == 0:
                return None
            ha, hb = _line_at(text, pa - 1)
            head = text[ha:hb].strip()
            return [c.strip() for c in head.strip("|").split("|")] if _TABLE_ROW.match(head) else None
        if not _TABLE_ROW.match(line):
            return None
        a = pa
    return None


def table_row(text: str, pos: int) -> bool:
    """Whether the line at `pos` is a Markdown table's body row with two cells or more that say something."""
    head = table_header(text, pos)
    a, b = _line_at(text, pos)
    cells = [c.strip() for c in text[a:b].strip().strip("|").split("|")]
    return head is not None and sum(1 for c in cells if re.search(r"\w", c)) >= 2


def _one_item(body: str) -> bool:
    """Whether a span is one list item with its indented lines ('- [Python Bytes Podcast](...)' over '  Episode 402,
    topic #2'): an item, quoted whole; read as a sentence, its first line was taken for a heading and cut off, and
    the rest ('Episode 402, topic #2') was too short a line to quote."""
    first, _, rest = body.partition("\n")
    return bool(ITEM_LINE.match(first)) and all(ln[:1] in (" ", "\t") for ln in rest.split("\n") if ln.strip())


def units(text: str) -> list[Unit]:
    """The text's units in order: sentences of prose, and where the text is line-structured (a run of `Key: Value`
    fields, a code block, a list) its lines."""
    return list(_units(text))


@lru_cache(maxsize=2048)  # a chunk is read by every question that retrieves it, and by the check after the answer
def _units(text: str) -> tuple[Unit, ...]:
    code = code_lines(text)
    out: list[Unit] = []
    pos = 0
    for fs, fe in [*field_blocks(text), (len(text), len(text))]:
        for s, e in sentence_spans(text, pos, fs):
            if "\n" in text[s:e] and _line_structured(text, s, e, code):
                out.extend(_line_units(text, s, e, code))
            elif _inside(s, e, code):
                body = text[s:e]
                out.append(Unit(s, e, "doc" if _prose_in_code(body) else "code"))
            else:
                out.append(Unit(s, e, kind_of_line(text[s:e]) if "\n" not in text[s:e] else
                                "item" if _one_item(text[s:e]) else "sentence"))
        if fs < fe:
            out.extend(_line_units(text, fs, fe, code))
        pos = fe
    cut: list[Unit] = []
    for u in out:  # 'anaconda\n2.': the next item's number glued to the line before it
        m = re.search(r"\n[ \t]*(\d{1,2}[.)])$", text[u.start:u.end])
        if m and u.kind != "code":
            cut += [Unit(u.start, u.start + m.start(), u.kind), Unit(u.start + m.start(1), u.end, "sentence")]
        else:
            cut.append(u)
    merged: list[Unit] = []
    for u in cut:  # '1.' cut from its item by the sentence splitter ('1. Download and install ...')
        prev = merged[-1] if merged else None
        if prev is not None and re.fullmatch(r"\d{1,2}[.)]", text[prev.start:prev.end]) and \
                "\n" not in text[prev.end:u.start] and u.kind != "code":
            merged[-1] = Unit(prev.start, u.end, "item")
        else:
            merged.append(u)
    return tuple(merged)


_TAG_LINE = re.compile(r"^</?[A-Za-z][\w-]*(\s[^<>]*)?/?>$")


def code_after(text: str, us: Sequence[Unit], j: int, *, max_lines: int = 2, max_chars: int = 160) -> int | None:
    """Where a short code block ends that unit j introduces ('... install extra dependencies:' over a fenced
    'pip install pypdf[crypto]'): the line it introduces is what the sentence says, so a quote of the sentence runs
    on through it. None when unit j does not end with a colon or no short block follows it."""
    if not text[us[j].start:us[j].end].rstrip().endswith(":"):
        return None
    end, lines, k = None, 0, j + 1
    while k < len(us) and _TAG_LINE.match(text[us[k].start:us[k].end].strip()):
        k += 1  # a wrapper's tag between the sentence and its block ('<div class="termy">' in rendered docs)
    while k < len(us) and us[k].kind == "code" and not text[us[k - 1].end:us[k].start].strip():
        body = text[us[k].start:us[k].end].strip()
        end = us[k].end
        if _FENCE.match(body):
            if lines:
                break  # the closing fence
        else:
            lines += 1
            if lines > max_lines or len(body) > max_chars:
                return None
        k += 1
    return end if lines else None


def list_after(text: str, us: Sequence[Unit], j: int, *, max_items: int = 8, max_chars: int = 80,
               max_total: int = 320) -> int | None:
    """Where a short list ends that unit j introduces ('psutil currently supports the following platforms:' over
    '- Linux', '- Windows', ...): the items are what the sentence says, so a quote of the sentence runs on through
    them. None when unit j does not end with a colon, or what follows is not a run of at most `max_items` short items
    (each item is still quotable on its own)."""
    if not text[us[j].start:us[j].end].rstrip().endswith(":"):
        return None
    end, n, total, k = None, 0, 0, j + 1
    while k < len(us) and us[k].kind == "item" and not text[us[k - 1].end:us[k].start].strip():
        body = " ".join(text[us[k].start:us[k].end].split())
        n, total = n + 1, total + len(body)
        if n > max_items or len(body) > max_chars or total > max_total:
            return None
        end = us[k].end
        k += 1
    if k < len(us) and us[k].kind == "item":
        return None  # a longer list: quoting a part of it would read as all of it
    return end if n >= 2 else None


_POINTS_AT_CODE = re.compile(r"^\W*(this|these|that|it|running this|the (above|command|line) above)\b", re.I)


def code_before(text: str, us: Sequence[Unit], j: int, *, max_lines: int = 2, max_chars: int = 160) -> int | None:
    """Where a short code block starts that unit j points back to ('pip install "uvicorn[standard]"' above 'This will
    install uvicorn with Cython-based dependencies'): the command is what the sentence is about, so a quote of the
    sentence starts with it. None when unit j does not open with 'This', 'It', ... or no short block is right above."""
    if j == 0 or not _POINTS_AT_CODE.match(text[us[j].start:us[j].end]):
        return None
    start, lines, k = None, 0, j - 1
    while k >= 0 and us[k].kind == "code" and not text[us[k].end:us[k + 1].start].strip():
        body = text[us[k].start:us[k].end].strip()
        start = us[k].start
        if _FENCE.match(body):
            if lines:
                break  # the opening fence
        else:
            lines += 1
            if lines > max_lines or len(body) > max_chars:
                return None
        k -= 1
    return start if lines else None


def quotable(unit_text: str, kind: Kind) -> bool | None:
    """Whether a line unit may be quoted on its own (None: judge it as a sentence). A field line with a value, an
    item or docstring line of three words or more are claims though they end without a full stop; code never is."""
    if kind == "code":
        return False
    words = len(re.findall(r"\w+", unit_text))
    if kind == "field":
        m = FIELD.match(unit_text)
        return bool(m) and len(re.findall(r"\w+", m.group("value"))) >= 1 and words <= 80
    if kind == "row":
        return 2 <= words <= 80
    if kind in ("item", "doc"):  # (a link's target is no words of the claim: '• [Deutsch readme](https://…)')
        return 3 <= len(re.findall(r"\w+", without_links(unit_text))) and words <= 80
    return None


_LINK_TARGET = re.compile(r"\]\([^)\s]*\)|<?\b[a-z][\w+.-]*://[^\s>)\]]+>?")


def without_links(text: str) -> str:
    """The text with its web addresses and Markdown links' targets left out (a link's words kept)."""
    return _LINK_TARGET.sub(" ", text)
