"""Query traces as OpenTelemetry spans in the OpenInference conventions: OTLP/JSON, OTLP/protobuf over HTTP, or the
workbench's own trace JSON. One root CHAIN span per query and one child span per stage that ran, in pipeline order
(each carries its position; a skipped stage is an event on the root span, with its reason), candidate lists
flattened as `retrieval.documents.{i}.document.*` (RETRIEVER) or `reranker.{input,output}_documents.{i}.document.*`
(RERANKER), so Phoenix and other OpenInference viewers show them.

The spans are built here and encoded with the OTLP protobuf classes directly rather than through the OpenTelemetry
SDK: the SDK keeps at most 128 attributes per span by default and drops the rest without a word, and a stage with
100 candidates carries 400+. Every attribute we build is encoded; nothing is sampled, batched or dropped."""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from core.text import redact

AttrValue = str | int | float | bool
SERVICE_NAME = "rag-workbench"
SCOPE_NAME = "core.app.trace_export"

# Stage name -> OpenInference span kind. Stages that hand on a reordered or trimmed list of what the stage before
# them gave are rerankers (input and output documents); the first lists of a query are retrievers.
RETRIEVERS = frozenset({"bm25", "dense", "graph_local", "graph_global", "fused", "expand"})
RERANKERS = frozenset({"rerank", "prune", "mmr"})

# What an API key or a bearer token looks like; they are replaced before anything leaves the tool.
_SECRET_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\b(api[_-]?key|x-api-key|authorization|bearer)(\s*[:=]\s*|\s+)[A-Za-z0-9_\-.]{12,}"),
)
REDACTED = "[redacted]"


class ExportError(RuntimeError):
    """An export that could not be delivered; the message is fit for the user."""


@dataclass(frozen=True)
class SpanRecord:
    """One span, encoding-neutral. Ids are lower-case hex (32 for the trace, 16 for spans)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    error: str | None = None
    events: tuple["SpanEvent", ...] = ()


@dataclass(frozen=True)
class SpanEvent:
    """A point in time on a span: a stage that was skipped, with its reason (a 0 ms span per skipped stage cluttered
    a viewer's tree, and Phoenix drew them as if they ran)."""

    name: str
    time_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)


def redactor(extra_secrets: Sequence[str] = ()) -> Any:
    """A function that blanks API keys out of a string: the keys core.text knows (registered at start-up), the
    given secret values (e.g. ANTHROPIC_API_KEY's), and anything shaped like a key or a bearer token."""
    secrets = sorted((s for s in extra_secrets if s and len(s) >= 8), key=len, reverse=True)

    def clean(text: str) -> str:
        for s in secrets:
            text = text.replace(s, REDACTED)
        for p in _SECRET_PATTERNS:
            text = p.sub(REDACTED, text)
        return redact(text)

    return clean


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if k.endswith(("_API_KEY", "_TOKEN", "_SECRET")) and v]


def _hex_id(seed: str, nbytes: int) -> str:
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[: nbytes * 2]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _doc_attrs(prefix: str, candidates: Sequence[Mapping[str, Any]], clean: Any) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for i, c in enumerate(candidates):
        p = f"{prefix}.{i}.document"
        out[f"{p}.id"] = clean(str(c.get("chunk_id", "")))
        out[f"{p}.score"] = float(c.get("score", 0.0))
        out[f"{p}.content"] = clean(str(c.get("text", "")))
        meta = {k: v for k, v in c.items() if k not in ("chunk_id", "score", "text")}
        out[f"{p}.metadata"] = clean(_json(meta))
    return out


def _kind(stage: Mapping[str, Any]) -> str:
    name = stage.get("stage", "")
    if name == "answer":
        return "LLM" if (stage.get("info") or {}).get("mode") == "llm" else "CHAIN"
    if name in RERANKERS:
        return "RERANKER"
    # any other stage that lists candidates (query transforms, agent rounds) is a retriever, so its list is exported
    if name in RETRIEVERS or stage.get("candidates"):
        return "RETRIEVER"
    return "CHAIN"


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
        return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return None


