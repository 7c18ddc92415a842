"""LLM protocol, the Anthropic implementation (prompt caching, JSON output, retries, batches), an honest offline
stand-in, and the hook that puts every call in the usage ledger."""
from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from core.models.pricing import Ttl, price_for, tokens_usd, uncached_usd
from core.text import redact, register_secret
from core.types import DEFAULT_WORKSPACE, LedgerEntry, Usage

MAX_BREAKPOINTS = 4  # the Messages API accepts at most four cache_control blocks per request


class LLMError(RuntimeError):
    """An LLM call failed for good (after retries); the message is fit for the user and never holds the key.

    `kind` says what went wrong: unavailable, auth, bad_request, rate_limit, overloaded, server, timeout,
    connection, malformed (a 200 whose body is not a usable message), budget, error. The message is redacted
    here, once, so no caller can forget it (an echoing gateway can put the request headers into its error body)."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(redact(str(message)))
        self.kind = kind


class LLMUnavailable(LLMError):
    """No LLM is configured (no API key): callers fall back to their offline method and say so."""

    def __init__(self, message: str, kind: str = "unavailable") -> None:
        super().__init__(message, kind)


class _Malformed(Exception):
    """A 200 response whose body is not a Messages API message (truncated JSON, no content, an HTML page)."""


@dataclass(frozen=True)
class TextBlock:
    """A piece of prompt text. `cache=True` puts a cache breakpoint after it: everything up to and including this
    block is the cached prefix, so it must be byte-identical across the calls that should share it."""

    text: str
    cache: bool = False


@dataclass(frozen=True)
class LLMRequest:
    model: str
    system: tuple[TextBlock, ...]
    user: tuple[TextBlock, ...]
    max_tokens: int = 512
    json_schema: Mapping[str, Any] | None = None  # structured output: the reply is JSON valid for this schema
    purpose: str = "other"  # ledger category: context, answer, judge, ...
    ref_id: str = ""  # document or query the call is about (ledger)

    def breakpoints(self) -> int:
        return sum(b.cache for b in (*self.system, *self.user))

    def params(self, ttl: Ttl = "5m") -> dict[str, Any]:
        """Messages API parameters. Built from the blocks alone (no clock, no counter), so equal blocks give
        equal bytes and the cached prefix matches."""
        if self.breakpoints() > MAX_BREAKPOINTS:
            raise ValueError(f"{self.breakpoints()} cache breakpoints; the API allows {MAX_BREAKPOINTS}")
        cc: dict[str, str] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}

        def blocks(items: Sequence[TextBlock]) -> list[dict[str, Any]]:
            return [{"type": "text", "text": b.text, **({"cache_control": dict(cc)} if b.cache else {})} for b in items]

        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system:
            params["system"] = blocks(self.system)
        params["messages"] = [{"role": "user", "content": blocks(self.user)}]
        if self.json_schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": dict(self.json_schema)}}
        return params


@dataclass(frozen=True)
class LLMResponse:
    text: str
    model: str
    usage: Usage  # tokens and dollars of this call (usd already priced, batch discount included)
    ms: float
    data: Any = None  # the parsed JSON when the request asked for structured output
    usd_uncached: float = 0.0
    stop_reason: str = ""
    cache_note: str = ""  # e.g. "no cache: prefix below the 4,096-token minimum"


@dataclass(frozen=True)
class BatchStatus:
    batch_id: str
    status: str  # in_progress | canceling | ended
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.status == "ended"


class LedgerSink(Protocol):
    def record_usage(self, entry: LedgerEntry) -> None: ...


@runtime_checkable
class LLM(Protocol):
    """What the workbench needs from a language model. `available` is False for the offline stand-in."""

    name: str
    available: bool
    reason: str  # why it is unavailable (shown to the user), "" when available

    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse: ...

    def submit_batch(self, items: Sequence[tuple[str, LLMRequest]]) -> str: ...

    def poll_batch(self, batch_id: str) -> BatchStatus: ...

    def batch_results(self, batch_id: str, requests: Mapping[str, LLMRequest], *, workspace: str = DEFAULT_WORKSPACE,
                      run_id: str = "") -> dict[str, LLMResponse | LLMError]: ...


@runtime_checkable
class TokenCountingLLM(Protocol):
    """Optional capability of an LLM: the provider counts a request's input tokens (exact, free; it may raise
    LLMError when it cannot be asked)."""

    def count_tokens(self, request: LLMRequest) -> int: ...


class OfflineLLM:
    """The honest stand-in when no key is configured: it never invents text; every call raises LLMUnavailable
    so the caller runs its offline method (heuristic context, extractive answer, lexical judge) and labels it."""

    name = "offline"
    available = False

    def __init__(self, reason: str = "no ANTHROPIC_API_KEY is set") -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"OfflineLLM({self.reason!r})"

    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse:
        raise LLMUnavailable(f"no LLM: {self.reason}")

    def count_tokens(self, request: LLMRequest) -> int:
        raise LLMUnavailable(f"no LLM: {self.reason}")

    def submit_batch(self, items: Sequence[tuple[str, LLMRequest]]) -> str:
        raise LLMUnavailable(f"no LLM: {self.reason}")

    def poll_batch(self, batch_id: str) -> BatchStatus:
        raise LLMUnavailable(f"no LLM: {self.reason}")

    def batch_results(self, batch_id: str, requests: Mapping[str, LLMRequest], *, workspace: str = DEFAULT_WORKSPACE,
                      run_id: str = "") -> dict[str, LLMResponse | LLMError]:
        raise LLMUnavailable(f"no LLM: {self.reason}")


def parse_json(text: str) -> Any:
    """The JSON object of a structured reply; tolerates a fenced or prefixed reply from models without the feature."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"\{.*\}|\[.*\]", text, re.S)
        if m:
            try:
                return json.loads(m.group(0))
            except json.JSONDecodeError:
                pass
    raise LLMError(f"the model did not return valid JSON: {text[:120]!r}")


