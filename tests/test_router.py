"""Router: named routes from TOML, the abstain rule, the corpus-coverage feature, the trained offline classifier on
questions it never saw, and the LLM router through the loopback stub, malformed replies included."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from core.config import PipelineConfig
from core.deps import Deps
from core.models.llm import AnthropicLLM, OfflineLLM
from core.route.features import coverage
from core.route.router import (
    ABSTAIN,
    CLASSES,
    Example,
    RouteError,
    ShippedRouter,
    _char_grams,
    _word_grams,
    corpus_topics,
    decide,
    load_examples,
    load_routes,
    refusal_guard,
    route_llm,
    route_offline,
    router_report,
)
from core.route.stage import decide_route, routed_variants
from core.text import tokenize
from train.route import OfflineRouter, training_sha
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture

KW = {"min_confidence": 0.5, "refuse_confidence": 0.8}  # fixed here, not the tuned defaults


def test_coverage_is_the_share_of_known_terms() -> None:
    assert coverage(["revenu", "quarter", "alarm", "pizza"], {"revenu", "quarter", "other"}) == 0.5
    assert coverage([], {"a"}) == 0.0
    assert coverage(["a", "a", "b"], {"a"}) == pytest.approx(2 / 3)


def test_decide_abstains_below_confidence_and_guards_the_costly_classes() -> None:
    assert decide({"factoid": 0.9, "chitchat": 0.1}, **KW) == ("factoid", "")
    cls, why = decide({"factoid": 0.45, "comparison": 0.3, "chitchat": 0.25}, **KW)
    assert cls == ABSTAIN and "0.45" in why and "min_confidence" in why
    # 0.7 would pass min_confidence, but chitchat skips retrieval: it needs refuse_confidence
    cls, why = decide({"chitchat": 0.7, "factoid": 0.3}, **KW)
    assert cls == ABSTAIN and "refuse_confidence" in why
    assert decide({"out-of-scope": 0.85, "factoid": 0.15}, **KW) == ("out-of-scope", "")


def test_shipped_routes_cover_every_class_and_bad_files_say_why(tmp_path: Path) -> None:
    routes = load_routes()
    assert set(routes) == {*CLASSES, ABSTAIN, "cag"} and not routes["cag"].retrieve
    assert not routes["chitchat"].retrieve and not routes["out-of-scope"].retrieve
    assert "{topics}" in routes["out-of-scope"].reply
    assert routes["comparison"].transforms == ("multi_query", "decompose")
    assert routes["global-summary"].overrides["graph.mode"] == "global"
    bad = tmp_path / "r.toml"
    bad.write_text('[factoid]\ntransforms = ["telepathy"]\n')
    with pytest.raises(RouteError, match="telepathy"):
        load_routes(bad)
    bad.write_text("[factoid]\n")
    with pytest.raises(RouteError, match="no section for"):
        load_routes(bad)
    bad.write_text("[gossip]\n")
    with pytest.raises(RouteError, match="unknown class 'gossip'"):
        load_routes(bad)


def test_labelled_set_is_split_once_and_every_class_is_in_both_splits() -> None:
    train, test = load_examples("train"), load_examples("test")
    assert {e.label for e in train} == set(CLASSES) == {e.label for e in test}
    assert not {e.text for e in train} & {e.text for e in test}
    # 46 since the lines written about the sample corpus left (public data only); 77 before
    assert sum(e.label == "global-summary" for e in train + test) >= 40


# Questions written for this test, in none of the shipped data; each paired with the vocabulary of its corpus.
SAMPLE_VOCAB = frozenset(tokenize(
    "Corvane revenue by quarter. The FB-340 Rugged gateway. Error code E-TDW-4107 means the ingest queue is full; the "
    "mean wait grows. Meridian replaces Tidewater; the migration. Project Bluefin pump stations. Remote work policy, "
    "Almaty office. Who founded the band? Fairport Convention was founded in 1967. Steeleye Span, a folk band."))
UNSEEN = [
    ("hey, good evening to you!", "chitchat"),
    ("please book me a flight to lisbon for friday", "out-of-scope"),
    ("What does error code E-TDW-4107 mean?", "factoid"),
    ("Which was founded first, Fairport Convention or Steeleye Span?", "comparison"),
    ("Give me an overview of the main themes across all these documents.", "global-summary"),
]


def test_offline_router_on_unseen_questions_with_reasons() -> None:
    for text, want in UNSEEN:
        r = route_offline(text, SAMPLE_VOCAB, **KW)
        assert r.predicted == want, (text, r.probabilities)
        assert r.method == "offline" and 0 <= r.confidence <= 1 and abs(sum(r.probabilities.values()) - 1) < 1e-6
        # the reason names the best class (after "abstain (...); " when the fixed thresholds above are not met)
        assert r.reason.split("; ")[-1].startswith(want)
    r = route_offline("What does error code E-TDW-4107 mean?", SAMPLE_VOCAB, **KW)
    assert "corpus coverage" in r.reason or "word" in r.reason or "chars" in r.reason


def test_empty_corpus_sets_coverage_neutral_and_says_so() -> None:
    r = route_offline("What does error code E-TDW-4107 mean?", None, **KW)
    assert any("coverage set to 0.5" in n for n in r.notes)


def test_shipped_model_is_the_fitted_one_and_loads_fast() -> None:
    """The numpy-only shipped model (core/models/data/router_model.npz) against a fresh scikit-learn fit on the train split:
    same probabilities on every test-split question and on odd inputs (spacing, short words, accents, identifiers)."""
    train, test = load_examples("train"), load_examples("test")
    shipped = ShippedRouter()
    assert shipped.source_sha == training_sha(), "stale model: python -m train.route"
    fitted = OfflineRouter(train)
    texts = [e.text for e in test] + ["  two   spaces\tand\nlines ", "", "a", "ab", "É ü İstanbul", "x" * 30,
                                      "FB-340 vs FB-350?", "выручка квартал"]
    covs = [e.coverage for e in test] + [0.0, 0.3, 0.5, 1.0, 0.7, 0.2, 1.0, 0.9]
    a, b = fitted.probabilities(texts, covs), shipped.probabilities(texts, covs)
    assert shipped.classes == fitted.classes
    assert np.abs(a - b).max() < 1e-9 and (a.argmax(axis=1) == b.argmax(axis=1)).all()
    start = time.perf_counter()
    ShippedRouter()
    assert time.perf_counter() - start < 1.0  # ~30 ms measured (bench/results/route.json); loose for a loaded box


def test_char_and_word_grams_follow_scikit_learn_by_hand() -> None:
    # " ab " has length 4: 2-, 3-grams, then itself once at n = 4 and nothing longer
    assert _char_grams("Ab") == [" a", "ab", "b ", " ab", "ab ", " ab "]
    assert _char_grams("a  b") == [" a", "a ", " a ", " b", "b ", " b "]
    assert _word_grams("Is X, y?") == ["is", "x", "y", "is x", "x y"]


def test_keyword_guard_keeps_short_known_queries_from_refusal() -> None:
    assert refusal_guard("Tomas Rehak", 1.0).startswith("a short query (2 words)")
    assert refusal_guard("where do nightly backups go", 0.5).startswith("a short query (5 words)")
    assert refusal_guard("Tomas Rehak", 0.4) == ""  # most terms unknown to the corpus
    assert refusal_guard("is the lead architect on leave today", 1.0) == ""  # a sentence
    assert refusal_guard("hello", None) == ""  # no corpus to compare with


def test_corpus_topics_lists_titles() -> None:
    assert corpus_topics([]) == "no documents yet"
    assert corpus_topics(["A", "B", "A", " "]) == "A; B"
    assert corpus_topics([f"T{i}" for i in range(10)], limit=3) == "T0; T1; T2 and 7 more"


# -- LLM router through the stub ---------------------------------------------------------------------------------------
def _llm(stub: Stub) -> AnthropicLLM:
    return AnthropicLLM(stub.key, base_url=stub.base_url, sleep=lambda s: None, max_retries=0)


def test_llm_router_uses_the_schema_and_one_call(anthropic_stub: Stub) -> None:
    anthropic_stub.state.responder = lambda body: json.dumps(
        {"class": "comparison", "confidence": 0.92, "reason": "two films compared",
         "sub_queries": ["Aas Ka Panchhi", "Phoolwari", "Aas Ka Panchhi"]})
    r = route_llm("Which film came out first, Aas Ka Panchhi or Phoolwari?", _llm(anthropic_stub),
                  "claude-haiku-4-5", "films", **KW)
    assert (r.cls, r.method, r.confidence, r.reason) == ("comparison", "llm", 0.92, "two films compared")
    assert r.queries == ("Aas Ka Panchhi", "Phoolwari") and r.usage.calls == 1
    sent = anthropic_stub.state.messages()
    schema = sent[0]["output_config"]["format"]["schema"]
    assert len(sent) == 1 and schema["properties"]["class"]["enum"] == list(CLASSES)


MALFORMED = ["not json at all", "[1, 2]", '{"class": "gossip", "confidence": 0.9, "reason": "x"}',
             '{"class": "factoid", "confidence": "high", "reason": "x"}',
             '{"class": "factoid", "confidence": 0.9, "reason": "x", "sub_queries": "a, b"}', "", "{}", "null",
             '{"class": "factoid", "confidence": true, "reason": "x"}', '{"class": ["factoid"], "confidence": 1}']


@pytest.mark.parametrize("reply", MALFORMED)
def test_malformed_llm_router_output_falls_back_to_offline(anthropic_stub: Stub, reply: str) -> None:
    anthropic_stub.state.responder = lambda body: reply
    fb = route_offline("hello there!", None, **KW)
    r = route_llm("hello there!", _llm(anthropic_stub), "claude-haiku-4-5", "", fallback=fb, **KW)
    assert r.method == "offline" and r.cls == fb.cls
    assert any("fell back to the offline router" in n for n in r.notes)


def test_llm_router_http_failure_falls_back(anthropic_stub: Stub) -> None:
    anthropic_stub.state.faults.append(("status", 500))
    r = route_llm("hello there!", _llm(anthropic_stub), "claude-haiku-4-5", "", **KW)
    assert r.method == "offline" and any("HTTP 500" in n for n in r.notes)


def test_decide_route_offline_without_key_override_and_reply() -> None:
    cfg = PipelineConfig()
    d = decide_route("please set an alarm for six tomorrow morning", cfg, OfflineLLM(), vocabulary=SAMPLE_VOCAB,
                     titles=lambda: ["Quarterly report Q3 2024", "Remote work policy"])
    assert d.route.method == "offline"
    forced = decide_route("anything", cfg.with_overrides({"router.override": "out-of-scope"}), OfflineLLM(),
                          vocabulary=SAMPLE_VOCAB, titles=lambda: ["Quarterly report Q3 2024", "Remote work policy"])
    assert forced.route.method == "override" and not forced.retrieves
    assert forced.reply.endswith("Quarterly report Q3 2024; Remote work policy.")
    assert forced.as_json() == {"class": "out-of-scope", "confidence": 1.0, "config": "out-of-scope",
                                "reason": "chosen by the user for this query", "method": "override"}
    g = decide_route("x", cfg.with_overrides({"router.override": "global-summary"}), None, vocabulary=None)
    assert g.config.graph.enabled and g.config.graph.mode == "global" and g.retrieves
    with pytest.raises(RouteError, match="unknown route"):
        decide_route("x", cfg.with_overrides({"router.override": "poetry"}), None, vocabulary=None)


def test_cached_tokenizer_hands_out_fresh_lists_and_splits_as_before() -> None:
    """core.text.tokenize is cached (the loop re-reads the same chunks); a caller changing its list must not change
    the next caller's, and the fast path for plain words keeps identifier splitting as it was."""
    a = tokenize("Retry the FB-340 gateway")
    a.append("poison")
    assert tokenize("Retry the FB-340 gateway") == ["retri", "fb-340", "fb", "340", "gateway"]
    # compounds stay verbatim beside their stemmed parts; "café" is split by the camel regex as it always was
    assert tokenize("retryBackoffMs café iPhone") == ["retrybackoffms", "retri", "backoff", "ms", "café", "caf", "é",
                                                      "iphone", "i", "phone"]


