"""Structured output from small models (issue #45 item 3): a fixed set of malformed replies, each recovered to the
value it holds with the repairs named, or failed with a reason; never an invented value."""
from __future__ import annotations

import pytest

from core.models.llm import LLMError, parse_json
from core.models.structured import MAX_REPLY_CHARS, recover_json

# The graph extractor's shape: an object with two required arrays.
GRAPH = {"type": "object", "properties": {"entities": {"type": "array"}, "relations": {"type": "array"}},
         "required": ["entities", "relations"]}
# The context/golden shape: an object with a required string.
Q = {"type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
     "required": ["question", "answer"]}

E1 = {"entities": [{"name": "Acme", "type": "org"}], "relations": []}
QA = {"question": "Who?", "answer": "Ada"}
J_E1 = '{"entities": [{"name": "Acme", "type": "org"}], "relations": []}'
J_QA = '{"question": "Who?", "answer": "Ada"}'

# (reply, schema, expected value, a repair that must be named or "" for none)
RECOVERED = [
    (J_E1, GRAPH, E1, ""),
    ("  " + J_E1 + "\n", GRAPH, E1, ""),
    ("\ufeff" + J_QA, Q, QA, ""),
    ("```json\n" + J_E1 + "\n```", GRAPH, E1, "code fence"),
    ("```\n" + J_E1 + "\n```", GRAPH, E1, "code fence"),
    ("```JSON\n" + J_QA + "\n```", Q, QA, "code fence"),
    ("Here you go:\n```json\n" + J_QA + "\n```\nHope this helps!", Q, QA, "code fence"),
    ("```json " + J_QA + "```", Q, QA, "code fence"),
    ("```json\n" + J_QA, Q, QA, "code fence"),  # fence never closed
    ("Sure! " + J_QA, Q, QA, "surrounding prose"),
    (J_QA + " I extracted the question from the passage.", Q, QA, "surrounding prose"),
    ("Answer: " + J_QA + "\nNote: the answer is short.", Q, QA, "surrounding prose"),
    ("The JSON is {not this} but " + J_QA, Q, QA, "surrounding prose"),
    (J_QA + "\n" + '{"question": "second", "answer": "ignored"}', Q, QA, "surrounding prose"),
    ('{"result": ' + J_QA + '}', Q, QA, "wrapper key 'result'"),
    ('{"data": ' + J_E1 + '}', GRAPH, E1, "wrapper key 'data'"),
    ('{"output": ' + J_QA + ', "confidence": 0.9}', Q, QA, "wrapper key 'output'"),
    ('{"knowledge_graph": ' + J_E1 + '}', GRAPH, E1, "wrapper key 'knowledge_graph'"),
    ('{"response": {"result": ' + J_QA + '}}', Q, QA, "wrapper key"),
    ("[" + J_QA + "]", Q, QA, "object inside a list"),
    ('[{"result": ' + J_QA + '}]', Q, QA, "object inside a list"),
    ('{"question": "Who?", "answer": "Ada",}', Q, QA, "trailing comma"),
    ('{"entities": [{"name": "Acme", "type": "org"},], "relations": [],}', GRAPH, E1, "trailing comma"),
    ("{'question': 'Who?', 'answer': 'Ada'}", Q, QA, "single quotes"),
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations": [], "done": True}', GRAPH,
     {**E1, "done": True}, "Python literals"),
    ('{"question": "Who?", "answer": "Ada", "extra": None}', Q, {**QA, "extra": None}, "Python literals"),
    # cut inside an item: closed at its last complete value; the item stays partial and the caller drops it
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations": [{"source": "Acme", "tar',
     GRAPH, {**E1, "relations": [{"source": "Acme"}]}, "truncated reply closed"),
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations": [', GRAPH, E1, "truncated reply closed"),
    ('{"entities": [{"name": "Acme", "type": "org"}, {"name": "Bo', GRAPH, E1, "truncated reply closed"),
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations":', GRAPH, E1, "truncated reply closed"),
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations": [], "note": "cut mid sent',
     GRAPH, E1, "truncated reply closed"),
    ('```json\n{"entities": [{"name": "Acme", "type": "org"}], "relations": [{"source"', GRAPH, E1,
     "truncated reply closed"),
    ('{"entities": [{"name": "Acme", "type": "org"}]}', GRAPH, E1, "empty field 'relations'"),
    ('{"entities": [{"name": "Acme", "type": "org"}], "relations": null}', GRAPH, E1, "empty field 'relations'"),
    ('{"entities": null, "relations": null}', GRAPH, {"entities": [], "relations": []}, "empty field 'entities'"),
    ('{"question": "Who?", "answer": null}', Q, {"question": "Who?", "answer": ""}, "empty field 'answer'"),
    ('{"question": "Who?"}', Q, {"question": "Who?", "answer": ""}, "empty field 'answer'"),
    ('"{\\"question\\": \\"Who?\\", \\"answer\\": \\"Ada\\"}"', Q, QA, "JSON inside a string"),
    ('{"question": "Who? {not a brace}", "answer": "Ada [x]"}', Q,
     {"question": "Who? {not a brace}", "answer": "Ada [x]"}, ""),
    ('{"question": "say \\"hi\\"", "answer": "Ada"}', Q, {"question": 'say "hi"', "answer": "Ada"}, ""),
    ('{"question": "Wer?", "answer": "Ärger über Öl"}', Q, {"question": "Wer?", "answer": "Ärger über Öl"}, ""),
    ('{"question": "谁?", "answer": "阿达"}', Q, {"question": "谁?", "answer": "阿达"}, ""),
    ("<think>the passage names Acme</think>\n" + J_E1, GRAPH, E1, "surrounding prose"),
    ("<|im_start|>assistant\n" + J_QA + "<|im_end|>", Q, QA, "surrounding prose"),
    ('[1, 2, 3]', None, [1, 2, 3], ""),
    ('The list: [1, 2, 3].', None, [1, 2, 3], "surrounding prose"),
    ('{"a": 1}', None, {"a": 1}, ""),
    ('{"question": "Who?", "answer": "Ada"}}}', Q, QA, "surrounding prose"),
    ("json\n" + J_QA, Q, QA, "surrounding prose"),
    ('{"relations": [], "x": 1}', GRAPH, {"entities": [], "relations": [], "x": 1}, "empty field 'entities'"),
    ("Output:\n\n\n" + J_E1 + "\n\n---", GRAPH, E1, "surrounding prose"),
]

