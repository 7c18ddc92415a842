"""Costs page open time with a large ledger (issue #28: "Costs opens in <= 1 s with 10,000 ledger rows").

Builds a temporary database: the sample corpus ingested, --rows LLM calls in the usage ledger (context builds of 80
calls each, the rest one answer call per query), --queries logged query traces with an answer-stage cost, and the
embedding-cache events of a query each. Then opens the Costs page through Streamlit's AppTest (the page's script run
on the server side, workbench.py included: what the browser waits for before anything of the page is drawn), --runs
times, and records each run's wall time. The first open of the session (the embedding model loads for the sidebar)
is timed apart and left out of the figure.

    python bench/costs_page.py [--rows 10000] [--queries 200] [--runs 5] [--db seeded.duckdb]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import CAPTION, Table, machine_info, met, num, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def seed(db: Path, rows: int, queries: int) -> dict[str, int]:
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.ingest.pipeline import ingest_files
    from core.models.pricing import tokens_usd
    from core.types import Answer, Candidate, LedgerEntry, StageResult, Trace, Usage

    deps = build_deps(PipelineConfig(), db=str(db))
    files = [(p.name, p.read_bytes()) for p in sorted((ROOT / "sample_corpus" / "docs").iterdir()) if p.is_file()]
    ingest_files(files, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    model = "claude-haiku-4-5"
    builds = max(1, (rows - queries) // 80)
    entries = []
    for b in range(builds):
        run = uuid.uuid4().hex
        for i in range(80):
            w, r = (6000, 0) if i == 0 else (0, 6000)
            entries.append(LedgerEntry("context", model, 120, 60, w, r,
                                       tokens_usd(model, input_tokens=120, output_tokens=60, cache_write_tokens=w,
                                                  cache_read_tokens=r),
                                       tokens_usd(model, input_tokens=120 + w + r, output_tokens=60), 900.0,
                                       f"doc{b}", run))
    while len(entries) < rows:
        entries.append(LedgerEntry("answer", model, 2500, 200, 0, 0,
                                   tokens_usd(model, input_tokens=2500, output_tokens=200),
                                   tokens_usd(model, input_tokens=2500, output_tokens=200), 1500.0, "q",
                                   uuid.uuid4().hex))
    for e in entries:
        deps.store.ledger.record_usage(e)
    for n in range(queries):
        cands = tuple(Candidate(f"c{k}", "d", "text " * 40, 1.0 / (k + 1), k + 1, {"stage": "bm25"}) for k in range(50))
        stages = (StageResult("answer_cache", (), 3.0, info={"verdict": "miss", "embed_cache_misses": 1}),
                  StageResult("bm25", cands, 2.0), StageResult("dense", cands, 20.0),
                  StageResult("fused", cands, 0.3), StageResult("rerank", cands[:10], 80.0),
                  StageResult("prune", cands[:10], 9.0, info={"embed_cache_hits": 10, "embed_cache_misses": 0}),
                  StageResult("answer", (), 1500.0, Usage(2500, 200, usd=0.003, calls=1)))
        deps.store.runs.log_trace(Trace(f"question {n}", "h", 1, stages, answer=Answer("a")))
    deps.store.close()
    return {"ledger_rows": len(entries), "context_builds": builds, "queries": queries}


def _browser(db: Path, runs: int) -> dict[str, object]:
    """In Chromium: from a click on 'Costs' (another page open, the model loaded) until the ledger table is drawn,
    no script runs and a trivial JavaScript call returns (the page answers); and the longest main-thread task seen
    meanwhile (PerformanceObserver 'longtask')."""
    from playwright.sync_api import sync_playwright

    from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, streamlit_app

    out: dict[str, list[float]] = {"open_seconds": [], "longest_task_ms": []}
    with streamlit_app(db, db.with_suffix(".log")) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(120_000)
        for _ in range(runs + 1):
            page.goto(f"{url}/corpus")
            page.get_by_role("heading", name="Corpus").wait_for()
            page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')")
            page.evaluate("window.__long = 0; new PerformanceObserver(l => l.getEntries().forEach("
                          "e => window.__long = Math.max(window.__long, e.duration))).observe({entryTypes: ['longtask']})")
            t = time.perf_counter()
            page.get_by_role("link", name="Costs").click()
            page.get_by_role("heading", name="Costs").wait_for()
            page.locator("[data-testid=stDataFrame] canvas").first.wait_for(state="attached")
            page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')")
            page.evaluate("1")
            out["open_seconds"].append(round(time.perf_counter() - t, 3))
            out["longest_task_ms"].append(round(float(page.evaluate("window.__long")), 1))
            # The floor: the same click to a light page (Corpus, 25 documents) from the Costs page.
            t = time.perf_counter()
            page.get_by_role("link", name="Corpus").click()
            page.get_by_role("heading", name="Corpus").wait_for()
            page.locator("[data-testid=stDataFrame] canvas").first.wait_for(state="attached")
            page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')")
            page.evaluate("1")
            out.setdefault("corpus_open_seconds", []).append(round(time.perf_counter() - t, 3))
        browser.close()
    first = {k: v[0] for k, v in out.items() if k != "corpus_open_seconds"}
    rest = {k: v[1:] if k != "corpus_open_seconds" else v for k, v in out.items()}
    return {"first_open": first, **rest, "open_median_seconds": statistics.median(rest["open_seconds"]),
            "corpus_open_median_seconds": statistics.median(rest["corpus_open_seconds"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", type=Path, default=None, help="a database this script seeded before: reused as it is")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--browser", action="store_true", help="also time the page in Chromium at 1366x768")
    ap.add_argument("--before", type=Path, default=None,
                    help="a results file of this script at an earlier commit, kept under 'before' (its run record "
                         "included)")
    a = ap.parse_args(argv)
    db = a.db or Path(tempfile.mkdtemp(prefix="costs_page_")) / "costs.duckdb"
    t = time.perf_counter()
    if db.exists():
        from core.store import Store

        s = Store(db, read_only=True)
        seeded = {"ledger_rows": len(s.ledger.usage_ledger()), "queries": s.runs.count_runs(), "reused": str(db)}
        s.close()
    else:
        seeded = seed(db, a.rows, a.queries)
    seed_s = time.perf_counter() - t
    # The browser's server first: the AppTest below keeps the database open in this process (one writer at a time).
    browser = _browser(db, a.runs) if a.browser else None
    os.environ["RAG_DB"] = str(db)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=300)
    t = time.perf_counter()
    at.run()
    at.switch_page("pages/costs.py").run()
    first = time.perf_counter() - t
    assert not at.exception, at.exception
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        at.switch_page("pages/costs.py").run()
        times.append(time.perf_counter() - t)
        assert not at.exception, at.exception
    result = {"seeded": seeded, "seed_seconds": round(seed_s, 1), "first_open_seconds": round(first, 3),
              "open_seconds": [round(x, 3) for x in times], "open_median_seconds": round(statistics.median(times), 3),
              "target_seconds": 1.0, **({"browser": browser} if browser else {}), "machine": machine_info(),
              **({"before": json.loads(a.before.read_text())} if a.before else {})}
    print(result)
    write_result("costs_page", result, a.out, argv=argv, table=MEASURED_COSTS_PAGE)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_costs_page(d: dict[str, Any], file: str) -> list[str]:
    """Issue #28: the Costs page opened on a ledger of 10,000 calls (bench/costs_page.py)."""
    s, b, before = d.get("seeded") or {}, d.get("browser") or {}, d.get("before") or {}
    out = ["### Costs page on a large ledger", "", CAPTION, "",
           f"{num(s.get('ledger_rows'))} ledger rows and {num(s.get('queries'))} logged queries; the page's script "
           f"(Streamlit AppTest) median **{num(d.get('open_median_seconds'), 2)} s**"
           + (f", in Chromium from the click to a drawn, responsive page median **{num(b.get('open_median_seconds'), 2)}"
              f" s** (target ≤ {num(d.get('target_seconds'), 1)} s: {met(b['open_median_seconds'] <= d['target_seconds'])}"
              f"; a light page, Corpus, {num(b.get('corpus_open_median_seconds'), 2)} s at the same time)"
              if b.get("open_median_seconds") is not None and d.get("target_seconds") is not None else "") + "."]
    bb = before.get("browser") or {}
    if before:
        out += ["", f"Before (every tab built on each open; run record kept in the file): script "
                f"{num(before.get('open_median_seconds'), 2)} s, Chromium {num(bb.get('open_median_seconds'), 2)} s, "
                f"longest main-thread task {num(max(bb.get('longest_task_ms') or [0]), 0)} ms against "
                f"{num(max(b.get('longest_task_ms') or [0]), 0)} ms now. Load averages differ between the two runs "
                "(both in their run records)."]
    return out


MEASURED_COSTS_PAGE = Table(measured_costs_page, 'Search Lab responsiveness')


if __name__ == "__main__":
    raise SystemExit(main())
