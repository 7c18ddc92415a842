"""The attribute a question asks for (a license, an author, a required Python version, a default, a field named by
its key) and the thing it asks it of (a package or program written in lower case: 'texttable', 'rank_bm25'), and
whether a sentence or a `Key: Value` line states a value of that attribute. English, Russian and German.

Why: reference documents state attributes as fields ('License-Expression: MIT', 'Requires-Python: >=3.10') or as a
sentence carrying the value ('default value is set to 3'). The support model scores how well a sentence matches the
question's words, so a sentence that repeats 'requires' or 'license' beat the line that answers, and a neighbour
with no value at all ('the default precision is configurable') passed as the answer. Pure text in, verdicts out."""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.answer import german
from core.answer.units import FIELD
from core.text import EN_STOP, RU_STOP, guess_language, tokenize

_CYR = re.compile(r"[а-яёА-ЯЁ]")


@dataclass(frozen=True)
class Attribute:
    """What a question asks for: its name as a user says it, the field keys that state it (normalised: lower case,
    no '-', '_' or spaces) and the kind of value an answer carries ('license', 'person', 'version', 'default', '')."""

    name: str
    keys: tuple[str, ...]
    value: str
    words: tuple[str, ...] = ()  # the question's stems that name the attribute (not the thing it is asked of)


# Attributes of software and documents, written for this check (no corpus read): a trigger, the field keys that
# state it, the value kind, and the stems of the words that ask it.
_PY_REQ = re.compile(r"(?i)\bpython\b[^?]*\b(requir\w*|need\w*|support\w*|minimum)\b|\b(requir\w*|need\w*|minimum)\b"
                     r"[^?]*\bpython\b|(?:верси\w*|требу\w*|нуж\w*)[^?]*\bpython\b|\bpython\b[^?]*(?:требу\w*|нуж\w*)|"
                     r"\bpython\b[^?]*\b(?:benötig\w*|erforder\w*|braucht|unterstütz\w*|mindest\w*|voraussetz\w*)|"
                     r"\b(?:benötig\w*|erforder\w*|braucht|mindest\w*)[^?]*\bpython\b")  # (German: 'Welche Python-Version benötigt X?')
_LICENSE = re.compile(r"(?i)\blicen[cs]\w*|лицензи\w*|\blizenz\w*")
_AUTHOR = re.compile(r"(?i)\bauthor\w*|^\s*who\s+(wrote|created|made|develop\w*|writes)\b|автор\w*|"
                     r"кто\s+(написал|создал|разработал)|\bautor\w*|^\s*wer\s+(schrieb|erstellte|schuf|entwickelte)\b|"
                     r"^\s*wer\s+hat\s+\S+\s+(geschrieben|erstellt|geschaffen|entwickelt)\s*\?")
_MAINTAINER = re.compile(r"(?i)\bmaintain\w*|сопровожда\w*|\bbetreu\w*|^\s*wer\s+pflegt\b")
_HOMEPAGE = re.compile(r"(?i)\bhome\s?page\b|\bwebsite\b|\bweb site\b|домашн\w* страниц\w*|сайт\w*|\bwebseite\w*|"
                       r"\binternetseite\w*")
_DEFAULT = re.compile(r"(?i)\bdefaults?\b|\bby default\b|по умолчанию|\bstandardwert\w*|\bstandardmäßig\w*|"
                      r"\bvoreingestellt\w*|\bvoreinstellung\w*|\bstandard-\w")
# 'In which version was X removed?', 'Which version of HTTP does X implement?', 'В какой версии ...': the answer
# carries a version number
_ASKS_VERSION = re.compile(r"(?i)^\W*(?:(?:in|since|from|until|as of|with|for|by)\s+)?(?:which|what)\s+(?:\w+\s+)?"
                           r"(?:version|release)s?\b|^\W*(?:which|what)\s+(?:is|are|was|were)\s+the\s+(?:[\w.-]+\s+){1,2}"
                           r"(?:version|release)s?\b|^\W*welche[smnr]?\s+(?:ist|sind|war|waren)\s+(?:der|die|das)\s+"
                           r"(?:[\w.]+\s+){0,2}[\w.-]*version(?:en)?\b|^\W*(?:в|с|начиная с|до)?\s*как(?:ой|ая|ую|их)\s+верси|"
                           r"^\W*(?:(?:in|seit|ab|bis|mit|für|von)\s+)?welche[mnrs]?\s+(?:\w+\s+)?[\w-]*version(?:en)?\b")
