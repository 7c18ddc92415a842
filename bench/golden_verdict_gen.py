"""The generated-set half of bench/golden_verdict.py: generate from the stored chunks, report validity, sweep, and
hold the verdict against the real questions' (cached by the real phase)."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import ROOT, utc_now
from golden_verdict import METRIC, cache_path, configs, load_real, setup, score, slug
from quality import QueryVectorCache

from core.deps import Deps
from core.eval.datasets import load_dataset
from core.eval.golden import GENERATOR, counts_by_type, generate_set, generation_notes, mean_overlap, passages_from
from core.eval.sweep import SweepRow, rank, verdict
from core.eval.validity import of_set


def _rows(raw: list[dict[str, Any]]) -> list[SweepRow]:
    return rank([SweepRow(r["name"], r["config_hash"], r["metrics"], r["per_query"], r["median_ms"], 0.0)
                 for r in raw])


def _paired_loss(real: dict[str, SweepRow], best: str, chosen: str) -> float:
    """Points of recall@5 the chosen configuration loses to the real best, over the real questions both scored."""
    a, b = real[best].per_query.get(METRIC, {}), real[chosen].per_query.get(METRIC, {})
    common = [q for q in a if q in b and a[q] is not None and b[q] is not None]
    return round(100 * sum(a[q] - b[q] for q in common) / max(1, len(common)), 2)


def phase_generated(name: str, root: Path, seed: int, n: int) -> dict[str, Any]:
    cached = json.loads(cache_path(name).read_text())
    t0 = time.perf_counter()
    store, base, resolved, ws, notes = setup(name, root, seed)
    got = generate_set(passages_from(store.corpus, ws), n, seed=seed)
    set_name = "verdict-gen"
    store.golden.put_set(ws, set_name, got.items, generator=GENERATOR, corpus_version=store.corpus.corpus_version(ws),
                         notes=generation_notes(got.dropped, writer="offline", seed=seed))
    gen = load_dataset(f"golden:{ws}/{set_name}", store=store)
    real = load_real(name, root, seed)
    gen = replace(gen, unit=real.unit, ks=(5, 10), doc_key="name" if real.unit == "doc" else gen.doc_key)
    items_path = ROOT / "data" / "bench" / f"golden_verdict_items_{slug(name)}.jsonl"
    items_path.write_text("".join(json.dumps({"query": it.query, "type": it.qtype, "answer": it.answer,
                                              "form": it.meta.get("fact"), "gold": [g.span for g in it.gold],
                                              "swap": it.meta.get("swap")}, ensure_ascii=False) + "\n"
                                  for it in got.items))
    deps = Deps(store=store, embedder=QueryVectorCache(base.embedder, [q.query for q in gen.queries]),
                notices=base.notices)
    raw, secs = score(gen, deps, ws)
    store.close()
    current = configs()[-1].config.stable_hash()
    g_rows = _rows(raw)
    cur_row = next(r for r in g_rows if r.config_hash == current)
    valid = of_set(gen, difficulty=cur_row.metrics.get(METRIC), bands=max(r.band for r in g_rows))
    g_verdict = verdict(g_rows, current, blocked=valid.blocked())
    r_rows = _rows(cached["rows"])
    r_verdict = verdict(r_rows, current)
    by_name = {r.name: r for r in r_rows}
    real_best = r_rows[0].name
    loss = _paired_loss(by_name, real_best, g_verdict.recommendation)
    top_band = [r.name for r in g_rows if r.band == 1]
    real_separable = r_verdict.verdict == "winner"
    default_real = next(r for r in r_rows if r.config_hash == current).metrics.get(METRIC) or 0.0
    default_gen = cur_row.metrics.get(METRIC) or 0.0
    return {"generated": {
        "items": len(got.items), "by_type": counts_by_type(got.items), "mean_overlap": mean_overlap(got.items),
        "dropped": got.dropped, "validity": valid.to_dict(), "seconds": round(secs, 1),
        "table": [{"rank": i, "band": r.band, "config": r.name, METRIC: round(r.metrics.get(METRIC) or 0, 4),
                   "vs current": g_verdict.vs_current.get(r.name)} for i, r in enumerate(g_rows, 1)],
        "verdict": g_verdict.to_dict(), "items_file": str(items_path.relative_to(ROOT)),
        "setup_seconds": round(time.perf_counter() - t0 - secs, 1), "measured_at": utc_now()},
        "targets": {
            "real_best": real_best, "real_verdict": r_verdict.to_dict(), "real_separable": real_separable,
            "recommended": g_verdict.recommendation, "recommended_loss_points": loss, "loss_ok": loss <= 1.0,
            "real_best_in_generated_top_band": real_best in top_band,
            "no_winner_when_real_cannot_separate": (g_verdict.verdict == "no clear winner") if not real_separable
            else None,
            "default_recall_real": round(default_real, 4), "default_recall_generated": round(default_gen, 4),
            "difficulty_gap_points": round(100 * (default_gen - default_real), 1),
            "difficulty_ok": abs(default_gen - default_real) <= 0.08}}
