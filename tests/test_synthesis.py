"""Answers that synthesize (core/answer/synthesis.py): the graph global reduce as the answer, comparisons, and
map-reduce / refine / tree offline and with Claude (scripted, and the loopback Messages stub)."""
from __future__ import annotations

import json

from core.answer.synthesis import (
    GLOBAL_HEAD,
    compare_answer,
    compared_items,
    extractive_synthesis,
    global_answer,
    SynthesisBudget,
    llm_synthesis,
    pick_mode,
    synthesis_worst_usd,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph
from core.graph.search import global_search
from core.graph.snapshot import GraphCache
from core.ingest.pipeline import ingest_files
from core.models.llm import AnthropicLLM, call_limits, worst_usd
from core.pipeline import run_query
from core.answer.support import SentenceRow
from core.types import Candidate, Usage
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture
from tests.graph_fakes import ScriptedLLM

WS = "default"


def _row(cid: str, text: str, rank: int, context: str = "") -> SentenceRow:
    return SentenceRow(cid, "d" + cid, rank, text, (0, len(text)), (), context)


def test_compared_items_in_english_and_russian() -> None:
    assert compared_items("Compare the revenue in Q1 2024 and Q2 2024.") == ["Q1 2024", "Q2 2024"]
    assert compared_items("Which stipend is larger, the draft or the final policy?") == ["draft", "final"]
    assert compared_items("How many days does the draft policy allow compared with the final policy?") == \
        ["draft", "final"]
    assert compared_items("Compare the meal allowance for domestic and international trips") == \
        ["domestic", "international"]
    assert compared_items("Что быстрее, AB-100 или AB-200?") == ["AB-100", "AB-200"]
    # 'and' joins two questions, not two compared items, unless the question says it compares
    assert compared_items("Who leads Project Kite and which client is it for?") == []
    assert compared_items("What are the main themes across all documents?") == []


def test_comparison_gets_one_cited_sentence_per_item_or_says_which_side_is_missing() -> None:
    rows = [_row("a", "Total revenue was 31.8 million.", 1, "Quarterly Report, Q1 2024"),
            _row("b", "Total revenue was 33.1 million.", 2, "Quarterly Report, Second quarter 2024"),
            _row("c", "Headcount grew by nine.", 3, "Quarterly Report, Q1 2024")]
    res = compare_answer("Compare revenue in Q1 2024 and Q2 2024", ["Q1 2024", "Q2 2024"], rows, [0.9, 0.8, 0.2],
                         floor=0.3)
    lines = res.answer.text.splitlines()
    assert lines == ["Q1 2024: Total revenue was 31.8 million. [a]", "Q2 2024: Total revenue was 33.1 million. [b]"]
    assert res.answer.citations == ("a", "b") and not res.answer.refused
    half = compare_answer("Compare revenue in Q1 2024 and Q4 2024", ["Q1 2024", "Q4 2024"], rows, [0.9, 0.8, 0.2],
                          floor=0.3)
    assert half.answer.text.splitlines()[1].startswith("Q4 2024: The corpus does not say")
    assert half.answer.citations == ("a",) and not half.answer.refused and "lacks: Q4 2024" in " ".join(half.notes)
    none = compare_answer("Compare X and Y", ["Q3 2025", "Q4 2025"], rows, [0.9, 0.8, 0.2], floor=0.3)
    assert none.answer.refused and none.answer.citations == ()


def test_offline_map_reduce_refine_and_tree_are_cited_and_traced() -> None:
    cands = [Candidate(c, "d" + c, "text", 1.0, i + 1) for i, c in enumerate("abcde")]
    rows = [_row("a", "Bluefin has 64 pump stations.", 1), _row("a", "Bluefin started in April.", 1),
            _row("b", "Bluefin has 64 pump stations in total.", 2), _row("c", "The client is a water authority.", 3),
            _row("d", "Lunch is at noon.", 4), _row("e", "Bluefin runs in three regions.", 5)]
    scores = [3.0, 0.0, 2.9, 2.5, -4.0, 2.0]  # log-odds; margin 2.0 keeps chunks scoring >= 1.0
    q = "How many pump stations and regions does Bluefin have?"
    mr = extractive_synthesis("map_reduce", q, cands, rows, scores, support=0.9, cut=0.5, margin=2.0,
                              max_sentences=5)
    # one sentence per chunk, the near-repeat of a's in b dropped, d outside the margin, best first
    assert mr.result.answer.citations == ("a", "c", "e")
    assert [s.stage for s in mr.calls] == ["map", "reduce"] and len(mr.calls[0].info["chunks"]) == 5
    assert all(s.candidates == () for s in mr.calls)  # the trace's final candidates stay the retrieval stage's
    rf = extractive_synthesis("refine", q, cands, rows, scores, support=0.9, cut=0.5, margin=2.0, max_sentences=5)
    # refine keeps a (stations), skips c (adds no question word), keeps e (regions)
    assert rf.result.answer.citations == ("a", "e") and [s.stage for s in rf.calls] == ["map", "refine"]
    tr = extractive_synthesis("tree", q, cands, rows, scores, support=0.9, cut=0.5, margin=2.0, max_sentences=5)
    assert [s.stage for s in tr.calls] == ["map", "tree·1", "reduce"] and tr.result.answer.citations == ("a", "e")
    low = extractive_synthesis("map_reduce", q, cands, rows, scores, support=0.3, cut=0.5, margin=2.0,
                               max_sentences=5)
    assert low.result.answer.refused and low.result.answer.citations == ()


def test_pick_mode_follows_the_setting_or_the_route() -> None:
    assert pick_mode("auto", "comparison", ["a", "b"]) == "compare"
    assert pick_mode("auto", "multi-hop", []) == "map_reduce"
    assert pick_mode("auto", "factoid", []) == "stuff"
    assert pick_mode("refine", "factoid", ["a", "b"]) == "refine"


def test_claude_map_reduce_makes_one_stage_per_call_with_its_usage() -> None:
    cands = [Candidate(c, "d" + c, f"passage {c}", 1.0, i + 1) for i, c in enumerate("abcdef")]

    def reply(req):
        if req.purpose == "answer_map":
            return {"notes": "" if "passage f" in req.user[0].text else "a fact"}
        return {"answer": "merged", "citations": ["a", "zz"], "refused": False}

    llm = ScriptedLLM(reply)
    syn = llm_synthesis("tree", "q?", cands, llm, model="m", max_tokens=100, workspace=WS, query_id="q1",
                        reduce_instructions="x")
    assert [s.stage for s in syn.calls] == [f"map·{i}" for i in range(1, 7)] + ["tree·1", "tree·2", "reduce"]
    assert all(s.usage.calls == 1 for s in syn.calls) and syn.result.usage.calls == 0  # no usage counted twice
    assert syn.result.answer.text == "merged" and syn.result.answer.citations == ("a",)  # unknown id dropped
    refine = llm_synthesis("refine", "q?", cands[:2], ScriptedLLM(lambda r: {"answer": "d", "citations": ["b"],
                                                                           "refused": False}),
                           model="m", max_tokens=100, workspace=WS, query_id="q1", reduce_instructions="x")
    assert [s.stage for s in refine.calls] == ["refine·1", "refine·2"] and refine.result.answer.citations == ("b",)


def test_global_answer_offline_ranks_dedups_and_cites_community_chunks() -> None:
    from core.graph.stages import PartialHit

    partials = [PartialHit("L0-1", "Alpha · Beta", 40, "x"), PartialHit("L0-2", "Gamma", 70, "y"),
                PartialHit("L0-3", "Delta", 0, "z")]
    cands = [Candidate("c1", "d1", "Alpha and Beta signed the supply contract in May. Short.", 1, 1,
                       {"community": "L0-1"}),
             Candidate("c2", "d2", "# Gamma\nGamma ships the gateway to every port customer.", 1, 2,
                       {"community": "L0-2"}),
             Candidate("c3", "d3", "Delta is never useful to anyone at all here.", 1, 3, {"community": "L0-3"})]
    res = global_answer("What are the main themes?", partials, cands)
    assert res.answer.text.splitlines() == [
        GLOBAL_HEAD, "1. Gamma: Gamma ships the gateway to every port customer. [c2]",
        "2. Alpha · Beta: Alpha and Beta signed the supply contract in May. [c1]"]
    assert res.answer.citations == ("c2", "c1") and not res.answer.refused
    claude = global_answer("q", partials, cands, llm_answer="Gamma and Alpha.", llm_cited=["L0-2", "L0-9"])
    assert claude.answer.mode == "llm" and claude.answer.citations == ("c2",)
    assert global_answer("q", [PartialHit("L0-3", "D", 0, "")], cands).answer.refused


DOCS = [("alpha.md", b"# Alpha\n\nKestrel Water Authority runs Project Bluefin with Tomas Rehak.\n\n"
                     b"Tomas Rehak configures the gateway firmware for Kestrel Water Authority every month.\n"),
        ("beta.md", b"# Beta\n\nNordhaven Ports Authority runs Project Saltmarsh with Sanne de Vries.\n\n"
                    b"Sanne de Vries tunes the gateway sensors for Nordhaven Ports Authority each week.\n")]


def _global_cfg(**more) -> PipelineConfig:
    return PipelineConfig().with_overrides({"graph.enabled": True, "graph.mode": "global", "graph.min_phrase_chunks": 1,
                                            "router.enabled": False, "answer_cache.enabled": False, **more})


def test_offline_global_search_answers_a_themes_question_instead_of_refusing(deps: Deps) -> None:
    cfg = _global_cfg()
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    trace = run_query("What are the main themes across the projects and authorities?", cfg, deps, log=False)
    assert trace.answer is not None and not trace.answer.refused and trace.answer.text.startswith(GLOBAL_HEAD)
    ans = trace.stage("answer")
    assert ans is not None and ans.info["source"] == "graph_global" and trace.answer.citations
    glob = trace.stage("graph_global")
    assert glob is not None and set(trace.answer.citations) <= {c.chunk_id for c in glob.candidates}


def test_claude_global_reduce_through_the_messages_stub_is_the_cited_answer(deps: Deps, anthropic_stub: Stub) -> None:
    cfg = _global_cfg()
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    build_graph(deps.store, cfg.graph, embedder=deps.embedder)
    snap = GraphCache().get(deps.store, WS, 1)
    comm = sorted(c for c, m in snap.communities[0].items() if len(m) >= 2)[0]

    def responder(body):
        purpose = json.dumps(body)
        if "community report" in purpose or "knowledge graph built" in purpose:
            if "usefulness score from 0" in purpose:
                return json.dumps({"points": [{"text": "Authorities run projects", "score": 90}]})
            return json.dumps({"title": "Projects", "summary": "Authorities run projects with staff."})
        return json.dumps({"answer": "Two authorities each run a project.", "communities": [comm, "nope"]})

    anthropic_stub.state.responder = responder
    deps.llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None)
    res = global_search("main themes", snap, deps.store, level=0, max_communities=3, top=3, max_usd=5.0, llm=deps.llm)
    assert res.answer == "Two authorities each run a project." and res.cited == (comm,)
    trace = run_query("What are the main themes across all documents?", cfg.with_overrides({"answer.mode": "llm"}),
                      deps, log=False)
    assert trace.answer is not None and trace.answer.mode == "llm"
    assert trace.answer.text == "Two authorities each run a project." and len(trace.answer.citations) == 1
    glob = trace.stage("graph_global")
    assert glob is not None and glob.info["cited"] == [comm] and glob.usage.calls >= 2
    ans = trace.stage("answer")
    assert ans is not None and ans.usage.calls == 0  # the reduce was paid once, in the graph stage


