"""Second check on an answer-cache pair: a small learned verifier over the embedder's token vectors and the guard's
word rules.

Why: the sentence cosine of MiniLM cannot tell a reworded question ('remove mold from a tent' / 'remove mildew from
a tent') from a sibling swap ('laptop' / 'phone'), and no cross-encoder or NLI model can be fetched here. The issue
allows a second check with the late-interaction scorer, so this one reads the contextual token vectors of both
questions (the same ONNX forward that gives the sentence vector): how well every content token of each side finds a
partner on the other (MaxSim both ways, the least-aligned tokens), whether the shared words keep their order, the
lexical overlap, and which of the guard's rules the pair breaks. A logistic regression over these, fitted by
python -m train.cache_verifier on the dev split only, gives P(same question); the model ships as data
(core/models/data/answer_cache_verifier.npz). The features and the score are pure (vectors come in as data) and take about a
millisecond; make_verifier wraps an embedder for the pipeline. A forward is most of a check's cost, so the query's
token vectors come from the cache stage's own forward (query_vector) and a cached question's are remembered after
its first check: a check encodes at most the cached question, once (bench/results/answer_cache.json times the three
states). With answer_cache.pair_model the check averages P with a fine-tuned MiniLM pair model
(core/answer/cache_pair.py).
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from core.answer.cache import (
    _EXTRA_STOP,
    RULES,
    SOFT_RULES,
    QuestionFeatures,
    _stem,
    features,
    guard_flags,
    one_sided_ids,
    swapped_words,
)
from core.answer import cache_pair
from core.models import DATA_DIR
from core.models.fitted import FittedLinear, load_fitted, save_fitted, sigmoid
from core.models.embed import one_torch_thread
from core.models.protocols import Embedder, TokenEmbedder
from core.text import EN_STOP, RU_STOP

MODEL_PATH = DATA_DIR / "answer_cache_verifier.npz"
_WORD = re.compile(r"\w+", re.UNICODE)

# The order of the feature vector; the model file stores it and is refused when it differs.
FEATURES: tuple[str, ...] = (
    "cosine", "a2b_mean", "a2b_min", "a2b_min2", "b2a_mean", "b2a_min", "b2a_min2", "min_both", "weak_frac_07",
    "weak_frac_08", "log_len_a", "log_len_b", "len_ratio", "stem_jaccard", "only_a", "only_b", "swapped",
    "order_inversions", "same_bag_other_order", "swap_pair_sim", "numbers_added", "names_added", "ids_changed",
    "edit_spans", "one_slot_replaced", "equal_frac", *(f"rule_{r}" for r in RULES))
# Rules that stay vetoes when the verifier decides: each flips or changes the fact asked about. Only a name on ONE
# side (an added detail: 'trips the outlet' / 'trips the GFCI receptacle') is left to the verifier; a name or number
# on each side that the other lacks ('Model S' / 'Model 3') is a changed fact and a veto (ids_changed), and so is any
# changed number (core.answer.cache.SOFT_RULES says why).
HARD_RULES = tuple(r for r in RULES if r not in SOFT_RULES)
_HARD_COLUMNS = [FEATURES.index(f"rule_{r}") for r in HARD_RULES] + [FEATURES.index("ids_changed")]


def vetoed(x: np.ndarray) -> np.ndarray:
    """Rows (pair feature vectors) that break a hard rule: HARD_RULES, or a changed number or name."""
    return np.atleast_2d(x)[:, _HARD_COLUMNS].any(axis=1)


@dataclass(frozen=True)
class QuestionTokens:
    """One question's contextual token vectors (unit length) and which of them carry content."""

    text: str
    vecs: np.ndarray        # (n, d), rows L2-normalised
    content: np.ndarray     # (n,) bool: the token belongs to a word that is no stop word or punctuation
    words: tuple[str, ...]  # the lower-case word each token belongs to


