"""Parse uploads in a worker process with a deadline and a memory bound, so a hostile file costs one skipped file.

Why a separate process: python-docx, pypdf and html.parser run pure-Python loops that cannot be interrupted from
another thread, and a decompression bomb can take gigabytes. A worker (started with `python -m`, not forked from the
Streamlit or torch process) runs under RLIMIT_AS; the caller waits at most `timeout_s` and kills it otherwise.
Workers are reused across files (start-up ~0.3 s is paid once, bench/hostile.py measures the per-file overhead)
and replaced after a kill, a crash or an out-of-memory error. The wire format is length-prefixed JSON plus the raw
bytes, so nothing the worker sends back is unpickled.
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import selectors
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from core.ingest.parse import ParseError, human_size, kind_of, parse
from core.types import ParsedDocument, Section

PARSE_TIMEOUT_S = 20.0
PARSE_MEMORY_MB = 1024
STARTUP_TIMEOUT_S = 60.0  # a worker's imports on a busy 2-core machine; not counted in the parse deadline
MAX_WORKERS = 2  # Streamlit sessions ingesting at once; more callers wait for a free worker
_ROOT = Path(__file__).resolve().parents[2]
_HEAD = struct.Struct(">II")
_LEN = struct.Struct(">I")


def _doc_to_json(doc: ParsedDocument) -> dict[str, Any]:
    return {"name": doc.name, "kind": doc.kind, "text": doc.text, "title": doc.title, "encoding": doc.encoding,
            "sections": [[list(s.heading_path), s.start, s.end] for s in doc.sections]}


def _doc_from_json(d: dict[str, Any]) -> ParsedDocument:
    sections = tuple(Section(tuple(str(h) for h in p), int(s), int(e)) for p, s, e in d["sections"])
    return ParsedDocument(str(d["name"]), str(d["kind"]), str(d["text"]), sections, str(d["title"]),
                          str(d.get("encoding", "")))


class _Worker:
    def __init__(self, memory_mb: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep), "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "core.ingest.sandbox", str(memory_mb)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=str(_ROOT), env=env)
        # The deadline is for parsing, not for start-up: wait for the worker's ready byte (imports done) first.
        if self._read(1, time.monotonic() + STARTUP_TIMEOUT_S) != b"R":
            self.kill()
            raise OSError("the parse worker did not start")

    def _read(self, n: int, deadline: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while len(buf) < n:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    return None
                piece = os.read(fd, n - len(buf))
                if not piece:
                    raise EOFError("worker closed its output")
                buf += piece
        return bytes(buf)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def peak_kb(self) -> int:
        """The worker's resident high-water mark (Linux /proc; 0 elsewhere or once it has gone)."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def request(self, header: dict[str, Any], data: bytes, deadline: float) -> dict[str, Any] | None:
        """The worker's reply, or None when the deadline passed (the caller kills the worker)."""
        head = json.dumps(header).encode()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(_HEAD.pack(len(head), len(data)) + head)
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        head_bytes = self._read(_LEN.size, deadline)
        if head_bytes is None:
            return None
        body = self._read(_LEN.unpack(head_bytes)[0], deadline)
        return None if body is None else json.loads(body)


class ParseSandbox:
    """parse() with a deadline and a memory bound per file; thread-safe (each caller borrows a worker)."""

    def __init__(self, *, timeout_s: float = PARSE_TIMEOUT_S, memory_mb: int = PARSE_MEMORY_MB,
                 max_workers: int = MAX_WORKERS) -> None:
        self.timeout_s = timeout_s
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
        kind_of(name)  # cheap refusals stay in this process: unknown type, over-long name, over the size limit
        if max_bytes is not None and len(data) > max_bytes:
            raise ParseError(f"{name}: {human_size(len(data))} is over the upload limit of {human_size(max_bytes)}")
        w = self._borrow()
        keep: _Worker | None = w
        try:
            try:
                reply = w.request({"name": name, "max_bytes": max_bytes}, data, time.monotonic() + self.timeout_s)
            except (OSError, EOFError, ValueError):
                reply = {"crash": True}
            if reply is None:
                keep = None
                self.peak_worker_kb = max(self.peak_worker_kb, w.peak_kb())
                w.kill()
                raise ParseError(f"{name}: took longer than {self.timeout_s:g} s to parse; skipped")
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
            return _doc_from_json(reply["doc"])
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
def _read_exact(stream: Any, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        piece = stream.read(n - len(out))
        if not piece:
            raise EOFError
        out += piece
    return bytes(out)


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
    out.write(b"R")
    out.flush()
    while True:
        try:
            hlen, dlen = _HEAD.unpack(_read_exact(inp, _HEAD.size))
            header = json.loads(_read_exact(inp, hlen))
        except EOFError:
            return
        fatal = False
        data = b""
        try:
            data = _read_exact(inp, dlen)
            reply: dict[str, Any] = {"doc": _doc_to_json(parse(header["name"], data, max_bytes=header["max_bytes"]))}
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
        out.write(_LEN.pack(len(payload)) + payload)
        out.flush()
        if fatal:
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else PARSE_MEMORY_MB)