# -- Evaluate: the router's test split and "routed" as a configuration -------------------------------------------------
class _FixedRouter:
    """Stands in for the shipped model: the class probabilities of each text are given."""

    classes = CLASSES

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table

    def probabilities(self, texts: list[str], coverages: list[float]) -> np.ndarray:
        return np.array([[self.table[t].get(c, 0.0) for c in CLASSES] for t in texts])


def test_router_report_counts_routes_after_thresholds_and_the_guard() -> None:
    ex = [Example("hi there friend", "chitchat", 0.2), Example("Tomas Rehak", "factoid", 1.0),
          Example("what was the revenue of Corvane in Q2?", "factoid", 1.0), Example("is A older than B?", "comparison", 1.0),
          Example("book a table", "out-of-scope", 0.0), Example("what themes?", "global-summary", 0.9)]
    probs = {"hi there friend": {"chitchat": 0.9, "factoid": 0.1}, "Tomas Rehak": {"chitchat": 0.7, "factoid": 0.3},
             "what was the revenue of Corvane in Q2?": {"out-of-scope": 0.6, "factoid": 0.4},
             "is A older than B?": {"comparison": 0.4, "factoid": 0.35, "multi-hop": 0.25},
             "book a table": {"out-of-scope": 0.5, "chitchat": 0.3, "factoid": 0.2},
             "what themes?": {"global-summary": 0.8, "factoid": 0.2}}
    r = router_report(min_confidence=0.45, refuse_confidence=0.55, examples=ex, router=_FixedRouter(probs))
    m = {(row, col): r.matrix[i][j] for i, row in enumerate(r.rows) for j, col in enumerate(r.columns)}
    # Tomas Rehak: chitchat 0.7 passes refuse_confidence, but the short-query guard keeps it from refusal -> abstain
    assert m[("factoid", "abstain")] == 1 and m[("chitchat", "chitchat")] == 1
    assert m[("factoid", "out-of-scope")] == 1  # the costly mistake: 0.6 >= 0.55, a sentence
    assert m[("comparison", "abstain")] == 1  # 0.4 < min_confidence
    assert m[("out-of-scope", "out-of-scope")] == 0 and sum(sum(row) for row in r.matrix) == 6
    assert (r.costly, r.corpus_questions, r.abstained, r.n) == (1, 4, 3, 6)
    # best classes: chitchat, chitchat, out-of-scope, comparison, out-of-scope, global-summary
    # F1: chitchat 2/3, factoid 0, comparison 1, multi-hop 0, global-summary 1, out-of-scope 2*1/(2+1+0) = 2/3
    assert r.macro_f1 == pytest.approx((2 / 3 + 0 + 1 + 0 + 1 + 2 / 3) / 6)