def spans_from_trace(trace: Mapping[str, Any], *, run_id: str, ended_at: datetime | str | None = None,
                     extra_secrets: Sequence[str] | None = None) -> list[SpanRecord]:
    """Spans of one logged query (the dict Trace.to_dict() writes, which the run log holds). Stages carry only
    durations, so they are laid end to end, ending at `ended_at` (when the run was logged; now if unknown). Ids
    derive from run_id, so exporting the same run twice gives the same spans (receivers de-duplicate)."""
    clean = redactor(_env_secrets() if extra_secrets is None else extra_secrets)
    end = _parse_time(ended_at) or datetime.now(timezone.utc)
    stages = list(trace.get("stages") or [])
    total_ns = sum(int(round(float(s.get("ms") or 0.0) * 1e6)) for s in stages)
    end_ns = int(end.timestamp() * 1e9)
    start_ns = end_ns - total_ns
    trace_id = _hex_id(f"trace:{run_id}", 16)
    root_id = _hex_id(f"root:{run_id}", 8)
    query = clean(str(trace.get("query", "")))
    answer = trace.get("answer") or None
    root: dict[str, AttrValue] = {
        "openinference.span.kind": "CHAIN",
        "input.value": query, "input.mime_type": "text/plain",
        "metadata": clean(_json({k: trace.get(k) for k in ("config_hash", "corpus_version", "workspace",
                                                             "query_lang", "notes") if k in trace})),
        "rag_workbench.run_id": run_id,
    }
    if answer:
        root["output.value"] = clean(str(answer.get("text", "")))
        root["output.mime_type"] = "text/plain"
    usage = trace.get("usage") or {}
    if usage.get("calls"):
        root["llm.token_count.prompt"] = int(usage.get("input_tokens", 0))
        root["llm.token_count.completion"] = int(usage.get("output_tokens", 0))
        root["llm.token_count.total"] = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    spans = [SpanRecord(trace_id, root_id, None, "query", start_ns, end_ns, root)]
    events: list[SpanEvent] = []

    t = start_ns
    previous: list[Mapping[str, Any]] = []
    for i, s in enumerate(stages):
        dur = int(round(float(s.get("ms") or 0.0) * 1e6))
        name = str(s.get("stage", f"stage{i}"))
        if s.get("skipped"):  # an event on the query's span, in pipeline order, not a span of its own
            events.append(SpanEvent(f"skipped: {name}", t, {
                "rag_workbench.stage": name, "rag_workbench.skipped": clean(str(s.get("skip_reason") or "skipped")),
                "rag_workbench.position": i}))
            t += dur
            continue
        kind = _kind(s)
        cands = list(s.get("candidates") or [])
        attrs: dict[str, AttrValue] = {"openinference.span.kind": kind, "input.value": query,
                                       "input.mime_type": "text/plain"}
        meta = {"ms": s.get("ms"), "info": s.get("info") or {}, "notes": list(s.get("notes") or []),
                "usage": s.get("usage") or {}}
        attrs["rag_workbench.position"] = i  # the stage's place in the pipeline (viewers may sort by time)
        attrs["metadata"] = clean(_json(meta))
        if kind == "RETRIEVER":
            attrs.update(_doc_attrs("retrieval.documents", cands, clean))
        elif kind == "RERANKER":
            info = s.get("info") or {}
            attrs["reranker.query"] = query
            if info.get("reranker"):
                attrs["reranker.model_name"] = clean(str(info["reranker"]))
            attrs["reranker.top_k"] = len(cands)
            attrs.update(_doc_attrs("reranker.input_documents", previous, clean))
            attrs.update(_doc_attrs("reranker.output_documents", cands, clean))
        elif name == "answer" and answer:
            attrs["output.value"] = clean(str(answer.get("text", "")))
            attrs["output.mime_type"] = "text/plain"
            u = s.get("usage") or {}
            if kind == "LLM":
                attrs["llm.token_count.prompt"] = int(u.get("input_tokens", 0))
                attrs["llm.token_count.completion"] = int(u.get("output_tokens", 0))
                attrs["llm.token_count.total"] = int(u.get("input_tokens", 0)) + int(u.get("output_tokens", 0))
        spans.append(SpanRecord(trace_id, _hex_id(f"stage:{run_id}:{i}:{name}", 8), root_id, name, t, t + dur,
                                attrs))
        t += dur
        if cands:
            previous = cands
    if events:
        root["rag_workbench.skipped_stages"] = _json([e.attributes["rag_workbench.stage"] for e in events])
        spans[0] = SpanRecord(trace_id, root_id, None, "query", start_ns, end_ns, root, events=tuple(events))
    return spans


