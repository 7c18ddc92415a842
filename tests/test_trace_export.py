"""Trace export as OpenInference spans: a local OTLP/HTTP receiver on 127.0.0.1 gets 50 traces of 100 candidates
back losslessly (protobuf and JSON bodies), span kinds follow the conventions, secrets never leave, and the CLI
exports the run log."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from core.app.trace_export import (
    ExportError,
    download_bytes,
    otlp_json,
    post_otlp,
    spans_from_trace,
    traces_endpoint,
)
from core.cli import main as cli_main
from core.store import Store
from core.types import Answer, Candidate, StageResult, Trace, Usage

KEY = "sk-ant-api03-THISISNOTAREALKEY0123456789"


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        n = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append((self.headers.get("Content-Type", ""), self.rfile.read(n)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    handler = type("Receiver", (_Receiver,), {"bodies": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", handler.bodies
    finally:
        server.shutdown()
        server.server_close()


def _cands(stage: str, n: int, seed: int) -> tuple[Candidate, ...]:
    # scores with many digits and texts with quotes, newlines and Cyrillic: anything lossy would show
    return tuple(Candidate(f"c{seed}-{i:03d}", f"d{i % 7}", f"Passage {i} of query {seed}: \"quoted\"\nline two — ё",
                           1.0 / (i + 1) + seed * 1e-9, i + 1, {"stage": stage, "rank_bm25": i + 2})
                 for i in range(n))


def _trace(seed: int, n: int = 100, *, mode: str = "extractive") -> Trace:
    stages = (
        StageResult("bm25", _cands("bm25", n, seed), 1.25, info={"indexed": 210}),
        StageResult("dense", _cands("dense", n, seed + 1), 2.5),
        StageResult("graph_local", (), 0.0, skipped="graph.enabled = false"),
        StageResult("fused", _cands("fused", n, seed + 2), 0.3),
        StageResult("rerank", _cands("rerank", n, seed + 3), 40.0, info={"reranker": "late-interaction:x"}),
        StageResult("answer", (), 5.0, Usage(120, 30, calls=1) if mode == "llm" else Usage(),
                    notes=("extractive answer",), info={"mode": mode, "refused": False}),
    )
    return Trace(f"question {seed}?", "cfg123", 3, stages, answer=Answer("An answer [c1]", ("c1",), False, mode))


def _attrs(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def _docs(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    docs, i = [], 0
    while f"{prefix}.{i}.document.id" in attrs:
        p = f"{prefix}.{i}.document"
        docs.append({"chunk_id": attrs[f"{p}.id"], "score": attrs[f"{p}.score"], "text": attrs[f"{p}.content"],
                     **json.loads(attrs[f"{p}.metadata"])})
        i += 1
    return docs


def test_fifty_traces_of_a_hundred_candidates_round_trip(receiver: tuple[str, list]) -> None:
    url, bodies = receiver
    traces = {f"run{i:02d}": _trace(i) for i in range(50)}
    spans = [s for rid, t in traces.items() for s in spans_from_trace(t.to_dict(), run_id=rid, extra_secrets=())]
    assert post_otlp(spans, url) == 200
    ctype, body = bodies[0]
    assert ctype == "application/x-protobuf"
    req = ExportTraceServiceRequest.FromString(body)
    got = list(req.resource_spans[0].scope_spans[0].spans)
    assert len(got) == 50 * 6  # a root and the five stages that ran; the skipped one is an event on the root
    by_trace: dict[bytes, list[Any]] = {}
    for s in got:
        by_trace.setdefault(s.trace_id, []).append(s)
    assert len(by_trace) == 50
    for rid, trace in traces.items():
        expected = trace.to_dict()
        sent = [s for s in spans if s.attributes.get("rag_workbench.run_id") == rid][0]
        mine = by_trace[bytes.fromhex(sent.trace_id)]
        root = [s for s in mine if not s.parent_span_id]
        assert len(root) == 1 and _attrs(root[0])["openinference.span.kind"] == "CHAIN"
        assert _attrs(root[0])["input.value"] == trace.query
        children = {s.name: s for s in mine if s.parent_span_id == root[0].span_id}
        assert list(children) == [s.stage for s in trace.stages if s.skipped is None]  # pipeline order
        assert [_attrs(c)["rag_workbench.position"] for c in children.values()] == [0, 1, 3, 4, 5]
        [event] = root[0].events
        assert event.name == "skipped: graph_local"
        assert {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in event.attributes} == {
            "rag_workbench.stage": "graph_local", "rag_workbench.skipped": "graph.enabled = false",
            "rag_workbench.position": 2}
        assert json.loads(_attrs(root[0])["rag_workbench.skipped_stages"]) == ["graph_local"]
        for st in expected["stages"]:
            if st["skipped"]:
                continue
            a = _attrs(children[st["stage"]])
            if st["stage"] in ("bm25", "dense", "fused"):
                assert a["openinference.span.kind"] == "RETRIEVER"
                assert _docs(a, "retrieval.documents") == st["candidates"]  # every field, bit for bit
                assert len(st["candidates"]) == 100
            elif st["stage"] == "rerank":
                assert a["openinference.span.kind"] == "RERANKER"
                assert _docs(a, "reranker.output_documents") == st["candidates"]
                assert _docs(a, "reranker.input_documents") == expected["stages"][3]["candidates"]
                assert len(a) > 128  # more than the SDK's default attribute limit, none dropped
            elif st["stage"] == "answer":
                assert a["openinference.span.kind"] == "CHAIN" and a["output.value"] == "An answer [c1]"
        # the spans tile the root in stage order
        kids = sorted(children.values(), key=lambda s: s.start_time_unix_nano)
        assert kids[0].start_time_unix_nano == root[0].start_time_unix_nano
        assert kids[-1].end_time_unix_nano == root[0].end_time_unix_nano
        assert root[0].end_time_unix_nano - root[0].start_time_unix_nano == int(round(49.05 * 1e6))  # 1.25 + 2.5 + 0.3 + 40 + 5 ms


def test_json_body_and_llm_answer_span(receiver: tuple[str, list]) -> None:
    url, bodies = receiver
    spans = spans_from_trace(_trace(7, 3, mode="llm").to_dict(), run_id="r7", extra_secrets=())
    assert post_otlp(spans, url.removesuffix("/v1/traces"), protocol="http/json") == 200
    ctype, body = bodies[0]
    data = json.loads(body)
    assert ctype == "application/json"
    got = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    answer = next(s for s in got if s["name"] == "answer")
    attrs = {a["key"]: a["value"] for a in answer["attributes"]}
    assert attrs["openinference.span.kind"] == {"stringValue": "LLM"}
    assert attrs["llm.token_count.prompt"] == {"intValue": "120"}
    assert len(got[0]["traceId"]) == 32 and len(got[1]["spanId"]) == 16 and got[1]["parentSpanId"] == got[0]["spanId"]


def test_no_secret_leaves(receiver: tuple[str, list], monkeypatch: pytest.MonkeyPatch) -> None:
    url, bodies = receiver
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plain-secret-value-42")
    t = _trace(1, 3)
    leaky = Trace(f"what is {KEY}?", t.config_hash, t.corpus_version,
                  (StageResult("bm25", (Candidate("c", "d", f"key: {KEY} and plain-secret-value-42", 1.0, 1),), 1.0,
                               notes=("api_key=abcdefghijklmnopqrstuv",)),), answer=t.answer)
    spans = spans_from_trace(leaky.to_dict(), run_id="leak")
    post_otlp(spans, url)
    post_otlp(spans, url, protocol="http/json")
    for body in [b for _, b in bodies] + [download_bytes(leaky.to_dict(), run_id="leak"),
                                           download_bytes(leaky.to_dict(), run_id="leak", fmt="json")]:
        for secret in (KEY, "plain-secret-value-42", "abcdefghijklmnopqrstuv"):
            assert secret.encode() not in body
        assert b"[redacted]" in body


def test_bad_endpoints_say_what_is_wrong() -> None:
    with pytest.raises(ExportError, match="http"):
        traces_endpoint("127.0.0.1:6006")
    assert traces_endpoint("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ExportError, match="could not reach"):
        post_otlp([], f"http://127.0.0.1:{port}/v1/traces", timeout=2)


def test_cli_exports_the_run_log(tmp_path: Any, receiver: tuple[str, list], capsys: pytest.CaptureFixture) -> None:
    url, bodies = receiver
    db = str(tmp_path / "w.duckdb")
    store = Store(db)
    for i in range(3):
        store.runs.log_trace(_trace(i, 5))
    store.close()
    assert cli_main(["trace", "export", "--db", db, "--last", "2", "--endpoint", url]) == 0
    req = ExportTraceServiceRequest.FromString(bodies[0][1])
    assert len({s.trace_id for s in req.resource_spans[0].scope_spans[0].spans}) == 2
    capsys.readouterr()
    assert cli_main(["trace", "export", "--db", db, "--last", "3", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["trace"]["query"] for r in out] == ["question 0?", "question 1?", "question 2?"]
    assert cli_main(["trace", "export", "--db", db, "--format", "otlp-json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 6  # root + 5 that ran (1 skipped: an event)
    assert cli_main(["trace", "export", "--db", db, "--endpoint", "nonsense"]) == 1
    assert "http(s) URL" in capsys.readouterr().err


def test_unknown_stages_with_candidates_keep_their_documents() -> None:
    t = Trace("q?", "h", 1, (StageResult("route", (), 0.1, info={"route": "factoid"}),
                             StageResult("hyde", _cands("hyde", 3, 5), 2.0)))
    spans = {s.name: s.attributes for s in spans_from_trace(t.to_dict(), run_id="u", extra_secrets=())}
    assert spans["route"]["openinference.span.kind"] == "CHAIN"
    assert spans["hyde"]["openinference.span.kind"] == "RETRIEVER"
    assert _docs(dict(spans["hyde"]), "retrieval.documents") == t.to_dict()["stages"][1]["candidates"]


def test_otlp_json_ints_are_strings() -> None:
    spans = spans_from_trace(_trace(2, 2).to_dict(), run_id="x", ended_at="2026-01-01T00:00:00+00:00",
                             extra_secrets=())
    body = otlp_json(spans)
    root = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert root["endTimeUnixNano"] == str(1767225600 * 10**9)


class _NoJson(_Receiver):
    """A receiver that takes protobuf only, as Phoenix does: OTLP/JSON gets 415."""

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        ok = self.headers.get("Content-Type", "") == "application/x-protobuf"
        self.send_response(200 if ok else 415)
        self.end_headers()


def test_a_receiver_refusing_json_is_told_to_use_protobuf() -> None:
    server = HTTPServer(("127.0.0.1", 0), _NoJson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        spans = spans_from_trace(_trace(1, 3).to_dict(), run_id="r", extra_secrets=())
        with pytest.raises(ExportError, match=r"HTTP 415.*does not take OTLP/JSON.*protobuf.*http/protobuf"):
            post_otlp(spans, url, protocol="http/json", timeout=5)
        assert post_otlp(spans, url, protocol="http/protobuf", timeout=5) == 200
    finally:
        server.shutdown()
        server.server_close()


def test_json_export_carries_the_skipped_stages_as_events() -> None:
    body = otlp_json(spans_from_trace(_trace(2, 3).to_dict(), run_id="r", extra_secrets=()))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    root = next(s for s in spans if not s.get("parentSpanId"))
    assert [e["name"] for e in root["events"]] == ["skipped: graph_local"]
    assert "graph_local" not in [s["name"] for s in spans]
