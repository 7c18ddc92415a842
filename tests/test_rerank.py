"""Rerankers: MaxSim oracle, windowed token vectors, caches, IDF weights, the cross-encoder path on a tiny random
model, LLM listwise, fallbacks with notices, and the rerank stage in the pipeline."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.cascade.rerank import (
    CrossEncoderReranker,
    EmbedderCosineReranker,
    LateInteractionReranker,
    LLMListwiseReranker,
    listwise_scores,
    load_reranker,
    pooled_span_scorer,
    rerank,
    rerank_text,
)
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.models.llm import LLMError, OfflineLLM
from core.models.tokens import (
    TokenCache,
    TokenMatrix,
    encode_token_matrices,
    maxsim,
    text_key,
)
from core.pipeline import run_query
from core.store import Store
from core.types import CONTEXT_KEY, Candidate
from tests.cascade_fakes import (
    ConceptEmbedder,
    ConceptWindowEncoder,
    FixedReranker,
    ScriptedListwiseLLM,
)
from tests.fakes import HashEmbedder

SYN = {"automobile": "car", "vehicle": "car", "mend": "repair", "fix": "repair", "price": "cost", "fee": "cost"}


def _cands(texts: list[str]) -> list[Candidate]:
    return [Candidate(f"c{i}", "d", t, 1.0 / (i + 1), i + 1) for i, t in enumerate(texts)]


# -- MaxSim -------------------------------------------------------------------------------------------------------
def test_maxsim_by_hand() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d1 = np.array([[1.0, 0.0], [0.6, 0.8]])  # best for q1: 1.0, for q2: 0.8
    d2 = np.array([[0.0, 1.0]])  # q1: 0.0, q2: 1.0
    empty = np.zeros((0, 2))
    got = maxsim(q, np.array([1.0, 1.0]), [d1, d2, empty])
    assert got == pytest.approx([0.9, 0.5, 0.0])
    weighted = maxsim(q, np.array([3.0, 1.0]), [d1, d2])  # (3*1.0 + 1*0.8)/4 and (3*0 + 1*1)/4
    assert weighted == pytest.approx([0.95, 0.25])


def test_windows_cover_every_token_once_and_drop_punctuation() -> None:
    enc = ConceptWindowEncoder(window_tokens=4)
    text = "alpha beta, gamma delta epsilon; zeta eta theta iota kappa."
    tm = encode_token_matrices(enc, [text], overlap=2)[0]
    words = [text[s:e] for s, e in tm.spans]
    assert words == ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    assert enc.windows_encoded > 1  # the text was longer than one window
    expect = np.stack([enc.vector(int(t)) for t in tm.ids])
    assert np.allclose(tm.vecs.astype(np.float32), expect, atol=2e-3)
    assert tm.vecs.dtype == np.float16


def test_token_cache_is_an_lru_bounded_in_bytes() -> None:
    tm = TokenMatrix(np.zeros(10, np.int32), np.zeros((10, 8), np.float16), np.zeros((10, 2), np.int32))
    cache = TokenCache(max_bytes=tm.nbytes * 2)
    cache.put("m", "a", tm)
    cache.put("m", "b", tm)
    assert cache.get("m", "a") is tm  # a becomes most recent
    cache.put("m", "c", tm)
    assert cache.get("m", "b") is None and cache.get("m", "a") is tm and len(cache) == 2


# -- late interaction -----------------------------------------------------------------------------------------------
def test_late_interaction_reorders_a_lexically_far_answer() -> None:
    """The fused list puts the word-overlap distractor first; the answer shares no word with the query but says the
    same thing in synonyms. MaxSim over concept token vectors must move it to the top."""
    query = "automobile repair price"
    distractor = "Bicycle lanes and bus routes; parking for every automobile owner is free on Sundays."
    answer = "Mending a car costs about 300 euros at the garage: the fee covers the fix."
    reranker = LateInteractionReranker(ConceptWindowEncoder(SYN))
    out, res = rerank(query, _cands([distractor, answer]), reranker, k=2)
    assert [c.text for c in out] == [answer, distractor]
    assert out[0].meta["rank_before"] == 2 and out[0].rank == 1 and out[0].score > out[1].score
    assert res.computed == 2 and res.cache_hits == 0  # chunk texts (the query is counted apart)


class _PooledQueries:
    """Sentence vectors in the token space of a ConceptWindowEncoder: the mean of a text's concept vectors."""

    def __init__(self, enc: ConceptWindowEncoder) -> None:
        self.enc = enc

    def encode(self, texts):
        out = []
        for t in texts:
            v = np.mean([self.enc.vector(i) for i in self.enc.tokenize(t)[0]], axis=0)
            out.append(v / np.linalg.norm(v))
        return np.stack(out).astype(np.float32)


