"""Entity resolution: name normalisation, the user's synonym list, reviewed merges, and merge suggestions by name cosine."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import numpy as np
import Stemmer

_CYR = re.compile(r"[\u0400-\u04FF]")
_EDGE_PUNCT = " \t\r\n\"'`“”‘’«»()[]{}<>.,;:!?*#|"
# Words whose final "s" is not a plural; short words are left alone anyway.
_NOT_PLURAL = frozenset("series species news analysis basis diagnosis thesis status campus bus gas bias "
                        "process access address business class glass mass loss stress success lens atlas "
                        "corpus virus census apparatus minus plus previous various famous anonymous "
                        "continuous numerous always perhaps".split())


@lru_cache(maxsize=1)
def _ru_stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("russian")


def _singular(word: str) -> str:
    """Light English plural folding for the head word of a term, so 'pump stations' and 'pump station' meet."""
    if len(word) <= 3 or word in _NOT_PLURAL or not word.isalpha() or not word.isascii():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


def _fold_latin_accents(text: str) -> str:
    """'Kraków' -> 'Krakow', 'Müller' -> 'Muller'; Cyrillic is left alone ('й' is a letter, not 'и' + accent)."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        if ord(ch) > 127 and unicodedata.name(ch, "").startswith("LATIN"):
            out.append("".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c)))
        else:
            out.append(ch)
    return "".join(out)


def is_identifier_like(text: str) -> bool:
    """Digits, underscores or dotted parts: such names keep their punctuation (SKU-1-B is not 'sku 1 b')."""
    return bool(re.search(r"[\d_]", text)) or bool(re.search(r"[^\W\d_]\.[^\W\d_]", text))


@lru_cache(maxsize=200_000)
def normalise_name(name: str) -> str:
    """The resolution key of a surface form: NFKC, case-folded, possessive and edge punctuation stripped, hyphens
    in plain words as spaces, the last English word singular, Russian words stemmed (cases and plurals meet).
    Keys are for matching, not display: 'Jan Peters' keys as 'jan peter', the same as any query naming
    him; only two names differing by that final 's' alone would meet wrongly (split_by_type cannot undo it)."""
    s = _fold_latin_accents(unicodedata.normalize("NFKC", name)).strip(_EDGE_PUNCT)
    s = re.sub(r"['’]s$", "", s)
    s = " ".join(s.split())
    if not s:
        return ""
    if is_identifier_like(s):
        return s.casefold()
    words = re.sub(r"[-‐–—/]+", " ", s).split()
    # The head word is folded when it is lower-case, or Title-case at the end of a longer name ('Binding Proteins'
    # in a title = 'binding proteins' in the text); a lone name ('Postgres') or an acronym ('TLS', 'DuckDB') never.
    head = words[-1]
    # 'MAIN OUTCOMES' (a shouted heading) folds like 'Main Outcomes'; a short capital head ('Acme APIs') stays.
    title_head = len(words) > 1 and head[:1].isupper() and (head[1:].islower() or (head.isupper() and len(head) >= 5))
    last_caps = any(ch.isupper() for ch in head) and not title_head
    out = []
    for i, w in enumerate(words):
        low = w.casefold()
        if _CYR.search(low):
            low = _ru_stemmer().stemWord(low)
        elif i == len(words) - 1 and not last_caps:
            low = _singular(low)
        out.append(low)
    return " ".join(out)


# -- synonym list ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SynonymGroup:
    """One line of the synonym list: the first name is the canonical (display) name."""

    names: tuple[str, ...]

    @property
    def canonical(self) -> str:
        return self.names[0]


class SynonymError(ValueError):
    """A synonym list line that cannot be used; the message names the line."""


def parse_synonyms(text: str) -> list[SynonymGroup]:
    """Lines like `PostgreSQL = Postgres = pg`; blank lines and `#` comments are ignored."""
    groups = []
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        names = tuple(n.strip() for n in line.split("=") if n.strip())
        if len(names) < 2:
            raise SynonymError(f"line {i}: expected 'Name = Alias = ...', got {raw.strip()!r}")
        if len({normalise_name(n) for n in names}) < 2:
            raise SynonymError(f"line {i}: all names normalise to the same key; nothing to merge")
        groups.append(SynonymGroup(names))
    return groups


# -- resolution ------------------------------------------------------------------------------------------------
def element_id(norm: str, type_: str, split_by_type: bool) -> str:
    """The atom resolution works on: the normalised name, or name|type when homonyms are split by type."""
    return f"{norm}|{type_}" if split_by_type else norm


