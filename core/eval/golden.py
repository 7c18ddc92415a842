"""Offline golden-set generator: questions about the facts a workspace's own chunks state, with gold passages.

From the documents alone (never from any question set) it picks sentences that carry a fact (a definition, a
number, a date, a name, an identifier) and asks for that fact with a wh-word in the answer slot and only a few
anchor words of the sentence, the document's title as context; the rest of the sentence is dropped, so the
question does not copy its gold sentence (`overlap` measures how much it does). It adds multi-hop bridge
questions (a name one chunk mentions is what another document is about), comparisons (two documents give a
figure for the same thing) and unanswerable near-misses (a question with one anchor, year or subject swapped for
one the corpus never states together with the rest, checked by searching every chunk). Russian chunks get
Russian questions. Every item keeps its type, gold chunk(s), gold span and the generator that wrote it.
"""
from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Protocol, Sequence

from core.store.golden import GoldenItem, GoldRef
from core.text import EN_STOP, RU_STOP, sentence_spans
from core.types import Chunk, DocumentRow

GENERATOR = "offline-v1"
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
_PRONOUN_SUBJECT = frozenset("it this that these those they he she there we i you such which its его она он они "
                             "это этот эта эти там".split())

_MONTHS_EN = "january february march april may june july august september october november december"
_MONTHS_RU = ("январ феврал март апрел мая май июн июл август сентябр октябр ноябр декабр")
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}\s+(?:" + "|".join(m[:3] + r"[a-z]*" for m in _MONTHS_EN.split()) + r")\.?\s+\d{4}\b"
    r"|\b(?:" + "|".join(m[:3] + r"[a-z]*" for m in _MONTHS_EN.split()) + r")\.?\s+\d{1,2},?\s+\d{4}\b"
    r"|\b\d{1,2}\s+(?:" + "|".join(_MONTHS_RU.split()) + r")[а-я]*\s+\d{4}(?:\s*г(?:ода|\.)?)?"
    r"|\b(?:1[5-9]|20)\d{2}\b", re.IGNORECASE)
_UNITS = (r"%|percent|per cent|million|billion|thousand|bn|m|km|kg|g|mm|cm|ms|s|sec|seconds|minutes|min|hours|h|"
          r"days|weeks|months|years|people|employees|customers|users|GB|MB|TB|kB|Mbps|Gbps|GHz|MHz|W|kW|MW|V|A|°C|"
          r"mg|ml|l|nm|µm|patients|participants|cases|times|процент\w*|млн|млрд|тыс\.?|км|кг|мм|м|мс|с|ч|час\w*|"
          r"дн\w*|недел\w*|месяц\w*|лет|год\w*|человек|сотрудник\w*|клиент\w*|°С|В|Вт|кВт|Н·м")
_NUMBER = re.compile(r"(?<![\w.-])(?:[€$£₽]\s?)?\d+(?:[.,]\d+)*(?![\w.-]*[A-Za-zА-Яа-я_]\d)"
                     r"(?:\s?(?:" + _UNITS + r")(?![\w]))?(?:\s(?:million|billion|млн|млрд))?")
_IDENT = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z]+[_.][A-Za-z0-9_.]+|[a-z]+[A-Z][A-Za-z0-9]+|[A-Z]{2,}[-_]?\d+[\w-]*)\b")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-ZА-ЯЁ][\w'’-]+(?:\s+(?:of|de|van|von|da|the)?\s*[A-ZА-ЯЁ][\w'’-]+){0,3})")
_DEF_EN = re.compile(r"^(?P<subj>(?:The\s+|An?\s+)?[\w\"“”'’().-]+(?:\s+[\w\"“”'’().-]+){0,4}?)\s*(?:\([^)]{0,40}\))?\s+"
                     r"(?P<verb>is|are|was|were|refers to|means|describes)\s+(?P<pred>(?:a|an|the|one)\s+.{8,})$")
_DEF_RU = re.compile(r"^(?P<subj>[\w\"«»“”.-]+(?:\s+[\w\"«»“”.-]+){0,4}?)\s+(?:—|–|-)\s+(?:это\s+)?(?P<pred>.{8,})$"
                     r"|^(?P<subj2>[\w\"«»“”.-]+(?:\s+[\w\"«»“”.-]+){0,4}?)\s+(?:является|представляет собой)\s+"
                     r"(?P<pred2>.{8,})$")
