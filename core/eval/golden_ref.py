"""Question forms for reference prose (API docs, READMEs, option lists, package metadata) in English and Russian.

Reference text states facts a reader looks up by name: a setting's default ("`max_age` (default: 600)", "Defaults
to 600", "по умолчанию 600"), what a function accepts, returns or requires, which option does a job, the values a
setting takes, the version that added a feature, a package's licence or Python requirement. These forms ask what a
person would ask ("What is the default value of `max_age`?", "Which option limits the buffer size?", "Что
возвращает `parse()`?") instead of a cloze of the sentence. A name counts as one a reader can look up when it is
code (backticks, a call, snake_case, dotted, a --flag) or capitalised; prose markup (links, emphasis, rst roles) is
cleaned first. Nothing here knows any corpus.
"""
from __future__ import annotations

import re

from core.eval.golden_forms import Draft

__all__ = ["clean_markup", "reference_drafts", "line_drafts", "is_code_name"]

_LINK_MD = re.compile(r"!?\[([^\]]{1,200})\]\([^)]{0,400}\)")
_LINK_RST = re.compile(r"`([^`<]{1,120}?)\s*<[^>]{1,400}>`_{1,2}")
_ROLE_RST = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`]{1,120})`")
_EMPH = re.compile(r"(\*\*|__|\*)(?=\S)([^*_\n]{1,120}?)(?<=\S)\1")
_URL = re.compile(r"<?https?://\S+>?")
_RULE_LINE = re.compile(r"^[ \t]*([-=~^*#_])\1{2,}[ \t]*$", re.M)
_HEADER_FIELD = re.compile(r"^(?P<key>[A-Z][A-Za-z-]{2,30}):[ \t]+(?P<val>\S[^\n]{0,200})$", re.M)


def clean_markup(text: str) -> str:
    """Prose without link targets, images, emphasis and rst roles ('[docs](https://…)' -> 'docs',
    '``x``' -> '`x`', '`Name`_' -> 'Name'), so a question never carries markup."""
    t = re.sub(r"\\([*_`#\[\]()<>|-])", r"\1", text)  # markdown escapes ('\*')
    t = _LINK_RST.sub(r"\1", t)
    t = _LINK_MD.sub(r"\1", t)
    t = _ROLE_RST.sub(r"`\1`", t)
    t = t.replace("``", "`")
    t = re.sub(r"`([^`\n]{1,80})`_\b", r"\1", t)
    t = _EMPH.sub(r"\2", t)
    return _RULE_LINE.sub("", _URL.sub("", t))


