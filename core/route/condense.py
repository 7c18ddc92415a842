"""A conversation's follow-up condensed into a standalone question: offline by carrying the previous turn's subject
into it, or rewritten by Claude."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.text import german_only, guess_language, lexicon
from core.types import StageInfo, Turn, Usage, is_refusal_text

_TOKEN = re.compile(r"[\w][\w\-./]*", re.UNICODE)
_QUESTION_WORDS = frozenset("""what which who whom whose when where why how is are was were do does did can could
should would will may and but or so the a an in on at for of to by what's who's how's
что какой какая какое какие кто кого кому когда где почему зачем как сколько ли и а но или в во на по за для о об
с со у из was welche welcher welches welchen welchem wer wen wem wessen wann wo woher wohin warum wieso weshalb wie
ist sind war waren hat haben kann können und aber oder der die das den dem des ein eine einen einem einer""".split())
_PRONOUNS_EN = {"it": "", "its": "'s", "they": "", "them": "", "their": "'s", "he": "", "she": "", "him": "",
                "her": "", "his": "'s", "this": "", "that": "", "these": "", "those": ""}
_PRONOUNS_RU = frozenset("""он она оно они его её ее их него неё нее них им ему ей нему ней ними ею ним нём нем
этот эта это эти этого этой этих этим том тот той""".split())
_ASKS = frozenset("""what which who whom whose when where why how is are was were do does did can could should would
will что какой какая какое какие кто когда где почему как сколько was welche welcher welches welchen welchem wer wen
wem wessen wann wo woher wohin warum wieso weshalb wie""".split())
_OPENERS = re.compile(r"^(?:and|but|also|what about|how about|and what about|then|и|а|а что|а как|ну а|тогда|und|aber|"
                      r"und was|was ist mit|wie steht es mit|dann)\b[\s,]*", re.IGNORECASE)


_QUOTED = re.compile(r"«([^»]{2,60})»|“([^”]{2,60})”|\"([^\"]{2,60})\"")
_MONTHS = frozenset("""january february march april may june july august september october november december
январь февраль март апрель май июнь июль август сентябрь октябрь ноябрь декабрь января февраля марта апреля мая
июня июля августа сентября октября ноября декабря январе феврале марте апреле мае июне июле августе сентябре
октябре ноябре декабре""".split())
_PERSON_EN = frozenset({"he", "she", "him", "her", "his", "er", "ihn", "ihm", "seine", "sein"})
_PERSON_RU = frozenset("он она его её ее ему ей него неё нее ним ней нему нею".split())
_WHO = frozenset({"who", "whom", "whose", "кто", "кого", "кому"})
_CITE = re.compile(r"\s*\[[^\]]{1,80}\]")
_WORD_OR_STOP = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*|[^\w\s]", re.UNICODE)  # words (no digits) and punctuation


# Words that open a question in capitals without naming anything: prepositions, articles and conjunctions
# ('Против чего выступает ОМЦ?', 'In which year ...', 'For whom ...'). General English and Russian grammar.
_FUNCTION_FIRST = frozenset("in on at for from with by about after before during under between since until of to and "
                            "but or if the a an as into over through against в во на с со по о об от до из к ко у за "
                            "для при про против после через без между над под перед и а но или".split())
# The subject of an inverted question: the name right after 'what does', 'when did', 'where is', 'how long was' ...
_SUBJECT_AFTER_AUX = re.compile(r"(?i)^(?:what|which|who|whom|when|where|why|how)(?:\s+[a-z]+)?\s+(?:does|did|do|is|was|"
                                r"are|were|has|have|had|can|could|will|would|should)\s+(?:the\s+|a\s+|an\s+)?")


def _entity_runs(text: str) -> list[str]:
    """Names, identifiers, periods and numbers of a question: a quoted phrase («...», "...") as a whole, then runs of
    capitalised or numbered words (the first word counts only when it is no question word)."""
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    text = _QUOTED.sub(" , ", text)
    toks = _TOKEN.findall(text)
    runs: list[list[str]] = [[q] for q in quoted]
    cur: list[str] = []
    for i, t in enumerate(toks):
        named = (any(ch.isdigit() for ch in t) or t[:1].isupper() or (len(t) > 1 and t.isupper())) and \
            not (i == 0 and (t.lower() in _QUESTION_WORDS or t.lower() in _FUNCTION_FIRST)) and \
            t.lower() not in _PRONOUNS_EN
        if named:
            cur.append(t)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    if guess_language(text) == "de":  # a lower-case word no German word list holds names the subject ('Wer ist der
        # Autor von uvicorn?'), before the capitalised nouns German writes beside it ('Autor', 'Mindestversion')
        de = lexicon("de")
        lower = [[t] for t in toks if t[:1].islower() and len(t) > 2 and t.lower() not in _QUESTION_WORDS and
                 t.lower() not in de]
        if lower:
            runs = lower + [r for r in runs if not (len(r) == 1 and german_only(r[0]))]
    return [" ".join(r) for r in runs]


def _shape(entity: str) -> str:
    """What kind of slot an entity fills: a quarter, a year, a number, an identifier, or a name."""
    e = entity.strip()
    if re.fullmatch(r"Q[1-4](?:\s+\d{4})?", e, re.IGNORECASE):
        return "quarter"
    if e.split()[0].lower() in _MONTHS:  # 'August', 'September 2024': a month is a period, not a name
        return "month"
    if re.fullmatch(r"(?:19|20)\d{2}", e):
        return "year"
    if re.fullmatch(r"[\d.,]+%?", e):
        return "number"
    if any(ch.isdigit() for ch in e) or "_" in e or (len(e) > 2 and e.isupper() and " " not in e):
        return "id"  # AB-100, MAX_RETRIES, HTTP: an identifier or a setting's key, not a name
    return "name"


def _person_answered(turn: Turn) -> str:
    """The person a 'who' question's answer named first (two or more capitalised words not in the question), for a
    follow-up's 'he' / 'she' / 'она'; "" when the turn asked no 'who' or its answer names nobody new."""
    words = [w.lower() for w in _TOKEN.findall(turn.standalone)]
    if not words or words[0] not in _WHO or not turn.answer.strip() or is_refusal_text(turn.answer):
        return ""
    asked = turn.standalone.lower()
    run: list[str] = []
    for tok in _WORD_OR_STOP.findall(_CITE.sub(" . ", turn.answer)) + ["."]:
        if tok[:1].isupper():
            run.append(tok)
            continue
        if len(run) >= 2 and " ".join(run).lower() not in asked:
            return " ".join(run)
        run = []
    return ""