_CODEY = re.compile(r"[{};=<>]|^\s*(?:def|fn|func|class|struct|impl|pub|import|use|#include)\b", re.M)
_CODE_DEF = re.compile(r"^[ \t]*(?:(?:pub(?:\([\w:]+\))?|public|private|static|async|export|unsafe)\s+)*"
                       r"(fn|def|func|function|class|struct|enum|trait|interface)\s+([A-Za-z_]\w*)", re.M)


@dataclass(frozen=True)
class Passage:
    """One chunk with what the generator needs about its document."""

    chunk: Chunk
    doc: str  # the document's name, as gold names it
    title: str


@dataclass(frozen=True)
class Fact:
    passage: Passage
    sentence: str
    kind: str  # definition | number | date | name | identifier | code
    answer: str
    subject: str = ""  # definitions and code: what the sentence is about
    verb: str = "is"


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w.casefold() not in STOP and len(w) > 2 and not w.isdigit()]


def overlap(question: str, sentence: str) -> float:
    """Share of the gold sentence's content words (case-folded) that the question repeats: 0 copies nothing."""
    s = {w.casefold() for w in content_words(sentence)}
    q = {w.casefold() for w in content_words(question)}
    return len(s & q) / len(s) if s else 0.0


def _ru(p: Passage) -> bool:
    return p.chunk.lang == "ru"


def _short_title(p: Passage) -> str:
    t = " ".join((p.title or p.doc).split())
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
        sent = " ".join(text[s:e].split())
        if 5 <= len(sent.split()) <= 60 and not sent.startswith("#") and sum(c.isalpha() for c in sent) > 20:
            out.append(sent)
    return out


def find_facts(p: Passage) -> list[Fact]:
    """Every fact-bearing sentence of a chunk, one Fact per kind found (definition first)."""
    text = p.chunk.text
    if len(_CODEY.findall(text)) >= 4:  # source code: ask about what it defines
        return [Fact(p, m.group(0).strip(), "code", m.group(2), m.group(2), m.group(1))
                for m in _CODE_DEF.finditer(text) if len(m.group(2)) > 3][:3]
    facts: list[Fact] = []
    for sent in _sentences(text):
        core = sent.rstrip(".!?;: ")
        m = (_DEF_RU if _ru(p) else _DEF_EN).match(core)
        if m:
            subj = (m.group("subj") or m.groupdict().get("subj2") or "").strip(" \"“”«»")
            pred = (m.group("pred") or m.groupdict().get("pred2") or "").strip()
            first = subj.split()[0].casefold() if subj else ""
            if subj and pred and first not in _PRONOUN_SUBJECT and len(content_words(subj)) >= 1:
                verb = m.groupdict().get("verb") or "is"
                facts.append(Fact(p, sent, "definition", pred, subj, verb))
        d = _DATE.search(sent)
        if d:
            facts.append(Fact(p, sent, "date", d.group(0)))
        for n in _NUMBER.finditer(sent):
            if d and n.start() < d.end() and n.end() > d.start():
                continue
            num = n.group(0).strip()
            if (len(num) >= 2 or any(c.isalpha() or c in "%€$£₽" for c in num)) and not re.fullmatch(r"\d+\.\d+", num):
                facts.append(Fact(p, sent, "number", num))
                break
        i = _IDENT.search(sent)
        if i:
            facts.append(Fact(p, sent, "identifier", (i.group(1) or i.group(2)).strip()))
        title = (p.title or p.doc).casefold()
        first = next((i for i, ch in enumerate(sent) if ch.isalpha()), 0)  # "* Unless ..." starts at 'U'
        for nm in _NAME.finditer(sent):
            name = nm.group(1).strip()
            if nm.start() > first and name.casefold() not in title and name.split()[0].casefold() not in STOP \
                    and len(name) > 3:
                facts.append(Fact(p, sent, "name", name))
                break
    return facts


