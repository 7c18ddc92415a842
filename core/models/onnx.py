"""ONNX Runtime for the sentence-embedding model: local export of a sentence-transformers folder, graph
optimisation, selective int8 quantisation, and an Embedder that runs it.

Why not sentence-transformers' own backend="onnx": it goes through `optimum`, whose releases conflict with the
pinned transformers. The export here needs only torch (already installed), onnx and onnxruntime.

The graph computes the whole sentence embedding (transformer -> mean pooling over the attention mask -> L2
normalise), so the runtime side is tokenise + one session.run per batch. It also outputs the last hidden state, so
the late-interaction reranker and late chunking get token vectors from the same runtime (OnnxTokenEncoder).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from core.models import DATA_DIR
from core.models.protocols import declared_languages

Runtime = Literal["torch", "onnx", "onnx-int8"]
RUNTIMES: tuple[str, ...] = ("torch", "onnx", "onnx-int8")

# Bump when the export recipe changes, so a cached file made by an older recipe is rebuilt, not reused.
# v2: the graph also outputs the contextual token vectors (late-interaction rerank, late chunking).
# v3: int8 quantises the feed-forward up-projections only.
# v4: int8 quantises the feed-forward up-projections, the attention output projections and the fused QKV
#     projection, each after SmoothQuant-style per-channel scaling (see quantise_int8).
# v5: int8 quantises the feed-forward up- and down-projections and the attention output projections, each with one
#     activation scale per token (per_token_int8); no smoothing, the fused QKV stays fp32.
_RECIPE = "v5"
# int8 vectors change with the recipe (fp32 ones do not), so the int8 model id names its recipe: vectors made by an
# older int8 recipe in an existing database are never compared with new ones.
_INT8_ID = "onnx-int8.v5"


def model_id_for(model_name: str, runtime: str) -> str:
    """The id stored with every vector. torch keeps the bare name (the vectors already in existing databases were
    made by torch); another runtime makes different vectors, so it gets its own id and they never mix."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown embedding runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if runtime == "torch":
        return model_name
    return f"{model_name}@{_INT8_ID if runtime == 'onnx-int8' else runtime}"


def _safe_name(model_name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name).strip("_") or "model"


def cached_model_path(cache_dir: Path, model_name: str, runtime: str) -> Path:
    return Path(cache_dir) / f"{_safe_name(model_name)}-{runtime}-{_RECIPE}.onnx"


def _max_seq_length(model_dir: Path) -> int:
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.is_file():
        value = json.loads(cfg.read_text()).get("max_seq_length")
        if value:
            return int(value)
    return 512


def _check_mean_pooling(model_dir: Path) -> None:
    """The exported graph hard-codes mean pooling + normalise; refuse a folder that says otherwise rather than
    producing vectors that silently differ from the torch runtime's."""
    pool = model_dir / "1_Pooling" / "config.json"
    if pool.is_file():
        cfg = json.loads(pool.read_text())
        if not cfg.get("pooling_mode_mean_tokens", False) or any(
                cfg.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                     "pooling_mode_mean_sqrt_len_tokens")):
            raise ValueError(f"{model_dir}: only mean pooling is supported by the ONNX export")
    modules = model_dir / "modules.json"
    if modules.is_file():
        kinds = [m.get("type", "") for m in json.loads(modules.read_text())]
        if not any(k.endswith("Normalize") for k in kinds):
            raise ValueError(f"{model_dir}: the ONNX export normalises; this model does not")