_GENERIC = re.compile(r"(?i)^\s*(?:what|which)\s+(?:is|are|was)\s+(?:the\s+)?([a-z][\w-]*)\s+(?:of|for)\s+\S")


# a clause that sets a condition or a time ('if our licence runs out', 'when the license expires'): a noun inside it is
# the question's topic, not the attribute it asks for
_CONDITION = re.compile(r"(?i)\b(?:if|when|whenever|once|unless|after|before|until|in case)\b|\b(?:если|когда|после|"
                        r"пока)\b")


def _topic_only(q: str, word: re.Pattern[str]) -> bool:
    """Whether each use of the word sits in a condition's clause (after 'if', 'when', 'once' and before the clause
    ends at a comma, a dash or a question's end)."""
    uses = list(word.finditer(q))
    return bool(uses) and all(_CONDITION.search(re.split(r"[,;:?!—–]|\s-\s", q[: m.start()])[-1]) for m in uses)


def asked_attribute(question: str) -> Attribute | None:
    """The attribute the question asks for, or None (a question that asks no attribute: 'Does X support Y?')."""
    q = question.strip()
    if _PY_REQ.search(q):
        return Attribute("the required Python version", ("requirespython", "pythonrequires"), "version",
                         ("python", "requir", "version", "need", "support", "minimum", "верс", "требу", "benötig", "erforder",
                          "mindest"))
    if _DEFAULT.search(q):
        return Attribute("a default value", (), "default", ("default", "valu", "умолчан", "значен", "standard", "voreinstell"))
    if _LICENSE.search(q) and not _topic_only(q, _LICENSE):
        return Attribute("a license", ("license", "licenseexpression", "licence"), "license",
                         ("licens", "licenc", "releas", "distribut", "лиценз", "распро", "lizenz", "veröffentlich"))
    if _AUTHOR.search(q):
        return Attribute("an author", ("author", "authoremail", "authors"), "person",
                         ("author", "wrote", "creat", "made", "develop", "автор", "autor"))
    if _MAINTAINER.search(q):
        return Attribute("a maintainer", ("maintainer", "maintaineremail", "maintainers"), "person",
                         ("maintain", "сопро", "betreu", "pfleg"))
    if _HOMEPAGE.search(q):
        return Attribute("a home page", ("homepage", "url", "projecturl"), "",
                         ("home", "homepag", "page", "websit", "site", "сайт", "домаш", "стран"))
    if _ASKS_VERSION.search(q):
        return Attribute("a version", (), "version", ("version", "release", "верс", "выпуск"))
    m = _GENERIC.match(q)
    if m and m.group(1).lower() not in EN_STOP:
        noun = m.group(1).lower()
        return Attribute(noun, (re.sub(r"[\W_]", "", noun),), "", tuple(tokenize(noun)))
    return None


def _norm_key(key: str) -> str:
    return re.sub(r"[\W_]", "", key).lower()


def field_states(line: str, attr: Attribute) -> bool:
    """Whether a `Key: Value` line states the attribute: its key is one of the attribute's keys ('License-Expression'
    for a license, 'Author-email' for an author); a 'Project-URL: Homepage, …' line states a home page. A key that
    names a file ('License-File: LICENSE') states no license."""
    m = FIELD.match(line.strip())
    if not m or not attr.keys:
        return False
    key, value = _norm_key(m.group("key")), m.group("value").strip()
    if key == "projecturl":
        label = _norm_key(value.split(",", 1)[0])
        return label in attr.keys
    return key in attr.keys


