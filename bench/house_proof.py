"""Proof that a refactor changed no behaviour: the same `query --json` and the same evaluation metrics at two commits.

Each commit is exported (git archive) into a scratch folder and run there in a fresh process, from its own code:
ingest the sample corpus into a fresh database, run `query --json` for fixed questions under several settings (the
answer cache off, so each question is computed), then `eval --dataset sample --json`. Timings, ids and timestamps are
stripped; everything else is compared. The questions are the first 14 of sample_corpus/eval.jsonl and six written
for the routes a refactor is most likely to break (Russian, greeting, global, short lookup, negation, two facts).

  .venv/bin/python bench/house_proof.py --before 1058e89 --after HEAD      -> bench/results/house_proof.json
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_result  # noqa: E402

EXTRA = ["Какой дневной лимит на питание в командировке за границей?", "hi, how are you?",
         "What are the main themes across all documents?", "revenue growth",
         "Which policy does not allow three remote days?", "Who is the CEO and when did they approve the migration?"]
SETTINGS: dict[str, list[str]] = {
    "default": [], "router off": ["router.enabled=false"],
    "bm25 only": ["dense.enabled=false", "rerank.enabled=false", "mmr.enabled=false", "prune.enabled=false"],
    "rerank off": ["rerank.enabled=false"], "expand parent": ["expand.enabled=true", "expand.mode=parent"],
    "agent on": ["agent.enabled=true"],
}
# Keys whose values are clocks or fresh ids: never equal across two runs, whatever the code does.
VOLATILE = re.compile(r"(^|_)(ms|s|seconds|latency|latency_ms|created_at|stored_at|run_id|eval_id|at)$")


def strip(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not VOLATILE.search(k)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    if isinstance(x, float):
        return round(x, 6)
    return x


def digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def worker(out: Path) -> None:
    """Runs inside the exported tree (cwd and sys.path): its own core.cli, its own sample corpus."""
    from core.cli import main

    def run(argv: list[str]) -> tuple[int, str]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = int(exc.code or 0)
        return rc, buf.getvalue()

    db = str(out.parent / "proof.duckdb")
    rc, _ = run(["ingest", "sample_corpus/docs", "--db", db, "--json"])
    questions = [json.loads(line)["query"] for line in open("sample_corpus/eval.jsonl")][:14] + EXTRA
    rows = []
    for name, sets in SETTINGS.items():
        args = ["--set", "answer_cache.enabled=false"] + [a for s in sets for a in ("--set", s)]
        for q in questions:
            code, text = run(["query", q, "--db", db, "--json", *args])
            body = strip(json.loads(text)) if code == 0 else text
            answer = body.get("answer") if isinstance(body, dict) else None
            rows.append({"setting": name, "query": q, "rc": code, "digest": digest(body),
                         "stages": [s["stage"] for s in body.get("stages", []) if not s.get("skipped")]
                         if isinstance(body, dict) else [],
                         "answer": (answer.get("text") if isinstance(answer, dict) else str(answer))[:200]})
    code, text = run(["eval", "--dataset", "sample", "--db", db, "--json", "--set", "answer_cache.enabled=false"])
    metrics = json.loads(text)["runs"][0]["metrics"] if code == 0 else {}
    out.write_text(json.dumps({"ingest_rc": rc, "queries": rows, "eval_metrics": strip(metrics)}, ensure_ascii=False))


def record(rev: str, scratch: Path) -> dict[str, Any]:
    tree = scratch / rev.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    out = tree / "proof.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    env.pop("ANTHROPIC_API_KEY", None)
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(out)], cwd=tree, env=env,
                   check=True)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="1058e89")
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker))
        return
    revs = {k: subprocess.run(["git", "rev-parse", "--short", r], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip() for k, r in (("before", args.before), ("after", args.after))}
    with tempfile.TemporaryDirectory(prefix="house-proof-") as tmp:
        before, after = record(revs["before"], Path(tmp)), record(revs["after"], Path(tmp))
    pairs = list(zip(before["queries"], after["queries"]))
    differing = [{"setting": a["setting"], "query": a["query"], "before": a["answer"], "after": b["answer"]}
                 for a, b in pairs if a["digest"] != b["digest"] or a["rc"] != b["rc"]]
    metric_diffs = {k: [before["eval_metrics"].get(k), after["eval_metrics"].get(k)]
                    for k in set(before["eval_metrics"]) | set(after["eval_metrics"])
                    if before["eval_metrics"].get(k) != after["eval_metrics"].get(k)}
    payload = {
        "before": revs["before"], "after": revs["after"],
        "queries_compared": len(pairs), "queries_identical": len(pairs) - len(differing),
        "queries_failed": sum(1 for _, b in pairs if b["rc"] != 0), "differing": differing,
        "eval_metrics": after["eval_metrics"], "eval_metrics_identical": not metric_diffs,
        "eval_metric_diffs": metric_diffs, "settings": SETTINGS,
        "note": "query --json compared whole (timings, ids and timestamps stripped); eval = sample set, default "
                "config, answer cache off",
    }
    path = write_result("house_proof", payload)
    print(f"{payload['queries_identical']}/{len(pairs)} query outputs identical, eval metrics identical: "
          f"{payload['eval_metrics_identical']} -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
