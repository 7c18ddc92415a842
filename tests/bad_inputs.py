"""Builders of broken uploads for the bad-input tests (made on the fly; nothing binary is committed)."""
from __future__ import annotations

import io
import zipfile


def pdf_with_text(text: str, password: str | None = None, extra_stream: bytes | None = None) -> bytes:
    """A one-page PDF carrying `text`, optionally encrypted with a user password. `extra_stream` is appended to the
    page's content stream, which is then deflated: a small file that inflates to many MB (a decompression bomb)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    w = PdfWriter()
    page = w.add_blank_page(width=300, height=200)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): w._add_object(font)})})
    stream = DecodedStreamObject()
    body = f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode()
    stream.set_data(body + b"\n" + extra_stream if extra_stream else body)
    if extra_stream:
        stream = stream.flate_encode()
    page[NameObject("/Contents")] = w._add_object(stream)
    if password:
        w.encrypt(user_password=password, owner_password=password + "-owner")
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def empty_pdf() -> bytes:
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(width=100, height=100)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def docx_with(paragraphs: list[tuple[str, str]]) -> bytes:
    import docx

    d = docx.Document()
    for style, text in paragraphs:
        d.add_paragraph(text, style=style)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def docx_with_body(extra_xml: str) -> bytes:
    """A real .docx whose document.xml gets `extra_xml` inserted at the start of the body."""
    base = docx_with([("Normal", "x")])
    zin = zipfile.ZipFile(io.BytesIO(base))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "word/document.xml":
                s = data.decode()
                i = s.index("<w:body>") + len("<w:body>")
                data = (s[:i] + extra_xml + s[i:]).encode()
            z.writestr(info.filename, data)
    return out.getvalue()
