"""The agentic loop: budgets that never overspend, closed stop reasons, no repeated query, entity bridging, the LLM
grader and writer through the loopback stub (malformed output included), and the pipeline's `agent` record."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.models.llm import FRAMING_TOKENS, AnthropicLLM, LLMRequest, LLMResponse, TextBlock
from core.models.pricing import price_for, tokens_usd
from core.route.agent import (
    STOP_REASONS,
    BridgeWriter,
    Budget,
    GraderModel,
    LLMGrader,
    LLMWriter,
    NextQueries,
    OfflineGrader,
    Spend,
    grade_features,
    guarded_call,
    merge_evidence,
    names_in,
    run_agent,
    too_close,
    worst_case,
)
from core.types import Candidate, InRound, StageResult, Trace, Usage
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture

HAIKU = "claude-haiku-4-5"


def _cand(cid: str, text: str, score: float = 1.0, rank: int = 1) -> Candidate:
    return Candidate(cid, cid.split("#")[0], text, score, rank)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _search_factory(clock: FakeClock, *, per_query_s: float = 0.1, fresh: bool = True):
    """A search that returns two new chunks per query (or the same two), taking per_query_s of fake time."""
    counter = {"n": 0}

    def search(q: str) -> Trace:
        clock.t += per_query_s
        counter["n"] += 1
        n = counter["n"] if fresh else 1
        cands = (_cand(f"d{n}a#0", f"Alice Brown met {q}.", 2.0, 1), _cand(f"d{n}b#0", "Other text.", 1.0, 2))
        return Trace(q, "h", 1, (StageResult("fused", cands, 1.0),))
    return search, counter


@dataclass
class ScriptedLLM:
    """An in-process LLM whose every call reports usage like the API does; faults and spikes on demand."""

    clock: FakeClock
    rng: random.Random
    name: str = "scripted"
    available: bool = True
    reason: str = ""
    reported_usd: float = 0.0
    calls: int = 0
    latency: float = 0.2
    log: list[Any] = field(default_factory=list)

    def complete(self, request: LLMRequest, *, workspace: str = "default", run_id: str = "") -> LLMResponse:
        self.calls += 1
        self.clock.t += self.latency * (10 if self.rng.random() < 0.1 else 1)  # latency spikes
        inp = sum(len(b.text) for b in (*request.system, *request.user)) // 4
        out = min(request.max_tokens, 40)
        usd = tokens_usd(price_for(request.model), input_tokens=inp, output_tokens=out)
        self.reported_usd += usd
        if request.purpose == "grade":
            data: Any = {"grades": []}  # always "incorrect"... by omission: ambiguous; say incorrect explicitly
            ids = [line.split('"')[1] for line in request.user[0].text.splitlines() if line.startswith("<passage id=")]
            data = {"grades": [{"id": i, "grade": "incorrect"} for i in ids]}
        else:
            data = {"queries": [f"new query {self.calls} {self.rng.random():.6f}"]}
        return LLMResponse(json.dumps(data), request.model, Usage(inp, out, 0, 0, usd, 1), 1.0, data)


def test_a_thousand_adversarial_runs_never_exceed_a_budget() -> None:
    rng = random.Random(7)
    reasons: set[str] = set()
    for _ in range(1000):
        clock = FakeClock()
        llm = ScriptedLLM(clock, rng)
        search, _ = _search_factory(clock)
        budget = Budget(max_rounds=rng.randint(1, 6), max_llm_calls=rng.randint(0, 8),
                        max_tokens=rng.randint(0, 4000), max_usd=rng.choice([0.0, 0.0005, 0.002, 0.01]),
                        max_seconds=rng.uniform(0.05, 3.0))
        out = run_agent("Who did Alice Brown meet in Paris?", search, budget=budget, grader=LLMGrader(llm, HAIKU),
                        writer=LLMWriter(llm, HAIKU), workspace="w", clock=clock)
        spent = out.spent
        assert out.stop_reason in STOP_REASONS
        reasons.add(out.stop_reason)
        assert out.rounds <= budget.max_rounds
        assert spent["llm_calls"] <= budget.max_llm_calls
        assert spent["tokens"] <= budget.max_tokens
        assert spent["usd"] <= budget.max_usd + 1e-9
        assert spent["llm_calls"] == llm.calls
        assert spent["usd"] == pytest.approx(llm.reported_usd, abs=1e-6)  # the run's $ is the provider's usage
        # time: a run may end at most one call (its latency spike included) or one search past the limit
        assert spent["seconds"] <= budget.max_seconds + 2.0 + 0.1 * 3
    assert {"budget_rounds", "budget_time"} <= reasons


def test_wall_clock_budget_holds_within_one_call() -> None:
    clock = FakeClock()
    llm = ScriptedLLM(clock, random.Random(1), latency=0.5)
    search, _ = _search_factory(clock, per_query_s=0.3)
    out = run_agent("Who did Alice Brown meet?", search, budget=Budget(10, 100, 10**9, 100.0, 2.0),
                    grader=LLMGrader(llm, HAIKU), writer=LLMWriter(llm, HAIKU), workspace="w", clock=clock)
    assert out.stop_reason == "budget_time"
    assert out.spent["seconds"] <= 2.0 + 5.0  # one spiked call at most (10 x 0.5 s)


def test_budget_checked_before_the_call_with_a_worst_case_estimate() -> None:
    req = LLMRequest(HAIKU, (), (TextBlock("x" * 1000),), max_tokens=100)
    tokens, usd = worst_case(req)
    assert tokens == (1000 + 1) // 2 + FRAMING_TOKENS + 100 and usd > 0  # the client's own bound (llm.py)
    spend = Spend(Budget(max_tokens=250))
    llm = ScriptedLLM(FakeClock(), random.Random(0))
    resp, why = guarded_call(llm, req, spend, "w")
    assert (resp, why, llm.calls) == (None, "budget_tokens", 0)  # refused before anything was spent


def test_no_repeated_subquery_and_no_new_evidence_stop() -> None:
    clock = FakeClock()
    search, counter = _search_factory(clock, fresh=False)

    class SameWriter:
        name = "same"

        def next_queries(self, question, evidence, tried, spend, workspace):
            return NextQueries(("who did alice brown meet",), "repeat")

    out = run_agent("Who did Alice Brown meet?", search, budget=Budget(), grader=OfflineGrader(),
                    writer=SameWriter(), workspace="w", clock=clock)
    assert counter["n"] == 1  # the near-identical query was not run
    decide = [s for s in out.stages if s.stage.endswith("decide")][-1]
    assert "not run again" in decide.notes[0]
    assert out.stop_reason == "answered"
    assert too_close("Who did ALICE BROWN meet", ["who did alice brown meet"]) is not None
    assert too_close("Where was Bob born", ["who did alice brown meet"]) is None

    class NewWriter:
        name = "new"

        def next_queries(self, question, evidence, tried, spend, workspace):
            return NextQueries((f"completely different {len(tried)} zeta",), "new")

    search2, _ = _search_factory(clock, fresh=False)  # every round returns the same chunks
    out2 = run_agent("Who did Alice Brown meet?", search2, budget=Budget(max_rounds=5), grader=OfflineGrader(),
                     writer=NewWriter(), workspace="w", clock=clock)
    assert (out2.stop_reason, out2.rounds) == ("no_new_evidence", 2)


def test_bridge_writer_asks_the_unresolved_part_about_the_bridging_name() -> None:
    evidence = [_cand("lothair#0", "Lothair II\nLothair II was king of Lotharingia. His mother was Ermengarde of "
                                   "Tours, daughter of Hugh of Tours.")]
    nxt = BridgeWriter(per_round=3).next_queries("When did Lothair II's mother die?", evidence, [], None, "w")
    # the targeted hop (the name after 'mother' in the subject's passage, alone; not counted in per_round), then the
    # wide query (every new name), then the name in the sentence about the question's relation word first
    assert nxt.queries == ("Ermengarde of Tours", "Lotharingia Ermengarde of Tours Hugh of Tours",
                           "Ermengarde of Tours die", "Hugh of Tours die")
    assert nxt.targeted == 1
    assert BridgeWriter(per_round=3, hops=0).next_queries("When did Lothair II's mother die?", evidence, [], None,
                                                          "w").queries[0].startswith("Lotharingia")
    assert names_in("The film was directed by Jean Renoir in France.") == ["Jean Renoir", "France"]


def test_hop_reads_the_first_hop_of_the_questions_relation_from_the_subjects_passage() -> None:
    from core.route.agent import hop_names, hop_queries, hop_relation

    # the relation's first hop: an in-law goes through the spouse, a paternal grandparent through the father
    assert [hop_relation(q) for q in ("Who is the father-in-law of Sisowath Kossamak?",
                                      "Who is Karl Von Habsburg's paternal grandmother?",
                                      "Who is the maternal grandfather of Anne Smith?",
                                      "Where was the director of film Blood Street born?",
                                      "Which film was released first, Aas Ka Panchhi or Phoolwari?")] == \
        ["spouse", "father", "mother", "director", ""]
    # a cue, then a name within a few words; titles and a lone nationality word are not names to look up
    assert hop_names("Karl is the son of Archduke Otto von Habsburg and Regina.", "father", {"karl"}) == \
        ["Otto von Habsburg"]
    assert hop_names("It was directed by an American, Leo Fong.", "director", set()) == ["Leo Fong"]
    assert hop_names("It is a song by Trinidadian-American rapper Nicki Minaj.", "performer", set()) == ["Nicki Minaj"]
    assert hop_names("It was directed by Brian De Palma.", "director", set()) == ["Brian De Palma"]  # a first name
    assert hop_names("Kossamak, Queen of Cambodia, married Norodom Suramarit in 1920.", "spouse",
                     {"sisowath", "kossamak"}) == ["Norodom Suramarit"]
    assert hop_names("Blood Street is a 1988 film.", "director", set()) == []
    # one hop per subject passage (both items of a bridge comparison); a passage about someone else gives none
    ev = [_cand("a#0", "El Tonto\nEl Tonto is a 2010 film directed by Charlie Day."),
          _cand("b#0", "The Heart of Doreon\nThe Heart of Doreon is a 1921 film directed by Robert North Bradbury."),
          _cand("c#0", "To the Heart\nTo the Heart is a film directed by Mario Sabato.")]
    q = "Which film whose director was born first, El Tonto or The Heart Of Doreon?"
    assert hop_queries(q, ev) == ["Charlie Day", "Robert North Bradbury"]
    assert hop_queries("Which film was released first, El Tonto or The Heart Of Doreon?", ev) == []


def test_merge_evidence_puts_each_targeted_hops_first_new_hit_after_the_head() -> None:
    r1 = [_cand(f"{x}#0", x) for x in "abcde"]
    hop1 = [_cand("a#0", "a"), _cand("x#0", "x"), _cand("w#0", "w")]  # its first new candidate is x
    hop2 = [_cand("y#0", "y")]
    wide = [_cand("z#0", "z")]
    merged = merge_evidence([r1, hop1, hop2, wide], head=2, k=8, priority=[1, 2])
    # head a, b; the hops' first new hits x, y; then turns: c, (hop1) w, (hop2 empty), z; d
    assert [c.chunk_id[0] for c in merged] == list("abxycwzd")
    assert [c.chunk_id[0] for c in merge_evidence([r1, hop1, hop2, wide], head=2, k=8)] == list("abcxyzdw")


def test_several_queries_in_a_round_get_their_own_stage_names() -> None:
    clock = FakeClock()
    search, _ = _search_factory(clock)

    class TwoWriter:
        name = "two"

        def next_queries(self, question, evidence, tried, spend, workspace):
            return NextQueries(("Carol Day", "Dan Eve wide query"), "two", targeted=1)

    out = run_agent("Who did Alice Brown meet?", search, budget=Budget(max_rounds=2), grader=OfflineGrader(),
                    writer=TwoWriter(), workspace="w", clock=clock)
    names = [s.stage for s in out.stages]
    assert names[:3] == ["fused", "grade", "decide"]
    assert names[3:] == ["r2.q1.fused", "r2.q2.fused", "r2.grade", "r2.decide"]
    assert len(set(names)) == len(names) and {s.info["round"] for s in out.stages[3:]} == {2}
    # the targeted hop's first new hit comes right after the head of round 1
    assert out.evidence[2].chunk_id == "d2a#0"


def test_a_comparison_of_found_items_stops_but_a_bridge_comparison_goes_on() -> None:
    from core.route.agent import comparison_found

    ev = [_cand("a#0", "Aas Ka Panchhi\nAas Ka Panchhi is a 1961 film."), _cand("b#0", "Phoolwari\nPhoolwari is a 1946 film.")]
    assert comparison_found("Which film was released first, Aas Ka Panchhi or Phoolwari?", ev)
    assert not comparison_found("Which film has the director born first, Aas Ka Panchhi or Phoolwari?", ev)
    assert not comparison_found("Which film was released first, Aas Ka Panchhi or Bhabhi?", ev)
    assert not comparison_found("When did Lothair II's mother die?", ev)


def test_offline_grader_is_calibrated_by_features_and_verdicts() -> None:
    model = GraderModel((4.0, 2.0, 0.0, 0.0), -3.0, 0.6, 0.25)
    cands = [_cand("a#0", "Ermengarde of Tours died on 20 March 851.", 3.0, 1), _cand("b#0", "A film.", 1.0, 2)]
    rows = grade_features("When did Ermengarde of Tours die?", cands)
    assert rows[0][0] == pytest.approx(1.0) and rows[1][0] == 0.0  # term coverage (stems: die/died)
    g = OfflineGrader(model).grade("When did Ermengarde of Tours die?", cands, None, "w")
    assert [x[1] for x in g.grades] == ["correct", "incorrect"] and g.verdict == "correct"
    assert g.grades[0][2] == pytest.approx(1 / (1 + 2.718281828 ** -(4 + 2 - 3)), abs=1e-4)


def test_merge_evidence_keeps_the_first_rounds_head_then_takes_turns() -> None:
    r1 = [_cand(f"{x}#0", x) for x in "abcde"]
    r2 = [_cand("x#0", "x"), _cand("a#0", "a"), _cand("y#0", "y")]
    r3 = [_cand("z#0", "z")]
    merged = merge_evidence([r1, r2, r3], head=2, k=7)
    # head a, b; then turns, the first round's rest first: c, r2 -> x, r3 -> z; d, r2 -> (a seen) y; k reached
    assert [c.chunk_id[0] for c in merged] == list("abcxzdy")
    assert [c.rank for c in merged] == list(range(1, 8))
    # the earlier order: turns over the later lists only, then the first round's rest
    assert [c.chunk_id[0] for c in merge_evidence([r1, r2, r3], head=2, k=7, rest_in_turn=False)] == list("abxzycd")


def test_llm_grader_and_writer_through_the_stub_with_malformed_replies(anthropic_stub: Stub) -> None:
    llm = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=lambda s: None, max_retries=1)
    replies = iter(['{"grades": [{"id": "d1a#0", "grade": "correct"}]}', "not json at all", '{"queries": 5}',
                    "", '{"grades": "wrong shape"}', '{"queries": ["Alice Brown Paris"]}'] * 5)
    anthropic_stub.state.responder = lambda body: next(replies)
    clock = FakeClock()
    search, _ = _search_factory(clock)
    for _ in range(5):
        out = run_agent("Who did Alice Brown meet?", search, budget=Budget(max_rounds=3, max_llm_calls=6),
                        grader=LLMGrader(llm, HAIKU), writer=LLMWriter(llm, HAIKU), workspace="w", clock=clock)
        assert out.stop_reason in STOP_REASONS
    notes = " ".join(n for s in out.stages for n in s.notes)
    assert "offline grader used" in notes or "entity bridging instead" in notes
    anthropic_stub.state.faults.extend([("malformed", "truncated"), ("malformed", "html"), ("status", 500)] * 3)
    out = run_agent("Who did Alice Brown meet?", search, budget=Budget(max_rounds=2), grader=LLMGrader(llm, HAIKU),
                    writer=LLMWriter(llm, HAIKU), workspace="w", clock=clock)
    assert out.stop_reason in STOP_REASONS


def test_pipeline_runs_the_loop_and_reports_it(tmp_path) -> None:
    from core.config import PipelineConfig
    from core.deps import Deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from core.store import Store
    from tests.fakes import HashEmbedder

    store = Store(tmp_path / "a.duckdb")
    deps = Deps(store=store, embedder=HashEmbedder())
    cfg = PipelineConfig().with_overrides({"agent.enabled": True, "rerank.enabled": False, "prune.enabled": False})
    files = [("lothair.md", b"# Lothair II\n\nLothair II was king of Lotharingia. His mother was Ermengarde of Tours."),
             ("erm.md", b"# Ermengarde of Tours\n\nErmengarde of Tours died on 20 March 851 in Italy."),
             ("other.md", b"# Weather\n\nRain fell in Paris all week.")]
    ingest_files(files, store=store, embedder=deps.embedder, config=cfg)
    trace = run_query("When did Lothair II's mother die?", cfg, deps)
    data = trace.to_dict()
    assert data["agent"]["stop_reason"] in STOP_REASONS and data["agent"]["rounds"] >= 1
    names = [s["stage"] for s in data["stages"]]
    assert "grade" in names and "decide" in names and names[-2:] == ["answer", "verify"]
    evidence = trace.stage("evidence")
    assert evidence is not None and any("20 March 851" in c.text for c in evidence.candidates)


def test_the_multi_hop_route_runs_the_loop_with_decomposition_in_every_round(tmp_path) -> None:
    from core.config import PipelineConfig
    from core.deps import Deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from core.store import Store
    from tests.fakes import HashEmbedder

    store = Store(tmp_path / "r.duckdb")
    deps = Deps(store=store, embedder=HashEmbedder())
    cfg = PipelineConfig().with_overrides({"router.override": "multi-hop", "rerank.enabled": False})
    ingest_files([("lothair.md", b"# Lothair II\n\nLothair II was king. His mother was Ermengarde of Tours."),
                  ("erm.md", b"# Ermengarde of Tours\n\nErmengarde of Tours died on 20 March 851.")],
                 store=store, embedder=deps.embedder, config=cfg)
    trace = run_query("When did Lothair II's mother die?", cfg, deps)
    assert trace.agent is not None and trace.agent["rounds"] >= 1
    decompose = trace.stage("decompose")
    assert decompose is not None and decompose.info.get("round") == 1
    assert decompose.skipped is None or "auto" not in decompose.skipped  # switched on for the rounds, not gated off


def test_round_recall_says_how_much_each_round_added() -> None:
    from core.eval.run import loop_round, round_recall

    assert [loop_round(s) for s in ("decide", "r2.decide", "r10.decide", "r2.grade", "fused", "xdecide")] == \
        [1, 2, 10, None, None, None]
    # q1: 1/2 gold after round 1, 2/2 after round 2; q2 stopped after round 1 with 1/3 (kept for round 2);
    # a question without the loop ({}) is left out.
    rows = round_recall([{1: {"recall@5": 0.5, "recall@10": 0.5}, 2: {"recall@5": 1.0, "recall@10": 1.0}},
                         {1: {"recall@5": 1 / 3, "recall@10": 2 / 3}}, {}])
    assert [r["round"] for r in rows] == [1, 2] and [r["questions"] for r in rows] == [2, 1]
    assert rows[0]["recall@5"] == pytest.approx((0.5 + 1 / 3) / 2) and rows[0]["added@5"] == rows[0]["recall@5"]
    assert rows[1]["recall@5"] == pytest.approx((1.0 + 1 / 3) / 2)
    assert rows[1]["added@5"] == pytest.approx(0.25) and rows[1]["added@10"] == pytest.approx(0.25)
    assert round_recall([{}, {}]) == []


def _bridge_corpus(deps: Any) -> None:
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files

    ingest_files([("staff.md", b"# Staffing\n\nAlice Brown is the engineer for Project Heron in Rotterdam."),
                  ("clients.md", b"# Clients\n\nProject Heron is run for Kestrel Water. The account manager of "
                                 b"Kestrel Water is Lena Brightwater."),
                  ("other.md", b"# Weather\n\nRain fell in Paris all week.")],
                 store=deps.store, embedder=deps.embedder, config=PipelineConfig())


GOLD_LINE = json.dumps({"id": "m1", "query": "Who is the account manager for the project of Alice Brown?",
                        "type": "multi-hop", "gold": [
                            {"doc": "staff.md", "span": "Alice Brown is the engineer for Project Heron"},
                            {"doc": "clients.md", "span": "The account manager of Kestrel Water is Lena Brightwater"}]})


def test_evaluation_records_per_round_recall_of_the_loop(deps: Any) -> None:
    from core.config import PipelineConfig
    from core.eval.datasets import parse_jsonl
    from core.eval.run import NamedConfig, load_run, run_eval

    _bridge_corpus(deps)
    loop = PipelineConfig().with_overrides({"agent.enabled": True, "router.enabled": False, "answer.enabled": False})
    plain = loop.with_overrides({"agent.enabled": False})
    a, b = run_eval(parse_jsonl(GOLD_LINE, "t"), [NamedConfig("loop", loop), NamedConfig("plain", plain)], deps,
                    workspace="default")
    assert b.round_recall() == [] and b.summary()["round_recall"] == []
    rows = a.round_recall()
    assert rows and rows[0]["round"] == 1 and rows[0]["questions"] == 1
    # the oracle: the pool after each round, read off the stored stage records directly
    (res,) = a.results
    pools = {st.stage: st.recall_at["recall@10"] for st in res.stages if st.stage.endswith("decide")}
    assert [r["recall@10"] for r in rows] == [pools["decide" if r["round"] == 1 else f"r{r['round']}.decide"]
                                             for r in rows]
    assert sum(r["added@10"] for r in rows) == pytest.approx(rows[-1]["recall@10"])
    stored = load_run(deps.store, a.eval_id, "default")
    assert stored is not None and stored.round_recall() == rows  # rebuilt from the stored per-question records


def test_evaluate_page_shows_the_rounds_table(deps: Any, tmp_path) -> None:
    from streamlit.testing.v1 import AppTest

    from core.config import PipelineConfig
    from core.config.saved import save_config
    from pages import _state

    _bridge_corpus(deps)
    loop = PipelineConfig().with_overrides({"agent.enabled": True, "router.enabled": False})
    save_config("loop", loop, "default", data_dir=tmp_path)
    save_config("plain", loop.with_overrides({"agent.enabled": False}), "default", data_dir=tmp_path)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "workbench.py"), default_timeout=60)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state["data_dir"] = str(tmp_path)
    at.run()
    at.switch_page("pages/evaluate.py").run()
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input(GOLD_LINE).run()
    labels = at.selectbox(key="cfg_a").options
    at.selectbox(key="cfg_a").set_value(next(lbl for lbl in labels if lbl.startswith("loop"))).run()
    at.selectbox(key="cfg_b").set_value(next(lbl for lbl in labels if lbl.startswith("plain"))).run()  # no loop
    at.button(key="eval_run").click().run()
    assert not at.exception
    tables = [d.value for d in at.dataframe if {"round", "questions", "added@5"} <= set(d.value.columns)]
    assert len(tables) == 1 and list(tables[0]["round"])[0] == 1
    assert any("agentic loop" in c.value and "loop" in c.value for c in at.caption)


def test_evaluation_time_counts_the_loops_rounds_once() -> None:
    from core.eval.metrics import score_trace

    c = _cand("d1#0", "text")
    stages = (StageResult("fused", (c,), 30.0, info=InRound(1, {}, "q")),
              StageResult("decide", (c,), 0.0, info=InRound(1, {})),
              StageResult("r2.fused", (c,), 40.0, info=InRound(2, {}, "q2")), StageResult("evidence", (c,), 75.0),
              StageResult("answer", (), 5.0))
    assert score_trace(Trace("q", "h", 1, stages), []).metrics["ms"] == 80.0  # evidence (all rounds) + answer
