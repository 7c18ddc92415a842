"""The router: the first decision of every query (which class of question is this, and so which path), offline by
a small trained classifier, or by Claude Haiku with a JSON schema when a key is set (falling back to offline)."""
from __future__ import annotations

import json
import re
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from core.models import DATA_DIR as MODELS_DIR
from core.models.fitted import FittedLinear, FittedModelError, load_fitted, sigmoid
from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.route.features import coverage
from core.text import tokenize
from core.types import DEFAULT_WORKSPACE, Usage

if TYPE_CHECKING:  # the router only reads what the index hands it; bm25s stays unimported here
    from core.retrieve.bm25 import PassageTerms

CLASSES = ("chitchat", "factoid", "comparison", "multi-hop", "global-summary", "out-of-scope")
ABSTAIN = "abstain"
CAG_ROUTE = "cag"  # not a class: a path any corpus question may take when CAG is asked for and available
NO_RETRIEVAL = frozenset({"chitchat", "out-of-scope"})  # the costly mistakes: a corpus question gets no answer
# Offline: a short query at least half of whose terms the corpus has is a lookup ("Jane Doe", "выручка квартал",
# "where do nightly backups go"), never small talk, whatever the classifier (trained on sentences) thinks. Without
# a length limit the guard abstained far too often (large corpora's vocabulary covers everyday English); a shorter
# limit abstained less but let 5-word corpus questions be refused (bench/results/route.json).
KEYWORD_MAX_WORDS = 5
KEYWORD_MIN_COVERAGE = 0.5
# The labelled routing set (public data only, split once into train and test): `python -m train.route_data` builds it.
ROUTING_FILE = Path(__file__).resolve().parents[2] / "train" / "sets" / "routing.jsonl"
ROUTES_FILE = Path(__file__).parent / "routes.toml"
MODEL_FILE = MODELS_DIR / "router_model.npz"  # written by `python -m train.route`
REFIT = "python -m train.route"


class RouteError(ValueError):
    """A routes file or an override that cannot be used; the message is fit for the user."""


# -- named configurations (routes.toml) -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RouteConfig:
    """What a class of question gets: a readable, editable record (core/route/routes.toml)."""

    name: str
    description: str
    retrieve: bool = True
    transforms: tuple[str, ...] = ()  # among hyde, multi_query, decompose
    overrides: Mapping[str, Any] = field(default_factory=dict)  # dotted PipelineConfig keys for this route only
    reply: str = ""  # chitchat / out-of-scope: the text shown instead of an answer ({topics} is filled in)


def load_routes(path: str | Path | None = None) -> dict[str, RouteConfig]:
    """The named routes of a routes file. Every query reads the file (an edit applies to the next query); the parse
    is kept per text, since parsing the TOML was a third of the route stage's time."""
    p = Path(path) if path else ROUTES_FILE
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RouteError(f"cannot read routes file {p}: {exc}") from exc
    return dict(_parsed_routes(p, text))


