"""Hostile-input bench (issue #12): >= 300 generated bad files, a concurrency run and a fault-server run.

    .venv/bin/python bench/hostile.py                     # all three parts, writes bench/results/hostile.json
    .venv/bin/python bench/hostile.py --parts files --real-embedder
    .venv/bin/python bench/hostile.py --parts ingest         # the file/ingest cases: bench/results/hostile_ingest.json

Files: every class of issue #12 (decompression bombs, huge headings, 10,000 headings, deep HTML, truncated and
encrypted PDFs, PDFs with big object streams, fake DOCX, empty files, NUL bytes, UTF-16/32 and Russian code pages,
Markdown-injection and SQL-ish and path-ish names) is ingested one file at a time into a fresh database. Reported:
crashes (an exception escaping ingest_files), hangs (a file taking > 30 s), per-class outcomes, peak RSS of this
process and of the parse workers, and a consistency check of the database (every document has its chunks and
each chunk its vector; no orphan rows). The default embedder is the deterministic hash fake, so the run measures
parsing, chunking and storing rather than the model on 2 shared cores; --real-embedder uses the bundled MiniLM.

Concurrency: 8 query threads + 1 ingest thread in this process and a second process running `python -m core docs`
against the same file (it reads a snapshot: DuckDB allows one writing process) for --seconds: errors and stale
results (a query for a document's unique code that does not return that document first).

Ingest (issue #33, its own results file): the CLI and ingest_files against the disk: same-named files in many
folders (files lost), a FIFO, a link to the zero device and links out of the folder (refused, seconds taken), 0.7 MB
of headings and 2 MB tables (chunk cap and message), `kill -9` of a real CLI ingest at several moments and its
resume (documents kept, vectors made twice), and the peak RSS of a first ingest on a fresh model cache (ONNX export).

Faults: the loopback Anthropic stub answers 429/500/529/stall/malformed (3 kinds)/echoing-headers faults; 100 runs
of a query with answer.mode=llm plus an LLM context build under a small budget: tracebacks, budget overshoots,
and whether the key appears in any database byte, trace or printed error.

Trust (issue #46, `--parts trust`, bench/results/hostile_trust.json; the cases live in bench/hostile_trust.py): a
workspace delete killed mid-rewrite and raced by a CLI writer, byte caps (SQL cells, an oversized reply, history
turns), every named path fed a FIFO / the zero device / deep JSON / symlink loops, sessions across workspaces, a
killed RAPTOR build, table limits and fidelity, CTE bypasses of the SQL check, disguised key echoes and terminal
escapes, a retry-after of an hour, and planted instructions; each case counted as ok, clear error, crash, hang, data
lost or leak.

LLM (issue #33 items 1-3; `--parts llm`, written to bench/results/hostile_llm.json): an endpoint that quotes the
request headers in every reply (200 text, structured replies, tool input) and in 4xx/5xx bodies, through a context
build, an LLM graph build, the LLM answer, multi-query, the agent's LLM grader and CAG, then the key counted in the
database and token-vector bytes, traces, exported spans, error texts and everything printed; every bad-usage mode
(negative, huge, missing, non-numeric, zero, cache-heavy, 1-hour writes) under a small context-build budget and
agent budget (overshoot in % of the budget, ledger total); and a server trickling one byte per 0.2 s (headers or
body) against llm.timeout_s = 1 for one call, a call with retries, and the agent loop's time budget.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, write_result  # noqa: E402
from tests.bad_inputs import docx_with, docx_with_body  # noqa: E402 - the same generators the tests use
from tests.bad_inputs import pdf_with_text as _pdf

HANG_S = 30.0
BEACON = "http://203.0.113.7/pixel.png"


# -- the hostile files -------------------------------------------------------------------------------------------
def hostile_files(seed: int = 7, scale: float = 1.0) -> list[tuple[str, bytes, str]]:
    """(name, bytes, class) of >= 300 hostile uploads. `scale` < 1 shrinks the big ones (tests use 0.05)."""
    rng = random.Random(seed)
    out: list[tuple[str, bytes, str]] = []

    def add(cls: str, name: str, data: bytes) -> None:
        out.append((name, data, cls))

    big = max(1, int(scale * 200_000))
    # decompression bombs and broken zips
    for i, n in enumerate([20_000, 60_000, 200_000, 600_000, 2_000_000]):
        n = n if scale >= 1 else max(40_000, int(n * scale))  # 40,000 paragraphs is still a (small) bomb
        add("docx_bomb", f"bomb_{i}.docx", docx_with_body("<w:p><w:r><w:t>a</w:t></w:r></w:p>" * n))
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as z:
        for i in range(2500):
            z.writestr(f"p/{i}.xml", "")
    add("docx_bomb", "many_entries.docx", many.getvalue())
    good_docx = docx_with([("Heading 1", "Policy"), ("Normal", "Staff may work remotely.")])
    for i in range(20):
        add("truncated_docx", f"truncated_{i}.docx", good_docx[: rng.randint(10, len(good_docx) - 1)])
    for i in range(15):
        add("fake_docx", f"fake_{i}.docx", rng.choice([b"plain text pretending", b"PK\x03\x04" + os.urandom(200),
                                                       os.urandom(500), b"<html>no</html>"]))
    # PDFs
    good_pdf = _pdf("Quarterly revenue grew 3 percent")
    for i in range(25):
        add("truncated_pdf", f"truncated_{i}.pdf", good_pdf[: rng.randint(8, len(good_pdf) - 1)])
    for i in range(10):
        add("encrypted_pdf", f"locked_{i}.pdf", _pdf(f"secret {i}", password=f"pw{i}"))
    for i in range(10):
        add("garbage_pdf", f"garbage_{i}.pdf", b"%PDF-1.7\n" + os.urandom(rng.randint(10, 4000)))
    for i, mb in enumerate([1, 5, 20]):
        add("pdf_object_stream", f"stream_{i}.pdf", _pdf("inflates", extra_stream=b"0 0 m\n" * int(mb * scale * 170_000)))
    # Markdown and HTML amplification
    heading = " ".join(f"w{i}" for i in range(big))
    add("huge_heading", "one_heading.md", f"# {heading}\n\n".encode() + b"Body text line.\n\n" * 2000)
    add("many_headings", "ten_thousand_headings.md",
        "".join(f"## H{i}\n\nline {i}\n\n" for i in range(max(100, int(10_000 * scale)))).encode())
    for i, depth in enumerate([1000, 20_000, int(300_000 * scale) or 1000]):
        add("deep_html", f"nest_{i}.html", b"<div>" * depth + b"deep text" + b"</div>" * depth)
    add("deep_html", "huge_attr.html", b"<p title='" + b"x" * int(2_000_000 * scale) + b"'>attr</p>")
    add("deep_html", "scripts.html", b"<script>" + b"alert(1);" * 10_000 + b"</script><p>after script</p>")
    # empty, NUL, binary
    for i, data in enumerate([b"", b" ", b"\n\n\n", b"\t \r\n", b"\xef\xbb\xbf"]):
        for ext in ("txt", "md", "html"):
            add("empty", f"empty_{i}.{ext}", data)
    for i in range(20):
        add("nul_bytes", f"nul_{i}.txt", b"text\x00" * rng.randint(1, 500) + os.urandom(rng.randint(0, 300)))
    for i in range(20):
        add("binary", f"binary_{i}.{rng.choice(['txt', 'md', 'html'])}", os.urandom(rng.randint(50, 5000)))
    # encodings (must ingest)
    ru = "Выручка депо выросла на пять процентов, а бригада проверила колёсные пары до утренней смены. "
    for codec in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "cp1251", "koi8_r",
                  "utf-8-sig"):
        for i in range(3):
            add("encoding", f"ru_{codec}_{i}.txt", (ru * (i + 1)).encode(codec))
    # odd names and injection (must ingest, shown as data)
    names = ["../../x.txt", "..\\..\\win.txt", "'; DROP TABLE documents;--.md", "a\nb.md", "\u202egnp.txt",
             f"![p]({BEACON}).md", "<script>alert(1)</script>.html", "$x$.md", ":material/home:.md",
             "a" * 251 + ".txt", "b" * 400 + ".md", "пробел и ё.txt", "tab\tname.md", "emoji 😀.md", ".hidden.md",
             "CON.txt", "x.MD", "y.HtMl", "no_extension", "double.pdf.txt", "trailing.txt ", "z.exe"]
    for i, n in enumerate(names):
        add("odd_name", n, f"# Odd {i} ![hp]({BEACON})\n\nA document with an odd name, number {i}.\n".encode())
    # fill up with mixed random damage of valid files to pass 300
    bases = [("md", b"# T\n\n## S\n\nSome text here.\n"), ("html", b"<h1>T</h1><p>text</p>"), ("txt", b"plain text\n"),
             ("pdf", good_pdf), ("docx", good_docx)]
    i = 0
    while len(out) < 320:
        ext, base = bases[i % len(bases)]
        data = bytearray(base)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        add("bitflip", f"flip_{i}.{ext}", bytes(data))
        i += 1
    return out


# -- consistency -----------------------------------------------------------------------------------------------------
def consistency(store: Any, model_id: str) -> dict[str, int]:
    """Counts that must all be 0 in a consistent database."""
    cur = store.db.cursor()

    def one(sql: str, *params: Any) -> int:
        return int(cur.execute(sql, list(params)).fetchone()[0])

    return {
        "documents_with_wrong_chunk_count": one(
            "SELECT count(*) FROM documents d WHERE n_chunks <> (SELECT count(*) FROM chunks c WHERE "
            "c.workspace_id = d.workspace_id AND c.doc_id = d.doc_id)"),
        "orphan_chunks": one("SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE "
                             "d.workspace_id = c.workspace_id AND d.doc_id = c.doc_id)"),
        "chunks_without_vector": one("SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE "
                                     "v.workspace_id = c.workspace_id AND v.chunk_id = c.chunk_id AND "
                                     "v.variant = 'raw' AND v.model_id = ?)", model_id),
        "orphan_vectors": one("SELECT count(*) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE "
                              "c.workspace_id = v.workspace_id AND c.chunk_id = v.chunk_id)"),
    }


# -- part 1: files ---------------------------------------------------------------------------------------------------
def run_files(db: Path, *, real: bool, scale: float = 1.0) -> dict[str, Any]:
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.ingest.sandbox import ParseSandbox
    from core.store import Store
    from tests.fakes import HashEmbedder

    if real:
        from core.models.embed import load_embedder

        embedder: Any = load_embedder("bundled:all-MiniLM-L6-v2").embedder
    else:
        embedder = HashEmbedder()
    files = hostile_files(scale=scale)
    store = Store(db)
    cfg = PipelineConfig()
    sandbox = ParseSandbox()
    rows = []
    t_all = time.perf_counter()
    for name, data, cls in files:
        t = time.perf_counter()
        try:
            rep = ingest_files([(name, data)], store=store, embedder=embedder, config=cfg, sandbox=sandbox)
            r = rep.results[0]
            status, msg, crash = r.status, r.message, ""
        except BaseException as exc:  # noqa: BLE001 - a crash is what this bench counts
            status, msg, crash = "crash", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)
        secs = time.perf_counter() - t
        rows.append({"name": name[:80], "class": cls, "bytes": len(data), "status": status, "seconds": round(secs, 3),
                     "message": msg[:200], "crash": crash})
    total_s = time.perf_counter() - t_all
    sandbox.close()
    checks = consistency(store, embedder.model_id)
    store.close()
    by_class: dict[str, Counter] = {}
    for r in rows:
        by_class.setdefault(r["class"], Counter())[r["status"]] += 1
    slowest = sorted(rows, key=lambda r: -r["seconds"])[:8]
    return {
        "embedder": "bundled MiniLM" if real else "hash fake (tests/fakes.py)",
        "files": len(rows), "seconds_total": round(total_s, 1),
        "crashes": sum(r["status"] == "crash" for r in rows),
        "hangs_over_30s": sum(r["seconds"] > HANG_S for r in rows),
        "errors_reported": sum(r["status"] == "error" for r in rows),
        "ingested": sum(r["status"] in ("ingested", "replaced", "unchanged") for r in rows),
        "peak_rss_mb_bench_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # From /proc VmHWM of each worker (RUSAGE_CHILDREN would count this process's size at fork time).
        "peak_rss_mb_parse_workers": round(sandbox.peak_worker_kb / 1024, 1),
        "db_bytes": db.stat().st_size,
        "consistency": checks, "consistent": not any(checks.values()),
        "by_class": {k: dict(v) for k, v in sorted(by_class.items())},
        "slowest": [{k: r[k] for k in ("name", "class", "status", "seconds", "message")} for r in slowest],
        "crash_details": [r for r in rows if r["status"] == "crash"][:5],
        "encoding_files_ingested": sum(r["class"] == "encoding" and r["status"] == "ingested" for r in rows),
        "encoding_files": sum(r["class"] == "encoding" for r in rows),
    }


# -- part 2: concurrency ---------------------------------------------------------------------------------------------
def run_concurrency(db: Path, seconds: float) -> dict[str, Any]:
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from tests.fakes import HashEmbedder

    cfg = PipelineConfig().with_overrides({"answer.mode": "extractive", "answer_cache.enabled": False})
    deps = build_deps(cfg, {}, db=str(db), embedder=HashEmbedder())
    codes = [f"QX{n:04d}ZT" for n in range(40)]
    ingest_files([(f"seed_{c}.md", f"# Seed {c}\n\nThe inspection code {c} belongs to this depot log only.\n".encode())
                  for c in codes], store=deps.store, embedder=deps.embedder, config=cfg)
    stop = time.monotonic() + seconds
    errors: list[str] = []
    stale = 0
    queries = 0
    ingested = 0
    lock = threading.Lock()

    def querier(k: int) -> None:
        nonlocal stale, queries
        rng = random.Random(k)
        while time.monotonic() < stop:
            code = rng.choice(codes)
            try:
                tr = run_query(code, cfg, deps)
                bm25 = next(s for s in tr.stages if s.stage == "bm25")
                top = bm25.candidates[0].text if bm25.candidates else ""
                with lock:
                    queries += 1
                    stale += code not in top
            except Exception as exc:  # noqa: BLE001 - counted
                with lock:
                    errors.append(f"query: {type(exc).__name__}: {exc}"[:200])

    def ingester() -> None:
        nonlocal ingested
        n = 0
        while time.monotonic() < stop:
            n += 1
            try:
                rep = ingest_files([(f"extra_{n}.md", f"# Extra {n}\n\nFiller note {n} about lamps.\n".encode())],
                                   store=deps.store, embedder=deps.embedder, config=cfg)
                if rep.errors:
                    errors.append(f"ingest: {rep.errors[0].message}"[:200])
                ingested += 1
            except Exception as exc:  # noqa: BLE001
                errors.append(f"ingest: {type(exc).__name__}: {exc}"[:200])

    second: list[int] = []

    def other_process() -> None:
        env = {**os.environ, "RAG_DB_WAIT_S": "2"}
        while time.monotonic() < stop:
            p = subprocess.run([sys.executable, "-m", "core", "docs", "--db", str(db)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
            second.append(p.returncode)
            if p.returncode != 0:
                errors.append(f"second process: exit {p.returncode}: {p.stderr.strip()[-200:]}")

    threads = [threading.Thread(target=querier, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=ingester), threading.Thread(target=other_process)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deps.store.close()
    return {"seconds": round(time.perf_counter() - t0, 1), "query_threads": 8, "queries": queries,
            "stale_results": stale, "errors": len(errors), "error_samples": errors[:5], "ingested_during": ingested,
            "second_process_runs": len(second), "second_process_failures": sum(1 for r in second if r)}


# -- part 3: fault server --------------------------------------------------------------------------------------------
def run_faults(db: Path, runs: int) -> dict[str, Any]:
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.ingest.context import build_llm_contexts
    from core.ingest.pipeline import ingest_files
    from core.pipeline import run_query
    from tests.anthropic_stub import start_stub
    from tests.fakes import HashEmbedder

    stub = start_stub(key="sk-ant-api03-BENCHSECRET-0123456789abcdef")
    kinds: list[tuple[str, Any]] = [("status", 429), ("status", 500), ("status", 529), ("stall", 3.0),
                                    ("malformed", "truncated"), ("malformed", "no_content"), ("malformed", "html"),
                                    ("echo", 500), ("echo", 400), ("latency", 0.5)]
    cfg = PipelineConfig().with_overrides({"answer.mode": "llm", "answer_cache.enabled": False,
                                           "llm.timeout_s": 1.0, "llm.max_retries": 2})
    env = {"ANTHROPIC_API_KEY": stub.key, "ANTHROPIC_BASE_URL": stub.base_url}
    deps = build_deps(cfg, env, db=str(db), embedder=HashEmbedder())
    doc = "# Depot\n\n" + "".join(f"## Part {i}\n\nThe torque for bolt B{i} is {40 + i} Nm per the manual.\n\n"
                                  for i in range(12))
    ingest_files([("depot.md", doc.encode())], store=deps.store, embedder=deps.embedder, config=cfg)
    tracebacks, overshoots, outputs = 0, 0, []
    rng = random.Random(3)
    counted: Counter = Counter()
    t0 = time.perf_counter()
    for i in range(runs):
        kind = kinds[i % len(kinds)]
        counted[f"{kind[0]}:{kind[1]}"] += 1
        stub.state.faults.clear()
        stub.state.faults.extend([kind] * rng.randint(1, 3))
        try:
            if i % 2 == 0:
                tr = run_query(f"torque for bolt B{i % 12}", cfg, deps)
                outputs.append(json.dumps(tr.to_dict()))
            else:
                budget = 0.0004 + 0.0002 * (i % 5)
                before = sum(e.usd for e in deps.store.ledger.usage_ledger())
                rep = build_llm_contexts(deps.store, deps.llm, model="claude-haiku-4-5", budget_usd=budget)
                after = sum(e.usd for e in deps.store.ledger.usage_ledger())
                overshoots += (after - before) > budget + 1e-12 or rep.usd > budget + 1e-12
                outputs.append(rep.stopped + " ".join(rep.warnings))
                deps.store.ledger.delete_contexts("llm")  # the next build has work to do again
        except Exception as exc:  # noqa: BLE001 - counted: nothing may escape
            tracebacks += 1
            outputs.append(traceback.format_exc())
    secs = time.perf_counter() - t0
    deps.store.close()
    stub.stop()
    key = stub.key
    in_db = any(key.encode() in f.read_bytes() for f in db.parent.iterdir() if f.name.startswith(db.name))
    return {"runs": runs, "seconds": round(secs, 1), "faults": dict(counted), "tracebacks": tracebacks,
            "budget_overshoots": overshoots, "secret_in_db_files": in_db,
            "secret_in_traces_or_messages": any(key in o for o in outputs),
            "llm_requests_seen_by_stub": len(stub.state.requests)}


# -- part 4: the LLM client (issue #33 items 1-3) ---------------------------------------------------------------------
LLM_KEY = "proxy-Token-7f3a9c1e5b2d4a6f8e0c"  # not of the sk-ant- shape: only the registered key can hide it
USAGE_FAULTS = ("negative", "huge", "missing", "nonnumeric", "zero", "cache", "cache_1h")


def _llm_docs() -> list[tuple[str, bytes]]:
    return [(f"depot-{i}.md", ("# Depot {i}\n\n".format(i=i) + "".join(
        f"## Part {j}\n\nThe hub bolt B{i}{j} of Alice Brown's depot takes {40 + j} Nm; lamp L{j} is checked "
        f"nightly in Paris before the morning shift.\n\n" for j in range(12))).encode()) for i in range(3)]


def _key_echo(work: Path) -> dict[str, Any]:
    """Every path that calls Claude, against an endpoint quoting the request headers: key occurrences anywhere."""
    import contextlib

    from core.app.trace_export import otlp_json, spans_from_trace
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.graph.build import build_graph
    from core.ingest.context import build_llm_contexts
    from core.ingest.pipeline import ingest_files
    from core.models.llm import LLMError
    from core.pipeline import run_query
    from tests.anthropic_stub import start_stub
    from tests.fakes import HashEmbedder

    db = work / "llm_echo.duckdb"
    stub = start_stub(key=LLM_KEY)
    stub.state.echo_headers = True
    out, err = io.StringIO(), io.StringIO()
    texts: dict[str, list[str]] = {}
    calls: Counter = Counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        env = {"ANTHROPIC_API_KEY": LLM_KEY, "ANTHROPIC_BASE_URL": stub.base_url}
        cfg = PipelineConfig().with_overrides({"answer.mode": "llm", "answer_cache.enabled": False,
                                               "graph.builder": "llm", "llm.max_retries": 1, "llm.timeout_s": 5.0})
        deps = build_deps(cfg, env, db=str(db), embedder=HashEmbedder())
        ingest_files(_llm_docs(), store=deps.store, embedder=deps.embedder, config=cfg)

        def seen() -> int:
            return sum(r.path == "/v1/messages" for r in stub.state.requests)

        n0 = seen()
        rep = build_llm_contexts(deps.store, deps.llm, model="claude-haiku-4-5", budget_usd=1.0)
        texts["context build"] = [rep.stopped, *rep.warnings, *deps.store.ledger.contexts("llm").values()]
        calls["context build"], n0 = seen() - n0, seen()
        g = build_graph(deps.store, cfg.graph, embedder=deps.embedder, llm=deps.llm)
        texts["graph build"] = [json.dumps(g.__dict__, default=str), *(repr(n) for n in deps.store.graph.nodes())]
        calls["graph build"], n0 = seen() - n0, seen()
        runs = {"answer": cfg, "multi-query": cfg.with_overrides({"transforms.multi_query": "on"}),
                "agent (LLM grader)": cfg.with_overrides({"agent.enabled": True, "agent.grader": "llm",
                                                          "router.enabled": False}),
                "cag": cfg.with_overrides({"cag.enabled": True, "cag.model": "claude-haiku-4-5",
                                           "router.method": "offline", "answer.mode": "extractive"})}
        for name, c in runs.items():
            tr = run_query("What torque does the hub bolt B11 take?", c, deps)
            d = tr.to_dict()
            texts[name] = [json.dumps(d), json.dumps(otlp_json(spans_from_trace(d, run_id=name)))]
            calls[name], n0 = seen() - n0, seen()
        # 4xx / 5xx bodies quoting the headers, on every attempt
        errors: list[str] = []
        for code in (400, 401, 500, 529):
            stub.state.faults.clear()
            stub.state.faults.extend([("echo", code)] * 3)
            try:
                tr = run_query("What torque does the hub bolt B11 take?", cfg, deps)
                errors.append(json.dumps(tr.to_dict()))
            except LLMError as exc:  # never expected: the answer stage falls back
                errors.append(str(exc))
        texts["4xx/5xx echo"] = errors
        calls["4xx/5xx echo"] = sum(1 for r in stub.state.requests if r.path == "/v1/messages") - n0
        deps.store.close()
    stub.stop()
    texts["stdout/stderr"] = [out.getvalue(), err.getvalue()]
    files = [f for f in work.iterdir() if f.name.startswith(db.name) or f.name.startswith("llm_echo")]
    in_files = {f.name: f.read_bytes().count(LLM_KEY.encode()) for f in files}
    redacted = {k: sum("[redacted]" in t for t in v) for k, v in texts.items()}
    return {
        "paths": {k: {"llm_calls": calls.get(k, 0), "key_occurrences": sum(t.count(LLM_KEY) for t in v),
                      "texts_with_a_redaction": redacted[k]} for k, v in texts.items()},
        "key_occurrences_in_files": in_files,
        "key_occurrences_total": sum(in_files.values()) + sum(sum(t.count(LLM_KEY) for t in v) for v in texts.values()),
        "streamed": "not applicable: the client does not stream (every reply is read whole, then redacted)",
    }


def _usage_faults(work: Path) -> dict[str, Any]:
    """Each bad-usage mode under a small context-build budget and agent budget: calls, ledger total, overshoot."""
    from core.config import PipelineConfig
    from core.ingest.context import build_llm_contexts
    from core.ingest.pipeline import ingest_files
    from core.models.llm import AnthropicLLM
    from core.route.agent import Budget, LLMGrader, LLMWriter, run_agent
    from core.store import Store
    from core.types import Candidate, StageResult, Trace
    from tests.anthropic_stub import start_stub
    from tests.fakes import HashEmbedder

    stub = start_stub(key=LLM_KEY)
    rows = []
    budget, agent_budget = 0.02, 0.01

    def search(q: str) -> Trace:  # new passages for every query, so only a budget ends the loop
        tag = hashlib.sha1(q.encode()).hexdigest()[:8]
        cands = tuple(Candidate(f"c{tag}{i}", f"d{i}", f"Alice Brown met person {i} in Paris ({q}).", 1.0 / (i + 1),
                                i + 1) for i in range(5))
        return Trace(q, "h", 1, (StageResult("fused", cands, 1.0),))

    asked = Counter()

    def responder(body: dict[str, Any]) -> str:
        """Every passage graded incorrect and a fresh query asked for: the loop searches on until a budget stops it."""
        schema = ((body.get("output_config") or {}).get("format") or {}).get("schema") or {}
        text = " ".join(b.get("text", "") for m in body["messages"] for b in m["content"])
        if "grades" in schema.get("properties", {}):
            ids = [part.split('"')[0] for part in text.split('<passage id="')[1:]]
            return json.dumps({"grades": [{"id": i, "grade": "incorrect"} for i in ids]})
        if "queries" in schema.get("properties", {}):
            asked["q"] += 1
            n = asked["q"]  # words no earlier query had, so no query is dropped as a repeat
            words = " ".join(hashlib.sha1(f"{n}:{k}".encode()).hexdigest()[:7] for k in range(3))
            return json.dumps({"queries": [f"{words} Alice Brown"]})
        return "This chunk is part of the depot manual."

    stub.state.responder = responder
    for fault in (None, *USAGE_FAULTS):
        stub.state.usage_fault = fault
        store = Store(":memory:")
        ingest_files(_llm_docs(), store=store, embedder=HashEmbedder(), config=PipelineConfig())
        llm = AnthropicLLM(LLM_KEY, base_url=stub.base_url, ledger=store.ledger, max_retries=0, sleep=lambda s: None)
        rep = build_llm_contexts(store, llm, model="claude-haiku-4-5", budget_usd=budget, run_id="ctx")
        ctx = store.ledger.usage_ledger(run_id="ctx")
        ctx_total = sum(e.usd for e in ctx)
        before = len(store.ledger.usage_ledger())
        out = run_agent("Who did Alice Brown meet in Paris?", search,
                        budget=Budget(max_rounds=20, max_llm_calls=200, max_tokens=10**9, max_usd=agent_budget,
                                      max_seconds=120), grader=LLMGrader(llm, "claude-haiku-4-5"),
                        writer=LLMWriter(llm, "claude-haiku-4-5"), workspace="default")
        agent_rows = store.ledger.usage_ledger()[before:]
        agent_total = sum(e.usd for e in agent_rows)
        rows.append({
            "usage_fault": fault or "honest",
            "context_calls": len(ctx), "context_ledger_usd": round(ctx_total, 6),
            "context_overshoot_pct": round(max(0.0, ctx_total - budget) / budget * 100, 3),
            "context_stopped_by_budget": rep.stopped.startswith("budget"),
            "context_rows_flagged": sum(bool(e.usage_flag) for e in ctx),
            "agent_calls": len(agent_rows), "agent_ledger_usd": round(agent_total, 6),
            "agent_spend_usd": out.spent["usd"], "agent_stop": out.stop_reason,
            "agent_overshoot_pct": round(max(0.0, agent_total - agent_budget) / agent_budget * 100, 3),
            "min_row_usd": round(min((e.usd for e in ctx + agent_rows), default=0.0), 8),
            "max_row_usd": round(max((e.usd for e in ctx + agent_rows), default=0.0), 8),
        })
        store.close()
    stub.stop()
    return {"context_budget_usd": budget, "agent_budget_usd": agent_budget, "rows": rows,
            "max_overshoot_pct": max(max(r["context_overshoot_pct"], r["agent_overshoot_pct"]) for r in rows),
            "negative_rows": sum(r["min_row_usd"] < 0 for r in rows)}


def _trickle() -> dict[str, Any]:
    """A server sending one byte per 0.2 s against llm.timeout_s = 1: one call, a call with retries, the agent loop."""
    from core.models.llm import AnthropicLLM, LLMError, LLMRequest, TextBlock
    from core.route.agent import Budget, LLMGrader, LLMWriter, run_agent
    from core.types import Candidate, StageResult, Trace
    from tests.anthropic_stub import start_stub

    stub = start_stub(key=LLM_KEY)
    req = LLMRequest("claude-haiku-4-5", (TextBlock("You are terse."),), (TextBlock("Where is the torque?"),),
                     max_tokens=50)
    out: dict[str, Any] = {"timeout_s": 1.0, "byte_every_s": 0.2}
    for kind in ("trickle", "trickle_body"):
        for retries in (0, 2):
            llm = AnthropicLLM(LLM_KEY, base_url=stub.base_url, max_retries=retries, timeout_s=1.0)
            stub.state.faults.clear()
            stub.state.faults.extend([(kind, 0.2)] * (retries + 1))
            t0 = time.monotonic()
            try:
                llm.complete(req)
                result = "answered"
            except LLMError as exc:
                result = exc.kind
            out[f"{kind}_retries{retries}"] = {"seconds": round(time.monotonic() - t0, 2), "result": result,
                                               "attempts": retries + 1}

    def search(q: str) -> Trace:
        return Trace(q, "h", 1, (StageResult("fused", (Candidate("c1", "d1", f"text about {q}", 1.0, 1),), 1.0),))

    llm = AnthropicLLM(LLM_KEY, base_url=stub.base_url, max_retries=4, timeout_s=1.0)  # real backoff sleeps
    for label, fault in (("agent_trickle", ("trickle_body", 0.2)), ("agent_500s", ("status", 500))):
        stub.state.faults.clear()
        stub.state.faults.extend([fault] * 200)
        t0 = time.monotonic()
        res = run_agent("Who did Alice Brown meet in Paris?", search,
                        budget=Budget(max_rounds=10, max_llm_calls=100, max_tokens=10**9, max_usd=1.0,
                                      max_seconds=3.0),
                        grader=LLMGrader(llm, "claude-haiku-4-5"), writer=LLMWriter(llm, "claude-haiku-4-5"),
                        workspace="default")
        out[label] = {"max_seconds": 3.0, "seconds": round(time.monotonic() - t0, 2), "stop": res.stop_reason}
    stub.stop()
    secs = [v["seconds"] for v in out.values() if isinstance(v, dict) and "attempts" in v]
    out["hangs_over_30s"] = sum(s > HANG_S for s in secs)
    out["single_call_max_s"] = max(out[f"{k}_retries0"]["seconds"] for k in ("trickle", "trickle_body"))
    return out


def run_llm(work: Path) -> dict[str, Any]:
    """Issue #33 items 1-3: key echo in every mode, bad usage under budgets, a trickling server."""
    t0 = time.perf_counter()
    res = {"key_echo": _key_echo(work), "usage": _usage_faults(work), "trickle": _trickle()}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


