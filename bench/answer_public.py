"""The offline answer's shipped support model (core/models/data/support_model.npz), fitted on PUBLIC data only, and its
rates on public report splits and on the sample corpus's sets (report-only), before and after.

Run from the repo root (nice: the machine is shared):
  nice -n 10 .venv/bin/python bench/answer_public.py collect   # public questions through the pipeline -> tables
  .venv/bin/python bench/answer.py collect --final && .venv/bin/python bench/answer.py collect --augment
                                                               # the sample sets' tables (report only, see below)
  nice -n 10 .venv/bin/python bench/answer_public.py cv        # settings by 5-fold CV on the public fitting split
  nice -n 10 .venv/bin/python bench/answer_public.py fit [settings]   # -> core/models/data/support_model.json
  nice -n 10 .venv/bin/python bench/answer_public.py report --before FILE  # -> bench/results/answer_public.json
  nice -n 10 .venv/bin/python bench/answer_public.py public [--out F]  # the shipped model on the public splits only

Fitting data (in ../shared/datasets, or RAG_DATASETS / --datasets), split before anything is fitted:
- xquad: XQuAD articles 40-47, English questions over the English paragraphs (bench/calibrate.py's set: one paragraph a
  document, the gold span is the paragraph's sentence holding the answer string, near-miss twins made by swapping a
  year / name / number for one the corpus does not hold). Split by paragraph: even position in corpus_en.jsonl fits,
  odd position reports (the same split bench/calibrate.py uses, so its report split stays unseen by the prior).
  Also SQuAD-2.0-style unanswerables: every question of a quarter of the paragraphs (position % 4 == 0: fitting;
  == 1: report) asked in a workspace whose corpus omits those paragraphs, kept only when no remaining paragraph holds
  its answer string.
- twowiki: 2WikiMultihopQA (bench/calibrate.py's builder, seed 0, TW_QUESTIONS questions without yes/no answers, a
  corpus cut of TW_DOCS passages: gold passages plus random distractors), with near-miss twins. Report split: every
  question bench/calibrate.py's default twowiki run asks (its 80 questions, seed 0); fitting split: the rest.
A sentence is correct for an answerable question when it lies in a gold passage and contains the answer string
(lower-cased, whitespace collapsed). The sample corpus's eval files are never fitted on: their rates are reported.
"""
from __future__ import annotations

import argparse
import itertools
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import ROOT, datasets_dir, machine_info, utc_now, write_result  # noqa: E402

import answer as A  # noqa: E402  (bench/answer.py: fit_model, decide, rates, choose_cut, attach_e5)
import calibrate as C  # noqa: E402  (bench/calibrate.py: the public sets and their near-miss twins)
from core.answer.support import (  # noqa: E402
    DEFAULT_MODEL_PATH,
    FEATURES,
    SupportModel,
    claim_spans,
    late_sentence_scorer,
    load_support_model,
    save_support_model,
    reading_texts,
    sentence_table,
)
from core.eval.answer import matches_gold  # noqa: E402
from core.eval.datasets import GoldenQuery, GoldenSet, passage_predoc  # noqa: E402
from core.eval.metrics import Gold  # noqa: E402
from train.provenance import provenance  # noqa: E402

CACHE = ROOT / "data" / "bench" / "answer_public_tables.pkl"
SAMPLE_CACHE = ROOT / "data" / "bench" / "answer_public_sample_tables.pkl"
E5_CACHE = ROOT / "data" / "bench" / "answer_public_e5.pkl"
DEFAULT_DB = ROOT / "data" / "bench" / "answer_public.duckdb"
SEED = 0
TW_QUESTIONS, TW_DOCS = 140, 400
CAL_TW_QUESTIONS, CAL_TW_DOCS = 80, 300  # bench/calibrate.py's defaults: its questions stay out of the fitting split
FIT_SPLITS = ("xquad_fit", "twowiki_fit")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def public_label(sentence: str, doc_id: str, answer: str, gold_docs: frozenset[str]) -> bool:
    """A correct sentence: in a gold passage and holding the answer string (lower-cased, whitespace collapsed)."""
    a = _norm(answer)
    return bool(a) and doc_id in gold_docs and a in _norm(sentence)


