"""Where a small incremental graph update's time goes (issue #31): the sample corpus's one-sentence edit, step by
step, with the statements each step sends to DuckDB, against the full build; and the floor no store layout can go
below.

    nice -n 19 .venv/bin/python bench/graph_update_phases.py [--reps 5] [--out bench/results/graph_update_phases.json]

Per repetition, as bench/incremental.py sets it up (llm contexts left out: the graph does not read them): a fresh
in-memory store ingests the sample corpus and builds the graph in full with the bundled embedder (the first build
embeds every node name for merge suggestions: the denominator bench/incremental.py uses); the edited files are
ingested with graph.follow_ingest off, then `graph update` runs with a timer around every step: each method of the
store's repositories it calls (store.graph, store.corpus, store.review, store.communities, store.caches) and each
function of core/graph/ the workflow calls (build, snapshot, summaries, resolve, communities, extract). A step's
time is its own (exclusive): what the steps it calls took is counted under theirs, so the steps add up to the whole
update; what is left ("build_graph (glue)") is build_graph's own Python. Each step counts the DuckDB statements it
executes (execute calls; an executemany counts once per parameter set) and the relations it registers (Arrow tables
or frames), with their wall time. Last, the same update again with nothing to do (the fixed cost). The floor is
what any incremental update has to compute: extracting the changed chunks and re-clustering their communities
(Leiden on the region); everything else is reading and writing rows. Medians of the repetitions are reported.
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
import core.graph.snapshot as snapshot  # noqa: E402
import core.graph.summaries as summaries  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.store import Store  # noqa: E402
from incremental import SEARCH, WS, pick_edits, sample_corpus  # noqa: E402

# Module-level functions timed as steps, by the module whose namespace the caller looks them up in.
FUNCTIONS = {
    build: ("build_graph", "current_resolution", "resolve", "_mapping", "_display", "make_extractor", "extract_all",
            "_store_extractions", "_reaggregate", "node_rows", "_finish", "local_region", "_communities_of",
            "region_graph", "local_update", "_finish_region", "_active_names", "refresh_suggestions",
            "name_vectors", "suggest_merges", "merge_item_id", "region_snapshot", "build_summaries",
            "active_graph", "load_snapshot", "recompute_communities", "cluster"),
    snapshot: ("_indexed", "_snapshot", "cache_first"),
    summaries: ("get_summaries", "community_contexts", "_context_parts", "extractive_summary"),
}
REPOS = ("graph", "corpus", "review", "communities", "caches")
GLUE = "build.build_graph"
FLOOR = ("build.extract_all", "build.local_update")


class Tracer:
    """Exclusive wall / CPU time, calls, statements and registrations per step (a stack of the running steps)."""

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []
        self.acc: dict[str, list[float]] = {}  # label -> [wall, cpu, calls, statements, stmt wall, registrations]
        self.on = False

    def _row(self, label: str) -> list[float]:
        return self.acc.setdefault(label, [0.0, 0.0, 0, 0, 0.0, 0])

    def wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def run(*a: Any, **k: Any) -> Any:
            if not self.on:
                return fn(*a, **k)
            frame = [label, time.perf_counter(), time.process_time(), 0.0, 0.0]
            self.stack.append(frame)
            try:
                return fn(*a, **k)
            finally:
                self.stack.pop()
                w, c = time.perf_counter() - frame[1], time.process_time() - frame[2]
                row = self._row(label)
                row[0] += w - frame[3]
                row[1] += c - frame[4]
                row[2] += 1
                if self.stack:
                    self.stack[-1][3] += w
                    self.stack[-1][4] += c
        return run

    def statement(self, n: int, seconds: float) -> None:
        if self.on:
            row = self._row(self.stack[-1][0] if self.stack else "(outside)")
            row[3] += n
            row[4] += seconds

    def registration(self) -> None:
        if self.on:
            self._row(self.stack[-1][0] if self.stack else "(outside)")[5] += 1

    def reset(self) -> dict[str, list[float]]:
        out, self.acc = self.acc, {}
        return out


class _Counting:
    """A cursor that reports its statements and registrations to the tracer."""

    def __init__(self, cur: Any, tracer: Tracer) -> None:
        self._cur, self._t = cur, tracer

    def execute(self, *a: Any, **k: Any) -> "_Counting":
        t = time.perf_counter()
        self._cur.execute(*a, **k)
        self._t.statement(1, time.perf_counter() - t)
        return self

    def executemany(self, sql: Any, params: Any = (), *a: Any, **k: Any) -> "_Counting":
        params = list(params)
        t = time.perf_counter()
        self._cur.executemany(sql, params, *a, **k)
        self._t.statement(len(params), time.perf_counter() - t)
        return self

    def register(self, *a: Any, **k: Any) -> Any:
        self._t.registration()
        return self._cur.register(*a, **k)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    def __enter__(self) -> "_Counting":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cur.close()


def instrument(store: Store, tracer: Tracer) -> Callable[[], None]:
    """Wrap the store's repositories, its cursors and the workflow's functions; returns the undo."""
    undo: list[Callable[[], None]] = []
    for repo_name in REPOS:
        repo = getattr(store, repo_name)
        for name in dir(type(repo)):
            if not name.startswith("_") and callable(getattr(type(repo), name)):
                setattr(repo, name, tracer.wrap(getattr(repo, name), f"store.{repo_name}.{name}"))
                undo.append(lambda r=repo, n=name: delattr(r, n))
    real_cursor = store.db.cursor
    store.db.cursor = lambda: _Counting(real_cursor(), tracer)  # type: ignore[method-assign]
    undo.append(lambda: delattr(store.db, "cursor"))
    for module, names in FUNCTIONS.items():
        short = module.__name__.rsplit(".", 1)[-1]
        for name in names:
            fn = getattr(module, name)
            setattr(module, name, tracer.wrap(fn, f"{short}.{name}"))
            undo.append(lambda m=module, n=name, f=fn: setattr(m, n, f))

    def restore() -> None:
        for u in reversed(undo):
            u()
    return restore


def one_run(files: list[tuple[str, bytes]], edited: list[tuple[str, bytes]], embedder: Any
            ) -> tuple[dict[str, float], dict[str, list[float]], Any]:
    cfg = PipelineConfig().with_overrides({**SEARCH, "graph.follow_ingest": False})
    store = Store(":memory:")
    try:
        deps = build_deps(cfg, store=store, embedder=embedder)
        ingest_files(files, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        t0 = time.perf_counter()
        full = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
        out = {"full_build_s": time.perf_counter() - t0, "full_build_cpu_s": full.cpu_seconds}
        ingest_files(edited, store=store, embedder=deps.embedder, config=cfg, workspace=WS)
        tracer = Tracer()
        restore = instrument(store, tracer)
        try:
            tracer.on = True
            t, c = time.perf_counter(), time.process_time()
            rep = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
            outer_w, outer_c = time.perf_counter() - t, time.process_time() - c
            steps = tracer.reset()
            noop = build.build_graph(store, cfg.graph, embedder=deps.embedder, workspace=WS)
            noop_steps = tracer.reset()
        finally:
            tracer.on = False
            restore()
        out.update({"update_s": rep.seconds, "update_cpu_s": rep.cpu_seconds, "update_outer_s": outer_w,
                    "update_outer_cpu_s": outer_c, "update_statements": sum(r[3] for r in steps.values()),
                    "update_registrations": sum(r[5] for r in steps.values()),
                    "update_statement_s": sum(r[4] for r in steps.values()),
                    "steps_sum_s": sum(r[0] for r in steps.values()),
                    "chunks_added": rep.chunks_added, "chunks_removed": rep.chunks_removed,
                    "summaries_invalidated": rep.summaries_invalidated, "summaries_written": rep.summaries_written,
                    "noop_s": noop.seconds, "noop_cpu_s": noop.cpu_seconds,
                    "noop_statements": sum(r[3] for r in noop_steps.values())})
        return out, steps, deps.embedder
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    files, _ = sample_corpus()
    edits = pick_edits(files, 0.01, 31)
    edited = [(n, edits.get(n, b)) for n, b in files]
    runs, step_runs, emb = [], [], None
    for _ in range(args.reps):
        row, steps, emb = one_run(files, edited, emb)
        runs.append(row)
        step_runs.append(steps)
        print({k: round(v, 4) for k, v in row.items()}, file=sys.stderr)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    full_s, full_cpu = med["full_build_s"], med["full_build_cpu_s"]
    order = list(step_runs[0])  # first finished first; sorted below by time
    labels = sorted({k for s in step_runs for k in s}, key=lambda k: -statistics.median(
        s.get(k, [0.0])[0] for s in step_runs))
    phases = {}
    for label in labels:
        vals = [s.get(label, [0.0, 0.0, 0, 0, 0.0, 0]) for s in step_runs]
        w, c = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
        phases["build_graph (glue)" if label == GLUE else label] = {
            "seconds": round(w, 5), "cpu_seconds": round(c, 5), "share_of_full_build": round(w / full_s, 5),
            "share_of_full_build_cpu": round(c / full_cpu, 5), "calls": int(statistics.median(v[2] for v in vals)),
            "statements": int(statistics.median(v[3] for v in vals)),
            "statement_seconds": round(statistics.median(v[4] for v in vals), 5),
            "registrations": int(statistics.median(v[5] for v in vals))}
    floor_s = sum(statistics.median(s.get(k, [0.0])[0] for s in step_runs) for k in FLOOR)
    floor_cpu = sum(statistics.median(s.get(k, [0.0, 0.0])[1] for s in step_runs) for k in FLOOR)
    out = {
        "documents": len(files), "edited_documents": len(edits), "reps": args.reps,
        "full_build": {"seconds": round(full_s, 4), "cpu_seconds": round(full_cpu, 4)},
        "update": {"seconds": round(med["update_s"], 4), "cpu_seconds": round(med["update_cpu_s"], 4),
                   "share_of_full_build": round(med["update_s"] / full_s, 4),
                   "share_of_full_build_cpu": round(med["update_cpu_s"] / full_cpu, 4),
                   "statements": int(med["update_statements"]), "registrations": int(med["update_registrations"]),
                   "statement_seconds": round(med["update_statement_s"], 4),
                   "steps_sum_seconds": round(med["steps_sum_s"], 4),
                   "chunks_added": int(med["chunks_added"]), "chunks_removed": int(med["chunks_removed"]),
                   "summaries_invalidated": int(med["summaries_invalidated"]),
                   "summaries_written": int(med["summaries_written"])},
        "noop_update": {"seconds": round(med["noop_s"], 4), "cpu_seconds": round(med["noop_cpu_s"], 4),
                        "share_of_full_build": round(med["noop_s"] / full_s, 4),
                        "share_of_full_build_cpu": round(med["noop_cpu_s"] / full_cpu, 4),
                        "statements": int(med["noop_statements"])},
        "phases": phases,
        "call_order": order,
        "floor_extract_and_local_leiden": {"seconds": round(floor_s, 4), "cpu_seconds": round(floor_cpu, 4),
                                           "share_of_full_build": round(floor_s / full_s, 4),
                                           "share_of_full_build_cpu": round(floor_cpu / full_cpu, 4)},
        "runs": [{k: round(v, 4) for k, v in r.items()} for r in runs],
    }
    path = write_result("graph_update_phases", out, Path(args.out) if args.out else None)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
