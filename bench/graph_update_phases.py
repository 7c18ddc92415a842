"""Where a small incremental graph update's time goes (issue #31): the sample corpus's one-sentence edit, phase by
phase, with the statements it sends to DuckDB, against the full build; and the floor no store layout can go below.

    nice -n 10 .venv/bin/python bench/graph_update_phases.py [--reps 3] [--out bench/results/graph_update_phases.json]

Per repetition, as bench/incremental.py sets it up (llm contexts left out: the graph does not read them): a fresh
in-memory store ingests the sample corpus and builds the graph in full with the bundled embedder (the first build
embeds every node name for merge suggestions: the denominator bench/incremental.py uses); the edited files are
ingested with graph.follow_ingest off, then `graph update` runs with timers around its steps (wall clock and process
CPU seconds, all threads) and a counter of the statements it executes; last, the same update again with nothing to
do (the fixed cost). The floor is what any incremental update has to compute: extracting the changed chunks and
re-clustering their communities (Leiden on the region); everything else is reading and writing rows. Medians of the
repetitions are reported.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from _common import ROOT, write_result

sys.path.insert(0, str(ROOT))

import core.graph.build as build  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.store import Store  # noqa: E402
from incremental import SEARCH, WS, pick_edits, sample_corpus  # noqa: E402

# (function in core.graph.build, label); nested ones are reported inside their callers' time too.
PHASES = (("extract_all", "extract the changed chunks"), ("current_resolution", "resolution read"),
          ("_reaggregate", "node facts and aggregates"), ("local_region", "region read and re-clustering"),
          ("local_update", "Leiden on the region"), ("refresh_suggestions", "merge suggestions"),
          ("build_summaries", "summaries"))


class _Counting:
    """A cursor that counts execute calls (the statements an update sends)."""

    def __init__(self, cur: Any, counter: list[int]) -> None:
        self._cur, self._n = cur, counter

    def execute(self, *a: Any, **k: Any) -> "_Counting":
        self._n[0] += 1
        self._cur.execute(*a, **k)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def _timed(fn: Callable[..., Any], label: str, acc: dict[str, list[float]]) -> Callable[..., Any]:
    def run(*a: Any, **k: Any) -> Any:
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            w, p = acc.setdefault(label, [0.0, 0.0])
            acc[label] = [w + time.perf_counter() - t, p + time.process_time() - c]
    return run


def one_run(files: list[tuple[str, bytes]], edited: list[tuple[str, bytes]], embedder: Any) -> tuple[dict[str, float], Any]:
    cfg = PipelineConfig().with_overrides({**SEARCH, "graph.follow_ingest": False})
    store = Store(":memory:")
    try:
        deps = build_deps(cfg, store=store, embedder=embedder)
        ingest_files(files, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        t0 = time.perf_counter()
        full = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        out = {"full_build_s": time.perf_counter() - t0, "full_build_cpu_s": full.cpu_seconds}
        ingest_files(edited, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        acc: dict[str, list[float]] = {}
        n = [0]
        real_cursor = store.db.cursor
        store.db.cursor = lambda: _Counting(real_cursor(), n)  # type: ignore[method-assign]
        saved = {name: getattr(build, name) for name, _ in PHASES}
        try:
            for name, label in PHASES:
                setattr(build, name, _timed(saved[name], label, acc))
            rep = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        finally:
            for name, fn in saved.items():
                setattr(build, name, fn)
        out.update({"update_s": rep.seconds, "update_cpu_s": rep.cpu_seconds, "update_statements": n[0],
                    "chunks_added": rep.chunks_added, "chunks_removed": rep.chunks_removed,
                    "summaries_invalidated": rep.summaries_invalidated, "summaries_written": rep.summaries_written})
        for label, (w, c) in acc.items():
            out[f"{label} s"], out[f"{label} cpu_s"] = w, c
        n[0] = 0
        noop = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        out.update({"noop_s": noop.seconds, "noop_cpu_s": noop.cpu_seconds, "noop_statements": n[0]})
        store.db.cursor = real_cursor  # type: ignore[method-assign]
        return out, deps.embedder
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    files, _ = sample_corpus()
    edits = pick_edits(files, 0.01, 31)
    edited = [(n, edits.get(n, b)) for n, b in files]
    runs, emb = [], None
    for _ in range(args.reps):
        row, emb = one_run(files, edited, emb)
        runs.append(row)
        print({k: round(v, 4) for k, v in row.items()}, file=sys.stderr)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    full_s, full_cpu = med["full_build_s"], med["full_build_cpu_s"]
    phases = {}
    for _, label in PHASES:
        if f"{label} s" in med:
            phases[label] = {"seconds": round(med[f"{label} s"], 4), "cpu_seconds": round(med[f"{label} cpu_s"], 4),
                             "share_of_full_build": round(med[f"{label} s"] / full_s, 4),
                             "share_of_full_build_cpu": round(med[f"{label} cpu_s"] / full_cpu, 4)}
    floor_s = med["extract the changed chunks s"] + med["Leiden on the region s"]
    floor_cpu = med["extract the changed chunks cpu_s"] + med["Leiden on the region cpu_s"]
    out = {
        "documents": len(files), "edited_documents": len(edits), "reps": args.reps,
        "full_build": {"seconds": round(full_s, 4), "cpu_seconds": round(full_cpu, 4)},
        "update": {"seconds": round(med["update_s"], 4), "cpu_seconds": round(med["update_cpu_s"], 4),
                   "share_of_full_build": round(med["update_s"] / full_s, 4),
                   "share_of_full_build_cpu": round(med["update_cpu_s"] / full_cpu, 4),
                   "statements": int(med["update_statements"]), "chunks_added": int(med["chunks_added"]),
                   "chunks_removed": int(med["chunks_removed"]),
                   "summaries_invalidated": int(med["summaries_invalidated"]),
                   "summaries_written": int(med["summaries_written"])},
        "noop_update": {"seconds": round(med["noop_s"], 4), "cpu_seconds": round(med["noop_cpu_s"], 4),
                        "share_of_full_build": round(med["noop_s"] / full_s, 4),
                        "share_of_full_build_cpu": round(med["noop_cpu_s"] / full_cpu, 4),
                        "statements": int(med["noop_statements"])},
        "phases": phases,
        "floor_extract_and_local_leiden": {"seconds": round(floor_s, 4), "cpu_seconds": round(floor_cpu, 4),
                                           "share_of_full_build": round(floor_s / full_s, 4),
                                           "share_of_full_build_cpu": round(floor_cpu / full_cpu, 4)},
        "runs": [{k: round(v, 4) for k, v in r.items()} for r in runs],
    }
    path = write_result("graph_update_phases", out, Path(args.out) if args.out else None)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
