"""The ceiling of issue #43's "≤ 1.0 point of recall@5 loss" target: what a perfect generator would reach.

    .venv/bin/python bench/golden_verdict_ceiling.py [--splits 200] [--sets beir_scifact,anthropic_codebase]

A perfect generator writes questions drawn from the same distribution as the real ones. So half of the real
questions, chosen at random, stands in for the generated set: the sweep's verdict (core/eval/sweep.py rank + verdict,
the current configuration as today's default) is taken on that half, and its recommendation is scored on the other
half against that half's best configuration (paired recall@5 loss, in points), which is what a user who followed it
would see on questions they have not written yet. Repeated over `--splits` random halves (seeded). Also reported:
the loss on the whole real set, how often the verdict was "no clear winner", and how often the real best sat in the
half's top band. Reads the per-question rows bench/golden_verdict.py --phase real cached under data/bench/ (no
retrieval is run here). Writes bench/results/golden_verdict_ceiling.json.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from _common import RESULTS, utc_now, write_result
from golden_verdict import CUTS, METRIC, cache_path, configs

from core.eval.sweep import SweepRow, rank, verdict


def _rows(raw: list[dict[str, Any]], keep: set[str]) -> list[SweepRow]:
    """The cached rows restricted to the questions in `keep` (metrics recomputed as means over them)."""
    out = []
    for r in raw:
        pq = {m: {q: v for q, v in vals.items() if q in keep} for m, vals in r["per_query"].items()}
        metrics = {m: (statistics.fmean([v for v in vals.values() if v is not None])
                       if any(v is not None for v in vals.values()) else None) for m, vals in pq.items()}
        out.append(SweepRow(r["name"], r["config_hash"], metrics, pq, r.get("median_ms"), 0.0))
    return out


def _loss(rows: list[SweepRow], chosen: str) -> float:
    """Points of recall@5 `chosen` loses to the best row, paired over the same questions."""
    by = {r.name: r for r in rows}
    best = max(rows, key=lambda r: r.metrics.get(METRIC) or 0.0)
    a, b = best.per_query[METRIC], by[chosen].per_query[METRIC]
    common = [q for q in a if a[q] is not None and b.get(q) is not None]
    return 100 * sum(a[q] - b[q] for q in common) / max(1, len(common))


def ceiling(name: str, splits: int, seed: int) -> dict[str, Any]:
    d = json.loads(cache_path(name).read_text())
    raw = d["rows"]
    qids = sorted({q for r in raw for q, v in r["per_query"][METRIC].items() if v is not None})
    current = configs()[-1].config.stable_hash()
    full = rank(_rows(raw, set(qids)))
    full_verdict = verdict(full, current)
    rng = random.Random(seed)
    held, whole, no_winner, best_in_band, recs = [], [], 0, 0, {}
    for _ in range(splits):
        half = set(rng.sample(qids, len(qids) // 2))
        rows_a = rank(_rows(raw, half))
        v = verdict(rows_a, current)
        rows_b = _rows(raw, set(qids) - half)
        held.append(_loss(rows_b, v.recommendation))
        whole.append(_loss(full, v.recommendation))
        no_winner += v.verdict != "winner"
        best_in_band += full[0].name in [r.name for r in rows_a if r.band == 1]
        recs[v.recommendation] = recs.get(v.recommendation, 0) + 1
    cur_row = next(r for r in full if r.config_hash == current)
    q = lambda xs, p: round(sorted(xs)[min(len(xs) - 1, int(p * len(xs)))], 2)  # noqa: E731
    return {
        "set": name, "questions": len(qids), "half": len(qids) // 2, "splits": splits, "seed": seed,
        "real_best": full[0].name, "real_best_recall@5": round(full[0].metrics[METRIC] or 0, 4),
        "current": cur_row.name, "current_recall@5": round(cur_row.metrics[METRIC] or 0, 4),
        "current_loss_on_all_points": round(_loss(full, cur_row.name), 2),
        "real_verdict_on_all": full_verdict.verdict,
        "loss_heldout_half": {"mean": round(statistics.fmean(held), 2), "median": q(held, 0.5),
                              "p90": q(held, 0.9), "within_1_point": round(sum(x <= 1.0 for x in held) / splits, 3)},
        "loss_all_questions": {"mean": round(statistics.fmean(whole), 2), "median": q(whole, 0.5),
                               "p90": q(whole, 0.9),
                               "within_1_point": round(sum(x <= 1.0 for x in whole) / splits, 3)},
        "no_clear_winner_share": round(no_winner / splits, 3),
        "real_best_in_half_top_band_share": round(best_in_band / splits, 3),
        "recommended": dict(sorted(recs.items(), key=lambda kv: -kv[1])),
        "real_measured_at": d.get("measured_at"), "real_commit_note": "rows from bench/golden_verdict.py --phase real",
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(CUTS))
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "golden_verdict_ceiling.json")
    args = ap.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s and cache_path(s).exists()]
    missing = [s for s in args.sets.split(",") if s and s not in sets]
    out = [ceiling(s, args.splits, args.seed) for s in sets]
    for r in out:
        h, w = r["loss_heldout_half"], r["loss_all_questions"]
        print(f"{r['set']}: real best {r['real_best']} {r['real_best_recall@5']:.3f}, current {r['current']} "
              f"{r['current_recall@5']:.3f} (loses {r['current_loss_on_all_points']} points); a perfect generator's "
              f"recommendation loses {h['mean']} points on the held-out half (within 1.0 in "
              f"{100 * h['within_1_point']:.0f}% of splits), {w['mean']} on all real questions; no clear winner in "
              f"{100 * r['no_clear_winner_share']:.0f}%")
    payload = {"benchmark": "golden_verdict_ceiling", "metric": METRIC, "measured_at": utc_now(),
               "note": "half of the real questions stands in for a perfect generator's set; the verdict taken on it "
                       "is scored on the other half (and on all) against the best configuration there (issue #43)",
               "missing_real_rows": missing, "sets": out}
    write_result("golden_verdict_ceiling", payload, args.out, argv=argv)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
