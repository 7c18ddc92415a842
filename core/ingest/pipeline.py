"""ingest_files: parse -> chunk -> embed (cache first) -> store, each document in its own transaction."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from core.config import PipelineConfig
from core.embed import Embedder, embed_with_cache
from core.ingest.chunk import chunk_document
from core.ingest.parse import ParseError, parse
from core.store import Store
from core.text import detect_language
from core.types import DEFAULT_WORKSPACE, Document


@dataclass(frozen=True)
class FileResult:
    name: str
    status: str  # "ingested" | "replaced" | "unchanged" | "error"
    message: str = ""
    doc_id: str | None = None
    chunks: int = 0
    embedded: int = 0
    cache_hits: int = 0


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


Progress = Callable[[int, int, str], None]


def doc_id_for(name: str, content_hash: str) -> str:
    return "d" + hashlib.sha256(f"{name}\x00{content_hash}".encode()).hexdigest()[:11]


def chunker_label(config: PipelineConfig) -> str:
    c = config.chunking
    return f"{c.strategy}:{c.size_tokens}/{c.overlap_tokens}"


def ingest_one(
    name: str, data: bytes, *, store: Store, embedder: Embedder, config: PipelineConfig,
    workspace: str = DEFAULT_WORKSPACE,
) -> FileResult:
    """Ingest one file. An unchanged file (same name, bytes and chunker) is skipped; a changed one replaces the
    old version atomically. Errors come back as a FileResult, never as a half-written document."""
    try:
        parsed = parse(name, data, max_bytes=int(config.limits.max_file_mb * 1_000_000))
    except ParseError as exc:
        return FileResult(name, "error", str(exc))
    content_hash = hashlib.sha256(data).hexdigest()
    label = chunker_label(config)
    previous = store.find_document_by_name(name, workspace)
    if previous is not None and previous.content_hash == content_hash and previous.chunker == label:
        return FileResult(name, "unchanged", "same content and chunker; nothing to do", previous.doc_id,
                          previous.n_chunks)
    doc_id = doc_id_for(name, content_hash)
    chunks = chunk_document(parsed, doc_id, strategy=config.chunking.strategy, size=config.chunking.size_tokens,
                            overlap=config.chunking.overlap_tokens)
    if not chunks:
        return FileResult(name, "error", f"{name}: no chunks could be cut from the text")
    try:
        vectors, stats = embed_with_cache([c.text for c in chunks], embedder, store, workspace)
        doc = Document(doc_id, name, parsed.kind, len(data), content_hash, detect_language(parsed.text), parsed.text,
                       label, workspace, parsed.title, len(chunks))
        store.put_document(doc, chunks, vectors, embedder.model_id,
                           replace_doc_id=previous.doc_id if previous is not None else None)
    except Exception as exc:  # a model or store failure costs this file only; the upload goes on
        return FileResult(name, "error", f"{name}: could not be embedded or stored ({type(exc).__name__}: {exc})")
    store.record_cache_event("embedding", stats.cache_hits, stats.computed, "ingest", workspace)
    return FileResult(name, "replaced" if previous is not None else "ingested", "", doc_id, len(chunks),
                      stats.computed, stats.cache_hits)


def ingest_files(
    files: Sequence[tuple[str, bytes]], *, store: Store, embedder: Embedder, config: PipelineConfig,
    workspace: str = DEFAULT_WORKSPACE, progress: Progress | None = None,
) -> IngestReport:
    """Ingest several files; a bad file is reported by name and the others still go in."""
    report = IngestReport()
    for i, (name, data) in enumerate(files):
        if progress:
            progress(i, len(files), name)
        report.results.append(ingest_one(name, data, store=store, embedder=embedder, config=config,
                                         workspace=workspace))
    if progress:
        progress(len(files), len(files), "")
    return report


def read_paths(paths: Iterable[str | Path]) -> list[tuple[str, bytes]]:
    """Files named on the command line; folders are walked for supported extensions (sorted, hidden skipped)."""
    from core.ingest.parse import SUPPORTED

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
