"""The base of every config section (strict, validated on assignment) and the field metadata: `chosen_in` and
`EXPERT`."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """One stage's settings: unknown keys are refused and assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# Field metadata for `json_schema_extra`: a tuning constant (a weight, a threshold, a search width) that only someone
# measuring should move. docs/config.md lists a section's user-facing settings first and these after them.
EXPERT: dict[str, bool] = {"expert": True}


def chosen_in(results: str, why: str, *, expert: bool = False) -> dict[str, str | bool]:
    """Field metadata for `json_schema_extra`: the bench/results file a default was chosen from, and why in a line
    (`expert`: a tuning constant, see EXPERT). It never enters the stable hash (that is built from the values alone);
    docs/config.md links it."""
    return {"chosen_in": results, "why": why, **({"expert": True} if expert else {})}
