"""Session plumbing shared by the pages: the injected Deps, the active PipelineConfig, the workspace."""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.config import PipelineConfig
from core.types import DEFAULT_WORKSPACE

DEPS_KEY = "deps"  # tests put a Deps built from fakes here before the first run
CONFIG_KEY = "config"
WORKSPACE_KEY = "workspace"


def deps() -> Any:
    """The Deps for this session; built once per process by workbench.py unless a test injected its own."""
    return st.session_state[DEPS_KEY]


def config() -> PipelineConfig:
    if CONFIG_KEY not in st.session_state:
        st.session_state[CONFIG_KEY] = PipelineConfig()
    return st.session_state[CONFIG_KEY]


def set_config(cfg: PipelineConfig) -> None:
    st.session_state[CONFIG_KEY] = cfg


def workspace() -> str:
    return st.session_state.get(WORKSPACE_KEY, DEFAULT_WORKSPACE)
