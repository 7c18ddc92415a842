"""README's headline table and docs/measured.md are generated from bench/results/*.json: they fail when either drifts
from the results; the README stays a short front page whose links lead inside the repository."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "bench"))

import _common  # noqa: E402
import readme_tables  # noqa: E402

README = ROOT / "README.md"
MEASURED = ROOT / "docs" / "measured.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
STALE = "out of date: run .venv/bin/python bench/readme_tables.py"


def test_readme_headline_is_what_the_results_files_say() -> None:
    # the ages ("N commits old") move with every commit: they are what they were when the README was generated
    readme = README.read_text()
    want = readme_tables.splice(readme, readme_tables.headline())
    assert readme_tables.unaged(readme) == readme_tables.unaged(want), f"README.md is {STALE}"


def test_each_headline_row_says_how_many_commits_old_its_figure_is(tmp_path: Path) -> None:
    rows = readme_tables.headline().splitlines()[3:-1]
    assert rows and all(re.search(r" · [\d,]+ commits? old \|$", r) for r in rows), rows
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert readme_tables.commits_since(head) == 0 and readme_tables.commits_since("0" * 40) is None
    # the figure's own run when a file merges several (generalise.json: the ru_seed part's)
    gen = json.loads((RESULTS / "generalise.json").read_text())
    assert readme_tables.figure_run(RESULTS, "generalise.json") == gen["sets"]["ru_seed"]["run"]
    for f in RESULTS.glob("*.json"):  # the same files run at a commit this clone does not know
        d = json.loads(f.read_text())
        if isinstance(d.get("run"), dict):
            d["run"]["commit"] = "0" * 40
        if f.name == "generalise.json":
            d["sets"]["ru_seed"]["run"]["commit"] = "0" * 40
        (tmp_path / f.name).write_text(json.dumps(d))
    rows = readme_tables.headline(tmp_path).splitlines()[3:-1]
    assert len(rows) == len(readme_tables.headline_files()) and all(r.endswith(" · age not recorded |") for r in rows)


def test_make_bench_headline_reruns_the_recorded_commands() -> None:
    cmds = readme_tables.headline_commands()
    assert any("bench/generalise.py --sets ru_seed" in c for c in cmds)  # the figure's part, then its merge
    assert any("bench/generalise.py --merge" in c for c in cmds)
    assert all(c.split()[1].startswith("bench/") for c in cmds), cmds
    assert "--headline-commands" in (ROOT / "Makefile").read_text().split("bench-headline:", 1)[1]


def test_measured_doc_is_what_the_results_files_say() -> None:
    assert MEASURED.read_text() == readme_tables.render(), f"docs/measured.md is {STALE}"


def test_check_mode_reports_either_file_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme, measured = tmp_path / "README.md", tmp_path / "measured.md"
    shutil.copy(README, readme)
    shutil.copy(MEASURED, measured)
    monkeypatch.setattr(readme_tables, "README", readme)
    monkeypatch.setattr(readme_tables, "MEASURED", measured)
    assert readme_tables.main(["--check"]) == 0
    measured.write_text(measured.read_text().replace("**ratio 1.", "**ratio 9.", 1))
    assert readme_tables.main(["--check"]) == 1
    assert readme_tables.main([]) == 0 and readme_tables.main(["--check"]) == 0  # rewritten from the results
    text = readme.read_text()
    row = next(line for line in text.splitlines() if "ingest.json" in line)
    readme.write_text(text.replace(row, row.replace("×", "x")))
    assert readme_tables.main(["--check"]) == 1


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


def _bench(name: str) -> Any:
    """A bench script as a module (its table functions), not run."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_changed_number_in_a_results_file_changes_both_outputs(tmp_path: Path) -> None:
    # a re-run: the bench writes its payload through write_result with its own Table, which the renderer lays out
    for f in RESULTS.glob("*.json"):
        (tmp_path / f.name).write_text(f.read_text())
    before, head_before = readme_tables.render(tmp_path), readme_tables.headline(tmp_path)
    data = json.loads((tmp_path / "ingest.json").read_text())
    data["ratio_ingest_to_bare"] = 0.4242
    _common.write_result("ingest", data, tmp_path / "ingest.json", argv=[], table=_bench("ingest").MEASURED_INGEST)
    after, head_after = readme_tables.render(tmp_path), readme_tables.headline(tmp_path)
    assert "**ratio 0.42**" in after and "**ratio 0.42**" not in before
    assert "**0.42×**" in head_after and "**0.42×**" not in head_before
    # it keeps its place: the same parts, sections and headline rows in the same order
    assert readme_tables.parts(tmp_path) == readme_tables.parts(RESULTS)
    assert [f for f, _ in readme_tables.sections(tmp_path)] == [f for f, _ in readme_tables.sections(RESULTS)]
    assert [f for f, _ in readme_tables.headline_files(tmp_path)] == [f for f, _ in readme_tables.headline_files()]
    # a bench that writes without a Table drops the section a merged payload carried (it would be stale)
    _common.write_result("ingest", data, tmp_path / "ingest.json", argv=[])
    assert "measured" not in json.loads((tmp_path / "ingest.json").read_text())
    assert "ingest.json" in readme_tables.unshown(tmp_path)


