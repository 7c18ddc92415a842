"""Negated questions and version-labelled answers (issue #28 item 5), end to end through the default pipeline.

The questions (bench/sets/negation_versions.jsonl) were written before the mechanism, over the sample corpus and over
a fixture corpus of six EN/RU documents (tests/fixtures/negation/). Each corpus is ingested into a temporary
database with the real embedder; every question runs through run_query (answer cache off, offline answer).
A negation question is correct when the expected refusal is a refusal, or the answer is not refused, cites a chunk
of the expected document and contains the expected words; a version question when the answer names every expected
version label.

    .venv/bin/python bench/negation.py        -> bench/results/negation.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import CAPTION, Table, grid, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {"sample": ROOT / "sample_corpus" / "docs", "fixture": ROOT / "tests" / "fixtures" / "negation"}


def correct(q: dict[str, Any], refused: bool, text: str, cited_docs: list[str]) -> bool:
    low = text.lower()
    if q["expect"] == "refuse":
        return refused
    if refused:
        return False
    if q["kind"] == "versions":
        return all(lbl.lower() in low for lbl in q["labels"])
    return (any(d.startswith(q["doc"]) for d in cited_docs) and all(h.lower() in low for h in q.get("has", [])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=Path, default=ROOT / "bench" / "sets" / "negation_versions.jsonl")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query

    questions = [json.loads(line) for line in a.set.read_text().splitlines() if line.strip()]
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False, "answer.mode": "extractive"})
    rows = []
    for corpus, folder in CORPORA.items():
        db = Path(tempfile.mkdtemp(prefix="negation_")) / "n.duckdb"
        deps = build_deps(cfg, db=str(db))
        files = [(p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()]
        ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg)
        names = {d.doc_id: d.name for d in deps.store.corpus.documents()}
        for q in (q for q in questions if q["corpus"] == corpus):
            t = time.perf_counter()
            tr = run_query(q["question"], cfg, deps, log=False)
            ans = tr.answer
            refused = ans is None or ans.refused
            text = ans.text if ans is not None else ""
            chunk_docs = {c.chunk_id: c.doc_id for s in tr.stages for c in s.candidates}
            cited = [names.get(chunk_docs.get(c, ""), "") for c in (ans.citations if ans else ())]
            ok = correct(q, refused, text, cited)
            rows.append({"id": q["id"], "kind": q["kind"], "corpus": corpus, "expect": q["expect"],
                         "question": q["question"], "refused": refused, "correct": ok, "answer": text,
                         "cited_docs": cited, "ms": round(1000 * (time.perf_counter() - t))})
            print(("OK  " if ok else "MISS"), q["id"], "|", text[:300])
    summary: dict[str, Any] = {}
    for kind in ("negation", "versions"):
        for corpus in CORPORA:
            sel = [r for r in rows if r["kind"] == kind and r["corpus"] == corpus]
            if sel:
                summary[f"{kind}/{corpus}"] = {
                    "questions": len(sel), "correct": sum(r["correct"] for r in sel),
                    "answer_expected_correct": f"{sum(r['correct'] for r in sel if r['expect'] == 'answer')}/"
                                               f"{sum(r['expect'] == 'answer' for r in sel)}",
                    "refuse_expected_correct": f"{sum(r['correct'] for r in sel if r['expect'] == 'refuse')}/"
                                               f"{sum(r['expect'] == 'refuse' for r in sel)}"}
    print(json.dumps(summary, indent=1))
    write_result("negation", {"summary": summary, "rows": rows,
                              "note": "questions written before the mechanism (commit 7b3a09f); none fitted"},
                 a.out, argv=argv, table=MEASURED_NEGATION)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_negation(d: dict[str, Any], file: str) -> list[str]:
    """Issue #28 item 5: negated questions and version-labelled answers (bench/negation.py)."""
    rows = [[k.split("/")[0], k.split("/")[1], v.get("questions"), v.get("answer_expected_correct"),
             v.get("refuse_expected_correct")] for k, v in (d.get("summary") or {}).items()]
    title = ("### Negated questions and versions: before the mechanism (the question set's commit, run from its "
             "git archive)" if "before" in file else "### Negated questions and versions in the offline answer")
    return [title, "", CAPTION, "",
            "Questions written before the mechanism (bench/sets/negation_versions.jsonl) over the sample corpus and "
            "a fixture corpus of six EN/RU documents (tests/fixtures/negation/), run through the default pipeline "
            "(offline answer, answer cache off). A negation question is correct when it is refused as expected, or "
            "answered citing the expected document with the expected words; a version question when the answer "
            "names every version's label.", "",
            grid(["kind", "corpus", "questions", "answerable: correct", "unanswerable: refused"], rows), ""]


MEASURED_NEGATION = Table(measured_negation, 'Offline answer and answer cache')


if __name__ == "__main__":
    raise SystemExit(main())