_CODE = re.compile(r"`[^`\s][^`]{0,60}`|--?[a-z][\w-]+|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?:\(\))?|[A-Za-z_]\w*\(\)"
                   r"|[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def is_code_name(s: str) -> bool:
    """A name written as code: `x`, x(), snake_case, a.b, --flag, UPPER_CASE."""
    return bool(_CODE.fullmatch(s.strip()))


def _name(s: str) -> str:
    """The name a question can use: code in backticks (added when missing), a capitalised name kept; '' else."""
    s = s.strip().strip(",.:;")
    if is_code_name(s):
        return s if s.startswith("`") else f"`{s}`"
    if re.fullmatch(r"[A-Z][\w.+-]*(?:\s+[A-Z][\w.+-]*){0,3}", s) and s.lower() not in _NOT_NAME:
        return s
    return ""


_NOT_NAME = frozenset("it this that these those they the a an you we i he she there here note see also example "
                      "default defaults by if when for in on".split())
_VALUE = r"(`[^`\n]{1,40}`|\"[^\"\n]{1,40}\"|'[^'\n]{1,40}'|[-+]?\d[\w.,:%-]*(?:\s+(?:seconds?|ms|milliseconds|" \
         r"minutes?|hours?|days?|bytes|[KMGT]i?B|MB|GB|KB|items|characters|tokens|workers|threads))?|True|False|" \
         r"None|null|true|false|[a-z][\w.-]{1,30})"
_DEFAULT_EN = [
    re.compile(rf"^(?P<name>\S.{{0,60}}?)\s*[(\[](?:the\s+)?default(?:s\s+to|\s+is|\s*[:=])?\s*{_VALUE}[)\]]"),
    re.compile(rf"^(?P<name>\S.{{0,60}}?),?\s+(?:which\s+)?defaults\s+to\s+{_VALUE}"),
    re.compile(rf"^the\s+default(?:\s+value)?\s+(?:of|for)\s+(?P<name>\S.{{0,60}}?)\s+is\s+{_VALUE}", re.I),
    re.compile(rf"^(?P<name>\S.{{0,60}}?)\s+is\s+(?:set\s+to\s+)?{_VALUE}\s+by\s+default\b"),
    re.compile(rf"^by\s+default,?\s+(?P<name>\S.{{0,60}}?)\s+is\s+(?:set\s+to\s+)?{_VALUE}", re.I),
]
_DEFAULT_RU = [
    re.compile(rf"^(?P<name>\S.{{0,60}}?)\s*\(по\s+умолчанию\s*[:—–-]?\s*{_VALUE}\)"),
    re.compile(rf"^по\s+умолчанию\s+(?P<name>\S.{{0,60}}?)\s+(?:равен|равна|равно|равны|имеет\s+значение)\s+{_VALUE}",
               re.I),
    re.compile(rf"^(?P<name>\S.{{0,60}}?)\s+по\s+умолчанию\s+(?:равен|равна|равно|равны|имеет\s+значение|[—–-])\s*"
               rf"{_VALUE}"),
    re.compile(rf"^значение\s+(?P<name>\S.{{0,60}}?)\s+по\s+умолчанию\s*(?:[—–-]|равно)\s*{_VALUE}", re.I),
]
# present-tense verbs of reference prose -> (base form for do-support, Russian question verb)
_API_VERBS = {"accepts": "accept", "returns": "return", "requires": "require", "supports": "support",
              "expects": "expect", "raises": "raise", "takes": "take", "yields": "yield", "emits": "emit",
              "uses": "use", "depends": "", "exposes": "expose", "provides": "provide", "stores": "store",
              "creates": "create", "reads": "read", "writes": "write", "validates": "validate"}
_RU_VERBS = ("принимает", "возвращает", "требует", "поддерживает", "использует", "создаёт", "создает",
             "хранит", "читает", "записывает", "проверяет", "вызывает", "выбрасывает")
_ONE_OF = re.compile(r"^(?P<name>\S.{0,60}?)\s+(?:must|can|may|should)\s+be\s+(?:one|any)\s+of\s+(?P<vals>.{3,120})$")
_ADDED = re.compile(r"^(?P<name>\S.{0,60}?)\s+(?:was|were)\s+(?:added|introduced|deprecated|removed)\s+in\s+"
                    r"(?:version\s+|v)?(?P<ver>\d+(?:\.\d+){0,2})\b")


def _strip_lead(s: str) -> str:
    return re.sub(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+", "", s).strip()


def _value(v: str) -> str:
    return v.strip().rstrip(".,;)")


def reference_drafts(sentence: str, title: str, lang: str = "en") -> list[Draft]:
    """Reference-prose questions from one (markup-cleaned) sentence or list line."""
    s = _strip_lead(sentence).rstrip(" .")
    out: list[Draft] = []
    for rx in (_DEFAULT_RU if lang == "ru" else _DEFAULT_EN):
        m = rx.search(s)
        if not m:
            continue
        name = _name(re.sub(r"^(?:the|a|an)\s+(?=`)", "", m.group("name")))
        val = _value(m.group(m.lastindex or 0))
        if name and val and val.strip("`'\"").casefold() not in name.strip("`").casefold():
            q = (f"Какое значение по умолчанию у {name}?" if lang == "ru" else f"What is the default value of {name}?")
            out.append(Draft(q.replace(name, "{S}"), name, val, "default", "default", sentence=sentence))
            break
    if lang == "ru":
        m = re.match(rf"^(?P<name>\S.{{0,50}}?)\s+(?P<verb>{'|'.join(_RU_VERBS)})\s+(?P<obj>.{{3,}})$", s)
        if m and _name(m.group("name")) and is_code_name(m.group("name")):
            obj = re.split(r"[,;:]\s|\s[—–]\s", m.group("obj"))[0]
            if 1 <= len(obj.split()) <= 10:
                out.append(Draft(f"Что {m.group('verb')} {{S}}?", _name(m.group("name")), obj, "what",
                                 f"api:{m.group('verb')}", sentence=sentence))
        return out
    m = re.match(rf"^(?P<name>\S.{{0,50}}?)\s+(?:(?:also|only|now|always|optionally|officially)\s+)?"
                 rf"(?P<verb>{'|'.join(v for v, b in _API_VERBS.items() if b)})\s+(?P<obj>.{{3,}})$", s)
    if m and is_code_name(m.group("name")):
        obj = re.split(r"[,;:]\s|\s[—–-]\s|\s(?:and|which|so|but)\s(?:returns|raises|is|can)\b", m.group("obj"))[0]
        if 1 <= len(obj.split()) <= 10:
            out.append(Draft(f"What does {{S}} {_API_VERBS[m.group('verb')]}?", _name(m.group("name")), obj, "what",
                             f"api:{_API_VERBS[m.group('verb')]}", sentence=sentence))
    m = re.match(r"^(?P<name>\S.{0,40}?)\s+(?:also\s+)?(?:allows|lets|enables|helps)\s+(?:you|users|developers)\s+(?:to\s+)?"
                 r"(?P<what>[a-z]+\s.{3,})$", s)
    if m and (is_code_name(m.group("name")) or re.fullmatch(r"[A-Z][\w.+-]*(?:\s+[A-Z][\w.+-]*)?", m.group("name"))) \
            and m.group("name").lower() not in _NOT_NAME:  # 'Requests allows you to send HTTP/1.1 requests'
        what = re.split(r"[,;:]\s|\s(?:and|which|so|but|without|with|in|by)\s", m.group("what"))[0]
        if 2 <= len(what.split()) <= 10:
            out.append(Draft("What does {S} let you do?", _name(m.group("name")) or m.group("name"), what, "what",
                             "api:lets", sentence=sentence))
    m = _ONE_OF.match(s)
    if m and _name(m.group("name")) and ("," in m.group("vals") or " or " in m.group("vals")):
        out.append(Draft("Which values can {S} take?", _name(m.group("name")), m.group("vals"), "which", "values",
                         sentence=sentence))
    m = _ADDED.match(s)
    if m and _name(m.group("name")):
        verb = re.search(r"added|introduced|deprecated|removed", s).group(0)  # type: ignore[union-attr]
        aux = "were" if re.search(r"\swere\s", s) else "was"
        out.append(Draft(f"In which version {aux} {{S}} {verb}?", _name(m.group("name")), m.group("ver"), "when",
                         f"version:{verb}", sentence=sentence))
    return out


_OPTION_LINE = re.compile(r"^\s*(?:[-*+•]\s+|\|\s*)?(?P<name>`[^`\n]{1,40}`|--?[a-z][\w-]+|[a-z_][\w]*(?:\.\w+)*)"
                          r"(?:\s*\((?P<type>[^)\n]{1,30})\))?\s*(?:[:—–|]|\s-\s)\s*(?P<desc>[^\n]{8,240})$", re.M)
_DEFAULT_ALONE = re.compile(rf"^\s*(?:Defaults?\s+to|Default(?:\s+value)?\s*(?:is|:))\s+{_VALUE}", re.M)
_VERB_3P = re.compile(r"^(?:[A-Z][a-z]+s|[A-Z][a-z]+es)\b")
_FIELDS = {"requires-python": ("Which Python versions does {S} require?", "python"),
           "license": ("Under which licence is {S} released?", "licence"),
           "author": ("Who wrote {S}?", "author")}


def line_drafts(text: str, lang: str = "en") -> list[Draft]:
    """Questions only a whole line or its neighbours give: an option list entry ('`max_age`: maximum age ...
    (default: 600)'), a 'Defaults to 600.' line under the parameter it belongs to, a package's header fields."""
    out: list[Draft] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _OPTION_LINE.match(line)
        if m and is_code_name(m.group("name")):
            name, desc = _name(m.group("name")), m.group("desc").strip(" |")
            first = re.split(r"(?<=[a-z)])\.\s|\s\((?:default|по умолчанию)|[;|]", desc)[0].strip(" .")
            ws = first.split()
            if lang == "en" and 3 <= len(ws) <= 10 and not re.search(r"[`(){}\[\]=<>\"]", first):
                if _VERB_3P.match(first) and ws[0].lower() not in ("is", "was", "has", "this", "its", "yes"):
                    kind = "flag" if name.strip("`").startswith("-") else "option"
                    q = f"Which {kind} {ws[0].lower()} {' '.join(ws[1:])}?"
                    out.append(Draft(q.replace("{", "{{").replace("}", "}}"), name, name, "which", "option-of",
                                     sentence=line.strip()))
                elif re.match(r"^the\s+[a-z]", first, re.I) or re.match(r"^(?:maximum|minimum|number|"
                                                                                    r"size|timeout)\b", first, re.I):
                    kind = "flag" if name.strip("`").startswith("-") else "option"
                    if re.fullmatch(r"`?[A-Z]\w*`?", name):
                        continue  # 'CharBPETokenizer: the original BPE': a class described, not a setting
                    np = first[:1].lower() + first[1:]
                    np = np if re.match(r"^(?:the|a|an)\b", np) else "the " + np
                    q = f"Which {kind} sets {np}?"
                    out.append(Draft(q.replace("{", "{{").replace("}", "}}"), name, name, "which", "option-of",
                                     sentence=line.strip()))
            out += reference_drafts(f"{name} {desc[desc.find('('):] if '(' in desc else ''}".strip(), "", lang) \
                if re.search(r"\((?:the\s+)?default|\(по умолчанию", desc) else []
        d = _DEFAULT_ALONE.match(line)
        if d:
            for prev in reversed(lines[max(0, i - 3):i]):
                pm = re.match(r"^\s*(?:[-*+]\s+)?(`?[A-Za-z_][\w.]*`?)\s*(?:\(|:)", prev)
                if pm and is_code_name(pm.group(1)) or pm and re.fullmatch(r"[a-z]\w{2,}", pm.group(1)):
                    name = pm.group(1) if pm.group(1).startswith("`") else f"`{pm.group(1)}`"
                    q = "Какое значение по умолчанию у {S}?" if lang == "ru" else "What is the default value of {S}?"
                    out.append(Draft(q, name, _value(d.group(1)), "default", "default", sentence=line.strip()))
                    break
    fields = {m.group("key").lower(): m.group("val").strip() for m in _HEADER_FIELD.finditer(text)}
    pkg = fields.get("name", "")
    if lang == "en" and pkg and re.fullmatch(r"[\w.-]{2,40}", pkg) and len(fields) >= 3:
        for key, (template, attr) in _FIELDS.items():
            val = fields.get(key, "")
            if val and len(val) <= 60 and val.upper() not in ("UNKNOWN", "NONE"):
                out.append(Draft(template, pkg, val, "which" if attr != "author" else "who", attr,
                                 sentence=f"{key}: {val}"))
    return out
