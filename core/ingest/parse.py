"""Turn uploaded bytes (pdf, docx, md, html, txt) into plain text with heading sections, or a clear ParseError."""
from __future__ import annotations

import io
import re
import zipfile
from dataclasses import replace
from html import unescape
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any, Sequence

from charset_normalizer import from_bytes

from core.types import ParsedDocument, Section

# Metadata caps (issue #12, item 2): every chunk carries its heading path, so one huge heading copied into every chunk
# made a small file cost gigabytes (bench/hostile.py). With these caps a chunk's stored metadata is at most a few
# hundred characters.
MAX_HEADING_CHARS = 160
MAX_PATH_CHARS = 400
MAX_TITLE_CHARS = 200
MAX_NAME_CHARS = 255
MAX_KEY_CHARS = 1024  # a document key (a path relative to the ingest root), folders included
# Zip-based uploads (docx): the upload limit checks compressed bytes only, so a 518 KB file could unpack to a
# document.xml that keeps python-docx busy for minutes. These bound what is unpacked before any parsing starts.
MAX_ZIP_ENTRIES = 2000
MAX_ZIP_UNCOMPRESSED = 100_000_000
MAX_ZIP_RATIO = 100  # per entry above 1 MB: plain Office XML packs ~5-20x; a bomb packs 100x and more

SUPPORTED = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".txt": "txt", ".text": "txt",
             ".pdf": "pdf", ".docx": "docx",
             # tables (core/ingest/tables.py reads them; core.ingest.tables.parse_any is their parse)
             ".csv": "csv", ".tsv": "tsv", ".xlsx": "xlsx", ".parquet": "parquet", ".jsonl": "jsonl",
             ".ndjson": "jsonl"}
TABLE_KINDS = frozenset({"csv", "tsv", "xlsx", "parquet", "jsonl"})


class ParseError(ValueError):
    """A file that cannot be ingested; str() names the file and the problem."""


def kind_of(name: str) -> str:
    base = name.rsplit("/", 1)[-1]  # a document key is a path relative to the ingest root; its last part is the name
    if len(base) > MAX_NAME_CHARS:
        raise ParseError(f"{name[:60]}…: the file name is {len(base):,} characters long (at most {MAX_NAME_CHARS})")
    if len(name) > MAX_KEY_CHARS:
        raise ParseError(f"{name[:60]}…: the path is {len(name):,} characters long (at most {MAX_KEY_CHARS:,})")
    ext = PurePath(name).suffix.lower()
    if ext not in SUPPORTED:
        raise ParseError(f"{name}: unsupported file type '{ext or '(none)'}' (supported: pdf, docx, md, html, txt; "
                         "tables: csv, tsv, xlsx, parquet, jsonl)")
    return SUPPORTED[ext]


def human_size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def parse(name: str, data: bytes, *, max_bytes: int | None = None) -> ParsedDocument:
    kind = kind_of(name)
    if max_bytes is not None and len(data) > max_bytes:
        raise ParseError(f"{name}: {human_size(len(data))} is over the upload limit of {human_size(max_bytes)}")
    if not data.strip():
        raise ParseError(f"{name}: the file is empty")
    if kind in TABLE_KINDS:
        raise ParseError(f"{name}: a table file; core.ingest.tables.parse_any reads it")
    parser = {"md": _parse_markdown, "html": _parse_html, "txt": _parse_text, "pdf": _parse_pdf,
              "docx": _parse_docx}[kind]
    doc = parser(name, data)
    if not doc.text.strip():
        raise ParseError(f"{name}: no text could be extracted")
    return _capped(doc)


def _capped(doc: ParsedDocument) -> ParsedDocument:
    """The document with its title and heading paths within the metadata caps (text and offsets unchanged)."""
    sections = tuple(replace(s, heading_path=cap_heading_path(s.heading_path)) for s in doc.sections)
    return replace(doc, title=cap_text(doc.title, MAX_TITLE_CHARS), sections=sections)


