"""Graph page model: filtered node/edge frames, escaped pyvis HTML, entity detail and the nodes a trace used."""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pandas as pd

from core.graph.snapshot import GraphSnapshot
from core.report import PALETTE, snippet
from core.store import Store

_REMOTE = re.compile(r"<(link|script)\b[^>]*\b(?:href|src)=\"https?://[^\"]*\"[^>]*>(?:\s*</script>)?", re.S)
HIGHLIGHT = "#ff2d55"  # nodes and edges the last query used
DIM_EDGE = "#c8c8c8"


def esc(text: str) -> str:
    """Every string that reaches the graph HTML came from a document: escape it (no script through a label)."""
    return html.escape(str(text), quote=True)


@dataclass(frozen=True)
class Used:
    """Nodes and edges a query's graph_local stage used (empty when no trace or the stage did not run)."""

    nodes: frozenset[str] = frozenset()
    edges: frozenset[tuple[str, str]] = frozenset()
    seeds: frozenset[str] = frozenset()
    query: str = ""


def used_by_trace(trace: Any) -> Used:
    """Accepts a Trace or its to_dict() form (as stored in the run log)."""
    if trace is None:
        return Used()
    data = trace.to_dict() if hasattr(trace, "to_dict") else trace
    stage = next((s for s in data.get("stages", []) if s.get("stage") == "graph_local" and not s.get("skipped")), None)
    if stage is None:
        return Used(query=str(data.get("query", "")))
    info = stage.get("info") or {}
    edges = frozenset((min(a, b), max(a, b)) for a, b, *_ in info.get("edges", []))
    return Used(frozenset(info.get("nodes", [])), edges, frozenset(s["node"] for s in info.get("seeds", [])),
                str(data.get("query", "")))


def community_colour(cid: str | None) -> str:
    if not isinstance(cid, str):  # no community (pandas turns None into NaN)
        return "#bab0ac"
    return PALETTE[sum(ord(ch) * (i + 1) for i, ch in enumerate(cid)) % len(PALETTE)]


def nodes_frame(snap: GraphSnapshot, *, level: int) -> pd.DataFrame:
    """Every active node with its type, degree, chunk count and community at `level`."""
    comm = snap.node_community.get(level, {})
    deg = snap.degree
    return pd.DataFrame({
        "node_id": snap.node_ids, "name": snap.names, "type": snap.types,
        "degree": deg.astype(int) if len(deg) else [], "chunks": snap.n_chunks.astype(int),
        "community": [comm.get(i) for i in range(len(snap))],
    })


def filter_nodes(frame: pd.DataFrame, *, communities: Iterable[str] = (), types: Iterable[str] = (),
                 min_degree: int = 0, max_nodes: int = 150, must_show: Iterable[str] = ()) -> pd.DataFrame:
    """Filters of the Graph page; the busiest nodes first up to max_nodes, plus the nodes a query used."""
    comms, tps, must = set(communities), set(types), set(must_show)
    keep = frame["degree"] >= min_degree
    if comms:
        keep &= frame["community"].isin(comms)
    if tps:
        keep &= frame["type"].isin(tps)
    picked = frame[keep].sort_values(["degree", "chunks", "node_id"], ascending=[False, False, True]).head(max_nodes)
    extra = frame[frame["node_id"].isin(must) & ~frame["node_id"].isin(picked["node_id"])]
    return pd.concat([picked, extra]) if len(extra) else picked


def find_nodes(frame: pd.DataFrame, text: str, limit: int = 200) -> list[str]:
    """Node ids whose name contains `text` (case-insensitive), busiest first."""
    hit = frame[frame["name"].str.contains(text.strip(), case=False, regex=False)]
    return list(hit.sort_values(["degree", "node_id"], ascending=[False, True])["node_id"].head(limit))


def edges_frame(snap: GraphSnapshot, node_ids: Iterable[str]) -> pd.DataFrame:
    shown = {snap.pos[n] for n in node_ids if n in snap.pos}
    rows = []
    for i in sorted(shown):
        for j, w in snap.neighbours(i):
            if j in shown and i < j:
                rows.append({"src": snap.node_ids[i], "dst": snap.node_ids[j], "weight": w})
    return pd.DataFrame(rows, columns=["src", "dst", "weight"])


