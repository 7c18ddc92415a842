"""A child Python process behind two pipes, for work that must not take the caller down with it (the parse sandbox
of core/ingest/sandbox.py, the SQL sandbox of core/store/sql.py).

Both directions carry frames: two big-endian lengths (JSON header, raw bytes), the header, the bytes. The worker
writes one ready byte b"R" once its imports are done, so a deadline counts work, not start-up. The caller reads
with a deadline (wall time, or the worker's CPU time with a wall backstop) and kills the worker when it passes.
Imports nothing of core: the store and the stage packages both use it.
"""
from __future__ import annotations

import json
import os
import selectors
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

FRAME = struct.Struct(">II")  # header length, data length
ROOT = Path(__file__).resolve().parents[2]
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Deadline(Protocol):
    def expired(self) -> bool: ...

    def poll_s(self) -> float: ...


@dataclass
class WallDeadline:
    """`seconds` of wall time from now."""

    seconds: float
    start: float = field(default_factory=time.monotonic)

    def expired(self) -> bool:
        return time.monotonic() - self.start >= self.seconds

    def poll_s(self) -> float:
        return max(0.01, min(0.5, self.seconds - (time.monotonic() - self.start)))


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc/PID/stat), or None where unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm) ": state is field 3, utime 14, stime 15
    try:
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (IndexError, ValueError):
        return None


@dataclass
class CpuDeadline:
    """`cpu_s` seconds of the worker's CPU time since the request began (wall time when its CPU time cannot be
    read), or `wall_s` seconds of wall time whatever the CPU did: a worker starved of CPU on a busy machine is not
    stopped early, one blocked without using CPU cannot hold the caller forever."""

    pid: int
    cpu_s: float
    wall_s: float
    start_wall: float = field(default_factory=time.monotonic)
    start_cpu: float | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        self.start_cpu = process_cpu_s(self.pid)

    def expired(self) -> bool:
        wall = time.monotonic() - self.start_wall
        if wall >= self.wall_s:
            self.reason = "wall"
            return True
        cpu = process_cpu_s(self.pid) if self.start_cpu is not None else None
        used = cpu - self.start_cpu if cpu is not None and self.start_cpu is not None else wall
        if used >= self.cpu_s:
            self.reason = "cpu"
            return True
        return False

    def poll_s(self) -> float:
        """How long to wait for output before looking at the clocks again."""
        return max(0.01, min(0.2, self.cpu_s / 4, self.wall_s - (time.monotonic() - self.start_wall)))


class Worker:
    """`python -m MODULE ARG` in the project root, one thread of OpenMP, stderr dropped; `what` names it in errors."""

    def __init__(self, module: str, arg: str, *, what: str, startup_s: float) -> None:
        self.what = what
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep), "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", module, arg], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT), env=env)
        if self._read(1, WallDeadline(startup_s)) != b"R":
            self.kill()
            raise OSError(f"the {what} did not start")

    def _read(self, n: int, deadline: Deadline) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while len(buf) < n:
                if deadline.expired():
                    return None
                if not sel.select(timeout=deadline.poll_s()):
                    continue
                piece = os.read(fd, min(n - len(buf), 1 << 20))
                if not piece:
                    raise EOFError(f"the {self.what} closed its output")
                buf += piece
        return bytes(buf)

    def request(self, header: dict[str, Any], data: bytes, deadline: Deadline) -> tuple[dict[str, Any] | None, bytes]:
        """(reply header, reply bytes), or (None, b"") when the deadline passed (the caller kills the worker)."""
        head = json.dumps(header).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(FRAME.pack(len(head), len(data)) + head)
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        lens = self._read(FRAME.size, deadline)
        if lens is None:
            return None, b""
        hlen, dlen = FRAME.unpack(lens)
        body = self._read(hlen, deadline)
        payload = self._read(dlen, deadline) if body is not None else None
        if body is None or payload is None:
            return None, b""
        return json.loads(body), payload

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


# -- the worker side ---------------------------------------------------------------------------------------------
def read_exact(stream: BinaryIO, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        piece = stream.read(n - len(out))
        if not piece:
            raise EOFError
        out += piece
    return bytes(out)


def read_request(stream: BinaryIO) -> tuple[dict[str, Any], int]:
    """The next request's header and the length of its data (read it with read_exact); EOFError at the end."""
    hlen, dlen = FRAME.unpack(read_exact(stream, FRAME.size))
    return json.loads(read_exact(stream, hlen)), dlen


def write_reply(stream: BinaryIO, head: bytes, payload: bytes = b"") -> None:
    stream.write(FRAME.pack(len(head), len(payload)) + head)
    stream.write(payload)
    stream.flush()


def ready(stream: BinaryIO) -> None:
    stream.write(b"R")
    stream.flush()
