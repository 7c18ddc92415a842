"""Answer-stage speed before and after issue #32, side by side in one run, with the answers' quality.

Two warm worker processes hold the sample corpus open (read-only), one importing the code of a previous commit
(`--before`, extracted with `git archive`, no worktree), one this tree's; the driver hands each question to one, then
the other, so both meet the same machine load. Each records the answer stage's ms and the whole query's, and the
answer itself, scored as bench/answer.py scores it (answered correctly: not refused and a quoted sentence from a gold
passage; refused: an unanswerable question refused). Then fresh processes: `python -m core query --json` per question,
alternating the two code trees, wall time and the answer stage's ms.

  .venv/bin/python bench/answer_speed.py --before c4ce49e              # eval.jsonl + eval_holdout4.jsonl
  .venv/bin/python bench/answer_speed.py --before c4ce49e --fresh 8 --sets eval
"""
from __future__ import annotations

import json
import os
import sys
import time

if __name__ == "__main__" and "--worker" in sys.argv:  # a worker imports the code tree it was given, nothing else
    sys.path.insert(0, sys.argv[sys.argv.index("--worker") + 1])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.pipeline import run_query
    from core.store import Store

    db = sys.argv[sys.argv.index("--db") + 1]
    cfg = PipelineConfig.model_validate({"answer_cache": {"enabled": False}})
    deps = build_deps(cfg, store=Store(db, read_only=True))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        q = json.loads(line)
        t0 = time.perf_counter()
        tr = run_query(q["query"], cfg, deps, log=False)
        wall = (time.perf_counter() - t0) * 1000
        ans = next((s for s in tr.stages if s.stage == "answer"), None)
        ver = next((s for s in tr.stages if s.stage == "verify" and not s.skipped), None)  # issue #42: the check
        a = tr.answer
        print(json.dumps({"id": q["id"], "wall_ms": wall,
                          "answer_ms": (ans.ms + (ver.ms if ver else 0.0)) if ans and not ans.skipped else None,
                          "verify_ms": ver.ms if ver else None,
                          "text": a.text if a else None, "refused": a.refused if a else None,
                          "citations": list(a.citations) if a else []}), flush=True)
    sys.exit(0)

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CAPTION, ROOT, Table, grid, machine_info, utc_now, write_result  # noqa: E402

from core.eval.answer import answered_correctly  # noqa: E402
from core.types import Answer  # noqa: E402

SETS = {"eval": ROOT / "sample_corpus" / "eval.jsonl", "holdout4": ROOT / "sample_corpus" / "eval_holdout4.jsonl"}
DB = ROOT / "data" / "bench" / "answer_speed.duckdb"


