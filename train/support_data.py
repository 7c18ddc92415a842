"""The support model's public fitting data: the question sets and their splits (fixed before anything is fitted),
one pipeline run per question keeping what the answer stage reads, and the sentence tables and labels recomputed
from those runs. Shared by the recipe (train/support.py) and the bench that reports the shipped model's rates on the
report splits (bench/answer_public.py).

Sets (in ../shared/datasets, or RAG_DATASETS / --datasets):
- xquad: XQuAD articles 40-47, English questions over the English paragraphs (one paragraph a document). Gold span:
  the paragraph's sentence that contains the answer string (questions whose answer is in no one sentence are left
  out). Near-miss twins: the question with one specific term swapped for one the corpus does not hold (a year or
  number shifted to a value no passage states; a capitalised name replaced by an entity name of the other data set
  whose words no passage uses), each checked absent by searching the corpus text. Split by paragraph: even position
  in corpus_en.jsonl fits, odd position reports; a twin goes with its source. Also SQuAD-2.0-style unanswerables:
  every question of a quarter of the paragraphs (position % 4 == 0: fitting; == 1: report) asked in a workspace
  whose corpus omits those paragraphs, kept only when no remaining paragraph holds its answer string.
- twowiki: 2WikiMultihopQA, a seeded subsample of TW_QUESTIONS questions without yes/no answers and a corpus cut of
  TW_DOCS passages (gold passages plus random distractors), with near-miss twins. Report split: every question of the
  CAL_TW_QUESTIONS / CAL_TW_DOCS cut (bench/calibrate.py's default run); fitting split: the rest.
A sentence is correct for an answerable question when it lies in a gold passage and contains the answer string
(lower-cased, whitespace collapsed).
"""
from __future__ import annotations

import json
import pickle
import random
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from core.answer.support import claim_spans, late_sentence_scorer, reading_texts, sentence_table
from core.eval.answer import matches_gold
from core.eval.datasets import GoldenQuery, GoldenSet, passage_predoc
from core.eval.metrics import Gold
from core.text import sentence_spans, tokenize
from train.provenance import ROOT

CACHE = ROOT / "data" / "bench" / "answer_public_tables.pkl"
E5_CACHE = ROOT / "data" / "bench" / "answer_public_e5.pkl"
DEFAULT_DB = ROOT / "data" / "bench" / "answer_public.duckdb"
SEED = 0
TW_QUESTIONS, TW_DOCS = 140, 400
CAL_TW_QUESTIONS, CAL_TW_DOCS = 80, 300  # bench/calibrate.py's defaults: its questions stay out of the fitting split
FIT_SPLITS = ("xquad_fit", "twowiki_fit")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUM = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_UP = "A-ZÀ-ÖØ-ÞА-ЯЁ"
# a run of capitalised words that does not open the question: a name
_NAME = re.compile(rf"(?<=\s)([{_UP}][^\W\d_]+(?:[\s-]+(?:(?:of|de|von|van|the|der)\s+)?[{_UP}][^\W\d_]+)*)")


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def gold_sentence(text: str, answer: str) -> str | None:
    a = answer.strip().lower()
    if not a:
        return None
    for s, e in sentence_spans(text):
        if a in text[s:e].lower():
            return " ".join(text[s:e].split())
    return None


def near_miss(question: str, corpus_text: str, vocab: set[str], names: list[str], rng: random.Random) -> str | None:
    """The question with one specific term swapped for one the corpus does not hold (checked by search), or None."""
    low = corpus_text.lower()
    m = _YEAR.search(question)
    if m:
        y = int(m.group(1))
        for d in (7, -7, 13, -13, 23, 31):
            if str(y + d) not in corpus_text:
                return question[: m.start()] + str(y + d) + question[m.end():]
    for m in _NAME.finditer(question):
        for cand in rng.sample(names, min(40, len(names))):
            words = set(tokenize(cand))
            if words and not (words & vocab) and cand.lower() not in low:
                return question[: m.start()] + cand + question[m.end():]
    m = _NUM.search(question)
    # a number of two digits or more (a count, a size), not a constant of the wording ('greater than 1')
    if m and m.group(0).isdigit() and len(m.group(0)) >= 2:
        n = int(m.group(0))
        for v in (n * 3 + 7, n * 7 + 11, n + 97):
            if str(v) not in corpus_text:
                return question[: m.start()] + str(v) + question[m.end():]
    return None


