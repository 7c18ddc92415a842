"""Evaluation speed and the router's cost (issue #32 items 3 and 4), each side by side in one run.

ab: the Evaluate page's A/B (the default, router on, against router off) on the sample set in a cold process
(`python -m core eval --config A --config B`), wall time with the configurations sharing their stage results (the
default) and with `--no-reuse` (every stage computed for both: the code before the stage memo), in alternating order.

router: what a routed question costs against the same question unrouted, in a warm process per code tree (this tree
and --before): both configurations warmed first, then every question run under both in alternating order (so
neither pays the other's first touches), `--rounds` times, per-question median. Questions split into those whose
result the route changed (final top-5 or the answer differs) and those it did not; per group the cost ratio (routed
/ unrouted, sum of per-question medians), recall@5 of each, and the mean ms of every stage (where the routed cost
goes). On the sample set and twowiki_multihop (RAG_DATASETS or --datasets).

  .venv/bin/python bench/eval_speed.py --before eae57f8 --twowiki-limit 100
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KEEP = ("recall@5", "recall@10", "mrr", "ndcg@10", "answered_correctly", "refusal_accuracy", "faithfulness")
TARGET_RATIO = 1.2


# -- router cost: one worker per code tree (imports that tree's core) ------------------------------------------------
def router_worker(root: Path, db: str, dataset: str, datasets: str, limit: int | None, rounds: int) -> dict[str, Any]:
    """Run in a subprocess with `root` first on sys.path: the code tree measured is `root`'s."""
    sys.path.insert(0, str(root))
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.datasets import load_dataset
    from core.eval.metrics import score_trace
    from core.eval.run import prepare
    from core.pipeline import run_query
    from core.store import Store

    gs = load_dataset(dataset, Path(datasets))
    routed = PipelineConfig().with_overrides(gs.overrides)
    configs = {"routed": routed, "unrouted": routed.with_overrides({"router.enabled": False})}
    deps = build_deps(routed, store=Store(db))
    ws = gs.workspace or "default"
    t0 = time.perf_counter()
    gs, _ = prepare(gs, deps, workspace=ws, config=routed)
    prepare_s = time.perf_counter() - t0
    qs = [q for q in gs.queries if q.gold][: limit or None]
    for q in qs[:3]:  # warm both: models, indexes, first-call costs belong to no row
        for cfg in configs.values():
            run_query(q.query, cfg, deps, workspace=ws, log=False)
    rows: list[dict[str, Any]] = []
    for i, q in enumerate(qs):
        rec: dict[str, Any] = {"qid": q.qid, "type": q.qtype}
        ms: dict[str, list[float]] = {n: [] for n in configs}
        for r in range(rounds):
            names = list(configs) if (i + r) % 2 == 0 else list(reversed(configs))  # neither side always first
            for name in names:
                t = time.perf_counter()
                trace = run_query(q.query, configs[name], deps, workspace=ws, log=False)
                ms[name].append((time.perf_counter() - t) * 1000)
                if r == 0:
                    final = trace.final()
                    score = score_trace(trace, q.gold, ks=gs.ks, ndcg_ks=gs.ndcg_ks, unit=gs.unit)
                    rec[name] = {"top5": [c.chunk_id for c in (final.candidates[:5] if final else ())],
                                 "answer": trace.answer.text if trace.answer else None,
                                 "recall@5": score.metrics.get("recall@5"),
                                 "route": (trace.route() or {}).get("class"),
                                 "stage_ms": {str(s.stage): round(s.ms, 2) for s in trace.stages if s.skipped is None}}
        for name in configs:
            rec[name]["ms"] = round(statistics.median(ms[name]), 2)
        rec["changed"] = (rec["routed"]["top5"], rec["routed"]["answer"]) != (rec["unrouted"]["top5"],
                                                                              rec["unrouted"]["answer"])
        rows.append(rec)
        if (i + 1) % 25 == 0:
            print(f"  {dataset}: {i + 1}/{len(qs)}", file=sys.stderr, flush=True)
    return {"dataset": dataset, "prepare_s": round(prepare_s, 1), "questions": len(rows), "rounds": rounds,
            **summarise(rows), "per_question": rows}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    same = [r for r in rows if r["changed"] and r["routed"]["recall@5"] == r["unrouted"]["recall@5"]]
    for label, sel in (("all", rows), ("route_changed_result", [r for r in rows if r["changed"]]),
                       ("route_did_not_change_result", [r for r in rows if not r["changed"]]),
                       ("route_changed_result_same_recall@5", same)):
        if not sel:
            out[label] = {"n": 0}
            continue
        a = sum(r["routed"]["ms"] for r in sel)
        b = sum(r["unrouted"]["ms"] for r in sel)
        stages = sorted({s for r in sel for n in ("routed", "unrouted") for s in r[n]["stage_ms"]})

        def rec(name: str) -> float | None:
            v = [r[name]["recall@5"] for r in sel if r[name]["recall@5"] is not None]
            return round(sum(v) / len(v), 4) if v else None

        routes: dict[str, int] = {}
        for r in sel:
            routes[str(r["routed"]["route"])] = routes.get(str(r["routed"]["route"]), 0) + 1
        out[label] = {
            "n": len(sel), "routed_ms_mean": round(a / len(sel), 1), "unrouted_ms_mean": round(b / len(sel), 1),
            "cost_ratio": round(a / b, 3) if b else None, "routed_recall@5": rec("routed"),
            "unrouted_recall@5": rec("unrouted"), "routes": routes,
            "stage_ms_mean": {s: {n: round(sum(r[n]["stage_ms"].get(s, 0.0) for r in sel) / len(sel), 2)
                                  for n in ("routed", "unrouted")} for s in stages}}
    return out