# -- wording ---------------------------------------------------------------------------------------------------------
_WH_EN = {"number": "What figure", "date": "What date", "name": "Which name", "identifier": "Which identifier"}
_WH_RU = {"number": "Какое значение", "date": "Какую дату", "name": "Какое имя", "identifier": "Какой идентификатор"}
_GIVE_RU = {"number": "указывает", "date": "называет", "name": "называет", "identifier": "указывает"}


def _anchors(f: Fact, rng: random.Random, k: int = 3) -> list[str]:
    """The k content words of the sentence nearest the answer (not the answer's, not the title's), in sentence
    order: the words a person would use to point at that fact, not a random bag."""
    banned = {w.casefold() for w in words(f.answer)} | {w.casefold() for w in words(_short_title(f.passage))}
    ws = words(f.sentence)
    ans = words(f.answer)
    at = next((i for i in range(len(ws)) if ans and ws[i : i + len(ans)] == ans), len(ws) // 2)
    seen: set[str] = set()
    cands = []
    for i, w in enumerate(ws):
        key = w.casefold()
        if key in STOP or key in banned or key in seen or len(w) <= 2 or any(c.isdigit() for c in w):
            continue
        seen.add(key)
        cands.append((abs(i - at), rng.random(), i, w))
    return [w for _, _, _, w in sorted(sorted(cands)[:k], key=lambda t: t[2])]


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s[1:2].isupper() else s


def _split_ident(name: str) -> str:
    parts = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", name)
    return " ".join(p.lower() for p in parts) or name


_CLAUSE = re.compile(r"[,;:()]|\s[-–—]\s")
_WH_SLOT_EN = {"number": "how much", "date": "when", "name": "who or what", "identifier": "which identifier"}
_WH_SLOT_RU = {"number": "сколько", "date": "когда", "name": "кто или что", "identifier": "какой идентификатор"}


def cloze(sentence: str, answer: str, slot: str, *, reach: int = 6) -> str:
    """The clause around the answer with the answer replaced by `slot` and every word more than `reach` words away
    dropped: the question points at the fact with its nearest words only."""
    i = sentence.find(answer)
    if i < 0:
        return ""
    before, after = sentence[:i], sentence[i + len(answer):]
    cut_b = [m.end() for m in _CLAUSE.finditer(before)]
    before = before[cut_b[-1]:] if cut_b else before
    m = _CLAUSE.search(after)
    after = after[: m.start()] if m else after
    bw, aw = before.split(), after.rstrip(" .!?").split()
    bw, aw = bw[-reach:], aw[:reach]
    while bw and bw[0].casefold() in STOP | {"and", "but", "или", "и"}:
        bw = bw[1:]
    while aw and aw[-1].casefold() in STOP:
        aw = aw[:-1]
    if len(content_words(" ".join(bw + aw))) < 2:
        return ""
    return " ".join([*bw, slot, *aw])


def word_question(f: Fact, anchors: Sequence[str], title: str | None = None) -> str:
    """The question for one fact, from its kind, anchors and the title (None: the passage's short title)."""
    title = _short_title(f.passage) if title is None else title
    ru = _ru(f.passage)
    if f.kind == "definition":
        subj = _lower_first(f.subject) if f.subject.split()[0] in ("The", "A", "An") else f.subject
        # A subject with no name in it ("the output") needs its document to be one question, not many.
        generic = not any(w[:1].isupper() or any(c.isdigit() or c == "_" for c in w) for w in content_words(subj))
        if ru:
            return f"Что такое {subj}" + (f" в «{title}»?" if generic and title else "?")
        verb = {"are": "are", "were": "were", "was": "was"}.get(f.verb, "is")
        return f"What {verb} {subj}" + (f" in “{title}”?" if generic and title else "?")
    if f.kind == "code":
        what = _split_ident(f.subject)
        return (f"Что делает {f.verb} {what}?" if ru
                else f"What does the {f.verb} for {what} do" + (f" in {title}?" if title else "?"))
    slot = (_WH_SLOT_RU if ru else _WH_SLOT_EN)[f.kind]
    c = cloze(f.sentence, f.answer, slot)
    if c:
        c = c[:1].upper() + c[1:] if c.startswith(slot) else c
        names_subject = any(w[:1].isupper() for w in content_words(c.replace(slot, ""))[1:])
        where = "" if names_subject or not title else (f" (в «{title}»)" if ru else f" (in “{title}”)")
        return f"{c}{where}?"
    a = " ".join(anchors) or ("этого" if ru else "this")
    if any(w[:1].isupper() for w in anchors[1:]) or any(w[:1].isupper() and w.casefold() not in STOP for w in
                                                         anchors[:1]):
        title = ""  # the anchors name their subject: no need to point at the document
    if ru:
        where = f"«{title}»" if title else "документ"
        return f"{_WH_RU[f.kind]} {where} {_GIVE_RU[f.kind]} для: {a}?"
    where = f"“{title}”" if title else "the document"
    verb = "use" if f.kind == "identifier" else "give"
    return f"{_WH_EN[f.kind]} does {where} {verb} for the {a}?"


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


# -- item builders ---------------------------------------------------------------------------------------------------
def item_key(*parts: str) -> str:
    return "g" + hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:10]