# -- part 5: files on disk and the ingest path (issue #33) ----------------------------------------------------------
# The CLI exactly as shipped, with what the case measures hooked in: every text the embedder makes is counted in a
# log (the kill cases), or the embedder is the hash fake (cases that measure refusals, not the model).
CLI_HOOKED = """
import os, sys
import core.cli as cli
import core.models.embed as embed

log = os.environ.get("HOSTILE_ENCODE_LOG")
if log:
    real_cache_first = embed.cache_first

    def cache_first(keys, texts, *, lookup, compute, save=None):
        def counted(ts):
            with open(log, "a") as f:  # "s N": N texts going into the model; "d N": their vectors made
                f.write(f"s {len(ts)}\\n")
            out = compute(ts)
            with open(log, "a") as f:
                f.write(f"d {len(ts)}\\n")
            return out
        return real_cache_first(keys, texts, lookup=lookup, compute=counted, save=save)

    embed.cache_first = cache_first
if os.environ.get("HOSTILE_FAKE_EMBEDDER"):
    from tests.fakes import HashEmbedder
    real_build = cli.build_deps
    cli.build_deps = lambda cfg, *a, **kw: real_build(cfg, *a, embedder=HashEmbedder(), **kw)
sys.exit(cli.main(sys.argv[1:]))
"""


