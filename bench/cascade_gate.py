"""Why the default cascade loses to plain hybrid on some multi-hop questions and helps on others (issue #44), read
from the per-question stage lists bench/cascade_dump.py wrote: recall@k per question type of every stage's own list
(bm25, dense, fused = hybrid, rerank, mmr, final), and offline variants of the cascade computed from the same lists.

    .venv/bin/python bench/cascade_gate.py data/bench/t44_twowiki_dump.json --name cascade_gate_twowiki

Variants (no model call: each is a re-ordering of lists the run produced):
- hybrid: the fused list; rerank: the rerank stage's list; cascade: the MMR stage's list (round one's cascade);
  default: the trace's final list (later retrieval rounds included);
- floor m/c: the cascade's (MMR) order, except that each of the fused list's first m documents the cascade pushed
  below rank c is put back at rank c (a rerank that cannot push the confident fused hits below its cut);
Split: twowiki question ids sorted, the first half chooses (m, c), the second half reports; both halves are printed.
Recall is document level: share of a question's gold documents among the first k distinct documents.
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from _common import CAPTION, Table, grid, num, write_result

from core.cascade.rerank import keep_floor

KS = (1, 2, 5, 10)


def docs(hits: Sequence[Sequence[Any]]) -> list[str]:
    return list(dict.fromkeys(h[0] for h in hits))


def recall(order: Sequence[str], gold: Sequence[str], k: int) -> float:
    return sum(1 for g in gold if g in order[:k]) / len(gold) if gold else 0.0


def floor(final: Sequence[str], fused: Sequence[str], m: int, c: int) -> list[str]:
    """`final` with fused's first m documents kept within its first c, by the product's rule
    (core.cascade.rerank.keep_floor) applied to documents."""
    ids = list(dict.fromkeys([*fused, *final]))  # fused order first: index i < m is fused's #i+1
    pos = {d: i for i, d in enumerate(ids)}
    order, _ = keep_floor([pos[d] for d in final], m, c)
    return [ids[i] for i in order]


def lists_of(row: dict[str, Any]) -> dict[str, list[str]]:
    ls = row["lists"]
    got = {s: docs(v["hits"]) for s, v in ls.items() if v.get("skipped") is None and v.get("hits")}
    got["final"] = list(dict.fromkeys(row["final"]))
    got.setdefault("mmr", got.get("rerank", got.get("fused", [])))
    return got


def table(rows: Sequence[dict[str, Any]], variants: dict[str, Callable[[dict[str, list[str]]], list[str]]]
          ) -> dict[str, dict[str, dict[str, float]]]:
    """variant -> question type ('all' too) -> recall@k (0-100) and n."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, fn in variants.items():
        by: dict[str, list[list[float]]] = {}
        for r in rows:
            order = fn(lists_of(r))
            vals = [recall(order, r["gold"], k) for k in KS]
            for t in ("all", r.get("type") or "?"):
                by.setdefault(t, []).append(vals)
        out[name] = {t: {**{f"recall@{k}": round(100 * sum(v[i] for v in vs) / len(vs), 1)
                            for i, k in enumerate(KS)}, "n": len(vs)} for t, vs in by.items()}
    return out


