"""ingest_files: parse -> chunk -> embed (cache first) -> store, committed a small batch of documents at a time."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from core.config import PipelineConfig
from core.graph.build import follow_corpus
from core.graph.model import BuildReport
from core.ingest.context import build_heuristic
from core.ingest.files import LocalFile, read_file, scan_paths
from core.ingest.chunk import check_chunk_cap, fit_to_window
from core.ingest.identity import ChunkDiff, adopt_ids, diff_chunks
from core.ingest.parse import ParseError
from core.ingest.sandbox import ChunkSpec, ParseSandbox, default_sandbox
from core.ingest.tables import is_table, put_table
from core.models.embed import (
    Embedder,
    EmbedStats,
    TokenVectorSink,
    embed_groups_with_cache,
    embed_with_cache,
)
from core.models.protocols import CountsTokens
from core.store import DocumentRow, Store
from core.text import detect_language
from core.types import DEFAULT_WORKSPACE, Chunk, Document, ParsedDocument, Replacement

# ingest_files embeds the chunks of consecutive documents together, up to this many at a time, and commits them
# before the next group: small documents alone would leave the model's batches (64) nearly empty, which
# bench/ingest.py measured as a large slowdown, and a bounded group is what a kill -9 can cost (its embeddings are
# computed again on resume; everything committed before it is kept, and its vectors are cache hits).
GROUP_CHUNKS = 256


def token_sink(store: Store, config: PipelineConfig) -> TokenVectorSink | None:
    """Where the chunks' token vectors go while they are embedded, or None. Late-interaction rerank reads every
    candidate's token vectors; an ONNX embedder gives them from the forward pass that makes the chunk vector, so
    ingest stores them and no query runs the model over a chunk a second time (issue #14)."""
    r = config.rerank
    return store.caches if r.enabled and r.method == "late-interaction" else None


@dataclass(frozen=True)
class FileResult:
    name: str
    status: str  # "ingested" | "replaced" | "unchanged" | "error"
    message: str = ""
    doc_id: str | None = None
    chunks: int = 0
    embedded: int = 0
    cache_hits: int = 0
    encoding: str = ""  # how a text file was decoded ("utf-8", "cp1251", "utf-16-le (BOM)"); "" for pdf/docx
    # The new version's chunks against the stored one (core/ingest/identity.py); a new file's chunks are all new.
    unchanged: int = 0
    changed: int = 0
    new: int = 0
    removed: int = 0
    contexts_kept: int = 0  # llm contexts the unchanged chunks kept (context.reindex)
    contexts_to_write: int = 0  # chunks of a document that had llm contexts now without one

    def chunk_changes(self) -> str:
        """'59 unchanged · 1 changed · 0 new · 0 removed' for a stored version; '' otherwise."""
        if self.status not in ("ingested", "replaced"):
            return ""
        return (f"{self.unchanged:,} unchanged · {self.changed:,} changed · {self.new:,} new · "
                f"{self.removed:,} removed")


@dataclass
class IngestReport:
    results: list[FileResult] = field(default_factory=list)
    graph: BuildReport | None = None  # the entity graph's incremental update after the writes, when one ran
    notes: list[str] = field(default_factory=list)  # e.g. the graph left behind (graph.follow_ingest = false)

    @property
    def errors(self) -> list[FileResult]:
        return [r for r in self.results if r.status == "error"]

    @property
    def ok(self) -> list[FileResult]:
        return [r for r in self.results if r.status != "error"]

    @property
    def embedded(self) -> int:
        return sum(r.embedded for r in self.results)

    @property
    def cache_hits(self) -> int:
        return sum(r.cache_hits for r in self.results)

    def chunk_changes(self) -> dict[str, int]:
        """Chunks of the stored versions, summed: unchanged / changed / new / removed, and the llm contexts kept
        and left to write."""
        keys = ("unchanged", "changed", "new", "removed", "contexts_kept", "contexts_to_write")
        return {k: sum(getattr(r, k) for r in self.ok) for k in keys}


# Called with each file's result as soon as it is final (committed, unchanged or refused), in finishing order.
OnResult = Callable[[FileResult], None]

# (files done, files, what is happening). `done` is fractional while a big file's chunks are embedded batch by batch,
# so a bar keeps moving through a 10,000-chunk file instead of sitting still for minutes.
Progress = Callable[[float, int, str], None]


def doc_id_for(name: str, content_hash: str) -> str:
    """A new file's document id. A new version of a stored file keeps the stored id (carry_over), so its unchanged
    chunks keep theirs."""
    return "d" + hashlib.sha256(f"{name}\x00{content_hash}".encode()).hexdigest()[:11]


@dataclass(frozen=True)
class CarryOver:
    """What a new version takes from the stored one: its chunks under the stored ids, their diff, the store's
    replacement plan, and the llm contexts kept and had before."""

    chunks: list[Chunk]
    diff: ChunkDiff | None = None
    plan: Replacement | None = None
    contexts_kept: int = 0
    contexts_had: int = 0


def carry_over(store: Store, config: PipelineConfig, chunks: list[Chunk], previous: DocumentRow | None,
               workspace: str) -> CarryOver:
    """The new version's chunks under the stored document's id, unchanged chunks keeping their ids (and with them
    their vectors, contexts and graph mentions), and what happens to the kept contexts under context.reindex:
    full rewrites the document's contexts; changed keeps them; major rewrites them when more than
    context.major_share of the document changed, otherwise keeps them marked possibly stale."""
    if previous is None:
        return CarryOver(chunks)
    old = store.corpus.chunks(workspace, previous.doc_id)
    chunks = adopt_ids(chunks, previous.doc_id, old)
    diff = diff_chunks([c.chunk_id for c in old], [c.chunk_id for c in chunks])
    ctx = config.context
    rewrite = ctx.reindex == "full" or (ctx.reindex == "major" and diff.changed_share > ctx.major_share)
    stale = ("llm",) if ctx.reindex == "major" and not rewrite else ()
    had = store.ledger.contexts("llm", workspace, [c.chunk_id for c in old]) if old else {}
    kept = 0 if rewrite else sum(1 for cid in diff.unchanged if cid in had)
    plan = Replacement(previous.doc_id, frozenset(diff.unchanged), keep_contexts=not rewrite, stale_variants=stale)
    return CarryOver(chunks, diff, plan, kept, len(had))


def chunker_label(config: PipelineConfig) -> str:
    c = config.chunking
    return f"{c.strategy}:{c.size_tokens}/{c.overlap_tokens}"


@dataclass(frozen=True)
class _Prepared:
    """A parsed and chunked file that still needs its vectors and its transaction."""

    name: str
    size: int
    content_hash: str
    label: str
    parsed: ParsedDocument
    doc_id: str
    chunks: list[Chunk]
    previous: DocumentRow | None
    carried: CarryOver | None = None


def _failed(name: str, exc: Exception) -> FileResult:
    return FileResult(name, "error", f"{name}: could not be embedded or stored ({type(exc).__name__}: {exc})")


def earlier_version(store: Store, name: str, content_hash: str, label: str, workspace: str, *,
                    legacy: bool = True) -> tuple[DocumentRow | None, FileResult | None]:
    """The stored earlier version of the file keyed `name` and, when nothing needs doing, the file's result.
    A document from before path keys (stored under the base name; Corpus.find_document_for_key) with the same
    content and chunker is renamed to the path in place, keeping its chunks, vectors and contexts."""
    previous = store.corpus.find_document_for_key(name, workspace, legacy=legacy)
    if previous is None or previous.content_hash != content_hash or previous.chunker != label:
        return previous, None
    if previous.name != name:
        store.corpus.rename_document(previous.doc_id, name, workspace)
        return previous, FileResult(name, "unchanged", f"same content and chunker; stored as '{previous.name}' "
                                    f"before documents were keyed by their path, now keyed '{name}'",
                                    previous.doc_id, previous.n_chunks)
    return previous, FileResult(name, "unchanged", "same content and chunker; nothing to do", previous.doc_id,
                                previous.n_chunks)


def chunk_spec(config: PipelineConfig) -> ChunkSpec:
    c = config.chunking
    return ChunkSpec(c.strategy, c.size_tokens, c.overlap_tokens, config.limits.max_chunks_per_file)


Window = tuple[Callable[[str], int], int]  # (the embedder's token count, the most tokens a chunk may hold)


def fit_window(embedder: Embedder) -> Window | None:
    """What ingest cuts chunks to (CountsTokens): the embedder's window less [CLS] and [SEP]; None for an embedder
    that cannot count its tokens (test fakes)."""
    if isinstance(embedder, CountsTokens):
        return embedder.token_count, int(embedder.max_seq_length) - 2
    return None


def cut_to_window(name: str, parsed: ParsedDocument, doc_id: str, chunks: list[Chunk], window: Window | None,
                  max_chunks: int | None) -> list[Chunk]:
    """Chunks that the embedder reads whole (fit_to_window), the per-file cap checked again on the result."""
    if window is None:
        return chunks
    fitted = fit_to_window(parsed.text, doc_id, chunks, window[0], window[1])
    if len(fitted) != len(chunks):
        check_chunk_cap(name, len(fitted), max_chunks)
    return fitted


def _prepare(
    name: str, data: bytes, *, store: Store, config: PipelineConfig, workspace: str, sandbox: ParseSandbox,
    legacy: bool = True, window: Window | None = None,
) -> _Prepared | FileResult:
    """Parse and chunk one file in the sandbox (one CPU-time deadline and a memory bound for both), or say why
    there is nothing to embed (an error, the chunk cap, or unchanged since last time: then it is not parsed)."""
    content_hash = hashlib.sha256(data).hexdigest()
    label = chunker_label(config)
    previous, done = earlier_version(store, name, content_hash, label, workspace, legacy=legacy)
    if done is not None:
        return done
    doc_id = previous.doc_id if previous is not None else doc_id_for(name, content_hash)
    try:
        parsed, chunks, table = sandbox.parse_file(name, data, doc_id, chunk_spec(config),
                                                   max_bytes=int(config.limits.max_file_mb * 1_000_000))
        chunks = cut_to_window(name, parsed, doc_id, chunks, window, config.limits.max_chunks_per_file)
    except ParseError as exc:
        return FileResult(name, "error", str(exc))
    if not chunks:
        return FileResult(name, "error", f"{name}: no chunks could be cut from the text")
    if is_table(name):  # the typed table first: it stays hidden until its document is written
        failed = put_table(store.tables, name, table if table is not None else data, doc_id, workspace)
        if failed:
            return FileResult(name, "error", failed)
    carried = carry_over(store, config, chunks, previous, workspace)
    return _Prepared(name, len(data), content_hash, label, parsed, doc_id, carried.chunks, previous, carried)


def _replacing(p: _Prepared) -> str | Replacement | None:
    """What put_document(s) removes of the stored version: the carry-over plan, or the whole old document."""
    if p.carried is not None and p.carried.plan is not None:
        return p.carried.plan
    return p.previous.doc_id if p.previous is not None else None


def _store_prepared(
    p: _Prepared, vectors: object, stats: EmbedStats, *, store: Store, embedder: Embedder, workspace: str
) -> FileResult:
    """Write one prepared document in its own transaction (put_document); a failure costs this file only."""
    try:
        store.corpus.put_document(_document(p, workspace), p.chunks, vectors, embedder.model_id,  # type: ignore[arg-type]
                                  replace_doc_id=_replacing(p))
    except Exception as exc:  # a store failure costs this file only; the upload goes on
        return _failed(p.name, exc)
    return _stored(p, stats)


def _document(p: _Prepared, workspace: str) -> Document:
    return Document(p.doc_id, p.name, p.parsed.kind, p.size, p.content_hash, detect_language(p.parsed.text),
                    p.parsed.text, p.label, workspace, p.parsed.title, len(p.chunks))


def _stored(p: _Prepared, stats: EmbedStats) -> FileResult:
    c = p.carried
    diff = c.diff if c is not None and c.diff is not None else ChunkDiff(new=tuple(x.chunk_id for x in p.chunks))
    kept = c.contexts_kept if c is not None else 0
    to_write = len(p.chunks) - kept if c is not None and c.contexts_had else 0
    return FileResult(p.name, "replaced" if p.previous is not None else "ingested", "", p.doc_id, len(p.chunks),
                      stats.computed, stats.cache_hits, p.parsed.encoding, len(diff.unchanged), len(diff.changed),
                      len(diff.new), len(diff.removed), kept, to_write)


def record_context_reuse(store: Store, results: Sequence[FileResult], workspace: str) -> None:
    """One cache-events row for the llm contexts edited documents kept (hits) and lost (misses): the Costs page's
    history shows what context.reindex saved."""
    kept = sum(r.contexts_kept for r in results if r.status != "error")
    lost = sum(r.contexts_to_write for r in results if r.status != "error")
    if kept or lost:
        store.caches.record_cache_event("llm_context", kept, lost, "ingest", workspace)


def _store_group(
    ready: Sequence[tuple[_Prepared, object, EmbedStats]], *, store: Store, embedder: Embedder, workspace: str
) -> list[FileResult]:
    """Write a group of embedded documents in one transaction (Corpus.put_documents: all or nothing, one bulk
    insert per table instead of seven statements and a commit per file). If that fails, nothing of the group was
    written, and each document is written again in its own transaction, so only the faulty file reports an error;
    either way no document is ever half-written."""
    if len(ready) > 1:
        try:
            store.corpus.put_documents(
                [(_document(p, workspace), p.chunks, v, _replacing(p)) for p, v, _ in ready],
                embedder.model_id)  # type: ignore[misc]
            return [_stored(p, st) for p, _, st in ready]
        except Exception:  # noqa: BLE001 - the group rolled back whole; per document below finds the faulty one
            pass
    return [_store_prepared(p, v, st, store=store, embedder=embedder, workspace=workspace) for p, v, st in ready]


def ingest_files(
    files: Sequence[tuple[str, bytes] | LocalFile], *, store: Store, embedder: Embedder, config: PipelineConfig,
    workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None, sandbox: ParseSandbox | None = None,
    on_result: OnResult | None = None,
) -> IngestReport:
    """Ingest several files (bytes in hand, or LocalFiles read one at a time when their turn comes); a bad file is
    reported by name and the others still go in. Chunks of consecutive files are embedded together, at most
    GROUP_CHUNKS at a time (a bigger file alone, GROUP_CHUNKS per encode call), and each group is committed before
    the next is parsed, with its heuristic contexts: a kill loses at most the group in flight. `on_result` hears
    each file's result as soon as it is final."""
    report = IngestReport()
    results: list[FileResult | None] = [None] * len(files)
    keys = [f.key if isinstance(f, LocalFile) else f[0] for f in files]
    in_run = set(keys)
    group: list[tuple[int, _Prepared]] = []
    box = sandbox or default_sandbox()
    window = fit_window(embedder)
    max_bytes = int(config.limits.max_file_mb * 1_000_000)

    def finish(i: int, res: FileResult) -> None:
        results[i] = res
        if on_result:
            on_result(res)

    def in_batches(i: int, p: _Prepared) -> tuple[object, EmbedStats]:
        """A big file's vectors, GROUP_CHUNKS at a time (each batch saved to the embedding cache as it is made),
        reporting progress after each batch."""
        texts = [c.text for c in p.chunks]
        parts, hits, computed = [], 0, 0
        for start in range(0, len(texts), GROUP_CHUNKS):
            vecs, st = embed_with_cache(texts[start : start + GROUP_CHUNKS], embedder, store.caches, workspace,
                                        tokens=token_sink(store, config))
            parts.append(vecs)
            hits, computed = hits + st.cache_hits, computed + st.computed
            done = min(len(texts), start + GROUP_CHUNKS)
            if progress:
                progress(i + done / len(texts), len(files), f"{p.name} · {done:,}/{len(texts):,} chunks embedded")
        return np.concatenate(parts), EmbedStats(len(texts), hits, computed)

    def flush() -> None:
        if not group:
            return
        embedded: list[tuple[object, EmbedStats]] | None = None
        if all(len(p.chunks) <= GROUP_CHUNKS for _, p in group):
            try:
                embedded = embed_groups_with_cache([[c.text for c in p.chunks] for _, p in group], embedder,
                                                   store.caches, workspace, tokens=token_sink(store, config))
            except Exception:  # noqa: BLE001 - retried per document below so only the guilty file reports the error
                embedded = None
        hits = computed = 0
        ready: list[tuple[int, _Prepared, object, EmbedStats]] = []
        failed: dict[int, FileResult] = {}
        for j, (i, p) in enumerate(group):
            if embedded is not None:
                vectors, stats = embedded[j]
            else:
                try:
                    vectors, stats = in_batches(i, p)
                except Exception as exc:  # a model failure costs this file only
                    failed[i] = _failed(p.name, exc)
                    continue
            ready.append((i, p, vectors, stats))
        written = _store_group([(p, v, st) for _, p, v, st in ready], store=store, embedder=embedder,
                               workspace=workspace)
        done = dict(failed)
        for (i, _, _, stats), res in zip(ready, written):
            done[i] = res
            if res.status != "error":
                hits, computed = hits + stats.cache_hits, computed + stats.computed
        if hits or computed:  # one ledger row per group: each row is a commit, and the sums are what is read
            store.caches.record_cache_event("embedding", hits, computed, "ingest", workspace)
        record_context_reuse(store, list(done.values()), workspace)
        changed = [r.doc_id for r in done.values() if r.status in ("ingested", "replaced") and r.doc_id]
        if changed:
            # Heuristic contexts (title, heading path, lead sentence; no model, ~free) with each group, so a query
            # with context.variant = heuristic finds them and writes nothing, even after a kill and a resume.
            build_heuristic(store, workspace=workspace, doc_ids=changed)
        for i in sorted(done):
            finish(i, done[i])
        group.clear()

    for i, item in enumerate(files):
        name = keys[i]
        if progress:
            progress(i, len(files), name)
        base = name.rsplit("/", 1)[-1]
        if any(p.name == name or (p.previous is not None and p.previous.name == base != p.name) for _, p in group):
            # A second copy of a file must find the first one stored to be judged unchanged or replaced, and a
            # pre-path document claimed by one key must be gone before another key looks for it.
            flush()
        if isinstance(item, LocalFile):
            try:
                data = read_file(item, max_bytes)
            except ParseError as exc:
                finish(i, FileResult(name, "error", str(exc)))
                continue
        else:
            data = item[1]
        # A pre-path document `report.md` belongs to the root's own `report.md` when this run has one.
        prepared = _prepare(name, data, store=store, config=config, workspace=workspace, sandbox=box,
                            legacy=base not in in_run, window=window)
        del data
        if isinstance(prepared, FileResult):
            finish(i, prepared)
            continue
        if group and sum(len(p.chunks) for _, p in group) + len(prepared.chunks) > GROUP_CHUNKS:
            flush()
        group.append((i, prepared))
        if sum(len(p.chunks) for _, p in group) >= GROUP_CHUNKS:
            flush()
    flush()
    report.results.extend(r for r in results if r is not None)
    after_ingest(report, store=store, embedder=embedder, config=config, workspace=workspace, heuristic=False)
    if progress:
        progress(len(files), len(files), "")
    return report


def after_ingest(report: IngestReport, *, store: Store, embedder: Embedder, config: PipelineConfig,
                 workspace: str, heuristic: bool = True) -> None:
    """What follows the document writes, whichever engine made them (local here, core/ingest/ray_engine.py);
    `heuristic=False` when the engine wrote the heuristic contexts with each commit."""
    changed = [r.doc_id for r in report.results if r.status in ("ingested", "replaced") and r.doc_id]
    if changed and heuristic:
        # Heuristic contexts (title, heading path, lead sentence; no model, ~free) are written at ingest, so a query
        # with context.variant = heuristic finds them and writes nothing.
        build_heuristic(store, workspace=workspace, doc_ids=changed)
    state = store.graph.state(workspace)
    behind = state is not None and state.corpus_version != store.corpus.corpus_version(workspace)
    if changed or behind:
        # Keep an existing entity graph in step whichever path ingested (behind: a run killed after its writes and
        # before the graph update, or documents deleted elsewhere): only the changed chunks are extracted and
        # only the communities they touch re-clustered (core/graph/build.py); or say once that it was left behind.
        follow = follow_corpus(store, config.graph, embedder=embedder, workspace=workspace, doc_ids=changed)
        report.graph = follow.report
        if follow.notice:
            report.notes.append(follow.notice)


def read_paths(paths: Iterable[str | Path]) -> list[tuple[str, bytes]]:
    """The files named (folders walked: core/ingest/files.py) read whole, keyed by their path relative to the
    ingest root. A file the scan refuses (a FIFO, a device, a link out of the folder) raises its ParseError."""
    return [(f.key, read_file(f)) for f in scan_paths(paths)]
