"""Chunker oracles: window boundaries and overlap, sentence packing, heading paths from Markdown/HTML/DOCX."""
from __future__ import annotations

from core.ingest.chunk import chunk_document, fixed_ranges, sentence_ranges
from core.ingest.parse import parse
from core.text import sentence_spans, token_spans

MD = b"""# Handbook

Intro line for the whole handbook.

## Security

### TLS

Set TLS_VERSION_MIN to 1.2. Older clients fail.

## Finance

Revenue grew 3% over the previous quarter.
"""


def test_fixed_windows_have_exact_size_and_overlap() -> None:
    text = " ".join(f"w{i}" for i in range(25))
    ranges = fixed_ranges(text, 10, 3)
    words = [[text[s:e] for s, e in token_spans(text, a, b)] for a, b in ranges]
    assert [len(w) for w in words] == [10, 10, 10, 4]
    assert words[0][-3:] == words[1][:3]  # 3 tokens of overlap
    assert words[-1][-1] == "w24"  # nothing lost at the end
    assert fixed_ranges("", 10, 3) == []
    assert len(fixed_ranges(text, 10, 50)) == 16  # overlap >= size still advances one token per window


def test_sentence_chunks_never_cut_a_sentence() -> None:
    text = "One two three. Four five six seven. Eight nine. Ten eleven twelve thirteen."
    ranges = sentence_ranges(text, 9, 0)  # tokens count punctuation: 4 + 5
    sents = [text[s:e] for s, e in sentence_spans(text)]
    for s, e in ranges:
        piece = text[s:e]
        assert piece.startswith(tuple(x[:4] for x in sents)) and piece.endswith(".")
    assert [text[s:e] for s, e in ranges][0] == "One two three. Four five six seven."


def test_sentence_overlap_carries_last_sentence() -> None:
    text = "Alpha beta. Gamma delta. Epsilon zeta. Eta theta."
    ranges = sentence_ranges(text, 6, 3)
    pieces = [text[s:e] for s, e in ranges]
    assert pieces[0] == "Alpha beta. Gamma delta."
    assert pieces[1].startswith("Gamma delta.")


def test_structure_chunks_carry_heading_paths() -> None:
    doc = parse("h.md", MD)
    chunks = chunk_document(doc, "d1", strategy="structure", size=50, overlap=0)
    by_text = {c.text.split("\n")[-1]: c.heading_path for c in chunks}
    assert by_text["Set TLS_VERSION_MIN to 1.2. Older clients fail."] == ("Handbook", "Security", "TLS")
    assert by_text["Revenue grew 3% over the previous quarter."] == ("Handbook", "Finance")
    # Offsets point back into the document text.
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    # Content-defined ids: the document id and a hash of heading path and text, distinct within the document.
    assert all(c.chunk_id.startswith("d1-") for c in chunks) and len({c.chunk_id for c in chunks}) == len(chunks)
    # The heading-only "## Security" section is folded into the TLS chunk, not left as a chunk of its own.
    assert not any(c.text.strip() == "## Security" for c in chunks)


def test_html_and_fixed_heading_paths() -> None:
    html = b"<html><head><title>T</title><script>var x=1;</script></head><body><h1>Guide</h1><p>Hello there.</p>" \
           b"<h2>Setup</h2><p>Install the agent &amp; run it.</p></body></html>"
    doc = parse("g.html", html)
    assert "var x" not in doc.text and "Install the agent & run it." in doc.text
    chunks = chunk_document(doc, "d2", strategy="structure", size=50, overlap=0)
    assert chunks[-1].heading_path == ("Guide", "Setup")
    fixed = chunk_document(doc, "d2", strategy="fixed", size=4, overlap=1)
    assert fixed[0].heading_path == ("Guide",)
    assert all(c.n_tokens <= 4 for c in fixed)


def test_chunk_language_is_detected() -> None:
    doc = parse("r.txt", "Выручка выросла на 5%. Это хороший результат.".encode())
    chunks = chunk_document(doc, "d3", strategy="sentence", size=100, overlap=0)
    assert chunks[0].lang == "ru"