def test_routed_variants_switch_the_router_and_leave_transforms_to_the_route() -> None:
    cfg = PipelineConfig().with_overrides({"router.enabled": False, "transforms.decompose": "on",
                                           "router.override": "factoid"})
    v = routed_variants(cfg)
    assert v["routed"].router.enabled and v["routed"].router.override == ""
    assert v["routed"].transforms.decompose == "auto" and v["routed"].transforms.hyde == "auto"
    assert not v["single pipeline"].router.enabled and v["single pipeline"].transforms.decompose == "off"


def test_evaluate_page_runs_routed_and_shows_the_router_confusion(deps: Deps, tmp_path: Path) -> None:
    from streamlit.testing.v1 import AppTest

    from core.ingest.pipeline import ingest_files
    from pages import _state

    ingest_files([("finance.md", b"# Finance\n\nRevenue grew 3% over the previous quarter, to 18.1 million euros.\n")],
                 store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "workbench.py"), default_timeout=60)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state["data_dir"] = str(tmp_path)
    at.run()
    at = at.switch_page("pages/evaluate.py").run()
    assert not at.exception
    want = router_report(min_confidence=PipelineConfig().router.min_confidence,
                         refuse_confidence=PipelineConfig().router.refuse_confidence)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["macro-F1 (six classes)"] == f"{want.macro_f1:.3f}"
    assert metrics["costly mistakes"] == f"{want.costly_rate:.2%}"
    labels = at.selectbox(key="cfg_a").options
    assert [lbl.split(" · ")[0] for lbl in labels] == ["session", "routed", "single pipeline"]  # no saved configs
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input(json.dumps({"id": "q1", "query": "How much did revenue grow?", "gold": [
        {"doc": "finance.md", "span": "Revenue grew 3%"}]})).run()
    at.selectbox(key="cfg_a").set_value(labels[1]).run()
    at.selectbox(key="cfg_b").set_value(labels[2]).run()
    at.button(key="eval_run").click().run()
    assert not at.exception
    runs = {r.config_name: r for r in deps.store.runs.eval_runs()}
    assert set(runs) == {"routed", "single pipeline"}