def test_pooled_sentence_vectors_come_from_the_cached_chunk_token_vectors() -> None:
    enc = ConceptWindowEncoder(SYN)
    late = LateInteractionReranker(enc)
    text = "Opening hours are 8 to 5 on weekdays. Mending a car costs about 300 euros. Bus routes change in May."
    spans = [(0, 37), (38, 75), (76, len(text))]
    late.token_matrices([text])  # what the rerank stage leaves in the cache
    before = enc.windows_encoded
    called = []
    scorer = pooled_span_scorer(late, _PooledQueries(enc), fallback=lambda q, it: called.append(q) or [])
    (scores,) = scorer("automobile price", [(text, spans)])
    assert int(np.argmax(scores)) == 1 and enc.windows_encoded == before and not called  # synonyms, no model call
    # By hand: the cosine of the query vector and the mean of the sentence's content-token vectors.
    q = _PooledQueries(enc).encode(["automobile price"])[0]
    tm = late.token_matrices([text])[0][0]
    inside = (tm.spans[:, 0] >= spans[1][0]) & (tm.spans[:, 1] <= spans[1][1])
    m = tm.vecs[inside].astype(np.float32).mean(axis=0)
    assert scores[1] == pytest.approx(float(m @ q) / float(np.linalg.norm(m)), rel=1e-4)
    # The dense stage's query vector is used as it is: the query is not encoded a second time.
    class NoEncode:
        def encode(self, texts):
            raise AssertionError("the query was encoded again")

    reused = pooled_span_scorer(late, NoEncode(), fallback=lambda q, it: [], query_vec=q)
    np.testing.assert_allclose(reused("automobile price", [(text, spans)])[0], scores, rtol=1e-5)
    # Token vectors of another width than the query embedding cannot be compared: the fallback scores.
    other = pooled_span_scorer(late, HashEmbedder(dim=64), fallback=lambda q, it: called.append(q) or ["fb"])
    assert other("automobile price", [(text, spans)]) == ["fb"] and called == ["automobile price"]


def test_chunk_token_vectors_are_cached_in_memory_and_in_the_store(store: Store) -> None:
    enc = ConceptWindowEncoder(SYN)
    texts = ["a car needs a fix", "the fee is small", "bus routes"]
    first = LateInteractionReranker(enc, persist=store.caches)
    a = first.score("car fee", texts)
    assert a.computed == 3 and a.cache_hits == 0
    b = first.score("car fee", texts)
    assert b.computed == 0 and b.cache_hits == 3 and np.allclose(a.scores, b.scores)
    before = enc.windows_encoded
    restarted = LateInteractionReranker(enc, persist=store.caches)  # empty memory cache: reads the store
    c = restarted.score("car fee", texts)
    # Only the query is encoded again (queries live in memory only).
    assert c.computed == 0 and enc.windows_encoded == before + 1 and np.allclose(a.scores, c.scores, atol=1e-3)
    stored = store.caches.cached_token_vectors(enc.model_id, [text_key(enc.model_id, texts[0])])
    ids, vecs, spans = next(iter(stored.values()))
    assert vecs.dtype == np.float16 and vecs.shape == (len(ids), enc.dim) and spans.shape == (len(ids), 2)
    assert store.caches.clear_token_vectors() == 3  # chunk texts only: queries stay in memory