def _cap_cands() -> list[Candidate]:
    return [Candidate(c, "d" + c, f"passage {c} says something about pumps and pressure. " * 5, 1.0, i + 1)
            for i, c in enumerate("abcdef")]


def _map_reply(req):
    return {"notes": "a fact"} if req.purpose == "answer_map" else {"answer": "m", "citations": ["a"],
                                                                    "refused": False}


def test_claude_synthesis_checks_the_worst_case_before_the_first_call_and_before_each() -> None:
    cands, model = _cap_cands(), "claude-haiku-4-5"
    kw = dict(model=model, max_tokens=200, workspace=WS, query_id="q1", reduce_instructions="reduce")
    for mode in ("map_reduce", "tree", "refine"):
        worst = synthesis_worst_usd(mode, "q?", cands, model=model, max_tokens=200, reduce_instructions="reduce")
        llm = ScriptedLLM(_map_reply if mode != "refine" else (lambda r: {"answer": "d", "citations": ["a"],
                                                                            "refused": False}))
        try:  # below the whole plan's worst case: not one call
            llm_synthesis(mode, "q?", cands, llm, max_usd=worst * 0.99, **kw)
            raise AssertionError("expected a budget stop")
        except SynthesisBudget as exc:
            assert exc.kind == "budget" and exc.calls == () and not llm.requests and "not started" in str(exc)
        ok = ScriptedLLM(llm.reply)
        syn = llm_synthesis(mode, "q?", cands, ok, max_usd=worst, **kw)
        assert not syn.result.answer.refused
        # the plan bounds what the calls it made could have cost, each by its own request
        assert sum(worst_usd(r) for r in ok.requests) <= worst + 1e-12
    # each call is checked against what is left: calls that report more than their share stop the rest
    worst = synthesis_worst_usd("map_reduce", "q?", cands, model=model, max_tokens=200, reduce_instructions="reduce")
    dear = ScriptedLLM(_map_reply, usage=Usage(100, 20, 0, 0, worst / 3, 1))
    try:
        llm_synthesis("map_reduce", "q?", cands, dear, max_usd=worst, **kw)
        raise AssertionError("expected a budget stop")
    except SynthesisBudget as exc:
        assert 1 <= len(dear.requests) <= 3 and len(exc.calls) == len(dear.requests)
        assert all(s.usage.usd == worst / 3 for s in exc.calls)
    # the caller's own dollars (the agentic loop's call_limits) count too
    with call_limits(usd=worst / 2):
        try:
            llm_synthesis("map_reduce", "q?", cands, ScriptedLLM(_map_reply), max_usd=worst, **kw)
            raise AssertionError("expected a budget stop")
        except SynthesisBudget as exc:
            assert "caller" in str(exc) and exc.calls == ()