def test_a_question_naming_something_the_corpus_knows_is_not_refused_as_out_of_scope() -> None:
    """Seen in the browser: a Russian question about an English corpus has low term coverage and read as
    out-of-scope; the name it uses ('Tidewater') is the corpus's, so the default pipeline runs instead."""
    from core.route.router import known_names, route_offline, tokenize

    vocab = set(tokenize("Tidewater gateways accept a batch of at most 8 MB. FB-340 grounding torque. Meridian"))
    q = "Какой максимальный размер пакета в Tidewater?"
    without = route_offline(q, vocab, min_confidence=0.2, refuse_confidence=0.55, name_guard=False)
    with_guard = route_offline(q, vocab, min_confidence=0.2, refuse_confidence=0.55)
    assert without.cls == "out-of-scope"  # what the user saw
    assert with_guard.cls == "abstain" and "it names 'Tidewater', which the corpus knows" in with_guard.reason
    # A refusal without a known name stands; a capitalised first word is not a name; an unknown name is not known.
    assert route_offline("Закажи мне пиццу", vocab, min_confidence=0.2, refuse_confidence=0.55).cls == "out-of-scope"
    assert known_names("Meridian is great, tell me a joke", vocab) == []
    assert known_names("Does FB-340 work with Zanzibar or TLS_VERSION_MIN?", vocab) == ["FB-340"]