def cap_text(text: str, limit: int) -> str:
    """One line of at most `limit` characters; a cut is marked with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def cap_heading_path(path: tuple[str, ...]) -> tuple[str, ...]:
    """Each heading capped; when the path is still too long the outermost and innermost headings are kept."""
    capped = tuple(cap_text(h, MAX_HEADING_CHARS) for h in path)
    while len(capped) > 2 and sum(len(h) for h in capped) > MAX_PATH_CHARS:
        capped = capped[:1] + capped[2:]
    return capped


_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"),  # UTF-32 first: its LE BOM
         (b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))  # starts like UTF-16's
# Single-byte code pages tried when the bytes are not UTF-8: the Russian ones our users send, then Western.
_LEGACY = ("cp1251", "koi8_r", "cp866", "mac_cyrillic", "cp1252", "latin_1")
_RU_LOWER = frozenset("абвгдеёжзийклмнопрстуфхцчшщъыьэюя")
_RU_UPPER = frozenset(ch.upper() for ch in _RU_LOWER)


def _plausibility(text: str) -> float:
    """Share-like score of how much a decoding looks like human text. Wrong Cyrillic code pages still give Cyrillic
    letters, but with the case flipped (KOI8-R read as cp1251) or odd letters (ѕ, Ђ from mac_cyrillic), so
    lower-case Russian letters score higher than capitals, and letters of two scripts inside one word score low."""
    sample = text[:20000]
    if not sample:
        return 0.0
    score = 0.0
    prev = ""
    for ch in sample:
        o = ord(ch)
        if ch in _RU_LOWER:
            score += 2.0
            cls = "c"
        elif ch in _RU_UPPER:
            score += 0.5
            cls = "c"
        elif o < 128:
            score += -5.0 if (o < 32 and ch not in "\n\r\t\f") or o == 127 else 1.0
            cls = "l" if ch.isalpha() else ""
        elif ch.isalpha() and o < 0x250:
            score += 1.0  # accented Latin letters
            cls = "l"
        elif ch in "«»—–…№“”„‘’•·©®°±×€£":
            score += 0.5
            cls = ""
        else:
            score -= 2.0
            cls = ""
        if cls and prev and cls != prev:
            score -= 3.0  # a word switching script mid-way: the mark of a wrong code page
        prev = cls
    return score / len(sample)


def _bad_share(text: str) -> float:
    sample = text[:8192]
    bad = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\n\r\t\f") or ch in "\x7f\ufffd"
              or 0xD800 <= ord(ch) < 0xE000 or 0x80 <= ord(ch) < 0xA0)
    return bad / max(1, len(sample))


def decode_text(name: str, data: bytes) -> tuple[str, str]:
    """(text, encoding): a BOM wins; then UTF-32/16 without BOM when the bytes hold NULs; then UTF-8; then the
    most plausible legacy code page (charset-normalizer's guess among the candidates). Binary data is refused."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                return _newlines(data[len(bom):].decode(enc)), f"{enc} (BOM)"
            except UnicodeDecodeError as exc:
                raise ParseError(f"{name}: starts with a {enc} byte-order mark but is not valid {enc} "
                                 f"(offset {exc.start + len(bom)})") from exc
    if b"\x00" in data[:8192]:
        best: tuple[float, str, str] | None = None
        for enc in ("utf-32-le", "utf-32-be", "utf-16-le", "utf-16-be"):
            try:
                text = data.decode(enc)
            except UnicodeDecodeError:
                continue
            if _bad_share(text) > 0.01 or "\x00" in text:
                continue
            score = _plausibility(text)
            if score > 0.5 and (best is None or score > best[0]):
                best = (score, enc, text)
        if best is None:
            raise ParseError(f"{name}: looks like a binary file (NUL bytes), not text")
        return _newlines(best[2]), best[1]
    try:
        text, enc = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        text, enc = _legacy_decode(name, data, exc)
    if _bad_share(text) > 0.05:
        raise ParseError(f"{name}: looks like a binary file (control characters), not text")
    return _newlines(text), enc


def _legacy_decode(name: str, data: bytes, exc: UnicodeDecodeError) -> tuple[str, str]:
    candidates = list(_LEGACY)
    guess = from_bytes(data[:200_000]).best()
    if guess is not None and guess.encoding not in candidates:
        candidates.append(guess.encoding)  # last: on a tie our list (the usual Russian pages) wins
    best: tuple[float, str, str] | None = None
    for enc in candidates:
        try:
            text = data.decode(enc)
        except (UnicodeDecodeError, LookupError):
            continue
        score = _plausibility(text)
        if best is None or score > best[0]:
            best = (score, enc, text)
    if best is None or best[0] < 0.3:
        raise ParseError(f"{name}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}) and no "
                         "known encoding fits; re-save it as UTF-8")
    return best[2], best[1]


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _sections_from_headings(text: str, headings: list[tuple[int, int, str]]) -> tuple[Section, ...]:
    """headings: (char offset, level, title). Each section runs from its heading to the next one."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    bounds = [h[0] for h in headings] + [len(text)]
    if headings and headings[0][0] > 0 and text[: headings[0][0]].strip():
        sections.append(Section((), 0, headings[0][0]))
    for i, (pos, level, title) in enumerate(headings):
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        sections.append(Section(tuple(t for _, t in path), pos, bounds[i + 1]))
    if not headings:
        sections.append(Section((), 0, len(text)))
    return tuple(sections)


_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


# An underline (or overline) of a reStructuredText section title / Markdown setext heading: one punctuation character
# repeated. A table border ("=====  =====", "+---+---+") holds spaces or other characters and is never one.
_ADORNMENT = re.compile(r"([=\-~+^*#])\1+[ \t]*")


# Plain text (_parse_text) marks a title the same way, but nothing declares the file to be marked up: a rule line of
# dashes is as often a separator between paragraphs, a signature's '-- ' or a table's border. There an adornment is
# at least three of one of these characters, and the title it marks is a short line that reads as a title.
_TEXT_RULE = re.compile(r"([=\-~*#])\1{2,}[ \t]*")
_LIST_ITEM = re.compile(r"[-*+\u2022][ \t]")  # a bullet item ('- Fixes ...', '* item')
_COLUMNS = re.compile(r"\S(?: {2,}|\t)\S|\|")  # a table row: columns set apart by runs of spaces, a tab or '|'


def _text_title(line: str) -> bool:
    """Whether a plain-text line marked by adornment lines reads as a title: short (at most MAX_HEADING_WORDS words
    and MAX_HEADING_CHARS characters), with a letter or digit, not closed as a sentence or clause ('.', '!', ',',
    ';'; a question may be a title), not a bullet item and not a table row."""
    t = line.strip()
    return (0 < len(t.split()) <= MAX_HEADING_WORDS and len(t) <= MAX_HEADING_CHARS and any(ch.isalnum() for ch in t)
            and not t.endswith((".", "!", ",", ";")) and not _LIST_ITEM.match(t) and not _COLUMNS.search(t))


def _underline_headings(lines: list[str], in_fence: list[bool], *, plain: bool = False
                        ) -> dict[int, tuple[int, str, str]]:
    """Section titles marked by adornment lines, the reStructuredText rule (Markdown's setext '=' / '-' headings
    are the same rule): a title line directly under a blank line (or the start), not indented, followed by an
    underline of one repeated character at least as long as the title; or an overline, a title (which may be inset)
    no longer than it, an underline of the same character and length, and a blank line (or the end). An underline shorter than the
    title, a transition ('----' between blank lines), or a table border is no heading.
    `plain`: the rule for plain text, where nothing says the file is marked up: an adornment is at least three of
    one of '= - ~ * #' (a signature's '-- ' is none), the title must read as one (_text_title), and an over- and
    underlined title may run straight into its body (a release's '----' / 'ZetaOS 3.8.2 - released ...' / '----'
    above its 'Security' list) -- a table's header row between its borders is no title, its columns are apart.
    Returns {index of the heading's first line: (number of lines, style, title)}; style is the character, with '/'
    prefixed when there is an overline (reStructuredText ranks over-and-underlined titles apart)."""
    out: dict[int, tuple[int, str, str]] = {}
    n = len(lines)
    rule = _TEXT_RULE if plain else _ADORNMENT

    def blank(i: int) -> bool:
        return i < 0 or i >= n or not lines[i].strip()

    def adornment(i: int) -> str | None:
        return lines[i].rstrip() if 0 <= i < n and not in_fence[i] and rule.fullmatch(lines[i]) else None

    def titled(line: str) -> bool:
        return not plain or _text_title(line)

    i = 0
    while i < n:
        if in_fence[i] or blank(i):
            i += 1
            continue
        over = adornment(i)
        if over is not None and blank(i - 1) and i + 2 < n:  # overline, title (may be inset), underline
            title, under = lines[i + 1].strip(), adornment(i + 2)
            if (title and under == over and len(title) <= len(over) and not _ADORNMENT.fullmatch(title)
                    and titled(title) and (plain or blank(i + 3))
                    and not (i == 0 and over == "---")):  # not a YAML front matter fence
                out[i] = (3, "/" + over[0], title)
                i += 3
                continue
        line = lines[i]
        under = adornment(i + 1)
        if (over is None and under is not None and blank(i - 1) and not line[0].isspace()
                and len(under) >= len(line.rstrip()) and any(ch.isalnum() for ch in line) and titled(line)):
            out[i] = (2, under[0], line.strip())
            i += 2
            continue
        i += 1
    return out


def _parse_markdown(name: str, data: bytes) -> ParsedDocument:
    text, encoding = decode_text(name, data)
    lines = text.split("\n")
    fenced: list[bool] = []  # a line inside (or opening / closing) a ``` fence
    in_fence = False
    for line in lines:
        fence = line.lstrip().startswith("```")
        fenced.append(in_fence or fence)
        if fence:
            in_fence = not in_fence
    underlined = _underline_headings(lines, fenced)
    atx = any(not f and _MD_HEADING.match(ln) for ln, f in zip(lines, fenced))
    styles: list[str] = []  # underline styles in order of first use: reStructuredText levels
    headings: list[tuple[int, int, str]] = []
    offset = 0
    skip = 0
    for i, line in enumerate(lines):
        if skip:
            skip -= 1
        elif i in underlined:
            count, style, title = underlined[i]
            skip = count - 1
            if style not in styles:
                styles.append(style)
            # Beside '#' headings, a setext '=' is a level-1 and '-' a level-2 heading (Markdown); otherwise the
            # order in which the styles first appear gives the levels (reStructuredText).
            level = ({"=": 1, "-": 2}.get(style) if atx else None) or min(6, styles.index(style) + 1)
            headings.append((offset, level, title))
        elif not fenced[i]:
            m = _MD_HEADING.match(line)
            if m:
                headings.append((offset, len(m.group(1)), m.group(2).strip()))
        offset += len(line) + 1
    title = _header_name(lines) or (headings[0][2] if headings else PurePath(name).stem)
    return ParsedDocument(name, "md", text, _sections_from_headings(text, headings), title, encoding)


_HEADER_FIELD = re.compile(r"^(?P<key>[A-Za-z][\w\-]*)\s*:\s+(?P<value>\S.*)$")


def _header_name(lines: Sequence[str]) -> str:
    """The name a document's opening header gives it: a file that opens with a run of `Key: Value` fields (a
    package's METADATA, a memo's header) holding a 'Name' or 'Title' field is that record's, whatever heading its
    body opens with ('## FastAPI of CLIs' in the description of another package); '' when there is none."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            break
        if line[:1] in (" ", "\t") and fields:
            continue  # a folded line of the field before
        m = _HEADER_FIELD.match(line)
        if m is None:
            return ""
        fields.setdefault(m.group("key").lower(), m.group("value").strip())
    if len(fields) < 2:
        return ""
    return fields.get("name") or fields.get("title") or ""


def _parse_text(name: str, data: bytes) -> ParsedDocument:
    """Plain text; a title marked by adornment lines (over- and underlined, or underlined: _underline_headings with
    the plain-text rule) is a heading, levelled by the order in which its style first appears as in
    reStructuredText."""
    text, encoding = decode_text(name, data)
    lines = text.split("\n")
    underlined = _underline_headings(lines, [False] * len(lines), plain=True)
    styles: list[str] = []
    headings: list[tuple[int, int, str]] = []
    offset = 0
    for i, line in enumerate(lines):
        if i in underlined:
            _, style, title = underlined[i]
            if style not in styles:
                styles.append(style)
            headings.append((offset, min(6, styles.index(style) + 1), title))
        offset += len(line) + 1
    first = next((ln.strip() for ln in lines if ln.strip() and not _TEXT_RULE.fullmatch(ln)), PurePath(name).stem)
    title = headings[0][2] if headings and not text[:headings[0][0]].strip() else first  # a heading that opens it
    return ParsedDocument(name, "txt", text, _sections_from_headings(text, headings), title[:120], encoding)


class _HTMLText(HTMLParser):
    BLOCK = {"p", "div", "li", "ul", "ol", "tr", "table", "section", "article", "br", "pre", "blockquote",
             "h1", "h2", "h3", "h4", "h5", "h6", "header", "footer", "main", "nav", "dd", "dt", "title"}
    SKIP = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.length = 0
        self.headings: list[tuple[int, int, str]] = []
        self._skip = 0
        self._heading: tuple[int, int, list[str]] | None = None
        self.title = ""
        self._in_title = False

    def _emit(self, s: str) -> None:
        self.parts.append(s)
        self.length += len(s)

    def _block_break(self) -> None:
        if self.parts and not self.parts[-1].endswith("\n\n"):
            self._emit("\n\n" if not self.parts[-1].endswith("\n") else "\n")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self._skip += 1
            return
        if tag in self.BLOCK:
            self._block_break()
        if re.fullmatch(r"h[1-6]", tag) and not self._skip:
            self._heading = (self.length, int(tag[1]), [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if self._heading and re.fullmatch(r"h[1-6]", tag):
            pos, level, words = self._heading
            title = " ".join("".join(words).split())
            if title:
                self.headings.append((pos, level, title))
            self._heading = None
        if tag in self.BLOCK:
            self._block_break()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._skip:
            return
        chunk = re.sub(r"\s+", " ", data)
        if not chunk.strip():
            if self.parts and not self.parts[-1].endswith((" ", "\n")):
                self._emit(" ")
            return
        if self.parts and self.parts[-1].endswith("\n"):
            chunk = chunk.lstrip()
        self._emit(chunk)
        if self._heading:
            self._heading[2].append(chunk)


def _parse_html(name: str, data: bytes) -> ParsedDocument:
    raw, encoding = decode_text(name, data)
    p = _HTMLText()
    try:
        p.feed(raw)
        p.close()
    except Exception as exc:  # html.parser is lenient; anything it raises means the file is unusable
        raise ParseError(f"{name}: cannot parse HTML ({exc})") from exc
    text = "".join(p.parts)
    title = " ".join(unescape(p.title).split()) or (p.headings[0][2] if p.headings else PurePath(name).stem)
    return ParsedDocument(name, "html", text, _sections_from_headings(text, p.headings), title, encoding)


def _parse_pdf(name: str, data: bytes) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    if not data.lstrip().startswith(b"%PDF"):
        raise ParseError(f"{name}: not a PDF (missing %PDF header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception:
                ok = 0
            if not ok:
                raise ParseError(f"{name}: the PDF is password-protected; remove the password and upload again")
        page_runs: list[list[tuple[str, float, bool]]] = []  # per page: (text, size, bold) runs in reading order
        pages = []
        for page in reader.pages:
            runs: list[tuple[str, float, bool]] = []
            pages.append(page.extract_text(visitor_text=lambda t, cm, tm, font, size: runs.append(
                (t, _run_size(size, cm, tm), _is_bold(font)))) or "")
            page_runs.append(runs)
    except ParseError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ParseError(f"{name}: corrupt PDF ({type(exc).__name__}: {exc})") from exc
    except Exception as exc:  # pypdf raises a wide range of errors on damaged files
        if "crypt" in str(exc).lower():
            raise ParseError(f"{name}: the PDF is encrypted and cannot be read ({exc})") from exc
        raise ParseError(f"{name}: corrupt PDF ({type(exc).__name__}: {exc})") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text.strip():
        raise ParseError(f"{name}: the PDF has no extractable text (scanned images need OCR, which is not supported)")
    first = next((ln.strip() for ln in text.split("\n") if ln.strip()), PurePath(name).stem)
    headings = pdf_headings(text, [r for page in page_runs for r in page])
    title = headings[0][2] if headings and not text[:headings[0][0]].strip() else first  # a heading that opens it
    return ParsedDocument(name, "pdf", text, _sections_from_headings(text, headings), title[:120])


# -- PDF headings from the fonts: larger than the body text, or bold at its size --------------------------------------
HEADING_SCALE = 1.12  # a line this much larger than the body size is a heading
MAX_HEADING_WORDS = 14
MAX_HEADING_SHARE = 0.5  # more heading-like lines than this (an all-bold file, a slide deck): no structure is read


def _run_size(size: float, cm: Any, tm: Any) -> float:
    """The rendered font size of a text run: the font size scaled by the text and transformation matrices."""
    try:
        scale = abs(float(tm[3])) * (abs(float(cm[3])) or 1.0)
    except (TypeError, IndexError, ValueError):
        scale = 1.0
    return round(float(size or 0.0) * (scale or 1.0), 2)


def _is_bold(font: Any) -> bool:
    try:
        base = str(font.get("/BaseFont", "")) if font else ""
    except AttributeError:
        return False
    return any(w in base.lower() for w in ("bold", "black", "heavy", "semibold", "demi"))


def pdf_headings(text: str, runs: Sequence[tuple[str, float, bool]]) -> list[tuple[int, int, str]]:
    """Heading lines of a PDF's extracted text from its text runs (text, rendered size, bold): a short line set
    larger than the body text (the size most characters have), or bold at the body size, without a closing period.
    Levels follow the sizes (largest = 1); adjacent lines of one heading (a wrapped title) join. Returns
    (char offset in `text`, level, title) as _sections_from_headings takes them; [] when the file shows no
    such structure."""
    lines: list[tuple[str, float, bool]] = []
    cur: list[tuple[str, float, bool]] = []
    for t, size, bold in [*runs, ("\n", 0.0, False)]:
        parts = t.split("\n")
        for k, part in enumerate(parts):
            if part:
                cur.append((part, size, bold))
            if k < len(parts) - 1 and cur:
                chars = [(len(p.strip()), s, b) for p, s, b in cur if p.strip()]
                n = sum(c for c, _, _ in chars)
                if n:
                    size_of = max({s for _, s, _ in chars}, key=lambda s: sum(c for c, x, _ in chars if x == s))
                    lines.append(("".join(p for p, _, _ in cur).strip(), size_of,
                                  sum(c for c, _, b in chars if b) == n))
                cur = []
    if not lines:
        return []
    weight: dict[float, int] = {}
    for line, size, _ in lines:
        weight[size] = weight.get(size, 0) + len(line)
    body = max(weight, key=weight.__getitem__)
    # Bold marks a heading only where the body text is not bold itself.
    at_body = [(len(line), bold) for line, size, bold in lines if size == body]
    bold_body = sum(n for n, b in at_body if b) > 0.5 * sum(n for n, _ in at_body)

    def heading_like(line: str, size: float, bold: bool) -> bool:
        words = line.split()
        return (0 < len(words) <= MAX_HEADING_WORDS and not line.endswith((".", ",", ";", ":"))
                and any(ch.isalpha() for ch in line)
                and (size >= body * HEADING_SCALE or (bold and not bold_body and size >= body * 0.95)))

    marks = [heading_like(*ln) for ln in lines]
    if sum(marks) > MAX_HEADING_SHARE * len(lines):
        return []
    sizes = sorted({round(s * 2) / 2 for (_, s, _), m in zip(lines, marks) if m and s >= body * HEADING_SCALE},
                   reverse=True)
    out: list[tuple[int, int, str]] = []
    pos = 0
    prev: tuple[int, float] | None = None  # index and size of the heading line just before
    for i, ((line, size, _), m) in enumerate(zip(lines, marks)):
        found = text.find(line, pos)
        if found < 0:
            continue
        pos = found + len(line)
        if not m:
            prev = None
            continue
        big = round(size * 2) / 2
        level = min(6, sizes.index(big) + 1 if big in sizes else len(sizes) + 1)
        if prev is not None and prev == (i - 1, size) and out:
            at, lvl, title = out[-1]
            out[-1] = (at, lvl, f"{title} {line}")  # a heading wrapped onto a second line
        else:
            out.append((found, level, line))
        prev = (i, size)
    return out


def check_zip(name: str, data: bytes) -> None:
    """Refuse a zip whose entries would unpack to too much (a decompression bomb) before anything unpacks it.
    Sizes come from the central directory; a lying header is caught later by the parse sandbox's memory bound."""
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ParseError(f"{name}: damaged zip archive ({exc})") from exc
    if len(infos) > MAX_ZIP_ENTRIES:
        raise ParseError(f"{name}: the archive holds {len(infos):,} entries (at most {MAX_ZIP_ENTRIES:,}); skipped")
    total = sum(i.file_size for i in infos)
    if total > MAX_ZIP_UNCOMPRESSED:
        raise ParseError(f"{name}: unpacks to {human_size(total)} (at most {human_size(MAX_ZIP_UNCOMPRESSED)}); "
                         "looks like a decompression bomb; skipped")
    for i in infos:
        if i.file_size > 1_000_000 and i.file_size > MAX_ZIP_RATIO * max(1, i.compress_size):
            raise ParseError(f"{name}: {i.filename} unpacks {i.file_size // max(1, i.compress_size):,}x "
                             f"({human_size(i.compress_size)} -> {human_size(i.file_size)}); looks like a "
                             "decompression bomb; skipped")


def _parse_docx(name: str, data: bytes) -> ParsedDocument:
    import docx

    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise ParseError(f"{name}: not a valid .docx (a .docx file is a zip archive; this one is not)")
    check_zip(name, data)
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise ParseError(f"{name}: cannot read .docx ({type(exc).__name__}: {exc})") from exc
    parts: list[str] = []
    headings: list[tuple[int, int, str]] = []
    length = 0
    # Read the XML directly: python-docx's Paragraph.style looks the style up per paragraph (quadratic in a long
    # file); one id -> name map and an iteration over w:p do the same in one pass.
    w = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    style_names: dict[str, str] = {}
    for el in document.styles.element.iter(f"{w}style"):
        name_el = el.find(f"{w}name")
        style_names[el.get(f"{w}styleId") or ""] = (name_el.get(f"{w}val") if name_el is not None else "") or ""
    for p in document.element.body.iterchildren(f"{w}p"):
        txt = "".join(t.text or "" for t in p.iter(f"{w}t")).strip()
        if not txt:
            continue
        ps = p.find(f"{w}pPr/{w}pStyle")
        sid = (ps.get(f"{w}val") if ps is not None else "") or ""
        style = style_names.get(sid, sid)
        # Built-in names are stored lower-case in the XML ("heading 1"); python-docx showed them capitalised.
        m = re.match(r"(?:heading|заголовок)\s*(\d)", style, re.I)
        if m or style.lower() == "title":
            headings.append((length, int(m.group(1)) if m else 0, txt))
        parts.append(txt)
        length += len(txt) + 2
    for table in document.tables:
        for row in table.rows:
            line = " | ".join(cell.text.strip() for cell in row.cells)
            if line.strip(" |"):
                parts.append(line)
                length += len(line) + 2
    text = "\n\n".join(parts)
    title = headings[0][2] if headings else PurePath(name).stem
    return ParsedDocument(name, "docx", text, _sections_from_headings(text, headings), title)
