"""The route and transform stages as the pipeline calls them: plain functions over the question, the configuration,
the LLM, the corpus vocabulary and an injected `search`; each hands back what its trace stage shows."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Mapping, Sequence

from core.config import ConfigError, PipelineConfig
from core.models.llm import LLM, LLMError
from core.retrieve.bm25 import PassageTerms
from core.retrieve.fusion import rrf
from core.route.agent import content_terms  # the loop's own notion of a content word
from core.route.cag import CagEstimate, estimate_with_prefix, prefix_sha
from core.route.cag import answer as cag_answer
from core.route.router import (
    ABSTAIN,
    CAG_ROUTE,
    Route,
    RouteConfig,
    RouteError,
    corpus_topics,
    load_routes,
    override_route,
    route_llm,
    route_offline,
)
from core.route.transforms import Rewrite, TransformResult, rewrite, run_transform
from core.text import tokenize
from core.trace import StepOutput
from core.types import DEFAULT_WORKSPACE, Answer, Candidate, RouteInfo, StageInfo, Usage

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
    cag: Mapping[str, Any] | None = None  # the CAG estimate, when CAG was asked for (shown even when unavailable)
    fallback: RouteConfig | None = None  # the cag route: the class's own route, should CAG not answer
    cag_prefix: str = field(default="", repr=False)  # the cag route: the prompt prefix (instructions + corpus)

    @property
    def retrieves(self) -> bool:
        return self.named.retrieve

    def as_json(self) -> dict[str, Any]:
        """`query --json`'s "route" object."""
        return self.route.as_json(self.named.name)

    def info(self) -> RouteInfo:
        """What the route stage shows in the trace."""
        r, named = self.route, self.named
        return RouteInfo(r.cls, round(r.confidence, 4), r.reason, named.name, r.method, r.predicted,
                         named.description, tuple(named.transforms), dict(named.overrides),
                         {k: round(v, 4) for k, v in r.probabilities.items()}, named.retrieve,
                         dict(self.cag) if self.cag is not None else None)

    def without_cag(self, why: str) -> "RouteDecision":
        """The decision retrieval continues with after CAG gave no answer: the class's own route."""
        assert self.fallback is not None
        return replace(self, named=self.fallback, fallback=None, notes=(*self.notes, why))


def unknown_words(question: str, vocabulary: Collection[str], tokenizer: Callable[[str], list[str]]) -> list[str]:
    """The question's words, as written, none of whose index terms the corpus's vocabulary holds (stop words and
    words under three letters aside), names (capitalised after the first word) first."""
    out: list[tuple[bool, str]] = []
    for i, w in enumerate(re.findall(r"[^\W_][\w'’.-]*[^\W_]", question)):
        terms = tokenizer(w)
        if len(w) >= 3 and terms and not any(t in vocabulary for t in terms) and w not in (x for _, x in out):
            out.append((not (i > 0 and w[:1].isupper()), w))
    return [w for _, w in sorted(out, key=lambda x: x[0])]


def decide_route(question: str, config: PipelineConfig, llm: LLM | None, *, vocabulary: Collection[str] | None,
                 titles: Callable[[], Sequence[str]] = tuple, tokenizer: Callable[[str], list[str]] | None = None,
                 workspace: str = DEFAULT_WORKSPACE,
                 cag_estimate: Callable[[], tuple[CagEstimate, str]] | None = None,
                 evidence: Callable[[str], PassageTerms] | None = None, unjudged: str = "",
                 dense_top: Callable[[], float | None] | None = None) -> RouteDecision:
    """Classify the question (user override, LLM, or the offline classifier) and resolve its named configuration.
    `titles` is called only when the corpus's topics are needed (the LLM prompt, the out-of-scope reply);
    `cag_estimate` only when CAG is asked for (it reads the whole corpus); `evidence` (the BM25 index's
    best_passage_terms) and `dense_top` (the question's best dense cosine) only when the offline router would skip
    retrieval."""
    rc = config.router
    start = time.perf_counter()
    routes = load_routes(rc.routes_file or None)
    notes: list[str] = []
    kw = {"min_confidence": rc.min_confidence, "refuse_confidence": rc.refuse_confidence}
    topics = ""
    if rc.override and rc.override != CAG_ROUTE:  # asking for CAG still classifies: retrieval may need the class
        route = override_route(rc.override, routes)
    else:
        offline = route_offline(question, vocabulary, **kw, **({"tokenizer": tokenizer} if tokenizer else {}),
                                evidence=evidence, evidence_min_terms=rc.evidence_min_terms,
                                evidence_min_share=rc.evidence_min_share,
                                evidence_unknown_weight=rc.evidence_unknown_weight, unjudged=unjudged,
                                dense_top=dense_top, dense_min_cosine=rc.dense_guard_min_cosine)
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
    if reply and named.name == "out-of-scope" and route.method != "override" and vocabulary:
        # say which of the question's words the corpus never uses ('When did the Lisbon office open?'): the reason
        # a question about something close to the corpus is refused, not only what the corpus is about
        unknown = unknown_words(question, vocabulary, tokenizer or tokenize)
        if unknown:
            reply += " No document here mentions " + ", ".join(f"'{w}'" for w in unknown[:3]) + "."
    decision = RouteDecision(route, named, cfg, reply, (*route.notes, *notes))
    if named.retrieve and (rc.override == CAG_ROUTE or (config.cag.enabled and not rc.override)):
        decision = _with_cag(decision, routes, cag_estimate, asked=rc.override == CAG_ROUTE)
    return replace(decision, ms=(time.perf_counter() - start) * 1000)


