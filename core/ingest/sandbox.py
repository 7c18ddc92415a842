"""Parse and chunk uploads in a worker process with a CPU-time deadline and a memory bound, so a hostile file costs
one skipped file.

Why a separate process: python-docx, pypdf and html.parser run pure-Python loops that cannot be interrupted from
another thread, and a decompression bomb can take gigabytes. A worker (started with `python -m`, not forked from the
Streamlit or torch process) runs under RLIMIT_AS; the caller lets it spend at most `timeout_s` seconds of CPU time on
one file (read from /proc, so a busy machine that leaves the worker waiting for a core does not refuse a legitimate
file) with a generous wall-clock backstop, and kills it otherwise. Chunking runs in the worker too, under the same
deadline: a 2 MB table cut into 13,000 chunks is CPU work like any parse.
Workers are reused across files (start-up is paid once, bench/hostile.py measures the per-file overhead)
and replaced after a kill, a crash or an out-of-memory error. The wire format is length-prefixed JSON plus the raw
bytes, so nothing the worker sends back is unpickled.
"""
from __future__ import annotations

import atexit
import json
import resource
import sys
import threading
from dataclasses import dataclass
from typing import Any

from core.ingest.chunk import build_chunks, check_chunk_cap, chunk_facts, chunk_ranges
from core.ingest.parse import ParseError, human_size, kind_of, parse
from core.ingest.tables import TableData, is_table, read_table, table_document, table_from_json, table_to_json
from core.types import Chunk, ParsedDocument, Section
from core.safeio.worker import CpuDeadline, Worker, read_exact, read_request, ready, write_reply

PARSE_TIMEOUT_S = 20.0  # seconds of the worker's CPU time per file (parse + chunk)
# Wall-clock backstop per file: a multiple of the CPU deadline, so a worker starved of CPU on a busy machine is not
# refused, while one blocked without using CPU cannot hold a caller forever.
WALL_BACKSTOP_FACTOR = 6.0
WALL_BACKSTOP_MIN_S = 120.0
PARSE_MEMORY_MB = 1024
STARTUP_TIMEOUT_S = 60.0  # a worker's imports on a busy 2-core machine; not counted in the parse deadline
MAX_WORKERS = 2  # Streamlit sessions ingesting at once; more callers wait for a free worker


def _doc_to_json(doc: ParsedDocument) -> dict[str, Any]:
    return {"name": doc.name, "kind": doc.kind, "text": doc.text, "title": doc.title, "encoding": doc.encoding,
            "sections": [[list(s.heading_path), s.start, s.end] for s in doc.sections]}


def _doc_from_json(d: dict[str, Any]) -> ParsedDocument:
    sections = tuple(Section(tuple(str(h) for h in p), int(s), int(e)) for p, s, e in d["sections"])
    return ParsedDocument(str(d["name"]), str(d["kind"]), str(d["text"]), sections, str(d["title"]),
                          str(d.get("encoding", "")))


class _Worker(Worker):
    def __init__(self, memory_mb: int) -> None:
        # The deadline is for parsing, not for start-up: the worker's ready byte (imports done) comes first.
        super().__init__("core.ingest.sandbox", str(memory_mb), what="parse worker", startup_s=STARTUP_TIMEOUT_S)


@dataclass(frozen=True)
class ChunkSpec:
    """How the worker cuts a parsed file (the config's chunking section and the per-file chunk cap)."""

    strategy: str
    size: int
    overlap: int
    max_chunks: int | None = None


