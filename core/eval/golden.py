"""Offline golden-set generator: questions a person would ask about the facts a workspace's own chunks state.

From the documents alone (never from any question set) each chunk's sentences are turned into standalone questions
of varied forms (core/eval/golden_forms.py: who / when / where / how many / which / why / what is the default ...),
each naming its subject and asking for the fact rather than copying the sentence. Multi-hop questions come only from
real links (one chunk's answer is the entity another document is about: "When was the director of X born?"),
comparisons only from two items with the same attribute (two birth dates, two release years), and unanswerable
near-misses change one constraint (a surname, a year, an ordinal, the attribute) and are checked absent from every
chunk. Every question passes the well-formedness check (core/eval/golden_check.py) before it is kept; what was
dropped is counted by reason and reported with the set. Russian chunks get Russian questions.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Protocol, Sequence

from core.eval.golden_check import problem
from core.eval.golden_forms import Draft, code_drafts, english_drafts, russian_drafts
from core.eval.golden_ref import clean_markup, line_drafts, reference_drafts
from core.eval.golden_ru import russian_svo_drafts
from core.store.golden import GoldenItem, GoldRef
from core.text import EN_STOP, RU_STOP, sentence_spans
from core.types import Chunk, DocumentRow

GENERATOR = "offline-v2"
Progress = Callable[[int, int, str], None]

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_EXTRA_STOP = frozenset(
    "also been being but can could each had he her here him his i if into it's may might more most must no not "
    "now one only other our over same she should so some such than their them then there these they those "
    "through under up us very we well were what whose would you your about after again against all am any "
    "because before below between both during few further how just nor off once out own s t too until while "
    "why yes yet per via etc".split())
_RU_EXTRA = frozenset("это также является которые который которая которое весь всё свой своих".split())
STOP = EN_STOP | RU_STOP | _EXTRA_STOP | _RU_EXTRA
_CODEY = re.compile(r"[{};=<>]|^\s*(?:def|fn|func|class|struct|impl|pub|import|use|#include)\b", re.M)
_CODE_DEF = re.compile(r"^[ \t]*(?:(?:pub(?:\([\w:]+\))?|public|private|static|async|export|unsafe)\s+)*"
                       r"(fn|def|func|function|class|struct|enum|trait|interface)\s+([A-Za-z_]\w*)", re.M)


_GENERIC_NAMES = frozenset(("from new default main init run fmt drop clone hash next call get set len eq iter "
                            "from_str try_from into_iter poll read write flush close open reset clear size "
                            "deref index display debug setup teardown setUp tearDown into as_ref build apply "
                            "update handle process execute parse").split())
_CODE_REL = re.compile(r"\bimpl(?:<[^>]*>)?\s+(?P<impl>(?P<parent>[A-Z]\w+))(?:<[^>]*>)?\s+for\s+(?P<child>[A-Z]\w+)"
                       r"|\bclass\s+(?P<child2>[A-Z]\w+)(?:<[^>]*>)?\s*(?:\(|\s+extends\s+)(?P<parent2>[A-Z]\w+)")
_CODE_RET = re.compile(r"\b(?:fn|def)\s+(?P<name>[a-z_]\w*)\s*(?:<[^>]*>)?\([^)]{0,200}\)\s*->\s*"
                       r"(?P<ret>[A-Z][\w:<>, &\[\]]{1,40}?)\s*(?:[{:]|where\b)")


@dataclass(frozen=True)
class Passage:
    """One chunk with what the generator needs about its document."""

    chunk: Chunk
    doc: str  # the document's name, as gold names it
    title: str


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w.casefold() not in STOP and len(w) > 2 and not w.isdigit()]


def overlap(question: str, sentence: str) -> float:
    """Share of the gold sentence's content words (case-folded) that the question repeats: 0 copies nothing."""
    s = {w.casefold() for w in content_words(sentence)}
    q = {w.casefold() for w in content_words(question)}
    return len(s & q) / len(s) if s else 0.0