@lru_cache(maxsize=16)
def _parsed_routes(p: Path, text: str) -> Mapping[str, RouteConfig]:
    """load_routes' parse of one routes file's text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RouteError(f"cannot read routes file {p}: {exc}") from exc
    routes: dict[str, RouteConfig] = {}
    for name, sec in data.items():
        if name not in (*CLASSES, ABSTAIN, CAG_ROUTE):
            raise RouteError(f"routes file {p.name}: unknown class {name!r}; classes are {', '.join(CLASSES)}, abstain "
                             f"(and the {CAG_ROUTE} route)")
        bad = set(sec.get("transforms", ())) - {"hyde", "multi_query", "decompose"}
        if bad:
            raise RouteError(f"routes file {p.name}: [{name}] unknown transforms {sorted(bad)}")
        routes[name] = RouteConfig(name, str(sec.get("description", "")), bool(sec.get("retrieve", True)),
                                   tuple(sec.get("transforms", ())), dict(sec.get("overrides", {})),
                                   str(sec.get("reply", "")))
    missing = set((*CLASSES, ABSTAIN)) - set(routes)
    if missing:
        raise RouteError(f"routes file {p.name}: no section for {', '.join(sorted(missing))}")
    # An older routes file without [cag] still works: CAG then reads with the built-in description.
    routes.setdefault(CAG_ROUTE, RouteConfig(CAG_ROUTE, "cache-augmented generation: the whole corpus in Claude's "
                                                        "cached prompt, no retrieval", retrieve=False))
    if routes[CAG_ROUTE].retrieve or routes[CAG_ROUTE].transforms:
        raise RouteError(f"routes file {p.name}: [{CAG_ROUTE}] never retrieves (retrieve = false, no transforms)")
    return routes


# -- the decision ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    cls: str  # one of CLASSES, or ABSTAIN (the default pipeline)
    confidence: float
    reason: str
    method: str  # offline | llm | override | disabled
    predicted: str = ""  # the classifier's best class, kept when it abstains
    probabilities: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    usage: Usage = Usage()
    queries: tuple[str, ...] = ()  # sub-queries the LLM router proposed with its decision (no extra call later)

    def as_json(self, config_name: str) -> dict[str, Any]:
        return {"class": self.cls, "confidence": round(self.confidence, 4), "reason": self.reason,
                "config": config_name, "method": self.method}


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    coverage: float


def number_guard(tokens: Sequence[str], vocabulary: Collection[str]) -> str:
    """Why a no-retrieval route must not stand (or ''): every term of the question the corpus lacks is a number, a year
    or an ordinal ('the 90th percentile' over a corpus that gives the 99th). Such a question is about the corpus, and
    close to what it holds: the answer stage's check refuses it with the neighbouring fact, which 'outside what I can
    help with' would hide."""
    unknown = [t for t in tokens if t not in vocabulary]
    if unknown and all(any(ch.isdigit() for ch in t) for t in unknown):
        return "its only terms the corpus lacks are numbers (" + ", ".join(f"'{t}'" for t in unknown[:3]) + \
            "): the answer checks them"
    return ""


def load_examples(split: str | None = "train", path: Path = ROUTING_FILE) -> list[Example]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Example(r["text"], r["label"], float(r["coverage"])) for r in rows if split is None or r["split"] == split]


def coverage_features(cov: float) -> np.ndarray:
    # Scaled so that the L2-normalised TF-IDF blocks and this column compete on even terms under one C.
    return np.array([[2.0 * cov, 2.0 * (1.0 - cov)]])


EXTRA_NAMES = ("corpus coverage", "terms unknown to the corpus")
WORD_PATTERN = r"(?u)\b\w+\b"
WORD_NGRAMS, CHAR_NGRAMS = (1, 2), (2, 5)


def _word_grams(text: str) -> list[str]:
    """scikit-learn's word analyzer for WORD_NGRAMS = (1, 2): lower-cased tokens, then adjacent pairs."""
    toks = re.findall(WORD_PATTERN, text.lower())
    return toks + [f"{a} {b}" for a, b in zip(toks, toks[1:])]


def _char_grams(text: str) -> list[str]:
    """scikit-learn's char_wb analyzer for CHAR_NGRAMS = (2, 5): n-grams inside each space-padded word; a padded word
    no longer than n gives itself once and no longer n-grams."""
    out: list[str] = []
    lo, hi = CHAR_NGRAMS
    for w in re.sub(r"\s\s+", " ", text.lower()).split():
        w = f" {w} "
        for n in range(lo, hi + 1):
            if len(w) <= n:
                out.append(w)
                break
            out.extend(w[i:i + n] for i in range(len(w) - n + 1))
    return out


def feature_names(word_terms: Sequence[str], char_terms: Sequence[str]) -> list[str]:
    """The router's feature names, as the fitted record stores them and `explain` shows them."""
    return [f"word '{w}'" for w in word_terms] + [f"chars '{g}'" for g in char_terms] + list(EXTRA_NAMES)


def _term(name: str) -> str:
    """The word or character n-gram a feature name holds ("word 'x'" -> x, "chars 'ab'" -> ab)."""
    return name[name.index("'") + 1:-1]


