"""Search Lab as a person reads it (issue #28): the answer box, compact stage row, transform switches, cache view."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.types import Answer, Candidate, StageResult, Trace
from pages import _answer_box, _state, _widgets
from tests import lab_html
from tests.test_pages import _search, search_lab  # noqa: F401  (the fixture)


def _cands(stage: str, ids: str, text: str = "t") -> tuple[Candidate, ...]:
    return tuple(Candidate(i, "d", f"{text} {i}", 1.0 / (r + 1), r + 1, {"stage": stage}) for r, i in enumerate(ids))


def test_unchanged_skipped_and_listless_stages_are_strips_stacked_between_columns() -> None:
    stages = (StageResult("answer_cache", info={"verdict": "miss"}), StageResult("route", info={"config": "abstain"}),
              StageResult("bm25", _cands("bm25", "abc"), 1.0), StageResult("hyde", skipped="transforms.hyde = off"),
              StageResult("fused", _cands("bm25", "bac"), 1.0), StageResult("rerank", _cands("rerank", "bac"), 2.0),
              StageResult("prune", _cands("prune", "bac", "cut"), 2.0), StageResult("mmr", _cands("mmr", "bac", "cut")),
              StageResult("answer", info={"refused": False}))
    body = _widgets.stage_row_html(Trace("q", "h", 1, stages, answer=Answer("x")), doc_names={}, depth=5)
    row = lab_html.columns(body)
    assert list(row) == [s.stage for s in stages]  # every stage, in trace order
    assert [s for s, c in row.items() if c.cards] == ["bm25", "fused", "prune"]
    # rerank kept fused's list as it was, mmr kept prune's (same chunks, order and text): strips naming that stage
    assert (row["rerank"].same_as, row["mmr"].same_as) == ("fused", "prune")
    assert row["hyde"].skipped == "transforms.hyde = off" and "hyde · skipped" in body
    assert "answer_cache · miss" in body and "route · abstain" in body and "answer ↑ above" in body
    # consecutive strips share one narrow stack: [cache, route] bm25 [hyde] fused [rerank] prune [mmr, answer]
    assert body.count("class='sl-stack'") == 4 and body.count("class='sl-col'") == 3
    # a strip still carries its stage's chips for whoever opens it
    assert any(c.endswith(" ms") for c in row["rerank"].chips)


def test_a_card_is_one_line_with_rank_move_document_and_score() -> None:
    c = Candidate("c1-0001", "d1", "The harbour office hired four engineers.", 0.25, 3, {"stage": "fused"})
    body = _widgets.card_html(c, move="bm25 #2 ▼1 · dense #12 ▼9", doc_name="q2_report.html")
    summary = body.split("<summary", 1)[1].split("</summary>", 1)[0]
    assert "<b>#3</b>" in summary and ">b2 d12<" in summary and ">q2_report<" in summary and ">.2500<" in summary and "score 0.2500" in body
    assert "harbour office" in summary.split(">", 1)[0]  # the snippet is the line's tooltip, not a second line
    assert _widgets.short_move("new (not in bm25)") == "new" and _widgets.short_move("▲2") == "▲2"
    assert _widgets.short_move("bm25 — · dense #4 =") == "b– d4"


def test_answer_box_escapes_and_says_route_stop_and_cache() -> None:
    from core.answer.cache import CacheInfo

    hit = StageResult("answer_cache", info=CacheInfo("hit", "<b>old</b> question?", 0.9712, "", 1,
                                                     "2026-01-01T10:00:00", 0.0, 0.0))
    t = Trace("q", "h", 1, (hit, StageResult("route", skipped="answer served from the answer cache"),
                            StageResult("answer", info={"refused": False})),
              answer=Answer("<script>x</script> costs $5", ("c-0001",)))
    from datetime import datetime

    body = _answer_box.box_html(t, cites=["c-0001 (a.md)"], now=datetime(2026, 1, 1, 10, 5))
    box = lab_html.answer_box(body)
    assert "<script>" not in body and "$" not in body.split("</style>", 1)[1]
    assert box.text == "<script>x</script> costs $5" and box.cites == "citations: [1] c-0001 (a.md)"
    served = next(c for c in box.chips if c.startswith("served from cache"))
    assert "<b>old</b> question?" in served and "similarity 0.97" in served and "5 min ago" in served
    assert "route: skipped (answer served from the answer cache)" in box.chips


def test_transform_switches_rerun_the_query_and_show_each_transform_as_a_stage(search_lab: AppTest) -> None:
    search_lab.session_state[_state.CONFIG_KEY] = search_lab.session_state[_state.CONFIG_KEY].with_overrides(
        {"answer_cache.enabled": False})
    at = _search(search_lab, "nightly backups archive")
    assert not at.exception
    assert lab_html.columns(at)["hyde"].skipped  # auto: this route does not ask for it
    at.radio(key="hyde_mode").set_value("on").run()
    assert not at.exception and at.session_state[_state.CONFIG_KEY].transforms.hyde == "on"
    row = lab_html.columns(at)
    assert row["hyde"].skipped is None and row["hyde"].cards  # its own fused list of generated queries' hits
    assert at.session_state["last_trace"].stage("hyde").info["queries"]
    at.radio(key="hyde_mode").set_value("off").run()
    assert lab_html.columns(at)["hyde"].skipped == "transforms.hyde = off"
    for key, name in (("multi_query_mode", "multi_query"), ("decompose_mode", "decompose")):
        at.radio(key=key).set_value("on").run()
        assert not at.exception and getattr(at.session_state[_state.CONFIG_KEY].transforms, name) == "on"
        assert lab_html.columns(at)[name].skipped != f"transforms.{name} = off"


def test_a_cached_answer_says_so_shows_its_stored_stages_and_recomputes(search_lab: AppTest) -> None:
    at = _search(search_lab, "Where are nightly backups kept?")
    assert not at.exception and lab_html.answer_box(at) is not None
    first = at.session_state["last_trace"]
    at = _search(at, "Where are nightly backups kept?")  # asked again: the answer cache serves it
    assert not at.exception
    served = at.session_state["last_trace"]
    assert served.stage("answer_cache").info["verdict"] == "hit" and served.stored is not None
    box = lab_html.answer_box(at)
    chip = next(c for c in box.chips if c.startswith("served from cache"))
    assert "Where are nightly backups kept?" in chip and "similarity 1.00" in chip and " ago" in chip
    assert "recompute" in [b.key for b in at.button]
    # the stages that produced it, read from its stored trace and marked as such
    body = lab_html.row_html(at)
    assert "data-cached-note='1'" in body and "not run now" in body
    row = lab_html.columns(at)
    assert [c.chunk_id for c in first.stage("bm25").candidates][0] in row["bm25"].cards[0]
    assert "data-cached='1'" in body.split("data-stage='bm25'", 1)[1][:40]  # the live lookup is not marked
    assert "data-cached='1'" not in body.split("data-stage='answer_cache'", 1)[1][:120].split('>')[0]
    at.button(key="recompute").click().run()
    assert not at.exception
    again = at.session_state["last_trace"]
    assert again.stage("answer_cache").skipped == "recompute asked for: the answer cache is bypassed for this query"
    assert again.stage("bm25").skipped is None and not any(c.startswith("served") for c in lab_html.answer_box(at).chips)
    assert "data-cached='1'" not in lab_html.row_html(at).split('</style>')[1] and "recompute" not in [b.key for b in at.button]


def test_a_settings_rerun_looks_up_the_answer_cache_instead_of_blaming_an_evaluation(search_lab: AppTest) -> None:
    at = _search(search_lab, "Where are nightly backups kept?")
    at.toggle(key="mmr_on").set_value(False).run()  # not logged, but a user's query all the same
    assert not at.exception
    cache = at.session_state["last_trace"].stage("answer_cache")
    assert cache.stage == "answer_cache" and cache.skipped is None and cache.info["verdict"] in ("miss", "hit",
                                                                                                   "guarded_miss")


def test_sentences_from_two_documents_name_theirs_inline() -> None:
    t = Trace("q", "h", 1, (StageResult("answer", info={"refused": False}),),
              answer=Answer("Three days. [a-0001] Two days. [b-0002]", ("a-0001", "b-0002")))
    box = lab_html.answer_box(_answer_box.box_html(t, cites=["a-0001 (policy_final.md)", "b-0002 (policy_draft.md)"]))
    assert box.text == "Three days. [1\u00a0·\u00a0policy_final.md] Two days. [2\u00a0·\u00a0policy_draft.md]"
    assert box.cites == "citations: [1] a-0001 (policy_final.md) · [2] b-0002 (policy_draft.md)"
    one = lab_html.answer_box(_answer_box.box_html(t, cites=["a-0001 (policy.md)", "b-0002 (policy.md)"]))
    assert one.text == "Three days. [1] Two days. [2]"  # one document: the citation line says it


def test_every_technique_switch_is_in_the_search_lab(search_lab: AppTest) -> None:
    """Issue #47: each section's `enabled` switch (and the multilingual list) has its widget, built from the field;
    BM25, dense and fusion are the retrieval-mode radio's three choices."""
    from core.config.meta import field_specs, sections
    from pages import _form

    shown = search_lab.session_state[_form.SHOWN_KEY]
    switches = {f"{s}.enabled" for s in sections() for f in field_specs(s) if f.name == "enabled"}
    by_mode = {"bm25.enabled", "dense.enabled", "fusion.enabled"}
    assert switches - by_mode - shown == set()
    assert {"embedding.multilingual", "raptor.enabled", "router.enabled", "answer_cache.enabled"} <= shown
    assert search_lab.radio(key="mode").options == ["hybrid", "BM25", "dense"] or set(
        search_lab.radio(key="mode").options) >= {"BM25", "dense"}
    at = search_lab.toggle(key="raptor_on").set_value(True).run()
    assert not at.exception and at.session_state[_state.CONFIG_KEY].raptor.enabled
    at = at.toggle(key="router_on").set_value(False).run()
    assert not at.session_state[_state.CONFIG_KEY].router.enabled
    at = at.radio(key="multilingual").set_value("off").run()
    assert at.session_state[_state.CONFIG_KEY].embedding.multilingual == "off"


