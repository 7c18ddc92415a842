"""Which technique helps here: a grid of configurations over one golden set, ranked, with "no clear difference"
bands from the evaluation's own noise, a cost estimate first, every finished configuration stored so a rerun
skips it, and a verdict: the best configuration clearly better than the current one, or "no clear winner"."""
from __future__ import annotations

import hashlib
import json
import statistics
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from core.config import ConfigError, PipelineConfig
from core.deps import Deps
from core.eval.datasets import GoldenSet
from core.eval.metrics import Delta, compare_metric
from core.eval.run import MISSING_BUILD, EvalRun, NamedConfig, run_eval
from core.eval.validity import Validity, of_set
from core.safeio.files import FileProblem, check_depth, read_text_checked
from core.models.pricing import worst_call_usd
from core.pipeline import StageMemo
from core.types import DEFAULT_WORKSPACE

Progress = Callable[[int, int, str], None]

_OFF = {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "router.enabled": False}
_CASCADE = {"bm25.enabled": True, "dense.enabled": True, "rerank.enabled": True, "prune.enabled": True,
            "mmr.enabled": True, "router.enabled": False}
# The standard grid: each technique switched on over the one before it, so a row's gain is that technique's.
STANDARD_GRID: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("bm25", {**_OFF, "bm25.enabled": True, "dense.enabled": False}),
    ("dense", {**_OFF, "bm25.enabled": False, "dense.enabled": True}),
    ("hybrid", {**_OFF, "bm25.enabled": True, "dense.enabled": True}),
    ("hybrid+rerank", {**_OFF, "bm25.enabled": True, "dense.enabled": True, "rerank.enabled": True}),
    ("hybrid+rerank+prune", {**_OFF, "bm25.enabled": True, "dense.enabled": True, "rerank.enabled": True,
                             "prune.enabled": True}),
    ("hybrid+rerank+mmr", {**_OFF, "bm25.enabled": True, "dense.enabled": True, "rerank.enabled": True,
                           "mmr.enabled": True}),
    ("cascade", dict(_CASCADE)),
    ("cascade+heuristic-contexts", {**_CASCADE, "context.variant": "heuristic"}),
    ("cascade+graph", {**_CASCADE, "graph.enabled": True}),
    ("cascade+router", {**_CASCADE, "router.enabled": True}),
)
# What the sweep holds fixed in every configuration: cached answers would replay earlier configurations' answers.
FIXED = {"answer_cache.enabled": False}
RANK_BY = ("recall@5", "mrr")


def grid_configs(base: PipelineConfig, grid: Sequence[tuple[str, Mapping[str, Any]]] = STANDARD_GRID, *,
                 measured: bool = True) -> list[NamedConfig]:
    """The grid's configurations over `base` (the workspace's own settings for everything a row does not set);
    `measured`: as the sweep runs them (FIXED on top), else as a user would keep one ("use this")."""
    return [NamedConfig(name, base.with_overrides({**dict(sets), **(FIXED if measured else {})}))
            for name, sets in grid]


MAX_GRID_BYTES = 1 << 20


def load_grid(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """A grid file: TOML or JSON with a list `configs` of {name, set = {"section.key" = value}}."""
    p = Path(path)
    try:
        text = read_text_checked(p, max_bytes=MAX_GRID_BYTES, what="grid file")
        check_depth(text, name=str(p))
        raw = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except FileProblem as exc:
        raise ConfigError(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"grid {p}: cannot read ({str(exc)[:300]})") from None
    rows = raw.get("configs") if isinstance(raw, dict) else raw
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"grid {p}: expected a non-empty list 'configs' of {{name, set}}")
    out = []
    for i, r in enumerate(rows, 1):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("set", {}), dict):
            raise ConfigError(f"grid {p}: entry {i} needs a name and a 'set' table of section.key = value")
        out.append((r["name"], dict(r.get("set", {}))))
    return out


def set_key(gs: GoldenSet) -> str:
    """The set's name and a hash of its questions: a set edited since is another set (its results are not reused)."""
    blob = json.dumps([(q.qid, q.query, q.answerable, [(g.doc, g.text) for g in q.gold]) for q in gs.queries])
    return f"{gs.name}#{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def _llm_parts(cfg: PipelineConfig, llm_available: bool) -> tuple[bool, bool, bool]:
    """(answer, rerank, router) call Claude per question; offline (no key) none does."""
    if not llm_available:
        return False, False, False
    return (cfg.answer.enabled and cfg.answer.mode in ("llm", "auto"), cfg.rerank.enabled and cfg.rerank.method == "llm",
            cfg.router.enabled and cfg.router.method != "offline")


