"""Offline golden-set generator on a tiny corpus: facts, wording, near-misses checked absent, and the CLI contract."""
from __future__ import annotations

import json
import re

from core.cli import main
from core.eval.datasets import load_jsonl_file
from core.eval.golden import CorpusIndex, Passage, find_facts, generate, overlap, passages_from
from core.store import Store
from core.types import Chunk, Document

DOCS = {
    "rig.md": ("Pelican Test Rig", "en", [
        "The Pelican rig is a hydraulic test bench for subsea valves. The rig operator is Henrik Aas. "
        "The bench reached a pressure of 350 bar during the acceptance test on 14 May 2023.",
        "Maintenance happens every 6 weeks. The coolant pump was replaced by Marta Quist in 2022.",
    ]),
    "lab.md": ("Heron Lab Handbook", "en", [
        "The Heron lab is a calibration laboratory in Bergen. It holds 12 pressure gauges. "
        "Henrik Aas trains new staff at the Heron lab every spring.",
        "The calibration interval is 90 days for every gauge. Gauge readings are stored in LabVault_v2.",
    ]),
    "ru.md": ("Отчёт о стенде", "ru", [
        "Стенд «Кречет» — это испытательный стенд для насосов высокого давления. "
        "Давление на стенде достигло 280 бар в марте 2024 года.",
    ]),
}


def _passages() -> list[Passage]:
    out = []
    for name, (title, lang, chunks) in DOCS.items():
        for i, text in enumerate(chunks):
            out.append(Passage(Chunk(f"{name}-{i}", name, i, text, 0, len(text), (), len(text.split()), lang),
                               name, title))
    return out


def test_facts_by_kind_and_definition_wording() -> None:
    p = _passages()[0]
    kinds = {f.kind for f in find_facts(p)}
    assert {"definition", "number", "date", "name"} <= kinds
    d = next(f for f in find_facts(p) if f.kind == "definition")
    assert d.subject == "The Pelican rig" and d.answer.startswith("a hydraulic test bench")


def test_generated_set_types_gold_and_overlap() -> None:
    ps = _passages()
    items = generate(ps, 12, seed=1)
    assert items == generate(ps, 12, seed=1)  # seeded: the same set twice
    texts = {p.chunk.chunk_id: p.chunk.text for p in ps}
    types = {it.qtype for it in items}
    assert "factoid" in types and "unanswerable" in types
    for it in items:
        assert it.generator == "offline-v1" and it.query.endswith("?")
        for g in it.gold:  # every gold span is a sentence of the chunk it names
            assert g.span in " ".join(texts[g.chunk].split())
        if it.answerable:
            assert it.gold and it.meta["overlap"] <= 0.8  # the question never copies its gold sentence
    ru = [it for it in items if it.meta.get("lang") == "ru"]
    assert ru and all(re.search("[а-яё]", it.query, re.I) for it in ru)  # Russian documents, Russian questions


def test_near_misses_are_absent_from_the_corpus() -> None:
    ps = _passages()
    index = CorpusIndex(ps)
    items = generate(ps, 20, seed=3)
    misses = [it for it in items if not it.answerable]
    assert misses
    for it in misses:
        assert not it.gold and it.meta["swap"]
        old, new = it.meta["swap"].removeprefix("year ").split(" -> ")
        assert new.casefold() in it.query.casefold()
        if old.isdigit():
            assert not index.contains(new)  # the swapped year appears nowhere
        else:  # no chunk holds the new word together with the question's other anchors
            kept = [a for a in it.meta.get("anchors", []) if a != old]
            assert not index.together([*kept, new]) or not kept


def test_overlap_measure() -> None:
    s = "The rig operator is Henrik Aas."
    assert overlap("Who runs the Pelican test bench?", s) == 0.0
    assert overlap("The rig operator is Henrik Aas?", s) == 1.0


def test_cli_generate_list_export_round_trip(tmp_path, capsys) -> None:
    db = tmp_path / "w.duckdb"
    store = Store(db)
    for name, (title, lang, chunks) in DOCS.items():
        text = "\n\n".join(chunks)
        store.corpus.put_document(Document(name, name, "md", len(text), "h" + name, lang, text, "t", "default", title),
                                  [Chunk(f"{name}-{i}", name, i, c, 0, len(c), (), len(c.split()), lang)
                                   for i, c in enumerate(chunks)], None, "m")
    assert len(passages_from(store.corpus, "default")) == 5
    store.close()
    assert main(["golden", "generate", "--db", str(db), "--n", "10", "--name", "g1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["name"] == "g1" and report["items"] == sum(report["by_type"].values()) > 0
    out = tmp_path / "g1.jsonl"
    assert main(["golden", "export", "g1", "--db", str(db), "--out", str(out)]) == 0
    back = load_jsonl_file(out)
    assert not back.problems and len(back.queries) == report["items"]
    line = json.loads(out.read_text().splitlines()[0])
    assert {"id", "query", "gold", "answer", "answerable", "type"} <= set(line)
    assert main(["golden", "export", "nope", "--db", str(db), "--out", str(out)]) == 2
    assert main(["golden", "generate", "--db", str(db), "--workspace", "empty", "--n", "5"]) == 2
