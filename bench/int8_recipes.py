"""int8 recipe search on the dev split (issue #14 part 1): which matrices to quantise, how, and how hard to smooth.

Run from the repo root:  .venv/bin/python bench/int8_recipes.py [--docs 300] [--split head] [--recipes NAME ...]

The recipe is chosen here, on the head split of SciFact's test queries (bench/embed_runtime.py's --split head); the
chosen one is then reported once on the tail split by bench/embed_runtime.py. For each candidate: build the int8
file from the cached fp32 export, encode the abstracts and queries, and compare with torch (computed once per run):
mean top-10 overlap, nDCG@10 change, and encode speed against the fp32 ONNX model timed in the same slices
(ratios side by side; absolute times on a shared machine are not trustworthy).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import ROOT, datasets_dir, machine_info, table, utc_now, write_result  # noqa: E402
from _common import CAPTION, Table, grid, num  # noqa: E402
from embed_runtime import NDCG_BAR, OVERLAP_BAR, load_subsample, ndcg10  # noqa: E402

from core.models.embed import (  # noqa: E402
    BUNDLED_MODEL,
    bundled_model_path,
    load_embedder,
    one_torch_thread,
)
from core.models.onnx import OnnxEmbedder, ensure_model, quantise_int8  # noqa: E402

# name -> keyword arguments of core.models.onnx.quantise_int8
RECIPES: dict[str, dict[str, Any]] = {
    "v4 (up+square+qkv, smooth 0.5)": {"kinds": frozenset({"up", "square", "attention"}), "alpha": 0.5,
                                       "activations": "tensor"},
    "up+square, smooth 0.5": {"kinds": frozenset({"up", "square"}), "alpha": 0.5, "activations": "tensor"},
    "up, smooth 0.5": {"kinds": frozenset({"up"}), "alpha": 0.5, "activations": "tensor"},
    "per-token up+square+down, plain": {"kinds": frozenset({"up", "square", "down"}), "alpha": None,
                                        "activations": "token"},
    "per-token up+square+down, smooth 0.5": {"kinds": frozenset({"up", "square", "down"}), "alpha": 0.5,
                                             "activations": "token"},
    "per-token up+square+down + qkv tensor, plain": {"kinds": frozenset({"up", "square", "down", "attention"}),
                                                     "alpha": None, "activations": "token"},
    "per-token up+square, plain": {"kinds": frozenset({"up", "square"}), "alpha": None, "activations": "token"},
    "per-token up+square+down + qkv tensor, smooth 0.5 not down": {
        "kinds": frozenset({"up", "square", "down", "attention"}), "alpha": 0.5, "activations": "token",
        "smooth_kinds": frozenset({"up", "square", "attention"})},
    "per-token up+square+down + qkv tensor, smooth 0.5 qkv only": {
        "kinds": frozenset({"up", "square", "down", "attention"}), "alpha": 0.5, "activations": "token",
        "smooth_kinds": frozenset({"attention"})},
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--split", choices=["head", "tail"], default="head", help="head = dev split (choose here)")
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--recipes", nargs="*", default=None, help="names from RECIPES (default: all)")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--model-cache", type=Path, default=ROOT / "data" / "models")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    machine = machine_info()
    ids, texts, queries, qrels = load_subsample(datasets_dir(args.datasets), args.docs, tail=args.split == "tail")
    qids = list(queries)
    qtexts = [queries[q] for q in qids]
    print(f"{len(texts)} abstracts, {len(qids)} queries ({args.split} split)", flush=True)

    torch_emb = load_embedder(BUNDLED_MODEL, batch_size=64).embedder
    with one_torch_thread():
        tq = np.asarray(torch_emb.encode(qtexts), dtype=np.float32)
    td = np.asarray(torch_emb.encode(texts), dtype=np.float32)
    model_dir = bundled_model_path()
    fp32_path = ensure_model(model_dir, BUNDLED_MODEL, "onnx", args.model_cache)
    fp32 = OnnxEmbedder(BUNDLED_MODEL, model_dir, fp32_path, "onnx")

    def ranks(q: np.ndarray, d: np.ndarray) -> list[list[str]]:
        return [[ids[j] for j in np.argsort(-row, kind="stable")[:10]] for row in q @ d.T]

    torch_top = ranks(tq, td)
    torch_ndcg = statistics.fmean(ndcg10(t, qrels[q]) for t, q in zip(torch_top, qids))
    cuts = [round(i * len(texts) / args.slices) for i in range(args.slices + 1)]
    results: dict[str, Any] = {}
    names = args.recipes or list(RECIPES)
    with tempfile.TemporaryDirectory(prefix="int8_recipes_") as tmp:
        for name in names:
            kw = RECIPES[name]
            path = Path(tmp) / f"r{len(results)}.onnx"
            t0 = time.perf_counter()
            quantise_int8(fp32_path, path, model_dir, **kw)
            build_s = time.perf_counter() - t0
            emb = OnnxEmbedder(BUNDLED_MODEL, model_dir, path, "onnx-int8")
            secs = {"int8": [], "fp32": []}
            parts = []
            for s in range(args.slices):
                part = texts[cuts[s]:cuts[s + 1]]
                for side in (("int8", "fp32") if s % 2 == 0 else ("fp32", "int8")):
                    t0 = time.perf_counter()
                    v = (emb if side == "int8" else fp32).encode(part)
                    secs[side].append(time.perf_counter() - t0)
                    if side == "int8":
                        parts.append(v)
            d = np.concatenate(parts)
            q = emb.encode(qtexts)
            top = ranks(q, d)
            overlap = statistics.fmean(len(set(a) & set(b)) / 10 for a, b in zip(top, torch_top))
            nd = statistics.fmean(ndcg10(t, qrels[qq]) for t, qq in zip(top, qids))
            results[name] = {
                "recipe": {k: sorted(v) if isinstance(v, frozenset) else v for k, v in kw.items()},
                "top10_overlap_with_torch": overlap, "ndcg@10": nd, "ndcg_delta_vs_torch": nd - torch_ndcg,
                "worst_cosine_to_torch_docs": float(np.sum(d * td, axis=1).min()),
                "speedup_vs_onnx_fp32": sum(secs["fp32"]) / sum(secs["int8"]),
                "speedup_vs_onnx_fp32_per_slice": [f / i for f, i in zip(secs["fp32"], secs["int8"])],
                "int8_s": sum(secs["int8"]), "fp32_s": sum(secs["fp32"]), "build_s": build_s,
                "meets_bar": overlap >= OVERLAP_BAR and abs(nd - torch_ndcg) <= NDCG_BAR,
            }
            r = results[name]
            print(f"  {name}: overlap {overlap:.4f}, dnDCG {r['ndcg_delta_vs_torch']:+.4f}, "
                  f"x fp32 {r['speedup_vs_onnx_fp32']:.2f}; load {os.getloadavg()[0]:.1f}", flush=True)
            del emb
    print()
    print(table(["recipe", "top-10 overlap", "dnDCG@10", "worst cos", "x onnx fp32", "meets bar"],
                [[n, r["top10_overlap_with_torch"], r["ndcg_delta_vs_torch"], r["worst_cosine_to_torch_docs"],
                  r["speedup_vs_onnx_fp32"], r["meets_bar"]] for n, r in results.items()]))
    payload = {
        "benchmark": "int8_recipes", "timestamp": utc_now(),
        "command": "python bench/int8_recipes.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine,
        "parameters": {"docs": len(texts), "queries": len(qids), "split": args.split, "slices": args.slices},
        "torch_ndcg@10": torch_ndcg, "bar": {"top10_overlap_min": OVERLAP_BAR, "ndcg_delta_max": NDCG_BAR},
        "recipes": results,
    }
    path = write_result("int8_recipes", payload, args.out, table=MEASURED_INT8_RECIPES)
    print(f"wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_int8_recipes(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14: int8 recipe candidates on the dev split (bench/int8_recipes.py); the chosen one is reported in
    onnx.json on the other split."""
    p = d.get("parameters") or {}
    out = [f"### int8 recipes on the {p.get('split', '?')} (dev) split ({p.get('docs')} abstracts, "
           f"{p.get('queries')} queries)", "", CAPTION, "",
           "Each candidate against torch (computed in the same run) and against the fp32 ONNX model timed in the same "
           f"slices; torch nDCG@10 {num(d.get('torch_ndcg@10'), 4)}. The recipe is chosen here and reported once on "
           "the tail split (Embedding runtimes).", ""]
    rows = [[n, num(r.get("top10_overlap_with_torch"), 3), num(r.get("ndcg_delta_vs_torch"), 4),
             num(r.get("worst_cosine_to_torch_docs"), 4), f"{num(r.get('speedup_vs_onnx_fp32'), 2)}×",
             num(r.get("meets_bar"))] for n, r in (d.get("recipes") or {}).items()]
    out.append(grid(["recipe", "top-10 overlap", "Δ nDCG@10", "worst cosine to torch", "speed-up vs onnx fp32",
                         "meets bar"], rows))
    return out


MEASURED_INT8_RECIPES = Table(measured_int8_recipes, 'Ingest and embedding runtimes')


if __name__ == "__main__":
    raise SystemExit(main())