# Values of each kind, as a sentence states them.
_LICENSE_NAME = re.compile(
    r"\b(MIT|BSD|Apache|GPL|LGPL|AGPL|MPL|ISC|CC0|CC[- ]BY\S*|Unlicense|PSF|Python Software Foundation|Zlib|"
    r"Artistic|EPL|Boost|WTFPL|public domain|proprietary)\b|\blicen[cs]ed under\b|\bлицензи\w+\s+[A-Z]", re.I)
_VERSION_VALUE = re.compile(r"(?:>=|<=|~=|==|>|<|≥)\s*\d+(?:\.\d+)*|\b\d+\.\d+(?:\.\d+)*\b|\bpython\s*\d\b", re.I)
# a default stated with its verb, whatever its value ('default value is set to 3', 'will default to the current
# directory')
_DEFAULTS_TO = re.compile(r"(?i)\bdefault(?:s|ing|ed)?\s+(?:value\s+)?(?:is\s+set\s+to|is|to|was|of)\s+[`'\"(]*[\w./-]")
_DEFAULT_WORD = re.compile(r"(?i)\bdefault\w*\b|по умолчанию")
# A value: a number, a literal (True / False / None / null), a quoted or back-quoted token, a unit amount.
_VALUE = re.compile(r"\d|\b(True|False|None|null|nil|true|false|unlimited|empty|disabled|enabled)\b|"
                    r"`+[^`\s][^`]*`+|'[^'\s][^']*'|\"[^\"\s][^\"]*\"|«[^»]+»")


# a setting a question names as code: an identifier with '_' ('allow_inf_nan') or a back-quoted word
_SETTING_NAME = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]*)(?![\w(])|`([A-Za-z_][\w.\-]*)`")


def assigned_default(text: str, question: str) -> bool:
    """Whether the text gives a setting the question names as code its default as a signature does: an annotated
    parameter ('allow_inf_nan: bool = True,', "float_mode: Literal['float', 'decimal'] = 'float'") or a parameter
    of a `def` line ('def connect(timeout=30)'): Python's grammar for a parameter's default. A call's argument
    ('pass `max_size=0`') is a value passed, no default."""
    for m in _SETTING_NAME.finditer(question):
        name = re.escape(m.group(1) or m.group(2))
        if re.search(rf"(?<![\w.]){name}\s*:\s*[^=\n]{{1,80}}?\s*=(?!=)\s*[^\s=,)]", text) or \
                re.search(rf"\bdef\s+\w+\s*\([^)]*(?<![\w.]){name}\s*=(?!=)\s*[^\s=,)]", text):
            return True
    return False


def states_value(sentence: str, attr: Attribute, context: str = "", question: str = "") -> bool:
    """Whether the sentence (a line or a sentence; `context` its heading) carries a value of the asked attribute:
    a field line with the attribute's key; else a license name, a version, a default with its value (a value that is
    not one of the `question`'s own words: '``detect_shell``' names the setting, it is no value of it)."""
    if field_states(sentence, attr):
        return True
    other = FIELD.match(sentence.strip())
    if other and attr.keys and not any(t.startswith(w) for t in tokenize(other.group("value")) for w in attr.words
                                       if w not in ("python", "version", "valu", "default")):
        # another field ('Classifier: Programming Language :: Python :: 3.7' lists a supported version; it
        # requires none) states the attribute only when its value names it ('Classifier: License :: … MIT')
        return False
    if attr.value == "license":
        return bool(_LICENSE_NAME.search(sentence)) and bool(_LICENSE.search(sentence + " " + context) or
                                                              FIELD.match(sentence.strip()) is None)
    if attr.value == "version":
        return bool(_VERSION_VALUE.search(sentence))
    if attr.value == "default":
        if _DEFAULTS_TO.search(sentence) or (question and assigned_default(sentence, question)):
            return True  # 'defaults to ``UNICODE``', 'defaults to the current directory', 'allow_nan: bool = True,'
        asked = set(tokenize(question))
        rest = _VALUE.sub(lambda m: m.group(0) if not m.group(0)[:1] in "`'\"«" or not set(
            tokenize(m.group(0))) <= asked else " ", _DEFAULT_WORD.sub(" ", sentence))
        return bool(_DEFAULT_WORD.search(sentence + " " + context)) and bool(_VALUE.search(rest))
    return True  # a person (the constraint check reads names), or an attribute with no value kind


# -- the thing a question asks about, written in lower case ----------------------------------------------------------
_LATIN_WORD = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9]")
_POSSESSIVE = re.compile(r"(?<![\w.])([a-z][a-z0-9_.\-]*[a-z0-9])['’]s\b")
_OF_END = re.compile(r"\b(?:of|in|for|by|from|about)\s+(?:the\s+)?([a-z][a-z0-9_.\-]*[a-z0-9])\s*[?.!]*\s*$")
_DOES_X = re.compile(r"(?i)\b(?:does|do|did|can|could|will|should|is|was)\s+([a-z][a-z0-9_.\-]*[a-z0-9])\s+"
                     r"(?:require|requires|need|needs|support|supports|use|uses|depend|depends|run|runs|work|works|"
                     r"released|licensed|distributed|published|written|maintained|developed|compatible|available|"
                     r"provide|provides|have|has|do|handle|handles|accept|accepts|return|returns)\b")
