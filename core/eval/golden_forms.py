"""Question forms: turn one fact-bearing sentence into standalone questions a person would ask (who / when / where /
how many / which / why / what is the default / what nationality ...), with the subject named and the fact asked for.

A draft keeps its subject apart from its wording (`template` holds "{S}"), so a multi-hop question can put "the
director of X" where a name stood and a near-miss can swap the subject. Pronoun subjects ("He", "The film") are
replaced by the document's title, so no question leans on a sentence the reader cannot see. English questions are
built by inverting the auxiliary ("was X founded?") or with do-support from a small table of verb forms; a sentence
whose verb is not in the table gives no do-question rather than a wrong one. Russian questions put the question word
in front and drop the phrase it asks for (word order is free). Nothing here knows any corpus.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["Draft", "english_drafts", "russian_drafts", "code_drafts", "ROLE"]


@dataclass(frozen=True)
class Draft:
    """One question about one sentence: `template` with "{S}" for `subject`; `attr` names what it asks (born,
    died, year, nationality, director ...) so two drafts of one attribute can be compared; `role`, when the answer
    is an entity, words it as a relation to the subject ("the director of {S}") for a multi-hop question."""

    template: str
    subject: str
    answer: str
    form: str  # who | when | where | how many | which | why | what | default | definition | code
    attr: str = ""
    role: str = ""
    sentence: str = ""

    @property
    def query(self) -> str:
        return self.template.format(S=self.subject)


_NAME_W = r"[A-Z][\w'’.-]*"
NAME = rf"(?:{_NAME_W}(?:\s+(?:of|de|da|van|von|del|der|la|le|du|bin|al|y)\s+{_NAME_W}|\s+{_NAME_W}){{0,4}})"
_MONTH = ("January|February|March|April|May|June|July|August|September|October|November|December|"
          "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
DATE = rf"(?:\d{{1,2}}\s+(?:{_MONTH})\.?,?\s+\d{{3,4}}|(?:{_MONTH})\.?\s+\d{{1,2}},?\s+\d{{3,4}}|(?:{_MONTH})\s+\d{{4}}|\d{{4}})"
_AUX = ("is", "was", "are", "were", "has", "had", "have")
_PRONOUN = frozenset("he she it".split())  # stand for the document's topic; 'they', 'this', 'their' seldom do
_GENERIC = re.compile(r"^(?:the|this|that)\s+([a-z][a-z-]+(?:\s+[a-z][a-z-]+)?)$", re.I)
# participle -> (simple past, agent noun) for "Who directed X?" and "the director of X"
_BY = {
    "directed": ("directed", "director"), "written": ("wrote", "writer"), "produced": ("produced", "producer"),
    "composed": ("composed", "composer"), "founded": ("founded", "founder"), "created": ("created", "creator"),
    "designed": ("designed", "designer"), "developed": ("developed", "developer"),
    "published": ("published", "publisher"), "performed": ("performed", "performer"),
    "painted": ("painted", "painter"), "built": ("built", "builder"), "invented": ("invented", "inventor"),
    "discovered": ("discovered", "discoverer"), "sung": ("sang", "singer"), "recorded": ("recorded", ""),
    "edited": ("edited", "editor"), "illustrated": ("illustrated", "illustrator"), "owned": ("owned", "owner"),
    "established": ("established", "founder"), "authored": ("wrote", "author"), "narrated": ("narrated", "narrator"),
    "hosted": ("hosted", "host"), "coached": ("coached", "coach"), "managed": ("managed", "manager"),
    "described": ("described", ""), "named": ("named", ""), "acquired": ("acquired", "acquirer"),
    "released": ("released", ""), "distributed": ("distributed", "distributor"), "led": ("led", "leader"),
}
ROLE = {v[1] for v in _BY.values() if v[1]}
# simple past -> base form, for do-support ("When did X join Y?"); a verb not here gives no do-question
_PAST = {
    "joined": "join", "married": "marry", "moved": "move", "won": "win", "lost": "lose", "left": "leave",
    "became": "become", "received": "receive", "played": "play", "served": "serve", "studied": "study",
    "attended": "attend", "graduated": "graduate", "returned": "return", "retired": "retire",
    "released": "release", "published": "publish", "founded": "found", "wrote": "write", "directed": "direct",
    "produced": "produce", "built": "build", "opened": "open", "closed": "close", "began": "begin",
    "started": "start", "ended": "end", "signed": "sign", "introduced": "introduce", "launched": "launch",
    "acquired": "acquire", "bought": "buy", "sold": "sell", "reached": "reach", "scored": "score",
    "recorded": "record", "toured": "tour", "appeared": "appear", "starred": "star", "designed": "design",
    "developed": "develop", "discovered": "discover", "invented": "invent", "created": "create",
    "established": "establish", "formed": "form", "entered": "enter", "visited": "visit", "ruled": "rule",
    "succeeded": "succeed", "defeated": "defeat", "captured": "capture", "reported": "report", "found": "find",
    "showed": "show", "increased": "increase", "decreased": "decrease", "reduced": "reduce", "improved": "improve",
    "caused": "cause", "led": "lead", "held": "hold", "took": "take", "gave": "give", "made": "make",
    "taught": "teach", "worked": "work", "lived": "live", "died": "die", "competed": "compete",
    "represented": "represent", "replaced": "replace", "completed": "complete", "adopted": "adopt",
    "used": "use", "required": "require", "supported": "support", "owned": "own", "hosted": "host",
    "inherited": "inherit", "converted": "convert", "migrated": "migrate", "emigrated": "emigrate",
    "settled": "settle", "elected": "elect", "appointed": "appoint", "awarded": "award", "named": "name",
    "earned": "earn", "debuted": "debut", "premiered": "premiere", "survived": "survive", "fought": "fight",
    "commanded": "command", "painted": "paint", "composed": "compose", "performed": "perform",
    "grew": "grow", "rose": "rise", "fell": "fall", "spent": "spend", "paid": "pay", "ran": "run", "met": "meet",
    "wrote": "write", "sang": "sing", "drew": "draw", "chose": "choose", "sent": "send", "kept": "keep",
    "brought": "bring", "taught": "teach", "thought": "think", "told": "tell", "said": "say", "saw": "see",
}
# present tense -> base form, for "What does X increase?" (a verb not here gives no such question)
_PRESENT = {v: v[:-1] for v in (
    "increases reduces causes inhibits affects regulates requires uses contains includes provides supports allows "
    "prevents promotes induces activates suppresses improves predicts enhances decreases modulates mediates "
    "controls determines encodes binds blocks stores returns accepts handles creates defines describes "
    "represents produces protects targets triggers limits lowers raises stimulates impairs alters "
    "restores drives shows makes takes gives holds runs sends reads writes calls loads checks converts "
    "measures connects manages exposes wraps implements extends stops starts refuses rejects keeps copies "
    "logs retries rotates signs encrypts caches").split()}
_PRESENT.update({"copies": "copy", "retries": "retry"})
_PRESENT.update({"carries": "carry", "applies": "apply", "identifies": "identify", "modifies": "modify",
                 "specifies": "specify", "relies": "rely", "varies": "vary", "accompanies": "accompany",
                 "matches": "match", "reaches": "reach", "catches": "catch", "fetches": "fetch",
                 "pushes": "push", "passes": "pass", "processes": "process", "addresses": "address",
                 "expresses": "express", "focuses": "focus", "goes": "go"})
_PERSON = frozenset((
    "actor actress singer songwriter politician writer director composer player footballer painter poet "
    "novelist journalist producer screenwriter cyclist athlete businessman businesswoman architect engineer "
    "scientist physician lawyer judge bishop priest king queen prince princess nobleman noblewoman officer general "
    "musician author historian philosopher professor economist entrepreneur designer photographer dancer comedian "
    "model presenter broadcaster rapper drummer guitarist boxer wrestler swimmer coach manager diplomat soldier "
    "explorer inventor mathematician physicist chemist biologist astronomer sculptor cinematographer editor "
    "critic activist philanthropist banker merchant farmer teacher statesman monarch emperor empress duke "
    "duchess count countess earl baron lord lady consort saint cardinal archbishop pope theologian scholar "
    "translator illustrator cartoonist animator pianist violinist conductor vocalist bassist cricketer "
    "sprinter runner skier skater rower sailor pilot astronaut lyricist filmmaker playwright essayist "
    "sportsperson jockey golfer referee academic administrator surgeon psychologist sociologist linguist "
    "archaeologist anthropologist geologist botanist zoologist officeholder"
).split())
_WORK = {"film": "released", "movie": "released", "documentary": "released", "song": "released",
         "single": "released", "album": "released", "EP": "released", "game": "released",
         "series": "first broadcast", "novel": "published", "book": "published", "poem": "published",
         "play": "first performed", "opera": "first performed", "comic": "published", "magazine": "founded",
         "newspaper": "founded", "company": "founded", "band": "formed", "club": "founded"}
_PLACE_NOUN = ("village|town|city|municipality|commune|district|county|region|province|river|lake|mountain|island|"
               "suburb|neighbourhood|neighborhood|settlement|parish|borough|state|country|capital|port|station|"
               "airport|university|school|church|cathedral|castle|museum|stadium|park|hamlet|community|locality")
_REL = {"son": "son", "daughter": "daughter", "wife": "wife", "husband": "husband", "brother": "brother",
        "sister": "sister", "widow": "widow", "grandson": "grandson", "granddaughter": "granddaughter",
        "nephew": "nephew", "niece": "niece", "father": "father", "mother": "mother"}
_REL_ROLE = {"wife": "the husband of {S}", "husband": "the wife of {S}", "widow": "the late husband of {S}",
             "son": "a parent of {S}", "daughter": "a parent of {S}"}
_CLAUSE = re.compile(r"\s*(?:[,;:]|\s[-–—]\s|\b(?:which|who|where|while|whereas|but|because|due to|owing to|although)\b)"
                     r"\s*")
_ANAPHORIC = frozenset(("film movie song album single band company firm book novel series show episode study paper "
                        "article work group team player game city town village site project programme program "
                        "report authors author trial survey analysis review cohort").split())
_HEADER = re.compile(r"^(?:(?:[A-Z]{3,}|Background|Conclusions?|Methods?|Results?|Objectives?|Purpose|Findings|"
                     r"Introduction|Context|Aims?|Design|Setting|Interpretation|Summary|Abstract)\s*:?\s+)+(?=[A-Z])")
_MONTH_WORD = re.compile(rf"^(?:{_MONTH})$")


_NP_CUT = re.compile(r"\s(?:in|at|on|with|by|during|while|when|after|before|since|until|as|from|into|through|over|"
                     r"under|within|without|including|to)\s")


def noun_phrase(s: str, max_words: int = 8) -> str:
    """The object a question asks for: the clause (_clause), or when that is too long its words up to the first
    preposition after two words ('a powerful economic base with money from ...' -> 'a powerful economic base')."""
    got = _clause(s, max_words)
    if got:
        return got
    head = _CLAUSE.split(s, maxsplit=1)[0].strip(" .;,")
    cuts = [m.start() for m in re.finditer(r"\s(?:of|for|to)\s", head)] + [m.start() for m in _NP_CUT.finditer(head)]
    fits = sorted(c for c in cuts if 2 <= len(head[:c].split()) <= max_words)
    best = next((c for c in fits if len(head[:c].split()) >= 3), fits[0] if fits else None)  # the first full phrase
    return _clause(head[:best], max_words) if best is not None else ""


def _strip_parens(s: str) -> str:
    return re.sub(r"\s*[(\[][^()\[\]]*[)\]]", "", s).strip()


def _clause(s: str, max_words: int = 9) -> str:
    """The words up to the first clause break, at most max_words of them (a question asks about one thing)."""
    s = _CLAUSE.split(s, maxsplit=1)[0].strip(" .;,")
    if len(s.split()) > max_words and " and " in s:
        s = s.split(" and ")[0]  # 'copied to the archive and kept for 90 days': the first of the two
    ws = s.split()
    if len(ws) > max_words:
        return ""
    while ws and ws[-1].lower() in ("and", "or", "the", "a", "an", "of", "in", "to", "with", "for", "on", "at", "by"):
        ws = ws[:-1]
    return " ".join(ws)


def _person_like(title: str) -> bool:
    ws = title.split()
    return 2 <= len(ws) <= 4 and all(w[:1].isupper() for w in ws) and not any(w in _ORG for w in ws)


_NUMBER_WORDS = frozenset("two three four five six seven eight nine ten eleven twelve several many few some most".split())
_GENERIC_HEAD = frozenset(("change changes number rate rates level levels effect effects role result results increase "
                           "decrease balance feasibility difference ratio proportion amount size risk association "
                           "relationship mechanism process response value values version form fallback output data "
                           "method methods approach model system phase stage period part analysis study studies "
                           "patients participants subjects group groups sample samples findings outcome outcomes "
                           "authors team way case cases question issue problem "
                           # what a README says of its own package: which package's, the reader cannot tell
                           "artifacts artifact attribute attributes interface function functions class classes module "
                           "modules package library option options setting settings file files command tool api cli "
                           "release releases helpers helper").split())
_ADVERB = frozenset("now later also then still often never once soon again already first subsequently eventually "
                    "initially originally recently currently".split())
_PARTICIPLE_ONLY = frozenset("based located called named known situated associated related compared derived "
                             "aged given including excluding using".split())
_WH = frozenset("how what why when where whether which who whom whose".split())
_IMPERATIVE = frozenset(("see use run install create specify parse annotate add set call pass import check read note "
                         "make get try open visit click refer define build write load configure enable disable "
                         "remove replace pip clone download follow copy change update "
                         # a changelog's entries open with their verb: 'Updated X', 'Raise Y when ...'
                         "updated added fixed removed changed improved raise raised deprecated dropped bumped renamed "
                         "moved allow allowed avoid avoided ensure ensured prevent prevented fix support "
                         "internal").split())


def resolve_subject(subj: str, title: str, names: frozenset[str] | None = None) -> str:
    """The subject a question can name: a pronoun or 'the film' becomes the document's title; '' when none fits.
    With `names` (the passage's proper names), a one-word subject must be one of them, code or an acronym: a
    capitalised first word alone ('Takes', 'Parse') is as often an imperative or a verb as a name."""
    s = _HEADER.sub("", subj.strip(" \"“”'«»"))
    low = s.lower()
    w0 = low.split()[0] if low.split() else ""
    if w0 in _IMPERATIVE or w0 in _WH or w0[:1].isdigit() or ". " in s or \
            any(w in ("is", "are", "was", "were", "be", "been", "has", "have", "had") for w in low.split()) or \
            (w0.endswith("ing") and len(s.split()) > 1) or \
            low.split()[-1:] and low.split()[-1] in _PREP_AFTER | {"of", "by", "as"}:
        return ""  # 'Parse Python docstrings', '20+ loss functions', 'codes. `x`', 'Maintaining pypdf'
    if names is not None and len(s.split()) == 1 and low not in _PRONOUN and s not in names and not (
            "`" in s or "_" in s or re.search(r".[A-Z]", s)):
        return ""
    gm = _GENERIC.match(s)
    if low in _PRONOUN or gm and any(w.rstrip("'’s") in _ANAPHORIC for w in gm.group(1).lower().split()):
        if not title or len(title.split()) > 8:
            return ""
        if low in ("he", "she") and not _person_like(title) or low == "it":
            return ""  # 'He' in an article about a force is a person named elsewhere; 'it' seldom is the title
        tw = title.split()
        # 'Prime number' is a common noun, which cannot stand bare for 'it' ('What is prime number implied by?')
        return "" if len(tw) >= 2 and all(w.islower() for w in tw[1:]) else title
    ws = s.split()
    if not ws or s[:1].islower() or len(ws) > 8 or any(c in s for c in ",;:"):
        return ""
    if ws[-1].lower() in _ADVERB or ws[-1].lower().endswith("ly") and len(ws) > 1:
        return ""  # 'Lauser later': the subject ends before its adverb
    if ws[-1].lower() in ("the", "a", "an") or w0 in _NUMBER_WORDS:
        return ""  # 'the cell type responsible for the', 'eleven studies'
    head = re.split(r"\s(?:of|in|on|for|from|with|by|at|to)\s", s)[0].split()[-1].lower()
    if (w0 == "the" or s[1:2].islower()) and head in _GENERIC_HEAD and not re.search(r"[A-Z0-9`]", s[1:]):
        return ""  # 'the conformational change', 'the number of patches': which one, the reader cannot tell
    if ws[-1].lower() in _NOT_HEAD or any(w.lower() in _PRESENT for w in ws) or any(
            w.lower() in ("that", "which", "whether", "whose", "who") or w in _PAST or w in _REPORTING for w in ws[1:]) or \
            any(c.isdigit() for c in ws[0]):
        return ""  # 'The main', 'Animal studies suggest that estrogen': not a noun phrase
    if ws[0].lower().strip(",") in _NOT_SUBJECT:
        return ""  # 'this method', 'we', 'because ...': not a thing a reader can look up
    if ws[0] == "The" and (not title or title.lower() not in s.lower()) and any(w[:1].isupper() for w in ws[1:]):
        return "the" + s[3:]  # 'The Osprey gateway' in mid-question; a title ('The Pelican Rig') keeps its capital
    if ws[0].lower() == "the" and not any(w[:1].isupper() or any(c.isdigit() for c in w) for w in ws[1:]):
        if any(w.lower().rstrip("'’s") in _ANAPHORIC for w in ws[1:3]):
            return ""  # 'the film's score', 'the company': the document's own topic, named elsewhere
        return "the" + s[3:]
    if any(w[:1].islower() and lemma(w) and ws[i - 1].lower() not in ("the", "a", "an", "so-called")
           for i, w in enumerate(ws[1:], 1)):
        return ""  # 'Ratzel believed expansion': a clause, not a noun phrase
    if len(ws) >= 2 and ws[0][1:].islower() and ws[1][:1].islower() and not title.startswith(ws[0]) \
            and not ws[0].endswith(("'s", "’s")) and not _nationality(ws[0]):  # 'Polignac's', 'British' keep capitals
        return s[:1].lower() + s[1:]  # 'Cell surface receptors' opens a sentence: a common noun, not a name
    return s


_NOT_HEAD = frozenset("following above below latter former main major primary key most other same first second new several many such overall".split())
_REPORTING = frozenset("show showed shown suggest suggested indicate indicated demonstrate demonstrated reveal revealed "
                       "find found confirm confirmed report reported".split())
_OBJECT_START = frozenset("the a an their its his her two three four five several many all both".split())
_NOT_SUBJECT = frozenset((
    "much part most few first together using finally thus this that these those they its his her their a an we i you our us my your here there because although if whereas "
    "though unless once however in on at after before during since when while as by from with for of to each both "
    "all some many most one also but and then thus").split())




def _nationality(word: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][a-z]+(?:an|ian|ese|ish|ch|i|ic|ean|ine|ss|sh)(?:-[A-Z][a-z]+)?", word))


_FRONTED = re.compile(r"^((?:In|On|By|During|After|Before|Since|From|Between|At|Under|Within|Throughout|Until)\s+"
                      r"[^,;:]{2,50}),\s+(?=[A-Z])")
_SUBCLAUSE = re.compile(r"^(?:While|Although|Though|Whereas|As|Once|When|Because)\s+[^,;:]{3,90},\s+(?=[A-Z])")
_MID_ADVERB = re.compile(r"^((?:\S+\s+){0,5}?\S+)\s+(?:also|still|later|then|often|never|soon|again|already|eventually|"
                         r"subsequently|initially|originally|generally|usually|first|finally)\s+(?=[a-z]+ed\b|[a-z]+s\b|"
                         r"(?:became|began|won|made|took|gave|held|led|left|built|wrote|found|sold|bought)\b)")
_DISCOURSE = re.compile(r"^(?:likewise|however|moreover|furthermore|additionally|also|eventually|meanwhile|instead|"
                        r"nevertheless|nonetheless|today|currently|originally|initially|later|subsequently|"
                        r"historically|traditionally|generally|typically|usually|often|similarly|consequently|"
                        r"therefore|hence|notably|finally|thus|indeed|in addition|in particular|in practice|"
                        r"for example|for instance|as a result|at first|in fact),?\s+(?=[A-Za-z])", re.I)


def english_drafts(sentence: str, title: str, *, names: frozenset[str] = frozenset()) -> list[Draft]:
    """Every question form the sentence supports (none when its subject cannot be named). `names`: single words
    the passage uses as names (capitalised mid-sentence), which may be a question's answer ('Who provided ...?')."""
    out: list[Draft] = []
    raw = " ".join(sentence.split())
    if not raw.rstrip("\"'”’)").endswith((".", "!", "?")):
        return out  # a heading or a list fragment ('Deep neural networks built on ...') is no sentence to ask about
    lead = _DISCOURSE.match(raw)
    if lead:  # 'Likewise each deacon ...', 'However, the Rhine ...': the fact is the clause after the adverb
        raw = raw[lead.end():]
        raw = raw[:1].upper() + raw[1:]
    sub = _SUBCLAUSE.match(raw)
    if sub:  # 'While studying law in England, Iqbal became ...': the main clause carries the fact
        raw = raw[sub.end():]
    adv = _MID_ADVERB.match(raw)
    if adv:  # 'Britain also claimed X' -> 'Britain claimed X'
        raw = adv.group(1) + " " + raw[adv.end():]
    front = _FRONTED.match(raw)
    if front:  # 'In 1830, France took ...' -> 'France took ... in 1830': the subject first, as the forms expect
        body = raw[front.end():].rstrip()
        end = body[-1:] if body[-1:] in ".!?" else ""
        raw = f"{body[:len(body) - len(end)]} {front.group(1)[:1].lower()}{front.group(1)[1:]}{end}"
    claim = re.match(r"^(?:(?:here|in this study|finally|thus|together|overall|in conclusion|moreover|in summary),?\s+)?"
                     r"(?:we|these (?:results|data|findings)|our (?:results|data|findings)|this study|this)\s+"
                     r"(?:\w+\s+)?(?:show|showed|shows|found|find|demonstrate|demonstrated|demonstrates|report|"
                     r"reported|observed|observe|identify|identified|conclude|concluded|suggest|suggests|indicate|"
                     r"indicates|reveal|revealed|reveals|establish|established)\s+that\s+(.{12,})$", raw, re.I)
    if claim:  # "We show that X increases Y": the claim is the sentence to ask about
        inner = claim.group(1)
        return [replace(d, sentence=sentence) for d in english_drafts(inner[:1].upper() + inner[1:], title)]
    # birth and death from the parenthesis after the subject: "X (born 12 May 1950) is ...", "X (1732 – 1794) was"
    head = re.match(rf"^(?P<subj>{NAME})\s*[(\[](?P<par>[^)\]]*)[)\]]", raw)
    if head:
        subj = resolve_subject(head.group("subj"), title)
        par = head.group("par")
        if subj:
            b = re.search(rf"\bborn\s+(?:on\s+)?({DATE})", par)
            d = re.search(rf"\b(?:died|d\.)\s+(?:on\s+|after\s+|before\s+|c\.\s*)?({DATE})", par)
            span = re.search(rf"^\s*(?:c\.\s*)?({DATE})\s*[–-]\s*(?:c\.\s*)?({DATE})\s*$", par)
            if span:
                b, d = span, span
                out.append(Draft("When was {S} born?", subj, span.group(1), "when", "born", sentence=sentence))
                out.append(Draft("When did {S} die?", subj, span.group(2), "when", "died", sentence=sentence))
            else:
                if b:
                    out.append(Draft("When was {S} born?", subj, b.group(1), "when", "born", sentence=sentence))
                if d:
                    out.append(Draft("When did {S} die?", subj, d.group(1), "when", "died", sentence=sentence))
    s = _strip_parens(raw).rstrip(".!? ")
    dflt = re.search(r"(?:^|\s)(`?[\w.-]*[A-Z_.][\w.-]*`?|the\s+[a-z]+(?:\s+[a-z]+)?),?\s+(?:which\s+)?defaults?\s+to\s+"
                     r"(\S+(?:\s+[a-z%]+)?)", s)
    if dflt:
        out.append(Draft("What does {S} default to?", dflt.group(1), dflt.group(2).rstrip(".,;"), "default",
                         "default", sentence=sentence))
    m = re.match(r"^(?P<subj>.{2,90}?)\s+(?P<aux>is|was|are|were|has|had|have)\s+(?P<rest>.+)$", s)
    ka = m and re.match(r"^(?:A|An)\s+([a-z][\w -]{5,80})$", m.group("subj")) and re.match(
        r"^(?:(?:also|commonly|often|usually)\s+)?(?:known\s+as|called|referred\s+to\s+as)\s", m.group("rest"))
    if ka and m:  # 'A simple method of verifying primality is known as trial division': What is a ... known as?
        phrase = re.match(r"^((?:(?:also|commonly|often|usually)\s+)?(?:known\s+as|called|referred\s+to\s+as))\s+(.+)$",
                          m.group("rest"))
        name = _clause(phrase.group(2), 8) if phrase else ""
        if phrase and name:
            subj_a = m.group("subj")[:1].lower() + m.group("subj")[1:]
            return [Draft(f"What {m.group('aux')} {{S}} {phrase.group(1)}?", subj_a, name, "what", "name",
                          sentence=sentence)]
    if m:
        subj = resolve_subject(m.group("subj"), title, names)
        aux, rest = m.group("aux"), m.group("rest")
        past = aux in ("was", "were", "had")
        if subj:
            out += _aux_forms(subj, aux, rest, past, sentence)
            return out
    ws = s.split()
    at = next((i for i in range(1, min(len(ws) - 1, 10)) if ws[i].islower() and (ws[i] in _PAST or ws[i] in _PRESENT or (
        lemma(ws[i]) and (ws[i + 1].lower() in _OBJECT_START or ws[i + 1][:1].isdigit() or ws[i + 1] in _PREP_AFTER)
        or present_base(ws[i]) and (ws[i + 1].lower() in ("the", "a", "an", "its", "their", "this", "these")
                                    or present_base(ws[i]) in _INTRANSITIVE and ws[i + 1] in _PREP_AFTER)
        and i <= 3 and "of" not in ws[:i]))), None)
    if at is not None and (ws[at - 1].lower() in _NOT_SUBJECT or ws[0].lower().endswith("ing")
                           or ws[0].lower().strip(",") in _NOT_SUBJECT):
        at = None  # 'ifenprodil and related ...', 'Using engineered mice ...': no subject before the verb
    m = re.match(r"^(?P<subj>\S+(?:\s+\S+){%d})\s+(?P<verb>\S+)\s+(?P<rest>.+)$" % (at - 1), s) if at else None
    if m and re.search(r"\b(?:is|are|was|were)\b", _CLAUSE.split(m.group("rest"), maxsplit=1)[0]):
        m = None  # 'ONNX released packages are published ...': the verb found was a modifier
    if m and m.group("verb") in _PARTICIPLE_ONLY:
        m = None  # 'predictions of X based on Y': a participle after its noun, no finite verb
    if m and lemma(m.group("verb")):
        subj = resolve_subject(m.group("subj"), title, names)
        if subj:
            out += _past_forms(subj, m.group("verb"), m.group("rest"), sentence, raw_subject=m.group("subj"),
                               names=names)
    elif m and (m.group("verb") in _PRESENT or present_base(m.group("verb"))):
        subj = resolve_subject(m.group("subj"), title, names)
        verb = m.group("verb")
        base = _PRESENT.get(verb) or present_base(verb)
        rest = m.group("rest")
        obj = noun_phrase(rest, 8)
        prep = rest.split()[0] if rest.split() and rest.split()[0] in _PREP_AFTER else ""
        named = subj and (subj.strip() in names or len(subj.split()) >= 2) and re.fullmatch(rf"{NAME}", subj.strip())
        if subj and obj and (2 <= len(subj.split()) <= 6 or named) and not subj.lower().startswith(("we ", "our ", "i ")):
            last = re.split(r"\s(?:of|in|on|for|from|with|by|at|to)\s", subj)[0].split()[-1].lower()  # the head noun
            plural = " and " in subj or (last.endswith("s") and not last.endswith(("ss", "us", "is", "sis")))
            do = "do" if plural else "does"
            if base in _SAYING:
                pass  # 'Hayri Abaza argues ...': the claim, not the arguing, is the fact
            elif prep and len(obj.split()) >= 2:  # 'flows through the Rhine Gorge' -> What does X flow through?
                out.append(Draft(f"What {do} {{S}} {base} {prep}?", subj, " ".join(obj.split()[1:]), "what",
                                 f"verb:{base}:{prep}", sentence=sentence))
            elif not prep:
                out.append(Draft(f"What {do} {{S}} {base}?", subj, obj, "what", f"verb:{base}", sentence=sentence))
        if named and obj and len(obj.split()) >= 2 and base not in _SAYING:  # the subject is the answer: 'Which ... provides X?'
            who = "What" if re.search(r"[\"“”']", m.group("subj")) else _who(subj)
            out.append(Draft(f"{who} {verb} {obj}?", subj, subj, "who", f"agent:{base}", sentence=sentence))
    return out


# verbs whose object follows a preposition ('flows through', 'consists of'): the only generic -s verbs read before one
_INTRANSITIVE = frozenset(("flow run lie extend stretch belong refer consist depend rely lead point apply correspond "
                           "contribute respond bind interact act occur arise reside participate result rise fall "
                           "border drain empty originate").split())
_SAYING = frozenset("argue believe claim say state note suggest think write report assert contend hold".split())
_PREP_AFTER = frozenset("through into from with to on in at over between across along about for against among "
                        "within without".split())
_NOT_PRESENT = frozenset(("is has was does this its his thus always perhaps news series species means physics "
                          "mathematics politics economics as us yes less unless across process basis analysis "
                          "status bus gas plus versus various previous famous serious numerous").split())
_ORG = frozenset(("University College School Church Society Company Corporation Parliament Council Government Court "
                  "Museum Institute Association Bank Army Navy Union Empire Kingdom Republic State States City River "
                  "Island Party Act Treaty War League Committee Commission Assembly Agency Department Ministry "
                  "Foundation Group Team Club Library Press Times Theorem Conjecture Law Hospital Airport "
                  "Station Centre Center Office Organization Organisation Federation Conference").split())


def present_base(verb: str) -> str:
    """The base form of a third-person present verb ('flows' -> 'flow', 'carries' -> 'carry'); '' when the word
    is not one we can tell (a plural noun looks the same, so a caller also wants a determiner or preposition next)."""
    v = verb.lower()
    if v != verb or len(v) < 4 or not v.endswith("s") or v in _NOT_PRESENT or v.endswith(("ss", "us", "is", "ous")):
        return ""
    if v.endswith("ies"):
        return v[:-3] + "y"
    if v.endswith(("shes", "ches", "xes", "zes", "sses", "oes")):
        return v[:-2]
    return v[:-1]


def _who(name: str) -> str:
    """'Who' for a person's name, 'What' for an organisation, place or work ('Oxford University', 'the Act')."""
    return "What" if any(w in _ORG for w in name.split()) or name[:1].islower() else "Who"


def _aux_forms(subj: str, aux: str, rest: str, past: bool, sentence: str) -> list[Draft]:
    out: list[Draft] = []
    a = aux.capitalize()
    # agent: "... directed by Henry Hathaway" -> Who directed X? (and the role for a multi-hop question)
    for mm in re.finditer(rf"\b([a-z]+)\s+by\s+({NAME})", rest):
        verb = mm.group(1)
        if verb in _BY and not _MONTH_WORD.match(mm.group(2).split()[0]):
            simple, noun = _BY[verb]
            out.append(Draft(f"Who {simple} {{S}}?", subj, mm.group(2), "who", verb,
                             f"the {noun} of {{S}}" if noun else "", sentence))
            break
    # any regular passive with its agent: "were ordained by John Wesley" -> Who ordained X?; "was created by
    # erosion" -> What created X?
    ag = re.match(r"^(?:(?:also|first|later|originally|largely|mainly)\s+)?([a-z]{4,}ed)\s+by\s+(.{3,})$", rest)
    if ag and not out and lemma(ag.group(1)) and ag.group(1) not in _PARTICIPLE_ONLY:
        who = re.match(rf"^(?:the\s+)?({NAME})(?=$|[\s,.;])", ag.group(2))
        agent = who.group(1) if who and not _MONTH_WORD.match(who.group(1).split()[0]) else noun_phrase(ag.group(2), 6)
        if agent and not re.match(r"^(?:the|a|an)$", agent):
            out.append(Draft(f"{_who(agent) if who else 'What'} {ag.group(1)} {{S}}?", subj, agent,
                             "who" if who else "what", f"agent:{lemma(ag.group(1))}", sentence=sentence))
    # a work and its year: "a 1937 American adventure film" -> When was X released?
    w = re.match(r"^(?:a|an)\s+(\d{4})\s+(.{0,60}?)\b(" + "|".join(_WORK) + r")\b", rest)
    if w:
        out.append(Draft(f"When was {{S}} {_WORK[w.group(3)]}?", subj, w.group(1), "when", "year", sentence=sentence))
    # nationality and occupation of a person: "a Swedish politician and statesman"
    p = re.match(r"^(?:a|an)\s+(?:former\s+|retired\s+|professional\s+)?([A-Z][a-z]+(?:-[A-Z][a-z]+)?)\s+"
                 r"(?:former\s+|professional\s+|retired\s+)?([a-zA-Z][\w -]{2,50})", rest)
    if p and _nationality(p.group(1)):
        words_ = p.group(2).split()
        noun = next((x for x in words_ if x in _PERSON), "")
        if noun:
            out.append(Draft(f"What nationality {aux} {{S}}?", subj, p.group(1), "which", "nationality",
                             sentence=sentence))
            job = _clause(" ".join(words_), 6)
            if job:
                out.append(Draft(f"What {'did' if past else 'does'} {{S}} do for a living?", subj, job, "what",
                                 "occupation", sentence=sentence))
        elif words_ and any(x in _WORK for x in words_[:4]):
            out.append(Draft(f"Which country {aux} {{S}} from?", subj, p.group(1), "which", "country",
                             sentence=sentence))
    # a name: "X is known as Y", "X was called Y" -> What is X known as?
    ka = re.match(r"^((?:also\s+|commonly\s+|often\s+|usually\s+|sometimes\s+|generally\s+)?(?:known|referred\s+to|"
                  r"called|nicknamed|named|described)\s+as|called|nicknamed|named)\s+(.{3,})$", rest)
    if ka and not re.match(r"^(?:after|for|by|in)\b", ka.group(2)):
        name = _clause(ka.group(2), 8)
        if name:
            out.append(Draft(f"What {aux} {{S}} {' '.join(ka.group(1).split())}?", subj, name, "what", "name",
                             sentence=sentence))
    # the present perfect: "X has supported the temperance movement" -> What has X supported?
    pf = re.match(r"^((?:also\s+|long\s+|recently\s+|since\s+)?([a-z]{3,}(?:ed|en|wn|un|lt|ght|pt)))\s+(.{3,})$", rest)
    if pf and aux in ("has", "have", "had") and not out and pf.group(2) not in ("been", "seen", "often", "taken"):
        obj = noun_phrase(pf.group(3), 8)
        if obj and len(obj.split()) >= 2 and re.match(r"^(?:the|a|an|[A-Z0-9]|[a-z]+s\b)", obj) and \
                not re.match(r"^(?:that|to|in|on|at|from|with|for|as|by|after)\b", obj):
            out.append(Draft(f"What {aux} {{S}} {pf.group(1)}?", subj, obj, "what", f"perfect:{pf.group(2)}",
                             sentence=sentence))
    # an adjective or noun with its preposition: "X was subject to Y", "X is part of Y" -> What was X subject to?
    ap = re.match(r"^((?:also\s+|largely\s+|mainly\s+|often\s+)?(?!(?:one|all|each|most|some|none|a|an|the|not|"
                  r"no|also|still|used|able|likely|due|about|able|known|called|named|located|based|born)\b)[a-z]{3,})\s+"
                  r"(to|of|for|with|from|in|on)\s+(.{3,})$", rest)
    if ap and not out and not ap.group(1).endswith(("ed", "ing")) and not (ap.group(1).endswith("er") and
                                                                           ap.group(2) == "in"):
        obj = _clause(ap.group(3), 8)
        if obj and len(obj.split()) <= 8 and (ap.group(2) != "to" or re.match(r"^(?:the|a|an|[A-Z0-9])", obj)):
            out.append(Draft(f"What {aux} {{S}} {ap.group(1)} {ap.group(2)}?", subj, obj, "what",
                             f"{ap.group(1).split()[-1]}:{ap.group(2)}", sentence=sentence))
    # a superlative or ordinal: "X is the largest city in Y" -> What is the largest city in Y? (X the answer)
    sup = re.match(r"^(the\s+(?:[a-z]+est|most\s+[a-z]+|first|second|third|last|only|main|oldest|largest)\s+[a-z][\w -]{2,60})$",
                   _clause(rest, 12) or "")
    if sup and aux in ("is", "was") and (subj[:1].isupper() or len(subj.split()) >= 2):
        out.append(Draft(f"What {aux} {sup.group(1)}?", subj, subj, "which", "superlative", sentence=sentence))
    loc = re.match(rf"^((?:[a-z]+ly\s+)?(?:located|based|held|headquartered|situated|founded|born|buried|built|"
                   rf"established|formed|created|signed|fought|played|filmed|recorded)\s+)(?:in|at|near)\s+(?:the\s+)?({NAME})",
                   rest)
    if loc and not _MONTH_WORD.match(loc.group(2).split()[0]) and "born" not in loc.group(1):
        out.append(Draft(f"Where {aux} {{S}} {loc.group(1).strip()}?", subj, loc.group(2), "where",
                         f"place:{loc.group(1).split()[-1]}", sentence=sentence))
    # a definition: "Project Alpha is a retrofit of ..." -> What is Project Alpha? (the generator caps their share)
    if not out and aux in ("is", "are") and re.match(r"^(?:a|an)\s+[a-z]", rest) and len(rest.split()) >= 3:
        person = _person_like(subj) and any(w.strip(",.") in _PERSON or w == "member" for w in rest.split()[:8])
        out.append(Draft(f"{'Who' if person else 'What'} {aux} {{S}}?", subj, _clause(rest, 12) or rest,
                         "definition", "definition", sentence=sentence))
    # a place: "a village in Poland" -> Where is X?
    pl = re.match(rf"^(?:a|an|the)\s+(?:[a-z-]+\s+){{0,3}}(?:{_PLACE_NOUN})\s+(?:in|on|near)\s+(?:the\s+)?({NAME})",
                  rest)
    if pl:
        out.append(Draft(f"Where {aux} {{S}}?", subj, pl.group(1), "where", "location", sentence=sentence))
    # family: "the son of John Wallop" -> Whose son was X?
    rel = re.search(rf"\b(son|daughter|wife|husband|brother|sister|widow|grandson|granddaughter|nephew|niece)\s+of\s+"
                    rf"(?:the\s+)?(?:[a-z]+\s+){{0,2}}({NAME})", rest)
    if rel:
        out.append(Draft(f"Whose {rel.group(1)} {aux} {{S}}?", subj, rel.group(2), "who", f"rel:{rel.group(1)}",
                         _REL_ROLE.get(rel.group(1), ""), sentence))
    # born in / died in a place
    bp = re.search(rf"\bborn\s+(?:in|at)\s+({NAME})", rest)
    if bp and not _MONTH_WORD.match(bp.group(1).split()[0]) and not bp.group(1)[:1].isdigit():
        out.append(Draft("Where was {S} born?", subj, bp.group(1), "where", "birthplace", sentence=sentence))
    # the default: "X is 30 seconds by default"
    if re.search(r"\bby default\b", rest) and aux in ("is", "are", "was", "were") and not re.search(
            r"\b(?:not|should|can|will|may|must)\b", rest):
        val = _clause(re.sub(r"\s*\bby default\b\s*", " ", rest).strip(), 6)
        if val:
            out.append(Draft(f"What {aux} {{S}} by default?",
                             subj, val, "default", "default", sentence=sentence))
    # a date in a passive or adjectival predicate: "was founded in 1990 by ..." -> When was X founded?
    if not out:
        dm = re.search(rf"\s*\b(?:in|on|since|during|from|until)\s+({DATE})\b", rest)
        if dm and re.match(r"^(?:[a-z]+ed|[a-z]+en|born|built|held|made|won|first|last|officially)\b", rest):
            core = _clause((rest[: dm.start()] + " " + rest[dm.end():]).strip(), 8)
            if core:
                out.append(Draft(f"When {aux} {{S}} {core}?", subj, dm.group(1), "when", f"date:{core.split()[0]}",
                                 sentence=sentence))
        num = re.search(r"\b(\d[\d,.]*)\s+((?:[a-z]+\s+){0,2}[a-z]{3,}s)\b", rest)
        if aux in ("has", "had", "have") and num:
            out.append(Draft(f"How many {num.group(2)} {'did' if past else 'does'} {{S}} have?", subj,
                             num.group(0), "how many", f"count:{num.group(2)}", sentence=sentence))
        why = re.search(r"\b(?:because(?:\s+of)?|due to|owing to)\b\s+(.{5,})", rest)
        if why:
            core = _clause(rest[: why.start()], 8)
            if core and not re.search(r"\b(?:that|whether)\b", core):
                out.append(Draft(f"Why {aux} {{S}} {core}?", subj, why.group(1), "why", "why", sentence=sentence))
        by = re.match(r"^((?:[a-z]+ly\s+)?[a-z]+ed)\s+by\s+(?:about\s+|approximately\s+|nearly\s+)?(\d[\d.,]*\s?%)", rest)
        if by and aux in ("is", "was", "are", "were"):
            out.append(Draft(f"By how much {aux} {{S}} {by.group(1)}?", subj, by.group(2), "how much",
                             f"amount:{by.group(1)}", sentence=sentence))
        pp = re.match(r"^((?:(?:not|also|significantly|strongly|highly|still|often|more|less|further|"
                      r"independently|inversely|positively|negatively|closely|frequently|commonly|widely|mainly|"
                      r"primarily|largely|directly)\s+)*[a-z]+ed)\s+(with|to|by|for|from|on|into|as|through|via)\s+"
                      r"(.{3,})", rest)
        if pp and not out and aux in ("is", "was", "are", "were"):
            obj = _clause(pp.group(3), 8)
            if obj and not re.match(r"^\d", obj) and (pp.group(2) != "to" or re.match(r"^(?:the|a|an|[A-Z])", obj)) \
                    and not (pp.group(2) == "to" and pp.group(1).split()[-1] in ("used", "required", "needed", "designed",
                                                                                  "expected", "thought", "believed")):
                out.append(Draft(f"What {aux} {{S}} {pp.group(1)} {pp.group(2)}?", subj, obj, "what",
                                 f"{pp.group(1).split()[-1]}:{pp.group(2)}", sentence=sentence))
    return out


_D_ONLY = ("eed", "ated", "ized", "ised", "uced", "ired", "ured", "ored", "uded", "ided", "ved", "ged", "ced", "used",
           "ased", "osed", "ued", "ited", "oted", "uted", "iled", "ared", "ered")


def lemma(verb: str) -> str:
    """The base form of a simple past verb ('' when it is not one): the table first, then the regular -ed rules
    ('captured' -> 'capture', 'planned' -> 'plan', 'carried' -> 'carry', 'attacked' -> 'attack')."""
    if verb in _PAST:
        return _PAST[verb]
    if len(verb) < 5 or not verb.endswith("ed") or verb in ("needed", "indeed", "proceed", "exceed", "succeed"):
        return ""
    if verb.endswith("ied"):
        return verb[:-3] + "y"
    if verb.endswith(("ered", "ited")) and not verb.endswith(("ffered", "ttered")):
        return verb[:-2]  # 'entered', 'visited', 'offered'
    if re.search(r"([bdgklmnprt])\1ed$", verb) and not verb.endswith(("lled", "ssed")):
        return verb[:-3]  # 'planned', 'stopped'
    if verb.endswith(("aired", "eared", "oared", "eined")):
        return verb[:-2]  # 'impaired', 'appeared'
    if verb.endswith(_D_ONLY):
        return verb[:-1]
    return verb[:-2]


def _past_forms(subj: str, verb: str, rest: str, sentence: str, *, raw_subject: str,
                names: frozenset[str] = frozenset()) -> list[Draft]:
    out: list[Draft] = []
    base = lemma(verb)
    if verb in _REPORTING and re.match(r"^(?:that|a|an)?\s*\w+\s+that\b|^that\b", rest):
        return out  # 'analysis showed that ...': the claim, not the showing, is the fact (asked elsewhere)
    dm = re.search(rf"\s*\b(?:in|on|since|during|from|until)\s+({DATE})\b", rest)
    if dm:
        core = _clause((rest[: dm.start()] + " " + rest[dm.end():]).strip(), 7)
        if core or base in ("die", "retire", "marry", "emigrate", "debut", "premiere", "resign", "return"):
            out.append(Draft(f"When did {{S}} {base}{' ' + core if core else ''}?", subj, dm.group(1), "when",
                             f"date:{base}", sentence=sentence))
    pm = re.search(rf"\s*\b(?:in|at)\s+(?:the\s+)?({NAME})", rest)
    if pm and not _MONTH_WORD.match(pm.group(1).split()[0]) and not dm and not _nationality(pm.group(1).split()[0]) \
            and not any(c.isdigit() for c in subj) and all(
            re.match(r"^[A-Z][a-zà-ÿ]", w) for w in pm.group(1).split() if w[:1].isupper()):
        core = _clause((rest[: pm.start()] + " " + rest[pm.end():]).strip(), 6)
        out.append(Draft(f"Where did {{S}} {base}{' ' + core if core else ''}?", subj, pm.group(1), "where",
                         f"place:{base}", sentence=sentence))
    pct = re.match(r"^(?:by\s+)?(?:about\s+|nearly\s+|almost\s+)?(\d[\d.,]*\s?(?:%|percent))", rest)
    if pct:
        out.append(Draft(f"By how much did {{S}} {base}?", subj, pct.group(1), "how much", f"amount:{base}",
                         sentence=sentence))
    num = re.match(r"^(?:a total of\s+|over\s+|more than\s+|about\s+)?(\d[\d,.]*)\s+([a-z]{3,}s)\b", rest)
    if num:
        out.append(Draft(f"How many {num.group(2)} did {{S}} {base}?", subj, num.group(1), "how many",
                         f"count:{num.group(2)}", sentence=sentence))
    why = re.search(r"\b(?:because(?:\s+of)?|due to|owing to|after)\b\s+(.{5,})", rest)
    if why and not out:
        core = _clause(rest[: why.start()], 7)
        out.append(Draft(f"Why did {{S}} {base}{' ' + core if core else ''}?", subj, why.group(1), "why", "why",
                         sentence=sentence))
    if not out and base not in ("die", "live", "work", "appear", "compete", "survive", "retire", "emigrate",
                                "migrate", "settle", "return", "debut", "premiere"):
        obj = noun_phrase(rest, 8)
        pv = re.match(r"^(against|into|from|with|for|about|on|to|through|toward|towards|across|along)\s+(.+)$", rest)
        if obj and len(obj.split()) >= 2 and not re.match(r"^(?:that|to|in|on|at|from|with|for|as|by|after|against|"
                                                          r"into|about|toward|towards|between|across)\b", obj) \
                and base not in _SAYING:
            out.append(Draft(f"What did {{S}} {base}?", subj, obj, "what", f"verb:{base}", sentence=sentence))
        elif pv and base not in _SAYING:  # 'warned against the dangers ...' -> What did X warn against?
            pobj = noun_phrase(pv.group(2), 8)
            if pobj and len(pobj.split()) >= 2 and re.match(r"^(?:the|a|an|[A-Z0-9])", pobj) and \
                    not pobj.lower().startswith(("account", "consideration")):  # 'take into account' is an idiom
                out.append(Draft(f"What did {{S}} {base} {pv.group(1)}?", subj, pobj, "what",
                                 f"verb:{base}:{pv.group(1)}", sentence=sentence))
    # the subject is the answer: "Roger Corman produced nine films" -> Who produced nine films?
    if re.fullmatch(rf"{NAME}", raw_subject.strip()) and (len(raw_subject.split()) >= 2 or raw_subject.strip() in names) \
            and base not in _SAYING:
        obj = noun_phrase(rest, 7)
        if obj and len(obj.split()) >= 2:
            out.append(Draft(f"{_who(raw_subject.strip())} {verb} {obj}?", raw_subject.strip(), raw_subject.strip(),
                             "who", f"agent:{base}", sentence=sentence))
    return out


# -- Russian -------------------------------------------------------------------------------------------------------
_RU_MONTH = "январ|феврал|март|апрел|ма[яй]|июн|июл|август|сентябр|октябр|ноябр|декабр"
_RU_DATE = re.compile(rf"\s*(?:\b[вс]\s+)?(?:\d{{1,2}}\s+(?:{_RU_MONTH})[а-я]*\s+)?(?:(?:{_RU_MONTH})[а-я]*\s+)?"
                      rf"\d{{3,4}}(?:\s*(?:году|года|год|г\.))?", re.I)
_RU_NAME = r"[А-ЯЁ][а-яё-]+(?:\s+[А-ЯЁ][а-яё-]+){0,3}"
_RU_VERB = re.compile(r"^[а-яё]+(?:л|ла|ло|ли|ет|ит|ют|ят|ется|ится|лся|лась|лись|ал|ял|ил)$")


def _ru_clean(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip(" ,;:.—–-")
    return s


_RU_ADJ = re.compile(r"^[а-яё-]+(?:ый|ий|ой|ая|яя|ое|ее|ые|ие|ого|его|ому|ему|ую|юю|ых|их|ым|им|ыми|ими)$")


_RU_PREP = frozenset("в во на по с со к ко из от до для при о об у за над под про без через между и а но".split())


def _ru_core(rest: str) -> str:
    """Who did what, without the modifiers after the verb ('Ольга Сомова построила испытательный стенд для
    насосов' -> 'Ольга Сомова построила стенд'), so the question asks about the fact without copying the sentence;
    '' when what precedes the verb is not a subject (a preposition, a pronoun)."""
    ws = rest.split()
    at = next((i for i, w in enumerate(ws) if _RU_VERB.match(w.lower())), None)
    if at is None or at == 0 or ws[0].lower() in _RU_PREP or ws[0].lower() in (
            "он", "она", "оно", "они", "это", "все", "всё", "этот", "эта", "эти", "тот", "та", "те"):
        return ""
    after: list[str] = []
    for w in ws[at + 1:]:
        if w.lower() in _RU_PREP and not after:
            after.append(w)
            continue
        if _RU_ADJ.match(w.lower()) and not w[:1].isupper():
            continue
        after.append(w)
        if not w[:1].isupper() and w.lower() not in _RU_PREP:
            break
    if after and after[-1].lower() in _RU_PREP:
        after = after[:-1]
    first = ws[0] if len(ws[0]) > 1 and ws[0][1:].islower() and at > 1 and ws[1][:1].isupper() else ws[0]
    return " ".join([first, *ws[1:at], ws[at], *after])


def russian_drafts(sentence: str, title: str) -> list[Draft]:
    """Когда / Кто / Где / Сколько / Что такое questions from one Russian sentence."""
    out: list[Draft] = []
    s = _strip_parens(" ".join(sentence.split())).rstrip(".!? ")
    first_clause = re.split(r"[;:]|,\s+(?:который|которая|которое|которые|где|когда|но|а)\b", s)[0]
    if len(first_clause.split()) > 16 or len(first_clause.split()) < 4:
        return out
    dm = _RU_DATE.search(first_clause)
    if dm and re.search(r"\d{4}", dm.group(0)):
        rest = _ru_core(_ru_clean(first_clause[: dm.start()] + " " + first_clause[dm.end():]))
        if rest and any(_RU_VERB.match(w) for w in rest.lower().split()) and len(rest.split()) >= 2:
            out.append(Draft("Когда {S}?", rest[:1].lower() + rest[1:] if not re.match(_RU_NAME, rest) else rest,
                             dm.group(0).strip(), "when", "date", sentence=sentence))
    m = re.match(rf"^({_RU_NAME})\s+([а-яё]+)\s+(.+)$", first_clause)
    if m and len(m.group(1).split()) >= 2 and _RU_VERB.match(m.group(2)):
        obj = _ru_clean(m.group(3))
        if 1 <= len(obj.split()) <= 8:
            out.append(Draft(f"Кто {m.group(2)} {{S}}?", obj, m.group(1), "who", f"agent:{m.group(2)}",
                             sentence=sentence))
    pm = re.search(rf"\s+во?\s+({_RU_NAME})", first_clause)
    verb_at = next((mm.start() for mm in re.finditer(r"[а-яё]+", first_clause) if _RU_VERB.match(mm.group(0))), None)
    if pm and not out and verb_at is not None and pm.start() > verb_at:  # the place follows its verb
        rest = _ru_core(_ru_clean(first_clause[: pm.start()] + " " + first_clause[pm.end():]))
        if len(rest.split()) >= 2 and any(_RU_VERB.match(w) for w in rest.lower().split()):
            out.append(Draft("Где {S}?", rest, pm.group(1), "where", "place", sentence=sentence))
    nm = re.search(r"\b(\d+)\s+([а-яё]{3,})", first_clause)
    if nm and (nm.group(1)[-1] in "056789" or nm.group(1)[-2:-1] == "1") and not dm:
        rest = _ru_core(_ru_clean(first_clause[: nm.start()] + " " + first_clause[nm.end():]))
        if len(rest.split()) >= 2 and any(_RU_VERB.match(w) for w in rest.lower().split()):
            out.append(Draft(f"Сколько {nm.group(2)} {{S}}?", rest[:1].lower() + rest[1:], nm.group(0), "how many",
                             f"count:{nm.group(2)}", sentence=sentence))
    d = re.match(rf"^({_RU_NAME}(?:\s+[а-яё]+){{0,2}})\s+[—–-]\s+(?:это\s+)?(.{{8,}})$", first_clause)
    if d and len(d.group(1).split()) <= 4 and d.group(1).split()[0].lower() not in (
            "более", "менее", "самый", "такой", "другой", "один", "одна", "это", "этот", "эта"):
        subj = d.group(1)
        ws = subj.split()
        if len(ws) >= 2 and ws[1][:1].islower():
            subj = subj[:1].lower() + subj[1:]  # 'Простое число' opens the sentence: a common noun
        out.append(Draft("Что такое {S}?", subj, d.group(2), "definition", "definition", sentence=sentence))
    return out


# -- code ----------------------------------------------------------------------------------------------------------
_DOC_LINE = re.compile(r"^\s*(?:///?|#|\*|\"\"\"|''')\s*(?P<doc>[A-Z][a-z]+s\b[^\n]{8,120})\n"
                       r"(?:\s*(?:///?|#|\*|@|#\[)[^\n]*\n)*"
                       r"[ \t]*(?:(?:pub(?:\([\w:]+\))?|public|private|static|async|export|unsafe)\s+)*"
                       r"(?P<kind>fn|def|func|function|class|struct|enum|trait|interface)\s+(?P<name>[A-Za-z_]\w*)",
                       re.M)
_KIND = {"fn": "function", "def": "function", "func": "function", "function": "function", "class": "class",
         "struct": "struct", "enum": "enum", "trait": "trait", "interface": "interface"}


_PY_DOC = re.compile(r"^[ \t]*(?:async\s+)?(?P<kind>def|class)\s+(?P<name>[A-Za-z_]\w*)[^\n]*:\s*\n[ \t]*[rub]?"
                     r"(?:\"\"\"|\'\'\')\s*(?P<doc>[A-Z][a-z]+\b[^\n]{8,120})", re.M)
_NOT_VERB = frozenset("the this a an if when for in on at to of it is are was were test tests helper helpers "
                      "internal default simple basic main new".split())


def _third_person(verb: str) -> str:
    v = verb.lower()
    if v.endswith("s") and not v.endswith(("ss", "us")):
        return v
    if v.endswith(("sh", "ch", "x", "z", "ss", "o")):
        return v + "es"
    if v.endswith("y") and v[-2:-1] not in "aeiou":
        return v[:-1] + "ies"
    return v + "s"


def code_drafts(text: str) -> list[Draft]:
    """From a doc comment over a definition (or a docstring under it): 'Which function parses ...?' (its name the
    answer)."""
    out: list[Draft] = []
    for m in [*_DOC_LINE.finditer(text), *_PY_DOC.finditer(text)]:
        doc = re.split(r"(?<=[a-z)])\.(?:\s|$)", m.group("doc").strip())[0].rstrip(".: ")
        kind = _KIND[m.group("kind")]
        verb, _, tail = doc.partition(" ")
        if tail and 2 <= len(tail.split()) <= 14 and verb.lower() not in _NOT_VERB and verb.isalpha() \
                and not re.search(r"[`{}()\[\]=<>\"]", tail) and tail[-1:].isalnum():
            out.append(Draft(f"Which {kind} {_third_person(verb)} {{S}}?", tail, m.group("name"), "which",
                             "code-doc", sentence=m.group(0).strip()))
    return out
