"""Trace -> pandas frames and plain-text tables for the views and the CLI; no streamlit here."""
from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence


from core.cascade.stage import CascadeInfo
from core.ingest.parse import human_size  # one size format for upload errors and tables
from core.text import PALETTE, snippet  # snippet: re-exported for the pages
from core.trace import REORDERING  # re-exported for the pages (stages that reorder the list they read)
from core.types import Chunk, StageResult, Trace

if TYPE_CHECKING:  # annotations only: report.py must not pull in the store (duckdb) at import time
    import pandas as pd
    from core.ingest.pipeline import FileResult
    from core.types import DocumentRow


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&])")


# Bidirectional embeddings, overrides and isolates: invisible, they reorder what is shown ('invoice_\u202etxt.exe'
# reads 'invoice_exe.txt'). Shown as a visible mark instead, so a reader sees that the text carries one.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
# A URL scheme before '//' and a bare 'www.' are what renderers (GitHub-flavoured Markdown, linkifiers) turn into a
# link; a bracket in the scheme's colon breaks that while a reader still reads the address.
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]{1,20}):(?=//)")
_WWW = re.compile(r"(?i)\bwww\.")
# An e-mail address becomes a mailto: link the same way.
_EMAIL = re.compile(r"(?<=[\w.+\-])@(?=[\w\-]+\.[\w\-])")


def show_bidi(text: str) -> str:
    """Each bidi control character replaced by a visible mark naming it ('[U+202E]')."""
    return _BIDI.sub(lambda m: f"[U+{ord(m.group(0)):04X}]", text)


def inert_text(text: Any) -> str:
    """Document text (a chunk, a snippet, an answer) as a page shows it: bidi controls made visible and remote
    addresses made unclickable ('https[:]//host/x', 'www[.]host', 'name[@]host.org'), the rest unchanged. Why not
    rely on escape_md's backslashes: Markdown resolves them first and finds links in the text left over."""
    return _EMAIL.sub("[@]", _WWW.sub("www[.]", _SCHEME.sub(r"\1[:]", show_bidi(str(text)))))


def escape_md(text: Any) -> str:
    """A user-controlled string (file name, title, heading, query) made inert for st.markdown / captions / button
    labels: every Markdown, emoji-shortcode (':') and maths ('$') character is backslash-escaped and line breaks
    become spaces, so `![p](http://host/pixel.png)` shows as text instead of fetching an image; addresses are
    broken and bidi controls shown as marks (inert_text)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(inert_text(text).splitlines()))


def _pd() -> Any:
    """pandas, imported on the first frame: the CLI's text table needs none of it (a cold `query` saves its import)."""
    import pandas as pd

    return pd


def chunk_colour(chunk_id: str) -> str:
    return PALETTE[int(hashlib.md5(chunk_id.encode()).hexdigest(), 16) % len(PALETTE)]


def stage_frame(stage: StageResult, previous: StageResult | None = None) -> pd.DataFrame:
    """One stage's candidates: rank, score, chunk, snippet, and the move relative to the previous stage that ran
    (positive = moved up; 'new' = not in the previous list)."""
    prev_rank = {c.chunk_id: c.rank for c in previous.candidates} if previous else {}
    rows = []
    for c in stage.candidates:
        if previous is None:
            move = ""
        elif c.chunk_id in prev_rank:
            d = prev_rank[c.chunk_id] - c.rank
            move = f"▲{d}" if d > 0 else (f"▼{-d}" if d < 0 else "=")
        else:
            move = "new"
        rows.append({"rank": c.rank, "score": round(float(c.score), 4), "move": move, "chunk_id": c.chunk_id,
                     "doc_id": c.doc_id, "snippet": inert_text(snippet(c.text)), "colour": chunk_colour(c.chunk_id)})
    return _pd().DataFrame(rows, columns=["rank", "score", "move", "chunk_id", "doc_id", "snippet", "colour"])


def fused_moves(stage: StageResult, inputs: Sequence[str]) -> pd.DataFrame:
    """For a fusion stage: the rank each chunk had in every input list beside its fused rank."""
    rows = []
    for c in stage.candidates:
        row = {"rank": c.rank, "chunk_id": c.chunk_id}
        for name in inputs:
            r = c.meta.get(f"rank_{name}")
            row[f"{name} rank"] = r if r is not None else "—"
            row[f"from {name}"] = "" if r is None else (f"▲{r - c.rank}" if r > c.rank else
                                                       (f"▼{c.rank - r}" if r < c.rank else "="))
        rows.append(row)
    return _pd().DataFrame(rows)


def grid(trace: Trace, depth: int = 10) -> pd.DataFrame:
    """Rank x stage grid of chunk ids: the side-by-side view as one table."""
    cols: dict[str, list[str]] = {}
    for s in trace.stages:
        if s.skipped is None:
            ids = [c.chunk_id for c in s.candidates[:depth]]
            cols[s.stage] = ids + [""] * (depth - len(ids))
    return _pd().DataFrame(cols, index=_pd().RangeIndex(1, depth + 1, name="rank"))


def stage_summary(trace: Trace) -> pd.DataFrame:
    rows = []
    for s in trace.stages:
        rows.append({"stage": s.stage, "ran": s.skipped is None, "candidates": len(s.candidates),
                     "ms": round(s.ms, 2), "skip reason": s.skipped or "", "notes": "; ".join(s.notes)})
    return _pd().DataFrame(rows)


def text_table(trace: Trace, depth: int = 10, width: int = 70) -> str:
    """The per-stage table the CLI prints."""
    lines = [f"query: {trace.query}", f"config {trace.config_hash} · corpus v{trace.corpus_version} · "
             f"lang {trace.query_lang}"]
    lines += [f"note: {n}" for n in trace.notes]
    for s in trace.stages:
        head = f"\n== {s.stage} " + (f"(skipped: {s.skipped})" if s.skipped else f"{s.ms:.1f} ms, {len(s.candidates)} candidates")
        if isinstance(s.own_info, CascadeInfo):  # cascade stages: what they kept of the token bill
            f = s.own_info.flow
            head += f" (in {f.candidates_in}) · tokens {f.tokens_in} -> {f.tokens_out} ({f.kept_share:.0%} kept)"
        lines.append(head)
        lines += [f"   note: {n}" for n in s.notes]
        for c in s.candidates[:depth]:
            lines.append(f"  {c.rank:>3}  {c.score:>9.4f}  {c.chunk_id:<18} {snippet(c.text, width)}")
    if trace.answer is not None:
        a = trace.answer
        lines.append(f"\n== answer ({a.mode}{', refused' if a.refused else ''})\n{a.text}")
        if a.citations:
            lines.append("citations: " + ", ".join(a.citations))
    return "\n".join(lines)


# -- Corpus page and Search Lab helpers (pages/corpus.py, pages/search_lab.py, pages/_widgets.py) ------------------

def documents_frame(docs: Sequence["DocumentRow"]) -> pd.DataFrame:
    """The Corpus page's documents table: one row per document, hash shortened to 12 hex digits."""
    rows = [{"name": d.name, "type": d.kind, "size": human_size(d.size_bytes), "chunks": d.n_chunks,
             "hash": d.content_hash[:12], "language": d.lang, "chunker": d.chunker,
             "ingested (UTC)": f"{d.ingested_at:%Y-%m-%d %H:%M:%S}" if d.ingested_at else "", "doc_id": d.doc_id}
            for d in docs]
    return _pd().DataFrame(rows, columns=["name", "type", "size", "chunks", "hash", "language", "chunker",
                                       "ingested (UTC)", "doc_id"])


def chunks_frame(chunks: Sequence[Chunk]) -> pd.DataFrame:
    """One document's chunks with their metadata; heading paths read as breadcrumbs."""
    rows = [{"#": c.ordinal, "heading path": " › ".join(c.heading_path), "chars": f"{c.start}–{c.end}",
             "tokens": c.n_tokens, "lang": c.lang, "text": inert_text(c.text), "chunk_id": c.chunk_id}
            for c in sorted(chunks, key=lambda c: c.ordinal)]
    return _pd().DataFrame(rows, columns=["#", "heading path", "chars", "tokens", "lang", "text", "chunk_id"])


def ingest_frame(results: Sequence["FileResult"]) -> pd.DataFrame:
    """Per-file outcome of one upload: status, chunks (unchanged / changed / new / removed against the stored
    version), embeddings computed vs served from the cache, llm contexts kept."""
    cols = ["file", "status", "chunks", "unchanged", "changed", "new", "removed", "embedded", "cache hits",
            "contexts kept", "encoding", "message"]
    rows = [{"file": r.name, "status": r.status, "chunks": r.chunks, "unchanged": r.unchanged, "changed": r.changed,
             "new": r.new, "removed": r.removed, "embedded": r.embedded, "cache hits": r.cache_hits,
             "contexts kept": r.contexts_kept, "encoding": r.encoding, "message": r.message}
            for r in results]
    return _pd().DataFrame(rows, columns=cols)


def _rank_inputs(stage: StageResult) -> list[str]:
    """Names of the input lists a fusion recorded on its candidates (meta 'rank_<name>'), in first-seen order."""
    names: list[str] = []
    for c in stage.candidates:
        for key in c.meta:
            if key.startswith("rank_") and key[5:] not in names:
                names.append(key[5:])
    return names


# -- readable stage headers: key facts as chips, the rest as "name: value" lines (never a Python repr) -------------
_VARIANT_TEXT = {"raw": "raw text", "heuristic": "heuristic contexts", "late": "late-chunking vectors",
                 "llm": "LLM contexts"}


def _num(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else (f"{v:.3g}" if isinstance(v, float) else str(v))


def readable(value: Any, limit: int = 400) -> str:
    """A value from a stage's info as text a person reads: lists comma-joined, records as 'key value' pairs."""
    if isinstance(value, Mapping):
        text = ", ".join(f"{k} {readable(v, 80)}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for v in value:
            if isinstance(v, Mapping) and "name" in v:  # graph seeds and the like: the name leads, details in brackets
                rest = ", ".join(f"{k} {readable(x, 40)}" for k, x in v.items() if k not in ("name", "node"))
                items.append(f"{v['name']} ({rest})" if rest else str(v["name"]))
            else:
                items.append(readable(v, 80))
        text = "; ".join(items) if any(isinstance(v, (Mapping, list, tuple)) for v in value) else ", ".join(items)
    else:
        text = _num(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NOT_BUILT = re.compile(r"context\.variant = \S+ but no .* exist yet, so raw text is searched")
_PARTIAL = re.compile(r"cover (\d+) of (\d+) chunks; the other chunks are searched raw")


def searched_text(stage: StageResult, notes: Sequence[str] = ()) -> str | None:
    """What text a retrieval stage really searched: the variant in its info (`searched` wins over the requested
    `text`), corrected by the trace's coverage notes (core/context.prepare_variant) when the variant is missing
    or covers only part of the corpus, so the header never claims a variant that was not searched."""
    v = stage.info.get("searched", stage.info.get("text"))
    if v is None:
        return None
    label = _VARIANT_TEXT.get(str(v), str(v))
    if str(v) == "raw":
        return label
    for n in notes:
        if _NOT_BUILT.search(n):
            return f"raw text ({label} not built yet)"
        m = _PARTIAL.search(n)
        if m:
            return f"{label} for {m.group(1)} of {m.group(2)} chunks, raw for the rest"
    return label


def stage_chips(stage: StageResult, notes: Sequence[str] = ()) -> list[str]:
    """The few facts worth a glance beside a stage's name: time, cost, list sizes, what it searched or kept.
    `notes` are the trace's notes (what the context variant really covered)."""
    i = stage.info
    chips = [f"{stage.ms:,.1f} ms", f"{len(stage.candidates)} cand."]
    if stage.usage.calls or stage.usage.usd:
        chips.append(f"${stage.usage.usd:.4f} · {stage.usage.calls} call(s)")
    local = [m for m in stage.usage.models if not m.startswith("anthropic:")]
    if local:  # a local or open model answered: say which (Claude is the default and needs no chip)
        chips.append(f"by {', '.join(local)}"[:80])
    searched = searched_text(stage, notes)
    if searched:
        chips.append(f"searched: {searched}")
    if "indexed" in i:
        chips.append(f"of {_num(i['indexed'])} indexed")
    if str(i.get("search", "")).startswith("approximate"):  # the dense list through the ANN graph (exact: no chip)
        chips.append(str(i["search"]).removeprefix("approximate: "))
    if "reranker" in i:
        chips.append(str(i["reranker"]))
    if "cache_hits" in i:
        chips.append(f"token cache {_num(i['cache_hits'])} hit / {_num(i.get('computed', 0))} computed")
    if "tokens_in" in i and "tokens_out" in i:
        share = i.get("kept_share")
        chips.append(f"tokens {_num(i['tokens_in'])}→{_num(i['tokens_out'])}"
                     + (f" ({share:.0%})" if isinstance(share, (int, float)) else ""))
    if "sentences_in" in i:
        chips.append(f"sentences {_num(i.get('sentences_kept', 0))}/{_num(i['sentences_in'])}")
    if i.get("dropped"):
        chips.append(f"{len(i['dropped'])} dropped")
    if i.get("duplicates"):
        chips.append(f"{len(i['duplicates'])} duplicate(s)")
    if "lam" in i:
        chips.append(f"λ {_num(i['lam'])}")
    if "rrf_k" in i:
        chips.append(f"RRF k {_num(i['rrf_k'])}")
    if i.get("seeds"):
        chips.append(f"{len(i['seeds'])} seed(s): " + ", ".join(str(s.get("name", "?")) for s in i["seeds"][:3]))
    if i.get("nodes"):
        chips.append(f"{len(i['nodes'])} entities · {len(i.get('edges', []))} links")
    if stage.stage == "expand" and "mode" in i:
        chips.append(f"{i['mode']}" + (f" ±{i['window']}" if i.get("mode") == "window" and "window" in i else ""))
    if "refused" in i:
        chips.append("refused" if i["refused"] else "answered")
    if "hit" in i:
        chips.append("cache hit" if i["hit"] else "cache miss")
    return chips


_CHIP_ONLY = {"indexed", "cache_hits", "computed", "tokens_in", "tokens_out", "kept_share", "rrf_k", "lam", "hit",
              "refused", "text", "searched", "search"}


def stage_details(stage: StageResult) -> list[tuple[str, str]]:
    """Every other info entry as (name, readable value), for the header's expander."""
    return [(k, readable(v)) for k, v in stage.info.items() if k not in _CHIP_ONLY and v not in (None, "", [], {})]




def stage_moves(trace: Trace) -> dict[str, dict[str, str]]:
    """Per stage, per chunk id: a short label saying how the chunk got to its rank, for the stage columns.

    A fresh retrieval (every candidate tagged with the stage's own name) gives the rank in the list before it. The stage where per-input
    ranks (meta 'rank_<name>') first appear is a fusion: the label gives the rank in every input and the move from
    it ("bm25 #3 ▲2 · dense —"). Any later stage reorders or filters the list before it, so its label is the move
    from the previous stage that ran ("▲2", "▼1", "=", "new")."""
    out: dict[str, dict[str, str]] = {}
    previous: StageResult | None = None
    for s in trace.stages:
        if s.skipped is not None or not s.candidates:
            continue
        inputs = _rank_inputs(s)
        if s.stage not in REORDERING and all(c.meta.get("stage") == s.stage for c in s.candidates):
            # An independent retrieval: it did not reorder the list before it, so its label is where the chunk
            # stood there ("bm25 #3") or that it is new to this list; the first list has nothing to compare with.
            if previous is None:
                labels: dict[str, str] = {}
            else:
                before = {c.chunk_id: c.rank for c in previous.candidates}
                labels = {c.chunk_id: f"{previous.stage} #{before[c.chunk_id]}" if c.chunk_id in before
                          else f"new (not in {previous.stage})" for c in s.candidates}
        elif inputs and (previous is None or not _rank_inputs(previous)):
            frame = fused_moves(s, inputs)
            labels = {
                row["chunk_id"]: " · ".join(
                    f"{n} —" if row[f"{n} rank"] == "—" else f"{n} #{row[f'{n} rank']} {row[f'from {n}']}"
                    for n in inputs)
                for row in frame.to_dict("records")
            }
        elif previous is not None:
            frame = stage_frame(s, previous)
            labels = dict(zip(frame["chunk_id"], frame["move"]))
        else:
            labels = {}
        out[s.stage] = labels
        previous = s
    return out
