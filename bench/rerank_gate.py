"""Why the late-interaction rerank lost to its own fused list, and which rerank setting keeps its gains without the
loss (issue #44 item 5), replayed offline from bench/rerank_dump.py's dumps: no model call.

    .venv/bin/python bench/rerank_gate.py data/bench/h44_dump*.json --name rerank_gate

Each dump holds, per question, the fused list the rerank read (50 candidates), every candidate's raw
late-interaction score against the question and (default path) against each query the transforms generated, and
the bm25 / dense lists. A variant is a rerank setting applied to those scores with the product's own functions
(core.cascade.rerank.blend_scores, keep_floor): 'read' scores each candidate by its best over the question and the
generated questions (rerank.read_queries), 'floor m' keeps the fused first m within the first 5 (rerank.keep_top),
'wX' the blend's weight of the fused order. Questions split by the parity of sha256(question id): the variant is
chosen on the 'choose' half (the sum over dumps of recall@5, codebase's chunk-level Pass@5 counted beside its
document recall), and reported on the 'report' half with paired bootstrap 95% intervals against the fused list and
against the previous setting (question only, floor 5).
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from _common import BOOT, CAPTION, Table, grid, num, write_result
from _common import paired_ci as _paired_ci

from core.cascade.rerank import blend_scores, keep_floor

K = 5
Order = Callable[[dict[str, Any]], list[int]]


def load(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = json.loads(Path(path).read_text())
    rows = []
    for r in d["rows"]:
        ids = [c for c, _, _ in r["lists"]["fused"]]
        doc_of = {c: dd for s in ("bm25", "dense", "fused") for c, dd, _ in r["lists"].get(s, [])}
        raw = np.array([v if (v := r["rerank"].get(c)) is not None else -1.0 for c in ids], dtype=np.float64)
        # HyDE's text is a guessed passage, not a question: the product does not read it (core/pipeline._transforms)
        asked = [x for name, qs in (r.get("subqueries") or {}).items() if name != "hyde" for x in qs]
        subs = [r["sub_scores"][x] for x in dict.fromkeys(asked) if x in (r.get("sub_scores") or {})]
        sub = np.array([[v.get(c, -1.0) for c in ids] for v in subs]) if subs else np.zeros((0, len(ids)))
        half = "choose" if int(hashlib.sha256(r["id"].encode()).hexdigest(), 16) % 2 == 0 else "report"
        rows.append({"id": r["id"], "gold": r["gold"], "gold_chunks": r.get("gold_chunks") or [], "ids": ids,
                     "doc_of": doc_of, "raw": raw, "sub": sub, "half": half, "route": r.get("route", "-"),
                     "found": [(r.get("found") or {}).get(c, {}) for c in ids],
                     "bm25": [c for c, _, _ in r["lists"].get("bm25", [])],
                     "dense": [c for c, _, _ in r["lists"].get("dense", [])]})
    return d, rows


def docs(order: Sequence[str], doc_of: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(doc_of[c] for c in order))


def recall(order: Sequence[str], gold: Sequence[str], k: int = K) -> float:
    return len(set(gold) & set(order[:k])) / len(gold) if gold else 0.0


def variant(read: bool, floor: int, weight: float = 1.0) -> Order:
    """The product's rerank order (combine='rrf', rrf_k 60) over one dumped question."""
    def order(r: dict[str, Any]) -> list[int]:
        scores = np.vstack([r["raw"], r["sub"]]).max(axis=0) if read and len(r["sub"]) else r["raw"]
        blended = blend_scores(scores, input_weight=weight, rrf_k=60)
        out = sorted(range(len(scores)), key=lambda i: (-blended[i], i))
        return keep_floor(out, floor, 5)[0] if floor else out
    return order


def per_question(rows: Sequence[dict[str, Any]], fn: Order | str, chunk: bool = False, k: int = K) -> list[float]:
    out = []
    for r in rows:
        ids = r[fn] if isinstance(fn, str) else [r["ids"][i] for i in fn(r)]
        out.append(recall(ids, r["gold_chunks"], k) if chunk else recall(docs(ids, r["doc_of"]), r["gold"], k))
    return out