class ParseSandbox:
    """parse() (and parse_chunks()) with a CPU-time deadline and a memory bound per file; thread-safe (each caller
    borrows a worker). `timeout_s` counts the worker's CPU seconds; `wall_s` is the wall-clock backstop."""

    def __init__(self, *, timeout_s: float = PARSE_TIMEOUT_S, memory_mb: int = PARSE_MEMORY_MB,
                 max_workers: int = MAX_WORKERS, wall_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.wall_s = wall_s if wall_s is not None else max(WALL_BACKSTOP_MIN_S, WALL_BACKSTOP_FACTOR * timeout_s)
        self.memory_mb = memory_mb
        self.max_workers = max_workers
        self._idle: list[_Worker] = []
        self._busy = 0
        self._cond = threading.Condition()
        self.started = 0  # workers started so far (tests and bench read it)
        self.peak_worker_kb = 0  # largest resident size any worker reached (bench/hostile.py reports it)

    def _borrow(self) -> _Worker:
        with self._cond:
            while not self._idle and self._busy >= self.max_workers:
                self._cond.wait()
            self._busy += 1
            while self._idle:
                w = self._idle.pop()
                if w.alive():
                    return w
                w.kill()
        try:
            w = _Worker(self.memory_mb)
        except Exception:
            with self._cond:
                self._busy -= 1
                self._cond.notify()
            raise
        self.started += 1
        return w

    def _give_back(self, w: _Worker | None) -> None:
        with self._cond:
            if w is not None:
                self.peak_worker_kb = max(self.peak_worker_kb, w.peak_kb())
            self._busy -= 1
            if w is not None and w.alive():
                self._idle.append(w)
            self._cond.notify()

    def parse(self, name: str, data: bytes, *, max_bytes: int | None = None) -> ParsedDocument:
        return _doc_from_json(self._call(name, data, {"name": name, "max_bytes": max_bytes}, max_bytes)["doc"])

    def parse_chunks(self, name: str, data: bytes, doc_id: str, spec: ChunkSpec, *, max_bytes: int | None = None
                     ) -> tuple[ParsedDocument, list[Chunk]]:
        """Parse and chunk in the worker, both inside the deadline; a ChunkLimitError (a ParseError) over the cap."""
        doc, chunks, _ = self.parse_file(name, data, doc_id, spec, max_bytes=max_bytes)
        return doc, chunks

    def parse_file(self, name: str, data: bytes, doc_id: str, spec: ChunkSpec, *, max_bytes: int | None = None
                   ) -> tuple[ParsedDocument, list[Chunk], TableData | None]:
        """parse_chunks, and for a table file its typed table as the worker read it: a table is parsed once, in the
        sandbox, under its deadline and memory bound (never again in this process)."""
        reply = self._call(name, data, {"name": name, "max_bytes": max_bytes, "chunk": [
            spec.strategy, spec.size, spec.overlap, spec.max_chunks]}, max_bytes)
        doc = _doc_from_json(reply["doc"])
        rows = reply["chunks"]
        ranges = [(int(r[0]), int(r[1]), tuple(str(h) for h in r[2])) for r in rows]
        table = table_from_json(reply["table"]) if reply.get("table") is not None else None
        return doc, build_chunks(doc.text, doc_id, ranges, [(int(r[3]), str(r[4])) for r in rows]), table

    def _call(self, name: str, data: bytes, header: dict[str, Any], max_bytes: int | None) -> dict[str, Any]:
        kind_of(name)  # cheap refusals stay in this process: unknown type, over-long name, over the size limit
        if max_bytes is not None and len(data) > max_bytes:
            raise ParseError(f"{name}: {human_size(len(data))} is over the upload limit of {human_size(max_bytes)}")
        w = self._borrow()
        keep: _Worker | None = w
        try:
            deadline = CpuDeadline(w.proc.pid, self.timeout_s, self.wall_s)
            reply: dict[str, Any] | None
            try:
                reply, _ = w.request(header, data, deadline)
            except (OSError, EOFError, ValueError):
                reply = {"crash": True}
            if reply is None:
                keep = None
                self.peak_worker_kb = max(self.peak_worker_kb, w.peak_kb())
                w.kill()
                if deadline.reason == "wall":
                    raise ParseError(f"{name}: still not parsed after {self.wall_s:g} s of wall-clock time; skipped")
                raise ParseError(f"{name}: took more than {self.timeout_s:g} s of CPU time to parse; skipped")
            if reply.get("crash") or reply.get("oom"):
                keep = None
                self.peak_worker_kb = max(self.peak_worker_kb, w.peak_kb())
                w.kill()
                if reply.get("oom"):
                    raise ParseError(f"{name}: needs more than {self.memory_mb:,} MB of memory to parse; skipped")
                raise ParseError(f"{name}: the parser ran out of its {self.memory_mb:,} MB memory bound or crashed; "
                                 "skipped")
            if "error" in reply:
                raise ParseError(str(reply["error"]))
            return reply
        finally:
            self._give_back(keep)

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()


_DEFAULT: ParseSandbox | None = None
_DEFAULT_LOCK = threading.Lock()


def default_sandbox() -> ParseSandbox:
    """The process-wide sandbox (workers are shared by all sessions of one Streamlit server)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = ParseSandbox()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


# -- the worker side ---------------------------------------------------------------------------------------------
def _handle(header: dict[str, Any], data: bytes) -> dict[str, Any]:
    """One request: parse, and with a "chunk" spec also cut the chunks (ranges, token counts, languages)."""
    name = header["name"]
    table = None
    if is_table(name):
        if header["max_bytes"] is not None and len(data) > header["max_bytes"]:
            raise ParseError(f"{name}: {human_size(len(data))} is over the upload limit of "
                             f"{human_size(header['max_bytes'])}")
        table = read_table(name, data)
        doc = table_document(name, table)
    else:
        doc = parse(name, data, max_bytes=header["max_bytes"])
    reply: dict[str, Any] = {"doc": _doc_to_json(doc)}
    if table is not None and header.get("chunk"):
        reply["table"] = table_to_json(table)
    if header.get("chunk"):
        strategy, size, overlap, max_chunks = header["chunk"]
        ranges = chunk_ranges(doc, strategy=strategy, size=size, overlap=overlap)
        check_chunk_cap(doc.name, len(ranges), max_chunks)
        reply["chunks"] = [[s, e, list(path), n, lang]
                           for (s, e, path), (n, lang) in zip(ranges, chunk_facts(doc.text, ranges))]
    return reply


def _serve(memory_mb: int) -> None:
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.setrecursionlimit(5000)
    try:  # warm the parsers once so each file does not pay their import
        import docx  # noqa: F401
        import pypdf  # noqa: F401
    except Exception:
        pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    ready(out)
    while True:
        try:
            header, dlen = read_request(inp)
        except EOFError:
            return
        fatal = False
        data = b""
        try:
            data = read_exact(inp, dlen)
            reply: dict[str, Any] = _handle(header, data)
        except ParseError as exc:
            reply = {"error": str(exc)[:1000]}
        except MemoryError:
            reply, fatal = {"oom": True}, True
        except EOFError:
            return
        except RecursionError:
            reply = {"error": f"{header['name']}: nested too deeply to parse; skipped"}
        except Exception as exc:  # noqa: BLE001 - any parser bug is this file's problem, reported by name
            reply = {"error": f"{header['name']}: cannot parse ({type(exc).__name__}: {str(exc)[:300]})"}
        del data
        try:
            payload = json.dumps(reply).encode()
        except MemoryError:
            payload, fatal = b'{"oom": true}', True
        write_reply(out, payload)
        if fatal:
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else PARSE_MEMORY_MB)
