"""Ray vs local ingest on this machine: wall time, overhead ratio, peak memory, and whether the databases agree.

Run from the repo root:  nice -n 5 .venv/bin/python bench/ray_ingest.py [--docs 1000] [--rounds 2]
Each engine runs in its own fresh process (so each has its own memory peak), rounds interleaved local, ray, local,
ray... on the same SciFact abstracts into a fresh database. Memory is the peak of the summed proportional set size
(PSS: shared pages split between the processes that share them) of the process and all its descendants (the
parse sandbox; for ray also the GCS, raylet and worker processes), sampled every 0.25 s. Ray's start-up (starting
the local runtime) is timed apart from the ingest itself. On 2 cores no gain is expected: Ray pays for worker
processes, object transfer and one more copy of the model per actor, and the two cores are the same.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, datasets_dir, grid, machine_info, num, table, write_result  # noqa: E402


class TreeMemory:
    """Peak summed PSS (RSS where PSS is unreadable) of this process and its descendants, sampled in a thread."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self.peak_mib = 0.0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> tuple[float, int]:
        import psutil

        me = psutil.Process()
        total, n = 0, 0
        for p in [me, *me.children(recursive=True)]:
            try:
                try:
                    total += p.memory_full_info().pss
                except (psutil.AccessDenied, AttributeError):
                    total += p.memory_info().rss
                n += 1
            except psutil.NoSuchProcess:
                continue
        return total / 2**20, n

    def _run(self) -> None:
        while not self._stop.is_set():
            mib, n = self._sample()
            if mib > self.peak_mib:
                self.peak_mib, self.peak_procs = mib, n
            self._stop.wait(self.every_s)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def child(engine: str, db: str, n_docs: int, datasets: str | None, actors: int | None) -> dict[str, Any]:
    """One engine, one fresh database, in this (fresh) process."""
    from ingest import load_files

    from core.config import PipelineConfig
    from core.deps import model_cache_dir
    from core.ingest.pipeline import ingest_files
    from core.models.embed import load_embedder
    from core.store import Store

    config = PipelineConfig()
    _, files = load_files("scifact", n_docs, datasets_dir(datasets))
    cache = model_cache_dir(db).resolve()
    out: dict[str, Any] = {"engine": engine, "files": len(files), "runtime": config.embedding.runtime}
    with TreeMemory() as mem:
        t0 = time.perf_counter()
        emb = load_embedder(config.embedding.model, batch_size=config.embedding.batch_size,
                            runtime=config.embedding.runtime, cache_dir=cache).embedder
        out["driver_model_load_s"] = round(time.perf_counter() - t0, 2)
        store = Store(db)
        if engine == "local":
            t0 = time.perf_counter()
            rep = ingest_files(files, store=store, embedder=emb, config=config)
            out["ingest_s"] = round(time.perf_counter() - t0, 2)
        else:
            import ray

            from core.ingest.ray_engine import (
                EmbedderSpec,
                RayOptions,
                ingest_files_ray,
                ray_runtime,
            )

            t0 = time.perf_counter()
            with ray_runtime(None) as rt:
                out["ray_start_s"] = round(time.perf_counter() - t0, 2)
                out["ray_cpus"] = int(rt.cluster_resources().get("CPU", 0))
                spec = EmbedderSpec.from_config(config, cache_dir=cache)
                t0 = time.perf_counter()
                rep = ingest_files_ray(files, store=store, embedder=emb, make_embedder=spec, config=config,
                                       options=RayOptions(actors=actors))
                out["ingest_s"] = round(time.perf_counter() - t0, 2)
            out["ray_version"] = ray.__version__
    out["peak_tree_mib"] = round(mem.peak_mib, 1)
    out["peak_tree_processes"] = mem.peak_procs
    out["ok"] = len(rep.ok)
    out["errors"] = len(rep.errors)
    out["chunks"] = sum(r.chunks for r in rep.ok)
    out["embedded"] = rep.embedded
    out["chunks_per_s"] = round(out["chunks"] / out["ingest_s"], 1) if out["ingest_s"] else None
    store.close()
    return out


