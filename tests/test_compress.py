"""Compression stages: sentence pruning (identifiers verbatim, budget, neighbours), duplicate collapse, MMR oracle."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pytest

from core.cascade.prune import (
    GAP,
    bm25_span_scorer,
    collapse_duplicates,
    diversify,
    exact_terms,
    hybrid_span_scorer,
    is_title_like,
    local_headings,
    mmr_order,
    needs_previous,
    pin_terms,
    prune_sentences,
    sentence_prefixes,
    sentence_units,
    zscores,
)
from core.cascade.rerank import embedder_span_scorer
from core.store import Store
from core.text import estimate_llm_tokens, sha256_text
from core.types import Candidate
from tests.fakes import HashEmbedder


def _cands(texts: Sequence[str], scores: Sequence[float] | None = None) -> list[Candidate]:
    scores = scores if scores is not None else [1.0 - i / 10 for i in range(len(texts))]
    return [Candidate(f"c{i}", f"d{i}", t, s, i + 1) for i, (t, s) in enumerate(zip(texts, scores))]


def _by_words(query: str, items):  # a transparent scorer: share of query words in the sentence
    words = set(re.findall(r"\w+", query.lower()))
    return [np.array([len(words & set(re.findall(r"\w+", t[s:e].lower()))) / max(len(words), 1) for s, e in spans])
            for t, spans in items]


CATALOG = ("The FB-520 Cellular gateway ships in grey. It carries SKU FB-0520-X and firmware 4.2.1-rc3. "
           "Its list price is EUR 1,249.50 per unit. Delivery takes six weeks from the Gdansk plant. "
           "The housing is rated IP67 and survives salt spray. Spare antennas are sold separately.")


# -- pruning --------------------------------------------------------------------------------------------------------
def test_pruning_keeps_identifiers_verbatim() -> None:
    query = "Which firmware does SKU FB-0520-X run, and what does it cost?"
    other = "Field service visits are booked through the regional office. Visits take two hours."
    out = prune_sentences(query, _cands([CATALOG, other]), _by_words, token_budget=45)
    kept = out.candidates[0].text
    for ident in ("FB-0520-X", "4.2.1-rc3"):
        assert ident in kept  # whole, never cut into pieces
    assert estimate_llm_tokens(kept) < estimate_llm_tokens(CATALOG)
    # Every kept run is a verbatim slice of the chunk: nothing rewritten, nothing token-pruned...
    runs = []
    for run in kept.split(GAP):
        at = CATALOG.find(run)
        assert at >= 0
        runs.append((at, at + len(run)))
    # ...and no identifier is cut: each one lies wholly inside a kept run or wholly outside all of them.
    idents = [m.span() for m in re.finditer(r"[A-Z0-9][\w.,-]*\d[\w-]*", CATALOG)]
    assert len(idents) >= 4
    for s, e in idents:
        assert all(e <= a or s >= b or (a <= s and e <= b) for a, b in runs)


def test_exact_terms_are_what_must_match_verbatim() -> None:
    assert exact_terms("Is TLS_VERSION_MIN 1.3 on FB-0520-X with retryBackoffMs at EUR 1,249.50?") == [
        "TLS_VERSION_MIN", "1.3", "FB-0520-X", "retryBackoffMs", "EUR", "1,249.50"]
    assert exact_terms("how are you") == []
    # Only strong identifiers pin a sentence; years and bare numbers are everywhere and would eat the budget.
    assert pin_terms("Is TLS_VERSION_MIN 1.3 on FB-0520-X, retryBackoffMs, firmware 4.2.1, in Q2 2024?") == [
        "TLS_VERSION_MIN", "FB-0520-X", "retryBackoffMs", "4.2.1"]


def test_pinned_identifier_sentence_beats_better_scored_ones() -> None:
    text = "Retries follow retryBackoffMs. Gateways ship worldwide fast from Gdansk."
    query = "gateways ship worldwide fast retryBackoffMs"  # the second sentence matches 4 of 5 words, the first 1
    # Budget 12 holds either sentence (7 or 10 tokens), not both.
    out = prune_sentences(query, _cands([text]), _by_words, token_budget=12, chunk_weight=0.0)
    assert out.pinned == 1 and out.candidates[0].text == "Retries follow retryBackoffMs."
    unpinned = prune_sentences("gateways ship worldwide fast retry", _cands([text]), _by_words, token_budget=12)
    assert unpinned.pinned == 0 and unpinned.candidates[0].text.startswith("Gateways ship")


def test_budget_is_respected_and_best_sentences_win() -> None:
    texts = [CATALOG, "Delivery of gateways takes six weeks. Gateways are grey."]
    full = sum(estimate_llm_tokens(t) for t in texts)
    out = prune_sentences("delivery weeks gateway", _cands(texts), _by_words, token_budget=20, chunk_weight=0.0)
    assert 0 < sum(estimate_llm_tokens(c.text) for c in out.candidates) <= 20 < full
    assert any("six weeks" in c.text for c in out.candidates)
    assert out.units_kept < out.units_in and [c.rank for c in out.candidates] == list(range(1, len(out.candidates) + 1))


def test_a_sentence_pointing_back_keeps_its_predecessor() -> None:
    text = "Revenue of the Hardware division was EUR 18.1 million. It grew 2.8% over the previous quarter. Staff rose."
    # Budget 23: the 'It' sentence (9 tokens) and its subject (13) fit, the rest not.
    out = prune_sentences("grew previous quarter", _cands([text]), _by_words, token_budget=23)
    kept = out.candidates[0].text
    assert "It grew 2.8%" in kept and "Revenue of the Hardware division" in kept  # the subject came along
    alone = prune_sentences("grew previous quarter", _cands([text]), _by_words, token_budget=12, keep_neighbours=False)
    assert "Revenue" not in alone.candidates[0].text
    assert needs_previous("However, the plan changed.") and needs_previous("Это решение принято в мае.")
    assert not needs_previous("The plan changed.")


def test_chunks_with_nothing_kept_are_dropped_and_named() -> None:
    texts = ["Alpha beta gamma.", "Delta epsilon zeta.", "Gamma again here."]
    out = prune_sentences("gamma", _cands(texts), _by_words, token_budget=5, chunk_weight=0.0)
    assert out.dropped and all(d not in {c.chunk_id for c in out.candidates} for d in out.dropped)


def test_sentence_units_split_long_code_at_line_breaks_only() -> None:
    code = "\n".join(f"    let value_{i} = compute_thing(input_{i}, OPTION_{i});" for i in range(30))
    units = sentence_units(code, max_unit_tokens=40)
    assert len(units) == 30 and all("\n" not in code[s:e] for s, e in units)
    assert sentence_units("1. Open the box. 2. Plug it in.") != []


def test_embedder_scorer_runs_with_the_fake() -> None:
    scorer = embedder_span_scorer(HashEmbedder())
    out = prune_sentences("salt spray housing", _cands([CATALOG]), scorer, token_budget=15, chunk_weight=0.0)
    assert "salt spray" in out.candidates[0].text


# -- sentence scorers -----------------------------------------------------------------------------------------------
REPORTS = {"Q2": "Revenue grew 2.8% over the previous quarter, to EUR 18.1 million. Gross margin was 31%.",
           "Q3": "Revenue grew 7.3% over the previous quarter, to EUR 16.1 million. Gross margin was 64%."}


def _items(texts: Sequence[str]):
    return [(t, sentence_units(t)) for t in texts]


def test_zscores_standardise_all_sentences_of_a_query_together() -> None:
    out = zscores([np.array([1.0, 2.0]), np.array([3.0])])
    flat = np.concatenate(out)
    assert flat.mean() == pytest.approx(0.0) and flat.std() == pytest.approx(1.0)
    assert list(np.argsort(flat)) == [0, 1, 2]
    assert all((z == 0).all() for z in zscores([np.array([5.0, 5.0]), np.array([5.0])]))  # constant: no signal


def test_sentence_bm25_by_hand() -> None:
    # Two sentences, query 'margin': df=1 of n=2, idf = ln(1 + 1.5/1.5) = ln 2; the other sentence scores 0.
    items = [("Margin rose. Staff left.", [(0, 12), (13, 24)])]
    (scores,) = bm25_span_scorer()("margin", items)
    tf, length, avg = 1, 2, 2.0
    expected = np.log(2) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))
    assert scores[0] == pytest.approx(expected, rel=1e-5) and scores[1] == 0.0


def test_sentence_read_under_its_title_and_section_wins_for_its_question() -> None:
    # Both revenue sentences say 'Revenue grew ... previous quarter'; only the title + section tell them apart.
    cands = [Candidate("q3", "d3", REPORTS["Q3"], 0.9, 1), Candidate("q2", "d2", REPORTS["Q2"], 0.8, 2)]
    prefixes = sentence_prefixes(cands, {"d2": "Quarterly report Q2 2024", "d3": "Quarterly report Q3 2024"},
                                 {"q2": ("Industrial Hardware division",), "q3": ("Software division",)})
    assert prefixes[REPORTS["Q2"]] == "Quarterly report Q2 2024 > Industrial Hardware division"
    query = "What was the revenue of the Industrial Hardware division in Q2 2024?"
    # 20 tokens hold one revenue sentence (17) but not both.
    out = prune_sentences(query, cands, bm25_span_scorer(prefixes), token_budget=20, chunk_weight=0.0)
    kept = " ".join(c.text for c in out.candidates)
    assert "EUR 18.1 million" in kept and "EUR 16.1 million" not in kept
    # The embedder reads 'prefix. sentence': the Q2 revenue sentence now outscores its Q3 twin.
    q3, q2 = embedder_span_scorer(HashEmbedder(dim=256), prefixes)(query, _items([REPORTS["Q3"], REPORTS["Q2"]]))
    assert q2[0] > q3[0]
    # The prefixes are what sets the two revenue sentences apart (alone they differ only in their numbers).
    plain = bm25_span_scorer()(query, _items([REPORTS["Q3"], REPORTS["Q2"]]))
    read = bm25_span_scorer(prefixes)(query, _items([REPORTS["Q3"], REPORTS["Q2"]]))
    assert read[1][0] - read[0][0] > plain[1][0] - plain[0][0] + 1.0


def test_a_title_line_inside_a_chunk_is_a_unit_and_the_context_of_what_follows() -> None:
    text = ("E-TDW-4107 - Batch rejected: payload too large\nThe batch exceeded the 8 MB limit. "
            "First action: reduce INGEST_BATCH_SIZE.\n"
            "E-TDW-2203 - Pool exhausted\nAll connections were in use. First action: raise MAX_POOL_SIZE.")
    units = sentence_units(text)
    assert [text[s:e] for s, e in units][:2] == ["E-TDW-4107 - Batch rejected: payload too large",
                                                 "The batch exceeded the 8 MB limit."]
    heads = local_headings(text, units)
    assert heads[2] == "E-TDW-4107 - Batch rejected: payload too large" and heads[-1] == "E-TDW-2203 - Pool exhausted"
    # Both 'First action' sentences match the words; only the title above tells which error each belongs to.
    scores = bm25_span_scorer()("What is the first action for error E-TDW-2203?", [(text, units)])[0]
    firsts = [i for i, (s, e) in enumerate(units) if text[s:e].startswith("First action")]
    assert scores[firsts[1]] > scores[firsts[0]]
    out = prune_sentences("first action for E-TDW-2203", _cands([text]), bm25_span_scorer(), token_budget=20)
    # The kept sentence brings its title line (the closure), so the model reads which error it is about.
    assert out.candidates[0].text.startswith("E-TDW-2203 - Pool exhausted") and "MAX_POOL_SIZE" in out.candidates[0].text


def test_hybrid_scorer_is_the_weighted_sum_of_standardised_scores() -> None:
    items = _items(["Alpha beta. Gamma delta. Epsilon.", "Beta beta gamma."])
    a = lambda q, it: [np.array([3.0, 1.0, 0.0]), np.array([2.0])]  # noqa: E731
    b = lambda q, it: [np.array([0.0, 10.0, 0.0]), np.array([0.0])]  # noqa: E731
    out = hybrid_span_scorer([(a, 1.0), (b, 2.0)])("q", items)
    za, zb = zscores(a("q", items)), zscores(b("q", items))
    for o, x, y in zip(out, za, zb):
        np.testing.assert_allclose(o, x + 2 * y, rtol=1e-5)
    assert np.concatenate(hybrid_span_scorer([(a, 1.0), (b, 0.0)])("q", items)).argmax() == 0


def test_a_title_line_is_never_kept_alone() -> None:
    assert is_title_like("Industrial Hardware division") and is_title_like("## Pricing")
    assert is_title_like("Corvane Systems — Quarterly Business Report, Q2 2024")
    assert not is_title_like("Revenue grew 2.8%.") and not is_title_like("| FB-340 | -40 to 70 °C |")
    text = "Quarterly revenue report\nNothing else happened. Revenue was flat."
    out = prune_sentences("quarterly revenue report", _cands([text]), _by_words, token_budget=30, chunk_weight=0.0)
    # The title matches all three query words yet is kept only as the heading of the sentence below it.
    assert out.candidates[0].text.startswith("Quarterly revenue report") and "Revenue was flat." in out.candidates[0].text


# -- duplicates and MMR ---------------------------------------------------------------------------------------------
def test_mmr_with_lambda_one_keeps_relevance_order() -> None:
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(6, 8))
    rel = np.array([0.9, 0.8, 0.8, 0.5, 0.3, 0.1])
    assert mmr_order(rel, vecs, lam=1.0, k=6) == [0, 1, 2, 3, 4, 5]  # ties keep the incoming order
    assert mmr_order(rel, vecs, lam=1.0, k=3) == [0, 1, 2]


def test_mmr_pushes_a_near_copy_down() -> None:
    a = np.array([1.0, 0.0, 0.0])
    vecs = np.stack([a, a + 0.01, np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])])
    rel = np.array([1.0, 0.95, 0.9, 0.0])  # scaled to [1, .95, .9, 0]
    # c1 after c0: 0.7*0.95 - 0.3*1.0 = 0.365 < c2: 0.7*0.9 - 0 = 0.63, so the near copy drops behind c2.
    assert mmr_order(rel, vecs, lam=0.7, k=4) == [0, 2, 1, 3]
    assert mmr_order(rel, vecs, lam=1.0, k=4) == [0, 1, 2, 3]


def test_the_mmr_floor_keeps_the_incoming_top_within_its_first_places() -> None:
    """Two bios of people and three film pages: plain MMR takes one bio, then the films, and pushes the second
    bio (incoming #2, a gold bridge page in a multi-hop question) to #5; with the floor it stays within the first 2."""
    bio, film = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vecs = np.stack([bio, bio + 0.05, film, film + 0.05, film - 0.05])
    cands = _cands([f"text {i}" for i in range(5)])
    cands = [c.with_rank(c.rank, s) for c, s in zip(cands, [1.0, 0.9, 0.8, 0.7, 0.6])]
    plain = diversify(cands, vecs, lam=0.7, dedup_threshold=0.999, k=5)
    assert [c.chunk_id for c in plain.candidates][:2] == ["c0", "c2"] and plain.floored == {}
    assert [c.chunk_id for c in plain.candidates].index("c1") >= 2
    kept = diversify(cands, vecs, lam=0.7, dedup_threshold=0.999, k=5, keep_top=2, keep_within=2)
    ids = [c.chunk_id for c in kept.candidates]
    assert ids[:2] == ["c0", "c1"] and sorted(ids) == sorted(c.chunk_id for c in cands)
    assert kept.candidates[1].meta["mmr_floored"] == [c.chunk_id for c in plain.candidates].index("c1") + 1
    # the floor off is plain MMR
    off = diversify(cands, vecs, lam=0.7, dedup_threshold=0.999, k=5, keep_top=0, keep_within=2)
    assert [c.chunk_id for c in off.candidates] == [c.chunk_id for c in plain.candidates]


def test_identical_chunks_collapse_and_the_trace_says_into_which() -> None:
    same = "Employees may work remotely for up to three days per week."
    cands = _cands([same, "Core hours are 10:00 to 15:00.", " employees may  work remotely for up to three days per week. "])
    emb = HashEmbedder()
    out = diversify(cands, emb.encode([c.text for c in cands]), lam=1.0, dedup_threshold=0.95, k=10)
    assert [c.chunk_id for c in out.candidates] == ["c0", "c1"]
    assert [(d.dropped, d.kept, d.exact) for d in out.duplicates] == [("c2", "c0", True)]
    assert out.candidates[0].meta["duplicates_dropped"] == "c2"


def test_near_duplicates_collapse_only_when_their_facts_agree() -> None:
    draft = "Employees may work from another country for up to 20 days per year with approval."
    final = "Employees may work from another country for up to 30 days per year with approval."
    copy = "Employees may work from another country for up to 20 days a year with approval."
    vecs = np.array([[1.0, 0.0], [0.999, 0.04], [0.998, 0.05]])  # all nearly the same direction
    keep, dups = collapse_duplicates(_cands([draft, final, copy]), vecs, threshold=0.95)
    assert keep == [0, 1]  # the final says 30, not 20: it carries news and stays
    assert [(d.dropped, d.kept, d.exact) for d in dups] == [("c2", "c0", False)] and dups[0].similarity >= 0.95
    # Numbers written as words and negations are facts too (the sample corpus's draft says two days, the final three).
    words = ["Staff may work remotely up to two days a week.", "Staff may work remotely up to three days a week.",
             "Staff may not work remotely up to two days a week.", "Staff may work remotely up to two days per week."]
    keep, dups = collapse_duplicates(_cands(words), np.array([[1.0, 0.0]] * 4), threshold=0.95)
    assert keep == [0, 1, 2] and [(d.dropped, d.kept) for d in dups] == [("c3", "c0")]


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
def test_mmr_returns_each_item_once(lam: float) -> None:
    vecs = np.random.default_rng(3).normal(size=(7, 5))
    order = mmr_order(np.linspace(1, 0, 7), vecs, lam=lam, k=7)
    assert sorted(order) == list(range(7)) and order[0] == 0


# -- the list stays whole; similarity for texts the embedder cannot read (issue #11) -----------------------------
def test_keep_all_gives_each_dropped_chunk_its_best_sentence_and_counts_the_cost() -> None:
    texts = ["Intro line\nAlpha beta gamma. Nothing here.", "Delta epsilon zeta. Omega gamma.", "Gamma again here."]
    base = prune_sentences("gamma omega", _cands(texts), _by_words, token_budget=5, chunk_weight=0.0)
    whole = prune_sentences("gamma omega", _cands(texts), _by_words, token_budget=5, chunk_weight=0.0, keep_all=True)
    assert base.dropped and not whole.dropped and len(whole.candidates) == len(texts)
    assert set(whole.floored) == set(base.dropped)
    by_id = {c.chunk_id: c.text for c in whole.candidates}
    # Budget 5 buys "Omega gamma." (c1) only; c0 and c2 get their best fact sentence, never c0's title line.
    assert base.dropped == ["c0", "c2"] and by_id == {"c0": "Alpha beta gamma.", "c1": "Omega gamma.",
                                                       "c2": "Gamma again here."}
    floor_cost = sum(estimate_llm_tokens(by_id[cid]) for cid in whole.floored)
    assert whole.over_budget_tokens == floor_cost > 0
    assert [c.chunk_id for c in whole.candidates] == ["c0", "c1", "c2"]  # incoming order kept


def test_lexical_similarity_by_hand() -> None:
    from core.cascade.prune import lexical_similarity

    # Three texts; 'кошка' appears in two of them: idf log(1 + 3/2); the others log(1 + 3/1).
    sims = lexical_similarity(["кошка собака", "кошка", "дом"])
    a, b = np.log(1 + 3 / 2), np.log(1 + 3 / 1)
    assert sims[0, 1] == pytest.approx(a / np.sqrt(a * a + b * b), abs=1e-5)
    assert sims[0, 2] == pytest.approx(0.0) and sims[1, 1] == pytest.approx(1.0)


def test_language_aware_similarity_uses_words_for_pairs_with_a_foreign_text() -> None:
    from core.cascade.prune import language_aware_similarity, lexical_similarity

    texts = ["alpha beta", "alpha gamma", "Выручка выросла", "Выручка выросла"]
    vecs = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32)  # the embedder sees 2 and 3 as unrelated
    sims = language_aware_similarity(vecs, texts, [False, False, True, True])
    lex = lexical_similarity(texts)
    assert sims[0, 1] == pytest.approx(1.0)  # both English: the embedder's cosine
    assert sims[2, 3] == pytest.approx(lex[2, 3]) and sims[2, 3] == pytest.approx(1.0)  # the Russian pair: words
    keep, dups = collapse_duplicates(_cands(texts), vecs, threshold=0.95, sims=sims)
    assert [(d.dropped, d.exact) for d in dups] == [("c1", False), ("c3", True)] and keep == [0, 2]