def _ref(f: Fact) -> GoldRef:
    return GoldRef(f.passage.doc, f.passage.chunk.chunk_id, f.sentence)


def single_item(f: Fact, rng: random.Random) -> GoldenItem:
    anchors = _anchors(f, rng)
    q = word_question(f, anchors)
    if f.kind in ("definition", "code"):  # these ask by their subject, not by anchor words
        anchors = content_words(f.subject) if f.kind == "definition" else [f.subject]
    qtype = "exact-id" if f.kind == "identifier" else "factoid"
    answer = f.answer if f.kind != "code" else f.sentence
    return GoldenItem(item_key(q, f.passage.chunk.chunk_id), q, qtype, True, answer, (_ref(f),), GENERATOR,
                      meta={"fact": f.kind, "anchors": anchors, "overlap": round(overlap(q, f.sentence), 3),
                            "lang": f.passage.chunk.lang})


def _head(description: str, k: int = 4) -> str:
    """The head of a definition's predicate: 'the internal code name for a ...' -> 'internal code name'."""
    ws = description.split()
    if ws and ws[0].casefold() in ("a", "an", "the", "one"):
        ws = ws[1:]
    out = []
    for w in ws[:k]:
        if w.casefold() in ("for", "of", "that", "which", "who", "in", "on", "at", "with", "and", "by", "from", "to",
                            "для", "в", "на", "с", "и", "по", "от", "который", "которая", "которое") or \
                w.endswith((",", ";", ":")):
            if w.endswith((",", ";", ":")):
                out.append(w.rstrip(",;:"))
            break
        out.append(w)
    return " ".join(out)


def bridge_item(a: Fact, b: Fact, entity: str, rng: random.Random) -> GoldenItem:
    """a's sentence names `entity`; b defines it. The question is a's clause with the entity replaced by what b
    says it is ("... runs which internal code name?"): finding the answer needs a, knowing what it is needs b."""
    ru = _ru(a.passage)
    head = _head(b.answer) if b.kind == "definition" else ""
    slot = (f"какой {head}" if head else "кто или что") if ru else (f"which {head}" if head else "who or what")
    c = cloze(a.sentence, entity, slot)
    if not c:
        at = _short_title(a.passage) or a.passage.doc
        c = (f"{slot} упомянут в «{at}»" if ru else f"{slot} does “{at}” mention")
    q = (c[:1].upper() + c[1:]).rstrip(" ?") + "?"
    answer = f"{entity}: {b.answer}" if b.kind == "definition" else b.answer
    return GoldenItem(item_key(q, a.passage.chunk.chunk_id, b.passage.chunk.chunk_id), q, "multi-hop", True, answer,
                      (_ref(a), _ref(b)), GENERATOR,
                      meta={"fact": f"bridge:{b.kind}", "entity": entity, "lang": a.passage.chunk.lang,
                            "overlap": round(overlap(q, a.sentence + " " + b.sentence), 3)})


def _as_float(s: str) -> float | None:
    m = re.search(r"\d+(?:[.,]\d+)?", s.replace(",", "") if s.count(",") and "." in s else s)
    try:
        return float(m.group(0).replace(",", ".")) if m else None
    except ValueError:
        return None