def compare(local_db: str, ray_db: str) -> dict[str, Any]:
    """Same documents, chunk ids and texts; largest absolute vector difference."""
    import numpy as np

    from core.store import Store

    a, b = Store(local_db, read_only=True), Store(ray_db, read_only=True)
    docs = [sorted((d.doc_id, d.name, d.content_hash, d.n_chunks) for d in s.corpus.documents()) for s in (a, b)]
    chunks = [sorted((c.chunk_id, c.doc_id, c.text) for c in s.corpus.chunks()) for s in (a, b)]
    out: dict[str, Any] = {"documents_equal": docs[0] == docs[1], "chunks_equal": chunks[0] == chunks[1],
                           "documents": len(docs[0]), "chunks": len(chunks[0])}
    for m in a.corpus.vector_models():
        ia, va = a.corpus.vectors(m.model_id)
        ib, vb = b.corpus.vectors(m.model_id)
        out["vector_model"] = m.model_id
        out["vector_ids_equal"] = ia == ib
        out["max_abs_vector_diff"] = float(np.abs(va - vb).max()) if ia == ib and len(ia) else None
        out.update(compare_token_vectors(a, b, m.model_id, [c[2] for c in chunks[0]]))
    return out


def compare_token_vectors(a: Any, b: Any, model_id: str, texts: list[str], batch: int = 200) -> dict[str, Any]:
    """Late-interaction token vectors of every chunk text: held by both databases, same token ids and spans, largest
    absolute difference of the float16 vectors (read `batch` texts at a time, never all at once)."""
    import numpy as np

    from core.models.tokens import text_key

    keys = sorted({text_key(model_id, t) for t in texts})
    held = [len(s.caches.held_token_vectors(model_id, keys)) for s in (a, b)]
    same_tokens, diff = True, 0.0
    for i in range(0, len(keys), batch):
        ka = a.caches.cached_token_vectors(model_id, keys[i:i + batch])
        kb = b.caches.cached_token_vectors(model_id, keys[i:i + batch])
        if set(ka) != set(kb):
            same_tokens = False
        for k in set(ka) & set(kb):
            (ia, va, sa), (ib, vb, sb) = ka[k], kb[k]
            if not (np.array_equal(ia, ib) and np.array_equal(sa, sb)) or va.shape != vb.shape:
                same_tokens = False
                continue
            if va.size:
                diff = max(diff, float(np.abs(va.astype(np.float32) - vb.astype(np.float32)).max()))
    return {"token_vector_texts": len(keys), "token_vectors_held": held, "token_ids_spans_equal": same_tokens,
            "max_abs_token_vector_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved local/ray pairs")
    ap.add_argument("--actors", type=int, default=None, help="embedding actors (default: one per CPU)")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", choices=["local", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.db, args.docs, args.datasets, args.actors)))
        return
    tmp = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    env = {**os.environ, "RAG_MODEL_CACHE": os.environ.get("RAG_MODEL_CACHE", str(ROOT / "data" / "models"))}
    runs: list[dict[str, Any]] = []
    dbs: dict[str, str] = {}
    for r in range(args.rounds):
        for engine in ("local", "ray"):
            db = str(tmp / f"{engine}{r}.duckdb")
            cmd = [sys.executable, __file__, "--child", engine, "--db", db, "--docs", str(args.docs)]
            cmd += ["--datasets", args.datasets] if args.datasets else []
            cmd += ["--actors", str(args.actors)] if args.actors else []
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                sys.exit(f"{engine} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            res = json.loads(line[0][7:])
            res["round"] = r
            res["process_s"] = round(time.perf_counter() - t0, 2)
            runs.append(res)
            dbs[engine] = db
            print(f"round {r} {engine}: ingest {res['ingest_s']} s, peak {res['peak_tree_mib']} MiB", flush=True)
    agree = compare(dbs["local"], dbs["ray"])

    def med(engine: str, key: str) -> float:
        import statistics

        return statistics.median(x[key] for x in runs if x["engine"] == engine)

    summary = {
        "local_ingest_s": med("local", "ingest_s"), "ray_ingest_s": med("ray", "ingest_s"),
        "ray_start_s": med("ray", "ray_start_s"),
        "local_peak_mib": med("local", "peak_tree_mib"), "ray_peak_mib": med("ray", "peak_tree_mib"),
    }
    summary["overhead_ratio"] = round(summary["ray_ingest_s"] / summary["local_ingest_s"], 3)
    summary["overhead_ratio_with_start"] = round((summary["ray_ingest_s"] + summary["ray_start_s"])
                                                 / summary["local_ingest_s"], 3)
    summary["memory_ratio"] = round(summary["ray_peak_mib"] / summary["local_peak_mib"], 3)
    print(table(["engine", "round", "ingest s", "chunks/s", "start s", "peak MiB", "processes"],
                [[x["engine"], x["round"], x["ingest_s"], x["chunks_per_s"], x.get("ray_start_s"),
                  x["peak_tree_mib"], x["peak_tree_processes"]] for x in runs]))
    print(json.dumps({**summary, **agree}, indent=2))
    path = write_result("ray_ingest", {
        "what": "SciFact abstracts ingested by the local engine and by the Ray engine (local runtime, one embedding "
                "actor per CPU, ONNX threads = 1 per actor), each run in a fresh process; rounds interleaved",
        "corpus": f"beir_scifact first {args.docs} abstracts, one .txt each", "docs": args.docs,
        "rounds": args.rounds, "machine": machine_info(), "summary": summary, "agreement": agree, "runs": runs,
        "memory_method": "peak over 0.25 s samples of summed PSS of the process tree (driver, parse sandbox, "
                         "and for ray the GCS, raylet and workers)",
        "note": "absolute seconds are pessimistic on this shared machine; the ratio is measured side by side",
    }, Path(args.out) if args.out else None, table=MEASURED_RAY_INGEST)
    print(f"wrote {path}")


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def _measured_sci(v: Any) -> str:
    return f"{v:.1e}" if isinstance(v, (int, float)) else "–"


def measured_ray_ingest(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 3: bench/ray_ingest.py, local vs ray ingest on this machine."""
    s, a = d.get("summary") or {}, d.get("agreement") or {}
    out = [f"### Ingest on Ray vs local ({d.get('corpus', '')})", "", CAPTION, "",
           "Each engine in a fresh process on the same abstracts into a fresh database; Ray is a local runtime on this "
           "2-core machine (one embedding actor per CPU, one ONNX thread each). Memory: peak summed PSS of the "
           "process tree (driver, parse sandbox, and for Ray its GCS, raylet and workers).", ""]
    rows = [[r.get("engine"), r.get("round"), num(r.get("ingest_s"), 1), num(r.get("chunks_per_s"), 1),
             num(r.get("ray_start_s"), 1) if r.get("ray_start_s") is not None else "–", num(r.get("peak_tree_mib"), 0),
             r.get("peak_tree_processes")] for r in d.get("runs") or []]
    out.append(grid(["engine", "round", "ingest s", "chunks/s", "Ray start s", "peak MiB", "processes"], rows))
    if s:
        out += ["", f"Ray / local ingest time **{num(s.get('overhead_ratio'), 2)}×** "
                f"({num(s.get('overhead_ratio_with_start'), 2)}× counting the runtime's start); peak memory "
                f"{num(s.get('memory_ratio'), 2)}× ({num(s.get('ray_peak_mib'), 0)} vs {num(s.get('local_peak_mib'), 0)} MiB)."
                f" Same documents: {a.get('documents_equal')}; same chunk ids and texts: {a.get('chunks_equal')}; "
                f"largest vector difference {_measured_sci(a.get('max_abs_vector_diff'))} ({a.get('vector_model')})"
                + (f"; token vectors held {a.get('token_vectors_held')} of {num(a.get('token_vector_texts'))} chunk "
                   f"texts, same token ids and spans: {a.get('token_ids_spans_equal')}, largest difference "
                   f"{_measured_sci(a.get('max_abs_token_vector_diff'))}" if "token_vectors_held" in a else "") + ". "
                "Seconds here depend mostly on the other jobs sharing the machine (load average in the caption); "
                "the two engines ran one after the other, not side by side."]
    return out


MEASURED_RAY_INGEST = Table(measured_ray_ingest, 'Ray')


if __name__ == "__main__":
    main()
