"""What a configuration needs built before its queries are fast (context vectors, the entity graph), with estimates.

A query never builds: it searches what exists and says so. The Search Lab asks this module first, shows the
estimate and runs the build with a progress bar only when the user confirms."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from core.cascade.rerank import LateInteractionReranker
from core.config import EmbeddingConfig, PipelineConfig
from core.graph.build import build_graph
from core.ingest.context import BuildRequest, index_variant, run_build
from core.models.embed import EmbedStats
from core.models.multilingual import RATE_KEY, UNIT_CHARS
from core.models.tokens import encode_token_matrices, window_encoder_for
from core.models.protocols import declared_languages
from core.retrieve.dense import corpus_languages, multilingual_plan
from core.retrieve.index import IndexCache, backfill_vectors, contextual_text
from core.types import DEFAULT_WORKSPACE

# Every estimate reads a rate measured on this machine: this process's probe or build (_RATES below), else the one
# the database kept from an earlier build (record_rate). A workspace that has measured nothing is told the
# embedding.estimate_* settings (expert, docs/config.md). Estimates are shown as such ("about"), never used as limits.
# Encoder rates are kept per UNIT_CHARS characters of text (about one chunk), not per chunk: the chunks a probe or an
# earlier build timed are seldom as long as the ones left to encode.
# A heuristic context (title, heading path, lead sentence) before the chunk makes the text to embed longer than the
# chunk the probe times; late chunking encodes whole documents in overlapping windows (about twice the tokens).
CONTEXT_TEXT_FACTOR = 1.3
LATE_FACTOR = 2.0


@dataclass(frozen=True)
class Need:
    """One thing to build: kind 'context' (a variant's contexts and vectors) or 'graph'."""

    kind: str  # 'context', 'graph', 'tokens' or 'multilingual'
    variant: str
    todo: int
    total: int
    est_seconds: float
    label: str


# Seconds per chunk this process measured, by (what, model id): a build's own rate, else a probe's (see
# embed_seconds_per_chunk). A shared-CPU machine is several times slower under load than an idle one, so an estimate
# read off a measurement here is the one shown once there is one.
_RATES: dict[tuple[str, str], float] = {}
PROBE_CHUNKS = 8


PROBE_WARMUP = 2  # texts encoded untimed first: a session's first call pays for its warm-up, not per chunk


def _kept(store: Any, what: str, model_id: str) -> float | None:
    """The rate the database kept from an earlier build (record_rate), if any."""
    return store.caches.rate(what, model_id) if hasattr(store, "caches") else None


def embed_seconds_per_chunk(store: Any, embedder: Any, e: EmbeddingConfig, workspace: str = DEFAULT_WORKSPACE
                            ) -> float:
    """The embedder's seconds per chunk now: the last build's rate, else a probe (probe_rates), else the rate the
    database kept from an earlier build, else e.estimate_s_per_chunk."""
    key = ("embed", embedder.model_id)
    if key not in _RATES:
        probe_rates(store, embedder, workspace)
    return _RATES.get(key) or _kept(store, "embed", embedder.model_id) or e.estimate_s_per_chunk


def token_seconds_per_chunk(store: Any, model_id: str, e: EmbeddingConfig) -> float:
    """Late-interaction token vectors' seconds per chunk: the last token build's rate, else the probe's (measured
    beside the embedding's, so both see the same load), else the rate the database kept, else
    e.estimate_token_s_per_chunk."""
    return (_RATES.get(("tokens", model_id)) or _RATES.get(("tokens-probe", model_id))
            or _kept(store, "tokens", model_id) or e.estimate_token_s_per_chunk)


def forget_measured_rates() -> None:
    """Drop this process's in-memory rates and core share, as a new process starts: only what the database kept is
    read."""
    _RATES.clear()
    _SHARE.clear()


def probe_rates(store: Any, embedder: Any, workspace: str = DEFAULT_WORKSPACE) -> None:
    """Time one batch of PROBE_CHUNKS of the workspace's chunks through the embedder and, when it gives token
    vectors, through the token encoder (each after an untimed warm-up of PROBE_WARMUP texts), once per model in this
    process. A constant from another day's load was off by up to 1.8x for the token build (bench/build_estimate.py);
    a probe taken now carries the load the build will run under."""
    texts: list[str] = []
    for doc in store.corpus.documents(workspace)[:PROBE_CHUNKS]:  # a few documents, not the whole corpus
        texts += [c.text for c in store.corpus.chunks(workspace, doc_id=doc.doc_id)]
        if len(texts) >= PROBE_CHUNKS + PROBE_WARMUP:
            break
    if len(texts) <= PROBE_WARMUP:
        return
    warm, timed = texts[:PROBE_WARMUP], texts[PROBE_WARMUP: PROBE_WARMUP + PROBE_CHUNKS]
    embedder.encode(warm)
    t0 = time.perf_counter()
    embedder.encode(timed)
    secs = time.perf_counter() - t0
    _RATES[("embed", embedder.model_id)] = secs / len(timed)
    _RATES[("embed-400c", embedder.model_id)] = secs / text_units(sum(len(t) for t in timed))
    try:
        encoder = window_encoder_for(embedder)
    except (ValueError, AttributeError, TypeError):  # no token vectors from this embedder: nothing to time
        return
    encode_token_matrices(encoder, warm)
    t0 = time.perf_counter()
    encode_token_matrices(encoder, timed)
    _RATES[("tokens-probe", embedder.model_id)] = (time.perf_counter() - t0) / len(timed)


def needs(store: Any, cfg: PipelineConfig, workspace: str = DEFAULT_WORKSPACE, model_id: str = "",
          embedder: Any = None, indexes: IndexCache | None = None) -> list[Need]:
    """Builds the config would use but that do not exist (or cover only part of the corpus). With `embedder`, the
    context estimate is read off its measured speed (embed_seconds_per_chunk) instead of the constants; with
    `indexes` (deps.indexes), the corpus's languages come from its per-version memo instead of every chunk."""
    out: list[Need] = []
    total = store.corpus.count("chunks", workspace)
    if not total:
        return out
    variant = cfg.context.variant
    _, dense_variant = index_variant(variant)
    if variant != "none" and cfg.dense.enabled and variant != "llm":  # llm contexts cost money: the Costs page builds
        have = sum(n for m, v, n in store.corpus.vector_models(workspace) if v == dense_variant and m == model_id)
        if have < total:
            todo = total - have
            what = "late-chunking vectors" if variant == "late" else f"{variant} contexts and their vectors"
            # The Search Lab's build also encodes the token vectors late interaction reads on a contextual variant.
            tokens = variant != "late" and cfg.rerank.enabled and cfg.rerank.method == "late-interaction"
            rate = (_kept(store, "embed", model_id) or cfg.embedding.estimate_s_per_chunk) if embedder is None else \
                embed_seconds_per_chunk(store, embedder, cfg.embedding, workspace)
            # A contextual text is context + chunk (longer than the probe's chunks); token vectors go at the rate
            # the last token build here measured, else the fallback (token_need's own estimate uses the same).
            per = rate * (CONTEXT_TEXT_FACTOR if variant != "late" else LATE_FACTOR) + (
                token_seconds_per_chunk(store, model_id, cfg.embedding) * _token_text_factor(cfg) if tokens else 0.0)
            out.append(Need("context", variant, todo, total, todo * per,
                            f"{what}: {todo:,} of {total:,} chunks missing"
                            + (" (and the token vectors rerank reads)" if tokens else "")))
    if _corpus_asks_multilingual(store, cfg, workspace, model_id, indexes):  # first: the estimate may time a core
        ml = multilingual_need(store, cfg, workspace, total)
        if ml is not None:
            out.append(ml)
    if cfg.graph.enabled and store.graph.state(workspace) is None:
        out.append(Need("graph", "", total, total, graph_seconds(store, cfg.graph.builder, workspace, total,
                                                                 cfg.embedding.estimate_graph_s_per_chunk),
                        f"entity graph: not built yet ({total:,} chunks to read)"))
    return out


def _corpus_asks_multilingual(store: Any, cfg: PipelineConfig, workspace: str, model_id: str,
                              indexes: IndexCache | None = None) -> bool:
    """Whether the multilingual list runs for questions in the corpus's own main language ('on'; 'auto' on a mixed
    corpus or one the main model cannot read). Questions in another language ask for it on any corpus: their trace
    names the build instead of pushing it on every corpus here."""
    if cfg.embedding.multilingual == "on":
        return True
    counts = indexes.languages(store, workspace) if indexes is not None else store.corpus.language_counts(workspace)
    langs = corpus_languages(counts)
    return bool(langs) and multilingual_plan(cfg.embedding.multilingual, langs[0], counts,
                                             declared_languages(model_id)).run


def text_units(chars: int) -> float:
    """How many UNIT_CHARS-character units a text of `chars` characters is (the unit the encoder rates count)."""
    return max(int(chars), 1) / UNIT_CHARS


def record_rate(store: Any, what: str, model_id: str, seconds_per_item: float) -> None:
    """A measured rate for this process and, on a writable database, for the next one (estimates read it first)."""
    _RATES[(what, model_id)] = seconds_per_item
    if not getattr(store, "read_only", False) and hasattr(store, "caches"):
        store.caches.put_rate(what, model_id, seconds_per_item)


# The multilingual rate is kept as CPU seconds (this process's, time.process_time) per UNIT_CHARS characters: the
# work, which a loaded machine does not change much, where wall seconds moved 3x between two builds minutes apart
# (bench/results/ml_estimate_*.json). An estimate divides it by the share of a core this process gets now.
GRAPH_RATE = "graph-400c-free"  # seconds on a free core per UNIT_CHARS characters read, by builder
ML_RATE = RATE_KEY  # (older per-chunk 'multilingual' rows and wall-clock ones are not read)
SHARE_FRESH_S = 30.0  # a share measured this recently (by a probe, a build or measure_cpu_share) is still "now"
_SHARE: list[tuple[float, float]] = []  # (time.monotonic() when measured, share of one core)


def note_cpu_share(cpu_s: float, wall_s: float) -> float:
    """Record the share of one core this process got over a timed stretch (CPU over wall seconds), in [0.05, 1]."""
    share = min(1.0, max(0.05, cpu_s / wall_s)) if wall_s > 0 else 1.0
    _SHARE.append((time.monotonic(), share))
    del _SHARE[:-1]
    return share


def measure_cpu_share(window_s: float = 0.25) -> float:
    """The share of one core this process gets now: CPU over wall seconds of a short single-threaded busy loop
    (the multilingual engine runs on one thread too)."""
    w0, c0, n = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - w0 < window_s and n < 10**6:
        n += sum(range(200)) > 0
    return note_cpu_share(time.process_time() - c0, time.perf_counter() - w0)


def cpu_share_now() -> float:
    """The last share measured within SHARE_FRESH_S seconds, else one measured now (a quarter of a second)."""
    if _SHARE and time.monotonic() - _SHARE[-1][0] < SHARE_FRESH_S:
        return _SHARE[-1][1]
    return measure_cpu_share()


def ml_seconds_per_unit(store: Any, model_id: str, e: EmbeddingConfig) -> tuple[float, str]:
    """(wall seconds per UNIT_CHARS characters of the multilingual passage encoder now, where the figure comes
    from): the CPU seconds per unit this process's probe or build measured, else the ones the database kept from an
    earlier build, over the share of a core this process gets now (cpu_share_now); else the main embedder's
    measured rate times e.estimate_multilingual_over_main; else e.estimate_multilingual_s_per_unit."""
    cpu = _RATES.get((ML_RATE, model_id))
    source = "measured here now"
    if cpu is None and hasattr(store, "caches"):
        cpu, source = store.caches.rate(ML_RATE, model_id), "the speed this workspace's last multilingual build measured"
    if cpu:
        share = cpu_share_now()
        return cpu / share, f"{source}, at the {share:.0%} of a core this process gets now"
    main = next((v for (what, _m), v in _RATES.items() if what == "embed-400c"), None)
    if main:
        return main * e.estimate_multilingual_over_main, "the main embedder's measured speed x the models' measured ratio"
    return e.estimate_multilingual_s_per_unit, "embedding.estimate_multilingual_s_per_unit (nothing measured here yet)"


def record_ml_build(store: Any, model_id: str, cpu_s: float, wall_s: float, computed: int, texts: int,
                    chars: int) -> None:
    """Keep a multilingual build's own rate (CPU seconds per unit) and the share of a core it ran at: `chars`
    characters were left to encode over `texts` chunks, of which `computed` went through the model (the rest came
    from the cache); too few to time say nothing."""
    if computed >= PROBE_CHUNKS and texts:
        note_cpu_share(cpu_s, wall_s)
        record_rate(store, ML_RATE, model_id, cpu_s / text_units(round(chars * computed / texts)))


def graph_seconds(store: Any, builder: str, workspace: str, total: int, fallback_s_per_chunk: float) -> float:
    """A graph build's estimate: the seconds per unit on a free core the last statistical build here kept, times
    the corpus's characters, over the share of a core this process gets now; else `fallback_s_per_chunk`
    (embedding.estimate_graph_s_per_chunk) per chunk (an LLM builder waits on the network, which no local rate
    foretells)."""
    cpu = _RATES.get((GRAPH_RATE, builder))
    if cpu is None and builder == "statistical" and hasattr(store, "caches"):
        cpu = store.caches.rate(GRAPH_RATE, builder)
    if not cpu:
        return total * fallback_s_per_chunk
    return cpu * text_units(store.corpus.chunk_chars(workspace)) / cpu_share_now()


def probe_multilingual(store: Any, embedder: Any, workspace: str = DEFAULT_WORKSPACE) -> float | None:
    """Time PROBE_CHUNKS of the chunks still lacking multilingual vectors through `embedder` (after an untimed
    warm-up of PROBE_WARMUP), taken evenly across them rather than the first documents' chunks: the seconds per
    UNIT_CHARS characters a build about to start will run at, under the load it will run under."""
    missing = store.corpus.chunks_missing_vectors(embedder.model_id, "raw", workspace)
    n = PROBE_CHUNKS + PROBE_WARMUP
    if len(missing) <= PROBE_WARMUP:
        return None
    step = max(1, len(missing) // n)
    texts = [c.text for c in missing[::step][:n]]
    embedder.encode(texts[:PROBE_WARMUP])
    timed = texts[PROBE_WARMUP:]
    t0, c0 = time.perf_counter(), time.process_time()
    embedder.encode(timed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    units = text_units(sum(len(t) for t in timed))
    note_cpu_share(cpu, wall)
    record_rate(store, ML_RATE, embedder.model_id, cpu / units)
    return wall / units


def probe_for_ingest(deps: Any, cfg: PipelineConfig, workspace: str = DEFAULT_WORKSPACE) -> str | None:
    """Before an ingest decides on the multilingual build: when chunks lack the vectors, load the model and probe
    its speed here and now (probe_multilingual), so the estimate and the budget read this machine's load. Returns
    why the model could not be loaded, else None."""
    e = cfg.embedding
    if e.multilingual == "off" or multilingual_need(deps.store, cfg, workspace,
                                                    deps.store.corpus.count("chunks", workspace)) is None:
        return None
    emb, notice = deps.multilingual_for(e.multilingual_model)
    if emb is None:
        return notice
    probe_multilingual(deps.store, emb, workspace)
    return None


def ingest_multilingual_need(store: Any, cfg: PipelineConfig, workspace: str, model_id: str, *,
                             force: bool = False) -> tuple[Need | None, str]:
    """The multilingual build an ingest runs by default, and why (or why not). A corpus whose languages ask for
    the list (mixed, or one the main embedder does not read) always builds it; a one-language corpus the main
    embedder reads builds it when the estimate is within embedding.multilingual_ingest_budget_s, so questions in
    another language find it; above the budget the reason names the command. `force`: --multilingual."""
    total = store.corpus.count("chunks", workspace)
    need = multilingual_need(store, cfg, workspace, total)
    if need is None:
        return None, ""
    if force:
        return need, "asked for (--multilingual)"
    if _corpus_asks_multilingual(store, cfg, workspace, model_id):
        return need, "the corpus's languages ask for it (mixed, or one the main embedder does not read)"
    budget = cfg.embedding.multilingual_ingest_budget_s
    if need.est_seconds <= budget:
        return need, (f"within embedding.multilingual_ingest_budget_s = {budget:,.0f} s, so questions in another "
                      "language find it")
    return None, (f"{need.label}, about {need.est_seconds:,.0f} s, over embedding.multilingual_ingest_budget_s = "
                  f"{budget:,.0f} s: questions in another language skip the multilingual list until "
                  f"`python -m core ingest --multilingual --workspace {workspace}` builds it")


def multilingual_need(store: Any, cfg: PipelineConfig, workspace: str, total: int) -> Need | None:
    """The multilingual list's vectors, when embedding.multilingual may run here ('on'; 'auto' on a corpus whose
    own languages ask for it — mixed, or one the main model may not read) and chunks lack them. A question in another
    language than the corpus's asks for them too: its trace skips the list and names this build."""
    e = cfg.embedding
    if e.multilingual == "off":
        return None
    todo, chars = store.corpus.missing_vector_chars(e.multilingual_model, "raw", workspace)
    if not todo:
        return None
    rate, _source = ml_seconds_per_unit(store, e.multilingual_model, e)
    return Need("multilingual", "raw", todo, total, text_units(chars) * rate,
                f"multilingual vectors ({e.multilingual_model}) for cross-language questions: {todo:,} of "
                f"{total:,} chunks missing")


def trace_multilingual_need(store: Any, cfg: PipelineConfig, workspace: str, trace: Any) -> Need | None:
    """The multilingual build a query's trace asked for: its dense_ml stage was skipped because the vectors are
    missing (the Search Lab offers it under the trace)."""
    st = trace.stage("dense_ml")
    if st is None or not st.skipped or "not built" not in st.skipped:
        return None
    return multilingual_need(store, cfg, workspace, store.corpus.count("chunks", workspace))


def _token_text_factor(cfg: PipelineConfig) -> float:
    """How much longer than a chunk the texts late interaction reads are: context + chunk on a contextual variant
    (rates are kept per chunk-length text, what the probe times)."""
    return CONTEXT_TEXT_FACTOR if cfg.rerank.use_context and index_variant(cfg.context.variant)[0] != "raw" else 1.0


def _late_texts(store: Any, cfg: PipelineConfig, workspace: str) -> list[str]:
    """Every chunk as late interaction reads it: context + chunk when the reranker reads contexts (the same text the
    rerank stage builds, so the vectors warmed here are the ones it looks up)."""
    chunks = store.corpus.chunks(workspace)
    bm25_variant, _ = index_variant(cfg.context.variant)
    if cfg.rerank.use_context and bm25_variant != "raw":
        ctx = store.ledger.contexts(bm25_variant, workspace)
        return [contextual_text(ctx.get(c.chunk_id), c.text) for c in chunks]
    return [c.text for c in chunks]


def _late_reranker(deps: Any, cfg: PipelineConfig) -> Any:
    """The late-interaction reranker when this config reads token vectors of chunks (rerank, the pooled sentence
    scorer of pruning), else None."""
    reads = (cfg.rerank.enabled and cfg.rerank.method == "late-interaction") or (
        cfg.prune.enabled and cfg.prune.scorer == "hybrid")
    if not reads:
        return None
    late = deps.reranker_for("late-interaction")[0]
    return late if isinstance(late, LateInteractionReranker) else None


def token_need(deps: Any, cfg: PipelineConfig, workspace: str = DEFAULT_WORKSPACE) -> Need | None:
    """Token vectors not encoded yet. A query encodes the chunks it meets for the first time, so without them the
    first queries and setting switches (another retriever brings other chunks) spend seconds in the model."""
    late = _late_reranker(deps, cfg)
    if late is None:
        return None
    texts = _late_texts(deps.store, cfg, workspace)
    todo = len(late.unseen(texts, workspace))
    if not todo:
        return None
    return Need("tokens", cfg.context.variant, todo, len(texts),
                todo * token_seconds_per_chunk(deps.store, deps.embedder.model_id, cfg.embedding)
                * _token_text_factor(cfg),
                f"late-interaction token vectors: {todo:,} of {len(texts):,} chunks not encoded yet")


def build_multilingual(store: Any, embedder: Any, workspace: str = DEFAULT_WORKSPACE, *, batch: int = 64,
                       progress: Callable[[int, int], None] | None = None) -> Any:
    """Store the multilingual passage vectors chunks lack, `batch` chunks per encode and write (cache first), so a
    stopped build keeps what it wrote; progress(done, total) after each batch. Returns the summed EmbedStats, and
    keeps the build's own rate for the next estimate (record_ml_build)."""
    total = store.corpus.count("chunks", workspace)
    todo, chars = store.corpus.missing_vector_chars(embedder.model_id, "raw", workspace)
    done = total - todo
    texts = computed = hits = 0
    t0, c0 = time.perf_counter(), time.process_time()
    if progress:
        progress(done, total)
    while True:
        stats = backfill_vectors(_First(store.corpus, batch), store.ledger, store.caches, store.corpus, embedder,
                                 workspace, "raw", purpose="multilingual build")
        if not stats.texts:
            break
        texts, computed, hits = texts + stats.texts, computed + stats.computed, hits + stats.cache_hits
        done += stats.texts
        if progress:
            progress(min(done, total), total)
    if texts == todo:  # a build that ran to the end: its characters are the ones counted before it
        record_ml_build(store, embedder.model_id, time.process_time() - c0, time.perf_counter() - t0, computed,
                        texts, chars)
    return EmbedStats(texts, hits, computed)


class _First:
    """A corpus reader whose missing-vector list is cut to its first `n` chunks: one batch of a build."""

    def __init__(self, corpus: Any, n: int) -> None:
        self._corpus, self._n = corpus, n

    def chunks_missing_vectors(self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE) -> Any:
        return self._corpus.chunks_missing_vectors(model_id, variant, workspace)[: self._n]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._corpus, name)


def build(need: Need, cfg: PipelineConfig, deps: Any, workspace: str = DEFAULT_WORKSPACE,
          progress: Callable[[int, int], None] | None = None) -> str:
    """Run one build; progress(done, total). Returns a one-line summary for the user."""
    if need.kind == "graph":
        share = measure_cpu_share()
        rep = build_graph(deps.store, cfg.graph, embedder=deps.embedder, llm=deps.llm, workspace=workspace,
                          progress=(lambda _step, d, t: progress(d, t)) if progress else None)
        if rep.builder.startswith("statistical") and rep.chunks_added >= PROBE_CHUNKS and rep.seconds > 0:
            # Kept as seconds on a free core: the wall time times the share of a core measured as it started (its
            # CPU time would count the resolver's embedder threads twice).
            chars = deps.store.corpus.chunk_chars(workspace) * rep.chunks_added / max(need.total, rep.chunks_added)
            record_rate(deps.store, GRAPH_RATE, "statistical", rep.seconds * share / text_units(round(chars)))
        return f"graph built in {rep.seconds:.1f} s ({rep.chunks_added} chunks read)"
    if need.kind == "tokens":
        late = _late_reranker(deps, cfg)
        if late is None:
            return "token vectors: nothing to encode for these settings"
        t0 = time.perf_counter()
        texts = late.unseen(_late_texts(deps.store, cfg, workspace), workspace)
        done = late.warm(texts, workspace, batch=16, progress=progress)
        secs = time.perf_counter() - t0
        if done:
            record_rate(deps.store, "tokens", deps.embedder.model_id, secs / done / _token_text_factor(cfg))
        return f"token vectors: {done} chunks encoded in {secs:.1f} s"
    if need.kind == "multilingual":
        emb, notice = deps.multilingual_for(cfg.embedding.multilingual_model)
        if emb is None:
            return f"multilingual vectors: not built ({notice})"
        t0 = time.perf_counter()
        stats = build_multilingual(deps.store, emb, workspace, progress=progress)
        deps.indexes.invalidate(workspace)
        secs = time.perf_counter() - t0
        return (f"multilingual vectors: {stats.computed} chunks embedded ({stats.cache_hits} from the cache) in "
                f"{secs:.1f} s")
    c = cfg.context
    # Contexts first, then their vectors a batch at a time (progress after each), so the bar moves from the first
    # second: one encode call for every chunk left it still for the whole embedding. Late chunking writes its own
    # vectors document by document.
    batched = need.variant != "late"
    req = BuildRequest(need.variant, model=c.model, budget_usd=c.budget_usd, use_batches=c.use_batches,
                       max_output_tokens=c.max_output_tokens, ttl=cfg.llm.cache_ttl, embed=not batched)
    t0 = time.perf_counter()
    rep = run_build(req, deps.store, deps.embedder, deps.llm, workspace=workspace,
                    progress=(lambda d, t, _usd: progress(d, t)) if progress else None)
    vectors = rep.vectors
    if batched:  # the embedding alone is timed: writing the contexts (minutes with Claude) is no embedding speed
        t0 = time.perf_counter()
        vectors = embed_in_batches(deps.store, deps.embedder, need.variant, workspace, progress=progress)
    if vectors:
        record_rate(deps.store, "embed", deps.embedder.model_id, (time.perf_counter() - t0) / vectors / (
            CONTEXT_TEXT_FACTOR if batched else LATE_FACTOR))
    return f"{need.variant}: {rep.written} contexts written, {vectors} vectors embedded"


FIRST_BATCH = 2


def embed_in_batches(store: Any, embedder: Any, variant: str, workspace: str = DEFAULT_WORKSPACE, *,
                     batch: int = 32, progress: Callable[[int, int], None] | None = None) -> int:
    """A contextual variant's missing vectors (context + chunk), up to `batch` chunks per encode and write,
    progress(done, todo) after each; returns how many were stored. Batches start at FIRST_BATCH chunks and double:
    the first step of the bar comes after a couple of chunks, not after a whole batch (32 chunks took 13 s at load
    17, bench/build_estimate.py, when the contexts existed already and the embedding was the build's first step)."""
    todo = len(store.corpus.chunks_missing_vectors(embedder.model_id, variant, workspace))
    done = 0
    size = min(FIRST_BATCH, batch)
    if progress:
        progress(0, todo)
    while done < todo:
        stats = backfill_vectors(_First(store.corpus, size), store.ledger, store.caches, store.corpus, embedder,
                                 workspace, variant, purpose=f"context:{variant}")
        size = min(size * 2, batch)
        if not stats.texts:
            break
        done += stats.texts
        if progress:
            progress(min(done, todo), todo)
    return done


def sync_ann(deps: Any, cfg: PipelineConfig, workspace: str = DEFAULT_WORKSPACE) -> str | None:
    """After an ingest: bring the dense index's ANN graph (core/retrieve/ann.py) in step with the stored vectors now,
    above the size threshold, so the first query does not pay for it. Returns the line to show, or None below the
    threshold (the exact scan needs nothing) or where the graph is not kept on disk."""
    indexes = deps.indexes
    total = deps.store.corpus.count("chunks", workspace)
    if indexes.ann_dir is None or total < indexes.ann_min_chunks or getattr(deps.store, "read_only", False):
        return None
    t = time.perf_counter()
    index = indexes.dense(deps.store, deps.embedder, workspace, variant=index_variant(cfg.context.variant)[1])
    sync = indexes.last_ann_sync
    if index.ann is None or sync is None:
        return None
    did = (f"built over {len(index.ann):,} vectors" if sync.built
           else f"{sync.added:,} added, {sync.removed:,} removed" if sync.added or sync.removed else "already in step")
    return f"ANN graph (HNSW; {len(index):,} chunks, threshold {indexes.ann_min_chunks:,}): {did} in " \
           f"{time.perf_counter() - t:.1f} s"