@dataclass(frozen=True)
class Condensed:
    """A follow-up as the standalone question the pipeline runs (text), and how it became one."""

    original: str
    text: str
    method: str  # unchanged | replaced | pronoun | appended | llm
    carried: tuple[str, ...] = ()  # what came in from the earlier turn
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def info(self) -> "CondenseInfo":
        return CondenseInfo(self.original, self.text, self.method, self.carried)


@dataclass(frozen=True, eq=False)
class CondenseInfo(StageInfo):
    """The condense stage's record: the follow-up as asked, the standalone question it became, how, and what came in
    from the earlier turn."""

    original: str
    condensed: str
    method: str
    carried: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"original": self.original, "condensed": self.condensed, "method": self.method,
                "carried": list(self.carried)}


def _reframe(prev: str, rest: str) -> str:
    """The previous question with the phrase that frames like `rest` replaced by it ('and for domestic trips?' on
    '... allowance for international trips?': 'for ... trips' swapped), or "" when no phrase of it shares the
    follow-up's first and last words."""
    r = [m.group(0).lower() for m in _TOKEN.finditer(rest)]
    p = list(_TOKEN.finditer(prev))
    low = [m.group(0).lower() for m in p]
    if len(r) < 2 or r[-1] not in low:
        return ""
    j = max(k for k, w in enumerate(low) if w == r[-1])
    i = max((k for k in range(j) if low[k] == r[0]), default=-1)
    if i < 0 or j - i > len(r) + 3 or low[i:j + 1] == r:
        return ""
    return prev[:p[i].start()] + rest + prev[p[j].end():]


