"""A scripted conversation over the sample corpus: does each follow-up, condensed offline, cite what its standalone
form cites?

    .venv/bin/python bench/conversation.py [--db FILE] [--set dev|holdout|holdout2|holdout3] [--label before|after]

bench/sets/conversation_sample.jsonl (dev: the condense rule was revised once after its first run on it) and
bench/sets/conversation_sample_holdout.jsonl (written before that revision, reported once; dev since, as the next
condense change was made after reading it), bench/sets/conversation_sample_holdout2.jsonl (holdout2: 11 English and 4
Russian exchanges; its pre-change run was read before the change, so it is dev too) and
bench/sets/conversation_sample_holdout3.jsonl (holdout3: 11 English and 4 Russian exchanges written before the change
and not run before it was made: the report split): 15 two-turn exchanges each (30 turns), each follow-up with the
standalone question a reader would write. Each
exchange: the opener runs alone; the follow-up runs with the opener as history (the `condense` stage rewrites it,
offline); its standalone form runs with no history; as a control, the follow-up also runs as written, with no history.
Scores: the answer cites the same first chunk as the standalone's (both refusing counts as the same), any cited chunk
in common, and the condensed question's word overlap with the standalone. Default configuration, offline, answer
cache off. Writes bench/results/conversation_<set>.json.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from _common import CAPTION, ROOT, Table, grid, num, table, write_result

sys.path.insert(0, str(ROOT))

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.pipeline import run_query  # noqa: E402
from core.store import Store  # noqa: E402
from core.types import Turn  # noqa: E402

SETS = {"dev": ROOT / "bench" / "sets" / "conversation_sample.jsonl",
        "holdout": ROOT / "bench" / "sets" / "conversation_sample_holdout.jsonl",
        "holdout2": ROOT / "bench" / "sets" / "conversation_sample_holdout2.jsonl",
        "holdout3": ROOT / "bench" / "sets" / "conversation_sample_holdout3.jsonl"}


def _words(t: str) -> set[str]:
    return set(re.findall(r"\w+", t.lower()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "synthesis.duckdb"))
    ap.add_argument("--set", choices=list(SETS), default="holdout3")
    ap.add_argument("--label", default="", help="appended to the results name (before / after a change)")
    ap.add_argument("--code", default="", help="what code ran, when not this checkout's (e.g. a base commit's archive)")
    args = ap.parse_args()
    path = SETS[args.set]
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False})
    deps = build_deps(cfg, store=Store(args.db, read_only=True))
    rows = []
    t0 = time.perf_counter()
    def same(a, b) -> bool:
        return (a.refused and b.refused) or (bool(a.citations) and bool(b.citations) and a.citations[0] == b.citations[0])

    for line in path.read_text(encoding="utf-8").splitlines():
        ex = json.loads(line)
        opener, follow = ex["turns"]
        first = run_query(opener, cfg, deps, log=False)
        hist = [Turn(opener, first.answer.text if first.answer else "")]
        f = run_query(follow, cfg, deps, log=False, history=hist)
        s = run_query(ex["standalone"], cfg, deps, log=False)
        bare = run_query(follow, cfg, deps, log=False)  # the control: the follow-up as written, no history
        fa, sa, ba = f.answer, s.answer, bare.answer
        assert fa is not None and sa is not None and ba is not None
        same_first = same(fa, sa)
        overlap = (fa.refused and sa.refused) or bool(set(fa.citations) & set(sa.citations))
        sw, cw = _words(ex["standalone"]), _words(f.query)
        rows.append({"follow_up": follow, "condensed": f.query, "standalone": ex["standalone"],
                     "method": f.stages[0].info.get("method"), "same_first_citation": same_first,
                     "any_common_citation": overlap, "word_f1": round(2 * len(sw & cw) / (len(sw) + len(cw)), 3),
                     "follow_refused": fa.refused, "standalone_refused": sa.refused,
                     "no_history_same_first_citation": same(ba, sa), "no_history_refused": ba.refused})
        print(f"{'=' if same_first else 'x'} {follow!r} -> {f.query!r}", file=sys.stderr)
    n = len(rows)
    summary = {"follow_ups": n, "turns": 2 * n,
               "same_first_citation": round(100 * sum(r["same_first_citation"] for r in rows) / n, 1),
               "any_common_citation": round(100 * sum(r["any_common_citation"] for r in rows) / n, 1),
               "mean_word_f1": round(sum(r["word_f1"] for r in rows) / n, 3),
               "both_answered": sum(1 for r in rows if not r["follow_refused"] and not r["standalone_refused"]),
               "no_history_same_first_citation": round(
                   100 * sum(r["no_history_same_first_citation"] for r in rows) / n, 1)}
    print(table(list(summary), [list(summary.values())]))
    write_result(f"conversation_{args.set}" + (f"_{args.label}" if args.label else ""), {
                                              **({"code": args.code} if args.code else {}), "db": args.db,
                                              "config": "default, offline (no key), answer_cache.enabled = false",
                                              "set": str(path.relative_to(ROOT)), "seconds": round(time.perf_counter() - t0, 1),
                                  "summary": summary, "rows": rows}, table=MEASURED_CONVERSATION)


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_conversation(d: dict[str, Any], file: str) -> list[str]:
    """bench/conversation.py: follow-ups condensed offline against their standalone forms."""
    s = d.get("summary") or {}
    name = file[len("conversation_"):-len(".json")].replace("_", ", ")
    out = [f"### Conversation: {s.get('turns')} scripted turns over the sample corpus ({name})", "",
           CAPTION, "", *([f"Code: {d['code']}.", ""] if d.get("code") else []),
           f"`{d.get('set')}`; {d.get('config')}. A follow-up scores when its answer cites the same first chunk as "
           "its standalone form (both refusing counts).", ""]
    out.append(grid(["follow-ups", "both answered", "same first citation %", "any common citation %",
                         "condensed vs standalone word F1", "control: as written, no history, same first citation %"],
                        [[s.get("follow_ups"), s.get("both_answered"), num(s.get("same_first_citation"), 1),
                          num(s.get("any_common_citation"), 1), num(s.get("mean_word_f1"), 3),
                          num(s.get("no_history_same_first_citation"), 1)]]))
    return out


MEASURED_CONVERSATION = Table(measured_conversation, 'Offline answer and answer cache')


if __name__ == "__main__":
    main()
