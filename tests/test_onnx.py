"""ONNX embedding runtime (core/models/onnx.py): export, optimise, int8, cache, and vectors equal to torch's.

The fast tests export a tiny random BERT (2 layers, hidden 32) that uses the bundled model's real tokenizer, saved
as a sentence-transformers folder: the same code path as the real model in a second or two. The real MiniLM export
(~30 s on the shared machine) is the slow test."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from core.models import onnx as ort_rt  # noqa: E402
from core.models.embed import BUNDLED_MODEL, bundled_model_path, load_embedder  # noqa: E402

SENTENCES = [
    "A protein binds the receptor.",
    "Vitamin D deficiency is associated with a higher risk of fractures in elderly women, says a cohort study.",
    "",
    "word " * 100,  # longer than the tiny folder's max_seq_length (24): truncated the same way on both sides
    "Ünïcödé and punctuation!?",
]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny_st")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(str(folder))
    src = bundled_model_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(src / name, folder / name)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    return folder


@pytest.fixture(scope="session")
def tiny_cache(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("models")
    ort_rt.ensure_model(tiny_model, str(tiny_model), "onnx-int8", cache)  # exports fp32 on the way
    return cache


def _torch_vectors(folder: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    return st.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True, batch_size=2)


def test_model_id_carries_the_runtime_and_torch_keeps_the_bare_name() -> None:
    assert ort_rt.model_id_for(BUNDLED_MODEL, "torch") == BUNDLED_MODEL  # existing databases keep their vectors
    ids = {ort_rt.model_id_for(BUNDLED_MODEL, rt) for rt in ort_rt.RUNTIMES}
    # int8 vectors change with the quantisation recipe, so its id names the recipe too
    assert ids == {BUNDLED_MODEL, BUNDLED_MODEL + "@onnx", BUNDLED_MODEL + "@onnx-int8.v5"}
    with pytest.raises(ValueError, match="unknown embedding runtime"):
        ort_rt.model_id_for(BUNDLED_MODEL, "tensorrt")
    with pytest.raises(ValueError, match="unknown embedding runtime"):
        load_embedder(BUNDLED_MODEL, runtime="tensorrt")


def test_onnx_fp32_vectors_equal_torch(tiny_model: Path, tiny_cache: Path) -> None:
    path = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
    emb = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, path, "onnx", batch_size=2)
    got = emb.encode(SENTENCES)
    want = _torch_vectors(tiny_model)
    assert got.shape == (len(SENTENCES), 32) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert emb.encode([]).shape == (0, 32)
    # A single text (the one-thread session) gives the same vector as inside a batch.
    np.testing.assert_allclose(emb.encode([SENTENCES[1]])[0], got[1], atol=1e-5)


def test_onnx_token_vectors_equal_torch_for_late_interaction(tiny_model: Path, tiny_cache: Path) -> None:
    from core.models.embed import SentenceTransformerEmbedder
    from core.models.tokens import (
        TransformerTokenEncoder,
        encode_token_matrices,
        window_encoder_for,
    )

    path = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
    onnx_enc = window_encoder_for(ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, path, "onnx"))
    torch_enc = TransformerTokenEncoder(SentenceTransformerEmbedder(str(tiny_model)))
    assert onnx_enc.model_id == f"{tiny_model}@onnx" and onnx_enc.window_tokens == torch_enc.window_tokens == 22
    texts = [s for s in SENTENCES if s]  # includes one text longer than a window: read in overlapping windows
    for t in texts:
        assert onnx_enc.tokenize(t) == torch_enc.tokenize(t)
    got, want = encode_token_matrices(onnx_enc, texts), encode_token_matrices(torch_enc, texts)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.ids, w.ids)
        np.testing.assert_array_equal(g.spans, w.spans)
        np.testing.assert_allclose(g.vecs.astype(np.float32), w.vecs.astype(np.float32), atol=2e-3)  # float16


def test_ingest_stores_token_vectors_from_the_sentence_forward(tiny_model: Path, tiny_cache: Path, store) -> None:
    """Issue #14: an ONNX embedder hands ingest the token vectors of the same forward pass; what ingest stores is
    what the late-interaction reader would compute itself. With rerank off nothing is stored."""
    from core.config import PipelineConfig
    from core.ingest.pipeline import ingest_files
    from core.models.embed import shares_token_forward
    from core.models.tokens import encode_token_matrices, text_key, window_encoder_for

    path = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
    emb = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, path, "onnx", batch_size=2)
    assert shares_token_forward(emb)
    short = ["A protein binds the receptor.", "Vitamin D, fractures; elderly women!"]
    vecs, raw = emb.encode_with_tokens(short + ["word " * 100])
    np.testing.assert_allclose(vecs, emb.encode(short + ["word " * 100]), atol=1e-5)
    assert raw[2] is None and all(r is not None for r in raw[:2])  # truncated at 24 tokens: left to the reader

    files = [("a.txt", "A protein binds the receptor.".encode()), ("b.txt", ("word " * 100).encode())]
    cfg = PipelineConfig().with_overrides({"chunking.strategy": "fixed", "chunking.size_tokens": 200})
    ingest_files(files, store=store, embedder=emb, config=cfg)
    texts = [c.text for c in store.corpus.chunks()]
    # ingest cuts every chunk to the model's window (22 tokens here, issue #33), so the 100-word file is several
    # chunks and no chunk is left to the sentence encoding's truncation
    assert len(texts) > 2 and all(emb.token_count(t) <= emb.max_seq_length - 2 for t in texts)
    stored = store.caches.cached_token_vectors(emb.model_id, [text_key(emb.model_id, t) for t in texts])
    assert len(stored) == len(set(texts))
    want = encode_token_matrices(window_encoder_for(emb), texts)
    for t, w in zip(texts, want):
        ids, vecs16, spans = stored[text_key(emb.model_id, t)]
        np.testing.assert_array_equal(ids, w.ids)
        np.testing.assert_array_equal(spans, w.spans)
        np.testing.assert_allclose(vecs16.astype(np.float32), w.vecs.astype(np.float32), atol=2e-3)

    store.caches.clear_token_vectors()
    off = cfg.with_overrides({"rerank.enabled": False})
    ingest_files([("c.txt", b"Another short chunk about cells.")], store=store, embedder=emb, config=off)
    assert store.caches.cached_token_vectors(emb.model_id, [text_key(emb.model_id, "Another short chunk about cells.")
                                                            ]) == {}


def test_int8_quantises_the_chosen_matrices_per_token_and_smoothing_is_exact(tiny_model: Path, tiny_cache: Path
                                                                             ) -> None:
    import onnx
    from onnx import numpy_helper

    fp32 = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
    int8 = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx-int8")
    model = onnx.load(str(fp32))
    kinds = sorted(t[3] for t in ort_rt._quant_targets(model, frozenset({"up", "down", "square", "attention"})))
    # 2 layers: one up- and one down-projection of the feed-forward (32 <-> 128) each, one attention output
    # projection (32 x 32) each, and the optimiser's fused Attention (packed QKV) each.
    assert kinds == ["attention"] * 2 + ["down"] * 2 + ["square"] * 2 + ["up"] * 2
    nodes = onnx.load(str(int8)).graph.node
    ops = [n.op_type for n in nodes]
    # recipe v5: up, down and attention output projections per token; the fused QKV stays fp32, nothing smoothed
    assert ops.count("QAttention") == 0 and ops.count("Attention") == 2
    assert ops.count("MatMulInteger") == 6 and ops.count("DynamicQuantizeLinear") == 0
    assert ops.count("ReduceMax") == 6  # one per-token scale per quantised matrix
    assert not any(n.op_type == "Mul" and n.name.endswith("_smooth") for n in nodes)

    # Smoothing (the v4 recipe's, still available) is exact in fp32: scaled activations times scaled weights give
    # the same vectors.
    targets = ort_rt._quant_targets(model, frozenset({"up", "square", "attention"}))
    absmax = ort_rt.activation_absmax(fp32, tiny_model, sorted({t[1] for t in targets}), ort_rt.calibration_texts())
    w_before = {t[2]: numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == t[2])).copy()
                for t in targets}
    ort_rt.smooth(model, targets, absmax)
    changed = [not np.allclose(numpy_helper.to_array(i), w_before[i.name]) for i in model.graph.initializer
               if i.name in w_before]
    assert len(changed) == 6 and all(changed)
    smoothed = tiny_cache / "smoothed_probe.onnx"
    onnx.save(model, str(smoothed))
    plain = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, fp32, "onnx").encode(SENTENCES)
    np.testing.assert_allclose(ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, smoothed, "onnx").encode(SENTENCES),
                               plain, atol=1e-5)
    smoothed.unlink()

    emb = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, int8, "onnx-int8")
    got, want = emb.encode(SENTENCES), _torch_vectors(tiny_model)
    assert emb.model_id == f"{tiny_model}@onnx-int8.v5"  # the int8 recipe is part of the id
    cos = np.sum(got * want, axis=1)
    assert cos.min() > 0.98 and np.abs(got - want).max() > 1e-6  # close, but really quantised


def test_run_plan_cuts_by_padded_tokens() -> None:
    """The plan by hand: longest first; a run closes when one more text would pad it past run_tokens (the first
    text's length times the run's size) or past run_batch texts."""
    class Enc:
        def __init__(self, n: int) -> None:
            self.ids = [0] * n

    emb = ort_rt.OnnxEmbedder.__new__(ort_rt.OnnxEmbedder)
    emb.run_tokens, emb.run_batch = 100, 3
    lengths = [10, 60, 30, 30, 10, 10, 10, 45]
    # Longest first (ties keep input order): 60(i1) 45(i7) 30(i2) 30(i3) 10(i0) 10(i4) 10(i5) 10(i6).
    # [i1]: adding i7 pads to 60*2 = 120 > 100, close.  [i7, i2]: 45*2 = 90; adding i3 pads to 135, close.
    # [i3, i0, i4]: 30*3 = 90, and 3 texts is run_batch, close.  [i5, i6].
    assert emb._plan([Enc(n) for n in lengths]) == [[1], [7, 2], [3, 0, 4], [5, 6]]


def test_run_plan_does_not_change_vectors(tiny_model: Path, tiny_cache: Path) -> None:
    """Every text is masked to its own tokens, so vectors and token vectors are the same for any cut of the texts
    into runs and whether the runs go to the worker pool or run one by one."""
    fp32 = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
    emb = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, fp32, "onnx", batch_size=64, threads=2)
    assert emb.run_batch == min(64, ort_rt.RUN_BATCH) and emb.run_tokens == ort_rt.RUN_TOKENS
    texts = SENTENCES * 3
    emb.run_tokens = 1  # one text per run: many runs, to the pool
    assert len(emb._plan(emb._tokenizer.encode_batch(texts))) == len(texts)
    small_v, small_t = emb.encode_with_tokens(texts)
    small = emb.encode(texts)
    emb.run_tokens, emb.run_batch = 10**6, 64  # everything in one run, on this thread
    assert len(emb._plan(emb._tokenizer.encode_batch(texts))) == 1
    big_v, big_t = emb.encode_with_tokens(texts)
    np.testing.assert_allclose(small, emb.encode(texts), atol=1e-6)
    np.testing.assert_allclose(small_v, big_v, atol=1e-6)
    for a, b in zip(small_t, big_t):
        assert (a is None) == (b is None)
        if a is not None:
            assert a[0] == b[0] and a[1] == b[1]
            np.testing.assert_allclose(a[2], b[2], atol=1e-5)
    assert emb._pool is not None  # the many-run pass did use the workers


def test_per_token_int8_matches_its_numpy_oracle(tmp_path: Path) -> None:
    """One MatMul rewritten by per_token_int8 computes exactly: per-token scale s = max|x_row| / 127, per-column
    weight scale w = max|W_col| / 127, y = (round(x / s) @ round(W / w)) * s * w (hand-written below in numpy), and
    is within int8 rounding of the float product; a token with a huge channel does not coarsen the other tokens."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = rng.normal(size=(16, 8)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    targets = ort_rt._quant_targets(model, frozenset({"up", "down", "square", "other"}))
    assert [t[3] for t in targets] == ["other"]  # 16 -> 8 is none of the named kinds; 'other' selects it
    ort_rt.per_token_int8(model, targets)
    assert [n.op_type for n in model.graph.node].count("MatMulInteger") == 1
    assert not any(i.name == "W" for i in model.graph.initializer)  # the float weight is gone
    x = rng.normal(size=(2, 3, 16)).astype(np.float32)
    x[0, 0, 5] = 300.0  # an outlier channel in one token
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": x})[0]

    s = np.abs(x).max(axis=-1, keepdims=True) / 127.0
    w = np.abs(weight).max(axis=0) / 127.0
    want = (np.rint(x / s) @ np.rint(weight / w)) * s * w
    # The graph feeds uint8 (zero point 128) x int8 to MatMulInteger. ONNX Runtime's AVX2 kernel (no VNNI) adds two
    # u8 x s8 products in int16 with saturation before widening, so an output whose two largest same-signed products
    # pass the int16 range may saturate there and not on VNNI. The oracle is exact for every output that no pairing
    # can saturate (any x86-64); the others are only required to be finite.
    products = (np.rint(x / s) + 128)[..., :, None] * np.rint(weight / w)[None, None, :, :]
    ordered = np.sort(products, axis=-2)
    may_saturate = ((ordered[..., -1, :] + ordered[..., -2, :] > 32767)
                    | (ordered[..., 0, :] + ordered[..., 1, :] < -32768))
    safe = ~may_saturate
    assert safe.sum() >= 12  # enough outputs checked exactly (24 of 48 with this seed)
    np.testing.assert_allclose(got[safe], want[safe], rtol=1e-5, atol=1e-4)
    assert np.isfinite(got).all()
    exact = x @ weight
    err = np.abs(got - exact)
    beside = safe[0, 1:]  # tokens beside the outlier keep their resolution
    assert beside.any() and err[0, 1:][beside].max() < 0.05 * np.abs(exact[0, 1:]).max()
    assert err[safe].max() > 1e-6  # really quantised


