"""Claude-written golden items against the loopback stub with the real SDK: validation, malformed replies, budget."""
from __future__ import annotations

import json
import re

from core.eval.golden import Passage
from core.eval.golden_llm import LLMBudget, estimate, generate_llm
from core.models.llm import AnthropicLLM
from core.types import Chunk
from tests.anthropic_stub import Stub, anthropic_stub  # noqa: F401 - fixture

TEXTS = {
    "rig.md": ["The rig operator is Henrik Aas. The rig runs at 350 bar.",
               "Maintenance happens every 6 weeks under Marta Quist."],
    "lab.md": ["The Heron lab holds 12 pressure gauges in Bergen."],
}


def _passages() -> tuple[list[Passage], dict[str, str]]:
    ps = [Passage(Chunk(f"{d}-{i}", d, i, t, 0, len(t), (), len(t.split()), "en"), d, d.split(".")[0].title())
          for d, ts in TEXTS.items() for i, t in enumerate(ts)]
    return ps, {d: "\n\n".join(ts) for d, ts in TEXTS.items()}


def _passage_of(body: dict) -> str:
    last = " ".join(b["text"] for b in body["messages"][-1]["content"])
    return re.search(r"<passage>\n(.*)\n</passage>", last, re.S).group(1)


def _good(body: dict) -> str:
    first = _passage_of(body).split(". ")[0].rstrip(".") + "."
    return json.dumps({"items": [
        {"question": "Who looks after the pump equipment at the test station?", "answer": first.split()[-1].rstrip("."), "gold_span": first,
         "type": "factoid", "answerable": True, "missing_term": ""},
        {"question": "What colour is the rig painted?", "answer": "blue", "gold_span": "The rig is painted blue.",
         "type": "factoid", "answerable": True, "missing_term": ""},  # span not in the chunk: rejected
        {"question": "Who runs the Oslo rig?", "answer": "", "gold_span": "", "type": "unanswerable",
         "answerable": False, "missing_term": "Oslo"},
        {"question": "Who runs the rig in Bergen?", "answer": "", "gold_span": "", "type": "unanswerable",
         "answerable": False, "missing_term": "Bergen"},  # Bergen is in the corpus: rejected
    ]})


def _llm(stub: Stub) -> AnthropicLLM:
    return AnthropicLLM(stub.key, base_url=stub.base_url, max_retries=1, sleep=lambda s: None, timeout_s=5)


def test_items_are_validated_and_the_document_is_the_cached_prefix(anthropic_stub: Stub) -> None:
    ps, texts = _passages()
    anthropic_stub.state.responder = _good
    out = generate_llm(ps, texts, _llm(anthropic_stub), 20, budget=LLMBudget(1.0), seed=0)
    assert out.calls == 3 and not out.stopped
    answerable = [it for it in out.items if it.answerable]
    assert len(answerable) == 3 and all(it.gold[0].span in " ".join(TEXTS[it.gold[0].doc]) for it in answerable)
    assert {it.meta["missing_term"] for it in out.items if not it.answerable} == {"Oslo"}
    assert out.rejected == {"span not in its chunk": 3, "near-miss term found in the corpus": 3}
    # the offline generator's well-formedness check holds the Claude path too
    from core.eval.golden_llm import validate
    from core.eval.golden import CorpusIndex
    from core.eval.golden_llm import Outcome
    held = Outcome()
    bad = {"items": [{"question": "Who looks after it?", "answer": "x", "gold_span": ps[0].chunk.text.split(". ")[0],
                      "type": "factoid", "answerable": True, "missing_term": ""},
                     {"question": "looks after the rig who or what", "answer": "", "gold_span": "",
                      "type": "unanswerable", "answerable": False, "missing_term": "Oslo"}]}
    assert validate(bad, ps[0], CorpusIndex(ps), held) == []
    assert held.rejected == {"leans on text the reader cannot see (a pronoun subject)": 1,
                             "not one question (no single closing '?')": 1}
    bodies = [r.json() for r in anthropic_stub.state.requests if r.path.endswith("/messages")]
    assert all(b["output_config"]["format"]["type"] == "json_schema" for b in bodies)
    rig = [b for b in bodies if "rig.md" in json.dumps(b["messages"][0]["content"][0]) or
           "Henrik" in b["messages"][0]["content"][0]["text"]]
    assert len(rig) == 2 and rig[0]["messages"][0]["content"][0] == rig[1]["messages"][0]["content"][0]
    assert rig[0]["messages"][0]["content"][0]["cache_control"]["type"] == "ephemeral"
    assert rig[0]["system"][0]["cache_control"]["type"] == "ephemeral"


