"""The Ray engine (core/ingest/ray_engine.py) against the local engine, on one in-process Ray runtime per module."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from core.config import PipelineConfig
from core.ingest.pipeline import IngestReport, ingest_files
from core.models.tokens import text_key
from core.store import Store
from tests.anthropic_stub import anthropic_stub  # noqa: F401 - fixture
from tests.fakes import HashEmbedder
from tests.ray_fakes import LoggingEmbedderFactory as _Factory
from tests.ray_fakes import TokenHashEmbedder

ray = pytest.importorskip("ray")
from core.ingest.ray_engine import RayOptions, ingest_files_ray  # noqa: E402

# Small chunks, so each document has several and a batch of documents several model rows.
CONFIG = PipelineConfig().with_overrides({"chunking.size_tokens": 24, "chunking.overlap_tokens": 4})
TOPICS = ["torque wrench calibration", "duckdb write-ahead log", "leiden community detection",
          "prompt caching minimum", "sentence window expansion", "reciprocal rank fusion"]


def _files() -> list[tuple[str, bytes]]:
    """Six documents sharing no chunk text (a text repeated across two documents in two batches is embedded once per
    batch on Ray, where the local engine's embedding cache would serve the second one), an empty file and a copy."""
    out = []
    for i, topic in enumerate(TOPICS):
        body = "\n\n".join(f"Paragraph {p} about {topic}: step {p} checks the {topic} setting number {i * 10 + p} "
                           f"before the {topic} stage reads it, and logs why." for p in range(4))
        out.append((f"doc{i}.md", f"# {topic.title()}\n\n{body}\n".encode()))
    out.append(("empty.txt", b"   \n"))  # an error by name, like the local engine's
    out.append(("doc1.md", out[1][1]))  # a second copy in the same run: unchanged, never stored twice
    return out


def _factory(*args, **kw) -> _Factory:  # noqa: ANN002, ANN003
    return _Factory(*args, tokens=True, **kw)


@pytest.fixture(scope="module")
def ray_runtime():  # noqa: ANN201
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, configure_logging=False)
    yield ray
    ray.shutdown()


def _snapshot(store: Store) -> dict:
    docs = sorted((d.doc_id, d.name, d.content_hash, d.n_chunks, d.chunker, d.title) for d in store.corpus.documents())
    chunks = sorted((c.chunk_id, c.doc_id, c.ordinal, c.text, c.start, c.end, tuple(c.heading_path))
                    for c in store.corpus.chunks())
    ids, vecs = store.corpus.vectors("fake-hash-64")
    keys = sorted({text_key("fake-hash-64", c[3]) for c in chunks})
    tokens = store.caches.cached_token_vectors("fake-hash-64", keys)
    return {"docs": docs, "chunks": chunks, "vector_ids": ids, "vectors": vecs,
            "heuristic": store.ledger.contexts("heuristic"),
            "rows": {t: store.corpus.count(t) for t in ("documents", "chunks", "vectors")},
            "token_keys": keys, "tokens": tokens}


def _assert_same(a: dict, b: dict) -> None:
    assert a["docs"] == b["docs"] and a["chunks"] == b["chunks"] and a["vector_ids"] == b["vector_ids"]
    assert a["heuristic"] == b["heuristic"] and a["rows"] == b["rows"]
    assert np.abs(a["vectors"] - b["vectors"]).max() <= 1e-6
    # Late-interaction token vectors, from the same forward on both engines: every chunk text has them, same tokens.
    assert sorted(a["tokens"]) == sorted(b["tokens"]) == a["token_keys"]
    for k, (ids, vecs, spans) in a["tokens"].items():
        ids2, vecs2, spans2 = b["tokens"][k]
        assert np.array_equal(ids, ids2) and np.array_equal(spans, spans2) and len(ids) > 0
        assert np.abs(vecs.astype(np.float32) - vecs2.astype(np.float32)).max() <= 1e-6


@pytest.fixture(scope="module")
def local_db() -> dict:
    store = Store(":memory:")
    rep = ingest_files(_files(), store=store, embedder=TokenHashEmbedder(), config=CONFIG)
    assert [r.status for r in rep.results] == ["ingested"] * 6 + ["error", "unchanged"]
    return {"snapshot": _snapshot(store), "statuses": [r.status for r in rep.results],
            "messages": [r.message for r in rep.results]}