def comparison_item(a: Fact, b: Fact, shared: str) -> GoldenItem:
    ta, tb = _short_title(a.passage) or a.passage.doc, _short_title(b.passage) or b.passage.doc
    ru = _ru(a.passage)
    ca, cb = cloze(a.sentence, a.answer, "…", reach=4), cloze(b.sentence, b.answer, "…", reach=4)
    if ca and cb and ca != cb:
        if a.kind == "date":
            q = f"Что было раньше: «{ca}» или «{cb}»?" if ru else f"Which came first: “{ca}” or “{cb}”?"
        else:
            q = f"Где больше: «{ca}» или «{cb}»?" if ru else f"Which is higher: “{ca}” or “{cb}”?"
    elif a.kind == "date":
        q = (f"Что раньше по дате ({shared}): «{ta}» или «{tb}»?" if ru
             else f"Which came first for the {shared}: “{ta}” or “{tb}”?")
    else:
        q = (f"Где значение «{shared}» больше: в «{ta}» или в «{tb}»?" if ru
             else f"Which is higher, the {shared} in “{ta}” or in “{tb}”?")
    va, vb = _as_float(a.answer), _as_float(b.answer)
    answer = f"{ta}: {a.answer}; {tb}: {b.answer}"
    if a.kind == "number" and va is not None and vb is not None and va != vb:
        answer = f"{ta if va > vb else tb} ({answer})"
    return GoldenItem(item_key(q, a.passage.chunk.chunk_id, b.passage.chunk.chunk_id), q, "comparison", True, answer,
                      (_ref(a), _ref(b)), GENERATOR,
                      meta={"fact": "comparison", "shared": shared, "lang": a.passage.chunk.lang,
                            "overlap": round(overlap(q, a.sentence + " " + b.sentence), 3)})


def near_miss(item: GoldenItem, f: Fact, index: CorpusIndex, vocab: Sequence[str],
              rng: random.Random) -> GoldenItem | None:
    """The same question with one year, subject word or anchor swapped so that the corpus never states the new
    combination (no chunk holds it); None when no swap passes that check."""
    q = item.query
    years = re.findall(r"\b(?:19|20)\d{2}\b", q)
    if years:
        y = years[0]
        for d in rng.sample(range(-9, 10), 19):
            alt = str(int(y) + d)
            if d and not index.contains(alt):
                return _nm(item, q.replace(y, alt, 1), f"year {y} -> {alt}")
    if f.kind in ("code", "identifier"):
        return None  # a swapped identifier reads as noise, not as a question someone would ask
    anchors = list(item.meta.get("anchors", ()))
    rest_terms = lambda drop: [a for a in anchors if a != drop] + [_short_title(f.passage)]  # noqa: E731
    # Only a name is swapped, for another name the corpus uses: a swapped common word makes nonsense.
    first = next((i for i, ch in enumerate(f.sentence) if ch.isalpha()), 0)
    mid = {w for nm in _NAME.finditer(f.sentence) if nm.start() > first for w in nm.group(1).split()}
    named = [a for a in anchors if a in mid and a.isalpha() and not q.startswith(a) and len(anchors) > 1]
    for target in rng.sample(named, len(named)):
        for cand in rng.sample(list(vocab), min(40, len(vocab))):
            if cand.casefold() == target.casefold() or cand.casefold() in q.casefold():
                continue
            if index.together([*rest_terms(target), cand]):
                continue  # some chunk holds the new combination: not a near-miss
            new = re.sub(rf"\b{re.escape(target)}\b", cand, q, count=1)
            if new != q:
                return _nm(item, new, f"{target} -> {cand}")
    return None


def _nm(item: GoldenItem, q: str, swap: str) -> GoldenItem:
    return replace(item, item_id=item_key("nm", q), query=q, qtype="unanswerable", answerable=False, answer="",
                   gold=(), meta={**dict(item.meta), "near_miss_of": item.item_id, "swap": swap})


# -- the whole set ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mix:
    """Shares of the set by question type (the rest are single-fact questions)."""

    multi_hop: float = 0.15
    comparison: float = 0.05
    unanswerable: float = 0.15


