"""The mistakes doctor: the ten typical mistakes of a production RAG, each a measured check on one workspace.

The list is the seed article's "typical mistakes" (graph before reranker, an agent loop without a budget, a shared or
loose semantic cache, embeddings without the model in the key, judging compression by the final answer, token
pruning of exact strings, no refusal path, a prompt cache that never reads, full re-indexing of a graph). Each check
reads this workspace's own data, traces, ledger and stored evaluation runs and says what it found (`evidence`), how
bad it is (`status`) and what to do (`fix`). Nothing here is tuned to a corpus: where a check needs a bound it is the
article's own (a semantic-cache threshold of 0.95 and up; a golden set of 100 questions or more) or a noise band
computed from the stored runs."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from core.cascade.guard import EvalEvidence, mean_se, stage_evidence
from core.config import PipelineConfig
from core.types import QuestionResult
from core.store import Store
from core.types import EvalRunRecord, RunRecord, Stage

OK, WARN, FAIL, NA = "ok", "warn", "fail", "not applicable"
STATUSES: tuple[str, ...] = (OK, WARN, FAIL, NA)
_RANK = {NA: 0, OK: 1, WARN: 2, FAIL: 3}

# The article's numbers, not fitted here: a semantic cache starts at 0.97 and goes below 0.95 only on measurements;
# a golden set worth deciding on has 100-300 real questions.
CACHE_SAFE_COSINE = 0.95
GOLDEN_MIN_ITEMS = 100
RUNS_READ = 500  # logged queries read at most (newest first)
EVALS_READ = 50  # stored evaluation runs read at most (newest first)
METRIC = "recall@5"


@dataclass(frozen=True)
class Check:
    """One mistake and what this workspace shows about it."""

    number: int
    mistake: str
    status: str  # ok | warn | fail | not applicable
    evidence: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "mistake": self.mistake, "status": self.status, "evidence": self.evidence,
                "fix": self.fix}


@dataclass(frozen=True)
class Facts:
    """What the checks read, read once: the configuration, the workspace's logged queries (newest first), its stored
    evaluation runs (newest first, without per-question results) and a loader of one run's questions."""

    store: Store
    workspace: str
    config: PipelineConfig
    embedder_id: str
    runs: Sequence[RunRecord]
    evals: Sequence[EvalRunRecord]
    load_questions: Callable[[str], Sequence[QuestionResult]]


def _worst(*statuses: str) -> str:
    return max(statuses, key=_RANK.__getitem__) if statuses else NA


def _ran(trace: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(s.get("stage")): s for s in trace.get("stages", ()) if not s.get("skipped")}


def _metric_values(questions: Sequence[QuestionResult], metric: str) -> dict[str, float]:
    out = {}
    for q in questions:
        v = q.metrics.get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[q.qid] = float(v)
    return out


@dataclass(frozen=True)
class Paired:
    """B minus A on the questions both runs scored, in points of the metric."""

    questions: int
    delta: float
    se: float

    def beyond_noise(self, z: float = 1.96) -> bool:
        return self.questions >= 2 and abs(self.delta) > z * self.se

    def text(self) -> str:
        se = "∞" if math.isinf(self.se) else f"{self.se:.1f}"
        return f"{self.delta:+.1f} ± {se} points (se) over {self.questions} questions"


def paired(a: Mapping[str, float], b: Mapping[str, float]) -> Paired | None:
    common = sorted(set(a) & set(b))
    if not common:
        return None
    mean, se = mean_se([100.0 * (b[q] - a[q]) for q in common])
    return Paired(len(common), mean, se)