def _cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 600.0
         ) -> tuple[subprocess.CompletedProcess | None, float, float]:
    """(completed process or None on a hang, seconds, peak RSS MB of the CLI and its children) for one CLI run."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI_HOOKED, *args], cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, time.perf_counter() - t, 0.0
    secs = time.perf_counter() - t
    # RUSAGE_CHILDREN: the largest finished child so far (the CLI, or a parse worker it waited for).
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), secs, rss


def _lines(out: str) -> dict[str, str]:
    return {ln.split(None, 1)[1].split(":", 1)[0]: ln.split(None, 1)[0] for ln in out.splitlines()
            if ln.split(None, 1)[0] in ("ingested", "replaced", "unchanged", "error") and ":" in ln}


def case_same_names(work: Path, folders: int = 40) -> dict[str, Any]:
    """README.md / index.html in many folders, ingested by the CLI: documents stored vs files given."""
    root = work / "same_names"
    for i in range(folders):
        d = root / f"part{i:02d}" / ("sub" if i % 3 == 0 else "")
        d.mkdir(parents=True, exist_ok=True)
        (d / "README.md").write_text(f"# Part {i}\n\nThe read-me of part {i} says item {i} ships on day {i}.\n")
        (d / "index.html").write_text(f"<h1>Index {i}</h1><p>The index page of part {i}.</p>")
    files = 2 * folders
    db = work / "same_names.duckdb"
    p, secs, _ = _cli(["ingest", str(root), "--db", str(db)], env={"HOSTILE_FAKE_EMBEDDER": "1"})
    from core.store import Store

    store = Store(db, read_only=True)
    names = sorted(d.name for d in store.corpus.documents())
    store.close()
    return {"files": files, "documents": len(names), "lost": files - len(names), "seconds": round(secs, 1),
            "exit": p.returncode if p else "hang", "example_keys": names[:3]}


def case_special_files(work: Path, hang_s: float = HANG_S) -> dict[str, Any]:
    """A FIFO, a link to the zero device and links out of the folder, in a folder and named on the command line:
    each must be refused by name, with nothing read and nothing hung."""
    root = work / "special"
    root.mkdir(parents=True, exist_ok=True)
    (root / "ok.md").write_text("# Fine\n\nAn ordinary file beside the odd ones.\n")
    os.mkfifo(root / "pipe.md")
    (root / "zero.txt").symlink_to("/dev/zero")
    outside = work / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("a file outside the ingest folder: SECRET-OUTSIDE-42")
    (root / "passwd.txt").symlink_to(outside / "secret.txt")
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    db = work / "special.duckdb"
    rows = []
    for label, target in [("folder", [str(root)]), ("named FIFO", [str(root / "pipe.md")]),
                          ("named link to /dev/zero", [str(root / "zero.txt")])]:
        p, secs, _ = _cli(["ingest", *target, "--db", str(db)], env={"HOSTILE_FAKE_EMBEDDER": "1"}, timeout=hang_s)
        rows.append({"case": label, "hang": p is None, "seconds": round(secs, 1),
                     "exit": p.returncode if p else None, "traceback": bool(p and "Traceback" in p.stderr),
                     "results": _lines(p.stdout) if p else {},
                     "messages": [ln for ln in (p.stdout.splitlines() if p else []) if ln.startswith("error")]})
    from core.store import Store

    store = Store(db, read_only=True)
    docs = [d.name for d in store.corpus.documents()]
    leaked = any("SECRET-OUTSIDE-42" in (store.corpus.document_text(d.doc_id) or "") for d in store.corpus.documents())
    store.close()
    return {"runs": rows, "hangs": sum(r["hang"] for r in rows), "tracebacks": sum(r["traceback"] for r in rows),
            "documents": docs, "outside_file_ingested": leaked}


def case_amplification(work: Path) -> dict[str, Any]:
    """Files small enough to pass the size limit that cut into very many chunks: refused by the per-file chunk cap
    with a message, in the sandbox's deadline (seconds per file)."""
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.ingest.sandbox import ParseSandbox
    from core.store import Store
    from tests.fakes import HashEmbedder

    headings = "".join(f"## H{i}\n\nline {i}\n\n" for i in range(60_000)).encode()[:700_000]
    md_table = ("| " + " | ".join(f"c{j}" for j in range(6)) + " |\n|" + "---|" * 6 + "\n" + "".join(
        "| " + " | ".join(f"r{i}c{j}" for j in range(6)) + " |\n" for i in range(70_000))).encode()[:2_000_000]
    html_table = ("<table>" + "".join(f"<tr><td>r{i}</td><td>{i * 7}</td><td>v{i % 13}</td></tr>"
                                      for i in range(60_000)) + "</table>").encode()[:2_000_000]
    cases = [("headings_0.7MB.md", headings), ("table_2MB.md", md_table), ("table_2MB.html", html_table)]
    cfg = PipelineConfig()
    sb = ParseSandbox()
    rows = []
    store = Store(":memory:")
    for name, data in cases:
        t = time.perf_counter()
        r = ingest_files([(name, data)], store=store, embedder=HashEmbedder(), config=cfg, sandbox=sb).results[0]
        rows.append({"file": name, "bytes": len(data), "status": r.status, "chunks": r.chunks,
                     "seconds": round(time.perf_counter() - t, 2), "message": r.message})
    sb.close()
    store.close()
    return {"max_chunks_per_file": cfg.limits.max_chunks_per_file, "files": rows,
            "capped": sum("max_chunks_per_file" in r["message"] for r in rows)}