_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# A malformed 200 is retried once only: a gateway hiccup is worth one more try, but the call may have been billed.
MALFORMED_RETRIES = 1


def _status_kind(code: int) -> str:
    if code in (401, 403):
        return "auth"
    if code == 429:
        return "rate_limit"
    if code == 529:
        return "overloaded"
    if code >= 500:
        return "server"
    return "bad_request"


def _checked_message(msg: Any) -> Any:
    """The SDK's Message, or _Malformed when the body did not carry one (the SDK passes odd bodies through)."""
    content = getattr(msg, "content", None)
    usage = getattr(msg, "usage", None)
    if not isinstance(content, list) or usage is None or not isinstance(getattr(usage, "input_tokens", None), int) \
            or not isinstance(getattr(usage, "output_tokens", None), int):
        what = "an HTML page" if isinstance(msg, str) and "<" in msg[:200] else (
            "a body without content/usage" if not isinstance(msg, str) else "a non-JSON body")
        raise _Malformed(what)
    return msg


class AnthropicLLM:
    """Claude through the official SDK. The SDK's own retries are off (max_retries=0) so that backoff, the
    retry count and the ledger stay here, visible and testable. The key lives only inside the SDK client."""

    name = "anthropic"
    available = True
    reason = ""

    def __init__(
        self, api_key: str, *, base_url: str | None = None, ledger: LedgerSink | None = None, max_retries: int = 4,
        timeout_s: float = 60.0, cache_ttl: Ttl = "5m", backoff_s: float = 1.0, backoff_cap_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
    ) -> None:
        import anthropic  # imported here: pages and tests without a key never load the SDK

        register_secret(api_key)
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)
        self.base_url = base_url or "https://api.anthropic.com"
        self.ledger = ledger
        self.max_retries = max_retries
        self.cache_ttl: Ttl = cache_ttl
        self.backoff_s = backoff_s
        self.backoff_cap_s = backoff_cap_s
        self._sleep = sleep
        self._rng = rng or random.Random(0)
        self.retries = 0  # total retries made (observability and tests)

    def __repr__(self) -> str:  # never the key
        return f"AnthropicLLM(base_url={self.base_url!r}, ttl={self.cache_ttl})"

    # -- retries ------------------------------------------------------------------------------------------------
    def _delay(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        try:
            if header is not None:
                return min(float(header), self.backoff_cap_s)
        except ValueError:
            pass
        base = min(self.backoff_cap_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + self._rng.random() / 2)  # jitter: retries of parallel callers do not collide

    def _with_retries(self, what: str, fn: Callable[[], Any]) -> Any:
        """fn() with backoff on retryable failures; every failure leaves as one LLMError (never an SDK or JSON
        exception), and `from None` keeps the SDK exception, which may quote the request, out of tracebacks."""
        a = self._anthropic
        malformed = 0
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except a.APIStatusError as exc:
                if exc.status_code not in _RETRY_STATUS or attempt == self.max_retries:
                    raise LLMError(f"{what} failed: HTTP {exc.status_code} {_short(exc)}",
                                   _status_kind(exc.status_code)) from None
                last: Exception = exc
            except a.APIConnectionError as exc:  # includes APITimeoutError
                timeout = isinstance(exc, a.APITimeoutError)
                if attempt == self.max_retries:
                    raise LLMError(f"{what} {'timed out' if timeout else 'could not connect'} after {attempt + 1} "
                                   "attempts", "timeout" if timeout else "connection") from None
                last = exc
            except (_Malformed, ValueError, a.APIResponseValidationError) as exc:  # JSONDecodeError is a ValueError
                detail = str(exc) if isinstance(exc, _Malformed) else f"invalid JSON ({type(exc).__name__})"
                if malformed >= MALFORMED_RETRIES or attempt == self.max_retries:
                    raise LLMError(f"{what}: the API answered 200 with {detail}; no usable reply",
                                   "malformed") from None
                malformed += 1
                last = exc
            except LLMError:
                raise
            except Exception as exc:  # noqa: BLE001 - an SDK surprise is still one typed, redacted error
                raise LLMError(f"{what} failed ({type(exc).__name__}: {str(exc)[:200]})", "error") from None
            self.retries += 1
            self._sleep(self._delay(attempt, last))
        raise LLMError(f"{what} failed")  # unreachable: the loop returns or raises

    # -- one call -----------------------------------------------------------------------------------------------
    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse:
        params = request.params(self.cache_ttl)
        start = time.perf_counter()
        msg = self._with_retries(f"{request.purpose} call to {request.model}",
                                 lambda: _checked_message(self._client.messages.create(**params)))
        ms = (time.perf_counter() - start) * 1000
        resp = self._response(msg, request, ms, batch=False)
        self._record(resp, request, workspace, run_id, batch=False)
        return resp

    def count_tokens(self, request: LLMRequest) -> int:
        """Input tokens of a request by the provider's own counter (free, rate-limited): budgets bound spend with it."""
        params = {k: v for k, v in request.params(self.cache_ttl).items() if k in ("model", "system", "messages")}
        res = self._with_retries(f"token count for {request.model}",
                                 lambda: self._client.messages.count_tokens(**params))
        n = getattr(res, "input_tokens", None)
        if not isinstance(n, int):
            raise LLMError(f"token count for {request.model}: the API answered without input_tokens", "malformed")
        return n

    def _response(self, msg: Any, request: LLMRequest, ms: float, *, batch: bool) -> LLMResponse:
        try:
            return self._response_unchecked(msg, request, ms, batch=batch)
        except LLMError:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise LLMError(f"{request.purpose} reply from {request.model} is malformed ({type(exc).__name__})",
                           "malformed") from None

    def _response_unchecked(self, msg: Any, request: LLMRequest, ms: float, *, batch: bool) -> LLMResponse:
        text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
        u = msg.usage
        write = int(u.cache_creation_input_tokens or 0)
        read = int(u.cache_read_input_tokens or 0)
        model = msg.model or request.model
        p = price_for(model)
        # The API splits cache writes by TTL when it can; price each part at its own multiplier.
        cc = getattr(u, "cache_creation", None)
        w1h = int(getattr(cc, "ephemeral_1h_input_tokens", 0) or 0) if cc is not None else (write if self.cache_ttl == "1h" else 0)
        w5m = write - w1h
        usd = (tokens_usd(p, input_tokens=int(u.input_tokens), output_tokens=int(u.output_tokens),
                          cache_write_tokens=w5m, cache_read_tokens=read, batch=batch)
               + tokens_usd(p, cache_write_tokens=w1h, ttl="1h", batch=batch))
        usage = Usage(int(u.input_tokens), int(u.output_tokens), write, read, usd, 1)
        note = ""
        if request.breakpoints() and not write and not read:
            note = (f"no prompt cache: the prefix is probably below the {p.min_cacheable_tokens:,}-token minimum "
                    f"of {model}")
        data = parse_json(text) if request.json_schema is not None else None
        return LLMResponse(text, model, usage, ms, data, uncached_usd(usage, model, batch=batch),
                           str(msg.stop_reason or ""), note)

    def _record(self, resp: LLMResponse, request: LLMRequest, workspace: str, run_id: str, *, batch: bool) -> None:
        if self.ledger is None:
            return
        u = resp.usage
        self.ledger.record_usage(LedgerEntry(
            request.purpose, resp.model, u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens,
            u.usd, resp.usd_uncached, resp.ms, request.ref_id, run_id, batch, self.cache_ttl, resp.cache_note,
            workspace,
        ))

    # -- Message Batches (-50 %) ---------------------------------------------------------------------------------
    def submit_batch(self, items: Sequence[tuple[str, LLMRequest]]) -> str:
        reqs = [{"custom_id": cid, "params": r.params(self.cache_ttl)} for cid, r in items]
        batch = self._with_retries("batch submit", lambda: self._client.messages.batches.create(requests=reqs))
        return str(batch.id)

    def poll_batch(self, batch_id: str) -> BatchStatus:
        b = self._with_retries("batch status", lambda: self._client.messages.batches.retrieve(batch_id))
        try:
            counts = b.request_counts
            return BatchStatus(b.id, b.processing_status, {k: int(getattr(counts, k)) for k in
                                                           ("processing", "succeeded", "errored", "canceled",
                                                            "expired")})
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMError(f"batch status of {batch_id}: malformed reply ({type(exc).__name__})", "malformed") from None

    def batch_results(self, batch_id: str, requests: Mapping[str, LLMRequest], *, workspace: str = DEFAULT_WORKSPACE,
                      run_id: str = "") -> dict[str, LLMResponse | LLMError]:
        """Results of an ended batch by custom id; each success is priced at the batch rate and ledgered."""
        out: dict[str, LLMResponse | LLMError] = {}
        lines = self._with_retries("batch results", lambda: list(self._client.messages.batches.results(batch_id)))
        for line in lines:
            cid = getattr(line, "custom_id", None)
            req = requests.get(cid) if isinstance(cid, str) else None
            if cid is None or getattr(getattr(line, "result", None), "type", None) is None:
                continue  # a line we cannot attribute: its request stays pending and a re-run picks it up
            if line.result.type != "succeeded" or req is None:
                detail = getattr(getattr(line.result, "error", None), "error", None)
                out[cid] = LLMError(f"batch request {cid}: {line.result.type} {getattr(detail, 'message', '')}".strip())
                continue
            try:
                resp = self._response(line.result.message, req, 0.0, batch=True)
            except LLMError as exc:
                out[cid] = exc
                continue
            self._record(resp, req, workspace, run_id, batch=True)
            out[cid] = resp
        return out


def _short(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return redact(str(err["message"]))[:300]  # redact before cutting: a cut key would escape the pattern
    return type(exc).__name__


def build_llm(
    api_key: str | None, *, base_url: str | None = None, ledger: LedgerSink | None = None, max_retries: int = 4,
    timeout_s: float = 60.0, cache_ttl: Ttl = "5m",
) -> tuple[LLM, str | None]:
    """AnthropicLLM when a key is given, else the offline stand-in; the second value is a notice for the user."""
    if not api_key:
        return OfflineLLM(), ("no ANTHROPIC_API_KEY: answers are extractive and contexts heuristic or late-chunked "
                              "(offline); set the key to use Claude")
    return AnthropicLLM(api_key, base_url=base_url, ledger=ledger, max_retries=max_retries, timeout_s=timeout_s,
                        cache_ttl=cache_ttl), None