def paired(rows: Sequence[dict[str, Any]], a: Callable, b: Callable, k: int = 5) -> dict[str, float]:
    """Mean paired difference a - b of recall@k (points) and its standard error."""
    d = [100 * (recall(a(lists_of(r)), r["gold"], k) - recall(b(lists_of(r)), r["gold"], k)) for r in rows]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    return {"mean": round(mean, 2), "se": round((var / n) ** 0.5, 2), "n": n,
            "wins": sum(x > 0 for x in d), "losses": sum(x < 0 for x in d)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump")
    ap.add_argument("--name", default=None)
    ap.add_argument("--product", default=None, help="a second dump of the same set run with the floor in the product "
                                                    "(cascade_dump.py --set-option rerank.keep_top=M): its lists are "
                                                    "scored beside the first dump's, on the same halves")
    args = ap.parse_args(argv)
    data = json.loads(Path(args.dump).read_text())
    rows = data["rows"]
    rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())  # a fixed split, not file order
    choose, report = rows[: len(rows) // 2], rows[len(rows) // 2:]
    # The stage lists are the first retrieval round's (a multi-hop question may run more rounds; `final` is the
    # trace's last list). The floor acts on round one's cascade: rerank, then MMR, over the fused list.
    base = {"bm25": lambda L: L.get("bm25", []), "dense": lambda L: L.get("dense", []),
            "hybrid (fused)": lambda L: L["fused"], "rerank": lambda L: L.get("rerank", L["fused"]),
            "cascade (mmr)": lambda L: L["mmr"], "default (final)": lambda L: L["final"]}
    grid = {(m, c): (lambda L, m=m, c=c: floor(L["mmr"], L["fused"], m, c)) for m in (0, 1, 2, 3, 4, 5)
            for c in (2, 3, 4, 5) if m <= c and (m or c == 5)}
    on_choose = {mc: table(choose, {"v": fn})["v"]["all"]["recall@5"] for mc, fn in grid.items()}
    best = max(grid, key=lambda mc: (on_choose[mc], -mc[0], mc[1]))  # ties: fewer protected (0 = none), later cut
    variants = {**base, f"floor m={best[0]} c={best[1]} (mmr)": grid[best],
                **{f"floor m={m} c={c} (mmr)": grid[(m, c)] for m, c in ((1, 3), (2, 5), (3, 5)) if (m, c) != best}}
    out: dict[str, Any] = {"dump": args.dump, "config_hash": data.get("config_hash"), "questions": len(rows),
                           "split": "question ids by sha256; first half chooses (m, c), second half reports",
                           "choose_grid_recall@5": {f"m={m} c={c}": v for (m, c), v in on_choose.items()},
                           "chosen": {"m": best[0], "c": best[1]}}
    for part, rs in (("choose", choose), ("report", report), ("all", rows)):
        out[part] = table(rs, variants)
        out[part + "_paired@5"] = {
            "default - hybrid": paired(rs, base["default (final)"], base["hybrid (fused)"]),
            "floor - hybrid": paired(rs, grid[best], base["hybrid (fused)"]),
            "cascade - hybrid": paired(rs, base["cascade (mmr)"], base["hybrid (fused)"]),
            "floor - cascade": paired(rs, grid[best], base["cascade (mmr)"]),
            "rerank - hybrid": paired(rs, base["rerank"], base["hybrid (fused)"]),
            "mmr - rerank": paired(rs, base["cascade (mmr)"], base["rerank"])}
    if args.product:
        prod = {r["id"]: r for r in json.loads(Path(args.product).read_text())["rows"]}
        out["product"] = {"dump": args.product, "overrides": json.loads(Path(args.product).read_text())["overrides"]}
        pv = {"hybrid (fused, before)": lambda r: lists_of(r)["fused"],
              "cascade (mmr, before)": lambda r: lists_of(r)["mmr"],
              "cascade (mmr, floor)": lambda r: lists_of(prod[r["id"]])["mmr"],
              "default final (before)": lambda r: lists_of(r)["final"],
              "default final (floor)": lambda r: lists_of(prod[r["id"]])["final"]}
        for part, rs in (("choose", choose), ("report", report)):
            out["product"][part] = {n: {f"recall@{k}": round(100 * sum(recall(fn(r), r["gold"], k) for r in rs)
                                                             / len(rs), 1) for k in KS} for n, fn in pv.items()}
            pair = {}
            for lab, x, y in (("cascade floor - hybrid", "cascade (mmr, floor)", "hybrid (fused, before)"),
                              ("cascade floor - cascade before", "cascade (mmr, floor)", "cascade (mmr, before)"),
                              ("final floor - final before", "default final (floor)", "default final (before)")):
                d = [100 * (recall(pv[x](r), r["gold"], 5) - recall(pv[y](r), r["gold"], 5)) for r in rs]
                mean = sum(d) / len(d)
                se = (sum((v - mean) ** 2 for v in d) / (len(d) - 1) / len(d)) ** 0.5
                pair[lab] = {"mean": round(mean, 2), "se": round(se, 2), "wins": sum(v > 0 for v in d),
                             "losses": sum(v < 0 for v in d)}
            out["product"][part + "_paired@5"] = pair
            print(f"product {part}: {json.dumps(out['product'][part])}\n  {json.dumps(pair)}")
    for part in ("choose", "report"):
        print(f"== {part} ({len(choose) if part == 'choose' else len(report)} questions)")
        types = sorted({t for v in out[part].values() for t in v})
        print(f"{'variant':<26}" + "".join(f"{t[:13]:>15}" for t in types))
        for name, by in out[part].items():
            print(f"{name:<26}" + "".join(f"{by.get(t, {}).get('recall@5', float('nan')):>15.1f}" for t in types))
        print(json.dumps(out[part + "_paired@5"]))
    if args.name:
        write_result(args.name, out, table=MEASURED_CASCADE_GATE)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_cascade_gate(d: dict[str, Any], file: str) -> list[Any]:
    """The report half: recall@5 of every stage's list and of the offline floor, by question type; paired differences."""
    ch, rep = d.get("chosen") or {}, d.get("report") or {}
    out = [f"### Cascade against hybrid on multi-hop questions ({num(d.get('questions'))} questions, offline "
           "re-orderings of one run's lists)", "", CAPTION, "",
           "Document-level recall@5 (%) of each stage's own list in the shipped default's trace and of offline "
           "variants computed from the same lists (no model call). The floor keeps the fused list's first m documents "
           f"within the cascade's first c; m={ch.get('m')}, c={ch.get('c')} chosen on the other half "
           f"({d.get('split', '')}). Report half:", ""]
    types = list(dict.fromkeys(t for by in rep.values() for t in by))
    size = {t: next((by[t].get("n") for by in rep.values() if t in by), None) for t in types}
    out.append(grid(["variant", *[f"{t} ({size[t]})" for t in types]],
                    [[name, *[num((by.get(t) or {}).get("recall@5"), 1) for t in types]] for name, by in rep.items()]))
    paired = d.get("report_paired@5") or {}
    if paired:
        out += ["", "Paired per question on the report half (recall@5 points):", "",
                grid(["difference", "mean", "standard error", "wins", "losses"],
                     [[k, num(v.get("mean")), num(v.get("se")), num(v.get("wins")), num(v.get("losses"))]
                      for k, v in paired.items()])]
    return out


MEASURED_CASCADE_GATE = Table(measured_cascade_gate, "Compression cascade")


if __name__ == "__main__":
    raise SystemExit(main())
