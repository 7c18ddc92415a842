"""Fits the answer cache's learned second check and writes core/models/data/answer_cache_verifier.npz with its
provenance: `python -m train.cache_verifier` (`--out PATH` writes elsewhere; `--compare` prints how far the refit is
from the shipped file, coefficient by coefficient, and writes nothing unless --out is given).

Data: the dev split of the cache pairs (train/cache_pairs.py), without batch 6 (the labelled unscored SemEval pairs:
they choose the thresholds in bench/answer_cache.py, they do not fit the shipped verifier, see its PRODUCT_DEFAULT),
and only the pairs that break no hard rule (the product's guard(hard_only=True): the verifier is never asked about
the others). Features: core.answer.cache_verifier.pair_features over the bundled MiniLM on the ONNX runtime (the
product's default), one forward per question. Model: scikit-learn's logistic regression (C 0.1, lbfgs) on features
standardised over the training pairs (a constant feature keeps scale 1), threshold 0.5 (the cache's own P threshold is
a config value chosen by bench/answer_cache.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.answer.cache import features, guard
from core.answer.cache_verifier import MODEL_PATH, PairVerifier, encode_questions, load_verifier, pair_features, vetoed
from train.cache_pairs import EXTRA, EXTRA_DEV, is_dev, load_rows
from train.provenance import ROOT, provenance, sha256_text

RECIPE = "python -m train.cache_verifier"
C = 0.1  # L2 strength of the logistic regression (few, correlated features: keep it smooth)
MODEL_ID = "answer-cache-verifier-lr-v1"


def fit(X: np.ndarray, y: np.ndarray, rows: np.ndarray) -> PairVerifier:
    """The verifier fitted on the pairs `rows` of X (standardised over them)."""
    from sklearn.linear_model import LogisticRegression

    mean = X[rows].mean(axis=0)
    scale = X[rows].std(axis=0)
    scale[scale < 1e-6] = 1.0  # a constant feature (a rule no training pair breaks) stays inert
    lr = LogisticRegression(C=C, max_iter=5000).fit((X[rows] - mean) / scale, y[rows])
    return PairVerifier(mean.astype(np.float32), scale.astype(np.float32), lr.coef_[0].astype(np.float32),
                        float(lr.intercept_[0]), 0.5, MODEL_ID)


def out_of_fold(X: np.ndarray, y: np.ndarray, train: np.ndarray, dev: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """P(same) of every dev pair from a verifier fitted on the other folds (5 folds grouped by shared questions, so no
    question sits on both sides); 0 outside dev."""
    from sklearn.model_selection import GroupKFold

    oof = np.zeros(len(y))
    idx = np.flatnonzero(dev)
    for tr, te in GroupKFold(5).split(idx, groups=groups[idx]):
        oof[idx[te]] = fit(X, y, idx[tr][train[idx[tr]]]).prob(X[idx[te]])
    return oof


def pair_matrix(rows: Sequence[dict[str, Any]], embedder: Any) -> dict[str, Any]:
    """Per pair: the sentence cosine, the verifier's features, and whether no hard rule is broken (the pairs the
    product asks the verifier about). One forward per distinct question."""
    texts = sorted({t for r in rows for t in (r["a"], r["b"])})
    vecs, qtokens = encode_questions(embedder, texts)
    index = {t: i for i, t in enumerate(texts)}
    feats = {t: features(t) for t in texts}
    cos = np.array([float(vecs[index[r["a"]]] @ vecs[index[r["b"]]]) for r in rows])
    X = np.stack([pair_features(float(cos[i]), qtokens[index[r["a"]]], qtokens[index[r["b"]]], feats[r["a"]],
                                feats[r["b"]]) for i, r in enumerate(rows)])
    base = np.array([guard(r["a"], r["b"], covered_languages=embedder.languages, hard_only=True).ok for r in rows])
    assert not (base & vetoed(X)).any(), "the verifier's veto columns disagree with guard(hard_only=True)"
    return {"texts": texts, "index": index, "vecs": vecs, "qtokens": qtokens, "feats": feats, "cos": cos, "X": X,
            "base": base}


def training_mask(rows: Sequence[dict[str, Any]], base: np.ndarray) -> np.ndarray:
    """The shipped verifier's training pairs: dev, no hard rule broken, not batch 6."""
    dev = np.array([is_dev(r) for r in rows])
    return dev & base & np.array([r["origin"] != "semeval_dev" for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", help="the shared datasets folder (default: RAG_DATASETS, else ../shared/datasets)")
    ap.add_argument("--out", help=f"where to write the verifier (default {MODEL_PATH.relative_to(ROOT)})")
    ap.add_argument("--compare", action="store_true",
                    help="print the largest difference from the shipped file; writes nothing unless --out is given")
    args = ap.parse_args(argv)
    from core.models.embed import load_embedder

    rows = load_rows(args.datasets, EXTRA, EXTRA_DEV)
    embedder = load_embedder("bundled:all-MiniLM-L6-v2", runtime="onnx").embedder
    m = pair_matrix(rows, embedder)
    y = np.array([r["label"] == "pos" for r in rows], dtype=int)
    train = training_mask(rows, m["base"])
    model = fit(m["X"], y, np.flatnonzero(train))
    print(f"fitted on {int(train.sum())} dev pairs breaking no hard rule ({int(y[train].sum())} share an answer)")
    if args.compare:
        shipped = load_verifier(MODEL_PATH)
        assert shipped is not None, f"{MODEL_PATH} is missing"
        diff = {k: float(np.max(np.abs(np.asarray(getattr(model, k), np.float64)
                                       - np.asarray(getattr(shipped, k), np.float64))))
                for k in ("mean", "scale", "coef", "intercept")}
        print(json.dumps({"max_abs_difference_from_shipped": diff}))
    out = Path(args.out) if args.out else None if args.compare else MODEL_PATH
    if out is not None:
        sources = [str(p.relative_to(ROOT)) for p in (EXTRA, EXTRA_DEV)]
        digest = sha256_text("\n".join(json.dumps([r["a"], r["b"], r["label"]]) for r, t in zip(rows, train) if t))
        model.save(out, provenance(
            RECIPE, f"cache_pairs/pairs.jsonl, templated pairs, {', '.join(sources)}: {int(train.sum())} dev pairs "
                    "breaking no hard rule, batch 6 left out", "dev (train/cache_pairs.py)", digest,
            rows=str(int(train.sum()))), selected="vetoes+verifier(no batch 6)")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
