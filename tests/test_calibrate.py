"""Per-workspace calibration of the offline answer's refusal threshold: the k-fold fit on known supports, which cut a
query uses and says it used, the stored calibration read by the pipeline, and `calibrate` end to end (+ CLI)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.answer.calibration import CalibrationError, Outcome, choose_cut, cross_validate, rates, refusal_cut
from core.answer.support import load_support_model, model_fingerprint
from core.config import PipelineConfig
from core.deps import Deps
from core.eval.calibrate import calibrate
from core.eval.datasets import parse_jsonl
from core.ingest.pipeline import ingest_files
from core.pipeline import run_query
from core.store import Store
from core.types import Calibration
from tests.fakes import HashEmbedder

DOCS = [
    ("gateway.md", b"# Gateway\n\nThe gateway refuses connections below TLS_VERSION_MIN, which defaults to 1.2 in "
                   b"every region.\n\nNightly backups go to the cold archive in Reykjavik and are kept for ninety "
                   b"days.\n"),
    ("finance.md", b"# Finance\n\nRevenue grew 3% over the previous quarter, to 18.1 million euros.\n\nThe harbour "
                   b"office hired four engineers in May.\n"),
    ("policy.md", b"# Travel policy\n\nEconomy class is required for flights under six hours. Hotel stays are "
                  b"capped at 180 euros per night.\n"),
]
ANSWERABLE = [
    ("What does TLS_VERSION_MIN default to?", "gateway.md", "which defaults to 1.2 in every region"),
    ("How long are nightly backups kept?", "gateway.md", "are kept for ninety days"),
    ("How much did revenue grow over the previous quarter?", "finance.md", "Revenue grew 3% over the previous"),
    ("How many engineers did the harbour office hire?", "finance.md", "The harbour office hired four engineers"),
    ("What is the hotel cap per night?", "policy.md", "Hotel stays are capped at 180 euros per night"),
    ("Which class is required for flights under six hours?", "policy.md", "Economy class is required for flights"),
]
UNANSWERABLE = ["Who founded the Mars office?", "What is the parking fee at the Oslo depot?",
                "When was the submarine fleet retired?", "How many dragons guard the vault?",
                "What colour is the CEO's bicycle?", "Which orchestra plays at the winter gala?"]


def _outcomes(sup_ans: list[float], sup_una: list[float]) -> list[Outcome]:
    return ([Outcome(f"a{i}", True, s, True, True, True) for i, s in enumerate(sup_ans)] +
            [Outcome(f"u{i}", False, s) for i, s in enumerate(sup_una)])


def test_cut_between_the_classes_and_cv_never_judges_a_fold_by_itself() -> None:
    outs = _outcomes([0.6, 0.7, 0.8, 0.9, 0.65, 0.75], [0.1, 0.2, 0.3, 0.25, 0.15, 0.35])
    fit = cross_validate(outs, prior=0.9, k=3)
    assert 0.35 < fit.threshold < 0.6 and fit.folds == 3
    cv, prior = fit.figures["cv"], fit.figures["prior"]
    assert cv["answered_correctly"] == 1.0 and cv["refused_correctly"] == 1.0
    # the prior's 0.9 refuses every answerable question but the one at 0.9
    assert prior["answered_correctly"] == pytest.approx(1 / 6) and prior["refused_correctly"] == 1.0
    # an outlier is judged by a cut chosen without it: held out, the answerable 0.3 is refused at the others' cut
    outs2 = _outcomes([0.6, 0.7, 0.8, 0.9, 0.65, 0.3], [0.1, 0.2, 0.31, 0.25, 0.15, 0.05])
    assert cross_validate(outs2, prior=0.5, k=6).figures["cv"]["answered_correctly"] < 1.0


def test_ties_keep_the_prior_and_rates_count_retrieved_and_sentence() -> None:
    # every cut between 0.3 and 0.6 separates the classes: the prior (0.5) is kept
    assert choose_cut(_outcomes([0.6] * 5, [0.3] * 5), prior=0.5) == 0.5
    r = rates([Outcome("a", True, 0.9, True, True, True), Outcome("b", True, 0.9, False, False, False),
               Outcome("c", True, 0.2, True, True, True), Outcome("u", False, 0.1)], 0.5)
    assert r["answered_correctly"] == pytest.approx(1 / 3) and r["answered_correctly_retrieved"] == 0.5
    assert r["refused_correctly"] == 1.0 and r["retrieved"] == 2 and r["unanswerable"] == 1


def test_too_few_unanswerable_questions_cannot_calibrate() -> None:
    with pytest.raises(CalibrationError, match="5 unanswerable"):
        cross_validate(_outcomes([0.6] * 8, [0.1] * 4), prior=0.5)


def test_which_cut_a_query_uses() -> None:
    cal = Calibration("w", 0.33, "mine", 4, "model-a", "h", 5)
    assert refusal_cut(0.7, cal, 0.5, "model-a").source.startswith("config")
    cut = refusal_cut(-1.0, cal, 0.5, "model-a")
    assert cut.value == 0.33 and "calibration on 'mine'" in cut.source and "v4" in cut.source
    stale = refusal_cut(-1.0, cal, 0.5, "model-b")
    assert stale.value == 0.5 and "another support model" in stale.source
    assert refusal_cut(-1.0, None, 0.5, "model-a").source.startswith("shipped prior")


CFG = PipelineConfig().with_overrides({"answer.mode": "extractive", "answer_cache.enabled": False,
                                       "router.enabled": False})


@pytest.fixture
def ingested(deps: Deps) -> Deps:
    ingest_files(DOCS, store=deps.store, embedder=deps.embedder, config=PipelineConfig())
    return deps


def test_the_pipeline_reads_the_workspace_calibration_and_says_so(ingested: Deps) -> None:
    q = "What is the hotel cap per night?"
    info = run_query(q, CFG, ingested, log=False).stage("answer").info
    assert info["threshold"] == pytest.approx(load_support_model().threshold)
    assert info["threshold_from"].startswith("shipped prior")
    ingested.store.calibrations.save(Calibration("default", 0.999, "tiny", 1, model_fingerprint(), "h", 5))
    t = run_query(q, CFG, ingested, log=False)
    assert t.answer.refused and t.stage("answer").info["threshold"] == 0.999
    assert "calibration on 'tiny'" in t.stage("answer").info["threshold_from"]
    ingested.store.calibrations.save(Calibration("default", 0.0, "tiny", 1, model_fingerprint(), "h", 5))
    assert not run_query(q, CFG, ingested, log=False).answer.refused
    # another workspace keeps the prior; the config's own threshold wins over the calibration
    explicit = CFG.with_overrides({"answer.refusal_threshold": 0.999})
    assert run_query(q, explicit, ingested, log=False).stage("answer").info["threshold_from"].startswith("config")


def _tiny_set_lines() -> list[str]:
    rows = [{"id": f"a{i}", "query": q, "gold": [{"doc": d, "span": s}]} for i, (q, d, s) in enumerate(ANSWERABLE)]
    rows += [{"id": f"u{i}", "query": q, "type": "unanswerable", "answerable": False, "gold": []}
             for i, q in enumerate(UNANSWERABLE)]
    return [json.dumps(r) for r in rows]


def test_a_set_without_enough_unanswerables_stops_before_running(ingested: Deps, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []
    monkeypatch.setattr("core.eval.calibrate.run_query", lambda q, *a, **k: ran.append(q))
    with pytest.raises(CalibrationError, match="has 6 and 2"):
        calibrate(parse_jsonl("\n".join(_tiny_set_lines()[:8]), "short.jsonl"), ingested, config=CFG)
    assert ran == [] and ingested.store.calibrations.get("default") is None
    path = tmp_path / "short.jsonl"
    path.write_text("\n".join(_tiny_set_lines()[:8]))
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: Deps(store=kw["store"], embedder=HashEmbedder()))
    assert cli.main(["calibrate", "--dataset", str(path), "--db", str(tmp_path / "s.duckdb")]) == 2
    assert "has 0 and 2" in capsys.readouterr().err and ran == []  # an empty database: no gold resolves


@pytest.mark.slow
def test_calibrate_fits_stores_and_the_cli_reports(ingested: Deps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    gs = parse_jsonl("\n".join(_tiny_set_lines()), "tiny.jsonl")
    rep = calibrate(gs, ingested, workspace="default", config=CFG, k=3)
    cal = ingested.store.calibrations.get("default")
    assert cal is not None and cal.threshold == rep.calibration.threshold and cal.dataset == "tiny.jsonl"
    assert cal.model == model_fingerprint() and cal.folds == 3
    f = cal.figures
    assert f["cv"]["answerable"] == 6 and f["cv"]["unanswerable"] == 6 and len(f["per_question"]) == 12
    # the fitted cut does at least as well as the prior on the set it was fitted on
    obj = lambda r: (r["answered_correctly_retrieved"] or 0) + (r["refused_correctly"] or 0)  # noqa: E731
    assert obj(f["in_sample"]) >= obj(f["prior"])
    # the CLI on a file database
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(_tiny_set_lines()))
    db = str(tmp_path / "w.duckdb")
    store = Store(db)
    ingest_files(DOCS, store=store, embedder=HashEmbedder(), config=PipelineConfig())
    store.close()
    monkeypatch.setattr(cli, "build_deps", lambda cfg, **kw: Deps(store=kw["store"], embedder=HashEmbedder()))
    assert cli.main(["calibrate", "--dataset", str(path), "--db", db, "--folds", "3", "--json",
                     "--set", "router.enabled=false"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workspace"] == "default" and out["folds"] == 3 and "cv" in out["figures"]
    assert cli.main(["calibrate", "--dataset", str(tmp_path / "missing.jsonl"), "--db", db]) == 2



def test_a_fitted_cut_that_does_no_better_in_cv_keeps_the_prior() -> None:
    # Supports that do not separate the classes: any cut fitted on some folds misjudges the held-out ones, so the
    # CV objective cannot beat the prior's and the prior is what the workspace uses
    outs = _outcomes([0.2, 0.8, 0.3, 0.7, 0.4, 0.6], [0.25, 0.75, 0.35, 0.65, 0.45, 0.55])
    fit = cross_validate(outs, prior=0.5, k=3)
    assert fit.figures["kept_prior"] is True and fit.threshold == 0.5
    assert fit.figures["fitted_threshold"] != 0.5 or fit.figures["in_sample"] == fit.figures["prior"]
    # Separable supports: the fitted cut wins in CV and is used
    sep = cross_validate(_outcomes([0.6, 0.7, 0.8, 0.9, 0.65, 0.75], [0.1, 0.2, 0.3, 0.25, 0.15, 0.35]), prior=0.9, k=3)
    assert sep.figures["kept_prior"] is False and sep.threshold == sep.figures["fitted_threshold"] < 0.6


def test_a_cut_that_refuses_more_answerables_than_the_prior_in_cv_is_never_adopted() -> None:
    # Unanswerables sit just under the answerables: a stricter cut than the prior (0.2) refuses them all and wins
    # the objective, but held out it also refuses answerable questions the prior answered: the prior stays
    outs = _outcomes([0.55, 0.6, 0.7, 0.8, 0.9, 0.45, 0.5], [0.3, 0.35, 0.4, 0.42, 0.38, 0.33, 0.36])
    fit = cross_validate(outs, prior=0.2, k=3)
    cv, prior = fit.figures["cv"], fit.figures["prior"]
    assert cv["refused_answerable"] > prior["refused_answerable"] == 0.0
    assert fit.figures["kept_prior"] is True and fit.threshold == 0.2
    assert "refused more answerable" in fit.figures["kept_prior_why"]
    # a looser cut than the prior refuses fewer answerables: adopted when it does better
    sep = cross_validate(_outcomes([0.6, 0.7, 0.8, 0.9, 0.65, 0.75], [0.1, 0.2, 0.3, 0.25, 0.15, 0.35]), prior=0.9, k=3)
    assert sep.figures["cv"]["refused_answerable"] < sep.figures["prior"]["refused_answerable"]
    assert sep.figures["kept_prior"] is False


def test_a_generated_set_that_failed_its_validity_check_changes_nothing(ingested: Deps) -> None:
    from dataclasses import replace

    # twelve generated questions: too small to tell anything (validity), so the prior stays and it says why
    gs = replace(parse_jsonl("\n".join(_tiny_set_lines()), "gen.jsonl"), generator="offline-v2")
    rep = calibrate(gs, ingested, workspace="default", config=CFG, k=3)
    f = rep.calibration.figures
    assert rep.calibration.threshold == f["prior_threshold"] and f["kept_prior"] is True
    assert "failed its validity check" in f["kept_prior_why"] and not f["validity"]["ok"]
    assert any(n.startswith("not adopted") for n in rep.notes)
    assert "failed its validity check" in rep.calibration.describe()
