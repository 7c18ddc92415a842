"""ingest_files: parse -> chunk -> embed (cache first) -> store, each document in its own transaction."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from core.config import PipelineConfig
from core.graph.build import update_graph_for_documents
from core.ingest.chunk import chunk_document
from core.ingest.context import build_heuristic
from core.ingest.parse import SUPPORTED, ParseError
from core.ingest.sandbox import ParseSandbox, default_sandbox
from core.models.embed import (
    Embedder,
    EmbedStats,
    TokenVectorSink,
    embed_groups_with_cache,
    embed_with_cache,
)
from core.store import DocumentRow, Store
from core.text import detect_language
from core.types import DEFAULT_WORKSPACE, Chunk, Document, ParsedDocument

# ingest_files embeds the chunks of consecutive documents together until this many are pending: small documents
# alone would leave the model's batches (64) nearly empty, which bench/ingest.py measured as a large slowdown.
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


@dataclass
class IngestReport:
    results: list[FileResult] = field(default_factory=list)

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


# (files done, files, what is happening). `done` is fractional while a big file's chunks are embedded batch by batch,
# so a bar keeps moving through a 10,000-chunk file instead of sitting still for minutes.
Progress = Callable[[float, int, str], None]


def doc_id_for(name: str, content_hash: str) -> str:
    return "d" + hashlib.sha256(f"{name}\x00{content_hash}".encode()).hexdigest()[:11]


def chunker_label(config: PipelineConfig) -> str:
    c = config.chunking
    return f"{c.strategy}:{c.size_tokens}/{c.overlap_tokens}"


def ingest_one(
    name: str, data: bytes, *, store: Store, embedder: Embedder, config: PipelineConfig,
    workspace: str = DEFAULT_WORKSPACE, sandbox: ParseSandbox | None = None,
) -> FileResult:
    """Ingest one file. An unchanged file (same name, bytes and chunker) is skipped; a changed one replaces the
    old version atomically. Errors come back as a FileResult, never as a half-written document."""
    prepared = _prepare(name, data, store=store, config=config, workspace=workspace,
                        sandbox=sandbox or default_sandbox())
    if isinstance(prepared, FileResult):
        return prepared
    try:
        vectors, stats = embed_with_cache([c.text for c in prepared.chunks], embedder, store.caches, workspace,
                                          tokens=token_sink(store, config))
    except Exception as exc:  # a model failure costs this file only; the upload goes on
        return _failed(name, exc)
    result = _store_prepared(prepared, vectors, stats, store=store, embedder=embedder, workspace=workspace)
    if result.status != "error":
        store.caches.record_cache_event("embedding", stats.cache_hits, stats.computed, "ingest", workspace)
    return result


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


def _failed(name: str, exc: Exception) -> FileResult:
    return FileResult(name, "error", f"{name}: could not be embedded or stored ({type(exc).__name__}: {exc})")


def _prepare(
    name: str, data: bytes, *, store: Store, config: PipelineConfig, workspace: str, sandbox: ParseSandbox
) -> _Prepared | FileResult:
    """Parse (in the sandbox: deadline + memory bound) and chunk one file, or say why there is nothing to embed
    (error, or unchanged since last time)."""
    try:
        parsed = sandbox.parse(name, data, max_bytes=int(config.limits.max_file_mb * 1_000_000))
    except ParseError as exc:
        return FileResult(name, "error", str(exc))
    content_hash = hashlib.sha256(data).hexdigest()
    label = chunker_label(config)
    previous = store.corpus.find_document_by_name(name, workspace)
    if previous is not None and previous.content_hash == content_hash and previous.chunker == label:
        return FileResult(name, "unchanged", "same content and chunker; nothing to do", previous.doc_id,
                          previous.n_chunks)
    doc_id = doc_id_for(name, content_hash)
    chunks = chunk_document(parsed, doc_id, strategy=config.chunking.strategy, size=config.chunking.size_tokens,
                            overlap=config.chunking.overlap_tokens)
    if not chunks:
        return FileResult(name, "error", f"{name}: no chunks could be cut from the text")
    return _Prepared(name, len(data), content_hash, label, parsed, doc_id, chunks, previous)


def _store_prepared(
    p: _Prepared, vectors: object, stats: EmbedStats, *, store: Store, embedder: Embedder, workspace: str
) -> FileResult:
    """Write one prepared document in its own transaction (put_document); a failure costs this file only."""
    try:
        store.corpus.put_document(_document(p, workspace), p.chunks, vectors, embedder.model_id,  # type: ignore[arg-type]
                                  replace_doc_id=p.previous.doc_id if p.previous is not None else None)
    except Exception as exc:  # a store failure costs this file only; the upload goes on
        return _failed(p.name, exc)
    return _stored(p, stats)


def _document(p: _Prepared, workspace: str) -> Document:
    return Document(p.doc_id, p.name, p.parsed.kind, p.size, p.content_hash, detect_language(p.parsed.text),
                    p.parsed.text, p.label, workspace, p.parsed.title, len(p.chunks))


def _stored(p: _Prepared, stats: EmbedStats) -> FileResult:
    return FileResult(p.name, "replaced" if p.previous is not None else "ingested", "", p.doc_id, len(p.chunks),
                      stats.computed, stats.cache_hits, p.parsed.encoding)


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
                [(_document(p, workspace), p.chunks, v, p.previous.doc_id if p.previous is not None else None)
                 for p, v, _ in ready], embedder.model_id)  # type: ignore[misc]
            return [_stored(p, st) for p, _, st in ready]
        except Exception:  # noqa: BLE001 - the group rolled back whole; per document below finds the faulty one
            pass
    return [_store_prepared(p, v, st, store=store, embedder=embedder, workspace=workspace) for p, v, st in ready]


def ingest_files(
    files: Sequence[tuple[str, bytes]], *, store: Store, embedder: Embedder, config: PipelineConfig,
    workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None, sandbox: ParseSandbox | None = None,
) -> IngestReport:
    """Ingest several files; a bad file is reported by name and the others still go in. Chunks of consecutive
    files are embedded together (GROUP_CHUNKS), yet every document is still written in its own transaction."""
    report = IngestReport()
    results: list[FileResult | None] = [None] * len(files)
    group: list[tuple[int, _Prepared]] = []
    box = sandbox or default_sandbox()

    def in_batches(i: int, p: _Prepared) -> tuple[object, EmbedStats]:
        """A big file's vectors, GROUP_CHUNKS at a time, reporting progress after each batch."""
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
        for j, (i, p) in enumerate(group):
            if embedded is not None:
                vectors, stats = embedded[j]
            else:
                try:
                    vectors, stats = in_batches(i, p)
                except Exception as exc:  # a model failure costs this file only
                    results[i] = _failed(p.name, exc)
                    continue
            ready.append((i, p, vectors, stats))
        written = _store_group([(p, v, st) for _, p, v, st in ready], store=store, embedder=embedder,
                               workspace=workspace)
        for (i, _, _, stats), res in zip(ready, written):
            results[i] = res
            if res.status != "error":
                hits, computed = hits + stats.cache_hits, computed + stats.computed
        if hits or computed:  # one ledger row per group: each row is a commit, and the sums are what is read
            store.caches.record_cache_event("embedding", hits, computed, "ingest", workspace)
        group.clear()

    for i, (name, data) in enumerate(files):
        if progress:
            progress(i, len(files), name)
        if any(p.name == name for _, p in group):
            flush()  # a second copy of a file must find the first one stored to be judged unchanged or replaced
        prepared = _prepare(name, data, store=store, config=config, workspace=workspace, sandbox=box)
        if isinstance(prepared, FileResult):
            results[i] = prepared
            continue
        group.append((i, prepared))
        if sum(len(p.chunks) for _, p in group) >= GROUP_CHUNKS:
            flush()
    flush()
    report.results.extend(r for r in results if r is not None)
    after_ingest(report, store=store, embedder=embedder, config=config, workspace=workspace)
    if progress:
        progress(len(files), len(files), "")
    return report