def generate(passages: Sequence[Passage], n: int, *, seed: int = 0, mix: Mix = Mix(),
             progress: Progress | None = None) -> list[GoldenItem]:
    """Up to `n` items: documents are visited in turn so a long document does not fill the set alone."""
    rng = random.Random(seed)
    index = CorpusIndex(passages)
    by_doc: dict[str, list[Passage]] = {}
    for p in passages:
        by_doc.setdefault(p.doc, []).append(p)
    for ps in by_doc.values():
        rng.shuffle(ps)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    n_multi, n_cmp, n_un = (int(round(n * s)) for s in (mix.multi_hop, mix.comparison, mix.unanswerable))
    # Facts: one chunk per document per round, until enough are found (bridges and comparisons draw on them).
    facts: list[Fact] = []
    with_facts: set[str] = set()
    want = max(2 * n, 40)  # chunks that state a fact
    rounds = max((len(v) for v in by_doc.values()), default=0)
    for r in range(rounds):
        for d in docs:
            if r < len(by_doc[d]) and len(with_facts) < want:
                p = by_doc[d][r]
                # A sentence many chunks repeat (a licence header, a footer) identifies no passage.
                found = [f for f in find_facts(p) if index.count(f.sentence) <= 2]
                if found:
                    with_facts.add(p.chunk.chunk_id)
                    facts.extend(found)
        if progress:
            progress(min(len(with_facts), want), want, f"facts in {len(with_facts)} chunks")
        if len(with_facts) >= want:
            break
    multi = _bridges(facts, n_multi, rng)
    cmps = _comparisons(facts, n_cmp, index, rng)
    n_single = max(0, n - len(multi) - len(cmps) - n_un)
    single_facts = _spread(facts, n_single, len(docs), rng)
    singles = [single_item(f, rng) for f in single_facts]
    # Near-misses of single-fact questions, worded the same way as the answerable ones; a shortfall is left short.
    vocab: dict[bool, list[str]] = {}  # names the corpus uses mid-sentence, by language
    for f in facts:
        first = next((i for i, ch in enumerate(f.sentence) if ch.isalpha()), 0)
        for nm in _NAME.finditer(f.sentence):
            for w in nm.group(1).split():
                if nm.start() > first and w.isalpha() and len(w) > 3 and w.casefold() not in STOP:
                    vocab.setdefault(f.passage.chunk.lang == "ru", []).append(w)
    vocab = {k: sorted(set(v)) for k, v in vocab.items()}
    misses: list[GoldenItem] = []
    for it, f in rng.sample(list(zip(singles, single_facts)), len(singles)):
        if len(misses) >= n_un:
            break
        nm_item = near_miss(it, f, index, vocab.get(_ru(f.passage), []), rng)
        if nm_item is not None and nm_item.query not in {m.query for m in misses}:
            misses.append(nm_item)
    items = singles + multi + cmps + misses
    if progress:
        progress(want, want, f"{len(items)} items")
    seen_ids: set[str] = set()
    out = []
    for it in items:
        if it.item_id not in seen_ids:
            seen_ids.add(it.item_id)
            out.append(it)
    return out[:n]


_KINDS = ("definition", "number", "date", "name", "identifier", "code")


def _spread(facts: Sequence[Fact], n: int, n_docs: int, rng: random.Random) -> list[Fact]:
    """n facts, one per chunk, spread over documents and kinds (definitions first: they read best)."""
    pool = sorted(facts, key=lambda f: (_KINDS.index(f.kind), rng.random()))
    per_doc: Counter[str] = Counter()
    used: set[str] = set()
    out: list[Fact] = []
    cap = max(1, math.ceil(n / max(1, n_docs)))
    for limit in (cap, cap * 4, n):
        for f in pool:
            if len(out) >= n:
                return out
            cid = f.passage.chunk.chunk_id
            if cid in used or per_doc[f.passage.doc] >= limit:
                continue
            used.add(cid)
            per_doc[f.passage.doc] += 1
            out.append(f)
    return out