@dataclass(frozen=True)
class Resolution:
    """element id -> node id, the display names fixed by the synonym list, and conflicts worth telling the user."""

    node_of: Mapping[str, str]
    display: Mapping[str, str]
    conflicts: tuple[str, ...] = ()

    def __call__(self, element: str) -> str:
        return self.node_of.get(element, element)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.members: dict[str, set[str]] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        self.members.setdefault(x, {x})
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, keep: str, other: str) -> None:
        """Merge other's group into keep's; keep's root stays the representative (the node id)."""
        a, b = self.find(keep), self.find(other)
        if a != b:
            self.parent[b] = a
            self.members[a] |= self.members.pop(b)


def resolve(
    elements: Iterable[tuple[str, str]],
    *,
    synonyms: Sequence[SynonymGroup] = (),
    approved: Sequence[tuple[str, str]] = (),
    rejected: Sequence[tuple[str, str]] = (),
    split_by_type: bool = False,
) -> Resolution:
    """Map every (norm, type) element to a node id.

    Synonym lines merge unconditionally (the user said so). Approved suggestions `(keep, other)` merge in the
    order they were approved, unless that would put two names the user rejected as a pair into one node: a
    rejection is a standing 'keep apart' rule, which is how homonyms survive later approvals."""
    elems = sorted(set(elements))
    uf = _UnionFind()
    for norm, type_ in elems:
        uf.find(element_id(norm, type_, split_by_type))
    types_of: dict[str, set[str]] = {}
    for norm, type_ in elems:
        types_of.setdefault(norm, set()).add(type_)
    display: dict[str, str] = {}
    for g in synonyms:
        norms = [normalise_name(n) for n in g.names]
        # Split by type, a synonym line applies within each type separately (so it cannot fuse homonyms).
        types = sorted(set().union(*(types_of.get(n, set()) for n in norms))) if split_by_type else [""]
        for t in types:
            root = element_id(norms[0], t, split_by_type)
            uf.find(root)
            display[root] = g.canonical
            for n in norms[1:]:
                uf.union(root, element_id(n, t, split_by_type))
    apart = [(a, b) for a, b in rejected]
    conflicts = []
    for keep, other in approved:
        ra, rb = uf.find(keep), uf.find(other)
        if ra == rb:
            continue
        group = uf.members[ra] | uf.members[rb]
        clash = next(((a, b) for a, b in apart if a in group and b in group and
                      (a in uf.members[ra]) != (b in uf.members[ra])), None)
        if clash:
            conflicts.append(f"merge {keep!r} + {other!r} not applied: {clash[0]!r} and {clash[1]!r} are kept apart")
            continue
        uf.union(keep, other)
    node_of = {e: uf.find(e) for e in list(uf.parent)}
    return Resolution(node_of, display, tuple(conflicts))


# -- merge suggestions ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Suggestion:
    a: str  # node id kept (more chunks)
    b: str
    score: float


def digits_differ(a: str, b: str) -> bool:
    """'NCT00295386' vs 'NCT00398996', 'miR-129-1-3p' vs 'miR-129-2-3p': names that look alike but carry different
    numbers are different codes, whatever their embeddings say."""
    da, db = re.findall(r"\d+", a), re.findall(r"\d+", b)
    return bool(da or db) and da != db


def suggest_merges(
    node_ids: Sequence[str], vectors: np.ndarray, *, threshold: float, new: Iterable[str] | None = None,
    skip: Iterable[tuple[str, str]] = (), sizes: Mapping[str, int] | None = None, block: int = 512,
) -> list[Suggestion]:
    """Pairs of distinct nodes whose name vectors have cosine >= threshold, best first. With `new`, only pairs
    touching a new node are scored (incremental updates). `skip` holds pairs already decided, in any order."""
    n = len(node_ids)
    if n < 2:
        return []
    v = vectors.astype(np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    pos = {nid: i for i, nid in enumerate(node_ids)}
    rows = sorted(pos[x] for x in set(new) if x in pos) if new is not None else list(range(n))
    done = {frozenset(p) for p in skip}
    sizes = sizes or {}
    found: dict[frozenset[str], Suggestion] = {}
    for start in range(0, len(rows), block):
        idx = np.asarray(rows[start:start + block])
        sims = v[idx] @ v.T
        for r, c in zip(*np.nonzero(sims >= threshold)):
            i, j = int(idx[r]), int(c)
            if i == j:
                continue
            a, b = node_ids[i], node_ids[j]
            key = frozenset((a, b))
            if key in done or key in found or digits_differ(a, b):
                continue
            keep, other = (a, b) if (-sizes.get(a, 0), a) <= (-sizes.get(b, 0), b) else (b, a)
            found[key] = Suggestion(keep, other, float(sims[r, c]))
    return sorted(found.values(), key=lambda s: (-s.score, s.a, s.b))