def build_set(name: str, docs: list[tuple[str, str, str]], items: list[tuple[str, str, str, str]],
              names: list[str], seed: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    """docs: (id, title, text); items: (qid, question, answer, gold doc id). Returns the set (answerable questions
    with a gold sentence + their near-miss twins), each question's split, and counts."""
    ws = f"bench_cal_{name}"
    rng = random.Random(seed)
    by_id = {d: (t, x) for d, t, x in docs}
    order = {d: i for i, (d, _, _) in enumerate(docs)}
    corpus_text = "\n".join(x for _, _, x in docs)
    vocab = set(tokenize(corpus_text))
    queries: list[GoldenQuery] = []
    split: dict[str, str] = {}
    counts = {"questions": len(items), "no_gold_sentence": 0, "twins": 0, "no_twin": 0}
    for qid, question, answer, doc in items:
        sent = gold_sentence(by_id[doc][1], answer) if doc in by_id else None
        if sent is None:
            counts["no_gold_sentence"] += 1
            continue
        part = "fit" if order[doc] % 2 == 0 else "report"
        queries.append(GoldenQuery(qid, question, "factoid", True, (Gold(doc=doc, text=sent, match="span"),), answer,
                                   len(queries) + 1))
        split[qid] = part
        twin = near_miss(question, corpus_text, vocab, names, rng)
        if twin is None or twin == question:
            counts["no_twin"] += 1
            continue
        queries.append(GoldenQuery(qid + "-nm", twin, "unanswerable", False, (), "", len(queries) + 1))
        split[qid + "-nm"] = part
        counts["twins"] += 1
    predocs = lambda: [passage_predoc(d, d, t, x, "en", ws) for d, t, x in docs]  # noqa: E731
    gs = GoldenSet(name, queries, unit="chunk", workspace=ws, doc_key="id", source=name, predocs=predocs)
    return gs, split, counts


def xquad(root: Path, seed: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    path = root / "xquad_crosslingual"
    docs = [(d["id"], d["title"], d["text"]) for d in jsonl(path / "corpus_en.jsonl")]
    items = [(q["id"], q["question"], q["answer"], q["gold"][0]) for q in jsonl(path / "questions.jsonl")
             if q["lang"] == "en"]
    names = sorted({d["title"] for d in jsonl(root / "twowiki_multihop" / "corpus.jsonl")})
    return build_set("xquad_en", docs, items, names, seed)


def twowiki(root: Path, seed: int, n_questions: int, n_docs: int) -> tuple[GoldenSet, dict[str, str], dict[str, Any]]:
    path = root / "twowiki_multihop"
    corpus = jsonl(path / "corpus.jsonl")
    by_title: dict[str, dict[str, Any]] = {}
    for d in corpus:
        by_title.setdefault(d["title"].strip(), d)
    qs = [q for q in jsonl(path / "questions.jsonl") if q["answer"].lower() not in ("yes", "no")]
    rng = random.Random(seed)
    items, wanted = [], []
    for q in rng.sample(qs, len(qs)):
        golds = [by_title[t] for t in q["gold_titles"] if t in by_title]
        hit = next((g for g in golds if gold_sentence(f"{g['title']}\n{g['text']}", q["answer"])), None)
        if hit is None:
            continue
        items.append((q["id"], q["question"], q["answer"], str(hit["id"])))
        wanted += golds
        if len(items) >= n_questions:
            break
    keep = {str(g["id"]) for g in wanted}
    others = [d for d in corpus if str(d["id"]) not in keep]
    keep |= {str(d["id"]) for d in rng.sample(others, max(0, min(len(others), n_docs - len(keep))))}
    docs = [(str(d["id"]), d["title"].strip(), f"{d['title'].strip()}\n{d['text'].strip()}") for d in corpus
            if str(d["id"]) in keep]
    names = sorted({d["title"] for d in jsonl(root / "xquad_crosslingual" / "corpus_en.jsonl")} |
                   {d["title"].replace("_", " ") for d in jsonl(root / "xquad_crosslingual" / "corpus_en.jsonl")})
    # xquad's eight titles are too few to swap names from: entity names of twowiki passages outside this cut too
    names = sorted(set(names) | {d["title"].strip() for d in others})
    return build_set(f"twowiki_q{n_questions}_d{n_docs}_s{seed}", docs, items, names, seed)



def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def public_label(sentence: str, doc_id: str, answer: str, gold_docs: frozenset[str]) -> bool:
    """A correct sentence: in a gold passage and holding the answer string (lower-cased, whitespace collapsed)."""
    a = _norm(answer)
    return bool(a) and doc_id in gold_docs and a in _norm(sentence)


def _omitted(root: Path) -> tuple[GoldenSet, dict[str, str]]:
    """xquad questions asked where their gold paragraph is missing: unanswerable when no paragraph left holds the
    answer string. Paragraph position % 4 == 0 -> fitting split, == 1 -> report split (both omitted here)."""
    path = root / "xquad_crosslingual"
    docs = [(d["id"], d["title"], d["text"]) for d in jsonl(path / "corpus_en.jsonl")]
    pos = {d: i for i, (d, _, _) in enumerate(docs)}
    gone = {d for d, i in pos.items() if i % 4 in (0, 1)}
    kept = [x for x in docs if x[0] not in gone]
    kept_text = _norm("\n".join(x for _, _, x in kept))
    ws = "bench_pub_xquad_omit"
    queries, split = [], {}
    for q in jsonl(path / "questions.jsonl"):
        doc = q["gold"][0]
        if q["lang"] != "en" or doc not in gone or _norm(q["answer"]) in kept_text:
            continue
        qid = q["id"] + "-omit"
        queries.append(GoldenQuery(qid, q["question"], "unanswerable", False, (), "", len(queries) + 1))
        split[qid] = "xquad_fit" if pos[doc] % 4 == 0 else "xquad_report"
    predocs = lambda: [passage_predoc(d, d, t, x, "en", ws) for d, t, x in kept]  # noqa: E731
    return GoldenSet("xquad_en_omit", queries, unit="chunk", workspace=ws, doc_key="id", source="xquad_omit",
                     predocs=predocs), split


def public_sets(root: Path) -> list[tuple[str, GoldenSet, dict[str, str]]]:
    """(set name, golden set, question id -> split) for every public set; splits fixed before any fitting."""
    gs, split, _ = xquad(root, SEED)
    xq = {q: f"xquad_{s}" for q, s in split.items()}
    tw, tw_split, _ = twowiki(root, SEED, TW_QUESTIONS, TW_DOCS)
    cal, cal_split, _ = twowiki(root, SEED, CAL_TW_QUESTIONS, CAL_TW_DOCS)
    tw_sp = {q: "twowiki_report" if q in cal_split else "twowiki_fit" for q in tw_split}
    om, om_split = _omitted(root)
    return [("xquad", gs, xq), ("twowiki", tw, tw_sp), ("xquad_omit", om, om_split)]


def collect(source: str, db: Path, root: Path, limit: int | None, out: Path = CACHE,
            sample_items: list[tuple[str, GoldenQuery, str, str]] | None = None) -> None:
    """One pipeline run per question (answer cache off; the answer stage off too: its decision is recomputed from
    the kept inputs by every model compared, and its e5 reads are the slow part), keeping what the answer reads.
    `source` "public": the sets above; otherwise `sample_items` (set, question, split, id), e.g. a bench's report-only
    sets, into the database `db` already holds them in (workspace "default")."""
    from core.cascade.rerank import LateInteractionReranker
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.eval.run import prepare
    from core.pipeline import run_query
    from core.store import Store

    db.parent.mkdir(parents=True, exist_ok=True)
    cfg = PipelineConfig.model_validate({"answer": {"mode": "extractive", "enabled": False},
                                         "answer_cache": {"enabled": False}})
    deps = build_deps(cfg, store=Store(str(db)))
    late = deps.reranker_for("late-interaction")[0]
    assert isinstance(late, LateInteractionReranker)
    if source == "public":
        work = []
        for set_name, gs, split in public_sets(root):
            ws = gs.workspace or ""
            resolved, notes = prepare(gs, deps, workspace=ws, config=cfg)
            print(f"{set_name}: {len(resolved.queries)} questions; {'; '.join(notes)}", file=sys.stderr)
            qs = resolved.queries[:limit] if limit else resolved.queries
            work += [(set_name, q, split[q.qid], ws) for q in qs]
    else:
        work = [(s, q, sp, "default") for s, q, sp, _ in sample_items or []][:limit]
    rows: list[dict[str, Any]] = []
    scorers: dict[str, Any] = {}
    t0 = time.perf_counter()
    for i, (set_name, q, split, ws) in enumerate(work, 1):
        scorer = scorers.setdefault(ws, late_sentence_scorer(late, workspace=ws))
        t = time.perf_counter()
        trace = run_query(q.query, cfg, deps, workspace=ws, log=False)
        ms = (time.perf_counter() - t) * 1000
        final = trace.final()
        cands = list(final.candidates)[: cfg.answer.max_chunks] if final else []
        blind = trace.query_lang not in (deps.embedder.languages or {trace.query_lang})
        titles = deps.store.corpus.document_titles([c.doc_id for c in cands], ws)
        full = {cid: ch.text for cid, ch in deps.store.corpus.chunks_by_id([c.chunk_id for c in cands],
                                                                            ws).items()}
        read = reading_texts(cands, full)
        li = None if blind or not cands else scorer(q.query, [(c.text, claim_spans(c.text)) for c in read])
        gold_docs = sorted({g.doc for g in q.gold if g.doc} | {d for g in q.gold for d in g.doc_ids})
        rows.append({"id": q.qid, "set": set_name, "split": split, "query": q.query, "type": q.qtype,
                     "answerable": q.answerable, "answer_str": q.reference, "gold_docs": gold_docs,
                     "gold": [g.text for g in q.gold], "ws": ws, "db": str(db), "blind": blind, "cands": cands,
                     "titles": titles, "li": li, "full": full, "ms": ms, "answer": None})
        print(f"\r[{i}/{len(work)}] {set_name} {ms:.0f} ms   ", end="", file=sys.stderr)
    print(file=sys.stderr)
    path = out
    path.write_bytes(pickle.dumps({"rows": rows, "collected_at": utc_now(), "db": str(db),
                                   "seconds": round(time.perf_counter() - t0, 1), "source": source,
                                   "tw_questions": TW_QUESTIONS, "tw_docs": TW_DOCS, "seed": SEED}))
    print(f"collected {len(rows)} questions in {time.perf_counter() - t0:.0f} s -> {path}", file=sys.stderr)


def _vocabulary(db: str, ws: str) -> frozenset[str]:
    from core.config import PipelineConfig
    from core.retrieve.bm25 import BM25Params
    from core.retrieve.index import IndexCache
    from core.store import Store

    b = PipelineConfig().bm25
    store = Store(db, read_only=True)
    try:
        return IndexCache().bm25(store, ws, BM25Params(b.k1, b.b, b.method, b.split_identifiers, b.stem)).vocabulary()
    finally:
        store.close()


class LazyE5:
    """r['xenc'] read lazily: train.e5_scorer's cosine of the question and a sentence (pretrained, nothing
    fitted), computed the first time a model asks for that sentence (models read only their top-k sentences; e5 on
    every sentence of every question would take an hour on this machine) and kept in a shared cache."""

    def __init__(self, query: str, texts: list[str], cache: dict[tuple[str, str], float]) -> None:
        self.query, self.texts, self.cache = query, texts, cache

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, idx: Any) -> Any:
        from train.e5_scorer import score

        flat = np.atleast_1d(np.asarray(idx, dtype=int))
        need = sorted({int(i) for i in flat if (self.query, self.texts[int(i)]) not in self.cache})
        if need:
            for i, v in zip(need, score(self.query, [self.texts[i] for i in need])):
                self.cache[(self.query, self.texts[i])] = float(v)
        out = np.array([self.cache[(self.query, self.texts[int(i)])] for i in flat], dtype=np.float64)
        return out if np.ndim(idx) else out[0]


_E5: dict[tuple[str, str], float] = {}


def _with_e5(data: dict[str, Any]) -> None:
    from train.e5_scorer import pair_text

    if not _E5 and E5_CACHE.exists():
        _E5.update(pickle.loads(E5_CACHE.read_bytes()))
    for r in data["rows"]:
        r["xenc"] = LazyE5(r["query"], [pair_text(x.context, x.text) for x in r["table"].rows], _E5)


def save_e5() -> None:
    """Merge this run's e5 values into the cache file (two runs may share it)."""
    got = pickle.loads(E5_CACHE.read_bytes()) if E5_CACHE.exists() else {}
    got.update(_E5)
    E5_CACHE.write_bytes(pickle.dumps(got))


def _load(path: Path) -> dict[str, Any]:
    """Collected questions with their features recomputed (the workspace's own BM25 vocabulary, as the answer stage
    reads it) and labelled: public sets by public_label, sample sets by matches_gold on their gold spans."""
    data = pickle.loads(path.read_bytes())
    vocab = {k: _vocabulary(*k) for k in {(r["db"], r["ws"]) for r in data["rows"]}}
    for r in data["rows"]:
        r["table"] = sentence_table(r["query"], r["cands"], titles=r["titles"], li_scores=r["li"],
                                    vocabulary=vocab[(r["db"], r["ws"])], full_texts=r.get("full"))
        if data["source"] == "public":
            gd = frozenset(r["gold_docs"])
            r["labels"] = [r["answerable"] and public_label(x.text, x.doc_id, r["answer_str"], gd)
                           for x in r["table"].rows]
        else:
            r["labels"] = [matches_gold(x.text, r["gold"]) for x in r["table"].rows]
    _with_e5(data)
    return data


def load_public() -> dict[str, Any]:
    return _load(CACHE)


def load_tables(path: Path) -> dict[str, Any]:
    return _load(path)


def fitting_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in data["rows"] if r["split"] in FIT_SPLITS and r["table"].rows]
