"""Batch eval over two configurations, local vs Ray, on this machine: wall time, overhead ratio, peak memory, agreement.

Run from the repo root:  nice -n 5 .venv/bin/python bench/ray_eval.py [--docs 1000] [--questions 300] [--rounds 1]
The corpus (SciFact: the gold abstracts of the drawn questions plus random others up to --docs, core.eval.datasets.subsample,
seed 0) is put in the bench's own database once (data/bench/ray_eval.duckdb), before any timed run. Then each engine
runs in its own fresh process (so each has its own memory peak), rounds interleaved local, ray, local, ray...: both
configurations ("default": the set's settings, the whole cascade; "no-rerank": the same without the rerank stage)
over the same questions through core.eval.run.run_eval, not stored (save=False, so the database and its snapshot stay
the same size between rounds). Ray is a local runtime, one eval actor per CPU (ONNX threads = 1 per actor); its
runtime start is timed apart. Memory: peak summed PSS of the process tree (driver; for ray also the GCS, raylet and
actors), sampled every 0.25 s. A third engine, local-1t, is the local engine with OMP_NUM_THREADS=1, the setting Ray
gives its one-CPU workers: on this machine the thread count alone moves the local eval's time a lot, so Ray's own
cost or gain is read against local-1t. Agreement: per question and configuration, the final list's chunk ids and every
metric but latency, local against ray (and local against local-1t). Also measured once: the snapshot (checkpoint + file
copy + token-vector link) against DuckDB EXPORT DATABASE + IMPORT DATABASE into a fresh file, on the same database.
Unlike ingest (model-bound, and the model already uses both cores), a question's pipeline runs mostly on one core, so
two actors can use both cores; Ray pays for its processes, one more model and one more set of indexes per actor.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, datasets_dir, grid, machine_info, num, table, write_result  # noqa: E402
from ray_ingest import TreeMemory  # noqa: E402


class TreeUsage(TreeMemory):
    """TreeMemory that also sums the CPU seconds (user + system) of every process of the tree, as last sampled (a
    process's final < 0.25 s can be missed): under load, wall time alone cannot tell parallelism from a larger share
    of contended cores."""

    def __init__(self, every_s: float = 0.25) -> None:
        super().__init__(every_s)
        self._cpu: dict[int, float] = {}

    def _sample(self) -> tuple[float, int]:
        import psutil

        me = psutil.Process()
        for p in [me, *me.children(recursive=True)]:
            try:
                t = p.cpu_times()
                self._cpu[p.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                continue
        return super()._sample()

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu.values())


def _golden(n_docs: int, n_questions: int, datasets: str | None) -> Any:
    from core.eval.datasets import load_dataset, subsample

    return subsample(load_dataset("beir_scifact", datasets_dir(datasets)), max_docs=n_docs,
                     max_questions=n_questions, seed=0)


def _configs(gs: Any) -> list[Any]:
    from core.config import PipelineConfig
    from core.eval.run import NamedConfig

    base = PipelineConfig().with_overrides(gs.overrides)
    return [NamedConfig("default", base), NamedConfig("no-rerank", base.with_overrides({"rerank.enabled": False}))]


def prepare_db(db: str, n_docs: int, n_questions: int, datasets: str | None) -> dict[str, Any]:
    """Child process: the cut corpus into the bench database the way an eval would put it there (untimed)."""
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.run import prepare
    from core.store import Store

    gs = _golden(n_docs, n_questions, datasets)
    store = Store(db)
    deps = build_deps(PipelineConfig().with_overrides(gs.overrides), store=store)
    t0 = time.perf_counter()
    resolved, notes = prepare(gs, deps, workspace=gs.workspace, config=_configs(gs)[0].config)
    out = {"prepare_s": round(time.perf_counter() - t0, 2), "notes": notes, "questions": len(resolved.queries),
           "documents": store.corpus.count("documents", gs.workspace), "chunks": store.corpus.count("chunks", gs.workspace)}
    store.close()
    return out


def child(engine: str, db: str, n_docs: int, n_questions: int, datasets: str | None, actors: int | None,
          rows_out: str) -> dict[str, Any]:
    """One engine over both configurations, in this (fresh) process. Writes per-question rows to `rows_out`."""
    from core.deps import build_deps, model_cache_dir
    from core.eval.run import run_eval
    from core.store import Store

    gs = _golden(n_docs, n_questions, datasets)
    # The corpus is in place (prepare_db): without its loader, run_eval only maps the gold to store ids.
    gs = replace(gs, predocs=None)
    configs = _configs(gs)
    out: dict[str, Any] = {"engine": engine, "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    with TreeUsage() as mem:
        t0 = time.perf_counter()
        store = Store(db)
        deps = build_deps(configs[0].config, store=store)
        out["driver_model_load_s"] = round(time.perf_counter() - t0, 2)
        if engine == "local":
            t0 = time.perf_counter()
            runs = run_eval(gs, configs, deps, workspace=gs.workspace, save=False)
            out["eval_s"] = round(time.perf_counter() - t0, 2)
        else:
            import ray

            from core.eval.ray_eval import RayEvalEngine, RayEvalOptions
            from core.ingest.ray_engine import EmbedderSpec, ray_runtime

            t0 = time.perf_counter()
            with ray_runtime(None) as rt:
                out["ray_start_s"] = round(time.perf_counter() - t0, 2)
                out["ray_cpus"] = int(rt.cluster_resources().get("CPU", 0))
                spec = EmbedderSpec.from_config(configs[0].config, cache_dir=model_cache_dir(db).resolve())
                engine_ = RayEvalEngine(spec, RayEvalOptions(actors=actors))
                t0 = time.perf_counter()
                runs = run_eval(gs, configs, deps, workspace=gs.workspace, save=False, engine=engine_)
                out["eval_s"] = round(time.perf_counter() - t0, 2)
            out["ray_version"] = ray.__version__
            out["engine_stats"] = engine_.stats
    out["peak_tree_mib"] = round(mem.peak_mib, 1)
    out["peak_tree_processes"] = mem.peak_procs
    out["tree_cpu_s"] = round(mem.cpu_s, 1)
    out["questions"] = len(runs[0].results)
    # Mean pipeline ms per question inside each engine's processes (the trace's stage times).
    out["query_ms_mean"] = {r.config_name: r.metrics.get("ms") for r in runs}
    out["metrics"] = {r.config_name: {k: r.metrics.get(k) for k in ("ndcg@10", "recall@5", "recall@10", "mrr")}
                      for r in runs}
    rows = {r.config_name: [[q.qid, [c.chunk_id for s in q.stages if s.stage == q.final_stage for c in s.candidates],
                             {k: v for k, v in q.metrics.items() if k != "ms"}] for q in r.results] for r in runs}
    Path(rows_out).write_text(json.dumps(rows))
    store.close()
    return out


ENGINES = ("local", "local-1t", "ray")


def agreement(local_rows: str, ray_rows: str) -> dict[str, Any]:
    """Per configuration: questions with the same final list, largest metric difference, same question order."""
    a, b = json.loads(Path(local_rows).read_text()), json.loads(Path(ray_rows).read_text())
    out: dict[str, Any] = {}
    for name in a:
        qa, qb = a[name], b[name]
        same_order = [q[0] for q in qa] == [q[0] for q in qb]
        same_lists = sum(1 for x, y in zip(qa, qb) if x[0] == y[0] and x[1] == y[1])
        diff, differing = 0.0, []
        for x, y in zip(qa, qb):
            for k in sorted(set(x[2]) | set(y[2])):
                v, w = x[2].get(k), y[2].get(k)
                if v is None and w is None:
                    continue
                d = float("inf") if v is None or w is None else abs(float(v) - float(w))
                diff = max(diff, d)
                if d > 0:
                    differing.append([x[0], k, v, w])
        out[name] = {"questions": len(qa), "same_order": same_order, "same_final_list": same_lists,
                     "max_metric_diff": diff, "differing": differing[:20], "n_differing": len(differing)}
    return out


def snapshot_methods(db: str) -> dict[str, Any]:
    """Child process: the snapshot as built (checkpoint, copy, link) against EXPORT DATABASE + IMPORT DATABASE into a
    fresh file (what a DuckDB-native copy costs; the token-vector file would still need its link on top)."""
    import duckdb

    from core.store import Store
    from core.store.snapshot import remove_snapshot, write_snapshot

    tmp = Path(tempfile.mkdtemp(prefix="ray-eval-snap-", dir=Path(db).parent))
    out: dict[str, Any] = {"db_mib": round(Path(db).stat().st_size / 2**20, 1)}
    try:
        store = Store(db)
        t0 = time.perf_counter()
        write_snapshot(store, tmp / "copy")
        out["copy_s"] = round(time.perf_counter() - t0, 3)
        store.close()
        remove_snapshot(tmp / "copy")
        t0 = time.perf_counter()
        con = duckdb.connect(db, read_only=True)
        con.execute(f"EXPORT DATABASE '{tmp / 'export'}' (FORMAT parquet)")
        con.close()
        out["export_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        con = duckdb.connect(str(tmp / "imported.duckdb"))
        con.execute(f"IMPORT DATABASE '{tmp / 'export'}'")
        con.close()
        out["import_s"] = round(time.perf_counter() - t0, 3)
        out["export_import_s"] = round(out["export_s"] + out["import_s"], 3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _run_child(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        sys.exit(f"child {args[:2]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line[0][7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1, help="interleaved local/ray pairs")
    ap.add_argument("--actors", type=int, default=None, help="eval actors (default: one per CPU)")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "ray_eval.duckdb"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", choices=["prepare", "snapshot", "local", "local-1t", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "prepare":
        print("RESULT " + json.dumps(prepare_db(args.db, args.docs, args.questions, args.datasets)))
        return
    if args.child == "snapshot":
        print("RESULT " + json.dumps(snapshot_methods(args.db)))
        return
    if args.child:
        print("RESULT " + json.dumps(child("local" if args.child == "local-1t" else args.child, args.db, args.docs, args.questions, args.datasets,
                                           args.actors, args.rows)))
        return
    env = {**os.environ, "RAG_MODEL_CACHE": os.environ.get("RAG_MODEL_CACHE", str(ROOT / "data" / "models"))}
    common = ["--db", args.db, "--docs", str(args.docs), "--questions", str(args.questions)]
    common += ["--datasets", args.datasets] if args.datasets else []
    prep = _run_child(["--child", "prepare", *common], env)
    print(f"corpus: {prep['documents']} documents, {prep['chunks']} chunks, {prep['questions']} questions "
          f"({prep['prepare_s']} s)", flush=True)
    snap = _run_child(["--child", "snapshot", *common], env)
    print(f"snapshot: copy {snap['copy_s']} s vs export+import {snap['export_import_s']} s", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="ray-eval-bench-"))
    runs: list[dict[str, Any]] = []
    rows: dict[str, str] = {}
    for r in range(args.rounds):
        for engine in ENGINES:
            rows[engine] = str(tmp / f"{engine}{r}.json")
            extra = ["--actors", str(args.actors)] if args.actors else []
            t0 = time.perf_counter()
            # local-1t: the local engine with the thread setting Ray gives its workers (OMP_NUM_THREADS = the
            # actor's CPUs = 1), so Ray's own overhead is told apart from the effect of the thread count.
            env_e = {**env, "OMP_NUM_THREADS": "1"} if engine == "local-1t" else env
            res = _run_child(["--child", engine, *common, "--rows", rows[engine], *extra], env_e)
            res["engine"], res["round"] = engine, r
            res["process_s"] = round(time.perf_counter() - t0, 2)
            runs.append(res)
            print(f"round {r} {engine}: eval {res['eval_s']} s, peak {res['peak_tree_mib']} MiB", flush=True)
    agree = agreement(rows["local"], rows["ray"])
    agree_1t = agreement(rows["local"], rows["local-1t"])
    shutil.rmtree(tmp, ignore_errors=True)

    def med(engine: str, key: str) -> float:
        return statistics.median(x[key] for x in runs if x["engine"] == engine)

    summary: dict[str, Any] = {
        "local_eval_s": med("local", "eval_s"), "ray_eval_s": med("ray", "eval_s"), "ray_start_s": med("ray", "ray_start_s"),
        "local_1t_eval_s": med("local-1t", "eval_s"),
        "local_peak_mib": med("local", "peak_tree_mib"), "ray_peak_mib": med("ray", "peak_tree_mib"),
        "local_1t_peak_mib": med("local-1t", "peak_tree_mib"),
        "local_cpu_s": med("local", "tree_cpu_s"), "ray_cpu_s": med("ray", "tree_cpu_s"),
        "local_1t_cpu_s": med("local-1t", "tree_cpu_s"),
    }
    summary["overhead_ratio"] = round(summary["ray_eval_s"] / summary["local_eval_s"], 3)
    summary["overhead_ratio_with_start"] = round((summary["ray_eval_s"] + summary["ray_start_s"])
                                                 / summary["local_eval_s"], 3)
    summary["memory_ratio"] = round(summary["ray_peak_mib"] / summary["local_peak_mib"], 3)
    # Ray against the local engine with the same one thread per process: what Ray itself costs or gains.
    summary["ratio_vs_local_1t"] = round(summary["ray_eval_s"] / summary["local_1t_eval_s"], 3)
    summary["ratio_vs_local_1t_with_start"] = round((summary["ray_eval_s"] + summary["ray_start_s"])
                                                    / summary["local_1t_eval_s"], 3)
    last_ray = [x for x in runs if x["engine"] == "ray"][-1]["engine_stats"]
    summary.update({k: last_ray.get(k) for k in ("actors", "tasks", "chunk", "snapshot_s", "actor_start_s",
                                                    "fan_out_s", "duplicates")})
    print(table(["engine", "round", "eval s", "start s", "CPU s", "peak MiB", "processes"],
                [[x["engine"], x["round"], x["eval_s"], x.get("ray_start_s"), x["tree_cpu_s"], x["peak_tree_mib"],
                  x["peak_tree_processes"]] for x in runs]))
    print(json.dumps({**summary, "agreement": agree, "agreement_local_1t": agree_1t, "snapshot": snap}, indent=2))
    path = write_result("ray_eval", {
        "what": "Two configurations over the same SciFact questions scored by the local eval and by the Ray eval "
                "engine (local runtime, one eval actor per CPU on a read-only snapshot of the database, ONNX "
                "threads = 1 per actor), each engine in a fresh process; rounds interleaved",
        "corpus": f"beir_scifact: {prep['documents']} abstracts ({prep['chunks']} chunks), subsample seed 0",
        "docs": args.docs, "questions": prep["questions"], "configs": ["default", "no-rerank"],
        "rounds": args.rounds, "machine": machine_info(), "summary": summary, "agreement": agree,
        "agreement_local_1t": agree_1t,
        "snapshot_methods": snap, "runs": runs,
        "memory_method": "peak over 0.25 s samples of summed PSS of the process tree (driver, and for ray the GCS, "
                         "raylet and actors); tree_cpu_s: user+system seconds of every process of the tree, as last "
                         "sampled (the whole child: model load, runtime start, eval)",
        "note": "absolute seconds are pessimistic on this shared machine; the ratio is measured side by side. "
                "eval_s is run_eval's wall time (for ray: snapshot, actor start with one model load each, the "
                "fan-out and the driver's aggregation), without the runtime start (ray_start_s)",
    }, Path(args.out) if args.out else None, table=MEASURED_RAY_EVAL)
    print(f"wrote {path}")


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_ray_eval(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14 part 3: bench/ray_eval.py, batch eval over two configurations, local vs ray, on this machine."""
    s, snap = d.get("summary") or {}, d.get("snapshot_methods") or {}
    out = [f"### Batch eval on Ray vs local ({d.get('corpus', '')}, {num(d.get('questions'))} questions x "
           f"{len(d.get('configs') or [])} configurations)", "", CAPTION, "",
           "Configurations " + ", ".join(f"`{c}`" for c in d.get("configs") or []) + " over the same questions; each "
           "engine in a fresh process, the corpus already in the database. Ray is a local runtime on this 2-core "
           "machine: one eval actor per CPU on a read-only snapshot of the database, one ONNX thread each; local-1t "
           "is the local engine with OMP_NUM_THREADS=1, the thread setting Ray gives those workers. Eval s: "
           "run_eval's wall time (for Ray: snapshot, actor start and model loads, fan-out, aggregation), without "
           "the runtime's start. CPU s: user + system seconds of the whole process tree (model loads included). "
           "Memory: peak summed PSS of the process tree.", ""]
    rows = [[r.get("engine"), r.get("round"), num(r.get("eval_s"), 1),
             num(r.get("ray_start_s"), 1) if r.get("ray_start_s") is not None else "–", num(r.get("tree_cpu_s"), 1),
             num(r.get("peak_tree_mib"), 0), r.get("peak_tree_processes"),
             " / ".join(num((r.get("metrics") or {}).get(c, {}).get("ndcg@10"), 4) for c in d.get("configs") or [])]
            for r in d.get("runs") or []]
    out.append(grid(["engine", "round", "eval s", "Ray start s", "CPU s", "peak MiB", "processes",
                         "nDCG@10 " + " / ".join(d.get("configs") or [])], rows))
    if s:
        agree = d.get("agreement") or {}
        same = "; ".join(f"`{c}` {num(a.get('same_final_list'))}/{num(a.get('questions'))} same final lists, largest "
                         f"metric difference {num(a.get('max_metric_diff'), 4)}"
                         + (f" ({num(a['n_differing'])} metric values differ, listed in the file)"
                            if a.get("n_differing") else "") for c, a in agree.items())
        one_t = d.get("agreement_local_1t") or {}
        if one_t:
            same += "; local-1t against local: " + ", ".join(
                f"`{c}` {num(a.get('same_final_list'))}/{num(a.get('questions'))} same final lists, largest metric "
                f"difference {num(a.get('max_metric_diff'), 4)}" for c, a in one_t.items())
        same_threads = (f" Against local-1t: **{num(s.get('ratio_vs_local_1t'), 2)}×** "
                        f"({num(s.get('ratio_vs_local_1t_with_start'), 2)}× with the start; local-1t / local "
                        f"{num(s['local_1t_eval_s'] / s['local_eval_s'], 2)}×): what Ray itself gains or costs here."
                        if s.get("ratio_vs_local_1t") and s.get("local_eval_s") else "")
        out += ["", f"Ray / local eval time **{num(s.get('overhead_ratio'), 2)}×** "
                f"({num(s.get('overhead_ratio_with_start'), 2)}× counting the runtime's start of "
                f"{num(s.get('ray_start_s'), 1)} s).{same_threads} CPU seconds: Ray {num(s.get('ray_cpu_s'), 0)}, local "
                f"{num(s.get('local_cpu_s'), 0)}"
                + (f", local-1t {num(s.get('local_1t_cpu_s'), 0)}" if s.get("local_1t_cpu_s") is not None else "")
                + f"; peak memory {num(s.get('memory_ratio'), 2)}× "
                f"({num(s.get('ray_peak_mib'), 0)} vs {num(s.get('local_peak_mib'), 0)} MiB). Last Ray run: "
                f"{s.get('actors')} actors, {s.get('tasks')} tasks of up to {s.get('chunk')} questions, snapshot "
                f"{num(s.get('snapshot_s'), 3)} s, actors ready after {num(s.get('actor_start_s'), 1)} s, "
                f"{s.get('duplicates')} duplicate results dropped. Agreement, Ray against local: {same}. "
                f"Snapshot of the {num(snap.get('db_mib'), 1)} MiB database: checkpoint + copy + token-vector link "
                f"{num(snap.get('copy_s'), 3)} s; DuckDB EXPORT + IMPORT DATABASE {num(snap.get('export_import_s'), 3)} "
                "s (without the token vectors). Seconds depend on the other jobs sharing the machine (load average in "
                "the caption); the engines ran one after the other, not side by side."]
    return out


MEASURED_RAY_EVAL = Table(measured_ray_eval, 'Ray')


if __name__ == "__main__":
    main()
