"""Fine-tune the bundled MiniLM as the offline answer's answerability scorer (train/answer_scorer.py): "does this
sentence, under its title and heading, answer this question?", on the FITTING questions of bench/answer.py only.

Pairs, per fitting question (eval.jsonl odd ids, eval_train.jsonl, their near-miss twins; questions the embedder
cannot read, i.e. Russian ones, left out): positives = its gold sentences; negatives = the other sentences among the
20 the support model (fitted without the scorer) ranks highest for it, and for an unanswerable question those 20
sentences (the wrong-entity and unstated-attribute near misses the features miss are exactly these).

Out of fold: the same 5 folds as `bench/answer.py cv` (a twin goes with its source question). Each fold's scorer is
trained on the other four folds and scores that fold's questions: the sentences among the top 20 of the support
model fitted on the other folds (what cv will ask it about) and of the full model. bench/answer.py reads these
out-of-fold scores for cv and fit, so the support model never sees a score of a scorer that trained on that question.

Training is cheap on CPU because the frozen bottom runs once per pair; only the top `--layers` layers and the head
see gradients (bench/answer_cache_pair_model.py's loop, both 'orders' being the one pair).

Run from the repo root, after `bench/answer.py collect` and `collect --augment` (nice -n 5; CPU only):
  .venv/bin/python bench/answer_scorer.py --cv      # out-of-fold scores -> data/bench/answer_scorer_oof.pkl
  .venv/bin/python bench/answer_scorer.py --save    # fit on every fitting question -> core/models/data/answer_scorer.npz
  .venv/bin/python bench/answer_scorer.py --report --oof F1 F2 ...  # cv with and without each scorer run's
                                                    # out-of-fold values (fitting questions only) -> results/answer_scorer.json
  .venv/bin/python bench/answer_scorer.py --latency # the scorer's cost per query -> results/answer_scorer_latency.json
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import answer as ab  # noqa: E402
import numpy as np  # noqa: E402
from _common import ROOT, utc_now  # noqa: E402

OOF_PATH = ROOT / "data" / "bench" / "answer_scorer_oof.pkl"
SEED = 17
TOP = 20  # sentences per question the scorer is asked on (cv tries k <= TOP)

# Siblings of one kind in the sample corpus: a fitting question's name swapped for a sibling that its gold sentence
# (with title and heading) does not mention makes a wrong-entity negative of the same sentence, the near miss the
# support features miss ('the data engineer of Project Heron' read from Bluefin's staffing line).
SIBLINGS = (
    ("Project Bluefin", "Project Saltmarsh", "Project Driftwood", "Project Heron", "Project Steppe Pulse",
     "Project Lantern"),
    ("Tidewater", "Meridian", "FieldOS"),
    ("FB-210", "FB-340", "FB-520"),
    ("SM-88", "SM-91"),
    ("Rotterdam", "Gdańsk", "Almaty", "Austin"),
    ("Nordhaven Ports", "Kestrel Water Authority", "Baltimar Shipping", "Greyling Pharmaceuticals",
     "Ural-Steppe Agro"),
    ("Q1", "Q2", "Q3", "Q4"),
    ("first quarter", "second quarter", "third quarter", "fourth quarter"),
)


def entity_swaps(question: str, read: str, limit: int = 2) -> list[str]:
    """Up to `limit` copies of the question with one name replaced by a sibling the sentence text `read` (context
    included) does not mention."""
    out = []
    low = read.lower()
    for group in SIBLINGS:
        for name in group:
            if name in question:
                out += [question.replace(name, other) for other in group
                        if other != name and other.lower() not in low and other.split()[-1].lower() not in low]
                break
    return out[:limit]


def row_key(row: Any) -> tuple[str, int, int]:
    return (row.chunk_id, row.span[0], row.span[1])


def top_rows(model: Any, r: dict[str, Any], k: int = TOP) -> list[int]:
    z = model.scores(r["table"].matrix, blind=r["blind"])
    return [int(i) for i in np.argsort(-z, kind="stable")[:k]]


def base_model(train: list[dict[str, Any]]) -> Any:
    """The support model without the scorer, with bench/answer.py's default settings."""
    return ab.fit_model(train, 10.0, 1.0, 3.0, 4.0, 4.0, 4.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--pooling", choices=("cls", "mean"), default="cls")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cv", action="store_true")
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--oof-out", type=Path, default=OOF_PATH)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--negatives", type=int, default=10, help="non-gold sentences per question to train on")
    ap.add_argument("--swaps", type=int, default=2, help="wrong-entity copies per gold sentence to train on")
    ap.add_argument("--k", type=int, nargs="*", default=[8, 12, 20], help="--report: scorer_k values to cv")
    ap.add_argument("--oof", type=Path, nargs="*", default=[OOF_PATH],
                    help="--report: out-of-fold score files to compare (one per --cv run)")
    ap.add_argument("--latency", action="store_true",
                    help="time the scorer on the top k sentences of fitting questions -> results/answer_scorer_latency.json")
    args = ap.parse_args()
    if args.report:
        return report(args.k, args.oof)
    if args.latency:
        from _common import write_result

        path = write_result("answer_scorer_latency", {
            "note": "ms for the answerability scorer to read a question's top k sentences (pair texts, tokenising, "
                    "forward), minimum of 3 per question, median and max over 30 fitting questions; absolute ms "
                    "under a shared 2-core machine (see load average), k values interleaved per question",
            **latency(sorted(set(args.k) | {5}))})
        print(path.read_text())
        return 0
    import torch
    from answer_cache_pair_model import predict, train

    from core.answer.cache_pair import PairModelBits
    from train.answer_scorer import SCORER_PATH, encode_bottom, pair_text

    torch.set_num_threads(args.threads)
    data = ab.load_cache()
    rows = [r for r in ab.training_rows(data) if not r["blind"]]
    base = sorted({r["id"].removesuffix("-nm") for r in ab.training_rows(data)})
    fold_of = {q: i % 5 for i, q in enumerate(base)}  # exactly bench/answer.py crossval's folds
    folds = [fold_of[r["id"].removesuffix("-nm")] for r in rows]
    t0 = time.perf_counter()
    full = base_model(ab.training_rows(data))
    ask: list[set[int]] = [set(top_rows(full, r)) for r in rows]
    train_idx: list[list[int]] = [sorted(set(top_rows(full, r, args.negatives)) |
                                         {i for i, g in enumerate(r["labels"]) if g and r["answerable"]})
                                  for r in rows]
    if args.cv:
        all_rows = ab.training_rows(data)
        for k in range(5):
            mk = base_model([r for r in all_rows if fold_of[r["id"].removesuffix("-nm")] != k])
            for j, r in enumerate(rows):
                if folds[j] == k:
                    ask[j] |= set(top_rows(mk, r))
    print(f"{len(rows)} questions; base models {time.perf_counter() - t0:.0f} s", flush=True)

    # one bottom pass per (question, sentence); pairs indexed globally
    bits = PairModelBits.load(args.layers)
    pair_of: dict[tuple[int, int], int] = {}
    states: list[Any] = []
    t0 = time.perf_counter()
    swapped: dict[int, list[int]] = {}  # question -> pair indexes of its wrong-entity negatives
    for j, r in enumerate(rows):
        idx = sorted(ask[j] | set(train_idx[j]))
        trows = r["table"].rows
        h, mask = encode_bottom(bits, r["query"], [pair_text(trows[i].context, trows[i].text) for i in idx])
        for n, i in enumerate(idx):
            s = h[n, : int(mask[n].sum())].to(torch.float16).clone()
            pair_of[(j, i)] = len(states)
            states.append((s, s))
        if r["answerable"] and args.swaps:
            for i in (i for i, g in enumerate(r["labels"]) if g):
                text = pair_text(trows[i].context, trows[i].text)
                for q2 in entity_swaps(r["query"], text, args.swaps):
                    h2, m2 = encode_bottom(bits, q2, [text])
                    s2 = h2[0, : int(m2[0].sum())].to(torch.float16).clone()
                    swapped.setdefault(j, []).append(len(states))
                    states.append((s2, s2))
    print(f"{len(states)} pairs ({sum(map(len, swapped.values()))} wrong-entity copies); bottom states "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    ys = np.zeros(len(states), dtype=int)
    for (j, i), p in pair_of.items():
        ys[p] = int(rows[j]["answerable"] and rows[j]["labels"][i])
    hp = {"layers": args.layers, "epochs": args.epochs, "lr": args.lr, "pooling": args.pooling, "batch": args.batch,
          "seed": SEED, "top": TOP, "negatives": args.negatives, "swaps": args.swaps}

    def train_on(js: set[int], seed: int) -> Any:
        idx = np.array([pair_of[(j, i)] for j in sorted(js) for i in train_idx[j]] +
                       [p for j in sorted(js) for p in swapped.get(j, [])])
        return train(bits, states, ys, idx, epochs=args.epochs, lr=args.lr, seed=seed, pooling=args.pooling,
                     batch=args.batch)

    if args.cv:
        oof: dict[str, dict[tuple[str, int, int], float]] = {}
        t0 = time.perf_counter()
        for k in range(5):
            pm = train_on({j for j in range(len(rows)) if folds[j] != k}, SEED + k)
            for j in (j for j in range(len(rows)) if folds[j] == k):
                idx = sorted(ask[j])
                probs = predict(pm, states, np.array([pair_of[(j, i)] for i in idx]))
                logit = np.log(np.clip(probs, 1e-6, 1 - 1e-6) / np.clip(1 - probs, 1e-6, 1))
                oof[rows[j]["id"]] = {row_key(rows[j]["table"].rows[i]): float(v) for i, v in zip(idx, logit)}
            print(f"fold {k}: {time.perf_counter() - t0:.0f} s", flush=True)
        # out-of-fold ranking quality: is a gold sentence the scorer's first among those asked?
        hits = sum(1 for j, r in enumerate(rows) if r["answerable"] and any(r["labels"]) and
                   r["labels"][max(ask[j], key=lambda i: oof[r["id"]][row_key(r["table"].rows[i])])])
        n_ans = sum(1 for r in rows if r["answerable"] and any(r["labels"]))
        print(f"out-of-fold: gold sentence first for {hits}/{n_ans} answerable questions", flush=True)
        args.oof_out.parent.mkdir(parents=True, exist_ok=True)
        args.oof_out.write_bytes(pickle.dumps({"hyper": hp, "scores": oof, "made_at": utc_now(),
                                               "collected_at": data["collected_at"],
                                               "train_s": round(time.perf_counter() - t0, 1),
                                               "gold_first": [hits, n_ans]}))
        print(f"wrote {args.oof_out}")
    if args.save:
        t0 = time.perf_counter()
        pm = train_on(set(range(len(rows))), SEED)
        n_pos = int(sum(ys[pair_of[(j, i)]] for j in range(len(rows)) for i in train_idx[j]))
        n_pairs = sum(len(t) for t in train_idx) + sum(map(len, swapped.values()))
        pm.save(SCORER_PATH, fitted_on=f"{len(rows)} fitting questions of bench/answer.py (Russian ones left out): "
                                       f"{n_pairs} pairs, {n_pos} gold", hyper=json.dumps(hp))
        print(f"fit {time.perf_counter() - t0:.0f} s; wrote {SCORER_PATH} ({SCORER_PATH.stat().st_size / 1e6:.1f} MB)")
    return 0


def latency(k_values: list[int], questions: int = 30, repeats: int = 3) -> dict[str, Any]:
    """ms for the shipped scorer to read the top-k sentences of a question (pair texts built, tokenised, forward),
    median over fitting questions (each timed `repeats` times, the minimum kept), with torch's own thread count,
    k values interleaved per question so load affects them alike."""
    import statistics

    import torch

    from train.answer_scorer import (
        SCORER_PATH,
        encode_bottom,
        load_scorer,
        pair_text,
        row_scorer,
    )

    if SCORER_PATH.exists():
        load_scorer()
        stand_in = None
    else:  # not shipped: the same architecture with the bundled top layers and an untrained head costs the same
        from core.answer.cache_pair import PairModelBits, module_class

        bits = PairModelBits.load(2)
        stand_in = (bits, module_class().fresh(bits, pooling="cls").eval())
    data = ab.load_cache()
    rows = [r for r in ab.training_rows(data) if not r["blind"] and r["set"] != "augment"][:questions]
    model = base_model(ab.training_rows(data))
    got: dict[int, list[float]] = {k: [] for k in k_values}
    for r in rows:
        top = top_rows(model, r, max(k_values))
        read = row_scorer(r["query"], r["table"].rows)
        if stand_in is not None:
            def read(idx: list[int], r: dict[str, Any] = r) -> Any:
                with torch.no_grad():
                    h, mask = encode_bottom(stand_in[0], r["query"], [pair_text(r["table"].rows[i].context,
                                                                                r["table"].rows[i].text) for i in idx])
                    return stand_in[1].logits_from_states(h, mask).numpy()
        for k in k_values:
            best = float("inf")
            for _ in range(repeats):
                t = time.perf_counter()
                read(top[:k])
                best = min(best, (time.perf_counter() - t) * 1000)
            got[k].append(best)
    return {"model": "shipped core/models/data/answer_scorer.npz" if stand_in is None else
            "not shipped: a stand-in of the same architecture (bundled top 2 layers, untrained head), same compute",
            "torch_threads": torch.get_num_threads(), "questions": len(rows),
            "ms_median": {str(k): round(statistics.median(v), 1) for k, v in got.items()},
            "ms_max": {str(k): round(max(v), 1) for k, v in got.items()},
            "sentences_per_question_median": statistics.median(len(r["table"].rows) for r in rows)}


def report(k_values: list[int], oof_files: list[Path]) -> int:
    """cv on the fitting questions without the scorer and with each scorer run's out-of-fold values (the same
    folds), and the scorer's cost per query -> bench/results/answer_scorer.json. Held-out sets are not read."""
    from _common import write_result

    data = ab.load_cache()
    settings = (10.0, 1.0, 3.0, 4.0, 4.0)
    runs: dict[str, Any] = {"no scorer": ab.crossval(*settings, data=data, attr_penalty=4.0)}
    scorers = {}
    for f in oof_files:
        n = ab.attach_scores(data, f)
        oof = pickle.loads(f.read_bytes())
        hp = oof["hyper"]
        name = (f"{hp['layers']} layers {hp['pooling']} {hp['epochs']} epochs lr {hp['lr']:g} negatives "
                f"{hp.get('negatives', TOP)} swaps {hp.get('swaps', 0)}")
        scorers[name] = {"questions_with_values": n, "gold_first_of_answerable": oof["gold_first"],
                         "train_s": oof["train_s"], "hyper": hp}
        for k in k_values:
            runs[f"{name}; k={k}"] = ab.crossval(*settings, data=data, attr_penalty=4.0, scorer_k=k)
    out = {"note": "5-fold cv on the fitting questions only (eval.jsonl odd ids, eval_train.jsonl, near-miss twins); "
                   "each scorer's values are out of fold (bench/answer_scorer.py --cv, same folds as cv). No held-out "
                   "set was read. refused_unanswerable_written: hand-written unanswerable questions (twins left "
                   "out). gold_first_of_answerable: answerable questions whose gold sentence the scorer alone ranks "
                   "first among the sentences it was asked about.",
           "scorers": scorers, "cv": runs}
    path = write_result("answer_scorer", out)
    print(json.dumps({k: {m: v.get(m) for m in ("answered_correctly", "refused_unanswerable",
                                                "refused_unanswerable_written")} for k, v in runs.items()}, indent=1))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