def test_cached_export_is_reused_and_rebuilt_when_missing(tiny_model: Path, tiny_cache: Path, tmp_path: Path
                                                          ) -> None:
    path = ort_rt.cached_model_path(tmp_path, str(tiny_model), "onnx")
    shutil.copy(ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx"), path)
    stamp = path.stat().st_mtime_ns
    loaded = load_embedder(str(tiny_model), runtime="onnx", cache_dir=tmp_path)
    assert loaded.notice is None and loaded.embedder.model_id == f"{tiny_model}@onnx"
    assert ort_rt.ensure_model(tiny_model, str(tiny_model), "onnx", tmp_path) == path
    assert path.stat().st_mtime_ns == stamp  # cached: not exported again
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob("*raw*"))  # no leftovers
    path.unlink()
    ort_rt.ensure_model(tiny_model, str(tiny_model), "onnx", tmp_path)
    assert path.is_file()


def test_a_model_that_is_not_a_local_folder_runs_on_torch_and_says_so(tmp_path: Path) -> None:
    from core.models.embed import _load_onnx

    loaded = _load_onnx("sentence-transformers/some-hub-model", 8, "onnx", tmp_path)
    assert loaded.notice is not None and "runs on torch" in loaded.notice


def test_a_broken_cached_file_is_reported_not_hidden(tiny_model: Path, tmp_path: Path) -> None:
    from core.models.embed import _load_onnx

    ort_rt.cached_model_path(tmp_path, str(tiny_model), "onnx").write_bytes(b"not an onnx file")
    loaded = _load_onnx(str(tiny_model), 8, "onnx", tmp_path)
    assert loaded.notice is not None and "could not be loaded" in loaded.notice and "torch" in loaded.notice


