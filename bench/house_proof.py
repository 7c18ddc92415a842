"""Proof that a refactor changed no behaviour: the same `query --json` and the same evaluation metrics at two commits.

Each commit is exported (git archive) into a scratch folder and run there in a fresh process, from its own code:
ingest the sample corpus into a fresh database, run `query --json` for fixed questions under several settings (the
answer cache off, so each question is computed), then `eval --dataset sample --json`. Timings, ids and timestamps are
stripped; everything else is compared. The questions are the first 14 of sample_corpus/eval.jsonl and six written
for the routes a refactor is most likely to break (Russian, greeting, global, short lookup, negation, two facts).

  .venv/bin/python bench/house_proof.py --before 1058e89 --after HEAD      -> bench/results/house_proof.json

`--contract` (issue #41's stage contract) adds a second workspace (the sample documents and tables, a graph and a
RAPTOR tree built) whose queries run with graph and RAPTOR on and the answer cache on, each twice (the second a cache
hit where the first was stored), and the table questions also with the agent's tools on: every path (retrieval,
chitchat, out-of-scope, answer-cache hit, SQL, tools). There a refactor may add skipped stages: the comparison drops
from the later output the skipped stages the earlier one did not record (and lists them), then compares the rest
(the stages that ran, in order; the skipped ones by name).

  .venv/bin/python bench/house_proof.py --contract --before 93581a0 --after HEAD --name stage_contract_proof
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
# The contract workspace: graph + RAPTOR on, answer cache on; the table questions of sample_corpus/tables (a count,
# a sum, a mixed question) beside documents questions and the route questions above.
CONTRACT_SETTINGS: dict[str, list[str]] = {
    "graph+raptor": ["graph.enabled=true", "graph.mode=both", "raptor.enabled=true"],
    "graph+raptor agent": ["graph.enabled=true", "graph.mode=both", "raptor.enabled=true", "agent.enabled=true"],
}
TOOLS_SETTING = ["graph.enabled=true", "graph.mode=both", "raptor.enabled=true", "agent.tools=on"]
TABLE_QUESTIONS = ["How many error codes are there in total?", "How many clients do we have?",
                   "What did Ural-Steppe Agro bring in, in total revenue?",
                   "What is the first action for the Meridian error code with the most tickets in 2024?"]
# Keys whose values are clocks or fresh ids: never equal across two runs, whatever the code does.
VOLATILE = re.compile(r"(^|_)(ms|s|seconds|latency|latency_ms|created_at|stored_at|run_id|eval_id|at)$")
# A clock inside a text: an answer served from the cache says when it was stored ("stored at 2026-12-06 17:16:31").
CLOCK = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?")


def unclock(x: Any) -> Any:
    """`x` with every clock inside its texts replaced by '<clock>' (compared outputs only; the records keep them)."""
    if isinstance(x, dict):
        return {k: unclock(v) for k, v in x.items()}
    if isinstance(x, list):
        return [unclock(v) for v in x]
    return CLOCK.sub("<clock>", x) if isinstance(x, str) else x


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


def contract_rows(run: Any, db2: Path, questions: list[str]) -> list[dict[str, Any]]:
    """The contract workspace's rows (see the module docstring); each keeps its whole stripped output ("body")."""
    db = str(db2)
    run(["ingest", "sample_corpus/docs", "sample_corpus/tables", "--db", db, "--json"])
    on = [a for s in CONTRACT_SETTINGS["graph+raptor"] for a in ("--set", s)]
    run(["graph", "build", "--db", db, "--json", *on])
    run(["raptor", "build", "--db", db, "--json", *on])
    asked = questions[:4] + EXTRA + TABLE_QUESTIONS
    rows = []
    plan = [(name, sets, q, n) for name, sets in CONTRACT_SETTINGS.items() for q in asked for n in (1, 2)]
    plan += [("graph+raptor tools", TOOLS_SETTING, q, 1) for q in TABLE_QUESTIONS + EXTRA[1:3]]
    for name, sets, q, n in plan:
        code, text = run(["query", q, "--db", db, "--json", *[a for s in sets for a in ("--set", s)]])
        body = strip(json.loads(text)) if code == 0 else text
        answer = body.get("answer") if isinstance(body, dict) else None
        rows.append({"setting": f"contract: {name}" + (" (again)" if n == 2 else ""), "query": q, "rc": code,
                     "digest": digest(body), "body": body,
                     "answer": (answer.get("text") if isinstance(answer, dict) else str(answer))[:200]})
    return rows


def worker(out: Path, contract: bool = False) -> None:
    """Runs inside the exported tree (cwd and sys.path): its own core.cli, its own sample corpus."""
    # _common put this repository's root first on sys.path: the exported tree must come before it, or every commit
    # would run the working tree's code.
    sys.path.insert(0, os.getcwd())
    import core

    here = Path(core.__file__).resolve()
    assert here.is_relative_to(Path.cwd().resolve()), f"core imported from {here}, not from the exported tree"
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
                         "answer": (answer.get("text") if isinstance(answer, dict) else str(answer))[:200],
                         **({"body": body} if contract else {})})
    if contract:
        rows += contract_rows(run, out.parent / "contract.duckdb", questions)
    code, text = run(["eval", "--dataset", "sample", "--db", db, "--json", "--set", "answer_cache.enabled=false"])
    metrics = json.loads(text)["runs"][0]["metrics"] if code == 0 else {}
    out.write_text(json.dumps({"ingest_rc": rc, "queries": rows, "eval_metrics": strip(metrics)}, ensure_ascii=False))