def test_a_stage_a_route_turned_on_says_so() -> None:
    from core.app.routing import routed_stages
    from core.config import PipelineConfig
    from core.types import RouteInfo

    route = RouteInfo("global-summary", 0.9, "r", "global-summary", "offline",
                      overrides={"graph.enabled": True, "graph.mode": "global"})
    stages = (StageResult("route", info=route), StageResult("bm25", _cands("bm25", "ab"), 1.0),
              StageResult("graph_global", _cands("graph_global", "ba"), 3.0), StageResult("rerank", skipped="off"))
    trace = Trace("q", "h", 1, stages, answer=Answer("x"))
    off = PipelineConfig()  # graph search off in the settings
    why = routed_stages(trace, off)
    assert list(why) == ["graph_global"] and "route global-summary" in why["graph_global"]
    assert routed_stages(trace, off.with_overrides({"graph.enabled": True, "graph.mode": "global"})) == {}
    assert "graph.mode = global" in routed_stages(trace, off.with_overrides({"graph.enabled": True}))["graph_global"]
    body = _widgets.stage_row_html(trace, doc_names={}, routed=why)
    col = body.split("data-stage='graph_global'", 1)[1].split("</div>", 2)
    assert "data-routed='1'" in "".join(col[:2]) and "· by route" in body
    assert body.count("data-routed") == 1  # bm25 ran on its own switch: no mark


def test_route_that_turns_the_agent_on_is_marked_in_the_lab(search_lab: AppTest) -> None:
    search_lab.session_state[_state.CONFIG_KEY] = search_lab.session_state[_state.CONFIG_KEY].with_overrides(
        {"answer_cache.enabled": False, "agent.enabled": False})
    search_lab.selectbox(key="route_override").set_value("multi-hop")
    at = _search(search_lab, "nightly backups archive")
    assert not at.exception
    marks = [c.value.replace("\\", "") for c in at.caption if ":material/alt_route:" in c.value]
    trace = at.session_state["last_trace"]
    ran = [s.stage for s in trace.stages if s.skipped is None and s.stage in ("grade", "decide", "evidence")]
    assert ran, [s.stage for s in trace.stages]
    assert marks and all("route multi-hop" in m for m in marks) and any(f"alt_route: {ran[0]}:" in m for m in marks)
