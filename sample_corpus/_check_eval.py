"""Validate sample_corpus/eval.jsonl against the documents of the sample corpus.

Run:  python sample_corpus/_check_eval.py   (needs pypdf and python-docx)

Checks, for every question:
  * the schema (fields, types, allowed values, id uniqueness);
  * unanswerable questions have answerable=false, gold=[] and answer="";
  * every gold span is 40-250 characters, contains no markup, and occurs in the
    text of its document after collapsing whitespace runs to one space on both
    sides (md/txt: raw file; html: visible text via html.parser; docx:
    paragraphs joined by newlines; pdf: pypdf page text);
  * multi-hop questions cite at least two different documents.
Exits with status 1 and a list of problems if anything fails.
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVAL_PATH = HERE / "eval.jsonl"
DOCS = HERE / "docs"

FIELDS = {"id", "query", "type", "answerable", "gold", "answer"}
TYPES = {"factoid", "exact-id", "multi-hop", "global", "unanswerable"}
BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
    "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead",
    "title", "tr", "ul",
}


class _TextExtractor(HTMLParser):
    """Collect visible text; block-level tags become line breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)  # unescapes entities
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def extract_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".md", ".txt"):
        return path.read_text(encoding="utf-8")
    if suffix in (".html", ".htm"):
        parser = _TextExtractor()
        parser.feed(path.read_text(encoding="utf-8"))
        parser.close()
        return "".join(parser.parts)
    if suffix == ".docx":
        import docx

        return "\n".join(p.text for p in docx.Document(str(path)).paragraphs)
    if suffix == ".pdf":
        import pypdf

        return "\n".join(page.extract_text() or "" for page in pypdf.PdfReader(str(path)).pages)
    raise ValueError(f"unsupported document type: {path.name}")


def main() -> int:
    problems: list[str] = []
    cache: dict[str, str] = {}
    records = []
    for lineno, line in enumerate(EVAL_PATH.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            problems.append(f"line {lineno}: invalid JSON ({exc})")

    seen_ids: set[str] = set()
    type_counts: dict[str, int] = {}
    for rec in records:
        qid = rec.get("id", "?")
        if set(rec) != FIELDS:
            problems.append(f"{qid}: fields are {sorted(rec)}, expected {sorted(FIELDS)}")
            continue
        if qid in seen_ids:
            problems.append(f"{qid}: duplicate id")
        seen_ids.add(qid)
        if rec["type"] not in TYPES:
            problems.append(f"{qid}: bad type {rec['type']!r}")
        type_counts[rec["type"]] = type_counts.get(rec["type"], 0) + 1
        if not isinstance(rec["answerable"], bool) or not isinstance(rec["gold"], list):
            problems.append(f"{qid}: answerable must be bool and gold a list")
            continue
        if not rec["query"].strip():
            problems.append(f"{qid}: empty query")

        if rec["type"] == "unanswerable" or not rec["answerable"]:
            if rec["type"] != "unanswerable" or rec["answerable"] or rec["gold"] or rec["answer"] != "":
                problems.append(f"{qid}: unanswerable questions need type=unanswerable, "
                                "answerable=false, gold=[] and answer=''")
            continue

        if not rec["gold"]:
            problems.append(f"{qid}: answerable question without gold spans")
        if not rec["answer"].strip():
            problems.append(f"{qid}: empty reference answer")
        docs = set()
        for gold in rec["gold"]:
            if set(gold) != {"doc", "span"}:
                problems.append(f"{qid}: gold entry fields are {sorted(gold)}")
                continue
            doc, span = gold["doc"], gold["span"]
            docs.add(doc)
            path = DOCS / doc
            if not path.is_file():
                problems.append(f"{qid}: document {doc} does not exist")
                continue
            if not 40 <= len(span) <= 250:
                problems.append(f"{qid}: span length {len(span)} outside 40-250: {span!r}")
            if re.search(r"<[a-zA-Z/][^>]*>|\*\*|`|^#|&[a-z]+;|&#", span):
                problems.append(f"{qid}: span contains markup: {span!r}")
            if doc not in cache:
                cache[doc] = collapse(extract_text(path))
            if collapse(span) not in cache[doc]:
                problems.append(f"{qid}: span not found in {doc}: {span!r}")
        if rec["type"] == "multi-hop" and len(docs) < 2:
            problems.append(f"{qid}: multi-hop question must cite at least two documents")
        if rec["type"] == "global" and not 2 <= len(rec["gold"]) <= 4:
            problems.append(f"{qid}: global question should have 2-4 gold spans")

    print(f"{len(records)} questions: " + ", ".join(f"{t}={n}" for t, n in sorted(type_counts.items())))
    if problems:
        print(f"FAILED with {len(problems)} problem(s):")
        for p in problems:
            print("  - " + p)
        return 1
    print("OK: every gold span was found in its document.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
