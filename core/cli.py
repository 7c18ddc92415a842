"""Headless entry point: `python -m core ingest|query|docs|delete ...` over the same core the pages use."""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from core.app.counters import counters
from core.config import ConfigError, PipelineConfig, load_config_file, parse_set_value
from core.safeio.files import FileProblem, read_text_checked
from core.deps import DEFAULT_DB, build_deps
from core.pipeline import QueryError, run_query, validate_query
from core.store import Store, StoreError, token_vector_files
from core.text import terminal_safe
from core.types import DEFAULT_WORKSPACE

if TYPE_CHECKING:  # named in annotations only; imported where used
    from core.ingest.pipeline import FileResult
    from core.deps import Deps
    from core.eval.datasets import GoldenSet
    from core.ingest.context import BuildRequest, ContextReport


def _config(args: argparse.Namespace) -> PipelineConfig:
    cfg = load_config_file(args.config) if getattr(args, "config", None) else PipelineConfig()
    overrides = _set_overrides(getattr(args, "set", None) or [])
    return cfg.with_overrides(overrides) if overrides else cfg


# -- the command line: each command's argument builder sits above its handler; COMMANDS (at the end) lists them ---
Parser = argparse.ArgumentParser
RAY_ADDRESS = "with --engine ray: a running cluster ('auto', 'ray://head:10001'); default a local runtime"


def _add_common(p: Parser, *, config: bool = True) -> None:
    """--db and --workspace; with `config`, --config and --set for the pipeline configuration."""
    p.add_argument("--db", default=None, help=f"DuckDB file (default {DEFAULT_DB}; env RAG_DB)")
    p.add_argument("--workspace", default=DEFAULT_WORKSPACE)
    if config:
        p.add_argument("--config", help="TOML or JSON pipeline config")
        p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override one setting")


def _add_json(p: Parser, help: str | None = None) -> None:
    p.add_argument("--json", action="store_true", help=help)


def _add_engine(p: Parser, engine: str, address: str = RAY_ADDRESS) -> None:
    """--engine local|ray and --ray-address; `engine` says what ray runs for this command."""
    p.add_argument("--engine", choices=["local", "ray"], default="local", help=engine)
    p.add_argument("--ray-address", default=None, metavar="ADDR", help=address)


def build_parser() -> Parser:
    ap = argparse.ArgumentParser(prog="python -m core", description="RAG Workbench, headless")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in COMMANDS:
        c.add_args(sub.add_parser(c.name, help=c.help))
    return ap


def _db(args: argparse.Namespace) -> str:
    from core.deps import db_path  # RAG_DB and the default path live there only

    return args.db or db_path()


def _open_store(args: argparse.Namespace, mode: str) -> Store:
    """The CLI beside a running app (docs/cli.md, "CLI beside the app"). DuckDB lets one process write a file OR several
    read it, never both, and the app holds it for writing. So:
    - mode "read" (docs, trace) opens read-only; "query" opens read-write (run log, answer cache) when it can;
      when another process holds the file, both read a snapshot copy (file + WAL, taken now) read-only instead,
      say so on stderr, and keep nothing they would have written;
    - mode "write" (ingest, delete, context, graph) waits up to RAG_DB_WAIT_S seconds (default 10) for the file,
      then stops with a message that says who to stop."""
    path = _db(args)
    wait = float(os.environ.get("RAG_DB_WAIT_S", "10"))
    deadline = time.monotonic() + (wait if mode == "write" else 0.0)
    while True:
        try:
            return Store(path, read_only=mode == "read" and Path(path).is_file())
        except StoreError as exc:
            if "in use" not in str(exc):
                raise
            if mode != "write":
                return _snapshot_store(path)
            if time.monotonic() >= deadline:
                raise StoreError(f"{exc}; waited {wait:g} s (RAG_DB_WAIT_S) for it to be released. Stop the app "
                                 "(`make run`) or give --db another file, then run this again") from None
            time.sleep(0.25)  # polling interval while the other process finishes its write


def _snapshot_store(path: str) -> Store:
    last: Exception | None = None
    for _ in range(3):  # a copy taken during a checkpoint may not open; a second copy will
        tmp = Path(tempfile.mkdtemp(prefix="rag-snapshot-"))
        atexit.register(shutil.rmtree, tmp, True)
        copy = tmp / Path(path).name
        shutil.copyfile(path, copy)
        if Path(path + ".wal").is_file():
            shutil.copyfile(path + ".wal", str(copy) + ".wal")
        for tv in token_vector_files(path):  # append-only: a link is as good as a copy, and it may be gigabytes
            (tmp / (copy.name + tv.name[len(Path(path).name):])).symlink_to(tv.resolve())
        try:
            store = Store(copy, read_only=True)
        except StoreError as exc:
            last = exc
            continue
        print(f"notice: {path} is held by another process (the app?); reading a snapshot copy taken now, and "
              "nothing this command would write (run log, caches) is kept", file=sys.stderr)
        return store
    raise StoreError(f"{path} is held by another process and a snapshot copy could not be opened ({last})")


def _ingest_args(p: Parser) -> None:
    p.add_argument("paths", nargs="*", help="files or folders (none with --multilingual: only build the workspace's "
                                            "missing multilingual vectors)")
    _add_common(p)
    p.add_argument("--if-empty", action="store_true", help="do nothing when the workspace already has documents")
    _add_json(p)
    _add_engine(p, "local (this process) or ray (parse, chunk and embed on Ray workers; this process writes)")
    ml = p.add_mutually_exclusive_group()
    ml.add_argument("--multilingual", action="store_true",
                    help="build the multilingual vectors (embedding.multilingual_model) the dense_ml list reads "
                         "whatever their estimate, on the same engine (by default an ingest builds them when the "
                         "corpus's languages ask for them or the estimate is within "
                         "embedding.multilingual_ingest_budget_s)")
    ml.add_argument("--no-multilingual", action="store_true",
                    help="do not build the multilingual vectors (questions in another language then skip dense_ml)")
    p.add_argument("--collection", metavar="NAME", default=None,
                   help="put the files in this collection of the workspace (default: a file's top folder under the "
                        "folder named, else the collection it is in, else 'default')")


def _result_line(r: FileResult) -> str:
    message = r.message[len(r.name) + 2:] if r.message.startswith(f"{r.name}: ") else r.message
    detail = message if r.status == "error" else f"{r.chunks} chunks, {r.embedded} embedded, {r.cache_hits} cached"
    if r.status == "replaced":
        detail += f" ({r.chunk_changes()}"
        if r.contexts_kept or r.contexts_to_write:
            detail += f"; llm contexts: {r.contexts_kept} kept, {r.contexts_to_write} to write"
        detail += ")"
    if r.encoding and not r.encoding.startswith("utf-8") and r.status != "error":
        detail += f", decoded as {r.encoding}"
    if r.status == "unchanged" and r.message.startswith("same content and chunker; stored as"):
        detail += f" ({r.message.split('; ', 1)[1]})"
    return f"{r.status:<9} {r.name}: {detail}"