def test_every_section_is_what_its_bench_renders_from_the_payload() -> None:
    # the ported table functions give the stored lines back (a renderer drifting from its bench fails here)
    for name, table, file in (("ingest", "MEASURED_INGEST", "ingest.json"), ("ann", "MEASURED_ANN", "ann.json"),
                              ("quality", "MEASURED_QUALITY_BEIR", "quality_beir_scifact.json"),
                              ("ui_latency", "MEASURED_UI_LATENCY", "ui_latency.json"),
                              ("answer_cache", "MEASURED_ANSWER_CACHE", "answer_cache.json"),
                              ("answer_public", "MEASURED_ANSWER_PUBLIC", "answer_public.json"),
                              ("verify_kinds", "MEASURED", "verify_kinds.json"),
                              ("generalise", "MEASURED_GENERALISE", "generalise.json")):
        d = json.loads((RESULTS / file).read_text())
        stored = d.pop("measured")
        assert json.loads(json.dumps(_common.table_section(getattr(_bench(name), table), d, file, {"measured": stored}))) \
            == stored, file


def test_headline_is_one_table_of_at_most_eight_rows_each_naming_its_results_file() -> None:
    readme = README.read_text()
    region = readme.split(readme_tables.BEGIN, 1)[1].split(readme_tables.END, 1)[0]
    rows = [line for line in region.strip().splitlines()[2:] if line.startswith("|")]
    assert 1 <= len(rows) <= 8
    parts = set(readme_tables.parts())
    for row in rows:
        file = re.search(r"\(bench/results/([\w.]+\.json)\)", row)
        assert file and (ROOT / "bench" / "results" / file.group(1)).exists(), row
        assert "not recorded" not in row, row
        section = re.search(r"\[([^\]]+)\]\(docs/measured\.md#([\w-]+)\)", row)
        assert section and section.group(1) in parts and f"\n## {section.group(1)}\n" in MEASURED.read_text(), row
        assert section.group(2) == readme_tables.anchor(section.group(1))


def test_headline_renders_without_results_and_says_so(tmp_path: Path) -> None:
    assert readme_tables.headline(tmp_path).splitlines()[3:-1] == []  # no results files: an empty table
    ui = _bench("ui_latency").MEASURED_UI_LATENCY
    _common.write_result("ui_latency", {}, tmp_path / "ui_latency.json", argv=[], table=ui)
    rows = readme_tables.headline(tmp_path).splitlines()[3:-1]
    assert len(rows) == 1 and "| not recorded |" in rows[0]  # a figure its payload lacks is said to be missing


def test_markers_must_be_present_once() -> None:
    with pytest.raises(readme_tables.MarkerError, match="exactly one"):
        readme_tables.splice("# README without markers\n", "x")
    both = f"a\n{readme_tables.BEGIN}\nold\n{readme_tables.END}\nb\n"
    assert readme_tables.splice(both, "NEW") == "a\nNEW\nb\n"


def test_measured_doc_has_every_results_file_and_distinct_section_titles(tmp_path: Path) -> None:
    text = MEASURED.read_text()
    for f in (ROOT / "bench" / "results").glob("*.json"):
        assert f"bench/results/{f.name}" in text, f.name
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert len(titles) == len(set(titles))
    for title in readme_tables.parts():
        assert f"[{title}](#{readme_tables.anchor(title)})" in text
    (tmp_path / "new_bench.json").write_text("{}")  # a results file with no table yet is listed, not dropped
    assert "`bench/results/new_bench.json`" in readme_tables.render(tmp_path)
    assert readme_tables.unshown(tmp_path) == ["new_bench.json"]


def test_a_results_file_without_a_table_is_skipped_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    readme, measured = tmp_path / "README.md", tmp_path / "measured.md"
    shutil.copy(README, readme)
    shutil.copy(MEASURED, measured)
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    (results / "new_bench.json").write_text(json.dumps({"run": {"command": "python bench/new_bench.py"}, "x": 1}))
    for name, value in (("README", readme), ("MEASURED", measured), ("RESULTS", results)):
        monkeypatch.setattr(readme_tables, name, value)
    assert readme_tables.main([]) == 0
    assert "note: bench/results/new_bench.json has no `measured` section" in capsys.readouterr().err
    assert "`bench/results/new_bench.json`" in measured.read_text().split("## Results files not shown here")[1]


