"""Turn uploaded bytes (pdf, docx, md, html, txt) into plain text with heading sections, or a clear ParseError."""
from __future__ import annotations

import io
import re
import zipfile
from html import unescape
from html.parser import HTMLParser
from pathlib import PurePath

from core.types import ParsedDocument, Section

SUPPORTED = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".txt": "txt", ".text": "txt",
             ".pdf": "pdf", ".docx": "docx"}


class ParseError(ValueError):
    """A file that cannot be ingested; str() names the file and the problem."""


def kind_of(name: str) -> str:
    ext = PurePath(name).suffix.lower()
    if ext not in SUPPORTED:
        raise ParseError(f"{name}: unsupported file type '{ext or '(none)'}' (supported: pdf, docx, md, html, txt)")
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
    parser = {"md": _parse_markdown, "html": _parse_html, "txt": _parse_text, "pdf": _parse_pdf,
              "docx": _parse_docx}[kind]
    doc = parser(name, data)
    if not doc.text.strip():
        raise ParseError(f"{name}: no text could be extracted")
    return doc


def _decode_text(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ParseError(f"{name}: looks like a binary file (NUL bytes), not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(
            f"{name}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); re-save it as UTF-8"
        ) from exc
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\r\t\f")
    if controls > 0.05 * max(1, min(len(text), 8192)):
        raise ParseError(f"{name}: looks like a binary file (control characters), not text")
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


def _parse_markdown(name: str, data: bytes) -> ParsedDocument:
    text = _decode_text(name, data)
    headings: list[tuple[int, int, str]] = []
    in_fence = False
    offset = 0
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence:
            m = _MD_HEADING.match(line)
            if m:
                headings.append((offset, len(m.group(1)), m.group(2).strip()))
        offset += len(line) + 1
    title = headings[0][2] if headings else PurePath(name).stem
    return ParsedDocument(name, "md", text, _sections_from_headings(text, headings), title)


def _parse_text(name: str, data: bytes) -> ParsedDocument:
    text = _decode_text(name, data)
    first = next((ln.strip() for ln in text.split("\n") if ln.strip()), PurePath(name).stem)
    return ParsedDocument(name, "txt", text, (Section((), 0, len(text)),), first[:120])


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
    raw = _decode_text(name, data)
    p = _HTMLText()
    try:
        p.feed(raw)
        p.close()
    except Exception as exc:  # html.parser is lenient; anything it raises means the file is unusable
        raise ParseError(f"{name}: cannot parse HTML ({exc})") from exc
    text = "".join(p.parts)
    title = " ".join(unescape(p.title).split()) or (p.headings[0][2] if p.headings else PurePath(name).stem)
    return ParsedDocument(name, "html", text, _sections_from_headings(text, p.headings), title)


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
        pages = [(page.extract_text() or "") for page in reader.pages]
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
    return ParsedDocument(name, "pdf", text, (Section((), 0, len(text)),), first[:120])


def _parse_docx(name: str, data: bytes) -> ParsedDocument:
    import docx

    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise ParseError(f"{name}: not a valid .docx (a .docx file is a zip archive; this one is not)")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise ParseError(f"{name}: cannot read .docx ({type(exc).__name__}: {exc})") from exc
    parts: list[str] = []
    headings: list[tuple[int, int, str]] = []
    length = 0
    for para in document.paragraphs:
        txt = para.text.strip()
        if not txt:
            continue
        style = (para.style.name if para.style is not None else "") or ""
        m = re.match(r"(?:Heading|Заголовок)\s*(\d)", style)
        if m or style == "Title":
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