def question_tokens(text: str, offsets: Sequence[tuple[int, int]], rows: np.ndarray) -> QuestionTokens:
    """From encode_with_tokens' (offsets, rows) of one text (no [CLS]/[SEP])."""
    spans = [(m.start(), m.end(), m.group(0).lower()) for m in _WORD.finditer(text)]
    words: list[str] = []
    for s, _e in offsets:
        w = next((wd for ws, we, wd in spans if ws <= s < we), "")
        words.append(w)
    content = np.array([len(w) > 1 and not w.isdigit() and w not in EN_STOP and w not in RU_STOP
                        and w not in _EXTRA_STOP for w in words], dtype=bool)
    v = np.asarray(rows, dtype=np.float32).reshape(len(words), -1) if len(words) else np.zeros((0, 1), np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return QuestionTokens(text, v / np.maximum(norms, 1e-9), content, tuple(words))


def _side(sim: np.ndarray, mask: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """MaxSim of each content token of one side against every token of the other: mean, min, second min."""
    best = sim.max(axis=1) if sim.shape[1] else np.zeros(sim.shape[0], np.float32)
    sel = best[mask] if mask.any() else best
    if sel.size == 0:  # no token vectors at all: nothing is shown to align
        return 0.0, 0.0, 0.0, sel
    srt = np.sort(sel)
    return float(sel.mean()), float(srt[0]), float(srt[1] if srt.size > 1 else srt[0]), sel


def _inversions(sim: np.ndarray, mask: np.ndarray) -> float:
    """Share of consecutive content tokens of one side whose partners on the other side come in reverse order: a
    swap of roles ('company laptop for personal email' / 'personal laptop for company email') keeps every word."""
    idx = np.flatnonzero(mask)
    if idx.size < 2 or sim.shape[1] == 0:
        return 0.0
    pos = sim[idx].argmax(axis=1)
    return float(np.mean(np.diff(pos) < 0))


def _edit_shape(a: Sequence[str], b: Sequence[str]) -> tuple[float, float, float]:
    """How the word sequences differ: the number of changed spans, whether the only change is one span replaced by
    another with everything around it kept (a slot filled with another value: 'laptop' / 'phone'), and the share of
    words in unchanged spans. Rewordings change several places; sibling swaps change one."""
    sa = [_stem(t) for t in a if any(ch.isalnum() for ch in t)]
    sb = [_stem(t) for t in b if any(ch.isalnum() for ch in t)]
    ops = [op for op in SequenceMatcher(a=sa, b=sb, autojunk=False).get_opcodes() if op[0] != "equal"]
    kept = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in SequenceMatcher(a=sa, b=sb, autojunk=False).get_opcodes()
               if tag == "equal")
    one_slot = float(len(ops) == 1 and ops[0][0] == "replace")
    return float(len(ops)), one_slot, 2.0 * kept / max(1, len(sa) + len(sb))


def pair_features(cosine: float, a: QuestionTokens, b: QuestionTokens, fa: QuestionFeatures | None = None,
                  fb: QuestionFeatures | None = None) -> np.ndarray:
    """The FEATURES vector of one pair (a = the new question, b = the cached one; nearly symmetric by design)."""
    fa = fa or features(a.text)
    fb = fb or features(b.text)
    sim = a.vecs @ b.vecs.T if a.vecs.size and b.vecs.size else np.zeros((len(a.words), len(b.words)), np.float32)
    am, amin, amin2, abest = _side(sim, a.content)
    bm, bmin, bmin2, bbest = _side(sim.T, b.content)
    both = np.concatenate([abest, bbest]) if abest.size + bbest.size else np.ones(1, np.float32)
    na, nb = max(1, int(a.content.sum())), max(1, int(b.content.sum()))
    sa, sb = fa.stems, fb.stems
    jac = len(sa & sb) / max(1, len(sa | sb))
    only_a, only_b = swapped_words(fa, fb)
    # The swapped words' own partners: the best token similarity between a word only `a` has and one only `b` has.
    pair_sim = 1.0
    if only_a and only_b:
        ia = [i for i, w in enumerate(a.words) if w in only_a]
        ib = [j for j, w in enumerate(b.words) if w in only_b]
        if ia and ib:
            pair_sim = float(sim[np.ix_(ia, ib)].max(axis=1).min())
    same_bag = float(sa == sb and [t for t in fa.tokens if len(t) > 1] != [t for t in fb.tokens if len(t) > 1])
    edits = _edit_shape(fa.tokens, fb.tokens)
    flags = guard_flags(fa, fb)
    # A number or name on one side only is an added detail; one on each side that the other lacks (a name for a
    # number counts: 'Model S' / 'Model 3') is a change.
    num_a, num_b = set(fa.numbers) - set(fb.numbers), set(fb.numbers) - set(fa.numbers)
    ids_a, ids_b = one_sided_ids(fa, fb)
    vals = [cosine, am, amin, amin2, bm, bmin, bmin2, min(amin, bmin), float(np.mean(both < 0.7)),
            float(np.mean(both < 0.8)), float(np.log(na)), float(np.log(nb)), min(na, nb) / max(na, nb), jac,
            float(len(only_a)), float(len(only_b)), float(bool(only_a and only_b)),
            max(_inversions(sim, a.content), _inversions(sim.T, b.content)), same_bag, pair_sim,
            float(bool(num_a or num_b)), float(bool((ids_a - num_a) or (ids_b - num_b))), float(bool(ids_a and ids_b)),
            *edits,
            *(float(flags[r]) for r in RULES)]
    return np.asarray(vals, dtype=np.float32)


@dataclass(frozen=True)
class PairVerifier:
    """Logistic regression on standardised FEATURES; `threshold` is the P(same) a hit needs (chosen on dev)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float
    model_id: str = ""

    def prob(self, x: np.ndarray) -> np.ndarray:
        z = ((np.atleast_2d(x) - self.mean) / self.scale) @ self.coef + self.intercept
        return sigmoid(z)

    def save(self, path: Path, provenance: Mapping[str, str] | None = None, **meta: Any) -> None:
        save_fitted(path, FittedLinear(FEATURES, self.coef, np.asarray(self.intercept), self.mean, self.scale,
                                       self.threshold, provenance=dict(provenance or {}),
                                       meta={"model_id": self.model_id, **meta}))


@lru_cache(maxsize=2)
def load_verifier(path: Path = MODEL_PATH) -> PairVerifier | None:
    """The shipped verifier, or None when the file is absent (the guard then decides alone)."""
    if not path.exists():
        return None
    rec = load_fitted(path, features=FEATURES, recipe="python -m train.cache_verifier")
    assert rec.mean is not None and rec.scale is not None and rec.threshold is not None
    return PairVerifier(rec.mean.astype(np.float32), rec.scale.astype(np.float32), rec.coef.astype(np.float32),
                        float(rec.intercept), rec.threshold, str(rec.meta.get("model_id", "")))


def encode_questions(encoder: TokenEmbedder, texts: Sequence[str], *, normalise: bool = True
                     ) -> tuple[np.ndarray, list[QuestionTokens]]:
    """Sentence vectors (unit length unless normalise=False: then exactly what the runtime returns) and
    QuestionTokens of short questions. A text too long for one window gets empty token vectors (its features then
    say nothing aligns, so the verifier refuses it)."""
    vecs, toks = encoder.encode_with_tokens(list(texts))
    out = []
    for t, tk in zip(texts, toks):
        if tk is None:
            out.append(QuestionTokens(t, np.zeros((0, 1), np.float32), np.zeros(0, bool), ()))
        else:
            _ids, offsets, rows = tk
            out.append(question_tokens(t, offsets, rows))
    v = np.asarray(vecs, dtype=np.float32)
    if not normalise:
        return v, out
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9), out


# Token vectors of questions already encoded, keyed by (embedder model id, text): the query's own from the cache
# stage's forward (query_vector), and each cached question once the verifier has read it, so a later check against
# the same entry needs no forward at all. A function of the text and the model only (no answer, no workspace data).
_TOKENS: OrderedDict[tuple[str, str], QuestionTokens] = OrderedDict()
_TOKENS_MAX = 1024
_TOKENS_LOCK = threading.Lock()


def _remember_tokens(model_id: str, tok: QuestionTokens) -> None:
    with _TOKENS_LOCK:
        _TOKENS[(model_id, tok.text)] = tok
        _TOKENS.move_to_end((model_id, tok.text))
        while len(_TOKENS) > _TOKENS_MAX:
            _TOKENS.popitem(last=False)


def _known_tokens(model_id: str, text: str) -> QuestionTokens | None:
    with _TOKENS_LOCK:
        return _TOKENS.get((model_id, text))


def forget_tokens() -> None:
    """Empty the memo (benches time a check with and without it)."""
    with _TOKENS_LOCK:
        _TOKENS.clear()


def query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """The query's sentence vector for the cache stage. With an embedder that gives token vectors from the same
    forward (the onnx runtimes) it keeps them for the verifier, so a check encodes at most the cached question (about
    half of a check's cost, bench/results/answer_cache.json). The vector is the one encode() gives: same session,
    same single-text input."""
    if not isinstance(embedder, TokenEmbedder):
        return np.asarray(embedder.encode([text])[0])
    vecs, toks = encode_questions(embedder, [text], normalise=False)
    _remember_tokens(embedder.model_id, toks[0])
    return vecs[0]


def tokens_for(embedder: TokenEmbedder, texts: Sequence[str]) -> list[QuestionTokens]:
    """QuestionTokens of each text: from the memo when this embedder already encoded it, else one forward over the
    rest (remembered for the next check)."""
    mid = embedder.model_id
    found = {t: _known_tokens(mid, t) for t in texts}
    missing = [t for t in dict.fromkeys(texts) if found[t] is None]
    if missing:
        _vecs, toks = encode_questions(embedder, missing)
        for tok in toks:
            _remember_tokens(mid, tok)
            found[tok.text] = tok
    return [found[t] for t in texts]  # type: ignore[misc]


def make_verifier(embedder: Embedder, path: Path = MODEL_PATH, *, pair_model: bool = False,
                  pair_path: Path | None = None) -> Callable[[str, str, float], float] | None:
    """The pair check core.answer.cache.lookup takes, or None when this embedder gives no token vectors from its
    forward pass (the torch runtime) or no model file ships: the full guard then decides alone. Token vectors come
    from the memo (the query's from query_vector, a cached question's from an earlier check) or one forward over the
    questions it lacks; lookup calls it only for a pair above the threshold that breaks no veto.
    pair_model: average P with the fine-tuned MiniLM pair model (core/answer/cache_pair.py) when its file ships; the
    mean of the two beat the verifier alone on the dev split but not on the product's own questions
    (bench/results/answer_cache.json, product_default), so answer_cache.pair_model is off by default."""
    if not isinstance(embedder, TokenEmbedder):
        return None
    model = load_verifier(path)
    if model is None:
        return None
    pair_file = pair_path or cache_pair.PAIR_MODEL_PATH
    use_pair = pair_model and pair_file.exists()

    def check(new: str, old: str, cosine: float) -> float:
        toks = tokens_for(embedder, [new, old])
        if not toks[0].words or not toks[1].words:
            return 0.0  # a question longer than one window: nothing to compare token by token
        p = float(model.prob(pair_features(cosine, toks[0], toks[1]))[0])
        if use_pair:
            import torch  # noqa: F401 - loaded before one_torch_thread looks for it

            with one_torch_thread():  # two short sequences: a second thread only waits for a core
                p = (p + float(cache_pair.pair_probability([(new, old)], pair_file)[0])) / 2
        return p

    return check