def _ray_ingest(store: Store, factory: _Factory, files: list | None = None, **opts) -> IngestReport:
    return ingest_files_ray(files or _files(), store=store, embedder=TokenHashEmbedder(), make_embedder=factory,
                            config=CONFIG, options=RayOptions(batch_docs=2, **opts))


def _logged(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_ray_database_equals_local_with_a_killed_worker_and_a_rerun_embeds_nothing(ray_runtime, local_db,
                                                                                   tmp_path: Path) -> None:
    store, log, marker = Store(":memory:"), tmp_path / "embedded.log", tmp_path / "kill-once"
    marker.touch()
    rep = _ray_ingest(store, _factory(log, marker, "prompt caching"), actors=2)
    assert not marker.exists()  # an actor did die once, mid-batch
    assert [r.status for r in rep.results] == local_db["statuses"]
    assert [r.message for r in rep.results] == local_db["messages"]
    _assert_same(_snapshot(store), local_db["snapshot"])  # nothing duplicated, nothing missing, same vectors
    # The killed batch died before logging, so after the retry each distinct chunk text was embedded exactly once.
    distinct = sorted({c[3].replace("\n", " ") for c in local_db["snapshot"]["chunks"]})
    assert sorted(_logged(log)) == distinct
    again = _ray_ingest(store, _factory(log), actors=2)
    assert [r.status for r in again.results] == ["unchanged"] * 6 + ["error", "unchanged"]
    assert sorted(_logged(log)) == distinct  # nothing stored was sent to a worker again
    _assert_same(_snapshot(store), local_db["snapshot"])


def test_workers_giving_up_leave_whole_documents_and_a_rerun_finishes(ray_runtime, local_db, tmp_path: Path) -> None:
    store, log, marker = Store(":memory:"), tmp_path / "embedded.log", tmp_path / "kill"
    marker.touch()
    first = _ray_ingest(store, _factory(log, marker, "sentence window"), actors=1, max_restarts=0)
    failed = [r for r in first.results if r.status == "error" and "run the same command again" in r.message]
    assert failed and not marker.exists()
    stored = {d.doc_id: d.n_chunks for d in store.corpus.documents()}
    ids, _ = store.corpus.vectors("fake-hash-64")
    for doc_id, n in stored.items():  # nothing half-written: every stored document has all its chunks and vectors
        assert len(store.corpus.chunks(doc_id=doc_id)) == n
        assert sum(1 for c in store.corpus.chunks(doc_id=doc_id) if c.chunk_id in set(ids)) == n
    before = len(_logged(log))
    second = _ray_ingest(store, _factory(log), actors=1)
    assert [r.status for r in second.results].count("ingested") == 6 - len(stored)
    _assert_same(_snapshot(store), local_db["snapshot"])
    missing = {c[3].replace("\n", " ") for c in local_db["snapshot"]["chunks"] if c[1] not in stored}
    assert sorted(_logged(log)[before:]) == sorted(missing)  # the re-run embedded only what was not stored


def test_a_changed_documents_unchanged_chunks_come_from_the_embedding_cache_as_locally(ray_runtime, tmp_path: Path
                                                                                       ) -> None:
    first = _files()[:3]
    name, body = first[0]
    changed = [(name, body.replace(b"step 3 checks", b"step 3 re-checks")), *first[1:]]  # one chunk's text changes
    local, emb = Store(":memory:"), TokenHashEmbedder()
    ingest_files(first, store=local, embedder=emb, config=CONFIG)
    local_rep = ingest_files(changed, store=local, embedder=emb, config=CONFIG)
    store, log = Store(":memory:"), tmp_path / "embedded.log"
    _ray_ingest(store, _factory(log), first, actors=1)
    before = _logged(log)
    ray_rep = _ray_ingest(store, _factory(log), changed, actors=1)
    assert [r.status for r in ray_rep.results] == [r.status for r in local_rep.results] == ["replaced", "unchanged",
                                                                                             "unchanged"]
    got = [(r.embedded, r.cache_hits) for r in ray_rep.results]
    assert got == [(r.embedded, r.cache_hits) for r in local_rep.results]
    assert got[0][0] >= 1 and got[0][1] >= 1  # some chunks changed, some were reused: the check means something
    old_texts = {t for t in before}
    new_texts = sorted({c.text.replace("\n", " ") for c in store.corpus.chunks()} - old_texts)
    assert sorted(_logged(log)[len(before):]) == new_texts  # only the changed chunks went through the model
    _assert_same(_snapshot(store), _snapshot(local))


# -- LLM contexts as Ray tasks ------------------------------------------------------------------------------------
HAIKU = "claude-haiku-4-5"


def _no_sleep(_: float) -> None:
    return None


class StubLLMFactory:
    """Each worker's AnthropicLLM against the loopback stub (a test double: the product reads the node's key)."""

    def __init__(self, key: str, base_url: str, max_retries: int = 4) -> None:
        self.key, self.base_url, self.max_retries = key, base_url, max_retries

    def __call__(self, ledger):  # noqa: ANN001, ANN204
        from core.models.llm import AnthropicLLM

        return AnthropicLLM(self.key, base_url=self.base_url, ledger=ledger, sleep=_no_sleep,
                            max_retries=self.max_retries)


def test_rate_gate_books_one_slot_per_interval() -> None:
    from core.ingest.ray_engine import RateGate

    g = RateGate(per_minute=120)  # one slot every 0.5 s
    assert [g.reserve(now=10.0) for _ in range(3)] == [0.0, 0.5, 1.0]
    assert g.reserve(now=10.2) == pytest.approx(1.3)  # the 4th slot is at 11.5
    assert g.reserve(now=20.0) == 0.0  # idle time is not saved up into a burst
    with pytest.raises(ValueError):
        RateGate(0)


def test_ray_contexts_keep_the_hard_budget_resume_and_equal_local_ones(ray_runtime, anthropic_stub) -> None:
    import time

    from core.ingest.context import build_llm_contexts
    from core.ingest.ray_engine import build_llm_contexts_ray
    from core.models.llm import AnthropicLLM

    local, on_ray = Store(":memory:"), Store(":memory:")
    for s in (local, on_ray):
        ingest_files(_files()[:3], store=s, embedder=HashEmbedder(), config=CONFIG)
    make = StubLLMFactory(anthropic_stub.key, anthropic_stub.base_url)
    driver = AnthropicLLM(anthropic_stub.key, base_url=anthropic_stub.base_url, sleep=_no_sleep)
    total = on_ray.corpus.count("chunks")
    budget = 0.003
    ref_first = build_llm_contexts(local, make(local.ledger), model=HAIKU, budget_usd=budget)
    ref = build_llm_contexts(local, make(local.ledger), model=HAIKU, budget_usd=5.0)
    assert ref_first.written + ref.written == total
    calls_before = len(anthropic_stub.state.messages())

    first = build_llm_contexts_ray(on_ray, driver, make, model=HAIKU, budget_usd=budget, requests_per_minute=6000,
                                   max_in_flight=2)
    assert first.stopped.startswith("budget") and 0 < first.written < total
    assert first.written == ref_first.written  # it waits for running tasks' real cost before giving up, as local
    paid = sum(e.usd for e in on_ray.ledger.usage_ledger(run_id=first.run_id))
    assert paid <= budget and paid == pytest.approx(first.usd, abs=1e-12)  # ledger rows came back from the workers
    assert len(on_ray.ledger.contexts("llm")) == first.written  # everything paid for is kept

    start = time.monotonic()
    second = build_llm_contexts_ray(on_ray, driver, make, model=HAIKU, budget_usd=5.0, requests_per_minute=600,
                                    max_in_flight=2)
    assert time.monotonic() - start >= (second.written - 1) * 0.1  # 600 a minute across all workers
    assert second.written == total - first.written and second.remaining == 0 and not second.stopped
    assert len(anthropic_stub.state.messages()) - calls_before == total  # each chunk paid for exactly once
    assert on_ray.ledger.contexts("llm") == local.ledger.contexts("llm")
    # Below the cache minimum every call costs the same on both engines.
    assert first.usd + second.usd == pytest.approx(ref_first.usd + ref.usd, abs=1e-12)


def test_an_unreachable_cluster_fails_fast_with_a_clear_message() -> None:
    import socket
    import time

    from core.ingest.ray_engine import RayEngineError, check_reachable

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(RayEngineError, match="nothing answers at ray://127.0.0.1"):
        check_reachable(f"ray://127.0.0.1:{port}")
    assert time.monotonic() - start < 6
    with pytest.raises(RayEngineError, match="expected 'auto'"):
        check_reachable("head-node")
    check_reachable("auto")  # left to Ray, which resolves it from the local node's files


def test_cli_ray_address_needs_the_ray_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli import main

    assert main(["ingest", str(tmp_path), "--ray-address", "auto", "--db", str(tmp_path / "w.duckdb")]) == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
    assert not (tmp_path / "w.duckdb").exists()  # stopped before opening anything


def test_a_table_file_and_its_edit_through_ray_are_the_workspace_s_table_as_locally(ray_runtime, tmp_path: Path
                                                                                    ) -> None:
    """The typed table is written once a worker's sandbox accepted the file, under the id its document gets: an
    edited table keeps its document id (as locally), and a ragged one is refused with nothing written."""
    store, log = Store(":memory:"), tmp_path / "embedded.log"
    _ray_ingest(store, _factory(log), [("rigs.csv", b"rig,bar\nPelican,350\nHeron,280\n"),
                                       ("bad.csv", b"a,b\n1\n")], actors=1)
    assert [(t.name, t.n_rows) for t in store.tables.list()] == [("rigs", 2)]
    rep = _ray_ingest(store, _factory(log), [("rigs.csv", b"rig,bar\nPelican,350\nHeron,280\nOsprey,410\n")],
                      actors=1)
    assert [r.status for r in rep.results] == ["replaced"]
    [t] = store.tables.list()
    assert t.n_rows == 3 and t.doc_id == store.corpus.documents()[0].doc_id
    assert store.tables.sandbox().run("SELECT max(bar) FROM rigs").rows == ((410,),)


def test_vectors_the_ray_engine_writes_are_served_through_the_ann_graph(ray_runtime, tmp_path: Path) -> None:
    """Issue #32 item 5: past the ANN threshold (1 here) the dense index over Ray-written vectors searches through
    the graph saved beside the database, gives the exact scan's results, and a second Ray ingest adds only its new
    chunks to the saved graph."""
    from core.retrieve.index import IndexCache

    store, log, emb = Store(":memory:"), tmp_path / "embedded.log", TokenHashEmbedder()
    _ray_ingest(store, _factory(log), files=_files()[:4], actors=1)
    cache = IndexCache(tmp_path / "ann", ann_min_chunks=1)
    graphed = cache.dense(store, emb, "default")
    assert graphed.ann is not None and cache.last_ann_sync is not None and cache.last_ann_sync.built
    assert len(graphed.ann) == len(graphed) == store.corpus.count("chunks") > 8
    exact = IndexCache(None, ann_min_chunks=10**9).dense(store, emb, "default")
    assert exact.ann is None
    for c in store.corpus.chunks()[::3]:
        q = emb.encode([c.text])[0]
        a, b = graphed.search(q, 5), exact.search(q, 5)
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-6)  # the same list (ids may swap in a tie)
        assert c.chunk_id in {cid for cid, s in a if s >= a[0][1] - 1e-6}  # the chunk's own vector comes first
    before = len(graphed)
    _ray_ingest(store, _factory(log), files=_files()[:6], actors=1)
    again = IndexCache(tmp_path / "ann", ann_min_chunks=1)
    grown = again.dense(store, emb, "default")
    sync = again.last_ann_sync
    assert sync is not None and not sync.built and sync.removed == 0
    assert sync.added == len(grown) - before > 0 and grown.ann is not None and len(grown.ann) == len(grown)
    new = [c for c in store.corpus.chunks() if c.doc_id in {d.doc_id for d in store.corpus.documents()
                                                              if d.name in ("doc4.md", "doc5.md")}]
    top = grown.search(emb.encode([new[0].text])[0], 3)
    assert new and new[0].chunk_id in {cid for cid, s in top if s >= top[0][1] - 1e-6}