def _atomic_target(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the cached model is as readable as the database beside it
    return Path(tmp)


def export_fp32(model_dir: Path, out: Path, *, opset: int = 17) -> Path:
    """torch.onnx export (TorchScript exporter) of transformer + mean pooling + normalise, dynamic batch and length.
    Written to a temporary file and renamed, so a killed export never leaves a half file that looks cached."""
    import torch
    from transformers import AutoModel

    _check_mean_pooling(model_dir)
    # eager attention: the traced graph has the plain MatMul/Softmax pattern onnxruntime's optimiser fuses.
    bert = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN201
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            mean = summed / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1), hidden

    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    tmp = _atomic_target(out)
    try:
        with torch.no_grad():
            torch.onnx.export(
                SentenceEmbedding().eval(), (ids, mask, torch.zeros_like(ids)), str(tmp), dynamo=False,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["sentence_embedding", "token_embeddings"],
                dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                              "token_type_ids": {0: "batch", 1: "seq"}, "sentence_embedding": {0: "batch"},
                              "token_embeddings": {0: "batch", 1: "seq"}},
                opset_version=opset, do_constant_folding=True,
            )
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def optimise(fp32: Path, out: Path, model_dir: Path) -> Path:
    """onnxruntime's transformer optimiser (fused attention, layer norm, GELU); the same maths, fewer kernels."""
    from onnxruntime.transformers.optimizer import optimize_model

    cfg = json.loads((model_dir / "config.json").read_text())
    opt = optimize_model(str(fp32), model_type="bert", num_heads=int(cfg["num_attention_heads"]),
                         hidden_size=int(cfg["hidden_size"]), opt_level=1)
    tmp = _atomic_target(out)
    try:
        opt.save_model_to_file(str(tmp))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


# Which matrices the int8 runtime quantises, and how hard the smoothing pulls: chosen on the head split of SciFact by
# top-10 overlap with torch's rankings and nDCG@10 change (bench/embed_runtime.py reports on the tail). v5 (issue #14,
# bench/int8_recipes.py, bench/results/int8_recipes.json): one activation scale per token instead of per tensor lets
# the down-projections be quantised too; plain per-token up+square+down was the most accurate recipe and as fast as
# any, so no smoothing (smoothing hurts after GELU; per-tensor int8 of the fused QKV costs accuracy).
INT8_KINDS = frozenset({"up", "square", "down"})
INT8_ACTIVATIONS = "token"
INT8_ALPHA: float | None = None  # the per-token recipe needs no smoothing (and so no calibration pass)
SMOOTH_ALPHA = 0.5
CALIBRATION_FILE = DATA_DIR / "onnx_calibration.txt"


def _quant_targets(model, kinds: frozenset[str]) -> list[tuple[object, str, str, str]]:  # noqa: ANN001 - onnx
    """(node, activation input, weight initializer, kind) of the matrices to quantise. Kind by weight shape (it
    survives the optimiser renaming nodes): 'up' hidden -> 4 hidden, 'down' back, 'square' hidden -> hidden
    (attention output), 'attention' the optimiser's fused Attention (packed QKV weight)."""
    inits = {i.name for i in model.graph.initializer}
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    out = []
    for node in model.graph.node:
        if node.op_type == "Attention" and len(node.input) > 1 and node.input[1] in inits:
            kind, act, w = "attention", node.input[0], node.input[1]
        elif node.op_type == "MatMul":
            w = next((i for i in node.input if i in inits and len(shapes[i]) == 2), None)
            if w is None:
                continue
            act = node.input[0] if node.input[1] == w else node.input[1]
            a, b = shapes[w]
            kind = "up" if b >= 3.5 * a else "down" if a >= 3.5 * b else "square" if a == b else "other"
        else:
            continue
        if kind in kinds:
            out.append((node, act, w, kind))
    return out


def calibration_texts() -> list[str]:
    return [line for line in CALIBRATION_FILE.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def activation_absmax(fp32: Path, model_dir: Path, activations: Sequence[str], texts: Sequence[str]
                      ) -> dict[str, np.ndarray]:
    """Largest |value| per channel of each named activation (padding excluded), over texts, on the fp32 graph."""
    import onnx
    import onnxruntime as ort
    from onnx import helper
    from tokenizers import Tokenizer

    model = onnx.load(str(fp32))
    for name in activations:
        model.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=_max_seq_length(model_dir))
    tok.no_padding()
    absmax: dict[str, np.ndarray] = {}
    for at in range(0, len(texts), 8):
        feed = OnnxEmbedder._feed(tok.encode_batch(list(texts[at:at + 8])))
        mask = feed["attention_mask"].astype(bool)
        for name, value in zip(activations, sess.run(list(activations), feed)):
            cur = np.abs(np.asarray(value)[mask]).max(axis=0)
            absmax[name] = np.maximum(absmax[name], cur) if name in absmax else cur
    return absmax


