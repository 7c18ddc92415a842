"""LLM protocol, the Anthropic implementation (prompt caching, JSON output, retries, batches), an honest offline
stand-in, and the hook that puts every call in the usage ledger.

The Anthropic client is the one point every reply passes, so three guards live here (issue #33): every reply's text,
structured data, tool input, model name and error is redacted before any stage, store or page sees it; the usage a
provider reports is validated against what the request could have produced (a bad value is replaced by our own
bound and flagged in the ledger); and every attempt has a total wall-clock deadline (connect, send and every read
together), retries start only while the caller's deadline (`call_limits`) leaves time for them.
"""
from __future__ import annotations

import contextvars
import json
import math
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

from core.models.pricing import Ttl, price_for, tokens_usd, uncached_usd
from core.models.structured import recover_json
from core.text import llm_tokens_upper_bound, redact, redact_value, register_secret
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
    # The caller's own bound on the input tokens (e.g. the provider's count of the cached prefix plus a character
    # bound of the rest), the one its budget check used: reported usage above it is implausible and replaced.
    input_bound: int | None = None
    # Tool use (the agent's tools, core/route/tools.py): tool definitions with JSON schemas, the conversation after
    # the first user message (assistant tool_use turns and user tool_result turns, as Messages API dicts) and the
    # tool choice ({"type": "none"} forces a text answer).
    tools: tuple[Mapping[str, Any], ...] = ()
    turns: tuple[Mapping[str, Any], ...] = ()
    tool_choice: Mapping[str, Any] | None = None

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
        params["messages"] = [{"role": "user", "content": blocks(self.user)}, *(dict(t) for t in self.turns)]
        if self.tools:
            params["tools"] = [dict(t) for t in self.tools]
        if self.tool_choice is not None:
            params["tool_choice"] = dict(self.tool_choice)
        if self.json_schema is not None:
            params["output_config"] = {"format": {"type": "json_schema", "schema": dict(self.json_schema)}}
        return params


@dataclass(frozen=True)
class ToolCall:
    """One tool_use block of a reply: its id, the tool's name and its input as the model sent it (redacted; any
    JSON value or a string: the caller validates it against the tool's schema)."""

    id: str
    name: str
    input: Any


@dataclass(frozen=True)
class LLMResponse:
    text: str
    model: str
    usage: Usage  # tokens and dollars of this call (usd already priced, batch discount included)
    ms: float
    data: Any = None  # the parsed JSON when the request asked for structured output
    usd_uncached: float = 0.0
    stop_reason: str = ""
    # The call's note for traces and the ledger: a replaced usage first (see usage_flag), then the cache's, e.g.
    # "no cache: prefix below the 4,096-token minimum".
    cache_note: str = ""
    usage_flag: str = ""  # "" when the provider's usage was plausible, else what was replaced and why
    tool_calls: tuple[ToolCall, ...] = ()  # the reply's tool_use blocks, in order (requests with tools)


@dataclass(frozen=True)
class BatchStatus:
    batch_id: str
    status: str  # in_progress | canceling | ended
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.status == "ended"


def wait_for_batch(llm: "LLM", batch_id: str, *, poll_s: float, max_wait_s: float,
                   sleep: Callable[[float], None]) -> BatchStatus:
    """Poll a submitted batch every `poll_s` until it ends or `max_wait_s` passes; its last status either way."""
    waited = 0.0
    status = llm.poll_batch(batch_id)
    while not status.ended and waited < max_wait_s:
        sleep(poll_s)
        waited += poll_s
        status = llm.poll_batch(batch_id)
    return status


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


class NoBatches:
    """For providers with no message-batch API (OpenAI-compatible servers, in-process GGUF): every batch call says
    so with the provider's name, as a bad request the batch runner reports instead of retrying."""

    name: str

    def submit_batch(self, items: Sequence[tuple[str, LLMRequest]]) -> str:
        raise LLMError(f"message batches are not offered by the {self.name} provider", "bad_request")

    def poll_batch(self, batch_id: str) -> BatchStatus:
        raise LLMError(f"message batches are not offered by the {self.name} provider", "bad_request")

    def batch_results(self, batch_id: str, requests: Mapping[str, LLMRequest], *, workspace: str = DEFAULT_WORKSPACE,
                      run_id: str = "") -> dict[str, LLMResponse | LLMError]:
        raise LLMError(f"message batches are not offered by the {self.name} provider", "bad_request")