def test_export_refuses_a_model_that_is_not_mean_pooled(tiny_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cls"
    shutil.copytree(tiny_model, folder)
    cfg = json.loads((folder / "1_Pooling" / "config.json").read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="mean pooling"):
        ort_rt.export_fp32(folder, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


@pytest.mark.slow
def test_bundled_minilm_onnx_equals_torch(tmp_path: Path) -> None:
    torch_emb = load_embedder(BUNDLED_MODEL).embedder
    onnx_emb = load_embedder(BUNDLED_MODEL, runtime="onnx", cache_dir=tmp_path)
    assert onnx_emb.notice is None and onnx_emb.embedder.model_id == BUNDLED_MODEL + "@onnx"
    np.testing.assert_allclose(onnx_emb.embedder.encode(SENTENCES), torch_emb.encode(SENTENCES), atol=1e-4)
    int8 = load_embedder(BUNDLED_MODEL, runtime="onnx-int8", cache_dir=tmp_path).embedder
    assert float(np.sum(int8.encode(SENTENCES) * torch_emb.encode(SENTENCES), axis=1).min()) > 0.97


def test_int8_checks_itself_against_fp32_at_load(tiny_model: Path, tiny_cache: Path, monkeypatch) -> None:
    """Issue #33: the int8 runtime compares itself with fp32 on fixed sentences when it loads; it runs when they
    agree, and is refused with a notice (fp32 ONNX runs, under its own model id) when they do not."""
    loaded = load_embedder(str(tiny_model), runtime="onnx-int8", cache_dir=tiny_cache)
    check = loaded.embedder.self_check
    assert check is not None and check.reference in ("cached", "computed") and check.ms > 0
    assert -1.0 <= check.min_cosine <= check.mean_cosine <= 1.0 + 1e-6
    ref_file = Path(str(ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx-int8")) + ".fp32ref.npz")
    assert ref_file.is_file()
    # The reference vectors are the fp32 model's own.
    fp32 = load_embedder(str(tiny_model), runtime="onnx", cache_dir=tiny_cache).embedder
    with np.load(ref_file) as data:
        np.testing.assert_allclose(data["vectors"], fp32.encode(list(ort_rt.SELF_CHECK_TEXTS)), atol=1e-5)
    if check.passed:
        assert loaded.notice is None and loaded.embedder.model_id.endswith("@" + ort_rt._INT8_ID)
    # A bar no int8 model reaches: refused, fp32 ONNX runs (not torch), the notice says why.
    monkeypatch.setattr(ort_rt, "SELF_CHECK_MIN_COSINE", 1.0 + 1e-6)
    again = load_embedder(str(tiny_model), runtime="onnx-int8", cache_dir=tiny_cache)
    assert again.embedder.model_id == ort_rt.model_id_for(str(tiny_model), "onnx")
    assert again.embedder.runtime == "onnx" and again.embedder.self_check.reference == "cached"
    assert again.notice and "refused" in again.notice and "min cosine" in again.notice
    np.testing.assert_allclose(again.embedder.encode(SENTENCES[:2]), fp32.encode(SENTENCES[:2]), atol=1e-6)


def test_int8_self_check_catches_a_broken_model(tiny_model: Path, tiny_cache: Path) -> None:
    # A reference from another model (here: the vectors shuffled between sentences) is what a kernel gone wrong
    # looks like: far below the bar.
    int8 = load_embedder(str(tiny_model), runtime="onnx-int8", cache_dir=tiny_cache).embedder
    ref_file = Path(str(int8.onnx_path) + ".fp32ref.npz")
    with np.load(ref_file) as data:
        key, vecs = data["key"], data["vectors"]
    try:
        with open(ref_file, "wb") as fh:
            np.savez(fh, key=key, vectors=np.roll(vecs, 1, axis=0))
        fp32_path = ort_rt.cached_model_path(tiny_cache, str(tiny_model), "onnx")
        check = ort_rt.int8_self_check(int8, tiny_model, fp32_path)
        assert check.reference == "cached" and not check.passed
    finally:
        with open(ref_file, "wb") as fh:
            np.savez(fh, key=key, vectors=vecs)


@pytest.mark.parametrize("runtime", ["torch", "onnx", "onnx-int8"])
def test_late_chunking_builds_on_every_runtime(runtime: str, tiny_model: Path, tiny_cache: Path, store) -> None:
    """Issue #33 item 13: a late-chunking build on each shipped runtime writes one late vector per chunk, of the
    embedder's own model id (each runtime reads the whole document with its own token encoder)."""
    from core.config import PipelineConfig
    from core.ingest.context import BuildRequest, coverage, run_build
    from core.ingest.pipeline import ingest_files
    from core.models.embed import SentenceTransformerEmbedder
    from core.models.llm import OfflineLLM

    if runtime == "torch":
        emb = SentenceTransformerEmbedder(str(tiny_model))
    else:
        emb = ort_rt.OnnxEmbedder(str(tiny_model), tiny_model, ort_rt.cached_model_path(tiny_cache, str(tiny_model),
                                                                                        runtime), runtime)
    text = "# Depot\n\n" + "".join(f"## Bay {i}\n\nBay {i} holds pallets of part P{i}. The crane lifts them.\n\n"
                                   for i in range(6))
    cfg = PipelineConfig().with_overrides({"chunking.size_tokens": 24, "chunking.overlap_tokens": 0})
    ingest_files([("depot.md", text.encode())], store=store, embedder=emb, config=cfg)
    n = store.corpus.count("chunks")
    assert n >= 3
    rep = run_build(BuildRequest("late", embed=False), store, emb, OfflineLLM())
    assert rep.written == n and coverage(store, "late", model_id=emb.model_id) == (n, n)
