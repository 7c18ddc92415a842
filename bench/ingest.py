"""Ingest benchmark: chunks/s of the whole ingest path vs bare SentenceTransformer.encode, plus re-ingest costs.

Run from the repo root:  .venv/bin/python bench/ingest.py [--docs 1000] [--corpus scifact|sample_corpus|PATH]
                         [--runtime torch|onnx|onnx-int8]
The bare baseline is always sentence-transformers on torch; --runtime picks what the ingest path embeds with.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    ROOT,
    datasets_dir,
    machine_info,
    table,
    timed,
    utc_now,
    write_result,
)
from _common import CAPTION, RESULTS, Table, grid, met, num  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.ingest.chunk import chunk_document  # noqa: E402
from core.ingest.parse import ParseError, parse  # noqa: E402
from core.ingest.pipeline import IngestReport, doc_id_for, ingest_files, read_paths  # noqa: E402
from core.models.embed import BUNDLED_MODEL, load_embedder  # noqa: E402
from core.store import Store  # noqa: E402


class CountingEmbedder:
    """Wraps the real embedder to count encode calls, texts and the seconds spent inside the model, so the
    ingest wall time can be split into 'model' and 'everything else' without touching core/."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.languages = inner.languages
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.texts = 0
        self.seconds = 0.0
        self.batch_sizes: list[int] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        start = time.perf_counter()
        out = self.inner.encode(texts)
        self._count(texts, start)
        return out

    def _count(self, texts: Sequence[str], start: float) -> None:
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.texts += len(texts)
        self.batch_sizes.append(len(texts))

    def __getattr__(self, name: str) -> Any:
        """The ONNX embedder's shared forward (encode_with_tokens, window_encoder) passes through, so the bench runs
        the product's ingest path: sentence vectors plus the token vectors late-interaction rerank will read."""
        if name in ("encode_with_tokens", "window_encoder") and hasattr(self.inner, name):
            inner = getattr(self.inner, name)
            if name == "window_encoder":
                return inner

            def timed_call(texts: Sequence[str]) -> Any:
                start = time.perf_counter()
                out = inner(texts)
                self._count(texts, start)
                return out
            return timed_call
        raise AttributeError(name)


def load_files(corpus: str, n_docs: int, datasets: Path) -> tuple[str, list[tuple[str, bytes]]]:
    """(description, [(file name, bytes)]). SciFact abstracts become one small .txt file each, in memory."""
    if corpus == "scifact":
        path = datasets / "beir_scifact" / "corpus.jsonl"
        if not path.is_file():
            sys.exit(f"SciFact corpus not found at {path}; pass --datasets DIR, set RAG_DATASETS, "
                     "or use --corpus sample_corpus")
        files: list[tuple[str, bytes]] = []
        with path.open() as f:
            for line in f:
                if len(files) >= n_docs:
                    break
                row = json.loads(line)
                body = f"{row['title']}\n\n{row['text']}\n"
                files.append((f"scifact_{row['_id']}.txt", body.encode("utf-8")))
        return f"{path} (first {len(files)} docs, one .txt each)", files
    if corpus == "sample_corpus":  # the documents sit in sample_corpus/docs; eval files beside them are skipped
        docs = ROOT / "sample_corpus" / "docs"
        folder = docs if docs.is_dir() else ROOT / "sample_corpus"
    else:
        folder = Path(corpus)
    files = read_paths([folder])
    if n_docs and corpus != "sample_corpus":
        files = files[:n_docs]
    return str(folder), files


def chunk_texts(files: Sequence[tuple[str, bytes]], config: PipelineConfig) -> list[str]:
    """The exact chunk texts ingest will embed: same parser, same doc ids, same chunker settings."""
    out: list[str] = []
    c = config.chunking
    limit = int(config.limits.max_file_mb * 1_000_000)
    import hashlib

    for name, data in files:
        try:
            parsed = parse(name, data, max_bytes=limit)
        except ParseError:
            continue  # ingest reports it as an error and embeds nothing for it either
        doc_id = doc_id_for(name, hashlib.sha256(data).hexdigest())
        out.extend(ch.text for ch in chunk_document(parsed, doc_id, strategy=c.strategy, size=c.size_tokens,
                                                    overlap=c.overlap_tokens))
    return out


