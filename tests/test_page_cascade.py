"""AppTest: the Search Lab's cascade toggles switch rerank, prune, MMR and expansion on and off, visibly."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.app.counters import counters
from core.config import PipelineConfig
from core.deps import Deps
from core.ingest.pipeline import ingest_files
from core.store import Store
from pages import _state
from tests import lab_html
from tests.cascade_fakes import ConceptEmbedder

APP = str(Path(__file__).resolve().parents[1] / "workbench.py")
DOCS = [
    ("garage.md", b"# Garage\n\nMending a car costs about 300 euros. The fee covers the fix. Opening hours are 8 to 5."),
    ("city.md", b"# City\n\nParking for every automobile owner is free on Sundays. Bus routes change in May."),
]


@pytest.fixture
def lab(store: Store) -> AppTest:
    deps = Deps(store=store, embedder=ConceptEmbedder({"automobile": "car", "price": "cost", "fee": "cost"}))
    assert not ingest_files(DOCS, store=store, embedder=deps.embedder, config=PipelineConfig()).errors
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    # The cascade is under test, not the router (which may call a two-document corpus out of scope).
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"router.enabled": False})
    at = at.run().switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("automobile price")
    return at.button(key="search").click().run()


def _skip_captions(at: AppTest) -> list[str]:
    return [f"skipped: {c.skipped}" for c in lab_html.columns(at).values() if c.skipped]


def test_default_runs_the_cascade_and_each_toggle_switches_its_stage(lab: AppTest) -> None:
    assert not lab.exception and not lab.error
    skipped = _skip_captions(lab)
    assert "skipped: expand.enabled = false" in skipped
    assert not any(s.startswith(f"skipped: {st}.") for st in ("rerank", "prune", "mmr") for s in skipped)
    # Tokens in and out (and the share kept) beside each cascade stage, as a chip in its header.
    row = lab_html.columns(lab)
    assert all(any(c.startswith("tokens ") and "→" in c and c.endswith("%)") for c in row[s].chips)
               for s in ("rerank", "prune", "mmr"))
    for key, stage in (("rerank_on", "rerank"), ("prune_on", "prune"), ("mmr_on", "mmr")):
        lab = lab.toggle(key=key).set_value(False).run()
        assert not lab.exception
        assert f"skipped: {stage}.enabled = false" in _skip_captions(lab)
        assert getattr(lab.session_state[_state.CONFIG_KEY], stage).enabled is False
        lab = lab.toggle(key=key).set_value(True).run()
        assert f"skipped: {stage}.enabled = false" not in _skip_captions(lab)
    lab = lab.toggle(key="expand_on").set_value(True).run()
    assert not lab.exception and "skipped: expand.enabled = false" not in _skip_captions(lab)
    assert lab.session_state[_state.CONFIG_KEY].expand.enabled is True


def test_budget_and_lambda_reach_the_config(lab: AppTest) -> None:
    lab = lab.number_input(key="prune_budget").set_value(40).run()
    lab = lab.slider(key="mmr_lam").set_value(0.5).run()
    lab = lab.selectbox(key="prune_scorer").set_value("embedder").run()
    cfg = lab.session_state[_state.CONFIG_KEY]
    assert (cfg.prune.token_budget, cfg.mmr.lam, cfg.prune.scorer) == (40, 0.5, "embedder") and not lab.exception
    assert "<b>scorer</b>: embedder" in lab_html.columns(lab)["prune"].head


def _lab_without_token_vectors(store: Store) -> tuple[Deps, int, AppTest]:
    """Search Lab over a fresh ingest whose late-interaction token vectors were never encoded: deps, chunk count, page."""
    deps = Deps(store=store, embedder=ConceptEmbedder({"automobile": "car"}))
    assert not ingest_files(DOCS, store=store, embedder=deps.embedder, config=PipelineConfig()).errors
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"router.enabled": False})
    return deps, len(store.corpus.chunks()), at.run().switch_page("pages/search_lab.py").run()


def test_token_vectors_are_offered_with_an_estimate_and_built_on_request(store: Store) -> None:
    deps, n, at = _lab_without_token_vectors(store)
    need = [c.value for c in at.caption if "token vectors" in c.value]
    assert len(need) == 1 and f"{n:,} of {n:,} chunks not encoded yet (about " in need[0], need
    assert not [m.value for m in at.markdown if "Needs building" in m.value]  # a speed-up, not a missing index
    encoded = deps.embedder.encoder.windows_encoded
    at = at.button(key="build_tokens").click().run()
    assert not at.exception and deps.embedder.encoder.windows_encoded > encoded
    assert [s.value for s in at.success] and at.success[0].value.startswith(f"token vectors: {n} chunks encoded")
    assert not [c.value for c in at.caption if "token vectors" in c.value]
    # The query that follows finds every candidate's token vectors cached: no chunk is encoded on its path.
    at.text_input(key="query").input("automobile price")
    at = at.button(key="search").click().run()
    c = counters(at.session_state["last_trace"])
    assert not at.exception and c.token_computed == 0 and c.token_hits > 0


def test_the_offer_is_counted_again_after_a_query_that_encoded_chunks(store: Store) -> None:
    deps, n, at = _lab_without_token_vectors(store)
    assert [c.value for c in at.caption if f"{n} of {n} chunks not encoded yet" in c.value]
    at.text_input(key="query").input("automobile price")
    at = at.button(key="search").click().run()
    # The rerank stage read (and stored) every chunk of this two-document corpus: nothing is left to offer.
    assert counters(at.session_state["last_trace"]).token_computed >= n
    assert not at.exception and not [c.value for c in at.caption if "token vectors:" in c.value]


def test_an_unbuilt_context_variant_is_searched_raw_then_built_with_its_token_vectors(store: Store) -> None:
    deps = Deps(store=store, embedder=ConceptEmbedder({"automobile": "car"}))
    assert not ingest_files(DOCS, store=store, embedder=deps.embedder, config=PipelineConfig()).errors
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[_state.DEPS_KEY] = deps
    at.session_state[_state.CONFIG_KEY] = PipelineConfig().with_overrides({"router.enabled": False,
                                                                           "answer_cache.enabled": False})
    at = at.run().switch_page("pages/search_lab.py").run()
    at.text_input(key="query").input("automobile price")
    at = at.button(key="search").click().run()
    calls = deps.embedder.calls
    at = at.radio(key="context_variant").set_value("heuristic").run()
    # Heuristic contexts exist from ingest, their vectors do not: the query searches raw text and embeds no chunk
    # (only the query itself, once) instead of embedding every context on its path.
    assert not at.exception and deps.embedder.calls - calls <= 1
    assert lab_html.columns(at)["dense"].chips.count("searched: raw text") == 1
    assert any("context.variant = heuristic is not built yet" in c.value for c in at.caption)
    at = at.button(key="build_context").click().run()
    assert not at.exception
    done = [s.value for s in at.success]
    assert done and done[0].startswith("heuristic: ") and "token vectors: " in done[0], done
    assert "searched: heuristic contexts" in lab_html.columns(at)["dense"].chips
    c = counters(at.session_state["last_trace"])
    assert c.token_computed == 0 and c.token_hits > 0  # the build encoded what rerank reads on this variant
