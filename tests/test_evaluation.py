"""Metric oracles on hand-worked cases: span rule, recall, MRR, nDCG (binary, graded), Pass@k, stage recall, A/B."""
from __future__ import annotations

import math

import pytest

from core.eval.metrics import (
    Gold,
    LexicalAnswerJudge,
    answer_metrics,
    collapse_to_docs,
    compare_metric,
    first_relevant_rank,
    judge,
    mean_metrics,
    ndcg_at_k,
    paired_noise,
    pass_at_k,
    precision,
    recall_at_k,
    reciprocal_rank,
    score_trace,
    span_in_text,
    stage_summary,
)
from core.types import Answer, Candidate, StageResult, Trace

SPAN = "The outage lasted 3 hours and 40 minutes on 11 June 2024"  # 12 normalised tokens


# -- the relevance rule --------------------------------------------------------------------------------------------
def test_span_contained_matches_despite_case_whitespace_and_punctuation() -> None:
    chunk = "Summary.\n\nthe OUTAGE lasted 3 hours, and 40\nminutes -- on 11 June, 2024! Then it recovered."
    assert span_in_text(SPAN, chunk)


def test_span_cut_in_two_by_a_chunker_stays_findable_in_the_larger_half() -> None:
    words = SPAN.split()
    first, second = " ".join(words[:6]), " ".join(words[6:])  # 6 + 6 tokens: exactly half each
    assert span_in_text(SPAN, "earlier text " + first)
    assert span_in_text(SPAN, second + " later text")
    # 5 of 12 is below half: not relevant
    assert not span_in_text(SPAN, "earlier text " + " ".join(words[:5]))


def test_scattered_shared_words_are_not_a_match() -> None:
    # every span token appears, but never 6 in a row
    scrambled = "2024 June 11 on minutes 40 and hours 3 lasted outage The"
    assert not span_in_text(SPAN, scrambled)


def test_min_share_is_a_parameter_and_empty_span_never_matches() -> None:
    words = SPAN.split()
    assert span_in_text(SPAN, " ".join(words[:9]), min_share=0.75)
    assert not span_in_text(SPAN, " ".join(words[:8]), min_share=0.75)
    assert not span_in_text("", "anything at all")
    assert span_in_text("TLS_VERSION_MIN", "set TLS_VERSION_MIN = 1.2")  # one-token identifier span


def test_relevance_respects_document_and_modes() -> None:
    g = Gold(doc="final.md", text=SPAN, doc_ids=frozenset({"d-final"}))
    assert judge([Candidate("c1", "d-final", SPAN, 1.0, 1)], [g]) == [frozenset({0})]
    # the same words in the draft policy are not gold: the gold names the final document
    assert judge([Candidate("c2", "d-draft", SPAN, 1.0, 1)], [g]) == [frozenset()]
    exact = Gold(text="  fn main() {}\n", match="exact")
    assert judge([Candidate("c", "any", "fn main() {}", 1, 1), Candidate("d", "any", "fn main() {} // x", 1, 2)],
                 [exact]) == [frozenset({0}), frozenset()]
    doc = Gold(doc="42", match="doc", doc_ids=frozenset({"42"}))
    assert judge([Candidate("42#0", "42", "whatever", 1, 1)], [doc]) == [frozenset({0})]


def test_exact_gold_asks_which_chunk_was_retrieved_span_gold_reads_the_candidate_text() -> None:
    full = "fn main() {\n    run();\n    cleanup();\n}"
    pruned = Candidate("c1", "d", "fn main() {", 1.0, 1)  # a pruning stage kept one line of the chunk
    exact, span = Gold(text=full, match="exact"), Gold(text="run(); cleanup();")
    assert judge([pruned], [exact]) == [frozenset()]
    assert judge([pruned], [exact], originals={"c1": full}) == [frozenset({0})]
    assert judge([pruned], [span], originals={"c1": full}) == [frozenset()]  # the span really was pruned away


# -- ranked-list metrics -------------------------------------------------------------------------------------------
H = [frozenset({0}), frozenset(), frozenset({1}), frozenset(), frozenset({0})]  # gold 0 at 1 (and 5), gold 1 at 3


def test_recall_and_mrr_hand_worked() -> None:
    assert recall_at_k(H, 2, 1) == 0.5
    assert recall_at_k(H, 2, 2) == 0.5
    assert recall_at_k(H, 2, 3) == 1.0
    assert recall_at_k(H, 3, None) == pytest.approx(2 / 3)
    assert recall_at_k(H, 0, 5) is None
    assert reciprocal_rank(H) == 1.0
    assert reciprocal_rank([frozenset(), frozenset(), frozenset({0})]) == pytest.approx(1 / 3)
    assert reciprocal_rank([frozenset()]) == 0.0
    assert first_relevant_rank([frozenset(), frozenset({2})]) == 2
    assert precision(H, 5) == pytest.approx(3 / 5)


