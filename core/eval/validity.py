"""Is a golden set fit to choose a configuration? Its difficulty, question–evidence overlap, type mix, dropped items
and the smallest difference it can tell apart, with a pass/fail label the sweep and calibration obey.

The checks and why each limit (none is fitted to a corpus):
- too small: fewer than MIN_ANSWERABLE answerable questions with gold. A paired test over n questions cannot call a
  difference smaller than about 4/n (four more questions won than lost, all one way, clear two standard errors), so
  below 30 only a gain of 13+ points of recall could show, which no single technique gives.
- too easy: the current configuration already finds the gold of MAX_DIFFICULTY (95%) of the questions in its top
  5: less headroom than the noise band of a set of this size, so no technique can show a gain on it.
- too lexical: the questions repeat on average more than MAX_OVERLAP (60%) of their evidence sentence's content
  words, or more than MAX_NAMED_LOOKUP (half) of the answerable ones name in code the identifier they ask about
  ("What does the function `parse_header` do?"): a keyword match answers them and the set rewards BM25 whatever
  the real questions need (people asking about a codebase seldom know the name they are after).
A hand-written set is reported the same way but only a generated one is gated: its writer is a program whose
failure modes these are.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from core.eval.datasets import GoldenSet

MIN_ANSWERABLE = 30
MAX_DIFFICULTY = 0.95
MAX_OVERLAP = 0.6
MAX_NAMED_LOOKUP = 0.5


def min_detectable(n: int) -> float | None:
    """The smallest recall difference a paired two-standard-error test can call over n questions: k questions won
    and none lost needs k/n > 2·sqrt((k/n)(1−k/n)/(n−1)), i.e. k > 4n/(n+3) — about 4 questions."""
    if n < 2:
        return None
    return math.ceil(4 * n / (n + 3) + 1e-9) / n


@dataclass(frozen=True)
class Validity:
    """A golden set's validity report. `difficulty`: the current configuration's recall@5 on it (None before any
    run); `dropped`: items the generator wrote and removed, by reason; `failures`: why the set must not be used to
    adopt a change (empty: it may)."""

    questions: int
    answerable: int
    unanswerable: int
    by_type: dict[str, int]
    generated: bool
    mean_overlap: float | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    difficulty: float | None = None
    min_detectable: float | None = None
    bands: int | None = None  # bands the sweep's rows fall into (1: nothing separated)
    failures: tuple[str, ...] = ()
    named_lookup: float | None = None  # share of answerable questions naming a code identifier in backticks

    @property
    def ok(self) -> bool:
        return not self.failures

    def label(self) -> str:
        if self.ok:
            return "usable" if self.generated else "hand-written (not gated)"
        return "failed: " + "; ".join(self.failures)

    def blocked(self) -> str:
        """Why no change is adopted from this set ('' when one may be)."""
        return f"the set failed its validity check ({'; '.join(self.failures)})" if self.failures else ""

    def to_dict(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(float(v), 4)  # noqa: E731
        return {"questions": self.questions, "answerable": self.answerable, "unanswerable": self.unanswerable,
                "by_type": self.by_type, "generated": self.generated, "mean_overlap": r(self.mean_overlap),
                "dropped": self.dropped, "difficulty": r(self.difficulty),
                "min_detectable": r(self.min_detectable), "bands": self.bands, "named_lookup": r(self.named_lookup),
                "ok": self.ok,
                "label": self.label(), "failures": list(self.failures)}

    def rows(self) -> list[dict[str, str]]:
        """The report as (check, value, limit, result) rows for a page or the CLI."""
        pct = lambda v: "—" if v is None else f"{100 * v:.1f}%"  # noqa: E731
        out = [
            {"check": "size", "value": f"{self.answerable} answerable, {self.unanswerable} unanswerable",
             "limit": f"≥ {MIN_ANSWERABLE} answerable", "result": "ok" if self.answerable >= MIN_ANSWERABLE
             else "too small"},
            {"check": "smallest difference it can tell", "value": pct(self.min_detectable) + " of recall@5",
             "limit": "paired, 2 standard errors", "result": "—"},
            {"check": "difficulty (current configuration's recall@5)", "value": pct(self.difficulty),
             "limit": f"< {100 * MAX_DIFFICULTY:.0f}%", "result": "—" if self.difficulty is None else
             ("ok" if self.difficulty < MAX_DIFFICULTY else "too easy")},
            {"check": "questions naming the identifier they ask about", "value": pct(self.named_lookup),
             "limit": f"≤ {100 * MAX_NAMED_LOOKUP:.0f}%", "result": "—" if self.named_lookup is None else
             ("ok" if self.named_lookup <= MAX_NAMED_LOOKUP else "too lexical")},
            {"check": "question–evidence word overlap", "value": pct(self.mean_overlap),
             "limit": f"≤ {100 * MAX_OVERLAP:.0f}%", "result": "—" if self.mean_overlap is None else
             ("ok" if self.mean_overlap <= MAX_OVERLAP else "too lexical")},
            {"check": "type mix", "value": ", ".join(f"{k} {v}" for k, v in sorted(self.by_type.items())),
             "limit": "", "result": "—"},
            {"check": "dropped by the well-formedness check", "value": ", ".join(
                f"{k} {v}" for k, v in sorted(self.dropped.items())) or "none", "limit": "", "result": "—"},
        ]
        if self.bands is not None:
            out.append({"check": "configurations separated", "value": f"{self.bands} band(s)", "limit": "",
                        "result": "nothing separated" if self.bands <= 1 else "ok"})
        return out


def assess(questions: Sequence[tuple[str, bool, bool]], *, generated: bool,
           generation: Mapping[str, Any] | None = None, difficulty: float | None = None,
           bands: int | None = None, named_lookup: float | None = None) -> Validity:
    """The report over a set's questions, each (type, answerable, has gold); `generation`: what the generator
    reported (mean_overlap, dropped); `difficulty`: the current configuration's recall@5 on the set when known."""
    gen = dict(generation or {})
    by_type: dict[str, int] = {}
    for qtype, _, _ in questions:
        by_type[qtype] = by_type.get(qtype, 0) + 1
    answerable = sum(1 for _, a, g in questions if a and g)
    unanswerable = sum(1 for _, a, _ in questions if not a)
    overlap = gen.get("mean_overlap")
    failures: list[str] = []
    if generated:
        if answerable < MIN_ANSWERABLE:
            failures.append(f"too small: {answerable} answerable questions (at least {MIN_ANSWERABLE})")
        if difficulty is not None and difficulty >= MAX_DIFFICULTY:
            failures.append(f"too easy: the current configuration's recall@5 is {100 * difficulty:.1f}% "
                            f"(below {100 * MAX_DIFFICULTY:.0f}% leaves room to show a gain)")
        if overlap is not None and overlap > MAX_OVERLAP:
            failures.append(f"too lexical: questions repeat {100 * overlap:.0f}% of their evidence's words "
                            f"(at most {100 * MAX_OVERLAP:.0f}%)")
        elif named_lookup is not None and named_lookup > MAX_NAMED_LOOKUP:
            failures.append(f"too lexical: {100 * named_lookup:.0f}% of the answerable questions name the identifier "
                            f"they ask about (at most {100 * MAX_NAMED_LOOKUP:.0f}%)")
    return Validity(len(questions), answerable, unanswerable, by_type, generated,
                    None if overlap is None else float(overlap), {str(k): int(v) for k, v in
                                                                 dict(gen.get("dropped") or {}).items()},
                    difficulty, min_detectable(answerable), bands, tuple(failures), named_lookup)


def of_set(gs: "GoldenSet", *, difficulty: float | None = None, bands: int | None = None) -> Validity:
    """The report of a loaded golden set (generated when its items carry a generator)."""
    ans = [q for q in gs.queries if q.answerable and q.gold]
    named = sum(1 for q in ans if re.search(r"`[^`\s]{2,}`", q.query)) / len(ans) if ans else None
    return assess([(q.qtype, q.answerable, bool(q.gold)) for q in gs.queries], generated=bool(gs.generator),
                  generation=gs.generation, difficulty=difficulty, bands=bands, named_lookup=named)
