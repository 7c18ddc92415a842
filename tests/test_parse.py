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


def _styled_pdf(lines: list[tuple[str, str, float]]) -> bytes:
    """A one-page PDF with one text line per (font 'R' regular or 'B' bold, text, size), top to bottom."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    w = PdfWriter()
    page = w.add_blank_page(width=595, height=842)

    def font(base: str) -> DictionaryObject:
        return DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                                 NameObject("/BaseFont"): NameObject(base)})

    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
        {NameObject("/R"): w._add_object(font("/Helvetica")), NameObject("/B"): w._add_object(font("/Helvetica-Bold"))})})
    y, ops = 800.0, []
    for f, text, size in lines:
        y -= size * 1.6
        ops.append(f"BT /{f} {size} Tf 1 0 0 1 50 {y:.1f} Tm ({text}) Tj ET")
    stream = DecodedStreamObject()
    stream.set_data("\n".join(ops).encode())
    page[NameObject("/Contents")] = w._add_object(stream)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def test_pdf_headings_come_from_font_size_and_bold_runs() -> None:
    body = "The pump station logs the pressure every hour and the crew reads it at dawn."
    pdf = _styled_pdf([("B", "Field Manual for", 18), ("B", "Pump Stations", 18), ("R", body, 10),
                       ("B", "Maintenance", 13), ("R", body, 10), ("R", body, 10),
                       ("B", "Valve checks", 10), ("R", body, 10), ("B", "Bold words close a sentence.", 10),
                       ("R", body, 10), ("B", "Staffing", 13), ("R", body, 10)])
    doc = parse("manual.pdf", pdf)
    paths = [s.heading_path for s in doc.sections]
    assert paths == [("Field Manual for Pump Stations",),  # a title wrapped onto two lines joins
                     ("Field Manual for Pump Stations", "Maintenance"),
                     ("Field Manual for Pump Stations", "Maintenance", "Valve checks"),  # bold at body size: lowest
                     ("Field Manual for Pump Stations", "Staffing")]
    assert doc.title == "Field Manual for Pump Stations"
    assert doc.text[doc.sections[1].start:].startswith("Maintenance")
    # every line bold (or no size contrast at all): no structure is read into it
    flat = parse("flat.pdf", _styled_pdf([("B", "Pump log", 10), ("B", body, 10), ("B", "Valve log", 10)]))
    assert [s.heading_path for s in flat.sections] == [()]


def test_restructuredtext_underlined_titles_are_headings() -> None:
    # reStructuredText (a package's long description): levels follow the order in which the adornment styles first
    # appear, an over-and-underlined title is a style of its own.
    rst = ("=====\nJedi\n=====\n\nIntro.\n\nChangelog\n---------\n\n0.20.0 (2026-05-02)\n+++++++++++++++++++\n\n"
           "- Dropped Python 3.8 support.\n\n0.19.0 (2023-07-29)\n+++++++++++++++++++\n\n- Python 3.12.\n\n"
           "Credits\n-------\n\nThanks.\n")
    doc = parse("jedi.md", rst.encode())
    assert [s.heading_path for s in doc.sections] == [
        ("Jedi",), ("Jedi", "Changelog"), ("Jedi", "Changelog", "0.20.0 (2026-05-02)"),
        ("Jedi", "Changelog", "0.19.0 (2023-07-29)"), ("Jedi", "Credits")]
    assert doc.text[doc.sections[2].start:].startswith("0.20.0 (2026-05-02)\n+++")
    assert doc.title == "Jedi"


def test_short_underlines_transitions_and_table_borders_are_no_headings() -> None:
    text = ("Title\n===\n\nA paragraph.\n\n----\n\nAfter a transition.\n\n=====  =====\ncol1   col2\n=====  =====\n"
            "a      b\n=====  =====\n\n+-----+-----+\n| x   | y   |\n+-----+-----+\n\n    indented\n    --------\n\n"
            "```\ncode\n====\n```\n")
    assert [s.heading_path for s in parse("t.md", text.encode()).sections] == [()]
    # a YAML front matter fence is no overline
    assert [s.heading_path for s in parse("y.md", b"---\nab\n---\n\nBody.\n").sections] == [()]


def test_markdown_setext_headings_follow_the_same_rule() -> None:
    doc = parse("s.md", b"Guide\n=====\n\nIntro.\n\nSetup\n-----\n\nSteps.\n\nMore\n====\n\nEnd.\n")
    assert [s.heading_path for s in doc.sections] == [("Guide",), ("Guide", "Setup"), ("More",)]
    # beside '#' headings, '=' is level 1 and '-' level 2 whatever comes first
    doc = parse("m.md", b"# A\n\nSub\n---\n\nx\n\nTop\n===\n\ny\n\n## Two\n\nz\n")
    assert [s.heading_path for s in doc.sections] == [("A",), ("A", "Sub"), ("Top",), ("Top", "Two")]
    # a .txt file reads the same underline (see test_plain_text_adorned_titles_are_headings)
    assert [s.heading_path for s in parse("s.txt", b"Guide\n=====\n\nIntro.\n").sections] == [("Guide",)]


RELEASE_NOTES = ("ZETAOS RELEASE NOTES\nAcme firmware team\n\nZetaOS runs on every Acme gateway.\n\n"
                 "-------------------------------------------\nZetaOS 3.9.0 - released 10 September 2024\n"
                 "-------------------------------------------\nNew features\n- TLS 1.3 is the default.\n\n"
                 "-------------------------------------------\nZetaOS 3.8.2 - released 20 June 2024\n"
                 "-------------------------------------------\nSecurity\n- Fixes ZSEC-011, a weakness in the "
                 "bootloader.\n\n-------------------------------------------\nSupport policy\n"
                 "-------------------------------------------\nAcme supports two releases.\n")


def test_plain_text_adorned_titles_are_headings() -> None:
    # an over- and underlined title may run straight into its body (no blank line): a release's heading
    doc = parse("notes.txt", RELEASE_NOTES.encode())
    assert [s.heading_path for s in doc.sections] == [
        (), ("ZetaOS 3.9.0 - released 10 September 2024",), ("ZetaOS 3.8.2 - released 20 June 2024",),
        ("Support policy",)]
    assert doc.text[doc.sections[2].start:].startswith("----")
    assert doc.title == "ZETAOS RELEASE NOTES"  # the first line, which is no heading
    # setext / reStructuredText underlines: levels in the order the styles first appear; a heading that opens the
    # file names it, not its overline
    doc = parse("g.txt", b"==========\nAcme Guide\n==========\n\nIntro.\n\nSetup\n-----\n\nSteps.\n\n"
                         b"Is it safe?\n~~~~~~~~~~~\nYes.\n\nUpgrade\n-------\n\nRun it.\n")
    assert [s.heading_path for s in doc.sections] == [
        ("Acme Guide",), ("Acme Guide", "Setup"), ("Acme Guide", "Setup", "Is it safe?"), ("Acme Guide", "Upgrade")]
    assert doc.title == "Acme Guide"
    assert parse("r.txt", b"----------\nA note about it.\n").title == "A note about it."  # not the rule line


def test_plain_text_rules_that_mark_no_title_stay_text() -> None:
    text = ("First paragraph.\n\n-----------------\n\nAfter a separator.\n\n"  # a rule between paragraphs
            "Closing sentence here.\n----------------------\n\n"  # a sentence closed by a rule
            "Best regards\n-- \nJane\n\n"  # a signature separator
            "--------------------\nName        Value\n--------------------\nport        8080\n"
            "--------------------\n\n"  # a table's borders around its header row
            "---------------\n| col | val |\n---------------\n\n"
            "- a list item\n-------------\n\n"
            "Ab\n==\n\n"  # a rule of two characters
            "Title\n---\n\n"  # an underline shorter than its title
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen\n"
            "=========================================================================================\n\n"
            "    indented\n    --------\n")
    assert [s.heading_path for s in parse("t.txt", text.encode()).sections] == [()]


def test_a_file_opening_with_a_header_is_named_by_its_name_field() -> None:
    meta = (b"Metadata-Version: 2.4\nName: betatool\nVersion: 0.3.1\nClassifier: Topic :: Software\n"
            b"  Development\nSummary: A tool\n\n<p>logo</p>\n\n## The Acmeweb of CLIs\n\nBetatool is small.\n")
    assert parse("betatool.md", meta).title == "betatool"  # not its description's first heading
    assert parse("memo.md", b"Title: Quarterly plan\nDate: 2024-01-02\n\n# Agenda\n\nText.\n").title == "Quarterly plan"
    assert parse("doc.md", b"# Policy\n\nName: x\nTitle: y\n").title == "Policy"  # fields later in a body: no header
    assert parse("one.md", b"Name: solo\n\n# Heading\n\nText.\n").title == "Heading"  # one field is no header