def estimate_usd(cfg: PipelineConfig, questions: int, llm_available: bool) -> float:
    """Upper bound of a configuration's LLM spend over the set, per question: an answer call with its whole context
    (max_chunks passages of up to ~512 tokens), an LLM rerank over top_n passages, a router call, each at the
    cache-write price with its full output allowance; 0 offline."""
    answer, rerank, router = _llm_parts(cfg, llm_available)
    per = 0.0
    if answer:
        per += worst_call_usd(cfg.answer.model, 400, cfg.answer.max_chunks * 512 + 100, cfg.answer.max_tokens)
    if rerank:
        per += worst_call_usd(cfg.answer.model, 400, cfg.rerank.top_n * 300, 800)
    if router:
        per += worst_call_usd(cfg.router.model, 800, 200, 200)
    return per * questions


@dataclass
class SweepRow:
    name: str
    config_hash: str
    metrics: dict[str, float | None]
    per_query: dict[str, dict[str, float | None]]  # metric -> qid -> value, for the noise bands
    median_ms: float | None
    usd_per_query: float
    eval_id: str | None = None
    resumed: bool = False
    band: int = 0
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "config_hash": self.config_hash, "metrics": self.metrics,
                "per_query": self.per_query, "median_ms": self.median_ms, "usd_per_query": self.usd_per_query,
                "eval_id": self.eval_id, "notes": self.notes, "config": self.config}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SweepRow":
        return cls(d["name"], d["config_hash"], dict(d["metrics"]), {k: dict(v) for k, v in d["per_query"].items()},
                   d.get("median_ms"), float(d.get("usd_per_query", 0.0)), d.get("eval_id"), True, 0,
                   list(d.get("notes", [])), dict(d.get("config", {})))


KEPT = ("recall@1", "recall@5", "recall@10", "recall@20", "mrr", "ndcg@10", "answered_correctly",
        "refused_unanswerable", "refusal_accuracy")


def row_of(run: EvalRun, usd: float) -> SweepRow:
    ms = [r.metrics.get("ms") for r in run.results if r.metrics.get("ms") is not None]
    keep = [k for k in KEPT if k in run.metrics]
    return SweepRow(run.config_name, run.config_hash, {k: run.metrics.get(k) for k in keep},
                    {k: run.per_query(k) for k in keep}, statistics.median(ms) if ms else None,
                    usd / max(1, len(run.results)), run.eval_id, notes=list(run.notes), config=run.config)


def rank(rows: Sequence[SweepRow], by: Sequence[str] = RANK_BY) -> list[SweepRow]:
    """Best first by `by` (the first metric, ties by the next); then bands: a configuration is in its band leader's
    band when the difference on the first metric is inside the noise core.eval.metrics.compare_metric measures
    (the paired per-question noise), else it starts the next band. Band 1 = no clear difference from the best."""
    def key(r: SweepRow) -> tuple[float, ...]:
        return tuple(-(r.metrics.get(m) if r.metrics.get(m) is not None else -1.0) for m in by)  # type: ignore

    out = sorted(rows, key=key)
    lead: SweepRow | None = None
    band = 0
    m = by[0]
    for r in out:
        if lead is None or _clearly_worse(lead, r, m):
            lead, band = r, band + 1
        r.band = band
    return out


def _paired(a: SweepRow, b: SweepRow, metric: str) -> Delta:
    """b against a on `metric`, paired over the questions both scored (the per-question noise decides)."""
    qa, qb = a.per_query.get(metric, {}), b.per_query.get(metric, {})
    common = [q for q in qa if q in qb]
    return compare_metric(metric, a.metrics.get(metric), b.metrics.get(metric),
                          per_query_a=[qa[q] for q in common], per_query_b=[qb[q] for q in common])


def _clearly_worse(a: SweepRow, b: SweepRow, metric: str) -> bool:
    return _paired(a, b, metric).verdict == "A better"


WINNER, NO_WINNER = "winner", "no clear winner"


