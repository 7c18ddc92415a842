"""Graph page model: filtered node/edge frames, escaped pyvis HTML, entity detail and the nodes a trace used."""
from __future__ import annotations

import base64
import html
import math
import random
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from core.graph.extract import STOP as STOP_WORDS  # the extractor's own stop words
from core.graph.snapshot import GraphSnapshot
from core.graph.sources import GraphSource
from core.graph.stages import GraphLocalInfo
from core.text import PALETTE, snippet
from core.types import Candidate

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
    """Every active node with its type, degree, chunk count, document count and community at `level`."""
    comm = snap.node_community.get(level, {})
    deg = snap.degree
    docs = [len({d for _, d, _ in nc}) for nc in snap.node_chunks] if snap.node_chunks else [0] * len(snap)
    return pd.DataFrame({
        "node_id": snap.node_ids, "name": snap.names, "type": snap.types,
        "degree": deg.astype(int) if len(deg) else [], "chunks": snap.n_chunks.astype(int), "docs": docs,
        "community": [comm.get(i) for i in range(len(snap))],
    })


# A lowercase phrase used in this share of the documents or more is the corpus's everyday language, not a thing.
COMMON_DOC_SHARE = 0.3
COMMON_MIN_DOCS = 3
_WORDS = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


def common_phrases(frame: pd.DataFrame, n_docs: int) -> pd.Series:
    """True for the 'phrase' entities (lowercase multi-word terms) a reader would call noise: one holding a stop
    word ('messages with'), a cut-off piece of a longer phrase seen as often ('fewer remote' inside 'fewer remote
    days'), or one spread over COMMON_DOC_SHARE of the documents. Named entities and identifiers are never noise."""
    phrase = frame["type"] == "phrase"
    names = frame["name"].str.lower()
    stop = names.map(lambda n: any(w in STOP_WORDS for w in _WORDS.findall(n)))
    chunks = dict(zip(names, frame["chunks"]))
    longer = [n for n, t in zip(names, frame["type"]) if t == "phrase"]

    def cut_off(n: str) -> bool:  # a longer phrase starts or ends with it and is seen at least as often
        return any(m != n and (m.startswith(n + " ") or m.endswith(" " + n)) and chunks[m] >= chunks[n]
                   for m in longer)

    common = frame["docs"] >= max(COMMON_MIN_DOCS, COMMON_DOC_SHARE * n_docs) if n_docs else False
    return phrase & (stop | names.map(cut_off) | common)


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


def overview_nodes(frame: pd.DataFrame, max_nodes: int = 150, must_show: Iterable[str] = ()) -> pd.DataFrame:
    """The default view: every community's best-connected entities in turn (its hub first, then the next one, ...),
    bigger communities first, up to max_nodes in all, the nodes a query used included. A plain top-degree cut would
    show only the largest community's hairball."""
    if frame.empty:
        return frame
    f = frame.copy()
    f["_comm"] = f["community"].fillna("—")
    f["_size"] = f.groupby("_comm")["node_id"].transform("count")
    f["_rank"] = f.sort_values(["degree", "chunks", "node_id"], ascending=[False, False, True]) \
        .groupby("_comm").cumcount()
    # The nodes a query used always show, inside the cap: the rest of the budget goes by the ranking.
    must = f[f["node_id"].isin(set(must_show))].sort_values(["degree", "node_id"], ascending=[False, True])
    must = must.head(max_nodes)
    rest = f[~f["node_id"].isin(must["node_id"])]
    picked = rest.sort_values(["_rank", "_size", "degree", "node_id"], ascending=[True, False, False, True]) \
        .head(max_nodes - len(must))
    out = pd.concat([picked, must]) if len(must) else picked
    return out.drop(columns=["_comm", "_size", "_rank"])


def strongest_edges(edges: pd.DataFrame, per_node: int = 3) -> pd.DataFrame:
    """Each node's `per_node` heaviest links (a link stays when either end keeps it): co-occurrence graphs are dense
    (17k links among 563 entities on the sample corpus), and drawing every link hides the structure."""
    if edges.empty:
        return edges
    e = edges.reset_index(drop=True)
    keep: set[int] = set()
    for end in ("src", "dst"):
        ranked = e.sort_values(["weight", "src", "dst"], ascending=[False, True, True]).groupby(end).head(per_node)
        keep.update(ranked.index)
    return e.loc[sorted(keep)].reset_index(drop=True)


