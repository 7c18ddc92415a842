"""The hostile uploads of the ingest tests (the bench that ran them at full size, bench/hostile.py, is on the lab
branch): >= 300 files of every hostile class, and the counts a consistent database keeps at 0."""
from __future__ import annotations

import io
import os
import random
import zipfile
from typing import Any

from tests.bad_inputs import docx_with, docx_with_body
from tests.bad_inputs import pdf_with_text as _pdf

BEACON = "http://203.0.113.7/pixel.png"


def hostile_files(seed: int = 7, scale: float = 1.0) -> list[tuple[str, bytes, str]]:
    """(name, bytes, class) of >= 300 hostile uploads. `scale` < 1 shrinks the big ones (tests use 0.05)."""
    rng = random.Random(seed)
    out: list[tuple[str, bytes, str]] = []

    def add(cls: str, name: str, data: bytes) -> None:
        out.append((name, data, cls))

    big = max(1, int(scale * 200_000))
    # decompression bombs and broken zips
    for i, n in enumerate([20_000, 60_000, 200_000, 600_000, 2_000_000]):
        n = n if scale >= 1 else max(40_000, int(n * scale))  # 40,000 paragraphs is still a (small) bomb
        add("docx_bomb", f"bomb_{i}.docx", docx_with_body("<w:p><w:r><w:t>a</w:t></w:r></w:p>" * n))
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as z:
        for i in range(2500):
            z.writestr(f"p/{i}.xml", "")
    add("docx_bomb", "many_entries.docx", many.getvalue())
    good_docx = docx_with([("Heading 1", "Policy"), ("Normal", "Staff may work remotely.")])
    for i in range(20):
        add("truncated_docx", f"truncated_{i}.docx", good_docx[: rng.randint(10, len(good_docx) - 1)])
    for i in range(15):
        add("fake_docx", f"fake_{i}.docx", rng.choice([b"plain text pretending", b"PK\x03\x04" + os.urandom(200),
                                                       os.urandom(500), b"<html>no</html>"]))
    # PDFs
    good_pdf = _pdf("Quarterly revenue grew 3 percent")
    for i in range(25):
        add("truncated_pdf", f"truncated_{i}.pdf", good_pdf[: rng.randint(8, len(good_pdf) - 1)])
    for i in range(10):
        add("encrypted_pdf", f"locked_{i}.pdf", _pdf(f"secret {i}", password=f"pw{i}"))
    for i in range(10):
        add("garbage_pdf", f"garbage_{i}.pdf", b"%PDF-1.7\n" + os.urandom(rng.randint(10, 4000)))
    for i, mb in enumerate([1, 5, 20]):
        add("pdf_object_stream", f"stream_{i}.pdf", _pdf("inflates", extra_stream=b"0 0 m\n" * int(mb * scale * 170_000)))
    # Markdown and HTML amplification
    heading = " ".join(f"w{i}" for i in range(big))
    add("huge_heading", "one_heading.md", f"# {heading}\n\n".encode() + b"Body text line.\n\n" * 2000)
    add("many_headings", "ten_thousand_headings.md",
        "".join(f"## H{i}\n\nline {i}\n\n" for i in range(max(100, int(10_000 * scale)))).encode())
    for i, depth in enumerate([1000, 20_000, int(300_000 * scale) or 1000]):
        add("deep_html", f"nest_{i}.html", b"<div>" * depth + b"deep text" + b"</div>" * depth)
    add("deep_html", "huge_attr.html", b"<p title='" + b"x" * int(2_000_000 * scale) + b"'>attr</p>")
    add("deep_html", "scripts.html", b"<script>" + b"alert(1);" * 10_000 + b"</script><p>after script</p>")
    # empty, NUL, binary
    for i, data in enumerate([b"", b" ", b"\n\n\n", b"\t \r\n", b"\xef\xbb\xbf"]):
        for ext in ("txt", "md", "html"):
            add("empty", f"empty_{i}.{ext}", data)
    for i in range(20):
        add("nul_bytes", f"nul_{i}.txt", b"text\x00" * rng.randint(1, 500) + os.urandom(rng.randint(0, 300)))
    for i in range(20):
        add("binary", f"binary_{i}.{rng.choice(['txt', 'md', 'html'])}", os.urandom(rng.randint(50, 5000)))
    # encodings (must ingest)
    ru = "Выручка депо выросла на пять процентов, а бригада проверила колёсные пары до утренней смены. "
    for codec in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "cp1251", "koi8_r",
                  "utf-8-sig"):
        for i in range(3):
            add("encoding", f"ru_{codec}_{i}.txt", (ru * (i + 1)).encode(codec))
    # odd names and injection (must ingest, shown as data)
    names = ["../../x.txt", "..\\..\\win.txt", "'; DROP TABLE documents;--.md", "a\nb.md", "\u202egnp.txt",
             f"![p]({BEACON}).md", "<script>alert(1)</script>.html", "$x$.md", ":material/home:.md",
             "a" * 251 + ".txt", "b" * 400 + ".md", "пробел и ё.txt", "tab\tname.md", "emoji 😀.md", ".hidden.md",
             "CON.txt", "x.MD", "y.HtMl", "no_extension", "double.pdf.txt", "trailing.txt ", "z.exe"]
    for i, n in enumerate(names):
        add("odd_name", n, f"# Odd {i} ![hp]({BEACON})\n\nA document with an odd name, number {i}.\n".encode())
    # fill up with mixed random damage of valid files to pass 300
    bases = [("md", b"# T\n\n## S\n\nSome text here.\n"), ("html", b"<h1>T</h1><p>text</p>"), ("txt", b"plain text\n"),
             ("pdf", good_pdf), ("docx", good_docx)]
    i = 0
    while len(out) < 320:
        ext, base = bases[i % len(bases)]
        data = bytearray(base)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        add("bitflip", f"flip_{i}.{ext}", bytes(data))
        i += 1
    return out


def consistency(store: Any, model_id: str) -> dict[str, int]:
    """Counts that must all be 0 in a consistent database."""
    cur = store.db.cursor()

    def one(sql: str, *params: Any) -> int:
        return int(cur.execute(sql, list(params)).fetchone()[0])

    return {
        "documents_with_wrong_chunk_count": one(
            "SELECT count(*) FROM documents d WHERE n_chunks <> (SELECT count(*) FROM chunks c WHERE "
            "c.workspace_id = d.workspace_id AND c.doc_id = d.doc_id)"),
        "orphan_chunks": one("SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE "
                             "d.workspace_id = c.workspace_id AND d.doc_id = c.doc_id)"),
        "chunks_without_vector": one("SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE "
                                     "v.workspace_id = c.workspace_id AND v.chunk_id = c.chunk_id AND "
                                     "v.variant = 'raw' AND v.model_id = ?)", model_id),
        "orphan_vectors": one("SELECT count(*) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE "
                              "c.workspace_id = v.workspace_id AND c.chunk_id = v.chunk_id)"),
    }