def parse_json(text: str, schema: Mapping[str, Any] | None = None) -> Any:
    """The JSON value of a structured reply; tolerates fences, surrounding prose, wrapper keys, truncation and the
    slips of models without the feature (core/models/structured.py); with a schema, also wrapper keys and missing
    arrays. Raises LLMError (kind "error", as callers count it) with the reason otherwise."""
    got = recover_json(text, schema)
    if not got.ok:
        raise LLMError(f"the model did not return valid JSON: {got.failure}")
    return got.data


# -- what a request can cost: the bounds reported usage is checked against -------------------------------------
# Tokens the API may add around the prompt text (message framing; structured output adds its own instructions).
FRAMING_TOKENS = 64
SCHEMA_TOKENS = 512
# Fewer input tokens than one per this many non-blank prompt characters is implausible (no tokenizer's tokens are
# that long on average): a provider reporting ~0 would otherwise let every budget fail open.
MAX_CHARS_PER_TOKEN = 32


def _prompt_text(request: LLMRequest) -> str:
    text = "".join(b.text for b in (*request.system, *request.user))
    if request.tools or request.turns:  # tool definitions and earlier turns are billed input too
        text += json.dumps([*request.tools, *request.turns], default=str)
    return text


def input_token_bound(request: LLMRequest) -> int:
    """At most this many input tokens (cached or not) can a request bill: the caller's own bound when it gave one,
    else a per-script character bound of the prompt (core/text.py) plus the API's framing."""
    own = llm_tokens_upper_bound(_prompt_text(request)) + FRAMING_TOKENS
    if request.json_schema is not None:
        own += llm_tokens_upper_bound(json.dumps(dict(request.json_schema))) + SCHEMA_TOKENS
    return own if request.input_bound is None else min(own, max(0, int(request.input_bound)))


def input_token_floor(request: LLMRequest) -> int:
    """At least this many input tokens does a request bill (a deliberately low floor; see MAX_CHARS_PER_TOKEN)."""
    return sum(not ch.isspace() for ch in _prompt_text(request)) // MAX_CHARS_PER_TOKEN


# -- how long a reply can be (issue #46 item 2): the text is cut at what the request allowed, and the body is never
# read past a bound, so a 60 MB reply to a 150-token request costs neither memory nor the store. Shared by every
# client (cap_reply and reply_byte_cap are plain functions of the request).
REPLY_BYTES_SLACK = 1 << 20  # JSON framing, usage, tool blocks around the text
REPLY_BYTES_PER_TOKEN = 6 * MAX_CHARS_PER_TOKEN  # escaped JSON spends up to 6 bytes on a character


def reply_char_cap(request: LLMRequest) -> int:
    """At most this many characters of reply text can `max_tokens` produce (MAX_CHARS_PER_TOKEN per token)."""
    return max(1, int(request.max_tokens)) * MAX_CHARS_PER_TOKEN


def reply_byte_cap(request: LLMRequest) -> int:
    """At most this many bytes of reply body are read for one request; a longer body is refused (LLMError
    kind "oversized"), not retried."""
    return REPLY_BYTES_SLACK + max(1, int(request.max_tokens)) * REPLY_BYTES_PER_TOKEN


def cap_reply(text: str, request: LLMRequest) -> tuple[str, str]:
    """(text cut at reply_char_cap, the note saying so or "")."""
    cap = reply_char_cap(request)
    if len(text) <= cap:
        return text, ""
    return text[:cap], (f"reply cut at {cap:,} characters (reply_char_cap: max_tokens {request.max_tokens} x "
                        f"{MAX_CHARS_PER_TOKEN}); the provider sent {len(text):,}")