@dataclass(frozen=True)
class Verdict:
    """What the sweep recommends. `recommendation` is a row name: the best configuration clearly better than the
    current one (outside its paired noise band), else the current configuration's own row ("no clear winner —
    keep the current configuration"). `vs_current`: each row against the current one ("better", "no clear
    difference", "worse"); `blocked`: why no change is adopted although a row is clearly better (a set that failed
    its validity check)."""

    verdict: str
    recommendation: str
    current: str
    reason: str
    metric: str
    vs_current: dict[str, str]
    gain: float | None = None  # the recommendation's gain over the current row on `metric`
    noise: float | None = None  # the paired noise band that gain had to clear
    blocked: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "recommendation": self.recommendation, "current": self.current,
                "reason": self.reason, "metric": self.metric, "vs_current": self.vs_current,
                "gain": _round(self.gain), "noise": _round(self.noise), "blocked": self.blocked}

    def inside_band(self, name: str) -> bool:
        """A row the sweep cannot tell from the current configuration (choosing it changes nothing measurable)."""
        return self.vs_current.get(name) == "no clear difference"


def verdict(rows: Sequence[SweepRow], current: str, *, by: Sequence[str] = RANK_BY,
            blocked: str = "") -> Verdict:
    """The honest recommendation over ranked `rows`: among the rows clearly better than the current one (`current`:
    its config hash) on the first metric (paired per-question noise, core.eval.metrics.compare_metric), the best by
    `by`; none -> "no clear winner" and the current row. `blocked` (a failed validity check): no change is
    recommended whatever the rows say, and the reason names what would have won."""
    metric = by[0]
    cur = next((r for r in rows if r.config_hash == current), None)
    if cur is None:
        raise ValueError(f"the current configuration ({current}) is not among the sweep's rows")
    vs: dict[str, str] = {cur.name: "current"}
    better: list[tuple[SweepRow, Delta]] = []
    for r in rows:
        if r is cur:
            continue
        d = _paired(cur, r, metric)
        vs[r.name] = {"B better": "better", "A better": "worse"}.get(d.verdict, "no clear difference")
        if d.verdict == "B better":
            better.append((r, d))
    if not better:
        inside = sum(1 for v in vs.values() if v == "no clear difference")
        return Verdict(NO_WINNER, cur.name, cur.name,
                       f"no configuration is clearly better than the current one ('{cur.name}') on {metric}: "
                       f"{inside} sit inside its noise band — keep the current configuration", metric, vs,
                       blocked=blocked)
    best, d = better[0]  # rows come ranked best first
    if blocked:
        return Verdict(NO_WINNER, cur.name, cur.name,
                       f"'{best.name}' scores {100 * (d.delta or 0):+.1f} points of {metric} over '{cur.name}' on "
                       f"this set, but {blocked}: no change is adopted from it — keep the current configuration",
                       metric, vs, d.delta, d.spread, blocked)
    return Verdict(WINNER, best.name, cur.name,
                   f"'{best.name}' beats the current '{cur.name}' by {100 * (d.delta or 0):.1f} points of {metric}, "
                   f"outside the paired noise band (±{100 * d.spread:.1f})", metric, vs, d.delta, d.spread)


@dataclass
class SweepResult:
    dataset: str
    workspace: str
    corpus_version: int
    rows: list[SweepRow]
    estimate_usd: dict[str, float]
    ran: int
    resumed: int
    rank_by: tuple[str, ...] = RANK_BY
    verdict: Verdict | None = None
    validity: Validity | None = None

    def table(self) -> list[dict[str, Any]]:
        """The ranked rows as the page and the CLI show them."""
        out = []
        vs = self.verdict.vs_current if self.verdict else {}
        for i, r in enumerate(self.rows, 1):
            m = r.metrics
            out.append({"rank": i, "band": r.band, "config": r.name, "vs current": vs.get(r.name),
                        "hash": r.config_hash,
                        **{k: _round(m.get(k)) for k in ("recall@5", "recall@10", "mrr", "answered_correctly",
                                                         "refused_unanswerable") if k in m},
                        "median ms": None if r.median_ms is None else round(r.median_ms, 1),
                        "$ / query": round(r.usd_per_query, 6), "resumed": r.resumed})
        return out

    def missing_builds(self) -> list[str]:
        """The rows' run-level notices of stages skipped for a missing build, each once with the configurations
        that met it (core.eval.run.missing_build_notes)."""
        seen: dict[str, list[str]] = {}
        for r in self.rows:
            for n in r.notes:
                if n.startswith(MISSING_BUILD):
                    seen.setdefault(n, []).append(r.name)
        return [f"{n} (in {', '.join(names)})" for n, names in seen.items()]

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "workspace": self.workspace, "corpus_version": self.corpus_version,
                "notices": self.missing_builds(),
                "rank_by": list(self.rank_by), "estimate_usd": self.estimate_usd, "ran": self.ran,
                "resumed": self.resumed, "table": self.table(),
                "recommendation": self.verdict.recommendation if self.verdict else None,
                "verdict": self.verdict.verdict if self.verdict else None,
                "verdict_detail": self.verdict.to_dict() if self.verdict else None,
                "validity": self.validity.to_dict() if self.validity else None,
                "rows": [{**r.to_dict(), "band": r.band, "per_query": None} for r in self.rows]}


