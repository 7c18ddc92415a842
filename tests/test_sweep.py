"""The sweep: a grid of configurations over a golden set, ranked with "no clear difference" bands, stored per
workspace + set + config hash so a rerun skips what is done, a cost estimate first, the CLI and the Evaluate panel."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core import cli
from core.app.workspaces import load_workspace_config
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.datasets import parse_jsonl
from core.eval.sweep import SweepRow, estimate_usd, grid_configs, load_grid, plan, rank, run_sweep, set_key
from core.ingest.pipeline import ingest_files
from core.store import Store
from pages import _state
from tests.fakes import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ("gateway.md", b"# Gateway\n\nThe gateway refuses connections below TLS_VERSION_MIN, which defaults to 1.2.\n\n"
                   b"## Backups\n\nNightly backups go to the cold archive in Reykjavik for ninety days.\n"),
    ("finance.md", b"# Finance\n\nRevenue grew 3% over the previous quarter, to 18.1 million euros.\n"),
]
LINES = [
    {"id": "q1", "query": "What does TLS_VERSION_MIN default to?",
     "gold": [{"doc": "gateway.md", "span": "refuses connections below TLS_VERSION_MIN, which defaults"}]},
    {"id": "q2", "query": "How much did revenue grow?",
     "gold": [{"doc": "finance.md", "span": "Revenue grew 3% over the previous quarter"}]},
]
GRID = [("bm25", {"dense.enabled": False, "rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False,
                  "router.enabled": False}),
        ("hybrid", {"rerank.enabled": False, "prune.enabled": False, "mmr.enabled": False, "router.enabled": False})]


def _row(name: str, recall: list[float]) -> SweepRow:
    per = {f"q{i}": v for i, v in enumerate(recall)}
    return SweepRow(name, name, {"recall@5": sum(recall) / len(recall), "mrr": 0.5}, {"recall@5": per}, 10.0, 0.0)


def test_rank_puts_configs_inside_the_noise_in_one_band() -> None:
    best = _row("best", [1.0] * 20)
    tied = _row("tied", [1.0] * 19 + [0.0])          # one question apart: inside the paired noise
    worse = _row("worse", [1.0] * 5 + [0.0] * 15)    # clearly behind
    out = rank([worse, tied, best])
    assert [r.name for r in out] == ["best", "tied", "worse"]
    assert [r.band for r in out] == [1, 1, 2]


def test_grid_file_and_cost_estimate(tmp_path: Path) -> None:
    p = tmp_path / "g.toml"
    p.write_text('[[configs]]\nname = "bm25"\n[configs.set]\n"dense.enabled" = false\n\n'
                 '[[configs]]\nname = "llm-answer"\n[configs.set]\n"answer.mode" = "llm"\n')
    grid = load_grid(p)
    assert grid == [("bm25", {"dense.enabled": False}), ("llm-answer", {"answer.mode": "llm"})]
    a, b = grid_configs(PipelineConfig(), grid)
    assert not a.config.dense.enabled and not a.config.answer_cache.enabled  # the sweep never replays answers
    assert estimate_usd(b.config, 100, llm_available=False) == 0.0  # offline: nothing is spent
    paid = estimate_usd(b.config, 100, llm_available=True)
    assert paid > 0 and estimate_usd(b.config, 200, llm_available=True) == pytest.approx(2 * paid)
    offline = a.config.with_overrides({"answer.mode": "extractive", "router.method": "offline"})
    assert estimate_usd(offline, 100, llm_available=True) == 0.0
    assert 0 < estimate_usd(offline.with_overrides({"router.method": "llm"}), 100, llm_available=True) < paid
    bad = tmp_path / "bad.json"
    bad.write_text('{"configs": []}')
    with pytest.raises(Exception, match="non-empty list"):
        load_grid(bad)


def test_sweep_ranks_stores_and_resumes(deps: Deps) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    gs = parse_jsonl("\n".join(json.dumps(x) for x in LINES), "tiny.jsonl")
    configs = grid_configs(PipelineConfig(), GRID)
    seen: list[tuple[int, int]] = []
    hybrid = PipelineConfig().with_overrides(GRID[1][1])  # the current configuration is a row of this grid
    res = run_sweep(gs, configs, deps, progress=lambda d, t, m: seen.append((d, t)), current=hybrid)
    assert res.ran == 2 and res.resumed == 0 and seen[-1] == (4, 4)
    table = res.table()
    assert {r["config"] for r in table} == {"bm25", "hybrid"} and table[0]["band"] == 1
    assert all(r["recall@5"] == 1.0 and r["$ / query"] == 0.0 and r["median ms"] > 0 for r in table)
    stored = deps.store.sweeps.done("default", set_key(gs), deps.store.corpus.corpus_version("default"))
    assert set(stored) == {c.config.stable_hash() for c in configs}
    # a rerun skips both; a third configuration runs alone
    more = configs + grid_configs(PipelineConfig(), [("dense", {"bm25.enabled": False, "router.enabled": False})])
    assert len(plan(gs, more, deps, workspace="default")[1]) == 1
    again = run_sweep(gs, more, deps, current=hybrid)
    assert again.ran == 1 and again.resumed == 2 and len(again.rows) == 3
    # its first question alone is another set, even when asked for with `limit`
    assert run_sweep(gs, configs, deps, limit=1, current=hybrid).ran == 2
    # an edited set is another set: nothing is reused
    edited = parse_jsonl("\n".join(json.dumps({**x, "query": x["query"] + " exactly"}) for x in LINES), "tiny.jsonl")
    assert len(plan(edited, configs, deps, workspace="default")[1]) == 2


def test_sweep_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "w.duckdb")
    store = Store(db)
    ingest_files(DOCS, store=store, embedder=HashEmbedder(), config=PipelineConfig())
    store.close()
    gold = tmp_path / "tiny.jsonl"
    gold.write_text(json.dumps(LINES[0]))  # one question: the contract's shape, not the scores
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps({"configs": [{"name": n, "set": s} for n, s in GRID]}))
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: Deps(store=kw["store"], embedder=HashEmbedder()))
    as_hybrid = [f"--set={k}={str(v).lower()}" for k, v in GRID[1][1].items()]  # the current config: a grid row
    assert cli.main(["sweep", "--dataset", str(gold), "--grid", str(grid), "--db", db, "--json", *as_hybrid]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert [r["config"] for r in out["table"]] and out["ran"] == 2 and "offline: nothing is spent" in captured.err
    # the contract: the table, plus the recommendation (a row's name) and the verdict
    assert out["verdict"] == "no clear winner" and out["recommendation"] == "hybrid"
    assert {r["config"] for r in out["table"]} == {"bm25", "hybrid"} and out["validity"]["generated"] is False
    assert cli.main(["sweep", "--dataset", str(gold), "--grid", str(grid), "--db", db, *as_hybrid]) == 0
    captured = capsys.readouterr()
    assert "0 of 2 configurations to run (2 stored)" in captured.err and "band" in captured.out
    assert "verdict: no clear winner — recommendation 'hybrid'" in captured.out
    # a base configuration no grid row is: it is swept as the row 'current', the verdict's reference
    assert cli.main(["sweep", "--dataset", str(gold), "--grid", str(grid), "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "current" in {r["config"] for r in out["table"]} and out["recommendation"] == "current"


def test_evaluate_panel_runs_the_sweep_and_uses_one(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    monkeypatch.setattr("core.eval.sweep.STANDARD_GRID", tuple(GRID))
    monkeypatch.setattr("pages._sweep_panel.STANDARD_GRID", tuple(GRID))
    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=120)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    at = at.switch_page("pages/evaluate.py").run()
    at.radio(key="eval_source").set_value("paste").run()
    at.text_area(key="eval_paste").input("\n".join(json.dumps(x) for x in LINES)).run()
    assert not at.exception
    assert any("2 to run" in c.value and "$0 (offline)" in c.value for c in at.caption)
    at.button(key="sweep_run").click().run()
    assert not at.exception
    (table,) = [d.value for d in at.dataframe if {"band", "config", "recall@5"} <= set(d.value.columns)]
    assert set(table["config"]) == {"bm25", "hybrid", "current"}  # the session's configuration is no grid row
    # two questions separate nothing: no clear winner, the current configuration preselected, and a row inside its
    # noise band says so before "Use this"
    assert any("No clear winner" in i.value for i in at.info)
    assert at.selectbox(key="sweep_pick").value == "current"
    at.selectbox(key="sweep_pick").set_value("bm25").run()
    assert any("inside the noise band of the current configuration" in w.value for w in at.warning)
    at.button(key="sweep_use").click().run()
    chosen = at.session_state[_state.CONFIG_KEY]
    assert not chosen.dense.enabled and chosen.answer_cache.enabled  # the user's config, not the sweep's fixed one
    stored, _ = load_workspace_config(deps.store, "default")
    assert stored is not None and stored.stable_hash() == chosen.stable_hash()
    assert any("is now the configuration" in s.value for s in at.success)
    # the calibration panel beside it: none yet; this two-question set cannot calibrate, and says why
    assert any("No calibration in workspace 'default'" in c.value for c in at.caption)
    at.button(key="cal_run").click().run()
    assert not at.exception and any("at least 5" in w.value for w in at.warning)
    assert deps.store.calibrations.get("default") is None


def test_a_new_session_starts_from_the_workspace_configuration(deps: Deps) -> None:
    from core.app.workspaces import save_workspace_config

    chosen = PipelineConfig().with_overrides({"dense.enabled": False})
    save_workspace_config(deps.store, "default", chosen)
    at = AppTest.from_file(str(ROOT / "workbench.py"), default_timeout=120)
    at.session_state[_state.DEPS_KEY] = deps
    at.run()
    assert not at.exception and at.session_state[_state.CONFIG_KEY].stable_hash() == chosen.stable_hash()


def test_verdict_recommends_only_outside_the_current_configurations_noise_band() -> None:
    from core.eval.sweep import verdict

    cur = _row("cur", [1.0] * 10 + [0.0] * 30)
    close = _row("close", [1.0] * 11 + [0.0] * 29)      # one question better: inside the band
    far = _row("far", [1.0] * 30 + [0.0] * 10)          # twenty better, none worse: outside it
    farther = _row("farther", [1.0] * 31 + [0.0] * 9)
    worse = _row("worse", [0.0] * 40)
    v = verdict(rank([cur, close, far, farther, worse]), "cur")
    assert v.verdict == "winner" and v.recommendation == "farther" and v.current == "cur"
    assert v.vs_current == {"cur": "current", "close": "no clear difference", "far": "better",
                            "farther": "better", "worse": "worse"}
    assert v.inside_band("close") and not v.inside_band("far") and v.gain == pytest.approx(0.525)
    # nothing clear of the band: keep the current configuration, even when a row ranks above it
    v = verdict(rank([cur, close, worse]), "cur")
    assert v.verdict == "no clear winner" and v.recommendation == "cur" and "keep the current" in v.reason
    # a set that failed its validity check adopts nothing, and names what would have won
    v = verdict(rank([cur, far]), "cur", blocked="the set failed its validity check (too easy)")
    assert v.verdict == "no clear winner" and v.recommendation == "cur" and "'far'" in v.reason
    with pytest.raises(ValueError):
        verdict(rank([close, far]), "cur")


def test_validity_labels_small_easy_and_lexical_generated_sets() -> None:
    from core.eval.validity import assess, min_detectable

    assert min_detectable(100) == pytest.approx(0.04) and min_detectable(30) == pytest.approx(4 / 30)
    qs = [("factoid", True, True)] * 40 + [("unanswerable", False, False)] * 6
    ok = assess(qs, generated=True, generation={"mean_overlap": 0.3, "dropped": {"cloze": 3}}, difficulty=0.8)
    assert ok.ok and ok.answerable == 40 and ok.dropped == {"cloze": 3} and ok.by_type["unanswerable"] == 6
    bad = assess(qs[:20], generated=True, generation={"mean_overlap": 0.7}, difficulty=0.97)
    assert [f.split(":")[0] for f in bad.failures] == ["too small", "too easy", "too lexical"]
    assert "failed its validity check" in bad.blocked() and not bad.to_dict()["ok"]
    # a hand-written set is reported, not gated
    assert assess(qs[:20], generated=False, difficulty=0.97).ok
    # a set whose questions mostly name the identifier they ask about is a keyword lookup
    lookup = assess(qs, generated=True, generation={"mean_overlap": 0.3}, difficulty=0.8, named_lookup=0.55)
    assert [f.split(":")[0] for f in lookup.failures] == ["too lexical"] and "identifier" in lookup.failures[0]
    assert assess(qs, generated=True, generation={"mean_overlap": 0.3}, difficulty=0.8, named_lookup=0.5).ok


def test_a_generated_set_that_failed_its_validity_check_recommends_nothing(deps: Deps) -> None:
    from dataclasses import replace

    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    gs = replace(parse_jsonl("\n".join(json.dumps(x) for x in LINES), "gen.jsonl"), generator="offline-v2",
                 generation={"mean_overlap": 0.2, "dropped": {"a slot or fragment left in it": 4}})
    res = run_sweep(gs, grid_configs(PipelineConfig(), GRID), deps, current=PipelineConfig().with_overrides(GRID[1][1]))
    assert res.validity is not None and not res.validity.ok and res.validity.generated
    assert res.validity.dropped == {"a slot or fragment left in it": 4}
    assert res.verdict is not None and res.verdict.verdict == "no clear winner" and res.verdict.blocked
    out = res.to_dict()
    assert out["recommendation"] == "hybrid" and out["validity"]["failures"][0].startswith("too small")