def _omitted(root: Path) -> tuple[GoldenSet, dict[str, str]]:
    """xquad questions asked where their gold paragraph is missing: unanswerable when no paragraph left holds the
    answer string. Paragraph position % 4 == 0 -> fitting split, == 1 -> report split (both omitted here)."""
    path = root / "xquad_crosslingual"
    docs = [(d["id"], d["title"], d["text"]) for d in C._jsonl(path / "corpus_en.jsonl")]
    pos = {d: i for i, (d, _, _) in enumerate(docs)}
    gone = {d for d, i in pos.items() if i % 4 in (0, 1)}
    kept = [x for x in docs if x[0] not in gone]
    kept_text = _norm("\n".join(x for _, _, x in kept))
    ws = "bench_pub_xquad_omit"
    queries, split = [], {}
    for q in C._jsonl(path / "questions.jsonl"):
        doc = q["gold"][0]
        if q["lang"] != "en" or doc not in gone or _norm(q["answer"]) in kept_text:
            continue
        qid = q["id"] + "-omit"
        queries.append(GoldenQuery(qid, q["question"], "unanswerable", False, (), "", len(queries) + 1))
        split[qid] = "xquad_fit" if pos[doc] % 4 == 0 else "xquad_report"
    predocs = lambda: [passage_predoc(d, d, t, x, "en", ws) for d, t, x in kept]  # noqa: E731
    return GoldenSet("xquad_en_omit", queries, unit="chunk", workspace=ws, doc_key="id", source="xquad_omit",
                     predocs=predocs), split


def public_sets(root: Path) -> list[tuple[str, GoldenSet, dict[str, str]]]:
    """(set name, golden set, question id -> split) for every public set; splits fixed before any fitting."""
    gs, split, _ = C.xquad(root, SEED)
    xq = {q: f"xquad_{s}" for q, s in split.items()}
    tw, tw_split, _ = C.twowiki(root, SEED, TW_QUESTIONS, TW_DOCS)
    cal, cal_split, _ = C.twowiki(root, SEED, CAL_TW_QUESTIONS, CAL_TW_DOCS)
    tw_sp = {q: "twowiki_report" if q in cal_split else "twowiki_fit" for q in tw_split}
    om, om_split = _omitted(root)
    return [("xquad", gs, xq), ("twowiki", tw, tw_sp), ("xquad_omit", om, om_split)]


def _sample_items() -> list[tuple[str, GoldenQuery, str, str]]:
    """bench/answer.py's sample-corpus questions (every set, its near-miss twins too), held-out sets first:
    (set, question, split, id) for the report only."""
    qs = A.load_questions(final=True) + A.augmented()
    first = ("test", "holdout5", "holdout6")
    qs.sort(key=lambda q: q["split"] not in first)
    return [(q["set"], GoldenQuery(q["id"], q["query"], q["type"], q["answerable"],
                                   tuple(Gold(text=g["span"]) for g in q["gold"]), q.get("answer", "")),
             q["split"], q["id"]) for q in qs]