def _kill_docs(root: Path, n: int) -> None:
    rng = random.Random(11)
    words = ("axle brake coupling depot engine freight gauge hopper inspection junction kilometre lamp motor "
             "noise overhaul pantograph quota rail signal track unit valve wheel yard").split()
    for d in range(n):
        paras = []
        for p in range(14):
            sent = " ".join(rng.choice(words) for _ in range(18))
            paras.append(f"## Section {p}\n\nDocument {d} section {p}: {sent} (ref D{d}S{p}).")
        (root / f"team{d % 5}").mkdir(parents=True, exist_ok=True)
        (root / f"team{d % 5}" / f"notes{d // 5}.md").write_text(f"# Notes {d}\n\n" + "\n\n".join(paras) + "\n")


def _logged(log: Path, kind: str) -> int:
    """Texts the hooked CLI sent into the model ("s") or got vectors for ("d")."""
    if not log.exists():
        return 0
    return sum(int(n) for k, n in (ln.split() for ln in log.read_text().splitlines() if ln.strip()) if k == kind)


# (printed file lines to wait for, then seconds before the kill): right after a commit, inside the next group's
# encode, later in the run, and during start-up (model load) before anything is committed.
KILL_MOMENTS: tuple[tuple[int, float], ...] = ((1, 0.0), (1, 3.0), (20, 1.5), (0, 4.0))