def _short_title(p: Passage) -> str:
    t = " ".join(re.sub(r"\s*\([^)]*\)", "", p.title or p.doc).split())  # "X (disambiguation)" -> "X"
    return t if 0 < len(t.split()) <= 7 and len(t) <= 60 else ""


def _lines(text: str) -> str:
    """A line that ends without punctuation before a capitalised line is a title or heading: its own paragraph
    (else a passage given as 'Title\nBody' would glue the title onto the first sentence)."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        nxt = lines[i + 1].lstrip() if i + 1 < len(lines) else ""
        ends = line.rstrip()[-1:] in (".", "!", "?", ":", ";", ",")
        out.append(line + ("\n\n" if line.strip() and nxt[:1].isupper() and not ends else "\n"))
    return "".join(out)


def _sentences(text: str) -> list[str]:
    out = []
    text = _lines(text)
    for s, e in sentence_spans(text):
        # a sentence may open with code ('`load()` returns ...'), which the splitter does not take for a capital
        for part in re.split(r"(?<=[.!?])\s+(?=`)", " ".join(text[s:e].split())):
            sent = re.sub(r"^(?:[-*+•]|\d{1,2}[.)])\s+", "", part)  # a list item's marker
            if 5 <= len(sent.split()) <= 60 and not sent.startswith("#") and sum(c.isalpha() for c in sent) > 20:
                out.append(sent)
    return out


# -- the corpus as the generator searches it -------------------------------------------------------------------------
class CorpusIndex:
    """Which chunks hold a word (case-folded) and the whole text, to check a near-miss really is absent. A chunk
    holds its document's title too: a question that names the title and a word asks about that document."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.postings: dict[str, set[int]] = {}
        self.texts = [f"{p.title}\n{p.chunk.text}".casefold() for p in passages]
        for i, t in enumerate(self.texts):
            for w in set(words(t)):
                self.postings.setdefault(w, set()).add(i)
        self.n = max(1, len(passages))

    def specific(self, w: str) -> bool:
        """A term few chunks use (at most 1% of them, or 3): names something a reader can look up."""
        return len(self.postings.get(w.casefold(), ())) <= max(3, self.n // 100)

    def idf(self, w: str) -> float:
        return math.log(1 + self.n / (1 + len(self.postings.get(w.casefold(), ()))))

    def together(self, terms: Iterable[str]) -> set[int]:
        """Chunks that hold every word of every term."""
        out: set[int] | None = None
        for t in terms:
            for w in words(t.casefold()):
                hit = self.postings.get(w, set())
                out = set(hit) if out is None else out & hit
        return out or set()

    def count(self, phrase: str) -> int:
        """Chunks whose text holds the phrase (case-folded, spaces normalised)."""
        ph = " ".join(phrase.casefold().split())
        return sum(ph in " ".join(t.split()) for t in self.texts) if len(ph) > 20 else 0

    def contains(self, phrase: str) -> bool:
        ph = phrase.casefold()
        return any(ph in t for t in self.texts)



def item_key(*parts: str) -> str:
    return "g" + hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:10]


