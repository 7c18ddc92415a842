"""The app makes no request outside 127.0.0.1 (issue #12): no icon font from a CDN, no image from a file name or a
heading rendered as Markdown. Every page is opened in Chromium, a hostile-named file is uploaded, and every request
the page makes is checked."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import pytest

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, streamlit_app

pytestmark = pytest.mark.browser

# TEST-NET-3 (RFC 5737): never routed, so a leak is seen as an attempted request and nothing is really sent.
BEACON = "http://203.0.113.7/pixel.png"
HOSTILE_NAME = f"![p]({BEACON}).md"
HOSTILE_DOC = f"""# Field notes ![hp]({BEACON})

## Section <img src="{BEACON}"> [link]({BEACON})

The pump station logs pressure every hour and the valve crew reads it at dawn.
"""
LOCAL = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
def seeded_server(tmp_path: Path) -> Iterator[str]:
    """The app on a database that already holds the hostile-named document (ingested with the hash fake, so no
    page has to load the embedding model: the test stays fast and still renders every name the app shows)."""
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.store import Store
    from tests.fakes import HashEmbedder

    db = tmp_path / "offline.duckdb"
    store = Store(db)
    rep = ingest_files([(HOSTILE_NAME, HOSTILE_DOC.encode())], store=store, embedder=HashEmbedder(),
                       config=PipelineConfig())
    assert rep.results[0].status == "ingested"
    store.close()
    with streamlit_app(db, tmp_path / "streamlit.log") as url:
        yield url


def _outside(url: str) -> bool:
    p = urlparse(url)
    return p.scheme not in ("data", "blob", "about", "chrome-extension") and p.hostname not in LOCAL


def test_no_request_leaves_127_0_0_1(seeded_server: str) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("RAG_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing but RAG_REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    seen: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.on("request", lambda req: seen.append(req.url))
            page = context.new_page()
            page.set_default_timeout(30_000)
            expect = sync_api.expect
            expect.set_options(timeout=20_000)
            page.goto(seeded_server)
            expect(page.get_by_role("heading", name="Corpus")).to_be_visible(timeout=60_000)
            expect(page.get_by_role("heading", name="Documents (1)")).to_be_visible()
            # The caption under the document picker shows the name through Markdown: it must stay text.
            expect(page.get_by_text("203.0.113.7/pixel.png").filter(visible=True).first).to_be_visible()  # not the grid's hidden cell
            page.get_by_role("button", name="Delete").first.click()  # the confirmation names the file in Markdown
            expect(page.get_by_role("button", name="Yes, delete")).to_be_visible()
            page.wait_for_load_state("networkidle")
            for title in ["Search Lab", "Evaluate", "Costs", "Graph"]:
                page.get_by_role("link", name=title).click()
                expect(page.get_by_role("heading", name=title).first).to_be_visible()
                page.wait_for_load_state("networkidle")
            page.wait_for_timeout(1000)  # late font and image loads
        finally:
            browser.close()
    outside = sorted({u for u in seen if _outside(u)})
    assert seen and not outside, f"requests outside 127.0.0.1: {outside}"
