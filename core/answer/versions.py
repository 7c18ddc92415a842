"""Versions of one document (draft / final, dated revisions, v1 / v2) read from its title, file name and opening
lines, so an answer quoting two of them says which sentence comes from which."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

# Status words of a document's life (English and Russian) and version numbers: the grammar of versioning, not any
# corpus's vocabulary.
_STATUS = re.compile(r"(?i)(?<![\w])(draft|final|approved|superseded|proposed|obsolete|"
                     r"черновик|проект|утвержд[её]н[аоы]?|окончательн(?:ая|ый|ое)|действующ(?:ая|ий|ее))(?![\w])")
_VERSION = re.compile(r"(?i)(?<![\w])(?:v\s?\d+(?:\.\d+)*|(?:version|versión|rev\.?|revision|release|"
                      r"версия|редакция|ред\.)\s+(?:no\.?\s*)?\d+(?:\.\d+)*)(?![\w])")
_MONTHS_EN = ("january february march april may june july august september october november december "
              "jan feb mar apr jun jul aug sep sept oct nov dec")
_MONTHS_RU = ("январь января февраль февраля март марта апрель апреля май мая июнь июня июль июля август августа "
              "сентябрь сентября октябрь октября ноябрь ноября декабрь декабря")
_MONTH = "|".join(sorted((_MONTHS_EN + " " + _MONTHS_RU).split(), key=len, reverse=True))
_DATE = re.compile(rf"(?i)(?<![\w])(?:\d{{4}}-\d{{2}}(?:-\d{{2}})?|(?:\d{{1,2}}\s+)?(?:{_MONTH})\.?\s+\d{{4}}|"
                   rf"(?:{_MONTH})\s+\d{{1,2}},\s+\d{{4}})(?![\w])")
HEAD_CHARS = 400  # the opening a document states its status and date in (a title page, a status line)


@dataclass(frozen=True)
class DocHead:
    """What versioning reads of a document: its file name, title and opening text."""

    name: str
    title: str = ""
    head: str = ""


@dataclass(frozen=True)
class Version:
    family: str  # the document with its version marks taken out (title, else file name), lower case
    label: str   # 'Draft v0.4 (3 June 2024)'; '' when nothing marks a version


def _family(text: str) -> str:
    text = re.sub(r"\.\w{1,5}$", "", text)  # file extension
    for rx in (_STATUS, _VERSION, _DATE):
        text = rx.sub(" ", text)
    text = re.sub(r"(?i)(?<![^\W_])(?:rev|v|ver|final|draft)(?![^\W_])", " ", text.replace("_", " "))
    return " ".join(w for w in re.findall(r"[^\W_]+", text.lower()) if not w.isdigit())


def version_of(doc: DocHead) -> Version:
    """The document's version label from its opening text, else its title, else its file name."""
    head = doc.head[:HEAD_CHARS]
    label = ""
    for source in (head, doc.title, doc.name.replace("_", " ")):
        parts: list[tuple[int, str]] = []
        for rx in (_STATUS, _VERSION):
            m = rx.search(source)
            if m:
                parts.append((m.start(), m.group(0)))
        date = _DATE.search(source)
        if parts or date:
            words = [p for _, p in sorted(parts)]
            words = [w.lower() if _STATUS.fullmatch(w) else w for w in dict.fromkeys(words)]
            label = ", ".join(x for x in (" ".join(words), date.group(0) if date else "") if x)
            if words and _STATUS.fullmatch(words[0]):
                label = label[:1].upper() + label[1:]
            break
    return Version(_family(doc.title) or _family(doc.name), label)


def sibling_labels(doc_ids: list[str], docs: Mapping[str, DocHead]) -> dict[str, str]:
    """doc id -> version label for the documents among `doc_ids` that have another version among them (same family,
    different label); documents without a sibling are left out."""
    vers = {d: version_of(docs[d]) for d in dict.fromkeys(doc_ids) if d in docs}
    out: dict[str, str] = {}
    for d, v in vers.items():
        if not v.family:
            continue
        sibs = [e for e, w in vers.items() if e != d and w.family == v.family]
        if sibs and v.label and all(vers[e].label != v.label for e in sibs):
            out[d] = v.label
        elif sibs:  # versions that say nothing of themselves: their file names tell them apart
            out[d] = docs[d].name
    return out