# -- drafts: the questions each chunk supports ------------------------------------------------------------------------
def drafts_of(p: Passage) -> list[Draft]:
    """Every question form the chunk's sentences support (core/eval/golden_forms.py); source code is asked about
    through its doc comments and the things it defines."""
    text = p.chunk.text
    examples = _EXAMPLE.search(text)
    if len(_CODEY.findall(text)) >= 4 and not examples:
        out = code_drafts(text)
        for m in _CODE_DEF.finditer(text):
            kind = {"fn": "function", "def": "function", "func": "function"}.get(m.group(1), m.group(1))
            name = m.group(2)
            if len(name) > 3 and not name.startswith("__") and name.lower() not in _GENERIC_NAMES \
                    and not name.lower().startswith("test"):
                out.append(Draft(f"What does the {kind} `{{S}}` do?", name, m.group(0).strip(), "code",
                                 "code-def", sentence=m.group(0).strip()))
        for m in _CODE_REL.finditer(text):
            child, parent = m.group("child") or m.group("child2"), m.group("parent") or m.group("parent2")
            if child and parent and child != parent and parent.lower() not in _GENERIC_NAMES:
                how = "implement" if m.group("impl") else "extend"
                out.append(Draft(f"Which {'trait' if m.group('impl') else 'class'} does `{{S}}` {how}?", child,
                                 parent, "which", f"code-{how}", sentence=m.group(0).strip()))
        for m in _CODE_RET.finditer(text):
            if len(m.group("name")) > 3 and not m.group("name").startswith("__") and \
                    m.group("name").lower() not in _GENERIC_NAMES:
                out.append(Draft("What does the function `{S}` return?", m.group("name"), m.group("ret").strip(),
                                 "what", "code-return", sentence=m.group(0).strip()))
        return out
    title = _short_title(p)
    lang = "ru" if _ru(p) else "en"
    prose = clean_markup(_EXAMPLE_BLOCK.sub("\n", text)) if examples else clean_markup(text)
    out = line_drafts(prose, lang)
    names = proper_names(prose)
    for sent in _sentences(prose):
        out += reference_drafts(sent, title, lang)
        if lang == "ru":
            out += russian_drafts(sent, title)
            for clause in _RU_CLAUSES.split(sent):  # 'Ратцель считал ..., а Маккиндер поддерживал ...': two facts
                out += [replace(d, sentence=sent) for d in russian_svo_drafts(clause, names)]
        else:
            out += english_drafts(sent, title, names=names)
    return out


_RU_CLAUSES = re.compile(r";\s+|,\s+(?:а|но|однако|и|тогда как|в то время как)\s+(?=[А-ЯЁ])")


# A chunk of prose that shows code (a README's fenced or doctest example) is asked about through its prose: the
# example's helper functions are no API a reader looks up.
_EXAMPLE = re.compile(r"^\s*(?:```|~~~|\.\. code|>>> |\$ )|::[ \t]*$", re.M)
_EXAMPLE_BLOCK = re.compile(r"^\s*(?:```|~~~)[^\n]*\n.*?(?:^\s*(?:```|~~~)[^\n]*$|\Z)|^\s*(?:>>>|\.\.\.|\$) [^\n]*$"
                            r"|(?:^\.\. code[^\n]*|::[ \t]*)\n(?:[ \t]*\n|[ \t]+[^\n]*\n)*", re.M | re.S)


def proper_names(text: str) -> frozenset[str]:
    """Capitalised words the text uses mid-sentence and never in lower case: names ('Aristotle'), not a sentence's
    first word ('Eventually')."""
    mid = {m.group(1) for m in re.finditer(r"(?:(?<=[\w,;)] )|(?<=\w-))([A-ZА-ЯЁ][a-zа-яё]{2,})\b", text)}
    low = {w for w in re.findall(r"\b[a-zа-яё]{3,}\b", text)}
    return frozenset(w for w in mid if w.lower() not in low)


def _ru(p: Passage) -> bool:
    return p.chunk.lang == "ru"


_VAGUE_ANSWER = re.compile(r"^(?:and|or|but|this|that|these|those|it|they|them|such|which|who)\b|^(?:он|она|оно|они|"
                           r"это|этот|эта|эти|эту|этого|этой|этим|их|его|её|ее|им|ему|ей|и|а|но|собой)(?![а-яё])",
                           re.I)


def _check(q: str, d: Draft, p: Passage, *, answerable: bool = True, index: "CorpusIndex | None" = None) -> str | None:
    if answerable and _VAGUE_ANSWER.match(d.answer.strip(" \"'«»“”")):
        return "its answer is a pronoun or a fragment"
    if answerable and q.endswith(" to?") and re.match(r"^[a-z]+\b(?<!the)(?<!a)(?<!an)", d.answer) and \
            not re.match(r"^(?:the|a|an|its|their|his|her|this|these|those|all|both|each|some|many|most)\b", d.answer):
        return "its answer is a fragment"  # 'What is X estimated to?' -> 'affect 130-180 million people'

    return problem(q, lang="ru" if _ru(p) else "en", answer=d.answer, evidence=d.sentence, content=content_words,
                   answerable=answerable, specific=index.specific if index is not None else None)


