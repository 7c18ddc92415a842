"""Answer-cache guard benchmark: hit / false-hit curves over the cosine threshold, with and without the guard.

Pairs: ../shared/datasets/cache_pairs/pairs.jsonl (NaN-NLI contradiction + neutral and SemEval question pairs scored
<= 2 must not share an answer; SemEval pairs scored >= 4 should) plus pairs of our own, generated below from
templates written for this bench (EN and RU: negation, antonym, changed number, changed name / identifier, and
paraphrases that keep every slot) and hand-written pairs in bench/sets/cache_pairs_extra.jsonl (EN and RU: each base
question with a rewording, and one-fact changes: negation, antonym, number, name, and a swapped object or topic,
which are the hard ones for an embedder). The thresholds are chosen on one split (a hash of the pair) and reported on
the other.

The second check (core/answer/cache_verifier.py): a logistic regression over the embedder's token vectors of both
questions and the guard's rules, fitted on dev pairs only. Its thresholds are chosen on out-of-fold probabilities
(5 folds grouped by the first question, dev only); the model fitted on the whole dev split scores the test split and
is what --save-model ships. A third hand-written batch (bench/sets/cache_pairs_extra_dev.jsonl) is dev only.

Run from the repo root:  .venv/bin/python bench/answer_cache.py [--datasets DIR] [--out PATH] [--save-model]
                         .venv/bin/python bench/answer_cache.py --replay   (sample_corpus log -> answer_cache_replay.json)
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _common import datasets_dir, machine_info, utc_now, write_result  # noqa: E402

from core.answer.cache import content_only, features, guard, same_words  # noqa: E402

TARGET_FALSE = 0.005
TARGET_HIT = 0.50
WORD_FLOOR = 0.3  # word cosine below which a swapped word counts as a different thing
GRID = [round(0.60 + 0.01 * i, 2) for i in range(41)]  # 0.60 .. 1.00
SWAP_GRID: list[float | None] = [round(0.80 + 0.01 * i, 2) for i in range(21)]  # 0.80 .. 1.00
ROOT = Path(__file__).resolve().parents[1]
EXTRA = ROOT / "bench" / "sets" / "cache_pairs_extra.jsonl"  # hand-written pairs (EN + RU), see its README
EXTRA_DEV = ROOT / "bench" / "sets" / "cache_pairs_extra_dev.jsonl"  # batch 3: dev only (fits the verifier)
# Batch 6: unscored SemEval pairs labelled here (dev only; none shares a question with a test-split pair): the only
# dev pairs from the same StackExchange distribution as the SemEval paraphrases the target counts.
SEMEVAL_DEV = ROOT / "bench" / "sets" / "cache_pairs_semeval_dev.jsonl"
# Issue #33 item 12, reported apart (never fitted or chosen on): our pairs of a changed direction of change
# (increase / reduce, растёт / падает) and of one changed word of a title, role or unit, with paraphrases that keep
# them; written after the two rules, so they show what the rules do, not a held-out rate.
DIRECTION_OWN = ROOT / "bench" / "sets" / "cache_pairs_direction.jsonl"
# SciFact claims with near-identical wording and opposite evidence: the same abstract SUPPORTs one and CONTRADICTs
# the other, and at least half their words are shared (token Jaccard >= 0.5; fixed before looking at any verdict).
SCIFACT_JACCARD = 0.5
PROB_GRID = [round(0.05 * i, 2) for i in range(20)]
# What the product runs by default, when it is not the dev split's winner (default_variant), and why.
PRODUCT_DEFAULT = {
    "variant": "vetoes+verifier(no batch 6)",
    "why": "Decided on dev and the replay BEFORE the fifth look at the test split. The dev rule ranks "
           "vetoes+verifier+pair_model first (6/22 SemEval dev paraphrases, 88/270 paraphrases, at 4/989 dev false "
           "hits), but the pair model, refitted with batch 6, still scores the sample corpus's plain rewordings low: "
           "replayed with it (its dev choice, threshold 0.68, P 0.65) the cache served 2/21 paraphrases against 13/21 "
           "without it ('How many pump stations are covered by Project Bluefin?' / '... does Project Bluefin cover?' "
           "averaged P 0.49), so it stays opt-in. Next by the same rule: the verifier fitted without batch 6 (5/22, 113/270 paraphrases, 4/989) "
           "ahead of the one fitted with it (3/22, 108/270, 4/989; counting batch 6's own SemEval-style paraphrases "
           "too, 15 vs 12 of 41): batch 6's 303 in-distribution negatives make the regression stricter on every "
           "SemEval-looking pair, the paraphrases included. So batch 6 chooses the thresholds (0.75 / P 0.60; the "
           "previous 0.73 / 0.55 serve 10/989 dev false hits with it, 8 of them batch 6's) and does not fit the "
           "shipped verifier."}
# Out-of-fold P(same) of the fine-tuned pair model (bench/answer_cache_pair_model.py --cv) on the dev pairs.
PAIR_OOF = ROOT / "bench" / "results" / "answer_cache_pair_oof.json"
# The verifier's first held-out run (commit 81bbe0a, bench/results/answer_cache.json there) was read before this
# revision: it is recorded here, and batch 4 (fresh2) is the measure nothing was chosen on.
FIRST_LOOK = (
    "The test split was looked at once before the current code: the first verifier (numbers on one side soft, like "
    "names) served 10/614 must-not-share test pairs (1.6%; 5 of them a number added on one side, e.g. 'an egg' / "
    "'three eggs') with 15/27 SemEval hits (commit 81bbe0a). That run led to one change: numbers are a veto again. "
    "The test rows below are therefore a second look; batch 4 ('fresh2', written after the first look and before any "
    "run on it) is the clean held-out measure of this revision. A second run (numbers a veto) served 15/702 test pairs "
    "with 14/27 SemEval hits and, in the replay, one changed question ('How many employees work in Corvane's Gdansk "
    "office?' from 'In which year did Corvane open its Gdansk office?'); that led to one more rule (an amount vs a "
    "point in time: 'how many' / 'which year'), so these test rows, batch 4 included, were a third look (15/702, "
    "14/27). This run (session 5) is the FOURTH look. Changed since the third, all chosen on dev only: 106 more "
    "hand-written dev pairs (batch 5: narrowing details, sibling swaps, EN + RU; the third look's verifier served 8 "
    "of its 75 must-not-share pairs before they were added), so the verifier is refitted and every threshold "
    "re-chosen on 937 dev pairs; and a new second check, the bundled MiniLM fine-tuned as a pair classifier on the "
    "dev pairs (vetoes+verifier+pair_model: the mean of its P and the verifier's), compared on out-of-fold dev P "
    "(pair_model_dev_only) before this run. Nothing was chosen on this run's test rows; it was executed twice with "
    "the same code for the numbers (the second time only to record product_default, decided from the replay). "
    "This run (session 6) is the FIFTH look. Changed since the fourth, all chosen on dev and on the replay before "
    "this run (bench/answer_cache.py --dev-only prints no test row): batch 6, 337 unscored SemEval pairs labelled by "
    "reading (19 pos, 303 neg, 15 skipped), none sharing a question with a test pair, joins dev; the folds group pairs "
    "linked by a shared question (not only by the first question); a word 'one' / 'single' no longer counts as a "
    "number; the shipped verifier and the product default (product_default) and its thresholds were fixed before "
    "this run; the pair model was refitted with batch 6. Nothing was chosen on this run's test rows.")  # verifier P(same) thresholds 0 .. 0.95
VERIFIER_C = 0.1  # L2 strength of the verifier's logistic regression (few, correlated features: keep it smooth)

# -- our own pairs --------------------------------------------------------------------------------------------------
# Each template: (question, paraphrase, negated question) with slots {v} (one side of an antonym pair), {name}, {n}.
EN_TEMPLATES = [
    ("How do I {v} the request timeout of {name} to {n} seconds?",
     "What is the way to {v} {name}'s request timeout to {n} seconds?",
     "Why can I not {v} the request timeout of {name} to {n} seconds?"),
    ("Can {name} {v} files larger than {n} MB?",
     "Is {name} able to {v} files bigger than {n} MB?",
     "Can {name} not {v} files larger than {n} MB?"),
    ("What happens if I {v} the cache on {name} after {n} days?",
     "What occurs when I {v} {name}'s cache after {n} days?",
     "What happens if I never {v} the cache on {name} after {n} days?"),
    ("How much does it cost to {v} {n} licences of {name}?",
     "What is the price to {v} {n} licences of {name}?",
     "How much does it cost not to {v} {n} licences of {name}?"),
    ("Should I {v} port {n} on the {name} firewall?",
     "Is it advisable to {v} port {n} on the {name} firewall?",
     "Should I not {v} port {n} on the {name} firewall?"),
    ("Which {name} release lets me {v} {n} users at once?",
     "Which release of {name} allows me to {v} {n} users at once?",
     "Which {name} release does not let me {v} {n} users at once?"),
    ("How long does it take to {v} a {n} GB backup with {name}?",
     "How much time is needed to {v} a {n} GB backup with {name}?",
     "How long does it take to not {v} a {n} GB backup with {name}?"),
    ("Where do I {v} the API key for {name} in version {n}?",
     "In version {n} of {name}, where do I {v} the API key?",
     "Where do I never {v} the API key for {name} in version {n}?"),
]
EN_VERBS = [("enable", "disable"), ("increase", "decrease"), ("upload", "download"), ("open", "close"),
            ("add", "remove"), ("lock", "unlock"), ("import", "export"), ("install", "uninstall"),
            ("encrypt", "decrypt"), ("allow", "block")]
EN_NAMES = ["Kafka", "Postgres", "Nginx", "Grafana", "Redis", "Jenkins", "Terraform", "Vault", "Airflow", "Keycloak"]
RU_TEMPLATES = [
    ("Как {v} тайм-аут запроса в {name} до {n} секунд?",
     "Каким образом {v} тайм-аут запроса в {name} до {n} секунд?",
     "Почему нельзя {v} тайм-аут запроса в {name} до {n} секунд?"),
    ("Может ли {name} {v} файлы больше {n} МБ?",
     "Способен ли {name} {v} файлы больше {n} МБ?",
     "Может ли {name} не {v} файлы больше {n} МБ?"),
    ("Сколько стоит {v} {n} лицензий {name}?",
     "Какова цена, чтобы {v} {n} лицензий {name}?",
     "Сколько стоит не {v} {n} лицензий {name}?"),
    ("Нужно ли {v} порт {n} на межсетевом экране {name}?",
     "Следует ли {v} порт {n} на межсетевом экране {name}?",
     "Нужно ли не {v} порт {n} на межсетевом экране {name}?"),
    ("Что будет, если {v} кэш {name} через {n} дней?",
     "Что произойдёт, если {v} кэш {name} через {n} дней?",
     "Что будет, если никогда не {v} кэш {name} через {n} дней?"),
]
RU_VERBS = [("включить", "выключить"), ("увеличить", "уменьшить"), ("загрузить", "выгрузить"),
            ("открыть", "закрыть"), ("добавить", "удалить"), ("подключить", "отключить")]
RU_NAMES = ["Кафка", "Постгрес", "Графана", "Дженкинс", "Терраформ", "Вольт"]
NUMBERS = [2, 3, 5, 10, 30, 64, 100, 443, 2024]


def own_pairs(seed: int = 7) -> list[dict[str, Any]]:
    """Negative pairs (label 'neg', with the kind of change) and paraphrase pairs (label 'pos')."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for lang, templates, verbs, names in (("en", EN_TEMPLATES, EN_VERBS, EN_NAMES),
                                          ("ru", RU_TEMPLATES, RU_VERBS, RU_NAMES)):
        for (q, para, neg), (v, anti) in itertools.product(templates, verbs):
            name, other = rng.sample(names, 2)
            n, m = rng.sample(NUMBERS, 2)
            base = q.format(v=v, name=name, n=n)
            for kind, text in (("antonym", q.format(v=anti, name=name, n=n)),
                               ("number", q.format(v=v, name=name, n=m)),
                               ("name", q.format(v=v, name=other, n=n)),
                               ("negation", neg.format(v=v, name=name, n=n))):
                out.append({"a": base, "b": text, "label": "neg", "kind": kind, "lang": lang})
            out.append({"a": base, "b": para.format(v=v, name=name, n=n), "label": "pos", "kind": "paraphrase",
                        "lang": lang})
    return out