def worst_usd(request: LLMRequest, ttl: Ttl = "5m", *, batch: bool = False) -> float:
    """The most a request can be booked at: every input token of the bound at the dearer of the base and the
    cache-write price, plus the whole output allowance. Validated usage never prices above it, so a budget that
    admits a call by this bound cannot be overshot by that call, whatever the provider reports."""
    p = price_for(request.model)
    mult = max(1.0, p.write_multiplier(ttl)) if request.breakpoints() else 1.0
    return tokens_usd(p, input_tokens=math.ceil(input_token_bound(request) * mult),
                      output_tokens=request.max_tokens, batch=batch)


def _count(value: Any) -> int | None:
    """A token count as the provider reported it, or None when it is missing, not a number, negative or not whole."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


@dataclass(frozen=True)
class _Checked:
    input_tokens: int
    output_tokens: int
    write_5m: int
    write_1h: int
    read: int
    flag: str


def check_usage(usage: Any, request: LLMRequest, text: str, ttl: Ttl) -> _Checked:
    """The provider's usage if it is possible for this request, else our own bound in its place with the reason.
    Output: 0..max_tokens (and at least 1 for a non-empty reply). Input (uncached + cache writes + cache reads):
    between input_token_floor and input_token_bound. Cache writes at the 1-hour price only when the request asked
    for 1-hour caching, cache tokens at all only when the request has a breakpoint. A replaced input side is booked
    as the bound, written to the cache when the request has a breakpoint (the dearest reading); a replaced output as
    the character bound of the reply, at most max_tokens."""
    why: list[str] = []

    def field_(name: str, obj: Any = usage, default_zero: bool = False) -> int | None:
        raw = getattr(obj, name, None) if obj is not None else None
        if raw is None and default_zero:
            return 0
        n = _count(raw)
        if n is None:
            why.append(f"{name}={raw!r:.40}")
        return n

    out = field_("output_tokens")
    if out is not None and (out > request.max_tokens or (text.strip() and out == 0)):
        why.append(f"output_tokens={out} (max_tokens {request.max_tokens})")
        out = None
    if out is None:
        out = min(request.max_tokens, max(1 if text.strip() else 0, llm_tokens_upper_bound(text)))
    bad_out = bool(why)
    inp = field_("input_tokens")
    write = field_("cache_creation_input_tokens", default_zero=True)
    read = field_("cache_read_input_tokens", default_zero=True)
    cc = getattr(usage, "cache_creation", None) if usage is not None else None
    w1h = field_("ephemeral_1h_input_tokens", cc, default_zero=True) if cc is not None else (
        write if ttl == "1h" and write is not None else 0)
    bound, floor = input_token_bound(request), input_token_floor(request)
    sides_ok = None not in (inp, write, read, w1h)
    if sides_ok:
        total = inp + write + read  # type: ignore[operator]
        if total > bound or total < floor:
            why.append(f"input {total:,} tokens outside {floor:,}..{bound:,} for this request")
            sides_ok = False
        elif (write or read) and not request.breakpoints():
            why.append("cache tokens on a request without a cache breakpoint")
            sides_ok = False
        elif w1h > write or (w1h and ttl != "1h"):  # type: ignore[operator]
            why.append(f"1-hour cache writes {w1h:,} on a {ttl} request")
            sides_ok = False
    if not sides_ok:
        cached = bound if request.breakpoints() else 0
        inp, write, read = bound - cached, cached, 0
        w1h = cached if ttl == "1h" else 0
    if not why:
        return _Checked(inp, out, write - w1h, w1h, read, "")  # type: ignore[operator]
    replaced = ("output" if bad_out else "") + (" and " if bad_out and not sides_ok else "") + (
        "input" if not sides_ok else "")
    return _Checked(inp, out, write - w1h, w1h, read,  # type: ignore[operator]
                    redact(f"provider usage implausible ({'; '.join(why)}): {replaced} booked at our own bound"))


# -- the caller's limits: a deadline and dollars every call and retry inside a scope respects ---------------------
@dataclass
class CallLimits:
    """What a caller (the agentic loop, a build) still allows the LLM calls it makes, directly or through stages
    it runs: a wall-clock deadline (time.monotonic) and dollars (each booked call is taken off). A call, or a retry,
    that cannot finish before the deadline or whose worst case does not fit the dollars is not started."""

    deadline: float | None = None
    usd_left: float | None = None
    parent: "CallLimits | None" = None

    def chain(self) -> Iterator["CallLimits"]:
        lim: CallLimits | None = self
        while lim is not None:
            yield lim
            lim = lim.parent

    def earliest(self) -> float | None:
        times = [lim.deadline for lim in self.chain() if lim.deadline is not None]
        return min(times) if times else None

    def usd(self) -> float | None:
        left = [lim.usd_left for lim in self.chain() if lim.usd_left is not None]
        return min(left) if left else None

    def spend(self, usd: float) -> None:
        for lim in self.chain():
            if lim.usd_left is not None:
                lim.usd_left -= usd


_LIMITS: contextvars.ContextVar[CallLimits | None] = contextvars.ContextVar("llm_call_limits", default=None)


@contextmanager
def call_limits(*, deadline: float | None = None, usd: float | None = None) -> Iterator[CallLimits]:
    """Limits for every LLM call made in this block (in this thread), nested inside any outer ones."""
    lim = CallLimits(deadline, usd, _LIMITS.get())
    token = _LIMITS.set(lim)
    try:
        yield lim
    finally:
        _LIMITS.reset(token)


def current_limits() -> CallLimits | None:
    return _LIMITS.get()


# -- the guards every provider's client calls (Anthropic, OpenAI-compatible, in-process GGUF) ----------------------
def reply_text(text: str) -> str:
    """A reply's text as every stage, store and page may see it, whichever provider wrote it: redacted here."""
    return redact(text)


