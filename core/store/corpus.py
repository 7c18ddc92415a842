"""Corpus repository: documents, chunks, their vectors and the workspace's corpus version."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from core.store.db import (
    Cursor,
    Database,
    StoreError,
    insert_rows,
    insert_workspace,
    now,
    register_rows,
    vector_frame,
)
from core.text import guess_language
from core.types import DEFAULT_WORKSPACE, Chunk, Document, DocumentRow, Replacement, VectorSet

TABLES: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS documents (
        workspace_id VARCHAR, doc_id VARCHAR, name VARCHAR, kind VARCHAR, size_bytes BIGINT,
        content_hash VARCHAR, lang VARCHAR, title VARCHAR, text VARCHAR, chunker VARCHAR, n_chunks INTEGER,
        ingested_at TIMESTAMP, PRIMARY KEY (workspace_id, doc_id))""",
    """CREATE TABLE IF NOT EXISTS chunks (
        workspace_id VARCHAR, chunk_id VARCHAR, doc_id VARCHAR, ordinal INTEGER, text VARCHAR,
        start_char INTEGER, end_char INTEGER, heading_path VARCHAR[], n_tokens INTEGER, lang VARCHAR,
        language VARCHAR, PRIMARY KEY (workspace_id, chunk_id))""",
    # variant names the text that was embedded: 'raw', or a contextualised variant ('heuristic', 'llm', ...).
    """CREATE TABLE IF NOT EXISTS vectors (
        workspace_id VARCHAR, chunk_id VARCHAR, model_id VARCHAR, variant VARCHAR, dim INTEGER, vec FLOAT[],
        PRIMARY KEY (workspace_id, chunk_id, model_id, variant))""",
)

# v4: `language` is the chunk's language as core.text.guess_language reads it (Latin-script text told apart by its
# function words; `lang` keeps the script-level en/ru/other the stages use), written with the chunk so a query counts
# the corpus's languages with one GROUP BY instead of reading every chunk. Rows of older files are NULL until filled.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (4, "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS language VARCHAR"),
)

_DOC_COLS = "doc_id, name, kind, size_bytes, content_hash, lang, title, chunker, n_chunks, ingested_at"
_CHUNK_COLS = "chunk_id, doc_id, ordinal, text, start_char, end_char, heading_path, n_tokens, lang"
_COUNTED = frozenset({"documents", "chunks", "vectors"})
# Every column, in table order (bulk inserts name them).
_DOC_TABLE_COLS = ("workspace_id", "doc_id", "name", "kind", "size_bytes", "content_hash", "lang", "title", "text",
                   "chunker", "n_chunks", "ingested_at")
_CHUNK_TABLE_COLS = ("workspace_id", "chunk_id", "doc_id", "ordinal", "text", "start_char", "end_char",
                     "heading_path", "n_tokens", "lang", "language")


# Documents used to be keyed by their base name; they are keyed by their path relative to the ingest root now. This
# meta row records when a database first met this code (a new database: when it was made). A document ingested
# before it holds a base name, and find_document_for_key maps it: `sub/report.md` with no document of that key
# takes the pre-path document `report.md` as its earlier version (renamed in place when unchanged, replaced when
# changed), once. Documents never ingested again keep their base names and keep working.
PATH_KEYS_SINCE = "doc_keys_are_paths_since"


def chunk_language(chunk: Chunk) -> str:
    """The language a chunk is counted under: the one ingest recorded (chunk.lang), Latin-script chunks told apart by
    their function words (ingest records every Latin-script text as 'en')."""
    return guess_language(chunk.text) if chunk.lang == "en" else chunk.lang


def _chunk(row: tuple[Any, ...]) -> Chunk:
    cid, did, ordinal, text, s, e, hp, nt, lang = row
    return Chunk(cid, did, ordinal, text, s, e, tuple(hp or ()), nt, lang)


