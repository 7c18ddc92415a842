"""Fits the answer cache's opt-in pair model and writes core/models/data/answer_cache_pair_model.npz with its
provenance: `python -m train.cache_pair_model` (`--out PATH` writes elsewhere; `--cv` also writes the out-of-fold P
of every dev pair to bench/results/answer_cache_pair_oof.json, which bench/answer_cache.py reads to choose on dev;
`--compare` prints the largest weight difference from the shipped file and writes nothing unless --out is given).

A cross-encoder ("may these two questions share an answer?") made here, as none can be downloaded: the bundled
all-MiniLM-L6-v2 with its bottom layers frozen, the top `--layers` layers and a small head trained on the DEV pairs of
train/cache_pairs.py only; only the trained layers and the head ship (fp16), loaded over the bundled base by path.
Training is cheap on CPU because the frozen bottom runs once per pair (both orders); then only the top layers see
gradients. Defaults are the shipped model's. Tried on dev (out-of-fold AUROC over every dev pair): 1 layer, mean
pooling, 4 epochs 0.71 (831 pairs); 2 layers, [CLS], 6 epochs, lr 1e-4 0.80 (831) and 0.82 (937); a frozen encoder
with a logistic head on the pair's pooled states 0.75.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from train.cache_pairs import dev_rows, pair_key, question_groups
from train.provenance import ROOT, commit, provenance, sha256_text

RECIPE = "python -m train.cache_pair_model"
OOF_PATH = ROOT / "bench" / "results" / "answer_cache_pair_oof.json"
SEED = 13


def train(model_bits: Any, states: list, ys: np.ndarray, idx: np.ndarray, *, epochs: int, lr: float, seed: int,
          pooling: str, batch: int = 16) -> Any:
    """Train a copy of the top layers + head on the cached bottom states of pairs `idx`; each epoch sees every pair
    once, in a random one of its two orders (half the cost of both, and the model still learns both)."""
    import torch

    from core.answer.cache_pair import PairModel

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    pm = PairModel.fresh(model_bits, pooling=pooling)
    pm.train()
    head_params = list(pm.head.parameters())
    layer_params = [p for layer in pm.layers for p in layer.parameters()]
    opt = torch.optim.AdamW([{"params": layer_params, "lr": lr}, {"params": head_params, "lr": lr * 20}],
                            weight_decay=0.01)
    pos_w = float((ys[idx] == 0).sum()) / max(1.0, float((ys[idx] == 1).sum()))
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_w))
    steps = epochs * ((len(idx) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10))
                                              * max(0.0, (steps - s) / steps))
    for _ep in range(epochs):
        items = [(int(i), int(o)) for i, o in zip(idx, rng.integers(0, 2, len(idx)))]
        order = rng.permutation(len(items))
        for s in range(0, len(order), batch):
            chunk = [items[j] for j in order[s:s + batch]]
            h, mask = pad([states[i][o] for i, o in chunk])
            logits = pm.logits_from_states(h, mask)
            loss = loss_fn(logits, torch.tensor([float(ys[i]) for i, _ in chunk]))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(pm.parameters(), 1.0)
            opt.step()
            sched.step()
    pm.eval()
    return pm


def pad(seqs: list) -> tuple[Any, Any]:
    import torch

    n = max(s.shape[0] for s in seqs)
    h = torch.zeros(len(seqs), n, seqs[0].shape[1])
    mask = torch.zeros(len(seqs), n, dtype=torch.bool)
    for i, s in enumerate(seqs):
        h[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = True
    return h, mask


def predict(pm: Any, states: list, idx: np.ndarray) -> np.ndarray:
    """P(same) of each pair: the mean of both orders' probabilities (the product does the same)."""
    import torch

    out = np.zeros(len(idx))
    with torch.no_grad():
        for s in range(0, len(idx), 32):
            chunk = idx[s:s + 32]
            h, mask = pad([states[i][o] for i in chunk for o in (0, 1)])
            p = torch.sigmoid(pm.logits_from_states(h, mask)).numpy().reshape(-1, 2).mean(axis=1)
            out[s:s + len(chunk)] = p
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--layers", type=int, default=2, help="top layers to train (the rest stay the bundled ones)")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--pooling", choices=("cls", "mean"), default="cls")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--cv", action="store_true", help="also 5-fold out-of-fold P on dev (grouped by shared questions)")
    ap.add_argument("--oof-out", type=Path, default=OOF_PATH)
    ap.add_argument("--out", type=Path, default=None, help="where to write the model (default: the shipped file)")
    ap.add_argument("--compare", action="store_true",
                    help="print the largest difference from the shipped weights; writes nothing unless --out is given")
    args = ap.parse_args(argv)
    import torch
    from sklearn.model_selection import GroupKFold

    from core.answer.cache_pair import PAIR_MODEL_PATH, PairModelBits, bottom_states

    torch.set_num_threads(args.threads)
    rows = dev_rows(args.datasets)
    ys = np.array([r["label"] == "pos" for r in rows], dtype=int)
    bits = PairModelBits.load(args.layers)
    t0 = time.perf_counter()
    states = [(bottom_states(bits, r["a"], r["b"]), bottom_states(bits, r["b"], r["a"])) for r in rows]
    print(f"{len(rows)} dev pairs ({ys.sum()} pos); bottom states {time.perf_counter() - t0:.1f} s", flush=True)
    hp = {"layers": args.layers, "epochs": args.epochs, "lr": args.lr, "pooling": args.pooling, "batch": args.batch,
          "min_cos": 0.0, "seed": SEED}
    if args.cv:
        from sklearn.metrics import roc_auc_score

        groups = question_groups(rows)  # pairs sharing a question (either side) stay in one fold
        oof = np.zeros(len(rows))
        t0 = time.perf_counter()
        for f, (tr, te) in enumerate(GroupKFold(5).split(np.arange(len(rows)), groups=groups)):
            pm = train(bits, states, ys, tr, epochs=args.epochs, lr=args.lr, seed=SEED + f, pooling=args.pooling,
                       batch=args.batch)
            oof[te] = predict(pm, states, te)
            print(f"fold {f}: {time.perf_counter() - t0:.0f} s", flush=True)
        auc = roc_auc_score(ys, oof)
        print(f"OOF AUROC {auc:.4f}")
        args.oof_out.write_text(json.dumps({
            "run": {"command": f"{RECIPE} --cv", "commit": commit()},
            "note": "out-of-fold P(same) of the fine-tuned pair model on the cache pairs' dev split (5 folds grouped "
                    "by shared questions; each fold's model never saw its pairs); read by bench/answer_cache.py to "
                    "choose thresholds on dev. Not a test-split number.",
            "hyper": hp, "auroc_dev_oof": round(float(auc), 4), "train_s": round(time.perf_counter() - t0, 1),
            "p": {pair_key(r["a"], r["b"]): round(float(p), 5) for r, p in zip(rows, oof)}}, indent=2) + "\n")
        print(f"wrote {args.oof_out}")
    t0 = time.perf_counter()
    pm = train(bits, states, ys, np.arange(len(rows)), epochs=args.epochs, lr=args.lr, seed=SEED,
               pooling=args.pooling, batch=args.batch)
    print(f"fit {time.perf_counter() - t0:.0f} s", flush=True)
    if args.compare:
        with np.load(PAIR_MODEL_PATH, allow_pickle=False) as z:
            shipped = {k[3:]: z[k] for k in z.files if k.startswith("w::")}
        mine = {k: v.detach().numpy().astype(np.float16) for k, v in pm.state_dict().items()}
        same = mine.keys() == shipped.keys() and all(np.array_equal(mine[k], shipped[k]) for k in mine)
        worst = max(float(np.max(np.abs(mine[k].astype(np.float64) - shipped[k].astype(np.float64))))
                    for k in mine if k in shipped)
        print(json.dumps({"fp16_weights_identical_to_shipped": same, "max_abs_difference": worst}))
    out = args.out if args.out else None if args.compare else PAIR_MODEL_PATH
    if out is not None:
        digest = sha256_text("\n".join(json.dumps([r["a"], r["b"], r["label"]]) for r in rows))
        pm.save(out, fitted_on=f"{len(rows)} dev pairs ({int(ys.sum())} share an answer)", hyper=json.dumps(hp),
                provenance=json.dumps(provenance(RECIPE, "cache pairs, dev split (train/cache_pairs.py)", "dev",
                                                 digest, rows=str(len(rows)))))
        print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
