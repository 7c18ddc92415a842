"""AppTests of the Corpus and Search Lab pages (fakes injected through session state) and their pure helpers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app.report import (
    chunks_frame,
    documents_frame,
    human_size,
    stage_chips,
    stage_details,
    stage_moves,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import IngestReport, ingest_files
from core.pipeline import run_query
from core.types import Candidate, StageResult, Trace
from pages import _state, _widgets
from tests import lab_html

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "workbench.py")

OPS_MD = b"""# Operations guide

## Transport security

The gateway refuses connections below TLS_VERSION_MIN, which defaults to 1.2 in every region.

## Backups

Nightly backups are copied to the cold archive in Reykjavik and kept for ninety days.
"""
FINANCE_TXT = b"Revenue grew 3% over the previous quarter. The harbour office hired four engineers in May."


def _not_a_zip_docx() -> tuple[str, bytes]:
    return "broken.docx", b"this is plain text pretending to be a docx"


def _ingest(deps: Deps, files: list[tuple[str, bytes]], config: PipelineConfig | None = None,
            workspace: str = "default") -> IngestReport:
    return ingest_files(files, store=deps.store, embedder=deps.embedder, config=config or PipelineConfig(),
                        workspace=workspace)


def _app(deps: Deps) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=15)
    at.session_state[_state.DEPS_KEY] = deps
    return at.run()


def _search(at: AppTest, query: str) -> AppTest:
    at.text_input(key="query").input(query)
    return at.button(key="search").click().run()


def _stage_columns(at: AppTest) -> dict[str, list[str]]:
    """Stage name -> the HTML of each candidate card in that stage's column of the stage row."""
    return {name: col.cards for name, col in lab_html.columns(at).items()}


def _captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


@pytest.fixture
def search_lab(deps: Deps) -> AppTest:
    report = _ingest(deps, [("ops_guide.md", OPS_MD), ("finance.txt", FINANCE_TXT)])
    assert not report.errors
    at = _app(deps)
    return at.switch_page("pages/search_lab.py").run()


# -- Corpus page ------------------------------------------------------------------------------------------------------

def test_corpus_renders_on_empty_store(deps: Deps) -> None:
    at = _app(deps)
    assert not at.exception
    assert at.title[0].value == "Corpus"
    assert any("No documents yet" in i.value for i in at.info)
    assert at.button(key="ingest").disabled  # nothing uploaded yet


def test_corpus_lists_documents_and_names_the_bad_file(deps: Deps) -> None:
    report = _ingest(deps, [("ops_guide.md", OPS_MD), _not_a_zip_docx(), ("finance.txt", FINANCE_TXT)])
    at = _app(deps)
    at.session_state[_widgets.LAST_INGEST_KEY] = report
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(r"broken\.docx")  # escaped for Markdown
    results = at.dataframe[0].value
    assert list(results["status"]) == ["ingested", "error", "ingested"]
    assert report.embedded > 0
    assert f"embeddings: {report.embedded} computed, {report.cache_hits} from the cache" in at.success[0].value
    docs = at.dataframe[1].value
    assert sorted(docs["name"]) == ["finance.txt", "ops_guide.md"]
    by_name = {d.name: d for d in deps.store.corpus.documents()}
    assert docs.set_index("name").loc["ops_guide.md", "chunks"] == by_name["ops_guide.md"].n_chunks
    # The chunk browser shows the selected document's chunks with heading paths as breadcrumbs.
    at.selectbox(key="doc_pick").set_value(by_name["ops_guide.md"].doc_id).run()
    chunks = at.dataframe[2].value
    assert "Operations guide › Transport security" in list(chunks["heading path"])
    assert len(chunks) == by_name["ops_guide.md"].n_chunks