def smooth(model, targets, absmax: dict[str, np.ndarray], alpha: float = SMOOTH_ALPHA) -> None:  # noqa: ANN001
    """SmoothQuant-style scaling, exact in fp32: activation channel j is divided by s_j (a Mul before the matrix) and
    weight row j multiplied by s_j, with s_j = absmax_j^alpha / max|W_j|^(1-alpha). A few channels of a BERT hidden
    state are far larger than the rest; per-tensor int8 of the activation then rounds every other channel to a
    handful of levels. Moving part of that range into the (per-channel quantised) weights is what lifts top-10
    overlap with torch from 0.961 to 0.981 for the up-projections alone."""
    from onnx import helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    nodes = model.graph.node
    for node, act, w, _ in targets:
        weight = numpy_helper.to_array(inits[w]).astype(np.float32)
        wmax = np.maximum(np.abs(weight).max(axis=1), 1e-5)
        scale = np.clip(np.maximum(absmax[act], 1e-5) ** alpha / wmax ** (1 - alpha), 1e-3, 1e3).astype(np.float32)
        inits[w].CopyFrom(numpy_helper.from_array(weight * scale[:, None], w))
        inv = node.name + "_smooth_inv"
        model.graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), inv))
        mul = helper.make_node("Mul", [act, inv], [node.name + "_smoothed"], name=node.name + "_smooth")
        nodes.insert(list(nodes).index(node), mul)
        for i, name in enumerate(node.input):
            if name == act:
                node.input[i] = mul.output[0]
                break


def per_token_int8(model, targets) -> None:  # noqa: ANN001 - onnx ModelProto
    """Rewrite each target MatMul as symmetric int8 with one scale per *token* (row of the activation) and one per
    output channel of the weight: y = (q(x) @ q(W)) * s_token * s_channel. onnxruntime's dynamic quantisation scales
    the whole activation tensor at once, so one token with a large channel coarsens every other token of the batch;
    a per-token scale keeps each token's own resolution. Exact up to rounding; no calibration needed."""
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    nodes = model.graph.node
    for node, _, w, _ in targets:
        if node.op_type != "MatMul":
            continue
        act = node.input[0] if node.input[1] == w else node.input[1]  # after smooth(), its scaled copy
        weight = numpy_helper.to_array(inits[w]).astype(np.float32)  # (in, out)
        wscale = (np.maximum(np.abs(weight).max(axis=0), 1e-8) / 127.0).astype(np.float32)
        wq = np.clip(np.rint(weight / wscale), -127, 127).astype(np.int8)
        p = node.name + "_pt"
        model.graph.initializer.extend([numpy_helper.from_array(wq, p + "_wq"),
                                        numpy_helper.from_array(wscale, p + "_wscale"),
                                        numpy_helper.from_array(np.array(1e-8 * 127, np.float32), p + "_eps"),
                                        numpy_helper.from_array(np.array(1 / 127.0, np.float32), p + "_inv127"),
                                        numpy_helper.from_array(np.array(128.0, np.float32), p + "_128"),
                                        numpy_helper.from_array(np.array(128, np.uint8), p + "_zp")])
        new = [
            helper.make_node("Abs", [act], [p + "_abs"], name=p + "_abs"),
            helper.make_node("ReduceMax", [p + "_abs"], [p + "_max"], name=p + "_max", axes=[-1], keepdims=1),
            helper.make_node("Max", [p + "_max", p + "_eps"], [p + "_maxc"], name=p + "_maxc"),
            helper.make_node("Mul", [p + "_maxc", p + "_inv127"], [p + "_s"], name=p + "_s"),
            helper.make_node("Div", [act, p + "_s"], [p + "_xs"], name=p + "_xs"),
            helper.make_node("Round", [p + "_xs"], [p + "_xr"], name=p + "_xr"),
            # uint8 with zero point 128, not int8: MLAS has VNNI kernels for u8 x s8 only (s8 x s8 is far slower)
            helper.make_node("Add", [p + "_xr", p + "_128"], [p + "_xo"], name=p + "_xo"),
            helper.make_node("Cast", [p + "_xo"], [p + "_xq"], name=p + "_xq", to=TensorProto.UINT8),
            helper.make_node("MatMulInteger", [p + "_xq", p + "_wq", p + "_zp"], [p + "_yi"], name=p + "_mm"),
            helper.make_node("Cast", [p + "_yi"], [p + "_yf"], name=p + "_yf", to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "_yf", p + "_s"], [p + "_y1"], name=p + "_y1"),
            helper.make_node("Mul", [p + "_y1", p + "_wscale"], [node.output[0]], name=p + "_y"),
        ]
        at = list(nodes).index(node)
        nodes.remove(node)
        for k, n in enumerate(new):
            nodes.insert(at + k, n)
        del inits[w]
    used = {i for n in nodes for i in n.input}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)


