"""Loopback stand-in for an OpenAI-compatible chat server (llama.cpp server, Ollama, vLLM, LM Studio), for tests.

It listens on 127.0.0.1 (random port) under /v1: `POST /v1/chat/completions` (JSON or, with "stream": true, a
server-sent event stream whose last data event carries the usage) and `GET /v1/models`. Tokens are counted as
ceil(UTF-8 bytes / 4). Prompt reuse imitates llama.cpp's `cache_prompt`: the prompt's common prefix with the
previous request's prompt, counted in whole 4-byte tokens, is reported as `prompt_tokens_details.cached_tokens`.
Faults are queued per request: ("status", code, retry_after or None), ("drip", seconds per byte for the whole
response), ("latency", seconds), ("malformed", "html" | "no_choices" | "bad_event" | "cut_stream" | "huge"),
("usage", "negative" | "huge" | "missing" | "string" | "zero"), ("echo", code) an error body quoting the request
headers (the key among them). `echo_headers` makes every reply text quote the request headers.
"""
from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest


def stub_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


@dataclass
class OAState:
    key: str | None
    faults: deque = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], str] | None = None
    echo_headers: bool = False
    last_prompt: str = ""
    models: tuple[str, ...] = ("local-model", "other-model")


def _prompt(body: dict[str, Any]) -> str:
    return "".join(f"<{m.get('role')}>{m.get('content')}" for m in body.get("messages", []))


def _reply(state: OAState, body: dict[str, Any], headers: dict[str, str]) -> str:
    if state.echo_headers:
        return "headers: " + json.dumps(headers)
    if state.responder is not None:
        return state.responder(body)
    if body.get("response_format"):
        return json.dumps({"question": "What does the passage say?", "answer": "It says something."})
    return "An answer from the local model."


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _write(self, data: bytes, drip: float) -> None:
        if drip <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(drip)

    def _send(self, status: int, payload: Any, *, ctype: str = "application/json", extra: dict[str, str] | None = None,
              raw: bytes | None = None, drip: float = 0.0) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        head = f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n"
        for k, v in (extra or {}).items():
            head += f"{k}: {v}\r\n"
        self._write(head.encode() + b"\r\n" + data, drip)

    def do_GET(self) -> None:  # noqa: N802
        st = self.server.state
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, {"error": {"message": "not found"}})
            return
        self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in st.models]})

    def do_POST(self) -> None:  # noqa: N802
        st = self.server.state
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n)
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "bad json"}})
            return
        st.requests.append(body)
        st.headers.append(headers)
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": "not found"}})
            return
        if st.key is not None and headers.get("authorization") != f"Bearer {st.key}":
            self._send(401, {"error": {"message": "invalid api key"}})
            return
        fault = st.faults.popleft() if st.faults else None
        kind = fault[0] if fault else None
        if kind == "status":
            extra = {"retry-after": str(fault[2])} if fault[2] is not None else {}
            self._send(fault[1], {"error": {"message": f"stub status {fault[1]}"}}, extra=extra)
            return
        if kind == "echo":
            self._send(fault[1], {"error": {"message": "gateway saw " + json.dumps(headers)}})
            return
        if kind == "latency":
            time.sleep(fault[1])
        drip = fault[1] if kind == "drip" else 0.0
        if kind == "malformed" and fault[1] == "html":
            self._send(200, None, ctype="text/html", raw=b"<html><body>502 proxy</body></html>")
            return
        if kind == "malformed" and fault[1] == "no_choices":
            self._send(200, {"id": "x", "object": "chat.completion"})
            return
        if kind == "malformed" and fault[1] == "huge":
            self._send(200, None, raw=b'{"choices": [{"message": {"content": "' + b"a" * (9 * 1024 * 1024) + b'"}}]}')
            return
        text = _reply(st, body, headers)
        prompt = _prompt(body)
        total = stub_tokens(prompt)
        cached = 0
        if body.get("cache_prompt") and st.last_prompt:
            common = 0
            for a, b in zip(st.last_prompt, prompt):
                if a != b:
                    break
                common += 1
            cached = min(len(prompt[:common].encode()) // 4, max(0, total - 1))
        st.last_prompt = prompt
        out = min(stub_tokens(text), int(body.get("max_tokens") or 10**9))
        usage: Any = {"prompt_tokens": total, "completion_tokens": out, "total_tokens": total + out,
                      "prompt_tokens_details": {"cached_tokens": cached}}
        if kind == "usage":
            usage = {"negative": {"prompt_tokens": -5, "completion_tokens": -1},
                     "huge": {"prompt_tokens": 10**12, "completion_tokens": 10**9},
                     "missing": None, "string": {"prompt_tokens": "many", "completion_tokens": "lots"},
                     "zero": {"prompt_tokens": 0, "completion_tokens": 0}}[fault[1]]
        model = st.models[0] if body.get("model") not in st.models else body["model"]
        if not body.get("stream"):
            self._send(200, {"id": "c1", "object": "chat.completion", "model": model,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                          "finish_reason": "stop"}], "usage": usage}, drip=drip)
            return
        events: list[bytes] = []
        step = max(1, len(text) // 4)
        for i in range(0, len(text), step):
            events.append(b"data: " + json.dumps({"model": model, "choices": [
                {"index": 0, "delta": {"content": text[i:i + step]}, "finish_reason": None}]}).encode() + b"\n\n")
        if kind == "malformed" and fault[1] == "bad_event":
            events.insert(1, b"data: {not json\n\n")
        events.append(b"data: " + json.dumps({"model": model, "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode() + b"\n\n")
        events.append(b"data: " + json.dumps({"model": model, "choices": [], "usage": usage}).encode() + b"\n\n")
        events.append(b"data: [DONE]\n\n")
        if kind == "malformed" and fault[1] == "cut_stream":
            events = events[:1]
        self._send(200, None, ctype="text/event-stream", raw=b"".join(events), drip=drip)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: OAState


class OAStub:
    def __init__(self, server: _Server) -> None:
        self._server = server

    @property
    def state(self) -> OAState:
        return self._server.state

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_openai_stub(key: str | None = None) -> OAStub:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = OAState(key=key)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return OAStub(server)


@pytest.fixture
def openai_stub() -> Iterator[OAStub]:
    stub = start_openai_stub("sk-local-stub-0123456789abcdef")
    yield stub
    stub.stop()