def test_chunker_widgets_change_the_session_config(deps: Deps) -> None:
    at = _app(deps)
    at.selectbox(key="chunk_strategy").set_value("fixed")
    at.number_input(key="chunk_size").set_value(64)
    at.number_input(key="chunk_overlap").set_value(8).run()
    assert not at.exception
    cfg = at.session_state[_state.CONFIG_KEY]
    assert (cfg.chunking.strategy, cfg.chunking.size_tokens, cfg.chunking.overlap_tokens) == ("fixed", 64, 8)
    # The next ingest uses that config, and the documents table says which chunker cut the file.
    _ingest(deps, [("finance.txt", FINANCE_TXT)], cfg)
    at.run()
    assert list(at.dataframe[0].value["chunker"]) == ["fixed:64/8"]


def test_delete_asks_for_confirmation_then_removes_the_document(deps: Deps) -> None:
    _ingest(deps, [("ops_guide.md", OPS_MD), ("finance.txt", FINANCE_TXT)])
    at = _app(deps)
    target = at.selectbox(key="doc_pick").value
    at.button(key="delete").click().run()
    assert any("cannot be undone" in w.value for w in at.warning)
    assert deps.store.corpus.count("documents") == 2  # nothing deleted before the confirmation
    at.button(key="cancel_delete").click().run()
    assert deps.store.corpus.count("documents") == 2 and not at.warning
    at.button(key="delete").click().run()
    at.button(key="confirm_delete").click().run()
    assert not at.exception
    assert [d.doc_id for d in deps.store.corpus.documents()] != [] and target not in {d.doc_id for d in deps.store.corpus.documents()}
    assert deps.store.corpus.chunks(doc_id=target) == []
    assert len(at.dataframe[0].value) == 1


def test_deleting_a_document_takes_its_mentions_out_of_the_entity_graph(deps: Deps) -> None:
    from core.graph.build import build_graph

    _ingest(deps, [("ops_guide.md", OPS_MD), ("finance.txt", FINANCE_TXT)])
    build_graph(deps.store, PipelineConfig().graph, embedder=deps.embedder)
    at = _app(deps)
    target = at.selectbox(key="doc_pick").value
    gone = {c.chunk_id for c in deps.store.corpus.chunks(doc_id=target)}
    assert gone & set(deps.store.graph.seen_chunks())  # the graph had read the document
    at.button(key="delete").click().run()
    at.button(key="confirm_delete").click().run()
    assert not at.exception
    assert not gone & set(deps.store.graph.seen_chunks())  # and forgot it with the document


# -- Search Lab page --------------------------------------------------------------------------------------------------

def test_search_lab_on_empty_store_points_to_the_corpus_page(deps: Deps) -> None:
    at = _app(deps).switch_page("pages/search_lab.py").run()
    assert not at.exception
    assert any("upload documents on the Corpus page" in i.value for i in at.info)


def test_search_lab_shows_three_stage_columns_with_the_expected_top_chunk(search_lab: AppTest, deps: Deps) -> None:
    at = _search(search_lab, "TLS_VERSION_MIN gateway")
    assert not at.exception and not at.error
    expected = next(c.chunk_id for c in deps.store.corpus.chunks() if "TLS_VERSION_MIN" in c.text)
    cols = _stage_columns(at)
    # later issues add more (skipped by default) stages: graph_local/graph_global between dense and fused
    assert [c for c in cols if c in ("bm25", "dense", "fused")] == ["bm25", "dense", "fused"]
    for stage in ("bm25", "dense", "fused"):
        cards = cols[stage]
        assert cards, stage
        assert expected in cards[0] and "<b>#1</b>" in cards[0], stage
    # The fused column says where each chunk came from; the top chunk was first in both inputs.
    assert "bm25 #1 =" in cols["fused"][0] and "dense #1 =" in cols["fused"][0]
    # Every stage is either a column headed by its wall time and candidate count or a thin strip with its reason.
    row = lab_html.columns(at)
    timed = [c for c in row.values() if c.skipped is None and any(x.endswith(" ms") for x in c.chips)
             and any(x.endswith(" cand.") for x in c.chips)]
    skipped = [c for c in row.values() if c.skipped]
    assert len(timed) >= 3 and len(timed) + len(skipped) == len(row) - ("subgraph" in row)
    # The dense column says where each chunk stood in the BM25 list before it (rank movement in every column).
    assert "bm25 #1" in cols["dense"][0]