class _Corpus:
    def __init__(self, texts: list[str]) -> None:
        self.texts, self.version = texts, 1

    def corpus_version(self, workspace: str = "default") -> int:
        return self.version

    def chunks(self, workspace: str = "default", doc_id: str | None = None) -> list[Candidate]:
        return _cands(self.texts)


def test_query_weights_idf_and_stop_words() -> None:
    corpus = _Corpus(["gateway logs", "gateway port", "gateway tls", "kraken tls"])
    r = LateInteractionReranker(ConceptWindowEncoder(), corpus=corpus)
    _, w = r.query_matrix("what is the gateway kraken")
    # what/is/the are stop words (0); 'gateway' is in 3 of 4 chunks, 'kraken' in 1: rarer weighs more.
    assert list(w[:3]) == [0.0, 0.0, 0.0] and w[4] > w[3] > 0
    _, only_stop = r.query_matrix("what is it")
    assert (only_stop > 0).all()  # a query of stop words only keeps them rather than scoring nothing
    corpus.texts.append("kraken kraken")
    corpus.version = 2
    _, w2 = r.query_matrix("gateway kraken")
    assert w2[1] < w[4]  # IDF rebuilt when the corpus version moved


def test_score_spans_reads_sentences_in_their_chunk() -> None:
    r = LateInteractionReranker(ConceptWindowEncoder(SYN))
    text = "Bus routes change in May. A car fix costs a fee of 300 euros."
    spans = [(0, 25), (26, len(text))]
    scores, res = r.score_spans("automobile repair price", [(text, spans)])
    assert scores[0][1] > scores[0][0] and res.computed == 1
    again, res2 = r.score_spans("automobile repair price", [(text, spans)])
    assert res2.computed == 0 and np.allclose(scores[0], again[0])


def test_rerank_text_reads_the_context_prefix() -> None:
    c = Candidate("c", "d", "chunk body", 1.0, 1, {CONTEXT_KEY: "From the 2024 report."})
    assert rerank_text(c) == "From the 2024 report.\n\nchunk body"
    assert rerank_text(c, use_context=False) == "chunk body"
    assert rerank_text(Candidate("c", "d", "plain", 1.0, 1)) == "plain"