_OPENS_WITH = re.compile(r"(?i)^\s*(?:is|are|was|does|do|did|can|could|will|should)\s+(?:the\s+)?"
                         r"([a-z][a-z0-9_.\-]*[a-z0-9])\b")
# 'Who wrote parso?', 'Who maintains fsspec?': the question is the verb and the thing's lower-case name
_WHO_MADE = re.compile(r"(?i)^\W*who\s+(?:wrote|writes|created|creates|made|makes|developed|develops|authored|"
                       r"maintains|maintained|started)\s+(?:the\s+)?([a-z][a-z0-9_.\-]*[a-z0-9])\s*[?.!]*\s*$")
_PACKAGE_RU = re.compile(r"(?i)\b(?:пакет\w*|библиотек\w*|модул\w*|программ\w*|утилит\w*)\s+([A-Za-z][\w.\-]*)")


# A question about software: it names an identifier ('max_width', 'os.path', '`flag`') or a program-ish word.
_TECHNICAL = re.compile(r"[A-Za-z]\w*_\w|\w\.\w|`|\b[A-Za-z]\w*\([\w,. ]*\)|\b(package|library|module|function|method|class|option|"
                        r"parameter|argument|setting|flag|command|install\w*|version|release\w*)\b", re.I)
_QUESTION_WORDS = frozenset("what which who whom whose where when why how whatever whichever".split())


# 'all jsonpickle errors', 'the oldest pandas version': a lower-case word right before a software noun names the
# thing asked about, unless it only qualifies the noun ('the oldest supported version').
_BEFORE_NOUN = re.compile(r"\b([a-z][a-z0-9\-]*[a-z0-9])\s+(?:versions?|errors?|exceptions?|packages?|"
                          r"librar(?:y|ies)|modules?|releases?|licen[cs]e|dependenc(?:y|ies)|api|docs|documentation|"
                          r"maintainers?|authors?|installation|changelog)\b")
# 'the version of alphalib from the git tag', 'the license of betatool and ...': a lower-case word after a software
# noun and 'of' names the thing it belongs to, wherever the question goes on
_NOUN_OF = re.compile(r"\b(?:versions?|releases?|licen[cs]e|authors?|maintainers?|source|documentation|docs|repository|"
                      r"changelog|dependenc(?:y|ies)|api|installation|default|defaults|homepage)\s+of\s+(?:the\s+)?"
                      r"([a-z][a-z0-9_.\-]*[a-z0-9])(?![\w(])")
QUALIFIERS = frozenset("minimum maximum min max latest oldest newest earliest current required supported stable "
                        "first last next previous new old recommended default major minor final initial lowest "
                        "highest least most same other exact specific this that which what whose its their any "
                        "every each all optional extra test testing development dev runtime build core main".split())