def test_evidence_guard_by_hand() -> None:
    """Fires when the best passage holds >= min_terms of the question's terms carrying >= min_share of its idf:
    'meal' + 'allow' carry (2 + 3) / (1 + 2 + 3 + 2) = 62.5%; with the unknown term 'abroad' at half weight,
    5 / (1 + 2 + 3 + 1) = 71.4%."""
    from core.retrieve.bm25 import PassageTerms
    from core.route.router import evidence_guard

    ev = PassageTerms(("meal", "allow"), {"daili": 1.0, "meal": 2.0, "allow": 3.0, "abroad": 2.0}, frozenset({"abroad"}))
    assert evidence_guard(ev, min_terms=2, min_share=0.6) == \
        "one passage holds 2 of its terms ('meal', 'allow': 62% of its idf >= 60%)"
    assert evidence_guard(ev, min_terms=2, min_share=0.7) == ""
    assert evidence_guard(ev, min_terms=2, min_share=0.7, unknown_weight=0.5).startswith(
        "one passage holds 2 of its terms ('meal', 'allow': 71% of its idf")
    assert evidence_guard(ev, min_terms=3, min_share=0.1) == ""
    assert evidence_guard(ev, min_terms=0, min_share=0.0) == ""  # 0 = off
    assert evidence_guard(PassageTerms((), ev.idf, frozenset()), min_terms=1, min_share=0.0) == ""