def after_ingest(report: IngestReport, *, store: Store, embedder: Embedder, config: PipelineConfig,
                 workspace: str) -> None:
    """What follows the document writes, whichever engine made them (local here, core/ingest/ray_engine.py)."""
    changed = [r.doc_id for r in report.results if r.status in ("ingested", "replaced") and r.doc_id]
    if changed:
        # Heuristic contexts (title, heading path, lead sentence; no model, ~free) are written at ingest, so a query
        # with context.variant = heuristic finds them and writes nothing.
        build_heuristic(store, workspace=workspace, doc_ids=changed)
    if config.graph.enabled and changed:
        # Keep the entity graph in step: only the new documents' chunks are extracted (core/graph/build.py).
        update_graph_for_documents(store, config.graph, embedder=embedder, workspace=workspace, doc_ids=changed)


def read_paths(paths: Iterable[str | Path]) -> list[tuple[str, bytes]]:
    """Files named on the command line; folders are walked for supported extensions (sorted, hidden skipped)."""
    out: list[tuple[str, bytes]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix.lower() in SUPPORTED and not any(
                    part.startswith((".", "_")) for part in f.relative_to(p).parts
                ):
                    out.append((f.name, f.read_bytes()))
        else:
            out.append((p.name, p.read_bytes()))
    return out
