"""Generate a golden set from documents alone and write its items for a person to read (issue #43).

    .venv/bin/python bench/golden_read.py --source xquad:en [-n 100] [--sample 50]
    .venv/bin/python bench/golden_read.py --source 'files:.venv/lib/python3.11/site-packages/*.dist-info/METADATA' \
        --max-files 30

Sources: a dev corpus's documents as bench/golden_verdict.py cuts them (beir_scifact, twowiki_multihop,
anthropic_codebase, xquad:en, xquad:ru; the cut keeps the documents the real questions name, but no question text
reaches the generator), or files:GLOB, parsed and chunked with the default configuration's chunker (no
embeddings: generation reads chunks only). Writes data/bench/golden_read_<source>.jsonl (every item with its
evidence sentence) and prints the counts plus `--sample` items drawn with a fixed seed, the ones to read and judge.
Nothing here scores anything: the judgement of each read item is the reader's, recorded in the results file it goes to.
"""
from __future__ import annotations

import argparse
import glob
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from _common import ROOT, datasets_dir

from core.config import PipelineConfig
from core.eval.datasets import load_dataset, subsample
from core.eval.golden import Passage, counts_by_type, generate_set, mean_overlap
from core.ingest.chunk import chunk_document
from core.ingest.parse import parse

CUTS = {"beir_scifact": (300, 100), "twowiki_multihop": (400, 100), "anthropic_codebase": (None, 100)}


def file_passages(pattern: str, max_files: int, seed: int) -> list[Passage]:
    paths = sorted(glob.glob(pattern))
    paths = sorted(random.Random(seed).sample(paths, min(max_files, len(paths))))
    cfg = PipelineConfig().chunking
    out = []
    for path in paths:
        p = Path(path)
        name = p.parent.name if p.name == "METADATA" else p.name
        doc = parse(name + (".md" if p.name == "METADATA" else ""), p.read_bytes())
        for c in chunk_document(doc, name, strategy=cfg.strategy, size=cfg.size_tokens, overlap=cfg.overlap_tokens):
            out.append(Passage(c, name, doc.title or name))
    return out


def dataset_passages(name: str, root: Path, seed: int) -> list[Passage]:
    gs = load_dataset(name, root)
    if name in CUTS:
        max_docs, max_q = CUTS[name]
        gs = subsample(gs, max_docs=max_docs, max_questions=max_q, seed=seed)
    assert gs.predocs is not None, f"{name} is not given as documents"
    out = []
    for pd in gs.predocs():
        for c in pd.chunks:
            out.append(Passage(c, pd.doc.doc_id if gs.doc_key == "id" else pd.doc.name, pd.doc.title or pd.doc.name))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--max-files", type=int, default=30)
    ap.add_argument("--sample", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", default=None)
    args = ap.parse_args(argv)
    if args.source.startswith("files:"):
        passages = file_passages(args.source[6:], args.max_files, args.seed)
    else:
        passages = dataset_passages(args.source, datasets_dir(args.datasets), args.seed)
    got = generate_set(passages, args.n, seed=args.seed)
    by_chunk = {p.chunk.chunk_id: p for p in passages}
    slug = re.sub(r"[^\w]+", "_", args.source if not args.source.startswith("files:") else "files")[:40]
    out = ROOT / "data" / "bench" / f"golden_read_{slug}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"query": it.query, "type": it.qtype, "form": it.meta.get("fact"), "answer": it.answer,
             "evidence": [g.span for g in it.gold], "docs": [by_chunk[g.chunk].doc if g.chunk in by_chunk else g.doc
                                                            for g in it.gold], "swap": it.meta.get("swap")}
            for it in got.items]
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{args.source}: {len(passages)} chunks from {len({p.doc for p in passages})} documents -> "
          f"{len(got.items)} items {counts_by_type(got.items)}; forms {dict(Counter(r['form'] for r in rows))}; "
          f"mean overlap {mean_overlap(got.items)}; dropped {sum(got.dropped.values())}: {got.dropped}")
    print(f"items in {out.relative_to(ROOT)}")
    for i, r in enumerate(random.Random(args.seed).sample(rows, min(args.sample, len(rows))), 1):
        print(f"{i:3d}. [{r['type']}/{r['form']}] {r['query']}  => {r['answer'][:80]!r}"
              + (f"  (swap: {r['swap']})" if r["swap"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
