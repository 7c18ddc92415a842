"""Documents nobody here wrote: the long descriptions of three installed packages (tqdm, requests, attrs METADATA) in a
workspace of their own, and 12 questions written before the first run (bench/sets/metadata_questions_42.jsonl: 8 with
the string the answer must hold, 4 near misses that must be refused). The default configuration, offline (no key),
with the verify stage on and off. A second set (bench/sets/metadata_questions_h42.jsonl, committed before its first
run) asks about two other packages nobody here tuned on (h11, msgpack).

  nice -n 10 .venv/bin/python bench/metadata_docs.py [--out bench/results/metadata_docs.json]
  nice -n 10 .venv/bin/python bench/metadata_docs.py --set bench/sets/metadata_questions_h42.jsonl \
      --packages h11 msgpack --out bench/results/metadata_docs_h42.json
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine_info, write_result  # noqa: E402

from core.answer.stage import strip_citations  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.pipeline import run_query  # noqa: E402

SET = ROOT / "bench" / "sets" / "metadata_questions_42.jsonl"
PACKAGES = ("tqdm", "requests", "attrs")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--set", type=Path, default=SET, help="questions (jsonl: q, expect or null for a refusal, kind)")
    ap.add_argument("--packages", nargs="+", default=list(PACKAGES), help="installed packages whose METADATA is read")
    args = ap.parse_args()
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    files = []
    for p in args.packages:
        meta = sorted(glob.glob(str(site / f"{p}-*.dist-info" / "METADATA")))[0]
        text = Path(meta).read_text(encoding="utf-8")
        body = text.split("\n\n", 1)[1] if "\n\n" in text else text  # the long description after the headers
        files.append((f"{p}.md", body.encode()))
    qs = [json.loads(x) for x in args.set.read_text(encoding="utf-8").splitlines() if x.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = PipelineConfig()
        deps = build_deps(cfg, db=str(Path(tmp) / "meta.duckdb"))
        ingest_files(files, store=deps.store, embedder=deps.embedder, config=cfg)
        rows: list[dict[str, Any]] = []
        for q in qs:
            row: dict[str, Any] = {**q}
            for name, c in (("verify_on", cfg), ("verify_off", cfg.with_overrides({"answer.verify": False}))):
                t = run_query(q["q"], c, deps, log=False)
                a = t.answer
                assert a is not None
                said = strip_citations(a.text)  # the answer's words: an expected '10' inside a chunk id is no answer
                right = (a.refused if q["expect"] is None else (not a.refused and q["expect"] in said))
                v = t.stage("verify")
                row[name] = {"right": right, "refused": a.refused, "text": a.text[:500],
                             "verify": dict(v.info) if v is not None and v.skipped is None else
                             (v.skipped if v is not None else None)}
            rows.append(row)
    summary = {k: f"{sum(r[k]['right'] for r in rows)}/{len(rows)}" for k in ("verify_on", "verify_off")}
    print(json.dumps(summary))
    for r in rows:
        print(f"\n{r['q']} (expect {r['expect']})\n  on:  {'RIGHT' if r['verify_on']['right'] else 'wrong'} "
              f"{r['verify_on']['text'][:260]}\n  off: {'RIGHT' if r['verify_off']['right'] else 'wrong'} "
              f"{r['verify_off']['text'][:160]}")
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "machine": machine_info(),
                                     "set": str(args.set.relative_to(ROOT) if args.set.is_absolute() else args.set),
                                     "packages": args.packages, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
