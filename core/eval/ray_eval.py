"""Batch evaluation over configurations on Ray: workers score chunks of questions on a read-only database snapshot.

Why this shape: scoring a question only reads the store, and questions are independent, so (configuration, chunk of
questions) pairs spread over a cluster. Workers cannot open the driver's read-write DuckDB file (one writer OR many
readers per file), so the driver checkpoints and copies it (core/store/snapshot.py) and every worker opens the copy
read-only; a driver that opened its database read-only already lets other readers in, and workers read it directly.
Each worker is a Ray actor holding one loaded embedder and one pipeline Deps for its whole life (indexes are built
once per actor and configuration), and scores a question with the local engine's own score_question. The driver
aggregates with the local engine's own aggregate and stores the run with its single writer (core/eval_run.run_eval).

Faults: an actor killed mid-chunk is restarted and its chunk retried (up to `max_restarts` times); every result is
filed under its (configuration, repeat, question) slot once, so a retried chunk never counts a question twice, and
nothing is stored before every slot is filled. Offline only: a configuration that would call the LLM (a key is set)
is refused, because workers would need the context builder's shared rate gate and hard budget (not built here).
"""
from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from core.deps import Deps, build_deps
from core.eval.datasets import GoldenSet
from core.eval.metrics import AnswerJudge
from core.eval.run import NamedConfig, ProductAnswerJudge, Progress, Row, score_question
from core.ingest.ray_engine import MAX_RESTARTS, RayEngineError, ray_runtime
from core.models.embed import Embedder
from core.models.llm import OfflineLLM
from core.store import Store
from core.store.snapshot import remove_snapshot, write_snapshot

# Questions per task when not given: small enough that a killed actor loses little and the actors stay evenly busy
# to the end, large enough that the per-task overhead (a round trip, a pickled trace per question) stays small.
MAX_CHUNK = 16
TASKS_PER_ACTOR = 4
IN_FLIGHT_PER_ACTOR = 2  # one queued behind the running one, so an actor never waits for the driver


@dataclass(frozen=True)
class RayEvalOptions:
    """Knobs of the Ray eval engine. `actors` None: one per CPU of the cluster. `snapshot_dir` None: a folder beside
    the database (same file system, so token vectors are linked, not copied; on a cluster: shared storage)."""

    address: str | None = None
    actors: int | None = None
    cpus_per_actor: float = 1.0
    chunk: int | None = None
    max_restarts: int = MAX_RESTARTS
    num_cpus: int | None = None  # a locally started runtime only
    snapshot_dir: str | None = None


@dataclass(frozen=True)
class ChunkResult:
    """What one task returns: the rows of its questions by index (the question itself stays on the driver)."""

    config: int
    repeat: int
    rows: tuple[tuple[int, Any, Any, str | None, dict], ...]  # (index, QueryScore, Trace, error, answer metrics)
    seconds: float


class _EvalActor:
    """One worker: the snapshot opened read-only, one embedder, one Deps (its indexes and token cache are reused by
    every chunk it scores), offline LLM. The set travels without its corpus loader (only its scoring settings and
    questions are read here)."""

    def __init__(self, db_path: str, make_embedder: Callable[[], Embedder], gs: GoldenSet,
                 configs: Sequence[Any], workspace: str, answer_judge: AnswerJudge | None) -> None:
        self.store = Store(db_path, read_only=True)
        embedder = make_embedder()
        self.deps = build_deps(configs[0], store=self.store, embedder=embedder,
                               llm=OfflineLLM("evaluation on Ray workers runs offline"))
        self.gs, self.configs, self.workspace = gs, list(configs), workspace
        self.judge = answer_judge if answer_judge is not None else ProductAnswerJudge(embedder)

    def model_id(self) -> str:
        return self.deps.embedder.model_id

    def run(self, config: int, repeat: int, indexes: Sequence[int]) -> ChunkResult:
        t0 = time.perf_counter()
        cfg = self.configs[config]
        rows = []
        for i in indexes:
            _, score, trace, err, ans = score_question(self.gs.queries[i], self.gs, cfg, self.deps,
                                                       workspace=self.workspace, answer_judge=self.judge)
            rows.append((i, score, trace, err, ans))
        return ChunkResult(config, repeat, tuple(rows), time.perf_counter() - t0)