def test_search_lab_keeps_the_conversation_and_condenses_a_follow_up(search_lab: AppTest) -> None:
    at = _search(search_lab, "What does TLS_VERSION_MIN set?")
    at = _search(at, "What is its default?")
    assert not at.exception
    turns = at.session_state["conversation_turns::default"]
    assert [t.question for t in turns] == ["What does TLS_VERSION_MIN set?", "What is its default?"]
    assert turns[1].condensed == "What is TLS_VERSION_MIN's default?"
    at = at.button(key="new_conversation").click().run()
    assert at.session_state["conversation_turns::default"] == []


def test_search_lab_conversation_belongs_to_its_workspace(search_lab: AppTest, deps: Deps) -> None:
    """Issue #46 item 4: a follow-up in one workspace is never condensed with another workspace's turns."""
    _ingest(deps, [("ops_guide.md", OPS_MD)], workspace="other")
    at = _search(search_lab, "What does TLS_VERSION_MIN set?")
    at.session_state["workspace"] = "other"
    at = _search(at.run(), "What is its default?")
    assert not at.exception
    other = at.session_state["conversation_turns::other"]
    assert [t.question for t in other] == ["What is its default?"] and other[0].condensed == ""
    assert [t.question for t in at.session_state["conversation_turns::default"]] == ["What does TLS_VERSION_MIN set?"]


def test_search_lab_empty_and_oversized_queries_give_messages(search_lab: AppTest) -> None:
    at = _search(search_lab, "   ")
    assert not at.exception
    assert [e.value for e in at.error] == [r"the query is empty\: type a question"]  # escaped for Markdown
    at = _search(at, "why " * 2500)
    assert not at.exception
    assert len(at.error) == 1 and "limit" in at.error[0].value
    at = _search(at, "backups")  # the app keeps working after both errors
    assert not at.error and "bm25" in _stage_columns(at)


def test_bm25_only_mode_skips_dense_and_fusion(search_lab: AppTest) -> None:
    at = _search(search_lab, "backups archive")
    at.radio(key="mode").set_value("BM25").run()
    assert not at.exception
    cfg = at.session_state[_state.CONFIG_KEY]
    assert (cfg.bm25.enabled, cfg.dense.enabled, cfg.fusion.enabled) == (True, False, False)
    row = lab_html.columns(at)
    assert row["dense"].skipped == "dense.enabled = false" and row["fused"].skipped == "fusion.enabled = false"
    cols = _stage_columns(at)
    assert cols["dense"] == [] and cols["fused"] == [] and cols["bm25"]


def test_search_settings_reach_the_config_and_the_trace(search_lab: AppTest) -> None:
    at = _search(search_lab, "backups archive")
    at.number_input(key="rrf_k").set_value(5)
    at.number_input(key="bm25_k").set_value(1)
    at.selectbox(key="fusion_method").set_value("weighted_rrf").run()
    at.number_input(key="w_dense").set_value(0.0).run()
    assert not at.exception
    cfg = at.session_state[_state.CONFIG_KEY]
    assert (cfg.fusion.rrf_k, cfg.bm25.k, cfg.fusion.method, cfg.fusion.dense_weight) == (5, 1, "weighted_rrf", 0.0)
    cols = _stage_columns(at)
    assert len(cols["bm25"]) == 1
    # With the dense list weighted 0, the fused list is exactly the BM25 list.
    assert len(cols["fused"]) == 1 and "dense —" in cols["fused"][0]


def test_foreign_query_language_warns(search_lab: AppTest) -> None:
    at = _search(search_lab, "где хранятся ночные резервные копии")
    assert not at.exception
    assert any("not covered by embedder" in c for c in _captions(at))