def quantise_int8(src: Path, out: Path, model_dir: Path, *, kinds: frozenset[str] = INT8_KINDS,
                  alpha: float | None = INT8_ALPHA, activations: str = INT8_ACTIVATIONS,
                  smooth_kinds: frozenset[str] | None = None) -> Path:
    """Dynamic int8 (weights per output channel, activations quantised at run time) of the chosen matrices, each
    smoothed first (alpha None: plain). Calibration: core/models/data/onnx_calibration.txt through the fp32 graph.
    activations "token": MatMuls get one activation scale per token (per_token_int8); the fused QKV (Attention op)
    has no such form and keeps onnxruntime's per-tensor QAttention. smooth_kinds: smooth only these (None: all)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if activations not in ("tensor", "token"):
        raise ValueError(f"activations must be 'tensor' or 'token', not {activations!r}")
    model = onnx.load(str(src))
    targets = _quant_targets(model, kinds)
    if not targets:
        raise ValueError(f"{src}: no matrix of kinds {sorted(kinds)} found to quantise")
    smoothed_targets = [t for t in targets if smooth_kinds is None or t[3] in smooth_kinds]
    if alpha is not None and smoothed_targets:
        absmax = activation_absmax(src, model_dir, sorted({t[1] for t in smoothed_targets}), calibration_texts())
        smooth(model, smoothed_targets, absmax, alpha)
    if activations == "token":
        per_token_int8(model, targets)
        targets = [t for t in targets if t[0].op_type != "MatMul"]
    smoothed = _atomic_target(out.with_name(out.name + ".smooth"))
    tmp = _atomic_target(out)
    try:
        if not targets:
            onnx.save(model, str(tmp))
        else:
            onnx.save(model, str(smoothed))
            quantize_dynamic(str(smoothed), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             nodes_to_quantize=[t[0].name for t in targets],
                             op_types_to_quantize=sorted({t[0].op_type for t in targets}),
                             # the optimiser's fused ops (com.microsoft domain) defeat shape inference; all is float
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        smoothed.unlink(missing_ok=True)
    return out


_EXPORT_LOCK = threading.Lock()


def build_model_files(model_dir: Path, model_name: str, runtime: str, cache_dir: Path) -> Path:
    """Export (and optimise / quantise) the .onnx file for (model, runtime) in this process."""
    target = cached_model_path(cache_dir, model_name, runtime)
    fp32 = cached_model_path(cache_dir, model_name, "onnx")
    if not fp32.is_file():
        raw = cached_model_path(cache_dir, model_name, "raw")
        export_fp32(model_dir, raw)
        try:
            optimise(raw, fp32, model_dir)
        except Exception:  # noqa: BLE001 - an optimiser that cannot handle the graph leaves the plain export
            os.replace(raw, fp32)
        raw.unlink(missing_ok=True)
    if runtime == "onnx-int8" and not target.is_file():
        quantise_int8(fp32, target, model_dir)
    return target


# The export runs in a child process: torch, the transformer and the exporter's graph copies (most of a first
# ingest's peak memory) are freed when it exits, and the process that embeds never imports torch.
_CHILD = ("import sys; from pathlib import Path; from core.models.onnx import build_model_files; "
          "build_model_files(Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]))")
_ROOT = Path(__file__).resolve().parents[2]


def _build_in_child(model_dir: Path, model_name: str, runtime: str, cache_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(model_dir), model_name, runtime, str(cache_dir)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the ONNX export of {model_name} failed (exit {done.returncode}): {last}")


def ensure_model(model_dir: Path, model_name: str, runtime: str, cache_dir: Path) -> Path:
    """The cached .onnx file for (model, runtime), exported (and optimised / quantised) in a child process when
    missing."""
    if runtime not in ("onnx", "onnx-int8"):
        raise ValueError(f"no ONNX file for runtime {runtime!r}")
    target = cached_model_path(cache_dir, model_name, runtime)
    with _EXPORT_LOCK:
        if not target.is_file():
            _build_in_child(model_dir, model_name, runtime, cache_dir)
        return target


# How a list of texts is cut into session.run calls. Vectors do not depend on it (each text is masked to its own
# tokens); speed does. Texts are sorted by token count, not characters: token counts per character vary with numbers
# and chemical names, so sorting by characters padded the runs far more (bench/results/onnx_runs.json). A run holds
# at most RUN_TOKENS padded tokens and RUN_BATCH texts (a 180-token chunk runs alone, short sentences several at a
# time), and the runs go to `threads` workers sharing one single-threaded session rather than one session splitting
# every small kernel over two threads that wait for each other at each kernel's end: on par with two intra-op threads
# on a quiet machine, ahead with another process busy beside it (onnx_runs.json, onnx_runs_busy.json).
RUN_TOKENS = 256
RUN_BATCH = 64


class OnnxEmbedder:
    """Embedder over an exported sentence-embedding graph. Tokenises with the model folder's tokenizer.json (the
    same fast tokenizer sentence-transformers uses: truncation at max_seq_length, padding to the longest text of
    the batch), sorts texts by length so a batch pads little, and returns float32 unit vectors in input order."""

    def __init__(self, model_name: str, model_dir: Path, onnx_path: Path, runtime: str, *, batch_size: int = 64,
                 threads: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.model_name = model_name
        self.runtime = runtime
        self.model_id = model_id_for(model_name, runtime)
        self.batch_size = batch_size
        self.run_batch = max(1, min(batch_size, RUN_BATCH))
        self.onnx_path = Path(onnx_path)

        self.languages = declared_languages(model_name)
        self.max_seq_length = _max_seq_length(model_dir)
        self.tokenizer_path = model_dir / "tokenizer.json"
        self._tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        self._tokenizer.enable_truncation(max_length=self.max_seq_length)
        self._tokenizer.no_padding()
        self._threads = threads or max(1, min(os.cpu_count() or 1, 4))
        self._sessions: dict[int, object] = {}
        self._lock = threading.Lock()
        self.run_tokens = RUN_TOKENS
        self.workers = self._threads  # 1: every run here, on a session with `threads` intra-op threads
        self._pool: ThreadPoolExecutor | None = None
        self._window_encoder: OnnxTokenEncoder | None = None
        self.dim = 0  # until the probe below has run
        self.self_check: Int8Check | None = None  # the int8 runtime's load-time check (load_onnx_embedder)
        # load now (a broken file fails at load time, not on the first query): the one-thread session, the one a
        # query runs on; the multi-thread one is built when a batch first needs it (a cold `query` skips building it)
        self._session(1)
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def _session(self, threads: int):  # noqa: ANN202 - onnxruntime type stays out of the signature
        with self._lock:
            sess = self._sessions.get(threads)
            if sess is None:
                import onnxruntime as ort

                opts = ort.SessionOptions()
                opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
                # No busy-waiting between kernels: on a shared 2-core machine spinning threads steal the CPU the
                # other thread (and every other process) needs.
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
                self._sessions[threads] = sess
            return sess

    def _plan(self, encs: Sequence) -> list[list[int]]:  # noqa: ANN001 - tokenizers.Encoding
        """Indices of `encs` cut into runs: longest first, a new run when the next text would take the run past
        run_tokens padded tokens (every text pads to the run's first, longest one) or past run_batch texts."""
        order = sorted(range(len(encs)), key=lambda i: -len(encs[i].ids))
        runs: list[list[int]] = []
        for i in order:
            run = runs[-1] if runs else None
            if (run is None or len(run) >= self.run_batch
                    or len(encs[run[0]].ids) * (len(run) + 1) > self.run_tokens):
                runs.append([i])
            else:
                run.append(i)
        return runs

    def _run_all(self, encs: Sequence, outputs: list[str]) -> list[tuple[list[int], list]]:  # noqa: ANN001
        """session.run over every planned run: (indices, outputs) per run. Several runs go to the worker pool on
        the single-threaded session (see RUN_TOKENS); one run, or one worker, runs here."""
        runs = self._plan(encs)
        n_texts = len(encs)
        if len(runs) == 1 or self.workers <= 1:
            sess = self._session(1 if n_texts <= 4 else self._threads)
            return [(run, sess.run(outputs, self._feed([encs[i] for i in run]))) for run in runs]
        sess = self._session(1)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="onnx-run")
            pool = self._pool
        futures = [pool.submit(sess.run, outputs, self._feed([encs[i] for i in run])) for run in runs]
        return [(run, f.result()) for run, f in zip(runs, futures)]

    @staticmethod
    def _feed(encs: Sequence) -> dict[str, np.ndarray]:  # noqa: ANN001 - tokenizers.Encoding
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n] = e.ids
            mask[i, :n] = 1
            types[i, :n] = e.type_ids
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encs = self._tokenizer.encode_batch(list(texts))
        out: np.ndarray | None = None
        for run, (sent,) in self._run_all(encs, ["sentence_embedding"]):
            if out is None:
                out = np.empty((len(texts), sent.shape[1]), dtype=np.float32)
            out[np.asarray(run)] = sent
        assert out is not None
        return out

    def encode_with_tokens(self, texts: Sequence[str]
                           ) -> tuple[np.ndarray, list[tuple[list[int], list[tuple[int, int]], np.ndarray] | None]]:
        """Sentence vectors and, from the same forward pass, each text's contextual token vectors: (token ids,
        character offsets, rows) of its tokens without [CLS]/[SEP]. That input is exactly the single window the
        late-interaction reader (OnnxTokenEncoder) would build for a text of at most max_seq_length - 2 tokens, so
        ingest can store a chunk's token vectors without a second forward. A text the sentence encoding truncated
        gets None (the reader covers it in overlapping windows)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        encs = self._tokenizer.encode_batch(list(texts))
        vecs = np.empty((len(texts), self.dim), dtype=np.float32)
        tokens: list[tuple[list[int], list[tuple[int, int]], np.ndarray] | None] = [None] * len(texts)
        for run, (sent, hidden) in self._run_all(encs, ["sentence_embedding", "token_embeddings"]):
            vecs[np.asarray(run)] = np.asarray(sent, dtype=np.float32)
            for j, i in enumerate(run):
                e = encs[i]
                if e.overflowing:
                    continue
                # Each property access copies the whole list out of the tokenizer: read them once.
                ids, offsets = e.ids, e.offsets
                rows = [k for k, special in enumerate(e.special_tokens_mask) if not special]
                tokens[i] = ([ids[k] for k in rows], [tuple(offsets[k]) for k in rows],
                             np.asarray(hidden[j, rows], dtype=np.float32))
        return vecs, tokens

    def token_count(self, text: str) -> int:
        """The tokenizer's count of `text` without special tokens (CountsTokens). The sentence tokenizer truncates at
        max_seq_length, so a count stops there: enough to tell whether a text fits the window (max_seq_length - 2)."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def window_encoder(self) -> "OnnxTokenEncoder":
        """Token vectors for late interaction / late chunking from this runtime (core.models.tokens.window_encoder_for).
        One per embedder: ingest asks for it on every batch holding a long chunk, and building one reads the
        tokenizer file."""
        with self._lock:
            if self._window_encoder is None:
                self._window_encoder = OnnxTokenEncoder(self)
            return self._window_encoder

    def token_vectors(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        sess = self._session(1 if ids.shape[0] <= 4 else self._threads)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return np.asarray(sess.run(["token_embeddings"], feed)[0], dtype=np.float32)


# -- the int8 runtime checks itself against fp32 at every load -------------------------------------------------------
# Why at load and on this machine: integer kernels differ by CPU (ONNX Runtime's AVX2 u8 x s8 kernel saturates where
# VNNI does not), so an int8 model that was good where it was made can be worse where it runs, and that would only
# show as worse retrieval. A few fixed sentences (English, Russian, code, numbers, short and long; written for this
# check, not taken from any corpus) are embedded by the int8 model and compared with the fp32 model's vectors. No
# one- or two-token text: there a single rounding moves the mean of two token vectors far more than a sentence's
# (bench/results/int8_recipes.json).
SELF_CHECK_TEXTS: tuple[str, ...] = (
    "How do I rotate the API key without downtime?",
    "The committee approved the budget for the next fiscal year after a long debate about maintenance costs.",
    "Vitamin D deficiency is associated with a higher risk of fractures in elderly women.",
    "Сколько дней в неделю сотрудники могут работать удалённо?",
    "def parse_config(path: str) -> dict: return json.loads(open(path).read())",
    "Error 0x80070005: access denied while writing C:\\ProgramData\\cache (retry 3 of 5).",
    "Who signed the contract?",
    "The river rose two metres overnight, flooding the lower town; by morning the bridge was closed and trains "
    "between the two stations ran on a single track while engineers inspected the piers for damage.",
)
# Below this cosine for any of the sentences the int8 model is refused and fp32 runs instead. The shipped recipe's
# vectors sit far above it where it was measured (bench/results/int8_recipes.json); a kernel gone wrong sits far
# below. Not fitted: a round bar between the two.
SELF_CHECK_MIN_COSINE = 0.99


@dataclass(frozen=True)
class Int8Check:
    """The load-time comparison: the worst and mean cosine of int8 to fp32 over SELF_CHECK_TEXTS, the bar, what it
    cost (ms at load) and whether the fp32 reference was read from its cache file or computed now."""

    min_cosine: float
    mean_cosine: float
    threshold: float
    ms: float
    reference: str  # "cached" | "computed"

    @property
    def passed(self) -> bool:
        return self.min_cosine >= self.threshold

    def describe(self) -> str:
        return (f"int8 vs fp32 on {len(SELF_CHECK_TEXTS)} fixed sentences: min cosine {self.min_cosine:.4f}, mean "
                f"{self.mean_cosine:.4f} (bar {self.threshold:g}), checked in {self.ms:.0f} ms")


def _reference_vectors(int8: OnnxEmbedder, model_dir: Path, fp32_path: Path) -> tuple[np.ndarray, str]:
    """The fp32 model's vectors of SELF_CHECK_TEXTS: from a small file beside the int8 model (fp32 vectors do not
    depend on the CPU beyond rounding), else computed once with the fp32 model and saved."""
    key = hashlib.sha256(("\x1f".join(SELF_CHECK_TEXTS) + f"|{fp32_path.stat().st_size}").encode()).hexdigest()
    ref_file = Path(str(int8.onnx_path) + ".fp32ref.npz")
    if ref_file.is_file():
        try:
            with np.load(ref_file) as data:
                if str(data["key"]) == key:
                    return np.asarray(data["vectors"], dtype=np.float32), "cached"
        except (OSError, KeyError, ValueError):
            pass  # unreadable: computed again below
    fp32 = OnnxEmbedder(int8.model_name, model_dir, fp32_path, "onnx", threads=1)
    ref = fp32.encode(list(SELF_CHECK_TEXTS))
    tmp = _atomic_target(ref_file)
    with open(tmp, "wb") as fh:
        np.savez(fh, key=np.array(key), vectors=ref)
    os.replace(tmp, ref_file)
    return ref, "computed"


def int8_self_check(int8: OnnxEmbedder, model_dir: Path, fp32_path: Path, *,
                    threshold: float | None = None) -> Int8Check:
    """Compare the int8 embedder with fp32 on SELF_CHECK_TEXTS (see above), timed."""
    t0 = time.perf_counter()
    ref, how = _reference_vectors(int8, model_dir, fp32_path)
    got = int8.encode(list(SELF_CHECK_TEXTS))
    cos = np.sum(got * ref, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1) + 1e-12)
    bar = SELF_CHECK_MIN_COSINE if threshold is None else threshold
    return Int8Check(float(cos.min()), float(cos.mean()), bar, (time.perf_counter() - t0) * 1000, how)