# -- statistics -----------------------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, centre - half), min(1.0, centre + half))


def split_of(a: str, b: str) -> str:
    return "dev" if hashlib.sha1(f"{a}\x1f{b}".encode()).digest()[0] % 2 == 0 else "test"


def rate(mask: np.ndarray, sel: np.ndarray) -> dict[str, Any]:
    k, n = int(mask[sel].sum()), int(sel.sum())
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


# -- replay: sample_corpus questions, then our paraphrases (should be served) and changed questions (must not) -------
PARAPHRASES = {
    "q01": "What revenue did Corvane's Industrial Hardware division report for Q2 2024?",
    "q04": "When was Meridian made generally available?",
    "q05": "How long was the June 2024 ingestion outage at Nordhaven Ports?",
    "q06": "Under the final remote work policy, how many days a week can employees work remotely?",
    "q07": "How big is the home office equipment stipend in the final remote work policy?",
    "q09": "How many pump stations are covered by Project Bluefin?",
    "q10": "What operating temperature range does the FB-340 Rugged gateway have?",
    "q11": "What is the daily meal allowance on international business trips?",
    "q15": "What's the default value of MAX_POOL_SIZE in Tidewater 4.9?",
    "q16": "What does the error code E-TDW-4107 mean, and what should be done first?",
    "q18": "What does the retryBackoffMs setting control, and what is its default?",
    "q19": "Which product has SKU FB-0520-X?",
    "q20": "What does HISTORIAN_SHARD_COUNT configure, and what is its default value?",
    "q22": "What is the SKU SM-0091-P?",
    "q23": "What's the default value of maxInflightBatches in the uplink agent?",
    "q24": "What does the error code E-FOS-0412 indicate?",
    "q31": "At what rate do the vibration sensors on Project Bluefin's pumps sample vibration?",
    "q47": "What is the FB-340 Rugged gateway's list price?",
    "q48": "How many weeks of paid parental leave do employees at Corvane get?",
    "q50": "Which year did Corvane open its Gdańsk office?",
    "q34": "Кто руководит алматинским офисом Corvane",
}
CHANGED = {
    "q01": "What was the revenue of Corvane's Industrial Hardware division in Q3 2024?",
    "q02": "How did the Hardware division's revenue change in Q3 2024 compared with Q2 2024?",
    "q04": "When did Tidewater become generally available?",
    "q05": "How long did the July 2024 ingestion outage at Nordhaven Ports last?",
    "q06": "Under the draft remote work policy, how many days per week may employees work remotely?",
    "q11": "What is the daily meal allowance for domestic business trips?",
    "q15": "What is the default value of MAX_POOL_SIZE in Tidewater 5.0?",
    "q16": "What does error code E-TDW-4108 mean and what is the recommended first action?",
    "q19": "Which product has the SKU FB-0521-X?",
    "q23": "What is the default value of minInflightBatches in the uplink agent?",
    "q28": "Why was the pilot of the project that Tomas Rehak works on postponed?",
    "q48": "How many weeks of unpaid parental leave do Corvane employees receive?",
    "q49": "Which public cloud provider does not host the Meridian platform?",
    "q50": "In which year did Corvane close its Gdańsk office?",
    "q51": "How many employees work in Corvane's Gdańsk office?",
    "q34": "Кто не руководит алматинским офисом Corvane?",
    "q52": "Сколько стоит месячная подписка Meridian для ТОО «Урал-Степь Агро»?",
}