def begin_attempt(what: str, attempt: int, timeout_s: float,
                  worst_case_usd: float | Callable[[], float] | None) -> float:
    """The monotonic deadline of one attempt (its own `timeout_s`, or the caller's deadline if sooner), or LLMError
    when the caller's limits (`call_limits`) leave no time, or fewer dollars than the attempt's worst case."""
    deadline = time.monotonic() + timeout_s
    limits = _LIMITS.get()
    if limits is None:
        return deadline
    if (until := limits.earliest()) is not None:
        if time.monotonic() >= until:
            raise LLMError(f"{what} not {'retried' if attempt else 'started'}: the caller's time budget has run out",
                           "deadline")
        deadline = min(deadline, until)
    left = limits.usd()
    if worst_case_usd is None or left is None:
        return deadline
    worst = worst_case_usd() if callable(worst_case_usd) else worst_case_usd
    if worst > left + 1e-12:
        raise LLMError(f"{what} not {'retried' if attempt else 'started'}: its worst case ${worst:.6f} is "
                       f"above the ${max(left, 0.0):.6f} the caller has left", "budget")
    return deadline


def wait_before_retry(what: str, delay: float, last: Exception, sleep: Callable[[float], None]) -> None:
    """Sleep `delay` before a retry, or LLMError when the caller's deadline would pass during the wait."""
    limits = _LIMITS.get()
    until = limits.earliest() if limits is not None else None
    if until is not None and time.monotonic() + delay >= until:
        raise LLMError(f"{what} failed ({type(last).__name__}) and the caller's time budget leaves no room "
                       "for a retry", "deadline") from None
    sleep(delay)