def static_layout(nodes: pd.DataFrame, edges: pd.DataFrame, *, seed: int = 7, scale: float = 900.0
                  ) -> dict[str, tuple[float, float]]:
    """Node positions computed once in Python (igraph's Fruchterman-Reingold, seeded), so the browser draws a
    still picture instead of running a physics simulation that keeps the page busy."""
    import igraph as ig

    ids = list(nodes["node_id"])
    if not ids:
        return {}
    index = {n: k for k, n in enumerate(ids)}
    g = ig.Graph(n=len(ids), edges=[(index[a], index[b]) for a, b in zip(edges["src"], edges["dst"])
                                    if a in index and b in index])
    random.seed(seed)  # igraph's layouts draw from Python's random module
    coords = g.layout_fruchterman_reingold(niter=300) if g.ecount() else g.layout_circle()
    return {n: (x * scale * 1.6, y * scale) for n, x, y in zip(ids, _spread([c[0] for c in coords]),
                                                            _spread([c[1] for c in coords]))}


def _spread(values: list[float], rank_share: float = 0.7) -> list[float]:
    """Coordinates on [0, 1], mostly by rank: force layouts pack the dense core into a small knot (labels on top of
    each other) and fling small components far out; ranks keep every node's order but even out the spacing."""
    n = len(values)
    if n < 2:
        return [0.5] * n
    lo, hi = min(values), max(values)
    order = sorted(range(n), key=lambda i: values[i])
    rank = [0.0] * n
    for r, i in enumerate(order):
        rank[i] = r / (n - 1)
    return [rank_share * rank[i] + (1 - rank_share) * ((values[i] - lo) / (hi - lo) if hi > lo else 0.5)
            for i in range(n)]


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


def pyvis_html(nodes: pd.DataFrame, edges: pd.DataFrame, *, used: Used = Used(), height_px: int = 600,
               layout: Mapping[str, tuple[float, float]] | None = None) -> str:
    """A self-contained pyvis page (cdn_resources='in_line': the only mode that renders offline in 0.3.2).
    vis ids are row numbers, never text; labels and tooltips go in as plain text and are escaped exactly once (see
    _vis_text). With `layout` (static_layout) the nodes sit where Python put them and physics is off: the page is
    idle as soon as it is drawn."""
    from pyvis.network import Network

    net = Network(height=f"{height_px}px", width="100%", cdn_resources="in_line", directed=False)
    if layout is None:
        net.barnes_hut(gravity=-4000, spring_length=120)
    else:
        net.toggle_physics(False)
        net.options.edges.smooth.enabled = False  # straight links: nothing for the browser to simulate
        net.options.interaction.hideEdgesOnDrag = True
    vid = {nid: k for k, nid in enumerate(nodes["node_id"])}
    for k, row in enumerate(nodes.itertuples(index=False)):
        hot = row.node_id in used.nodes
        seed = row.node_id in used.seeds
        tip = _vis_text(f"{row.name}\ntype: {row.type}\ndegree: {row.degree}\nchunks: {row.chunks}\n"
                        f"community: {row.community}")
        fill = community_colour(row.community)
        where = {"x": layout[row.node_id][0], "y": layout[row.node_id][1]} if layout and row.node_id in layout else {}
        net.add_node(k, label=_vis_text(row.name), title=tip,
                     size=min(26.0, 7 + 1.5 * math.sqrt(max(row.degree, 0))),
                     color={"background": fill, "border": HIGHLIGHT if hot else fill},
                     borderWidth=4 if hot else 1, shape="star" if seed else "dot", font={"size": 14}, **where)
    for row in edges.itertuples(index=False):
        hot = (min(row.src, row.dst), max(row.src, row.dst)) in used.edges
        net.add_edge(vid[row.src], vid[row.dst], value=float(row.weight), title=f"weight {row.weight:g}",
                     color=HIGHLIGHT if hot else DIM_EDGE, width=3 if hot else 1)
    page = net.generate_html(notebook=False)
    # The template still pulls bootstrap from a CDN for menus we do not use: drop it so the view is fully offline.
    return _REMOTE.sub("", page)


def _vis_text(text: Any) -> str:
    """A label or tooltip for the pyvis page, as plain text. vis-network draws labels on a canvas and sets string
    tooltips with innerText, and the template writes the data with Jinja's `tojson` (<, >, & and ' become \\u
    escapes, so nothing closes the <script>): that is the one escape. HTML-escaping as well showed a literal
    `&lt;script&gt;`. pyvis switches to a template that sets tooltips with innerHTML when any title contains
    "href"; a zero-width space keeps a document's "href" from turning that on."""
    return str(text).replace("href", "hr\u200bef")


