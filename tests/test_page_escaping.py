"""Markdown injection (issue #12 item 6): a hostile file name, heading, query or workspace name is shown as text on
every page, never rendered as an image that would fetch a URL; graph labels are escaped exactly once."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from core.app.report import escape_md
from core.config import PipelineConfig
from core.deps import Deps
from core.graph import view
from core.graph.build import build_graph
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from pages import _state, _widgets

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")
BEACON = "http://127.0.0.1:8999"
NAME = f"![p]({BEACON}/pixel.png).md"
HEADING = f"![hp]({BEACON}/heading.png)"
BAD_NAME = f"![e]({BEACON}/err.png).docx"
BODY = (f"# Staffing\n\n### {HEADING}\n\nTomas Rehak is the lead architect for Project Bluefin.\n\n"
        "Kestrel Water Authority runs Project Bluefin; Rafael Quintero manages it.\n").encode()
# What escape_md makes of them, written out by hand: every Markdown character behind a backslash.
NAME_ESC = r"\!\[p\]\(http\[\:\]//127\.0\.0\.1\:8999/pixel\.png\)\.md"
HEADING_ESC = r"\!\[hp\]\(http\[\:\]//127\.0\.0\.1\:8999/heading\.png\)"


def _rendered(at: AppTest) -> list[str]:
    """Every string the page hands to Streamlit's Markdown renderer: text elements and widget labels."""
    out = []
    for kind in ("title", "subheader", "markdown", "caption", "error", "warning", "info", "success", "toast"):
        out += [e.value for e in getattr(at, kind)]
    for kind in ("button", "checkbox", "toggle", "text_input", "expander", "selectbox"):
        out += [e.label for e in getattr(at, kind)]
    return out


def _no_image(at: AppTest) -> list[str]:
    values = _rendered(at)
    assert values and not [v for v in values if "![" in v], [v for v in values if "![" in v]
    return values


