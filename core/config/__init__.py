"""PipelineConfig: one validated section per stage, each with `enabled`, and a stable hash of the whole.

The sections live by role in core/config/{ingest,retrieval,graph,cascade,answer,route}.py; every name is importable
from here. This package imports nothing else of core."""
from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.config.answer import AnswerCacheConfig, AnswerConfig, LLMConfig
from core.config.base import Section, chosen_in
from core.config.cascade import CascadeGuardConfig, ExpandConfig, MMRConfig, PruneConfig, RerankConfig
from core.config.collections import CollectionsConfig
from core.config.graph import GraphConfig, RaptorConfig
from core.config.ingest import (
    ChunkingConfig,
    ContextConfig,
    EmbeddingConfig,
    LimitsConfig,
)
from core.config.retrieval import BM25Config, DenseConfig, FusionConfig
from core.config.route import (
    AgentConfig,
    CagConfig,
    RouterConfig,
    TransformMode,
    TransformsConfig,
)

__all__ = [
    "AgentConfig", "AnswerCacheConfig", "AnswerConfig", "BM25Config", "CagConfig", "CascadeGuardConfig", "ChunkingConfig", "CollectionsConfig", "ConfigError",
    "ContextConfig", "DenseConfig", "EmbeddingConfig", "ExpandConfig", "FusionConfig", "GraphConfig", "LLMConfig", "RaptorConfig",
    "LimitsConfig", "MMRConfig", "PipelineConfig", "PruneConfig", "RerankConfig", "RouterConfig", "Section",
    "TransformMode", "TransformsConfig", "chosen_in", "dump_config", "load_config_dict", "load_config_file",
    "parse_set_value",
]


class PipelineConfig(Section):
    """Every stage's settings, one section each; `stable_hash` names a configuration in traces, runs and caches."""

    limits: LimitsConfig = LimitsConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()
    fusion: FusionConfig = FusionConfig()
    context: ContextConfig = ContextConfig()
    answer: AnswerConfig = AnswerConfig()
    llm: LLMConfig = LLMConfig()
    graph: GraphConfig = GraphConfig()
    raptor: RaptorConfig = RaptorConfig()
    rerank: RerankConfig = RerankConfig()
    prune: PruneConfig = PruneConfig()
    mmr: MMRConfig = MMRConfig()
    expand: ExpandConfig = ExpandConfig()
    cascade_guard: CascadeGuardConfig = CascadeGuardConfig()
    agent: AgentConfig = AgentConfig()
    answer_cache: AnswerCacheConfig = AnswerCacheConfig()
    cag: CagConfig = CagConfig()
    router: RouterConfig = RouterConfig()
    transforms: TransformsConfig = TransformsConfig()
    collections: CollectionsConfig = CollectionsConfig()

    def stable_hash(self) -> str:
        """Hash of the canonical JSON of the values (never the descriptions): same settings, same hash everywhere."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_overrides(self, overrides: dict[str, Any]) -> PipelineConfig:
        """Return a copy with dotted keys set (`{"fusion.rrf_k": 30}`), validated."""
        data = self.model_dump(mode="json")
        for dotted, value in overrides.items():
            section, _, key = dotted.partition(".")
            if not key or section not in data or not isinstance(data[section], dict):
                raise ConfigError(f"unknown setting {dotted!r}")
            if key not in data[section]:
                raise ConfigError(f"unknown setting {dotted!r}; {section} has: {', '.join(sorted(data[section]))}")
            data[section][key] = value
        return load_config_dict(data)


class ConfigError(ValueError):
    """A configuration that cannot be used, with a message fit for the user."""


# Settings that were removed, by section: a saved configuration that still holds one loads without it.
RETIRED: dict[str, frozenset[str]] = {"llm": frozenset({"grader_model"})}  # never read by any stage (#41)


def load_config_dict(data: dict[str, Any]) -> PipelineConfig:
    data = {k: ({f: v for f, v in sec.items() if f not in RETIRED[k]} if k in RETIRED and isinstance(sec, dict)
                else sec) for k, sec in data.items()}
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid configuration: {problems}") from exc


def load_config_file(path: str | Path) -> PipelineConfig:
    """Read a TOML or JSON config file; missing sections take their defaults."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode()) if p.suffix == ".toml" else json.loads(raw)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot parse config {p.name}: {exc}") from exc
    return load_config_dict(data)


def dump_config(config: PipelineConfig) -> str:
    return json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True)


def parse_set_value(raw: str) -> Any:
    """Values from `--set key=value`: JSON where it parses (numbers, booleans), else the plain string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