def _bridges(facts: Sequence[Fact], n: int, rng: random.Random) -> list[GoldenItem]:
    """A name in one chunk that another document is about (its title, or a definition's subject)."""
    about: dict[str, list[Fact]] = {}
    for f in facts:
        subject = f.subject.casefold() if f.kind == "definition" else ""
        for key in dict.fromkeys(((f.passage.title or "").casefold(), subject)):  # ordered: no set between runs
            if key and len(key) > 3:
                about.setdefault(key, []).append(f)
    out: list[GoldenItem] = []
    pairs: set[tuple[str, str]] = set()
    per_entity: Counter[str] = Counter()  # one popular name must not fill the multi-hop share alone
    for a in rng.sample(list(facts), len(facts)):
        if len(out) >= n:
            break
        if a.kind == "code":
            continue
        for nm in _NAME.finditer(a.sentence):
            ent = nm.group(1).strip().casefold()
            targets = [b for b in about.get(ent, ()) if b.passage.doc != a.passage.doc and b.kind == "definition"
                       and (a.passage.chunk.chunk_id, b.passage.chunk.chunk_id) not in pairs]
            if targets and per_entity[ent] < 2:
                b = rng.choice(targets)
                pairs.add((a.passage.chunk.chunk_id, b.passage.chunk.chunk_id))
                item = bridge_item(a, b, nm.group(1).strip(), rng)
                if item.query not in {o.query for o in out}:
                    per_entity[ent] += 1
                    out.append(item)
                break
    return out


def _near_answer(f: Fact, window: int = 4) -> set[str]:
    """Content words within `window` words of the fact's answer in its sentence."""
    ws = words(f.sentence)
    ans = words(f.answer)
    if not ans:
        return set()
    at = next((i for i in range(len(ws)) if ws[i : i + len(ans)] == ans), None)
    if at is None:
        return set()
    near = ws[max(0, at - window) : at] + ws[at + len(ans) : at + len(ans) + window]
    return {w.casefold() for w in near if w.casefold() not in STOP and len(w) > 2 and not w.isdigit()}


def _comparisons(facts: Sequence[Fact], n: int, index: CorpusIndex, rng: random.Random) -> list[GoldenItem]:
    """Two documents give a number (or a date) next to the same word."""
    by_word: dict[tuple[str, str], list[Fact]] = {}
    for f in facts:
        if f.kind in ("number", "date"):
            for w in sorted(_near_answer(f)):  # sorted: set order differs between processes
                by_word.setdefault((f.kind, w), []).append(f)
    keys = [k for k, fs in by_word.items() if len({f.passage.doc for f in fs}) >= 2 and index.idf(k[1]) > 1.0]
    out: list[GoldenItem] = []
    for kind, w in rng.sample(keys, len(keys)):
        if len(out) >= n:
            break
        fs = by_word[(kind, w)]
        a = rng.choice(fs)
        others = [f for f in fs if f.passage.doc != a.passage.doc and f.passage.chunk.lang == a.passage.chunk.lang]
        others = [f for f in others if f.answer != a.answer]  # equal figures compare nothing
        if others:
            out.append(comparison_item(a, rng.choice(others), w))
    return out


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

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "workspace": self.workspace, "items": self.items, "by_type": self.by_type,
                "mean_overlap": self.mean_overlap, "generator": self.generator, "usd": round(self.usd, 6),
                "notes": list(self.notes)}


def generate_into(golden: GoldenWriter, corpus: CorpusReader, workspace: str, n: int, *, name: str | None = None,
                  seed: int = 0, corpus_version: int = 0, progress: Progress | None = None) -> GenerateReport:
    """Generate offline from the workspace's chunks and store the set (replacing one of the same name)."""
    passages = passages_from(corpus, workspace)
    if not passages:
        raise ValueError(f"workspace {workspace!r} holds no chunks: ingest documents first")
    items = generate(passages, n, seed=seed, progress=progress)
    name = name or default_name(corpus_version, n)
    golden.put_set(workspace, name, items, generator=GENERATOR, corpus_version=corpus_version,
                   notes=f"offline, seed {seed}")
    return GenerateReport(name, workspace, len(items), counts_by_type(items), mean_overlap(items), GENERATOR)