def collect(source: str, db: Path, root: Path, limit: int | None) -> None:
    """One pipeline run per question (answer cache off; the answer stage off too: its decision is recomputed from
    the kept inputs by every model compared, and its e5 reads are the slow part), keeping what the answer reads."""
    from core.cascade.rerank import LateInteractionReranker
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.run import prepare
    from core.pipeline import run_query
    from core.store import Store

    db.parent.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"answer": {"mode": "extractive", "enabled": False},
                                         "answer_cache": {"enabled": False}})
    deps = build_deps(cfg, store=Store(str(db)))
    late = deps.reranker_for("late-interaction")[0]
    assert isinstance(late, LateInteractionReranker)
    if source == "public":
        work = []
        for set_name, gs, split in public_sets(root):
            ws = gs.workspace or ""
            resolved, notes = prepare(gs, deps, workspace=ws, config=cfg)
            print(f"{set_name}: {len(resolved.queries)} questions; {'; '.join(notes)}", file=sys.stderr)
            qs = resolved.queries[:limit] if limit else resolved.queries
            work += [(set_name, q, split[q.qid], ws) for q in qs]
    else:
        work = [(s, q, sp, "default") for s, q, sp, _ in _sample_items()][:limit]
    rows: list[dict[str, Any]] = []
    scorers: dict[str, Any] = {}
    t0 = time.perf_counter()
    for i, (set_name, q, split, ws) in enumerate(work, 1):
        scorer = scorers.setdefault(ws, late_sentence_scorer(late, workspace=ws))
        t = time.perf_counter()
        trace = run_query(q.query, cfg, deps, workspace=ws, log=False)
        ms = (time.perf_counter() - t) * 1000
        final = trace.final()
        cands = list(final.candidates)[: cfg.answer.max_chunks] if final else []
        blind = trace.query_lang not in (deps.embedder.languages or {trace.query_lang})
        titles = deps.store.corpus.document_titles([c.doc_id for c in cands], ws)
        full = {cid: ch.text for cid, ch in deps.store.corpus.chunks_by_id([c.chunk_id for c in cands],
                                                                            ws).items()}
        read = reading_texts(cands, full)
        li = None if blind or not cands else scorer(q.query, [(c.text, claim_spans(c.text)) for c in read])
        gold_docs = sorted({g.doc for g in q.gold if g.doc} | {d for g in q.gold for d in g.doc_ids})
        rows.append({"id": q.qid, "set": set_name, "split": split, "query": q.query, "type": q.qtype,
                     "answerable": q.answerable, "answer_str": q.reference, "gold_docs": gold_docs,
                     "gold": [g.text for g in q.gold], "ws": ws, "db": str(db), "blind": blind, "cands": cands,
                     "titles": titles, "li": li, "full": full, "ms": ms, "answer": None})
        print(f"\r[{i}/{len(work)}] {set_name} {ms:.0f} ms   ", end="", file=sys.stderr)
    print(file=sys.stderr)
    path = CACHE if source == "public" else SAMPLE_CACHE
    path.write_bytes(pickle.dumps({"rows": rows, "collected_at": utc_now(), "db": str(db),
                                   "seconds": round(time.perf_counter() - t0, 1), "source": source,
                                   "tw_questions": TW_QUESTIONS, "tw_docs": TW_DOCS, "seed": SEED}))
    print(f"collected {len(rows)} questions in {time.perf_counter() - t0:.0f} s -> {path}", file=sys.stderr)


def _vocabulary(db: str, ws: str) -> frozenset[str]:
    from core.config import PipelineConfig
    from core.retrieve.bm25 import BM25Params
    from core.retrieve.index import IndexCache
    from core.store import Store

    b = PipelineConfig().bm25
    store = Store(db, read_only=True)
    try:
        return IndexCache().bm25(store, ws, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem)).vocabulary()
    finally:
        store.close()


class LazyE5:
    """r['xenc'] read lazily: train.e5_scorer's cosine of the question and a sentence (pretrained, nothing
    fitted), computed the first time a model asks for that sentence (models read only their top-k sentences; e5 on
    every sentence of every question would take an hour on this machine) and kept in a shared cache."""

    def __init__(self, query: str, texts: list[str], cache: dict[tuple[str, str], float]) -> None:
        self.query, self.texts, self.cache = query, texts, cache

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, idx: Any) -> Any:
        from train.e5_scorer import score

        flat = np.atleast_1d(np.asarray(idx, dtype=int))
        need = sorted({int(i) for i in flat if (self.query, self.texts[int(i)]) not in self.cache})
        if need:
            for i, v in zip(need, score(self.query, [self.texts[i] for i in need])):
                self.cache[(self.query, self.texts[i])] = float(v)
        out = np.array([self.cache[(self.query, self.texts[int(i)])] for i in flat], dtype=np.float64)
        return out if np.ndim(idx) else out[0]


_E5: dict[tuple[str, str], float] = {}


def _with_e5(data: dict[str, Any]) -> None:
    from train.e5_scorer import pair_text

    if not _E5 and E5_CACHE.exists():
        _E5.update(pickle.loads(E5_CACHE.read_bytes()))
    for r in data["rows"]:
        r["xenc"] = LazyE5(r["query"], [pair_text(x.context, x.text) for x in r["table"].rows], _E5)


def save_e5() -> None:
    """Merge this run's e5 values into the cache file (two runs may share it)."""
    got = pickle.loads(E5_CACHE.read_bytes()) if E5_CACHE.exists() else {}
    got.update(_E5)
    E5_CACHE.write_bytes(pickle.dumps(got))