def replay(out: Path | None, overrides: dict[str, Any] | None = None) -> int:
    """Ingest sample_corpus, ask every eval question once (misses that fill the cache), then exact repeats, our
    paraphrases and our changed questions; count verdicts and the ms the hits saved. `overrides` (--set) replays a
    candidate configuration instead of the default (to judge a default on the product's own questions before any
    held-out look)."""
    import tempfile

    from core.answer.cache_verifier import make_verifier
    from core.config import PipelineConfig
    from core.deps import build_deps
    from core.ingest.pipeline import ingest_files, read_paths
    from core.pipeline import run_query
    from core.store import Store

    root = Path(__file__).resolve().parents[1]
    started = utc_now()
    questions = {json.loads(l)["id"]: json.loads(l)["query"]
                 for l in (root / "sample_corpus" / "eval.jsonl").read_text().splitlines() if l.strip()}
    cfg = PipelineConfig().with_overrides(overrides or {})
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "replay.duckdb")
        deps = build_deps(cfg, {}, store=store)  # no key: offline answers, so saved $ is 0 by construction
        ingest_files(read_paths([str(root / "sample_corpus" / "docs")]), store=store, embedder=deps.embedder,
                     config=cfg)
        log: list[dict[str, Any]] = []

        def ask(kind: str, qid: str, text: str) -> None:
            t0 = time.perf_counter()
            tr = run_query(text, cfg, deps)
            wall = (time.perf_counter() - t0) * 1000
            info = tr.stages[0].info
            log.append({"kind": kind, "id": qid, "query": text, "verdict": info.get("verdict"),
                        "cosine": info.get("cosine"), "nearest": info.get("nearest_question"),
                        "reason": info.get("guard_reason"), "wall_ms": round(wall, 1),
                        "cache_stage_ms": round(tr.stages[0].ms, 2),
                        "saved_ms": info.get("saved_ms", 0.0), "saved_usd": info.get("saved_usd", 0.0),
                        "refused": bool(tr.answer and tr.answer.refused)})

        for qid, q in questions.items():
            ask("first", qid, q)
        for qid, q in questions.items():
            ask("repeat", qid, q)
        for qid, q in PARAPHRASES.items():
            ask("paraphrase", qid, q)
        for qid, q in CHANGED.items():
            ask("changed", qid, q)
        store.close()

    def summary(kind: str) -> dict[str, Any]:
        rows = [r for r in log if r["kind"] == kind]
        hits = [r for r in rows if r["verdict"] == "hit"]
        lo, hi = wilson(len(hits), len(rows))
        return {"n": len(rows), "hits": len(hits), "guarded_misses": sum(r["verdict"] == "guarded_miss" for r in rows),
                "hit_rate": round(len(hits) / len(rows), 4) if rows else None, "ci95": [round(lo, 4), round(hi, 4)],
                "saved_ms": round(sum(r["saved_ms"] for r in hits), 1),
                "saved_usd": round(sum(r["saved_usd"] for r in hits), 6),
                "median_wall_ms_hit": statistics.median([r["wall_ms"] for r in hits]) if hits else None,
                "median_wall_ms_miss": statistics.median([r["wall_ms"] for r in rows if r["verdict"] != "hit"])
                if len(hits) < len(rows) else None,
                # the answer_cache stage alone (query encode + lookup + guard + verifier when asked)
                "cache_stage_ms_median": statistics.median([r["cache_stage_ms"] for r in rows]) if rows else None,
                "cache_stage_ms_max": max(r["cache_stage_ms"] for r in rows) if rows else None}

    first = [r for r in log if r["kind"] == "first"]
    payload = {
        "machine": machine_info(), "started": started, "finished": utc_now(),
        "config": {"threshold": cfg.answer_cache.threshold, "guard": cfg.answer_cache.guard,
                   "word_check": cfg.answer_cache.word_check, "verifier": cfg.answer_cache.verifier,
                   "verifier_threshold": cfg.answer_cache.verifier_threshold,
                   "pair_model": cfg.answer_cache.pair_model,
                   "verifier_active": make_verifier(deps.embedder) is not None, "overrides": overrides or {}},
        "note": "offline (no key): extractive answers cost $0, so saved $ is 0; refused first answers are not cached, "
                "so their repeats miss by design",
        "first_refused": sum(r["refused"] for r in first),
        "summary": {k: summary(k) for k in ("first", "repeat", "paraphrase", "changed")},
        "false_hits": [r for r in log if r["kind"] == "changed" and r["verdict"] == "hit"],
        "log": log,
    }
    path = write_result("answer_cache_replay", payload, out)
    print(json.dumps(payload["summary"], indent=1))
    print(f"wrote {path}")
    return 0


def load_rows(datasets: str | None, extra: Path, extra_dev: Path | None = None,
              semeval_dev: Path | None = SEMEVAL_DEV) -> list[dict[str, Any]]:
    """Public pairs (labelled as the dataset README says), our templated pairs, our hand-written pairs and our labels
    of unscored SemEval pairs (pos / neg only: 'skip' and the header line are left out)."""
    src = datasets_dir(datasets) / "cache_pairs" / "pairs.jsonl"
    rows: list[dict[str, Any]] = []
    for line in src.read_text().splitlines():
        p = json.loads(line)
        s = p["label_or_score"]
        if p["source"] == "nan-nli":
            label = "neg" if s in ("contradiction", "neutral") else None
            kind = f"nan-nli {s}"
        else:
            label = None if s is None else ("neg" if s <= 2 else "pos" if s >= 4 else None)
            kind = f"sts score {s:g}" if s is not None else "sts unscored"
        if label:
            rows.append({"a": p["a"], "b": p["b"], "label": label, "kind": kind, "lang": "en", "origin": "public"})
    rows += [{**p, "origin": "templated"} for p in own_pairs()]
    # Batch 1 was written first (its dev half tuned the guard); batch 2 was written after the guard's lexicon had been
    # widened from batch 1's misses and is never used to choose anything: all of it is reported, as 'fresh'. Batch 4
    # ('fresh2') was written after the verifier's first held-out run, before any run on it: the clean measure of the
    # revision that run led to (numbers a veto again).
    for line in extra.read_text().splitlines():
        if line.strip():
            p = json.loads(line)
            rows.append({**p, "origin": {1: "written", 2: "fresh", 4: "fresh2"}[p.get("batch", 1)]})
    if extra_dev is not None and extra_dev.exists():
        rows += [{**json.loads(line), "origin": "written_dev"} for line in extra_dev.read_text().splitlines()
                 if line.strip()]
    if semeval_dev is not None and semeval_dev.exists():
        rows += [{**p, "origin": "semeval_dev"} for line in semeval_dev.read_text().splitlines() if line.strip()
                 for p in [json.loads(line)] if p.get("label") in ("pos", "neg")]
    return rows