def pyvis_html(nodes: pd.DataFrame, edges: pd.DataFrame, *, used: Used = Used(), height_px: int = 600) -> str:
    """A self-contained pyvis page (cdn_resources='in_line': the only mode that renders offline in 0.3.2).
    vis ids are row numbers, never text; labels and tooltips are HTML-escaped."""
    from pyvis.network import Network

    net = Network(height=f"{height_px}px", width="100%", cdn_resources="in_line", directed=False)
    net.barnes_hut(gravity=-4000, spring_length=120)
    vid = {nid: k for k, nid in enumerate(nodes["node_id"])}
    for k, row in enumerate(nodes.itertuples(index=False)):
        hot = row.node_id in used.nodes
        seed = row.node_id in used.seeds
        tip = f"{row.name}\ntype: {row.type}\ndegree: {row.degree}\nchunks: {row.chunks}\ncommunity: {row.community}"
        fill = community_colour(row.community)
        net.add_node(k, label=esc(row.name), title=esc(tip), size=8 + 3 * math.sqrt(max(row.degree, 0)),
                     color={"background": fill, "border": HIGHLIGHT if hot else fill},
                     borderWidth=4 if hot else 1, shape="star" if seed else "dot")
    for row in edges.itertuples(index=False):
        hot = (min(row.src, row.dst), max(row.src, row.dst)) in used.edges
        net.add_edge(vid[row.src], vid[row.dst], value=float(row.weight), title=esc(f"weight {row.weight:g}"),
                     color=HIGHLIGHT if hot else DIM_EDGE, width=3 if hot else 1)
    page = net.generate_html(notebook=False)
    # The template still pulls bootstrap from a CDN for menus we do not use: drop it so the view is fully offline.
    return _REMOTE.sub("", page)


def entity_detail(snap: GraphSnapshot, store: Store, node_id: str, *, doc_names: Mapping[str, str],
                  max_chunks: int = 20) -> dict[str, Any]:
    """Description, aliases, relations (by weight) and source chunks of one entity. Statistical graphs have no
    written descriptions: the first sentence naming the entity stands in, labelled as a quote."""
    i = snap.pos[node_id]
    rels = pd.DataFrame([{"entity": snap.names[j], "weight": w, "type": snap.types[j]} for j, w in snap.neighbours(i)],
                        columns=["entity", "weight", "type"])
    prov = store.graph.node_chunks([node_id], snap.workspace)
    texts = store.corpus.chunks_by_id([p.chunk_id for p in prov[:max_chunks]], snap.workspace)
    chunks = pd.DataFrame([{"chunk_id": c, "document": doc_names.get(d, d), "mentions": n,
                            "snippet": snippet(texts[c].text, 200) if c in texts else "(chunk no longer in corpus)"}
                           for _, c, d, n in prov[:max_chunks]], columns=["chunk_id", "document", "mentions", "snippet"])
    desc = snap.descriptions[i]
    if not desc and prov:
        name = snap.names[i].lower()
        for _, c, _, _ in prov[:max_chunks]:
            text = texts[c].text if c in texts else ""
            at = text.lower().find(name)
            if at >= 0:
                start = max(text.rfind(". ", 0, at) + 2, 0)
                end = text.find(". ", at)
                desc = "quote: “" + " ".join(text[start: end + 1 if end >= 0 else len(text)].split())[:300] + "”"
                break
    aliases = sorted({a for a, p in snap.alias_index.items() if p == i})
    comms = {lvl: snap.node_community[lvl].get(i) for lvl in snap.levels()}
    return {"name": snap.names[i], "type": snap.types[i], "description": desc, "aliases": aliases,
            "degree": int(snap.degree[i]), "chunks_total": int(snap.n_chunks[i]), "communities": comms,
            "relations": rels, "chunks": chunks, "source_chunks": len(prov)}


def queue_frame(store: Store, workspace: str, *, pending: int = 50, decided: int = 20) -> pd.DataFrame:
    """The best pending suggestions, then the most recent decisions (which can be undone)."""
    allq = store.review.queue(workspace=workspace)
    todo = [q for q in allq if q.status == "pending"][:pending]
    done = sorted((q for q in allq if q.status != "pending"), key=lambda q: q.decided_at, reverse=True)
    rows = todo + done[:decided]
    return pd.DataFrame([{"item": q.item_id, "keep": q.keep_name, "merge": q.other_name,
                          "cosine": round(q.score, 3), "status": q.status} for q in rows],
                        columns=["item", "keep", "merge", "cosine", "status"])


def communities_frame(snap: GraphSnapshot, store: Store, level: int) -> pd.DataFrame:
    """Communities at one level with size and cached summary title (summaries are written lazily by queries)."""
    comms = snap.communities.get(level, {})
    cached = store.communities.summaries([snap.members_hash[(level, c)] for c in comms], snap.workspace)
    rows = []
    for cid, members in sorted(comms.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        s = cached.get(snap.members_hash[(level, cid)])
        top = sorted(members, key=lambda p: (-int(snap.degree[p]), p))[:3]
        rows.append({"community": cid, "size": len(members), "top entities": ", ".join(snap.names[p] for p in top),
                     "summary": (s.title + f" ({s.mode})") if s else "— not written yet"})
    return pd.DataFrame(rows, columns=["community", "size", "top entities", "summary"])