def test_a_spaceless_run_is_hard_split_within_the_character_bound() -> None:
    from core.ingest.chunk import max_chunk_chars
    from core.types import ParsedDocument

    run = ("ab0" * 70_000)[:200_000]  # a 200 KB line with no space: one chunking token
    text = "Intro sentence here.\n\n" + run + "\n\nA closing sentence."
    doc = parse("run.txt", text.encode())
    assert run in doc.text
    for strategy in ("fixed", "sentence", "structure"):
        chunks = chunk_document(doc, "d", strategy=strategy, size=64, overlap=8)
        bound = max_chunk_chars(64)
        assert max(len(c.text) for c in chunks) <= bound, strategy
        assert all(c.text == doc.text[c.start : c.end] for c in chunks)
        covered = [False] * len(doc.text)
        for c in chunks:
            covered[c.start : c.end] = [True] * (c.end - c.start)
        assert all(covered[i] or doc.text[i].isspace() for i in range(len(doc.text))), strategy
        assert len(chunks) >= 200_000 // bound
    # ordinary prose is never cut by the bound: the token window ends the chunk first
    prose = ParsedDocument(name="p.txt", kind="txt", text=" ".join(f"word{i % 50}" for i in range(2000)), title="p", sections=())
    assert [c.n_tokens for c in chunk_document(prose, "p", strategy="fixed", size=100, overlap=0)][:3] == [100] * 3


def test_token_bound_fits_the_embedders_window_and_covers_the_text() -> None:
    from core.ingest.chunk import token_bound

    def count(t: str) -> int:  # a tokenizer that reads each digit as a token and each word as one
        return sum(len(w) if w.isdigit() else 1 for w in t.split())

    text = "Order " + " ".join(str(10**6 + i) for i in range(20)) + " shipped. " + "x" * 50
    pieces = token_bound(text, 0, len(text), count, 30)
    assert all(count(text[a:b]) <= 30 for a, b in pieces) and len(pieces) >= 5
    assert "".join(text[a:b] for a, b in pieces).replace(" ", "") == text.replace(" ", "")
    # a run without spaces is cut hard where the count allows
    assert token_bound("9" * 100, 0, 100, count, 30) == [(0, 30), (30, 60), (60, 90), (90, 100)]
    assert token_bound("a b c", 0, 5, count, 30) == [(0, 5)]


def test_ingest_cuts_chunks_to_the_window_of_an_embedder_that_counts_its_tokens() -> None:
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.store import Store
    from tests.fakes import HashEmbedder

    class Counting(HashEmbedder):
        max_seq_length = 12  # a window of 10 tokens once [CLS] and [SEP] are in

        def token_count(self, text: str) -> int:
            return sum(len(w) if w.isdigit() else 1 for w in text.split())

    text = "# Parts\n\n" + " ".join(f"Part {100000 + i} fits bay {i}." for i in range(12))
    plain, counting = Store(), Store()
    ingest_files([("parts.md", text.encode())], store=plain, embedder=HashEmbedder(), config=PipelineConfig())
    ingest_files([("parts.md", text.encode())], store=counting, embedder=Counting(), config=PipelineConfig())
    before, after = plain.corpus.chunks(), counting.corpus.chunks()
    assert any(Counting().token_count(c.text) > 10 for c in before)  # the chunker alone leaves chunks over it
    assert all(Counting().token_count(c.text) <= 10 for c in after) and len(after) > len(before)
    assert [c.ordinal for c in after] == list(range(len(after)))


def test_a_run_of_fields_is_packed_field_by_field() -> None:
    # a header of `Key: Value` lines is one paragraph: chunks are cut between fields, never inside a value at an
    # initial's full stop ('Nathaniel J. Smith') nor mid-line by the fixed window
    text = "\n".join([f"Classifier: Topic :: Subject number {i} :: Detail" for i in range(12)] +
                     ['Author-email: "Nathaniel J. Smith" <njs@example.org>', "License: MIT"] +
                     [f"Keywords: word{i}, other{i}" for i in range(8)])
    lines = text.split("\n")
    ranges = sentence_ranges(text, 40, 8)
    assert len(ranges) > 2
    for s, e in ranges:
        assert text[s:e].split("\n")[0] in lines and text[s:e].split("\n")[-1] in lines


def test_sentences_open_and_close_with_the_quotes_of_other_languages() -> None:
    text = "Весь конфликт известен как Семилетняя война. «Семилетняя» относится к Европе. Он сказал: «Хватит.» Потом ушёл."
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Весь конфликт известен как Семилетняя война.", "«Семилетняя» относится к Европе.",
        "Он сказал: «Хватит.", "Потом ушёл."]  # a closing quote after the stop is left out, as an English one is
    de = "Der Krieg begann 1756. „Siebenjährig“ heißt er in Europa. Über ihn schrieb man viel."
    assert len(sentence_spans(de)) == 3