def cmd_ingest(args: argparse.Namespace) -> int:
    # ingest's modules load here, not when a query starts the CLI (a cold `query` skips them)
    from core.ingest.files import read_file, scan_paths
    from core.ingest.parse import ParseError
    from core.ingest.pipeline import FileResult, ingest_files

    if args.ray_address and args.engine != "ray":
        print("error: --ray-address needs --engine ray", file=sys.stderr)
        return 2
    if args.collection:
        from core.store.collections import check_name

        check_name(args.collection)  # before any file is read
    cfg = _config(args)
    if not args.paths and not args.multilingual:
        print("error: name the files or folders to ingest (or --multilingual alone to build the missing "
              "multilingual vectors)", file=sys.stderr)
        return 2
    store = _open_store(args, "write")
    if not args.paths or (args.if_empty and store.corpus.count("documents", args.workspace)):
        if args.paths:
            print(f"{_db(args)} already holds {store.corpus.count('documents', args.workspace)} documents; nothing "
                  "to ingest")
        # the lists a query needs are still completed (`make run` on a database ingested before this default)
        return _ingest_multilingual(args, cfg, build_deps(cfg, store=store))
    try:
        # Documents are keyed by their path relative to the folder named (a named file: its base name); only
        # regular files are read, each when its turn comes, and its size is checked first (core/ingest/files.py).
        files = scan_paths(args.paths)
    except OSError as exc:
        print(f"error: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    deps = build_deps(cfg, store=store)
    for n in deps.notices:
        print(f"notice: {n}", file=sys.stderr)
    tty = sys.stderr.isatty() and not args.json

    def progress(done: float, total: int, msg: str) -> None:
        # One status line per file and per embedding batch inside a big file (issue #12: a 10,000-chunk file
        # used to show nothing for minutes).
        if tty:
            print(f"\r{done:5.1f}/{total} {msg[:90]:<90}", end="" if msg else "\n", file=sys.stderr, flush=True)

    def on_result(r: FileResult) -> None:
        # Each file's line as soon as it is committed: a long folder otherwise prints nothing for minutes (#33).
        if tty:
            print("\r" + " " * 100 + "\r", end="", file=sys.stderr, flush=True)
        print(_result_line(r), flush=True)

    if args.engine == "ray":
        from core.deps import model_cache_dir
        from core.ingest.ray_engine import (
            EmbedderSpec,
            RayEngineError,
            RayOptions,
            ingest_files_ray,
        )

        max_bytes = int(cfg.limits.max_file_mb * 1_000_000)
        loaded: list[tuple[str, bytes]] = []
        refused: list[FileResult] = []
        for f in files:
            try:
                loaded.append((f.key, read_file(f, max_bytes)))
            except ParseError as exc:
                refused.append(FileResult(f.key, "error", str(exc)))
        spec = EmbedderSpec.from_config(cfg, model=os.environ.get("RAG_EMBED_MODEL"),
                                        cache_dir=model_cache_dir(_db(args)).resolve())
        try:
            report = ingest_files_ray(loaded, store=store, embedder=deps.embedder, make_embedder=spec, config=cfg,
                                      workspace=args.workspace, progress=progress,
                                      options=RayOptions(address=args.ray_address))
        except RayEngineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        report.results[:0] = refused
        if not args.json:
            for r in report.results:
                print(_result_line(r), flush=True)
    else:
        report = ingest_files(files, store=store, embedder=deps.embedder, config=cfg, workspace=args.workspace,
                              progress=progress, on_result=None if args.json else on_result)
    _ingest_collections(args, store, deps, report.ok)
    code = _ingest_multilingual(args, cfg, deps)
    if code:
        return code
    ann = None
    if report.ok:
        from core.app.readiness import sync_ann

        ann = sync_ann(deps, cfg, args.workspace)  # the dense index's graph, above its size threshold
    if args.json:
        print(json.dumps({"results": [r.__dict__ for r in report.results], "embedded": report.embedded,
                          "cache_hits": report.cache_hits, "chunks": report.chunk_changes(), "ann": ann,
                          "graph": {**report.graph.__dict__, "usage": report.graph.usage.__dict__}
                          if report.graph else None, "notes": report.notes}))
    else:
        ch = report.chunk_changes()
        print(f"{len(report.ok)} ok, {len(report.errors)} failed; {report.embedded} embeddings computed, "
              f"{report.cache_hits} from cache; chunks: {ch['unchanged']} unchanged, {ch['changed']} changed, "
              f"{ch['new']} new, {ch['removed']} removed")
        if report.graph is not None:
            g = report.graph
            print(f"graph updated in {g.seconds:.2f} s: +{g.chunks_added} / -{g.chunks_removed} chunks, "
                  f"{g.summaries_invalidated} community summaries invalidated")
        if ann:
            print(ann)
        for n in report.notes:
            print(f"notice: {n}", file=sys.stderr)
    return 1 if report.errors and not report.ok else 0


def _ingest_collections(args: argparse.Namespace, store: Store, deps: "Deps", ok: Sequence[FileResult]) -> None:
    """ingest: the files' collections (--collection, else their top folder), then the collections' profiles."""
    from core.app.collections import assign_ingested, refresh

    moved = assign_ingested(store, [r.name for r in ok], args.workspace, args.collection)
    if moved and not args.json:
        by: dict[str, int] = {}
        for c in moved.values():
            by[c] = by.get(c, 0) + 1
        print("collections: " + ", ".join(f"{n} file(s) in {c}" for c, n in sorted(by.items())))
    if ok and len(store.collections.list(args.workspace)) > 1:
        refresh(store, args.workspace, deps.embedder.model_id, _config(args))


def _collections_args(p: Parser) -> None:
    p.add_argument("action", nargs="?", choices=["list", "describe"], default="list")
    p.add_argument("name", nargs="?", help="describe: the collection")
    _add_common(p, config=False)
    _add_json(p)
    p.add_argument("--description", metavar="TEXT", help="describe: set the collection's description (the LLM "
                   "collection router reads it)")


def cmd_collections(args: argparse.Namespace) -> int:
    from core.app.collections import describe, refresh, rows

    store = _open_store(args, "write" if args.description is not None else "read")
    if args.action == "describe" and not args.name:
        print("error: describe needs a collection name", file=sys.stderr)
        return 2
    if args.description is not None:
        if args.action != "describe":
            print("error: --description goes with describe NAME", file=sys.stderr)
            return 2
        if note := store.collections.set_description(args.workspace, args.name, args.description):
            print(f"note: {note}", file=sys.stderr)
    cols = refresh(store, args.workspace)
    if args.action == "list":
        if args.json:
            print(json.dumps([describe(c) for c in cols], ensure_ascii=False))
        else:
            for r in rows(cols):
                print(f"{r['collection']:<20} {r['documents']:>6} docs {r['chunks'] or 0:>7} chunks  "
                      f"{r['languages']:<14} {r['description'][:60]}")
        return 0
    col = next((c for c in cols if c.name == args.name), None)
    if col is None:
        print(f"error: no collection {args.name!r} in workspace {args.workspace!r} (have: "
              f"{', '.join(c.name for c in cols) or 'none'})", file=sys.stderr)
        return 2
    d = describe(col)
    if args.json:
        print(json.dumps(d, ensure_ascii=False))
    else:
        p = d["profile"] or {}
        print(f"{col.name}: {col.description or '(no description)'}")
        print(f"  {col.n_docs} documents, {p.get('chunks', 0)} chunks, languages {p.get('languages', {})}")
        print(f"  top terms: {', '.join(p.get('top_terms', []))}")
        for t, cols_ in (p.get("tables") or {}).items():
            print(f"  table {t}({', '.join(cols_)})")
    return 0


def _query_args(p: Parser) -> None:
    p.add_argument("query")
    _add_common(p)
    _add_json(p)
    p.add_argument("--depth", type=int, default=10, help="rows per stage in the table")
    p.add_argument("--history", metavar="FILE", help="a conversation's earlier turns (JSON list or JSONL of "
                   "{question, answer}, or one question per line): the query is condensed into a standalone question")
    p.add_argument("--session", metavar="ID", help="a named conversation kept beside the database: its turns are "
                   "the history, and this query's turn is added to it")
    p.add_argument("--build", action="store_true",
                   help="build a missing context variant (heuristic / late vectors) and the multilingual vectors "
                        "(embedding.multilingual) before the query; without it "
                        "the query searches raw text and says so, as the Search Lab does")


def cmd_query(args: argparse.Namespace) -> int:
    cfg = _config(args)
    validate_query(args.query, cfg)  # fail fast, before a model is loaded
    store = _open_store(args, "query")
    from core.app.workspaces import WorkspaceError, require_workspace

    try:
        require_workspace(store, args.workspace)  # a typo in --workspace is an error, not an empty answer
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    deps = build_deps(cfg, store=store)
    run_cfg, notices = _unbuilt_variant(cfg, deps, args.workspace, build=args.build)
    notices += _build_multilingual(cfg, deps, args.workspace) if args.build else []
    from core.app.conversation import ConversationError, load_turns, save_turns, session_path, turn_of

    cut: list[str] = []  # turns cut at MAX_TURN_CHARS: said below with the other notices
    try:
        history = load_turns(args.history, cut) if args.history else []
        spath = session_path(_db(args), args.session, args.workspace) if args.session else None
        history += load_turns(spath, cut) if spath is not None and spath.exists() else []
    except ConversationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    notices += cut
    trace = run_query(args.query, run_cfg, deps, workspace=args.workspace, history=history)
    notices += store.caches.take_notices()  # e.g. a token-vector file missing beside the database
    if spath is not None:
        save_turns(spath, [*history, turn_of(args.query, trace)])
    if args.json:
        out = trace.to_dict()
        out["counters"] = counters(trace).to_dict()  # per-stage ms and $, tokens, cache hits (core/app/counters.py)
        out["notices"] = deps.notices + notices
        print(json.dumps(out, ensure_ascii=False))
    else:
        for n in deps.notices + notices:
            print(f"notice: {n}")
        from core.app.report import text_table

        print(text_table(trace, depth=args.depth))
    return 0


def _unbuilt_variant(cfg: PipelineConfig, deps: "Deps", workspace: str, *, build: bool
                     ) -> tuple[PipelineConfig, list[str]]:
    """A context variant whose vectors are missing: built first (--build, on a writable database) or searched as raw
    text with a notice, the Search Lab's rule. Without it the dense index embedded every missing chunk in memory on
    the query's path, and threw the work away (minutes on a large corpus, again on the next query)."""
    from core.app import readiness

    need = next((n for n in readiness.needs(deps.store, cfg, workspace, deps.embedder.model_id)
                 if n.kind == "context"), None)
    if need is None:
        return cfg, []
    v = cfg.context.variant
    if build and not getattr(deps.store, "read_only", False):
        print(f"building: {need.label} (about {need.est_seconds:,.0f} s)", file=sys.stderr)
        done = readiness.build(need, cfg, deps, workspace, progress=_stderr_progress(need.kind))
        tokens = readiness.token_need(deps, cfg, workspace)
        if tokens is not None:
            done += "; " + readiness.build(tokens, cfg, deps, workspace, progress=_stderr_progress("token vectors"))
        return cfg, [f"built before the query: {done}"]
    why = ("the database is open read-only, so --build cannot write it" if build
           else f"add --build, or run `python -m core context --variant {v}`, to build it "
                f"(about {need.est_seconds:,.0f} s)")
    return (cfg.with_overrides({"context.variant": "none"}),
            [f"context.variant = {v} is not built yet ({need.label}): this query searched raw text; {why}"])


def _ingest_multilingual(args: argparse.Namespace, cfg: PipelineConfig, deps: "Deps") -> int:
    """The multilingual vectors after the documents, locally or on Ray workers: by default when the corpus's
    languages ask for them or their estimate is within embedding.multilingual_ingest_budget_s (--multilingual:
    whatever the estimate; --no-multilingual: never). The estimate comes from a probe of the model on a few of the
    workspace's chunks (local engine) or the speed an earlier build here measured, and is printed before the build
    with its source; the real time after it."""
    from core.app import readiness

    if args.no_multilingual:
        return 0
    model = cfg.embedding.multilingual_model
    need, why = readiness.ingest_multilingual_need(deps.store, cfg, args.workspace, deps.embedder.model_id,
                                                   force=args.multilingual)
    if need is None:
        if why:
            print(f"notice: multilingual vectors not built: {why}", file=sys.stderr)
        return 0
    emb = None
    if args.engine != "ray":
        notice = readiness.probe_for_ingest(deps, cfg, args.workspace)  # the estimate at this moment's load
        emb = deps.multilingual_for(model)[0]
        if emb is None:
            print(f"{'error' if args.multilingual else 'notice'}: multilingual vectors not built: {notice}",
                  file=sys.stderr)
            return 2 if args.multilingual else 0
        need, why = readiness.ingest_multilingual_need(deps.store, cfg, args.workspace, deps.embedder.model_id,
                                                       force=args.multilingual)
        if need is None:
            print(f"notice: multilingual vectors not built: {why}", file=sys.stderr)
            return 0
    _rate, source = readiness.ml_seconds_per_unit(deps.store, model, cfg.embedding)
    print(f"building: {need.label} (about {need.est_seconds:,.0f} s, from {source}; {why}; --no-multilingual "
          "skips it)", file=sys.stderr)
    show = _stderr_progress("multilingual vectors")
    t0 = time.perf_counter()
    if args.engine == "ray":
        _todo, chars = deps.store.corpus.missing_vector_chars(model, "raw", args.workspace)
        from core.ingest.ray_engine import MultilingualSpec, RayEngineError, RayOptions, build_vectors_ray

        try:
            stats = build_vectors_ray(deps.store, MultilingualSpec(model), model, workspace=args.workspace,
                                      options=RayOptions(address=args.ray_address), progress=show)
        except RayEngineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # The workers' CPU is not this process's: the wall time at full share stands for it.
        readiness.record_ml_build(deps.store, model, time.perf_counter() - t0, time.perf_counter() - t0,
                                  stats.computed, stats.texts, chars)
    else:  # the build keeps its own rate
        stats = readiness.build_multilingual(deps.store, emb, args.workspace, progress=show)
    deps.indexes.invalidate(args.workspace)
    print(f"multilingual vectors: {stats.computed} embedded, {stats.cache_hits} from the cache in "
          f"{time.perf_counter() - t0:.1f} s (estimated {need.est_seconds:,.0f} s)", file=sys.stderr)
    return 0


def _build_multilingual(cfg: PipelineConfig, deps: "Deps", workspace: str) -> list[str]:
    """--build: the multilingual vectors the dense_ml list reads (embedding.multilingual not off), when missing."""
    from core.app import readiness

    need = readiness.multilingual_need(deps.store, cfg, workspace, deps.store.corpus.count("chunks", workspace))
    if need is None or getattr(deps.store, "read_only", False):
        return []
    print(f"building: {need.label} (about {need.est_seconds:,.0f} s)", file=sys.stderr)
    return [f"built before the query: {readiness.build(need, cfg, deps, workspace, progress=_stderr_progress(need.kind))}"]


def _stderr_progress(what: str) -> Callable[[int, int], None]:
    tty = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        if tty:
            print(f"\r{what}: {done:,}/{total:,}", end="" if done < total else "\n", file=sys.stderr)
        elif done == total:
            print(f"{what}: {done:,}/{total:,}", file=sys.stderr)
    return show


def _sql_args(p: Parser) -> None:
    p.add_argument("sql", help="one read-only SELECT over the workspace's tables")
    _add_common(p, config=False)
    _add_json(p, "print {sql, columns, rows, truncated, ms} (or {error}) as JSON")
    p.add_argument("--max-rows", type=int, default=1000, help="row cap (more rows are cut and flagged)")


def cmd_sql(args: argparse.Namespace) -> int:
    from core.app.tables import run_user_sql

    store = _open_store(args, "read")
    out = run_user_sql(store, args.sql, args.workspace, max_rows=max(1, args.max_rows))
    if args.json:
        print(json.dumps(out.to_dict(), ensure_ascii=False, default=str))
    elif out.result is None:
        print(f"error: {out.error}", file=sys.stderr)
    else:
        r = out.result
        print("\t".join(r.columns))
        for row in r.rows:
            print("\t".join("" if v is None else str(v) for v in row))
        print(f"({len(r.rows):,} row{'s' if len(r.rows) != 1 else ''}{', cut at the row cap' if r.truncated else ''};"
              f" {r.ms:.0f} ms)", file=sys.stderr)
        for note in r.notes:
            print(f"note: {note}", file=sys.stderr)
    return 0 if out.result is not None else 2


def _docs_args(p: Parser) -> None:
    _add_common(p, config=False)


def cmd_docs(args: argparse.Namespace) -> int:
    store = _open_store(args, "read")
    for d in store.corpus.documents(args.workspace):
        print(f"{d.doc_id}  {d.kind:<5} {d.n_chunks:>4} chunks  {d.size_bytes:>9,} B  {d.lang}  {d.name}")
    return 0


def _delete_args(p: Parser) -> None:
    p.add_argument("doc_id")
    _add_common(p)


def cmd_delete(args: argparse.Namespace) -> int:
    from core.app.corpus_ops import delete_document

    cfg = _config(args)
    store = _open_store(args, "write")
    notices: list[str] = []
    # The entity graph follows, as on the Corpus page (an incremental update; no model is loaded for it).
    if delete_document(store, args.doc_id, graph=cfg.graph, workspace=args.workspace, notices=notices):
        print(f"deleted {args.doc_id}")
        for n in notices:
            print(f"notice: {n}", file=sys.stderr)
        return 0
    print(f"error: no document {args.doc_id}", file=sys.stderr)
    return 1


def _eval_args(p: Parser) -> None:
    p.add_argument("--dataset", required=True, help="sample, anthropic_codebase, beir_scifact, golden:NAME (a set "
                   "stored in the workspace) or a .jsonl path")
    _add_common(p, config=False)
    p.set_defaults(workspace=None)  # public sets use their own workspace unless one is named
    p.add_argument("--config", action="append", default=[], help="config file or saved name; twice for A/B")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override one setting in every config")
    p.add_argument("--repeats", type=int, default=1, help="runs per config, for the spread of non-deterministic stages")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--no-reuse", action="store_true", help="compute every stage for every config (by default a "
                   "config reuses the stage results an earlier config of the run computed from the same inputs)")
    p.add_argument("--k", default=None, help="cutoffs for recall@k, comma-separated (e.g. 1,2,5,10,20)")
    p.add_argument("--level", choices=["document", "chunk"], default=None,
                   help="score documents (any chunk of a gold document counts) or chunks (the set's default)")
    p.add_argument("--read-only", action="store_true",
                   help="open the database read-only: nothing is added or stored; runs beside other read-only "
                        "processes (DuckDB refuses it while a writer, e.g. the app, holds the file)")
    _add_json(p, "metrics per run and, per question, each stage's gold ranks")
    _add_engine(p, "local (this process) or ray (Ray workers score chunks of questions on a read-only copy of the "
                   "database; this process stores the runs); offline only")


def cmd_eval(args: argparse.Namespace) -> int:
    from core.config.saved import resolve_config
    from core.eval.datasets import DatasetError, at_level
    from core.eval.report import text_report
    from core.eval.run import NamedConfig, compare, run_eval

    if args.ray_address and args.engine != "ray":
        print("error: --ray-address needs --engine ray", file=sys.stderr)
        return 2
    try:
        ks = [int(k) for k in args.k.split(",") if k.strip()] if args.k else None
    except ValueError:
        print(f"error: --k expects whole numbers separated by commas, got {args.k!r}", file=sys.stderr)
        return 2
    try:
        gs = at_level(_read_dataset(args, args.dataset), args.level, ks)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ws = args.workspace or gs.workspace or DEFAULT_WORKSPACE
    overrides = _set_overrides(args.set or [])
    named = [resolve_config(ref, ws) for ref in args.config]
    if not named:  # the set's own needs (e.g. depth 100 for recall@100) on top of the defaults
        named = [("default", PipelineConfig().with_overrides(gs.overrides))]
    configs = [NamedConfig(name, cfg.with_overrides(overrides) if overrides else cfg) for name, cfg in named]
    try:
        store = Store(_db(args), read_only=args.read_only)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    deps = build_deps(configs[0].config, store=store)
    for n in deps.notices:
        print(f"notice: {n}", file=sys.stderr)

    tty = sys.stderr.isatty()

    def progress(done: int, total: int, msg: str) -> None:
        if tty:
            print(f"\r[{done}/{total}] {msg[:60]:<60}", end="" if done < total else "\n", file=sys.stderr)
        elif done == total or done % max(1, total // 10) == 0:
            print(f"[{done}/{total}] {msg[:60]}", file=sys.stderr)

    engine, engine_errors = None, ()  # type: ignore[var-annotated]
    if args.engine == "ray":
        from core.deps import model_cache_dir
        from core.eval.ray_eval import RayEvalEngine, RayEvalOptions
        from core.ingest.ray_engine import EmbedderSpec, RayEngineError

        # Each worker loads the driver's model and runtime on its node (the store's vectors are that model's).
        spec = EmbedderSpec.from_config(configs[0].config, model=os.environ.get("RAG_EMBED_MODEL"),
                                        cache_dir=model_cache_dir(_db(args)).resolve())
        engine, engine_errors = RayEvalEngine(spec, RayEvalOptions(address=args.ray_address)), (RayEngineError,)
    try:
        runs = run_eval(gs, configs, deps, workspace=ws, repeats=args.repeats, progress=progress, limit=args.limit,
                        engine=engine, reuse=not args.no_reuse)
    except engine_errors as exc:  # Ray missing, unreachable, or workers gave up: nothing was stored
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cmp = compare(runs[0], runs[1]) if len(runs) >= 2 else None
    if args.json:
        print(json.dumps({"dataset": gs.name, "workspace": ws, "questions": len(runs[0].results) if runs else 0,
                          "runs": [{**r.summary(), "results": r.question_ranks()} for r in runs],
                          "comparison": cmp.as_rows() if cmp else None},
                         ensure_ascii=False, default=str))
    else:
        print(text_report(runs, cmp))
        for p in (runs[0].problems if runs else [])[:50]:
            print(f"problem: {p}")
    _missing_build_notices([(r.config_name, n) for r in runs for n in r.notes])
    return 0


def _missing_build_notices(notes: Sequence[tuple[str, str]]) -> None:
    """eval / sweep: the run-level notice of stages skipped for a missing build, on stderr beside the results."""
    from core.eval.run import MISSING_BUILD

    for name, n in notes:
        if n.startswith(MISSING_BUILD):
            print(f"notice: {name}: {n}", file=sys.stderr)


def _set_source_args(p: Parser, *, what: str) -> None:
    """--golden NAME or --dataset D (one of them), --workspace, --config/--set for the base configuration, --json."""
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--golden", metavar="NAME", help=f"a golden set stored in the workspace to {what}")
    g.add_argument("--dataset", metavar="D", help="sample, a public set's name, or a .jsonl / .csv golden set path")
    _add_common(p)
    p.set_defaults(workspace=None)  # public sets use their own workspace unless one is named
    _add_json(p)


def _read_dataset(args: argparse.Namespace, name: str) -> "GoldenSet":
    """A public or file set (load_dataset), or 'golden:NAME': a set stored in this database (--db), read through a
    read-only connection that is closed again before the command opens the file for writing."""
    from core.deps import datasets_root
    from core.eval.datasets import DatasetError, load_dataset

    if not name.startswith("golden:"):
        return load_dataset(name, datasets_root())
    if not Path(_db(args)).is_file():
        raise DatasetError(f"{name}: no database at {_db(args)}")
    golden_store = Store(_db(args), read_only=True)
    try:
        return load_dataset(name, store=golden_store)
    finally:
        golden_store.close()


def _golden_set(args: argparse.Namespace) -> "GoldenSet | None":
    from core.eval.datasets import DatasetError

    try:
        return _read_dataset(args, f"golden:{args.golden}" if args.golden else args.dataset)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _calibrate_args(p: Parser) -> None:
    _set_source_args(p, what="calibrate on")
    p.add_argument("--folds", type=int, default=5, help="k of the k-fold cross-validation (default 5)")


def cmd_calibrate(args: argparse.Namespace) -> int:
    from core.eval.calibrate import CalibrationError, calibrate, summary_rows
    from core.eval.sweep import text_rows

    gs = _golden_set(args)
    if gs is None:
        return 2
    ws = args.workspace or gs.workspace or DEFAULT_WORKSPACE
    base = _config(args).with_overrides(gs.overrides) if gs.overrides else _config(args)
    deps = build_deps(base, store=_open_store(args, "write"))
    try:
        rep = calibrate(gs, deps, workspace=ws, config=base, k=args.folds,
                        progress=lambda d, t, m: print(f"\r[{d}/{t}] {m[:50]:<50}", end="" if d < t else "\n",
                                                       file=sys.stderr))
    except CalibrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cal = rep.calibration
    if args.json:
        print(json.dumps({"workspace": cal.workspace, "threshold": cal.threshold, "dataset": cal.dataset,
                          "corpus_version": cal.corpus_version, "folds": cal.folds,
                          "figures": {k: v for k, v in cal.figures.items() if k != "per_question"},
                          "notes": rep.notes}, ensure_ascii=False, default=str))
        return 0
    print(f"workspace '{cal.workspace}': refusal threshold {cal.threshold:.3f} ({cal.describe()}; the shipped "
          f"prior is {cal.figures['prior_threshold']:.3f})")
    print(text_rows(summary_rows(cal)))
    for why, n in rep.skipped.items():
        print(f"left out: {n} ({why})")
    for n in rep.notes:
        print(f"note: {n}")
    return 0


def _sweep_args(p: Parser) -> None:
    _set_source_args(p, what="sweep over")
    p.add_argument("--grid", metavar="FILE", help="TOML or JSON grid: configs = [{name, set = {section.key = value}}]"
                                                  " (default: the standard grid, core/eval/sweep.py)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--fresh", action="store_true", help="forget this set's stored results and run every config")
    p.add_argument("--yes", action="store_true", help="run configurations that call the LLM without asking")


def cmd_sweep(args: argparse.Namespace) -> int:
    from core.eval.sweep import STANDARD_GRID, grid_configs, load_grid, plan, run_sweep, text_rows

    gs = _golden_set(args)
    if gs is None:
        return 2
    if args.limit:  # the first N questions, as a set of their own (stored results apart from the whole set's)
        gs = replace(gs, queries=gs.queries[: args.limit])
    ws = args.workspace or gs.workspace or DEFAULT_WORKSPACE
    base = _config(args).with_overrides(gs.overrides) if gs.overrides else _config(args)
    configs = grid_configs(base, load_grid(args.grid) if args.grid else STANDARD_GRID)
    deps = build_deps(base, store=_open_store(args, "write"))
    est, todo = plan(gs, configs, deps, workspace=ws)
    paid = {n: usd for n, usd in est.items() if usd > 0 and any(nc.name == n for nc in todo)}
    print(f"{len(todo)} of {len(configs)} configurations to run ({len(configs) - len(todo)} stored); LLM cost "
          f"estimate (upper bound): ${sum(paid.values()):.4f}" + (" — offline: nothing is spent" if not paid else ""),
          file=sys.stderr)
    if paid and not args.yes:
        print("error: some configurations call the LLM: " + ", ".join(f"{n} ≤ ${u:.4f}" for n, u in paid.items())
              + "; run again with --yes to spend it", file=sys.stderr)
        return 2
    res = run_sweep(gs, configs, deps, workspace=ws, fresh=args.fresh, current=base,
                    progress=lambda d, t, m: print(f"\r[{d}/{t}] {m[:60]:<60}", end="" if d < t else "\n",
                                                   file=sys.stderr))
    if args.json:
        print(json.dumps(res.to_dict(), ensure_ascii=False, default=str))
    else:
        print(f"{res.dataset} in '{res.workspace}' (corpus v{res.corpus_version}), ranked by "
              f"{', then '.join(res.rank_by)}; band 1 = no clear difference from the best")
        print(text_rows(res.table()))
        if res.validity is not None:
            print(f"validity: {res.validity.label()}")
            print(text_rows(res.validity.rows()))
        if res.verdict is not None:
            print(f"verdict: {res.verdict.verdict} — recommendation '{res.verdict.recommendation}': "
                  f"{res.verdict.reason}")
    for n in res.missing_builds():
        print(f"notice: {n}", file=sys.stderr)
    return 0


def _set_overrides(items: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        out[key.strip()] = parse_set_value(value.strip())
    return out


def _context_args(p: Parser) -> None:
    p.add_argument("--variant", required=True, choices=["heuristic", "late", "llm"])
    _add_common(p)
    p.add_argument("--budget-usd", type=float, default=None, help="hard dollar stop (default context.budget_usd)")
    p.add_argument("--batch", action="store_true", help="Message Batches API (-50%%); run again to collect")
    p.add_argument("--model", default=None, help="context writer (default context.model)")
    p.add_argument("--yes", action="store_true", help="skip the confirmation above context.confirm_above_usd")
    p.add_argument("--estimate-only", action="store_true", help="print the cost estimate and stop")
    p.add_argument("--refresh-stale", action="store_true", help="llm: first forget the contexts marked possibly "
                   "stale (kept across an edit under context.reindex = major), so this build rewrites them")
    _add_json(p)
    _add_engine(p, "llm variant: ray sends the calls from Ray workers (shared rate limit, same hard budget)",
                "with --engine ray: a running cluster")
    p.add_argument("--rpm", type=float, default=50.0, help="with --engine ray: requests per minute, all workers")


def cmd_context(args: argparse.Namespace) -> int:
    from core.ingest.context import (
        BuildRequest,
        ContextError,
        estimate_llm_contexts,
        run_build,
    )
    from core.models.llm import LLMError
    from core.models.pricing import fmt_usd

    cfg = _config(args)
    c = cfg.context
    model = args.model or c.model
    budget = c.budget_usd if args.budget_usd is None else args.budget_usd
    use_batches = args.batch or c.use_batches
    store = Store(_db(args))
    deps = build_deps(cfg, store=store)
    out: dict[str, object] = {"variant": args.variant}
    if args.variant == "llm":
        if not deps.llm.available:
            print(f"error: LLM contexts need Claude ({deps.llm.reason}); offline: --variant heuristic or late",
                  file=sys.stderr)
            return 2
        if args.refresh_stale and not args.estimate_only:
            stale = store.ledger.stale_contexts("llm", args.workspace)
            out["refreshed_stale"] = store.ledger.drop_contexts(stale, "llm", args.workspace)
        est, warnings = estimate_llm_contexts(store, model=model, workspace=args.workspace, batch=use_batches,
                                              ttl=cfg.llm.cache_ttl)
        out["estimate"] = {"calls": est.calls, "with_cache_usd": round(est.with_cache_usd, 6),
                           "without_cache_usd": round(est.without_cache_usd, 6), "warnings": warnings,
                           "tokens": "estimated per script (~4 ASCII / ~2 other characters per token); the budget "
                                     "guard uses the provider's token counter or a safe upper bound"}
        if not args.json:
            print(f"estimate for {est.calls} calls on {model}{' (batch -50%)' if use_batches else ''}: "
                  f"{fmt_usd(est.with_cache_usd)} with prompt caching, {fmt_usd(est.without_cache_usd)} without "
                  "(tokens estimated per script; the budget guard counts them exactly)")
            for w in warnings:
                print(w if w.startswith("plan: ") else f"warning: {w}")
        if args.estimate_only:
            if args.json:
                print(json.dumps(out))
            return 0
        if est.with_cache_usd > c.confirm_above_usd and not args.yes:
            if not sys.stdin.isatty():
                print(f"error: the estimate is above context.confirm_above_usd (${c.confirm_above_usd:.2f}); "
                      "pass --yes to go ahead", file=sys.stderr)
                return 3
            if input("Proceed? [y/N] ").strip().lower() not in ("y", "yes"):
                print("cancelled")
                return 1

    def progress(done: int, total: int, usd: float) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r{done}/{total}  {fmt_usd(usd)}", end="", file=sys.stderr)

    req = BuildRequest(args.variant, model=model, budget_usd=budget, use_batches=use_batches,
                       max_output_tokens=c.max_output_tokens, ttl=cfg.llm.cache_ttl,
                       workspace_budget_usd=c.workspace_budget_usd)
    try:
        if args.engine == "ray" and args.variant == "llm" and not use_batches:
            rep = _llm_contexts_on_ray(args, req, store, deps, progress)
        elif args.engine == "ray":
            print("error: --engine ray runs the llm variant without --batch (heuristic is free; late and batches "
                  "run locally)", file=sys.stderr)
            return 2
        else:
            rep = run_build(req, store, deps.embedder, deps.llm, workspace=args.workspace, progress=progress)
    except (ContextError, LLMError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.update({k: v for k, v in rep.__dict__.items() if k != "variant"})
    if args.json:
        print(json.dumps(out, default=list))
    else:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(f"{args.variant}: {rep.written} written, {rep.existing} already there, {rep.remaining} remaining, "
              f"{rep.vectors} vectors embedded, {fmt_usd(rep.usd)} spent")
        for w in rep.warnings:
            print(f"warning: {w}")
        if rep.stopped:
            print(f"stopped: {rep.stopped}")
    return 4 if rep.stopped and rep.remaining else 0


def _llm_contexts_on_ray(args: argparse.Namespace, req: "BuildRequest", store: Store, deps: "Deps",
                         progress: Callable[[int, int, float], None]) -> "ContextReport":
    """`context --variant llm --engine ray`: the calls run on Ray workers (core/ingest/ray_engine.py), each worker
    reading its own node's ANTHROPIC_API_KEY; this process writes the contexts and the ledger, then embeds."""
    from core.ingest.context import ContextError, embed_variant
    from core.ingest.ray_engine import (
        EnvLLMFactory,
        RayEngineError,
        RayOptions,
        build_llm_contexts_ray,
    )

    make = EnvLLMFactory(base_url=getattr(deps.llm, "base_url", None),
                         max_retries=getattr(deps.llm, "max_retries", 4), cache_ttl=req.ttl)
    try:
        rep = build_llm_contexts_ray(store, deps.llm, make, model=req.model, budget_usd=req.budget_usd,
                                     workspace=args.workspace, max_output_tokens=req.max_output_tokens, ttl=req.ttl,
                                     progress=progress, workspace_budget_usd=req.workspace_budget_usd,
                                     requests_per_minute=args.rpm, options=RayOptions(address=args.ray_address))
    except RayEngineError as exc:
        raise ContextError(str(exc)) from None
    return replace(rep, vectors=embed_variant(store, deps.embedder, "llm", workspace=args.workspace))


def _raptor_args(p: Parser) -> None:
    p.add_argument("action", choices=["build", "update", "estimate", "stats"],
                   help="update: new and removed chunks only (a full build when more than half changed)")
    _add_common(p)
    _add_json(p)


def cmd_raptor(args: argparse.Namespace) -> int:
    """RAPTOR: estimate, build (replacing the workspace's tree), update it incrementally, or show the stored tree."""
    from core.app.raptor_ops import build_raptor, raptor_plan

    cfg = _config(args)
    # writing opens for write (an older file gains its table)
    store = _open_store(args, "query" if args.action in ("estimate", "stats") else "write")
    if args.action == "stats":
        nodes, _ = store.raptor.nodes(args.workspace)
        out = {"nodes": len(nodes), "levels": {str(lv): sum(1 for n in nodes if n.level == lv)
                                               for lv in sorted({n.level for n in nodes})},
               "state": store.raptor.state(args.workspace)}
        print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
        return 0
    deps = build_deps(cfg, store=store)
    plan = raptor_plan(deps, cfg, args.workspace)
    if args.action == "estimate" or not plan.chunks:
        print(json.dumps(plan.__dict__) if args.json else (plan.label() if plan.chunks else
              f"no {deps.embedder.model_id} vectors in workspace {args.workspace}: ingest first"))
        return 0 if plan.chunks else 2
    print(f"{args.action}: {plan.label()}", file=sys.stderr)
    out = build_raptor(deps, cfg, args.workspace, progress=_stderr_progress("summaries"), full=args.action == "build")
    print(json.dumps(out.to_dict()) if args.json else f"RAPTOR tree ({out.mode}: {out.why or 'changes only'}): "
          f"{out.nodes} summaries on {out.levels} level(s), +{out.added} / -{out.removed} chunks, "
          f"{out.rewritten} summaries written in {out.seconds} s ({out.summaries}"
          f"{', $%.4f' % out.usd if out.llm_calls else ''})" + "".join(f"\n{n}" for n in out.notes))
    return 0


def _graph_args(p: Parser) -> None:
    p.add_argument("action", choices=["build", "update", "stats", "synonyms", "review", "communities"],
                   help="communities: re-cluster the whole graph now and compare it with the partition it replaces")
    _add_common(p)
    p.add_argument("--full", action="store_true", help="build: forget all extractions and rebuild from scratch")
    p.add_argument("--no-suggest", action="store_true", help="build: skip merge suggestions (no name embeddings)")
    p.add_argument("--file", help="synonyms: replace the list with this file ('A = B = C' per line)")
    p.add_argument("--approve", metavar="ITEM", help="review: approve a merge suggestion")
    p.add_argument("--reject", metavar="ITEM", help="review: reject it (the two stay apart for good)")
    p.add_argument("--undo", metavar="ITEM", help="review: put a decision back to pending")
    _add_json(p)


def cmd_graph(args: argparse.Namespace) -> int:
    from core.graph.build import (
        build_graph,
        decide_merge,
        graph_stats,
        set_synonyms,
        synonyms_text,
    )
    from core.graph.resolve import SynonymError

    cfg = _config(args)
    store, ws = Store(_db(args)), args.workspace
    if args.action == "stats":
        stats = graph_stats(store, ws).to_dict()
        print(json.dumps(stats, default=str) if args.json else "\n".join(f"{k}: {v}" for k, v in stats.items()))
        return 0
    if args.action == "synonyms" and not args.file:
        print(synonyms_text(store, ws))
        return 0
    if args.action == "communities":
        from core.graph.build import recluster

        try:
            rep, cmp_ = recluster(store, cfg.graph, workspace=ws)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps({"seconds": rep.seconds, "communities": rep.communities, "levels": rep.levels,
                              "summaries_invalidated": rep.summaries_invalidated, **cmp_}))
        else:
            print(f"re-clustered in {rep.seconds:.2f} s: {rep.communities} communities on {rep.levels} level(s), "
                  f"{rep.summaries_invalidated} summaries invalidated; level-0 modularity "
                  f"{cmp_['modularity_before']:.4f} -> {cmp_['modularity_after']:.4f}; against the previous "
                  f"partition NMI {cmp_['nmi']:.3f}, ARI {cmp_['ari']:.3f}")
        return 0
    if args.action == "review" and not (args.approve or args.reject or args.undo):
        for q in store.review.queue("pending", ws):
            print(f"{q.item_id}  {q.score:.3f}  {q.keep_name!r} <- {q.other_name!r}")
        return 0
    deps = build_deps(cfg, store=store)
    for n in deps.notices:
        print(f"notice: {n}", file=sys.stderr)
    embedder = None if args.no_suggest else deps.embedder
    if args.action == "synonyms":
        try:
            report = set_synonyms(store, cfg.graph, read_text_checked(args.file, max_bytes=4 << 20,
                                                                      what="synonyms file"), embedder=embedder,
                                  workspace=ws)
        except (OSError, SynonymError, FileProblem) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if report is None:
            print("synonyms saved; they apply when the graph is built")
            return 0
    elif args.action == "review":
        item, decision = next((v, d) for v, d in ((args.approve, "approve"), (args.reject, "reject"),
                                                  (args.undo, "undo")) if v)
        try:
            report = decide_merge(store, cfg.graph, item, decision, embedder=embedder, workspace=ws)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        tty = sys.stderr.isatty()

        def progress(step: str, done: int, total: int) -> None:
            if tty:
                print(f"\r{step}: {done}/{total}   ", end="", file=sys.stderr)

        report = build_graph(store, cfg.graph, embedder=embedder, llm=deps.llm, workspace=ws,
                             full=args.full, progress=progress)
        if tty:
            print(file=sys.stderr)
    if args.json:
        print(json.dumps({**report.__dict__, "usage": report.usage.__dict__, "notes": list(report.notes)}))
    else:
        print(f"{report.mode} build ({report.builder}) in {report.seconds:.2f} s: +{report.chunks_added} / "
              f"-{report.chunks_removed} chunks; {report.nodes} nodes ({report.active_nodes} active), "
              f"{report.edges} edges; {report.communities} communities on {report.levels} level(s); "
              f"{report.summaries_invalidated} summaries invalidated, {report.summaries_written} written; {report.suggestions} new merge suggestions")
        for n in report.notes:
            print(f"note: {n}")
    return 0


def _trace_args(p: Parser) -> None:
    p.add_argument("action", choices=["export"])
    _add_common(p, config=False)
    p.add_argument("--last", type=int, default=1, help="the N most recent queries of the run log")
    p.add_argument("--format", default="otlp-json", choices=["otlp-json", "json"],
                   help="otlp-json: OTLP/JSON spans (OpenInference); json: the workbench's own trace JSON")
    p.add_argument("--endpoint", help="OTLP/HTTP receiver, e.g. http://127.0.0.1:6006/v1/traces (Phoenix)")
    p.add_argument("--protocol", default="http/protobuf", choices=["http/protobuf", "http/json"],
                   help="body sent to --endpoint")
    p.add_argument("--out", help="write the export to this file instead of stdout")


def cmd_trace(args: argparse.Namespace) -> int:
    from core.app.trace_export import cli_export

    return cli_export(_open_store(args, "read"), args)


def _workspaces_args(p: Parser) -> None:
    p.add_argument("action", nargs="?", choices=["list", "create", "rename", "delete"], default="list")
    p.add_argument("name", nargs="?")
    p.add_argument("new_name", nargs="?")
    p.add_argument("--yes", action="store_true", help="delete: confirm")
    _add_json(p)
    _add_common(p, config=False)


def cmd_workspaces(args: argparse.Namespace) -> int:
    from core.app.workspaces import (
        WorkspaceError,
        create_workspace,
        delete_workspace,
        list_workspaces,
        rename_workspace,
    )

    action = args.action or "list"
    store = Store(_db(args), read_only=action == "list" and Path(_db(args)).is_file())
    try:
        if action == "list":
            rows = list_workspaces(store)
            if args.json:
                print(json.dumps({"workspaces": [w.to_dict() for w in rows]}, ensure_ascii=False))
            else:
                for w in rows:
                    print(f"{w.name:<24} {w.documents:>5} docs {w.chunks:>6} chunks  corpus v{w.corpus_version:<4} "
                          f"cache {w.cached_answers} answers, {w.cache_hits} hits / {w.cache_misses} misses / "
                          f"{w.cache_guarded_misses} guarded")
            return 0
        if not args.name:
            raise WorkspaceError(f"workspaces {action} needs a NAME")
        if action == "create":
            print(f"created workspace '{create_workspace(store, args.name)}'")
        elif action == "rename":
            if not args.new_name:
                raise WorkspaceError("workspaces rename needs OLD NEW")
            moved = rename_workspace(store, args.name, args.new_name)
            print(f"renamed '{args.name}' to '{args.new_name}' ({moved:,} rows moved)")
        elif action == "delete":
            if not args.yes:
                raise WorkspaceError(f"deleting '{args.name}' removes all of its documents, graph, runs, ledger and "
                                     "caches; add --yes to confirm")
            deleted = delete_workspace(store, args.name, progress=lambda msg: print(msg, file=sys.stderr))
            if args.json:
                print(json.dumps({"deleted": args.name, "rows": deleted}))
            else:
                print(f"deleted workspace '{args.name}' ({sum(deleted.values()):,} rows in "
                      f"{sum(1 for n in deleted.values() if n)} tables)")
        return 0
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _live_token_keys(store: Store, workspace: str) -> set[str]:
    """Text keys late-interaction rerank can still ask for: every chunk's text, alone and behind each stored context
    (core.cascade.rerank.rerank_text). Token vectors of other texts belong to deleted or replaced documents."""
    from core.models.tokens import text_key
    from core.retrieve.index import contextual_text

    chunks = store.corpus.chunks(workspace)
    keys = {text_key("", c.text) for c in chunks}
    for variant in ("heuristic", "llm"):
        ctx = store.ledger.contexts(variant, workspace)
        keys |= {text_key("", contextual_text(ctx[c.chunk_id], c.text)) for c in chunks if c.chunk_id in ctx}
    return keys


def _cache_args(p: Parser) -> None:
    p.add_argument("action", choices=["stats", "clear", "compact"])
    p.add_argument("--prune", action="store_true",
                   help="compact: first drop this workspace's token vectors no current chunk reads "
                        "(deleted documents')")
    _add_json(p)
    _add_common(p, config=False)


def cmd_cache(args: argparse.Namespace) -> int:
    store = Store(_db(args), read_only=args.action == "stats" and Path(_db(args)).is_file())
    if args.action == "compact":
        dropped = store.caches.drop_token_vectors_except(_live_token_keys(store, args.workspace), args.workspace) \
            if args.prune else 0
        res = {"workspace": args.workspace, "token_vectors_dropped": dropped, **store.caches.compact_token_vectors()}
        print(json.dumps(res) if args.json else "  ".join(f"{k}={v}" for k, v in res.items()))
        return 0
    if args.action == "clear":
        n = store.answers.clear_answers(args.workspace)
        print(json.dumps({"workspace": args.workspace, "cleared": n}) if args.json
              else f"cleared {n} cached answers in workspace '{args.workspace}'")
        return 0
    c = store.answers.answer_cache_counts(args.workspace)
    data = {"workspace": args.workspace, "entries": c.entries, "hits": c.hits, "misses": c.misses,
            "guarded_misses": c.guarded_misses, "hit_rate": round(c.hit_rate, 4), "saved_ms": round(c.saved_ms, 1),
            "saved_usd": round(c.saved_usd, 6)}
    print(json.dumps(data) if args.json else "  ".join(f"{k}={v}" for k, v in data.items()))
    return 0


def _cag_args(p: Parser) -> None:
    p.add_argument("question")
    p.add_argument("--estimate-only", action="store_true", help="print the cost estimate and break-even, no call")
    _add_json(p)
    _add_common(p)


def cmd_cag(args: argparse.Namespace) -> int:
    """Cache-augmented generation: the estimate first (always), then the answer when a key is set."""
    from core.app.workspaces import WorkspaceError, require_workspace
    from core.models.llm import LLMError
    from core.route import cag

    cfg = _config(args)
    store = Store(_db(args))
    try:
        require_workspace(store, args.workspace)
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    deps = build_deps(cfg, store=store)
    prefix, _ = cag.corpus_prefix(store.corpus, args.workspace)
    est, sha = cag.workspace_estimate(store.corpus, args.workspace, model=cfg.cag.model,
                                      limit_tokens=cfg.cag.max_corpus_tokens, max_chunks=cfg.answer.max_chunks,
                                      output_tokens=cfg.cag.max_tokens, llm=deps.llm,
                                      question_tokens=max(1, len(args.question) // 4), ttl=cfg.llm.cache_ttl)
    out: dict = {"estimate": est.to_dict(), "prefix_sha256": sha}
    if not args.estimate_only and est.available:
        try:
            res = cag.answer(args.question, prefix, deps.llm, model=cfg.cag.model, max_tokens=cfg.cag.max_tokens,
                             workspace=args.workspace)
        except LLMError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        out.update(answer=res.text, refused=res.refused, note=res.note, usage=res.usage.__dict__,
                   cache_read_share=round(res.cache_read_share, 4))
        if res.refused and cfg.cag.fallback_to_rag:
            trace = run_query(args.question, cfg, deps, workspace=args.workspace)
            out["fallback"] = {"route": "rag", "answer": trace.answer.text if trace.answer else None,
                               "note": "CAG found no answer in the documents: answered by retrieval instead"}
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        e = est
        be = (f"break-even after {e.break_even_queries} queries per cache lifetime" if e.break_even_queries
              else "no break-even against RAG")
        print(f"corpus ~{e.corpus_tokens:,} tokens (limit {e.limit_tokens:,}); {e.model}: first query "
              f"${e.first_query_usd:.4f}, then ${e.next_query_usd:.4f} (uncached ${e.uncached_query_usd:.4f}); "
              f"RAG ${e.rag_query_usd:.4f} per query; {be}")
        if e.note:
            print(f"note: {e.note}")
        if "answer" in out:
            print(out["answer"])
        if "fallback" in out:
            print(f"{out['fallback']['note']}:\n{out['fallback']['answer']}")
    return 0


def _golden_args(p: Parser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    g = sub.add_parser("generate", help="generate a golden set from the workspace's own documents and store it")
    _add_common(g, config=False)
    g.add_argument("--n", type=int, default=150, help="number of questions (default 150)")
    g.add_argument("--name", default=None, help="set name (default generated-v<corpus version>-n<N>)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--llm", action="store_true", help="Claude writes the items (needs ANTHROPIC_API_KEY); "
                   "offline otherwise")
    g.add_argument("--budget-usd", type=float, default=1.0, help="with --llm: stop before spending more")
    g.add_argument("--batch", action="store_true", help="with --llm: one Message Batch (-50%%); a batch still "
                   "running after --wait-s is collected by the next --batch run")
    g.add_argument("--wait-s", type=float, default=3600.0, help="with --batch: how long to wait for the batch")
    _add_json(g, "the report as JSON")
    e = sub.add_parser("export", help="write a stored golden set as JSONL (id, query, gold doc/chunk/span, answer, "
                       "answerable, type)")
    e.add_argument("name", help="set name, or WORKSPACE/NAME")
    _add_common(e, config=False)
    e.set_defaults(workspace=None)
    e.add_argument("--out", required=True, help="JSONL file to write ('-' for stdout)")
    ls = sub.add_parser("list", help="the workspace's golden sets with counts by status and type")
    _add_common(ls, config=False)
    _add_json(ls)


def cmd_golden(args: argparse.Namespace) -> int:
    from core.eval.golden import generate_into
    from core.eval.golden_io import to_jsonl

    if args.action == "list":
        store = _open_store(args, "read")
        rows = [{"name": r.name, "items": r.items, "by_status": dict(r.by_status), "by_type": dict(r.by_type),
                 "generator": r.generator, "corpus_version": r.corpus_version} for r in
                store.golden.sets(args.workspace)]
        if args.json:
            print(json.dumps(rows, ensure_ascii=False))
        for r in [] if args.json else rows:
            status = ", ".join(f"{k} {v}" for k, v in sorted(r["by_status"].items()))
            types = ", ".join(f"{k} {v}" for k, v in sorted(r["by_type"].items()))
            print(f"{r['name']}: {r['items']} items ({status}; {types}) by {r['generator'] or 'hand'}")
        return 0
    if args.action == "export":
        store = _open_store(args, "read")
        ws, name = args.workspace, args.name
        if ws is None and "/" in name:
            ws, name = name.split("/", 1)
        if ws is None:
            where = store.golden.find_set(name)
            if len(where) != 1:
                print(f"error: golden set {name!r} is in {len(where)} workspaces{': ' + ', '.join(where) if where else ''}"
                      "; name one with --workspace", file=sys.stderr)
                return 2
            ws = where[0]
        items = store.golden.items(ws, name)
        if not items and name not in {r.name for r in store.golden.sets(ws)}:
            print(f"error: no golden set {name!r} in workspace {ws!r}", file=sys.stderr)
            return 2
        text = to_jsonl(items)
        if args.out == "-":
            sys.stdout.write(text)
        else:
            Path(args.out).write_text(text, encoding="utf-8")
            print(f"wrote {text.count(chr(10))} items of {ws}/{name} to {args.out}")
        return 0
    if args.n < 1:
        print("error: --n must be 1 or more", file=sys.stderr)
        return 2
    if args.batch and not args.llm:
        print("error: --batch sends Claude's requests as one Message Batch: use it with --llm", file=sys.stderr)
        return 2
    store = _open_store(args, "write")
    progress = _stderr_progress("facts") if sys.stderr.isatty() else None
    if args.llm:
        from core.eval.golden_llm import LLMBudget, generate_llm_into

        deps = build_deps(PipelineConfig(), store=store)
        if deps.llm is None or not deps.llm.available:
            print("error: --llm needs an Anthropic key (ANTHROPIC_API_KEY); without --llm the offline generator "
                  "runs", file=sys.stderr)
            return 2
        report = generate_llm_into(store.golden, store.corpus, deps.llm, args.workspace, args.n, name=args.name,
                                   seed=args.seed, budget=LLMBudget(args.budget_usd),
                                   corpus_version=store.corpus.corpus_version(args.workspace),
                                   ledger=store.ledger if args.batch else None, max_wait_s=args.wait_s)
    else:
        try:
            report = generate_into(store.golden, store.corpus, args.workspace, args.n, name=args.name,
                                   seed=args.seed, corpus_version=store.corpus.corpus_version(args.workspace),
                                   progress=(lambda d, t, m: progress(d, t)) if progress else None)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        types = ", ".join(f"{k} {v}" for k, v in sorted(report.by_type.items()))
        print(f"golden set {report.name} in workspace {report.workspace}: {report.items} items ({types}); "
              f"mean question-gold sentence overlap {report.mean_overlap}")
        for note in report.notes:
            print(f"note: {note}")
    return 0


def _doctor_args(p: Parser) -> None:
    _add_json(p, "print {\"checks\": [{mistake, status, evidence, fix}, ...]}")
    _add_common(p)
    p.add_argument("--strict", action="store_true", help="exit 1 when a check fails")


def cmd_doctor(args: argparse.Namespace) -> int:
    """The ten typical mistakes, each checked on the workspace's data, traces, ledger and stored evaluations."""
    from core.app.doctor import doctor, summary
    from core.app.workspaces import load_workspace_config
    from core.models.onnx import model_id_for

    store = _open_store(args, "read")
    cfg = _config(args)
    if not getattr(args, "config", None) and not args.set:
        saved, notice = load_workspace_config(store, args.workspace)  # the configuration the workspace last ran
        if notice:
            print(f"notice: {notice}", file=sys.stderr)
        cfg = saved or cfg
    model = os.environ.get("RAG_EMBED_MODEL", cfg.embedding.model)  # the id build_deps' embedder would carry
    embedder_id = model_id_for(model, cfg.embedding.runtime)
    checks = doctor(store, args.workspace, cfg, embedder_id=embedder_id)
    if args.json:
        print(json.dumps({"workspace": args.workspace, "config_hash": cfg.stable_hash(), "summary": summary(checks),
                          "checks": [c.to_dict() for c in checks]}, ensure_ascii=False))
    else:
        for c in checks:
            print(f"{c.number:>2}. [{c.status}] {c.mistake}\n    evidence: {c.evidence}\n    fix: {c.fix}")
        print("  ".join(f"{k}: {v}" for k, v in summary(checks).items()))
    return 1 if args.strict and any(c.status == "fail" for c in checks) else 0


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and help line, the builder of its arguments and the handler main() runs."""

    name: str
    help: str
    add_args: Callable[[Parser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS = (
    Command("ingest", "ingest files or folders", _ingest_args, cmd_ingest),
    Command("query", "run one query and print every stage", _query_args, cmd_query),
    Command("docs", "list documents", _docs_args, cmd_docs),
    Command("delete", "delete a document and everything derived from it", _delete_args, cmd_delete),
    Command("eval", "score configurations over a golden set (recall@k, MRR, nDCG, per stage)", _eval_args, cmd_eval),
    Command("calibrate", "fit the workspace's offline refusal threshold on a golden set (k-fold CV) and store it",
            _calibrate_args, cmd_calibrate),
    Command("sweep", "run a grid of configurations over a golden set and rank them (resumable)", _sweep_args,
            cmd_sweep),
    Command("context", "build chunk contexts: heuristic, late chunking, or LLM (prompt-cached)", _context_args,
            cmd_context),
    Command("graph", "entity graph: build/update it, stats, synonyms, merge review", _graph_args, cmd_graph),
    Command("raptor", "RAPTOR tree of cluster summaries: estimate, build, stats", _raptor_args, cmd_raptor),
    Command("workspaces", "list workspaces, or create / rename / delete one", _workspaces_args, cmd_workspaces),
    Command("cache", "semantic answer cache: stats, or clear this workspace's cached answers; compact: reclaim the "
            "token-vector file's deleted space", _cache_args, cmd_cache),
    Command("cag", "cache-augmented generation: whole corpus in a cached prompt; estimate first", _cag_args, cmd_cag),
    Command("golden", "golden sets from the workspace's own documents: generate, list, export as JSONL", _golden_args,
            cmd_golden),
    Command("trace", "export logged query traces (OpenTelemetry / OpenInference spans, or JSON)", _trace_args,
            cmd_trace),
    Command("sql", "run one read-only SELECT over the workspace's tables in the SQL sandbox", _sql_args, cmd_sql),
    Command("collections", "the workspace's collections (knowledge bases): list, or describe one (and set its "
            "description)", _collections_args, cmd_collections),
    Command("doctor", "the ten typical mistakes, each checked on this workspace's data, traces and evaluations",
            _doctor_args, cmd_doctor),
)


class _TerminalSafe:
    """A text stream that writes control characters as visible escapes (core.text.terminal_safe): document text and
    file names printed by any command cannot drive the terminal (OSC 8 links, concealed text, cursor moves)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        body = text.lstrip("\r")  # a leading carriage return is the commands' own progress line, kept
        return self._inner.write(text[: len(text) - len(body)] + terminal_safe(body))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = next(c.run for c in COMMANDS if c.name == args.cmd)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _TerminalSafe(out), _TerminalSafe(err)
    try:
        return run(args)
    except (ConfigError, QueryError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = out, err
