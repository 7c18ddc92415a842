"""Session plumbing shared by the pages: the injected Deps, the active PipelineConfig, the workspace."""
from __future__ import annotations

import json
from typing import Any

import streamlit as st

from core.app.setup import build_deps, db_path, with_llm_provider
from core.config import PipelineConfig
from core.types import DEFAULT_WORKSPACE

DEPS_KEY = "deps"  # tests put a Deps built from fakes here before the first run
CONFIG_KEY = "config"
WORKSPACE_KEY = "workspace"
CONFIG_GEN_KEY = "config_generation"
# Session keys that arm a destructive or paid action: ticked boxes ("Delete ...", an accepted spend) and a pending
# document delete. disarm() clears them after every such action and on every workspace switch, so nothing stays one
# click from acting on a workspace the person did not arm it for.
ARMED_BOXES: tuple[str, ...] = ("ws_delete_sure", "ctx_confirm", "sweep_spend", "lab_gold_many")
ARMED_KEYS: tuple[str, ...] = ("pending_delete",)
DISARM_KEY = "_disarm_pending"


@st.cache_resource(show_spinner="Loading the embedding model and opening the store…")
def _shared_deps(db: str, model: str, runtime: str = "torch") -> Any:
    # One store connection and one model per process, shared by every session (cursors per call in the store).
    # The runtime is part of the key: it changes the vectors (and their model id), like the model does.
    cfg = PipelineConfig().with_overrides({"embedding.model": model, "embedding.runtime": runtime})
    return build_deps(cfg, db=db, api_key=_secret_key())


@st.cache_resource(show_spinner="Starting the local LLM…")
def _provider_deps(db: str, model: str, runtime: str, llm_settings: str) -> Any:
    # The shared deps with the LLM that the sidebar's provider settings name (llm.provider): one client (one loaded
    # GGUF model) per process and setting, the store and embedder shared with the Claude deps.
    cfg = PipelineConfig().with_overrides({f"llm.{k}": v for k, v in json.loads(llm_settings).items()})
    return with_llm_provider(_shared_deps(db, model, runtime), cfg, api_key=_secret_key())


def _secret_key() -> str | None:
    # Streamlit secrets are the other accepted home of the Anthropic key; it goes to the SDK client only.
    try:
        return st.secrets.get("ANTHROPIC_API_KEY")
    except Exception:  # no secrets.toml at all: core.deps falls back to the ANTHROPIC_API_KEY variable
        return None


def deps() -> Any:
    """The Deps for this session. Tests inject their own (fakes) before the first run; otherwise the shared one,
    re-keyed by the configured model so a model change takes effect without a restart. Built here rather than in
    workbench.py so a page opened by its own URL in a fresh session works too."""
    if DEPS_KEY not in st.session_state or st.session_state.get("_deps_auto"):
        # core/deps.py (through core.app.setup) is the one place that knows RAG_DB and the default path.
        emb, llm = config().embedding, config().llm
        st.session_state[DEPS_KEY] = (_shared_deps(db_path(), emb.model, emb.runtime) if llm.provider == "anthropic"
                                      else _provider_deps(db_path(), emb.model, emb.runtime, llm.model_dump_json()))
        st.session_state["_deps_auto"] = True
    return st.session_state[DEPS_KEY]


def config() -> PipelineConfig:
    if CONFIG_KEY not in st.session_state:
        st.session_state[CONFIG_KEY] = PipelineConfig()
    return st.session_state[CONFIG_KEY]


def set_config(cfg: PipelineConfig, *, external: bool = False) -> None:
    """`external`: the configuration comes from outside the settings widgets ("Use this", a workspace switch, a
    restore), so every settings widget takes its value from it on its next build (pages/_form.py): a widget that
    kept its own old value would otherwise write it back over the new configuration, and the Search Lab would run
    a third configuration, not the one chosen."""
    st.session_state[CONFIG_KEY] = cfg
    if external:
        st.session_state[CONFIG_GEN_KEY] = config_generation() + 1


def config_generation() -> int:
    """How many times the configuration was set from outside the widgets in this session."""
    return int(st.session_state.get(CONFIG_GEN_KEY, 0))


def workspace() -> str:
    return st.session_state.get(WORKSPACE_KEY, DEFAULT_WORKSPACE)


def disarm() -> None:
    """Clear every armed confirmation. A box is unticked at the start of the next run (apply_disarm), before its
    widget is built: a value set through session state then is pushed to the browser, while a key merely dropped
    leaves the browser showing the box ticked (seen in Chromium), and a widget built in this run cannot be set."""
    for key in ARMED_KEYS:
        st.session_state.pop(key, None)
    st.session_state[DISARM_KEY] = True


def apply_disarm() -> None:
    """Untick the armed boxes if disarm() asked for it; call before any of them is built (the sidebar does)."""
    if st.session_state.pop(DISARM_KEY, False):
        for key in ARMED_BOXES:
            if key in st.session_state:
                st.session_state[key] = False