def scifact_contradicting_pairs(datasets: str | None) -> list[dict[str, Any]]:
    """Pairs of SciFact claims (train, validation and test claim files of the upstream release) that one abstract
    supports and the other contradicts, sharing >= SCIFACT_JACCARD of their words: must not share an answer."""
    import csv
    import io
    import re
    import zipfile

    src = datasets_dir(datasets) / "beir_scifact" / "source" / "scifact.zip"
    if not src.exists():
        return []
    labels: dict[str, dict[str, set[str]]] = {}
    with zipfile.ZipFile(src) as z:
        for name in ("claims_train.csv", "claims_validation.csv", "claims_test.csv"):
            for row in csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8")):
                if row["evidence_doc_id"] and row["evidence_label"]:
                    labels.setdefault(row["evidence_doc_id"], {}).setdefault(" ".join(row["claim"].split()),
                                                                            set()).add(row["evidence_label"])

    def words(t: str) -> set[str]:
        return set(re.findall(r"\w+", t.lower()))

    seen: set[tuple[str, str]] = set()
    out = []
    for doc in sorted(labels):
        claims = labels[doc]
        for a in sorted(c for c, ls in claims.items() if "SUPPORT" in ls):
            for b in sorted(c for c, ls in claims.items() if "CONTRADICT" in ls):
                wa, wb = words(a), words(b)
                if a == b or (a, b) in seen or len(wa & wb) / len(wa | wb) < SCIFACT_JACCARD:
                    continue
                seen.add((a, b))
                out.append({"a": a, "b": b, "label": "neg", "kind": "scifact support/contradict", "lang": "en",
                            "origin": "scifact_contradict"})
    return out


