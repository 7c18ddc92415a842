"""The Search Lab's answer box: the answer at the top of the results, with its citations, refusal reason, route,
stop reason and, when the answer cache served it, the question it was stored for, its similarity and age."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.app.counters import served_from_cache
from core.types import Trace
from pages._widgets import citation_labels, esc

MODE_LABEL = {"llm": "answer (Claude)", "extractive": "answer (extractive, offline: sentences copied, not generated)",
              "route": "reply of the route (no search)", "cag": "answer (Claude, whole corpus in the prompt)"}

BOX_CSS = """<style>
.ab{border:1px solid rgba(128,128,128,.45);border-radius:6px;padding:3px 8px;font-size:13px;line-height:1.35}
.ab.ab-refused{border-color:rgba(21,101,192,.55);background:rgba(21,101,192,.05)}
.ab-head{display:flex;flex-wrap:wrap;gap:2px 6px;align-items:baseline}
.ab-chip{font-size:11px;padding:0 6px;border-radius:8px;background:rgba(128,128,128,.16);overflow-wrap:anywhere}
.ab-chip.ab-cache{background:rgba(255,170,0,.25)}
.ab-text{white-space:pre-wrap;overflow-wrap:anywhere;max-height:5.5em;overflow-y:auto;margin:2px 0}
.ab-small{font-size:11.5px;opacity:.8;overflow-wrap:anywhere;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
</style>"""


def age_text(stored_at: str | None, now: datetime | None = None) -> str:
    """How long ago an ISO time (UTC, as the store writes it) was: '12 s', '5 min', '3 h', '2 days'."""
    if not stored_at:
        return "unknown age"
    try:
        then = datetime.fromisoformat(stored_at)
    except ValueError:
        return "unknown age"
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    s = max(0.0, (now - then.replace(tzinfo=None)).total_seconds())
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 90 * 60:
        return f"{s / 60:.0f} min ago"
    if s < 36 * 3600:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


cache_hit = served_from_cache  # the answer-cache stage's record when it served this trace's answer, else None


def route_text(trace: Trace) -> str:
    r = trace.route_info()
    if r is None:
        s = trace.stage("route")
        return f"route: skipped ({s.skipped})" if s is not None and s.skipped else "route: none"
    name = "default pipeline" if r.config == "abstain" else r.config
    return f"route: {name} ({r.method}, {r.confidence:.2f})"


def stop_text(trace: Trace) -> str:
    """Why the run ended: the agentic loop's stop reason, else a single pass that answered or refused (and, for the
    offline answer, its support against the refusal cut)."""
    if trace.agent is not None:
        return f"stop: {trace.agent.stop_reason or '?'} after {trace.agent.rounds} round(s)"
    a, info = trace.answer, trace.answer_info()
    if a is None:
        return "stop: no answer stage"
    out = "stop: single pass, " + ("refused" if a.refused else "answered")
    if info is not None and info.support is not None and info.threshold is not None:
        below = info.support < info.threshold
        # a refusal above the cut was refused for another reason (a negated question nothing negates): the answer
        # text says which, and the chip does not claim the support was below the cut
        out += f" (support {info.support:.2f} {'<' if below else '≥'} cut {info.threshold:.2f}" + (
            f", {info.threshold_from}" if info.threshold_from else "") + (
            "; refused for the reason the answer gives" if a.refused and not below else "") + ")"
    return out


def box_html(trace: Trace, *, cites: Sequence[str] = (), now: datetime | None = None) -> str:
    """The answer box as HTML: label and chips on one line, the answer (scrolls past five lines), citations.
    Every string from the corpus, the query or the cache is escaped."""
    a = trace.answer
    assert a is not None
    label = "refused" if a.refused else MODE_LABEL.get(a.mode, f"answer ({a.mode})")
    chips = [route_text(trace), stop_text(trace)]
    head = f"<b>{esc(label)}</b>" + "".join(f"<span class='ab-chip'>{esc(c)}</span>" for c in chips)
    hit = cache_hit(trace)
    if hit is not None:
        cos = hit.cosine
        head += (f"<span class='ab-chip ab-cache' data-cached='1'>served from cache · question “"
                 f"{esc(hit.nearest_question or '?')}” · similarity {esc(f'{cos:.2f}' if cos is not None else '?')}"
                 f" · stored {esc(age_text(hit.stored_at, now))}</span>")
    text = a.text or ("The corpus does not say." if a.refused else "")
    # Inline, a citation is its number in the citation line ('[1]'), not a 26-character chunk id that breaks up the
    # sentence; sentences from two documents (a draft and a final policy, say) name theirs inline, so a reader sees
    # which sentence comes from which version: '[1 · policy_final.md]'.
    named = {c.split(" (", 1)[0]: c.split(" (", 1)[1][:-1] for c in cites if " (" in c and c.endswith(")")}
    many = len(set(named.values())) > 1
    for n, c in enumerate(cites, 1):
        cid = c.split(" (", 1)[0]
        # no-break spaces: a marker does not wrap between its number and its document
        text = text.replace(f"[{cid}]", f"[{n}\u00a0·\u00a0{named[cid]}]" if many and cid in named else f"[{n}]")
    cls = "ab ab-refused" if a.refused else "ab"
    body = f"<div class='ab-text' data-answer='1'>{esc(text)}</div>"
    listed = " · ".join(f"[{n}] {c}" for n, c in enumerate(cites, 1))
    cite = (f"<div class='ab-small' data-cites='1' title='{esc(listed)}'>citations: {esc(listed)}</div>"
            if cites else "")
    return f"{BOX_CSS}<div class='{cls}' data-testid='answer-box'><div class='ab-head'>{head}</div>{body}{cite}</div>"


def answer_box(trace: Trace, *, doc_names: Mapping[str, str],
               lookup: Callable[[list[str]], Mapping[str, Any]] | None = None,
               actions: Sequence[Callable[[], None]] = ()) -> None:
    """The answer box at the top of the results; `actions` draw buttons beside it (recompute, search anyway)."""
    if trace.answer is None:
        return
    cites = citation_labels(trace.answer.citations, trace, doc_names, lookup) if trace.answer.citations else []
    with st.container(key="answer_panel"):
        if actions:
            left, right = st.columns([7, 1.3], vertical_alignment="center", gap="small")
            left.html(box_html(trace, cites=cites))
            with right:
                for draw in actions:
                    draw()
        else:
            st.html(box_html(trace, cites=cites))
