"""The sidebar's LLM provider: Claude, an OpenAI-compatible server or a GGUF file (llm.provider), and who answers."""
from __future__ import annotations

import streamlit as st

from core.app.report import escape_md
from core.app.setup import PROVIDERS, provider_label
from core.config import ConfigError
from pages import _state


def llm_panel() -> None:
    deps, cfg = _state.deps(), _state.config()
    st.text(f"LLM: {provider_label(deps.llm)}")
    with st.expander("LLM provider"):
        llm = cfg.llm
        provider = st.selectbox("Provider", PROVIDERS, index=PROVIDERS.index(llm.provider), key="llm_provider")
        values: dict[str, object] = {"llm.provider": provider}
        if provider == "openai-compatible":
            values["llm.base_url"] = st.text_input("Base URL (the /v1 root)", llm.base_url, key="llm_base_url",
                                                   placeholder="http://127.0.0.1:8080/v1")
            values["llm.model"] = st.text_input("Model", llm.model, key="llm_model")
        elif provider == "gguf":
            values["llm.gguf_path"] = st.text_input("GGUF model file", llm.gguf_path, key="llm_gguf_path")
            values["llm.threads"] = int(st.number_input("Threads", 1, 256, llm.threads, key="llm_threads"))
        if st.button("Use this provider", key="llm_apply"):
            try:
                _state.set_config(cfg.with_overrides(values))
            except ConfigError as exc:
                st.error(escape_md(str(exc)))
                return
            st.rerun()
