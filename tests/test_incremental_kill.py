"""A kill -9 in the middle of each incremental step (ingest of edits, the graph update that follows it, the llm
context build) leaves a database from which running the same step again finishes the job: the state equals a run
that was never killed. The step runs in a forked process that SIGKILLs itself at a chosen write."""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

import core.ingest.pipeline as pipeline
from core.config import PipelineConfig
from core.graph.build import build_graph, graph_stats
from core.ingest.context import build_llm_contexts
from core.ingest.pipeline import ingest_files
from core.models.llm import LLMRequest, LLMResponse
from core.store import Store
from core.types import Usage
from tests.fakes import HashEmbedder
from tests.test_incremental import _team_doc

CFG = PipelineConfig().with_overrides({"graph.min_phrase_chunks": 1})
BASE = [_team_doc(k) for k in range(4)]
EDITS = [_team_doc(1, " Dorset Group hires Mallory Quist."), _team_doc(3, " Jorvik Labs opens in Tallinn.")]
HAIKU = "claude-haiku-4-5"


class ExcerptLLM:
    """Writes a context from the excerpt alone (as tests/anthropic_stub.py's default reply does), in-process."""

    name, available, reason = "excerpt", True, ""

    def complete(self, request: LLMRequest, *, workspace: str = "default", run_id: str = "") -> LLMResponse:
        excerpt = request.user[0].text.split("<excerpt>", 1)[-1]
        return LLMResponse("This chunk covers " + " ".join(excerpt.split()[:8]), request.model, Usage(), 0.0)


def _base(path: Path) -> None:
    store = Store(path)
    ingest_files(BASE, store=store, embedder=HashEmbedder(), config=CFG)
    build_graph(store, CFG.graph)
    build_llm_contexts(store, ExcerptLLM(), model=HAIKU, budget_usd=5.0)  # type: ignore[arg-type]
    store.close()


def _die_on(obj: Any, name: str, nth: int) -> None:
    """Make obj.name SIGKILL the process on its nth call, before it writes anything."""
    real: Callable[..., Any] = getattr(obj, name)
    calls = [0]

    def wrapper(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)

    setattr(obj, name, wrapper)


def _step(path: Path, step: str, kill: tuple[str, str, int] | None) -> None:
    store = Store(path)
    if kill is not None:
        repo, name, nth = kill
        _die_on(getattr(store, repo), name, nth)
    if step == "context":
        build_llm_contexts(store, ExcerptLLM(), model=HAIKU, budget_usd=5.0)  # type: ignore[arg-type]
    else:  # the edits, committed a document at a time, and the graph update that follows them
        pipeline.GROUP_CHUNKS = 2
        ingest_files(EDITS, store=store, embedder=HashEmbedder(), config=CFG)
    store.close()


def _state(path: Path) -> dict[str, Any]:
    store = Store(path)
    try:
        chunks = store.corpus.chunks()
        ids = {c.chunk_id for c in chunks}
        vec_ids, _ = store.corpus.vectors("fake-hash-64")
        comms: dict[tuple[int, str], set[str]] = {}
        for c in store.communities.communities():
            comms.setdefault((c.level, c.members_hash), set()).add(c.node_id)
        return {"docs": sorted((d.doc_id, d.content_hash) for d in store.corpus.documents()),
                "chunks": sorted((c.chunk_id, c.text) for c in chunks), "vectors": sorted(vec_ids) == sorted(ids),
                "llm": sorted(store.ledger.contexts("llm")), "heuristic": sorted(store.ledger.contexts("heuristic")),
                "seen": sorted(store.graph.seen_chunks()) == sorted(ids), "stale": graph_stats(store)["stale"],
                "nodes": store.graph.nodes(), "edges": store.graph.edges(), "communities": sorted(comms),
                "dirty": store.graph.dirty_nodes()}
    finally:
        store.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The database each step starts from: the base documents with a graph and llm contexts; for the context
    step, the edits ingested on top (their changed chunks lack contexts)."""
    root = tmp_path_factory.mktemp("kill9")
    ingest, context = root / "ingest.duckdb", root / "context.duckdb"
    _base(ingest)
    shutil.copy(ingest, context)
    _step(context, "ingest", None)
    return {"ingest": ingest, "context": context}


@pytest.mark.slow  # ~6 s a case (three runs of the step on a database file and a fork); bench/incremental.py runs them
@pytest.mark.parametrize("step, kill", [
    ("ingest", ("corpus", "put_document", 2)),  # the first edited document committed, the second not
    ("ingest", ("graph", "replace_extractions", 1)),  # edits committed; the graph update stops before its writes
    ("ingest", ("graph", "write_aggregates", 1)),  # edits committed; the graph update stops after extraction
    ("ingest", ("graph", "finish_state", 1)),  # ... after the aggregates, before the communities and the state
    ("context", ("ledger", "put_contexts", 2)),  # one changed chunk's context written, the other not
], ids=["ingest-after-first-document", "graph-before-extraction", "graph-after-extraction", "graph-after-aggregates", "contexts-one-of-two"])
def test_kill_9_mid_step_then_the_same_step_again_finishes_the_job(tmp_path: Path, base: dict[str, Path],
                                                                    step: str, kill: tuple[str, str, int]) -> None:
    ref, db = tmp_path / "ref.duckdb", tmp_path / "killed.duckdb"
    for path in (ref, db):
        shutil.copy(base[step], path)
    child = mp.get_context("fork").Process(target=_step, args=(db, step, kill))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    _step(ref, step, None)
    _step(db, step, None)
    want, got = _state(ref), _state(db)
    assert got == want
    assert got["vectors"] and got["seen"] and not got["stale"] and not got["dirty"]
    if step == "context":
        assert len(got["llm"]) == len(got["chunks"])
