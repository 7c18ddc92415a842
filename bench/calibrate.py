"""Per-workspace calibration bench (issue #27 item 4): on questions the shipped support model was not fitted on, does
a refusal cut fitted by k-fold CV on the corpus's own questions beat the shipped prior on both rates?

    nice -n 10 .venv/bin/python bench/calibrate.py [--sets xquad,twowiki] [--twowiki-questions 80]
                                                   [--twowiki-docs 300] [--folds 5] [--db data/bench/calibrate.duckdb]

Sets (public, in ../shared/datasets). The shipped support model (the prior) is fitted by bench/answer_public.py on
these sets' *fit* splits (xquad: the same even-position paragraphs; twowiki: questions outside this bench's default
80), so the *report* splits below stay unseen by the prior as well as by the calibrated cut:
- xquad: XQuAD articles 40-47, English questions over the English paragraphs (one paragraph a document). Gold span:
  the paragraph's sentence that contains the dataset's answer string (questions whose answer is in no one sentence
  are left out).
- twowiki: 2WikiMultihopQA, a seeded subsample of questions and a corpus cut to their gold passages plus random
  distractors; gold span: a gold passage's sentence containing the answer (yes/no answers are left out).
Unanswerable questions are near-miss twins made here from the answerable ones, never read from the data: the same
question with one specific term swapped for one the corpus does not hold (a year or number shifted to a value no
passage states; a capitalised name replaced by an entity name from the other data set whose words no passage of
this corpus uses), each checked absent by searching the corpus text.

Split: questions are split by gold document (even / odd position of the document in the corpus file): the cut is
chosen by k-fold CV on the fit split only (its CV figures are reported too), and both the prior and the fitted cut
are reported on the other split. A twin goes with its source question. Each question runs once through the default
pipeline (offline answer, cut 0, answer cache off: core.eval.calibrate.measuring_config); rates at any cut follow
from its support, so prior and calibrated are judged on the very same answers.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, datasets_dir, machine_info, write_result

from core.answer.calibration import Outcome, cross_validate, rates
from core.answer.support import load_support_model, model_fingerprint
from core.config import PipelineConfig
from core.deps import build_deps
from core.eval.calibrate import collect_outcomes
from core.eval.datasets import GoldenQuery, GoldenSet, PreDoc, passage_predoc
from core.eval.metrics import Gold
from core.eval.run import prepare
from core.store import Store
from core.text import sentence_spans, tokenize

_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUM = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_UP = "A-ZÀ-ÖØ-ÞА-ЯЁ"
# a run of capitalised words that does not open the question: a name
_NAME = re.compile(rf"(?<=\s)([{_UP}][^\W\d_]+(?:[\s-]+(?:(?:of|de|von|van|the|der)\s+)?[{_UP}][^\W\d_]+)*)")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def gold_sentence(text: str, answer: str) -> str | None:
    a = answer.strip().lower()
    if not a:
        return None
    for s, e in sentence_spans(text):
        if a in text[s:e].lower():
            return " ".join(text[s:e].split())
    return None


def near_miss(question: str, corpus_text: str, vocab: set[str], names: list[str], rng: random.Random) -> str | None:
    """The question with one specific term swapped for one the corpus does not hold (checked by search), or None."""
    low = corpus_text.lower()
    m = _YEAR.search(question)
    if m:
        y = int(m.group(1))
        for d in (7, -7, 13, -13, 23, 31):
            if str(y + d) not in corpus_text:
                return question[: m.start()] + str(y + d) + question[m.end():]
    for m in _NAME.finditer(question):
        for cand in rng.sample(names, min(40, len(names))):
            words = set(tokenize(cand))
            if words and not (words & vocab) and cand.lower() not in low:
                return question[: m.start()] + cand + question[m.end():]
    m = _NUM.search(question)
    # a number of two digits or more (a count, a size), not a constant of the wording ('greater than 1')
    if m and m.group(0).isdigit() and len(m.group(0)) >= 2:
        n = int(m.group(0))
        for v in (n * 3 + 7, n * 7 + 11, n + 97):
            if str(v) not in corpus_text:
                return question[: m.start()] + str(v) + question[m.end():]
    return None


def build_set(name: str, docs: list[tuple[str, str, str]], items: list[tuple[str, str, str, str]],
              names: list[str], seed: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    """docs: (id, title, text); items: (qid, question, answer, gold doc id). Returns the set (answerable questions
    with a gold sentence + their near-miss twins), each question's split, and counts."""
    ws = f"bench_cal_{name}"
    rng = random.Random(seed)
    by_id = {d: (t, x) for d, t, x in docs}
    order = {d: i for i, (d, _, _) in enumerate(docs)}
    corpus_text = "\n".join(x for _, _, x in docs)
    vocab = set(tokenize(corpus_text))
    queries: list[GoldenQuery] = []
    split: dict[str, str] = {}
    counts = {"questions": len(items), "no_gold_sentence": 0, "twins": 0, "no_twin": 0}
    for qid, question, answer, doc in items:
        sent = gold_sentence(by_id[doc][1], answer) if doc in by_id else None
        if sent is None:
            counts["no_gold_sentence"] += 1
            continue
        part = "fit" if order[doc] % 2 == 0 else "report"
        queries.append(GoldenQuery(qid, question, "factoid", True, (Gold(doc=doc, text=sent, match="span"),), answer,
                                   len(queries) + 1))
        split[qid] = part
        twin = near_miss(question, corpus_text, vocab, names, rng)
        if twin is None or twin == question:
            counts["no_twin"] += 1
            continue
        queries.append(GoldenQuery(qid + "-nm", twin, "unanswerable", False, (), "", len(queries) + 1))
        split[qid + "-nm"] = part
        counts["twins"] += 1
    predocs = lambda: [passage_predoc(d, d, t, x, "en", ws) for d, t, x in docs]  # noqa: E731
    gs = GoldenSet(name, queries, unit="chunk", workspace=ws, doc_key="id", source=name, predocs=predocs)
    return gs, split, counts


