"""The base of every config section (strict, validated on assignment) and the field metadata helper `chosen_in`."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """One stage's settings: unknown keys are refused and assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def chosen_in(results: str, why: str) -> dict[str, str]:
    """Field metadata for `json_schema_extra`: the bench/results file a default was chosen from, and why in a line.
    It never enters the stable hash (that is built from the values alone); docs/config.md links it."""
    return {"chosen_in": results, "why": why}
