"""Conversation only when there is one: the offline condenser (core/route/condense.py) on independent questions after a
turn (never to be rewritten) and on follow-ups (their condensed form should retrieve the standalone form's first
passage: BM25 over the XQuAD paragraphs 40-47 of its language, ../shared/datasets/xquad_crosslingual). Independent:
62 XQuAD questions (38 English, 12 Russian, 12 German; each after another article's) and the 55 short German
questions of sets/metadata_walk_de.jsonl, each after the one before. Follow-ups: sets/followup_42.jsonl (50; dev),
followup_42_holdout (20) and followup_de (10 German), written before the rules ran on them.

  nice -n 10 .venv/bin/python bench/followup.py [--set bench/sets/followup_42_holdout.jsonl] [--out bench/results/followup.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, datasets_dir, grid, jsonl, machine_info, write_result  # noqa: E402

from core.retrieve.bm25 import BM25Index  # noqa: E402
from core.route.condense import condense_offline  # noqa: E402
from core.text import guess_language  # noqa: E402
from core.types import Turn  # noqa: E402

SETS = ROOT / "bench" / "sets"
FOLLOWUPS = SETS / "followup_42.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--set", type=Path, default=FOLLOWUPS, help="the follow-up set (JSON lines: prev, q, standalone)")
    args = ap.parse_args()
    root = datasets_dir(args.datasets) / "xquad_crosslingual"
    corpora = {lang: jsonl(root / f"corpus_{lang}.jsonl") for lang in ("en", "ru", "de")}
    index = {lang: BM25Index([d["id"] for d in docs], [d["text"] for d in docs]) for lang, docs in corpora.items()}
    firsts: dict[str, dict[str, dict[str, Any]]] = {"en": {}, "ru": {}, "de": {}}
    for q in jsonl(root / "questions.jsonl"):
        if q["lang"] in firsts:
            firsts[q["lang"]].setdefault(q["gold"][0], q)
    indep = []
    for lang, n in (("en", 38), ("ru", 12), ("de", 12)):
        items = list(firsts[lang].values())
        for q in items[::max(1, len(items) // n)][:n]:
            art = q["gold"][0].split("-p")[0]
            prev = next(x for x in items if x["gold"][0].split("-p")[0] != art)
            indep.append({"lang": lang, "prev": prev["question"], "q": q["question"]})
    walk = jsonl(SETS / "metadata_walk_de.jsonl")
    indep += [{"lang": "de", "prev": a["q"], "q": b["q"]} for a, b in zip(walk, walk[1:])]
    rows_i = []
    for it in indep:
        c = condense_offline(it["q"], [Turn(it["prev"])])
        rows_i.append({**it, "condensed": c.text, "rewritten": c.changed, "method": c.method, "notes": list(c.notes)})
    rows_f = []  # (a follow-up's language: Cyrillic, else its previous question's)
    for it in jsonl(args.set):
        lang = "ru" if any("а" <= ch <= "я" for ch in it["q"].lower()) else guess_language(it["prev"])
        c = condense_offline(it["q"], [Turn(it["prev"])])
        top_c, top_s = index[lang].search(c.text, 1), index[lang].search(it["standalone"], 1)
        same = bool(top_c and top_s and top_c[0][0] == top_s[0][0])
        rows_f.append({**it, "lang": lang, "condensed": c.text, "method": c.method, "same_first": same,
                       "top_condensed": (top_c or [[None]])[0][0], "top_standalone": (top_s or [[None]])[0][0]})
    summary = {"independent": {"n": len(rows_i), "rewritten": sum(r["rewritten"] for r in rows_i)},
               "followup": {"n": len(rows_f), "same_first": sum(r["same_first"] for r in rows_f),
                            "rate": round(sum(r["same_first"] for r in rows_f) / max(1, len(rows_f)), 3),
                            "by_lang": {lang: f"{sum(r['same_first'] for r in rows_f if r['lang'] == lang)}/"
                                              f"{sum(1 for r in rows_f if r['lang'] == lang)}"
                                       for lang in ("en", "ru", "de")},
                            "not_condensed": sum(r["method"] == "unchanged" for r in rows_f)}}
    print(json.dumps(summary, indent=1))
    for r in [x for x in rows_i if x["rewritten"]] + [x for x in rows_f if not x["same_first"]]:
        print(f"{'REWRITTEN' if 'rewritten' in r else 'miss'}: {r['q']} -> {r['condensed']}")
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "machine": machine_info(),
                                     "set": args.set.name, "independent": rows_i, "followups": rows_f}, args.out,
                     table=MEASURED_FOLLOWUP)


def measured_followup(payload: dict[str, Any], file: str) -> list[Any]:
    """Independent questions rewritten, follow-ups whose condensed form retrieves the standalone's first passage, and
    every miss (read the items)."""
    s, f = payload["summary"], payload["summary"]["followup"]
    name = payload.get("set", "followup_42.jsonl")
    lines: list[Any] = [f"### Conversation only when there is one: {name}",
                        f"Independent questions after a turn rewritten: **{s['independent']['rewritten']}/"
                        f"{s['independent']['n']}**. Follow-ups whose condensed form retrieves the standalone form's "
                        f"first passage (BM25, XQuAD articles 40-47): **{f['same_first']}/{f['n']}** "
                        f"(English {f['by_lang']['en']}, Russian {f['by_lang']['ru']}, "
                        f"German {f['by_lang'].get('de', '-')}); "
                        + ("the rules were chosen on this set (dev)." if name == FOLLOWUPS.name else
                           "written before the rules ran on it (held-out).")]
    misses = [r for r in payload.get("followups", []) if not r["same_first"]]
    if misses:
        lines.append(grid(("follow-up", "after", "condensed to", "standalone form"),
                          [(r["q"], r["prev"], r["condensed"], r["standalone"]) for r in misses]))
    lines.append(CAPTION)
    return lines


MEASURED_FOLLOWUP = Table(measured_followup, "Offline answer and answer cache")


if __name__ == "__main__":
    main()
