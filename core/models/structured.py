"""Structured output from models that do not hold to a schema (small local models, servers without constrained
decoding): the JSON value inside a reply, recovered when it is wrapped in a code fence, followed or preceded by
prose, nested under a wrapper key, cut off mid-object or written with a few common slips, and otherwise a failure
with a reason a caller can count and show. Every repair is named, so a recovered reply is never silent.

recover_json never invents content: a truncated object is closed at its last complete value, a wrapper is removed
only when what it wraps has the schema's required keys, and an empty reply is a failure, not an empty object.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

# A reply larger than this is not searched for JSON (a hostile or runaway reply would cost quadratic scans).
MAX_REPLY_CHARS = 200_000
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|js|javascript)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.S)
_WRAPPERS = ("result", "results", "data", "output", "response", "answer", "json", "reply", "content")


@dataclass(frozen=True)
class Recovered:
    """What recover_json found: the value (None on failure), the repairs it took, and why it failed."""

    data: Any = None
    repairs: tuple[str, ...] = ()
    failure: str = ""

    @property
    def ok(self) -> bool:
        return not self.failure


def _required(schema: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    req = schema.get("required")
    return [str(k) for k in req] if isinstance(req, list) else []


def _expects_object(schema: Mapping[str, Any] | None) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "object"


def _close_truncated(text: str) -> str | None:
    """`text` (starting at '{' or '[') cut at its last complete value and closed; None when nothing complete."""
    stack: list[str] = []
    in_str = esc = False
    last_ok = -1  # index after the last complete value at any depth, with the stack at that point
    last_stack: list[str] = []
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                break
            stack.pop()
            last_ok, last_stack = i + 1, list(stack)
            if not stack:
                return text[:i + 1]
        elif ch == ",":
            last_ok, last_stack = i, list(stack)
    if last_ok < 0:
        return None
    head = text[:last_ok].rstrip().rstrip(",")
    # An object cut after a key ("a": ) or inside a key: drop back to the last comma or opening brace.
    while head and head[-1] == ":":
        cut = max(head.rfind(","), head.rfind("{"))
        head = head[:cut + 1] if cut >= 0 and head[cut] == "{" else head[:cut]
    return head + "".join(reversed(last_stack))


def _slips(text: str) -> tuple[str, list[str]]:
    """Common non-JSON slips fixed outside strings: trailing commas, Python literals, single-quoted strings."""
    fixes: list[str] = []
    out = re.sub(r",(\s*[}\]])", r"\1", text)
    if out != text:
        fixes.append("trailing comma")
    py = re.sub(r"\bNone\b", "null", re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", out)))
    if py != out:
        fixes.append("Python literals")
        out = py
    if "'" in out and '"' not in out:
        out = out.replace("'", '"')
        fixes.append("single quotes")
    return out, fixes


def _loads(text: str) -> tuple[Any, list[str]] | None:
    try:
        return json.loads(text), []
    except (json.JSONDecodeError, RecursionError):
        pass
    fixed, fixes = _slips(text)
    if fixes:
        try:
            return json.loads(fixed), fixes
        except (json.JSONDecodeError, RecursionError):
            pass
    return None


def _first_value(text: str, want_object: bool) -> tuple[Any, list[str]] | None:
    """The first decodable JSON object (or array) that starts somewhere in `text`, with the repairs it took."""
    dec = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[{\[]", text)]
    if want_object:
        starts = [s for s in starts if text[s] == "{"] + [s for s in starts if text[s] == "["]
    for i, s in enumerate(starts[:200]):
        try:
            value, end = dec.raw_decode(text, s)
        except (json.JSONDecodeError, RecursionError):
            pass
        else:
            return value, (["surrounding prose"] if text[:s].strip() or text[end:].strip() else [])
        # Slips or a cut-off reply, from this bracket on; an inner bracket is tried only when this one gives nothing
        # (for the first few brackets only: each try reads the rest of the reply).
        if i >= 8:
            continue
        tail = text[s:]
        end = tail.rfind("}" if tail[0] == "{" else "]")
        if end > 0:
            got = _loads(tail[:end + 1])
            if got is not None:
                return got[0], got[1] + (["surrounding prose"] if text[:s].strip() or tail[end + 1:].strip() else [])
        closed = _close_truncated(tail) if len(tail) <= MAX_REPLY_CHARS else None
        if closed is not None and len(closed) < len(tail.rstrip()):
            got = _loads(closed)
            if got is not None:
                return got[0], got[1] + ["truncated reply closed"] + (["surrounding prose"] if text[:s].strip()
                                                                       else [])
    return None


def _find(value: Any, req: list[str], depth: int) -> tuple[Any, list[str]] | None:
    """The nearest object under `value` (a wrapper key or the first item of a list, at most `depth` levels down)
    holding every required key, with the path taken."""
    if isinstance(value, dict) and all(k in value for k in req):
        return value, []
    if depth == 0:
        return None
    if isinstance(value, list):
        if value and isinstance(value[0], (dict, list)):
            got = _find(value[0], req, depth - 1)
            if got is not None:
                return got[0], ["object inside a list"] + got[1]
        return None
    if not isinstance(value, dict):
        return None
    keys = sorted((k for k, v in value.items() if isinstance(v, (dict, list))),
                  key=lambda k: (str(k).lower() not in _WRAPPERS,))
    for k in keys:
        got = _find(value[k], req, depth - 1)
        if got is not None:
            return got[0], [f"wrapper key {str(k)[:40]!r}"] + got[1]
    return None


def _unwrap(value: Any, schema: Mapping[str, Any] | None) -> tuple[Any, list[str]]:
    """A value whose schema's required keys sit lower down (under "result", "data" or another key, or as the first
    item of a list) is taken from there; a value that has one of them already is left as it is."""
    if not _expects_object(schema):
        return value, []
    req = _required(schema)
    if isinstance(value, dict) and (not req or any(k in value for k in req)):
        return value, []
    if isinstance(value, list) and not req and value and isinstance(value[0], dict):
        return value[0], ["object inside a list"]
    got = _find(value, req, 3) if req else None
    return (value, []) if got is None else got


def _fill_empty(value: Any, schema: Mapping[str, Any] | None) -> tuple[Any, list[str]]:
    """Required keys missing or null in an object reply: arrays become [] and strings "" (named as repairs, so
    the caller sees the model left them out); other types stay missing and the reply fails."""
    if not isinstance(value, dict) or not isinstance(schema, Mapping) or not any(k in value for k in _required(schema)):
        return value, []
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    fixes: list[str] = []
    out = dict(value)
    for key in _required(schema):
        if out.get(key) is not None:
            continue
        kind = (props.get(key) or {}).get("type") if isinstance(props.get(key), Mapping) else None
        if kind == "array":
            out[key] = []
        elif kind == "string":
            out[key] = ""
        else:
            continue
        fixes.append(f"empty field {key[:40]!r}")
    return out, fixes


def recover_json(text: Any, schema: Mapping[str, Any] | None = None) -> Recovered:
    """The JSON value of a model's reply, repaired where that is safe, or a failure with its reason."""
    if not isinstance(text, str):
        return Recovered(failure=f"reply is not text ({type(text).__name__})")
    if len(text) > MAX_REPLY_CHARS:
        return Recovered(failure=f"reply of {len(text):,} characters is above the {MAX_REPLY_CHARS:,} searched")
    body = text.strip().lstrip("\ufeff")
    if not body:
        return Recovered(failure="empty reply")
    repairs: list[str] = []
    got = _loads(body)
    if got is None:
        fences = [m.group(1).strip() for m in _FENCE.finditer(body)]
        for inner in fences:
            got = _loads(inner) or _first_value(inner, _expects_object(schema))
            if got is not None:
                got = (got[0], ["code fence"] + got[1])
                break
    if got is None:
        got = _first_value(body, _expects_object(schema))
    if got is None:
        return Recovered(failure=f"no JSON value in the reply ({_preview(body)})")
    value, fixes = got
    repairs += fixes
    value, fixes = _unwrap(value, schema)
    repairs += fixes
    if isinstance(value, str) and _expects_object(schema):  # JSON encoded twice
        again = _loads(value.strip())
        if again is not None and isinstance(again[0], dict):
            value = again[0]
            repairs.append("JSON inside a string")
    value, fixes = _fill_empty(value, schema)
    repairs += fixes
    if _expects_object(schema):
        if not isinstance(value, dict):
            return Recovered(failure=f"reply is a JSON {type(value).__name__}, not an object ({_preview(body)})",
                             repairs=tuple(repairs))
        missing = [k for k in _required(schema) if k not in value]
        if missing:
            return Recovered(failure=f"reply lacks required key(s) {', '.join(missing)[:120]} ({_preview(body)})",
                             repairs=tuple(repairs))
    return Recovered(value, tuple(dict.fromkeys(repairs)))


def _preview(text: str) -> str:
    return repr(text[:80]) + ("..." if len(text) > 80 else "")