def case_kill_resume(work: Path, model_cache: Path, moments: tuple[tuple[int, float], ...] = KILL_MOMENTS
                     ) -> dict[str, Any]:
    """`kill -9` of a real CLI ingest (the shipped embedder) at several moments, then the same command again:
    documents kept, and the work done twice: texts that went into the model before the kill (finished or not)
    plus texts the resume embeds, minus the chunks in the corpus. At most one group (GROUP_CHUNKS) may be lost."""
    from core.ingest.pipeline import GROUP_CHUNKS
    from core.store import Store

    root = work / "kill_docs"
    _kill_docs(root, 40)
    out = []
    for lines, delay in moments:
        tag = f"{lines}_{delay:g}"
        db, log = work / f"kill_{tag}.duckdb", work / f"kill_{tag}.log"
        for f in (db, Path(str(db) + ".wal"), log):
            f.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "RAG_MODEL_CACHE": str(model_cache),
               "HOSTILE_ENCODE_LOG": str(log)}
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", CLI_HOOKED, "ingest", str(root), "--db", str(db)], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        seen, last_line_s = 0, 0.0
        if lines:
            for _ in proc.stdout:  # the CLI prints each file's line as it is committed
                seen += 1
                last_line_s = time.perf_counter() - t
                if seen >= lines:
                    break
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_at = time.perf_counter() - t
        started_before, made_before = _logged(log, "s"), _logged(log, "d")
        store = Store(db)
        kept = store.corpus.count("documents")
        store.close()
        log.unlink(missing_ok=True)
        p, secs, _ = _cli(["ingest", str(root), "--db", str(db), "--json"], env={
            "RAG_MODEL_CACHE": str(model_cache), "HOSTILE_ENCODE_LOG": str(log)})
        rep = json.loads(p.stdout) if p and p.returncode == 0 else {"results": []}
        made_after = _logged(log, "d")
        store = Store(db, read_only=True)
        chunks, docs = store.corpus.count("chunks"), store.corpus.count("documents")
        store.close()
        statuses = Counter(r["status"] for r in rep["results"])
        out.append({"kill_after_lines": lines, "then_s": delay, "lines_seen": seen, "killed_at_s": round(killed_at, 1),
                    "seconds_since_last_line": round(killed_at - last_line_s, 1) if seen else None,
                    "documents_kept": kept, "resume_unchanged": statuses.get("unchanged", 0),
                    "resume_ingested": statuses.get("ingested", 0), "resume_errors": statuses.get("error", 0),
                    "resume_seconds": round(secs, 1), "texts_into_model_before_kill": started_before,
                    "vectors_made_before_kill": made_before, "vectors_made_by_resume": made_after,
                    "chunks_in_corpus": chunks, "documents_after_resume": docs,
                    "vectors_made_twice": made_before + made_after - chunks,
                    "texts_embedded_twice": started_before + made_after - chunks})
    return {"files": 40, "group_chunks": GROUP_CHUNKS, "kills": out,
            "max_texts_embedded_twice": max(k["texts_embedded_twice"] for k in out),
            "documents_lost_after_resume": sum(40 - k["documents_after_resume"] for k in out)}