def _load(path: Path) -> dict[str, Any]:
    """Collected questions with their features recomputed (the workspace's own BM25 vocabulary, as the answer stage
    reads it) and labelled: public sets by public_label, sample sets by matches_gold on their gold spans."""
    data = pickle.loads(path.read_bytes())
    vocab = {k: _vocabulary(*k) for k in {(r["db"], r["ws"]) for r in data["rows"]}}
    for r in data["rows"]:
        r["table"] = sentence_table(r["query"], r["cands"], titles=r["titles"], li_scores=r["li"],
                                    vocabulary=vocab[(r["db"], r["ws"])], full_texts=r.get("full"))
        if data["source"] == "public":
            gd = frozenset(r["gold_docs"])
            r["labels"] = [r["answerable"] and public_label(x.text, x.doc_id, r["answer_str"], gd)
                           for x in r["table"].rows]
        else:
            r["labels"] = [matches_gold(x.text, r["gold"]) for x in r["table"].rows]
    _with_e5(data)
    return data


def load_public() -> dict[str, Any]:
    return _load(CACHE)


def load_sample() -> dict[str, Any]:
    return _load(SAMPLE_CACHE)


def fitting_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in data["rows"] if r["split"] in FIT_SPLITS and r["table"].rows]


# (l2, gate_l2, penalties, scorer_k, threshold_rule): the grid cv searches; margin 3 as before
GRID = list(itertools.product((3.0, 10.0), (1.0, 3.0), (0.0, 4.0), (0, 3), ("insample", "oof")))


def _fit(rows: list[dict[str, Any]], s: dict[str, Any]) -> SupportModel:
    p = s["penalty"]
    return A.fit_model(rows, s["l2"], s["gate_l2"], s["margin"], p, p, p, s["scorer_k"], 1.0, "e5",
                       s["threshold_rule"])


def cv_one(train: list[dict[str, Any]], s: dict[str, Any], folds: int = 5) -> dict[str, Any]:
    """Rates of models fitted on k-1 folds of the fitting split, scored on the left-out fold (a question's twin and
    omitted-paragraph version go with it)."""
    keys = sorted({A.question_key(r) for r in train})
    fold_of = {q: i % folds for i, q in enumerate(keys)}
    ans = ans_ok = un = un_ref = 0
    for k in range(folds):
        m = _fit([r for r in train if fold_of[A.question_key(r)] != k], s)
        for r in train:
            if fold_of[A.question_key(r)] != k:
                continue
            refused, ok, _ = A.decide(m, r, m.threshold)
            if r["answerable"]:
                ans, ans_ok = ans + 1, ans_ok + ok
            else:
                un, un_ref = un + 1, un_ref + refused
    a, u = round(ans_ok / max(ans, 1), 4), round(un_ref / max(un, 1), 4)
    return {**s, "answered_correctly": a, "refused_unanswerable": u, "answerable": ans, "unanswerable": un}


def settings(l2: float, gate_l2: float, penalty: float, scorer_k: int, rule: str) -> dict[str, Any]:
    return {"l2": l2, "gate_l2": gate_l2, "margin": 3.0, "penalty": penalty, "scorer_k": scorer_k,
            "threshold_rule": rule}


def crossval(grid: list[tuple[Any, ...]]) -> dict[str, Any]:
    data = load_public()
    train = fitting_rows(data)
    path = CACHE.with_suffix(".cv.json")
    # results of earlier cv runs on the same collected questions are kept: the choice is over every setting tried
    out = [r for r in (json.loads(path.read_text())["grid"] if path.exists() else [])
           if tuple(settings(*g) for g in grid).count({k: r[k] for k in settings(*grid[0])}) == 0]
    for g in grid:
        t = time.perf_counter()
        res = cv_one(train, settings(*g))
        res["seconds"] = round(time.perf_counter() - t, 1)
        out.append(res)
        print(json.dumps(res), file=sys.stderr)
    best = max(out, key=lambda r: (min(r["answered_correctly"], r["refused_unanswerable"]),
                                   r["answered_correctly"] + r["refused_unanswerable"]))
    res = {"grid": out, "chosen": best, "rule": "max of min(answered correctly, refused), then their sum"}
    path.write_text(json.dumps(res, indent=1))
    save_e5()
    print(json.dumps({"chosen": best}, indent=1))
    return res


