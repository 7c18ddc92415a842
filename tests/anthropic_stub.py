"""Loopback stand-in for the Anthropic Messages and Message Batches APIs, imitating prompt caching, for tests and bench.

It listens on 127.0.0.1 (random port) and is reached by the real SDK through `base_url`. Prompt caching follows the
documented rules: a prefix is everything up to and including a block with `cache_control`; it is stored only when it
is at least the model's minimum length; a later request whose prefix bytes are identical reads it until its TTL
(5 min or 1 h, refreshed on every read) runs out. Tokens are counted as ceil(UTF-8 bytes / 4) per text block.
Faults can be queued to exercise retries and error handling: an HTTP status, a stall (client timeout), extra
latency before a normal answer, a 200 with a malformed body (truncated JSON, no `content`, an HTML page), and an
error body that echoes the request headers (the API key among them) as a careless gateway would.
`POST /v1/messages/count_tokens` answers with the same token count the Messages endpoint bills.
Hostile modes for issue #33: `echo_headers` makes every answer quote the request headers (in the text, in every
string of a structured reply and in a tool_use block's input; streamed answers too); `usage_fault` makes every
answer report bad usage (negative, huge, missing, non-numeric, cache-heavy, 1-hour writes, zero); a ("trickle",
seconds) fault sends a normal answer one byte per `seconds`, headers included ("trickle_body": after the headers).
Tool use (issue #29): a responder may return a list of content blocks (tool_use blocks among them) instead of text;
the reply then stops with "tool_use" when it holds one. Tool definitions, tool_use inputs and tool_result contents
are billed as input like text (their JSON, or the result's text).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

# The stub's own copy of the documented minimums: an independent oracle, not core/models/data/prices.toml.
MIN_CACHEABLE = {"claude-haiku-4-5": 4096, "claude-opus-4-5": 4096, "claude-opus-4-6": 4096,
                 "claude-sonnet-4-6": 2048, "claude-sonnet-4-5": 1024}
DEFAULT_MIN = 1024
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def stub_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class _Batch:
    batch_id: str
    requests: list[dict[str, Any]]
    created: datetime
    polls_left: int
    results: list[dict[str, Any]] | None = None
    ended: datetime | None = None


@dataclass
class StubState:
    key: str
    clock_offset: float = 0.0  # tests move time forward to expire cache entries
    cache: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # sha -> (tokens, expires, ttl)
    # ("status", code) | ("stall", seconds) | ("latency", seconds) | ("malformed", "truncated"|"no_content"|"html")
    # | ("echo", code)
    faults: deque = field(default_factory=deque)
    count_faults: deque = field(default_factory=deque)  # the same kinds, for POST /v1/messages/count_tokens
    requests: list[Recorded] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], Any] | None = None  # -> reply text, or a list of content blocks
    batches: dict[str, _Batch] = field(default_factory=dict)
    batch_polls_to_end: int = 1  # status polls before a batch ends
    echo_headers: bool = False  # every answer quotes the request headers (the key among them)
    usage_fault: str | None = None  # negative | huge | missing | nonnumeric | cache | cache_1h | zero
    ignore_max_tokens: bool = False  # a misbehaving endpoint: the reply text is sent whole, however long
    lock: threading.RLock = field(default_factory=threading.RLock)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def now(self) -> float:
        return time.monotonic() + self.clock_offset

    def advance(self, seconds: float) -> None:
        self.clock_offset += seconds

    def messages(self) -> list[dict[str, Any]]:
        """Bodies of the Messages API calls that were answered (not faults)."""
        return [r.json() for r in self.requests if r.path == "/v1/messages" and r.method == "POST"]

    # -- the model ------------------------------------------------------------------------------------------------
    def answer(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        model = body["model"]
        blocks: list[dict[str, Any]] = []
        system = body.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        blocks.extend(system)
        for m in body.get("messages", []):
            content = m["content"]
            blocks.extend([{"type": "text", "text": content}] if isinstance(content, str) else content)
        bps = [i for i, b in enumerate(blocks) if "cache_control" in b]
        if len(bps) > 4:
            raise ValueError("A maximum of 4 blocks with cache_control may be provided")
        toks = [stub_tokens(block_text(b)) for b in blocks]
        if body.get("tools"):  # tool definitions come before the system prompt in the API's prompt
            toks[0:0] = [stub_tokens(json.dumps(body["tools"]))]
            blocks[0:0] = [{"type": "text", "text": json.dumps(body["tools"])}]
            bps = [i for i, b in enumerate(blocks) if "cache_control" in b]
        if body.get("_count_only"):
            return {"input_tokens": sum(toks)}
        cum = list(itertools.accumulate(toks))
        total = cum[-1] if cum else 0

        def key(i: int) -> str:
            return hashlib.sha256((model + "\x00" + json.dumps(blocks[: i + 1], sort_keys=True)).encode()).hexdigest()

        now = self.now()
        minimum = MIN_CACHEABLE.get(model, DEFAULT_MIN)
        read, hit = 0, -1
        with self.lock:
            for i in reversed(bps):
                entry = self.cache.get(key(i))
                if entry and entry[1] > now:
                    read, hit = entry[0], i
                    self.cache[key(i)] = (entry[0], now + entry[2], entry[2])  # a read refreshes the TTL
                    break
            write, w1h = 0, 0
            for i in bps:
                if i > hit and cum[i] >= minimum:
                    ttl = blocks[i]["cache_control"].get("ttl", "5m")
                    self.cache[key(i)] = (cum[i], now + TTL_SECONDS[ttl], TTL_SECONDS[ttl])
                    new = cum[i] - read - write
                    write += new
                    w1h += new if ttl == "1h" else 0
        echo = ("request headers: " + "; ".join(f"{k}: {v}" for k, v in (headers or {}).items())
                if self.echo_headers else "")
        reply = self.responder(body) if self.responder else default_reply(body, echo)
        if isinstance(reply, list):  # content blocks as given (tool_use among them)
            content: list[dict[str, Any]] = [dict(b) for b in reply]
            text = json.dumps(reply)
        else:
            text = reply
            content = [{"type": "text", "text": text}]
        if echo:
            content.append({"type": "tool_use", "id": "toolu_stub", "name": "echo", "input": {"headers": echo}})
        # Like the API, never more output than max_tokens (plain text is cut; a structured reply is kept whole).
        out = stub_tokens(text)
        stop = "tool_use" if isinstance(reply, list) and any(b.get("type") == "tool_use" for b in content) \
            else "end_turn"
        if out > body["max_tokens"]:
            stop, out = "max_tokens", body["max_tokens"]
            if not (body.get("output_config") or {}).get("format") and "text" in content[0] \
                    and not self.ignore_max_tokens:
                content[0]["text"] = text.encode()[: 4 * out].decode("utf-8", "ignore")
        usage: dict[str, Any] = {
            "input_tokens": total - read - write, "output_tokens": out,
            "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write - w1h, "ephemeral_1h_input_tokens": w1h}}
        usage = bad_usage(usage, self.usage_fault, total) if self.usage_fault else usage
        return {
            "id": f"msg_stub_{next(self.ids)}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage,
        }


def block_text(block: dict[str, Any]) -> str:
    """The billed text of one content block: text, a tool_use's input as JSON, a tool_result's content."""
    if block.get("type") == "tool_use":
        return json.dumps(block.get("input"))
    if block.get("type") == "tool_result":
        inner = block.get("content")
        return inner if isinstance(inner, str) else " ".join(b.get("text", "") for b in inner or [])
    return block.get("text", "")


def bad_usage(usage: dict[str, Any], fault: str, total: int) -> dict[str, Any]:
    """Usage a hostile or broken provider might report for a request of `total` input tokens."""
    if fault == "negative":
        return {**usage, "input_tokens": -10_000_000, "output_tokens": -5_000_000}
    if fault == "huge":
        return {**usage, "input_tokens": 10**15, "output_tokens": 10**12}
    if fault == "missing":
        return {}
    if fault == "nonnumeric":
        return {**usage, "input_tokens": "lots", "output_tokens": None, "cache_read_input_tokens": [1]}
    if fault == "zero":
        return {**usage, "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0}
    if fault == "cache":  # every input token claimed as a (dearer) cache write, plus a hundred times more
        return {**usage, "input_tokens": 0, "cache_creation_input_tokens": total * 100,
                "cache_creation": {"ephemeral_5m_input_tokens": total * 100, "ephemeral_1h_input_tokens": 0}}
    if fault == "cache_1h":  # plausible sizes, but written at the 1-hour price the request did not ask for
        return {**usage, "input_tokens": 0, "cache_creation_input_tokens": total,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": total}}
    raise ValueError(f"unknown usage fault {fault!r}")


def _fill(schema: dict[str, Any], echo: str = "") -> Any:
    t = schema.get("type")
    if t == "object":
        return {k: _fill(v, echo) for k, v in schema.get("properties", {}).items()}
    if t == "array":
        item = schema.get("items")
        return [_fill(item, echo)] if echo and isinstance(item, dict) else []
    if t == "boolean":
        return False
    if t in ("number", "integer"):
        return 0
    if "enum" in schema:
        return schema["enum"][0]
    return f"stub {echo}" if echo else "stub"


def default_reply(body: dict[str, Any], echo: str = "") -> str:
    fmt = (body.get("output_config") or {}).get("format")
    if fmt:
        return json.dumps(_fill(fmt["schema"], echo))
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(b.get("text", "") for b in last)
    return (f"{echo} " if echo else "") + "This chunk is part of the document; it covers " + " ".join(
        text.split()[:10]) + "."


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    _trickle = 0.0
    _trickle_head = False

    def _send(self, status: int, payload: Any, *, content_type: str = "application/json", raw: bytes | None = None,
              headers: dict[str, str] | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        if self._trickle:
            self._send_trickled(status, data, content_type)
            return
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_trickled(self, status: int, data: bytes, content_type: str) -> None:
        """The whole response one byte per `_trickle` seconds (headers too unless `trickle_body`)."""
        head = (f"HTTP/1.1 {status} OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(data)}\r\n\r\n"
                ).encode()
        try:
            if not self._trickle_head:
                self.wfile.write(head)
                self.wfile.flush()
                head = b""
            for i in range(len(head) + len(data)):
                self.wfile.write((head + data)[i:i + 1])
                self.wfile.flush()
                time.sleep(self._trickle)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True

    def _error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"type": "error", "error": {"type": kind, "message": message}}, headers=headers)

    def _handle(self, method: str) -> None:
        st = self.server.state
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("authorization", "")
        if auth != f"Bearer {st.key}" and self.headers.get("x-api-key") != st.key:
            self._error(401, "authentication_error", "invalid x-api-key")
            return
        # The token counter has its own fault queue, so a fault queued for the next message is not eaten by the
        # budget guard's count that precedes it.
        queue = st.count_faults if self.path.split("?")[0] == "/v1/messages/count_tokens" else st.faults
        with st.lock:
            fault = queue.popleft() if queue else None
        if fault is not None:
            kind, value = fault
            if kind == "stall":
                time.sleep(value)  # the client times out; nothing is processed
                self._error(500, "api_error", "stalled")
                return
            if kind in ("latency", "trickle", "trickle_body"):
                time.sleep(value if kind == "latency" else 0)  # slow but fine: the request is answered below
            elif kind == "malformed":
                raw = {"truncated": b'{"id": "msg_x", "type": "message", "content": [{"type": "te',
                       "no_content": json.dumps({"id": "msg_x", "type": "message", "model": "m"}).encode(),
                       "html": b"<html><body><h1>502 Bad Gateway</h1></body></html>"}[value]
                self._send(200, None, raw=raw, content_type="text/html" if value == "html" else "application/json")
                return
            elif kind == "retry_after":  # a rate limit that asks the client to come back after `value` seconds
                self._error(429, "rate_limit_error", "rate limited", headers={"retry-after": str(value)})
                return
            elif kind == "echo":
                # A gateway that puts the whole request, headers included, into its error message.
                echoed = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
                self._error(int(value), "api_error", f"upstream failed for request with headers {echoed}",
                            headers={"retry-after": "0"})
                return
            else:
                self._error(int(value), "rate_limit_error" if value == 429 else "api_error", f"injected {value}",
                            headers={"retry-after": "0"})
                return
        st.requests.append(Recorded(method, self.path, dict(self.headers), body))
        self._trickle = fault[1] if fault is not None and fault[0] in ("trickle", "trickle_body") else 0.0
        self._trickle_head = fault is not None and fault[0] == "trickle"
        try:
            self._route(method, json.loads(body) if body else None)
        except ValueError as exc:
            self._error(400, "invalid_request_error", str(exc))

    def _route(self, method: str, payload: Any) -> None:
        st = self.server.state
        path = self.path.split("?")[0]
        if method == "POST" and path == "/v1/messages" and payload.get("stream"):
            self._stream(st.answer(payload, dict(self.headers)))
        elif method == "POST" and path == "/v1/messages":
            self._send(200, st.answer(payload, dict(self.headers)))
        elif method == "POST" and path == "/v1/messages/count_tokens":
            self._send(200, st.answer({**payload, "_count_only": True}))
        elif method == "POST" and path == "/v1/messages/batches":
            bid = f"msgbatch_stub_{next(st.ids)}"
            st.batches[bid] = _Batch(bid, payload["requests"], datetime.now(timezone.utc), st.batch_polls_to_end)
            self._send(200, self._batch_json(st.batches[bid]))
        elif method == "GET" and path.startswith("/v1/messages/batches/") and path.endswith("/results"):
            b = st.batches.get(path.split("/")[4])
            if b is None or b.results is None:
                self._error(404, "not_found_error", "no results")
                return
            raw = "".join(json.dumps(r) + "\n" for r in b.results).encode()
            self._send(200, None, raw=raw, content_type="application/binary")
        elif method == "GET" and path.startswith("/v1/messages/batches/"):
            b = st.batches.get(path.split("/")[4])
            if b is None:
                self._error(404, "not_found_error", "no such batch")
                return
            if b.results is None:
                b.polls_left -= 1
                if b.polls_left <= 0:
                    b.results = [{"custom_id": r["custom_id"], "result": {"type": "succeeded",
                                                                        "message": st.answer(r["params"], dict(self.headers))}}
                                 for r in b.requests]
                    b.ended = datetime.now(timezone.utc)
            self._send(200, self._batch_json(b))
        else:
            self._error(404, "not_found_error", f"no route {method} {path}")

    def _stream(self, msg: dict[str, Any]) -> None:
        """A message as server-sent events, its text in deltas of 7 characters (an echoed key is split across them)."""
        def ev(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        parts = [ev("message_start", {"message": {**msg, "content": [], "stop_reason": None,
                                                  "usage": {**msg["usage"], "output_tokens": 1}}})]
        for i, block in enumerate(msg["content"]):
            if block["type"] != "text":
                continue
            parts.append(ev("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            parts += [ev("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": text[j:j + 7]}})
                      for j in range(0, len(text), 7)]
            parts.append(ev("content_block_stop", {"index": i}))
        parts.append(ev("message_delta", {"delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                          "usage": {"output_tokens": msg["usage"].get("output_tokens")}}))
        parts.append(ev("message_stop", {}))
        self._send(200, None, raw=b"".join(parts), content_type="text/event-stream")

    def _batch_json(self, b: _Batch) -> dict[str, Any]:
        n = len(b.requests)
        done = b.results is not None
        host, port = self.server.server_address[:2]
        return {
            "id": b.batch_id, "type": "message_batch", "processing_status": "ended" if done else "in_progress",
            "request_counts": {"processing": 0 if done else n, "succeeded": n if done else 0, "errored": 0,
                               "canceled": 0, "expired": 0},
            "created_at": b.created.isoformat(), "expires_at": (b.created + timedelta(hours=24)).isoformat(),
            "ended_at": b.ended.isoformat() if b.ended else None, "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"http://{host}:{port}/v1/messages/batches/{b.batch_id}/results" if done else None,
        }

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: StubState


@dataclass
class Stub:
    server: _Server
    thread: threading.Thread

    @property
    def state(self) -> StubState:
        return self.server.state

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def key(self) -> str:
        return self.state.key

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_stub(key: str = "sk-ant-stub-0123456789") -> Stub:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = StubState(key)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="anthropic-stub",
                              daemon=True)
    thread.start()
    return Stub(server, thread)


@pytest.fixture
def anthropic_stub() -> Iterator[Stub]:
    stub = start_stub()
    try:
        yield stub
    finally:
        stub.stop()