def questions(sets: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in sets:
        for line in SETS[name].read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                out.append({"id": f"{name}:{q['id']}", "set": name, "query": q["query"],
                            "answerable": bool(q["answerable"]), "gold": [g["span"] for g in q.get("gold", [])]})
    return out


def extract(rev: str, into: Path) -> str:
    """The `core` package of commit `rev`, unpacked into `into` (git archive: no worktree, no change to .git)."""
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    arch = subprocess.run(["git", "archive", full, "core"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=arch, check=True)
    return full


class Worker:
    def __init__(self, root: Path, db: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(root), "--db",
                                   str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root,
                                  env=env)
        assert json.loads(self.p.stdout.readline())["ready"]

    def ask(self, q: dict[str, Any]) -> dict[str, Any]:
        self.p.stdin.write(json.dumps({"id": q["id"], "query": q["query"]}) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def score(rows: list[dict[str, Any]], qs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ans = [r for r in rows if qs[r["id"]]["answerable"]]
    una = [r for r in rows if not qs[r["id"]]["answerable"]]
    ok = sum(answered_correctly(Answer(r["text"] or "", tuple(r["citations"]), bool(r["refused"]), "extractive"),
                                qs[r["id"]]["gold"]) for r in ans)
    refused = sum(bool(r["refused"]) for r in una)
    ms = [r["answer_ms"] for r in rows if r["answer_ms"] is not None]
    walls = [r["wall_ms"] for r in rows]
    return {"questions": len(rows), "answerable": len(ans), "answered_correctly": ok,
            "answered_correctly_rate": round(ok / len(ans), 4) if ans else None, "unanswerable": len(una),
            "refused_unanswerable": refused, "refusal_rate": round(refused / len(una), 4) if una else None,
            **({"verify_ms_median": round(statistics.median(vs), 2)} if (vs := [r["verify_ms"] for r in rows
                                                                                 if r.get("verify_ms") is not None])
               else {}),
            "answer_ms_median": round(statistics.median(ms), 1), "answer_ms_p90": round(
                sorted(ms)[int(0.9 * (len(ms) - 1))], 1), "query_ms_median": round(statistics.median(walls), 1)}


def fresh_runs(roots: dict[str, Path], db: Path, qs: list[dict[str, Any]]) -> dict[str, Any]:
    """`python -m core query --json` in a new process per question, the code trees alternating. Bytecode is
    written and read as a user's install does (this machine's agents run with PYTHONDONTWRITEBYTECODE=1, which
    compiles every module of the tree on each start); one unmeasured start per tree writes it first."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["HF_HUB_OFFLINE"] = "1"

    def one(root: Path, q: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "core", "query", q, "--db", str(db), "--set",
                            "answer_cache.enabled=false", "--json"], cwd=root, env={**env, "PYTHONPATH": str(root)},
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode:
            raise RuntimeError(p.stderr[-2000:])
        d = json.loads(p.stdout)
        stages = {s["stage"]: s["ms"] for s in d["stages"] if not s.get("skipped")}
        return {"wall_s": round(wall, 3), "answer_ms": stages.get("answer"), "stages_ms": round(sum(stages.values()), 1)}

    for root in roots.values():
        one(root, "warm-up: how many pump stations are there?")
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in roots}
    for q in qs:
        for name, root in roots.items():
            out[name].append({"id": q["id"], **one(root, q["query"])})
    summary = {}
    for name, rows in out.items():
        summary[name] = {"runs": len(rows), "wall_s_median": round(statistics.median(r["wall_s"] for r in rows), 2),
                         "wall_s_max": round(max(r["wall_s"] for r in rows), 2),
                         "answer_ms_median": round(statistics.median(r["answer_ms"] for r in rows), 1),
                         "answer_ms_max": round(max(r["answer_ms"] for r in rows), 1),
                         "stages_ms_median": round(statistics.median(r["stages_ms"] for r in rows), 1), "rows": rows}
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="commit whose code is the 'before' side")
    ap.add_argument("--sets", nargs="+", default=["eval", "holdout4"], choices=sorted(SETS))
    ap.add_argument("--fresh", type=int, default=8, help="questions run in fresh processes per code tree")
    ap.add_argument("--db", default=str(DB))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    db = Path(args.db)
    info = machine_info()
    build: dict[str, Any] = {}
    if not db.exists():  # ingest with this tree's CLI, which builds the answer's sentence vectors after it
        db.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "core", "ingest", str(ROOT / "sample_corpus" / "docs"), "--db",
                            str(db)], cwd=ROOT, capture_output=True, text=True, check=True)
        build = {"ingest_s": round(time.perf_counter() - t0, 1),
                 "sentence_vectors": [ln for ln in p.stderr.splitlines() if "sentence vectors" in ln][-2:]}
    qs = questions(args.sets)
    by_id = {q["id"]: q for q in qs}
    tmp = Path(tempfile.mkdtemp(prefix="answer_speed_"))
    try:
        before_rev = extract(args.before, tmp)
        roots = {"before": tmp, "after": ROOT}
        workers = {name: Worker(root, db) for name, root in roots.items()}
        rows: dict[str, list[dict[str, Any]]] = {k: [] for k in roots}
        for name, w in workers.items():  # warm-up: models loaded, first-touch costs paid
            w.ask({"id": "warm", "query": "How many pump stations does the project cover?"})
        t0 = time.perf_counter()
        for i, q in enumerate(qs, 1):
            order = list(workers.items()) if i % 2 else list(reversed(workers.items()))  # neither side always first
            for name, w in order:
                rows[name].append(w.ask(q))
            if i % 20 == 0:
                print(f"[{i}/{len(qs)}] {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        for w in workers.values():
            w.close()
        same = sum((a["refused"], a["text"]) == (b["refused"], b["text"]) for a, b in zip(rows["before"], rows["after"]))
        warm = {name: {"all": score(r, by_id), **{s: score([x for x in r if by_id[x["id"]]["set"] == s], by_id)
                                                  for s in args.sets}} for name, r in rows.items()}
        fresh_qs = qs[1: 1 + args.fresh]
        fresh = fresh_runs(roots, db, fresh_qs) if args.fresh else {}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    payload = {
        "what": "issue #32 item 1/2: the offline answer stage (and the whole query) warm and in a fresh process, the "
                "code before the change against this tree, one question to each in turn",
        "before": {"commit": before_rev}, "after": {"commit": "this run's commit (run.git)"},
        "corpus": "sample_corpus/docs", "sets": args.sets, "machine": info, "when": utc_now(), "build": build,
        "identical_answers": same, "questions": len(qs), "warm": warm,
        "fresh": {"questions": [q["id"] for q in fresh_qs], **fresh},
        "targets": {"answer_ms_median_warm": 100, "answer_ms_fresh": 300, "cli_query_s": 2.5},
        "per_question": {name: r for name, r in rows.items()},
    }
    path = write_result("answer_speed", payload, Path(args.out) if args.out else None, table=MEASURED_ANSWER_SPEED)
    for name in roots:
        w = warm[name]["all"]
        f = fresh.get(name, {})
        print(f"{name}: answer median {w['answer_ms_median']} ms (p90 {w['answer_ms_p90']}), query median "
              f"{w['query_ms_median']} ms; answered correctly {w['answered_correctly']}/{w['answerable']}, refused "
              f"{w['refused_unanswerable']}/{w['unanswerable']}; fresh: wall {f.get('wall_s_median')} s, answer "
              f"{f.get('answer_ms_median')} ms")
    print(f"identical answers {same}/{len(qs)} -> {path}")



def measured_answer_speed(payload: dict[str, Any], file: str) -> list[Any]:
    """The offline answer stage warm (and fresh, when run) on the sample corpus: the code before against this tree."""
    warm, fresh = payload["warm"], payload.get("fresh") or {}
    rows = []
    for name in ("before", "after"):
        if name not in warm:
            continue
        w, f = warm[name]["all"], fresh.get(name) or {}
        rows.append((f"{name} ({payload[name]['commit'][:7]})" if name == "before" else "this run's commit",
                     f"{w['answer_ms_median']} ms", f"{w['answer_ms_p90']} ms", f"{w.get('verify_ms_median', '–')} ms",
                     f"{w['query_ms_median']} ms", f"{w['answered_correctly']}/{w['answerable']}",
                     f"{w['refused_unanswerable']}/{w['unanswerable']}",
                     f"{f['wall_s_median']} s" if f.get("wall_s_median") is not None else "not run"))
    tg = payload.get("targets", {})
    return ["### Offline answer stage speed (sample corpus)",
            f"Warm workers over {payload['corpus']}, sets {', '.join(payload['sets'])} ({payload['questions']} questions; "
            f"{payload['identical_answers']} answers identical before and after). Target: warm answer-stage median "
            f"<= {tg.get('answer_ms_median_warm', '–')} ms (issue #42: <= 30 ms with the check).",
            grid(("code", "answer stage median", "p90", "verify median", "whole query median", "answered correctly",
                  "refused unanswerable", "fresh process"), rows),
            CAPTION]


MEASURED_ANSWER_SPEED = Table(measured_answer_speed, "Offline answer and answer cache")

if __name__ == "__main__":
    main()