# -- 1. Graph RAG as the first step -----------------------------------------------------------------------------------
def graph_first(f: Facts) -> Check:
    name = "Graph RAG before the cheap techniques (a reranker first, the graph only where it measurably helps)"
    c = f.config
    state = f.store.graph.state(f.workspace)
    routed = sum(1 for r in f.runs if {Stage.GRAPH_LOCAL, Stage.GRAPH_GLOBAL} & set(_ran(r.trace)))
    routed_note = f"; graph stages ran in {routed} of the last {len(f.runs)} logged queries" if f.runs else ""
    statuses, ev = [], []
    if c.graph.enabled or routed:
        ev.append("graph search is on" if c.graph.enabled else "graph search is off but a route turned it on")
        if not c.rerank.enabled:
            statuses.append(FAIL)
            ev.append("the reranker is off")
    else:
        ev.append((f"a graph is built ({state.stats.get('nodes', '?')} entities) but " if state else "")
                  + "graph search is off")
    on = [e for e in f.evals if (e.config.get("graph") or {}).get("enabled")]
    off = [e for e in f.evals if not (e.config.get("graph") or {}).get("enabled")]
    pair = next(((a, b) for b in on for a in off if a.dataset == b.dataset and _but(a.config, "graph")
                 == _but(b.config, "graph")), None)
    gain = False
    if pair is None:
        ev.append("no pair of stored evaluations on one golden set differs only in the graph section, so the "
                  "graph's gain is unmeasured")
    else:
        a, b = pair
        p = paired(_metric_values(f.load_questions(a.eval_id), METRIC),
                   _metric_values(f.load_questions(b.eval_id), METRIC))
        if p is None:
            ev.append(f"runs {a.eval_id[:8]} (graph off) and {b.eval_id[:8]} (graph on) share no scored question")
        else:
            gain = p.delta > 0 and p.beyond_noise()
            ev.append(f"on '{b.dataset}', graph on vs off ({b.eval_id[:8]} vs {a.eval_id[:8]}): {METRIC} "
                      f"{p.text()}: " + ("a gain beyond noise" if gain else "no gain beyond noise"))
    if c.graph.enabled and not gain:
        statuses.append(WARN)
    fix = ("Turn the reranker on before the graph; keep graph.enabled only where an evaluation with it on and off "
           "(Evaluate → compare) shows a gain beyond the noise band; otherwise leave the graph to the routes that "
           "need it (global questions).")
    return Check(1, name, _worst(OK, *statuses), "; ".join(ev) + routed_note + ".", fix if statuses else
                 "Nothing to do" + ("; the stored comparison says the graph would not pay here." if pair and not gain
                                    else "."))


def _but(config: Mapping[str, Any], section: str) -> dict[str, Any]:
    """A stored run's configuration without one section: two runs that differ only there measure that section."""
    return {k: v for k, v in config.items() if k != section}


# -- 2. The agent loop without a budget --------------------------------------------------------------------------------
def agent_budget(f: Facts) -> Check:
    name = "An agent loop without a budget on iterations, LLM calls and wall-clock time (all three)"
    a = f.config.agent
    limits = f"limits: {a.max_rounds} rounds, {a.max_llm_calls} LLM calls, {a.max_seconds:g} s, ${a.max_usd:g}"
    runs = [r.trace["agent"] for r in f.runs if isinstance(r.trace.get("agent"), Mapping)]
    if not runs and not a.enabled:
        return Check(2, name, NA if f.runs else OK, f"the agent loop is off and none of the last {len(f.runs)} "
                     f"logged queries ran it ({limits}, applied whenever a route turns it on).", "Nothing to do.")
    over: list[str] = []
    rounds = [int(x.get("rounds") or 0) for x in runs]
    spent = [x.get("spent") or {} for x in runs]
    secs = [float(s.get("seconds") or 0.0) for s in spent]
    calls = [int(s.get("llm_calls") or 0) for s in spent]
    if rounds and max(rounds) > a.max_rounds:
        over.append(f"a run took {max(rounds)} rounds")
    if calls and max(calls) > a.max_llm_calls:
        over.append(f"a run made {max(calls)} LLM calls")
    if secs and max(secs) > a.max_seconds:
        over.append(f"a run took {max(secs):.1f} s")
    stops: dict[str, int] = {}
    for x in runs:
        stops[str(x.get("stop_reason"))] = stops.get(str(x.get("stop_reason")), 0) + 1
    measured = (f"{len(runs)} logged agent runs: at most {max(rounds)} rounds, {max(calls)} LLM calls, "
                f"{max(secs):.1f} s; stop reasons {dict(sorted(stops.items()))}") if runs else "no logged agent run"
    status = FAIL if over else OK
    ev = f"{limits}; {measured}" + (f"; over the current limits: {', '.join(over)}" if over else "")
    return Check(2, name, status, ev + ".", "Keep agent.max_rounds, agent.max_llm_calls and agent.max_seconds all "
                 "set; a run over them was made under looser settings: lower them and re-run the question.")