def direction_title_report(embedder: Any, datasets: str | None,
                           main: list[tuple[dict[str, Any], bool]] = ()) -> dict[str, Any]:
    """The product's own lookup (core.answer.cache.lookup with the default thresholds, the shipped verifier and the
    guard's vetoes) over the pairs of issue #33 item 12, each pair asked both ways (one question cached, the other
    asked): false hits on must-not-share pairs and served paraphrases, by origin, kind and language, with the guard
    as it is ('after') and with its direction and one-word rules off ('before', the guard of the previous commit).
    `main`: the bench's own pairs with their dev flag, asked one way (a asked, b cached) through the same lookup, so
    the product's false hits and served paraphrases on them are compared before / after too."""
    from datetime import datetime

    import core.answer.cache as cache_mod
    from core.answer.cache_verifier import make_verifier
    from core.config import PipelineConfig
    from core.types import CachedAnswer, CacheKey

    rows = scifact_contradicting_pairs(datasets)
    rows += [{**json.loads(line), "origin": "direction_own"} for line in DIRECTION_OWN.read_text().splitlines()
             if line.strip()]
    settings = PipelineConfig().answer_cache
    verifier = make_verifier(embedder) if settings.verifier else None
    texts = sorted({t for r in [*rows, *(m for m, _ in main)] for t in (r["a"], r["b"])})
    vecs = dict(zip(texts, np.asarray(embedder.encode(texts), dtype=np.float32)))
    key = CacheKey("bench", 1, "cfg")
    now = datetime(2026, 1, 1)

    def served(asked: str, cached: str) -> tuple[bool, str]:
        entry = CachedAnswer(key, cached, vecs[cached], "stored answer", stored_at=now)
        res = cache_mod.lookup(asked, vecs[asked], [entry], key, threshold=settings.threshold, now=now, ttl_s=0,
                               covered_languages=embedder.languages, verifier=verifier,
                               verifier_threshold=settings.verifier_threshold)
        return res.verdict == "hit", res.reason

    def run() -> list[dict[str, Any]]:
        out = []
        for r in rows:
            for asked, cached in ((r["a"], r["b"]), (r["b"], r["a"])):
                hit, reason = served(asked, cached)
                out.append({**r, "asked": asked, "hit": hit, "reason": reason,
                            "cosine": round(float(vecs[asked] @ vecs[cached]), 4),
                            "split": split_of(r["a"], r["b"])})
        return out

    def run_main() -> tuple[dict[str, Any], list[tuple[dict[str, Any], bool, bool]]]:
        hits = [(r, d, served(r["a"], r["b"])[0]) for r, d in main]
        out: dict[str, Any] = {}
        for split, want_dev in (("dev", True), ("test", False)):
            for label, name in (("neg", "false_hit"), ("pos", "served_paraphrases")):
                sel = [h for r, d, h in hits if d == want_dev and r["label"] == label]
                k, n = sum(sel), len(sel)
                lo, hi = wilson(k, n)
                out.setdefault(split, {})[name] = {"k": k, "n": n, "rate": round(k / n, 4) if n else None,
                                                   "ci95": [round(lo, 4), round(hi, 4)]}
        out["newly_refused_paraphrases"] = []
        return out, hits

    after = run()
    main_after, hits_after = run_main()
    saved = cache_mod.direction_change, cache_mod.one_word_swap
    try:
        cache_mod.direction_change = lambda a, b: None  # type: ignore[assignment]
        cache_mod.one_word_swap = lambda a, b: None  # type: ignore[assignment]
        before = run()
        main_before, hits_before = run_main()
    finally:
        cache_mod.direction_change, cache_mod.one_word_swap = saved
    main_after["newly_refused_paraphrases"] = [
        {"a": r["a"], "b": r["b"], "origin": r["origin"], "dev": d}
        for (r, d, h1), (_, _, h0) in zip(hits_after, hits_before) if h0 and not h1 and r["label"] == "pos"]
    main_after["newly_refused_must_not_share"] = sum(
        h0 and not h1 for (r, d, h1), (_, _, h0) in zip(hits_after, hits_before) if r["label"] == "neg")

    def summary(log: list[dict[str, Any]]) -> dict[str, Any]:
        def cell(sel: list[dict[str, Any]]) -> dict[str, Any]:
            k, n = sum(x["hit"] for x in sel), len(sel)
            lo, hi = wilson(k, n)
            return {"k": k, "n": n, "rate": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}

        groups: dict[str, Any] = {}
        for name, pick in (("scifact_contradict", lambda x: x["origin"] == "scifact_contradict"),
                           ("scifact_contradict_test", lambda x: x["origin"] == "scifact_contradict"
                            and x["split"] == "test"),
                           ("own_en", lambda x: x["origin"] == "direction_own" and x["lang"] == "en"),
                           ("own_ru", lambda x: x["origin"] == "direction_own" and x["lang"] == "ru")):
            sel = [x for x in log if pick(x)]
            groups[name] = {"false_hit": cell([x for x in sel if x["label"] == "neg"]),
                            "served_paraphrases": cell([x for x in sel if x["label"] == "pos"])}
        groups["by_kind"] = {kind: cell([x for x in log if x["kind"] == kind])
                             for kind in sorted({x["kind"] for x in log})}
        return groups

    return {
        "pairs": {"scifact_contradict": sum(r["origin"] == "scifact_contradict" for r in rows),
                  "direction_own": sum(r["origin"] == "direction_own" for r in rows)},
        "lookups": "each pair asked both ways (2 lookups per pair); a hit serves the other question's answer",
        "settings": {"threshold": settings.threshold, "verifier_threshold": settings.verifier_threshold,
                     "verifier_active": verifier is not None},
        "before": summary(before), "after": summary(after),
        "main_pairs_product_lookup": {"asked": "a asked, b cached (one way)", "before": main_before,
                                      "after": main_after},
        "false_hits_after": [{k: x[k] for k in ("asked", "a", "b", "origin", "kind", "cosine")}
                             for x in after if x["hit"] and x["label"] == "neg"],
        "paraphrases_refused_after": [{k: x[k] for k in ("asked", "a", "b", "kind", "cosine", "reason")}
                                      for x in after if not x["hit"] and x["label"] == "pos"],
        "scifact_rule": f"same evidence abstract, SUPPORT vs CONTRADICT, token Jaccard >= {SCIFACT_JACCARD}",
        "note": "nothing is fitted or chosen on these pairs; 'before' switches off the two rules of issue #33 item 12 "
                "(direction of change, one word of a title / role / unit) in the same run; our pairs were written "
                "after the rules, so they illustrate rather than hold out",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    ap.add_argument("--extra", type=Path, default=EXTRA, help="hand-written pairs (JSONL: a, b, label, kind, lang)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--replay", action="store_true", help="replay sample_corpus questions with paraphrases instead")
    ap.add_argument("--extra-dev", type=Path, default=EXTRA_DEV, help="hand-written pairs used on dev only")
    ap.add_argument("--save-model", action="store_true",
                    help="write the verifier fitted on the dev split to core/models/data/answer_cache_verifier.npz")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="with --replay: a configuration override, e.g. answer_cache.pair_model=true")
    ap.add_argument("--dev-only", action="store_true",
                    help="choose on dev and print dev numbers only: no test row is printed, no file is written (for "
                         "development; the held-out split is looked at by the full run only)")
    args = ap.parse_args()
    if args.replay:
        return replay(args.out, {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)})
    started = utc_now()
    rows = load_rows(args.datasets, args.extra, args.extra_dev)

    from core.answer.cache_verifier import (
        MODEL_PATH,
        encode_questions,
        pair_features,
        vetoed,
    )
    from core.models.embed import (  # heavy import only when we run
        load_embedder,
        one_torch_thread,
    )

    # The product's runtime (onnx, the default of embed.runtime): sentence and token vectors from one forward.
    embedder = load_embedder("bundled:all-MiniLM-L6-v2", runtime="onnx").embedder
    texts = sorted({t for r in rows for t in (r["a"], r["b"])})
    t0 = time.perf_counter()
    vecs, qtokens = encode_questions(embedder, texts)
    encode_s = time.perf_counter() - t0
    index = {t: i for i, t in enumerate(texts)}
    cos = np.array([float(vecs[index[r["a"]]] @ vecs[index[r["b"]]]) for r in rows])
    t0 = time.perf_counter()
    feats = {t: features(t) for t in texts}
    for r in rows:
        guard(feats[r["a"]], feats[r["b"]])
    guard_ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
    # The language rule needs the text (not only features): apply it as the pipeline does.
    lang_ok = np.array([guard(r["a"], r["b"], covered_languages=embedder.languages).ok for r in rows])
    # Pairs where each side has content words the other lacks: the swap rule asks these for the higher cosine.
    swapped = np.array([bool(content_only(feats[r["a"]], feats[r["b"]]) and content_only(feats[r["b"]], feats[r["a"]]))
                        for r in rows])
    # Second check (optional, answer_cache.word_check): a swapped content word must resemble its counterpart.
    word_vecs: dict[str, np.ndarray] = {}

    def word_sim(xs, ys):  # noqa: ANN001, ANN202
        need = [w for w in dict.fromkeys([*xs, *ys]) if w not in word_vecs]
        if need:
            with one_torch_thread():
                word_vecs.update(zip(need, np.asarray(embedder.encode(need), dtype=np.float32)))
        return np.stack([word_vecs[w] for w in xs]) @ np.stack([word_vecs[w] for w in ys]).T

    word_ok = np.array([bool(ok_) and guard(r["a"], r["b"], covered_languages=embedder.languages,
                                             word_similarity=word_sim, min_word_similarity=WORD_FLOOR).ok
                        for r, ok_ in zip(rows, lang_ok)])
    neg = np.array([r["label"] == "neg" for r in rows])
    pos = ~neg
    origin = np.array([r["origin"] for r in rows])
    public = origin == "public"
    dev = np.array([r.get("split") == "dev" or (split_of(r["a"], r["b"]) == "dev"
                                                 and r["origin"] not in ("fresh", "fresh2")) for r in rows])
    everything = np.ones(len(rows), dtype=bool)

    # -- the verifier: features of every pair, out-of-fold probabilities on dev, the whole-dev fit on test ---------
    t0 = time.perf_counter()
    X = np.stack([pair_features(float(cos[i]), qtokens[index[r["a"]]], qtokens[index[r["b"]]], feats[r["a"]],
                                feats[r["b"]]) for i, r in enumerate(rows)])
    feature_ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
    # The pairs the verifier decides on: no veto broken (the product's guard(hard_only=True), language included).
    base = np.array([guard(r["a"], r["b"], covered_languages=embedder.languages, hard_only=True).ok for r in rows])
    assert not (base & vetoed(X)).any(), "the verifier's veto columns disagree with guard(hard_only=True)"
    qgroups = question_groups(rows)
    prob_dev, prob_test, model = fit_verifier(X, pos.astype(int), dev & base, dev, qgroups)
    # The same verifier without batch 6 (our labels of unscored SemEval pairs) in its training rows, chosen by the same
    # rule on the same dev pairs (batch 6 included there): what the new dev pairs add, measured on dev.
    batch6 = origin == "semeval_dev"
    prob_dev_nob6, prob_test_nob6, model_nob6 = fit_verifier(X, pos.astype(int), dev & base & ~batch6, dev, qgroups)
    # The same words in the same order never reach the verifier in the product (core.answer.cache.same_words).
    same = np.array([same_words(feats[r["a"]], feats[r["b"]]) for r in rows])
    # The verifier shipped before batch 6, at its shipped thresholds, on batch 6 (pairs it was never fitted on).
    before = shipped_on(X, cos, base, same, batch6, pos)
    prob = np.where(same, 1.0, np.where(dev, prob_dev, prob_test))
    prob_nob6 = np.where(same, 1.0, np.where(dev, prob_dev_nob6, prob_test_nob6))
    # The pair model is averaged with the verifier the product ships (PRODUCT_DEFAULT says which fit that is).
    ship_nob6 = PRODUCT_DEFAULT["variant"] == "vetoes+verifier(no batch 6)"
    ship_dev, ship_test = (prob_dev_nob6, prob_test_nob6) if ship_nob6 else (prob_dev, prob_test)
    pair_dev = compare_pair_model_on_dev(rows, cos, base, same, pos, public, dev, ship_dev)
    # The fine-tuned pair model's P: out of fold on dev, the shipped model on the test pairs a check is asked about.
    pair_p, pair_ms = pair_model_probabilities(rows, cos, base, same, dev, score_test=not args.dev_only)
    cur = {"prob": prob}  # the P the variant being chosen / reported reads

    def served(passed: np.ndarray, t: float, ts: float | None, pt: float | None = None) -> np.ndarray:
        hit = (cos >= t - 1e-9) & passed
        if pt is not None:
            hit &= cur["prob"] >= pt - 1e-9
        return hit if ts is None else hit & (~swapped | (cos >= ts - 1e-9))

    variants: dict[str, tuple[Any, ...]] = {
        "threshold_only": (everything, [None], [None]), "guard": (lang_ok, [None], [None]),
        "guard+word_check": (word_ok, [None], [None]), "guard+swap": (lang_ok, SWAP_GRID, [None]),
        # The product's second check (answer_cache.verifier): the guard's vetoes, then the learned verifier.
        "vetoes+verifier": (base, [None], PROB_GRID),
        # The same, fitted without batch 6 (the training rows the product shipped before batch 6 existed).
        "vetoes+verifier(no batch 6)": (base, [None], PROB_GRID, prob_nob6)}
    if pair_p is not None:  # the vetoes, then the mean of the shipped verifier's and the pair model's P
        variants["vetoes+verifier+pair_model"] = (
            base, [None], PROB_GRID, np.where(same, 1.0, (np.where(dev, ship_dev, ship_test) + pair_p) / 2))

    def choose(passed: np.ndarray, swap_grid: list[float | None], prob_grid: list[float | None]
               ) -> tuple[tuple[int, int], float, float | None, float | None]:
        """On dev only: among (threshold, swap threshold) whose false hits over every must-not-share pair (public and
        ours) stay <= target, the most public paraphrase hits, then the most of all paraphrases, then the HIGHEST
        thresholds: among points the dev split cannot tell apart, the safest (the lowest one sat on the grid's edge,
        0.6, and served 'Which client does Tomas Rehak work for?' from 'Tomas Rehak' in a pipeline test). No
        feasible point: 1.0 (the cache serves only exact repeats). The verifier's dev probabilities are out of fold."""
        best: tuple[Any, ...] | None = None
        for t in GRID:
            for ts in swap_grid:
                if ts is not None and ts < t:
                    continue
                for pt in prob_grid:
                    hit = served(passed, t, ts, pt)
                    if (rate(hit, neg & dev)["rate"] or 0.0) > TARGET_FALSE:
                        continue
                    score = (int((hit & pos & public & dev).sum()), int((hit & pos & dev).sum()), t, ts or 0, pt or 0)
                    if best is None or score > best[0]:
                        best = (score, t, ts, pt)
        if best is None:
            return (0, 0), 1.0, None if swap_grid == [None] else 1.0, None if prob_grid == [None] else 1.0
        return best[0][:2], best[1], best[2], best[3]

    def curve(passed: np.ndarray, ts: float | None, pt: float | None, sel: np.ndarray) -> list[dict[str, Any]]:
        return [{"threshold": t, "false_hit": rate(hit, neg & sel)["rate"], "hit": rate(hit, pos & sel)["rate"]}
                for t in GRID for hit in [served(passed, t, None if ts is None else max(ts, t), pt)]]

    groups = {"public": public, "written": origin == "written", "templated": origin == "templated",
              "fresh": origin == "fresh", "fresh2": origin == "fresh2", "written_dev": origin == "written_dev",
              "semeval_dev": origin == "semeval_dev",
              "all": everything}
    report: dict[str, Any] = {}
    dev_scores: dict[str, tuple[int, int]] = {}
    for vname, (passed, swap_grid, prob_grid, *own_prob) in variants.items():
        cur["prob"] = own_prob[0] if own_prob else prob
        dev_scores[vname], chosen, chosen_ts, chosen_pt = choose(passed, swap_grid, prob_grid)
        hit = served(passed, chosen, chosen_ts, chosen_pt)
        entry: dict[str, Any] = {"chosen_threshold": chosen, "chosen_swap_threshold": chosen_ts,
                                 "chosen_verifier_threshold": chosen_pt,
                                 "dev_score": {"public_hits": dev_scores[vname][0], "paraphrase_hits": dev_scores[vname][1]}}
        for split_name, sel_split in (("dev", dev), ("test", ~dev)):
            entry[split_name] = {g: {"false_hit": rate(hit, neg & sel & sel_split), "hit": rate(hit, pos & sel & sel_split)}
                                 for g, sel in groups.items()}
        # Older keys (README table, earlier readers): public test, and public + all of ours on test.
        entry["test_public"], entry["test_public_plus_own_test"] = entry["test"]["public"], entry["test"]["all"]
        entry["by_kind_test"] = {f"{o}: {kind}": {"n": int(sel.sum()), "hits": int((hit & sel).sum())}
                                 for o, kind in sorted({(r["origin"], r["kind"]) for r in rows})
                                 for sel in [np.array([r["kind"] == kind and r["origin"] == o for r in rows]) & ~dev]}
        entry["own_by_language"] = {
            lang: {"false_hit": rate(hit, neg & sel & ~dev), "paraphrase_hit": rate(hit, pos & sel & ~dev)}
            for lang in ("en", "ru") for sel in [np.array([r["lang"] == lang for r in rows]) & ~public]}
        entry["false_hits_test"] = [{"a": r["a"], "b": r["b"], "origin": r["origin"], "kind": r["kind"],
                                     "cosine": round(float(c), 3)}
                                    for r, c, h, d in zip(rows, cos, hit, dev) if h and r["label"] == "neg" and not d]
        entry["curve_public_test"] = curve(passed, chosen_ts, chosen_pt, public & ~dev)
        entry["curve_all_test"] = curve(passed, chosen_ts, chosen_pt, ~dev)
        entry["curve_public_dev"] = curve(passed, chosen_ts, chosen_pt, public & dev)
        if chosen_ts is not None:  # the second knob's own curve, at the chosen threshold
            entry["swap_curve_test"] = [
                {"swap_threshold": ts, "false_hit_all": rate(h, neg & ~dev)["rate"],
                 "hit_public": rate(h, pos & public & ~dev)["rate"]}
                for ts in SWAP_GRID if ts >= chosen for h in [served(passed, chosen, ts, chosen_pt)]]
        if chosen_pt is not None:  # the verifier's own curve, at the chosen thresholds
            entry["verifier_curve_test"] = [
                {"verifier_threshold": pt, "false_hit_all": rate(h, neg & ~dev)["rate"],
                 "hit_public": rate(h, pos & public & ~dev)["rate"], "hit_all": rate(h, pos & ~dev)["rate"]}
                for pt in PROB_GRID for h in [served(passed, chosen, chosen_ts, pt)]]
        report[vname] = entry
    # The product default: the variant the same rule ranks first on dev (most public hits, then most paraphrases).
    default_variant = max(dev_scores, key=lambda v: dev_scores[v])
    # The verifier file that ships is the one the product default reads (fitted with or without batch 6).
    shipped_model, shipped_train = ((model_nob6, dev & base & ~batch6) if ship_nob6 else (model, dev & base))
    if args.save_model:  # fitted on dev pairs only: saving reads no test row
        shipped_model.save(MODEL_PATH, fitted_on=f"{int(shipped_train.sum())} dev pairs breaking no hard rule",
                           selected=PRODUCT_DEFAULT["variant"])
    if args.dev_only:  # development: dev rows only, nothing written, no test number printed
        for vname, e in report.items():
            d = e["dev"]
            print(f"{vname}: t={e['chosen_threshold']} ts={e['chosen_swap_threshold']} "
                  f"pt={e['chosen_verifier_threshold']} dev FH {d['all']['false_hit']['k']}/{d['all']['false_hit']['n']}"
                  f" | public hit {d['public']['hit']['k']}/{d['public']['hit']['n']} | batch 6 hit "
                  f"{d['semeval_dev']['hit']['k']}/{d['semeval_dev']['hit']['n']} FH "
                  f"{d['semeval_dev']['false_hit']['k']}/{d['semeval_dev']['false_hit']['n']} | all paraphrases "
                  f"{d['all']['hit']['k']}/{d['all']['hit']['n']}")
        print(f"default (dev): {default_variant}; shipped before, on batch 6: {before}")
        print(json.dumps(pair_dev, indent=1))
        if os.environ.get("ANSWER_CACHE_DEV_DUMP"):  # dev rows only, for looking at errors while developing
            np.savez(os.environ["ANSWER_CACHE_DEV_DUMP"], X=X[dev], cos=cos[dev], prob=prob[dev], pos=pos[dev],
                     base=base[dev], same=same[dev], origin=origin[dev], public=public[dev], groups=qgroups[dev],
                     a=np.array([r["a"] for r in rows])[dev], b=np.array([r["b"] for r in rows])[dev])
        return 0
    verifier_ms = time_verifier(embedder, shipped_model, [(r["a"], r["b"]) for r in rows if not r["a"] == r["b"]][:60])
    at_097 = {"public_neg_false_hit": rate(cos >= 0.97, neg & public)["rate"],
              "public_pos_hit": rate(cos >= 0.97, pos & public)["rate"]}
    payload = {
        "machine": machine_info(), "started": started, "finished": utc_now(),
        "embedder": embedder.model_id, "pairs": len(rows), "texts_encoded": len(texts),
        "pairs_by_origin": {g: {"neg": int((neg & sel).sum()), "pos": int((pos & sel).sum())}
                            for g, sel in groups.items()},
        "extra_file": str(args.extra.relative_to(ROOT)) if args.extra.is_relative_to(ROOT) else str(args.extra),
        "encode_s": round(encode_s, 2), "guard_ms_per_pair": round(guard_ms, 3), "word_floor": WORD_FLOOR,
        "split": "sha1(a + 0x1f + b)[0] % 2: even = dev (thresholds chosen, verifier fitted), odd = test "
                 "(reported); hand-written batches 2 (fresh) and 4 (fresh2) are all test, batches 3 and 5 "
                 "(cache_pairs_extra_dev.jsonl) and 6 (cache_pairs_semeval_dev.jsonl) all dev",
        "selection": "on dev: false hits over all must-not-share pairs (public + ours) <= target, then the most "
                     "public (SemEval >= 4) hits, then the most paraphrase hits of all, then the highest thresholds",
        "targets": {"false_hit_max": TARGET_FALSE, "paraphrase_hit_min": TARGET_HIT,
                    "false_hit_over": "test split, public + ours (templated + written + fresh)",
                    "hit_over": "test split, SemEval pairs scored >= 4"},
        "threshold_only_at_0.97": at_097, "variants": report, "default_variant": default_variant,
        "direction_and_title": direction_title_report(embedder, args.datasets, list(zip(rows, dev.tolist()))),
        "product_default": PRODUCT_DEFAULT,
        "disclosure": FIRST_LOOK,
        "pair_model_dev_only": pair_dev,
        "shipped_before_on_batch6": before,
        "pair_model": None if pair_ms is None else {
            "model": "core/models/data/answer_cache_pair_model.npz", "oof_file": str(PAIR_OOF.relative_to(ROOT)),
            "ms_per_pair_both_orders": pair_ms,
            "note": "the bundled MiniLM with its top layers and a head fine-tuned as a pair classifier on the dev "
                    "pairs (bench/answer_cache_pair_model.py); dev P out of fold, test P from the model fitted on all "
                    "dev pairs"},
        "verifier": {"model": str(MODEL_PATH.relative_to(ROOT)), "saved": bool(args.save_model),
                     "features": list(model_features()), "fitted_on_dev_pairs": int(shipped_train.sum()),
                     "C": VERIFIER_C, "feature_ms_per_pair": round(feature_ms, 3),
                     "ms_per_pair_encode_features_score": verifier_ms,
                     "coef": {f: round(float(c), 4) for f, c in zip(model_features(), shipped_model.coef)},
                     "note": "dev probabilities are out of fold (5 folds grouped by shared questions); test "
                             "probabilities come from the model fitted on all dev pairs that break no hard rule"},
    }
    path = write_result("answer_cache", payload, args.out)
    for vname, e in report.items():
        te = e["test"]
        print(f"{vname}: t={e['chosen_threshold']} ts={e['chosen_swap_threshold']} pt={e['chosen_verifier_threshold']}"
              f" dev {e['dev_score']} | test all FH "
              f"{te['all']['false_hit']} | public FH {te['public']['false_hit']['k']}/{te['public']['false_hit']['n']}"
              f" hit {te['public']['hit']['k']}/{te['public']['hit']['n']} | written FH "
              f"{te['written']['false_hit']['k']}/{te['written']['false_hit']['n']} | fresh FH "
              f"{te['fresh']['false_hit']['k']}/{te['fresh']['false_hit']['n']} hit "
              f"{te['fresh']['hit']['k']}/{te['fresh']['hit']['n']} | fresh2 FH "
              f"{te['fresh2']['false_hit']['k']}/{te['fresh2']['false_hit']['n']} hit "
              f"{te['fresh2']['hit']['k']}/{te['fresh2']['hit']['n']}")
    print(f"default (dev): {default_variant}; verifier {verifier_ms} ms per pair")
    dt = payload["direction_and_title"]
    for phase in ("before", "after"):
        print(f"direction/title pairs, {phase}: " + "; ".join(
            f"{g} FH {v['false_hit']['k']}/{v['false_hit']['n']} served {v['served_paraphrases']['k']}/"
            f"{v['served_paraphrases']['n']}" for g, v in dt[phase].items() if g != "by_kind"))
        mp = dt["main_pairs_product_lookup"][phase]
        print(f"  main pairs through the product's lookup, {phase}: " + "; ".join(
            f"{sp} FH {mp[sp]['false_hit']['k']}/{mp[sp]['false_hit']['n']} served "
            f"{mp[sp]['served_paraphrases']['k']}/{mp[sp]['served_paraphrases']['n']}" for sp in ("dev", "test")))
    print(f"wrote {path}")
    return 0


