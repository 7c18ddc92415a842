"""Fits the offline router and writes core/models/data/router_model.npz with its provenance: `python -m train.route`
(add --data to rebuild train/sets/routing.jsonl from the shared datasets first, --compare OLD.npz to score a previous
model against the new one on the test split and write bench/results/router_refit.json).

TF-IDF over words (1-2) and characters (2-5, within words) plus the corpus-coverage feature, and a multinomial
logistic regression fitted with scikit-learn on the train split of train/sets/routing.jsonl (public data only).
Queries never use scikit-learn: the record written here is applied with numpy by core.route.router.ShippedRouter
(tests/test_router.py checks the two agree on every test-split question).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.models.fitted import FittedLinear, save_fitted
from core.route.router import (
    CHAR_NGRAMS,
    CLASSES,
    MODEL_FILE,
    ROUTING_FILE,
    WORD_NGRAMS,
    WORD_PATTERN,
    Example,
    ShippedRouter,
    coverage_features,
    feature_names,
    load_examples,
    macro_f1,
    trained_router,
)
from train.provenance import ROOT, provenance, sha256_text

RECIPE = "python -m train.route"


class OfflineRouter:
    """The fitting side (scikit-learn); `record` is what it learnt, as the shipped file holds it."""

    def __init__(self, examples: Sequence[Example], *, alpha: float = 1e-4, epochs: int = 50) -> None:
        from scipy.sparse import csr_matrix, hstack
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import SGDClassifier

        self._hstack, self._csr = hstack, csr_matrix
        self.words = TfidfVectorizer(analyzer="word", ngram_range=WORD_NGRAMS, sublinear_tf=True, lowercase=True,
                                     token_pattern=WORD_PATTERN)
        self.chars = TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS, sublinear_tf=True, lowercase=True,
                                     min_df=2)
        texts = [e.text for e in examples]
        xw = self.words.fit_transform(texts)
        xc = self.chars.fit_transform(texts)
        extra = np.vstack([coverage_features(e.coverage) for e in examples])
        x = hstack([xw, xc, csr_matrix(extra)]).tocsr()
        # Logistic loss by SGD with a fixed seed and epoch count: deterministic, and much faster than lbfgs here at
        # the same cross-validated macro-F1 (bench/route.py).
        self.model = SGDClassifier(loss="log_loss", alpha=alpha, class_weight="balanced", max_iter=epochs, tol=None,
                                   random_state=0)
        self.model.fit(x, [e.label for e in examples])
        self.classes: tuple[str, ...] = tuple(self.model.classes_)

    def _x(self, texts: Sequence[str], coverages: Sequence[float]) -> Any:
        extra = np.vstack([coverage_features(c) for c in coverages])
        return self._hstack([self.words.transform(texts), self.chars.transform(texts), self._csr(extra)]).tocsr()

    def probabilities(self, texts: Sequence[str], coverages: Sequence[float]) -> np.ndarray:
        return self.model.predict_proba(self._x(texts, coverages))

    def record(self, prov: dict[str, str]) -> FittedLinear:
        """The fitted vocabularies (as feature names), idf weights and coefficients (float64, so the shipped model's
        numbers are the fitted ones to rounding)."""
        names = feature_names(self.words.get_feature_names_out().tolist(), self.chars.get_feature_names_out().tolist())
        return FittedLinear(tuple(names), np.ascontiguousarray(self.model.coef_.T), np.asarray(self.model.intercept_),
                            classes=self.classes, provenance=prov,
                            arrays={"word_idf": self.words.idf_, "char_idf": self.chars.idf_})


def training_sha(path: Path = ROUTING_FILE) -> str:
    """sha256 of the train split's rows: the shipped model records it, so a changed data file shows it is stale."""
    rows = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["split"] == "train"]
    return sha256_text("\n".join(rows))


def fit_and_ship(path: Path = MODEL_FILE) -> OfflineRouter:
    """Fit on the train split and write the record with its provenance."""
    train = load_examples("train")
    model = OfflineRouter(train)
    sources = Counter(json.loads(x)["source"] for x in ROUTING_FILE.read_text(encoding="utf-8").splitlines()
                      if x.strip() and json.loads(x)["split"] == "train")
    prov = provenance(RECIPE, f"{ROUTING_FILE.relative_to(ROOT)} (" + ", ".join(
        f"{k} {v}" for k, v in sorted(sources.items())) + ")", "train", training_sha(), rows=str(len(train)))
    save_fitted(path, model.record(prov))
    trained_router.cache_clear()
    return model


def legacy_router(path: Path) -> ShippedRouter:
    """A router model in the format shipped before the fitted-linear record (separate term arrays, no provenance),
    read to score it against a refit."""
    with np.load(path, allow_pickle=False) as z:
        names = feature_names(z["word_terms"].tolist(), z["char_terms"].tolist())
        rec = FittedLinear(tuple(names), z["coef"], z["intercept"], classes=tuple(str(c) for c in z["classes"]),
                           provenance={"source_sha": str(z["source_sha"])},
                           arrays={"word_idf": z["word_idf"], "char_idf": z["char_idf"]})
    return ShippedRouter(model=rec)