@dataclass(frozen=True)
class Drafted:
    passage: Passage
    draft: Draft


def _ref(x: Drafted) -> GoldRef:
    return GoldRef(x.passage.doc, x.passage.chunk.chunk_id, x.draft.sentence)


def single_item(x: Drafted) -> GoldenItem:
    d, p = x.draft, x.passage
    q = d.query
    return GoldenItem(item_key(q, p.chunk.chunk_id), q, "exact-id" if d.form == "code" else "factoid", True,
                      d.answer, (_ref(x),), GENERATOR,
                      meta={"fact": d.form, "attr": d.attr, "subject": d.subject, "lang": p.chunk.lang,
                            "overlap": round(overlap(q, d.sentence), 3)})


# Attributes a multi-hop question can ask of the entity another chunk names, and comparisons of two items.
_HOP = ("born", "died", "nationality", "birthplace", "occupation", "year", "location")
_COMPARE = {"born": ("Who was born first, {a} or {b}?", "first"),
            "died": ("Who died first, {a} or {b}?", "first"),
            "year": ("Which came out first, {a} or {b}?", "first"),
            "nationality": ("Are {a} and {b} of the same nationality?", "same"),
            "country": ("Are {a} and {b} from the same country?", "same"),
            "directed": ("Do {a} and {b} have the same director?", "same")}


def _year(s: str) -> int | None:
    m = re.search(r"\b(\d{3,4})\b", s)
    return int(m.group(1)) if m else None


def _bridges(pool: Sequence[Drafted], n: int, rng: random.Random, dropped: Counter[str]) -> list[GoldenItem]:
    """A names entity E in its answer (the director of X is E); another document's chunk is about E (B's subject
    is E): 'When was the director of X born?' needs both."""
    about: dict[str, list[Drafted]] = {}
    for x in pool:
        if x.draft.attr in _HOP:
            about.setdefault(x.draft.subject.casefold(), []).append(x)
    out: list[GoldenItem] = []
    seen: set[str] = set()
    for a in rng.sample(list(pool), len(pool)):
        if len(out) >= n:
            break
        if not a.draft.role:
            continue
        targets = [b for b in about.get(a.draft.answer.casefold(), ()) if b.passage.doc != a.passage.doc]
        if not targets:
            continue
        b = rng.choice(targets)
        q = b.draft.template.format(S=a.draft.role.format(S=a.draft.subject))
        if q in seen:
            continue
        why = problem(q, lang=a.passage.chunk.lang, answer=b.draft.answer, content=content_words)
        if why:
            dropped[f"multi-hop: {why}"] += 1
            continue
        seen.add(q)
        out.append(GoldenItem(item_key(q, a.passage.chunk.chunk_id, b.passage.chunk.chunk_id), q, "multi-hop", True,
                              f"{a.draft.answer}: {b.draft.answer}", (_ref(a), _ref(b)), GENERATOR,
                              meta={"fact": f"bridge:{a.draft.attr}>{b.draft.attr}", "entity": a.draft.answer,
                                    "lang": a.passage.chunk.lang,
                                    "overlap": round(overlap(q, a.draft.sentence + " " + b.draft.sentence), 3)}))
    return out


