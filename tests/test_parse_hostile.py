"""Hostile uploads (issue #12): decompression bombs, parse deadline and memory bound, metadata caps, encodings,
and progress inside one big file."""
from __future__ import annotations

import io
import zipfile

import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.chunk import chunk_document
from core.ingest.parse import (
    MAX_HEADING_CHARS,
    MAX_PATH_CHARS,
    MAX_TITLE_CHARS,
    ParseError,
    parse,
)
from core.ingest.pipeline import GROUP_CHUNKS, ingest_files
from core.ingest.sandbox import ParseSandbox
from tests.bad_inputs import docx_with_body

RU = "Выручка выросла на пять процентов во втором квартале, а расходы снизились."


def test_docx_bomb_is_refused_before_parsing() -> None:
    bomb = docx_with_body("<w:p><w:r><w:t>a</w:t></w:r></w:p>" * 60_000)  # ~2 MB of XML packed ~300x
    assert len(bomb) < 60_000  # the empty template is ~37 kB of it
    with pytest.raises(ParseError, match=r"^bomb.docx: word/document.xml unpacks \d+x .*decompression bomb"):
        parse("bomb.docx", bomb)


def test_zip_with_too_many_entries_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for i in range(2001):
            z.writestr(f"f{i}.xml", "")
    with pytest.raises(ParseError, match="2,001 entries"):
        parse("many.docx", out.getvalue())


def test_sandbox_parses_like_parse_and_reports_errors_by_name() -> None:
    sb = ParseSandbox()
    try:
        data = b"# Title\n\n## Part\n\nSome text here."
        assert sb.parse("a.md", data) == parse("a.md", data)
        with pytest.raises(ParseError, match="^x.pdf: not a PDF"):
            sb.parse("x.pdf", b"hello")
        with pytest.raises(ParseError, match="over the upload limit"):
            sb.parse("big.txt", b"a" * 2000, max_bytes=1000)
        assert sb.started == 1  # one worker served every file
    finally:
        sb.close()


def test_sandbox_deadline_skips_the_file_and_the_next_file_still_parses() -> None:
    sb = ParseSandbox(timeout_s=0.3)
    try:
        with pytest.raises(ParseError, match=r"^nest.html: took more than 0.3 s of CPU time to parse; skipped"):
            sb.parse("nest.html", b"<div>" * 400_000 + b"deep")  # ~4 s of html.parser work
        assert sb.parse("ok.md", b"# Fine\n\ntext").title == "Fine"
        assert sb.started == 2  # the stuck worker was killed and replaced
    finally:
        sb.close()


def test_sandbox_memory_bound() -> None:
    sb = ParseSandbox(memory_mb=120)
    try:
        with pytest.raises(ParseError, match="^big.txt: needs more than 120 MB of memory to parse; skipped"):
            sb.parse("big.txt", ("жук " * 4_000_000).encode())
        assert sb.parse("ok.txt", b"still works").text == "still works"
    finally:
        sb.close()


def test_one_huge_heading_is_capped_in_title_and_every_chunk() -> None:
    heading = " ".join(f"w{i}" for i in range(20_000))  # ~120 kB, one line (the 1 MB case in miniature)
    body = "\n\n".join(f"Paragraph {i} says something short about topic {i}." for i in range(60))
    data = f"# {heading}\n\n{body}\n".encode()
    doc = parse("big-heading.md", data)
    assert len(doc.title) <= MAX_TITLE_CHARS and doc.title.endswith("…")
    chunks = chunk_document(doc, "d1", strategy="structure", size=60, overlap=10)
    text_chars = sum(len(c.text) for c in chunks)
    meta_chars = sum(len("".join(c.heading_path)) for c in chunks)
    assert all(len(h) <= MAX_HEADING_CHARS for c in chunks for h in c.heading_path)
    assert all(sum(map(len, c.heading_path)) <= MAX_PATH_CHARS for c in chunks)
    assert meta_chars <= text_chars  # metadata is bounded by the text, not multiplied by the chunk count


def test_deep_heading_paths_keep_outer_and_inner_headings() -> None:
    md = "".join(f"{'#' * lvl} {'H' * 150}{lvl}\n\ntext {lvl}\n\n" for lvl in range(1, 7)).encode()
    path = parse("deep.md", md).sections[-1].heading_path
    assert sum(map(len, path)) <= MAX_PATH_CHARS
    assert path[0].endswith("1") and path[-1].endswith("6")


def test_over_long_file_name_is_refused() -> None:
    with pytest.raises(ParseError, match="file name is 300 characters long"):
        parse("a" * 296 + ".txt", b"hello")


@pytest.mark.parametrize(("codec", "data_codec", "expected"), [
    ("utf-16", "utf-16", "utf-16-le (BOM)"),          # Python writes a BOM, little-endian here
    ("utf-16-le", "utf-16-le", "utf-16-le"),
    ("utf-16-be", "utf-16-be", "utf-16-be"),
    ("utf-16-be+bom", "utf-16-be", "utf-16-be (BOM)"),
    ("utf-32", "utf-32", "utf-32-le (BOM)"),
    ("utf-32-le", "utf-32-le", "utf-32-le"),
    ("utf-32-be", "utf-32-be", "utf-32-be"),
    ("utf-8-sig", "utf-8-sig", "utf-8 (BOM)"),
    ("cp1251", "cp1251", "cp1251"),
    ("koi8-r", "koi8_r", "koi8_r"),
])
def test_encodings_ingest_with_the_right_text(codec: str, data_codec: str, expected: str) -> None:
    text = f"{RU}\nМодель BM25 и reranker.\n"
    data = text.encode(data_codec)
    if codec == "utf-16-be+bom":
        data = b"\xfe\xff" + data
    doc = parse("ru.txt", data)
    assert doc.text == text
    assert doc.encoding == expected


def test_short_cp1251_and_koi8_words_decode() -> None:
    assert parse("a.txt", "Выручка выросла".encode("cp1251")).text == "Выручка выросла"
    assert parse("b.txt", "Выручка выросла".encode("koi8_r")).text == "Выручка выросла"


def test_western_code_page_stays_western() -> None:
    doc = parse("fr.txt", "Le café est très bon, déjà vu.".encode("cp1252"))
    assert doc.text == "Le café est très bon, déjà vu." and doc.encoding == "cp1252"


def test_encoding_is_reported_in_the_ingest_result(deps: Deps) -> None:
    rep = ingest_files([("ru.txt", RU.encode("cp1251"))], store=deps.store, embedder=deps.embedder,
                       config=PipelineConfig())
    assert rep.results[0].status == "ingested" and rep.results[0].encoding == "cp1251"
    assert deps.store.corpus.document_text(rep.results[0].doc_id) == RU


def test_progress_moves_inside_one_big_file(deps: Deps) -> None:
    body = "\n\n".join(f"## Heading {i}\n\nLine {i} of the long file." for i in range(GROUP_CHUNKS * 2 + 10))
    seen: list[tuple[float, int, str]] = []
    rep = ingest_files([("small.md", b"# a\n\nb"), ("long.md", body.encode())], store=deps.store,
                       embedder=deps.embedder, config=PipelineConfig(),
                       progress=lambda d, n, msg: seen.append((d, n, msg)))
    assert [r.status for r in rep.results] == ["ingested", "ingested"]
    inside = [d for d, _, msg in seen if "chunks embedded" in msg and msg.startswith("long.md")]
    assert len(inside) == 3 and 1 < inside[0] < inside[1] < 2 and inside[-1] == 2  # 256, 512, all of 522
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)  # never goes backwards
