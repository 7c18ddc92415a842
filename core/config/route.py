"""Query-side sections: the router, query transforms, the agentic loop and cache-augmented generation."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from core.config.base import EXPERT, Section, chosen_in

_ROUTER_CV = "on 5-fold CV of the router's train split: the 95% upper bound of the costly-mistake rate at most 1%, "


class RouterConfig(Section):
    """The router (core/route/router.py): the first stage; it picks a named configuration (a route) from
    core/route/routes.toml."""

    enabled: bool = Field(True, description="route each question; false: every question takes the single default "
                                            "pipeline")
    method: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: the LLM router when a key is set, else the offline classifier; offline: the "
                            "classifier; llm: the LLM router (the classifier without a key, saying so)")
    model: str = Field("claude-haiku-4-5", description="model of the LLM router")
    min_confidence: float = Field(
        0.2, ge=0, le=1, description="below this confidence the router abstains: the default pipeline",
        json_schema_extra=chosen_in("bench/results/route.json", _ROUTER_CV + "then the best effective accuracy; "
                                    "the file has the test-split figures", expert=True))
    refuse_confidence: float = Field(
        0.7, ge=0, le=1, description="confidence chitchat and out-of-scope need, since they skip retrieval",
        json_schema_extra=chosen_in("bench/results/route.json", _ROUTER_CV + "then the best effective accuracy; "
                                    "the file has the test-split figures", expert=True))
    evidence_min_terms: int = Field(
        4, ge=0, le=20, description="evidence guard: a no-retrieval decision yields to the default pipeline when the "
                                    "best BM25 passage holds this many of the question's terms; 0 = guard off",
        json_schema_extra=chosen_in("bench/results/route_evidence.json", "on 5-fold CV of the router's train split: "
                                    "extra chitchat / out-of-scope lines sent to retrieval at most 2%, then the "
                                    "most corpus questions it keeps from refusal, then the fewest extra sent", expert=True))
    evidence_min_share: float = Field(
        0.4, ge=0, le=1, description="evidence guard: share of the question's idf those terms must carry",
        json_schema_extra=chosen_in("bench/results/route_evidence.json", "chosen with evidence_min_terms", expert=True))
    evidence_unknown_weight: float = Field(
        0.5, ge=0, le=1, description="evidence guard: weight of question terms the corpus never uses",
        json_schema_extra=chosen_in("bench/results/route_evidence.json", "chosen with evidence_min_terms; the file "
                                    "reports the shipped setting beside the rule's own choice", expert=True))
    dense_guard_min_cosine: float = Field(
        0.45, ge=0, le=1, description="dense evidence guard: a no-retrieval decision yields to the default pipeline "
                                     "when a passage's dense cosine with the question reaches this (the passage says "
                                     "it in other words); 0 = guard off",
        json_schema_extra=chosen_in("bench/results/route_dense_guard.json", "on 5-fold CV of the router's train "
                                    "split, public corpora only: the lowest threshold sending at most 2% of their "
                                    "chitchat / out-of-scope lines to retrieval in addition", expert=True))
    override: str = Field("", description="a route name forces that route (the Search Lab's per-query override); "
                                          "\"\" = the router decides")
    routes_file: str = Field("", description="TOML file of named routes; \"\" = core/route/routes.toml")


TransformMode = Literal["off", "auto", "on"]


class TransformsConfig(Section):
    """Query transforms (core/route/transforms.py). auto: fire when the route asks for it (or, for hyde, when the
    first retrieval looks weak); on: every retrieving query; off: never. true/false read as on/off."""

    hyde: TransformMode = Field("auto", description="hypothetical answer searched beside the query (offline: "
                                                    "pseudo-relevance feedback)")
    multi_query: TransformMode = Field("auto", description="several queries that together cover the question "
                                                           "(offline: one per compared item)")
    decompose: TransformMode = Field("auto", description="sub-questions and the bridge facts they need, searched "
                                                         "in rounds")
    model: str = Field("claude-haiku-4-5", description="model that writes the transforms' queries")
    max_queries: int = Field(4, ge=1, le=10, description="generated queries per transform (per round)")
    weak_retrieval: float = Field(0.3, ge=-1, le=1, description="hyde in auto mode fires when the dense top-1 "
                                                                "cosine is below this", json_schema_extra=EXPERT)
    prf_docs: int = Field(3, ge=1, le=20, description="offline HyDE analogue: feedback passages", json_schema_extra=EXPERT)
    prf_terms: int = Field(8, ge=1, le=50, description="offline HyDE analogue: expansion terms", json_schema_extra=EXPERT)
    weight: float = Field(
        2.0, ge=0, le=10, description="RRF weight of each transform list in fusion",
        json_schema_extra=chosen_in("bench/results/route_tune.json",
                                    "the best all-gold@10 of the weight x per_query_k grid on the router-train "
                                    "twowiki questions; route_twowiki.json reports the test split", expert=True))
    per_query_k: int = Field(
        3, ge=1, le=1000, description="head of each generated query's list that its stage fuses",
        json_schema_extra=chosen_in("bench/results/route_tune.json", "chosen with weight", expert=True))
    dense: bool = Field(True, description="generated queries search dense as well as BM25; false: BM25 alone (item "
                                          "and bridge names are lexical matches; a route may save the encodes)", json_schema_extra=EXPERT)

    @field_validator("hyde", "multi_query", "decompose", mode="before")
    @classmethod
    def _bool_as_mode(cls, v: Any) -> Any:
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v


class AgentConfig(Section):
    """The agentic loop (core/route/agent.py): rounds of retrieval, a grader and hard budgets."""

    enabled: bool = Field(
        False, description="run rounds of grading and searching again; the multi-hop and comparison routes turn "
                           "it on for their questions",
        json_schema_extra=chosen_in("bench/results/agent.json", "off for every question until it beats single-shot "
                                    "on the dev sets; the file measures the multi-hop route that uses it"))
    max_rounds: int = Field(2, ge=1, le=10, description="rounds at most, the first included")
    max_llm_calls: int = Field(6, ge=0, le=100, description="LLM calls of the whole run at most")
    max_tokens: int = Field(30000, ge=0, le=10_000_000, description="input + output tokens of the whole run")
    max_usd: float = Field(0.05, ge=0, le=100, description="dollars of the whole run at most")
    max_seconds: float = Field(60.0, gt=0, le=3600, description="seconds of the whole run at most")
    grader: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: the LLM grader when a key is set, else the offline grader; offline: the "
                            "calibrated offline grader; llm: the LLM grader")
    grader_model: str = Field("claude-haiku-4-5", description="model of the LLM grader and next-query writer")
    per_round: int = Field(3, ge=1, le=5, description="bridging queries per round", json_schema_extra=EXPERT)
    head: int = Field(3, ge=0, le=50, description="first-round candidates kept on top of the evidence pool", json_schema_extra=EXPERT)
    repeat_threshold: float = Field(0.8, ge=0, le=1, description="term Jaccard at which a query repeats an earlier "
                                                                 "one", json_schema_extra=EXPERT)
    k: int = Field(10, ge=1, le=100, description="evidence pool size handed to the answer", json_schema_extra=EXPERT)
    stop_when_found: bool = Field(
        False, description="stop after round 1 when decomposition's item and every bridge name it read head a "
                           "passage among the top 5 of the evidence",
        json_schema_extra=chosen_in("bench/results/route_tune_gate.json", "faster, but it lost all-gold@10 on the "
                                    "router-train multi-hop questions, so it stays off", expert=True))
    bridge_dense: bool = Field(
        True, description="later rounds search with dense as well; false: BM25 alone (their queries are bags of "
                          "names, a lexical match)",
        json_schema_extra=chosen_in("bench/results/route_tune_gate.json", "the multi-hop route sets it false "
                                    "(core/route/routes.toml): about as good and much faster there", expert=True))
    tools: Literal["off", "auto", "on"] = Field(
        "auto", description="the agent's tools (search, sql, graph; core/route/tools.py): on = every question goes "
                            "through them; auto = in a workspace with tables, questions whose form needs several "
                            "steps (a lookup then an aggregate, an entity the documents name then SQL) and, with a "
                            "key, every mixed question and the table questions the sql stage did not answer; off = "
                            "never",
        json_schema_extra=chosen_in("bench/results/agent_tools.json", "auto: the one-shot sql stage keeps the "
                                    "forms it answers; the tools take the multi-step ones"))
    tools_model: str = Field("claude-haiku-4-5", description="model that chooses the tools (Messages API tool use)")


class CagConfig(Section):
    """Cache-augmented generation (core/route/cag.py): the whole corpus in a cached prompt prefix, no retrieval."""

    enabled: bool = Field(False, description="send corpus questions to the cag route when a key is set and the "
                                             "corpus fits; off by default, as every such question then goes to "
                                             "Claude with the corpus")
    # Well under the models' 200k-token window, leaving room for the question, the answer and the instructions.
    max_corpus_tokens: int = Field(150_000, ge=1000, le=1_000_000, description="larger corpora use retrieval")
    model: str = Field("claude-sonnet-4-6", description="model that answers from the cached corpus")
    max_tokens: int = Field(600, ge=64, le=8192, description="output tokens of a CAG answer at most")
    fallback_to_rag: bool = Field(True, description="a CAG answer saying the documents do not answer runs "
                                                    "retrieval instead")