def _comparisons(pool: Sequence[Drafted], n: int, rng: random.Random, dropped: Counter[str]) -> list[GoldenItem]:
    """Two items with the same attribute (two birth dates, two release years, two directors): which came first,
    or whether they share it."""
    by_attr: dict[str, list[Drafted]] = {}
    for x in pool:
        if x.draft.attr in _COMPARE:
            by_attr.setdefault(x.draft.attr, []).append(x)
    keys = sorted(k for k, v in by_attr.items() if len({x.passage.doc for x in v}) >= 2)
    out: list[GoldenItem] = []
    seen: set[frozenset[str]] = set()
    tries = 0
    while keys and len(out) < n and tries < 20 * n:
        tries += 1
        attr = rng.choice(keys)
        a, b = rng.sample(by_attr[attr], 2)
        pair = frozenset((a.draft.subject.casefold(), b.draft.subject.casefold()))
        if a.passage.doc == b.passage.doc or len(pair) < 2 or pair in seen or a.passage.chunk.lang != \
                b.passage.chunk.lang:
            continue
        template, how = _COMPARE[attr]
        if how == "first":
            ya, yb = _year(a.draft.answer), _year(b.draft.answer)
            if ya is None or yb is None or ya == yb:
                continue
            answer = a.draft.subject if ya < yb else b.draft.subject
        else:
            answer = "yes" if a.draft.answer.casefold() == b.draft.answer.casefold() else "no"
        q = template.format(a=a.draft.subject, b=b.draft.subject)
        why = problem(q, lang=a.passage.chunk.lang, content=None)
        if why:
            dropped[f"comparison: {why}"] += 1
            continue
        seen.add(pair)
        out.append(GoldenItem(item_key(q, a.passage.chunk.chunk_id, b.passage.chunk.chunk_id), q, "comparison", True,
                              f"{answer} ({a.draft.subject}: {a.draft.answer}; {b.draft.subject}: {b.draft.answer})",
                              (_ref(a), _ref(b)), GENERATOR,
                              meta={"fact": f"comparison:{attr}", "lang": a.passage.chunk.lang,
                                    "overlap": round(overlap(q, a.draft.sentence + " " + b.draft.sentence), 3)}))
    return out


_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]


def near_miss(x: Drafted, index: CorpusIndex, people: Sequence[str], known: set[tuple[str, str]],
              rng: random.Random, *, names: Sequence[str] = ()) -> tuple[str, str] | None:
    """(question, what changed): x's question with one constraint changed — the subject's surname for another
    person's, a year, an ordinal, or the attribute (a death date of someone the corpus gives only a birth for) —
    and the result checked absent from every chunk; None when no change passes."""
    d = x.draft
    q = d.query
    subj_words = d.subject.split()
    if d.attr == "born" and (d.subject.casefold(), "died") not in known and re.search(r"\bborn\b", d.sentence) \
            and not index.together([d.subject, "died"]) and not index.together([d.subject, "death"]):
        return "When did {S} die?".format(S=d.subject), "attribute born -> died"
    years = re.findall(r"\b(?:1[5-9]|20)\d{2}\b", q)
    if years:
        for delta in rng.sample([-7, -5, -3, 3, 5, 7, 11], 7):
            alt = str(int(years[0]) + delta)
            if not index.contains(alt):
                return q.replace(years[0], alt, 1), f"year {years[0]} -> {alt}"
    for i, o in enumerate(_ORDINALS):
        if re.search(rf"\b{o}\b", q):
            for alt in rng.sample(_ORDINALS, len(_ORDINALS)):
                if alt != o and not index.together([d.subject, alt]):
                    return re.sub(rf"\b{o}\b", alt, q, count=1), f"ordinal {o} -> {alt}"
    # a person's name with its surname swapped for another person's: a plausible name the corpus never mentions
    if d.subject in people and 2 <= len(subj_words) <= 4 and all(w[:1].isupper() and w.isalpha()
                                                                  for w in subj_words) and d.subject in q:
        for other in rng.sample(list(people), min(30, len(people))):
            last = other.split()[-1]
            if last.casefold() in (w.casefold() for w in subj_words):
                continue
            new = " ".join(subj_words[:-1] + [last])
            if not index.contains(new.casefold()) and not index.together([*subj_words[:-1], last]):
                return q.replace(d.subject, new, 1), f"subject {d.subject} -> {new}"
    # a name the question uses swapped for another name of the same kind the corpus uses (a full name for a full
    # name, a nationality for a nationality; a Russian one keeping its last letter, so its case ending still fits),
    # checked absent beside the question's two rarest other words
    for m in rng.sample(list(_RUN.finditer(q)), len(list(_RUN.finditer(q)))):
        run = m.group(1)
        kind = _name_kind(run)
        if not kind:
            continue
        pool = [n for n in names if _name_kind(n) == kind and n[-1] == run[-1] and n.split()[0] != run.split()[0]
                and n.split()[-1] != run.split()[-1]]
        rest = sorted((w for w in content_words(q) if w.casefold() not in run.casefold()),
                      key=lambda w: -index.idf(w))[:2]
        for alt in rng.sample(pool, min(20, len(pool))):
            if rest and not index.together([alt, *rest]) and alt.casefold() not in q.casefold():
                return q[:m.start()] + alt + q[m.end():], f"name {run} -> {alt}"
    return None