# -- cross-encoder --------------------------------------------------------------------------------------------------
def _tiny_cross_encoder(folder: Path) -> Path:
    """A 2-layer, 32-wide BERT with random weights and a one-logit head, plus a 40-word vocabulary, saved the way a
    cross-encoder folder is: checks the wiring, says nothing about quality."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    words = "the a car fix cost fee bus route gateway tls port log is what how much does to of in".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *[f"w{i}" for i in range(20)]]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def test_cross_encoder_path_on_a_tiny_random_model(tmp_path: Path) -> None:
    path = _tiny_cross_encoder(tmp_path / "tiny-ce")
    loaded = load_reranker("cross-encoder", model=str(path), embedder=HashEmbedder(), local_files_only=True)
    assert loaded.notice is None and isinstance(loaded.reranker, CrossEncoderReranker)
    assert loaded.reranker.name == f"cross-encoder:{path}"
    texts = ["the car fix cost", "bus route", "gateway tls port", "what is the fee"]
    query = "how much does a car fix cost"
    res = loaded.reranker.score(query, texts)
    # Oracle: the same saved weights run through transformers directly, query and text as one pair; a one-logit
    # cross-encoder's relevance is the sigmoid of that logit.
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast

    model = BertForSequenceClassification.from_pretrained(str(path)).eval()
    tok = BertTokenizerFast.from_pretrained(str(path))
    with torch.inference_mode():
        logits = model(**tok([query] * len(texts), texts, padding=True, return_tensors="pt")).logits[:, 0]
    expected = torch.sigmoid(logits).numpy()
    np.testing.assert_allclose(res.scores, expected, rtol=1e-4, atol=1e-5)
    out, _ = rerank(query, _cands(texts), loaded.reranker, k=2)
    assert [c.text for c in out] == [texts[i] for i in np.argsort(-expected, kind="stable")[:2]]
    assert [c.meta["rank_before"] for c in out] == [int(i) + 1 for i in np.argsort(-expected, kind="stable")[:2]]


def test_unloadable_cross_encoder_falls_back_with_a_notice() -> None:
    name = "no-such-org/no-such-reranker-model"
    loaded = load_reranker("cross-encoder", model=name, embedder=ConceptEmbedder(SYN), local_files_only=True)
    assert isinstance(loaded.reranker, LateInteractionReranker)
    assert name in loaded.notice and "late-interaction" in loaded.notice and "instead" in loaded.notice
    # An embedder without token vectors: the fallback is embedder cosine, and the notice says that too.
    bare = load_reranker("cross-encoder", model=name, embedder=HashEmbedder(), local_files_only=True)
    assert isinstance(bare.reranker, EmbedderCosineReranker) and "embedder cosine" in bare.notice


# -- LLM listwise ---------------------------------------------------------------------------------------------------
def test_listwise_scores_by_hand() -> None:
    s = listwise_scores([3, 1, 3, 9, "x"], 4)  # duplicate, out of range and junk are ignored
    assert list(np.argsort(-s, kind="stable")) == [2, 0, 1, 3]


def test_llm_reranker_orders_by_the_reply_and_records_cost() -> None:
    llm = ScriptedListwiseLLM([{"ranking": [2, 1]}, LLMError("rate limited")])
    loaded = load_reranker("llm", embedder=ConceptEmbedder(SYN), llm=llm, llm_model="claude-haiku-4-5")
    assert isinstance(loaded.reranker, LLMListwiseReranker) and loaded.notice is None
    out, res = rerank("car fee", _cands(["bus", "car fee"]), loaded.reranker, k=2)
    assert [c.text for c in out] == ["car fee", "bus"] and res.usage.calls == 1 and res.usage.usd > 0
    req = llm.requests[0]
    assert req.json_schema is not None and req.purpose == "rerank" and "[2] car fee" in req.user[0].text
    failed = loaded.reranker.score("car fee", ["bus", "car fee"])
    assert any("LLM rerank failed" in n for n in failed.notes) and failed.scores[1] > failed.scores[0]


def test_llm_without_a_key_falls_back_with_a_notice() -> None:
    loaded = load_reranker("llm", embedder=ConceptEmbedder(SYN), llm=OfflineLLM())
    assert isinstance(loaded.reranker, LateInteractionReranker)
    assert "ANTHROPIC_API_KEY" in loaded.notice and "late-interaction" in loaded.notice


# -- Deps and the pipeline ------------------------------------------------------------------------------------------
DOCS = [
    ("cars.md", b"# Garage\n\nMending a car costs about 300 euros; the fee covers the fix.\n\n"
                b"## Hours\n\nThe garage opens at 8."),
    ("city.md", b"# City\n\nParking for every automobile owner is free on Sundays. Automobile clubs meet on Monday."),
]


@pytest.fixture
def concept_deps(store: Store) -> Deps:
    deps = Deps(store=store, embedder=ConceptEmbedder(SYN))
    ingest_files(DOCS, store=store, embedder=deps.embedder, config=PipelineConfig())
    return deps


def test_deps_build_the_reranker_once_and_report_fallbacks_once(store: Store) -> None:
    deps = Deps(store=store, embedder=HashEmbedder())
    r1, note1 = deps.reranker_for("cross-encoder", "missing/model")
    r2, note2 = deps.reranker_for("cross-encoder", "missing/model")
    assert r1 is r2 and note1 == note2 and note1 and deps.notices.count(note1) == 1
    injected = FixedReranker({})
    assert Deps(store=store, embedder=HashEmbedder(), reranker=injected).reranker_for("late-interaction")[0] is injected


def test_pipeline_rerank_stage_moves_the_synonym_answer_up(concept_deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"prune.enabled": False, "mmr.enabled": False, "rerank.combine": "replace",
                                           "router.enabled": False})  # the cascade, not the routing, is tested
    trace = run_query("automobile repair price", cfg, concept_deps)
    fused, rr = trace.stage("fused"), trace.stage("rerank")
    assert "Automobile" in fused.candidates[0].text  # lexical overlap wins fusion
    assert "Mending a car" in rr.candidates[0].text and rr.info["reranker"].startswith("late-interaction")
    assert rr.info["candidates_in"] == len(fused.candidates) and rr.info["tokens_in"] >= rr.info["tokens_out"]
    assert rr.candidates[0].meta["rank_before"] > 1


def test_rerank_reads_context_prefixes_when_contextual_retrieval_is_on(concept_deps: Deps) -> None:
    seen: list[str] = []

    class Spy(FixedReranker):
        def score(self, query, texts, *, workspace="default"):
            seen.extend(texts)
            return super().score(query, texts, workspace=workspace)

    concept_deps.reranker = Spy({})
    cfg = PipelineConfig().with_overrides({"context.variant": "heuristic", "prune.enabled": False})
    trace = run_query("garage fee", cfg, concept_deps)
    assert seen and all(t.startswith("Document:") for t in seen)  # heuristic contexts open with the document
    final = trace.final()
    assert not any(c.text.startswith("Document:") for c in final.candidates)  # generation reads the chunk alone


def test_every_cascade_stage_switches_off_with_a_reason(concept_deps: Deps) -> None:
    base = PipelineConfig().with_overrides({"router.enabled": False})  # the cascade, not the routing, is tested
    on = run_query("car fee", base, concept_deps)
    assert [on.stage(s).skipped for s in ("rerank", "prune", "mmr")] == [None, None, None]
    assert on.stage("expand").skipped == "expand.enabled = false"
    for stage in ("rerank", "prune", "mmr"):
        off = run_query("car fee", base.with_overrides({f"{stage}.enabled": False}), concept_deps)
        assert off.stage(stage).skipped == f"{stage}.enabled = false"
    assert on.stage("prune").info["scorer"] == "hybrid"
    for scorer in ("reranker", "embedder", "hybrid-encoded"):  # every sentence scorer runs through the pipeline
        alt = run_query("car fee", base.with_overrides({"prune.scorer": scorer}), concept_deps)
        assert alt.stage("prune").info["scorer"] == scorer and alt.stage("prune").candidates
    nofusion = run_query("car fee", base.with_overrides({"fusion.enabled": False}), concept_deps)
    assert nofusion.stage("rerank").info["input"] == "dense"  # the best list that ran


@pytest.mark.slow
def test_real_late_interaction_lifts_a_paraphrased_answer(bundled_embedder) -> None:
    """The bundled MiniLM, read token by token: the answer paraphrases the question (refund / money back, damaged /
    broken); the distractor shares its words. BM25 would put the distractor first."""
    from core.retrieve.bm25 import BM25Index

    query = "How do I get my money back for a broken order?"
    distractor = "Order numbers are printed on every invoice, and money transfers to suppliers take three days."
    answer = "Refunds for damaged goods are paid within 14 days once the item has been returned to us."
    bm25 = BM25Index(["d", "a"], [distractor, answer])
    assert bm25.search(query, 2)[0][0] == "d"
    loaded = load_reranker("late-interaction", embedder=bundled_embedder)
    out, _ = rerank(query, _cands([distractor, answer]), loaded.reranker, k=2)
    assert out[0].text == answer and loaded.notice is None


# -- language awareness and the blend (issue #11) ---------------------------------------------------------------
class _EnglishOnly(FixedReranker):
    """A fixed-score reranker that declares English only, like the bundled MiniLM's token vectors."""

    def __init__(self, scores: dict[str, float]) -> None:
        super().__init__(scores)
        self.languages = frozenset({"en"})


