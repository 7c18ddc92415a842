"""Named configurations: JSON and TOML round trips keep the stable hash; bad names and broken files are reported."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, PipelineConfig
from core.config.saved import (
    config_diff,
    configs_dir,
    delete_config,
    list_configs,
    load_named,
    resolve_config,
    save_config,
    to_toml,
)


def _cfg() -> PipelineConfig:
    return PipelineConfig().with_overrides({"fusion.method": "weighted_rrf", "fusion.bm25_weight": 1.5,
                                            "fusion.rrf_k": 10, "bm25.enabled": False})


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_round_trip_keeps_the_stable_hash(tmp_path: Path, fmt: str) -> None:
    cfg = _cfg()
    path = save_config("tuned", cfg, "ws", fmt=fmt, data_dir=tmp_path)
    assert path == tmp_path / "workspaces" / "ws" / "configs" / f"tuned.{fmt}"
    back = load_named("tuned", "ws", data_dir=tmp_path)
    assert back == cfg and back.stable_hash() == cfg.stable_hash()
    listed = list_configs("ws", data_dir=tmp_path)
    assert [(c.name, c.hash) for c in listed] == [("tuned", cfg.stable_hash())]
    assert listed[0].label == f"tuned · {cfg.stable_hash()}"


def test_toml_text_is_plain_sections() -> None:
    text = to_toml(_cfg())
    assert "[fusion]" in text and 'method = "weighted_rrf"' in text and "bm25_weight = 1.5" in text
    assert "enabled = false" in text


def test_saving_in_the_other_format_replaces_the_old_file(tmp_path: Path) -> None:
    save_config("a", PipelineConfig(), "ws", fmt="json", data_dir=tmp_path)
    save_config("a", _cfg(), "ws", fmt="toml", data_dir=tmp_path)
    assert sorted(p.name for p in configs_dir("ws", tmp_path).iterdir()) == ["a.toml"]
    assert load_named("a", "ws", data_dir=tmp_path) == _cfg()


def test_bad_names_unknown_names_and_broken_files(tmp_path: Path) -> None:
    for bad in ("", "../escape", ".hidden", "a b", "x" * 70):
        with pytest.raises(ConfigError):
            save_config(bad, PipelineConfig(), "ws", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="no saved config 'nope'"):
        load_named("nope", "ws", data_dir=tmp_path)
    folder = configs_dir("ws", tmp_path)
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text('{"fusion": {"rrf_k": -5}}')
    (folder / "notes.txt").write_text("ignored")
    listed = list_configs("ws", data_dir=tmp_path)
    assert [c.name for c in listed] == ["broken"] and listed[0].config is None and "rrf_k" in listed[0].error
    assert delete_config("broken", "ws", data_dir=tmp_path) and not list_configs("ws", data_dir=tmp_path)
    assert list_configs("other", data_dir=tmp_path) == []  # workspaces keep their own configs


def test_resolve_config_takes_a_path_or_a_saved_name(tmp_path: Path) -> None:
    save_config("saved", _cfg(), "ws", data_dir=tmp_path)
    path = tmp_path / "elsewhere.toml"
    path.write_text("[dense]\nk = 7\n")
    name, cfg = resolve_config(str(path), "ws", data_dir=tmp_path)
    assert name == "elsewhere" and cfg.dense.k == 7
    assert resolve_config("saved", "ws", data_dir=tmp_path) == ("saved", _cfg())


def test_config_diff_lists_only_changed_settings() -> None:
    diff = config_diff(PipelineConfig(), _cfg())
    assert diff == {"bm25.enabled": (True, False), "fusion.bm25_weight": (1.0, 1.5),
                    "fusion.method": ("rrf", "weighted_rrf"), "fusion.rrf_k": (60, 10)}


# The stable hash names every cached answer, run and trace: moving or describing fields must never change it. These
# values were computed at 1eaf686, before the config was split into files and described, and moved on purpose since:
# issue #34 added embedding.multilingual (default auto: a cross-lingual question now reads another list),
# embedding.multilingual_model, fusion.multilingual_weight and fusion.cross_lingual_bm25_weight, the cascade_guard
# section and limits.max_chunks_per_file, so a default run is a different configuration; issue #31 added
# context.reindex, context.major_share, graph.follow_ingest and graph.communities; issue #30 answer.synthesis (auto:
# comparisons and the multi-hop route synthesize) and the raptor section; router.dense_guard_min_cosine (#34);
# issue #42 answer.verify (default on: an answer that misses a constraint of the question is refused or flagged);
# issue #44 the rerank floor (rerank.keep_top = 5: the fused top 5 stay in the reranked top 5); issue #41 dropped
# llm.grader_model (read by no stage; a saved config holding it still loads, see RETIRED) and moved
# router.refuse_confidence to 0.7, the documented rule's choice for the router refitted on public data only; issue #44
# item 5 rerank.read_queries (on: the rerank also reads the transforms' generated questions) with the floor back off.
PINNED_HASHES = {
    "default": ({}, "c5bfde3e6c32"),
    "rerank off": ({"rerank.enabled": False}, "3df0204f7f3f"),
    "heuristic context": ({"context.variant": "heuristic"}, "9665c702d491"),
    "router off": ({"router.enabled": False}, "5186b9da317b"),
    "weighted fusion": ({"fusion.method": "weighted_rrf", "fusion.bm25_weight": 1.5}, "e317caa42137"),
    "hyde off, agent on": ({"transforms.hyde": "off", "agent.enabled": True}, "a52b966ccb50"),
    "torch runtime": ({"embedding.runtime": "torch"}, "fbeb25215e50"),
}


@pytest.mark.parametrize("name", list(PINNED_HASHES))
def test_stable_hash_is_pinned(name: str) -> None:
    overrides, expected = PINNED_HASHES[name]
    assert PipelineConfig().with_overrides(overrides).stable_hash() == expected


def test_tuning_constants_are_marked_expert_and_listed_after_the_user_facing_settings() -> None:
    from core.config.doc import render
    from core.config.meta import field_spec, field_specs, sections

    specs = [s for name in sections() for s in field_specs(name)]
    user = [s for s in specs if not s.expert]
    assert 90 <= len(user) <= 110 < len(specs), (len(user), len(specs))  # ~100 user-facing fields
    assert field_spec("router.refuse_confidence").expert and field_spec("fusion.rrf_k").expert
    assert not field_spec("rerank.enabled").expert and not field_spec("answer.mode").expert
    graph = render().split("\n## graph\n", 1)[1].split("\n## ", 1)[0]
    assert graph.index("`graph.enabled`") < graph.index("Expert tuning:") < graph.index("`graph.resolution`")
    assert field_spec("router.refuse_confidence").chosen_in  # chosen_in(..., expert=True) keeps its provenance


def test_a_retired_setting_in_a_saved_config_is_ignored() -> None:
    from core.config import load_config_dict

    cfg = load_config_dict({"llm": {"grader_model": "claude-haiku-4-5", "max_retries": 2}})
    assert cfg.llm.max_retries == 2 and "grader_model" not in cfg.llm.model_dump()
    with pytest.raises(ConfigError, match="llm.grader_modle"):
        load_config_dict({"llm": {"grader_modle": "x"}})


def test_every_setting_is_described_once_on_its_field() -> None:
    from core.config.meta import field_specs, sections

    specs = [s for name in sections() for s in field_specs(name)]
    assert len(specs) == sum(len(cls.model_fields) for cls in sections().values()) > 100
    undescribed = [s.dotted for s in specs if not s.description.strip()]
    assert undescribed == []
    assert all(s.description == " ".join(s.description.split()) for s in specs)  # one line
    for s in specs:  # every section says what it is for, and every provenance link leads to a results file
        assert (sections()[s.section].__doc__ or "").strip(), s.section
        if s.chosen_in or s.why:
            assert s.why.strip() and s.chosen_in.startswith("bench/results/"), s.dotted
            assert (Path(__file__).parent.parent / s.chosen_in).is_file(), s.chosen_in


def test_docs_config_md_is_generated_from_the_fields() -> None:
    from core.config.doc import render

    doc = Path(__file__).parent.parent / "docs" / "config.md"
    assert doc.read_text(encoding="utf-8") == render(), "run: python -m core.config.doc > docs/config.md"


def test_field_metadata_reads_types_choices_and_bounds() -> None:
    from core.config.meta import field_spec

    top_n = field_spec("rerank.top_n")
    assert (top_n.kind, top_n.ge, top_n.le, top_n.default) == ("int", 1, 1000, 50)
    assert field_spec("agent.max_seconds").gt == 0 and field_spec("agent.max_seconds").ge is None
    mode = field_spec("transforms.hyde")
    assert mode.kind == "choice" and mode.choices == ("off", "auto", "on")
    assert field_spec("rerank.enabled").kind == "bool" and field_spec("rerank.model").kind == "str"
    assert field_spec("embedding.runtime").chosen_in == "bench/results/onnx.json"
    with pytest.raises(KeyError):
        field_spec("rerank.nope")


def test_a_build_only_setting_leaves_the_hash_alone() -> None:
    """embedding.multilingual_ingest_budget_s decides what an ingest builds, never what a query returns (#44)."""
    assert PipelineConfig().with_overrides({"embedding.multilingual_ingest_budget_s": 0}).stable_hash() \
        == PipelineConfig().stable_hash()
    assert PipelineConfig().with_overrides({"embedding.multilingual": "on"}).stable_hash() != PipelineConfig().stable_hash()


def test_the_rerank_floor_off_keeps_the_old_identity_and_on_is_a_new_one() -> None:
    base = PipelineConfig().with_overrides({"rerank.keep_top": 0, "rerank.read_queries": False}).stable_hash()
    assert base == "f8c3e84141a3"  # the default before the floor (with #42 verify, #41 router refit): its cached answers and runs keep their name
    # the default with the floor and without read_queries (#44 before item 5) keeps its name too
    assert PipelineConfig().with_overrides({"rerank.keep_top": 5, "rerank.read_queries": False}).stable_hash() \
        == "45a597dd570b"
    assert PipelineConfig().with_overrides({"rerank.keep_top": 0, "rerank.keep_within": 3,
                                            "rerank.read_queries": False}).stable_hash() == base
    on = PipelineConfig().with_overrides({"rerank.keep_top": 2}).stable_hash()
    assert on != base and PipelineConfig().with_overrides({"rerank.keep_top": 2, "rerank.keep_within": 3}).stable_hash() != on
    assert PipelineConfig().with_overrides({"rerank.keep_within": 3}).stable_hash() == PipelineConfig().stable_hash()
