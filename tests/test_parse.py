"""Parsers on good and broken files: every failure names the file and the problem."""
from __future__ import annotations

import pytest

from core.ingest.parse import ParseError, parse
from tests.bad_inputs import docx_with, empty_pdf, pdf_with_text


def test_pdf_text_is_extracted() -> None:
    doc = parse("report.pdf", pdf_with_text("Revenue grew 3 percent in Q2"))
    assert "Revenue grew 3 percent in Q2" in doc.text and doc.kind == "pdf"


def test_docx_headings_become_sections() -> None:
    data = docx_with([("Heading 1", "Policy"), ("Normal", "Staff may work remotely."),
                      ("Heading 2", "Equipment"), ("Normal", "Laptops are issued by IT.")])
    doc = parse("p.docx", data)
    assert doc.title == "Policy"
    assert [s.heading_path for s in doc.sections] == [("Policy",), ("Policy", "Equipment")]
    eq = doc.sections[1]
    assert "Laptops are issued by IT." in doc.text[eq.start : eq.end]


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("empty.txt", b"", "empty"),
        ("blank.md", b"   \n\n ", "empty"),
        ("scan.pdf", empty_pdf(), "no extractable text"),
        ("broken.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 4, "corrupt PDF"),
        ("fake.pdf", b"hello, not a pdf", "not a PDF"),
        ("locked.pdf", pdf_with_text("secret", password="hunter2"), "password"),
        ("notzip.docx", b"this is plain text pretending to be docx", "not a valid .docx"),
        ("binary.txt", bytes([0, 1, 2, 3, 255, 254]) * 100, "binary"),
        ("random.txt", bytes(range(128, 256)) * 40, "no known encoding fits"),
        ("image.png", b"\x89PNG....", "unsupported file type"),
    ],
)
def test_bad_files_get_a_clear_message_naming_the_file(name: str, data: bytes, needle: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(name, data)
    assert str(info.value).startswith(name + ":")
    assert needle in str(info.value)


def test_size_limit() -> None:
    with pytest.raises(ParseError, match="over the upload limit"):
        parse("big.txt", b"a " * 600_000, max_bytes=1_000_000)


def test_markdown_fenced_code_is_not_a_heading() -> None:
    doc = parse("c.md", b"# Real\n\n```\n# not a heading\n```\n")
    assert [s.heading_path for s in doc.sections] == [("Real",)]