_RUN = re.compile(r"(?<= )([A-ZА-ЯЁ][^\W\d_]+(?: [A-ZА-ЯЁ][^\W\d_]+){0,3})(?=[ ?,'’])")


def _name_kind(run: str) -> str:
    """'person': two to three capitalised words ('Isaac Newton'); 'nationality': one adjective of nationality
    ('English'); '' for anything else (a one-word name's kind cannot be told: 'Hobson' or 'Britain')."""
    ws = run.split()
    if 2 <= len(ws) <= 3 and not any(w in _ORG_WORDS or _NATIONALITY.fullmatch(w) for w in ws) and \
            ws[0] not in _PLACE_LEAD and all(w[1:].islower() for w in ws) and \
            not (len(ws[0]) > 5 and re.search(r"(?:ed|ing|ic|al|ous|ive|ий|ый|ой|ая|яя|ое|ее|ую|юю)$", ws[0])):  # 'Dysregulated Wnt', 'PneuCarriage' are no names
        return "person"
    if len(ws) == 1 and _NATIONALITY.fullmatch(run):
        return "nationality"
    return ""


_NATIONALITY = re.compile(r"[A-Z][a-z]+(?:ish|ese|ian|ean)|French|Dutch|Czech|American|German|Mexican|Korean|African|Dominican|"
                          r"Moroccan|Cuban|Tibetan|Afghan|Roman|Anglican")
_PLACE_LEAD = frozenset("The New Old Middle Central North South East West Northern Southern Eastern Western Upper Lower Great Saint "
                        "St San Santa Fort Lake Mount Cape Port Royal Holy".split())


_ORG_WORDS = frozenset(("University College School Church Society Company Parliament Council Government Court Museum "
                        "Institute Association Bank Army Navy Union Empire Kingdom Republic State States City River "
                        "Island Party Act Treaty War League Committee Commission Assembly Front Theorem Conjecture "
                        "Law Sea Ocean Lake Mountains Valley Delta Gorge Club Group Station").split())


def name_runs(text: str) -> set[str]:
    """Runs of capitalised words the text uses mid-sentence ('Isaac Newton', 'French')."""
    return {m.group(1) for m in re.finditer(r"(?<=[\w,;)] )([A-ZА-ЯЁ][^\W\d_]+(?: [A-ZА-ЯЁ][^\W\d_]+){0,3})",
                                            text)}


@dataclass(frozen=True)
class Generated:
    """A generated set and what the well-formedness check dropped, by reason."""

    items: list[GoldenItem]
    dropped: dict[str, int]


@dataclass(frozen=True)
class Mix:
    """Shares of the set by question type (the rest are single-fact questions)."""

    multi_hop: float = 0.15
    comparison: float = 0.10
    unanswerable: float = 0.15
    definitions: float = 0.10  # at most this share of the single-fact questions ask "What is X?"