def pair_model_probabilities(rows: list[dict[str, Any]], cos: np.ndarray, base: np.ndarray, same: np.ndarray,
                             dev: np.ndarray, *, score_test: bool = True
                             ) -> tuple[np.ndarray | None, dict[str, Any] | None]:
    """P(same) of the pair model for every row: out of fold (PAIR_OOF) on dev, the shipped model
    (core/models/data/answer_cache_pair_model.npz, fitted on all dev pairs) on the test pairs a check could be asked about (no
    veto broken, cosine on the grid, not the same words); 0 elsewhere, where no variant reads it. Also the model's ms
    per pair (both orders in one forward). (None, None) without the OOF file or the model."""
    from answer_cache_pair_model import pair_key

    from core.answer.cache_pair import PAIR_MODEL_PATH, pair_probability
    from core.models.embed import one_torch_thread

    if not PAIR_OOF.exists() or not PAIR_MODEL_PATH.exists():
        return None, None
    oof = json.loads(PAIR_OOF.read_text())["p"]
    keys = [pair_key(r["a"], r["b"]) for r in rows]
    if not all(k in oof for k, d in zip(keys, dev) if d):
        return None, None
    out = np.array([oof.get(k, 0.0) if d else 0.0 for k, d in zip(keys, dev)])
    asked = np.flatnonzero(~dev & base & ~same & (cos >= GRID[0] - 1e-9)) if score_test else np.zeros(0, int)
    times = []
    for i in asked:
        t0 = time.perf_counter()
        with one_torch_thread():  # as the product runs it
            out[i] = pair_probability([(rows[i]["a"], rows[i]["b"])])[0]
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    ms = {"n": len(times), "median": round(statistics.median(times), 2) if times else None,
          "p95": round(times[int(0.95 * (len(times) - 1))], 2) if times else None}
    return out, ms