def run_router(root: Path, db: Path, dataset: str, datasets: str, limit: int | None, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="eval_speed_router_") as tmp:
        copy = _copy_db(db, Path(tmp))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root), "RAG_MODEL_CACHE": str(db.parent / "models")}
        cmd = [sys.executable, str(HERE / "eval_speed.py"), "--worker", str(root), "--db", str(copy),
               "--dataset", dataset, "--datasets", datasets, "--rounds", str(rounds)]
        if limit:
            cmd += ["--limit", str(limit)]
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-3000:])
    return json.loads(p.stdout)


# -- cold A/B through the CLI -----------------------------------------------------------------------------------------
def _copy_db(db: Path, into: Path) -> Path:
    copy = into / "ab.duckdb"
    shutil.copy(db, copy)
    for side in db.parent.glob(db.name + ".tokvec.*"):
        shutil.copy(side, into / side.name.replace(db.name, copy.name))
    return copy


def ab(root: Path, db: Path, configs: list[Path], extra: list[str] = ()) -> dict[str, Any]:
    """One cold A/B: a new process, a copy of the database (runs are stored), wall time and the runs' figures."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # The exported ONNX model beside the database, as a user's cold start finds it (a copy would rebuild it)
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root), "RAG_MODEL_CACHE": str(db.parent / "models")})
    with tempfile.TemporaryDirectory(prefix="eval_speed_") as tmp:
        copy = _copy_db(db, Path(tmp))
        cmd = [sys.executable, "-m", "core", "eval", "--dataset", "sample", "--db", str(copy), "--json",
               *[a for c in configs for a in ("--config", str(c))], *extra]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(p.stderr[-3000:])
    d = json.loads(p.stdout)
    runs = []
    for r in d["runs"]:
        lat = r.get("latency") or {}
        reuse = r.get("reuse") or {}
        runs.append({"config": r.get("config_name"), "seconds": round(r.get("seconds", 0.0), 1),
                     "per_question_ms": round(1000 * r.get("seconds", 0.0) / max(1, d["questions"]), 1),
                     "stage_ms_mean_sum": round(sum(v.get("mean", 0.0) for v in lat.values()), 1),
                     "stages_reused": sum(v["reused"] for v in reuse.values()),
                     "stages_computed": sum(v["computed"] for v in reuse.values()), "reuse": reuse,
                     **{k: (round(r["metrics"][k], 4) if r["metrics"].get(k) is not None else None)
                        for k in KEEP if k in r.get("metrics", {})}})
    return {"wall_s": round(wall, 1), "questions": d["questions"], "runs": runs,
            "per_question": {r["config_name"]: {q["qid"]: {k: v for k, v in q["metrics"].items() if k != "ms"}
                                                for q in r["results"]} for r in d["runs"]}}


def extract(rev: str, into: Path) -> str:
    full = subprocess.run(["git", "rev-parse", rev], cwd=HERE.parent, capture_output=True, text=True,
                          check=True).stdout.strip()
    arch = subprocess.run(["git", "archive", full, "core", "sample_corpus"], cwd=HERE.parent, capture_output=True,
                          check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=arch, check=True)
    return full


def main() -> None:
    if "--worker" in sys.argv:  # before _common: its import puts this tree first on sys.path
        wp = argparse.ArgumentParser()
        for a in ("--worker", "--db", "--dataset", "--datasets"):
            wp.add_argument(a, required=True)
        wp.add_argument("--limit", type=int, default=None)
        wp.add_argument("--rounds", type=int, default=2)
        w = wp.parse_args()
        print(json.dumps(router_worker(Path(w.worker), w.db, w.dataset, w.datasets, w.limit, w.rounds)))
        return
    sys.path.insert(0, str(HERE))
    from _common import ROOT, Table, datasets_dir, machine_info, utc_now, write_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="commit whose router code is the 'before' side")
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "answer_speed.duckdb"),
                    help="the sample corpus ingested (bench/answer_speed.py makes it)")
    ap.add_argument("--twowiki-db", default=str(ROOT / "data" / "bench" / "eval_speed_twowiki.duckdb"))
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--twowiki-limit", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], choices=["ab", "router"])
    ap.add_argument("--ab-order", default="no_reuse,shared,shared,no_reuse",
                    help="the cold A/B runs in order (no_reuse / shared), alternating")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    db = Path(args.db)
    if not db.exists():
        sys.exit(f"{db} missing: run bench/answer_speed.py first (it ingests the sample corpus)")
    datasets = str(datasets_dir(args.datasets))
    info = machine_info()
    out: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="eval_speed_code_"))
    try:
        (tmp / "before").mkdir()
        before_rev = extract(args.before, tmp / "before")
        cfgs = [tmp / "default.json", tmp / "router_off.json"]
        cfgs[0].write_text("{}")
        cfgs[1].write_text(json.dumps({"router": {"enabled": False}}))
        if "ab" not in args.skip:
            runs: dict[str, list[dict[str, Any]]] = {"shared": [], "no_reuse": []}
            for name in args.ab_order.split(","):
                runs[name].append(ab(ROOT, db, cfgs, ["--no-reuse"] if name == "no_reuse" else []))
                print(f"A/B {name}: {runs[name][-1]['wall_s']} s", file=sys.stderr, flush=True)
            same = all(r["per_question"] == runs["no_reuse"][0]["per_question"] for v in runs.values() for r in v)
            out["ab"] = {"what": "cold `python -m core eval --dataset sample --config default --config router_off`, "
                                 "shared stage results (this tree's default) against --no-reuse, order alternating",
                         "shared_wall_s": [r["wall_s"] for r in runs["shared"]],
                         "no_reuse_wall_s": [r["wall_s"] for r in runs["no_reuse"]],
                         "identical_per_question_metrics": same,
                         "shared": {k: v for k, v in runs["shared"][0].items() if k != "per_question"},
                         "no_reuse": {k: v for k, v in runs["no_reuse"][0].items() if k != "per_question"}}
            out["ab"]["speedup"] = round(statistics.mean(out["ab"]["no_reuse_wall_s"])
                                         / statistics.mean(out["ab"]["shared_wall_s"]), 2)
        if "router" not in args.skip:
            tw = Path(args.twowiki_db)
            out["router"] = {}
            for ds, dbp, limit in (("sample", db, None), ("twowiki_multihop", tw, args.twowiki_limit)):
                if ds == "twowiki_multihop" and not tw.exists():  # ingested once (kept for later runs)
                    tw.parent.mkdir(parents=True, exist_ok=True)
                    print(f"ingesting twowiki_multihop into {tw} ...", file=sys.stderr, flush=True)
                    router_prep = [sys.executable, "-m", "core", "eval", "--dataset", ds, "--db", str(tw), "--limit",
                                   "1", "--set", "answer.enabled=false"]
                    subprocess.run(router_prep, cwd=ROOT, env={**os.environ, "RAG_DATASETS": datasets,
                                                               "HF_HUB_OFFLINE": "1"}, check=True,
                                   capture_output=True)
                res = {}
                for side, root in (("before", tmp / "before"), ("after", ROOT)):
                    res[side] = run_router(root, dbp, ds, datasets, limit, args.rounds)
                    s = res[side]
                    print(f"router {ds} {side}: " + json.dumps({k: {x: s[k].get(x) for x in ("n", "cost_ratio")}
                                                               for k in ("all", "route_changed_result",
                                                                         "route_did_not_change_result")}),
                          file=sys.stderr, flush=True)
                out["router"][ds] = res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    payload = {"what": "issue #32 items 3/4: cold A/B wall time with and without shared stage results; the router's "
                       "cost per question split by whether the route changed the result, before and after, "
                       "side by side in one run",
               "before": {"commit": before_rev}, "machine": info, "when": utc_now(), **out,
               "targets": {"ab_cold_s": 60, "router_cost_ratio_unchanged": TARGET_RATIO}}
    print(write_result("eval_speed", payload, Path(args.out) if args.out else None,
                       table=Table(measured_eval_speed, "Evaluation speed")))


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_eval_speed(d: dict[str, Any], file: str) -> list[str]:
    """Issue #32 items 3/4: the cold A/B with and without shared stage results, and the router's cost split by whether
    the route changed the result (bench/eval_speed.py)."""
    from _common import CAPTION, grid, num  # here, as main's: a worker must not import _common

    out = ["### Evaluation speed and the router's cost", "", CAPTION, ""]
    a = d.get("ab") or {}
    if a:
        out += ["`python -m core eval --dataset sample --config default --config router_off` in a fresh process: the "
                "configurations sharing their stage results (a stage whose inputs the first configuration had is "
                "reused) against `--no-reuse` (every stage computed for both), order alternating.", ""]
        rows = []
        for key, label in (("shared", "shared stage results"), ("no_reuse", "--no-reuse")):
            x = a.get(key) or {}
            walls = a.get(f"{key}_wall_s") or []
            for r in x.get("runs") or []:
                rows.append([label, " / ".join(num(w, 1) for w in walls), r.get("config"),
                             f"{r.get('stages_reused', 0)} / {r.get('stages_computed', 0)}",
                             num(r.get("recall@5"), 3), num(r.get("answered_correctly"), 3)])
        out.append(grid(["run", "A/B wall s (cold)", "configuration", "stages reused / computed", "recall@5",
                             "answered correctly"], rows))
        out += ["", f"Wall time without / with shared results: **{num(a.get('speedup'), 2)}×**; per-question "
                f"metrics identical: {a.get('identical_per_question_metrics')}."]
    r = d.get("router") or {}
    if r:
        out += ["", "The router's cost per question (routed / unrouted, sum of per-question medians, warm, order "
                "alternating), split by whether the route changed the result (final top-5 or answer); target ≤ "
                f"{(d.get('targets') or {}).get('router_cost_ratio_unchanged')}× where it did not.", ""]
        rows = []
        for ds, sides in r.items():
            for side in ("before", "after"):
                x = sides.get(side) or {}
                for grp, label in (("route_did_not_change_result", "unchanged"), ("route_changed_result", "changed")):
                    g = x.get(grp) or {}
                    if not g.get("n"):
                        continue
                    rows.append([ds, side, label, g.get("n"), num(g.get("routed_ms_mean"), 0),
                                 num(g.get("unrouted_ms_mean"), 0), f"**{num(g.get('cost_ratio'), 2)}×**",
                                 num(g.get("routed_recall@5"), 3), num(g.get("unrouted_recall@5"), 3)])
        out.append(grid(["dataset", "code", "route changed result", "questions", "routed ms", "unrouted ms",
                             "cost ratio", "routed recall@5", "unrouted recall@5"], rows))
    if d.get("note"):
        out += ["", d["note"]]
    return out


if __name__ == "__main__":
    main()
