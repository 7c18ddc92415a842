"""The stage contract (core/trace.py): every path a query can take records the same stages of the list for the same
configuration, each run or skipped with its reason — retrieval, the chitchat and out-of-scope routes, an answer-cache
hit, a table question SQL answers, the agent's tools, the agentic loop — here with graph and RAPTOR on, in a workspace
with tables; and `query --json` lists them all."""
from __future__ import annotations

import json

import pytest

from core.app.raptor_ops import build_raptor
from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from core.trace import REORDERING, STAGES, StepOutput, Tracer, listed
from core.types import Stage, StageInfo, Trace
from tests.fakes import HashEmbedder

ORDERS = (b"customer,region,quarter,amount_usd\nAcme Corp,north,Q1,100\nAcme Corp,north,Q2,150\nBolt Ltd,south,Q1,80\n"
          b"Bolt Ltd,south,Q2,70\nCrane Inc,north,Q1,5\n")
FAULTS = b"fault_code,system,level,reports\nF-1,pump,high,12\nF-2,pump,low,30\nF-3,valve,high,7\nF-4,valve,low,1\n"
NOTES = (b"# Customer notes\n\nBolt Ltd is the customer whose warehouse flooded in May; its deliveries were rerouted "
         b"through the south depot.\n\n## Backups\n\nNightly backups of the depot ledger go to the cold archive in "
         b"Reykjavik, where Ingrid Solberg keeps them for seven years.\n\n## Faults\n\nFault F-2 means the pump "
         b"impeller is worn; replace the impeller and check the seal.\n")
ON = {"graph.enabled": True, "graph.mode": "both", "graph.min_phrase_chunks": 1, "raptor.enabled": True,
      "raptor.cluster_size": 2, "answer.mode": "extractive"}
# Every stage of the list but the conditional ones this workspace lacks (a conversation, several collections).
EXPECTED = [s.name for s in STAGES if s.name not in (Stage.CONDENSE, Stage.COLLECTIONS)]


@pytest.fixture(scope="module")
def deps() -> Deps:
    store = Store()
    rep = ingest_files([("orders.csv", ORDERS), ("faults.csv", FAULTS), ("notes.md", NOTES)], store=store,
                       embedder=HashEmbedder(), config=PipelineConfig())
    assert not rep.errors
    d = Deps(store=store, embedder=HashEmbedder())
    cfg = PipelineConfig().with_overrides(ON)
    build_graph(store, cfg.graph, embedder=d.embedder)
    build_raptor(d, cfg, "default")
    return d


def _check(trace: Trace, path: str) -> None:
    names = listed(trace.stages)
    assert names == EXPECTED, f"{path}: {names}"
    for s in trace.stages:
        if s.stage in EXPECTED:
            assert s.skipped is None or s.skipped.strip(), f"{path}: {s.stage} skipped without a reason"
    for s in trace.stages:  # every record, the calls, rounds and tool calls a stage wrote included, is typed
        assert isinstance(s.info, StageInfo) or not s.info, f"{path}: {s.stage} records a plain {type(s.info)}"
        assert dict(s.info) == json.loads(json.dumps(dict(s.info))), f"{path}: {s.stage}"
    body = json.loads(json.dumps(trace.to_dict()))  # query --json's shape: each stage, its candidates or its reason
    for s in body["stages"]:
        assert "stage" in s and ("candidates" in s if not s["skipped"] else s["skip_reason"])


