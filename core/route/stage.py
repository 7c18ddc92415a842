"""The route and transform stages as the pipeline calls them: plain functions over the question, the configuration,
the LLM, the corpus vocabulary and an injected `search`; each hands back what its trace stage shows."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, Sequence

from core.config import ConfigError, PipelineConfig
from core.llm import LLM
from core.retrieve.fusion import rrf
from core.route.router import (ABSTAIN, Route, RouteConfig, RouteError, corpus_topics, load_routes, override_route,
                               route_llm, route_offline)
from core.route.transforms import Rewrite, TransformResult, rewrite, run_transform
from core.types import DEFAULT_WORKSPACE, Candidate, Usage

Hits = list[tuple[str, float]]
MAX_EXTRA_LLM_CALLS = 1


@dataclass(frozen=True)
class RouteDecision:
    """The route of one question: the decision, its named configuration and the configuration the query runs with."""

    route: Route
    named: RouteConfig
    config: PipelineConfig
    reply: str = ""  # chitchat / out-of-scope: the text given instead of an answer
    notes: tuple[str, ...] = ()
    ms: float = 0.0

    @property
    def retrieves(self) -> bool:
        return self.named.retrieve

    def as_json(self) -> dict[str, Any]:
        """`query --json`'s "route" object."""
        return self.route.as_json(self.named.name)

    def info(self) -> dict[str, Any]:
        """What the route stage shows in the trace."""
        return {**self.as_json(), "predicted": self.route.predicted, "description": self.named.description,
                "transforms": list(self.named.transforms), "overrides": dict(self.named.overrides),
                "probabilities": {k: round(v, 4) for k, v in self.route.probabilities.items()},
                "retrieve": self.named.retrieve}


def decide_route(question: str, config: PipelineConfig, llm: LLM | None, *, vocabulary: Collection[str] | None,
                 titles: Callable[[], Sequence[str]] = tuple, tokenizer: Callable[[str], list[str]] | None = None,
                 workspace: str = DEFAULT_WORKSPACE) -> RouteDecision:
    """Classify the question (user override, LLM, or the offline classifier) and resolve its named configuration.
    `titles` is called only when the corpus's topics are needed (the LLM prompt, the out-of-scope reply)."""
    rc = config.router
    start = time.perf_counter()
    routes = load_routes(rc.routes_file or None)
    notes: list[str] = []
    kw = {"min_confidence": rc.min_confidence, "refuse_confidence": rc.refuse_confidence}
    topics = ""
    if rc.override:
        route = override_route(rc.override, routes)
    else:
        offline = route_offline(question, vocabulary, **kw, **({"tokenizer": tokenizer} if tokenizer else {}))
        use_llm = rc.method == "llm" or (rc.method == "auto" and llm is not None and getattr(llm, "available", False))
        if use_llm and llm is not None:
            topics = corpus_topics(titles())
            route = route_llm(question, llm, rc.model, topics, workspace=workspace, fallback=offline, **kw)
        else:
            route = offline
            if rc.method == "llm":
                notes.append("router.method = llm but no LLM is available: the offline router decided")
    named = routes[route.cls]
    cfg = config
    if named.overrides:
        try:
            cfg = config.with_overrides(dict(named.overrides))
        except ConfigError as exc:
            raise RouteError(f"route {named.name}: {exc}") from exc
        notes.append("route settings: " + ", ".join(f"{k}={v}" for k, v in named.overrides.items()))
    reply = named.reply.replace("{topics}", topics or corpus_topics(titles())) if not named.retrieve else ""
    return RouteDecision(route, named, cfg, reply, (*route.notes, *notes), (time.perf_counter() - start) * 1000)


def hybrid_search(bm25: Callable[[str, int], Hits], dense: Callable[[str, int], Hits] | None,
                  hydrate: Callable[[Hits, str], list[Candidate]], *, k: int = 50, rrf_k: int = 60,
                  dense_weight: float = 1.0, keep: int | None = None) -> Callable[[str], list[Candidate]]:
    """One generated query's list: BM25 and dense for that text, fused by RRF as the main fusion does. Memoised per
    text, so a sub-query two transforms share is searched once. The lists are fused on chunk ids and only the first
    `keep` (default k) fused hits fetch their text: a transform reads the head of each list, and two full fetches per
    generated query were a tenth of a multi-hop query's time (bench/results/route_latency_twowiki.json)."""
    memo: dict[str, list[Candidate]] = {}

    def ids(hits: Hits, name: str) -> list[Candidate]:
        return [Candidate(cid, "", "", score, rank, {"stage": name}) for rank, (cid, score) in enumerate(hits, 1)]

    def search(text: str) -> list[Candidate]:
        if text not in memo:
            lists = [ids(bm25(text, k), "bm25")]
            weights = [1.0]
            if dense is not None and dense_weight > 0:
                lists.append(ids(dense(text, k), "dense"))
                weights.append(dense_weight)
            fused = rrf(lists, k=rrf_k, weights=weights, names=["bm25", "dense"][: len(lists)], top=keep or k)
            full = {c.chunk_id: c for c in hydrate([(c.chunk_id, c.score) for c in fused], "hybrid")}
            found = [c for c in fused if c.chunk_id in full]  # a chunk deleted meanwhile is left out
            memo[text] = [Candidate(c.chunk_id, full[c.chunk_id].doc_id, full[c.chunk_id].text, c.score, rank,
                                    c.meta) for rank, c in enumerate(found, 1)]
        return memo[text]

    return search