def scores(router: ShippedRouter, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy and macro-F1 of the classifier's best class, overall and per source."""
    probs = router.probabilities([r["text"] for r in rows], [float(r["coverage"]) for r in rows])
    best = [router.classes[int(i)] for i in probs.argmax(axis=1)]
    ok = [b == r["label"] for b, r in zip(best, rows)]
    by_source: dict[str, list[bool]] = {}
    for r, k in zip(rows, ok):
        by_source.setdefault(r["source"], []).append(k)
    return {"n": len(rows), "accuracy": round(sum(ok) / len(ok), 4),
            "macro_f1": round(macro_f1([r["label"] for r in rows], best, CLASSES), 4),
            "accuracy_by_source": {s: [round(sum(v) / len(v), 4), len(v)] for s, v in sorted(by_source.items())},
            "predicted": best}


def compare(old_npz: Path, old_routing: Path | None) -> Path:
    """Score the previous model and the refit on the test split; with the previous routing file, also on the rows
    in both test splits (never seen by either fit: the fair comparison)."""
    sys.path.insert(0, str(ROOT))
    from bench._common import Table, write_result

    rows = [json.loads(x) for x in ROUTING_FILE.read_text(encoding="utf-8").splitlines() if x.strip()]
    test = [r for r in rows if r["split"] == "test"]
    old, new = legacy_router(old_npz), ShippedRouter()
    out: dict[str, Any] = {"old_model": str(old_npz), "new_model": str(MODEL_FILE.relative_to(ROOT)),
                           "new_provenance": dict(new.model.provenance)}
    sets = {"test": test}
    if old_routing is not None:
        before = [json.loads(x) for x in old_routing.read_text(encoding="utf-8").splitlines() if x.strip()]
        old_test = {r["text"] for r in before if r["split"] == "test"}
        sets["test_in_both_splits"] = [r for r in test if r["text"] in old_test]
        out["old_training_rows"] = Counter(r["source"] for r in before if r["split"] == "train")
    from core.config import PipelineConfig
    from core.route.router import router_report

    rc = PipelineConfig().router
    out["thresholds"] = {"min_confidence": rc.min_confidence, "refuse_confidence": rc.refuse_confidence}
    for name, part in sets.items():
        a, b = scores(old, part), scores(new, part)
        ex = [Example(r["text"], r["label"], float(r["coverage"])) for r in part]
        for s, router in ((a, old), (b, new)):
            rep = router_report(min_confidence=rc.min_confidence, refuse_confidence=rc.refuse_confidence,
                                examples=ex, router=router)
            s["costly"] = f"{rep.costly}/{rep.corpus_questions}"
            s["abstain_rate"] = round(rep.abstain_rate, 4)
        changed = [{"text": r["text"], "label": r["label"], "old": x, "new": y}
                   for r, x, y in zip(part, a.pop("predicted"), b.pop("predicted")) if x != y]
        out[name] = {"before": a, "after": b, "changed_predictions": changed}
    return write_result("router_refit", out, argv=sys.argv[1:], script="train/route.py",
                        table=Table(measured_router_refit, "Routing and query transforms"))


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="?", const="", default=None, metavar="DATASETS_ROOT",
                    help="rebuild train/sets/routing.jsonl from the shared datasets first")
    ap.add_argument("--compare", type=Path, help="a previous router_model.npz to score against the refit")
    ap.add_argument("--compare-routing", type=Path, help="the routing.jsonl the previous model was split on")
    ap.add_argument("--compare-only", action="store_true", help="score only; keep the shipped model")
    args = ap.parse_args(argv)
    if args.data is not None:
        from train import route_data

        route_data.main([args.data] if args.data else [])
    model = fit_and_ship() if not args.compare_only else None
    if model is not None:
        print(f"fitted on the train split of {ROUTING_FILE.relative_to(ROOT)}: {len(model.classes)} classes; "
              f"wrote {MODEL_FILE.relative_to(ROOT)}")
    if args.compare:
        print(f"wrote {compare(args.compare, args.compare_routing)}")


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_router_refit(d: dict[str, Any], file: str) -> list[str]:
    """Issue #41 item 4: the router refitted without sample-corpus rows, before / after (python -m train.route)."""
    from bench._common import CAPTION, dig, grid, num, pct  # as compare's: only a comparison writes a results file

    out = ["### Router refitted on public data only (before / after)", "", CAPTION, "",
           "The previous model (" + ", ".join(f"{k} {v}" for k, v in (d.get("old_training_rows") or {}).items())
           + " training rows) against the refit (" + str((d.get("new_provenance") or {}).get("source", "")) + "), "
           "the classifier's best class before thresholds, then the route taken at the shipped thresholds "
           f"({', '.join(f'{k} {v}' for k, v in (d.get('thresholds') or {}).items())}). 'test_in_both_splits': the "
           "rows neither fit saw.", ""]
    rows = []
    for part in ("test", "test_in_both_splits"):
        for side in ("before", "after"):
            r = dig(d, part, side) or {}
            rows.append([part, side, num(r.get("n")), pct(r.get("accuracy")), num(r.get("macro_f1"), 3),
                         r.get("costly", "–"), pct(r.get("abstain_rate"))])
    return out + [grid(["test rows", "model", "n", "accuracy", "macro-F1", "corpus questions refused",
                            "abstained"], rows), ""]


if __name__ == "__main__":
    main(sys.argv[1:])