def _tfidf(grams: list[str], index: Mapping[str, int], idf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(feature indices, values): sublinear tf x idf, L2-normalised, as TfidfVectorizer(sublinear_tf=True) does."""
    counts: dict[int, int] = {}
    for g in grams:
        j = index.get(g)
        if j is not None:
            counts[j] = counts.get(j, 0) + 1
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    idx = np.fromiter(counts, dtype=np.int64, count=len(counts))
    val = (1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))) * idf[idx]
    return idx, val / np.linalg.norm(val)


class ShippedRouter:
    """The router that queries use: the exported model (core/models/data/router_model.npz), applied with numpy alone, so it
    loads in milliseconds, with no scikit-learn import (the archived bench/route.py timed it)."""

    def __init__(self, path: Path = MODEL_FILE, model: FittedLinear | None = None) -> None:
        try:
            m = model or load_fitted(path, recipe=REFIT)
            word_idf, char_idf = m.arrays["word_idf"], m.arrays["char_idf"]
        except (FittedModelError, KeyError) as exc:
            raise RouteError(f"cannot read the router model {path}: {exc}") from exc
        self.model = m
        self.classes: tuple[str, ...] = m.classes
        self.word_idf, self.char_idf = word_idf, char_idf
        self.coef, self.intercept = m.coef, m.intercept
        self.source_sha = m.provenance.get("source_sha", "")
        self.names = list(m.features)
        nw, nc = len(word_idf), len(char_idf)
        self.word_index = {_term(n): i for i, n in enumerate(self.names[:nw])}
        self.char_index = {_term(n): i for i, n in enumerate(self.names[nw:nw + nc])}
        self._char0 = nw
        self._extra0 = nw + nc
        self._recent = lru_cache(maxsize=8)(self._features)

    def features(self, text: str, cov: float) -> tuple[np.ndarray, np.ndarray]:
        """One question's non-zero features as (column indices, values) over words, characters, then the two extras.
        The last few are kept: route_offline's probabilities and explain read the same question's."""
        return self._recent(text, cov)

    def _features(self, text: str, cov: float) -> tuple[np.ndarray, np.ndarray]:
        wi, wv = _tfidf(_word_grams(text), self.word_index, self.word_idf)
        ci, cv = _tfidf(_char_grams(text), self.char_index, self.char_idf)
        extra = coverage_features(cov)[0]
        return (np.concatenate([wi, ci + self._char0, np.arange(2) + self._extra0]),
                np.concatenate([wv, cv, extra]))

    def probabilities(self, texts: Sequence[str], coverages: Sequence[float]) -> np.ndarray:
        rows = []
        for text, cov in zip(texts, coverages):
            idx, val = self.features(text, cov)
            rows.append(val @ self.coef[idx] + self.intercept)
        z = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(self.classes))
        # One-vs-rest logistic outputs normalised to sum to one: what SGDClassifier(loss="log_loss").predict_proba does
        p = sigmoid(z)
        return p / p.sum(axis=1, keepdims=True)

    def explain(self, text: str, cov: float, cls: str, top: int = 3) -> list[str]:
        """The features that pushed hardest toward `cls`: value x (weight for cls - mean weight)."""
        idx, val = self.features(text, cov)
        i = self.classes.index(cls)
        w = self.coef[idx]
        contrib = val * (w[:, i] - w.mean(axis=1))
        out = []
        for k in np.argsort(-contrib, kind="stable")[:top]:
            if contrib[k] <= 0:
                break
            name = self.names[int(idx[k])]
            out.append(f"{name} = {cov:.2f}" if name == "corpus coverage" else name)
        return out


@lru_cache(maxsize=1)
def trained_router() -> ShippedRouter:
    """The shipped router, loaded once per process."""
    return ShippedRouter()


def decide(probs: Mapping[str, float], *, min_confidence: float, refuse_confidence: float) -> tuple[str, str]:
    """(class, why-abstained) from the class probabilities. Classes that skip retrieval need more confidence: sending a
    corpus question to chitchat or out-of-scope costs its answer, abstaining only costs the default pipeline."""
    best = max(probs, key=lambda k: probs[k])
    p = probs[best]
    if best in NO_RETRIEVAL and p < refuse_confidence:
        return ABSTAIN, f"{best} at {p:.2f} is below router.refuse_confidence {refuse_confidence:g}"
    if p < min_confidence:
        return ABSTAIN, f"{best} at {p:.2f} is below router.min_confidence {min_confidence:g}"
    return best, ""


# Words that address or greet someone: a keyword lookup ('revenue growth', 'NX-200 temperature') names things and has
# none of them; 'hi, how are you?', 'thanks, that helps' and 'good morning' do, and their few words are everyday words
# any corpus knows. Measured on the router's labelled lines (bench/route_evidence.py, keyword guard rows).
_CONVERSATIONAL = re.compile(
    r"(?i)(?<!\w)(you|your|yours|yourself|u|i|me|my|mine|we|us|hi|hello|hey|thanks|thank|thx|bye|goodbye|morning|"
    r"evening|night|ты|вы|тебя|вас|тебе|вам|твой|ваш|я|мне|меня|привет|здравствуй|здравствуйте|спасибо|пока)(?!\w)")


def conversational(question: str) -> bool:
    """Whether the question addresses or greets someone (see _CONVERSATIONAL)."""
    return bool(_CONVERSATIONAL.search(question))


def refusal_guard(question: str, cov: float | None, *, conversation_rule: bool = True) -> str:
    """Why a chitchat / out-of-scope decision must not stand for this question (the default pipeline runs instead),
    or "" when it may. `cov` is None when there is no corpus to compare with. A short query worded as conversation
    (conversational) is not a keyword lookup, however many of its everyday words the corpus knows."""
    words = len(question.split())
    if conversation_rule and conversational(question):
        return ""
    if cov is not None and cov >= KEYWORD_MIN_COVERAGE and words <= KEYWORD_MAX_WORDS:
        return (f"a short query ({words} word{'s' if words > 1 else ''}) whose terms the corpus knows ({cov:.0%} >= "
                f"{KEYWORD_MIN_COVERAGE:.0%})")
    return ""


def language_guard(question: str, cls: str, unjudged: str) -> str:
    """Why a chitchat / out-of-scope decision must not stand for a question whose language the corpus's vocabulary
    cannot judge (`unjudged` says why), or "". Out-of-scope means "the corpus cannot be about this", a judgement
    of coverage, so it never stands (the multilingual list searches instead); chitchat stands only for a question
    worded as conversation (conversational: greetings and address, English and Russian). Measured on xquad's
    Russian and German questions and the routing set's Russian lines (bench/results/xquad.json, router rows)."""
    if not unjudged or cls not in NO_RETRIEVAL:
        return ""
    if cls == "chitchat" and conversational(question):
        return ""
    return f"{unjudged}, so {cls} would rest on the language alone; searched instead"


def evidence_guard(ev: PassageTerms, *, min_terms: int, min_share: float, unknown_weight: float = 1.0) -> str:
    """Why a chitchat / out-of-scope decision must not stand because one passage is plainly about the question, or ""
    when it may. `ev` is the BM25 index's PassageTerms for the question. Fires when its best passage holds at least
    `min_terms` of the question's terms carrying at least `min_share` of the question's idf mass, where a term the
    corpus never uses counts `unknown_weight` times its idf (everyday words such as 'get' or 'I' are often absent
    from a formal corpus and would otherwise outweigh everything). "What daily meal allowance do I get when
    travelling abroad?" reads as a travel request to a classifier trained on assistant intents, but a travel policy
    passage holds 'daili', 'meal', 'allow', 'travel'. min_terms 0 turns the guard off."""
    weight = {t: v * (unknown_weight if t in ev.unknown else 1.0) for t, v in ev.idf.items()}
    total = sum(weight.values())
    if min_terms <= 0 or not ev.matched or total <= 0 or len(ev.matched) < min_terms:
        return ""
    share = sum(weight.get(t, 0.0) for t in ev.matched) / total
    if share < min_share:
        return ""
    shown = ", ".join(f"'{t}'" for t in ev.matched[:4]) + (", …" if len(ev.matched) > 4 else "")
    return f"one passage holds {len(ev.matched)} of its terms ({shown}: {share:.0%} of its idf >= {min_share:.0%})"


def dense_guard(top_cosine: float | None, *, min_cosine: float) -> str:
    """Why a chitchat / out-of-scope decision must not stand because a passage is close to the question in the dense
    embedding space (it says the same in other words: "What topic do private bills typically have?" against "Private
    bills normally relate to large-scale development projects"), or "". `top_cosine` is the best cosine of the
    question's vector with the corpus's chunk vectors; None when there is no dense index. min_cosine 0 = off."""
    if min_cosine <= 0 or top_cosine is None or top_cosine < min_cosine:
        return ""
    return f"a passage is close to it in meaning (dense cosine {top_cosine:.2f} >= {min_cosine:.2f})"


# A name in a question: a capitalised word that does not start the question ("Kafka", "Orion"), or an
# identifier with a digit, an underscore or an inner capital ("NX-200", "CACHE_TTL", "DuckDB").
_NAME = re.compile(r"(?<![\w-])(?:[A-Z][a-z]+[A-Z]\w*|[A-Za-z]+[-_]?\d[\w-]*|[A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z][\w-]{2,})")


def known_names(question: str, vocabulary: Collection[str] | None,
                tokenizer: Callable[[str], list[str]] = tokenize) -> list[str]:
    """Names in the question (see _NAME; the first word only when it is an identifier) whose every index term the
    corpus has. A question that names something the corpus knows is a corpus question even when its other words
    are not the corpus's: a Russian question about an English corpus ("Какой максимальный размер пакета в
    Kafka?") has low term coverage and read as out of scope."""
    if not vocabulary:
        return []
    out = []
    for m in _NAME.finditer(question):
        word = m.group(0)
        if m.start() == len(question) - len(question.lstrip()) and not re.search(r"[\d_]|.[A-Z]", word):
            continue  # a capitalised first word is the sentence's capital, not a name
        terms = tokenizer(word)
        if terms and all(t in vocabulary for t in terms):
            out.append(word)
    return out


def route_offline(question: str, vocabulary: Collection[str] | None, *, min_confidence: float,
                  refuse_confidence: float, router: ShippedRouter | None = None,
                  tokenizer: Callable[[str], list[str]] = tokenize, name_guard: bool = True,
                  evidence: Callable[[str], PassageTerms] | None = None, evidence_min_terms: int = 0,
                  evidence_min_share: float = 1.0, evidence_unknown_weight: float = 1.0, unjudged: str = "",
                  dense_top: Callable[[], float | None] | None = None, dense_min_cosine: float = 0.0) -> Route:
    """`tokenizer` must be the one that built `vocabulary` (the BM25 index's), so the terms compare. `evidence`
    (the BM25 index's best_passage_terms) is asked only when the decision would skip retrieval and no cheaper
    guard stopped it. `unjudged`: why the corpus's vocabulary cannot judge this question (its language is none of
    the corpus's, e.g. "a 'ru' question, corpus en"); see language_guard. `dense_top` (the question's best dense
    cosine in the corpus) is asked last, only when every other guard let a no-retrieval decision stand."""
    r = router or trained_router()
    notes: list[str] = []
    if unjudged:  # coverage would only measure the language: the feature is set to neutral, and said so
        cov = 0.5
        notes.append(f"{unjudged}: corpus coverage set to 0.5")
    elif vocabulary:
        cov = coverage(tokenizer(question), vocabulary)
    else:  # an empty workspace: no corpus to compare with, so the feature is set to neutral and said so
        cov = 0.5
        notes.append("no corpus vocabulary (empty workspace): corpus coverage set to 0.5")
    probs = dict(zip(r.classes, (float(p) for p in r.probabilities([question], [cov])[0])))
    cls, why = decide(probs, min_confidence=min_confidence, refuse_confidence=refuse_confidence)
    # Plain term count: weighting the terms by idf was measured and not adopted (bench/route_evidence.py idf_coverage).
    guard = language_guard(question, cls, unjudged) or refusal_guard(question, cov if vocabulary and not unjudged
                                                                     else None)
    if cls in NO_RETRIEVAL and not guard and name_guard:
        names = known_names(question, vocabulary, tokenizer)
        if names:
            guard = "it names " + ", ".join(f"'{n}'" for n in names[:3]) + ", which the corpus knows"
    if cls in NO_RETRIEVAL and not guard and vocabulary and not unjudged:
        guard = number_guard(tokenizer(question), vocabulary)
    if cls in NO_RETRIEVAL and not guard and evidence is not None and evidence_min_terms > 0:
        guard = evidence_guard(evidence(question), min_terms=evidence_min_terms, min_share=evidence_min_share,
                               unknown_weight=evidence_unknown_weight)
    if cls in NO_RETRIEVAL and not guard and dense_top is not None and dense_min_cosine > 0:
        guard = dense_guard(dense_top(), min_cosine=dense_min_cosine)
    if cls in NO_RETRIEVAL and guard:
        cls, why = ABSTAIN, f"{guard}; not sent to {cls}"
    best = max(probs, key=lambda k: probs[k])
    feats = r.explain(question, cov, best)
    reason = f"{best} {probs[best]:.2f}: " + (", ".join(feats) if feats else "no single feature stands out")
    if cls == ABSTAIN:
        reason = f"abstain ({why}); " + reason
    return Route(cls, probs[best], reason, "offline", best, probs, tuple(notes))


# -- how good the offline router is: its test split, as Evaluate shows it ---------------------------------------------
CORPUS_CLASSES = tuple(c for c in CLASSES if c not in NO_RETRIEVAL)


@dataclass(frozen=True)
class RouterReport:
    """The shipped router scored on the test split of train/sets/routing.jsonl (never used in fitting)."""

    rows: tuple[str, ...]  # true classes
    columns: tuple[str, ...]  # routes taken, abstain last
    matrix: tuple[tuple[int, ...], ...]  # matrix[i][j]: questions of rows[i] sent to columns[j]
    macro_f1: float  # over the six classes, from the classifier's best class (before thresholds)
    costly: int  # corpus questions sent to chitchat or out-of-scope (after thresholds and the keyword guard)
    corpus_questions: int
    abstained: int
    n: int

    @property
    def costly_rate(self) -> float:
        return self.costly / self.corpus_questions if self.corpus_questions else 0.0

    @property
    def abstain_rate(self) -> float:
        return self.abstained / self.n if self.n else 0.0


def macro_f1(labels: Sequence[str], predicted: Sequence[str], classes: Sequence[str] = CLASSES) -> float:
    f1s = []
    for c in classes:
        tp = sum(a == c and b == c for a, b in zip(labels, predicted))
        fp = sum(a != c and b == c for a, b in zip(labels, predicted))
        fn = sum(a == c and b != c for a, b in zip(labels, predicted))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(f1s) / len(f1s)


def router_report(*, min_confidence: float, refuse_confidence: float, examples: Sequence[Example] | None = None,
                  router: ShippedRouter | None = None) -> RouterReport:
    """Confusion of true class against the route taken with these thresholds, as route_offline decides (each
    question's coverage is the one stored with it, measured against the corpus it was asked about)."""
    ex = list(examples) if examples is not None else load_examples("test")
    r = router or trained_router()
    probs = r.probabilities([e.text for e in ex], [e.coverage for e in ex])
    best, taken = [], []
    for e, row in zip(ex, probs):
        p = dict(zip(r.classes, (float(x) for x in row)))
        cls, _ = decide(p, min_confidence=min_confidence, refuse_confidence=refuse_confidence)
        if cls in NO_RETRIEVAL and refusal_guard(e.text, e.coverage):
            cls = ABSTAIN
        best.append(max(p, key=lambda k: p[k]))
        taken.append(cls)
    cols = (*CLASSES, ABSTAIN)
    matrix = tuple(tuple(sum(e.label == a and t == b for e, t in zip(ex, taken)) for b in cols) for a in CLASSES)
    corpus = [t for e, t in zip(ex, taken) if e.label in CORPUS_CLASSES]
    return RouterReport(CLASSES, cols, matrix, macro_f1([e.label for e in ex], best),
                        sum(t in NO_RETRIEVAL for t in corpus), len(corpus), taken.count(ABSTAIN), len(ex))


# -- LLM router ------------------------------------------------------------------------------------------------------
ROUTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "class": {"type": "string", "enum": list(CLASSES)},
        "confidence": {"type": "number"},
        "reason": {"type": "string"},
        "sub_queries": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["class", "confidence", "reason"],
    "additionalProperties": False,
}

