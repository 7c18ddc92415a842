"""Reference documents nobody here wrote, headers included: the whole METADATA files of five installed packages
(msgpack, cloudpickle, rank_bm25, shellingham, sniffio) saved as .md, ingested with `python -m core ingest DIR --db X`,
and the questions of bench/sets/metadata_dev_42b.jsonl (written before the first run: answerable, near misses with a
changed package or attribute, Russian) asked with the default configuration, offline, answer cache off. A question is
right when an answerable one is answered with one of its expected strings, or a near miss is refused.

  nice -n 10 .venv/bin/python bench/metadata_dev.py [--out bench/results/metadata_dev.json]
  # the held-out set, written after the dev work and before its only run: four other packages
  nice -n 10 .venv/bin/python bench/metadata_dev.py --set bench/sets/metadata_holdout_42b.jsonl \
      --packages execnet docstring_parser iniconfig filelock --out bench/results/metadata_holdout.json
"""
from __future__ import annotations

import argparse
import glob
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, grid, machine_info, write_result  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.pipeline import run_query  # noqa: E402

SET = ROOT / "bench" / "sets" / "metadata_dev_42b.jsonl"
PACKAGES = ("msgpack", "cloudpickle", "rank_bm25", "shellingham", "sniffio")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", help="a substring: ask only the questions holding it")
    ap.add_argument("--set", type=Path, default=SET, help="the questions (default: the dev set)")
    ap.add_argument("--packages", nargs="+", default=list(PACKAGES), help="the packages whose METADATA is the corpus")
    ap.add_argument("--note", default="", help="what this run is (e.g. a re-run after changes its items prompted)")
    args = ap.parse_args()
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    qs = [json.loads(x) for x in args.set.read_text(encoding="utf-8").splitlines() if x.strip()]
    if args.only:
        qs = [q for q in qs if args.only in q["q"]]
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for p in args.packages:
            meta = sorted(glob.glob(str(site / f"{p}-*.dist-info" / "METADATA")))[0]
            (docs / f"{p}.md").write_text(Path(meta).read_text(encoding="utf-8"), encoding="utf-8")
        db = str(Path(tmp) / "meta.duckdb")
        subprocess.run([sys.executable, "-m", "core", "ingest", str(docs), "--db", db], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False})
        deps = build_deps(cfg, db=db)
        rows: list[dict[str, Any]] = []
        for q in qs:
            t = run_query(q["q"], cfg, deps, log=False)
            a = t.answer
            assert a is not None
            exp = q["expect"]
            outcome = ("refused_right" if exp is None and a.refused else "wrong" if exp is None else
                       "refused_wrong" if a.refused else "right" if any(e in a.text for e in exp) else "wrong")
            v = t.stage("verify")
            rows.append({**q, "outcome": outcome, "refused": a.refused, "text": a.text[:600],
                         "verify": v.info.to_dict() if v is not None and v.skipped is None and v.info is not None
                         else (v.skipped if v is not None else None)})
            print(f"{outcome:13s} {q['q']}\n    {a.text[:300]!r}", flush=True)
    counts = Counter(r["outcome"] for r in rows)
    ok = counts["right"] + counts["refused_right"]
    by_kind: dict[str, Counter[str]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], Counter())[r["outcome"]] += 1
    summary = {"right_or_refused_right": f"{ok}/{len(rows)}", **dict(counts),
               "by_kind": {k: dict(v) for k, v in by_kind.items()}}
    print(json.dumps(summary, indent=1))
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "machine": machine_info(),
                                     "set": args.set.name, "packages": args.packages, "rows": rows,
                                     "note": args.note}, args.out, table=MEASURED_METADATA)


_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")  # an answer's Markdown link: text in measured.md (no anchor there)


def measured_metadata(payload: dict[str, Any], file: str) -> list[Any]:
    """One walk: its questions' outcomes by kind, and every miss with the answer given (read the items)."""
    cmd = payload.get("run", {}).get("command", "")
    qset = payload.get("set") or next((w for w in cmd.split() if w.endswith(".jsonl")), "metadata_dev_42b.jsonl")
    pkgs = payload.get("packages") or (cmd.split("--packages")[1].split("--")[0].split() if "--packages" in cmd
                                       else list(PACKAGES))
    s = payload["summary"]
    kinds = sorted(s["by_kind"])
    cols = ("right", "refused_right", "wrong", "refused_wrong")
    lines: list[Any] = [f"### Documents nobody here wrote: {Path(qset).name}",
                        f"The METADATA of {', '.join(pkgs)}; questions written before their first run. "
                        f"Right or refused right: **{s['right_or_refused_right']}**. {payload.get('note', '')}".strip(),
                        grid(("kind", *cols), [(k, *(s["by_kind"][k].get(c, 0) for c in cols)) for k in kinds])]
    misses = [r for r in payload.get("rows", []) if r["outcome"] in ("wrong", "refused_wrong")]
    if misses:
        lines.append(grid(("missed question", "outcome", "answer given (first 160 characters)"),
                          [(r["q"], r["outcome"],
                            _LINK.sub(r"\1 (\2)", " ".join(r["text"][:160].split())).replace("|", "/"))
                           for r in misses]))
    lines.append(CAPTION)
    return lines


MEASURED_METADATA = Table(measured_metadata, "Offline answer and answer cache")


if __name__ == "__main__":
    main()
