"""Token vectors (late-interaction rerank) in an append-only file beside the DuckDB file, read through a memory map.

Why not DuckDB blobs: a corpus of a few thousand abstracts carries gigabytes of float16 token vectors, and writing them
as blobs took the ingesting process over its memory goal (DuckDB buffers what it writes). Here the bytes go straight to a
plain file and DuckDB keeps only a small row per text (offset, length, shape) in `token_vector_slots`, so memory stays
bounded by what a query reads (its <= 50 candidates) and the byte-bounded LRU in core/cascade/rerank.py.

Layout of one record (one text): token ids int32[n] | char spans int32[n, 2] | unit vectors float16[n, dim], each
record starting on an 8-byte boundary. The file only grows; compaction writes a new generation (`<db>.tokvec.<g>`).

Crash safety, the rule: bytes first (written and fsynced), the rows that point at them second (one transaction). So
- a crash after the bytes and before the commit leaves trailing bytes no row points at: opening read-write cuts them;
- rows never point at unwritten bytes; a file cut short by hand makes its dangling rows invisible (and, read-write,
  deleted on open), so those texts are recomputed rather than read as garbage;
- compaction writes generation g+1 completely, then commits the new offsets and the generation in one transaction,
  then removes generation g; a crash in between leaves a stray file that the next read-write open removes.

Only core/store touches this file (and DuckDB): callers see core.store.Caches.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

ALIGN = 8
# Per path, one lock for every TokenVectorFile of this process: two Stores opened on the same database (DuckDB shares
# one instance between them) must not both append at the same offset.
_PATH_LOCKS: dict[str, threading.RLock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def path_lock(path: str) -> threading.RLock:
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(path, threading.RLock())


def record_bytes(n: int, dim: int) -> int:
    """Length of one record without padding."""
    return n * 4 + n * 8 + n * dim * 2


def _padded(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def encode_record(ids: np.ndarray, vecs: np.ndarray, spans: np.ndarray) -> tuple[bytes, int, int]:
    """(bytes padded to ALIGN, n tokens, dim)."""
    vecs = np.asarray(vecs, dtype=np.float16)
    n, dim = (int(vecs.shape[0]), int(vecs.shape[1])) if vecs.ndim == 2 else (0, 0)
    ids = np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)
    spans = np.ascontiguousarray(spans, dtype=np.int32).reshape(-1, 2)
    if ids.shape[0] != n or spans.shape[0] != n:
        raise ValueError(f"token record: {ids.shape[0]} ids and {spans.shape[0]} spans for {n} vectors")
    raw = ids.tobytes() + spans.tobytes() + np.ascontiguousarray(vecs).tobytes()
    return raw + b"\0" * (_padded(len(raw)) - len(raw)), n, dim


def decode_record(buf: bytes | memoryview, n: int, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copies, so the caller may keep them after the map moves or the page is dropped."""
    ids = np.frombuffer(buf, dtype=np.int32, count=n, offset=0).copy()
    spans = np.frombuffer(buf, dtype=np.int32, count=2 * n, offset=4 * n).reshape(n, 2).copy()
    vecs = np.frombuffer(buf, dtype=np.float16, count=n * dim, offset=12 * n).reshape(n, dim).copy()
    return ids, vecs, spans


def file_path(db_path: str, generation: int) -> Path:
    return Path(f"{db_path}.tokvec.{generation}")


def files_beside(db_path: str) -> list[Path]:
    """Every generation's file of this database (a snapshot links them; the copied database says which is read)."""
    base = Path(db_path)
    prefix = base.name + ".tokvec."
    return sorted(p for p in base.parent.glob(prefix + "*") if p.name[len(prefix):].isdigit())


def stray_files(db_path: str, generation: int) -> list[Path]:
    """Generations other than the current one (left by a compaction that crashed before or after its commit)."""
    base = Path(db_path)
    prefix = base.name + ".tokvec."
    out = []
    for p in base.parent.glob(base.name + ".tokvec.*"):
        tail = p.name[len(prefix):]
        if tail.isdigit() and int(tail) != generation:
            out.append(p)
    return out


