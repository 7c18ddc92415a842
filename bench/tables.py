"""Tables and the sql route on sample_corpus/tables (issue #29, item 5): offline answered-correctly of the template
translator on the forms it claims, what it declines, and routing accuracy text / table / mixed.

The four tables of sample_corpus/tables are ingested through the product's ingest (a bench-local hash embedder: the
text form's vectors play no part here) into an in-memory store; each question of sample_corpus/tables/_questions/questions.jsonl
(answers from hand-written reference SQL, written before the translator) is routed (core.route.sql.classify) and
translated (template_sql), and the query runs in the workspace's SQL sandbox. A result is correct when it equals the
known answer (numbers within 0.01, text case-insensitive; lists in order for rankings, as sets for filters; groups as
key -> value maps). The translator was read against the dev split; the test split (every third question) is reported
beside it, and the holdout set (questions_holdout.jsonl), written after the translator was tuned and never used to
tune it, as its own split.

Issue #47 adds two forms and two splits written before the code ran on them: `chain` (the column of the row a
ranking picks: answered when the one-shot query's last column, and the offline tool planner's last step, give the
known value; the planner's steps are reported apart) and `unknown_column` (a question naming a column the table lacks:
"said" when the sql stage's message to the user names the phrase and lists every column of the table, never a
query); holdout4 on sample_corpus/tables and `gapminder` on a public table (bench/sets/gapminder_2007.md).

    .venv/bin/python bench/tables.py            # -> bench/results/tables.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import CAPTION, ROOT, grid, met, num, pct, table, Table, write_result  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.route.agent import Budget  # noqa: E402
from core.route.sql import classify, sql_route, template_sql  # noqa: E402
from core.route.tools import Toolbox, plan_question, run_offline  # noqa: E402
from core.store import SqlRefused, Store  # noqa: E402

TABLES_DIR = ROOT / "sample_corpus" / "tables"
CLAIMED = ("count", "sum", "avg", "min", "max", "group", "topk", "filter", "chain")
SETS = ROOT / "bench" / "sets"


class _HashEmbedder:
    """Bench-local: deterministic vectors for the tables' text form (not measured here)."""

    model_id = "bench-hash-32"
    dim = 32
    languages = frozenset({"en"})

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            out[i] /= max(1e-9, float(np.linalg.norm(out[i])))
        return out


def load_store(files: Sequence[tuple[str, bytes]] | None = None) -> Store:
    store = Store()
    files = files or [(p.name, p.read_bytes()) for p in sorted(TABLES_DIR.iterdir()) if p.suffix in (".csv", ".tsv")]
    rep = ingest_files(files, store=store, embedder=_HashEmbedder(), config=PipelineConfig())  # type: ignore[arg-type]
    if rep.errors:
        raise SystemExit(f"ingest failed: {[r.message for r in rep.errors]}")
    return store


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 0.01 + 1e-6 * abs(float(b))
    return str(a).strip().lower() == str(b).strip().lower()