def compare_pair_model_on_dev(rows: list[dict[str, Any]], cos: np.ndarray, base: np.ndarray, same: np.ndarray,
                              pos: np.ndarray, public: np.ndarray, dev: np.ndarray, prob_dev: np.ndarray
                              ) -> dict[str, Any] | None:
    """Dev only: the fine-tuned pair model's out-of-fold P (PAIR_OOF), alone and combined with the verifier's
    out-of-fold P, each at its best (threshold, P) by the same rule as the variants (false hits over every dev
    must-not-share pair <= target, then the most SemEval hits, then the most paraphrase hits, then the highest
    thresholds), next to the verifier alone. It decides whether the pair model may ship; no test pair is read here.
    None when the OOF file is absent or was made on other dev pairs."""
    from answer_cache_pair_model import pair_key
    from sklearn.metrics import roc_auc_score

    if not PAIR_OOF.exists():
        return None
    oof = json.loads(PAIR_OOF.read_text())
    keys = [pair_key(r["a"], r["b"]) for r in rows]
    if not all(k in oof["p"] for k, d in zip(keys, dev) if d):
        return {"note": f"{PAIR_OOF.name} lacks some dev pairs (made on an older dev set): re-run --cv"}
    pp = np.array([oof["p"].get(k, 0.0) for k in keys])
    neg = ~pos
    candidates = {"verifier": prob_dev, "pair_model": pp, "mean(verifier, pair_model)": (prob_dev + pp) / 2,
                  "min(verifier, pair_model)": np.minimum(prob_dev, pp),
                  "geometric_mean(verifier, pair_model)": np.sqrt(prob_dev * pp)}
    asked = dev & base & ~same & (cos >= GRID[0])  # the pairs a check is ever asked about on this grid
    out: dict[str, Any] = {"oof_file": str(PAIR_OOF.relative_to(ROOT)), "hyper": oof.get("hyper"),
                           "asked_pairs": int(asked.sum())}
    for name, p in candidates.items():
        p = np.where(same, 1.0, p)
        best: tuple[Any, ...] | None = None
        for t in GRID:
            for pt in PROB_GRID:
                hit = dev & base & (cos >= t - 1e-9) & (p >= pt - 1e-9)
                fh = int((hit & neg).sum())
                if fh / max(1, int((neg & dev).sum())) > TARGET_FALSE:
                    continue
                score = (int((hit & pos & public).sum()), int((hit & pos).sum()), t, pt)
                if best is None or score > best[0]:
                    best = (score, fh)
        out[name] = {"auroc_asked_pairs": round(float(roc_auc_score(pos[asked], p[asked])), 4),
                     "auroc_all_dev": round(float(roc_auc_score(pos[dev], p[dev])), 4),
                     **({"threshold": best[0][2], "p": best[0][3],
                         "public_hits": f"{best[0][0]}/{int((pos & public & dev).sum())}",
                         "paraphrase_hits": f"{best[0][1]}/{int((pos & dev).sum())}",
                         "false_hits": f"{best[1]}/{int((neg & dev).sum())}"} if best else {"feasible": False})}
    return out