# -- 3. Semantic cache without tenant isolation ------------------------------------------------------------------------
def cache_isolation(f: Facts) -> Check:
    name = "A semantic answer cache shared across tenants (workspaces)"
    cited = f.store.answers.cited_chunks(f.workspace)
    if not cited and not f.config.answer_cache.enabled:
        return Check(3, name, NA, "the answer cache is off and holds no answer for this workspace.", "Nothing to do.")
    ids = sorted({c for _, cs in cited for c in cs})
    homes = f.store.corpus.chunk_homes(ids)
    foreign = {c for c in ids if c in homes and f.workspace not in homes[c]}
    leaking = sum(1 for _, cs in cited if foreign & set(cs))
    ev = (f"{len(cited)} cached answers, keyed by workspace, corpus version and configuration hash; "
          f"{len(ids)} distinct citations, {len(foreign)} of them held only by other workspaces")
    if leaking:
        return Check(3, name, FAIL, ev + f": {leaking} cached answers cite another workspace's chunks.",
                     "Clear this workspace's cached answers (Costs → Cache hit rates, or `python -m core cache "
                     "clear`) and report it: the cache key must carry the workspace.")
    return Check(3, name, OK, ev + ": every cached answer cites only this workspace's chunks.", "Nothing to do.")


# -- 4. A semantic cache threshold that is too low --------------------------------------------------------------------
def cache_threshold(f: Facts) -> Check:
    name = "A semantic-cache similarity threshold that is too low (0.85 serves near-paraphrases that differ)"
    ac = f.config.answer_cache
    events = f.store.answers.lookup_events(f.workspace)
    hits = [c for v, c in events if v == "hit" and c is not None]
    low = [c for c in hits if c < CACHE_SAFE_COSINE]
    guarded = sum(1 for v, _ in events if v == "guarded_miss")
    if not ac.enabled and not events:
        return Check(4, name, NA, "the answer cache is off and has no lookups.", "Nothing to do.")
    ev = (f"threshold {ac.threshold:g}; guard {'on' if ac.guard else 'off'}, verifier "
          f"{'on' if ac.verifier else 'off'}; {len(events)} lookups: {len(hits)} hits ({len(low)} served below cosine "
          f"{CACHE_SAFE_COSINE:g}), {guarded} refused by the guard")
    if ac.threshold >= CACHE_SAFE_COSINE:
        return Check(4, name, OK, ev + ".", "Nothing to do; lower it only on a measured false-hit rate.")
    if not ac.guard:
        return Check(4, name, FAIL, ev + f": the cosine alone decides below {CACHE_SAFE_COSINE:g}.",
                     f"Set answer_cache.guard = true, or answer_cache.threshold ≥ {CACHE_SAFE_COSINE:g} and lower it "
                     "only on a measured false-hit rate (bench/answer_cache.py).")
    status = WARN if low and not ac.verifier else OK
    return Check(4, name, status, ev + ": below the article's 0.95 the guard (negation, numbers, names) decides"
                 + (", and the token-level verifier is off" if status == WARN else "") + ".",
                 "Keep the guard and verifier on; read the served pairs in the Search Lab's cache panel; raise "
                 "answer_cache.threshold if one was wrong.")


# -- 5. Embeddings without the model id in the key ---------------------------------------------------------------------
def embedding_model_key(f: Facts) -> Check:
    name = "Embeddings stored or cached without the model id (vectors of two models mixed in one index)"
    chunks = f.store.corpus.count("chunks", f.workspace)
    if not chunks:
        return Check(5, name, NA, "the workspace has no chunks.", "Nothing to do.")
    sets = [v for v in f.store.corpus.vector_models(f.workspace) if v.variant == "raw"]
    mine = next((v.count for v in sets if v.model_id == f.embedder_id), 0)
    others = [f"{v.model_id}: {v.count}" for v in sets if v.model_id != f.embedder_id]
    ev = (f"{chunks} chunks; raw vectors of the running embedder {f.embedder_id}: {mine}"
          + (f"; of other models: {', '.join(others)}" if others else "") + "; every vector row and embedding-cache "
          "row carries its model id and the dense stage reads only the running model's")
    if mine < chunks:
        return Check(5, name, WARN, ev + f": {chunks - mine} chunks have no vector of the running model, so dense "
                     "search does not see them.", "Re-embed: Corpus → re-ingest, or `python -m core ingest` the files "
                     "again (unchanged chunks reuse the embedding cache of this model).")
    return Check(5, name, OK, ev + ".", "Nothing to do" + ("; old models' vectors can be dropped by re-ingesting "
                                                            "into a fresh workspace." if others else "."))


