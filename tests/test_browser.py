"""Real-browser test: upload a file on the Corpus page, search in the Search Lab, see the three stage columns."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("RAG_SCREENSHOTS", "/tmp"))  # where the two page screenshots go, for a human to look at
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

DOC = """# Lighthouse maintenance

## Lamp rotation

The keeper replaces the quartz lamp of the Marrow Point lighthouse every 900 hours, logging each swap as LH-ROT-17.
"""

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)  # polling interval, not a fixed wait
    raise TimeoutError(f"streamlit did not become healthy in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    log = tmp_path / "streamlit.log"
    env = {**os.environ, "RAG_DB": str(tmp_path / "browser.duckdb"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", "workbench.py", "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           # Edits to the source tree while the test runs must not trigger reruns under the browser.
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_upload_search_and_see_three_stage_columns(server: str, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("RAG_REQUIRE_BROWSER") == "1":  # CI installs chromium; a skip there would hide a gap
            pytest.fail(f"{CHROMIUM} is missing but RAG_REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    doc = tmp_path / "lighthouse.md"
    doc.write_text(DOC, encoding="utf-8")

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            expect = sync_api.expect
            # The first session loads the embedding model (several seconds), so the first wait is generous.
            page.goto(server)
            expect(page.get_by_role("heading", name="Corpus")).to_be_visible(timeout=60_000)

            page.locator("input[type=file]").set_input_files(str(doc))
            expect(page.get_by_text("lighthouse.md").first).to_be_visible()
            page.get_by_role("button", name="Ingest").click()
            expect(page.get_by_text("1 of 1 file(s) ingested")).to_be_visible()
            expect(page.get_by_role("heading", name="Documents (1)")).to_be_visible()
            expect(page.locator("[data-testid=stDataFrame] canvas").first).to_be_attached()  # grid drawn
            page.screenshot(path=str(SHOTS / "corpus.png"), full_page=True)

            page.get_by_role("link", name="Search Lab").click()
            expect(page.get_by_role("heading", name="Search Lab")).to_be_visible()
            page.get_by_label("Query").fill("quartz lamp LH-ROT-17")
            page.get_by_role("button", name="Search").click()

            def stage_column(stage: str):  # keys are stage_<position>_<name>; other stages may sit between
                return page.locator(f"[class*='st-key-stage_'][class$='_{stage}'], [class*='_{stage} ']").first

            for stage in ["bm25", "dense", "fused"]:
                column = stage_column(stage)
                expect(column).to_be_visible()
                expect(column.get_by_role("heading", name=stage)).to_be_visible()
                expect(column.get_by_text("LH-ROT-17")).to_be_visible()
                expect(column.get_by_text(" ms · 1 candidates")).to_be_visible()
            # Side by side: the three columns share one row, left to right.
            boxes = [stage_column(s).bounding_box() for s in ["bm25", "dense", "fused"]]
            assert all(b is not None for b in boxes)
            assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
            assert abs(boxes[0]["y"] - boxes[1]["y"]) < 5
            page.screenshot(path=str(SHOTS / "searchlab.png"), full_page=True)
        finally:
            browser.close()