def test_blend_scores_by_hand() -> None:
    from core.cascade.rerank import blend_scores

    # Incoming order a, b, c; reranker order c, a, b. With k=1, weight 1: a = 1/2 + 1/3, b = 1/3 + 1/4,
    # c = 1/4 + 1/2; scaled by the best possible (1/2 + 1/2).
    got = blend_scores(np.array([0.5, 0.1, 0.9]), input_weight=1.0, rrf_k=1)
    assert got == pytest.approx([1 / 2 + 1 / 3, 1 / 3 + 1 / 4, 1 / 4 + 1 / 2])
    # Weight 0 is the reranker alone (as a rank score).
    only = blend_scores(np.array([0.5, 0.1, 0.9]), input_weight=0.0, rrf_k=1)
    assert list(np.argsort(-only)) == [2, 0, 1]


def test_rrf_combine_keeps_the_incoming_top_hit_near_the_top() -> None:
    texts = ["gold passage", "filler one", "filler two", "filler three"]
    scores = {"gold passage": 0.1, "filler one": 0.5, "filler two": 0.6, "filler three": 0.9}
    rr = FixedReranker(scores)
    replaced, _ = rerank("q", _cands(texts), rr, k=4)
    assert replaced[-1].text == "gold passage"  # the reranker alone sends it to the bottom
    blended, res = rerank("q", _cands(texts), rr, k=4, combine="rrf", input_weight=1.0, rrf_k=1)
    # gold: 1/2 + 1/5 = .70; filler three: 1/5 + 1/2 = .70 (tie -> incoming order); one 1/3+1/4 = two 1/4+1/3
    assert [c.text for c in blended] == ["gold passage", "filler three", "filler one", "filler two"]
    assert blended[0].meta["rerank_score"] == pytest.approx(0.1) and any("RRF" in n for n in res.notes)


