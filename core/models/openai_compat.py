"""An OpenAI-compatible chat server as the workbench's LLM: Ollama, vLLM, llama.cpp's server, LM Studio and anything
else that answers `POST {base_url}/chat/completions` and `GET {base_url}/models` (base_url is the `/v1` root).

The same guards as the Anthropic client (core/models/llm.py), through the same functions: every reply's text and
model name pass `reply_text` / `redact` before anything reads them, the optional key is registered as a secret, the
reported usage is checked by `check_usage`, every attempt has one total deadline (connect, send and every read,
with a server that drips bytes cut at it) and the caller's `call_limits`, and retries back off (Retry-After
honoured) only while the caller's deadline leaves room. A reply body is read up to MAX_BODY_BYTES.

Prompt prefix: the request's system blocks come first and unchanged, so a server that keeps the previous prompt's
KV state (llama.cpp with `cache_prompt`, vLLM's prefix caching) processes a document once for all its chunks; the
prompt tokens it reports as cached (`usage.prompt_tokens_details.cached_tokens`, or llama.cpp's `timings.cache_n`)
are booked as cache reads. Dollars: the price table's when it knows the model, else 0 (a local server).
"""
from __future__ import annotations

import json
import random
import time
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Mapping

from core.models.llm import (
    MALFORMED_RETRIES,
    LedgerSink,
    LLMError,
    LLMRequest,
    LLMResponse,
    NoBatches,
    _DeadlinePassed,
    _Malformed,
    _run_until,
    _status_kind,
    begin_attempt,
    check_usage,
    current_limits,
    reply_text,
    retry_after_s,
    wait_before_retry,
)
from core.models.pricing import price_for, tokens_usd
from core.models.structured import recover_json
from core.text import redact, redact_value, register_secret
from core.types import DEFAULT_WORKSPACE, LedgerEntry, Usage