def retry_after_s(value: Any) -> float | None:
    """A Retry-After header's seconds (non-negative and finite), None when absent or not a number of seconds."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        return None
    return s if math.isfinite(s) and s >= 0 else None


class _DeadlinePassed(Exception):
    """An attempt ran past its total deadline; the worker thread is abandoned (it ends at its next read)."""


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
    """The SDK's Message, or _Malformed when the body did not carry one (the SDK passes odd bodies through). Its
    usage is not judged here: check_usage replaces what is missing or implausible."""
    content = getattr(msg, "content", None)
    if not isinstance(content, list) or (isinstance(msg, str) or not hasattr(msg, "usage")):
        what = "an HTML page" if isinstance(msg, str) and "<" in msg[:200] else (
            "a body without content/usage" if not isinstance(msg, str) else "a non-JSON body")
        raise _Malformed(what)
    return msg


def _http_client(timeout_s: float) -> Any:
    """The SDK's own httpx client with a transport that ends a response body at the attempt's total deadline: a
    server trickling one byte at a time never waits out a per-read timeout again and again."""
    import anthropic
    import httpx2

    class _DeadlineStream(httpx2.SyncByteStream):
        def __init__(self, inner: Any, deadline: float, request: Any) -> None:
            self._inner, self._deadline, self._request = inner, deadline, request

        def __iter__(self) -> Iterator[bytes]:
            cap = _ATTEMPT_BYTES.get()
            seen = 0
            for chunk in self._inner:
                if time.monotonic() > self._deadline:
                    raise httpx2.ReadTimeout("the call's total deadline passed", request=self._request)
                seen += len(chunk)
                if cap is not None and seen > cap[0]:
                    cap[1] = seen  # read by _with_retries: an oversized body is refused, never retried
                    raise httpx2.ReadError(f"reply body over {cap[0]:,} bytes", request=self._request)
                yield chunk

        def close(self) -> None:
            close = getattr(self._inner, "close", None)
            if close is not None:
                close()

    class _DeadlineTransport(httpx2.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.HTTPTransport(limits=anthropic.DEFAULT_CONNECTION_LIMITS)

        def handle_request(self, request: Any) -> Any:
            deadline = _ATTEMPT_DEADLINE.get()
            resp = self._inner.handle_request(request)
            if deadline is None:
                return resp
            return httpx2.Response(resp.status_code, headers=resp.headers, extensions=resp.extensions,
                                   stream=_DeadlineStream(resp.stream, deadline, request))

        def close(self) -> None:
            self._inner.close()

    return anthropic.DefaultHttpxClient(transport=_DeadlineTransport(), timeout=timeout_s)


_ATTEMPT_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("llm_attempt_deadline",
                                                                                 default=None)
# [byte cap, bytes seen when the cap was hit (0: not hit)] of the attempt running in this thread
_ATTEMPT_BYTES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("llm_attempt_bytes", default=None)


def _run_until(fn: Callable[[float], Any], deadline: float, byte_cap: list[int] | None = None) -> Any:
    """fn(seconds left) in a daemon thread, waited for until `deadline` at most: the total deadline holds however
    the server dribbles its bytes (headers included). A late worker is abandoned; its own timeouts end it."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        _ATTEMPT_DEADLINE.set(deadline)
        _ATTEMPT_BYTES.set(byte_cap)
        try:
            box["value"] = fn(max(0.001, deadline - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="llm-call", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise _DeadlinePassed()
    if "error" in box:
        raise box["error"]
    return box["value"]


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
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s,
                                           http_client=_http_client(timeout_s))
        self.timeout_s = timeout_s
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
        asked = _exc_retry_after_s(exc)
        if asked is not None:
            return min(asked, self.backoff_cap_s)
        base = min(self.backoff_cap_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + self._rng.random() / 2)  # jitter: retries of parallel callers do not collide

    def _with_retries(self, what: str, fn: Callable[[float], Any], request: LLMRequest | None = None,
                      *, batch: bool = False) -> Any:
        """fn(timeout) with backoff on retryable failures; every failure leaves as one LLMError (never an SDK or JSON
        exception), and `from None` keeps the SDK exception, which may quote the request, out of tracebacks.
        Each attempt has `timeout_s` in total (connect, send and every read together) and ends at the caller's
        deadline (`call_limits`) if that comes first; an attempt or a retry that the caller's deadline or dollars
        (`call_limits`) cannot hold is not started."""
        a = self._anthropic
        malformed = 0
        for attempt in range(self.max_retries + 1):
            deadline = begin_attempt(what, attempt, self.timeout_s, None if request is None else (
                lambda: worst_usd(request, self.cache_ttl, batch=batch)))
            cap = [reply_byte_cap(request), 0] if request is not None else None
            try:
                return _run_until(fn, deadline, cap)
            except a.APIStatusError as exc:
                if exc.status_code not in _RETRY_STATUS or attempt == self.max_retries:
                    raise LLMError(f"{what} failed: HTTP {exc.status_code} {_short(exc)}",
                                   _status_kind(exc.status_code)) from None
                last: Exception = exc
            except (a.APIConnectionError, _DeadlinePassed) as exc:  # includes APITimeoutError
                if cap is not None and cap[1]:
                    raise LLMError(f"{what}: the reply body ran over {cap[0]:,} bytes (reply_byte_cap for max_tokens "
                                   f"{request.max_tokens if request is not None else '?'}); not read further, not "
                                   "retried", "oversized") from None
                timeout = isinstance(exc, (a.APITimeoutError, _DeadlinePassed))
                if attempt == self.max_retries:
                    raise LLMError(f"{what} {'timed out' if timeout else 'could not connect'} after {attempt + 1} "
                                   f"attempts of at most {self.timeout_s:g} s each",
                                   "timeout" if timeout else "connection") from None
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
                raise LLMError(f"{what} failed ({type(exc).__name__}: {redact(str(exc))[:200]})", "error") from None
            limits = current_limits()
            asked = _exc_retry_after_s(last)
            until = limits.earliest() if limits is not None else None
            if asked is not None and (asked > self.backoff_cap_s or (until is not None
                                                                     and time.monotonic() + asked >= until)):
                # The server says when to come back; past what this client waits (or the caller's deadline) a
                # capped retry only burns the time: fail now, so the caller falls back at once (issue #46 item 10).
                code = getattr(last, "status_code", None)
                raise LLMError(f"{what} failed (HTTP {code}): the server asks to retry after {asked:g} s, beyond "
                               + (f"the caller's deadline ({max(0.0, until - time.monotonic()):.1f} s left)"
                                  if until is not None and time.monotonic() + asked >= until
                                  else f"the {self.backoff_cap_s:g} s this client waits"),
                               _status_kind(code) if isinstance(code, int) else "rate_limit") from None
            wait_before_retry(what, self._delay(attempt, last), last, self._sleep)
            self.retries += 1
        raise LLMError(f"{what} failed")  # unreachable: the loop returns or raises

    # -- one call -----------------------------------------------------------------------------------------------
    def complete(self, request: LLMRequest, *, workspace: str = DEFAULT_WORKSPACE, run_id: str = "") -> LLMResponse:
        params = request.params(self.cache_ttl)
        start = time.perf_counter()
        msg = self._with_retries(f"{request.purpose} call to {request.model}",
                                 lambda t: _checked_message(self._client.messages.create(**params, timeout=t)),
                                 request)
        ms = (time.perf_counter() - start) * 1000
        resp = self._response(msg, request, ms, batch=False)
        self._record(resp, request, workspace, run_id, batch=False)
        if (limits := _LIMITS.get()) is not None:
            limits.spend(resp.usage.usd)
        return resp

    def count_tokens(self, request: LLMRequest) -> int:
        """Input tokens of a request by the provider's own counter (free, rate-limited): budgets bound spend with it."""
        params = {k: v for k, v in request.params(self.cache_ttl).items() if k in ("model", "system", "messages")}
        res = self._with_retries(f"token count for {request.model}",
                                 lambda t: self._client.messages.count_tokens(**params, timeout=t))
        n = _count(getattr(res, "input_tokens", None))
        if n is None:
            raise LLMError(f"token count for {request.model}: the API answered without input_tokens", "malformed")
        # A count outside what the prompt could be is not believed: budgets would be checked against it.
        bound = input_token_bound(replace(request, input_bound=None, json_schema=None))
        if not input_token_floor(request) <= n <= bound:
            raise LLMError(f"token count for {request.model}: {n:,} is outside what the prompt could be "
                           f"(at most {bound:,})", "malformed")
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
        # Redacted here, once, before anything else reads the reply: text, tool input, structured data, model name.
        # Redacted whole, then cut (a cut key would escape the pattern); the body itself was bounded on the wire.
        text, cut = cap_reply(reply_text("".join(str(getattr(b, "text", "") or "") for b in msg.content
                                             if getattr(b, "type", "") == "text")), request)
        tool_inputs = [redact_value(getattr(b, "input", None)) for b in msg.content
                       if getattr(b, "type", "") == "tool_use"]
        model = redact(msg.model) if isinstance(msg.model, str) and msg.model else request.model
        u = check_usage(getattr(msg, "usage", None), request,
                        text + json.dumps(tool_inputs, default=str) if tool_inputs else text, self.cache_ttl)
        # Priced as the model asked for: a reply naming a cheaper model does not make the call cheaper.
        p = price_for(request.model)
        usd = (tokens_usd(p, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                          cache_write_tokens=u.write_5m, cache_read_tokens=u.read, batch=batch)
               + tokens_usd(p, cache_write_tokens=u.write_1h, ttl="1h", batch=batch))
        write = u.write_5m + u.write_1h
        usage = Usage(u.input_tokens, u.output_tokens, write, u.read, usd, 1, (f"{self.name}:{model}",))
        notes = [u.flag] if u.flag else []
        if cut:
            notes.append(cut)
        if request.breakpoints() and not write and not u.read:
            notes.append(f"no prompt cache: the prefix is probably below the {p.min_cacheable_tokens:,}-token "
                         f"minimum of {model}")
        data = None
        if request.json_schema is not None:
            data = redact_value(parse_json(text)) if text.strip() or not tool_inputs else tool_inputs[0]
        uses = [b for b in msg.content if getattr(b, "type", "") == "tool_use"]
        calls = tuple(ToolCall(redact(str(getattr(b, "id", "") or ""))[:100],
                               redact(str(getattr(b, "name", "") or ""))[:100], inp)
                      for b, inp in zip(uses, tool_inputs)) if request.tools else ()
        return LLMResponse(text, model, usage, ms, data, uncached_usd(usage, request.model, batch=batch),
                           redact(str(msg.stop_reason or "")), "; ".join(notes), u.flag, calls)

    def _record(self, resp: LLMResponse, request: LLMRequest, workspace: str, run_id: str, *, batch: bool) -> None:
        if self.ledger is None:
            return
        u = resp.usage
        self.ledger.record_usage(LedgerEntry(
            request.purpose, resp.model, u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens,
            u.usd, resp.usd_uncached, resp.ms, request.ref_id, run_id, batch, self.cache_ttl, resp.cache_note,
            workspace, resp.usage_flag, provider=self.name,
        ))

    # -- Message Batches (-50 %) ---------------------------------------------------------------------------------
    def submit_batch(self, items: Sequence[tuple[str, LLMRequest]]) -> str:
        reqs = [{"custom_id": cid, "params": r.params(self.cache_ttl)} for cid, r in items]
        batch = self._with_retries("batch submit",
                                   lambda t: self._client.messages.batches.create(requests=reqs, timeout=t))
        return redact(str(batch.id))

    def poll_batch(self, batch_id: str) -> BatchStatus:
        b = self._with_retries("batch status",
                               lambda t: self._client.messages.batches.retrieve(batch_id, timeout=t))
        try:
            counts = b.request_counts
            return BatchStatus(redact(str(b.id)), redact(str(b.processing_status)), {k: int(getattr(counts, k)) for k in
                                                           ("processing", "succeeded", "errored", "canceled",
                                                            "expired")})
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMError(f"batch status of {batch_id}: malformed reply ({type(exc).__name__})", "malformed") from None

    def batch_results(self, batch_id: str, requests: Mapping[str, LLMRequest], *, workspace: str = DEFAULT_WORKSPACE,
                      run_id: str = "") -> dict[str, LLMResponse | LLMError]:
        """Results of an ended batch by custom id; each success is priced at the batch rate and ledgered."""
        out: dict[str, LLMResponse | LLMError] = {}
        lines = self._with_retries("batch results",
                                   lambda t: list(self._client.messages.batches.results(batch_id, timeout=t)))
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


def _exc_retry_after_s(exc: Exception) -> float | None:
    """The seconds a failed call's `retry-after` header asks for (None: no header, or not a number of seconds)."""
    response = getattr(exc, "response", None)
    return retry_after_s(response.headers.get("retry-after")) if response is not None else None


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
