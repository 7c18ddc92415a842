"""docs/config.md, generated from the config's field descriptions: `python -m core.config.doc > docs/config.md`."""
from __future__ import annotations

import inspect
import json
import sys

from core.config.meta import FieldSpec, field_specs, sections

HEADER = """# Configuration reference

Generated from the field descriptions in `core/config/` by `python -m core.config.doc > docs/config.md`; edit the
fields, not this file (tests/test_configs.py fails when it is out of date).

A setting is `section.field`: set it in a TOML or JSON config file (missing sections take their defaults), with
`python -m core query ... --set section.field=value`, or from the pages. The stable config hash that names traces,
runs and cached answers is built from the values alone, never from these descriptions.

Each section lists its user-facing settings first; its expert settings (tuning constants: weights, thresholds, search
widths, whose defaults were chosen by measuring) follow under "Expert tuning". Where a default was chosen by a
benchmark, the section says why in a line and links the results file that holds the measurement.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(s: FieldSpec) -> str:
    return " \\| ".join(f"`{c}`" for c in s.choices) if s.kind == "choice" else s.kind


def _range(s: FieldSpec) -> str:
    low = f"≥ {s.ge:g}" if s.ge is not None else f"> {s.gt:g}" if s.gt is not None else ""
    high = f"≤ {s.le:g}" if s.le is not None else f"< {s.lt:g}" if s.lt is not None else ""
    return ", ".join(x for x in (low, high) if x)


def _section(name: str) -> list[str]:
    cls = sections()[name]
    doc = " ".join(inspect.getdoc(cls).split())
    head = ["| setting | type | default | range | what it does |", "|---|---|---|---|---|"]
    out = [f"## {name}", "", f"{doc} (`{cls.__module__.replace('.', '/')}.py`, `{cls.__name__}`)", ""]
    specs = field_specs(name)
    user, expert = [s for s in specs if not s.expert], [s for s in specs if s.expert]
    row = lambda s: (f"| `{s.dotted}` | {_type(s)} | `{json.dumps(s.default, ensure_ascii=False)}` | {_range(s)} | "  # noqa: E731
                     f"{_cell(s.description)} |")
    if user:
        out += head + [row(s) for s in user]
    if expert:
        out += ([""] if user else []) + ["Expert tuning:", ""] + head + [row(s) for s in expert]
    chosen = [s for s in specs if s.chosen_in]
    if chosen:
        out += ["", "Why these defaults:", ""]
        out += [f"- `{s.dotted}`: {_cell(s.why)} ([{s.chosen_in}](../{s.chosen_in}))" for s in chosen]
    return out + [""]


def render() -> str:
    """The whole of docs/config.md."""
    names = list(sections())
    lines = [HEADER, "Sections: " + " · ".join(f"[{n}](#{n})" for n in names), ""]
    for name in names:
        lines += _section(name)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
