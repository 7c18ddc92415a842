"""Real-browser checks of issue #47's second walk at 1366x768: every technique's switch is in the Search Lab's
popovers, in view; a workspace's Delete confirmation is clear after a delete and a switch to another workspace."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, DOC, ROOT, SHOTS, VIEWPORT, streamlit_app

pytestmark = [pytest.mark.browser]


def _inside(box: dict | None) -> bool:
    return (box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"]
            and box["y"] + box["height"] <= VIEWPORT["height"])


def _need_browser():  # noqa: ANN202 - the playwright module
    if not CHROMIUM.exists():
        if os.environ.get("RAG_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing but RAG_REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is not installed")
    return pytest.importorskip("playwright.sync_api")


def _cli(*args: str) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def seeded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database whose default workspace holds the lighthouse document, and two more (empty) workspaces: made once
    by the CLI (three processes), copied for each test."""
    base = tmp_path_factory.mktemp("walk_seed")
    db = base / "walk.duckdb"
    doc = base / "lighthouse.md"
    doc.write_text(DOC, encoding="utf-8")
    _cli("ingest", str(doc), "--db", str(db))
    for ws in ("keep", "gone"):
        _cli("workspaces", "create", ws, "--db", str(db))
    return db


@pytest.fixture
def seeded(seeded_once: Path, tmp_path: Path) -> Path:
    """A copy of seeded_once's database and its side files (token vectors, swap lock) of the test's own."""
    db = tmp_path / "walk.duckdb"
    for f in seeded_once.parent.glob(seeded_once.name + "*"):
        shutil.copy(f, tmp_path / f.name)
    return db


def _settled(page) -> None:  # noqa: ANN001
    """The app finished its run (Streamlit's running indicator is gone)."""
    page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')")


# How long a pick or a tick is tried again: a rerun on a machine busy with other tests (Ray's workers beside this
# one) may take tens of seconds to draw, so the test waits for the app, not for a fixed short time.
RETRY_S = 240


def _pick_workspace(page, sync_api, name: str) -> None:  # noqa: ANN001
    side = page.locator("[data-testid=stSidebar]")
    box = side.get_by_role("combobox", name="Workspace")
    deadline = time.monotonic() + RETRY_S
    while time.monotonic() < deadline:  # a rerun still drawing may replace the list under the click, or redraw the
        _settled(page)  # old choice after it (a delete's rerun): open it again
        side.locator("[data-testid=stSelectbox]").filter(has_text="Workspace").click()
        try:
            page.get_by_role("option", name=name, exact=True).click(timeout=20_000)
            sync_api.expect(box).to_have_value(name, timeout=30_000)
            break
        except (sync_api.Error, AssertionError):
            page.keyboard.press("Escape")
    sync_api.expect(box).to_have_value(name)


def _tick(page, sync_api, box) -> None:  # noqa: ANN001
    """Tick a checkbox once the app is idle; a rerun still drawing may redraw the box unticked under the click."""
    deadline = time.monotonic() + RETRY_S
    while time.monotonic() < deadline:
        _settled(page)
        if not box.locator("input").is_checked():
            box.locator("label").click()
        try:
            sync_api.expect(box.locator("input")).to_be_checked(timeout=30_000)
            break
        except AssertionError:
            continue
    sync_api.expect(box.locator("input")).to_be_checked()


def test_delete_confirmation_is_clear_after_delete_and_switch(seeded: Path, tmp_path: Path) -> None:
    sync_api = _need_browser()
    expect = sync_api.expect
    with streamlit_app(seeded, tmp_path / "streamlit.log") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(60_000)
            expect.set_options(timeout=90_000)
            page.goto(url)
            expect(page.get_by_role("heading", name="Corpus")).to_be_visible()
            _pick_workspace(page, sync_api, "gone")
            side = page.locator("[data-testid=stSidebar]")
            side.get_by_text("Manage workspaces").click()
            box = side.locator("[data-testid=stCheckbox]").filter(has_text="Delete 'gone'")
            _tick(page, sync_api, box)
            side.get_by_role("button", name="Delete", exact=True).click()
            expect(page.get_by_text("deleted 'gone'")).to_be_visible()
            _pick_workspace(page, sync_api, "keep")
            if not side.locator("[data-testid=stCheckbox]").first.is_visible():
                side.get_by_text("Manage workspaces").click()
            keep = side.locator("[data-testid=stCheckbox]").filter(has_text="Delete 'keep'")
            expect(keep).to_be_visible()
            page.screenshot(path=str(SHOTS / "walk_after_delete.png"))
            # What a person sees: the box unticked and the Delete button greyed out.
            expect(keep.locator("input")).not_to_be_checked()
            expect(side.get_by_role("button", name="Delete", exact=True)).to_be_disabled()
        finally:
            browser.close()
    _cli("workspaces", "list", "--db", str(seeded))  # the file is sound after the app let go of it


