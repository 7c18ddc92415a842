"""Which client answers the workbench's LLM calls (llm.provider): Claude, an OpenAI-compatible server, or a GGUF file
in process. Each implements core.models.llm.LLM; what a provider lacks (a key, a URL, a file, the runtime) gives the
offline stand-in and a notice saying why, never a silent fallback."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.models.gguf import GGUFLLM, runtime_missing
from core.models.llm import LLM, LedgerSink, OfflineLLM, build_llm
from core.models.openai_compat import OpenAICompatLLM

PROVIDERS = ("anthropic", "openai-compatible", "gguf")


def build_provider(
    cfg: Any, *, anthropic_key: str | None = None, anthropic_base_url: str | None = None,
    local_key: str | None = None, ledger: LedgerSink | None = None,
) -> tuple[LLM, str | None]:
    """The LLM the config's `llm` section names, and a notice for the user when it could not be made."""
    provider = getattr(cfg, "provider", "anthropic")
    if provider == "openai-compatible":
        base_url, model = str(cfg.base_url or "").strip(), str(cfg.model or "").strip()
        if not base_url.startswith(("http://", "https://")) or not model:
            reason = "llm.provider = openai-compatible needs llm.base_url (the server's /v1 root) and llm.model"
            return OfflineLLM(reason), f"{reason}: answers are extractive and contexts offline"
        return OpenAICompatLLM(base_url, model, api_key=local_key or None, ledger=ledger,
                               max_retries=cfg.max_retries, timeout_s=cfg.timeout_s,
                               cache_prompt=cfg.reuse_prefix), None
    if provider == "gguf":
        path = str(cfg.gguf_path or "").strip()
        why = runtime_missing()
        if why is None and not path:
            why = "llm.provider = gguf needs llm.gguf_path (a GGUF model file)"
        elif why is None and not Path(path).is_file():
            why = f"llm.gguf_path {Path(path).name!r} is not a file"
        if why is not None:
            return OfflineLLM(why), f"{why}: answers are extractive and contexts offline"
        return GGUFLLM(path, ledger=ledger, n_ctx=cfg.context_tokens, n_threads=cfg.threads,
                       timeout_s=max(cfg.timeout_s, 60.0), reuse_prefix=cfg.reuse_prefix), None
    return build_llm(anthropic_key, base_url=anthropic_base_url, ledger=ledger, max_retries=cfg.max_retries,
                     timeout_s=cfg.timeout_s, cache_ttl=cfg.cache_ttl)


def provider_label(llm: Any) -> str:
    """"provider:model" of a client for notices and the sidebar ("offline" for the stand-in)."""
    if not getattr(llm, "available", False):
        return "offline"
    label = getattr(llm, "label", None)
    return label if isinstance(label, str) else str(getattr(llm, "name", "llm"))
