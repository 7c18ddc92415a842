"""Evaluate page: load a golden set, run configurations A and B over it, compare metrics, plots and single questions."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.app import corpus_ops
from core.app.report import escape_md
from core.app.routing import routed_variants, router_report
from core.app.setup import db_path
from core.config.saved import FORMATS, config_diff, list_configs, save_config
from core.eval import report as rep
from core.eval.datasets import (
    DatasetError,
    available_datasets,
    default_root,
    describe,
    gold_documents_present,
    load_dataset,
    parse_jsonl,
    problems_as_rows,
)
from core.eval.run import MISSING_BUILD, NamedConfig, compare, load_run, per_query_diff, run_eval
from pages import _state
from pages._golden_panel import golden_panel, golden_sources
from pages._sweep_panel import tuning_panels

RUNS_KEY = "eval_runs"  # eval ids of the A and B runs on show
SAVED_KEY = "eval_saved_msg"  # confirmation of the last Save, shown after the rerun that lists the new config
deps, ws = _state.deps(), _state.workspace()
# Saved configurations live beside the database in use (RAG_DB), not in a fixed folder; tests set their own.
data_dir = st.session_state.get("data_dir") or str(Path(db_path()).parent)
st.title("Evaluate")

# -- golden set ------------------------------------------------------------------------------------------------------
root = default_root()
sources = available_datasets(root) + golden_sources(deps, ws) + ["upload", "paste"]
src = st.radio("Golden set", sources, horizontal=True, key="eval_source")
gs = None
try:
    if src == "upload":
        up = st.file_uploader("JSONL golden set", type=["jsonl", "json"], key="eval_upload")
        gs = parse_jsonl(up.getvalue(), up.name) if up else None
    elif src == "paste":
        text = st.text_area("One JSON object per line", key="eval_paste", height=120)
        gs = parse_jsonl(text, "pasted") if text.strip() else None
    else:
        gs = load_dataset(src, root, store=deps.store)
except DatasetError as exc:
    st.error(escape_md(exc))  # names the uploaded file
if gs is None:
    st.caption('Each line: {"id", "query", "type", "answerable", "gold": [{"doc": file name, "span": text}], '
               '"answer"}')
else:
    d = describe(gs)
    # Types and the workspace come from the golden-set file: escaped like every user string shown as Markdown.
    st.caption(f"{d['questions']} questions ({d['with_gold']} with gold, {d['unanswerable']} unanswerable) · types "
               + escape_md(", ".join(f"{t} {n}" for t, n in d["types"].items()))
               + (f" · evaluated in workspace '{escape_md(gs.workspace)}'" if gs.workspace else ""))
    present, named, held = gold_documents_present(gs, deps.store, gs.workspace or ws)
    if named and not present and held:
        st.info(f"None of the {named} documents this set asks about is in workspace '{escape_md(gs.workspace or ws)}', "
                "which holds other documents: its questions would all be left out. Generate a golden set from this "
                "workspace's own documents below (Golden sets from this workspace's documents), or ingest the set's "
                "corpus into an empty workspace.")
    if gs.problems:
        st.warning(f"{len(gs.problems)} line(s) with problems; the other lines are used")
        st.dataframe(problems_as_rows(gs.problems), hide_index=True, key="eval_problems")

# -- configurations ----------------------------------------------------------------------------------------------------
session_cfg = _state.config()
saved = {f"{c.name} · {c.hash}": c.config for c in list_configs(ws, data_dir) if c.config is not None}
# "routed" and "single pipeline": the session's settings with the router on (transforms left to each route) / off
variants = {f"{n} · {c.stable_hash()}": c for n, c in routed_variants(session_cfg).items()}
options = {f"session · {session_cfg.stable_hash()}": session_cfg, **saved, **variants}
with st.expander("Save the session configuration"):
    c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="bottom")
    name = c1.text_input("Name", key="cfg_name")
    fmt = c2.radio("Format", [f.lstrip(".") for f in FORMATS], horizontal=True, key="cfg_fmt")
    if st.session_state.get(SAVED_KEY):
        st.success(st.session_state.pop(SAVED_KEY), icon=":material/check_circle:")
    clicked = c3.button("Save", key="cfg_save")
    if clicked and not name.strip():
        st.warning("Type a name for the configuration first.")
    elif clicked:
        try:
            path = save_config(name, session_cfg, ws, fmt=fmt, data_dir=data_dir)
            # The rerun below (so the new config shows up in the A/B lists) would wipe a message shown now.
            st.session_state[SAVED_KEY] = f"Saved '{escape_md(name)}' ({session_cfg.stable_hash()}) to {escape_md(str(path))}"
            st.rerun()
        except ValueError as exc:
            st.error(escape_md(exc))
labels = list(options)
ca, cb, cr = st.columns([2, 2, 1])
a_label = ca.selectbox("Configuration A", labels, key="cfg_a")
# B starts on the first option that differs from the session's settings (with the router on by default, "routed"
# is the session itself and comparing it with A would measure nothing).
b_first = next((i for i, label in enumerate(labels) if options[label].stable_hash() != session_cfg.stable_hash()),
               min(1, len(labels) - 1))
b_label = cb.selectbox("Configuration B", labels, index=b_first, key="cfg_b")
repeats = cr.number_input("Repeats", 1, 10, 1, key="eval_repeats", help="for non-deterministic stages")
diff = config_diff(options[a_label], options[b_label])
st.caption("B changes: " + (", ".join(f"{k} {escape_md(repr(a))} → {escape_md(repr(b))}"
                                      for k, (a, b) in diff.items()) or "nothing (same settings)"))

if st.button("Run A and B", type="primary", key="eval_run", disabled=gs is None):
    bar = st.progress(0.0, text="preparing the corpus…")
    pairs = [NamedConfig(a_label.split(" · ")[0], options[a_label])]
    if b_label != a_label:
        pairs.append(NamedConfig(b_label.split(" · ")[0], options[b_label]))
    runs = run_eval(gs, pairs, deps, workspace=ws, repeats=int(repeats),
                    progress=lambda d, t, m: bar.progress(min(1.0, d / max(t, 1)), text=f"{d}/{t} {escape_md(m)}"))
    bar.empty()
    st.session_state[RUNS_KEY] = [(r.workspace, r.eval_id) for r in runs]

# -- the router itself: its held-out test split, with the session's thresholds ----------------------------------------
with st.expander("Router: confusion matrix on its test split"):
    rc = session_cfg.router
    rr = router_report(min_confidence=rc.min_confidence, refuse_confidence=rc.refuse_confidence)
    m1, m2, m3 = st.columns(3)
    m1.metric("macro-F1 (six classes)", f"{rr.macro_f1:.3f}", help="target ≥ 0.90; from the classifier's best class")
    m2.metric("costly mistakes", f"{rr.costly_rate:.2%}", help=f"{rr.costly} of {rr.corpus_questions} corpus questions "
              "sent to chitchat or out-of-scope (no retrieval); target ≤ 1%")
    m3.metric("abstained", f"{rr.abstain_rate:.1%}", help="low confidence: the default pipeline")
    st.plotly_chart(rep.router_confusion_fig(rr.rows, rr.columns, rr.matrix,
                                             f"{rr.n} held-out questions · router.min_confidence {rc.min_confidence:g}"
                                             f" · router.refuse_confidence {rc.refuse_confidence:g}"),
                    key="fig_router_confusion")
    st.caption("Offline router (core/models/data/router_model.npz) on the test split of train/sets/routing.jsonl "
               "(public data), never used in fitting; each question with its corpus-coverage feature as stored. The LLM router "
               "(with a key) is not scored here.")

golden_panel(deps, ws)  # generate and curate this workspace's own golden sets
tuning_panels(gs, deps, ws)  # calibration and sweep: pages/_calibration_panel.py, pages/_sweep_panel.py

# -- past runs: any two stored runs can be reopened ------------------------------------------------------------------
run_ws = (gs.workspace if gs is not None and gs.workspace else ws)
past = corpus_ops.eval_runs(deps.store, run_ws)
if past:
    fmt_run = {r.eval_id: f"{r.created_at:%Y-%m-%d %H:%M} · {r.dataset} · {r.config_name} · "
                             f"{r.config_hash}" for r in past}
    pick = st.multiselect("Reopen stored runs (A, then B)", list(fmt_run), format_func=fmt_run.get,
                          max_selections=2, key="eval_reopen")
    if pick:
        st.session_state[RUNS_KEY] = [(run_ws, e) for e in pick]

shown = [r for r in (load_run(deps.store, e, w) for w, e in st.session_state.get(RUNS_KEY, [])) if r]
if not shown:
    st.stop()

# -- results -----------------------------------------------------------------------------------------------------------
for r in shown:
    for note in r.notes:  # a stage skipped for a missing build is a warning: the run did not test that stage
        (st.warning if note.startswith(MISSING_BUILD) else st.caption)(f"{escape_md(r.config_name)}: {escape_md(note)}")
if len(shown) == 2:
    a, b = shown
    st.subheader(f"A = {escape_md(a.config_name)} ({a.config_hash}) · "
                 f"B = {escape_md(b.config_name)} ({b.config_hash})")
    st.dataframe(rep.comparison_frame(compare(a, b)), hide_index=True, key="eval_cmp")
else:
    st.subheader(f"{escape_md(shown[0].config_name)} ({shown[0].config_hash})")
    st.dataframe(rep.metrics_frame(shown), hide_index=True, key="eval_metrics")

t_plots, t_stages, t_query, t_types = st.tabs(["Plots", "Per stage", "Per question", "By type"])
with t_plots:
    st.plotly_chart(rep.recall_curve_fig(shown), key="fig_recall")
    st.plotly_chart(rep.funnel_fig(shown), key="fig_funnel")
    st.plotly_chart(rep.latency_fig(shown), key="fig_latency")
with t_stages:
    for r in shown:
        st.caption(f"{escape_md(r.config_name)}: recall of each stage's whole list; token share = tokens kept of the "
                   "largest list")
        st.dataframe(rep.stage_frame(r), hide_index=True, key=f"stages_{r.eval_id}")
        idle = rep.idle_stages(r)
        if idle:
            st.caption("no candidates to score (skipped, or no list of their own): " + escape_md(", ".join(idle)))
        rounds = r.round_recall()
        if rounds:  # the agentic loop ran on some questions: what each round's evidence pool gained
            st.caption(f"{escape_md(r.config_name)}: agentic loop, recall of the evidence pool after each round "
                       f"(over the {rounds[0]['questions']} questions where it ran; a question that stopped "
                       "earlier keeps its last pool); added = gain over the round before")
            st.dataframe(rounds, hide_index=True, key=f"rounds_{r.eval_id}")
with t_types:
    for r in shown:
        st.caption(escape_md(r.config_name))
        st.dataframe(rep.by_type_frame(r), hide_index=True, key=f"types_{r.eval_id}")
with t_query:
    a, b = shown[0], shown[-1]
    metric = st.selectbox("Metric", [m for m in rep.metric_names([a]) if a.metrics.get(m) is not None] or ["mrr"],
                          key="pq_metric")
    rows = per_query_diff(a, b, metric)
    st.dataframe(rep.per_query_frame(rows), hide_index=True, key="eval_per_query")
    qid = st.selectbox("Open one question", [r["qid"] for r in rows], key="pq_open",
                       format_func=lambda q: f"{q} · {next(r['query'] for r in rows if r['qid'] == q)[:80]}")
    ra = next(r for r in a.results if r.qid == qid)
    rb = next(r for r in b.results if r.qid == qid)
    texts = corpus_ops.chunk_texts(
        deps.store, [c["chunk_id"] for r in (ra, rb) for s in r["stages"] for c in s["candidates"][:10]], a.workspace)
    for col, run, res in zip(st.columns(2), (a, b), (ra, rb)):
        with col:
            st.markdown(f"**{escape_md(run.config_name)}** · {run.config_hash}")
            st.dataframe(rep.gold_status(res), hide_index=True, key=f"gold_{run.eval_id}")
            for s in res["stages"]:
                st.markdown(f"*{s['stage']}*" + (f" — skipped: {escape_md(s['skip_reason'])}" if s["skipped"] else
                                                  f" — recall {s['recall'] if s['recall'] is not None else '—'}"))
                if not s["skipped"]:
                    frame = rep.stage_candidates_frame(s, texts)
                    st.dataframe(frame.style.apply(lambda row: ["background-color: #fff3b0" if row["gold"] else ""
                                                                for _ in row], axis=1),
                                 hide_index=True, key=f"tr_{run.eval_id}_{s['stage']}")