def test_a_cross_language_question_offers_the_multilingual_build_and_then_reads_the_list(search_lab: AppTest,
                                                                                           deps: Deps) -> None:
    from tests.test_multilingual import FakeE5

    deps.multilingual = FakeE5()
    search_lab.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"answer_cache.enabled": False})
    at = _search(search_lab, "где хранятся ночные резервные копии")
    assert not at.exception
    need = [m.value for m in at.markdown if "Needs building" in m.value]
    assert len(need) == 1 and "multilingual vectors" in need[0], need
    at.button(key="build_multilingual").click().run()
    assert not at.exception and any(s.value.startswith("multilingual vectors: ") for s in at.success)
    assert not [m.value for m in at.markdown if "Needs building" in m.value]
    assert "dense_ml" in lab_html.columns(at)


# -- rendering helpers (pure HTML builders) ----------------------------------------------------------------------------

def test_candidate_card_escapes_untrusted_text() -> None:
    body = _widgets.card_html(Candidate("c1", "d1", "<script>alert('x')</script> costs $5 and $6", 0.5, 1),
                              doc_name="<b>evil</b>.md", move="<i>▲2</i>")
    assert "<script>" not in body and "&lt;script&gt;" in body and "<b>evil</b>" not in body
    assert "<i>" not in body and "&lt;i&gt;▲2" in body
    assert "$" not in body  # would otherwise be typeset as maths
    assert "<b>#1</b>" in body and "0.5000" in body and "data-chunk='c1'" in body


def test_stage_row_is_one_row_in_trace_order_with_skipped_strips() -> None:
    stages = tuple(StageResult(f"s{i}", (Candidate(f"c{i}", "d", "text", 1.0, 1, {"stage": f"s{i}"}),), 1.0)
                   for i in range(6))
    stages = stages[:3] + (StageResult("mmr", skipped="mmr.enabled = false"),) + stages[3:]
    body = _widgets.stage_row_html(Trace("q", "h", 1, stages), doc_names={}, depth=5)
    assert body.count("class='sl-row'") == 1  # a single flex row, whatever the number of stages
    row = lab_html.columns(body)
    assert list(row) == ["s0", "s1", "s2", "mmr", "s3", "s4", "s5"]
    assert row["mmr"].skipped == "mmr.enabled = false" and row["mmr"].cards == []
    assert all(len(row[f"s{i}"].cards) == 1 for i in range(6))
    # An independent list after another shows where its chunk stood in the list before ("new" when absent).
    assert "new (not in s0)" in row["s1"].cards[0] and row["s0"].cards[0].count("sl-mv") == 0


def test_stage_headers_are_chips_and_readable_details_not_reprs() -> None:
    seeds = [{"node": "n1", "name": "Corvane", "score": 0.91, "how": "name"}]
    stage = StageResult("graph_local", (_cand("a", 1, stage="graph_local"),), 12.34,
                        info={"seeds": seeds, "nodes": ["n1", "n2"], "edges": [["n1", "n2", 1.0]], "graph_version": 3,
                              "text": "heuristic", "dropped": ["ddf1", "ddf2"], "communities": {0: "L0-1"}})
    chips = stage_chips(stage)
    assert chips[:2] == ["12.3 ms", "1 cand."]
    assert "1 seed(s): Corvane" in chips and "2 entities · 1 links" in chips and "2 dropped" in chips
    assert "searched: heuristic contexts" in chips
    details = dict(stage_details(stage))
    assert details["seeds"] == "Corvane (score 0.91, how name)"
    assert details["dropped"] == "ddf1, ddf2" and details["communities"] == "0 L0-1"
    assert not any("{" in v or "[" in v for v in details.values())


def test_a_variant_that_needs_building_is_offered_with_an_estimate_and_built_on_request(search_lab: AppTest
                                                                                       ) -> None:
    # The answer cache would serve the same question again once the build is done (same config and corpus).
    search_lab.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"answer_cache.enabled": False})
    at = _search(search_lab, "backups archive")
    assert not at.exception
    at.radio(key="context_variant").set_value("heuristic").run()
    assert not at.exception
    need = [m.value for m in at.markdown if "Needs building" in m.value]
    assert len(need) == 1 and "heuristic contexts and their vectors" in need[0] and " s." in need[0], need
    assert at.button(key="build_context")  # nothing was built by the query itself
    at.button(key="build_context").click().run()
    assert not at.exception
    assert any(s.value.startswith("heuristic: ") for s in at.success)
    assert not [m.value for m in at.markdown if "Needs building" in m.value]  # built: the offer is gone
    assert "searched: heuristic contexts" in lab_html.columns(at)["dense"].chips


