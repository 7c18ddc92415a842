"""The config's own metadata, read from the pydantic fields: type, choices, bounds, description, provenance.

Pages build their widgets from it and core/config/doc.py writes docs/config.md from it, so a bound, a choice or a
description is written once, on the field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from core.config import PipelineConfig, Section

Kind = Literal["bool", "int", "float", "str", "choice"]


@dataclass(frozen=True)
class FieldSpec:
    """One setting as declared: `kind` says which widget fits; bounds are None where the field declares none."""

    section: str
    name: str
    kind: Kind
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    chosen_in: str = ""  # bench/results file the default was chosen from ("" = none)
    why: str = ""
    expert: bool = False  # a tuning constant (core.config.base.EXPERT): listed after the user-facing settings

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"


def sections() -> dict[str, type[Section]]:
    """PipelineConfig's sections by name, in declaration order."""
    return {name: f.annotation for name, f in PipelineConfig.model_fields.items()}


def _kind(annotation: Any) -> tuple[Kind, tuple[str, ...]]:
    if get_origin(annotation) is Literal:
        return "choice", tuple(str(a) for a in get_args(annotation))
    for t, kind in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if annotation is t:
            return kind, ()
    raise TypeError(f"unsupported setting type {annotation!r}")


def _spec(section: str, name: str, info: FieldInfo) -> FieldSpec:
    kind, choices = _kind(info.annotation)
    bounds = {b: getattr(m, b) for m in info.metadata for b in ("ge", "gt", "le", "lt") if hasattr(m, b)}
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    return FieldSpec(section, name, kind, info.default, info.description or "", choices,
                     chosen_in=str(extra.get("chosen_in", "")), why=str(extra.get("why", "")),
                     expert=bool(extra.get("expert", False)), **bounds)


def field_specs(section: str) -> list[FieldSpec]:
    """Every setting of one section, in declaration order."""
    return [_spec(section, name, info) for name, info in sections()[section].model_fields.items()]


def field_spec(dotted: str) -> FieldSpec:
    """One setting by its dotted name, e.g. "rerank.top_n"."""
    section, _, name = dotted.partition(".")
    fields = sections().get(section)
    if fields is None or name not in fields.model_fields:
        raise KeyError(f"unknown setting {dotted!r}")
    return _spec(section, name, fields.model_fields[name])
