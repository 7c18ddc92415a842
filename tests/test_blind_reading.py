"""core/answer/stage.py blind_reading: a question the embedder does not read (Russian with the bundled MiniLM) is
answered by the lexical signals, and the multilingual reader checks the lead sentence and answers when they refuse; no
reader, or one that fails, leaves the lexical answer as it was, and says so."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from core.answer import stage
from core.answer.stage import BLIND_FLOOR, BLIND_LEAD_FLOOR, REFUSAL, answer_question, extractive_answer
from core.config import AnswerConfig, PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.types import Candidate
from tests.fakes import HashEmbedder

PASSAGES = [
    Candidate("c1", "d1", "Столицей Франции является город Париж. Через Париж течёт Сена. Город славится своими музеями.",
              1.0, 1),
    Candidate("c2", "d2", "В офисе работают 18 сотрудников. Офис открыт в 2019 году. Город выбрали из-за аэропорта.", 0.9,
              2),
    Candidate("c3", "d3", "Берлин стал столицей объединённой Германии в 1990 году. Через Берлин течёт Шпрее.", 0.8, 3)]


class ToyReader:
    """A multilingual reader whose question-sentence similarity is set per sentence (by words it holds; the highest
    that applies), 0.7 for the rest. Counts its calls."""

    def __init__(self, sims: dict[str, float], fail: bool = False) -> None:
        self.sims, self.fail, self.calls = sims, fail, 0

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.fail:
            raise RuntimeError("engine gone")
        return np.array([max([v for k, v in self.sims.items() if k in t], default=0.7) for t in texts])

    def phrases(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(len(texts))


class _NoLLM:  # the extractive mode never calls it
    available = False
    reason = "offline"


def test_a_lead_sentence_about_something_else_is_refused_or_gives_way_to_the_readers_ranking() -> None:
    q = "Чем славится Берлин?"
    lexical = extractive_answer(q, PASSAGES, blind=True)
    # the lexical signals lead with Paris's museums: 'славится' is the word they share
    assert not lexical.answer.refused and lexical.answer.text.startswith("Город славится своими музеями. [c1]")
    off = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({"Берлин": 0.79, "музеями": 0.76}))
    assert off.answer.refused and off.answer.text.startswith(REFUSAL)
    assert f"(multilingual-e5 similarity 0.76, below {BLIND_LEAD_FLOOR:.2f}): \"Город славится своими музеями.\"" \
        in off.answer.text
    assert any("does not answer either (best similarity 0.79" in n for n in off.notes)
    # 'why': the lexical lead says when; the reader's ranking quotes why
    q = "Почему офис открыли в этом городе?"
    lexical = extractive_answer(q, PASSAGES, blind=True)
    assert lexical.answer.text.startswith("Офис открыт в 2019 году. [c2]")
    got = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({"аэропорта": 0.88}))
    assert not got.answer.refused and got.answer.text.startswith("Город выбрали из-за аэропорта. [c2]")
    assert got.threshold == BLIND_FLOOR and got.support == pytest.approx(0.88)
    assert any("answered by multilingual-e5's sentence ranking" in n and "not about the question" in n
               for n in got.notes)


def test_a_lead_sentence_about_the_question_stands_as_the_lexical_answer_quoted_it() -> None:
    q = "Когда Берлин стал столицей?"
    lexical = extractive_answer(q, PASSAGES, blind=True)
    assert lexical.answer.text.startswith("Берлин стал столицей объединённой Германии в 1990 году. [c3]")
    got = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({"1990": BLIND_LEAD_FLOOR}))
    assert got.answer == lexical.answer and got.support == lexical.support
    assert any("reads the lead sentence as about the question" in n for n in got.notes)


def test_a_low_support_refusal_is_answered_by_the_reader_above_its_floor() -> None:
    q = "Сколько человек трудится в офисе?"
    lexical = extractive_answer(q, PASSAGES, blind=True)
    assert lexical.answer.refused and "'человек'" in lexical.answer.text  # worded otherwise than the passage
    got = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({"18 сотрудников": 0.88}))
    assert not got.answer.refused and got.answer.text.startswith("В офисе работают 18 сотрудников. [c2]")
    low = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({"18 сотрудников": 0.8}))
    assert low.answer == lexical.answer  # below the floor: the lexical refusal, with the reader's best in a note
    assert any("best similarity 0.80" in n for n in low.notes)


def test_a_reader_that_fails_leaves_the_lexical_answer_and_says_so() -> None:
    q = "Чем славится Берлин?"
    lexical = extractive_answer(q, PASSAGES, blind=True)
    got = extractive_answer(q, PASSAGES, blind=True, reader=ToyReader({}, fail=True))
    assert got.answer == lexical.answer
    assert any(n.startswith("multilingual reader failed (RuntimeError: engine gone)") for n in got.notes)


def test_the_answer_stage_reads_only_a_blind_question_with_the_reader() -> None:
    cfg, llm = AnswerConfig(mode="extractive"), _NoLLM()
    reader = ToyReader({"аэропорта": 0.88})
    q = "Почему офис открыли в этом городе?"
    res = answer_question(q, PASSAGES, cfg, llm, blind=True, cross=reader)
    assert res.answer.text.startswith("Город выбрали из-за аэропорта. [c2]") and res.threshold == BLIND_FLOOR
    assert "multilingual-e5" in (res.threshold_from or "")
    # without a reader (the engine does not load): the lexical answer, labelled
    plain = answer_question(q, PASSAGES, cfg, llm, blind=True)
    assert plain.answer.text.startswith("Офис открыт в 2019 году.")
    assert any("no multilingual reader is loaded" in n for n in plain.notes)
    # a question the embedder reads is never read by it
    en = [Candidate("e1", "e1", "Paris is the capital of France. The Seine flows through Paris.", 1.0, 1)]
    calls = reader.calls
    eng = answer_question("What is the capital of France?", en, cfg, llm, blind=False, cross=reader)
    assert reader.calls == calls and not any("multilingual" in n for n in eng.notes)


DOCS = [("paris.md", "# Париж\n\nСтолицей Франции является город Париж. Через Париж течёт Сена. Город славится своими "
                    "музеями.\n"),
        ("ofis.md", "# Офис\n\nВ офисе работают 18 сотрудников. Офис открыт в 2019 году. Город выбрали из-за "
                    "аэропорта.\n")]


def test_the_pipeline_hands_a_dense_blind_question_over_its_own_language_the_reader(store: Any,
                                                                                     monkeypatch: Any) -> None:
    """Russian chunks, a Russian question, an English-only embedder: the answer stage gets the multilingual reader
    though no chunk is in another language (core.pipeline._cross_reader), and without the engine answers as before."""
    import core.pipeline as pipeline

    deps = Deps(store=store, embedder=HashEmbedder(languages=frozenset({"en"})))
    ingest_files([(n, t.encode()) for n, t in DOCS], store=store, embedder=deps.embedder, config=PipelineConfig())
    cfg = PipelineConfig().with_overrides({"answer_cache.enabled": False, "answer.mode": "extractive"})
    reader = ToyReader({"аэропорта": 0.88})
    monkeypatch.setattr(pipeline.e5_scorer, "available", lambda: True)
    monkeypatch.setattr(pipeline.e5_scorer, "E5Reader", lambda *a, **k: reader)
    tr = run_query("Почему офис открыли в этом городе?", cfg, deps, log=False)
    assert tr.query_lang == "ru" and reader.calls > 0
    assert tr.answer is not None and tr.answer.text.startswith("Город выбрали из-за аэропорта.")
    assert any("answered by multilingual-e5's sentence ranking" in n for n in tr.stage("answer").notes)
    monkeypatch.setattr(pipeline.e5_scorer, "available", lambda: False)
    off = run_query("Почему офис открыли в этом городе?", cfg, deps, log=False)
    assert any("no multilingual reader is loaded" in n for n in off.stage("answer").notes)
    assert off.answer is not None and off.answer.text.startswith("Офис открыт в 2019 году.")
    # an English question over English text: no reader
    calls = reader.calls
    monkeypatch.setattr(pipeline.e5_scorer, "available", lambda: True)
    ingest_files([("en.md", b"# Capitals\n\nParis is the capital of France.\n")], store=store, embedder=deps.embedder,
                 config=PipelineConfig())
    run_query("What is the capital of France?", cfg, deps, log=False)
    assert reader.calls == calls


def test_a_lead_that_does_not_state_the_asked_role_gives_way_to_the_readers_sentence_that_does() -> None:
    from core.answer.support import SentenceRow
    from core.answer.stage import AnswerResult
    from core.types import Answer
    seat = "Компания Велмонт находится в Тарвике и насчитывает 200 сотрудников."
    cfo = "Финансовый директор компании Велмонт — Лена Острова."
    firm = [Candidate("c1", "d1", f"{seat} {cfo}", 1.0, 1)]
    lexical = AnswerResult(Answer(f"{seat} [c1]", ("c1",), False, "extractive"), support=0.5)
    lead = [SentenceRow("c1", "d1", 1, seat, (0, len(seat)), ())]
    reader = ToyReader({"находится": 0.86, "Острова": 0.84})
    got = stage.blind_reading("Кто финансовый директор компании Велмонт?", lexical, lead, firm, reader)
    assert got.answer.text.startswith(f"{cfo} [c1]"), got.answer.text
    assert any("does not state the role asked" in n for n in got.notes)
    # no role asked: the lead about the question stands
    got = stage.blind_reading("Где находится компания Велмонт?", lexical, lead, firm, reader)
    assert got.answer == lexical.answer
    # the reader's sentence that states the role is too far below the best: the lexical answer stands
    got = stage.blind_reading("Кто финансовый директор компании Велмонт?", lexical, lead, firm,
                              ToyReader({"находится": 0.95, "Острова": 0.84}))
    assert got.answer == lexical.answer