# 'markdown-it-py', 'py7zr-lite': a lower-case word of three parts or more, or with a digit, names a program (a
# compound of three parts links them with 'of', 'to', 'the': 'state-of-the-art', 'end-to-end')
_HYPHENATED = re.compile(r"(?<![\w.\-])((?:[a-z][a-z0-9]*-){2,}[a-z0-9]+|[a-z][a-z0-9]*-[a-z0-9\-]*\d[a-z0-9\-]*|"
                         r"[a-z][a-z0-9]*\d[a-z0-9]*-[a-z0-9\-]+)(?![\w\-])")
_LINKING = frozenset("of to the and a an in on by for or".split())


def _common(word: str) -> bool:
    low = word.lower()
    return low in EN_STOP or low in RU_STOP or low in _QUESTION_WORDS or not tokenize(low)


def subject_names(question: str) -> list[str]:
    """Names of the thing asked about that the question writes in lower case (a package, a program, a module):
    'texttable's max_width', 'the author of threadpoolctl?', 'does msgpack require', 'пакета numpy', and any Latin
    word of a Cyrillic question. Capitalised names and identifiers with '_' or '.' are the constraint check's own."""
    out: list[str] = []
    q = question.strip()
    attr = asked_attribute(q)
    if (attr is None or not attr.value) and not _TECHNICAL.search(q) and not _CYR.search(q):
        return out  # 'the strain in structures?', 'by whom?': in a prose question a lower-case word is no name
    found = [m.group(1) for m in _POSSESSIVE.finditer(q)] + [m.group(1) for m in _OF_END.finditer(q)] + \
        [m.group(1) for m in _DOES_X.finditer(q)] + [m.group(1) for m in _PACKAGE_RU.finditer(q)] + \
        [m.group(1) for m in _OPENS_WITH.finditer(q) if m.group(1) == m.group(1).lower()] + \
        [m.group(1) for m in _WHO_MADE.finditer(q) if m.group(1) == m.group(1).lower()]
    if _CYR.search(q):
        found += [m.group(0) for m in _LATIN_WORD.finditer(q)]
    found += [m.group(1) for m in _HYPHENATED.finditer(q) if not set(m.group(1).split("-")[1:-1]) & _LINKING]
    found += [m.group(1) for m in _BEFORE_NOUN.finditer(q) if m.group(1) not in QUALIFIERS]
    found += [m.group(1) for m in _NOUN_OF.finditer(q)]
    asked = set(attr.words) if attr is not None else set()
    de = guess_language(q) == "de"
    for w in found:
        w = w.rstrip(".")
        if len(w) < 3 or _common(w) or w[:1].isupper() or "_" in w or "." in w:
            continue  # a capitalised name or an identifier is already a constraint
        if de and not german.foreign_word(w):
            continue  # a German question's word in lower case that is a German word ('ist', 'bedeutet') is no name
        if any(t.startswith(a) for t in tokenize(w) for a in asked):
            continue  # the attribute itself ('... by default?') is no name
        if w.lower() not in (x.lower() for x in out):
            out.append(w)
    return out


_QUESTION_STEMS = frozenset(t for w in ("what which who whom whose where when how under does do did is are was were "
                                        "value version release released package library module program tool project "
                                        "пакет библиотека модуль программа какой какая какую кто что под у в")
                            .split() for t in tokenize(w))


def subject_terms(question: str, attr: Attribute) -> set[str]:
    """The stems that name the thing asked about: its lower-case names when the question writes some, else the
    question's stems other than the attribute's words and question words."""
    names = subject_names(question)
    if names:
        return {t for n in names for t in tokenize(n)}
    return {t for t in tokenize(question) if t not in _QUESTION_STEMS and not any(t.startswith(w) for w in attr.words)}