def case_first_ingest_rss(work: Path, model_cache: Path) -> dict[str, Any]:
    """Peak RSS of `python -m core ingest sample_corpus/docs` on a fresh model cache (it exports the ONNX model
    first), then of the same command on a new database with the cache warm."""
    rows = {}
    for label in ("fresh_model_cache", "warm_model_cache"):
        db = work / f"rss_{label}.duckdb"
        db.unlink(missing_ok=True)
        # A child per run so RUSAGE_CHILDREN's high-water mark is this run's alone.
        code = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
                "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
                "print(json.dumps({'exit': p.returncode, 'seconds': time.perf_counter() - t, 'tail': p.stdout[-200:],"
                " 'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "RAG_MODEL_CACHE": str(model_cache)}
        p = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "core", "ingest",
                            str(ROOT / "sample_corpus" / "docs"), "--db", str(db)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=1800)
        got = json.loads(p.stdout)
        rows[label] = {"exit": got["exit"], "seconds": round(got["seconds"], 1), "peak_rss_mb": round(got["rss_mb"]),
                       "summary": got["tail"].strip().splitlines()[-1] if got["tail"].strip() else ""}
    return rows


def run_ingest(work: Path) -> dict[str, Any]:
    """Part 4 (issue #33): files on disk and the ingest path."""
    import shutil

    work.mkdir(parents=True, exist_ok=True)
    for sub in ("same_names", "special", "outside", "kill_docs", "models"):
        shutil.rmtree(work / sub, ignore_errors=True)
    for f in work.glob("*.duckdb*"):
        f.unlink()
    cache = work / "models"  # fresh: the first ingest exports the ONNX model, later cases reuse it
    out: dict[str, Any] = {}
    out["first_ingest"] = case_first_ingest_rss(work, cache)
    print(json.dumps(out["first_ingest"], indent=1), flush=True)
    out["same_names"] = case_same_names(work)
    print(json.dumps(out["same_names"], indent=1), flush=True)
    out["special_files"] = case_special_files(work)
    print(json.dumps(out["special_files"], indent=1), flush=True)
    out["amplification"] = case_amplification(work)
    print(json.dumps(out["amplification"], indent=1), flush=True)
    out["kill_resume"] = case_kill_resume(work, cache)
    print(json.dumps(out["kill_resume"], indent=1), flush=True)
    out["summary"] = {
        "files_lost": out["same_names"]["lost"] + out["kill_resume"]["documents_lost_after_resume"],
        "hangs": out["special_files"]["hangs"], "tracebacks": out["special_files"]["tracebacks"],
        "outside_file_ingested": out["special_files"]["outside_file_ingested"],
        "capped_files": out["amplification"]["capped"],
        "max_texts_embedded_twice_after_kill": out["kill_resume"]["max_texts_embedded_twice"],
        "peak_rss_mb_first_ingest": out["first_ingest"]["fresh_model_cache"]["peak_rss_mb"],
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="files,concurrency,faults", help="any of files, concurrency, faults, llm, ingest, "
                    "trust (issue #46: bench/results/hostile_trust.json)")
    ap.add_argument("--real-embedder", action="store_true")
    ap.add_argument("--seconds", type=float, default=60.0, help="concurrency run length")
    ap.add_argument("--fault-runs", type=int, default=100)
    ap.add_argument("--workdir", default="/tmp/rag-hostile")
    ap.add_argument("--out", default=None)
    ap.add_argument("--out-ingest", default=None, help="results of --parts ingest (default "
                                                        "bench/results/hostile_ingest.json)")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    for f in work.glob("*.duckdb*"):
        f.unlink()
    result: dict[str, Any] = {}
    parts = args.parts.split(",")
    if "files" in parts:
        result["files"] = run_files(work / "files.duckdb", real=args.real_embedder)
        print(json.dumps({k: v for k, v in result["files"].items() if k not in ("slowest", "by_class")}, indent=1))
    if "concurrency" in parts:
        result["concurrency"] = run_concurrency(work / "conc.duckdb", args.seconds)
        print(json.dumps(result["concurrency"], indent=1))
    if "faults" in parts:
        result["faults"] = run_faults(work / "faults.duckdb", args.fault_runs)
        print(json.dumps(result["faults"], indent=1))
    if "llm" in parts:  # its own results file: bench/results/hostile_llm.json
        llm = run_llm(work)
        print(json.dumps(llm, indent=1))
        print(f"wrote {write_result('hostile_llm', llm)}")
    if result:
        path = write_result("hostile", result, Path(args.out) if args.out else None)
        print(f"wrote {path}")
    if "trust" in parts:  # issue #46, its own results file (bench/hostile_trust.py)
        from bench.hostile_trust import run_trust

        trust = run_trust(work / "trust")
        print(json.dumps(trust["summary"], indent=1))
        print(f"wrote {write_result('hostile_trust', trust)}")
    if "ingest" in parts:  # a results file of its own: the other parts' file keeps its run
        path = write_result("hostile_ingest", run_ingest(work / "ingest"),
                            Path(args.out_ingest) if args.out_ingest else None)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
