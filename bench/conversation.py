"""A scripted conversation over the sample corpus: does each follow-up, condensed offline, cite what its standalone
form cites?

    .venv/bin/python bench/conversation.py [--db FILE]

bench/sets/conversation_sample.jsonl: 15 two-turn exchanges (30 turns; 13 English, 2 Russian), each follow-up with
the standalone question a reader would write. Each exchange: the opener runs alone; the follow-up runs with the
opener as history (the `condense` stage rewrites it, offline); its standalone form runs with no history. Scores: the
follow-up's answer cites the same first chunk as the standalone's (both refusing counts as the same), any cited chunk
in common, and the condensed question's word overlap with the standalone. Default configuration, offline, answer
cache off. Writes bench/results/conversation.json.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from _common import ROOT, table, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402
from core.types import Turn  # noqa: E402

SET = ROOT / "bench" / "sets" / "conversation_sample.jsonl"


def _words(t: str) -> set[str]:
    return set(re.findall(r"\w+", t.lower()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "synthesis.duckdb"))
    args = ap.parse_args()
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False})
    deps = build_deps(cfg, store=Store(args.db, read_only=True))
    rows = []
    t0 = time.perf_counter()
    for line in SET.read_text(encoding="utf-8").splitlines():
        ex = json.loads(line)
        opener, follow = ex["turns"]
        first = run_query(opener, cfg, deps, log=False)
        hist = [Turn(opener, first.answer.text if first.answer else "")]
        f = run_query(follow, cfg, deps, log=False, history=hist)
        s = run_query(ex["standalone"], cfg, deps, log=False)
        fa, sa = f.answer, s.answer
        assert fa is not None and sa is not None
        same_first = (fa.refused and sa.refused) or (bool(fa.citations) and bool(sa.citations)
                                                     and fa.citations[0] == sa.citations[0])
        overlap = (fa.refused and sa.refused) or bool(set(fa.citations) & set(sa.citations))
        sw, cw = _words(ex["standalone"]), _words(f.query)
        rows.append({"follow_up": follow, "condensed": f.query, "standalone": ex["standalone"],
                     "method": f.stages[0].info.get("method"), "same_first_citation": same_first,
                     "any_common_citation": overlap, "word_f1": round(2 * len(sw & cw) / (len(sw) + len(cw)), 3),
                     "follow_refused": fa.refused, "standalone_refused": sa.refused})
        print(f"{'=' if same_first else 'x'} {follow!r} -> {f.query!r}", file=sys.stderr)
    n = len(rows)
    summary = {"follow_ups": n, "turns": 2 * n,
               "same_first_citation": round(100 * sum(r["same_first_citation"] for r in rows) / n, 1),
               "any_common_citation": round(100 * sum(r["any_common_citation"] for r in rows) / n, 1),
               "mean_word_f1": round(sum(r["word_f1"] for r in rows) / n, 3)}
    print(table(list(summary), [list(summary.values())]))
    write_result("conversation", {"db": args.db, "config": "default, offline (no key), answer_cache.enabled = false",
                                  "set": str(SET.relative_to(ROOT)), "seconds": round(time.perf_counter() - t0, 1),
                                  "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
