"""Chunkers: fixed token window with overlap, sentence-aware packing, and structure-aware (per heading section)."""
from __future__ import annotations

import bisect
import re
from typing import Callable

from core.config.ingest import ChunkStrategy as Strategy
from core.ingest.identity import content_ids, content_key
from core.ingest.parse import ParseError
from core.text import count_tokens, detect_language, token_spans, unit_spans
from core.types import Chunk, ParsedDocument, Section


def _windows(spans: list[tuple[int, int]], size: int, overlap: int) -> list[tuple[int, int]]:
    """Char ranges of token windows of `size` tokens, each sharing `overlap` tokens with the previous one."""
    if not spans:
        return []
    step = max(1, size - min(overlap, size - 1))
    out = []
    i = 0
    while True:
        window = spans[i : i + size]
        out.append((window[0][0], window[-1][1]))
        if i + size >= len(spans):
            break
        i += step
    return out


def fixed_ranges(text: str, size: int, overlap: int, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    return _windows(token_spans(text, start, end), size, overlap)


def sentence_ranges(
    text: str, size: int, overlap: int, start: int = 0, end: int | None = None
) -> list[tuple[int, int]]:
    """Pack whole sentences up to `size` tokens; carry trailing sentences worth up to `overlap` tokens forward.
    A run of `Key: Value` lines packs field by field (core.text.unit_spans). A sentence longer than `size` is cut by
    the fixed window."""
    units: list[tuple[int, int, int]] = []  # (start, end, tokens)
    for s, e in unit_spans(text, start, end):
        n = count_tokens(text[s:e])
        if n > size:
            units.extend((a, b, count_tokens(text[a:b])) for a, b in fixed_ranges(text, size, overlap, s, e))
        elif n:
            units.append((s, e, n))
    out: list[tuple[int, int]] = []
    cur: list[tuple[int, int, int]] = []
    cur_tokens = 0
    for unit in units:
        if cur and cur_tokens + unit[2] > size:
            out.append((cur[0][0], cur[-1][1]))
            carry: list[tuple[int, int, int]] = []
            carried = 0
            for u in reversed(cur):
                if carried + u[2] > overlap or u is cur[0] and len(cur) == 1:
                    break
                carry.insert(0, u)
                carried += u[2]
            if not carry and _POINTS_BACK.match(text, unit[0]) and cur[-1][2] + unit[2] <= size:
                # a sentence that points back to the one before it ('That is, it mostly ...') never opens a chunk
                # without it, though that one is longer than the overlap
                carry, carried = [cur[-1]], cur[-1][2]
            if carried + unit[2] > size:
                carry, carried = [], 0
            cur, cur_tokens = carry, carried
        cur.append(unit)
        cur_tokens += unit[2]
    if cur:
        last = (cur[0][0], cur[-1][1])
        if not out or last[1] > out[-1][1]:
            out.append(last)
    return out


# a sentence opening with a word that points back to the sentence before it: general English and Russian
_POINTS_BACK = re.compile(r"[\W_]*(?i:that is|that means|this means|in other words|i\.e\.|it|its|this|these|those|"
                          r"they|their|such|он|она|оно|они|это|этот|эта|эти)\b")


CHARS_PER_TOKEN = 8  # the character bound per chunking token: ordinary prose averages 4-7 characters a word


def max_chunk_chars(size: int) -> int:
    """The most characters a chunk of `size` chunking tokens may hold. A chunking token is a word, so a run of text
    without spaces (a 10 MB line, an unclosed HTML comment) is one token of any length: this bound keeps every chunk
    within the embedder's window whatever the text."""
    return max(1, size) * CHARS_PER_TOKEN


def _pieces(text: str, s: int, e: int, longest: Callable[[int], int | None]) -> list[tuple[int, int]]:
    """[s, e) cut into consecutive pieces: `longest(s)` is where the longest piece starting at s that fits ends (None
    when the rest fits). Each piece ends at the last whitespace of that span's second half when there is one, else
    there (a run without spaces is cut hard); the pieces cover the range exactly."""
    out: list[tuple[int, int]] = []
    while s < e and (limit := longest(s)) is not None:
        half = s + (limit - s) // 2
        cut = max(text.rfind(" ", half, limit), text.rfind("\n", half, limit))
        cut = cut + 1 if cut > s else limit
        out.append((s, cut))
        s = cut
        while s < e and text[s].isspace():
            s += 1
    if e > s:
        out.append((s, e))
    return out


def bound_ranges(text: str, ranges: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Each range longer than `max_chars` cut into consecutive pieces of at most `max_chars` characters (_pieces)."""
    return [piece for s, e in ranges
            for piece in _pieces(text, s, e, lambda at, e=e: at + max_chars if e - at > max_chars else None)]


def token_bound(text: str, start: int, end: int, count: Callable[[str], int], max_tokens: int
                ) -> list[tuple[int, int]]:
    """[start, end) cut into consecutive pieces of at most `max_tokens` by `count` (the embedder's tokenizer; see
    _pieces). A chunking token is a word, so a chunk within its size can still be more of the embedder's tokens than
    it reads (numbers, identifiers, other scripts)."""
    def longest(s: int) -> int | None:
        if count(text[s:end]) <= max_tokens:
            return None
        lo, hi = s + 1, end  # count(text[s:lo]) <= max_tokens < count(text[s:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(text[s:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid
        return lo

    return _pieces(text, start, end, longest)


def fit_to_window(text: str, doc_id: str, chunks: list[Chunk], count: Callable[[str], int], max_tokens: int
                  ) -> list[Chunk]:
    """The chunks, each that `count` says is over `max_tokens` split by token_bound (ids renumbered in order);
    unchanged when all fit."""
    over = [count(c.text) > max_tokens for c in chunks]  # each chunk counted once; only those over are cut
    if not any(over):
        return chunks
    ranges: Ranges = [(a, b, c.heading_path) for c, cut in zip(chunks, over)
                      for a, b in (token_bound(text, c.start, c.end, count, max_tokens) if cut else [(c.start, c.end)])]
    return build_chunks(text, doc_id, ranges, chunk_facts(text, ranges))


def _heading_at(sections: tuple[Section, ...], pos: int) -> tuple[str, ...]:
    starts = [s.start for s in sections]
    i = bisect.bisect_right(starts, pos) - 1
    return sections[i].heading_path if i >= 0 else ()


_ADORNMENT_LINE = re.compile(r"^([=\-~+^*#])\1+[ \t]*$", re.MULTILINE)


def _heading_only(body: str, kind: str) -> bool:
    """A section holding its heading and nothing else. A Markdown / reStructuredText or plain-text heading may be
    underlined (and overlined): its adornment lines are part of the heading."""
    if kind in ("md", "txt"):
        body = _ADORNMENT_LINE.sub("", body)
    return not body.strip().partition("\n")[2].strip()


class ChunkLimitError(ParseError):
    """A file cut into more chunks than the per-file cap allows; str() names the file, the count and the setting."""


Ranges = list[tuple[int, int, tuple[str, ...]]]


def chunk_ranges(doc: ParsedDocument, *, strategy: Strategy, size: int, overlap: int) -> Ranges:
    """(start, end, heading path) of every chunk, each within max_chunk_chars(size): the cut without the per-chunk
    work (token counts, language), so a file over the chunk cap is refused before that work is done."""
    text = doc.text
    sections = doc.sections or (Section((), 0, len(text)),)
    ranges: Ranges = []
    if strategy == "fixed":
        ranges = [(s, e, _heading_at(sections, s)) for s, e in fixed_ranges(text, size, overlap)]
    elif strategy == "sentence":
        ranges = [(s, e, _heading_at(sections, s)) for s, e in sentence_ranges(text, size, overlap)]
    elif strategy == "structure":
        pending: int | None = None  # start of heading-only sections, folded into the next section's first chunk
        runs = list(sections)
        opening = doc.kind == "md" and len(runs) > 1 and not runs[0].heading_path
        if opening:
            # A Markdown file's untitled opening (a package's METADATA header fields before its long description's
            # title) is packed with the first section, as a file without headings is: a chunk that ends the opening
            # keeps the title that follows it (the package's name) instead of ending at a bare run of fields.
            runs = [Section(runs[1].heading_path, 0, runs[1].end), *runs[2:]]
        for k, sec in enumerate(runs):
            body = text[sec.start : sec.end]
            if sec.heading_path and _heading_only(body, doc.kind) and not (opening and k == 0):
                pending = sec.start if pending is None else pending
                continue
            for j, (s, e) in enumerate(sentence_ranges(text, size, overlap, sec.start, sec.end)):
                path = _heading_at(sections, s) if opening and k == 0 else sec.heading_path
                ranges.append((pending if j == 0 and pending is not None else s, e, path))
            pending = None
        if pending is not None:
            ranges.append((pending, len(text), _heading_at(sections, pending)))
    else:
        raise ValueError(f"unknown chunking strategy {strategy!r}")
    limit = max_chunk_chars(size)
    if any(e - s > limit for s, e, _ in ranges):
        ranges = [(a, b, path) for s, e, path in ranges for a, b in bound_ranges(text, [(s, e)], limit)]
    return ranges


def check_chunk_cap(name: str, n_chunks: int, max_chunks: int | None) -> None:
    """Refuse a file cut into more than `max_chunks` chunks (limits.max_chunks_per_file): a small file of headings
    or table rows can make tens of thousands of chunks, each a model call's worth of work."""
    if max_chunks is not None and n_chunks > max_chunks:
        raise ChunkLimitError(f"{name}: cut into {n_chunks:,} chunks, over the limit of {max_chunks:,} per file "
                              "(setting limits.max_chunks_per_file); split the file or raise the limit; skipped")


def chunk_facts(text: str, ranges: Ranges) -> list[tuple[int, str]]:
    """(token count, language) of each chunk range: the per-chunk work, done where the cut was made."""
    return [(count_tokens(text[s:e]), detect_language(text[s:e])) for s, e, _ in ranges]


def build_chunks(text: str, doc_id: str, ranges: Ranges, facts: list[tuple[int, str]]) -> list[Chunk]:
    """Chunk records from their ranges and facts; ids are content-defined (core/ingest/identity.py): the document
    id and a hash of the chunk's heading path and text, so an unchanged chunk keeps its id when its document is
    edited."""
    ids = content_ids(doc_id, [content_key(text[s:e], path) for s, e, path in ranges])
    return [Chunk(chunk_id=cid, doc_id=doc_id, ordinal=i, text=text[s:e], start=s, end=e,
                  heading_path=path, n_tokens=n, lang=lang)
            for i, (cid, (s, e, path), (n, lang)) in enumerate(zip(ids, ranges, facts))]


def chunk_document(doc: ParsedDocument, doc_id: str, *, strategy: Strategy, size: int, overlap: int,
                   max_chunks: int | None = None) -> list[Chunk]:
    """The document's chunks; over `max_chunks` a ChunkLimitError (see check_chunk_cap)."""
    ranges = chunk_ranges(doc, strategy=strategy, size=size, overlap=overlap)
    check_chunk_cap(doc.name, len(ranges), max_chunks)
    return build_chunks(doc.text, doc_id, ranges, chunk_facts(doc.text, ranges))