def entity_detail(snap: GraphSnapshot, store: GraphSource, node_id: str, *, doc_names: Mapping[str, str],
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


def queue_frame(store: GraphSource, workspace: str, *, pending: int = 50, decided: int = 20) -> pd.DataFrame:
    """The best pending suggestions, then the most recent decisions (which can be undone)."""
    allq = store.review.queue(workspace=workspace)
    todo = [q for q in allq if q.status == "pending"][:pending]
    done = sorted((q for q in allq if q.status != "pending"), key=lambda q: q.decided_at, reverse=True)
    rows = todo + done[:decided]
    return pd.DataFrame([{"item": q.item_id, "keep": q.keep_name, "merge": q.other_name,
                          "cosine": round(q.score, 3), "status": q.status} for q in rows],
                        columns=["item", "keep", "merge", "cosine", "status"])


def communities_frame(snap: GraphSnapshot, store: GraphSource, level: int) -> pd.DataFrame:
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


def subgraph_svg(info: GraphLocalInfo, candidates: Sequence[Candidate], names: Mapping[str, str], *,
                 width: int = 320, max_per_layer: int = 7, max_chunks: int = 6) -> str:
    """The query's subgraph as a small static picture for the Search Lab row: seed entities (left, red), the
    entities reached from them by hop (middle), the chunks they led to (right, by rank). `info` and `candidates`:
    the graph_local stage's record and list; layout is computed here (no JS, no physics), every label escaped."""
    seeds = [s.node for s in info.seeds][:max_per_layer]
    label = {**{s.node: s.name for s in info.seeds}, **names}
    adj: dict[str, set[str]] = {}
    for a, b, *_ in info.edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    hop = {s: 0 for s in seeds}
    frontier = list(seeds)
    while frontier:  # breadth-first from the seeds over the edges the search used
        nxt = []
        for n in frontier:
            for m in sorted(adj.get(n, ())):
                if m not in hop:
                    hop[m] = hop[n] + 1
                    nxt.append(m)
        frontier = nxt
    order = [n for n in info.nodes if n in hop]
    layers: list[list[str]] = [seeds] + [[n for n in order if hop[n] == h][:max_per_layer]
                                         for h in range(1, 1 + max((hop.values()), default=0))]
    layers = [layer for layer in layers if layer]
    chunks = list(candidates[:max_chunks])
    n_cols = len(layers) + 1
    rows = max([len(layer) for layer in layers] + [len(chunks), 1])
    height = 24 + 26 * rows
    xs = [10 + k * (width - 52) / max(n_cols - 1, 1) for k in range(n_cols)]
    pos: dict[str, tuple[float, float]] = {}
    for k, layer in enumerate(layers):
        for j, n in enumerate(layer):
            pos[n] = (xs[k], 20 + j * 26)
    cpos = {c.chunk_id: (xs[-1], 20 + j * 26) for j, c in enumerate(chunks)}
    lines = []
    for a, b, *_ in info.edges:
        if a in pos and b in pos:
            (x1, y1), (x2, y2) = pos[a], pos[b]
            lines.append(f"<line x1='{x1:.0f}' y1='{y1:.0f}' x2='{x2:.0f}' y2='{y2:.0f}' stroke='{DIM_EDGE}'/>")
    for c in chunks:
        named = {x.strip().lower() for x in str(c.meta.get("entities", "")).split(";")}
        for n, (x, y) in pos.items():
            if str(label.get(n, n)).lower() in named:
                cx, cy = cpos[c.chunk_id]
                lines.append(f"<line x1='{x:.0f}' y1='{y:.0f}' x2='{cx:.0f}' y2='{cy:.0f}' stroke='#9ecae1' "
                             "stroke-dasharray='2,2'/>")
    marks = []
    for n, (x, y) in pos.items():
        fill = HIGHLIGHT if hop.get(n) == 0 else community_colour(None)
        name = str(label.get(n, n))
        short = name if len(name) <= 13 else name[:12] + "…"
        marks.append(f"<g><title>{esc(name)} · hop {hop.get(n, '?')}</title>"
                     f"<circle cx='{x:.0f}' cy='{y:.0f}' r='5' fill='{fill}'/>"
                     f"<text x='{x + 7:.0f}' y='{y + 3:.0f}'>{esc(short)}</text></g>")
    for c in chunks:
        x, y = cpos[c.chunk_id]
        marks.append(f"<g><title>{esc(c.chunk_id)}: {esc(snippet(c.text, 120))}</title>"
                     f"<rect x='{x - 5:.0f}' y='{y - 5:.0f}' width='10' height='10' fill='#4e79a7'/>"
                     f"<text x='{x + 8:.0f}' y='{y + 3:.0f}'>#{c.rank}</text></g>")
    svg = (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width - 12}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='9.5'>"
           f"{''.join(lines)}{''.join(marks)}</svg>")
    # As an image: st.html sanitises with the HTML profile only and drops inline <svg>; a data: image survives.
    data = base64.b64encode(svg.encode()).decode()
    caption = f"{len(seeds)} seed(s) · {sum(1 for h in hop.values() if h)} entities reached · {len(chunks)} chunks"
    return (f"<div class='sl-col' data-stage='subgraph' style='flex-basis:{width}px;max-width:{width}px'>"
            f"<div class='sl-name'>query subgraph</div>"
            f"<div class='sl-doc'>seeds (red) · hops · chunks (squares, by rank)</div>"
            f"<img class='sl-svg' alt='{esc(caption)}' title='{esc(caption)}' width='{width - 12}' "
            f"src='data:image/svg+xml;base64,{data}'/></div>")