PROVIDER = "openai-compatible"
MAX_BODY_BYTES = 8 * 1024 * 1024  # a reply (or error) body past this is not read further: malformed
MAX_ERROR_CHARS = 300
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class _Status(Exception):
    def __init__(self, code: int, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.code, self.message, self.retry_after = code, message, retry_after


class _Connect(Exception):
    pass


def chat_messages(request: LLMRequest) -> list[dict[str, str]]:
    """The request as chat messages: the system blocks (the cached prefix: instructions, then the document) as one
    system message, byte-identical across the calls that share it, then the user blocks."""
    msgs = []
    system = "".join(b.text for b in request.system)
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": "".join(b.text for b in request.user)})
    return msgs


def provider_usage(raw: Any, request: LLMRequest) -> tuple[SimpleNamespace, int]:
    """An OpenAI-style usage object in the Anthropic shape check_usage judges, and the cached prompt tokens it
    reported. Cached tokens of a request without a cache breakpoint are booked as plain input."""
    u = raw if isinstance(raw, Mapping) else {}
    prompt = u.get("prompt_tokens")
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None and isinstance(u.get("_cache_n"), int):
        cached = u["_cache_n"]
    ok = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    reuse = cached if ok(cached) and ok(prompt) and cached <= prompt and request.breakpoints() else 0
    inp = prompt - reuse if ok(prompt) else prompt
    return SimpleNamespace(input_tokens=inp, output_tokens=u.get("completion_tokens"), cache_creation_input_tokens=0,
                           cache_read_input_tokens=reuse), reuse


class OpenAICompatLLM(NoBatches):
    """A chat-completions server. `model` is what the server is asked for (every stage's own model setting names a
    Claude model and is not sent); the ledger and the trace name this model and provider."""

    name = PROVIDER
    available = True
    reason = ""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, ledger: LedgerSink | None = None,
        max_retries: int = 4, timeout_s: float = 60.0, stream: bool = True, cache_prompt: bool = True,
        backoff_s: float = 1.0, backoff_cap_s: float = 30.0, sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None, max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        import httpx2  # comes with the anthropic SDK

        if api_key:
            register_secret(api_key)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.ledger = ledger
        self.max_retries, self.timeout_s = max_retries, timeout_s
        self.stream, self.cache_prompt = stream, cache_prompt
        self.backoff_s, self.backoff_cap_s = backoff_s, backoff_cap_s
        self.max_body_bytes = max_body_bytes
        self.cache_ttl = "5m"
        self._sleep = sleep
        self._rng = rng or random.Random(0)
        self._headers = {"content-type": "application/json", **({"authorization": f"Bearer {api_key}"}
                                                                 if api_key else {})}
        self._httpx = httpx2
        self._client = httpx2.Client(timeout=timeout_s, follow_redirects=False, trust_env=False)
        self.retries = 0

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatLLM(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    @property
    def free(self) -> bool:
        """True when the price table does not know the model (a local server): its calls are booked at $0."""
        return not price_for(self.model).known

    # -- HTTP ----------------------------------------------------------------------------------------------------
    def _read(self, resp: Any, deadline: float) -> Iterator[bytes]:
        """The body in chunks, ended at the attempt's deadline and at max_body_bytes."""
        total = 0
        for chunk in resp.iter_bytes():
            if time.monotonic() > deadline:
                raise _DeadlinePassed()
            total += len(chunk)
            if total > self.max_body_bytes:
                raise _Malformed(f"a body above {self.max_body_bytes:,} bytes")
            yield chunk

    def _request(self, method: str, path: str, body: Any, deadline: float,
                 handle: Callable[[Any, float], Any]) -> Any:
        h = self._httpx
        timeout = max(0.001, deadline - time.monotonic())
        try:
            with self._client.stream(method, self.base_url + path, headers=self._headers,
                                     content=None if body is None else json.dumps(body).encode(),
                                     timeout=h.Timeout(timeout)) as resp:
                if resp.status_code != 200:
                    raw = b""
                    for chunk in self._read(resp, deadline):
                        raw += chunk
                        if len(raw) > 65536:
                            break
                    raise _Status(resp.status_code, _error_message(raw),
                                  retry_after_s(resp.headers.get("retry-after")))
                return handle(resp, deadline)
        except h.TimeoutException:
            raise _DeadlinePassed() from None
        except (h.TransportError, OSError) as exc:
            raise _Connect(type(exc).__name__) from None

    def _with_retries(self, what: str, fn: Callable[[float], Any]) -> Any:
        """fn(deadline) with the Anthropic client's rules: a total deadline per attempt, the caller's limits,
        backoff (Retry-After first) on 408/409/425/429/5xx, timeouts and dropped connections, one retry of a
        malformed 200, and every failure one redacted LLMError."""
        malformed = 0
        for attempt in range(self.max_retries + 1):
            deadline = begin_attempt(what, attempt, self.timeout_s, 0.0)
            last: Exception
            try:
                return _run_until(lambda _t: fn(deadline), deadline)
            except _Status as exc:
                if exc.code not in _RETRY_STATUS or attempt == self.max_retries:
                    raise LLMError(f"{what} failed: HTTP {exc.code} {redact(exc.message)[:MAX_ERROR_CHARS]}",
                                   _status_kind(exc.code)) from None
                last = exc
            except (_Connect, _DeadlinePassed) as exc:
                timeout = isinstance(exc, _DeadlinePassed)
                if attempt == self.max_retries:
                    raise LLMError(f"{what} {'timed out' if timeout else 'could not connect'} after {attempt + 1} "
                                   f"attempts of at most {self.timeout_s:g} s each",
                                   "timeout" if timeout else "connection") from None
                last = exc
            except _Malformed as exc:
                if malformed >= MALFORMED_RETRIES or attempt == self.max_retries:
                    raise LLMError(f"{what}: the server answered 200 with {redact(str(exc))[:MAX_ERROR_CHARS]}; "
                                   "no usable reply", "malformed") from None
                malformed += 1
                last = exc
            except LLMError:
                raise
            except Exception as exc:  # noqa: BLE001 - any surprise is still one typed, redacted error
                raise LLMError(f"{what} failed ({type(exc).__name__}: {redact(str(exc))[:200]})", "error") from None
            wait_before_retry(what, self._delay(attempt, last), last, self._sleep)
            self.retries += 1
        raise LLMError(f"{what} failed")  # unreachable

    def _delay(self, attempt: int, exc: Exception) -> float:
        if isinstance(exc, _Status) and exc.retry_after is not None:
            return min(exc.retry_after, self.backoff_cap_s)
        base = min(self.backoff_cap_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + self._rng.random() / 2)

    # -- chat ----------------------------------------------------------------------------------------------------
    def body(self, request: LLMRequest) -> dict[str, Any]:
        if request.tools or request.turns:
            raise LLMError(f"{request.purpose}: tool use is not offered through the {PROVIDER} provider",
                           "bad_request")
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(request),
                                "max_tokens": request.max_tokens, "temperature": 0, "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.cache_prompt:
            body["cache_prompt"] = True  # llama.cpp's server: keep the KV state of the prompt's common prefix
        if request.json_schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": dict(request.json_schema)}}
        return body

    def _chat(self, resp: Any, deadline: float) -> dict[str, Any]:
        """{"text", "model", "usage", "finish"} from a JSON body or an event stream."""
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            raw = b"".join(self._read(resp, deadline))
            try:
                msg = json.loads(raw)
                choice = msg["choices"][0]
                text = choice["message"].get("content") or ""
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                raise _Malformed("an HTML page" if b"<" in raw[:200] else "a body without choices/message") from None
            if not isinstance(text, str):
                raise _Malformed("a message whose content is not text")
            usage = msg.get("usage")
            if isinstance(usage, dict) and isinstance(msg.get("timings"), dict):
                usage = {**usage, "_cache_n": msg["timings"].get("cache_n")}
            return {"text": text, "model": msg.get("model"), "usage": usage,
                    "finish": choice.get("finish_reason") or ""}
        parts: list[str] = []
        out: dict[str, Any] = {"model": None, "usage": None, "finish": ""}
        buf = b""
        done = False
        for chunk in self._read(resp, deadline):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    continue
                try:
                    ev = json.loads(data)
                except ValueError:
                    raise _Malformed("an event that is not JSON") from None
                if not isinstance(ev, dict):
                    raise _Malformed("an event that is not an object")
                if isinstance(ev.get("error"), (dict, str)):
                    err = ev["error"]
                    raise _Status(500, str(err.get("message") if isinstance(err, dict) else err), None)
                out["model"] = ev.get("model") or out["model"]
                if isinstance(ev.get("usage"), dict):
                    out["usage"] = ev["usage"]
                    if isinstance(ev.get("timings"), dict):
                        out["usage"] = {**ev["usage"], "_cache_n": ev["timings"].get("cache_n")}
                for ch in ev.get("choices") or []:
                    if not isinstance(ch, dict):
                        continue
                    delta = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
                    if isinstance(delta.get("content"), str):
                        parts.append(delta["content"])
                    if ch.get("finish_reason"):
                        out["finish"] = ch["finish_reason"]
        if not done and not out["finish"]:
            raise _Malformed("a stream that ended before its last event")
        out["text"] = "".join(parts)
        return out

    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse:
        body = self.body(request)
        start = time.perf_counter()
        got = self._with_retries(f"{request.purpose} call to {self.model}",
                                 lambda d: self._request("POST", "/chat/completions", body, d, self._chat))
        ms = (time.perf_counter() - start) * 1000
        resp = self._response(got, request, ms)
        self._record(resp, request, workspace, run_id)
        if (limits := current_limits()) is not None:
            limits.spend(resp.usage.usd)
        return resp

    def _response(self, got: Mapping[str, Any], request: LLMRequest, ms: float) -> LLMResponse:
        text = reply_text(str(got.get("text") or ""))
        model = redact(got["model"])[:200] if isinstance(got.get("model"), str) and got["model"] else self.model
        raw, reuse = provider_usage(got.get("usage"), request)
        u = check_usage(raw, request, text, "5m")
        p = price_for(self.model)
        usd = tokens_usd(p, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                         cache_read_tokens=u.read) if p.known else 0.0
        usd_uncached = tokens_usd(p, input_tokens=u.input_tokens + u.read + u.write_5m + u.write_1h,
                                  output_tokens=u.output_tokens) if p.known else 0.0
        # A replaced input side is booked as a cache write (check_usage's dearest reading): for a local server
        # that is plain input.
        usage = Usage(u.input_tokens + u.write_5m + u.write_1h, u.output_tokens, 0, u.read, usd, 1,
                      (f"{self.name}:{model}",))
        notes = [u.flag] if u.flag else []
        if request.breakpoints() and not u.read:
            notes.append("no prefix reuse reported by the server (first call of a prefix, or no prompt cache)")
        data = None
        if request.json_schema is not None:  # unusable JSON is the caller's to count (data None), the call is booked
            rec = recover_json(text, request.json_schema)
            data = redact_value(rec.data) if rec.ok else None
            if not rec.ok:
                notes.append(f"structured reply not usable: {redact(rec.failure)[:200]}")
            elif rec.repairs:
                notes.append(f"structured reply repaired: {', '.join(rec.repairs)}"[:200])
        return LLMResponse(text, model, usage, ms, data, usd_uncached, redact(str(got.get("finish") or "")),
                           "; ".join(notes), u.flag)

    def _record(self, resp: LLMResponse, request: LLMRequest, workspace: str, run_id: str) -> None:
        if self.ledger is None:
            return
        u = resp.usage
        self.ledger.record_usage(LedgerEntry(
            request.purpose, resp.model, u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens,
            u.usd, resp.usd_uncached, resp.ms, request.ref_id, run_id, False, "", resp.cache_note, workspace,
            resp.usage_flag, provider=self.name))

    # -- the server's models -------------------------------------------------------------------------------------
    def models(self) -> list[str]:
        """The model ids the server lists (GET /models)."""
        def handle(resp: Any, deadline: float) -> list[str]:
            try:
                data = json.loads(b"".join(self._read(resp, deadline)))["data"]
                return [redact(str(m["id"]))[:200] for m in data if isinstance(m, dict) and "id" in m][:1000]
            except (ValueError, KeyError, TypeError):
                raise _Malformed("a model list without data[].id") from None
        return self._with_retries("model list", lambda d: self._request("GET", "/models", None, d, handle))


def _error_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return "(a non-JSON error body)"
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return redact(str(err["message"]))[:MAX_ERROR_CHARS]
    if isinstance(err, str):
        return redact(err)[:MAX_ERROR_CHARS]
    return "(an error body without a message)"