_PERSONAL_EN = frozenset({"it", "its", "they", "them", "their", "he", "she", "him", "her", "his"})


# A demonstrative or pronoun standing for a noun ('what does this do?', 'is that free?', 'что это?'): followed by a
# verb, an auxiliary or nothing, not by the noun it determines ('this year', 'that feature').
_DEMONSTRATIVES = frozenset({"this", "that", "these", "those", "это", "этим", "этом", "этого", "то", "того"})
_AUX_AFTER = frozenset("is are was were do does did can could will would should has have had mean means work works "
                       "cost costs say says include includes require requires".split())
_STANDALONE_OPENERS = re.compile(r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|"
                                 r"could|should|would|will|has|have|had|list|name|give|describe|explain|compare|tell|"
                                 r"show|define|что|какой|какая|какое|какие|каков|кто|когда|где|почему|зачем|как|"
                                 r"сколько|чей|перечисли|назови|опиши|объясни|сравни|расскажи|покажи|was|welche[rsmn]?|"
                                 r"wer|wen|wem|wessen|wann|wo|woher|wohin|warum|wieso|weshalb|wie|nenne|beschreibe|"
                                 r"ist|sind|war|waren|gibt|hat|haben|kann|können|muss|soll|wird|werden|darf|"
                                 r"erkläre|vergleiche|(?:unter|in|seit|ab|bis|von|mit|für|auf|aus|bei|nach|über|um|"
                                 r"durch|gegen|zu|zur|zum)\s+(?:welche[rsmn]?|wie|wem|wen|was)\s+\w+\s+\w+)\b",
                                 re.IGNORECASE)  # (German: 'Unter welcher Lizenz steht X?', not 'In welchem Jahr?')
_FILLER = frozenset("give list name tell show describe explain many much example examples please "
                    "перечисли назови опиши объясни приведи пример примеры".split())
_PRONOUN_OUT = frozenset(_PERSONAL_EN) | frozenset("он она оно они его её ее их него неё нее них им ему ей нему ней "
                                                   "ними ею ним нём нем er ihn ihm sie seine seinen seinem seiner "
                                                   "ihre ihren ihrem ihrer".split())
_PRONOUNS_DE = frozenset("er ihn ihm sie es seine seinen seinem seiner ihre ihren ihrem ihrer".split())
# (German 'es' stands for something said before only outside its set phrases: 'es gibt', 'gibt es', 'geht es')
_ES_PHRASE = frozenset("gibt gab geben geht ging handelt handelte sich dass um".split())