def test_every_switch_sits_in_a_popover_in_view(seeded: Path, tmp_path: Path) -> None:
    sync_api = _need_browser()
    expect = sync_api.expect
    with streamlit_app(seeded, tmp_path / "streamlit.log") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(60_000)
            expect.set_options(timeout=90_000)
            page.goto(f"{url}/search_lab")
            expect(page.get_by_role("heading", name="Search Lab")).to_be_visible()
            # the retrieval mode's three choices on one line
            ys = {round(b["y"]) for b in (page.locator("[data-testid=stRadio]").first.get_by_text(t, exact=True)
                                         .bounding_box() for t in ("hybrid", "BM25", "dense"))}
            assert len(ys) == 1, ys
            wanted = {"Context · graph": ["Multilingual list (dense_ml)", "GraphRAG search", "RAPTOR tree search",
                                          "Router"],
                      "Cascade": ["Rerank", "Stage guard"], "Transforms": ["HyDE", "Multi-query"],
                      "Agent": ["Several rounds", "Tools (search, SQL, graph)"],
                      "Answer · cache": ["Answer", "Semantic answer cache", "CAG route", "Collection routing"]}
            for popover, labels in wanted.items():
                button = page.get_by_role("button", name=popover, exact=True)
                assert _inside(button.bounding_box()), (popover, button.bounding_box())
                # the label reads whole: not cut with an ellipsis
                assert button.evaluate("b => [...b.querySelectorAll('p, div')].every(e => e.scrollWidth <= "
                                       "e.clientWidth + 1)"), popover
                button.click()
                body = page.locator("[data-testid=stPopoverBody]")
                expect(body).to_be_visible()
                for label in labels:
                    el = body.get_by_text(label).first
                    expect(el).to_be_visible()
                    el.scroll_into_view_if_needed()
                    assert _inside(el.bounding_box()), (popover, label, el.bounding_box())
                page.screenshot(path=str(SHOTS / f"walk_popover_{popover.split(' ')[0].lower()}.png"))
                page.keyboard.press("Escape")
                expect(body).to_be_hidden()
        finally:
            browser.close()


def test_a_build_started_in_the_lab_shows_its_progress_in_view(seeded: Path, tmp_path: Path) -> None:
    sync_api = _need_browser()
    expect = sync_api.expect
    with streamlit_app(seeded, tmp_path / "streamlit.log") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(60_000)
            expect.set_options(timeout=90_000)
            page.goto(f"{url}/search_lab")
            page.get_by_label("Query").fill("quartz lamp rotation log")
            page.get_by_role("button", name="Search", exact=True).click()
            expect(page.locator("[data-testid=stage-row]")).to_be_visible()
            page.get_by_role("button", name="Context · graph", exact=True).click()
            page.locator("[data-testid=stPopoverBody] [data-testid=stRadio]").filter(
                has_text="Chunk context").get_by_text("heuristic", exact=True).click()
            page.keyboard.press("Escape")
            build = page.get_by_role("button", name="Build now")
            expect(build).to_be_attached()
            _settled(page)
            # Where the progress box is drawn the moment it appears (a small build ends in a second).
            page.evaluate("""() => { window.__box = null; new MutationObserver(() => {
                const el = document.querySelector('.st-key-build_progress');
                if (el && !window.__box) { const r = el.getBoundingClientRect();
                  window.__box = {x: r.x, y: r.y, width: r.width, height: r.height}; } })
                .observe(document.body, {childList: true, subtree: true}); }""")
            build.click()
            expect(page.get_by_text("heuristic: ")).to_be_visible()
            box = page.evaluate("window.__box")
            assert box is not None and _inside(box), box
            page.screenshot(path=str(SHOTS / "walk_after_build.png"))
        finally:
            browser.close()