def test_table_functions_tolerate_missing_keys_and_check_targets_against_the_file() -> None:
    # A results file being rewritten by a running bench may lack any key: render what exists, never raise.
    agent, ui, public = _bench("agent"), _bench("ui_latency"), _bench("answer_public")
    for fn in (_bench("quality").measured_quality_sample, _bench("ann").measured_ann, ui.measured_ui_latency,
               agent.measured_agent_decompose, agent.measured_agent_with_targets,
               _bench("verify_kinds").measured, _bench("verify_nearmiss").measured_verify_nearmiss,
               _bench("answer_cache").measured_answer_cache, public.measured_answer_public):
        assert fn({}, "x.json")[0].startswith("### ")
    text = "\n".join(readme_tables.lines_of("ui_latency.json", {"measured": _common.table_section(
        ui.MEASURED_UI_LATENCY, {"median_s": 0.8, "max_s": 3.5, "targets": {"median_s": 1.0, "max_s": 3.0}},
        "ui_latency.json")}))
    assert "toggle median **0.80 s** (target ≤ 1.0 s: met)" in text
    assert "toggle max **3.50 s** (target ≤ 3.0 s: **not met**)" in text
    split = {"after": {"answerable": 60, "unanswerable": 30, "answered_correctly": 0.9, "refused_unanswerable": 0.5}}
    what, figure = public.headline_answer_public({"splits": {"sample eval_holdout6.jsonl": split}}, "x.json")
    assert "60 answerable, 30 not" in what and figure == (
        "answered **90.0%**, refused **50.0%** (target ≥ 85% each: met / **not met**)")


# -- the front page -------------------------------------------------------------------------------------------------
def test_readme_is_a_short_front_page_with_the_two_commands() -> None:
    readme = README.read_text()
    assert len(readme.splitlines()) <= 300 and len(readme.split()) <= 1000  # a five-minute read; detail in docs/
    commands = re.search(r"## Two commands\n\n```bash\n(.*?)```", readme, re.S)
    assert commands and re.search(r"^make run\b", commands.group(1), re.M) and re.search(
        r"^make test\b", commands.group(1), re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    pages = {p.stem for p in (ROOT / "pages").glob("*.py") if not p.stem.startswith("_")}
    for page in pages:  # one line per page, naming its file
        assert re.search(rf"^- \*\*[^*]+\*\* \(`pages/{page}\.py`\)", readme, re.M), page
    assert "ANTHROPIC_API_KEY" in readme and "offline" in readme.lower()


def test_readme_layout_names_every_core_package() -> None:
    layout = README.read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = [p.name for p in (ROOT / "core").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    for name in packages:
        assert re.search(rf"^  {name}/ ", layout, re.M), name


def test_architecture_doc_names_every_package_and_existing_modules_only() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    for p in (ROOT / "core").iterdir():
        if p.is_dir() and (p / "__init__.py").exists():
            assert re.search(rf"^  {p.name}/ ", text, re.M), p.name
    for path in set(re.findall(r"`(core/[\w/]+\.(?:py|toml))`", text)):
        assert (ROOT / path).exists(), path


def _links(text: str) -> list[str]:
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+://", m)]


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_links_stay_inside_the_repository_and_resolve(doc: Path) -> None:
    text = doc.read_text()
    assert "ARCHITECTURE.md" not in text  # the design document is docs/architecture.md, inside the repository
    for link in _links(text):
        target, _, fragment = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.is_relative_to(ROOT), link
        if path == ROOT / "docs" / "config.md" and not path.exists():
            continue  # generated from the config's field descriptions by its own generator
        assert path.exists(), link
        if fragment and path.suffix == ".md":
            anchors = {readme_tables.anchor(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}
            assert fragment in anchors, link


def test_readme_architecture_pointer_leads_to_docs_architecture() -> None:
    built = README.read_text().split("## How it is built", 1)[1].split("\n## ", 1)[0]
    assert "](docs/architecture.md)" in built


def test_module_paths_named_in_the_docs_exist() -> None:
    # Prose may name modules; a move must carry the docs along (results files keep their historic paths).
    for doc in [README, *DOCS]:
        if doc == MEASURED:
            continue
        for path in set(re.findall(r"(?<![\w/.])(core/[\w/]+\.(?:py|toml|json|npz))", doc.read_text())):
            assert (ROOT / path).exists(), f"{doc.name}: {path}"