def fit(s: dict[str, Any]) -> SupportModel:
    data = load_public()
    train = fitting_rows(data)
    m = _fit(train, s)
    ans = [r for r in train if r["answerable"]]
    by = {sp: sum(r["split"] == sp for r in train) for sp in FIT_SPLITS}
    meta = {"fitted_on": "public data only: the fitting splits of XQuAD articles 40-47 (English questions over "
                         "the English paragraphs, even-position paragraphs, with near-miss twins and "
                         "omitted-paragraph unanswerables) and of a 2WikiMultihopQA sample (questions outside "
                         "bench/calibrate.py's default run, with near-miss twins); bench/answer_public.py. "
                         "No sample-corpus question is fitted on.",
            "questions": len(train), "questions_by_split": by,
            "answerable": len(ans), "unanswerable": len(train) - len(ans),
            "ranker_sentences": int(sum(len(r["labels"]) for r in ans)),
            "gold_sentences": int(sum(sum(r["labels"]) for r in ans)),
            "l2": s["l2"], "gate_l2": s["gate_l2"], "pick_margin": s["margin"],
            "contradiction_penalty": s["penalty"], "kind_penalty": s["penalty"], "attr_penalty": s["penalty"],
            "scorer_k": s["scorer_k"], "scorer_l2": 1.0, "scorer_kind": "e5" if s["scorer_k"] else None,
            **({"scorer_values": "train.e5_scorer's cosines (pretrained, never fitted on these questions)"}
               if s["scorer_k"] else {}),
            "settings_chosen_by": "5-fold CV on the public fitting split (bench/answer_public.py cv)",
            "fitted_at": utc_now(), "script": "bench/answer_public.py fit",
            "threshold_rule": "max of min(answered-correctly, refused) on the fitting questions" + (
                " scored out of fold (5 folds, twins with their source)" if s["threshold_rule"] == "oof" else
                " scored by the model fitted on them")}
    model = SupportModel(FEATURES, m.coef, m.intercept, m.mean, m.scale, m.impute, m.threshold, meta, m.gate,
                         m.pick_margin, m.contradiction_penalty, m.kind_penalty, m.attr_penalty, m.scorer)
    save_support_model(model, DEFAULT_MODEL_PATH, provenance(
        "bench/answer_public.py fit", meta["fitted_on"], "fitting splits (see source)", "", **{"date": meta["fitted_at"]}))
    save_e5()
    print(json.dumps({"threshold": model.threshold, "training": A.rates(model, train, model.threshold)}, indent=1))
    return model


# sample-corpus splits (bench/answer.py's names), all report-only for the public model
SAMPLE_SPLITS = {"eval.jsonl odd ids": "fit", "eval_train.jsonl": "train", "eval_holdout.jsonl": "holdout",
                 "eval_holdout2.jsonl": "holdout2", "eval_holdout3.jsonl": "holdout3",
                 "eval_holdout4.jsonl": "holdout4", "eval.jsonl even ids": "test", "eval_holdout5.jsonl": "holdout5",
                 "eval_holdout6.jsonl": "holdout6", "near-miss twins (bench/answer.py)": "augment"}


def _model_from(given: str) -> SupportModel:
    path = Path(given)
    if not path.exists() and ":" in given:  # COMMIT:path, read from git (a .json before the fitted-linear record)
        blob = subprocess.run(["git", "show", given], cwd=ROOT, check=True, capture_output=True).stdout
        path = Path(tempfile.mkdtemp()) / f"support_model{Path(given).suffix}"
        path.write_bytes(blob)
    return load_support_model(path)


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("answerable", "unanswerable", "answered_correctly", "refused_unanswerable", "gold_sentence_retrieved",
            "answered_correctly_if_never_refused", "answered_wrong_sentence", "answerable_refused",
            "russian_answerable", "russian_answered_correctly")
    return {k: r[k] for k in keys}


def _outcome(model: SupportModel, r: dict[str, Any]) -> Any:
    from core.answer.calibration import Outcome

    refused0, ok0, support = A.decide(model, r, 0.0)
    # refused at cut 0 (nothing read, nothing picked): refused at every cut
    return Outcome(f"{r['set']}:{r['id']}", r["answerable"], -1.0 if refused0 else support, ok0 and not refused0,
                   True, any(r["labels"]))