def test_every_path_records_every_stage_of_the_list(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides(ON)
    paths: dict[str, Trace] = {}
    paths["retrieval"] = run_query("Where do the nightly backups of the depot ledger go?", cfg, deps)
    assert paths["retrieval"].stage("graph_local").skipped is None and paths["retrieval"].stage("raptor").skipped is None
    assert paths["retrieval"].stage("answer_cache").info["verdict"] != "hit"
    paths["cache hit"] = run_query("Where do the nightly backups of the depot ledger go?", cfg, deps)
    assert paths["cache hit"].answer_info() is not None and paths["cache hit"].answer_info().cached
    paths["chitchat"] = run_query("hi, how are you?", cfg, deps)
    paths["out of scope"] = run_query("What is the best pizza topping?", cfg, deps)
    paths["sql"] = run_query("How many fault codes per system?", cfg, deps)
    assert paths["sql"].answer is not None and paths["sql"].answer.mode == "sql"
    paths["tools"] = run_query("What is the total amount of the customer whose warehouse flooded in May?", cfg, deps)
    assert paths["tools"].agent is not None and paths["tools"].stage("evidence").skipped is None
    paths["agent"] = run_query("Who keeps the depot ledger backups?", cfg.with_overrides({"agent.enabled": True}), deps)
    assert paths["agent"].stage("evidence").skipped is None
    paths["map-reduce"] = run_query("Where do the nightly backups of the depot ledger go?",
                                    cfg.with_overrides({"answer.synthesis": "map_reduce",
                                                        "answer_cache.enabled": False}), deps)
    assert paths["map-reduce"].stage("map") is not None  # the synthesis calls, each a record before the answer
    routes = {name: (t.route() or {}).get("class") for name, t in paths.items()}
    assert routes["chitchat"] == "chitchat" and routes["out of scope"] == "out-of-scope", routes
    for name, trace in paths.items():
        _check(trace, name)
    # the paths that stop early say why each later stage did not run
    assert paths["cache hit"].stage("graph_global").skipped == "answer served from the answer cache"
    assert paths["chitchat"].stage("raptor").skipped == "route chitchat: no retrieval"
    assert paths["sql"].stage("hyde").skipped.startswith("route table: answered by SQL")
    assert paths["tools"].stage("graph_local").skipped.startswith("answered by the agent's tools")


def test_the_stage_list_is_the_run_order_and_names_the_reordering_stages() -> None:
    assert REORDERING == {"rerank", "prune", "mmr", "expand"}
    assert len({s.name for s in STAGES}) == len(STAGES) and STAGES[-2].name == Stage.ANSWER
    assert STAGES[-1].name == Stage.VERIFY  # the answer's check comes last (issue #42)


def test_skip_rest_skips_what_is_left_of_the_plan_in_list_order() -> None:
    tracer = Tracer(plan={Stage.SQL})
    tracer.run(Stage.ANSWER_CACHE, lambda: StepOutput(()))
    tracer.skip_rest("because", before=Stage.ANSWER)
    assert [s.stage for s in tracer.stages][:3] == ["answer_cache", "route", "sql"]
    assert tracer.missing() == [Stage.ANSWER, Stage.VERIFY] and all(s.skipped == "because" for s in tracer.stages[1:])
    ran = tracer.run(Stage.ANSWER, lambda: StepOutput((), skipped="nothing to answer from"))
    assert ran is not None and tracer.stages[-1].skipped == "nothing to answer from"
    assert tracer.missing() == [Stage.VERIFY]


def test_stage_info_is_a_typed_record_whose_json_is_its_mapping(deps: Deps) -> None:
    from core.cascade.stage import CascadeInfo, PruneInfo
    from core.graph.stages import GraphGlobalInfo, GraphLocalInfo, RaptorInfo
    from core.retrieve.stage import Bm25Info, DenseInfo, FusedInfo
    from core.types import AnswerInfo, RouteInfo, StageInfo

    cfg = PipelineConfig().with_overrides({**ON, "answer_cache.enabled": False, "transforms.hyde": "on",
                                           "router.override": "factoid"})  # one pass: agent rounds merge infos
    trace = run_query("Where do the nightly backups of the depot ledger go?", cfg, deps)
    kinds = {"bm25": Bm25Info, "dense": DenseInfo, "fused": FusedInfo, "graph_local": GraphLocalInfo,
             "graph_global": GraphGlobalInfo, "raptor": RaptorInfo, "rerank": CascadeInfo, "prune": PruneInfo,
             "mmr": CascadeInfo, "route": RouteInfo, "answer": AnswerInfo}
    for name, kind in kinds.items():
        s = trace.stage(name)
        assert s is not None and s.skipped is None and isinstance(s.info, kind), name
    ran = [s for s in trace.stages if s.skipped is None and isinstance(s.info, StageInfo)]
    for s in ran:  # the JSON trace shows each record as its mapping, the same after a round trip
        assert dict(s.info) == s.info.to_dict() == json.loads(json.dumps(s.info.to_dict()))
    prune = trace.stage("prune").info
    assert prune.flow.candidates_in == len(trace.stage("rerank").candidates) and prune.sentences_kept <= prune.sentences_in
    assert trace.stage("hyde").info.queries and trace.stage("raptor").info.nodes_hit[0].level >= 1
    assert trace.stage("graph_local").info.graph_version >= 1


def test_a_transform_that_writes_no_query_is_skipped_with_its_reason_once(deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"transforms.decompose": "on", "router.enabled": False,
                                           "answer_cache.enabled": False})
    dec = run_query("Where do backups go?", cfg, deps).stage("decompose")
    assert dec.skipped and not dec.notes and not dec.candidates  # bench/results/stage_contract_proof.json


def test_no_stage_record_hides_a_mapping_method() -> None:
    """A record's field named items, keys, values or get would shadow the method the generic views call."""
    import dataclasses

    import core.pipeline  # noqa: F401 - loads every stage package, so every record class exists

    def records(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *records(sub))]

    found = [c for c in records(StageInfo) if dataclasses.is_dataclass(c)]
    assert len(found) >= 30
    assert not [(c.__name__, f.name) for c in found for f in dataclasses.fields(c)
                if f.name in ("items", "keys", "values", "get")]