def test_restructuredtext_chunks_carry_their_heading_path() -> None:
    rst = ("Jedi\n====\n\nChangelog\n---------\n\n0.20.0 (2026-05-02)\n+++++++++++++++++++\n\n"
           "- Dropped Python 3.8 and 3.9 support.\n\n0.11.0 (2017-09-20)\n+++++++++++++++++++\n\n"
           "- Split Jedi's parser into a separate project called parso.\n")
    doc = parse("jedi.md", rst.encode())
    chunks = chunk_document(doc, "j", strategy="structure", size=50, overlap=0)
    by_line = {c.text.strip().split("\n")[-1]: c.heading_path for c in chunks}
    assert by_line["- Dropped Python 3.8 and 3.9 support."] == ("Jedi", "Changelog", "0.20.0 (2026-05-02)")
    assert by_line["- Split Jedi's parser into a separate project called parso."] == (
        "Jedi", "Changelog", "0.11.0 (2017-09-20)")
    # the heading-only sections (the title, 'Changelog') with their underlines fold into the next chunk
    assert not any(c.text.strip() in ("Jedi\n====", "Changelog\n---------") for c in chunks)
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)


def test_plain_text_chunks_carry_their_adorned_heading() -> None:
    # a release's over- and underlined heading in a .txt file: a chunk that starts below it keeps it as its path
    text = ("ZETAOS RELEASE NOTES\n\nZetaOS runs on every Acme gateway.\n\n"
            "--------------------------------------\nZetaOS 3.8.2 - released 20 June 2024\n"
            "--------------------------------------\nSecurity\n"
            + "".join(f"- Fixes ZSEC-0{i:02d}, a weakness in module number {i} of the bootloader.\n" for i in range(12)))
    doc = parse("notes.txt", text.encode())
    chunks = chunk_document(doc, "n", strategy="structure", size=40, overlap=0)
    assert len(chunks) > 2
    assert chunks[0].heading_path == ()
    assert all(c.heading_path == ("ZetaOS 3.8.2 - released 20 June 2024",) for c in chunks[1:])
    assert chunks[-1].text.strip().endswith("module number 11 of the bootloader.")
    # a heading-only section with its adornment lines folds into the next section's first chunk
    doc = parse("g.txt", b"==========\nAcme Guide\n==========\n\nSetup\n-----\n\nRun the installer.\n")
    chunks = chunk_document(doc, "g", strategy="structure", size=50, overlap=0)
    assert [(c.text.split("\n")[0], c.heading_path) for c in chunks] == [("==========", ("Acme Guide", "Setup"))]
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)


def test_a_markdown_files_untitled_opening_is_packed_with_its_first_section() -> None:
    # a METADATA header (fields) before the long description's title: the chunk that ends the header keeps the title
    text = "Name: shellingham\nRequires-Python: >=3.7\n\nShellingham\n===========\n\nDetects the shell.\n\nUsage\n=====\n\nCall it.\n"
    doc = parse("s.md", text.encode())
    chunks = chunk_document(doc, "s", strategy="structure", size=50, overlap=0)
    assert [(c.text.split("\n")[0], c.heading_path) for c in chunks] == [
        ("Name: shellingham", ()), ("Usage", ("Usage",))]
    assert "Requires-Python: >=3.7\n\nShellingham\n====" in chunks[0].text


def test_a_sentence_that_points_back_never_opens_a_chunk_without_the_one_before() -> None:
    text = ("Alpha beta gamma. It is a robust implementation of the spec named RFC 9999 here. "
            "That is, it mostly focuses on the wire. Omega ends.")
    ranges = sentence_ranges(text, 24, 3)  # the RFC sentence (13 tokens) is longer than the overlap
    pieces = [text[s:e] for s, e in ranges]
    opening = next(p for p in pieces if "That is" in p)
    assert opening.startswith("It is a robust implementation"), pieces
    plain = ("Alpha beta gamma. Kappa is a robust implementation of the spec named RFC 9999 here. Omega mostly ends "
             "the whole example text here now.")
    assert [plain[s:e] for s, e in sentence_ranges(plain, 24, 3)][-1].startswith("Omega")  # no pointer: no carry


def test_that_is_goes_on_from_the_sentence_before_it() -> None:
    from core.answer.support import continues
    assert continues("That is, it mostly focuses on the wire.") and not continues("That library is small.")
