"""Fitted linear models shipped as data (core/models/data/*.npz): one record, one file format, one loader, one sigmoid.

A record holds what a linear score needs and where it came from: the feature names, an optional standardisation
(mean, scale), the coefficients (a vector, or one column per class), the intercept, a threshold, and the provenance
(recipe, source data, split, commit, date) written by the `train/` recipe that fitted it. Model-specific arrays (the
router's idf weights, the support model's imputed values) ride along in `arrays`; small settings in `meta`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

FORMAT = "fitted-linear/1"
_CLIP = 40.0  # exp(40) ~ 2e17: past it the probability is 0 or 1 to float64 precision anyway


def sigmoid(z: Any) -> Any:
    """The logistic function of a score or an array of scores, clipped so exp never overflows; a float in, a float
    out."""
    out = 1.0 / (1.0 + np.exp(-np.clip(np.asarray(z, dtype=np.float64), -_CLIP, _CLIP)))
    return float(out) if out.ndim == 0 else out


class FittedModelError(ValueError):
    """A fitted-model file that cannot be read or does not match the code; the message says how to refit."""


@dataclass(frozen=True, eq=False)
class FittedLinear:
    """One fitted linear model: logits = ((x - mean) / scale) @ coef + intercept (no standardisation when mean is
    None). `coef` is (features,) for one score or (features, classes) for one score per class."""

    features: tuple[str, ...]
    coef: np.ndarray
    intercept: np.ndarray
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    threshold: float | None = None
    classes: tuple[str, ...] = ()
    provenance: Mapping[str, str] = field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def standardise(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x if self.mean is None or self.scale is None else (x - self.mean) / self.scale

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self.standardise(x) @ self.coef + self.intercept

    def probability(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.logits(x))


def save_fitted(path: str | Path, model: FittedLinear) -> None:
    """Write the record as one compressed .npz (no pickles): arrays as arrays, provenance and meta as JSON text."""
    extra = {f"array.{k}": np.asarray(v) for k, v in model.arrays.items()}
    opt: dict[str, np.ndarray] = {}
    if model.mean is not None and model.scale is not None:
        opt = {"mean": np.asarray(model.mean, dtype=np.float64), "scale": np.asarray(model.scale, dtype=np.float64)}
    np.savez_compressed(
        path, format=np.array(FORMAT), features=np.array(model.features, dtype=str),
        coef=np.asarray(model.coef, dtype=np.float64), intercept=np.asarray(model.intercept, dtype=np.float64),
        threshold=np.float64(np.nan if model.threshold is None else model.threshold),
        classes=np.array(model.classes, dtype=str), provenance=np.array(json.dumps(dict(model.provenance))),
        meta=np.array(json.dumps(dict(model.meta))), **opt, **extra)


def load_fitted(path: str | Path, *, features: Sequence[str] | None = None, recipe: str = "") -> FittedLinear:
    """The record in `path`. `features`: the names the code computes, which the file must match (a model fitted on
    other features would read the wrong columns); `recipe`: the command that refits it, for the error message."""
    how = f"; refit it with `{recipe}`" if recipe else ""
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["format"]) != FORMAT:
                raise FittedModelError(f"{Path(path).name} is not a {FORMAT} file{how}")
            thr = float(z["threshold"])
            model = FittedLinear(
                tuple(str(f) for f in z["features"]), z["coef"], z["intercept"],
                z["mean"] if "mean" in z.files else None, z["scale"] if "scale" in z.files else None,
                None if np.isnan(thr) else thr, tuple(str(c) for c in z["classes"]),
                json.loads(str(z["provenance"])),
                {k.removeprefix("array."): z[k] for k in z.files if k.startswith("array.")},
                json.loads(str(z["meta"])))
    except (OSError, KeyError, ValueError) as exc:
        if isinstance(exc, FittedModelError):
            raise
        raise FittedModelError(f"cannot read the fitted model {path}: {exc}{how}") from exc
    if features is not None and tuple(features) != model.features:
        raise FittedModelError(f"{Path(path).name} was fitted on other features ({len(model.features)} vs "
                               f"{len(features)}){how}")
    return model