def follows_up(question: str, history: Sequence[Turn]) -> tuple[bool, str]:
    """Whether the question depends on the conversation before it, and why: an opener that continues ('and ...',
    'what about ...', 'а ...'), a pronoun with nothing before it in the question to stand for ('when did he publish
    it?'), a demonstrative standing alone ('what does this do?') or naming something the previous turn named ('this
    theory'), or a fragment with no question of its own ('In 2023?', 'for domestic trips?'). A question that
    depends on nothing is never rewritten."""
    if not history:
        return False, "no earlier turn"
    q = " ".join(question.split())
    if _OPENERS.match(q):
        return True, "opens with a word that continues the previous turn"
    toks = [t.rstrip(".-/") or t for t in _TOKEN.findall(q)]
    words = [w.lower() for w in toks]
    if not words:
        return False, "no words"
    prev = " ".join(t.standalone + " " + t.answer[:300] for t in history[-1:]).lower()
    own = _entity_runs(q)
    for i, w in enumerate(words):
        if w in _PRONOUN_OUT or (w == "es" and not {words[i - 1] if i else "", words[i + 1] if i + 1 < len(words)
                                                         else ""} & _ES_PHRASE):
            # an antecedent inside the question ('What is X and how does it work?', 'when imperialism impacts
            # social norms ..., what is it called?'): a name, or three content words, before it
            named_before = any(t[:1].isupper() or any(ch.isdigit() for ch in t) for t in toks[1:i])
            content_before = [x for x in words[:i] if len(x) > 3 and x not in _QUESTION_WORDS and x not in _FILLER]
            if not named_before and len(content_before) < 3:
                return True, f"'{toks[i]}' refers to something the question does not name"
        if w in _DEMONSTRATIVES:
            nxt = words[i + 1] if i + 1 < len(words) else ""
            before = words[i - 1] if i > 0 else ""
            if before and before not in _QUESTION_WORDS and before not in _AUX_AFTER:
                continue  # 'the taskforce that was organised': a relative pronoun, not a reference back
            if not nxt or nxt in _AUX_AFTER:
                return True, f"'{toks[i]}' stands for something said before"
            if len(nxt) > 3 and nxt[:5] in prev and not own:
                return True, f"'{toks[i]} {toks[i + 1]}' names what the previous turn named"
    if len(words) <= 5 and not _STANDALONE_OPENERS.match(q):
        return True, "a fragment with no question of its own"
    return False, "it asks a question of its own"


def condense_offline(question: str, history: Sequence[Turn]) -> Condensed:
    """The previous turn's subject carried in. An elliptical follow-up ('and in Q3?', 'and for domestic trips?')
    reruns the previous question with the slot of the same kind, or the phrase of the same frame, replaced; a
    personal pronoun ('who leads it?', 'кто им руководит?') gets the previous subject in its place unless the
    follow-up names that subject already; an opener with nothing else ('and the lead time?') gets the subject
    appended. Anything else stands alone."""
    q = " ".join(question.split())
    if not history:
        return Condensed(q, q, "unchanged")
    depends, why = follows_up(q, history)
    if not depends:
        return Condensed(q, q, "unchanged", notes=(f"standalone: {why}",))
    prev = history[-1].standalone
    subject = _entity_runs(prev)
    own = _entity_runs(q)
    toks = _TOKEN.findall(q)
    words = [w.lower() for w in toks]
    opener = bool(_OPENERS.match(q))
    short = len(words) <= 6
    elliptical = opener or (short and bool(words) and words[0] not in _ASKS)  # 'and in Q3?', 'In 2023?'
    if own and elliptical:
        kinds = {_shape(e): e for e in subject}
        for e in own:
            old = kinds.get(_shape(e))
            if old is not None and old != e and old in prev:
                text = prev.replace(old, e, 1)
                return Condensed(q, text, "replaced", tuple(x for x in subject if x != old),
                                 notes=(f"follow-up: '{old}' of the previous question replaced by '{e}'",))
    rest = _OPENERS.sub("", q).rstrip("?.! ")
    if elliptical:
        framed = _reframe(prev, rest)
        if framed:
            return Condensed(q, framed, "replaced", notes=(f"follow-up: '{rest}' put in the previous question's "
                                                           "frame",))
    if not subject or all(_shape(e) in ("year", "number") for e in subject):
        # no name to carry (or a bare period): the previous question's own words are its subject
        content = [w for w in _TOKEN.findall(prev) if w.lower() not in _QUESTION_WORDS]
        subject = [" ".join(content)] if content else []
    if not subject:
        return Condensed(q, q, "unchanged", notes=("standalone: the previous question names no subject to carry",))
    carried = " ".join(subject[:2]) if len(" ".join(subject[:2])) <= 60 else subject[0]
    m = _SUBJECT_AFTER_AUX.match(prev)
    if m and len(subject) > 1 and prev[m.end():].startswith(subject[0]):
        carried = subject[0]  # 'What does the UMC oppose as ... of Scripture?': 'it' is the UMC, the subject
    person = _person_answered(history[-1]) if any(w in _PERSON_EN or w in _PERSON_RU for w in words) else ""
    if person:  # 'Who is the CFO?' ... 'What is he responsible for?': 'he' is the person the answer named
        carried = person
    if carried.lower() not in q.lower():
        for i, w in enumerate(toks):
            low = w.lower()
            if low in _PERSONAL_EN or (low in _PRONOUNS_EN and not own and i > 0):
                text = re.sub(rf"\b{re.escape(w)}\b", carried + _PRONOUNS_EN[low], q, count=1)
                return Condensed(q, text, "pronoun", (carried,), notes=(f"'{w}' read as '{carried}'",))
            if low in _PRONOUNS_RU or low in _PRONOUNS_DE and low in _PRONOUN_OUT | {"es"}:
                text = re.sub(rf"(?<!\w){re.escape(w)}(?!\w)", f"{w} ({carried})", q, count=1)
                return Condensed(q, text, "pronoun", (carried,), notes=(f"'{w}' read as '{carried}'",))
    if own and opener:  # 'and under the Scotland Act 1998?': its names fill no slot of the previous question
        return Condensed(q, f"{prev.rstrip('?.! ')} - {rest}?", "appended", (prev,),
                         notes=("follow-up with names of its own: asked beside the previous question",))
    if own:
        return Condensed(q, q, "unchanged", notes=("standalone: it names its own subject",))
    if elliptical:
        text = f"{rest[:1].upper()}{rest[1:]} ({carried})?" if rest else prev
        return Condensed(q, text, "appended", (carried,), notes=(f"follow-up without a subject: '{carried}' carried "
                                                                 "in from the previous question",))
    return Condensed(q, q, "unchanged", notes=("standalone: no pronoun or opener refers back",))