# -- 6. Judging compression by the final answer only -------------------------------------------------------------------
def stage_evaluation(f: Facts) -> Check:
    name = "Evaluation of the final answer only (recall is not measured after each stage, so a rerank or prune loss hides)"
    sets = f.store.golden.sets(f.workspace)
    if not f.evals and not f.store.corpus.count("chunks", f.workspace):
        return Check(6, name, NA, "the workspace has no chunks and no evaluation.", "Nothing to do.")
    if not f.evals:
        sizes = ", ".join(f"{s.name}: {s.items}" for s in sets) or "none"
        return Check(6, name, FAIL, f"no stored evaluation run (golden sets: {sizes}).",
                     "Build a golden set (Evaluate → golden sets) and run an evaluation: it scores recall@k of every "
                     "stage's own list.")
    run = f.evals[0]
    by_stage = run.summary.get("stage_recall") or {}  # recall is None for stages that hand on no ranked list
    measured = [s for s, row in by_stage.items() if isinstance(row, Mapping) and row.get("recall") is not None]
    statuses, ev = [], [f"newest run {run.eval_id[:8]} on '{run.dataset}' ({run.n_queries} questions) measures "
                        f"recall at {len(measured)} stages ({', '.join(measured) or 'none'})"]
    statuses.append(FAIL if len(measured) <= 1 else OK)
    questions = f.load_questions(run.eval_id)
    for stage, e in sorted(stage_evidence([EvalEvidence(run.eval_id, run.dataset, questions)], k=5).items()):
        loses = e.delta < 0 and e.delta + 1.96 * e.se < 0
        statuses.append(WARN if loses else OK)
        ev.append(f"{stage} vs {e.input_stage}: {e.delta:+.1f} ± {e.se:.1f} points recall@5"
                  + (" (a loss beyond noise)" if loses else ""))
    values = list(_metric_values(questions, METRIC).values())
    items = next((s.items - int(s.by_status.get("rejected", 0)) for s in sets if s.name == run.dataset), run.n_queries)
    if len(values) >= 2:
        _, se = mean_se([100.0 * v for v in values])
        # Two configurations scored on the same questions: their difference has at most sqrt(2) x this se when
        # the runs are independent; a paired difference is usually tighter.
        ev.append(f"golden set '{run.dataset}': {items} items; the smallest {METRIC} difference it separates is about "
                  f"{1.96 * math.sqrt(2) * se:.1f} points")
    if items < GOLDEN_MIN_ITEMS:
        statuses.append(WARN)
        ev.append(f"fewer than the {GOLDEN_MIN_ITEMS} questions a decision needs")
    return Check(6, name, _worst(*statuses), "; ".join(ev) + ".",
                 "Read recall after each stage (Evaluate → per-stage recall) before trusting an answer metric; grow "
                 f"the golden set toward {GOLDEN_MIN_ITEMS}-300 real questions; a stage losing recall beyond noise "
                 "should be turned off or retuned (the cascade guard steps it aside).")


# -- 7. Token pruning of exact strings ---------------------------------------------------------------------------------
_EXACT = re.compile(r"(?<![\w.])(?=[\w.\-/$%]*\d)[\w$][\w.\-/%]*[\w%]|(?<![\w.])\d(?![\w.])")


def exact_strings(text: str) -> set[str]:
    """Strings a person means exactly: tokens holding a digit (versions, amounts, codes, ids)."""
    return {m.group(0) for m in _EXACT.finditer(text)}