def test_graphrag_without_a_graph_is_offered_for_building_and_the_query_still_runs(search_lab: AppTest) -> None:
    at = _search(search_lab, "backups archive")
    at.toggle(key="graph_on").set_value(True).run()
    assert not at.exception
    need = [m.value for m in at.markdown if "Needs building" in m.value]
    assert len(need) == 1 and "entity graph: not built yet" in need[0]
    row = lab_html.columns(at)
    assert row["graph_local"].skipped and "no graph" in row["graph_local"].skipped
    assert row["bm25"].cards  # the query ran on what exists instead of waiting for a build


def test_stage_header_says_what_text_was_really_searched() -> None:
    dense = StageResult("dense", (), 1.0, info={"text": "late"})
    assert "searched: late-chunking vectors" in stage_chips(dense)
    none_yet = ["context.variant = late but no late-chunking vectors exist yet, so raw text is searched; build them "
                "with `python -m core context --variant late` or on the Costs page"]
    assert "searched: raw text (late-chunking vectors not built yet)" in stage_chips(dense, none_yet)
    part = ["late-chunking vectors cover 12 of 40 chunks; the other chunks are searched raw (build the rest with x)"]
    assert "searched: late-chunking vectors for 12 of 40 chunks, raw for the rest" in stage_chips(dense, part)
    assert "searched: raw text" in stage_chips(StageResult("bm25", (), 1.0, info={"text": "raw"}), none_yet)


def test_counters_strip_shows_query_and_session_figures() -> None:
    from core.app.counters import counters

    t = Trace("q", "h", 1, (StageResult("dense", (), 5.0, info={"embed_cache_hits": 0, "embed_cache_misses": 1}),
                            StageResult("rerank", (), 7.0, info={"cache_hits": 28, "computed": 2})))
    body = _widgets.counters_html(counters(t), counters(t) + counters(t))
    assert "this query" in body and "session (2 queries)" in body
    assert "token vectors 28 hit / 2 computed" in body and "token vectors 56 hit / 4 computed" in body
    assert "dense 5 ms &#36;0.0000 · rerank 7 ms &#36;0.0000" in body  # per stage, '$' escaped for Streamlit
    assert "embeddings 0 from cache / 1 computed" in body and "answer cache" not in body  # no answer_cache stage


# -- pure helpers the pages use (core/app/report.py) -----------------------------------------------------------------------

def _cand(cid: str, rank: int, **meta: object) -> Candidate:
    return Candidate(cid, "d", cid, 1.0 / rank, rank, meta)


def test_stage_moves_for_retrievers_fusion_and_a_later_stage() -> None:
    bm25 = StageResult("bm25", (_cand("a", 1, stage="bm25"), _cand("b", 2, stage="bm25")))
    dense = StageResult("dense", (_cand("b", 1, stage="dense"), _cand("c", 2, stage="dense")))
    fused = StageResult("fused", (_cand("b", 1, stage="bm25", rank_bm25=2, rank_dense=1),
                                  _cand("a", 2, stage="bm25", rank_bm25=1, rank_dense=None),
                                  _cand("c", 3, stage="dense", rank_bm25=None, rank_dense=2)))
    rerank = StageResult("rerank", (_cand("c", 1, stage="rerank", rank_bm25=None, rank_dense=2),
                                    _cand("b", 2, stage="rerank", rank_bm25=2, rank_dense=1),
                                    _cand("z", 3, stage="rerank")))
    skipped = StageResult("mmr", skipped="mmr.enabled = false")
    moves = stage_moves(Trace("q", "h", 1, (bm25, dense, fused, skipped, rerank)))
    assert moves["bm25"] == {} and moves["dense"] == {"b": "bm25 #2", "c": "new (not in bm25)"}
    assert moves["fused"] == {"b": "bm25 #2 ▲1 · dense #1 =", "a": "bm25 #1 ▼1 · dense —",
                              "c": "bm25 — · dense #2 ▼1"}
    assert moves["rerank"] == {"c": "▲2", "b": "▼1", "z": "new"}
    assert "mmr" not in moves


