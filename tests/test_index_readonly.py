"""A query only reads (plus its run-log row and, once per model and question, its query vector in the embedding
cache, issue #47 item 7): every table keeps its row count through queries with the heuristic
context variant, dense search on a model with no stored vectors, GraphRAG local and global search (summaries and
name vectors made in memory), and the default cascade."""
from __future__ import annotations

from core.config import PipelineConfig
from core.deps import Deps
from core.graph.build import build_graph
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from tests.fakes import HashEmbedder

DOCS = [
    ("rehak.md", b"# Staffing\n\nTomas Rehak leads Project Bluefin for Harbor Freight Lines. Project Bluefin ships in May."
                 b"\n\n## Budget\n\nHarbor Freight Lines pays for Project Bluefin from the 2025 budget."),
    ("novak.md", b"# Team\n\nIrena Novak works with Tomas Rehak on Project Bluefin. Irena Novak reviews the budget."),
]


def _counts(store: Store) -> dict[str, int]:
    cur = store.db.cursor()
    tables = [r[0] for r in cur.execute("SELECT table_name FROM information_schema.tables "
                                        "WHERE table_schema = 'main' ORDER BY 1").fetchall()]
    return {t: int(cur.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables}


def test_queries_write_nothing_but_their_run_log_row(store: Store, embedder: HashEmbedder) -> None:
    cfg = PipelineConfig().with_overrides({"graph.enabled": True, "graph.mode": "both", "graph.min_phrase_chunks": 1,
                                           "context.variant": "heuristic",
                                           "answer_cache.enabled": False})  # it stores answers by design
    assert not ingest_files(DOCS, store=store, embedder=embedder, config=cfg).errors
    build_graph(store, cfg.graph, embedder=embedder)
    before = _counts(store)
    assert before["chunk_contexts"] > 0  # heuristic contexts were written at ingest
    deps = Deps(store=store, embedder=embedder)
    for q in ("Who leads Project Bluefin?", "What does Harbor Freight Lines pay for?"):
        trace = run_query(q, cfg, deps, log=False)
        assert trace.stage("graph_global").skipped is None and trace.stage("dense").candidates
    # A model switch: no vector stored for it, so the dense index embeds in memory; the global stage summarises.
    other = Deps(store=store, embedder=HashEmbedder(dim=64, model_id="hash-64-other"))
    assert run_query("Who leads Project Bluefin?", cfg, other, log=False).stage("dense").candidates
    assert other.indexes.unstored("default", "heuristic") == store.corpus.count("chunks")
    mid = _counts(store)
    # three (model, question) pairs were embedded: two questions on the stored model, one on the other model
    assert {t: mid[t] - before[t] for t in mid if mid[t] != before[t]} == {"embedding_cache": 3}
    run_query("Who leads Project Bluefin?", cfg, deps)  # logged: the run log alone grows, by one row
    after = _counts(store)
    grew = {t: after[t] - mid[t] for t in after if after[t] != mid[t]}
    assert grew == {"runs": 1}  # the question's vector is read back from the cache, not stored again