def test_a_synthesis_over_its_cap_falls_back_to_extractive_without_a_call(deps: Deps, anthropic_stub: Stub) -> None:
    cfg = PipelineConfig().with_overrides({"router.enabled": False, "answer_cache.enabled": False,
                                           "answer.mode": "llm", "answer.synthesis": "map_reduce",
                                           "answer.max_usd": 0.0001})
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=cfg)
    deps.llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None)
    trace = run_query("Who tunes the gateway sensors for Nordhaven Ports Authority?", cfg, deps, log=False)
    assert trace.answer is not None and trace.answer.mode == "extractive"
    ans = trace.stage("answer")
    assert ans is not None and any("not started" in n and "answer.max_usd" in n for n in ans.notes)
    assert anthropic_stub.state.messages() == []  # no call was sent
    # with room for it, the same question is Claude's map-reduce through the stub, one stage per call
    trace = run_query("Who tunes the gateway sensors for Nordhaven Ports Authority?",
                      cfg.with_overrides({"answer.max_usd": 5.0}), deps, log=False)
    assert trace.answer is not None and trace.answer.mode == "llm"
    assert any(s.stage.startswith("map·") and s.usage.calls == 1 for s in trace.stages)
    assert len(anthropic_stub.state.messages()) == sum(s.usage.calls for s in trace.stages)