LABEL_CHAR_PX = 5.8  # mean width of a character of the 10 px sans-serif labels (wide enough for capitals)


def _label_text(name: str) -> str:
    return name if len(name) <= 24 else name[:23] + "…"


def svg_graph_html(nodes: pd.DataFrame, edges: pd.DataFrame, layout: Mapping[str, tuple[float, float]], *,
                   used: Used = Used(), width: int = 1200, height: int = 620) -> str:
    """The default Graph view as a still SVG page (a few kB, no script): positions from static_layout, community
    colours, every node labelled, hover titles; what the last query used in red, its seeds as larger marks. The
    pyvis page (vis.js inlined, ~0.9 MB) stays available for panning and zooming on demand."""
    if nodes.empty:
        return "<p>No entities to show.</p>"
    pad = 60
    xs = [layout.get(n, (0.0, 0.0))[0] for n in nodes["node_id"]]
    ys = [layout.get(n, (0.0, 0.0))[1] for n in nodes["node_id"]]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)

    def place(x: float, y: float) -> tuple[float, float]:
        return (pad + (x - x0) / max(x1 - x0, 1e-9) * (width - 3 * pad),  # labels run right of the last node
                pad / 2 + (y - y0) / max(y1 - y0, 1e-9) * (height - pad))

    pos = {n: place(x, y) for n, x, y in zip(nodes["node_id"], xs, ys)}
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='100%' viewBox='0 0 {width} {height}' "
           "font-family='sans-serif' font-size='10'>"]
    for row in edges.itertuples(index=False):
        if row.src in pos and row.dst in pos:
            hot = (min(row.src, row.dst), max(row.src, row.dst)) in used.edges
            (ax, ay), (bx, by) = pos[row.src], pos[row.dst]
            out.append(f"<line x1='{ax:.1f}' y1='{ay:.1f}' x2='{bx:.1f}' y2='{by:.1f}' "
                       f"stroke='{HIGHLIGHT if hot else DIM_EDGE}' stroke-width='{2 if hot else 0.7}'/>")
    # Labels never overlap: placed greedily, the nodes a query used first, then by degree; a label whose box would
    # touch one already placed is left out (the node keeps its hover title).
    # Nor do they run over another node's mark or off the picture.
    order = sorted(nodes.itertuples(index=False), key=lambda r: (r.node_id not in used.nodes, -r.degree, r.node_id))
    radius = {r.node_id: min(11.0, 3 + 0.8 * math.sqrt(max(r.degree, 0))) + (3 if r.node_id in used.seeds else 0)
              for r in order}
    marks = {n: (x - radius[n], y - radius[n], x + radius[n], y + radius[n]) for n, (x, y) in pos.items()}
    boxes: list[tuple[float, float, float, float]] = []
    labelled: dict[str, float] = {}  # node id -> the label's centre x (moved inside the picture at its edges)

    def hits(box: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
        return box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]

    for row in order:
        x, y = pos[row.node_id]
        r = radius[row.node_id]
        w = LABEL_CHAR_PX * len(_label_text(row.name))
        lx = min(max(x, w / 2 + 1), width - w / 2 - 1)
        box = (lx - w / 2 - 1, y + r + 1, lx + w / 2 + 1, y + r + 12)
        if box[3] > height:
            continue
        if any(hits(box, b) for b in boxes) or any(hits(box, m) for n, m in marks.items() if n != row.node_id):
            continue
        boxes.append(box)
        labelled[row.node_id] = lx
    for row in nodes.itertuples(index=False):
        x, y = pos[row.node_id]
        hot, seed = row.node_id in used.nodes, row.node_id in used.seeds
        r = min(11.0, 3 + 0.8 * math.sqrt(max(row.degree, 0))) + (3 if seed else 0)
        tip = f"{row.name} · {row.type} · degree {row.degree} · {row.chunks} chunks · community {row.community}"
        label = (f"<text x='{labelled[row.node_id]:.1f}' y='{y + r + 10:.1f}' text-anchor='middle'>"
                 f"{esc(_label_text(row.name))}</text>" if row.node_id in labelled else "")
        out.append(f"<g><title>{esc(tip)}</title><circle cx='{x:.1f}' cy='{y:.1f}' r='{r:.1f}' "
                   f"fill='{community_colour(row.community)}' stroke='{HIGHLIGHT if hot else '#ffffff'}' "
                   f"stroke-width='{3 if hot else 1}'/>{label}</g>")
    out.append("</svg>")
    return "<!doctype html><html><body style='margin:0'>" + "".join(out) + "</body></html>"
