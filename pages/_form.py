"""Widgets built from the config's own metadata: one call per setting; its bounds, choices and help come from the field.

A page names the setting ("rerank.top_n"), its label and key; the field in core/config/ says the type, the range,
the Literal choices and the description shown as help. A page may add a bound only where the field declares none
(an exclusive `gt`, or no upper limit) and may offer a subset of the choices, never others."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import streamlit as st

from core.config import PipelineConfig
from core.config.meta import FieldSpec, field_spec
from pages import _state

Widget = Literal["toggle", "checkbox", "selectbox", "radio", "number", "slider", "text"]
SHOWN_KEY = "form_settings_shown"  # every setting a widget was built for this session (tests read it)
SYNCED_KEY = "form_synced_generation"  # widget key -> the configuration generation its value was taken from


def follow_config(key: str, value: Any) -> None:
    """Before a keyed widget is built: when the configuration was set from outside since this widget last showed
    (pages._state.set_config(external=True)), give it the configuration's value through session state, which the
    browser then shows; otherwise the widget keeps its own state."""
    gen = _state.config_generation()
    synced = st.session_state.setdefault(SYNCED_KEY, {})
    if key in synced and synced[key] != gen and key in st.session_state:
        st.session_state[key] = value
    synced[key] = gen
_DEFAULT_WIDGET: dict[str, Widget] = {"bool": "toggle", "choice": "selectbox", "int": "number", "float": "number",
                                      "str": "text"}


def bounds(spec: FieldSpec, min_value: float | None = None, max_value: float | None = None
           ) -> tuple[float | None, float | None]:
    """The widget's inclusive range: the field's ge / le, else the page's own bound (refused where the field has
    one, so a bound is written once; an exclusive gt or lt must be met by the page's bound)."""
    lo, hi = spec.ge, spec.le
    if min_value is not None:
        if lo is not None:
            raise ValueError(f"{spec.dotted} declares ge={lo:g}: the widget takes it from the field")
        if spec.gt is not None and not min_value > spec.gt:
            raise ValueError(f"{spec.dotted} needs > {spec.gt:g}, the widget's minimum is {min_value:g}")
        lo = min_value
    if max_value is not None:
        if hi is not None:
            raise ValueError(f"{spec.dotted} declares le={hi:g}: the widget takes it from the field")
        if spec.lt is not None and not max_value < spec.lt:
            raise ValueError(f"{spec.dotted} needs < {spec.lt:g}, the widget's maximum is {max_value:g}")
        hi = max_value
    cast = int if spec.kind == "int" else float  # Streamlit refuses int bounds beside a float value
    return (None if lo is None else cast(lo)), (None if hi is None else cast(hi))


def choices(spec: FieldSpec, options: Sequence[str] | None = None) -> list[str]:
    """The options a widget offers: the field's Literal choices, or a subset of them; a free-text field offers the
    page's options (e.g. route names the router loaded)."""
    if spec.kind != "choice":
        if options is None:
            raise ValueError(f"{spec.dotted} is a {spec.kind} setting: give the options to choose from")
        return list(options)
    if options is None:
        return list(spec.choices)
    unknown = [o for o in options if o not in spec.choices]
    if unknown:
        raise ValueError(f"{spec.dotted} has no choice {', '.join(map(repr, unknown))}; it has {spec.choices}")
    return list(options)


def setting(cfg: PipelineConfig, dotted: str, label: str, *, key: str, where: Any = None,
            widget: Widget | None = None, help: str | None = None, disabled: bool = False,
            min_value: float | None = None, max_value: float | None = None, step: float | None = None,
            format: str | None = None, options: Sequence[str] | None = None,
            labels: Mapping[str, str] | None = None, from_config: bool = True,
            label_visibility: Literal["visible", "hidden", "collapsed"] = "visible") -> Any:
    """The widget for one setting, in `where` (a column, a popover; default the page), showing cfg's value.

    help: None = the field's description, "" = none. labels: display text per choice. from_config=False: the
    widget starts at its first option and keeps its own state (a per-query choice such as the route override)."""
    spec = field_spec(dotted)
    st.session_state.setdefault(SHOWN_KEY, set()).add(dotted)
    where = st if where is None else where
    kind = widget or ("selectbox" if options is not None and spec.kind == "str" else _DEFAULT_WIDGET[spec.kind])
    section, _, name = dotted.partition(".")
    value = getattr(getattr(cfg, section), name)
    tip = (spec.description + (" (expert tuning: a default chosen by measuring)" if spec.expert else "")
           if help is None else help) or None
    common: dict[str, Any] = {"key": key, "help": tip, "disabled": disabled}
    if label_visibility != "visible":
        common["label_visibility"] = label_visibility
    if kind in ("toggle", "checkbox"):
        if from_config:
            follow_config(key, bool(value))
        return bool(getattr(where, kind)(label, bool(value), **common))
    if kind in ("selectbox", "radio"):
        opts = choices(spec, options)
        if from_config and value in opts:
            follow_config(key, value)
        if labels is not None and set(labels) - set(opts):
            raise ValueError(f"{dotted}: labels for choices not offered: {sorted(set(labels) - set(opts))}")
        extra: dict[str, Any] = {"horizontal": True} if kind == "radio" else {}
        if labels is not None:
            extra["format_func"] = lambda o: labels.get(o, o)
        if from_config:
            extra["index"] = opts.index(value)
        return getattr(where, kind)(label, opts, **extra, **common)
    if kind == "text":
        if from_config:
            follow_config(key, str(value))
        return where.text_input(label, str(value), **common)
    lo, hi = bounds(spec, min_value, max_value)
    cast = int if spec.kind == "int" else float
    if from_config:
        follow_config(key, cast(value))
    extra = {k: v for k, v in (("step", step), ("format", format)) if v is not None}
    if kind == "slider":
        return cast(where.slider(label, lo, hi, cast(value), **extra, **common))
    return cast(where.number_input(label, lo, hi, cast(value), **extra, **common))