def model_features() -> tuple[str, ...]:
    from core.answer.cache_verifier import FEATURES

    return FEATURES


def question_groups(rows: list[dict[str, Any]]) -> np.ndarray:
    """A group id per pair: pairs linked by a shared question (after whitespace / case normalisation) share a group,
    transitively. SemEval repeats a question across many pairs, as first or second question; grouping by the first
    question alone let a question sit on both sides of a fold."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def norm(t: str) -> str:
        return " ".join(t.lower().split())

    for r in rows:
        parent[find(norm(r["a"]))] = find(norm(r["b"]))
    return np.array([int(hashlib.sha1(find(norm(r["a"])).encode()).hexdigest()[:8], 16) for r in rows])


# The verifier and thresholds the product shipped before batch 6 existed (session 5's fourth look).
BEFORE_BATCH6 = {"commit": "094f457dd1bc9aa96a25acb1094c6ce27972908e", "threshold": 0.73, "verifier_threshold": 0.55}


def shipped_on(X: np.ndarray, cos: np.ndarray, base: np.ndarray, same: np.ndarray, sel: np.ndarray,
               pos: np.ndarray) -> dict[str, Any] | None:
    """The verifier file and thresholds shipped before batch 6 (BEFORE_BATCH6, read from git) on the pairs `sel`,
    which it was never fitted on: served paraphrases and false hits. None outside a git checkout."""
    import subprocess
    import tempfile

    from core.answer.cache_verifier import load_verifier

    if not sel.any():
        return None
    try:
        blob = subprocess.run(["git", "show", f"{BEFORE_BATCH6['commit']}:core/models/data/answer_cache_verifier.npz"],
                              cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "before.npz"
        path.write_bytes(blob)
        model = load_verifier(path)
    if model is None:
        return None
    p = np.where(same[sel], 1.0, model.prob(X[sel]))
    hit = (base[sel] & (cos[sel] >= BEFORE_BATCH6["threshold"] - 1e-9)
           & (p >= BEFORE_BATCH6["verifier_threshold"] - 1e-9))
    return {**BEFORE_BATCH6, "model": model.model_id, "paraphrase_hits": rate(hit, pos[sel]),
            "false_hits": rate(hit, ~pos[sel]),
            "note": "scored on this code's features (a word 'one' / 'single' no longer counts as a number)"}


def fit_verifier(X: np.ndarray, y: np.ndarray, train: np.ndarray, dev: np.ndarray, groups: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, Any]:
    """Out-of-fold P(same) on the dev pairs (5 folds grouped by question_groups, so no question sits on both sides),
    and the model fitted on every `train` pair, scoring all pairs."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    from core.answer.cache_verifier import PairVerifier

    def fit(rows_: np.ndarray) -> PairVerifier:
        mean = X[rows_].mean(axis=0)
        scale = X[rows_].std(axis=0)
        scale[scale < 1e-6] = 1.0  # a constant feature (a rule no training pair breaks) stays inert
        lr = LogisticRegression(C=VERIFIER_C, max_iter=5000).fit((X[rows_] - mean) / scale, y[rows_])
        return PairVerifier(mean.astype(np.float32), scale.astype(np.float32), lr.coef_[0].astype(np.float32),
                            float(lr.intercept_[0]), 0.5, "answer-cache-verifier-lr-v1")

    oof = np.zeros(len(y))
    idx = np.flatnonzero(dev)
    for tr, te in GroupKFold(5).split(idx, groups=groups[idx]):
        tr_rows = idx[tr][train[idx[tr]]]
        oof[idx[te]] = fit(tr_rows).prob(X[idx[te]])
    model = fit(np.flatnonzero(train))
    return oof, model.prob(X), model


def time_verifier(embedder: Any, model: Any, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """What the second check costs a lookup, median and p95 ms over `pairs`, in three states:
    both_encoded: both questions through one forward, the features and the score (the check before the cache stage
    kept the query's token vectors); cached_encoded: the product's path on a cached question the verifier has not
    read yet (the query's token vectors come from the cache stage's own forward, core.answer.cache_verifier.
    query_vector, so only the cached question is encoded); both_known: a cached question read before (the memo),
    features and score only. The first key stays the median of both_encoded for older readers. Timings interleave
    the three per pair, so the ratios hold under load; absolute ms do not."""
    from core.answer.cache_verifier import (
        encode_questions,
        forget_tokens,
        pair_features,
        query_vector,
        tokens_for,
    )

    times: dict[str, list[float]] = {"both_encoded": [], "cached_encoded": [], "both_known": []}
    for a, b in pairs:
        t0 = time.perf_counter()
        v, tk = encode_questions(embedder, [a, b])
        model.prob(pair_features(float(v[0] @ v[1]), tk[0], tk[1]))
        times["both_encoded"].append((time.perf_counter() - t0) * 1000)
        forget_tokens()
        qv = query_vector(embedder, a)  # the cache stage's forward (not timed: it runs with or without a check)
        cosine = float(v[0] @ v[1])
        for state in ("cached_encoded", "both_known"):
            t0 = time.perf_counter()
            ta, tb = tokens_for(embedder, [a, b])
            model.prob(pair_features(cosine, ta, tb))
            times[state].append((time.perf_counter() - t0) * 1000)
        del qv
    forget_tokens()

    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        return {"n": len(xs), "median": round(statistics.median(xs), 2), "p95": round(xs[int(0.95 * (len(xs) - 1))], 2)}

    out: dict[str, Any] = {k: stats(v) for k, v in times.items()}
    out["median"], out["p95"], out["n"] = out["both_encoded"]["median"], out["both_encoded"]["p95"], len(pairs)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