def _app(deps: Deps, config: PipelineConfig | None = None, workspace: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    if config is not None:
        at.session_state[_state.CONFIG_KEY] = config
    if workspace is not None:
        at.session_state[_state.WORKSPACE_KEY] = workspace
    return at.run()


def test_escape_md_oracle() -> None:
    assert escape_md(NAME) == NAME_ESC and escape_md(HEADING) == HEADING_ESC


def test_corpus_shows_a_hostile_file_name_and_error_as_text(deps: Deps) -> None:
    report = ingest_files([(NAME, BODY), (BAD_NAME, b"plain text pretending to be a docx")], store=deps.store,
                          embedder=deps.embedder, config=PipelineConfig())
    assert [d.name for d in deps.store.corpus.documents()] == [NAME] and len(report.errors) == 1
    at = _app(deps)
    at.session_state[_widgets.LAST_INGEST_KEY] = report
    at.run()
    assert not at.exception
    values = _no_image(at)
    assert any(c.value.startswith(NAME_ESC + " · ") for c in at.caption)  # the document caption
    assert at.button(key="delete").label == f"Delete {NAME_ESC}…"
    assert len(at.error) == 1 and at.error[0].value.startswith(r"\!\[e\]\(http\[\:\]//127\.0\.0\.1\:8999/err\.png\)\.docx")
    at.button(key="delete").click().run()
    assert any(NAME_ESC in w.value for w in at.warning)  # the confirmation names it, escaped
    assert _no_image(at) and values


def test_search_lab_chunk_detail_escapes_document_name_and_heading(deps: Deps) -> None:
    ingest_files([(NAME, BODY)], store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = _app(deps).switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("![q](http://127.0.0.1:8999/q.png) lead architect Bluefin")
    at = at.button(key="search").click().run()
    assert not at.exception and not at.error
    ids = at.selectbox(key="detail_chunk").options
    details = []
    for cid in ids:  # every chunk of the document: the one under the hostile heading names it in its path
        at = at.selectbox(key="detail_chunk").set_value(cid).run()
        details += [c.value for c in at.caption if c.value.startswith(NAME_ESC + " · ")]
        _no_image(at)
    assert len(details) == len(ids) and any(f"Staffing › {HEADING_ESC} · " in d for d in details)


def test_graph_page_escapes_the_workspace_and_the_last_query(deps: Deps) -> None:
    hostile_ws = f"![w]({BEACON}/ws.png)"
    at = _app(deps, workspace=hostile_ws).switch_page("pages/graph.py").run()
    assert not at.exception
    assert at.info[0].value.startswith(r"Workspace '\!\[w\]\(http\[\:\]//127\.0\.0\.1\:8999/ws\.png\)' has no documents")
    _no_image(at)  # the sidebar's rename and delete labels name the workspace too

    ingest_files([(NAME, BODY), ("clients.md", b"# Clients\n\nKestrel Water Authority runs Project Bluefin.\n")],
                 store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"graph.enabled": True, "graph.min_phrase_chunks": 1})
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    query = "![q](http://127.0.0.1:8999/q.png) who runs Project Bluefin?"
    trace = run_query(query, cfg, deps)  # logged: the Graph page reads the last run
    assert trace.stage("graph_local").info.get("nodes")
    at = _app(deps, cfg).switch_page("pages/graph.py").run()
    assert not at.exception
    assert any(r"('\!\[q\]\(http\[\:\]//127\.0\.0\.1\:8999/q\.png\) who runs Project Bluefin?')" in c.value
               for c in at.caption)
    _no_image(at)


EVIL = ["<script>alert(1)</script>", "Bob & 'Eve' \"x\"", "<a href='http://127.0.0.1:8999/x'>click</a>"]


def _graph_frames() -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    nodes = pd.DataFrame([{"node_id": f"n{i}", "name": n, "type": "<b>t</b>", "degree": 2, "chunks": 1,
                           "community": 0} for i, n in enumerate(EVIL)])
    edges = pd.DataFrame([{"src": "n0", "dst": "n1", "weight": 1.0}, {"src": "n1", "dst": "n2", "weight": 2.0}])
    return nodes, edges, {f"n{i}": (float(i), float(i % 2)) for i in range(len(EVIL))}


def test_graph_labels_are_escaped_exactly_once() -> None:
    nodes, edges, layout = _graph_frames()
    # pyvis: the one escape is the JSON in the script; decoding it gives the name back as written (vis draws labels
    # on a canvas and sets tooltips as text, so an HTML entity on top would show literally).
    page = view.pyvis_html(nodes, edges, layout=layout)
    data = json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", page).group(1))
    labels = [n["label"] for n in data]
    assert labels[:2] == EVIL[:2]
    assert labels[2] == EVIL[2].replace("href", "hr\u200bef")  # keeps pyvis off its innerHTML tooltip template
    assert [n["title"].split("\n")[0] for n in data][:2] == EVIL[:2]
    assert "make a custom popup" not in page and "popup.innerHTML" not in page
    assert "<script>alert" not in page and "&lt;" not in page[page.index("new vis.DataSet"):].split("</script>")[0]
    # SVG: markup, so exactly one HTML escape; unescaping once gives the name, and no '&amp;lt;' anywhere.
    svg = view.svg_graph_html(nodes, edges, layout)
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    assert [html.unescape(t) for t in texts] == ["<script>alert(1)</scrip…", EVIL[1], "<a href='http://127.0.0…"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg and "&amp;lt;" not in svg and "<script" not in svg


# Issue #33 item 15: addresses in document text are not links, bidi controls are visible.
URL_DOC = ("# Links\n\nThe payload sits at https://evil.example/payload and www.evil.example, mail ops@evil.example "
           "for the Bluefin lead architect. The file invoice_\u202etxt.exe is signed\u2066 here\u2069.\n").encode()
_BIDI_CHARS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
# What Markdown leaves of a string once its backslash escapes are resolved: links are found in that text.
_LINKISH = re.compile(r"(?i)https?://|\bwww\.|[\w.+-]@[\w-]+\.[\w-]")


def test_inert_text_oracle() -> None:
    from core.app.report import inert_text

    assert inert_text("see https://evil.example/x, www.evil.example and ops@evil.example") == \
        "see https[:]//evil.example/x, www[.]evil.example and ops[@]evil.example"
    assert inert_text("a\u202eb\u2066c\u2069d") == "a[U+202E]b[U+2066]c[U+2069]d"
    assert inert_text("plain text: 3.5 km, a@b") == "plain text: 3.5 km, a@b"  # nothing else changes
    for ch in _BIDI_CHARS:
        assert ch not in inert_text(f"x{ch}y") and ch not in escape_md(f"x{ch}y")
    unescaped = re.sub(r"\\(.)", r"\1", escape_md("![p](https://evil.example/p.png) www.evil.example a@evil.example"))
    assert not _LINKISH.search(unescaped), unescaped


def test_search_lab_shows_addresses_and_bidi_inert(deps: Deps) -> None:
    ingest_files([("links.md", URL_DOC)], store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = _app(deps).switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("Bluefin lead architect payload")
    at = at.button(key="search").click().run()
    assert not at.exception and not at.error
    at = at.selectbox(key="detail_chunk").set_value(at.selectbox(key="detail_chunk").options[0]).run()
    shown = [h.value for h in at.html] + [c.value for c in at.code] + [t.value for t in at.text] + _rendered(at)
    shown += list(at.selectbox(key="detail_chunk").options)
    page = html.unescape("\n".join(shown))
    assert "evil" in page and "[U+202E]" in page  # the text is there, visibly marked
    assert not _LINKISH.search(page), [page[max(0, m.start() - 60):m.end() + 20] for m in _LINKISH.finditer(page)]
    assert not [ch for ch in _BIDI_CHARS if ch in page]