def generate_set(passages: Sequence[Passage], n: int, *, seed: int = 0, mix: Mix = Mix(),
                 progress: Progress | None = None) -> Generated:
    """Up to `n` items from the passages alone; documents are visited in turn so a long one does not fill the
    set, one question per chunk, the question forms kept varied (the least used form first)."""
    rng = random.Random(seed)
    index = CorpusIndex(passages)
    dropped: Counter[str] = Counter()
    by_doc: dict[str, list[Passage]] = {}
    for p in passages:
        by_doc.setdefault(p.doc, []).append(p)
    for ps in by_doc.values():
        rng.shuffle(ps)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    want = max(3 * n, 60)  # chunks with a well-formed draft: singles, bridges and comparisons draw on them
    per_chunk: list[list[Drafted]] = []
    rounds = max((len(v) for v in by_doc.values()), default=0)
    for r in range(rounds):
        for d in docs:
            if r >= len(by_doc[d]) or len(per_chunk) >= want:
                continue
            p = by_doc[d][r]
            kept = []
            for dr in drafts_of(p):
                if index.count(dr.sentence) > 2:  # boilerplate many chunks repeat identifies no passage
                    dropped["boilerplate sentence"] += 1
                    continue
                why = _check(dr.query, dr, p, index=index)
                if why:
                    dropped[why] += 1
                    continue
                kept.append(Drafted(p, dr))
            if kept:
                per_chunk.append(kept)
        if progress:
            progress(min(len(per_chunk), want), want, f"questions from {len(per_chunk)} chunks")
        if len(per_chunk) >= want:
            break
    pool = [x for xs in per_chunk for x in xs]
    n_multi, n_cmp, n_un = (int(round(n * s)) for s in (mix.multi_hop, mix.comparison, mix.unanswerable))
    multi = _bridges(pool, n_multi, rng, dropped)
    cmps = _comparisons(pool, n_cmp, rng, dropped)
    n_single = max(0, n - len(multi) - len(cmps) - n_un)
    used: Counter[str] = Counter()
    chosen: list[Drafted] = []
    max_def = max(1, int(mix.definitions * n_single))
    taken: Counter[tuple[str, str]] = Counter()  # (chunk, sentence): at most two questions per sentence
    answered: set[tuple[str, str, str]] = set()
    asked: set[str] = set()  # one question asked once, whichever chunk it came from
    order = rng.sample(per_chunk, len(per_chunk))
    for _ in range(max((len(xs) for xs in per_chunk), default=0)):  # a second round only when chunks run short
        for xs in order:
            if len(chosen) >= n_single:
                break
            xs = [x for x in xs if taken[(x.passage.chunk.chunk_id, x.draft.sentence)] < 2
                  and (x.passage.chunk.chunk_id, x.draft.sentence, x.draft.answer) not in answered
                  and x.draft.query.casefold() not in asked and (x.draft.form != "definition" or used["definition"] < max_def)]
            if not xs:
                continue
            # a sentence's second question (another answer) only once every sentence of the chunk has one
            x = min(xs, key=lambda y: (taken[(y.passage.chunk.chunk_id, y.draft.sentence)], used[y.draft.form],
                                       rng.random()))
            used[x.draft.form] += 1
            taken[(x.passage.chunk.chunk_id, x.draft.sentence)] += 1
            answered.add((x.passage.chunk.chunk_id, x.draft.sentence, x.draft.answer))
            asked.add(x.draft.query.casefold())
            chosen.append(x)
    singles = [single_item(x) for x in chosen]
    people = sorted({x.draft.subject for x in pool if x.draft.attr in ("born", "died", "nationality", "occupation")})
    all_names = sorted(set().union(*(name_runs(p.chunk.text) for p in passages)))
    known = {(x.draft.subject.casefold(), x.draft.attr) for x in pool}
    misses: list[GoldenItem] = []
    seen_q = {it.query for it in singles + multi + cmps}
    for x, it in rng.sample(list(zip(chosen, singles)), len(singles)):
        if len(misses) >= n_un:
            break
        got = near_miss(x, index, people, known, rng, names=all_names)
        if got is None or got[0] in seen_q:
            continue
        q, swap = got
        why = problem(q, lang=x.passage.chunk.lang, answerable=False)
        if why:
            dropped[f"near-miss: {why}"] += 1
            continue
        seen_q.add(q)
        misses.append(replace(it, item_id=item_key("nm", q), query=q, qtype="unanswerable", answerable=False,
                              answer="", gold=(), meta={**dict(it.meta), "near_miss_of": it.item_id, "swap": swap}))
    items, ids = [], set()
    for it in singles + multi + cmps + misses:
        if it.item_id not in ids:
            ids.add(it.item_id)
            items.append(it)
    if progress:
        progress(want, want, f"{len(items)} items")
    return Generated(items[:n], dict(dropped))