def test_reranker_passes_a_query_it_cannot_read_through() -> None:
    texts = ["Выручка выросла на 12%", "Офис в Алматы", "Склад в Костанае"]
    rr = _EnglishOnly({t: float(i) for i, t in enumerate(texts)})  # would reverse the list
    out, res = rerank("На сколько выросла выручка?", _cands(texts), rr, k=2, query_lang="ru")
    assert [c.text for c in out] == texts[:2] and [c.rank for c in out] == [1, 2]
    assert "passed through" in res.notes[0] and "'ru'" in res.notes[0]


def test_foreign_candidates_keep_their_places_while_the_rest_move() -> None:
    texts = ["weak english", "Русский абзац про выручку", "strong english"]
    rr = _EnglishOnly({"weak english": 0.1, "strong english": 0.9, "Русский абзац про выручку": 5.0})
    out, res = rerank("revenue growth", _cands(texts), rr, k=3, query_lang="en")
    assert [c.text for c in out] == ["strong english", "Русский абзац про выручку", "weak english"]
    assert out[1].meta["not_reranked"] == "language" and out[1].score == out[0].score  # level with the one above
    assert any("kept their incoming places" in n for n in res.notes)



def test_a_missing_model_is_reported_at_once_with_no_connection_attempt(monkeypatch: pytest.MonkeyPatch,
                                                                        store: Store) -> None:
    """Issue #44: a cross-encoder without weights on disk, with HF_HUB_OFFLINE unset, makes 0 connection attempts
    (every socket connect is counted and refused) and the rerank stage that fell back carries the notice."""
    import socket
    import time

    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network refused by the test")

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: refuse(self, address) or 1)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))  # type: ignore[arg-type]
    # a name lookup is the first step of any fetch (without it the old path failed in DNS, 0 connects, 27 s of retries)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: refuse(None, host))  # type: ignore[arg-type]
    ingest_files([("a.txt", b"The car fix cost is forty euros.\n\nThe bus route runs hourly.")], store=store,
                 embedder=HashEmbedder(), config=PipelineConfig())
    deps = Deps(store=store, embedder=HashEmbedder())
    cfg = PipelineConfig().with_overrides({"rerank.method": "cross-encoder",
                                           "rerank.model": "cross-encoder/ms-marco-MiniLM-L-6-v2",
                                           "answer.enabled": False, "router.enabled": False})
    t0 = time.perf_counter()
    trace = run_query("how much is the car fix", cfg, deps, log=False)
    assert attempts == []
    assert time.perf_counter() - t0 < 5
    rr = trace.stage("rerank")
    assert rr is not None and rr.skipped is None
    note = next(n for n in rr.notes if "cross-encoder" in n)
    assert "not on disk" in note and "never downloaded" in note and "instead" in note