def bump_version(cur: Cursor, workspace: str, by: int = 1) -> None:
    cur.execute("UPDATE workspaces SET corpus_version = corpus_version + ? WHERE workspace_id = ?", [by, workspace])


def write_vectors(cur: Cursor, ws: str, chunk_ids: Sequence[str], vectors: np.ndarray, model_id: str,
                  variant: str) -> None:
    dim = int(vectors.shape[1])
    cur.register("_new_vectors", vector_frame(chunk_ids, vectors))
    try:
        cur.execute("INSERT OR REPLACE INTO vectors SELECT ?, key, ?, ?, ?, vec FROM _new_vectors",
                    [ws, model_id, variant, dim])
    finally:
        cur.unregister("_new_vectors")


def _delete_doc(cur: Cursor, ws: str, doc_id: str | Replacement) -> None:
    """Remove a stored document, its chunks and everything derived from them, in the caller's transaction. Given a
    Replacement, the chunk ids it keeps keep their vectors (all but the whole-document variants) and, with
    `keep_contexts`, their contexts and contextual vectors; the new version's rows are written after this."""
    # Contexts live in the ledger's tables but mean nothing without their chunk: they go in the same transaction.
    plan = doc_id if isinstance(doc_id, Replacement) else Replacement(doc_id)
    params: list[Any] = [ws, ws, plan.doc_id]
    of_doc = "chunk_id IN (SELECT chunk_id FROM chunks WHERE workspace_id = ? AND doc_id = ?)"
    keep = ""
    if plan.keep:
        register_rows(cur, "_kept_ids", ("chunk_id",), [(c,) for c in sorted(plan.keep)])
        keep = " AND chunk_id NOT IN (SELECT chunk_id FROM _kept_ids)"
    try:
        cur.execute(f"DELETE FROM vectors WHERE workspace_id = ? AND {of_doc}{keep}", params)
        if plan.whole_doc_variants:
            cur.execute(f"DELETE FROM vectors WHERE workspace_id = ? AND {of_doc} AND list_contains(?, variant)",
                        [*params, list(plan.whole_doc_variants)])
        context_scope = keep if plan.keep_contexts else ""
        for table in ("chunk_contexts", "chunk_context_stale"):
            cur.execute(f"DELETE FROM {table} WHERE workspace_id = ? AND {of_doc}{context_scope}", params)
        if plan.keep and not plan.keep_contexts:
            # The kept chunks' contexts were dropped: so are the vectors embedded from context + chunk.
            cur.execute(f"DELETE FROM vectors WHERE workspace_id = ? AND {of_doc} AND variant <> 'raw'", params)
        if plan.keep and plan.keep_contexts and plan.stale_variants:
            cur.execute("INSERT OR REPLACE INTO chunk_context_stale SELECT workspace_id, chunk_id, variant, ? FROM "
                        f"chunk_contexts WHERE workspace_id = ? AND {of_doc} AND list_contains(?, variant)"
                        f"{keep.replace('NOT IN', 'IN')}", [now(), *params, list(plan.stale_variants)])
    finally:
        if plan.keep:
            cur.unregister("_kept_ids")
    cur.execute("DELETE FROM chunks WHERE workspace_id = ? AND doc_id = ?", [ws, plan.doc_id])
    cur.execute("DELETE FROM documents WHERE workspace_id = ? AND doc_id = ?", [ws, plan.doc_id])