@dataclass(frozen=True)
class TransformStage:
    """One transform as the trace shows it: skipped with a reason, or its queries, their lists and their fusion."""

    stage: str
    skipped: str | None = None
    candidates: tuple[Candidate, ...] = ()
    ms: float = 0.0
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)


def gate(name: str, config: PipelineConfig, decision: RouteDecision | None, dense_top: float | None) -> str | None:
    """None when transform `name` fires, else the reason it does not (the stage's skip reason)."""
    mode = getattr(config.transforms, name)
    if mode == "off":
        return f"transforms.{name} = off"
    if mode == "on":
        return None
    if decision is None:
        return f"transforms.{name} = auto and the router is off"
    if decision.route.cls == ABSTAIN and name != "hyde":
        return f"transforms.{name} = auto; the router abstained (default pipeline)"
    if name in decision.named.transforms:
        return None
    if name == "hyde" and dense_top is not None and dense_top < config.transforms.weak_retrieval:
        return None
    if name == "hyde":
        weak = config.transforms.weak_retrieval
        why = ("dense top-1 cosine unknown" if dense_top is None
               else f"dense top-1 cosine {dense_top:.2f} >= transforms.weak_retrieval {weak:g}")
        return f"transforms.hyde = auto; route {decision.named.name} does not ask for it and {why}"
    return f"transforms.{name} = auto; route {decision.named.name} does not ask for it"


def transform_stages(question: str, config: PipelineConfig, decision: RouteDecision | None, llm: LLM | None,
                     search: Callable[[str], list[Candidate]], *, feedback: Sequence[Candidate] = (),
                     dense_top: float | None = None, workspace: str = DEFAULT_WORKSPACE) -> list[TransformStage]:
    """hyde, multi_query, decompose in that order, each gated, each with its own queries and lists."""
    t = config.transforms
    out: list[TransformStage] = []
    suggested = decision.route.queries if decision is not None else ()
    issued: list[str] = []  # sub-queries never repeat across transforms: a later one keeps only what is new
    # Issue #16's budget: at most one LLM call per query beyond the answer, the router's included. Once it is spent
    # the remaining transforms use their offline method and say so.
    calls_left = MAX_EXTRA_LLM_CALLS - (decision.route.usage.calls if decision is not None else 0)
    for name in ("hyde", "multi_query", "decompose"):
        why = gate(name, config, decision, dense_top)
        if why is not None:
            out.append(TransformStage(name, why))
            continue
        start = time.perf_counter()
        withheld = llm is not None and getattr(llm, "available", False) and calls_left <= 0
        rw: Rewrite = rewrite(name, question, llm=llm if calls_left > 0 else None, model=t.model, search=search, feedback=feedback,
                              suggested=suggested if (name, decision and decision.route.cls) in
                              (("multi_query", "comparison"), ("decompose", "multi-hop")) else (),
                              limit=t.max_queries, prf_docs=t.prf_docs, prf_terms=t.prf_terms,
                              seen=issued if name != "hyde" else (), workspace=workspace)
        issued.extend(rw.queries)
        calls_left -= rw.usage.calls
        if withheld and rw.method.startswith("offline"):
            rw = Rewrite(rw.transform, rw.queries, rw.method, ("the query's one extra LLM call is spent: offline "
                                                               "method", *rw.notes), rw.usage, rw.rounds)
        if not rw.queries:
            out.append(TransformStage(name, "; ".join(rw.notes) or "no queries generated", usage=rw.usage,
                                      ms=(time.perf_counter() - start) * 1000))
            continue
        res: TransformResult = run_transform(rw, search, rrf_k=config.fusion.rrf_k, top=max(config.bm25.k, 20),
                                             per_query=t.per_query_k)
        lists = {q: [c.chunk_id for c in cands[:10]] for q, cands in res.lists.items()}
        info = {"method": rw.method, "queries": list(rw.queries), "lists": lists,
                "rounds": [list(r) for r in rw.rounds]}
        out.append(TransformStage(name, None, tuple(res.fused), (time.perf_counter() - start) * 1000, rw.usage,
                                  rw.notes, info))
    return out