CONDENSE_INSTRUCTIONS = (
    "You rewrite the last message of a conversation about a document collection as one standalone question that "
    "can be searched without the conversation: carry in the names, periods and subjects it refers to, change nothing "
    "else, keep its language. If it already stands alone, return it unchanged. Reply with JSON only."
)
CONDENSE_SCHEMA = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"],
                   "additionalProperties": False}


def condense(question: str, history: Sequence[Turn], llm: LLM | None = None, *, use_llm: bool = False,
             model: str = "claude-haiku-4-5", workspace: str = "default", turns: int = 3) -> Condensed:
    """The follow-up as a standalone question: Claude rewrites it (with the last `turns` turns) when `use_llm` and
    a key is set, else the offline rule; a failed call falls back to the offline rule, saying so."""
    offline = condense_offline(question, history)
    if not history or not use_llm or llm is None or not llm.available or not follows_up(question, history)[0]:
        return offline  # an independent question is never rewritten, by Claude either
    convo = "\n".join(f"User: {t.question}\nAssistant: {t.answer[:400]}" for t in history[-turns:])
    req = LLMRequest(model=model, system=(TextBlock(CONDENSE_INSTRUCTIONS, cache=True),),
                     user=(TextBlock(f"Conversation:\n{convo}"), TextBlock(f"Last message: {offline.original}")),
                     max_tokens=200, json_schema=CONDENSE_SCHEMA, purpose="condense", ref_id="condense")
    try:
        resp = llm.complete(req, workspace=workspace)
    except LLMError as exc:
        return Condensed(offline.original, offline.text, offline.method, offline.carried,
                         notes=offline.notes + (f"Claude's rewrite failed ({exc}): offline rule instead",))
    data = resp.data if isinstance(resp.data, dict) else {}
    text = " ".join(str(data.get("question", "")).split())
    if not text:
        return Condensed(offline.original, offline.text, offline.method, offline.carried, resp.usage,
                         offline.notes + ("Claude returned no question: offline rule instead",))
    return Condensed(offline.original, text, "llm", (), resp.usage, (f"rewritten by {model}",))
