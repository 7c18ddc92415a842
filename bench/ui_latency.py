"""Search Lab responsiveness in a real browser: time from a settings toggle to the updated stage row, and page loads.

Starts Streamlit on a database holding the sample corpus (ingested into a temporary file unless --db is given),
opens the Search Lab in Chromium at 1366x768, runs one query, then flips retrieval mode and cascade toggles
--rounds times each. A toggle is timed from the click until the stage row shows the state that toggle asks for
(a column turned into a skipped strip or back) and Streamlit reports no script running. Builds are never part of
it: the settings toggled need nothing built. Also times the Graph page: load to a drawn graph, then a trivial
JavaScript call right after (the page must stay responsive).

    python bench/ui_latency.py [--db data/workbench.duckdb] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import machine_info, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
QUERY = "which gateway firmware fixed the FB-340 reboot loop"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(db: str, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "RAG_DB": db, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", "workbench.py", "--server.headless", "true", "--server.port",
           str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise TimeoutError(f"streamlit did not start:\n{log.read_text()[-2000:]}")


def _idle(page) -> None:
    """Wait until Streamlit runs no script (its status widget is gone)."""
    page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)


def _row_state(page, stage: str) -> str:
    return page.evaluate(f"""() => {{
        const e = document.querySelector("[data-testid=stage-row] [data-stage='{stage}']");
        return e ? (e.dataset.skipped ? 'skipped' : 'ran') : 'absent'; }}""")


def _timed_toggle(page, action, stage: str, want: str) -> float:
    """Seconds from the click to the updated row. Done = the row differs from before and Streamlit is idle; the
    toggled stage must then be in the wanted state, unless the semantic answer cache served the whole query (a
    config seen before), which skips every stage on purpose."""
    before = page.evaluate("document.querySelector('[data-testid=stage-row]').innerHTML")
    page.evaluate("b => { window.__before = b; }", before)
    t0 = time.perf_counter()
    action()
    page.wait_for_function("() => { const r = document.querySelector('[data-testid=stage-row]');"
                           " return r && r.innerHTML !== window.__before; }", timeout=120_000)
    _idle(page)
    took = time.perf_counter() - t0
    state = _row_state(page, stage)
    cached = page.evaluate("!!document.querySelector(\"[data-testid=stage-row] [title*='answer cache']\")")
    if state != want and not cached:
        raise AssertionError(f"{stage} is {state} after the toggle, expected {want}")
    return took


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="a DuckDB file with the sample corpus (default: ingest it into a temp file)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="ui_latency_"))
    db = args.db
    if db is None:
        db = str(tmp / "wb.duckdb")
        subprocess.run([sys.executable, "-m", "core", "ingest", "sample_corpus/docs", "--db", db], cwd=ROOT,
                       check=True, capture_output=True)
    port = _port()
    proc = _serve(db, port, tmp / "streamlit.log")
    url = f"http://127.0.0.1:{port}"
    timings: dict[str, list[float]] = {}
    loads: dict[str, float] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            t0 = time.perf_counter()
            page.goto(f"{url}/search_lab")
            page.get_by_role("heading", name="Search Lab").wait_for(timeout=180_000)
            loads["search_lab_first_load_s"] = time.perf_counter() - t0  # includes loading the model
            page.get_by_placeholder("e.g. who").fill(QUERY)
            t0 = time.perf_counter()
            page.get_by_role("button", name="Search").click()
            page.wait_for_selector("[data-testid=stage-row] [data-stage='bm25']", timeout=180_000)
            _idle(page)
            loads["first_query_s"] = time.perf_counter() - t0  # cold: rerank token vectors, caches
            radio = page.locator("[data-testid=stRadio]").first

            def mode(label: str):
                return lambda: radio.get_by_text(label, exact=True).click()

            def cascade(toggle: str):
                def act() -> None:
                    page.get_by_role("button", name="Rerank · prune · MMR").click()
                    page.get_by_label(toggle, exact=True).click(force=True)
                    page.keyboard.press("Escape")
                return act

            for _ in range(args.rounds):
                timings.setdefault("mode → BM25", []).append(_timed_toggle(page, mode("BM25"), "dense", "skipped"))
                timings.setdefault("mode → hybrid", []).append(_timed_toggle(page, mode("hybrid"), "dense", "ran"))
                timings.setdefault("mode → dense", []).append(_timed_toggle(page, mode("dense"), "bm25", "skipped"))
                timings.setdefault("mode → hybrid", []).append(_timed_toggle(page, mode("hybrid"), "bm25", "ran"))
                for toggle, stage in (("Rerank", "rerank"), ("MMR + duplicate collapse", "mmr"),
                                      ("Sentence pruning", "prune")):
                    timings.setdefault(f"{stage} off", []).append(
                        _timed_toggle(page, cascade(toggle), stage, "skipped"))
                    timings.setdefault(f"{stage} on", []).append(_timed_toggle(page, cascade(toggle), stage, "ran"))

            # Graph page: load until the graph frame is drawn, then how long a trivial JS call takes right after.
            t0 = time.perf_counter()
            page.goto(f"{url}/graph")
            page.get_by_role("heading", name="Graph").wait_for(timeout=120_000)
            _idle(page)
            frame = page.frame_locator("iframe").first
            frame.locator("svg, canvas").first.wait_for(timeout=120_000)  # the still SVG view (pyvis: canvas)
            loads["graph_page_load_s"] = time.perf_counter() - t0
            probes = []
            for _ in range(5):
                t1 = time.perf_counter()
                page.evaluate("1 + 1")
                probes.append(time.perf_counter() - t1)
                time.sleep(0.2)
            loads["graph_js_probe_max_ms"] = 1000 * max(probes)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    flat = [t for ts in timings.values() for t in ts]
    result = {
        "what": "Search Lab toggle -> updated stage row (Playwright, Chromium 1366x768, sample corpus); Graph page "
                "load and a JS call right after",
        "machine": machine_info(),
        "db": "temporary ingest of sample_corpus/docs" if args.db is None else args.db,
        "rounds": args.rounds,
        "toggles": len(flat),
        "median_s": round(statistics.median(flat), 3),
        "max_s": round(max(flat), 3),
        "targets": {"median_s": 1.0, "max_s": 3.0, "graph_page_load_s": 5.0, "graph_js_probe_max_ms": 200},
        "per_toggle_s": {k: [round(t, 3) for t in v] for k, v in timings.items()},
        **{k: round(v, 3) for k, v in loads.items()},
    }
    path = write_result("ui_latency", result)
    print(f"{len(flat)} toggles: median {result['median_s']} s, max {result['max_s']} s; "
          f"graph page {result.get('graph_page_load_s')} s, JS probe max {result.get('graph_js_probe_max_ms')} ms "
          f"-> {path}")


if __name__ == "__main__":
    main()
