"""The well-formedness check every generated question passes before a user sees it (offline and Claude alike).

A question is kept when it is one standalone question a person could ask: it opens with a question word (or an
auxiliary, for a yes/no question) and ends with one question mark; it is 4 to 25 words; its brackets and quotes are
balanced; it is in its passage's language; it leaves no slot or fragment ("who or what", "…", "{S}", a dangling
"of?"); it does not lean on text the reader cannot see ("he", "this document"); it does not give its answer away;
it names something a reader could look up (a name, code, a number, or three content words one of them a
term rare in the corpus); and it does not
copy its evidence sentence (at most COPY of the sentence's content words). `problem` names the first
rule a question breaks, which is how a set reports what it dropped and why.
"""
from __future__ import annotations

import re

COPY = 0.75  # share of the evidence sentence's content words a question may repeat
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_OPEN_EN = frozenset(("who whom whose what when where which why how is are was were do does did can could will "
                      "would should has have had in on at from for by to under").split())
_OPEN_RU = frozenset(("кто кого кому кем что чего чем когда где куда откуда какой какая какое какие каким какую "
                      "каких каком какой сколько почему зачем как чей чья чьё чьи ли в во на из с со от до по при "
                      "для о об между").split())
_DANGLING = frozenset("of the a an and or to in on at by for with from as that which its his her their not just also "
                      "only even still в во на по с со к из от до для при о и а но".split())
# a pronoun anywhere (lower case: 'It Happened One Night' is a title) points at a sentence the reader cannot see
_PRONOUN_SUBJ = re.compile(r"\b(?:he|she|it|they|him|her|them|his|its|their)\b|(?<![а-яёА-ЯЁ])(?:[Оо]н|[Оо]на|[Оо]но|[Оо]ни|его|её|их|ему|ей|"
                           r"им|сво[йяёеиюм]|своего|своей|своих|своим|своими)(?![а-яё])")
_DEMONSTRATIVE = re.compile(r"\b(?:this|these|those|such)\s+\w|(?<![а-яё])(?:этот|эта|эту|этого|этой|эти|этих|этим|этом|"
                            r"такой|такая|такие)(?![а-яё])", re.I)
_SLOT = re.compile(r"who or what|кто или что|…|\.\.\.|\{S\}|\bthe document\b|\bthis (?:document|passage|text|"
                   r"article|section)\b|\bэтом (?:документе|тексте)\b|\s[?]|[,;:]\s*\?$|\?\s*\S")
_MARKUP = re.compile(r"\{#|```|https?://|\|\s|<[a-z/]|\[\[|\]\]|#{2,}|\s=\s|(?:^|\s)(?:\*|//|#)\s")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _balanced(q: str) -> bool:
    pairs = {"(": ")", "[": "]", "{": "}", "«": "»", "“": "”"}
    stack: list[str] = []
    for ch in q:
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in pairs.values():
            if not stack or stack.pop() != ch:
                return False
    return not stack and q.count('"') % 2 == 0 and q.count("`") % 2 == 0


def _cyrillic_share(q: str) -> float:
    letters = [c for c in q if c.isalpha()]
    return sum("а" <= c.lower() <= "я" or c in "ёЁ" for c in letters) / len(letters) if letters else 0.0


def _anchored(q: str, ws: list[str], content: "callable", specific: "callable | None") -> bool:  # type: ignore
    """A question a reader can look up names something: a capitalised word after its first, code, a number, or
    three content words of which one is a specific term (`specific`: rare in the corpus) — 'What is the fallback?'
    and 'What is the version derived from?' name nothing; 'What does insulin resistance increase?' does."""
    if any(w[:1].isupper() for w in ws[1:]) or "`" in q or any(c.isdigit() for c in q):
        return True
    cw = content(q)
    return len(cw) >= 5 or len(cw) >= 3 and (specific is None or any(specific(w) for w in cw))


def problem(question: str, *, lang: str = "en", answer: str = "", evidence: str = "",
            content: "callable | None" = None, answerable: bool = True,  # type: ignore[valid-type]
            specific: "callable | None" = None) -> str | None:  # type: ignore[valid-type]
    """The first rule `question` breaks, as a short reason, or None when it is a well-formed standalone question.
    `content(text)`: the content words of a text (stop words out), for the copy and give-away checks."""
    q = question.strip()
    ws = words(q)
    if not q.endswith("?") or q.count("?") != 1:
        return "not one question (no single closing '?')"
    ru_share = _cyrillic_share(q)
    if (lang == "ru") != (ru_share > 0.5):
        return "not in its passage's language"
    if not ws or ws[0].lower() not in (_OPEN_RU if lang == "ru" else _OPEN_EN):
        return "does not open with a question word"
    if not (3 if lang == "ru" else 4) <= len(ws) <= 25:  # Russian has no articles or auxiliaries: 'Кто открыл X?'
        return "too short or too long (4-25 words; 3 in Russian)"
    if not _balanced(q):
        return "unbalanced brackets or quotes"
    if _SLOT.search(q):
        return "a slot or fragment left in it"
    if ws[-1].lower() in _DANGLING and not q.rstrip("?").rstrip().endswith(("from", "with", "for", "to", "of",
                                                                              "by", "in", "on", "at", "about", "as")):
        return "ends in a dangling word"
    if _MARKUP.search(q):
        return "markup or code syntax in it"
    if _PRONOUN_SUBJ.search(q) or _DEMONSTRATIVE.search(q):
        return "leans on text the reader cannot see (a pronoun subject)"
    if content is not None and not _anchored(q, ws, content, specific):
        return "names nothing a reader could look up (no name, code, number or specific term)"
    if content is not None and answerable:
        qw = {w.casefold() for w in content(q)}
        aw = {w.casefold() for w in content(answer)}
        nums = set(re.findall(r"\d{2,}", answer))
        if (aw and aw <= qw) or (nums and nums & set(re.findall(r"\d{2,}", q))):
            return "gives its answer away"
        ew = {w.casefold() for w in content(evidence)}
        if ew and len(qw & ew) / len(ew) > COPY:
            return "copies its evidence sentence"
    return None