def why_lost(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The gold documents the fused top 5 held and the question-only rerank (no floor) pushed out: how many, how
    many of them the question's own bm25 and dense lists ranked below 10 (found by a generated query), and their
    median rank by the question's own late-interaction score among the 50."""
    fn = variant(False, 0, 1.0)
    lost, generated, ranks = 0, 0, []
    for r in rows:
        fused, after = docs(r["ids"], r["doc_of"]), docs([r["ids"][i] for i in fn(r)], r["doc_of"])
        by_score = sorted(range(len(r["raw"])), key=lambda j: (-r["raw"][j], j))
        for gd in r["gold"]:
            if gd in fused[:K] and gd not in after[:K]:
                i = next(j for j, c in enumerate(r["ids"]) if r["doc_of"][c] == gd)
                lost += 1
                generated += min(r["found"][i].get("bm25", 999), r["found"][i].get("dense", 999)) > 10
                ranks.append(by_score.index(i) + 1)
    return {"lost": lost, "found_by_generated_queries": generated,
            "median_question_rank": float(np.median(ranks)) if ranks else None}




def paired_ci(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    return _paired_ci(a, b, counts=True)


GRID = {f"{'read' if read else 'question'} floor {m} w{w:g}": (read, m, w)
        for read in (False, True) for m in (0, 3, 5) for w in (0.5, 1.0, 2.0)}
PREVIOUS = "question floor 5 w1"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--name", default=None)
    args = ap.parse_args(argv)
    sets: dict[str, dict[str, Any]] = {}
    for path in args.dumps:
        d, rows = load(path)
        path_kind = "default" if any(len(r["sub"]) for r in rows) or "dumpdef" in Path(path).name else "cascade"
        sets[f"{d['set']} ({path_kind})"] = {"dump": path, "cut": d.get("cut"), "rows": rows,
                                             "chunk": any(r["gold_chunks"] for r in rows)}
    # choose: the grid's sum of recall@5 over every dump's choose half (codebase chunk level counted too)
    score = {}
    for name, (read, m, w) in GRID.items():
        fn = variant(read, m, w)
        total = 0.0
        for s in sets.values():
            half = [r for r in s["rows"] if r["half"] == "choose"]
            total += float(np.mean(per_question(half, fn)))
            if s["chunk"]:
                total += float(np.mean(per_question(half, fn, chunk=True)))
        score[name] = round(100 * total, 2)
    chosen = max(GRID, key=lambda n: (score[n], n == PREVIOUS))
    shown = {"bm25": "bm25", "dense": "dense", "fused (hybrid)": "ids", "previous (" + PREVIOUS + ")":
             variant(*GRID[PREVIOUS]), "question floor 0 w1": variant(False, 0, 1.0),
             "read floor 5 w1": variant(True, 5, 1.0), "chosen (" + chosen + ")": variant(*GRID[chosen])}
    out: dict[str, Any] = {"k": K, "bootstrap": BOOT, "split": "parity of sha256(question id)",
                           "choose_score": score, "chosen": chosen, "previous": PREVIOUS, "sets": {}}
    for name, s in sets.items():
        res: dict[str, Any] = {"dump": s["dump"], "cut": s["cut"], "questions": len(s["rows"])}
        for half in ("choose", "report"):
            rows = [r for r in s["rows"] if r["half"] == half]
            vals = {v: per_question(rows, fn) for v, fn in shown.items()}
            h: dict[str, Any] = {"questions": len(rows),
                                 "recall@5": {v: round(100 * float(np.mean(x)), 2) for v, x in vals.items()}}
            new, prev = vals["chosen (" + chosen + ")"], vals["previous (" + PREVIOUS + ")"]
            h["recall@1"] = {v: round(100 * float(np.mean(per_question(rows, fn, k=1))), 2) for v, fn in shown.items()}
            h["chosen_minus_fused"] = paired_ci(new, vals["fused (hybrid)"])
            h["chosen_minus_previous"] = paired_ci(new, prev)
            h["previous_minus_fused"] = paired_ci(prev, vals["fused (hybrid)"])
            best = max(("bm25", "dense", "fused (hybrid)"), key=lambda p: h["recall@5"][p])
            h["best_part"] = best
            h["chosen_minus_best_part"] = paired_ci(new, vals[best])
            if s["chunk"]:
                cv = {v: per_question(rows, fn, chunk=True) for v, fn in shown.items()}
                h["chunk_recall@5"] = {v: round(100 * float(np.mean(x)), 2) for v, x in cv.items()}
                h["chunk_chosen_minus_fused"] = paired_ci(cv["chosen (" + chosen + ")"], cv["fused (hybrid)"])
                h["chunk_chosen_minus_previous"] = paired_ci(cv["chosen (" + chosen + ")"],
                                                             cv["previous (" + PREVIOUS + ")"])
            routes = sorted({r["route"] for r in rows})
            if len(routes) > 1:
                h["by_route"] = {rt: {v: round(100 * float(np.mean(per_question([r for r in rows if r["route"] == rt],
                                                                                  fn))), 2)
                                      for v, fn in shown.items()} | {"n": sum(r["route"] == rt for r in rows)}
                                 for rt in routes}
            if any(r["found"][0] for r in rows if r["found"]):
                h["why_lost"] = why_lost(rows)
            res[half] = h
        out["sets"][name] = res
        rep = res["report"]
        print(f"{name}: report n={rep['questions']} " + " ".join(f"{k}={v}" for k, v in rep["recall@5"].items()))
        print(f"   chosen-fused {rep['chosen_minus_fused']} chosen-previous {rep['chosen_minus_previous']}"
              + (f"\n   chunk {rep['chunk_recall@5']} {rep['chunk_chosen_minus_previous']}" if "chunk_recall@5" in rep
                 else ""))
    print(f"chosen on the choose halves: {chosen} (score {score[chosen]}; previous {score[PREVIOUS]})")
    if args.name:
        write_result(args.name, out, table=MEASURED_RERANK_GATE)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def _ci(c: dict[str, Any] | None) -> str:
    return f"{num(c.get('diff'))} [{num(c.get('lo'))}, {num(c.get('hi'))}]" if c else "–"


def measured_rerank_gate(d: dict[str, Any], file: str) -> list[Any]:
    """The report half: recall@5 of the parts, the previous rerank setting and the chosen one, per dump."""
    sets = d.get("sets") or {}
    cols = list(next(iter(sets.values()))["report"]["recall@5"]) if sets else []
    out = ["### The rerank against its own fused list, replayed offline (report half)", "", CAPTION, "",
           "Document-level recall@5 (%) of each dumped question's lists and of rerank settings applied offline to "
           "the dumped late-interaction scores with the product's own blend and floor. *default*: the shipped "
           "route and transforms (the fused list holds the transforms' lists); *cascade*: router and transforms "
           "off. *read*: each candidate scored by its best over the question and the questions the transforms "
           "generated (`rerank.read_queries`); *floor m*: the fused first m stay within the first 5; *wX*: the "
           f"fused order's weight in the blend. Chosen on the other half ({d.get('split')}): **{d.get('chosen')}**."
           " Intervals: paired bootstrap 95%.", ""]
    rows = []
    for name, s in sets.items():
        rep = s.get("report") or {}
        rec = rep.get("recall@5") or {}
        rows.append([name, num(rep.get("questions")), *[num(rec.get(c)) for c in cols],
                     _ci(rep.get("chosen_minus_fused")), _ci(rep.get("chosen_minus_previous")),
                     _ci(rep.get("chosen_minus_best_part"))])
    out.append(grid(["dump", "questions", *cols, "chosen − fused", "chosen − previous", "chosen − best part"],
                    rows))
    chunk = [f"{name}: " + ", ".join(f"{k} {num(v)}" for k, v in s["report"]["chunk_recall@5"].items())
             + f"; chosen − previous {_ci(s['report'].get('chunk_chosen_minus_previous'))}"
             for name, s in sets.items() if (s.get("report") or {}).get("chunk_recall@5")]
    if chunk:
        out += ["", "Chunk level (the cookbook's Pass@5, exact gold chunk), report half: " + "; ".join(chunk)]
    why = [f"{name} {half} half: {w['lost']} pushed out, {w['found_by_generated_queries']} of them ranked below 10 "
           f"by the question's own bm25 and dense lists, median rank {num(w['median_question_rank'], 0)} of 50 by "
           "the question's own score"
           for name, s in sets.items() for half in ("choose", "report")
           if (w := (s.get(half) or {}).get("why_lost")) and w.get("lost")]
    if why:
        out += ["", "Why the question-only rerank lost (gold documents the fused top 5 held that it pushed out): "
                + "; ".join(why)]
    few = ("fused (hybrid)", f"previous ({d.get('previous')})", "question floor 0 w1", f"chosen ({d.get('chosen')})")
    routes = [f"{name} {rt} ({v.get('n')}): " + ", ".join(f"{k} {num(v.get(k))}" for k in few)
              for name, s in sets.items() for rt, v in ((s.get("report") or {}).get("by_route") or {}).items()
              if (v.get("n") or 0) >= 10 and name.endswith("(default)")]
    if routes:
        out += ["", "By the router's class (routed lists, classes of 10 questions or more), report half: "
                + "; ".join(routes)]
    ones = [f"{name}: " + ", ".join(f"{k} {num((s['report'].get('recall@1') or {}).get(k))}" for k in few)
            for name, s in sets.items() if (s.get("report") or {}).get("recall@1")]
    if ones:
        out += ["", "Recall@1, report half (xquad's 40 paragraphs leave nothing to gain at 5): " + "; ".join(ones)]
    out += ["", "Dumps: `bench/rerank_dump.py --set SET --config cascade|default --db data/bench/h44_SET.duckdb "
            "--out data/bench/h44_dump[def]_SET.json` (scifact: 300 claims over their documents and distractors to "
            "1,000 abstracts, as generalise_paired samples them)."]
    return out


MEASURED_RERANK_GATE = Table(measured_rerank_gate, "Compression cascade")


if __name__ == "__main__":
    raise SystemExit(main())