def field_first(question: str, texts: list[str], homes: list[str], scores: list[float], picked: list[int], *,
                max_sentences: int) -> list[int]:
    """Sentence indexes with the `Key: Value` line that states the asked attribute first ('License-Expression: MIT'
    for 'Under which license is X released?', not a sentence that repeats 'license'): among the lines whose key is
    the attribute's, those whose chunk or document (`homes`: each sentence's chunk text and document name and title)
    names most of the thing asked about, best scored first, with a second line of the same chunk ('Author' and
    'Author-email'); then the picked sentences that also state a value of the attribute. Unchanged when no line
    states the attribute of the thing asked about (the check then says what is missing)."""
    attr = asked_attribute(question)
    if attr is not None and attr.value == "default":  # among the picked, the one that states the default's value
        first = next((i for i in picked if states_value(texts[i], attr, question=question)), None)
        return picked if first is None else [first] + [i for i in picked if i != first]
    if attr is None or not attr.keys:
        return picked
    fits = [i for i, t in enumerate(texts) if field_states(t, attr)]
    if not fits:
        return picked
    subj = subject_terms(question, attr)
    home_terms: dict[int, set[str]] = {}

    def named(i: int) -> int:
        if i not in home_terms:
            home_terms[i] = set(tokenize(homes[i]))
        return len(subj & home_terms[i])

    best = max(named(i) for i in fits)
    if subj and best == 0:
        return picked
    top = sorted((i for i in fits if named(i) == best), key=lambda i: (-scores[i], i))
    lead = [top[0]] + [i for i in top[1:] if homes[i] == homes[top[0]] and texts[i] != texts[top[0]]][:1]
    rest = [i for i in picked if i not in lead and states_value(texts[i], attr) and not FIELD.match(texts[i])]
    return (lead + rest)[:max_sentences]


def states_field(text: str, attr: Attribute) -> bool:
    """Whether a text holds a `Key: Value` line that states the attribute (field_states)."""
    return any(field_states(line, attr) for line in text.splitlines())


def is_header(text: str, lines: int = 3) -> bool:
    """Whether a text holds a run of header fields: `lines` `Key: Value` lines or more ('Name: …', 'Classifier: …')."""
    return sum(1 for line in text.splitlines() if FIELD.match(line.strip())) >= lines


def header_gap(question: str, texts: list[str]) -> Attribute | None:
    """The asked attribute when a header states it as a field ('Requires-Python', 'License-Expression') and the texts
    handed to the answerer hold a header's fields but not that line: a long header (dozens of 'Classifier' lines) is
    cut into several chunks, and retrieval may hand on the one without it. None when no such gap."""
    attr = asked_attribute(question)
    if attr is None or not attr.keys or any(states_field(t, attr) for t in texts) or not any(map(is_header, texts)):
        return None
    return attr


_RECORD_NAME = re.compile(r"(?im)^\s*(?:name|title|package|project|module|program|import-name)\s*:\s*(\S.*)$")


def record_names(chunk: str, *labels: str) -> str:
    """What a chunk's record is called: its header's own name fields ('Name: texttable') and the labels given (its
    document's file name and title)."""
    return " ".join([m.group(1) for m in _RECORD_NAME.finditer(chunk)] + [x for x in labels if x])


def field_lines(question: str, texts: list[str], records: list[str]) -> list[int]:
    """Indexes of the `Key: Value` lines that state the asked attribute of the very record the question names by a
    lower-case name ('the license of texttable' -> 'License: MIT' of the header whose Name, file name or title is
    texttable), at most two of one chunk ('Author' and 'Author-email'); [] when the question names no such record.
    `records`: each line's record names (record_names)."""
    attr = asked_attribute(question)
    names = subject_names(question)
    if attr is None or not attr.keys or not names:
        return []
    want = {t for n in names for t in tokenize(n)}
    fits = [i for i, t in enumerate(texts) if field_states(t, attr) and want <= set(tokenize(records[i]))]
    if not fits:
        return []
    return [fits[0]] + [i for i in fits[1:] if records[i] == records[fits[0]] and texts[i] != texts[fits[0]]][:1]