def generate(passages: Sequence[Passage], n: int, *, seed: int = 0, mix: Mix = Mix(),
             progress: Progress | None = None) -> list[GoldenItem]:
    """The items of generate_set (what it dropped left out)."""
    return generate_set(passages, n, seed=seed, mix=mix, progress=progress).items


def counts_by_type(items: Sequence[GoldenItem]) -> dict[str, int]:
    return dict(Counter(it.qtype for it in items))


def mean_overlap(items: Sequence[GoldenItem]) -> float | None:
    vals = [float(it.meta["overlap"]) for it in items if "overlap" in it.meta and it.answerable]
    return round(sum(vals) / len(vals), 3) if vals else None


# -- over a workspace ------------------------------------------------------------------------------------------------
class CorpusReader(Protocol):
    """What the generator reads of the store's corpus repository."""

    def documents(self, workspace: str = ...) -> list[DocumentRow]: ...

    def chunks(self, workspace: str = ..., doc_id: str | None = None) -> list[Chunk]: ...


class GoldenWriter(Protocol):
    """What the generator writes through (core/store/golden.py's Golden)."""

    def put_set(self, workspace: str, name: str, items: Sequence[GoldenItem], *, generator: str = "",
                corpus_version: int = 0, notes: str = "") -> int: ...


def passages_from(corpus: CorpusReader, workspace: str) -> list[Passage]:
    docs = {d.doc_id: d for d in corpus.documents(workspace)}
    return [Passage(c, docs[c.doc_id].name, docs[c.doc_id].title or docs[c.doc_id].name)
            for c in corpus.chunks(workspace) if c.doc_id in docs]


def default_name(corpus_version: int, n: int) -> str:
    return f"generated-v{corpus_version}-n{n}"


@dataclass(frozen=True)
class GenerateReport:
    name: str
    workspace: str
    items: int
    by_type: dict[str, int]
    mean_overlap: float | None
    generator: str
    usd: float = 0.0
    notes: tuple[str, ...] = ()
    dropped: dict[str, int] = field(default_factory=dict)  # questions the well-formedness check removed, by reason

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "workspace": self.workspace, "items": self.items, "by_type": self.by_type,
                "mean_overlap": self.mean_overlap, "generator": self.generator, "usd": round(self.usd, 6),
                "notes": list(self.notes), "dropped": self.dropped}


def generation_notes(dropped: dict[str, int], **more: object) -> str:
    """A generated set's notes: the generator's report as JSON (core.eval.datasets reads it back for validity)."""
    return json.dumps({**more, "dropped": dropped}, ensure_ascii=False, sort_keys=True)


def generate_into(golden: GoldenWriter, corpus: CorpusReader, workspace: str, n: int, *, name: str | None = None,
                  seed: int = 0, corpus_version: int = 0, progress: Progress | None = None) -> GenerateReport:
    """Generate offline from the workspace's chunks and store the set (replacing one of the same name)."""
    passages = passages_from(corpus, workspace)
    if not passages:
        raise ValueError(f"workspace {workspace!r} holds no chunks: ingest documents first")
    got = generate_set(passages, n, seed=seed, progress=progress)
    name = name or default_name(corpus_version, n)
    golden.put_set(workspace, name, got.items, generator=GENERATOR, corpus_version=corpus_version,
                   notes=generation_notes(got.dropped, writer="offline", seed=seed))
    dropped = sum(got.dropped.values())
    notes = (f"dropped {dropped} draft question(s) that failed the well-formedness check: "
             + ", ".join(f"{k} {v}" for k, v in sorted(got.dropped.items(), key=lambda kv: -kv[1])),) if dropped \
        else ()
    return GenerateReport(name, workspace, len(got.items), counts_by_type(got.items), mean_overlap(got.items),
                          GENERATOR, notes=notes, dropped=got.dropped)