def result_value(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
    if len(rows) == 1 and len(rows[0]) == 1:
        return rows[0][0]
    if rows and len(rows[0]) == 1:
        return [r[0] for r in rows]
    return {str(r[0]): r[1] for r in rows}


def correct(got: Any, want: Any, form: str) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and set(map(str.lower, got)) == set(map(str.lower, want)) and all(
            _same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return False
        if form == "filter":
            return sorted(str(x).lower() for x in got) == sorted(str(x).lower() for x in want)
        return all(_same(g, w) for g, w in zip(got, want))
    if isinstance(got, list) and len(got) == 1:
        got = got[0]
    return not isinstance(got, (list, dict)) and _same(got, want)


def stub_plumbing(questions: Sequence[dict[str, Any]], store: Store) -> dict[str, Any]:
    """The LLM path's wiring through the loopback Messages stub (tests/anthropic_stub.py): the stub replies with each
    question's reference SQL as the JSON the schema asks for (every third reply malformed), so this counts
    round trips, sandbox runs and the template fallback; it says nothing of Claude's own SQL."""
    from core.models.llm import AnthropicLLM
    from core.route.sql import sql_route
    from tests.anthropic_stub import start_stub

    stub = start_stub()
    by_question = {q["question"]: q for q in questions if q["sql"]}
    calls = {"n": 0}

    def reply(body: dict[str, Any]) -> str:
        calls["n"] += 1
        text = json.dumps(body)
        q = next((v for k, v in by_question.items() if json.dumps(k)[1:-1] in text), None)
        if q is None or calls["n"] % 3 == 0:
            return "{not json"
        return json.dumps({"sql": q["sql"], "reason": "stub: the reference query"})

    stub.state.responder = reply
    try:
        llm = AnthropicLLM(stub.key, base_url=stub.base_url, sleep=lambda s: None, max_retries=0)
        tables = store.tables.list("default")
        box = store.tables.sandbox("default")
        out = Counter()
        for q in by_question.values():
            res = sql_route(q["question"], tables, lambda t, c: store.tables.values("default", t, c), box, llm=llm,
                            model="claude-haiku-4-5")
            got = result_value(res.result.columns, res.result.rows) if res.result else None
            if res.result is not None and q["form"] == "chain":  # the ranked row's column: the last one
                got = res.result.rows[0][-1] if res.result.rows else None
            ok = res.result is not None and correct(got, q["answer"], q["form"])
            out[f"{res.plan.translator}_{'correct' if ok else 'declined' if res.result is None else 'wrong'}"] += 1
        return {"questions": len(by_question), "llm_calls": calls["n"], "outcomes": dict(out)}
    finally:
        stub.stop()


def _planner(q: dict[str, Any], store: Store, box: Any, values: Any) -> dict[str, Any]:
    """The offline tool planner on a chain question (tables only): its form, the queries it ran and the outcome."""
    def search(query: str, collection: str) -> Any:
        raise RuntimeError("a table plan searched")

    tools = Toolbox(search=search, sql_run=lambda sql: box.run(sql), tables=store.tables.list("default"),
                    values=values)
    plan = plan_question(q["question"], tools)
    out = run_offline(q["question"], tools, budget=Budget(max_rounds=3), plan=plan)
    last = out_rows = None
    try:
        out_rows = box.run(out.sql[-1]).rows if out.sql else None
        last = out_rows[0][-1] if out_rows else None
    except (SqlRefused, RuntimeError):
        pass
    ok = last is not None and correct(last, q["answer"], q["form"]) and not out.stopped_early()
    return {"form": plan.form, "steps": len(out.sql), "sql": list(out.sql), "stopped": out.stopped_early(),
            "outcome": "correct" if ok else "declined" if not out.sql else "wrong"}


def evaluate(questions: Sequence[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    ws = "default"
    tables = store.tables.list(ws)
    box = store.tables.sandbox(ws)

    def values(t: str, c: str) -> list[Any]:
        return store.tables.values(ws, t, c)

    # The reference SQL must give the stated answers in the product's sandbox too (a check of the set itself).
    for q in questions:
        if q["sql"]:
            r = box.run(q["sql"])
            assert correct(result_value(r.columns, r.rows), q["answer"], q["form"]), (q["id"], r.rows, q["answer"])
    per_q = []
    for q in questions:
        route = classify(q["question"], tables, values)
        plan = template_sql(q["question"], tables, values) if q["sql"] or q["form"] == "unknown_column" else None
        outcome, got, extra = "n/a", None, {}
        if q["form"] == "unknown_column":
            said = sql_route(q["question"], tables, values, box, llm=None, model="").untranslated()
            table_cols = next((t.columns for t in tables if f"table {t.name}," in said), ())
            named = f"'{q['unknown']}'" in said and bool(table_cols) and all(f"{c} (" in said for c, _ in table_cols)
            outcome = "wrong" if plan is not None and plan.sql else "said" if named else "silent"
            extra = {"said": said}
        elif plan is not None:
            if not plan.sql:
                outcome = "declined"
            else:
                try:
                    r = box.run(plan.sql)
                    got = (r.rows[0][-1] if r.rows else None) if q["form"] == "chain" else result_value(r.columns,
                                                                                                         r.rows)
                    outcome = "correct" if got is not None and correct(got, q["answer"], q["form"]) else "wrong"
                except SqlRefused as exc:
                    outcome, got = "refused", str(exc)
        if q["form"] == "chain":
            extra = {"planner": _planner(q, store, box, values)}
        per_q.append({"id": q["id"], "split": q["split"], "form": q["form"], "route": q["route"],
                      "routed": route.kind, "route_reason": route.reason, "sql": plan.sql if plan else None,
                      "reason": plan.reason if plan else None, "outcome": outcome,
                      "got": got if not isinstance(got, float) else round(got, 4), "answer": q["answer"], **extra})
    return per_q

def measured_tables(d: dict[str, Any], file: str) -> list[Any]:
    """docs/measured.md: the template translator on the forms it claims, what it declines, text/table/mixed routing,
    the unknown-column and chain forms (issue #47 item 5)."""
    out: list[Any] = ["### Tables: the offline SQL translator and the text / table / mixed route", "", CAPTION, ""]
    summary = d.get("summary") or {}
    rows = []
    for split, s in summary.items():
        c, r = s.get("claimed_forms") or {}, s.get("routing") or {}
        jm = s.get("join_and_mixed_sql") or {}
        rows.append([split, num(s.get("questions")), num(c.get("questions")), num(c.get("correct")), num(c.get("wrong")),
                     num(c.get("declined")), pct((c.get("answered_correctly_pct") or 0) / 100) if c else "-",
                     f"{jm.get('correct', 0)} / {jm.get('wrong', 0)} / {jm.get('declined', 0)}",
                     pct((r.get("accuracy_pct") or 0) / 100) if r else "-"])
    if rows:
        out += [grid(["split", "questions", "on claimed forms", "correct", "wrong", "declined", "answered correctly",
                      "joins + mixed: correct / wrong / declined", "routing accuracy"], rows), ""]
    targets = d.get("targets") or {}
    held = summary.get(targets.get("split", "")) or {}
    if targets and held:
        acc = (held.get("claimed_forms") or {}).get("answered_correctly_pct")
        rt = (held.get("routing") or {}).get("accuracy_pct")
        out.append(f"On the `{targets['split']}` split (written before it was ever run): answered correctly "
                   f"**{num(acc, 1)}%** on the claimed forms (target ≥ {num(targets.get('answered_pct'), 0)}%: "
                   f"{met(acc is not None and acc >= targets.get('answered_pct', 0))}), routing **{num(rt, 1)}%** "
                   f"(target ≥ {num(targets.get('routing_pct'), 0)}%: "
                   f"{met(rt is not None and rt >= targets.get('routing_pct', 0))}).")
    stub = d.get("stub_plumbing") or {}
    if stub:
        out.append(f"With the loopback stub (plumbing only): {stub.get('questions')} questions, "
                   f"{stub.get('llm_calls')} LLM calls, outcomes "
                   + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted((stub.get("outcomes") or {}).items()))
                   + ".")
    for split, s in summary.items():
        if s.get("unknown_column") or s.get("planner_chain"):
            out.append(f"- `{split}`: a column no table has, {s.get('unknown_column')}; the tool planner on chains, "
                       f"{s.get('planner_chain')}.")
    return out + [f"- {n}" for n in d.get("notes") or []]


MEASURED_TABLES = Table(measured_tables, "Tables and SQL")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None, help="results file (default bench/results/tables.json)")
    args = ap.parse_args(argv)
    questions = [json.loads(line) for f in ("questions.jsonl", "questions_holdout.jsonl",
                                                          "questions_holdout2.jsonl", "questions_holdout3.jsonl",
                                                          "questions_holdout4.jsonl")
                 for line in (TABLES_DIR / "_questions" / f).read_text().splitlines() if line]
    store = load_store()
    public = [json.loads(line) for line in (SETS / "tables_gapminder.jsonl").read_text().splitlines() if line]
    per_q = evaluate(questions, store) + evaluate(public, load_store([("countries.csv", (SETS / "gapminder_2007.csv").read_bytes())]))
    tables = store.tables.list("default")
    summary: dict[str, Any] = {}
    rows_out = []
    for split in ("dev", "test", "holdout", "holdout2", "holdout3", "holdout4", "gapminder", "all"):
        sel = [p for p in per_q if split == "all" or p["split"] == split]
        claimed = [p for p in sel if p["form"] in CLAIMED]
        oc = Counter(p["outcome"] for p in claimed)
        ooc = Counter(p["outcome"] for p in sel if p["form"] in ("join", "mixed"))
        routed_ok = sum(p["route"] == p["routed"] for p in sel)
        confusion: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for p in sel:
            confusion[p["route"]][p["routed"]] += 1
        summary[split] = {
            "questions": len(sel),
            "claimed_forms": {"questions": len(claimed), **{k: oc.get(k, 0) for k in ("correct", "wrong", "declined",
                                                                                      "refused")},
                              "answered_correctly_pct": round(100 * oc.get("correct", 0) / max(1, len(claimed)), 1),
                              "correct_of_answered_pct": round(100 * oc.get("correct", 0)
                                                               / max(1, len(claimed) - oc.get("declined", 0)), 1)},
            "join_and_mixed_sql": {k: ooc.get(k, 0) for k in ("correct", "wrong", "declined", "refused")},
            "unknown_column": dict(Counter(p["outcome"] for p in sel if p["form"] == "unknown_column")),
            "planner_chain": dict(Counter(p["planner"]["outcome"] for p in sel if p["form"] == "chain")),
            "routing": {"correct": routed_ok, "accuracy_pct": round(100 * routed_ok / max(1, len(sel)), 1),
                        "confusion": {k: dict(v) for k, v in confusion.items()}},
        }
        s = summary[split]
        rows_out.append([split, len(sel), len(claimed), s["claimed_forms"]["correct"], s["claimed_forms"]["wrong"],
                         s["claimed_forms"]["declined"], s["claimed_forms"]["answered_correctly_pct"],
                         s["routing"]["accuracy_pct"]])
    by_form: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in per_q:
        by_form[p["form"]][p["outcome"]] += 1
    print(table(["split", "questions", "claimed", "correct", "wrong", "declined", "answered correctly %",
                 "routing %"], rows_out))
    print(table(["form", "outcomes"], [[f, dict(v)] for f, v in sorted(by_form.items())]))
    for p in per_q:
        if p["outcome"] in ("wrong", "refused") or p["route"] != p["routed"]:
            print(f"  {p['id']} [{p['split']}] {p['form']} route {p['route']}->{p['routed']} {p['outcome']}: "
                  f"{p['sql'] or p['reason']} -> {p['got']} (want {p['answer']})")
    print(table(["split", "unknown column (said / silent / wrong)", "planner on chains"],
                [[k, v["unknown_column"], v["planner_chain"]] for k, v in summary.items() if v["unknown_column"]
                 or v["planner_chain"]]))
    plumbing = stub_plumbing(questions, store)
    print(f"stub plumbing: {plumbing}")
    write_result("tables", {
        "what": "sample_corpus/tables: offline template translator answered-correctly on the forms it claims "
                f"({', '.join(CLAIMED)}), what it declines, and routing accuracy text / table / mixed "
                "(core.route.sql.classify). Dev split read while writing the translator; test split reported.",
        "parameters": {"questions": len(per_q), "tables": [t.schema_line() for t in tables],
                       "claimed_forms": list(CLAIMED)},
        "targets": {"split": "holdout2", "answered_pct": 85, "routing_pct": 90},
        "splits_not_tuned_on": ["holdout2", "holdout3", "holdout4", "gapminder"],
        "notes": [
            "Splits: dev and test (questions.jsonl) were both read while the translator was written; holdout "
            "(questions_holdout.jsonl) was written after it and first run on commit f9e8fe7 plus the uncommitted "
            "translator of the time: 80.0% answered correctly on its 20 claimed-form questions (16 correct, 1 wrong, 3 "
            "declined) and 92.9% routing (26 of 28) - console output of this bench, not a results file; the "
            "translator was then changed on its failures (implied aggregates for 'per X' questions, plural values, "
            "'how much', text cues), so it is seen too. holdout2 (questions_holdout2.jsonl) was written after those "
            "changes and committed before its first run: the unseen figure. holdout3 (questions_holdout3.jsonl, "
            "issue #47) holds eight 'which <column> has the highest/lowest average/total <measure>' questions with "
            "reference SQL, written after the translator's grouping-by-the-named-column form (written from the "
            "issue's example, 'which region has the highest average health') and committed before either ran on "
            "them: not tuned on.",
            "Issue #47 item 5: holdout4 (questions_holdout4.jsonl, commit 7ec58d9) and gapminder "
            "(bench/sets/tables_gapminder.jsonl, a public table, commit 84bf2ac) were committed before the chain and "
            "unknown-column code ran on them; the code was written from the issue's three examples. First runs: "
            "holdout4 chains 8/8 one-shot (planner 8/8), unknown columns 4/4 said, g01 wrong (a grouped ranking "
            "'lowest average maximum temperature' read 'maximum' as the ranking cue, a defect of the grouping form, "
            "fixed after that run in commit 4047d23, so holdout4's g01 is seen from there on); gapminder chains 5/5 (planner 5/5), grouped rankings 3/3, unknown columns 3/3. Neither "
            "split was tuned on.",
            "Claimed forms: count, sum, avg, min, max, group-by, top-k, filtered list, chain; joins and questions that "
            "need a relation the table has no column for are declined (an LLM writes joins), never answered.",
            "Small sets (20-32 claimed-form questions per split): one question moves a split's figure by 3-5 "
            "points.",
            "stub_plumbing: the LLM path through the loopback Messages stub, which answers each question with its "
            "reference SQL (every third reply malformed JSON, so the template translator stands in): wiring only, "
            "not Claude's SQL.",
        ],
        "stub_plumbing": plumbing,
        "summary": summary, "by_form": {k: dict(v) for k, v in by_form.items()}, "per_question": per_q,
    }, Path(args.out) if args.out else None, table=MEASURED_TABLES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