# -- encodings ----------------------------------------------------------------------------------------------------
def _json_value(v: AttrValue) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # OTLP/JSON writes 64-bit integers as strings
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def otlp_json(spans: Sequence[SpanRecord], *, service_name: str = SERVICE_NAME) -> dict[str, Any]:
    """The OTLP/JSON body (ExportTraceServiceRequest): hex ids, integers as strings, as the spec requires."""
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service_name}}]},
        "scopeSpans": [{"scope": {"name": SCOPE_NAME}, "spans": [{
            "traceId": s.trace_id, "spanId": s.span_id, **({"parentSpanId": s.parent_id} if s.parent_id else {}),
            "name": s.name, "kind": 1,  # SPAN_KIND_INTERNAL
            "startTimeUnixNano": str(s.start_ns), "endTimeUnixNano": str(s.end_ns),
            "attributes": [{"key": k, "value": _json_value(v)} for k, v in s.attributes.items()],
            "status": {"code": 2, "message": s.error} if s.error else {},
            **({"events": [{"timeUnixNano": str(e.time_ns), "name": e.name,
                            "attributes": [{"key": k, "value": _json_value(v)} for k, v in e.attributes.items()]}
                           for e in s.events]} if s.events else {}),
        } for s in spans]}],
    }]}


def otlp_protobuf(spans: Sequence[SpanRecord], *, service_name: str = SERVICE_NAME) -> bytes:
    """The OTLP/protobuf body every OTLP/HTTP receiver accepts (Phoenix, the Collector, Jaeger, Tempo)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    def value(v: AttrValue) -> AnyValue:
        if isinstance(v, bool):
            return AnyValue(bool_value=v)
        if isinstance(v, int):
            return AnyValue(int_value=v)
        if isinstance(v, float):
            return AnyValue(double_value=v)
        return AnyValue(string_value=str(v))

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value=service_name)))
    ss = rs.scope_spans.add()
    ss.scope.name = SCOPE_NAME
    for s in spans:
        sp = ss.spans.add()
        sp.trace_id = bytes.fromhex(s.trace_id)
        sp.span_id = bytes.fromhex(s.span_id)
        if s.parent_id:
            sp.parent_span_id = bytes.fromhex(s.parent_id)
        sp.name = s.name
        sp.kind = Span.SpanKind.SPAN_KIND_INTERNAL
        sp.start_time_unix_nano = s.start_ns
        sp.end_time_unix_nano = s.end_ns
        sp.attributes.extend(KeyValue(key=k, value=value(v)) for k, v in s.attributes.items())
        if s.error:
            sp.status.code = Status.StatusCode.STATUS_CODE_ERROR
            sp.status.message = s.error
        for e in s.events:
            ev = sp.events.add()
            ev.time_unix_nano = e.time_ns
            ev.name = e.name
            ev.attributes.extend(KeyValue(key=k, value=value(v)) for k, v in e.attributes.items())
    return req.SerializeToString()


def traces_endpoint(url: str) -> str:
    """A base URL (http://host:6006) gets the OTLP traces path; a full .../v1/traces URL is kept."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ExportError(f"the endpoint must be an http(s) URL such as http://127.0.0.1:6006/v1/traces, got {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def post_otlp(spans: Sequence[SpanRecord], endpoint: str, *, protocol: str = "http/protobuf", timeout: float = 10.0,
              headers: Mapping[str, str] | None = None) -> int:
    """POST the spans to an OTLP/HTTP receiver; returns the HTTP status. Raises ExportError (never hangs past
    `timeout`) when the receiver cannot be reached or refuses the data."""
    url = traces_endpoint(endpoint)
    if protocol == "http/json":
        body, ctype = json.dumps(otlp_json(spans)).encode("utf-8"), "application/json"
    elif protocol == "http/protobuf":
        body, ctype = otlp_protobuf(spans), "application/x-protobuf"
    else:
        raise ExportError(f"unknown OTLP protocol {protocol!r}: use http/protobuf or http/json")
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own endpoint
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        hint = ""
        if exc.code == 415 and protocol == "http/json":  # Phoenix, for one, takes OTLP over HTTP as protobuf only
            hint = ("; this receiver does not take OTLP/JSON: send protobuf instead (--protocol http/protobuf, "
                    "the default)")
        elif exc.code == 415:
            hint = "; this receiver does not take OTLP/protobuf: try --protocol http/json"
        raise ExportError(f"{url} refused the spans: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ExportError(f"could not reach {url}: {reason}") from None


def runs_to_spans(runs: Sequence[Any], *, extra_secrets: Sequence[str] | None = None) -> list[SpanRecord]:
    """Spans of run-log records (core.types.RunRecord: run_id, trace dict, created_at)."""
    out: list[SpanRecord] = []
    for r in runs:
        out.extend(spans_from_trace(r.trace, run_id=r.run_id, ended_at=r.created_at, extra_secrets=extra_secrets))
    return out


def trace_json(trace: Mapping[str, Any], *, extra_secrets: Sequence[str] | None = None) -> dict[str, Any]:
    """The workbench's own trace JSON with secrets blanked: what the Search Lab's download button offers."""
    clean = redactor(_env_secrets() if extra_secrets is None else extra_secrets)
    return json.loads(clean(json.dumps(trace, ensure_ascii=False, default=str)))


def download_bytes(trace: Mapping[str, Any], *, run_id: str | None = None, fmt: str = "otlp-json") -> bytes:
    """One query's trace (Trace.to_dict()) as a file for st.download_button: 'otlp-json' (importable by OTLP tools)
    or 'json'. Without a run-log id, the ids derive from query, config hash and corpus version."""
    if run_id is None:
        run_id = _hex_id(_json([trace.get("query"), trace.get("config_hash"), trace.get("corpus_version")]), 16)
    if fmt == "json":
        return json.dumps(trace_json(trace), ensure_ascii=False, indent=2, default=str).encode("utf-8")
    return json.dumps(otlp_json(spans_from_trace(trace, run_id=run_id)), ensure_ascii=False, indent=2).encode("utf-8")


def cli_export(store: Any, args: Any) -> int:
    """`python -m core trace export`: the last N logged queries, printed/written, and POSTed when --endpoint is
    given. Returns the process exit code; errors are one line on stderr."""
    if args.last < 1:
        print("error: --last must be at least 1", file=sys.stderr)
        return 2
    runs = store.runs.recent_runs(args.workspace, limit=args.last)
    if not runs:
        print(f"error: no logged queries in workspace {args.workspace!r} of {store.path}: run a query first",
              file=sys.stderr)
        return 1
    runs = list(reversed(runs))  # oldest first, as they happened
    spans = runs_to_spans(runs)
    if args.endpoint:
        try:
            status = post_otlp(spans, args.endpoint, protocol=args.protocol)
        except ExportError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"sent {len(runs)} trace(s), {len(spans)} spans to {traces_endpoint(args.endpoint)} "
              f"({args.protocol}): HTTP {status}", file=sys.stderr)
        if not args.out:
            return 0
    if args.format == "json":
        payload: Any = [{"run_id": r.run_id, "created_at": str(r.created_at), "trace": trace_json(r.trace)}
                        for r in runs]
    else:
        payload = otlp_json(spans)
    text = json.dumps(payload, ensure_ascii=False, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {len(runs)} trace(s) to {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0
