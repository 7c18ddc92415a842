"""Entity noise of the statistical graph extractor (issue #47, item 6), before and after markup, fenced code and
contractions are blanked out of the text it reads (core.graph.extract.prose), on two corpora this project did not
write: the METADATA files of the installed Python packages (.venv/lib/python3.11/site-packages/*.dist-info: package
descriptions in Markdown / reStructuredText, many with raw HTML) and the Anthropic cookbook's codebase chunks
(../shared/datasets/anthropic_codebase: source code).

A mention is noise when no occurrence of its surface in the raw chunk text is prose: each occurrence (whole words,
case-insensitive) lies inside an HTML tag (between '<' and '>' on one line), inside a fenced code block (between
``` lines), or right after an apostrophe ("I'll tell" gives 'll tell'), or the surface never occurs as written
("let's say" gives 'let say'). The rule was written before either pass ran and is the same for both.

    .venv/bin/python bench/graph_noise.py      # -> bench/results/graph_noise.json
"""
from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, table, write_result  # noqa: E402
import core.graph.extract as extract  # noqa: E402
from core.types import Chunk  # noqa: E402

WINDOW = 1200  # characters per chunk (paragraph-aligned), about the product's chunk size


def _windows(doc_id: str, text: str) -> list[Chunk]:
    out, buf, start = [], "", 0
    for para in re.split(r"(\n\s*\n)", text):
        if len(buf) + len(para) > WINDOW and buf.strip():
            out.append(Chunk(f"{doc_id}:{len(out)}", doc_id, len(out), buf, start, start + len(buf)))
            start += len(buf)
            buf = ""
        buf += para
    if buf.strip():
        out.append(Chunk(f"{doc_id}:{len(out)}", doc_id, len(out), buf, start, start + len(buf)))
    return out


def metadata_corpus(limit: int) -> list[Chunk]:
    files = sorted(glob.glob(str(ROOT / ".venv/lib/python3.11/site-packages/*.dist-info/METADATA")))[:limit]
    chunks: list[Chunk] = []
    for f in files:
        text = Path(f).read_text(encoding="utf-8", errors="replace")
        body = text.split("\n\n", 1)[1] if "\n\n" in text else text  # the description, not the header fields
        chunks += _windows(Path(f).parent.name, body)
    return chunks


def codebase_corpus(limit: int) -> list[Chunk]:
    docs = json.loads((ROOT.parent / "shared/datasets/anthropic_codebase/codebase_chunks.json").read_text())
    chunks = []
    for d in docs:
        for c in d["chunks"]:
            chunks.append(Chunk(c["original_index"] if "original_index" in c else f"{d['doc_id']}:{len(chunks)}",
                                d["doc_id"], len(chunks), c["content"], 0, len(c["content"])))
    return chunks[:limit]


def _not_prose_mask(text: str) -> list[bool]:
    mask = [False] * len(text)
    fenced = False
    pos = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            for i in range(pos, pos + len(line)):
                mask[i] = True
        elif fenced:
            for i in range(pos, pos + len(line)):
                mask[i] = True
        else:
            depth_start = None
            for i, ch in enumerate(line):
                if ch == "<":
                    depth_start = i
                elif ch == ">" and depth_start is not None:
                    for j in range(pos + depth_start, pos + i + 1):
                        mask[j] = True
                    depth_start = None
        pos += len(line)
    return mask


def is_noise(surface: str, text: str, mask: list[bool]) -> bool:
    words = surface.split()
    pattern = re.compile(r"(?<![\w'’])" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)", re.IGNORECASE)
    return not any(not any(mask[m.start():m.end()]) for m in pattern.finditer(text))


def measure(chunks: Sequence[Chunk], prose: Callable[[str], str]) -> dict:
    saved = extract.prose
    extract.prose = prose
    try:
        mentions = noise = 0
        examples: dict[str, int] = {}
        for c in chunks:
            mask = _not_prose_mask(c.text)
            for m in extract.extract_statistical(c).mentions:
                mentions += 1
                if is_noise(m.surface, c.text, mask):
                    noise += 1
                    examples[m.surface] = examples.get(m.surface, 0) + 1
    finally:
        extract.prose = saved
    top = sorted(examples.items(), key=lambda kv: -kv[1])[:25]
    return {"mentions": mentions, "noise": noise, "noise_pct": round(100 * noise / max(1, mentions), 2),
            "top_noise": top}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=400, help="METADATA files / codebase chunks read at most")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    corpora = {"site-packages METADATA": metadata_corpus(args.limit), "anthropic codebase": codebase_corpus(args.limit)}
    results, rows = {}, []
    for name, chunks in corpora.items():
        before = measure(chunks, lambda t: t)
        after = measure(chunks, extract.prose)
        results[name] = {"chunks": len(chunks), "before": before, "after": after}
        rows.append([name, len(chunks), before["mentions"], before["noise_pct"], after["mentions"],
                     after["noise_pct"]])
    print(table(["corpus", "chunks", "mentions before", "noise % before", "mentions after", "noise % after"], rows))
    for name, r in results.items():
        print(name, "before:", r["before"]["top_noise"][:12])
        print(name, "after: ", r["after"]["top_noise"][:12])
    write_result("graph_noise", {
        "what": "share of statistical-extractor mentions that are not prose (inside HTML tags, fenced code, or "
                "contraction fragments), before/after core.graph.extract.prose, on two corpora not written here",
        "parameters": {"limit": args.limit, "window_chars": WINDOW}, "results": results}, 
        Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
