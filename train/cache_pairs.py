"""The answer cache's labelled question pairs and their dev / test split, shared by the fitting recipes of the
cache's two learned checks (train/cache_verifier.py, train/cache_pair_model.py) and the bench that measures the cache
(bench/answer_cache.py).

Pairs: ../shared/datasets/cache_pairs/pairs.jsonl (NaN-NLI contradiction + neutral and SemEval question pairs scored
<= 2 must not share an answer; SemEval pairs scored >= 4 should), pairs generated below from templates (EN and RU:
negation, antonym, changed number, changed name, and paraphrases that keep every slot), and hand-written pairs in
bench/sets/cache_pairs_*.jsonl. Split: sha1(a + 0x1f + b)[0] % 2, even = dev (fits and chooses), odd = test
(reported); hand-written batches 2 and 4 are all test, batches 3, 5 and 6 all dev.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from train.provenance import ROOT, datasets_dir

EXTRA = ROOT / "bench" / "sets" / "cache_pairs_extra.jsonl"  # hand-written pairs (EN + RU), see its README
EXTRA_DEV = ROOT / "bench" / "sets" / "cache_pairs_extra_dev.jsonl"  # batches 3 and 5: dev only
# Batch 6: unscored SemEval pairs labelled here (dev only; none shares a question with a test-split pair): the only
# dev pairs from the same StackExchange distribution as the SemEval paraphrases the target counts.
SEMEVAL_DEV = ROOT / "bench" / "sets" / "cache_pairs_semeval_dev.jsonl"


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


def split_of(a: str, b: str) -> str:
    return "dev" if hashlib.sha1(f"{a}\x1f{b}".encode()).digest()[0] % 2 == 0 else "test"


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


def is_dev(r: dict[str, Any]) -> bool:
    """A pair of the dev split: a dev-only batch, or hashed to dev and not of the all-test batches 2 and 4."""
    return r.get("split") == "dev" or (split_of(r["a"], r["b"]) == "dev" and r["origin"] not in ("fresh", "fresh2"))


def dev_rows(datasets: str | None = None) -> list[dict[str, Any]]:
    """The dev pairs, in load_rows order."""
    return [r for r in load_rows(datasets, EXTRA, EXTRA_DEV) if is_dev(r)]


def pair_key(a: str, b: str) -> str:
    return hashlib.sha1(f"{a}\x1f{b}".encode()).hexdigest()[:16]


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