class Corpus:
    """Implements core.cascade.expand.DocumentSource, core.cascade.rerank.CorpusSource and the retrieval stages' ChunkSource."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._versions: dict[str, tuple[int, int]] = {}  # workspace -> (write generation, corpus version)
        if not db.read_only and db.cursor().execute("SELECT 1 FROM meta WHERE key = ?", [PATH_KEYS_SINCE]).fetchone() \
                is None:  # read first: an open of a database that has it writes nothing
            with db.writer() as cur:
                cur.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING", [PATH_KEYS_SINCE, str(now())])

    # -- version ----------------------------------------------------------------------------------------------
    def corpus_version(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        # Memoised per write generation: a query asks several times (index freshness, rerank, graph, answer cache),
        # and each read takes a cursor and a statement.
        gen = self._db.generation
        got = self._versions.get(workspace)
        if got is not None and got[0] == gen:
            return got[1]
        cur = self._db.cursor()
        try:
            row = cur.execute("SELECT corpus_version FROM workspaces WHERE workspace_id = ?", [workspace]).fetchone()
        finally:
            cur.close()
        version = int(row[0]) if row else 0
        self._versions[workspace] = (gen, version)
        return version

    # -- writes -----------------------------------------------------------------------------------------------
    def put_document(self, doc: Document, chunks: Sequence[Chunk], vectors: np.ndarray | None, model_id: str, *,
                     replace_doc_id: str | Replacement | None = None) -> None:
        """Write one document, its chunks and their raw vectors in a single transaction (all or nothing).
        `replace_doc_id` removes an older version of the same file inside the same transaction (a Replacement keeps
        the rows of the chunks it names: core/ingest/identity.py)."""
        ws = doc.workspace
        if vectors is not None and len(vectors) != len(chunks):
            raise StoreError(f"{doc.name}: {len(chunks)} chunks but {len(vectors)} vectors")
        with self._db.transaction() as cur:
            # The workspace row inside the document's transaction: on its own it was one more commit (an fsync)
            # per file.
            insert_workspace(cur, ws)
            if replace_doc_id is not None:
                _delete_doc(cur, ws, replace_doc_id)
            cur.execute(
                "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [ws, doc.doc_id, doc.name, doc.kind, doc.size_bytes, doc.content_hash, doc.lang, doc.title,
                 doc.text, doc.chunker, len(chunks), now()],
            )
            if chunks:  # one bulk insert, as put_documents makes: executemany binds row by row, slow for a big file
                insert_rows(cur, "chunks", _CHUNK_TABLE_COLS,
                            [[ws, c.chunk_id, c.doc_id, c.ordinal, c.text, c.start, c.end, list(c.heading_path),
                              c.n_tokens, c.lang, chunk_language(c)] for c in chunks])
            if vectors is not None and len(chunks):
                write_vectors(cur, ws, [c.chunk_id for c in chunks], vectors, model_id, "raw")
            bump_version(cur, ws)

    def put_documents(self, items: Sequence[tuple[Document, Sequence[Chunk], np.ndarray | None,
                                              str | Replacement | None]],
                      model_id: str) -> None:
        """put_document for several documents (document, chunks, vectors, replace_doc_id) in ONE transaction, all or
        nothing, with one bulk insert per table. Why: per document, put_document's seven statements and its commit
        were most of the ingest path's time outside the model (bench/ingest.py profile). Still no document is ever
        half-written: a failure rolls back every document of the call (ingest then writes them one by one, so only
        the faulty file is reported)."""
        if not items:
            return
        ws = items[0][0].workspace
        for doc, chunks, vectors, _ in items:
            if doc.workspace != ws:
                raise StoreError("put_documents writes one workspace at a time")
            if vectors is not None and len(vectors) != len(chunks):
                raise StoreError(f"{doc.name}: {len(chunks)} chunks but {len(vectors)} vectors")
        stamp = now()
        docs = [[ws, d.doc_id, d.name, d.kind, d.size_bytes, d.content_hash, d.lang, d.title, d.text, d.chunker,
                 len(cs), stamp] for d, cs, _, _ in items]
        chunk_rows = [[ws, c.chunk_id, c.doc_id, c.ordinal, c.text, c.start, c.end, list(c.heading_path), c.n_tokens,
                       c.lang, chunk_language(c)] for _, cs, _, _ in items for c in cs]
        with_vecs = [(cs, v) for _, cs, v, _ in items if v is not None and len(cs)]
        with self._db.transaction() as cur:
            insert_workspace(cur, ws)
            for _, _, _, old in items:
                if old is not None:
                    _delete_doc(cur, ws, old)
            insert_rows(cur, "documents", _DOC_TABLE_COLS, docs)
            insert_rows(cur, "chunks", _CHUNK_TABLE_COLS, chunk_rows)
            if with_vecs:
                write_vectors(cur, ws, [c.chunk_id for cs, _ in with_vecs for c in cs],
                              np.concatenate([np.asarray(v, dtype=np.float32) for _, v in with_vecs]), model_id, "raw")
            bump_version(cur, ws, len(items))  # one step per document, as put_document makes: the same versions

    def put_vectors(self, chunk_ids: Sequence[str], vectors: np.ndarray, model_id: str, variant: str = "raw",
                    workspace: str = DEFAULT_WORKSPACE) -> None:
        """Add vectors for existing chunks (a newly chosen model or a new text variant)."""
        if not len(chunk_ids):
            return
        with self._db.transaction() as cur:
            write_vectors(cur, workspace, chunk_ids, vectors, model_id, variant)

    def delete_document(self, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> bool:
        with self._db.transaction() as cur:
            found = cur.execute("SELECT count(*) FROM documents WHERE workspace_id = ? AND doc_id = ?",
                                [workspace, doc_id]).fetchone()[0]
            if not found:
                return False
            _delete_doc(cur, workspace, doc_id)
            bump_version(cur, workspace)
        return True

    # -- documents --------------------------------------------------------------------------------------------
    def documents(self, workspace: str = DEFAULT_WORKSPACE) -> list[DocumentRow]:
        rows = self._db.cursor().execute(
            f"SELECT {_DOC_COLS} FROM documents WHERE workspace_id = ? ORDER BY name, doc_id", [workspace]).fetchall()
        return [DocumentRow(*r) for r in rows]

    def document_titles(self, doc_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, str]:
        """doc_id -> title (the file name when the document has no title), for the documents asked about."""
        if not doc_ids:
            return {}
        rows = self._db.cursor().execute(
            "SELECT doc_id, coalesce(nullif(title, ''), name) FROM documents WHERE workspace_id = ? "
            "AND doc_id IN (SELECT unnest(?))", [workspace, list(dict.fromkeys(doc_ids))]).fetchall()
        return {r[0]: r[1] for r in rows}

    def document_heads(self, doc_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE, chars: int = 400
                       ) -> dict[str, tuple[str, str, str]]:
        """doc_id -> (file name, title, the text's first `chars` characters), for the documents asked about."""
        if not doc_ids:
            return {}
        rows = self._db.cursor().execute(
            "SELECT doc_id, name, coalesce(title, ''), substr(coalesce(text, ''), 1, ?) FROM documents "
            "WHERE workspace_id = ? AND doc_id IN (SELECT unnest(?))",
            [chars, workspace, list(dict.fromkeys(doc_ids))]).fetchall()
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def find_document_by_name(self, name: str, workspace: str = DEFAULT_WORKSPACE) -> DocumentRow | None:
        # Filtered in SQL: ingest asks once per file, and listing every document each time grew as N^2.
        row = self._db.cursor().execute(
            f"SELECT {_DOC_COLS} FROM documents WHERE workspace_id = ? AND name = ? ORDER BY doc_id LIMIT 1",
            [workspace, name]).fetchone()
        return DocumentRow(*row) if row else None

    def find_document_for_key(self, key: str, workspace: str = DEFAULT_WORKSPACE, *, legacy: bool = True
                              ) -> DocumentRow | None:
        """The document stored under `key` (a path relative to the ingest root); failing that, with `legacy` and a
        key inside a folder, the document a database from before path keys holds under the key's base name (see
        PATH_KEYS_SINCE): the caller treats it as this file's earlier version, so the key moves to the path."""
        found = self.find_document_by_name(key, workspace)
        base = key.rsplit("/", 1)[-1]
        if found is not None or not legacy or base == key:
            return found
        row = self._db.cursor().execute(
            f"SELECT {_DOC_COLS} FROM documents WHERE workspace_id = ? AND name = ? AND ingested_at < "
            "(SELECT CAST(value AS TIMESTAMP) FROM meta WHERE key = ?) ORDER BY doc_id LIMIT 1",
            [workspace, base, PATH_KEYS_SINCE]).fetchone()
        return DocumentRow(*row) if row else None

    def rename_document(self, doc_id: str, name: str, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Give a stored document a new key (a pre-path base name becoming its path); chunks, vectors and contexts
        stay. The corpus version moves: names are shown with answers."""
        with self._db.transaction() as cur:
            cur.execute("UPDATE documents SET name = ? WHERE workspace_id = ? AND doc_id = ?", [name, workspace, doc_id])
            bump_version(cur, workspace)

    def document_text(self, doc_id: str, workspace: str = DEFAULT_WORKSPACE) -> str | None:
        row = self._db.cursor().execute(
            "SELECT text FROM documents WHERE workspace_id = ? AND doc_id = ?", [workspace, doc_id]).fetchone()
        return row[0] if row else None

    def count(self, table: str, workspace: str = DEFAULT_WORKSPACE) -> int:
        """Rows of 'documents', 'chunks' or 'vectors' in the workspace."""
        if table not in _COUNTED:
            raise StoreError(f"unknown table {table!r} (one of {', '.join(sorted(_COUNTED))})")
        return int(self._db.cursor().execute(
            f"SELECT count(*) FROM {table} WHERE workspace_id = ?", [workspace]).fetchone()[0])

    def chunk_chars(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        """Characters of all the workspace's chunks (what a build that reads every chunk reads)."""
        return int(self._db.cursor().execute(
            "SELECT coalesce(sum(length(text)), 0) FROM chunks WHERE workspace_id = ?", [workspace]).fetchone()[0])

    # -- chunks -----------------------------------------------------------------------------------------------
    def chunk_fingerprint(self, workspace: str = DEFAULT_WORKSPACE) -> str:
        """The workspace's chunk count and an order-free hash of its chunk ids (content-defined: core/ingest/identity.py):
        an index file saved for one set of chunks is not taken for another (a database replaced at the same path
        restarts its corpus versions)."""
        n, h = self._db.cursor().execute("SELECT count(*), coalesce(bit_xor(hash(chunk_id)), 0) FROM chunks "
                                         "WHERE workspace_id = ?", [workspace]).fetchone()
        return f"{int(n)}:{int(h)}"

    def language_counts(self, workspace: str = DEFAULT_WORKSPACE) -> dict[str, int]:
        """Chunks per language (chunk_language), from the column ingest wrote; rows a file written before v4 left
        without one are guessed here (and written, on a read-write store), once."""
        cur = self._db.cursor()
        counts = {str(lang): int(n) for lang, n in cur.execute(
            "SELECT language, count(*) FROM chunks WHERE workspace_id = ? AND language IS NOT NULL GROUP BY 1",
            [workspace]).fetchall()}
        rows = cur.execute(f"SELECT {_CHUNK_COLS} FROM chunks WHERE workspace_id = ? AND language IS NULL",
                           [workspace]).fetchall()
        if rows:
            guessed = [(c.chunk_id, chunk_language(c)) for c in map(_chunk, rows)]
            for _, lang in guessed:
                counts[lang] = counts.get(lang, 0) + 1
            if not self._db.read_only:
                with self._db.transaction() as wcur:
                    register_rows(wcur, "_langs", ("chunk_id", "language"), guessed)
                    wcur.execute("UPDATE chunks SET language = l.language FROM _langs l WHERE chunks.workspace_id = ? "
                                 "AND chunks.chunk_id = l.chunk_id AND chunks.language IS NULL", [workspace])
        return counts

    def chunks(self, workspace: str = DEFAULT_WORKSPACE, doc_id: str | None = None) -> list[Chunk]:
        sql = f"SELECT {_CHUNK_COLS} FROM chunks WHERE workspace_id = ?"
        params: list[Any] = [workspace]
        if doc_id is not None:
            sql += " AND doc_id = ?"
            params.append(doc_id)
        sql += " ORDER BY doc_id, ordinal"
        return [_chunk(r) for r in self._db.cursor().execute(sql, params).fetchall()]

    def chunks_by_id(self, chunk_ids: Sequence[str], workspace: str = DEFAULT_WORKSPACE) -> dict[str, Chunk]:
        if not chunk_ids:
            return {}
        rows = self._db.cursor().execute(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE workspace_id = ? AND list_contains(?, chunk_id)",
            [workspace, list(chunk_ids)]).fetchall()
        return {r[0]: _chunk(r) for r in rows}

    def chunk_homes(self, chunk_ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The workspaces that hold each of these chunk ids now (ids no workspace holds are left out)."""
        if not chunk_ids:
            return {}
        out: dict[str, set[str]] = {}
        for cid, ws in self._db.cursor().execute(
                "SELECT DISTINCT chunk_id, workspace_id FROM chunks WHERE list_contains(?, chunk_id)",
                [list(dict.fromkeys(chunk_ids))]).fetchall():
            out.setdefault(str(cid), set()).add(str(ws))
        return {k: frozenset(v) for k, v in out.items()}

    # -- vectors ----------------------------------------------------------------------------------------------
    def vectors(self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE
                ) -> tuple[list[str], np.ndarray]:
        """All vectors of one model and variant, in chunk order. Vectors of other models are never returned."""
        rows = self._db.cursor().execute(
            "SELECT v.chunk_id, v.vec FROM vectors v JOIN chunks c USING (workspace_id, chunk_id) "
            "WHERE v.workspace_id = ? AND v.model_id = ? AND v.variant = ? ORDER BY c.doc_id, c.ordinal",
            [workspace, model_id, variant]).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r[0] for r in rows], np.asarray([r[1] for r in rows], dtype=np.float32)

    def chunks_missing_vectors(self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE
                               ) -> list[Chunk]:
        cols = ", ".join("c." + c.strip() for c in _CHUNK_COLS.split(","))
        rows = self._db.cursor().execute(
            f"SELECT {cols} FROM chunks c LEFT JOIN vectors v ON v.workspace_id = c.workspace_id "
            "AND v.chunk_id = c.chunk_id AND v.model_id = ? AND v.variant = ? "
            "WHERE c.workspace_id = ? AND v.chunk_id IS NULL ORDER BY c.doc_id, c.ordinal",
            [model_id, variant, workspace]).fetchall()
        return [_chunk(r) for r in rows]

    def missing_vector_chars(self, model_id: str, variant: str = "raw", workspace: str = DEFAULT_WORKSPACE
                             ) -> tuple[int, int]:
        """(chunks without a vector of this model and variant, their characters): what a build has left to encode,
        counted without reading the texts out."""
        row = self._db.cursor().execute(
            "SELECT count(*), coalesce(sum(length(c.text)), 0) FROM chunks c LEFT JOIN vectors v "
            "ON v.workspace_id = c.workspace_id AND v.chunk_id = c.chunk_id AND v.model_id = ? AND v.variant = ? "
            "WHERE c.workspace_id = ? AND v.chunk_id IS NULL", [model_id, variant, workspace]).fetchone()
        return int(row[0]), int(row[1])

    def vector_models(self, workspace: str = DEFAULT_WORKSPACE) -> list[VectorSet]:
        return [VectorSet(r[0], r[1], int(r[2])) for r in self._db.cursor().execute(
            "SELECT model_id, variant, count(*) FROM vectors WHERE workspace_id = ? GROUP BY 1, 2 ORDER BY 1, 2",
            [workspace]).fetchall()]