def pruning_exact(f: Facts) -> Check:
    name = "Pruning that drops exact strings (part numbers, versions, amounts, ids)"
    seen = lost = 0
    examples: list[str] = []
    for r in f.runs:
        ran = _ran(r.trace)
        if Stage.PRUNE not in ran:
            continue
        source = next((ran[s] for s in (Stage.MMR, Stage.RERANK, Stage.FUSED, Stage.DENSE, Stage.BM25) if s in ran
                       and s != Stage.PRUNE and _before(r.trace, s, Stage.PRUNE)), None)
        wanted = exact_strings(r.query)
        if source is None or not wanted:
            continue
        before = " ".join(str(c.get("text") or "") for c in source.get("candidates", ()))
        after = " ".join(str(c.get("text") or "") for c in ran[Stage.PRUNE].get("candidates", ()))
        held = {w for w in wanted if w in before}
        if not held:
            continue
        seen += 1
        gone = sorted(w for w in held if w not in after)
        if gone:
            lost += 1
            if len(examples) < 3:
                examples.append(f"'{r.query[:60]}' lost {', '.join(gone[:3])}")
    how = (f"prune {'on' if f.config.prune.enabled else 'off'} (sentence-level: a string is kept whole or dropped "
           f"whole, never rewritten; token budget {f.config.prune.token_budget})")
    if not seen:
        status = NA if not f.config.prune.enabled else OK
        return Check(7, name, status, f"{how}; none of the last {len(f.runs)} logged queries asked for an exact string "
                     "(a token with a digit) that the pruner's input held, so nothing to measure yet.",
                     "Nothing to do; ask such questions in the Search Lab to measure it.")
    ev = (f"{how}; {seen} logged queries asked for an exact string their retrieved chunks held; the pruned text lost "
          f"it in {lost}" + (f" ({'; '.join(examples)})" if examples else ""))
    return Check(7, name, WARN if lost else OK, ev + ".",
                 "Raise prune.token_budget or turn prune off for such questions (a route for identifiers), and "
                 "check the lost strings in the Search Lab's prune column." if lost else "Nothing to do.")


def _before(trace: Mapping[str, Any], a: str, b: str) -> bool:
    order = [str(s.get("stage")) for s in trace.get("stages", ())]
    return a in order and b in order and order.index(a) < order.index(b)


# -- 8. No refusal path --------------------------------------------------------------------------------------------
def refusal_path(f: Facts) -> Check:
    name = "No refusal path (the system answers from irrelevant context instead of saying the corpus does not say)"
    answered = [r for r in f.runs if isinstance(r.trace.get("answer"), Mapping)]
    refused = sum(1 for r in answered if r.trace["answer"].get("refused"))
    live = (f"{refused} of {len(answered)} logged answers refused ({refused / len(answered):.0%})" if answered
            else "no logged answer yet")
    if not f.config.answer.enabled:
        return Check(8, name, NA, f"the answer stage is off; {live}.", "Nothing to do.")
    scored = next((e for e in f.evals if (e.summary.get("metrics") or {}).get("refusal_accuracy") is not None), None)
    ev = live
    status = OK
    if scored is None:
        status = WARN
        ev += "; refusal accuracy never measured (no stored evaluation with answers)"
    else:
        qs = f.load_questions(scored.eval_id)
        unanswerable = [q for q in qs if not q.answerable]
        right = sum(1 for q in unanswerable if q.answer is not None and q.answer.refused)
        acc = scored.summary["metrics"]["refusal_accuracy"]
        ev += (f"; run {scored.eval_id[:8]} on '{scored.dataset}': refusal accuracy {acc:.0%} over {len(qs)} "
               f"questions, {len(unanswerable)} of them unanswerable ({right} refused)")
        if not unanswerable:
            status = WARN
            ev += ": with no unanswerable question it only shows the system does not refuse answerable ones"
    if len(answered) >= 20 and refused == 0:
        status = WARN
        ev += f"; not one refusal in {len(answered)} live answers"
    return Check(8, name, status, ev + ".",
                 "Nothing to do; keep watching the refusal share on the Costs page." if status == OK else
                 "Add unanswerable questions to the golden set and evaluate with answers on, so refusal accuracy is "
                 "measured; calibrate the refusal threshold (`python -m core calibrate`); watch the refusal share on "
                 "the Costs page.")