class TokenVectorFile:
    """One generation of the append-only file. Appends go through a file handle; reads through a read-only memory
    map (remapped when the file has grown), and the pages a read touched are dropped from this process afterwards
    (MADV_DONTNEED): the OS page cache keeps them, but a run over the whole corpus does not count the whole file as
    its resident memory. `path` None: an anonymous temporary file (an in-memory database has no folder)."""

    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._fh = None
        if path is None:
            self._fh = tempfile.TemporaryFile(prefix="rag-tokvec-")
        elif not read_only:
            self._fh = open(path, "a+b")  # created if missing; a+ always appends
        elif path.is_file():
            self._fh = open(path, "rb")
        self._map: mmap.mmap | None = None
        self._mapped = 0
        self._lock = threading.Lock()

    # -- size and appends ------------------------------------------------------------------------------------------
    def size(self) -> int:
        if self._fh is None:
            return 0
        return os.fstat(self._fh.fileno()).st_size

    def truncate(self, size: int) -> None:
        """Cut trailing bytes no row points at (read-write open only)."""
        assert self._fh is not None and not self.read_only
        with self._lock:
            self._unmap()
            self._fh.truncate(size)
            os.fsync(self._fh.fileno())

    def append(self, records: Sequence[bytes]) -> list[int]:
        """Write the records at the end, fsync, and return their offsets. Only after this returns may rows that
        point at them be committed."""
        if self.read_only or self._fh is None:
            raise RuntimeError("token vector file is read-only")
        with self._lock:
            start = self.size()
            if start % ALIGN:  # a torn earlier write that was not cut on open: start on a boundary anyway
                pad = ALIGN - start % ALIGN
                self._fh.write(b"\0" * pad)
                start += pad
            offsets, at = [], start
            for r in records:
                offsets.append(at)
                at += len(r)
            self._fh.write(b"".join(records))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            return offsets

    # -- reads -----------------------------------------------------------------------------------------------------
    def _unmap(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
            self._mapped = 0

    def _ensure_mapped(self, end: int) -> mmap.mmap | None:
        if self._map is not None and end <= self._mapped:
            return self._map
        size = self.size()
        if size == 0 or end > size:
            return None if end > size else self._map
        self._unmap()
        self._map = mmap.mmap(self._fh.fileno(), size, access=mmap.ACCESS_READ)  # type: ignore[union-attr]
        self._mapped = size
        return self._map

    def read(self, slots: Iterable[tuple[str, int, int, int, int]]) -> Iterator[tuple[str, tuple[np.ndarray, ...]]]:
        """(key, offset, nbytes, n, dim) -> (key, (ids, vecs, spans)), in file order (one pass over the map). A slot
        reaching past the end of the file (cut short by hand) is skipped: the caller recomputes it."""
        ordered = sorted(slots, key=lambda s: s[1])
        if not ordered or self._fh is None:
            return iter(())
        out: list[tuple[str, tuple[np.ndarray, ...]]] = []
        with self._lock:
            end = max(o + b for _, o, b, _, _ in ordered)
            m = self._ensure_mapped(min(end, self.size()))
            if m is None:
                return iter(())
            page = mmap.PAGESIZE
            for key, off, nb, n, dim in ordered:
                if off + nb > self._mapped:
                    continue
                out.append((key, decode_record(m[off: off + nb], n, dim)))
                lo = off // page * page
                try:
                    m.madvise(mmap.MADV_DONTNEED, lo, min(self._mapped, off + nb) - lo)
                except (AttributeError, OSError, ValueError):  # not every platform has it; only memory accounting
                    pass
        return iter(out)

    def close(self) -> None:
        with self._lock:
            self._unmap()
            if self._fh is not None:
                self._fh.close()
                self._fh = None