def load_onnx_embedder(model_name: str, model_dir: Path, runtime: str, cache_dir: Path, *, batch_size: int = 64,
                       threads: int | None = None) -> tuple[OnnxEmbedder, str | None]:
    """The OnnxEmbedder for (model, runtime), exported when missing; the int8 runtime is first checked against fp32
    on this machine (int8_self_check) and, when it disagrees, refused: the fp32 ONNX model runs instead and the
    returned notice says why (the app shows it; the vectors carry the fp32 model id)."""
    path = ensure_model(model_dir, model_name, runtime, cache_dir)
    emb = OnnxEmbedder(model_name, model_dir, path, runtime, batch_size=batch_size, threads=threads)
    if runtime != "onnx-int8":
        return emb, None
    fp32_path = ensure_model(model_dir, model_name, "onnx", cache_dir)
    check = int8_self_check(emb, model_dir, fp32_path)
    emb.self_check = check
    if check.passed:
        return emb, None
    fp32 = OnnxEmbedder(model_name, model_dir, fp32_path, "onnx", batch_size=batch_size, threads=threads)
    fp32.self_check = check
    return fp32, (f"embedding runtime 'onnx-int8' refused on this CPU: {check.describe()}; running the fp32 ONNX "
                  "model instead")


class OnnxTokenEncoder:
    """core.models.tokens.TokenEncoder on an OnnxEmbedder: the same tokenizer (no special tokens, character offsets) and
    windows as core.models.tokens.TransformerTokenEncoder, the forward pass on ONNX Runtime. Its model id is the
    embedder's, runtime included, so token vectors of two runtimes never share a cache key either."""

    def __init__(self, embedder: OnnxEmbedder, batch_size: int = 16) -> None:
        from tokenizers import Tokenizer

        self._emb = embedder
        self.model_id = embedder.model_id
        self.window_tokens = embedder.max_seq_length - 2  # room for [CLS] and [SEP]
        self.batch_size = batch_size
        self._tok = Tokenizer.from_file(str(embedder.tokenizer_path))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._cls = self._tok.token_to_id("[CLS]")
        self._sep = self._tok.token_to_id("[SEP]")
        if self._cls is None or self._sep is None:
            raise ValueError(f"{embedder.model_id}: tokenizer has no [CLS]/[SEP] tokens")

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self._tok.encode(text, add_special_tokens=False)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for i in range(0, len(windows), self.batch_size):
            group = [list(w) for w in windows[i:i + self.batch_size]]
            width = max(len(w) for w in group) + 2
            ids = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.int64)
            for j, w in enumerate(group):
                ids[j, :len(w) + 2] = [self._cls, *w, self._sep]
                mask[j, :len(w) + 2] = 1
            hidden = self._emb.token_vectors(ids, mask)
            out.extend(hidden[j, 1:1 + len(w)] for j, w in enumerate(group))
        return out
