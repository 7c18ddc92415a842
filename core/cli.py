"""Headless entry point: `python -m core ingest|query|docs|delete ...` over the same core the pages use."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from core.config import ConfigError, PipelineConfig, load_config_file, parse_set_value
from core.deps import DEFAULT_DB, build_deps
from core.ingest.pipeline import ingest_files, read_paths
from core.pipeline import QueryError, run_query, validate_query
from core.report import text_table
from core.store import Store, StoreError
from core.types import DEFAULT_WORKSPACE


def _config(args: argparse.Namespace) -> PipelineConfig:
    cfg = load_config_file(args.config) if getattr(args, "config", None) else PipelineConfig()
    overrides = {}
    for item in getattr(args, "set", None) or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        overrides[key.strip()] = parse_set_value(value.strip())
    return cfg.with_overrides(overrides) if overrides else cfg


def _add_common(p: argparse.ArgumentParser, *, config: bool = True) -> None:
    p.add_argument("--db", default=None, help=f"DuckDB file (default {DEFAULT_DB}; env RAG_DB)")
    p.add_argument("--workspace", default=DEFAULT_WORKSPACE)
    if config:
        p.add_argument("--config", help="TOML or JSON pipeline config")
        p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override one setting")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m core", description="RAG Workbench, headless")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ingest", help="ingest files or folders")
    p.add_argument("paths", nargs="+")
    _add_common(p)
    p.add_argument("--if-empty", action="store_true", help="do nothing when the workspace already has documents")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("query", help="run one query and print every stage")
    p.add_argument("query")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--depth", type=int, default=10, help="rows per stage in the table")
    p = sub.add_parser("docs", help="list documents")
    _add_common(p, config=False)
    p = sub.add_parser("delete", help="delete a document and everything derived from it")
    p.add_argument("doc_id")
    _add_common(p, config=False)
    return ap


def _db(args: argparse.Namespace) -> str:
    import os

    return args.db or os.environ.get("RAG_DB", str(DEFAULT_DB))


def cmd_ingest(args: argparse.Namespace) -> int:
    cfg = _config(args)
    store = Store(_db(args))
    if args.if_empty and store.count("documents", args.workspace):
        print(f"{_db(args)} already holds {store.count('documents', args.workspace)} documents; nothing to ingest")
        return 0
    try:
        files = read_paths(args.paths)
    except OSError as exc:
        print(f"error: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    deps = build_deps(cfg, store=store)
    for n in deps.notices:
        print(f"notice: {n}", file=sys.stderr)
    report = ingest_files(files, store=store, embedder=deps.embedder, config=cfg, workspace=args.workspace)
    if args.json:
        print(json.dumps({"results": [r.__dict__ for r in report.results], "embedded": report.embedded,
                          "cache_hits": report.cache_hits}))
    else:
        for r in report.results:
            detail = r.message if r.status == "error" else f"{r.chunks} chunks, {r.embedded} embedded, {r.cache_hits} cached"
            print(f"{r.status:<9} {r.name}: {detail}")
        print(f"{len(report.ok)} ok, {len(report.errors)} failed; {report.embedded} embeddings computed, "
              f"{report.cache_hits} from cache")
    return 1 if report.errors and not report.ok else 0


def cmd_query(args: argparse.Namespace) -> int:
    cfg = _config(args)
    validate_query(args.query, cfg)  # fail fast, before a model is loaded
    deps = build_deps(cfg, store=Store(_db(args)))
    trace = run_query(args.query, cfg, deps, workspace=args.workspace)
    if args.json:
        out = trace.to_dict()
        out["notices"] = deps.notices
        print(json.dumps(out, ensure_ascii=False))
    else:
        for n in deps.notices:
            print(f"notice: {n}")
        print(text_table(trace, depth=args.depth))
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    store = Store(_db(args))
    for d in store.documents(args.workspace):
        print(f"{d.doc_id}  {d.kind:<5} {d.n_chunks:>4} chunks  {d.size_bytes:>9,} B  {d.lang}  {d.name}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store = Store(_db(args))
    if store.delete_document(args.doc_id, args.workspace):
        print(f"deleted {args.doc_id}")
        return 0
    print(f"error: no document {args.doc_id}", file=sys.stderr)
    return 1


COMMANDS = {"ingest": cmd_ingest, "query": cmd_query, "docs": cmd_docs, "delete": cmd_delete}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except (ConfigError, QueryError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