def test_out_of_scope_decision_yields_to_a_passage_about_the_question() -> None:
    """Seen on a blind question set: 'What daily meal allowance do I get when travelling abroad?' was refused as out
    of scope on a corpus holding the travel policy. With the evidence guard the default pipeline runs instead (whose
    answer stage can still refuse); a request no passage is about is still refused."""
    from core.retrieve.bm25 import BM25Index

    texts = ["Travel policy. For international trips the daily meal allowance is 65 euros; domestic trips have 45.",
             "Gateways accept a batch of at most 8 MB.", "The board approved the budget for 2025."]
    index = BM25Index(["a", "b", "c"], texts)
    q = "What daily meal allowance do I get when travelling abroad?"
    kw = {"min_confidence": 0.2, "refuse_confidence": 0.55, "tokenizer": index.tokens}
    plain = route_offline(q, index.vocabulary(), **kw)
    assert plain.cls == "out-of-scope"  # the classifier alone: what the user saw
    rc = PipelineConfig().router  # the shipped guard: 4 terms, 40% of the idf, unknown terms at half weight
    assert (rc.evidence_min_terms, rc.evidence_min_share, rc.evidence_unknown_weight) == (4, 0.4, 0.5)
    ekw = {"evidence": index.best_passage_terms, "evidence_min_terms": rc.evidence_min_terms,
           "evidence_min_share": rc.evidence_min_share, "evidence_unknown_weight": rc.evidence_unknown_weight}
    # 4 * 0.98 / (4 * 0.98 + 3 * 2.08 / 2) = 56% of the idf
    guarded = route_offline(q, index.vocabulary(), **kw, **ekw)
    assert guarded.cls == "abstain"
    assert "one passage holds 4 of its terms ('daili', 'meal', 'allow', 'travel'" in guarded.reason
    pizza = route_offline("Order me a pizza with extra cheese", index.vocabulary(), **kw, **ekw)
    assert pizza.cls == "out-of-scope"


def test_idf_coverage_by_hand_and_why_the_keyword_guard_keeps_the_plain_count() -> None:
    """idf_coverage: 'hi' unknown (idf ln(1 + 3.5/0.5) = 2.08), 'you' in 1 of 3 chunks (ln(1 + 2.5/1.5) = 0.98):
    0.98 / 3.06 = 32%. The lookup "revenue growth" on a corpus saying 'grew' scores the same 32%, which is why the
    keyword guard still counts terms: the lookup keeps the default pipeline. The greeting, half of whose terms the
    corpus also knows, is worded as conversation, so since session 8 the keyword guard does not hold for it."""
    from core.retrieve.bm25 import BM25Index, PassageTerms

    def idf_coverage(ev: PassageTerms) -> float:  # the measured, not adopted, coverage (bench/route_evidence.py, archived)
        total = sum(ev.idf.values())
        return sum(v for t, v in ev.idf.items() if t not in ev.unknown) / total if total > 0 else 0.0

    index = BM25Index(["a", "b", "c"], ["Thank you for calling the service desk.", "Revenue grew 3% this quarter.",
                                        "Gateways accept a batch of at most 8 MB."])
    greeting, lookup = index.best_passage_terms("hi, how are you?"), index.best_passage_terms("revenue growth")
    want = math.log(1 + 2.5 / 1.5) / (math.log(1 + 2.5 / 1.5) + math.log(8.0))
    assert idf_coverage(greeting) == pytest.approx(want) and idf_coverage(lookup) == pytest.approx(want)
    kw = {"min_confidence": 0.2, "refuse_confidence": 0.55, "tokenizer": index.tokens,
          "evidence": index.best_passage_terms}
    r = route_offline("revenue growth", index.vocabulary(), **kw)
    assert r.cls == ABSTAIN and "whose terms the corpus knows (50% >= 50%)" in r.reason, r.reason
    assert route_offline("hi, how are you?", index.vocabulary(), **kw).cls == "chitchat"


