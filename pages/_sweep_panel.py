"""Evaluate page panel: which technique helps here — the standard grid over the golden set on show, ranked with
"no clear difference" bands, resumable, a cost estimate first, the set's validity report and the verdict against the
current configuration; "use this" makes one the workspace's configuration (and says when the set cannot tell it from
the current one)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.app.report import escape_md
from core.app.workspaces import load_workspace_config, save_workspace_config
from core.config import PipelineConfig
from core.eval.datasets import GoldenSet
from core.eval.sweep import STANDARD_GRID, WINNER, grid_configs, plan, run_sweep
from core.eval.validity import Validity
from pages import _state
from pages._calibration_panel import calibration_panel

RESULT_KEY = "sweep_result"
USED_KEY = "sweep_used_msg"
STARTED_KEY = "_workspace_config_restored"


def tuning_panels(gs: GoldenSet | None, deps: Any, workspace: str) -> None:
    """What the Evaluate page shows for tuning a workspace: its answer calibration, then the sweep."""
    calibration_panel(gs, deps, workspace)
    sweep_panel(gs, deps, workspace)


def sweep_panel(gs: GoldenSet | None, deps: Any, workspace: str) -> None:
    with st.expander("Which technique helps here: sweep the standard grid over this set"):
        if msg := st.session_state.pop(USED_KEY, None):
            st.success(msg)
        if gs is None:
            st.caption("Choose a golden set above.")
            return
        base = _state.config()
        configs = grid_configs(base, STANDARD_GRID)
        est, todo = plan(gs, configs, deps, workspace=workspace)
        usd = sum(v for n, v in est.items() if any(nc.name == n for nc in todo))
        st.caption(f"{len(configs)} configurations ({', '.join(nc.name for nc in configs)}) over "
                   f"{len(gs.queries)} questions; {len(todo)} to run, {len(configs) - len(todo)} stored from an "
                   "earlier sweep of this set. LLM cost estimate: "
                   + (f"up to ${usd:.4f}" if usd else "$0 (offline)"))
        sure = st.checkbox(f"Spend up to ${usd:.4f}", key="sweep_spend") if usd else True
        if st.button("Run the sweep", key="sweep_run", type="primary", disabled=not sure):
            bar = st.progress(0.0, text="preparing…")
            res = run_sweep(gs, configs, deps, workspace=workspace, current=base,
                            progress=lambda d, t, m: bar.progress(min(1.0, d / max(t, 1)),
                                                                  text=f"{d}/{t} {escape_md(m)}"))
            bar.empty()
            st.session_state[RESULT_KEY] = (gs.name, res.table(), res.ran, res.resumed, res.verdict, res.validity,
                                            res.missing_builds())
        shown = st.session_state.get(RESULT_KEY)
        if not shown or shown[0] != gs.name:
            return
        _, table, ran, resumed, verdict, validity, missing = shown
        for n in missing:
            st.warning(escape_md(n))
        if validity is not None:
            _validity_report(validity)
        st.caption(f"Ranked by recall@5, then MRR; band 1 = no clear difference from the best (inside the paired "
                   f"per-question noise); 'vs current' = against the current configuration. {ran} run now, "
                   f"{resumed} from the store.")
        # One hash from the table to the running Search Lab: each row shows the hash of the configuration "Use this"
        # keeps (the sweep measured it with the answer cache off, FIXED, which changes no ranking).
        kept = {nc.name: nc.config for nc in grid_configs(base, STANDARD_GRID, measured=False)}
        table = [{**r, "hash": kept[r["config"]].stable_hash()} if r.get("config") in kept else r for r in table]
        st.dataframe(table, hide_index=True, key="sweep_table")
        st.caption("hash: the configuration 'Use this' keeps and the Search Lab then runs (measured with the answer "
                   "cache off, so earlier answers could not replay).")
        names = [r["config"] for r in table]
        if verdict is not None:
            say = st.success if verdict.verdict == WINNER else st.info
            say(("Recommendation: " if verdict.verdict == WINNER else "No clear winner — keep the current "
                 "configuration. ") + escape_md(verdict.reason), icon=":material/balance:")
        first = names.index(verdict.recommendation) if verdict is not None and verdict.recommendation in names else 0
        pick = st.selectbox("Configuration", names, index=first, key="sweep_pick")
        if verdict is not None and pick != verdict.current and verdict.inside_band(pick):
            st.warning(f"'{escape_md(pick)}' is inside the noise band of the current configuration "
                       f"('{escape_md(verdict.current)}'): this set cannot tell them apart, so choosing it is a "
                       "change the set gives no reason for.", icon=":material/warning:")
        elif verdict is not None and verdict.vs_current.get(pick) == "worse":
            st.warning(f"'{escape_md(pick)}' is clearly worse than the current configuration on this set.",
                       icon=":material/warning:")
        elif verdict is not None and verdict.blocked and verdict.vs_current.get(pick) == "better":
            st.warning(f"{escape_md(verdict.blocked)}: its lead here is not evidence.", icon=":material/warning:")
        if st.button("Use this", key="sweep_use"):
            chosen = kept.get(pick, base)  # 'current': the configuration in use
            _state.set_config(chosen, external=True)
            save_workspace_config(deps.store, workspace, chosen)
            st.session_state[USED_KEY] = (f"'{escape_md(pick)}' ({chosen.stable_hash()}) is now the configuration "
                                          f"of workspace '{escape_md(workspace)}': Search Lab starts from it")
            st.rerun()


def _validity_report(v: Validity) -> None:
    """The set's validity report: the sweep will not adopt a change from a set that failed it."""
    if v.ok:
        st.caption(f"Validity of this set: {escape_md(v.label())}")
    else:
        st.warning(f"This set {escape_md(v.label())}. The sweep will not recommend a change from it.",
                   icon=":material/rule:")
    st.dataframe(v.rows(), hide_index=True, key="sweep_validity")


def restore_workspace_config(store: Any) -> None:
    """Once per session: start from the active workspace's stored configuration (the one "use this" saved)."""
    if st.session_state.get(STARTED_KEY):
        return
    st.session_state[STARTED_KEY] = True
    cfg, _ = load_workspace_config(store, _state.workspace())
    # only over the untouched default: a session that already chose settings keeps them
    if cfg is not None and _state.config().stable_hash() == PipelineConfig().stable_hash():
        _state.set_config(cfg, external=True)