def _round(v: float | None) -> float | None:
    return None if v is None else round(float(v), 4)


def plan(gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps, *, workspace: str
         ) -> tuple[dict[str, float], list[NamedConfig]]:
    """(cost estimate per configuration, the configurations not yet stored for this set and corpus version)."""
    ws = gs.workspace or workspace
    done = deps.store.sweeps.done(ws, set_key(gs), deps.store.corpus.corpus_version(ws))
    est = {nc.name: estimate_usd(nc.config, len(gs.queries), deps.llm.available) for nc in configs}
    return est, [nc for nc in configs if nc.config.stable_hash() not in done]


CURRENT = "current"


def with_current(configs: Sequence[NamedConfig], current: PipelineConfig) -> tuple[list[NamedConfig], str]:
    """The grid with the current configuration among its rows (added as 'current' when no row is it), and its
    measured hash: the verdict compares every row with it."""
    h = current.with_overrides(FIXED).stable_hash()
    rows = list(configs)
    if not any(nc.config.stable_hash() == h for nc in rows):
        rows.append(NamedConfig(CURRENT, current.with_overrides(FIXED)))
    return rows, h


def run_sweep(gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps, *, workspace: str = DEFAULT_WORKSPACE,
              progress: Progress | None = None, limit: int | None = None, fresh: bool = False,
              current: PipelineConfig | None = None) -> SweepResult:
    """Run every configuration not already stored for this set (workspace + set + config hash + corpus version),
    store each as it finishes (a stopped sweep resumes where it stopped), rank them all, judge the set's validity
    and give the verdict against `current` (the workspace's configuration; default: PipelineConfig(), which is
    added as a row when the grid lacks it)."""
    ws = gs.workspace or workspace
    configs, current_hash = with_current(configs, current or PipelineConfig())
    if limit:  # the first `limit` questions are another set (their results never stand for the whole one's)
        gs = replace(gs, queries=gs.queries[:limit])
    key = set_key(gs)
    if fresh and not deps.store.read_only:
        deps.store.sweeps.clear(ws, key)
    est, todo = plan(gs, configs, deps, workspace=ws)
    stored = deps.store.sweeps.done(ws, key, deps.store.corpus.corpus_version(ws))
    n = len(gs.queries)
    rows: dict[str, SweepRow] = {}
    memos = [StageMemo()]  # the configurations share the stage results they have in common (core/eval/run.py)
    for i, nc in enumerate(configs):
        h = nc.config.stable_hash()
        if nc not in todo and h in stored:
            rows[h] = SweepRow.from_dict({**stored[h], "name": nc.name})
    for j, nc in enumerate(todo):
        before = _spent(deps, ws)

        def show(d: int, t: int, msg: str, j: int = j) -> None:
            if progress:
                progress(j * n + min(d, n), len(todo) * n, f"{nc.name} ({j + 1}/{len(todo)}): {msg}")
        run = run_eval(gs, [nc], deps, workspace=ws, progress=show, save=not deps.store.read_only, memos=memos)[0]
        row = row_of(run, _spent(deps, ws) - before)
        rows[row.config_hash] = row
        version = deps.store.corpus.corpus_version(ws)
        if not deps.store.read_only:
            deps.store.sweeps.save(ws, key, row.config_hash, version, nc.name, row.to_dict())
    ordered = rank([rows[nc.config.stable_hash()] for nc in configs if nc.config.stable_hash() in rows])
    cur = rows.get(current_hash)
    valid = of_set(gs, difficulty=cur.metrics.get(RANK_BY[0]) if cur else None,
                   bands=max((r.band for r in ordered), default=0))
    judged = verdict(ordered, current_hash, blocked=valid.blocked()) if cur else None
    return SweepResult(gs.name, ws, deps.store.corpus.corpus_version(ws), ordered, est, len(todo),
                       len(configs) - len(todo), verdict=judged, validity=valid)


def _spent(deps: Deps, workspace: str) -> float:
    return sum(e.usd for e in deps.store.ledger.usage_ledger(workspace))


def text_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows of equal keys as a plain-text table (the CLI's)."""
    if not rows:
        return "(nothing)"
    cols = list(rows[0])
    cell = lambda v: "—" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
    width = {c: max(len(c), *(len(cell(r.get(c))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(cell(r.get(c)).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)