def test_a_short_query_worded_as_conversation_is_no_keyword_lookup() -> None:
    # 'hi, how are you?' has everyday words a corpus knows (half its terms): before, the keyword guard kept it from
    # chitchat and it was searched and refused. A lookup names things and addresses no one.
    assert refusal_guard("hi, how are you?", 0.5) == ""
    assert refusal_guard("thanks, that helps", 1.0) == "" and refusal_guard("Привет, как дела?", 1.0) == ""
    assert refusal_guard("good morning", 1.0) == ""
    assert refusal_guard("revenue growth", 1.0).startswith("a short query (2 words)")
    assert refusal_guard("hi, how are you?", 0.5, conversation_rule=False).startswith("a short query (4 words)")
    # a word that merely contains one ('yours' in 'Yoursoft'?) does not count: whole words only
    assert refusal_guard("Myriad hexapod", 1.0).startswith("a short query")


def test_dense_guard_keeps_a_reworded_corpus_question_from_refusal() -> None:
    """A no-retrieval decision yields when the question's best dense cosine reaches the threshold; the guard is asked
    only after every other guard let the decision stand, and 0 turns it off."""
    from core.route.router import dense_guard

    assert dense_guard(0.61, min_cosine=0.6) == "a passage is close to it in meaning (dense cosine 0.61 >= 0.60)"
    assert dense_guard(0.59, min_cosine=0.6) == "" and dense_guard(None, min_cosine=0.6) == ""
    assert dense_guard(0.99, min_cosine=0.0) == ""
    q = "please book me a flight to lisbon for friday"
    asked: list[int] = []

    def top(v: float):
        return lambda: asked.append(1) or v

    assert route_offline(q, SAMPLE_VOCAB, **KW).cls == "out-of-scope"
    assert route_offline(q, SAMPLE_VOCAB, **KW, dense_top=top(0.3), dense_min_cosine=0.6).cls == "out-of-scope"
    r = route_offline(q, SAMPLE_VOCAB, **KW, dense_top=top(0.7), dense_min_cosine=0.6)
    assert r.cls == "abstain" and "close to it in meaning" in r.reason
    assert route_offline(q, SAMPLE_VOCAB, **KW, dense_top=top(0.9), dense_min_cosine=0.0).cls == "out-of-scope"
    n = len(asked)
    route_offline("What does error code E-TDW-4107 mean?", SAMPLE_VOCAB, **KW, dense_top=top(0.9), dense_min_cosine=0.6)
    assert len(asked) == n  # a retrieval decision never pays for the dense lookup


def test_an_out_of_scope_reply_names_the_words_the_corpus_never_uses() -> None:
    from core.route.stage import unknown_words

    assert unknown_words("When did the Lisbon office open?", SAMPLE_VOCAB, tokenize) == ["Lisbon", "open"]
    assert unknown_words("Which error code means the queue is full?", SAMPLE_VOCAB, tokenize) == []
    d = decide_route("please book me a flight to lisbon for friday", PipelineConfig(), OfflineLLM(),
                     vocabulary=SAMPLE_VOCAB, titles=lambda: ["Remote work policy"])
    assert d.route.cls == "out-of-scope" and not d.retrieves
    assert d.reply.endswith("Remote work policy. No document here mentions 'please', 'book', 'flight'.")
    assert unknown_words("which year did Andorra join the union", SAMPLE_VOCAB, tokenize)[0] == "Andorra"


def test_a_question_whose_only_unknown_terms_are_numbers_is_retrieved_not_refused_as_out_of_scope() -> None:
    from core.route.router import number_guard

    vocab = set(tokenize("what is the time of the 99th percentile of chardet"))
    assert number_guard(tokenize("What is the 90th percentile time of chardet?"), vocab).startswith(
        "its only terms the corpus lacks are numbers ('90th'")
    assert number_guard(tokenize("What is the 99th percentile time of chardet?"), vocab) == ""  # nothing unknown
    assert number_guard(tokenize("What is the 90th percentile time of cats?"), vocab) == ""  # a word unknown too
    # a flight booking the corpus knows nothing of stays out of scope (no number is all it lacks)
    q = "please book me a flight to lisbon for friday"
    assert route_offline(q, SAMPLE_VOCAB, **KW).cls == "out-of-scope"