def calibrated_on_sample(model: SupportModel, rows: list[dict[str, Any]], folds: int = 5) -> dict[str, Any]:
    """What the per-workspace calibration (core.answer.calibration.cross_validate, the product's own) makes of the
    public prior on the sample corpus: the refusal cut chosen by k-fold CV on the sample's dev questions (the sets the
    old model was fitted on, with their twins: a user's golden set), judged on the sets held out from both models."""
    from core.answer.calibration import cross_validate
    from core.answer.calibration import rates as cal_rates

    dev = [_outcome(model, r) for r in rows if r["split"] in A.FITTING_SPLITS or r["set"] == "augment"]
    held = [_outcome(model, r) for r in rows if r["split"] in ("test", "holdout5", "holdout6") and r["set"] != "augment"]
    fit = cross_validate(dev, prior=model.threshold, k=folds, seed=SEED)

    def brief(x: dict[str, Any]) -> dict[str, Any]:
        return {"answered_correctly": x["answered_correctly"], "refused_unanswerable": x["refused_correctly"],
                "answerable": x["answerable"], "unanswerable": x["unanswerable"]}

    return {"dev_questions": len(dev), "held_out_questions": len(held), "prior_threshold": model.threshold,
            "calibrated_threshold": round(fit.threshold, 4), "kept_prior": fit.figures.get("kept_prior"),
            "dev_cv": brief(fit.figures["cv"]), "dev_at_prior": brief(fit.figures["prior"]),
            "held_out_at_prior": brief(cal_rates(held, model.threshold)),
            "held_out_calibrated": brief(cal_rates(held, fit.threshold))}


def report(before: str, before_on_fit: bool = False) -> None:
    old, new = _model_from(before), load_support_model()
    pub = load_public()
    sample = load_sample()
    groups: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for sp in ("xquad_report", "twowiki_report", "xquad_fit", "twowiki_fit"):
        rows = [r for r in pub["rows"] if r["split"] == sp]
        kind = "public report split" if sp.endswith("report") else "public fitting split (the new model's own)"
        groups[sp] = (kind, rows)
        om = [r for r in rows if r["set"] == "xquad_omit"]
        if om:
            groups[f"{sp}: omitted-paragraph unanswerables only"] = (kind, om)
    for label, sp in SAMPLE_SPLITS.items():
        rows = [r for r in sample["rows"] if r["split"] == sp or (sp == "augment" and r["set"] == "augment")]
        if sp != "augment":
            rows = [r for r in rows if r["set"] != "augment"]
        if rows:
            fitted_old = sp in (*A.FITTING_SPLITS, "augment")
            groups[f"sample {label}"] = ("sample corpus, report only" + (
                " (the old model was fitted on it)" if fitted_old else " (held out from the old model too)"), rows)
    held = [r for r in sample["rows"] if r["split"] in ("test", "holdout5", "holdout6")]
    groups["sample held-out sets pooled (even ids, holdout5, holdout6)"] = (
        "sample corpus, report only (held out from the old model too)", held)
    allrows = [r for r in sample["rows"]]
    groups["sample every set pooled"] = ("sample corpus, report only", allrows)
    table = {}
    for label, (kind, rows) in groups.items():
        # the old model on the new one's fitting split: left out unless asked (its e5 reads are the slow part)
        skip = label.startswith(FIT_SPLITS) and not before_on_fit
        table[label] = {"kind": kind, "before": None if skip else _brief(A.rates(old, rows, old.threshold)),
                        "after": _brief(A.rates(new, rows, new.threshold))}
        print(label, table[label], file=sys.stderr, flush=True)
        save_e5()
    cal = calibrated_on_sample(new, sample["rows"])
    print(json.dumps(cal, indent=1), file=sys.stderr)
    cvres = CACHE.with_suffix(".cv.json")
    out = {"machine": machine_info(), "measured_at": utc_now(), "collected_at": pub["collected_at"],
           "collect_seconds": pub["seconds"], "sample_collected_at": sample["collected_at"],
           "before": {"file": before, "threshold": old.threshold, "fitted_on": old.meta.get("fitted_on")},
           "after": {"threshold": new.threshold, "meta": new.meta},
           "cv": json.loads(cvres.read_text())["chosen"] if cvres.exists() else None,
           # every setting cross-validated on the public fitting split (the choice: max of min of the two rates)
           "cv_grid": json.loads(cvres.read_text())["grid"] if cvres.exists() else None,
           "method": {"answered_correctly": "answerable questions not refused whose quoted sentences include a "
                                            "correct one (public sets: in a gold passage and holding the answer "
                                            "string; sample sets: bench/answer.py's matches_gold on gold spans)",
                      "refused_unanswerable": "unanswerable questions refused (near-miss twins, omitted-paragraph "
                                              "questions, hand-written unanswerables of the sample sets)",
                      "gold_sentence_retrieved": "the ceiling: answerable questions with a correct sentence among "
                                                 "those the answer read",
                      "how": "every figure from the collected features of one pipeline run per question (answer "
                             "cache off), decided as core.answer.stage does, by each model at its own threshold"},
           "splits": table, "sample_calibrated": cal}
    save_e5()
    path = write_result("answer_public", out)
    print(json.dumps({k: {"before": v["before"]["answered_correctly"], "before_ref": v["before"]["refused_unanswerable"],
                          "after": v["after"]["answered_correctly"], "after_ref": v["after"]["refused_unanswerable"],
                          "ceiling": v["after"]["gold_sentence_retrieved"], "n": v["after"]["answerable"]}
                      for k, v in table.items()}, indent=1))
    print(f"-> {path}")


