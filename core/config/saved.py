"""Named pipeline configurations saved as JSON or TOML files under data/workspaces/<workspace>/configs/."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import ConfigError, PipelineConfig, dump_config, load_config_file

DATA_DIR = Path("data")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
FORMATS = (".json", ".toml")


@dataclass(frozen=True)
class SavedConfig:
    name: str
    path: Path
    config: PipelineConfig | None
    error: str | None = None  # a file that no longer validates is listed with the reason, not hidden

    @property
    def hash(self) -> str:
        return self.config.stable_hash() if self.config is not None else "-"

    @property
    def label(self) -> str:
        return f"{self.name} · {self.hash}"


def configs_dir(workspace: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / "workspaces" / workspace / "configs"


def check_name(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise ConfigError(f"config name {name!r}: use letters, digits, '_', '-', '.' (up to 64, no leading dot)")
    return name


def to_toml(config: PipelineConfig) -> str:
    """TOML for our two-level config (tables of scalars and flat lists). JSON string and number literals are valid
    TOML, so values are written with json.dumps; None has no TOML form and is refused."""
    lines: list[str] = []
    for section, values in config.model_dump(mode="json").items():
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: only sections of settings can be written as TOML; save as JSON")
        lines.append(f"[{section}]")
        for key, value in values.items():
            if value is None or isinstance(value, dict):
                raise ConfigError(f"{section}.{key} cannot be written as TOML; save as JSON")
            lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
        lines.append("")
    return "\n".join(lines)


def save_config(name: str, config: PipelineConfig, workspace: str, *, fmt: str = "json",
                data_dir: Path = DATA_DIR) -> Path:
    """Write (or overwrite) a named config; the other format's file of the same name is removed so a name is
    never ambiguous."""
    name = check_name(name)
    ext = "." + fmt.lstrip(".").lower()
    if ext not in FORMATS:
        raise ConfigError(f"format {fmt!r}: use json or toml")
    folder = configs_dir(workspace, data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    body = dump_config(config) + "\n" if ext == ".json" else to_toml(config)
    path = folder / f"{name}{ext}"
    tmp = path.with_suffix(ext + ".tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(path)  # atomic: a crash never leaves half a config behind
    for other in FORMATS:
        if other != ext and (folder / f"{name}{other}").exists():
            (folder / f"{name}{other}").unlink()
    if load_config_file(path).stable_hash() != config.stable_hash():
        raise ConfigError(f"{path.name}: the saved file does not read back as the same configuration")
    return path


def list_configs(workspace: str, data_dir: Path = DATA_DIR) -> list[SavedConfig]:
    folder = configs_dir(workspace, data_dir)
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.iterdir()):
        if p.suffix not in FORMATS or not p.is_file():
            continue
        try:
            out.append(SavedConfig(p.stem, p, load_config_file(p)))
        except ConfigError as exc:
            out.append(SavedConfig(p.stem, p, None, str(exc)))
    return out


def load_named(name: str, workspace: str, data_dir: Path = DATA_DIR) -> PipelineConfig:
    for ext in FORMATS:
        p = configs_dir(workspace, data_dir) / f"{check_name(name)}{ext}"
        if p.is_file():
            return load_config_file(p)
    known = ", ".join(c.name for c in list_configs(workspace, data_dir)) or "none saved yet"
    raise ConfigError(f"no saved config {name!r} in workspace '{workspace}' (known: {known})")


def delete_config(name: str, workspace: str, data_dir: Path = DATA_DIR) -> bool:
    gone = False
    for ext in FORMATS:
        p = configs_dir(workspace, data_dir) / f"{check_name(name)}{ext}"
        if p.is_file():
            p.unlink()
            gone = True
    return gone


def resolve_config(ref: str, workspace: str, data_dir: Path = DATA_DIR) -> tuple[str, PipelineConfig]:
    """A CLI --config value: a path to a TOML/JSON file, or the name of a saved config. Returns (name, config)."""
    p = Path(ref)
    if p.suffix in FORMATS and p.is_file():
        return p.stem, load_config_file(p)
    return ref, load_named(ref, workspace, data_dir)


def config_diff(a: PipelineConfig, b: PipelineConfig) -> dict[str, tuple[Any, Any]]:
    """Dotted settings where two configs differ: what an A/B actually changes."""
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    out: dict[str, tuple[Any, Any]] = {}
    for section in sorted(set(da) | set(db)):
        sa, sb = da.get(section, {}), db.get(section, {})
        if not isinstance(sa, dict) or not isinstance(sb, dict):
            if sa != sb:
                out[section] = (sa, sb)
            continue
        for key in sorted(set(sa) | set(sb)):
            if sa.get(key) != sb.get(key):
                out[f"{section}.{key}"] = (sa.get(key), sb.get(key))
    return out