def test_the_floor_keeps_the_incoming_best_within_its_cut_by_hand() -> None:
    from core.cascade.rerank import keep_floor

    # the reranker put incoming #1 (index 0) at 6th and cut incoming #2 (index 1) entirely
    order, moved = keep_floor([5, 4, 3, 2, 6, 0, 7], keep_top=2, keep_within=3)
    assert order == [5, 0, 1, 4, 3, 2, 6, 7] and moved == {0: 6, 1: 8}
    # an incoming first already in place is never pushed out by the ones moved up beside it
    assert keep_floor([9, 8, 7, 1, 0], 2, 4) == ([9, 8, 1, 0, 7], {0: 5})
    assert keep_floor([0, 1, 2], 2, 3) == ([0, 1, 2], {})  # nothing to do
    assert keep_floor([2, 1, 0], 0, 1) == ([2, 1, 0], {})  # floor off


def test_a_floored_rerank_says_what_it_moved_in_its_notes_and_meta() -> None:
    texts = ["bus route timetable", "gateway tls port", "how much does a car fix cost: forty euros", "car fix cost"]
    cands = _cands(texts)
    reranker = EmbedderCosineReranker(HashEmbedder())
    free, _ = rerank("how much does a car fix cost", cands, reranker, k=4)
    first = next(c for c in free if c.chunk_id == cands[0].chunk_id)
    assert first.rank > 1  # without the floor the reranker pushes the incoming first down
    out, rs = rerank("how much does a car fix cost", cands, reranker, k=4, keep_top=1, keep_within=1)
    assert out[0].chunk_id == cands[0].chunk_id and out[0].meta["floored"] == first.rank
    assert any(n.startswith("floor: the incoming first 1 stay within the first 1; moved back up: #1") for n in rs.notes)
    assert [c.chunk_id for c in out[1:]] == [c.chunk_id for c in free if c.chunk_id != cands[0].chunk_id]


# -- the generated queries the list was searched with (rerank.read_queries) ----------------------------------------
class _QueryTable:
    """Scores by (query, text key) from a table (0 elsewhere), and counts its calls: a reranker whose verdict on a
    page depends on the question asked, as late interaction's does."""

    name = "table:test"

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table, self.asked = table, []

    def score(self, query: str, texts, *, workspace: str = "default"):
        from core.cascade.rerank import RerankScores

        self.asked.append(query)
        row = self.table.get(query, {})
        return RerankScores(np.array([next((v for k, v in row.items() if k in t), 0.0) for t in texts]), 0, len(texts))


class _QueryTableTokens(_QueryTable):
    """The same, declaring the late-interaction capability (a query is encoded on its own)."""

    def query_matrix(self, query: str, workspace: str = "default"):
        return np.zeros((1, 2)), np.ones(1)


QUESTION = "Who is the father of the director of Polish Wedding?"
SUB = "Theresa Connelly father"
PAGES = ["Polish Wedding is a 1998 film directed by Theresa Connelly.",
         "Theresa Connelly is the daughter of the painter Edward Connelly.",
         "Father of the Bride is a wedding film; its director is Charles Shyer.",
         "The Polish director Andrzej Wajda and his father."]
TABLE = {QUESTION: {"Polish Wedding is": 0.5, "Theresa Connelly is": 0.1, "Father of the Bride": 0.8, "Wajda": 0.7},
         SUB: {"Polish Wedding is": 0.4, "Theresa Connelly is": 0.9, "Father of the Bride": 0.2, "Wajda": 0.1}}