def public_only(out: Path | None) -> None:
    """The shipped model's rates on the public splits alone (no sample tables needed): what a change to the answer
    stage's reading (its quotable units, its features) does to the public report splits, collected before and after."""
    model = load_support_model()
    pub = load_public()
    table = {}
    for sp in ("xquad_report", "twowiki_report", "xquad_fit", "twowiki_fit"):
        rows = [r for r in pub["rows"] if r["split"] == sp]
        table[sp] = _brief(A.rates(model, rows, model.threshold))
        print(sp, table[sp], flush=True)
    save_e5()
    path = write_result("answer_public_splits", {"machine": machine_info(), "measured_at": utc_now(),
                                                 "collected_at": pub["collected_at"],
                                                 "collect_seconds": pub["seconds"], "threshold": model.threshold,
                                                 "splits": table}, out)
    print(f"-> {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["collect", "cv", "fit", "report", "public"])
    ap.add_argument("--out", type=Path, default=None, help="public: the results file")
    ap.add_argument("--source", choices=["public", "sample"], default="public",
                    help="collect: the public sets, or bench/answer.py's sample-corpus sets (report only)")
    ap.add_argument("--db", default=None, help="collect: the bench database (public: data/bench/answer_public.duckdb; "
                                               "sample: bench/answer.py's, ingested by its collect)")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--l2", type=float, default=10.0)
    ap.add_argument("--gate-l2", type=float, default=1.0)
    ap.add_argument("--penalty", type=float, default=4.0)
    ap.add_argument("--scorer-k", type=int, default=3)
    ap.add_argument("--threshold-rule", choices=["insample", "oof"], default="insample")
    ap.add_argument("--grid", choices=["full", "no-scorer", "scorer"], default="full",
                    help="cv: every setting of GRID, those without the e5 scorer, or those with it")
    ap.add_argument("--before", default="651d7426fdd28f208d0459ec5b9c3bb7132b7ec7:core/models/data/support_model.json",
                    help="report: the model to compare with (file or COMMIT:path; default: the sample-fitted model "
                         "shipped before this bench)")
    ap.add_argument("--before-on-fit", action="store_true",
                    help="report: also the old model's rates on the public fitting split")
    a = ap.parse_args()
    if a.phase == "collect":
        db = a.db or str(DEFAULT_DB if a.source == "public" else A.DEFAULT_DB)
        collect(a.source, Path(db), datasets_dir(a.datasets), a.limit)
    elif a.phase == "cv":
        grid = GRID if a.grid == "full" else [g for g in GRID if (g[3] > 0) == (a.grid == "scorer")]
        crossval(grid)
    elif a.phase == "fit":
        fit(settings(a.l2, a.gate_l2, a.penalty, a.scorer_k, a.threshold_rule))
    elif a.phase == "public":
        public_only(a.out)
    else:
        report(a.before, a.before_on_fit)


if __name__ == "__main__":
    main()
