"""No demo facts in core (architecture rule 7): no file under core/ names the sample corpus's products, projects,
companies, people, places, codes or config keys. What a rule needs to know about a corpus it learns from the
workspace, never from a list of ours.

Two sources of names: a hand list of the corpus's proper names (each checked to occur in sample_corpus/docs, so the
list stays the corpus's), and every identifier the documents hold (codes with a digit such as SKUs and error codes,
SCREAMING_SNAKE and camelCase config keys), collected from the parsed documents. Fitted artefacts (core/models/data/*.npz) are read too: every text array in them
(feature names, vocabularies, classes, provenance), since a term the model learnt from the demo corpus is a demo fact
in its weights."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from core.ingest.parse import parse

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "sample_corpus" / "docs"
SCANNED = (".py", ".json", ".toml", ".txt")

# Coined names, matched as whole words in any case.
NAMES = (
    # the company, its products, programmes and customer projects
    "Corvane", "Tidewater", "FieldOS", "Meridian", "Fieldbox", "Vibra", "Bluefin", "Saltmarsh", "Driftwood",
    # clients and suppliers
    "Kestrel", "Greyling", "Nordhaven", "Baltimar", "Quellink", "Falkmoor", "Arvesto", "Expensa",
    # people
    "Lindqvist", "Leeuwen", "Talvik", "Quintero", "Brightwater", "Rehak", "Dekkers", "Haddad", "Kowalczyk",
    "Oyelaran", "Solberg", "Okoro", "Pryce", "Armbruster", "Varga", "Omarov", "Verhoef", "Hoekstra", "Okafor",
    "Teague", "Sadykova", "Daniyar", "Aigerim",
    # places the corpus's offices and projects are in
    "Rotterdam", "Gdańsk", "Almaty", "Austin", "Astana", "Kostanay", "Khorgos",
)
# Names made of everyday words: only the whole phrase is the corpus's.
PHRASES = (
    "Project Heron", "Project Lantern", "Steppe Pulse", "Steppe Agro", "Industrial Hardware", "Helen Marsh",
    "Priya Anand", "Wen Li", "Sanne de Vries", "Tomas Rehak", "Joost van Leeuwen", "Noor Haddad",
)
# Russian names by stem (they inflect: Алматы, Алматинский офис; Степной пульс, «Степного пульса»).
RU_STEMS = ("Алмат", "Степн", "Омаров", "Садыков", "Айгерим", "Данияр", "Линдквист", "Хоргос", "Костана")
# Identifiers of the documents that are no demo fact: a public standard.
GENERAL = frozenset({"RS-485"})
# A folded spelling of a listed name ('Gdansk' for 'Gdańsk') is the same name.
FOLDED = {"Gdańsk": "Gdansk"}

_CODE = re.compile(r"(?<![\w-])[A-Z]{1,5}(?:-[A-Z0-9]+)*-[A-Z0-9]*\d[A-Z0-9]*(?:-[A-Z0-9]+)*(?![\w-])")
_ERROR_FAMILY = re.compile(r"(E-[A-Z]+)-\d+")  # 'E-TDW' names the product's error family on its own
_SNAKE_KEY = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_CAMEL_KEY = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+){2,}\b")  # two inner capitals: retryBackoffMs, not camelCase
_LOWER_KEY = re.compile(r"\b[a-z]+(?:_[a-z]+){2,}\b")  # three parts: ingest_batch_size, not snake_case


@lru_cache(maxsize=1)
def corpus_text() -> str:
    return "\n".join(parse(p.name, p.read_bytes()).text for p in sorted(DOCS.iterdir()) if p.is_file())


@lru_cache(maxsize=1)
def corpus_identifiers() -> frozenset[str]:
    text = corpus_text()
    codes = set(_CODE.findall(text))
    codes |= {m.group(1) for c in codes if (m := _ERROR_FAMILY.fullmatch(c))}
    keys = set(_SNAKE_KEY.findall(text)) | set(_CAMEL_KEY.findall(text)) | set(_LOWER_KEY.findall(text))
    return frozenset((codes | keys) - GENERAL)


def patterns() -> list[re.Pattern[str]]:
    words = [*NAMES, *FOLDED.values(), *PHRASES]
    out = [re.compile(r"(?<!\w)" + re.escape(w).replace(r"\ ", r"\s+") + r"(?!\w)", re.IGNORECASE) for w in words]
    out += [re.compile(re.escape(stem), re.IGNORECASE) for stem in RU_STEMS]
    out += [re.compile(r"(?<![\w-])" + re.escape(i) + r"(?![\w-])") for i in sorted(corpus_identifiers())]
    return out


def scanned_files() -> list[Path]:
    return sorted(p for p in (ROOT / "core").rglob("*") if p.is_file() and p.suffix in SCANNED)


def npz_text(path: Path) -> str:
    """Every string held in a .npz, one per line (arrays of text; numbers are weights, not names)."""
    with np.load(path, allow_pickle=False) as z:
        return "\n".join(str(v) for k in z.files if z[k].dtype.kind in "US" for v in np.ravel(z[k]))


def demo_facts_in(text: str, pats: list[re.Pattern[str]]) -> list[tuple[int, str]]:
    """(line number, name) for every listed name or corpus identifier in the text."""
    # each pattern runs over the whole text once, and only when its first word occurs in it (a case-insensitive
    # regex with lookarounds scans slowly: 9 s for core/ without the check); a match's line is counted from its offset
    low = text.lower()
    hits = [(text.count("\n", 0, m.start()) + 1, m.group(0)) for pat in pats
            if _literal(pat) in (low if pat.flags & re.IGNORECASE else text) for m in pat.finditer(text)]
    return sorted(hits)


@lru_cache(maxsize=None)
def _literal(pat: re.Pattern[str]) -> str:
    """The text a pattern's match must hold: its first word, lookarounds and escapes dropped (lower-cased for a
    case-insensitive pattern)."""
    lit = re.sub(r"\\(.)", r"\1", re.sub(r"\(\?<?[!=][^)]*\)", "", pat.pattern).split(r"\s+")[0])
    return lit.lower() if pat.flags & re.IGNORECASE else lit


def test_the_name_list_is_the_sample_corpus_s() -> None:
    text = corpus_text()
    missing = [w for w in (*NAMES, *PHRASES) if not re.search(r"(?<!\w)" + re.escape(w) + r"(?!\w)", text)]
    missing += [s for s in RU_STEMS if s.lower() not in text.lower()]
    assert not missing, f"not in sample_corpus/docs (the list must hold the corpus's names only): {missing}"
    ids = corpus_identifiers()
    # the collected identifiers are the ones the documents are known for (sample_corpus/README.md)
    assert {"FB-340", "E-TDW-4107", "E-TDW", "TLS_VERSION_MIN", "retryBackoffMs", "ingest_batch_size"} <= ids


def test_the_scan_finds_a_demo_fact_and_passes_a_general_example() -> None:
    pats = patterns()
    hits = demo_facts_in("x = 1\n# Corvane's gateways, FB-0340-R, «Степного пульса»", pats)
    assert sorted(hits) == [(2, "Corvane"), (2, "FB-0340-R"), (2, "Степн")]
    assert demo_facts_in("# a product name before a version ('AcmeOS 3.9.1'), a code ('NX-200'), CACHE_TTL", pats) == []


def test_no_file_under_core_names_the_sample_corpus() -> None:
    pats = patterns()
    files = scanned_files()
    assert any(p.suffix == ".toml" for p in files) and any(p.suffix == ".txt" for p in files)
    found = [f"{p.relative_to(ROOT)}:{n}: {name}" for p in files
             for n, name in demo_facts_in(p.read_text(encoding="utf-8", errors="replace"), pats)]
    assert not found, "sample-corpus names in core/ (use a generic example, or learn it from the workspace):\n" + \
        "\n".join(found)


def test_the_npz_scan_finds_a_demo_name_in_a_vocabulary(tmp_path: Path) -> None:
    bad = tmp_path / "m.npz"
    np.savez(bad, features=np.array(["word 'gateway'", "word 'corvane'", "chars ' cor'"]), coef=np.zeros(3))
    assert [name for _, name in demo_facts_in(npz_text(bad), patterns())] == ["corvane"]


# A public dataset may hold a word the demo corpus also uses ('austin' in CLINC's weather requests, 'Armbruster' in a
# 2WikiMultihopQA question): a model fitted on it learnt the word from public data. Only rows of the public datasets
# count, not the lines written for this repo.
PUBLIC_SOURCES = ("clinc", "twowiki", "scifact", "codebase")


@lru_cache(maxsize=1)
def public_words() -> frozenset[str]:
    rows = [json.loads(x) for x in (ROOT / "train" / "sets" / "routing.jsonl").read_text(encoding="utf-8").splitlines()
            if x.strip()]
    return frozenset(w for r in rows if r["source"] in PUBLIC_SOURCES for w in re.findall(r"\w+", r["text"].lower()))


def test_no_fitted_model_under_core_learnt_a_demo_name() -> None:
    pats = patterns()
    files = sorted((ROOT / "core").rglob("*.npz"))
    assert any(p.name == "router_model.npz" for p in files)
    found = [f"{p.relative_to(ROOT)}: {name}" for p in files for _, name in demo_facts_in(npz_text(p), pats)
             if name.lower() not in public_words()]
    assert not found, "sample-corpus names in a fitted model's vocabulary (refit it on public data only):\n" + \
        "\n".join(sorted(set(found)))
