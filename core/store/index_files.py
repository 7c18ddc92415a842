"""Index files beside the database: arrays a query would otherwise rebuild from every chunk (the BM25 index, the
rerank IDF table), one file per (kind, workspace, key) and corpus version, so a fresh process loads instead of builds.

A file is written whole to a temporary name and renamed into place (a reader never meets half a file); writing one
version removes the older versions of the same slot. A file that cannot be read (cut short, another format) is a miss,
never an error: the caller builds and writes it again. Files carry the workspace tag, so a workspace delete finds them
(core/store/workspaces.py remove_workspace_files). Only core/store names these paths.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np

from core.store.workspaces import index_dir, workspace_tag


def encode_strings(items: list[str]) -> np.ndarray | None:
    """Strings as one UTF-8 byte array, newline-separated (compact: no padding to the longest). None when an item
    holds a newline, so it could not be split back."""
    if any("\n" in s for s in items):
        return None
    return np.frombuffer("\n".join(items).encode("utf-8"), dtype=np.uint8)


def decode_strings(raw: np.ndarray, n: int) -> list[str]:
    """encode_strings' inverse for `n` strings."""
    if n == 0:
        return []
    return raw.tobytes().decode("utf-8").split("\n")


class IndexFiles:
    """Read and write index arrays of a database file. An in-memory database has no folder (every call a miss, no
    write); a read-only one reads and never writes."""

    def __init__(self, db_path: str | Path, *, read_only: bool = False) -> None:
        self.folder = None if str(db_path) in ("", ":memory:") else index_dir(db_path)
        self.read_only = read_only

    def _stem(self, kind: str, workspace: str, key: str) -> str:
        slot = hashlib.sha256(f"{kind}\x1f{workspace}\x1f{key}".encode()).hexdigest()[:16]
        return f"{kind}-{workspace_tag(workspace)}-{slot}"

    def path(self, kind: str, workspace: str, key: str, version: int) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / f"{self._stem(kind, workspace, key)}-v{int(version)}.npz"

    def load(self, kind: str, workspace: str, key: str, version: int) -> dict[str, np.ndarray] | None:
        """The arrays saved for this slot at this corpus version, or None (no file, or one that cannot be read)."""
        path = self.path(kind, workspace, key, version)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                return {name: z[name] for name in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError):
            return None

    def save(self, kind: str, workspace: str, key: str, version: int, arrays: Mapping[str, np.ndarray]) -> bool:
        """Write this slot's arrays for this corpus version and remove its older versions; False when nothing was
        written (in-memory or read-only database, or the folder cannot be written)."""
        path = self.path(kind, workspace, key, version)
        if path is None or self.read_only:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    np.savez(f, **dict(arrays))
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        for old in path.parent.glob(f"{self._stem(kind, workspace, key)}-v*.npz"):
            if old != path:
                old.unlink(missing_ok=True)
        return True
