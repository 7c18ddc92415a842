"""README's measured section is generated from bench/results/*.json: it fails when the two drift apart."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import readme_tables  # noqa: E402


def test_readme_measured_section_is_what_the_results_files_say() -> None:
    readme = (ROOT / "README.md").read_text()
    expected = readme_tables.splice(readme, readme_tables.render())
    assert readme == expected, "README.md is out of date: run .venv/bin/python bench/readme_tables.py"


def test_caption_names_the_run_or_says_it_is_not_recorded() -> None:
    old = {"command": "python bench/query.py", "timestamp": "2026-11-29T20:53:35+00:00",
           "machine": {"load_avg_at_start": [1.12, 2.1, 3.1]}}
    assert readme_tables.caption("query.json", old) == (
        "*`bench/results/query.json` · `python bench/query.py` · 2026-11-29 20:53 UTC · commit not recorded · "
        "load average 1.1 at start*")
    new = {"run": {"commit": "0123456789abcdef0123", "dirty": True, "finished_at": "2026-11-30T14:00:00+00:00",
                   "load_avg_start": [3.0, 2.0, 1.0], "load_avg_end": [4.5, 2.0, 1.0],
                   "command": ".venv/bin/python bench/query.py --docs 300"}}
    assert readme_tables.caption("query.json", new) == (
        "*`bench/results/query.json` · `.venv/bin/python bench/query.py --docs 300` · 2026-11-30 14:00 UTC · "
        "commit `0123456789ab` (tree had uncommitted changes) · load average 3.0 at start, 4.5 at end*")


def test_a_changed_number_in_a_results_file_changes_the_readme(tmp_path: Path) -> None:
    for f in (ROOT / "bench" / "results").glob("*.json"):
        (tmp_path / f.name).write_text(f.read_text())
    before = readme_tables.render(tmp_path)
    data = json.loads((tmp_path / "ingest.json").read_text())
    data["ratio_ingest_to_bare"] = 0.4242
    (tmp_path / "ingest.json").write_text(json.dumps(data))
    after = readme_tables.render(tmp_path)
    assert "**ratio 0.42**" in after and "**ratio 0.42**" not in before


def test_markers_must_be_present_once() -> None:
    with pytest.raises(readme_tables.MarkerError, match="exactly one"):
        readme_tables.splice("# README without markers\n", "x")
    both = f"a\n{readme_tables.BEGIN}\nold\n{readme_tables.END}\nb\n"
    assert readme_tables.splice(both, "NEW") == "a\nNEW\nb\n"


def test_new_renderers_tolerate_missing_keys_and_check_targets_against_the_file() -> None:
    # A results file being rewritten by a running bench may lack any key: render what exists, never raise.
    for fn in (readme_tables.quality_sample, readme_tables.onnx, readme_tables.route, readme_tables.route_tune,
               readme_tables.route_twowiki, readme_tables.route_scifact, readme_tables.answer_support,
               readme_tables.answer_cache, readme_tables.answer_cache_replay, readme_tables.ui_latency,
               readme_tables.agent_decompose, readme_tables.agent_with_targets, readme_tables.cascade_scifact,
               readme_tables.cache_embedders):
        assert fn({}, "x.json")[0].startswith("### ")
    ui = "\n".join(readme_tables.ui_latency({"median_s": 0.8, "max_s": 3.5,
                                             "targets": {"median_s": 1.0, "max_s": 3.0}}, "ui_latency.json"))
    assert "toggle median **0.80 s** (target ≤ 1.0 s: met)" in ui
    assert "toggle max **3.50 s** (target ≤ 3.0 s: **not met**)" in ui
    sf = "\n".join(readme_tables.route_scifact({"scifact": {"default": {"ndcg@10": 0.80},
                                                            "routed": {"ndcg@10": 0.794}}}, "route_scifact.json"))
    assert "Routed minus default nDCG@10: −0.60 points" in sf and ": **not met**)" in sf
    ans = "\n".join(readme_tables.answer_support({"product_end_to_end": {
        "test": {"answerable": 20, "answered_correctly": 0.9, "unanswerable": 10, "refused_unanswerable": 0.8}}},
        "answer.json"))
    assert "answered 90.0% (met), refused 80.0% of 10 (**not met**)" in ans
