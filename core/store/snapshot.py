"""A read-only snapshot of a workbench database for other processes (Ray eval workers): checkpoint, copy, link.

Why a copy: DuckDB lets one process hold a file read-write OR several hold it read-only, never both, and the driver
of an evaluation keeps its database read-write (it stores the run at the end). So the driver checkpoints (the WAL is
folded into the file, so the copy is complete on its own), copies the database file into a folder, and gives the
token-vector file(s) beside it a hard link there (the file is append-only and the copied rows point only at bytes
written before the checkpoint, so a link is as good as a copy; it may be gigabytes). Workers open the copy with
read_only=True. DuckDB's EXPORT DATABASE would write every table out and a worker would import it again, far slower
than the copy before any token vector (bench/results/ray_eval.json, snapshot_methods).
On a cluster the folder must be on storage every node reads (an NFS or object-store mount), or be copied to each.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from core.store.db import StoreError
from core.store.tokvec_file import files_beside

if TYPE_CHECKING:
    from core.store import Store


def write_snapshot(store: "Store", folder: str | Path) -> Path:
    """Copy `store`'s database into `folder` (created; must not hold another snapshot) and return the copy's path.
    A read-write store is checkpointed first; nothing in the store changes."""
    src = store.path
    if src == ":memory:":
        raise StoreError("an in-memory database cannot be snapshotted for other processes: use a database file")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / Path(src).name
    if dest.exists():
        raise StoreError(f"{dest} already exists: a snapshot folder holds one snapshot")
    if store.read_only:
        _copy(src, dest)
    else:
        # Folds the WAL into the file and copies it under the write lock, so no commit of this process (another
        # Streamlit session, say) lands between the checkpoint and the copy.
        with store.db.writer() as cur:
            cur.execute("CHECKPOINT")
            _copy(src, dest)
    return dest


def _copy(src: str, dest: Path) -> None:
    shutil.copyfile(src, dest)
    if Path(src + ".wal").is_file():  # a read-only store cannot checkpoint: its WAL travels with the file
        shutil.copyfile(src + ".wal", str(dest) + ".wal")
    for tv in files_beside(src):
        target = dest.parent / (dest.name + tv.name[len(Path(src).name):])
        try:
            os.link(tv, target)
        except OSError:  # another file system (the folder on shared storage): copy instead
            shutil.copyfile(tv, target)


def remove_snapshot(folder: str | Path) -> None:
    """Delete a snapshot folder and everything in it (links only drop their own name; the original file stays)."""
    shutil.rmtree(folder, ignore_errors=True)