def canonical(before: Any, after: Any, added: list[str]) -> tuple[Any, Any]:
    """Both outputs with the stages only `after` records as skipped dropped from it (their names and reasons go to
    `added`), the stages that ran kept in order and the skipped ones keyed by name (a skipped stage may move to its
    place in the stage list); a served answer's stored trace alike."""
    if not isinstance(before, dict) or not isinstance(after, dict) or "stages" not in after:
        return before, after
    had = {s["stage"] for s in before.get("stages", [])}
    kept = []
    for s in after["stages"]:
        if s.get("skipped") and s["stage"] not in had:
            added.append(f"{s['stage']}: {s.get('skip_reason')}")
        else:
            kept.append(s)

    def shape(body: dict[str, Any], stages: list[dict[str, Any]]) -> dict[str, Any]:
        return {**body, "stages": {"ran": [s for s in stages if not s.get("skipped")],
                                   "skipped": {s["stage"]: s for s in stages if s.get("skipped")}}}

    b, a = shape(before, before.get("stages", [])), shape(after, kept)
    # The CLI's per-stage counters list every stage too: the added (skipped, all-zero) rows go with their stages.
    for body in (b, a):
        rows = (body.get("counters") or {}).get("stages")
        if isinstance(rows, list):
            ran = [r for r in rows if r.get("ran")]
            body["counters"] = {**body["counters"], "stages": {"ran": ran, "skipped": sorted(
                r["stage"] for r in rows if not r.get("ran") and (body is b or r["stage"] in had))}}
    if "stored_trace" in before or "stored_trace" in after:
        b["stored_trace"], a["stored_trace"] = canonical(before.get("stored_trace"), after.get("stored_trace"),
                                                         [])
    return b, a


def record(rev: str, scratch: Path, contract: bool = False) -> dict[str, Any]:
    tree = scratch / rev.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    out = tree / "proof.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    env.pop("ANTHROPIC_API_KEY", None)
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(out),
                    *(["--contract"] if contract else [])], cwd=tree, env=env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="1058e89")
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--contract", action="store_true", help="add the contract workspace (see above)")
    ap.add_argument("--keep", help="a folder that keeps each commit's record (proof-<commit>.json) and reuses it")
    ap.add_argument("--name", default="house_proof", help="the results file's name")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker), args.contract)
        return
    revs = {k: subprocess.run(["git", "rev-parse", "--short", r], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip() for k, r in (("before", args.before), ("after", args.after))}
    def kept(rev: str, tmp: Path) -> dict[str, Any]:
        path = Path(args.keep) / f"proof-{rev}{'-contract' if args.contract else ''}.json" if args.keep else None
        if path is not None and path.exists():
            return json.loads(path.read_text())
        got = record(rev, tmp, args.contract)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(got, ensure_ascii=False))
        return got

    with tempfile.TemporaryDirectory(prefix="house-proof-") as tmp:
        before = kept(revs["before"], Path(tmp) / "before")
        after = kept(revs["after"], Path(tmp) / "after")
    pairs = list(zip(before["queries"], after["queries"]))
    added: dict[str, set[str]] = {}
    differing = []
    for a, b in pairs:
        if args.contract:
            new: list[str] = []
            x, y = canonical(a.get("body"), b.get("body"), new)
            added.setdefault(a["setting"], set()).update(new)
            same = digest(unclock(x)) == digest(unclock(y)) and a["rc"] == b["rc"]
        else:
            same = a["digest"] == b["digest"] and a["rc"] == b["rc"]
        if not same:
            differing.append({"setting": a["setting"], "query": a["query"], "before": a["answer"] if "answer" in a
                              else "", "after": b["answer"] if "answer" in b else ""})
    metric_diffs = {k: [before["eval_metrics"].get(k), after["eval_metrics"].get(k)]
                    for k in set(before["eval_metrics"]) | set(after["eval_metrics"])
                    if before["eval_metrics"].get(k) != after["eval_metrics"].get(k)}
    payload = {
        "before": revs["before"], "after": revs["after"],
        "queries_compared": len(pairs), "queries_identical": len(pairs) - len(differing),
        "queries_failed": sum(1 for _, b in pairs if b["rc"] != 0), "differing": differing,
        "eval_metrics": after["eval_metrics"], "eval_metrics_identical": not metric_diffs,
        "eval_metric_diffs": metric_diffs, "settings": SETTINGS,
        **({"contract_settings": {**CONTRACT_SETTINGS, "graph+raptor tools": TOOLS_SETTING},
            "skipped_stages_added": {k: sorted(v) for k, v in added.items() if v},
            "queries_identical_whole": sum(1 for a, b in pairs if a["digest"] == b["digest"]),
            "queries_identical_but_a_clock": sum(1 for a, b in pairs if a["digest"] != b["digest"] and digest(
                unclock(a.get("body"))) == digest(unclock(b.get("body"))))}
           if args.contract else {}),
        "note": "query --json compared whole (timings, ids and timestamps stripped, clocks inside texts masked: "
                "a served answer's 'stored at' time); eval = sample set, default config, answer cache off",
    }
    path = write_result(args.name, payload)
    print(f"{payload['queries_identical']}/{len(pairs)} query outputs identical, eval metrics identical: "
          f"{payload['eval_metrics_identical']} -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