def test_malformed_replies_cost_only_their_chunk(anthropic_stub: Stub) -> None:
    ps, texts = _passages()
    replies = iter(["Sure! Here are the questions you asked for.", json.dumps({"questions": []})])
    anthropic_stub.state.responder = lambda body: next(replies, None) or _good(body)
    anthropic_stub.state.faults.extend([("malformed", "truncated")] * 2)  # a broken 200, retried once, then given up
    out = generate_llm(ps, texts, _llm(anthropic_stub), 20, budget=LLMBudget(1.0), seed=0)
    assert out.calls == 3
    # the broken 200; the prose reply (the client's own JSON check refuses it); the JSON of the wrong shape
    assert out.rejected == {"call failed (malformed)": 1, "call failed (error)": 1, "malformed reply": 1}
    assert out.items == []  # the third call got the second malformed reply; nothing invalid was kept


def test_budget_is_never_overshot(anthropic_stub: Stub) -> None:
    ps, texts = _passages()
    anthropic_stub.state.responder = _good
    worst_one = estimate(ps[:1], texts, 1)
    out = generate_llm(ps, texts, _llm(anthropic_stub), 20, budget=LLMBudget(worst_one * 0.5), seed=0)
    assert out.calls == 0 and out.stopped == "budget" and not anthropic_stub.state.requests
    budget = LLMBudget(worst_one * 1.5)
    out = generate_llm(ps, texts, _llm(anthropic_stub), 20, budget=budget, seed=0)
    # each call is let through only while its worst case fits what is left: it stops before the third
    assert 1 <= out.calls < 3 and out.stopped == "budget" and 0 < budget.spent <= budget.usd


def test_batch_mode_waits_resumes_and_never_resubmits(anthropic_stub: Stub, tmp_path, monkeypatch) -> None:
    from core.eval.golden_llm import generate_llm_into
    from core.store import Store

    ps, texts = _passages()
    anthropic_stub.state.responder = _good
    anthropic_stub.state.batch_polls_to_end = 4
    store = Store(tmp_path / "g.duckdb")
    chunks = {p.chunk.chunk_id: p for p in ps}

    class Corpus:  # the generator reads the workspace's passages through CorpusReader
        def chunks(self, workspace: str = "default"):
            return [p.chunk for p in ps]

        def documents(self, workspace: str = "default"):
            return []

    import core.eval.golden_llm as gl
    monkeypatch.setattr(gl, "passages_from", lambda corpus, ws: ps)  # the passages above, as the store gives them
    llm = _llm(anthropic_stub)
    first = generate_llm_into(store.golden, Corpus(), llm, "default", 20, name="b", budget=LLMBudget(1.0),
                              ledger=store.ledger, poll_s=10, max_wait_s=10, sleep=lambda s: None,
                              doc_text=lambda d: None)
    assert first.items == 0 and any("still in_progress" in n for n in first.notes)
    assert "b" not in {r.name for r in store.golden.sets("default")}  # nothing half-stored
    second = generate_llm_into(store.golden, Corpus(), llm, "default", 20, name="b", budget=LLMBudget(1.0),
                               ledger=store.ledger, poll_s=10, max_wait_s=100, sleep=lambda s: None,
                               doc_text=lambda d: None)
    submits = [r for r in anthropic_stub.state.requests if r.method == "POST" and r.path == "/v1/messages/batches"]
    # the second run collected the open batch; its three chunks were every chunk, so nothing was submitted again
    # 3 answerable items (one per chunk) + the Oslo near-miss, which every chunk wrote alike, once
    assert len(submits) == 1 and second.items == 4
    items = store.golden.items("default", "b")
    assert {it.gold[0].chunk for it in items if it.answerable} <= set(chunks)
    assert all(it.gold[0].span in chunks[it.gold[0].chunk].chunk.text for it in items if it.answerable)
    assert not store.ledger.open_batches("golden", "claude-v1", "default")