def test_ndcg_binary_hand_worked() -> None:
    # relevant at ranks 1 and 3 out of 2 gold: DCG = 1 + 1/log2(4) = 1.5 ; IDCG = 1 + 1/log2(3)
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ndcg_at_k(H, [1, 1], 10) == pytest.approx(expected)
    assert ndcg_at_k(H, [1, 1], 10) == pytest.approx(0.919720, abs=1e-6)
    # k=2 cuts rank 3 off: DCG = 1, IDCG@2 still has both gold items
    assert ndcg_at_k(H, [1, 1], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ndcg_graded_and_each_gold_credited_once() -> None:
    hits = [frozenset({1}), frozenset({0}), frozenset({0})]  # grade-1 item first, then the grade-3 item twice
    # DCG = 1/1 + 3/log2(3) ; the repeat of item 0 at rank 3 earns nothing ; IDCG = 3/1 + 1/log2(3)
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg_at_k(hits, [3, 1], 10) == pytest.approx(expected)
    assert ndcg_at_k(hits, [3, 1], 10) == pytest.approx(0.796708, abs=1e-6)
    assert ndcg_at_k([frozenset({0}), frozenset({1})], [3, 1], 10) == pytest.approx(1.0)
    assert ndcg_at_k(hits, [0, 0], 10) is None


def test_pass_at_k_is_the_cookbook_score() -> None:
    retrieved = ["a", " golden one \n", "c", "golden two"]
    golden = ["golden one", "golden two", "golden three"]
    assert pass_at_k(retrieved, golden, 2) == pytest.approx(1 / 3)
    assert pass_at_k(retrieved, golden, 4) == pytest.approx(2 / 3)
    assert pass_at_k(retrieved, [], 4) == 0.0


def test_collapse_to_docs_keeps_best_rank_per_document() -> None:
    cands = [Candidate("a1", "A", "", 3, 1), Candidate("b1", "B", "", 2, 2), Candidate("a2", "A", "", 1, 3),
             Candidate("c1", "C", "", 1, 4)]
    out = collapse_to_docs(cands)
    assert [(c.doc_id, c.rank) for c in out] == [("A", 1), ("B", 2), ("C", 3)]


# -- a whole trace -------------------------------------------------------------------------------------------------
def _cand(cid: str, text: str, rank: int, doc: str = "d1") -> Candidate:
    return Candidate(cid, doc, text, 1.0 / rank, rank)


def _trace() -> Trace:
    gold_text = "the gateway refuses TLS below version one point two"
    filler = "unrelated words about quarterly revenue and harbour offices"
    retrieval = tuple(_cand(f"c{i}", gold_text if i == 3 else filler, i) for i in range(1, 7))
    fused = tuple(_cand(c.chunk_id, c.text, r) for r, c in enumerate(
        [retrieval[2], retrieval[0], retrieval[1]], start=1))
    # a compression stage (unknown to the evaluator) that prunes the gold sentence away from the top chunk
    pruned = (_cand("c3", "the gateway", 1), _cand("c1", "unrelated", 2))
    return Trace("q", "h", 1, (
        StageResult("bm25", retrieval, 2.0),
        StageResult("dense", (), 0.0, skipped="dense.enabled = false"),
        StageResult("fused", fused, 1.0),
        StageResult("prune", pruned, 3.0),
    ))


def test_score_trace_scores_every_stage_generically() -> None:
    gold = [Gold(doc="ops.md", text="gateway refuses TLS below version one point two", doc_ids=frozenset({"d1"}))]
    s = score_trace(_trace(), gold, ks=(1, 2))
    by = {st.stage: st for st in s.stages}
    assert by["bm25"].recall == 1.0 and by["bm25"].first_rank == 3 and by["bm25"].depth == 6
    assert by["dense"].skipped and by["dense"].recall is None
    assert by["fused"].recall == 1.0 and by["fused"].first_rank == 1
    assert by["prune"].recall == 0.0  # the span was pruned: recall after compression drops, as it must
    assert by["fused"].token_share == pytest.approx(by["fused"].tokens / by["bm25"].tokens)
    assert by["prune"].token_share < by["fused"].token_share
    # the final stage is the last that ran: 'prune'
    assert s.final_stage == "prune" and s.metrics["recall@2"] == 0.0 and s.metrics["mrr"] == 0.0


def test_score_trace_without_gold_leaves_retrieval_metrics_undefined() -> None:
    s = score_trace(_trace(), [], ks=(5,))
    assert s.metrics["recall@5"] is None and s.metrics["mrr"] is None and s.metrics["ndcg@10"] is None
    assert stage_summary([s])["bm25"]["recall"] is None


def test_doc_unit_scores_documents_not_chunks() -> None:
    stage = (_cand("a#0", "x", 1, "A"), _cand("a#1", "y", 2, "A"), _cand("b#0", "z", 3, "B"))
    t = Trace("q", "h", 1, (StageResult("bm25", stage, 1.0),))
    gold = [Gold(doc="B", match="doc", doc_ids=frozenset({"B"}))]
    s = score_trace(t, gold, ks=(2,), unit="doc")
    assert s.metrics["recall@2"] == 1.0 and s.metrics["mrr"] == 0.5  # B is the 2nd document, 3rd chunk


def test_mean_metrics_skips_none_and_stage_summary_averages() -> None:
    assert mean_metrics([{"a": 1.0, "b": None}, {"a": 0.0, "b": None}]) == {"a": 0.5, "b": None}
    gold = [Gold(text="gateway refuses TLS below version one point two")]
    s = score_trace(_trace(), gold)
    summ = stage_summary([s, s])
    assert list(summ) == ["bm25", "dense", "fused", "prune"]
    assert summ["dense"]["ran"] == 0.0 and summ["fused"]["recall"] == 1.0


def test_a_stage_that_never_returns_candidates_has_no_recall() -> None:
    gold = [Gold(text="gateway refuses TLS below version one point two")]
    t = _trace()
    answered = Trace(t.query, t.config_hash, 1, (*t.stages, StageResult("answer", (), 5.0)))
    s = score_trace(answered, gold)
    assert s.final_stage == "prune"  # the answer stage is not what went to the model
    assert stage_summary([s])["answer"]["recall"] is None and stage_summary([s])["prune"]["recall"] == 0.0


# -- answers -------------------------------------------------------------------------------------------------------
def test_answer_metrics_slot_in_only_when_there_is_an_answer() -> None:
    assert answer_metrics("q", True, None, []) == {"faithfulness": None, "answer_relevancy": None,
                                                   "refusal_accuracy": None, "answered_correctly": None,
                                                   "refused_unanswerable": None}
    refused = answer_metrics("q", False, Answer("I cannot answer that.", refused=True), [])
    assert refused["refusal_accuracy"] == 1.0 and refused["faithfulness"] is None
    wrong = answer_metrics("q", True, Answer("", refused=True), [])
    assert wrong["refusal_accuracy"] == 0.0
    ctx = ["The outage lasted 3 hours and 40 minutes."]
    ans = Answer("The outage lasted 3 hours and 40 minutes. Aliens caused it yesterday.")
    m = answer_metrics("How long did the outage last?", True, ans, ctx, LexicalAnswerJudge())
    assert m["faithfulness"] == 0.5  # one of two sentences is supported by the context
    # content words of the question (longer than 3 letters): long, outage, last -> only 'outage' is in the answer
    assert m["answer_relevancy"] == pytest.approx(1 / 3)
    assert m["refusal_accuracy"] == 1.0


# -- A/B -----------------------------------------------------------------------------------------------------------
def test_difference_inside_the_spread_is_no_win() -> None:
    d = compare_metric("recall@5", 0.70, 0.72, run_spread_a=0.02, run_spread_b=0.02)
    assert d.verdict == "no clear difference" and d.spread == pytest.approx(math.hypot(0.02, 0.02))
    assert compare_metric("recall@5", 0.70, 0.80, run_spread_a=0.02).verdict == "B better"
    assert compare_metric("recall@5", 0.80, 0.70).verdict == "A better"
    assert compare_metric("ms", 10.0, 5.0, higher_is_better=False).verdict == "B better"
    assert compare_metric("mrr", None, 0.5).verdict == "n/a"


def test_per_query_noise_blocks_wins_that_hang_on_one_question() -> None:
    a = [0.0] * 9 + [0.0]
    b = [0.0] * 9 + [1.0]  # one question flips: mean +0.1, but that is all noise
    assert paired_noise(a, b) == pytest.approx(2 * math.sqrt(0.1) / math.sqrt(10))
    d = compare_metric("recall@5", 0.0, 0.1, per_query_a=a, per_query_b=b)
    assert d.verdict == "no clear difference"
    many_a, many_b = [0.0] * 50, [1.0] * 40 + [0.0] * 10
    assert compare_metric("recall@5", 0.0, 0.8, per_query_a=many_a, per_query_b=many_b).verdict == "B better"
