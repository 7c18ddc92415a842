"""The answer cache's decision on hand-written question pairs (bench/sets/cache_pairs_42.jsonl, written before the first
run): must-not pairs (a relative period, argument order, refundable / non-refundable, a role, a superlative, a name,
an ordinal changed) must never be served; paraphrases should be. The product's lookup as it runs: the default
embedder's cosine, the threshold, the guard's vetoes and the learned verifier (core/answer/cache.py lookup).

  nice -n 10 .venv/bin/python bench/cache_guard_pairs.py [--out bench/results/cache_guard_pairs.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine_info, write_result  # noqa: E402

import numpy as np  # noqa: E402

from core.answer.cache import embedder_word_similarity, lookup  # noqa: E402
from core.answer.cache_verifier import make_verifier, query_vector  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.types import CachedAnswer, CacheKey  # noqa: E402

PAIRS = ROOT / "bench" / "sets" / "cache_pairs_42.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = [json.loads(x) for x in PAIRS.read_text(encoding="utf-8").splitlines() if x.strip()]
    cfg = PipelineConfig()
    deps = build_deps(cfg, db=":memory:")
    emb = deps.embedder
    s = cfg.answer_cache
    verifier = make_verifier(emb, pair_model=s.pair_model) if s.verifier else None
    key = CacheKey("bench", 1, "h")
    now = datetime(2026, 1, 1)
    out = []
    for r in rows:
        served = []
        for new, old in ((r["a"], r["b"]), (r["b"], r["a"])):
            vo = np.asarray(query_vector(emb, old), dtype=np.float32)
            vo /= np.linalg.norm(vo) or 1.0
            vn = np.asarray(query_vector(emb, new), dtype=np.float32)
            vn /= np.linalg.norm(vn) or 1.0
            entry = CachedAnswer(key, old, vo, "stored answer", (), False, "extractive", now)
            res = lookup(new, vn, [entry], key, threshold=s.threshold, now=now, ttl_s=0,
                         covered_languages=emb.languages, use_guard=s.guard,
                         word_similarity=embedder_word_similarity(emb) if s.word_check else None,
                         word_floor=s.word_floor, swap_threshold=s.swap_threshold,
                         verifier=verifier if s.verifier else None, verifier_threshold=s.verifier_threshold)
            served.append({"new": new, "old": old, "verdict": res.verdict, "cosine": res.cosine,
                           "reason": res.reason})
        out.append({**r, "directions": served})
    summary: dict[str, Any] = defaultdict(dict)
    for lang in ("en", "ru"):
        bad = [d for r in out if not r["same"] and r["lang"] == lang for d in r["directions"]]
        good = [d for r in out if r["same"] and r["lang"] == lang for d in r["directions"]]
        summary[lang] = {"must_not_lookups": len(bad), "false_hits": sum(d["verdict"] == "hit" for d in bad),
                         "paraphrase_lookups": len(good),
                         "paraphrases_served": sum(d["verdict"] == "hit" for d in good),
                         "paraphrase_rate": round(sum(d["verdict"] == "hit" for d in good) / max(1, len(good)), 3)}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    for r in out:
        for d in r["directions"]:
            if (d["verdict"] == "hit") != r["same"]:
                print(f"{'FALSE HIT' if not r['same'] else 'missed'} [{r['lang']}/{r['kind']}] {d['new']} | {d['old']}"
                      f" cos={d['cosine']} {d['reason']}")
    if args.out:
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": dict(summary),
                                     "embedder": emb.model_id, "machine": machine_info(), "rows": out}, args.out)


if __name__ == "__main__":
    main()