def test_documents_and_chunks_frames(deps: Deps) -> None:
    _ingest(deps, [("ops_guide.md", OPS_MD)])
    [doc] = deps.store.corpus.documents()
    frame = documents_frame([doc])
    row = frame.iloc[0]
    assert (row["name"], row["type"], row["chunks"], row["hash"]) == ("ops_guide.md", "md", doc.n_chunks,
                                                                      doc.content_hash[:12])
    assert row["size"] == human_size(len(OPS_MD))
    chunks = chunks_frame(deps.store.corpus.chunks(doc_id=doc.doc_id))
    assert list(chunks["#"]) == list(range(doc.n_chunks))
    first = deps.store.corpus.chunks(doc_id=doc.doc_id)[0]
    assert chunks.iloc[0]["chars"] == f"{first.start}–{first.end}"
    assert [human_size(n) for n in (999, 1000, 1_234_567)] == ["999 B", "1.0 kB", "1.2 MB"]


def test_mode_of_round_trips_through_the_mode_switches() -> None:
    for mode, switches in _widgets.MODES.items():
        assert _widgets.mode_of(PipelineConfig().with_overrides(switches)) == mode


def test_page_trace_matches_a_direct_run(search_lab: AppTest, deps: Deps) -> None:
    """The columns show exactly what run_query returns for the session config (no re-ranking in the view)."""
    at = _search(search_lab, "previous quarter revenue")
    # The page's run stored its answer: the direct run must not be served from the answer cache.
    cfg = at.session_state[_state.CONFIG_KEY].with_overrides({"answer_cache.enabled": False})
    trace = run_query("previous quarter revenue", cfg, deps, log=False)
    cols = _stage_columns(at)
    row = lab_html.columns(at)
    for s in trace.stages:
        if s.skipped is not None or not s.candidates:
            continue
        # a stage that handed on the list it was given is a strip naming the column that shows that list
        shown = cols[row[s.stage].same_as or s.stage]
        assert len(shown) == min(len(s.candidates), 10)
        for card, c in zip(shown, s.candidates):
            assert c.chunk_id in card and f"<b>#{c.rank}</b>" in card
            assert row[s.stage].same_as or f"{c.score:.4f}" in card  # a strip keeps the order, not the scores


def test_citation_labels_name_each_cited_chunks_document() -> None:
    a1 = Candidate("a-0001", "a", "x", 1.0, 1)
    b2 = Candidate("b-0002", "b", "y", 0.5, 2)
    t = Trace("q", "h", 1, (StageResult("bm25", (a1, b2)), StageResult("final", (b2,))))
    names = {"a": "policy_final.md"}
    # a named document; a document without a name shows its id; a chunk no stage listed stays bare
    assert _widgets.citation_labels(["a-0001", "b-0002", "c-0003"], t, names) == [
        "a-0001 (policy_final.md)", "b-0002 (b)", "c-0003"]
    assert _widgets.citation_labels(["a-0001"], None, names) == ["a-0001"]
    # an answer served from the cache has no candidates in its trace: the chunks are read, once, for what is missing
    asked: list[list[str]] = []

    def lookup(ids: list[str]) -> dict[str, Candidate]:
        asked.append(ids)
        return {i: a1 for i in ids if i == "a-0001"}

    served = Trace("q", "h", 1, (StageResult("answer_cache"),))
    assert _widgets.citation_labels(["a-0001", "c-0003"], served, names, lookup) == [
        "a-0001 (policy_final.md)", "c-0003"]
    assert asked == [["a-0001", "c-0003"]]
    assert _widgets.citation_labels(["b-0002"], t, names, lookup) == ["b-0002 (b)"] and len(asked) == 1


