"""Real-browser test: upload a file on the Corpus page, search in the Search Lab, read every stage side by side in a
1366x768 window (the top five candidates of every stage that ran without scrolling down), open pages by URL."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
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
""" + "".join(f"""
## Station {n}

The {n} station keeper checks the quartz lamp housing, the fog bell and the tide gauge each morning, and writes the
readings of lamp {n} into the rotation log before the supply boat arrives.
""" for n in ("north", "south", "east", "west", "harbour", "reef", "cliff"))
VIEWPORT = {"width": 1366, "height": 768}

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


@contextmanager
def streamlit_app(db: Path, log: Path) -> Iterator[str]:
    """`streamlit run workbench.py` on a free loopback port over the database `db`; yields its URL, stops it after."""
    port = _free_port()
    env = {**os.environ, "RAG_DB": str(db), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
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


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with streamlit_app(tmp_path / "browser.duckdb", tmp_path / "streamlit.log") as url:
        yield url


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
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(30_000)
            expect = sync_api.expect
            expect.set_options(timeout=60_000)  # two shared cores: an ingest or a cold query can take a while
            # The first session loads the embedding model (several seconds), so the first wait is generous.
            page.goto(server)
            expect(page.get_by_role("heading", name="Corpus")).to_be_visible(timeout=60_000)

            page.locator("input[type=file]").set_input_files(str(doc))
            expect(page.get_by_text("lighthouse.md").filter(visible=True).first).to_be_visible()
            page.get_by_role("button", name="Ingest").click()
            expect(page.get_by_text("1 of 1 file(s) ingested")).to_be_visible()
            expect(page.get_by_role("heading", name="Documents (1)")).to_be_visible()
            expect(page.locator("[data-testid=stDataFrame] canvas").first).to_be_attached()  # grid drawn
            page.screenshot(path=str(SHOTS / "corpus.png"), full_page=True)

            page.get_by_role("link", name="Search Lab").click()
            expect(page.get_by_role("heading", name="Search Lab")).to_be_visible()
            page.get_by_label("Query").fill("quartz lamp LH-ROT-17")
            page.get_by_role("button", name="Search").click()

            row = page.locator("[data-testid=stage-row]")
            expect(row).to_be_visible()

            def column(stage: str):
                return row.locator(f".sl-col[data-stage='{stage}']")

            for stage in ["bm25", "dense", "fused"]:
                expect(column(stage)).to_be_visible()
                expect(column(stage).locator(".sl-name")).to_have_attribute("title", stage)
                expect(column(stage).get_by_text("LH-ROT-17").first).to_be_attached()
            # Side by side: every stage in one row, left to right, tops aligned (the row scrolls sideways).
            names = row.locator(".sl-col, .sl-skip").evaluate_all("els => els.map(e => e.dataset.stage)")
            assert names.index("bm25") < names.index("dense") < names.index("fused") < names.index("rerank")
            tops = {n: column(n).bounding_box()["y"] for n in ("bm25", "dense", "fused", "rerank")}
            assert max(tops.values()) - min(tops.values()) < 3, tops
            # The top five candidates of every stage that ran fit in the window's height with the page at its top.
            page.evaluate("document.querySelector('[data-testid=stMain]')?.scrollTo(0, 0); window.scrollTo(0, 0)")
            ran = row.locator(".sl-col[data-stage]").evaluate_all(
                "els => els.filter(e => e.querySelector('.sl-card')).map(e => e.dataset.stage)")
            assert {"bm25", "dense", "fused", "rerank"} <= set(ran), ran
            for stage in ran:
                cards = column(stage).locator(".sl-card")
                n = min(5, cards.count())
                box = cards.nth(n - 1).bounding_box()
                assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], (stage, n, box)
            assert column("bm25").locator(".sl-card").count() >= 5  # the document has eight chunks
            # Skipped stages are thin labelled strips (stacked in a narrow column), not empty columns.
            for strip in row.locator(".sl-skip").all():
                assert strip.bounding_box()["width"] < 90 and strip.bounding_box()["height"] < 40
            # A card opens in place to show more text.
            first = column("bm25").locator(".sl-card").first
            first.locator("summary").click()
            expect(first.locator(".sl-more")).to_be_visible()
            page.screenshot(path=str(SHOTS / "searchlab.png"), full_page=False)

            # The sidebar's config hash is the one the query just ran with, also right after a settings change.
            def hashes() -> tuple[str, str]:
                side = page.locator("[data-testid=stSidebar]").get_by_text("config: ").inner_text()
                ran = page.get_by_text("· config ").first.inner_text()
                return side.split("config: ")[1].split()[0], ran.split("· config ")[1].split()[0]

            side, ran = hashes()
            assert side == ran, (side, ran)
            page.locator("[data-testid=stRadio]").first.get_by_text("BM25", exact=True).click()
            expect(row.locator(".sl-skip[data-stage='dense']")).to_be_attached()
            page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')")
            # The sidebar is rewritten when the page's script ends, a moment after the stage row is drawn: poll.
            deadline = time.monotonic() + 20
            side2, ran2 = hashes()
            # Under load the click's rerun may not have begun yet: wait until both show a hash other than the old one.
            while (side2 != ran2 or ran2 == ran) and time.monotonic() < deadline:
                page.wait_for_timeout(250)
                side2, ran2 = hashes()
            assert side2 == ran2 != ran, (side2, ran2, ran)

            # Every page has a direct URL, and only real pages are listed in the navigation.
            for path, heading in (("corpus", "Corpus"), ("evaluate", "Evaluate"), ("costs", "Costs"),
                                  ("graph", "Graph"), ("search_lab", "Search Lab")):
                page.goto(f"{server}/{path}")
                expect(page.get_by_role("heading", name=heading).first).to_be_visible(timeout=60_000)
                expect(page.get_by_text("Page not found")).to_have_count(0)
            links = page.locator("[data-testid=stSidebar] [data-testid=stPageLink-NavLink]")
            expect(links).to_have_count(5)
            nav = links.all_inner_texts()
            # (each entry's inner text starts with its icon's ligature name, e.g. "science\n\nSearch Lab")
            assert [t.split("\n")[-1].strip() for t in nav] == ["Corpus", "Search Lab", "Evaluate", "Costs", "Graph"], nav
        finally:
            browser.close()
