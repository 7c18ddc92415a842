"""How the ONNX embedder cuts texts into session.run calls: run plans side by side (issue #14, part 1).

Run from the repo root:  .venv/bin/python bench/onnx_runs.py [--docs 120] [--rounds 3]

One process, one exported fp32 model, one OnnxEmbedder per plan. Two workloads: the chunk texts of bench/ingest.py
(the same SciFact abstracts, parser and chunker settings) and the sentences of those chunks (short texts, as the
compression stage and the answer stage encode them). Every round times every plan on both workloads, in an order
that reverses each round, so a change in machine load hits all plans alike; the median of the rounds is reported.
Each plan's vectors and token vectors are checked against the default plan's (the cut must not change them).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import CAPTION, ROOT, Table, datasets_dir, grid, machine_info, num, table, write_result  # noqa: E402
from ingest import chunk_texts, load_files  # noqa: E402

from core.config import PipelineConfig  # noqa: E402
from core.models.embed import BUNDLED_MODEL, load_embedder  # noqa: E402
from core.models.onnx import RUN_BATCH, RUN_TOKENS  # noqa: E402
from core.text import sentence_spans  # noqa: E402

# name -> (texts per run at most, padded tokens per run at most, pool workers; 1 = serial on 2 intra-op threads)
BEFORE = "by characters, 8 per run, 2 intra-op threads (before)"
PLANS: dict[str, tuple[int, int, int]] = {
    BEFORE: (8, 10**9, 1),
    "8 per run, 2 intra-op threads": (8, 10**9, 1),
    "4 per run, 2 intra-op threads": (4, 10**9, 1),
    "1 per run, 2 workers": (1, 10**9, 2),
    f"{RUN_TOKENS}-token runs, 2 intra-op threads": (RUN_BATCH, RUN_TOKENS, 1),
    f"{RUN_TOKENS}-token runs, 2 workers (default)": (RUN_BATCH, RUN_TOKENS, 2),
    f"{2 * RUN_TOKENS}-token runs, 2 workers": (RUN_BATCH, 2 * RUN_TOKENS, 2),
}
DEFAULT = f"{RUN_TOKENS}-token runs, 2 workers (default)"


def by_characters(texts: Sequence[str], per_run: int):  # noqa: ANN201 - a replacement for OnnxEmbedder._plan
    """The plan the embedder had before: texts sorted by character count (not token count), a fixed number per
    run. Token counts per character vary (numbers, chemical names), so runs pad more."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))

    def plan(encs: Sequence[Any]) -> list[list[int]]:
        assert len(encs) == len(texts)
        return [order[at:at + per_run] for at in range(0, len(order), per_run)]
    return plan


def padding(plan: list[list[int]], lengths: Sequence[int]) -> float:
    """Padded tokens run / real tokens."""
    return sum(max(lengths[i] for i in run) * len(run) for run in plan) / sum(lengths)