def test_search_lab_shows_the_labelled_answer_and_switches_context_variant(search_lab: AppTest) -> None:
    at = _search(search_lab, "TLS_VERSION_MIN gateway")
    assert not at.exception
    box = lab_html.answer_box(at)
    assert box is not None and box.label == "answer (extractive, offline: sentences copied, not generated)"
    # the answer box says which route ran and why the run stopped
    assert any(c.startswith("route: ") for c in box.chips) and any(c.startswith("stop: ") for c in box.chips)
    # each citation carries its document's file name
    cites = [box.cites]
    shown = box.cites.removeprefix("citations: ")
    assert shown and all(re.fullmatch(r"\[\d+\] \w+-[0-9a-f]{12}(\.\d+)? \([\w.-]+\.(md|txt|html|pdf|docx)\)",
                                      part.strip())
                         for part in shown.split("·")), cites
    at.radio(key="context_variant").set_value("heuristic").run()
    assert not at.exception
    from pages import _state as state

    assert at.session_state[state.CONFIG_KEY].context.variant == "heuristic"
    # The BM25 column says which text it searched (contexts are stored beside the chunks). Until the variant's vectors
    # are built a hybrid query searches raw text (the dense index would embed every context on the query's path);
    # BM25 alone needs no vectors and searches the contexts at once.
    assert "searched: raw text" in lab_html.columns(at)["bm25"].chips
    at.radio(key="mode").set_value("BM25").run()
    assert not at.exception and "searched: heuristic contexts" in lab_html.columns(at)["bm25"].chips


def test_agentic_loop_toggle_shows_rounds_and_the_stop_reason(search_lab: AppTest) -> None:
    at = _search(search_lab, "Where are nightly backups kept and for how long?")
    at.selectbox(key="route_override").set_value("multi-hop")
    at.toggle(key="agent_on").set_value(True)
    at.number_input(key="agent_rounds").set_value(2).run()
    assert not at.exception
    cfg = at.session_state[_state.CONFIG_KEY]
    assert (cfg.agent.enabled, cfg.agent.max_rounds) == (True, 2)
    loop = [c for c in _captions(at) if "agentic loop" in c]
    assert loop and "stopped" in loop[0] and "LLM calls" in loop[0]
    rows = [h.value for h in at.html if "data-testid='stage-row'" in h.value]
    main = list(lab_html.columns(rows[0]))
    assert "grade" in main and "decide" in main and "evidence" in main and main[-2:] == ["answer", "verify"]
    # round 2 in its own expander row ('r2.bm25', or 'r2.q1.bm25' ... when the round ran several queries)
    assert len(rows) == 2 and any(c.startswith("r2.") and c.endswith(".bm25") for c in lab_html.columns(rows[1]))
    assert "r2.answer_cache" not in lab_html.columns(rows[1])  # the inner runs' idle stages are left out


def test_split_rounds_keeps_round_one_in_the_main_row() -> None:
    from core.answer.cache import trace_from_json, trace_json
    from core.types import InRound, StageResult, Trace
    from pages._widgets import split_rounds

    t = Trace("q", "h", 1, (StageResult("bm25", info=InRound(1, {"indexed": 3}, "q")),
                            StageResult("r2.bm25", info=InRound(2, {"indexed": 3}, "q2")),
                            StageResult("r2.decide", info=InRound(2, {"action": "stop"})), StageResult("evidence"),
                            StageResult("answer")))
    for trace in (t, trace_from_json(trace_json(t))):  # a stored trace (an answer-cache hit's) splits alike
        main, rounds = split_rounds(trace)
        assert [s.stage for s in main.stages] == ["bm25", "evidence", "answer"]
        assert [(n, [s.stage for s in r.stages]) for n, r in rounds] == [(2, ["r2.bm25", "r2.decide"])]
    assert trace_from_json(trace_json(t)).stages[1].info == {"indexed": 3, "round": 2, "round_query": "q2"}