# (reply, schema, a word the failure reason must contain)
FAILED = [
    ("", GRAPH, "empty"),
    ("   \n\t ", GRAPH, "empty"),
    ("I could not find any entities in this passage.", GRAPH, "no JSON"),
    ("```\nno json here\n```", Q, "no JSON"),
    ("{", GRAPH, "no JSON"),
    ('{"entities', GRAPH, "no JSON"),
    ('{"question": ', Q, "no JSON"),
    ('["a", "b"]', Q, "not an object"),
    ('"just a string"', Q, "not an object"),
    ("42", Q, "not an object"),
    ('{"name": "Acme"}', GRAPH, "lacks required"),
    ('{"Entities": [], "Relations": []}', GRAPH, "lacks required"),
    ('{"question": 5}', Q, ""),  # a number where a string belongs is passed on: the caller validates items
    (None, GRAPH, "not text"),
    ("x" * (MAX_REPLY_CHARS + 1), GRAPH, "above"),
    ("[" * 5000, GRAPH, "no JSON"),
    ('{"a": {"b": {"c": ', GRAPH, "no JSON"),
    ('{"total": 3', Q, "no JSON"),
    ('{"answer": "Ada"} and {"question": "Who?"}', {**Q, "properties": {}}, "lacks required"),
]


@pytest.mark.parametrize("reply,schema,expected,repair", RECOVERED)
def test_recovers_the_value_a_malformed_reply_holds(reply: str, schema: dict | None, expected: object,
                                                    repair: str) -> None:
    got = recover_json(reply, schema)
    assert got.ok, got.failure
    assert got.data == expected
    if repair:
        assert any(repair in r for r in got.repairs), got.repairs
    else:
        assert got.repairs == ()


@pytest.mark.parametrize("reply,schema,reason", FAILED)
def test_fails_with_a_reason_and_never_invents_a_value(reply: object, schema: dict, reason: str) -> None:
    got = recover_json(reply, schema)
    if reason == "":  # the question-as-number reply: an object with the keys, passed on unjudged
        assert got.ok and got.data["question"] == 5
        return
    assert not got.ok and got.data is None
    assert reason in got.failure


def test_the_fixed_set_is_at_least_fifty_malformed_replies() -> None:
    malformed = [r for r in RECOVERED if r[3]] + FAILED
    assert len(malformed) >= 50


def test_parse_json_raises_an_llm_error_with_the_reason() -> None:
    with pytest.raises(LLMError) as err:
        parse_json("no JSON at all", GRAPH)
    assert "no JSON value" in str(err.value)
    assert parse_json("```json\n" + J_E1 + "\n```", GRAPH) == E1
