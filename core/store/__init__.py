"""The only package that imports duckdb: one Database (connection, write lock, schema + version) shared by role
repositories, each behind a narrow Protocol declared where it is used. Typed records out (core/types.py), no
technique logic in here. See core/store/db.py for the single-writer / many-readers rule across processes."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from core.store import (answers, calibrations, caches, collections, corpus, golden, graph, graph_review, ledger, raptor,
                        runs, sweeps, tables)
from core.store.answers import Answers
from core.store.caches import Caches
from core.store.calibrations import Calibrations
from core.store.collections import Collections
from core.store.corpus import Corpus
from core.store.db import SCHEMA_VERSION, CompactReport, Database, StoreError
from core.store.golden import Golden
from core.store.graph import Graph
from core.store.graph_review import Communities, Review
from core.store.index_files import IndexFiles
from core.store.ledger import Ledger
from core.store.raptor import Raptor
from core.store.runs import Runs
from core.store.sql import SqlRefused, SqlSandbox
from core.store.sweeps import Sweeps
from core.store.tables import Tables
from core.store.tokvec_file import files_beside as token_vector_files
from core.store.workspaces import Workspaces, remove_workspace_files
from core.types import DocumentRow

__all__ = ["SCHEMA_VERSION", "Caches", "Calibrations", "Collections", "CompactReport", "Communities", "Corpus", "Database",
           "DocumentRow", "Golden", "Graph", "IndexFiles", "Ledger", "Raptor", "Review", "Runs", "Store", "StoreError",
           "Sweeps", "SqlRefused", "SqlSandbox", "Tables", "token_vector_files"]

TABLES: tuple[str, ...] = (*corpus.TABLES, *caches.TABLES, *runs.TABLES, *ledger.TABLES, *graph.TABLES,
                           *graph_review.TABLES, *answers.TABLES, *golden.TABLES, *calibrations.TABLES, *sweeps.TABLES,
                           *tables.TABLES, *raptor.TABLES, *collections.TABLES)
MIGRATIONS: tuple[tuple[int, str], ...] = (*ledger.MIGRATIONS, *corpus.MIGRATIONS)


class Store:
    """A workbench database: the repositories over one shared connection. Pass a stage the repository (or the
    Protocol it needs), never the Store."""

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False) -> None:
        self.db = Database(path, read_only=read_only, tables=TABLES, migrations=MIGRATIONS)
        self.corpus = Corpus(self.db)
        self.caches = Caches(self.db)
        self.ledger = Ledger(self.db)
        self.runs = Runs(self.db)
        self.graph = Graph(self.db)
        self.review = Review(self.db)
        self.communities = Communities(self.db)
        self.answers = Answers(self.db)
        self.workspaces_repo = Workspaces(self.db)
        self.golden = Golden(self.db)
        self.calibrations = Calibrations(self.db)
        self.sweeps = Sweeps(self.db)
        self.tables = Tables(self.db)
        self.raptor = Raptor(self.db)
        self.collections = Collections(self.db)
        self.index_files = IndexFiles(self.db.path, read_only=self.db.read_only)  # BM25 / IDF arrays per version
        self.notices: list[str] = []  # what opening did on its own (a delete an earlier run left unfinished)
        if not self.read_only and self.db.first_open:
            for ws in self.workspaces_repo.pending_deletes():
                self.delete_workspace(ws, self.notices.append)
                self.notices.append(f"finished the delete of workspace '{ws}' that an earlier run left unfinished")

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Store:
        """Open a database file; `read_only` never writes and can run beside other read-only processes."""
        return cls(path, read_only=read_only)

    @property
    def path(self) -> str:
        return self.db.path

    @property
    def read_only(self) -> bool:
        return self.db.read_only

    def schema_version(self) -> int:
        return self.db.schema_version()

    def ensure_workspace(self, workspace: str, name: str | None = None) -> None:
        self.db.ensure_workspace(workspace, name)

    def workspaces(self) -> list[str]:
        return self.db.workspaces()

    def compact(self, progress: Callable[[str], None] | None = None) -> CompactReport:
        """Rewrite the files with live rows only (after a workspace delete): the token-vector file when it holds
        dead records, then the database file (core/store/db.py Database.compact)."""
        if self.path != ":memory:" and not self.read_only and token_vector_files(self.path):
            space = self.caches.token_vector_space()
            if space["dead_bytes"] > 0 or space["legacy_rows"] > 0:
                if progress:
                    progress(f"compacting token vectors: {space['dead_bytes'] / 2**20:,.1f} MiB of deleted records…")
                self.caches.compact_token_vectors()
        return self.db.compact(progress)

    def delete_workspace(self, workspace: str, progress: Callable[[str], None] | None = None) -> dict[str, int]:
        """Delete a workspace: journal it (fsynced), delete its rows (one transaction), remove its files on disk
        (sessions, configs, ANN graphs), rewrite the files so no byte of it stays (compact), clear the journal. A
        kill at any step leaves the journal, and the next read-write open (or this call again) finishes the rest.
        Returns rows deleted per table (empty when an earlier, interrupted run had deleted them)."""
        repo = self.workspaces_repo
        pending = workspace in repo.pending_deletes()
        if not pending and not repo.exists(workspace):
            raise StoreError(f"no workspace '{workspace}'")
        repo.begin_delete(workspace)
        deleted = repo.delete(workspace, missing_ok=True)
        if progress:
            progress(f"deleted {sum(deleted.values()):,} rows of '{workspace}'")
        remove_workspace_files(self.path, workspace)
        self.compact(progress)
        repo.end_delete(workspace)
        return deleted

    def close(self) -> None:
        self.caches.close()  # the token-vector file beside the database (core/store/tokvec_file.py)
        self.db.close()