def test_a_question_refused_without_searching_can_be_searched_anyway(search_lab: AppTest) -> None:
    """The router may send a corpus question to out-of-scope (an intent classifier reads 'book me ...' as a request
    to an assistant). The answer panel then offers one click that re-runs this question through the default pipeline;
    the next question is routed again."""
    at = _search(search_lab, "book me a table for two")
    assert not at.exception
    assert at.session_state["lab_traces"] and "search_anyway" in [b.key for b in at.button]
    trace = at.session_state["last_trace"]
    assert trace.to_dict()["route"]["config"] == "out-of-scope" and trace.stage("bm25").skipped
    at.button(key="search_anyway").click().run()
    assert not at.exception
    again = at.session_state["last_trace"]
    assert again.query == "book me a table for two" and again.to_dict()["route"]["config"] == "abstain"
    assert again.stage("bm25").skipped is None and again.answer.mode != "route"
    assert at.selectbox(key="route_override").value == "abstain"
    assert "search_anyway" not in [b.key for b in at.button]  # it searched: nothing left to offer
    after = _search(at, "Where are nightly backups kept?")
    assert not after.exception and after.selectbox(key="route_override").value == ""
    assert after.session_state["last_trace"].to_dict()["route"]["method"] == "offline"


# -- collections (issue #29) --------------------------------------------------------------------------------------------

def _two_collections(deps: Deps) -> None:
    _ingest(deps, [("ops_guide.md", OPS_MD), ("finance.txt", FINANCE_TXT)])
    deps.store.collections.assign_names("default", {"ops_guide.md": "ops", "finance.txt": "finance"})


def test_corpus_shows_collections_edits_a_description_and_uploads_into_a_chosen_one(deps: Deps) -> None:
    at = _app(deps)
    assert any("every document is in" in c for c in _captions(at)) is False  # empty store: no panel
    _ingest(deps, [("ops_guide.md", OPS_MD)])
    at = _app(deps)
    assert any("every document is in 'default'" in c for c in _captions(at))
    _two_collections(deps)
    at = _app(deps)
    assert not at.exception
    table = next(d.value for d in at.dataframe if "collection" in d.value.columns)
    assert list(table["collection"]) == ["finance", "ops"] and list(table["documents"]) == [1, 1]
    assert "backup" in table.set_index("collection").loc["ops", "top terms"]
    at.selectbox(key="collection_pick").set_value("ops").run()
    at.text_input(key="collection_desc_ops").input("runbooks of the gateway").run()
    at.button(key="collection_save").click().run()
    assert not at.exception and deps.store.collections.get("default", "ops").description == "runbooks of the gateway"
    # A bad collection name for the upload is refused before anything is ingested.
    at.text_input(key="upload_collection").input("no spaces please").run()
    assert at.button(key="ingest").disabled and any("collection name" in e.value for e in at.error)


def test_search_lab_shows_the_collections_stage_and_a_per_query_collection(deps: Deps) -> None:
    _two_collections(deps)
    at = _app(deps).switch_page("pages/search_lab.py").run()
    at = _search(at, "nightly backups cold archive Reykjavik")
    assert not at.exception
    row = lab_html.columns(at)
    assert "collections" in row and row["collections"].skipped is None
    trace = at.session_state["lab_traces"]
    last = list(trace.values())[-1] if isinstance(trace, dict) else trace[-1]
    info = last.stage("collections").info
    assert "ops" in info["searched"] and max(info["scores"], key=lambda x: x["share"])["name"] == "ops"
    at.selectbox(key="collection_only").set_value("finance").run()
    assert not at.exception
    finance = {d.doc_id for d in deps.store.corpus.documents() if d.name == "finance.txt"}
    last = list(at.session_state["lab_traces"].values())[-1]
    assert last.stage("collections").info["method"] == "forced"
    dense = last.stage("dense").candidates  # BM25 finds nothing there: no shared word
    assert dense and {c.doc_id for c in dense} == finance and len(_stage_columns(at)["dense"]) == len(dense)