ROUTER_INSTRUCTIONS = (
    "You route questions for a retrieval system over one document collection. Pick exactly one class:\n"
    "chitchat: greetings, thanks, small talk about the assistant; no documents needed.\n"
    "factoid: one fact, number, definition or identifier (error codes, config keys, SKUs) from the documents.\n"
    "comparison: compares two or more named items; sub_queries = one search query per item.\n"
    "multi-hop: needs one fact to find another (the X of the Y of Z); sub_queries = the steps, in order.\n"
    "global-summary: themes, overview or summary across many documents.\n"
    "out-of-scope: a task or a question the collection cannot be about (weather, bookings, alarms, trivia).\n"
    "Give confidence in [0,1] and a one-line reason. sub_queries only for comparison and multi-hop, at most 4, "
    "never repeating the question."
)


def route_llm(question: str, llm: LLM, model: str, topics: str, *, workspace: str = DEFAULT_WORKSPACE,
              fallback: Route | None = None, min_confidence: float, refuse_confidence: float) -> Route:
    """One Haiku call with a JSON schema. Anything unusable (no key, HTTP failure, not JSON, wrong shape, unknown
    class) falls back to the offline decision, with a note saying so."""
    req = LLMRequest(model, (TextBlock(ROUTER_INSTRUCTIONS),),
                     (TextBlock(f"The collection is about: {topics or 'unknown'}\n\nQuestion: {question}"),),
                     max_tokens=300, json_schema=ROUTER_SCHEMA, purpose="route", ref_id=question[:80])
    start = time.perf_counter()
    usage = Usage()
    try:
        resp = llm.complete(req, workspace=workspace)
        usage = resp.usage
        data = resp.data
        problem = _router_shape_problem(data)
    except LLMError as exc:
        data, problem = None, str(exc)
    if problem:
        fb = fallback if fallback is not None else route_offline(
            question, None, min_confidence=min_confidence, refuse_confidence=refuse_confidence)
        return Route(fb.cls, fb.confidence, fb.reason, "offline", fb.predicted, fb.probabilities,
                     (*fb.notes, f"LLM router unusable ({problem[:160]}): fell back to the offline router"), usage)
    assert isinstance(data, dict)
    conf = min(max(float(data["confidence"]), 0.0), 1.0)
    cls = str(data["class"])
    probs = {cls: conf}
    decided, why = decide(probs, min_confidence=min_confidence, refuse_confidence=refuse_confidence)
    reason = str(data["reason"]).strip()[:300] or "(no reason given)"
    subs = tuple(dict.fromkeys(s.strip() for s in data.get("sub_queries", ()) if isinstance(s, str)
                               and s.strip() and s.strip().lower() != question.lower()))[:4]
    notes = (f"LLM router in {(time.perf_counter() - start) * 1000:.0f} ms",)
    if decided == ABSTAIN:
        reason = f"abstain ({why}); {reason}"
    return Route(decided, conf, reason, "llm", cls, probs, notes, usage, subs)


def _router_shape_problem(data: Any) -> str:
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    if data.get("class") not in CLASSES:
        return f"unknown class {data.get('class')!r}"
    if not isinstance(data.get("confidence"), (int, float)) or isinstance(data.get("confidence"), bool):
        return "confidence is not a number"
    if not isinstance(data.get("reason", ""), str):
        return "reason is not text"
    subs = data.get("sub_queries", [])
    if not isinstance(subs, list):
        return "sub_queries is not a list"
    return ""


def override_route(cls: str, routes: Mapping[str, RouteConfig]) -> Route:
    if cls not in routes:
        raise RouteError(f"unknown route {cls!r}; choose one of {', '.join(routes)}")
    return Route(cls, 1.0, "chosen by the user for this query", "override", cls)


def corpus_topics(titles: Iterable[str], limit: int = 8) -> str:
    """What the corpus is about, for the out-of-scope refusal: its document titles (first few)."""
    seen = list(dict.fromkeys(t.strip() for t in titles if t and t.strip()))
    if not seen:
        return "no documents yet"
    more = f" and {len(seen) - limit} more" if len(seen) > limit else ""
    return "; ".join(seen[:limit]) + more