def plan_chunks(n_questions: int, n_configs: int, repeats: int, actors: int, chunk: int | None = None
                ) -> list[tuple[int, int, tuple[int, ...]]]:
    """(config, repeat, question indexes) tasks, configuration-major (an actor builds one configuration's indexes
    before the next), every question of every (config, repeat) in exactly one task."""
    if chunk is None:
        chunk = max(1, min(MAX_CHUNK, math.ceil(n_questions / max(1, actors * TASKS_PER_ACTOR))))
    out = []
    for c in range(n_configs):
        for r in range(repeats):
            for start in range(0, n_questions, chunk):
                out.append((c, r, tuple(range(start, min(n_questions, start + chunk)))))
    return out


class RayEvalEngine:
    """core.eval.run.EvalEngine on Ray. `make_embedder` builds each actor's embedder on its node (a model is never
    shipped); its model id must equal the driver's, or the vectors in the store would be searched with another model.
    After score(): `stats` says how it went (actors, tasks, snapshot seconds, duplicates dropped)."""

    def __init__(self, make_embedder: Callable[[], Embedder], options: RayEvalOptions = RayEvalOptions()) -> None:
        self.make_embedder, self.options = make_embedder, options
        self.stats: dict[str, Any] = {}

    def describe(self) -> str:
        s = self.stats
        return (f"scored on Ray: {s.get('actors', '?')} actors, {s.get('tasks', '?')} tasks of up to "
                f"{s.get('chunk', '?')} questions, on a read-only {s.get('source', 'snapshot')} of the database; "
                "seconds are the whole fan-out's, every configuration together")

    def score(self, gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps, *, workspace: str, repeats: int,
              limit: int | None, progress: Progress | None, answer_judge: AnswerJudge | None,
              ) -> list[list[list[Row]]]:
        if deps.llm is not None and deps.llm.available:
            raise RayEngineError("--engine ray evaluates offline only: Ray workers calling the LLM would need the "
                                 "shared rate gate and hard budget of the context builder (not built); unset "
                                 "ANTHROPIC_API_KEY for an offline run or use --engine local")
        queries = gs.queries[:limit] if limit else list(gs.queries)
        slim = replace(gs, queries=queries, predocs=None)  # the corpus loader is the driver's (and not picklable)
        repeats = max(1, repeats)
        slots: dict[tuple[int, int, int], tuple] = {}
        self.stats = {"duplicates": 0}
        if not queries or not configs:
            return [[[] for _ in range(repeats)] for _ in configs]
        store = deps.store
        folder: Path | None = None
        t0 = time.perf_counter()
        if store.read_only:
            db_path, self.stats["source"] = store.path, "open (the driver reads it read-only too)"
        else:
            base = Path(self.options.snapshot_dir) if self.options.snapshot_dir else Path(store.path).parent
            folder = base / f"{Path(store.path).name}.eval-snapshot-{uuid.uuid4().hex[:12]}"
            try:
                db_path = str(write_snapshot(store, folder))
            except BaseException:
                _remove(folder)
                raise
            self.stats["source"] = "snapshot"
        self.stats["snapshot_s"] = round(time.perf_counter() - t0, 3)
        self.stats["snapshot_dir"] = str(folder) if folder else None
        try:
            with ray_runtime(self.options.address, num_cpus=self.options.num_cpus) as ray:
                self._fan_out(ray, db_path, slim, configs, deps, workspace, repeats, progress, answer_judge, slots)
        finally:
            if folder is not None:
                _remove(folder)
        return [[[(queries[i], *slots[(c, r, i)]) for i in range(len(queries))] for r in range(repeats)]
                for c in range(len(configs))]

    def _fan_out(self, ray: Any, db_path: str, gs: GoldenSet, configs: Sequence[NamedConfig], deps: Deps,
                 workspace: str, repeats: int, progress: Progress | None, answer_judge: AnswerJudge | None,
                 slots: dict[tuple[int, int, int], tuple]) -> None:
        o = self.options
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n_actors = o.actors or max(1, int(cpus // max(o.cpus_per_actor, 0.01)))
        tasks = plan_chunks(len(gs.queries), len(configs), repeats, n_actors, o.chunk)
        n_actors = min(n_actors, len(tasks))
        self.stats.update(actors=n_actors, tasks=len(tasks), chunk=max(len(t[2]) for t in tasks))
        cls = ray.remote(num_cpus=o.cpus_per_actor, max_restarts=o.max_restarts,
                         max_task_retries=o.max_restarts)(_EvalActor)
        # Passed by value (a few hundred questions and configurations are small): a restarted actor then never
        # depends on an object-store entry that may have gone out of scope.
        cfgs = [nc.config for nc in configs]
        actors = [cls.remote(db_path, self.make_embedder, gs, cfgs, workspace, answer_judge) for _ in range(n_actors)]
        try:
            self._drive(ray, actors, tasks, gs, configs, deps, repeats, progress, slots)
        finally:  # a runtime this process joined (tests, a cluster) outlives the run: its actors must not
            for a in actors:
                ray.kill(a)

    def _drive(self, ray: Any, actors: list[Any], tasks: list[tuple[int, int, tuple[int, ...]]], gs: GoldenSet,
               configs: Sequence[NamedConfig], deps: Deps, repeats: int, progress: Progress | None,
               slots: dict[tuple[int, int, int], tuple]) -> None:
        n_actors = len(actors)
        t_start = time.perf_counter()
        try:
            ids = ray.get([a.model_id.remote() for a in actors])
        except Exception as exc:  # noqa: BLE001 - a worker that cannot start: one clear message
            raise RayEngineError(f"the Ray eval workers could not start ({type(exc).__name__}: "
                                 f"{_first_line(exc)})") from None
        if any(i != deps.embedder.model_id for i in ids):
            raise RayEngineError(f"Ray eval workers embed with {sorted(set(ids))} but the database was searched "
                                 f"with {deps.embedder.model_id!r}; give every node the same model and runtime")
        self.stats["actor_start_s"] = round(time.perf_counter() - t_start, 3)
        total = len(gs.queries) * repeats * len(configs)
        pending = list(reversed(tasks))
        running: dict[Any, int] = {}  # task ref -> actor index
        load = [0] * n_actors
        done = 0

        def submit() -> None:
            while pending:
                a = min(range(n_actors), key=lambda k: load[k])
                if load[a] >= IN_FLIGHT_PER_ACTOR:
                    return
                c, r, idx = pending.pop()
                running[actors[a].run.remote(c, r, idx)] = a
                load[a] += 1

        submit()
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            ref = ready[0]
            load[running.pop(ref)] -= 1
            try:
                res: ChunkResult = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - restarts used up: nothing was stored, say how to go on
                raise RayEngineError(f"a Ray eval worker stopped for good ({type(exc).__name__}: {_first_line(exc)});"
                                     " nothing was stored; run the same command again") from None
            for i, score, trace, err, ans in res.rows:
                key = (res.config, res.repeat, i)
                if key in slots:  # a result for a slot already filled is never counted again
                    self.stats["duplicates"] += 1
                    continue
                slots[key] = (score, trace, err, ans)
                done += 1
            if progress and res.rows:
                progress(done, total, f"{configs[res.config].name}: {gs.queries[res.rows[-1][0]].qid}")
            submit()
        self.stats["fan_out_s"] = round(time.perf_counter() - t_start, 3)


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text else ""


def _remove(folder: Path) -> None:
    remove_snapshot(folder)