def bare_encode(model: Any, texts: Sequence[str], batch_size: int) -> float:
    """Seconds for the same call SentenceTransformerEmbedder.encode makes, without anything around it."""
    with timed() as t:
        model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                     show_progress_bar=False)
    return t[0]


def run_ingest(files: Sequence[tuple[str, bytes]], store: Store, emb: CountingEmbedder, config: PipelineConfig,
               ) -> tuple[float, IngestReport]:
    emb.reset()
    with timed() as t:
        report = ingest_files(files, store=store, embedder=emb, config=config)
    return t[0], report


def phase_row(label: str, seconds: float, report: IngestReport, emb: CountingEmbedder) -> dict[str, Any]:
    statuses = Counter(r.status for r in report.results)
    chunks = sum(r.chunks for r in report.results if r.status != "error")
    return {
        "phase": label, "seconds": seconds, "chunks": chunks, "embedded": report.embedded,
        "cache_hits": report.cache_hits, "encode_calls": emb.calls, "encode_seconds": emb.seconds,
        "statuses": dict(statuses), "errors": [r.message for r in report.errors][:5],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="scifact", help="'scifact' (default), 'sample_corpus', or a folder")
    ap.add_argument("--docs", type=int, default=1000, help="number of SciFact abstracts (or files of a folder)")
    ap.add_argument("--datasets", default=None, help="datasets dir (default: $RAG_DATASETS or ../shared/datasets)")
    ap.add_argument("--batch-size", type=int, default=None, help="encode batch size (default: config's)")
    ap.add_argument("--strategy", default=None, choices=["fixed", "sentence", "structure"])
    ap.add_argument("--chunk-size", type=int, default=None, help="tokens per chunk (default: config's)")
    ap.add_argument("--alt-chunk-size", type=int, default=None,
                    help="chunk size for the 'chunker changed' re-ingest (default: chunk size + 76)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="the corpus is cut into this many slices; each slice is bare-encoded and ingested back to "
                         "back (order alternating), so a change in machine load hits both sides alike (default 5)")
    ap.add_argument("--runtime", default=None, choices=["torch", "onnx", "onnx-int8"],
                    help="embedding runtime of the ingest path (default: config's); bare encode stays torch")
    ap.add_argument("--no-token-vectors", action="store_true",
                    help="ingest without storing late-interaction token vectors (rerank off in the ingest config); "
                         "by default an ONNX runtime stores them from the same forward pass, as the product does")
    ap.add_argument("--model-cache", type=Path, default=ROOT / "data" / "models",
                    help="where the exported ONNX model is cached (default data/models)")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default bench/results/ingest.json)")
    args = ap.parse_args(argv)

    config = PipelineConfig()
    overrides: dict[str, Any] = {}
    if args.batch_size:
        overrides["embedding.batch_size"] = args.batch_size
    if args.strategy:
        overrides["chunking.strategy"] = args.strategy
    if args.chunk_size:
        overrides["chunking.size_tokens"] = args.chunk_size
    if args.runtime:
        overrides["embedding.runtime"] = args.runtime
    if args.no_token_vectors:
        overrides["rerank.enabled"] = False
    config = config.with_overrides(overrides) if overrides else config
    alt_size = args.alt_chunk_size or config.chunking.size_tokens + 76
    alt_config = config.with_overrides({"chunking.size_tokens": alt_size})
    batch = config.embedding.batch_size

    machine = machine_info()  # before the run, so its load average describes the start
    source, files = load_files(args.corpus, args.docs, datasets_dir(args.datasets))
    print(f"corpus: {source}: {len(files)} files, {sum(len(d) for _, d in files) / 1e6:.2f} MB")

    runtime = config.embedding.runtime
    with timed() as t_load:
        loaded = load_embedder(BUNDLED_MODEL, batch_size=batch, runtime=runtime, cache_dir=args.model_cache)
    if loaded.notice:
        sys.exit(f"the {runtime} runtime did not load: {loaded.notice}")
    inner = loaded.embedder
    # The baseline: bare SentenceTransformer.encode on torch (for runtime torch, the very object ingest calls).
    bare_model = (inner if runtime == "torch" else load_embedder(BUNDLED_MODEL, batch_size=batch).embedder)
    model = bare_model.model
    machine["torch_threads"] = sys.modules["torch"].get_num_threads()
    with timed() as t_warm:
        for _ in range(2):  # first calls allocate and pick kernels; keep that out of both measurements
            inner.encode(["warm-up sentence about a protein and a cell line"] * batch)
            if bare_model is not inner:
                bare_model.encode(["warm-up sentence about a protein and a cell line"] * batch)
    # One-time process costs stay out of both sides, as model load does: the parse sandbox's worker start and the
    # import of the heuristic-context module (bm25s, scipy) that ingest's first call would otherwise pay.
    with timed() as t_proc:
        import core.ingest.context  # noqa: F401
        from core.ingest.sandbox import default_sandbox

        default_sandbox().parse("warm-up.txt", b"warm-up")
    emb = CountingEmbedder(inner)

    with timed() as t_chunk:
        texts = chunk_texts(files, config)
    unique = len(set(texts))
    print(f"{len(texts)} chunks ({unique} distinct texts), chunker {config.chunking.strategy}:"
          f"{config.chunking.size_tokens}/{config.chunking.overlap_tokens}, batch {batch}; "
          f"model load {t_load[0]:.1f}s, warm-up {t_warm[0]:.1f}s")

    rounds = max(1, min(args.rounds, len(files)))
    cuts = [round(i * len(files) / rounds) for i in range(rounds + 1)]
    bare_runs: list[float] = []
    ingest_runs: list[float] = []
    encode_s = 0.0
    batch_sizes: list[int] = []
    first_report = IngestReport()
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        db = Path(tmp) / "bench.duckdb"
        store = Store(db)
        for r in range(rounds):
            part = files[cuts[r]:cuts[r + 1]]
            part_texts = chunk_texts(part, config)

            def bare() -> None:
                bare_runs.append(bare_encode(model, part_texts, batch))

            def ingest() -> None:
                t, rep = run_ingest(part, store, emb, config)
                ingest_runs.append(t)
                first_report.results.extend(rep.results)

            for step in ((bare, ingest) if r % 2 == 0 else (ingest, bare)):
                step()
            encode_s += emb.seconds
            batch_sizes += emb.batch_sizes
            print(f"  round {r + 1}/{rounds}: {len(part_texts)} chunks, bare {bare_runs[-1]:.1f}s, "
                  f"ingest {ingest_runs[-1]:.1f}s, ratio {bare_runs[-1] / ingest_runs[-1]:.3f}", flush=True)
        t_first = sum(ingest_runs)
        emb.reset()
        emb.seconds, emb.calls, emb.batch_sizes = encode_s, len(batch_sizes), batch_sizes
        first = phase_row(f"first ingest (fresh DB, {rounds} slices)", t_first, first_report, emb)
        first["encode_batch_sizes"] = {"min": min(batch_sizes, default=0), "max": max(batch_sizes, default=0),
                                       "mean": statistics.fmean(batch_sizes) if batch_sizes else 0}
        stored = sorted(c.text for c in store.corpus.chunks())
        same_texts = stored == sorted(texts)

        t_re, rep_re = run_ingest(files, store, emb, config)
        again = phase_row("re-ingest, unchanged", t_re, rep_re, emb)
        print(f"  re-ingest unchanged: {t_re:.1f}s", flush=True)
        t_alt, rep_alt = run_ingest(files, store, emb, alt_config)
        alt = phase_row(f"re-ingest, chunk size {config.chunking.size_tokens}->{alt_size}", t_alt, rep_alt, emb)
        print(f"  re-ingest, other chunk size: {t_alt:.1f}s", flush=True)
        t_back, rep_back = run_ingest(files, store, emb, config)
        back = phase_row(f"re-ingest, chunk size {alt_size}->{config.chunking.size_tokens}", t_back, rep_back, emb)
        store.close()
        db_mb = db.stat().st_size / 1e6

    bare_s = sum(bare_runs)
    n = len(texts)
    bare_cps = n / bare_s
    ingest_cps = first["chunks"] / t_first
    ratio = ingest_cps / bare_cps
    round_ratios = [b / i for b, i in zip(bare_runs, ingest_runs)]
    phases = [first, again, alt, back]

    rows = [[f"bare SentenceTransformer.encode ({rounds} slices)", bare_s, n, n / bare_s, n, "", "", "-"]]
    for p in phases:
        rows.append([p["phase"], p["seconds"], p["chunks"], p["chunks"] / p["seconds"] if p["seconds"] else 0.0,
                     p["embedded"], p["cache_hits"], p["encode_seconds"],
                     f"{100 * p['seconds'] / t_first:.1f}%"])
    print()
    print(table(["phase", "s", "chunks", "chunks/s", "embedded", "cache hits", "s in encode", "% of first"], rows))
    print()
    print(f"ratio ingest/bare chunks/s = {ratio:.3f} (goal >= 1.3, issue #14); per slice: "
          + ", ".join(f"{x:.3f}" for x in round_ratios))
    print(f"first ingest: {first['encode_seconds']:.2f}s in encode ({first['encode_calls']} calls, mean batch "
          f"{first['encode_batch_sizes']['mean']:.1f}), {t_first - first['encode_seconds']:.2f}s elsewhere "
          f"(parse, chunk, hashing, cache lookups, DuckDB writes); chunk-only pass {t_chunk[0]:.2f}s")
    print(f"re-ingest unchanged: {again['embedded']} embeddings computed, {100 * t_re / t_first:.2f}% of first "
          f"ingest (goal: 0 and < 5%)")
    print(f"stored chunk texts identical to the benchmark's texts: {same_texts}; DuckDB file {db_mb:.1f} MB; "
          f"load average now {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    payload = {
        "benchmark": "ingest",
        "timestamp": utc_now(),
        "command": "python bench/ingest.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine,
        "parameters": {
            "corpus": source, "files": len(files), "model": BUNDLED_MODEL, "batch_size": batch,
            "runtime": runtime, "model_id": inner.model_id, "baseline": "bare SentenceTransformer.encode on torch",
            "chunker": config.chunking.model_dump(), "alt_chunk_size": alt_size, "rounds": rounds,
            "token_vectors_at_ingest": bool(config.rerank.enabled and config.rerank.method == "late-interaction"
                                            and hasattr(inner, "encode_with_tokens")),
        },
        "model_load_s": t_load[0],
        "warm_up_s": t_warm[0],
        "process_warm_up_s": t_proc[0],  # sandbox worker start + context-module import, before timing
        "chunk_only_s": t_chunk[0],
        "chunks": n,
        "distinct_chunk_texts": unique,
        "stored_texts_match": same_texts,
        "bare_encode_s_per_slice": bare_runs,
        "ingest_s_per_slice": ingest_runs,
        "ratio_per_slice": round_ratios,
        "bare_encode_s": bare_s,
        "bare_chunks_per_s": bare_cps,
        "ingest_chunks_per_s": ingest_cps,
        "ratio_ingest_to_bare": ratio,
        "ratio_goal": 1.3,  # issue #14: the default runtime's whole ingest path vs bare torch encode
        "reingest_unchanged_fraction": t_re / t_first,
        "reingest_unchanged_embedded": again["embedded"],
        "phases": phases,
        "duckdb_file_mb": db_mb,
        "load_avg_at_end": list(os.getloadavg()),
    }
    default = args.out is None or Path(args.out).name == "ingest.json"  # the README's row; --out runs are variants
    path = write_result("ingest", payload, args.out, table=MEASURED_INGEST if default else MEASURED_INGEST_RUNTIME)
    print(f"\nwrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_ingest(d: dict[str, Any], file: str) -> list[str]:
    p = d.get("parameters") or {}
    out = [f"### Ingest speed ({p.get('files')} files, {num(d.get('chunks'))} chunks, {p.get('model')})", "",
           CAPTION, ""]
    out.append(f"- whole ingest path vs bare `SentenceTransformer.encode` on the same chunk texts, interleaved in "
               f"{len(d.get('ratio_per_slice') or [])} slices: **ratio {num(d.get('ratio_ingest_to_bare'))}** "
               f"(per slice {', '.join(num(x) for x in d.get('ratio_per_slice') or [])}; goal ≥ "
               f"{num(d.get('ratio_goal'), 1)})")
    out.append(f"- {num(d.get('ingest_chunks_per_s'), 1)} chunks/s ingest vs {num(d.get('bare_chunks_per_s'), 1)} "
               "chunks/s bare encode")
    if p.get("runtime"):
        tokens = p.get("token_vectors_at_ingest")
        out.append(f"- ingest embeds with `embedding.runtime={p['runtime']}` (`{p.get('model_id')}`); bare encode is "
                   "torch" + ("; ingest also stores every chunk's late-interaction token vectors, taken from the same "
                              "forward pass" if tokens else "" if tokens is None else "; no token vectors stored"))
    other = RESULTS / "ingest_b16.json"
    if file == "ingest.json" and other.exists():
        # The baseline runs at the configured batch size; torch is faster at a smaller one, so say what that gives.
        b = json.loads(other.read_text())
        out.append(f"- with both sides at batch {(b.get('parameters') or {}).get('batch_size')} instead of "
                   f"{p.get('batch_size')} (torch's bare encode was faster there): ratio "
                   f"{num(b.get('ratio_ingest_to_bare'))} (per slice "
                   f"{', '.join(num(x) for x in b.get('ratio_per_slice') or [])}; `bench/results/ingest_b16.json`, "
                   f"`{(b.get('run') or {}).get('command', '')}`)")
    rows = [[ph["phase"], num(ph.get("seconds"), 1), num(ph.get("encode_seconds"), 1), num(ph.get("chunks")),
             num(ph.get("embedded")), num(ph.get("cache_hits"))] for ph in d.get("phases") or []]
    if rows:
        out += ["", grid(["phase", "seconds", "of which encoding", "chunks", "embedded", "cache hits"], rows)]
    return out


def measured_ingest_runtime(d: dict[str, Any], file: str) -> list[str]:
    """bench/ingest.py --runtime X: the same table as ingest.json, titled with the runtime it embedded with."""
    out = measured_ingest(d, file)
    runtime = (d.get("parameters") or {}).get("runtime")
    if out and runtime:
        out[0] = out[0].replace("### Ingest speed (", f"### Ingest speed, `embedding.runtime={runtime}` (", 1)
    return out


def headline_ingest(d: dict[str, Any], file: str) -> tuple[str, str | None] | None:
    """The README row of the default run (ingest.json)."""
    if file != "ingest.json":
        return None
    r, goal = d.get("ratio_ingest_to_bare"), d.get("ratio_goal")
    return ("Ingest, the whole path (parse, chunk, embed on ONNX, store), against bare `SentenceTransformer.encode` "
            "(torch) of the same texts", None if r is None or goal is None else
            f"**{num(r)}×** bare encode's chunks/s (goal ≥ {num(goal, 1)}: {met(r >= goal)})")


MEASURED_INGEST = Table(measured_ingest, 'Ingest and embedding runtimes', headline=headline_ingest)
MEASURED_INGEST_RUNTIME = Table(measured_ingest_runtime, 'Ingest and embedding runtimes')


if __name__ == "__main__":
    raise SystemExit(main())