def max_token_diff(a: Sequence[Any], b: Sequence[Any]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return float("inf")
        if x is not None:
            if x[0] != y[0]:
                return float("inf")
            worst = max(worst, float(np.abs(x[2] - y[2]).max()))
    return worst


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=120, help="SciFact abstracts (bench/ingest.py's default run uses 120)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--model-cache", type=Path, default=ROOT / "data" / "models")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    machine = machine_info()
    config = PipelineConfig()
    source, files = load_files("scifact", args.docs, datasets_dir(args.datasets))
    chunks = chunk_texts(files, config)
    sentences = [c[a:b] for c in chunks for a, b in sentence_spans(c)]
    workloads = {"chunks": chunks, "sentences": sentences}
    embedders = {}
    for name, (per_run, tokens, workers) in PLANS.items():
        loaded = load_embedder(BUNDLED_MODEL, batch_size=64, runtime="onnx", cache_dir=args.model_cache, threads=2)
        if loaded.notice:
            sys.exit(f"the onnx runtime did not load: {loaded.notice}")
        emb = loaded.embedder
        emb.run_batch, emb.run_tokens, emb.workers = per_run, tokens, workers
        embedders[name] = emb
    tok = next(iter(embedders.values()))._tokenizer
    mean_tokens = {w: statistics.fmean(len(e.ids) for e in tok.encode_batch(t)) for w, t in workloads.items()}
    print(f"{source}: {len(chunks)} chunks ({mean_tokens['chunks']:.0f} tokens on average), "
          f"{len(sentences)} sentences ({mean_tokens['sentences']:.0f})")

    lengths = {w: [len(e.ids) for e in tok.encode_batch(t)] for w, t in workloads.items()}

    def use(name: str, w: str) -> Any:
        """The embedder of plan `name`, ready for workload `w` (the character plan needs the texts)."""
        emb = embedders[name]
        if name == BEFORE:
            emb._plan = by_characters(workloads[w], PLANS[name][0])
        return emb

    pad = {name: {w: padding(use(name, w)._plan(tok.encode_batch(t)), lengths[w]) for w, t in workloads.items()}
           for name in PLANS}
    reference = {w: embedders[DEFAULT].encode_with_tokens(t) for w, t in workloads.items()}
    check: dict[str, dict[str, float]] = {}
    for name in embedders:  # also the warm-up: every plan runs every workload once untimed
        check[name] = {}
        for w, t in workloads.items():
            v, toks = use(name, w).encode_with_tokens(t)
            check[name][w] = max(float(np.abs(v - reference[w][0]).max()), max_token_diff(toks, reference[w][1]))

    times: dict[str, dict[str, list[float]]] = {n: {w: [] for w in workloads} for n in PLANS}
    for r in range(args.rounds):
        names = list(PLANS) if r % 2 == 0 else list(PLANS)[::-1]
        for name in names:
            for w, t in workloads.items():
                emb = use(name, w)
                start = time.perf_counter()
                emb.encode_with_tokens(t)
                times[name][w].append(time.perf_counter() - start)
        print(f"  round {r + 1}/{args.rounds} done", flush=True)

    before = BEFORE
    rows, plans = [], []
    for name, (per_run, tokens, workers) in PLANS.items():
        med = {w: statistics.median(v) for w, v in times[name].items()}
        speed = {w: statistics.median(times[before][w]) / med[w] for w in workloads}
        plans.append({"plan": name, "texts_per_run_max": per_run, "tokens_per_run_max": tokens if tokens < 10**9
                      else None, "workers": workers, "seconds": times[name], "median_s": med,
                      "speedup_vs_before": speed, "padded_over_real_tokens": pad[name],
                      "max_abs_diff_vs_default": check[name]})
        rows.append([name, pad[name]["chunks"], med["chunks"], speed["chunks"], pad[name]["sentences"],
                     med["sentences"], speed["sentences"], max(check[name].values())])
    print()
    print(table(["plan", "chunks padding", "chunks s", "x before", "sentences padding", "sentences s", "x before",
                 "max |diff| vs default"], rows))
    path = write_result("onnx_runs", {
        "benchmark": "onnx_runs", "machine": machine,
        "parameters": {"corpus": f"{source} (first {args.docs} abstracts, chunked as bench/ingest.py)",
                       "chunks": len(chunks), "sentences": len(sentences), "mean_tokens": mean_tokens,
                       "rounds": args.rounds, "outputs": "sentence_embedding and token_embeddings (as ingest)",
                       "default": DEFAULT},
        "plans": plans,
    }, args.out, table=MEASURED_ONNX_RUNS)
    print(f"\nwrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_onnx_runs(d: dict[str, Any], file: str) -> list[str]:
    """Issue #14: how the ONNX embedder cuts texts into session.run calls (bench/onnx_runs.py)."""
    p = d.get("parameters") or {}
    mt = p.get("mean_tokens") or {}
    busy = f" Note: {p['note']}." if p.get("note") else ""
    out = [f"### ONNX run plans ({p.get('chunks')} chunks, {p.get('sentences')} sentences"
           f"{', busy machine' if busy else ''})", "", CAPTION, "",
           f"The same fp32 model, one embedder per plan, every plan on both workloads in each of {p.get('rounds')} "
           f"rounds (order reversed every round), median seconds; chunks average {num(mt.get('chunks'), 0)} tokens, "
           f"sentences {num(mt.get('sentences'), 0)}. Both outputs as ingest asks for them (sentence vectors and "
           "token vectors). Padding: padded tokens run / real tokens. Speed-up against the plan the embedder had "
           "before; the last column checks that the cut changes no vector." + busy, ""]
    rows = []
    for r in d.get("plans") or []:
        pad, med, sp = r.get("padded_over_real_tokens") or {}, r.get("median_s") or {}, r.get("speedup_vs_before") or {}
        name = r.get("plan", "?")
        rows.append([f"**{name}**" if name == p.get("default") else name,
                     num(pad.get("chunks"), 2), num(med.get("chunks"), 2), f"{num(sp.get('chunks'), 2)}×",
                     num(pad.get("sentences"), 2), num(med.get("sentences"), 2), f"{num(sp.get('sentences'), 2)}×",
                     f"{max((r.get('max_abs_diff_vs_default') or {0: 0.0}).values()):.1e}"])
    out.append(grid(["plan", "chunks: padding", "s", "speed-up", "sentences: padding", "s", "speed-up",
                         "max abs diff to default"], rows))
    return out


MEASURED_ONNX_RUNS = Table(measured_onnx_runs, 'Ingest and embedding runtimes')


if __name__ == "__main__":
    raise SystemExit(main())