def test_a_page_a_sub_question_found_is_judged_by_that_question() -> None:
    cands = _cands(PAGES)  # hybrid order: the film page, the director's page (the second hop), two distractors
    alone, _ = rerank(QUESTION, cands, _QueryTable(TABLE), k=2, combine="replace")
    assert [c.chunk_id for c in alone] == ["c2", "c3"]  # the whole question prefers the distractors
    reranker = _QueryTable(TABLE)
    out, rs = rerank(QUESTION, cands, reranker, k=2, combine="replace", queries=(SUB, QUESTION, "  ", SUB))
    assert reranker.asked == [QUESTION, SUB]  # the question itself, blanks and repeats are not scored again
    assert [c.chunk_id for c in out] == ["c1", "c2"]
    assert out[0].meta["rerank_query"] == SUB and out[0].meta["rerank_score"] == pytest.approx(0.9)
    assert "rerank_query" not in out[1].meta and out[1].meta["rerank_score"] == pytest.approx(0.8)
    assert any(n.startswith("read 1 generated query beside the question; 1 of 4 candidates scored best by one: "
                            f"#1 c1 by {SUB!r}") for n in rs.notes)
    blended, _ = rerank(QUESTION, cands, _QueryTable(TABLE), k=2, queries=(SUB,), combine="rrf")
    assert [c.chunk_id for c in blended] == ["c1", "c0"]  # fused #2 and reranked #1 ties fused #1 and reranked #3


def test_the_rerank_stage_reads_generated_queries_only_when_cheap_and_switched_on() -> None:
    from core.cascade.stage import rerank_step
    from core.config import RerankConfig

    cands = _cands(PAGES)
    r = RerankConfig(k=2, combine="replace", keep_top=0)
    cheap = _QueryTableTokens(TABLE)
    on = rerank_step(QUESTION, cands, "fused", r, cheap, workspace="w", lang="en", generated=(SUB,))
    assert cheap.asked == [QUESTION, SUB] and on.info.queries == (SUB,) and on.info.lifted == 1
    assert on.info.to_dict()["queries"] == [SUB] and on.candidates[0].chunk_id == "c1"
    off = _QueryTableTokens(TABLE)
    got = rerank_step(QUESTION, cands, "fused", r.model_copy(update={"read_queries": False}), off, workspace="w",
                      lang="en", generated=(SUB,))
    assert off.asked == [QUESTION] and got.info.queries == () and "queries" not in got.info.to_dict()
    assert any("rerank.read_queries = false" in n and "judged by the question alone" in n for n in got.notes)
    dear = _QueryTable(TABLE)  # no query_matrix: one more query would cost a whole pass (cross-encoder, LLM)
    got = rerank_step(QUESTION, cands, "fused", r, dear, workspace="w", lang="en", generated=(SUB,))
    assert dear.asked == [QUESTION] and any("would score the whole list once more per query" in n for n in got.notes)
    plain = rerank_step(QUESTION, cands, "fused", r, _QueryTableTokens(TABLE), workspace="w", lang="en")
    assert not any("generated" in n for n in plain.notes)  # no transform ran: nothing to say


def test_the_pipeline_hands_the_transforms_questions_to_the_rerank(concept_deps: Deps) -> None:
    cfg = PipelineConfig().with_overrides({"router.enabled": False, "transforms.multi_query": "on",
                                           "transforms.hyde": "on", "answer.enabled": False})
    trace = run_query("Which costs more, the garage fix or parking on Sundays?", cfg, concept_deps, log=False)
    mq, rr = trace.stage("multi_query"), trace.stage("rerank")
    assert mq.skipped is None and list(mq.info["queries"]) == ["the garage fix", "parking on Sundays"]
    assert rr.info["queries"] == ["the garage fix", "parking on Sundays"]  # HyDE's guessed passage is not a question
    assert rr.info["lifted"] == sum("rerank_query" in c.meta for c in rr.candidates) > 0
    off = run_query("Which costs more, the garage fix or parking on Sundays?",
                    cfg.with_overrides({"rerank.read_queries": False}), concept_deps, log=False)
    assert "queries" not in off.stage("rerank").info