# -- 9. A prompt cache that never reads --------------------------------------------------------------------------------
def prompt_cache_reads(f: Facts) -> Check:
    name = "A prompt cache that never reads (cache_read_input_tokens stays 0: the prefix changes or is too short)"
    ledger = f.store.ledger.usage_ledger(f.workspace)
    if not ledger:
        return Check(9, name, NA, "no LLM call in the ledger.", "Nothing to do.")
    no_cache = [e for e in ledger if "no prompt cache" in e.note]
    by_run: dict[tuple[str, str], list[Any]] = {}
    for e in ledger:
        by_run.setdefault((e.run_id, e.purpose), []).append(e)
    rewrites = [k for k, es in by_run.items() if len(es) >= 2 and sum(e.cache_write_tokens > 0 for e in es) >= 2
                and not any(e.cache_read_tokens for e in es)]
    writes = sum(e.cache_write_tokens for e in ledger)
    reads = sum(e.cache_read_tokens for e in ledger)
    ev = (f"{len(ledger)} LLM calls: {writes:,} tokens written to the prompt cache, {reads:,} read; "
          f"{len(no_cache)} calls formed no cache (prefix under the model's cacheable minimum)"
          + (f" ({', '.join(sorted({e.purpose for e in no_cache}))})" if no_cache else "")
          + f"; {len(rewrites)} runs wrote the cache on every call and never read it")
    status = FAIL if rewrites else WARN if no_cache else OK
    return Check(9, name, status, ev + ".",
                 "Keep the cached prefix byte-identical between calls (no timestamps or ids in it) and above the "
                 "model's minimum (core/models/data/prices.toml); the Costs page's ledger notes name the calls.")


# -- 10. Ignoring incremental updates -------------------------------------------------------------------------------
def incremental_updates(f: Facts) -> Check:
    name = "Ignoring incremental updates (a graph, tree or contexts rebuilt in full, or left stale, after a small edit)"
    version = f.store.corpus.corpus_version(f.workspace)
    state = f.store.graph.state(f.workspace)
    raptor = f.store.raptor.state(f.workspace)
    stale = {v: len(f.store.ledger.stale_contexts(v, f.workspace)) for v in ("heuristic", "llm")}
    statuses, ev = [], [f"corpus version {version}"]
    if state is None:
        ev.append("no graph built")
    else:
        behind = state.corpus_version < version
        statuses.append((FAIL if f.config.graph.enabled else WARN) if behind else OK)
        ev.append(f"graph built at version {state.corpus_version} ({state.builder})"
                  + (" — behind the corpus" if behind else ", current")
                  + f"; graph.follow_ingest {'on' if f.config.graph.follow_ingest else 'off'}")
        if not f.config.graph.follow_ingest:
            statuses.append(WARN)
    if raptor is not None:
        behind = raptor[0] < version
        statuses.append((FAIL if f.config.raptor.enabled else WARN) if behind else OK)
        ev.append(f"RAPTOR tree at version {raptor[0]}" + (" — behind the corpus" if behind else ", current"))
    for variant, n in stale.items():
        if n:
            statuses.append(WARN)
            ev.append(f"{n} {variant} contexts kept across an edit may be stale")
    if len(ev) == 2 and state is None and raptor is None and not any(stale.values()):
        return Check(10, name, NA, "; ".join(ev) + "; no derived index (graph, tree, contexts) to keep in step.",
                     "Nothing to do.")
    return Check(10, name, _worst(*statuses) if statuses else OK, "; ".join(ev) + ".",
                 "Keep graph.follow_ingest on (each ingest updates the graph and its communities incrementally); "
                 "catch up with `python -m core graph update` / `python -m core raptor build`; rebuild the stale "
                 "contexts (`python -m core context`).")


CHECKS: tuple[Callable[[Facts], Check], ...] = (graph_first, agent_budget, cache_isolation, cache_threshold,
                                                 embedding_model_key, stage_evaluation, pruning_exact, refusal_path,
                                                 prompt_cache_reads, incremental_updates)


def gather(store: Store, workspace: str, config: PipelineConfig, embedder_id: str) -> Facts:
    cache: dict[str, Sequence[QuestionResult]] = {}

    def questions(eval_id: str) -> Sequence[QuestionResult]:
        if eval_id not in cache:  # the stored rows as the typed records core.eval wrote them from
            full = store.runs.eval_run(eval_id, workspace)
            cache[eval_id] = full.results if full is not None else ()
        return cache[eval_id]

    return Facts(store, workspace, config, embedder_id, store.runs.recent_runs(workspace, limit=RUNS_READ),
                 store.runs.eval_runs(workspace, limit=EVALS_READ), questions)


def doctor(store: Store, workspace: str, config: PipelineConfig, *, embedder_id: str) -> list[Check]:
    """The ten checks on this workspace, in the article's order."""
    facts = gather(store, workspace, config, embedder_id)
    return [check(facts) for check in CHECKS]


def summary(checks: Iterable[Check]) -> dict[str, int]:
    out = {s: 0 for s in STATUSES}
    for c in checks:
        out[c.status] += 1
    return out