def xquad(root: Path, seed: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    path = root / "xquad_crosslingual"
    docs = [(d["id"], d["title"], d["text"]) for d in _jsonl(path / "corpus_en.jsonl")]
    items = [(q["id"], q["question"], q["answer"], q["gold"][0]) for q in _jsonl(path / "questions.jsonl")
             if q["lang"] == "en"]
    names = sorted({d["title"] for d in _jsonl(root / "twowiki_multihop" / "corpus.jsonl")})
    return build_set("xquad_en", docs, items, names, seed)


def twowiki(root: Path, seed: int, n_questions: int, n_docs: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    path = root / "twowiki_multihop"
    corpus = _jsonl(path / "corpus.jsonl")
    by_title: dict[str, dict[str, Any]] = {}
    for d in corpus:
        by_title.setdefault(d["title"].strip(), d)
    qs = [q for q in _jsonl(path / "questions.jsonl") if q["answer"].lower() not in ("yes", "no")]
    rng = random.Random(seed)
    items, wanted = [], []
    for q in rng.sample(qs, len(qs)):
        golds = [by_title[t] for t in q["gold_titles"] if t in by_title]
        hit = next((g for g in golds if gold_sentence(f"{g['title']}\n{g['text']}", q["answer"])), None)
        if hit is None:
            continue
        items.append((q["id"], q["question"], q["answer"], str(hit["id"])))
        wanted += golds
        if len(items) >= n_questions:
            break
    keep = {str(g["id"]) for g in wanted}
    others = [d for d in corpus if str(d["id"]) not in keep]
    keep |= {str(d["id"]) for d in rng.sample(others, max(0, min(len(others), n_docs - len(keep))))}
    docs = [(str(d["id"]), d["title"].strip(), f"{d['title'].strip()}\n{d['text'].strip()}") for d in corpus
            if str(d["id"]) in keep]
    names = sorted({d["title"] for d in _jsonl(root / "xquad_crosslingual" / "corpus_en.jsonl")} |
                   {d["title"].replace("_", " ") for d in _jsonl(root / "xquad_crosslingual" / "corpus_en.jsonl")})
    # xquad's eight titles are too few to swap names from: entity names of twowiki passages outside this cut too
    names = sorted(set(names) | {d["title"].strip() for d in others})
    return build_set(f"twowiki_q{n_questions}_d{n_docs}_s{seed}", docs, items, names, seed)


def _r(x: Any) -> Any:
    return round(100 * x, 1) if isinstance(x, float) else x


def pct(r: dict[str, Any]) -> dict[str, Any]:
    return {k: _r(v) for k, v in r.items()}


def run_set(gs: GoldenSet, split: dict[str, str], counts: dict[str, Any], deps: Any, folds: int,
            seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    cfg = PipelineConfig()
    resolved, notes = prepare(gs, deps, workspace=gs.workspace or "", config=cfg)
    got = collect_outcomes(resolved, cfg, deps, workspace=gs.workspace or "",
                           progress=lambda d, t, m: print(f"\r{gs.name} [{d}/{t}] {m[:40]:<40}", end="",
                                                          file=sys.stderr))
    print(file=sys.stderr)
    fit_rows = [o for o in got.outcomes if split.get(o.qid) == "fit"]
    rep_rows = [o for o in got.outcomes if split.get(o.qid) == "report"]
    prior = load_support_model().threshold
    fit = cross_validate(fit_rows, prior=prior, k=folds, seed=seed)
    prior_rep, cal_rep = rates(rep_rows, prior), rates(rep_rows, fit.threshold)

    def beats(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return (a["answered_correctly_retrieved"] or 0) > (b["answered_correctly_retrieved"] or 0) and \
            (a["refused_correctly"] or 0) > (b["refused_correctly"] or 0)

    return {
        "set": gs.name, "workspace": gs.workspace, "counts": counts, "notes": notes, "skipped": got.skipped,
        "questions": {"fit": len(fit_rows), "report": len(rep_rows)},
        "prior_threshold": round(prior, 4), "calibrated_threshold": round(fit.threshold, 4), "folds": fit.folds,
        "fit_split_cv": {"calibrated": pct(fit.figures["cv"]), "prior": pct(fit.figures["prior"]),
                         "fold_thresholds": fit.figures["fold_thresholds"]},
        "report_split": {"prior": pct(prior_rep), "calibrated": pct(cal_rep)},
        "calibrated_beats_prior_on_both": beats(cal_rep, prior_rep),
        "goal_met": (cal_rep["refused_correctly"] or 0) >= 0.8 and (cal_rep["answered_correctly_retrieved"] or 0) >= 0.7,
        # the ceilings, as bench/answer.py reports them: answered correctly if no question were refused (no cut
        # can answer more), and the share of answerable questions whose gold sentence the answer read at all
        "ceiling_never_refusing": pct(rates(rep_rows, 0.0)),
        "gold_sentence_retrieved": _r(cal_rep["sentence_retrieved"] / max(1, cal_rep["answerable"])),
        "per_question": [{"qid": o.qid, "split": split.get(o.qid), "answerable": o.answerable,
                          "support": round(o.support, 4), "correct": o.correct, "retrieved": o.retrieved,
                          "sentence_retrieved": o.sentence_retrieved} for o in got.outcomes],
        "best_possible_on_report": _best(rep_rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _best(rows: list[Outcome]) -> dict[str, Any]:
    """The ceiling of a single cut on the report split itself (chosen on it: not a result, a bound)."""
    sup = sorted({o.support for o in rows})
    best = max(((c, rates(rows, c)) for c in [0.0] + [(a + b) / 2 for a, b in zip(sup, sup[1:])] + [1.01]),
               key=lambda cr: ((cr[1]["answered_correctly_retrieved"] or 0) + (cr[1]["refused_correctly"] or 0)))
    return {"threshold": round(best[0], 4), **pct(best[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="xquad,twowiki")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--twowiki-questions", type=int, default=80)
    ap.add_argument("--twowiki-docs", type=int, default=300)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--db", default=str(ROOT / "data" / "bench" / "calibrate.duckdb"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = datasets_dir(args.datasets)
    store = Store(args.db)
    deps = build_deps(PipelineConfig(), store=store)
    out: dict[str, Any] = {"machine": machine_info(), "support_model": model_fingerprint(), "sets": {}}
    for name in args.sets.split(","):
        gs, split, counts = (xquad(root, args.seed) if name == "xquad" else
                             twowiki(root, args.seed, args.twowiki_questions, args.twowiki_docs))
        res = run_set(gs, split, counts, deps, args.folds, args.seed)
        out["sets"][gs.name] = res
        print(json.dumps({k: res[k] for k in ("set", "prior_threshold", "calibrated_threshold", "report_split",
                                              "calibrated_beats_prior_on_both", "goal_met")}, indent=1),
              file=sys.stderr)
    path = write_result("calibration", out, Path(args.out) if args.out else None)
    print(path)


if __name__ == "__main__":
    main()