def _with_cag(decision: RouteDecision, routes: Mapping[str, RouteConfig],
              estimate: Callable[[], tuple[CagEstimate, str]] | None, *, asked: bool) -> RouteDecision:
    """The cag route when CAG was asked for (cag.enabled, or the user's choice for this query) and is available: a key
    is set and the corpus fits under cag.max_corpus_tokens. Otherwise the class's route, with the reason; the
    estimate is shown either way."""
    who = "chosen for this query" if asked else "cag.enabled"
    if estimate is None:
        return replace(decision, notes=(*decision.notes, f"CAG ({who}) unavailable: no corpus estimate here"))
    est, prefix = estimate()
    if not est.available:
        return replace(decision, cag=est.to_dict(), notes=(*decision.notes, f"CAG ({who}) unavailable: {est.note}; "
                                                           f"route {decision.named.name} instead"))
    return replace(decision, named=routes[CAG_ROUTE], fallback=decision.named, cag=est.to_dict(), cag_prefix=prefix,
                   notes=(*decision.notes, f"CAG ({who}): the whole corpus (~{est.corpus_tokens:,} tokens) is in the "
                                           f"cached prompt, no retrieval"))


def cag_estimator(corpus: Any, workspace: str, config: PipelineConfig, llm: LLM, question: str
                  ) -> Callable[[], tuple[CagEstimate, str]]:
    """What decide_route calls when CAG is asked for: the workspace's estimate and prompt prefix, read once."""
    c = config.cag
    return lambda: estimate_with_prefix(corpus, workspace, model=c.model, limit_tokens=c.max_corpus_tokens,
                                        max_chunks=config.answer.max_chunks, output_tokens=c.max_tokens, llm=llm,
                                        question_tokens=max(1, len(question) // 4), ttl=config.llm.cache_ttl)


@dataclass(frozen=True, kw_only=True)
class RouteStep(StepOutput):
    """The route stage's output and the decision it made."""

    decision: RouteDecision


def route_step(decision: RouteDecision) -> RouteStep:
    """The route stage's record of a decision (decide_route): its notes, the router's usage and its RouteInfo."""
    return RouteStep((), decision.notes, decision.route.usage, decision.info(), decision=decision)


def cag_skip(config: PipelineConfig, decision: RouteDecision | None) -> str | None:
    """Why the cag stage does not run (None: the question's route is cag and an answer may be written)."""
    if decision is not None and decision.named.name == CAG_ROUTE:
        return None if config.answer.enabled else "answer.enabled = false: no CAG call (retrieval runs instead)"
    if decision is None:
        return "router.enabled = false (CAG is a route)"
    if decision.cag is not None and not decision.cag.get("available", False):
        return f"CAG unavailable: {decision.cag.get('note') or 'no estimate'}; route {decision.named.name}"
    if not (config.cag.enabled or config.router.override == CAG_ROUTE):
        return "cag.enabled = false"
    return f"route {decision.named.name}"


@dataclass(frozen=True, kw_only=True)
class CagStep(StepOutput):
    """The cag stage: Claude's answer from the whole corpus, or None when retrieval must answer instead."""

    answer: Answer | None


def cag_stage(question: str, decision: RouteDecision, config: PipelineConfig, llm: LLM, document_names: Sequence[str],
              *, workspace: str = DEFAULT_WORKSPACE) -> CagStep:
    """One CAG call with the decision's prefix. A NOT_IN_CORPUS reply (with cag.fallback_to_rag) or a failed call
    hands the question back to retrieval, saying so; citations are the [document] names the answer quotes."""
    model, sha = config.cag.model, prefix_sha(decision.cag_prefix)
    try:
        res = cag_answer(question, decision.cag_prefix, llm, model=config.cag.model,
                         max_tokens=config.cag.max_tokens, workspace=workspace)
    except LLMError as exc:
        return CagStep((), (f"CAG call failed ({str(exc)[:160]}): answered by retrieval instead",), Usage(),
                       CagInfo(model, sha, True), answer=None)
    if res.refused and config.cag.fallback_to_rag:
        return CagStep((), ("CAG: the documents in the prompt do not answer this (NOT_IN_CORPUS): answered by "
                            "retrieval instead (cag.fallback_to_rag)",), res.usage,
                       CagInfo(model, sha, True, res.refused, round(res.cache_read_share, 4)), answer=None)
    cited = tuple(n for n in dict.fromkeys(document_names) if f"[{n}]" in res.text)
    notes = tuple(n for n in (res.note,) if n)
    return CagStep((), notes, res.usage, CagInfo(model, sha, False, res.refused, round(res.cache_read_share, 4)),
                   answer=Answer(res.text, cited, res.refused, "cag"))


@dataclass(frozen=True, eq=False)
class CagInfo(StageInfo):
    """The cag stage's record: the model, the prefix's hash (the prompt cache's key), whether the question fell back
    to retrieval, and, when the call answered, whether it refused and the share of the prompt read from the cache."""

    model: str
    prefix_sha256: str
    fell_back: bool
    refused: bool | None = None  # None: the call failed
    cache_read_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "prefix_sha256": self.prefix_sha256,
                **({"refused": self.refused, "cache_read_share": self.cache_read_share}
                   if self.refused is not None else {}), "fell_back": self.fell_back}


def routed_variants(config: PipelineConfig) -> dict[str, PipelineConfig]:
    """Evaluate's two fixed choices beside the session's own settings: "routed" (router on, every transform left to
    the route) and "single pipeline" (router off, transforms off: today's one path for every question)."""
    auto = {f"transforms.{t}": "auto" for t in ("hyde", "multi_query", "decompose")}
    off = {f"transforms.{t}": "off" for t in ("hyde", "multi_query", "decompose")}
    return {"routed": config.with_overrides({"router.enabled": True, "router.override": "", **auto}),
            "single pipeline": config.with_overrides({"router.enabled": False, **off})}


def _headed_by(name: str, passages: Sequence[Candidate]) -> bool:
    """Some passage's first line (its title, where the corpus gives one) holds every content word of `name`."""
    words = content_terms(name)
    return bool(words) and any(words <= content_terms(c.text.split("\n", 1)[0][:120]) for c in passages)


def bridge_found(stages: Sequence[Any], evidence: Sequence[Candidate], *, top: int = 5) -> str | None:
    """The multi-hop route's early stop (agent.stop_when_found): decomposition's bridge round already read the person a
    relation points to ('the director of X' -> 'Y'); when X and every such name head a passage among the top `top` of
    the first round's evidence, a bridging round has nothing left to find. None otherwise (also when no bridge was
    read: then round 2 is where the second hop is found). On the router-train split's multi-hop questions it stopped a
    third of them after round 1 at no loss of recall@5 but 1.9 points of all-gold@10 (bench/results/route_tune_gate.json),
    so no shipped route turns it on."""
    dec = next((s for s in stages if s.stage == "decompose" and s.skipped is None), None)
    info = dec.own_info if dec is not None else None  # in the agentic loop, its first round's record
    rounds = list(info.rounds) if isinstance(info, TransformInfo) else []
    if len(rounds) < 2 or not rounds[0] or not rounds[1]:
        return None
    head = list(evidence[:top])
    names = [rounds[0][0], *rounds[1]]
    if all(_headed_by(n, head) for n in names):
        return f"decomposition already found {', '.join(repr(n) for n in names)} among the top {top}: no bridging round"
    return None


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


@dataclass(frozen=True, eq=False)
class TransformInfo(StageInfo):
    """A transform stage: how its queries were written, the queries, each query's top chunk ids and (decomposition)
    its rounds."""

    method: str
    queries: tuple[str, ...]
    lists: Mapping[str, Sequence[str]] = field(default_factory=dict)
    rounds: tuple[tuple[str, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "queries": list(self.queries),
                "lists": {q: list(ids) for q, ids in self.lists.items()}, "rounds": [list(r) for r in self.rounds]}


class TransformRun:
    """hyde, multi_query, decompose for one question, in that order (trace.TRANSFORMS), each gated, each with its own
    queries and lists. The three share a budget and a memory: at most one LLM call per query beyond the answer
    (issue #16), the router's included, after which the rest use their offline method and say so; and sub-queries
    never repeat across transforms (a later one keeps only what is new). `skip(name)` says why a transform does not
    run, `step(name)` runs it, `after(out)` carries what it used on to the next (also for an output replayed from
    an evaluation run's memo)."""

    def __init__(self, question: str, config: PipelineConfig, decision: RouteDecision | None, llm: LLM | None,
                 search: Callable[[str], list[Candidate]], *, feedback: Sequence[Candidate] = (),
                 dense_top: float | None = None, workspace: str = DEFAULT_WORKSPACE) -> None:
        self.question, self.config, self.decision, self.llm, self.search = question, config, decision, llm, search
        self.feedback, self.dense_top, self.workspace = feedback, dense_top, workspace
        self.issued: list[str] = []
        self.calls_left = MAX_EXTRA_LLM_CALLS - (decision.route.usage.calls if decision is not None else 0)

    def skip(self, name: str) -> str | None:
        return gate(name, self.config, self.decision, self.dense_top)

    def key(self) -> tuple[Any, ...]:
        """What a transform's output is a function of beside the question and its config sections: the route's
        class, sub-queries and transforms, the feedback list, the dense top-1, the budget left and the sub-queries
        issued before it."""
        d = self.decision
        return ((d.route.cls, tuple(d.route.queries), tuple(d.named.transforms), d.named.name) if d else None,
                tuple((c.chunk_id, c.score) for c in self.feedback), self.dense_top, self.calls_left,
                tuple(self.issued))

    def step(self, name: str) -> StepOutput:
        t, decision, llm = self.config.transforms, self.decision, self.llm
        withheld = llm is not None and getattr(llm, "available", False) and self.calls_left <= 0
        rw: Rewrite = rewrite(name, self.question, llm=llm if self.calls_left > 0 else None, model=t.model,
                              search=self.search, feedback=self.feedback,
                              suggested=decision.route.queries if decision is not None and
                              (name, decision.route.cls) in (("multi_query", "comparison"),
                                                             ("decompose", "multi-hop")) else (),
                              limit=t.max_queries, prf_docs=t.prf_docs, prf_terms=t.prf_terms,
                              seen=self.issued if name != "hyde" else (), workspace=self.workspace)
        if withheld and rw.method.startswith("offline"):
            rw = Rewrite(rw.transform, rw.queries, rw.method, ("the query's one extra LLM call is spent: offline "
                                                               "method", *rw.notes), rw.usage, rw.rounds)
        if not rw.queries:
            # the notes are the skip reason: not repeated as notes
            return StepOutput((), (), rw.usage, TransformInfo(rw.method, ()),
                              skipped="; ".join(rw.notes) or "no queries generated")
        res: TransformResult = run_transform(rw, self.search, rrf_k=self.config.fusion.rrf_k,
                                             top=max(self.config.bm25.k, 20), per_query=t.per_query_k)
        lists = {q: [c.chunk_id for c in cands[:10]] for q, cands in res.lists.items()}
        return StepOutput(res.fused, rw.notes, rw.usage,
                          TransformInfo(rw.method, tuple(rw.queries), lists, tuple(tuple(r) for r in rw.rounds)))

    def after(self, out: StepOutput) -> None:
        if isinstance(out.info, TransformInfo):
            self.issued.extend(out.info.queries)
        self.calls_left -= out.usage.calls
