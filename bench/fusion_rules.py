"""How the transforms' lists should enter fusion: rules replayed offline on the lists the shipped default fused.

Reads bench/cascade_parts.py --dump files (per question: the first round's bm25 / dense / dense_ml lists and each
transform stage's list that the default's fusion read, and the gold documents) and re-fuses them with each rule,
scoring recall@k (5; --k) of the fused list (document level) per set, question type and half (sha256 parity of the question
id). A rule is chosen on the 'choose' half by RULE_CHOICE and reported on the 'report' half. No pipeline run: the
fused list only (the reranker's and MMR's reading of the new order is measured end to end by cascade_parts
--candidate).

    nice -n 10 .venv/bin/python bench/fusion_rules.py --dump data/bench/cp/dump
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from _common import CAPTION, Table, grid, num, paired_ci, write_result

from core.retrieve.fusion import rrf
from core.types import Candidate

K = 5
RRF_K = 60
DEPTH = 50
BASE = ("bm25", "dense", "dense_ml")
RULE_CHOICE = ("on the choose half: the rule with the highest mean over the sets (twowiki's four types counted as "
               "one set) of fused recall@k (--k) minus the shipped rule's, among rules that lose no set and no twowiki "
               "type more than 1 point against the shipped rule; the shipped rule stays unless that mean gain is at "
               "least 0.5 points")

Rule = Callable[[dict[str, list[Candidate]]], list[Candidate]]


def cands(rows: Sequence[Sequence[str]]) -> list[Candidate]:
    return [Candidate(cid, did, "", 0.0, r) for r, (cid, did) in enumerate(rows, start=1)]


def weighted(w: float, head: int | None = None) -> Rule:
    """Every transform list weighs w (the shipped rule: 2), optionally only its first `head` candidates."""
    def rule(lists: dict[str, list[Candidate]]) -> list[Candidate]:
        names = list(lists)
        return rrf([lists[n][:head] if head and n not in BASE else lists[n] for n in names], k=RRF_K,
                   weights=[1.0 if n in BASE else w for n in names], names=names, top=DEPTH)
    return rule


def protected(h: int, w: float = 2.0) -> Rule:
    """The question's own fusion's first h stay first, in its order; the rest as the weighted fusion orders it."""
    def rule(lists: dict[str, list[Candidate]]) -> list[Candidate]:
        own = weighted(0.0)({n: v for n, v in lists.items() if n in BASE})
        full = weighted(w)(lists)
        head = own[:h]
        seen = {c.chunk_id for c in head}
        return [*head, *(c for c in full if c.chunk_id not in seen)][:DEPTH]
    return rule


def new_only(w: float = 2.0, beyond: int = 5) -> Rule:
    """The transforms' lists fuse only the candidates the question's own fusion lacks in its first `beyond`: they add
    pages, and never lift one the question already ranks there."""
    def rule(lists: dict[str, list[Candidate]]) -> list[Candidate]:
        own = weighted(0.0)({n: v for n, v in lists.items() if n in BASE})
        top = {c.chunk_id for c in own[:beyond]}
        kept = {n: (v if n in BASE else [c for c in v if c.chunk_id not in top]) for n, v in lists.items()}
        return weighted(w)(kept)
    return rule


def capped(share: float = 1.0) -> Rule:
    """The transforms' lists together weigh `share` of the question's own lists (each transform list weighs
    share * own lists / transform lists)."""
    def rule(lists: dict[str, list[Candidate]]) -> list[Candidate]:
        own = [n for n in lists if n in BASE]
        tr = [n for n in lists if n not in BASE]
        w = share * len(own) / len(tr) if tr else 0.0
        return weighted(w)(lists)
    return rule


RULES: dict[str, Rule] = {
    "shipped (w=2)": weighted(2.0), "no transforms (w=0)": weighted(0.0), "w=0.5": weighted(0.5),
    "w=1": weighted(1.0), "w=1.5": weighted(1.5), "w=3": weighted(3.0),
    "w=2, head 1": weighted(2.0, 1), "w=2, head 2": weighted(2.0, 2),
    "own top 1 kept": protected(1), "own top 2 kept": protected(2), "own top 3 kept": protected(3),
    "new pages only (beyond own top 5)": new_only(2.0, 5), "new pages only (beyond own top 3)": new_only(2.0, 3),
    "transforms weigh 1x own": capped(1.0), "transforms weigh 0.5x own": capped(0.5),
}


def recall(fused: Sequence[Candidate], gold: set[str]) -> float:
    docs = list(dict.fromkeys(c.doc_id for c in fused))[:K]  # K: --k
    return len(gold & set(docs)) / len(gold)


def score(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for it in items:
        lists = {n: cands(v) for n, v in (it.get("lists") or {}).items()}
        gold = set(it["gold"])
        out.append({"qid": it["qid"], "half": it["half"], "type": it["type"],
                    "transforms": sorted(n for n in lists if n not in BASE),
                    **{name: recall(rule(lists), gold) for name, rule in RULES.items()}})
    return out


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"questions": 0}
    base = [r["shipped (w=2)"] for r in rows]
    return {"questions": n, "with_transforms": sum(bool(r["transforms"]) for r in rows),
            "recall": {k: round(100 * sum(r[k] for r in rows) / n, 2) for k in RULES},
            "minus_shipped": {k: paired_ci([r[k] for r in rows], base, counts=True) for k in RULES
                              if k != "shipped (w=2)"}}


def main(argv: Sequence[str] | None = None) -> int:
    global K
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", default="data/bench/cp/dump", help="the prefix cascade_parts --dump wrote (several "
                    "comma-separated; DUMP-<label> is a candidate's lists, named '<set> (<label>)')")
    ap.add_argument("--name", default="fusion_rules")
    ap.add_argument("--k", type=int, default=5, help="recall@k of the fused list (5; 1 where @5 is saturated)")
    args = ap.parse_args(argv)
    K = args.k
    files: list[tuple[Path, str]] = []
    for spec in args.dump.split(","):
        prefix = Path(spec.strip())
        label = prefix.name.partition("-")[2]  # DUMP-<label>: a cascade_parts candidate's lists
        files += [(f, f.stem[len(prefix.name) + 1:] + (f" ({label})" if label else ""))
                  for f in sorted(prefix.parent.glob(prefix.name + "_*.jsonl"))]
    res: dict[str, Any] = {"k": args.k, "rrf_k": RRF_K, "rules": list(RULES), "rule_choice": RULE_CHOICE, "sets": {}}
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for f, name in files:
        items = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        scored = score(items)
        by: dict[str, list[dict[str, Any]]] = {"all": scored}
        types = sorted({r["type"] for r in scored})
        for t in types if len(types) > 1 else ():  # twowiki's question types; another set is one type
            by[t] = [r for r in scored if r["type"] == t]
        groups[name] = by
        res["sets"][name] = {t: {h: table([r for r in rs if h == "all" or r["half"] == h])
                                 for h in ("choose", "report", "all")} for t, rs in by.items()}
    # the choice, on the choose half
    ok: dict[str, float] = {}
    for rule in RULES:
        if rule == "shipped (w=2)":
            continue
        gains, worst = [], 0.0
        for name, by in res["sets"].items():
            for t, hs in by.items():
                d = hs["choose"]["recall"][rule] - hs["choose"]["recall"]["shipped (w=2)"]
                worst = min(worst, d)
                if t == "all":
                    gains.append(d)
        if worst >= -1.0:
            ok[rule] = round(sum(gains) / len(gains), 3)
    res["eligible_mean_gain_choose"] = ok
    best = max(ok, key=lambda r: ok[r]) if ok else None
    res["chosen"] = best if best is not None and ok[best] >= 0.5 else "shipped (w=2)"
    print(f"eligible (mean gain on choose): {ok}\nchosen: {res['chosen']}", file=sys.stderr)
    for name, by in res["sets"].items():
        for t, hs in by.items():
            for h in ("choose", "report"):
                r5 = hs[h].get("recall") or {}
                print(f"{name}/{t}/{h} n={hs[h]['questions']}: "
                      + ", ".join(f"{k} {v}" for k, v in r5.items()), file=sys.stderr)
    write_result(args.name, res, table=FUSION_RULES)
    return 0


def measured(d: dict[str, Any], file: str) -> list[Any]:
    """Per set / type and half: fused recall@5 of each rule, the chosen one marked."""
    rules = d.get("rules") or []
    chosen = d.get("chosen")
    out = [f"### How the transforms' lists enter fusion, replayed offline ({file})", "", CAPTION, "",
           f"Fused recall@{d.get('k', 5)} (document level) of the lists the shipped default fused (bench/cascade_parts.py --dump), "
           f"re-fused by each rule. Choice: {d.get('rule_choice')}; chosen: **{chosen}**.", ""]
    rows = []
    for name, by in (d.get("sets") or {}).items():
        for t, hs in by.items():
            for h in ("choose", "report"):
                a = hs.get(h) or {}
                if a.get("questions"):
                    ch = (a.get("minus_shipped") or {}).get(chosen) or {}
                    rows.append([name, t, h, num(a["questions"]), num(a.get("with_transforms"))]
                                + [num(a["recall"].get(r)) for r in rules]
                                + [f"{num(ch.get('diff'))} [{num(ch.get('lo'))}, {num(ch.get('hi'))}]"])
    if rows:
        out.append(grid(["set", "type", "half", "questions", "with a transform list", *rules, "chosen - shipped [95%]"],
                        rows))
    return out


FUSION_RULES = Table(measured, "Retrieval quality")


if __name__ == "__main__":
    sys.exit(main())
