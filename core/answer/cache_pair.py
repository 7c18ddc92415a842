"""A pair model for the answer cache's second check: the bundled all-MiniLM-L6-v2 read as a cross-encoder.

Why: the token-vector verifier (core/answer/cache_verifier.py) encodes each question on its own, so it sees that a
word is added but not, in context, whether that word narrows the question to another thing ('in a Honda lawn mower')
or only rewords it. A cross-encoder reads both questions in one sequence.
None can be downloaded here, so python -m train.cache_pair_model fine-tunes the top two layers of the bundled MiniLM
and a small head on the dev pairs; only those weights ship (fp16, answer_cache_pair_model.npz, 6.6 MB) and are put
over the bundled base, loaded by path, never from a hub. P(same) is the mean over both orders of the pair (the model
is not symmetric by construction). Training details and the dev comparison: train/cache_pair_model.py.

torch and transformers load lazily (first check), so importing this module costs nothing.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.models import DATA_DIR
from core.models.embed import bundled_model_path

PAIR_MODEL_PATH = DATA_DIR / "answer_cache_pair_model.npz"
MAX_TOKENS = 128  # both questions together; cache questions are short, longer pairs are cut at the longer side


@dataclass
class PairModelBits:
    """The bundled base, split where training starts: tokenizer, the full BertModel (eval, no grad), and how many
    top layers are trained."""

    tokenizer: Any
    base: Any
    top: int

    @staticmethod
    def load(top: int) -> "PairModelBits":
        return _bits(top)


@lru_cache(maxsize=2)
def _bits(top: int) -> PairModelBits:
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(bundled_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    # eager attention: it takes the additive float mask the split forward below builds
    base = AutoModel.from_pretrained(path, attn_implementation="eager")
    base.eval()
    for p in base.parameters():
        p.requires_grad_(False)
    if not 1 <= top <= len(base.encoder.layer):
        raise ValueError(f"top layers must be 1..{len(base.encoder.layer)}, got {top}")
    del torch
    return PairModelBits(tok, base, top)


def _additive(mask: Any) -> Any:
    import torch

    return ((~mask)[:, None, None, :]).to(torch.float32) * torch.finfo(torch.float32).min


def encode_bottom_pairs(bits: PairModelBits, pairs: Sequence[tuple[str, str]], *,
                        truncation: str = "longest_first", max_length: int = MAX_TOKENS) -> tuple[Any, Any]:
    """Hidden states below the fine-tuned top for [CLS] a [SEP] b [SEP], one row per pair, and the mask. The answer
    cache cuts the longer of two questions; the answer scorer passes truncation='only_second' (never the question)."""
    import torch

    enc = bits.tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation=truncation,
                         max_length=max_length, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = bits.base.embeddings(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
        mask = enc["attention_mask"].bool()
        add = _additive(mask)
        for layer in bits.base.encoder.layer[: len(bits.base.encoder.layer) - bits.top]:
            h = layer(h, attention_mask=add)
            h = h[0] if isinstance(h, tuple) else h
    return h, mask


def bottom_states(bits: PairModelBits, a: str, b: str) -> Any:
    """The frozen bottom's hidden states of the sequence [CLS] a [SEP] b [SEP]: (tokens, 384), computed once per pair
    for training."""
    h, mask = encode_bottom_pairs(bits, [(a, b)])
    return h[0, : int(mask[0].sum())].clone()


def module_class() -> Any:
    import torch

    class PairModel(torch.nn.Module):
        """Trained top layers + a linear head over the pooled last hidden state."""

        def __init__(self, layers: Any, pooling: str) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(layers)
            self.pooling = pooling
            self.head = torch.nn.Sequential(torch.nn.Dropout(0.1), torch.nn.Linear(384, 1))

        @staticmethod
        def fresh(bits: PairModelBits, pooling: str = "mean") -> "PairModel":
            layers = [copy.deepcopy(layer) for layer in bits.base.encoder.layer[-bits.top:]]
            for layer in layers:
                for p in layer.parameters():
                    p.requires_grad_(True)
            return PairModel(layers, pooling)

        def logits_from_states(self, h: Any, mask: Any) -> Any:
            add = _additive(mask)
            for layer in self.layers:
                h = layer(h, attention_mask=add)
                h = h[0] if isinstance(h, tuple) else h
            if self.pooling == "cls":
                pooled = h[:, 0]
            else:
                m = mask.unsqueeze(-1).to(h.dtype)
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

        def save(self, path: Path, **meta: Any) -> None:
            sd = {k: v.detach().cpu().numpy().astype(np.float16) for k, v in self.state_dict().items()}
            np.savez_compressed(path, **{f"w::{k}": v for k, v in sd.items()}, top=np.int64(len(self.layers)),
                                pooling=np.array(self.pooling), **{k: np.array(v) for k, v in meta.items()})

    return PairModel


class _Lazy:
    def __getattr__(self, name: str) -> Any:
        return getattr(module_class(), name)


PairModel: Any = _Lazy()  # PairModel.fresh(...) builds the torch module on first use


def load_top_layers(path: Path) -> tuple[PairModelBits, Any] | None:
    """A saved fine-tuned top (layers + head, fp16 .npz as PairModel.save writes it) put over the bundled base, in
    eval mode with gradients off; None when the file is absent. The answer cache's pair model and the offline
    answer scorer tried in train/answer_scorer.py are both such files."""
    if not path.exists():
        return None
    import torch

    with np.load(path, allow_pickle=False) as z:
        top, pooling = int(z["top"]), str(z["pooling"])
        weights = {k[3:]: torch.from_numpy(z[k].astype(np.float32)) for k in z.files if k.startswith("w::")}
    bits = _bits(top)
    pm = module_class().fresh(bits, pooling=pooling)
    pm.load_state_dict(weights)
    pm.eval()
    for p in pm.parameters():
        p.requires_grad_(False)
    return bits, pm


@lru_cache(maxsize=2)
def load_pair_model(path: Path = PAIR_MODEL_PATH) -> tuple[PairModelBits, Any] | None:
    """The shipped pair model over the bundled base, or None when the file is absent."""
    return load_top_layers(path)


def pair_probability(pairs: list[tuple[str, str]], path: Path = PAIR_MODEL_PATH) -> np.ndarray:
    """P(the two questions may share an answer) per pair: the mean over both orders. Raises when no model ships."""
    import torch

    loaded = load_pair_model(path)
    if loaded is None:
        raise FileNotFoundError(f"{path.name} is missing: run python -m train.cache_pair_model")
    bits, pm = loaded
    both = [p for a, b in pairs for p in ((a, b), (b, a))]
    with torch.no_grad():
        h, mask = encode_bottom_pairs(bits, both)
        p = torch.sigmoid(pm.logits_from_states(h, mask)).numpy()
    return p.reshape(-1, 2).mean(axis=1).astype(np.float64)


def model_meta(path: Path = PAIR_MODEL_PATH) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as z:
        return {"top": int(z["top"]), "pooling": str(z["pooling"]),
                "hyper": json.loads(str(z["hyper"])) if "hyper" in z.files else None,
                "fitted_on": str(z["fitted_on"]) if "fitted_on" in z.files else None}
