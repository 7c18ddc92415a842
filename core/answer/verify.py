"""The constraint check between a question and its evidence: what the question pins down (names, roles, years,
months, numbers, ordinals, superlatives, negation, direction, relative periods, the kind of value asked) and whether
a quoted sentence, read with its chunk, heading and document title, states each of them. English, Russian and
German (core.answer.german: German nouns are capitalised, so a German question's names are told from its nouns).

Why: the support model scores how well a sentence matches a question; a near miss (another year, office, role,
ordinal) matches almost as well as the real question and gets the neighbouring fact as its answer. A constraint the
evidence does not state is a reason to refuse, and the sibling the sentence states instead ('1998', 'Springfield') says
why. Everything here is pure: text in, typed verdicts out (no store, no model). The answer cache's guard reads
`question_constraints` too (two questions whose constraints differ never share an answer)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Literal, Sequence

from core.answer import german, wording
from core.answer.attributes import QUALIFIERS, asked_attribute, states_value, subject_names
from core.answer.support import sentence_contexts
from core.answer.translit import acronym_stated, english_of, name_stated
from core.answer.units import ITEM_LINE, units
from core.text import (EN_STOP, FIELD_LINE, RU_STOP, compound_parts, german_only, guess_language, sentence_spans,
                       tokenize)
from core.types import StageInfo

Met = Literal["met", "unmet", "unchecked"]
# (a name, the question, the quoted sentence with its title, all the evidence in another script) -> whether the
# evidence states the name (core.answer.crosslingual.NameFinder)
NameCheck = Callable[[str, str, str, str], bool]

_CYR = re.compile(r"[а-яёА-ЯЁ]")
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)

# -- lexicons: general English and Russian words, written for this check (no corpus read) ------------------------
_MONTHS_EN = ("january february march april may june july august september october november december").split()
_MONTHS_RU = ("январ феврал март апрел ма июн июл август сентябр октябр ноябр декабр").split()
_MONTH_RU = re.compile(r"^(январ|феврал|март|апрел|ма[йяюе]|июн|июл|август|сентябр|октябр|ноябр|декабр)[а-яё]*$")
_ORD_EN = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split())}
_ORD_EN.update({"twenty-first": 21, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "hundredth": 100})
_ORD_RU = (("перв", 1), ("втор", 2), ("трет", 3), ("четвёрт", 4), ("четверт", 4), ("пят", 5), ("шест", 6),
           ("седьм", 7), ("восьм", 8), ("девят", 9), ("десят", 10))
_ORD_RU_END = re.compile(r"(ый|ой|ий|ая|ое|ые|ого|ому|ом|ую|ых|ым|ыми|ой|ей|ье|ья|ьего|ьей|ьем|ьим|ьих)$")
_NUM_EN = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUM_EN.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                "hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12})
_NUM_RU = (("один", 1), ("одна", 1), ("одно", 1), ("два", 2), ("две", 2), ("двух", 2), ("три", 3), ("трёх", 3),
           ("трех", 3), ("четыр", 4), ("пять", 5), ("пяти", 5), ("шесть", 6), ("шести", 6), ("семь", 7),
           ("семи", 7), ("восем", 8), ("девят", 9), ("десят", 10), ("двадцат", 20), ("тридцат", 30), ("сорок", 40),
           ("сто", 100), ("тысяч", 1000), ("миллион", 10**6), ("миллиард", 10**9))
# German number words (general German; read in German text only: 'elf' and 'acht' are words of other languages too)
_NUM_DE = {w: i for i, w in enumerate(
    "null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn "
    "siebzehn achtzehn neunzehn zwanzig".split())}
_NUM_DE.update({"zwo": 2, "dreißig": 30, "vierzig": 40, "fünfzig": 50, "sechzig": 60, "siebzig": 70, "achtzig": 80,
                "neunzig": 90, "hundert": 100, "tausend": 1000, "million": 10**6, "millionen": 10**6,
                "milliarde": 10**9, "milliarden": 10**9, "dutzend": 12})
# Superlatives and their opposites: asked for the youngest, a sentence about the oldest is the neighbouring fact.
_SUPER_PAIRS = (("largest", "smallest"), ("eldest", "youngest"), ("fewest", "most"), ("furthest", "nearest"), ("biggest", "smallest"), ("oldest", "youngest"), ("oldest", "newest"),
                ("highest", "lowest"), ("longest", "shortest"), ("earliest", "latest"), ("first", "last"),
                ("fastest", "slowest"), ("best", "worst"), ("most", "least"), ("greatest", "least"),
                ("richest", "poorest"), ("strongest", "weakest"), ("heaviest", "lightest"), ("deepest", "shallowest"),
                ("tallest", "shortest"), ("hottest", "coldest"), ("warmest", "coldest"), ("closest", "farthest"),
                ("nearest", "farthest"), ("cheapest", "dearest"), ("widest", "narrowest"), ("thickest", "thinnest"),
                ("maximum", "minimum"), ("northernmost", "southernmost"), ("easternmost", "westernmost"),
                ("busiest", "quietest"), ("loudest", "quietest"), ("wettest", "driest"), ("warmest", "coolest"),
                ("hottest", "coolest"), ("brightest", "dimmest"), ("brightest", "darkest"), ("hardest", "easiest"),
                ("hardest", "softest"), ("densest", "sparsest"), ("commonest", "rarest"), ("cleanest", "dirtiest"),
                ("cheapest", "costliest"), ("happiest", "saddest"),
                ("крупнейш", "мельчайш"), ("старейш", "новейш"), ("высочайш", "низш"), ("наибольш", "наименьш"),
                ("лучш", "худш"), ("максимальн", "минимальн"), ("древнейш", "новейш"), ("длинн", "коротк"),
                ("стар", "молод"), ("больш", "маленьк"), ("высок", "низк"), ("ранн", "поздн"), ("богат", "бедн"),
                ("сильн", "слаб"), ("тяжел", "легк"), ("глубок", "мелк"), ("быстр", "медленн"))
_SUPER_SYN = {"largest": ("biggest", "greatest", "most populous"), "biggest": ("largest", "greatest"),
              "greatest": ("largest", "biggest", "most"), "smallest": ("tiniest", "least"),
              "oldest": ("earliest", "eldest", "first", "most ancient"), "eldest": ("oldest", "first"),
              "youngest": ("newest", "latest", "most recent"), "newest": ("latest", "youngest", "most recent"),
              "highest": ("tallest", "top", "loftiest", "greatest"), "tallest": ("highest",), "lowest": ("least", "bottom"),
              "earliest": ("first", "oldest"), "latest": ("most recent", "newest", "last"), "first": ("earliest",),
              "last": ("final", "latest"), "most": ("greatest", "largest", "highest"),
              "least": ("fewest", "lowest", "smallest"), "best": ("top", "finest", "greatest"), "worst": ("poorest",),
              "fastest": ("quickest",), "richest": ("wealthiest",), "wealthiest": ("richest",),
              # 'a minimum of four' is a bound: 'at least four' says it, 'at most' or 'up to' the contrary
              "maximum": ("most", "highest", "max", "at most", "up to"), "minimum": ("least", "lowest", "min", "at least"),
              "nearest": ("closest",), "closest": ("nearest",), "farthest": ("furthest",)}
_SUPER_EN = {w for p in _SUPER_PAIRS for w in p if not _CYR.search(w)} | {
    "most", "least", "best", "worst", "largest", "greatest", "busiest", "wealthiest", "highest", "main", "eldest", "tiniest", "quickest", "finest", "loftiest", "fewest",
    "furthest", "poorest", "final"} - {"main"}
_SAMYJ = re.compile(r"^(самы[йхем]|сама[яй]|самое|самого|самому|самую|самым|самыми|наи\w+)$")
_EIS = re.compile(r"^[а-яё]{3,}(ейш|айш)[а-яё]*$")
# Roles and titles (asked for the CTO, a sentence about the CFO answers another question).
_ROLES_EN = frozenset((
    "president vice-president chairman chairwoman chair chairperson ceo cto cfo coo cio cmo ciso founder co-founder "
    "cofounder owner director manager lead head chief editor secretary treasurer governor mayor senator minister "
    "premier chancellor king queen emperor empress prince princess pope bishop archbishop cardinal general admiral "
    "captain commander colonel coach principal dean professor rector provost architect engineer designer inventor "
    "author composer conductor producer judge justice ambassador consul spokesperson spokesman sheriff superintendent "
    "deputy assistant vp svp evp officer administrator coordinator supervisor chancellor sultan caliph khan shah tsar "
    "czar duke earl baron lord viceroy regent speaker cinematographer screenwriter scriptwriter writer novelist "
    "playwright poet lyricist photographer choreographer animator illustrator narrator presenter host translator "
    "painter sculptor abbot abbess prior vicar pastor priest rabbi imam deacon chaplain curator registrar bursar "
    "steward headmaster headmistress lecturer comptroller controller auditor attorney prosecutor magistrate marshal "
    "constable commissioner councillor councilor alderman envoy legate lieutenant sergeant brigadier commodore "
    "referee umpire cso cpo chro cno maintainer").split())
# the verbs that state a role ('directed by' names the director): general English, written for this check
_ROLE_VERBS = (("director", r"direct(ed|s|ing)"), ("producer", r"produc(ed|es|ing)"),
               ("composer", r"compos(ed|es|ing)|music (was )?(written |composed )?by|score (was )?(written |composed )?by"),
               ("editor", r"edit(ed|s|ing)"), ("cinematographer", r"photograph(ed|y)|cinematography|shot by"),
               ("screenwriter", r"screenplay|script(ed)?|written by|wr(ote|itten)"), ("writer", r"wr(ote|itten|ites)"),
               ("author", r"wr(ote|itten|ites)|authored"), ("founder", r"(co-?)?found(ed|s|ing)|establish(ed|es)"),
               ("designer", r"design(ed|s)"), ("architect", r"design(ed|s)"), ("inventor", r"invent(ed|s)"),
               ("painter", r"paint(ed|s)"), ("illustrator", r"illustrat(ed|es)"), ("translator", r"translat(ed|es)"),
               ("narrator", r"narrat(ed|es)"), ("choreographer", r"choreograph(ed|s)"), ("conductor", r"conduct(ed|s)"),
               ("host", r"host(ed|s)|present(ed|s)"), ("presenter", r"present(ed|s)|host(ed|s)"),
               ("sculptor", r"sculpt(ed|s)"), ("lyricist", r"lyrics (were )?(written )?by"),
               ("maintainer", r"maintain(ed|s|ing)"))
_ROLE_VERB = [(r, re.compile(r"(?i)\b(" + v + r")\b")) for r, v in _ROLE_VERBS]
# a question that asks a role with its verb: 'Who directed ...?', 'By whom was it produced?'
_ASKS_ROLE_VERB = re.compile(r"(?i)^\W*(?:who|whom)\s+(?:\w+\s+)?(?P<v>directed|produced|composed|edited|photographed|"
                             r"shot|wrote|founded|co-founded|designed|invented|painted|illustrated|translated|narrated|"
                             r"choreographed|conducted|hosted|presented|sculpted|maintains|maintained)\b|\bby whom\b[^?]*\b(?P<v2>directed|"
                             r"produced|composed|edited|photographed|written|founded|designed|invented|painted)\b")
_VERB_ROLE = {"directed": "director", "produced": "producer", "composed": "composer", "edited": "editor",
              "photographed": "cinematographer", "shot": "cinematographer", "wrote": "writer", "written": "writer",
              "founded": "founder", "co-founded": "founder", "designed": "designer", "invented": "inventor",
              "painted": "painter", "illustrated": "illustrator", "translated": "translator", "narrated": "narrator",
              "choreographed": "choreographer", "conducted": "conductor", "hosted": "host", "presented": "presenter",
              "sculpted": "sculptor", "maintains": "maintainer", "maintained": "maintainer"}
_ROLE_MODIFIERS = frozenset("vice deputy assistant associate executive senior junior prime first general managing "
                            "chief acting interim".split())
_ROLES_RU = ("президент", "вице-президент", "председател", "директор", "генеральн", "менеджер", "руководител",
             "глав", "основател", "владел", "редактор", "секретар", "казначе", "губернатор", "мэр", "сенатор",
             "министр", "премьер", "канцлер", "корол", "императ", "принц", "принцесс", "пап", "епископ",
             "архиепископ", "кардинал", "генерал", "адмирал", "капитан", "командир", "командующ", "полковник",
             "тренер", "декан", "профессор", "ректор", "архитектор", "инженер", "дизайнер", "изобретател", "автор",
             "композитор", "дирижёр", "дирижер", "продюсер", "судь", "посол", "консул", "шериф", "заместител",
             "помощник", "султан", "халиф", "хан", "шах", "цар", "герцог", "граф", "барон", "спикер", "лидер")
_NOT_ROLES_RU = ("принцип", "главн", "автомат", "автоном", "автомоб", "генерац", "генерир", "граф", "корол", "папк",
                 "хани", "ханд", "шахт", "шахм", "царап", "судьб")
_ROLE_RU_SHORT = frozenset({"глав", "пап", "хан", "шах", "цар", "граф", "мэр"})
# what may follow a Russian role stem: a case ending, after a feminine or agent suffix ('королева', 'царица',
# 'владельцем', 'императором', 'премьер-министр'); a longer word is another word ('командировок' is no 'командир',
# 'архитектура' no 'архитектор')
_RU_ROLE_REST = re.compile(r"^(?:-[а-яё]+|(?:ор|ниц|ьниц|иц|риц|ев|ец|ьц|есс|ин|ш)?(?:[аяоеёыиуюьй]|ом|ем|ём|ой|ей|ою|ею|"
                           r"ам|ям|ах|ях|ов|ев|ёв|ами|ями|ый|ий|ая|яя|ое|ее|ые|ие|ого|его|ому|ему|ым|им|ую|юю|ых|их|"
                           r"ыми|ими|ья|ьи|ью|ье|ьям|ьями|ьях|ьев|ьей)?)$")
# 'the board of directors', 'совет директоров': the board, an organ, not a role asked
_BOARD_OF = re.compile(r"(?:.* )?(?:board of directors|совет\w* директоров)$")
# Negation in a question: 'which ... does not ...' is answered only by a sentence that negates or excludes.
_NEG_Q = frozenset("not never no none without cannot neither nor isn't doesn't didn't wasn't weren't aren't "
                   "don't can't won't".split()) | frozenset("не нет никогда без ни нельзя".split()) | frozenset(
    "nicht nie niemals kein keine keinen keinem keiner keines ohne".split())
# ('except', 'кроме', 'außer' set a thing aside, 'Which divisors has 6 except 1 and 6?': the answer states no negation,
# 'it has the divisors 2 and 3 in addition to 1 and 6')
_NEG_EVIDENCE = re.compile(
    r"(?i)\b(not|never|no|none|without|except|cannot|neither|nor|only|lack\w*|exclud\w*|refus\w*|forbid\w*|prohibit\w*|"
    r"deni\w*|den(y|ies)|fail\w*|unable|absent|instead|rather|but)\b|n't\b|\b(не|нет|никогда|без|кроме|ни|нельзя|"
    r"только|лишь|отказ\w*|запрещ\w*|исключ\w*|nicht|nie|niemals|kein\w*|ohne|außer|nur|lediglich)\b|"
    r"\b(un|in|im|non|dis|не)[a-zа-яё]{3,}")
_UP = re.compile(r"(?i)\b(increas|rais|rise|rose|risen|grow|grew|grown|gain|boost|expand|improv|higher)\w*|\bup\b|"
                 r"\b(увелич|повыш|повыс|раст|рост|вырос|усил|улучш)\w*")
_DOWN = re.compile(r"(?i)\b(decreas|reduc|lower|fall|fell|drop|declin|shrink|shrank|los[est]|diminish|weaken|"
                   r"worsen|cut|down)\w*|\b(уменьш|сниж|сниз|пониж|пада|упал|сокращ|сократ|ослаб|ухудш)\w*")
# Relative periods ('this year', 'last quarter', 'в прошлом году'): never the same as another period.
_REL_PERIOD = re.compile(
    r"(?i)\b(this|current|next|last|previous|past|coming|following|prior)\s+(fiscal\s+)?(year|quarter|month|week|"
    r"day|decade|season|semester|term)\b|\b(today|tomorrow|yesterday)\b|"
    r"\b(в|на|за)?\s*(этом|текущем|следующем|прошлом|прошедшем|предыдущем|будущем|этот|текущий|следующий|прошлый|"
    r"предыдущий|будущий|эту|прошлую|следующую|текущую|этой|прошлой|следующей|текущей)\s+"
    r"(году|год|квартале|квартал|месяце|месяц|неделе|неделю|недели|сезоне|сезон)\b|\b(сегодня|завтра|вчера)\b")
_PERIOD_SHIFT = {"this": 0, "current": 0, "next": 1, "coming": 1, "following": 1, "last": -1, "previous": -1,
                 "past": -1, "prior": -1, "этом": 0, "текущем": 0, "этот": 0, "текущий": 0, "эту": 0, "текущую": 0,
                 "этой": 0, "текущей": 0, "следующем": 1, "следующий": 1, "следующую": 1, "следующей": 1,
                 "будущем": 1, "будущий": 1, "прошлом": -1, "прошедшем": -1, "предыдущем": -1, "прошлый": -1,
                 "предыдущий": -1, "прошлую": -1, "прошлой": -1, "today": 0, "tomorrow": 1, "yesterday": -1,
                 "сегодня": 0, "завтра": 1, "вчера": -1}
_PERIOD_UNIT = {"год": "year", "году": "year", "квартале": "quarter", "квартал": "quarter", "месяце": "month",
                "месяц": "month", "неделе": "week", "неделю": "week", "недели": "week", "сезоне": "season",
                "сезон": "season"}
_QUESTION_OPENERS = frozenset("what which who whom whose when where why how is are was were do does did can could "
                              "will would should shall may might has have had in on at by for from according "
                              "что какой какая какое какие каких каком какую кто кого кому кем когда где почему как "
                              "сколько чей чья чьё чьи зачем откуда куда в на по согласно".split())
_NOT_NAMES = frozenset("i i'm i've".split()) | _QUESTION_OPENERS
_YEAR = re.compile(r"(?<![\d.,])(1[0-9]{3}|20[0-9]{2})(s|er|-е|-х)?(?![\d.,]\d)")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:[.,]\d+)?(?![\w])")
_NUMBER_DOTTED = re.compile(r"(?<![\w.,])\d{1,3}(?:\.\d{3})+(?:,\d+)?(?![\w]|[.,]\d)")
_ORD_DIGIT = re.compile(r"(?i)\b(\d+)\s*-?\s*(st|nd|rd|th|й|я|е|го|м|ой|ый|ом)\b")
# German writes an ordinal as digits with a full stop, after an article or a preposition with one ('das 99. Perzentil',
# 'im 20. Jahrhundert'); before a month it is a day ('am 18. Mai'), read with the month instead
_DE_ORD_DIGIT = re.compile(r"(?i)\b(?:der|die|das|den|dem|des|im|am|zum|zur|vom|beim|ins|seit|bis|ab|sein\w{0,2}|"
                           r"ihr\w{0,2})\s+(\d{1,3})\.\s+(?=([A-ZÄÖÜ][\w-]*))")


def _german_ordinal_digits(text: str) -> list[re.Match[str]]:
    """A German text's ordinals written in digits (_DE_ORD_DIGIT), not a month's day."""
    return [m for m in _DE_ORD_DIGIT.finditer(text) if not german.month(m.group(2))] if _german(text) else []
_IDENT = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+(?![\w])")
_CODE = re.compile(r"(?<![\w-])(?=[\w-]*[^\W\d_])(?=[\w-]*\d)[\w]+(?:-[\w]+)+|(?<![\w-])[^\W\d_]+\d\w*")
_CODE_PLURAL = re.compile(r"(.*[^\W\d_].*\d{2,})s")  # a code's plural: 'ZX-210s', 'A320s'
_ASKS_PERSON = re.compile(r"(?i)^\s*(who|whom)\b|^\s*(кто|кем|кого|кому)\b|^\s*(von |mit |für )?(wer|wem|wen)\b")
_ASKS_YEAR = re.compile(r"(?i)\b(which|what|in which|in what) year\b|в каком году|\bin welchem jahr\b")
# 'When ...?' asks a time; 'when' inside a question ('what happens to the norm when ...') or opening a clause before the
# question proper ('When imperialism impacts ..., what is it called?') is a conjunction and asks none
_ASKS_WHEN = re.compile(r"(?i)^\W*(and |since |until |till |и |с |до |seit |bis )?(when|когда|wann)\b"
                        r"(?![^?]*,\s*(what|which|who|how|что|как|кто|was|welche\w*|wer|wie)\b)")
# 'how many', and 'which episode number' / 'what number' / 'какой номер' / 'welche Nummer' (a number that labels one
# thing): a number is asked
_AMOUNT = r"\bhow (many|much)\b|\bсколько\b|\bwie viele?\b|\bwieviele?\b"
_LABEL_NUMBER = r"\b(which|what)\s+(\w+\s+)?number\b|\bкак(ой|ого|им)\s+(\w+\s+)?номер|\bwelche[rn]?\s+(\w+)?nummer\b"
_ASKS_AMOUNT, _ASKS_LABEL_NUMBER = re.compile(_AMOUNT, re.I), re.compile(_LABEL_NUMBER, re.I)
_ASKS_NUMBER = re.compile(f"{_AMOUNT}|{_LABEL_NUMBER}", re.I)
_ASKS_MONTH = re.compile(r"(?i)\b(which|what|in which) month\b|в каком месяце|\bin welchem monat\b")
# A question that asks which company makes, sells or supplies something ('Which company makes the modem in the X?',
# 'Who manufactures ...', 'Какая компания производит ...', 'Кто поставляет ...'): its answer names an organisation.
# ('organisation' alone is not asked so: 'which organizations' asks for bodies written in lower case as often.)
_ASKS_ORG = re.compile(
    r"(?i)\b(?:which|what)\s+(?:\w+\s+)?(?:company|companies|manufacturers?|vendors?|suppliers?|makers?|firms?|"
    r"corporations?|brands?)\b(?!['’]s)|^\W*who\s+(?:makes|manufactures|manufactured|supplies|supplied|sells|"
    r"distributes|distributed)\b|\bкак(?:ая|ой|ие|ую|ого|им|ими)\s+(?:\w+\s+)?(?:компани|фирм|производител|"
    r"поставщик|корпораци|бренд|марк)\w*|^\W*кто\s+(?:производит|произв[её]л|изготавливает|изготовил|выпускает|"
    r"поставляет|поставил|продаёт|продает)\b")


# Attributes a question asks of a thing ('the warranty of', 'how tall'), each with the words that state it, English
# and Russian stems: a sentence that states none of them (and perhaps another attribute) does not answer. General
# words, written for this check; no corpus read.
_ATTRS: dict[str, tuple[str, ...]] = {
    "population": ("population", "inhabitants", "residents", "populous", "people", "населени", "жител"),
    "area": ("area", "square", "km2", "km²", "sq", "hectares", "acres", "площад", "гектар"),
    "length": ("length", "long", "km", "kilometres", "kilometers", "miles", "длин", "протяж", "километр"),
    "height": ("height", "high", "tall", "elevation", "altitude", "feet", "metres", "meters", "m", "высот", "метр"),
    "width": ("width", "wide", "breadth", "ширин"),
    "depth": ("depth", "deep", "глубин"),
    "weight": ("weight", "weighs", "weigh", "weighed", "kg", "kilograms", "tonnes", "tons", "pounds", "mass", "вес",
               "весит", "масс", "килограмм", "тонн"),
    "price": ("price", "priced", "cost", "costs", "fee", "fees", "€", "$", "£", "eur", "usd", "gbp", "цен", "стоимост",
              "стоит", "евро", "руб", "долл"),
    "budget": ("budget", "funding", "allocated", "бюджет", "финансир"),
    "salary": ("salary", "salaries", "wage", "wages", "paid", "pay", "зарплат", "оклад"),
    "revenue": ("revenue", "revenues", "sales", "turnover", "income", "выручк", "доход", "оборот"),
    "warranty": ("warranty", "warranties", "guarantee", "guaranteed", "гаранти"),
    "capacity": ("capacity", "holds", "seats", "accommodate", "вместим", "емкост", "ёмкост"),
    "speed": ("speed", "fast", "mph", "km/h", "velocity", "скорост"),
    "temperature": ("temperature", "°", "degrees", "°c", "температур", "градус"),
    "license": ("license", "licence", "licensed", "licenses", "лиценз"),
    "capital": ("capital", "столиц"),
    "currency": ("currency", "валют"),
    "language": ("language", "languages", "written", "язык"),
    "address": ("address", "located", "адрес"),
    "diameter": ("diameter", "радиус", "диаметр", "radius"),
    "thickness": ("thickness", "thick", "толщин"), "volume": ("volume", "litres", "liters", "cubic", "объём", "объем"),
    "circumference": ("circumference", "perimeter", "окружност"), "density": ("density", "dense", "плотност"),
    "pressure": ("pressure", "pascal", "pascals", "bar", "psi", "давлени"), "humidity": ("humidity", "humid", "влажност"),
    "voltage": ("voltage", "volts", "volt", "kv", "напряжени"), "frequency": ("frequency", "hz", "hertz", "частот"),
    "duration": ("duration", "lasted", "lasts", "hours", "minutes", "days", "длительност", "продолжительност"),
    "lifespan": ("lifespan", "life", "live", "lives", "lived", "longevity"), "rent": ("rent", "rental", "аренд"),
    "tariff": ("tariff", "tariffs", "duty", "duties", "тариф", "пошлин"), "age": ("age", "aged", "old", "возраст"),
    "wavelength": ("wavelength", "nm", "nanometres", "nanometers"),
    "power": ("power", "watts", "watt", "kw", "mw", "wattage", "kilowatts", "megawatts", "horsepower", "мощност", "квт",
              "мвт"),
    "birth": ("born", "birth", "birthday", "née", "nee", "birthplace", "родил", "родилась", "родился", "рождени"),
    "death": ("died", "death", "dead", "killed", "executed", "murdered", "deceased", "assassinated", "drowned",
              "perished", "dies", "умер", "умерла", "скончал", "смерт", "погиб"),
}
# a lifespan in brackets ('(12 May 1820 – 2 February 1867)', '(1911–1979)') states both the birth and the death
_LIFESPAN = re.compile(r"\([^()]*?\b\d{3,4}\b[^()]*?(?:[–—-]|\d{4}\s*[A-Z])[^()]*?\b\d{3,4}\b[^()]*\)")
_ASKS_BIRTH = re.compile(r"(?i)\b(born|birth|birthday|birthplace)\b")
_ASKS_DEATH = re.compile(r"(?i)\b(die|died|dies|death|killed|executed|assassinated)\b")
_ATTR_RU = {"населени": "population", "площад": "area", "длин": "length", "высот": "height", "ширин": "width",
            "глубин": "depth", "вес": "weight", "масс": "weight", "цен": "price", "стоимост": "price",
            "бюджет": "budget", "зарплат": "salary", "оклад": "salary", "выручк": "revenue", "гаранти": "warranty",
            "вместимост": "capacity", "скорост": "speed", "температур": "temperature", "лиценз": "license",
            "столиц": "capital", "валют": "currency", "диаметр": "diameter"}
_ATTR_ASK = re.compile(r"(?i)\b(?:what|which|how)\s+(?:is|was|are|were|'s)?\s*(?:the\s+)?(?:(?P<pre0>\w+)\s+)??"
                       r"(?:(?P<pre>\w+)\s+)?"
                       r"(?P<a>[a-z]+)\s+(?:of|for|does|did|do|is|was|on|in)\b|\bhow\s+(?P<adj>tall|high|wide|deep|"
                       r"heavy|fast)\b|\b(?:какова|каков|каково|какой|какая|какое|сколько)\s+"
                       r"(?P<ru>[а-яё]+)(?:\s+(?P<ru2>[а-яё]+))?")
# ('how long' is left out: it asks a duration as often as a length, and a time span states a duration)
_ATTR_ADJ = {"tall": "height", "high": "height", "wide": "width", "deep": "depth", "heavy": "weight", "fast": "speed"}
# Opposite events: asked when an office opened, a sentence that says when it closed answers another question.
_EVENT_PAIRS = (("open", "clos"), ("start", "end"), ("begin", "end"), ("began", "end"), ("hir", "fir"),
                ("acquir", "sold"), ("buy", "sell"), ("bought", "sold"), ("launch", "discontinu"),
                ("found", "dissolv"), ("arriv", "depart"), ("import", "export"), ("win", "los"), ("join", "leav"),
                ("add", "remov"),
                ("открыл", "закрыл"), ("открыт", "закрыт"), ("начал", "закончил"), ("купил", "продал"),
                ("прибыл", "убыл"), ("импорт", "экспорт"))
_EVENT_IRREGULAR = {"won": "win", "lost": "lose", "lose": "lose"}  # read as the stems above ('los' + 'e')
_EVENT_ENDINGS = ("", "s", "e", "es", "ed", "d", "ing", "ings", "ure", "ures", "ened", "ening", "ation", "y")


def _asked_attribute(question: str) -> str | None:
    """The attribute the question asks of its subject ('warranty', 'height'), when the lexicon knows it; a birth or
    a death ('When did X die?', 'Which poet was born in 1923?') when the question speaks of one and not the other."""
    if not _CYR.search(question) and not _german(question) and not re.match(r"(?i)\W*where\b", question):
        # (German 'die' is an article; 'Where was X born?' asks a place)
        born, died = bool(_ASKS_BIRTH.search(question)), bool(_ASKS_DEATH.search(question))
        if born != died:
            return "birth" if born else "death"
    for m in _ATTR_ASK.finditer(question):
        if m.group("adj"):
            return _ATTR_ADJ.get(m.group("adj").lower())
        word = (m.group("a") or "").lower()
        if word in _ATTRS:
            return word
        for pre in (m.group("pre"), m.group("pre0")):  # a compound names its attribute first: 'the warranty
            # period for', 'the temperature operating range of'
            if word and (pre or "").lower() in _ATTRS:
                return (pre or "").lower()
        if word in _ATTR_ADJ:
            return _ATTR_ADJ[word]
        for ru in (m.group("ru"), m.group("ru2")):
            for stem, attr in _ATTR_RU.items():
                if ru and ru.lower().startswith(stem):
                    return attr
    return None


# An acronym that modifies the noun asked ('the IP rating of', 'the API key for', 'What CPU load does ...'): part of the
# attribute asked, not a name of something. After a determiner with 'of' / 'for' after its noun, or right after the
# question word with an auxiliary after its noun ('the UMC membership' or 'When did NASA launch' stay names).
_ACRONYM_ATTR = re.compile(r"(?:\b(?:the|a|an|its|their|his|her|our|your|whose)\s+(?P<a>[A-Z]{2,4})\s+"
                           r"(?P<n>[a-z]{3,})\s+(?:of|for)\b|^\W*(?i:what|which)\s+(?P<a2>[A-Z]{2,4})\s+"
                           r"(?P<n2>[a-z]{3,})\s+(?:does|do|did|is|are|was|were|has|have|had|can|could|will|would|"
                           r"should)\b)")


def _acronym_attributes(question: str) -> dict[str, str]:
    """Acronym -> the attribute phrase it modifies ('IP' -> 'IP rating'), see _ACRONYM_ATTR."""
    out = {}
    for m in _ACRONYM_ATTR.finditer(question):
        acr, noun = (m.group("a"), m.group("n")) if m.group("a") else (m.group("a2"), m.group("n2"))
        if noun not in EN_STOP:
            out[acr] = f"{acr} {noun}"
    return out


def _states_acronym_attribute(c: "Constraint", text: str) -> bool:
    """Whether a text states an acronym attribute ('IP rating'): the acronym with a value glued to it ('IP67',
    'IP-54'), or the acronym and its noun both."""
    acr, noun = c.values[1], c.text.split()[-1]
    if re.search(r"(?<![\w-])" + re.escape(acr) + r"-?\d", text):
        return True
    return bool(re.search(r"(?<![\w-])" + re.escape(acr) + r"(?![\w-])", text)) and \
        bool(re.search(r"(?i)\b" + re.escape(noun[:max(4, len(noun) - 2)]), text))


_POWER_VALUE = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)?\s?(?:[kMGm]?W|[кМ]?Вт)(?![\w/])")  # '6 W', '1.5 kW', '3 МВт'


def _states_attribute(attr: str, r: "_Read") -> bool:
    if attr in ("birth", "death") and _LIFESPAN.search(r.raw_cased):
        return True
    if attr == "power" and _POWER_VALUE.search(r.raw_cased):  # a value in watts states a power ('draws 6 W')
        return True
    words = r.raw.split() if r.raw else []
    toks = set(re.findall(r"[^\W_]+|[€$£°]", r.raw))
    return any(f in toks or (len(f) >= 4 and _CYR.search(f) and any(w.startswith(f) for w in words)) or
               (f in ("€", "$", "£", "°") and f in r.raw) for f in _ATTRS[attr])


def _events(text: str) -> set[str]:
    """Event stems of the pairs above that a text uses ('opened' -> 'open')."""
    words = {_EVENT_IRREGULAR.get(w.lower(), w.lower()) for w in _WORD.findall(text)}

    def used(stem: str) -> bool:
        if _CYR.search(stem):
            return any(w.startswith(stem) and len(w) <= len(stem) + 4 for w in words)
        return any(stem + end in words for end in _EVENT_ENDINGS)
    return {stem for pair in _EVENT_PAIRS for stem in pair if used(stem)}


@dataclass(frozen=True)
class Constraint:
    """One thing the question pins down: its kind, the words it is asked with, and canonical values to look for."""

    kind: str  # entity | role | year | month | number | ordinal | superlative | attribute | event | negation |
    # direction | period | asks
    text: str  # as the question words it ('Shelbyville', '1998', 'youngest', 'CTO')
    values: tuple[str, ...]  # canonical forms (stems / keys, numbers as plain digits, months as 'm5', ...)
    soft: bool = False  # an entity a German question may mean as a common noun ('das Delta', 'den Sudan'): met when
    # the evidence states it or (German evidence) the encoder reads it among the evidence's words; else unchecked

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **({"soft": True} if self.soft else {})}


@dataclass(frozen=True)
class Evidence:
    """A quoted sentence (or a model's claim) and where it was read: its chunk, heading path and document title."""

    sentence: str
    chunk: str = ""
    heading: str = ""
    title: str = ""
    chunk_id: str = ""
    opening: str = ""  # the document's first lines: where a memo states its date
    near: str = ""  # the units of the chunk just before the sentence (the list item that names the setting)
    path: str = ""  # the chunk's whole heading path ('Clients / Helio Shipping / Contract'): the sections it sits in


@dataclass(frozen=True)
class Verdict:
    """One constraint checked against one piece of evidence."""

    constraint: Constraint
    verdict: Met
    where: str = ""  # sentence | heading | title | chunk | '' (unmet or unchecked)
    instead: tuple[str, ...] = ()  # siblings the sentence states instead ('Springfield', '1998')

    def reason(self, lang: str = "en", roles: dict[str, str] | None = None) -> str:
        """Why the evidence does not answer, in a user's words ('' when met), in `lang` (core.answer.wording: 'en',
        'de', 'ru'; the trace reads English); a role is named by the question's own words for it when `roles` has
        them (role_words)."""
        c = self.constraint
        if self.verdict != "unmet":
            return ""
        label = wording.LABELS.get(lang, _LABELS).get(c.kind, c.kind)
        instead = ", ".join(self.instead)
        if c.kind == "asks":  # 'elsewhere': see _value_of_the_asked
            return wording.reason("asks_elsewhere" if self.where == "elsewhere" else "asks_none", lang,
                                  text=wording.ASKED.get(lang, {}).get(c.text, c.text))
        if c.kind == "attribute":
            return wording.reason("attribute_instead" if self.instead else "attribute_none", lang, text=c.text,
                                  instead=instead)
        if c.kind in ("event", "negation"):
            return wording.reason(c.kind, lang, text=c.text, instead=instead)
        if c.kind == "direction":
            words = wording.DIRECTION.get(lang, {})
            return wording.reason("direction", lang, text=words.get(c.text, c.text),
                                  instead=", ".join(words.get(i, i) for i in self.instead))
        text = c.text
        if c.kind == "role" and c.text in (roles or {}):  # quoted as the question words it ('«генеральным директором»')
            text = wording.QUOTES.get(lang, "'{}'").format((roles or {})[c.text])
        if self.instead:
            return wording.reason("instead", lang, instead=", ".join(self.instead[:3]), text=text, label=label)
        return wording.reason("absent", lang, text=text, label=label)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.constraint.kind, "constraint": self.constraint.text, "verdict": self.verdict,
                **({"soft": True} if self.constraint.soft else {}), **({"where": self.where} if self.where else {}),
                **({"instead": list(self.instead)} if self.instead else {})}


_LABELS = wording.LABELS["en"]


@dataclass(frozen=True)
class Check:
    """Every constraint of a question checked against one piece of evidence."""

    evidence: Evidence
    verdicts: tuple[Verdict, ...]

    @property
    def ok(self) -> bool:
        return all(v.verdict != "unmet" for v in self.verdicts)

    @property
    def unmet(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.verdict == "unmet")


# -- reading values out of text ----------------------------------------------------------------------------------
@lru_cache(maxsize=2048)
def _german(text: str) -> bool:
    """Whether a text is German (core.text.guess_language): its months, ordinals, superlatives and roles are read with
    the German lexicon (in their English forms), and its capitalised nouns are no names."""
    return guess_language(text) == "de"


def _key(word: str) -> str:
    """A word's comparison key: its stem, a Cyrillic one cut to five letters (Russian inflects beyond the stemmer)."""
    toks = tokenize(word)
    t = toks[0] if toks else word.lower()
    return t[:5] if _CYR.search(t) and len(t) > 5 else t


def _keys(text: str) -> set[str]:
    return {t[:5] if _CYR.search(t) and len(t) > 5 else t for t in tokenize(text)}


def _num(s: str) -> str:
    s = s.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", s) else s.replace(",", ".")
    try:
        v = float(s)
    except ValueError:
        return s
    return str(int(v)) if v == int(v) else f"{v:g}"


def years(text: str) -> set[str]:
    """Years and decades ('1990s' -> '199x') a text states."""
    out = set()
    for m in _YEAR.finditer(text):
        out.add(m.group(1)[:3] + "x" if m.group(2) else m.group(1))
    return out


def months(text: str) -> set[str]:
    """Months a text names, as 'm1'..'m12' (English and German capitalised names; Russian month words in any case)."""
    out = set()
    de = _german(text)
    for m in _WORD.finditer(text):
        w = m.group(0)
        low = w.lower()
        if de and w[:1].isupper() and german.month(w):
            out.add(f"m{german.month(w)}")
        elif low in _MONTHS_EN and (w[:1].isupper() or low != "may"):
            if low == "may" and not w[:1].isupper():
                continue
            out.add(f"m{_MONTHS_EN.index(low) + 1}")
        elif _CYR.search(low):
            mm = _MONTH_RU.match(low)
            if mm and (low[:2] != "ма" or low in ("май", "мая", "маю", "мае", "маем")):
                stem = mm.group(1)
                stem = "ма" if stem.startswith("ма") else stem
                out.add(f"m{_MONTHS_RU.index(stem) + 1}")
    return out


def ordinals(text: str) -> set[str]:
    """Ordinals a text states, as numbers ('second' and '2nd' -> '2'; 'второй' -> '2')."""
    out = set()
    de = _german(text)
    for m in _WORD.finditer(text.lower()):
        w = m.group(0)
        if w in _ORD_EN:
            out.add(str(_ORD_EN[w]))
        elif "-" in w and w.split("-")[0] in _ORD_EN and _ranked_compound(w):  # 'second-largest'
            out.add(str(_ORD_EN[w.split("-")[0]]))
        elif de and german.ordinal(w):
            out.add(str(german.ordinal(w)))
        elif _CYR.search(w):
            for stem, n in _ORD_RU:
                if w.startswith(stem) and _ORD_RU_END.search(w) and len(w) <= len(stem) + 4 and \
                        not (stem in ("пят", "шест", "девят", "десят") and w.endswith(("ь", "и", "ью"))):
                    out.add(str(n))
                    break
    for m in _ORD_DIGIT.finditer(text):
        if not years(m.group(1)):
            out.add(str(int(m.group(1))))
    for m in _german_ordinal_digits(text):
        out.add(str(int(m.group(1))))
    return out


# Nouns a number after them names one of a sequence ('phase 3', 'step 2', 'chapter 11', 'Phase III'): the number is a
# label of that noun, not a count, so 'three operating regions' does not state 'phase 3' and 'one gateway' is no
# sibling of it. General English, not read from any corpus.
_LABEL_NOUNS = ("phase step stage level tier chapter section part volume episode season round grade floor gate "
                "platform terminal article clause paragraph figure appendix page week sprint cycle wave batch "
                "milestone act book division district ward lot heat leg").split()
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "x": 10, "xi": 11,
          "xii": 12}
_LABELLED = re.compile(r"(?i)\b(" + "|".join(_LABEL_NOUNS) + r")s?\s+(?:no\.?\s*|number\s+|#\s*)?(\d+|[ivx]{1,4}|"
                       r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b")
_ORD_LABELLED = re.compile(r"(?i)\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
                           r"twelfth|\d+(?:st|nd|rd|th))\s+(" + "|".join(_LABEL_NOUNS) + r")\b")


def _label_of(question: str, n: str) -> str:
    """The label noun a digit number of the question follows ('phase' of 'in phase 3'), or ''."""
    for m in _LABELLED.finditer(question):
        if m.group(2).isdigit() and _num(m.group(2)) == n:
            return m.group(1).lower()
    return ""


def _labels(text: str) -> set[tuple[str, str]]:
    """(label noun, number) pairs a text states: 'Phase 3', 'phase three', 'Phase III', 'the third phase'."""
    out = set()
    for m in _LABELLED.finditer(text):
        v = m.group(2).lower()
        if m.group(2).isdigit():
            num = _num(v)
        elif v in _NUM_EN:
            num = str(_NUM_EN[v])
        elif v in _ROMAN and (m.group(2).isupper() or len(v) > 1):  # 'Phase III'; a lone lower-case 'i' is a word
            num = str(_ROMAN[v])
        else:
            continue
        out.add((m.group(1).lower(), num))
    for m in _ORD_LABELLED.finditer(text):
        o = m.group(1).lower()
        num = str(_ORD_EN[o]) if o in _ORD_EN else _num(re.sub(r"\D", "", o))
        out.add((m.group(2).lower(), num))
    return out


def _label_verdict(c: Constraint, parts: Sequence[tuple[str, _Read]], sentence: str) -> Verdict:
    """A labelled number ('phase 3') is met where the evidence states that label with that number (the sentence, its
    heading or title, its chunk); another number with the same label in the sentence or heading is its sibling."""
    n, label = c.values[0], c.values[1]
    for where, r in parts:
        if (label, n) in _labels(r.raw_cased):
            return Verdict(c, "met", where)
    sib = sorted({f"{lb} {v}" for where, r in parts[:2] for lb, v in _labels(r.raw_cased) if lb == label and v != n})
    return Verdict(c, "unmet", instead=tuple(sib))


def _digit_numbers(text: str) -> set[str]:
    """Numbers written in digits (outside years), as plain digits. German groups thousands with full stops and writes
    the decimal comma ('22.338.618', '1.000', '2,5'): two groups or more read so in any text, one group in German."""
    de = None
    out, body = set(), text
    for m in _german_ordinal_digits(text):  # 'das 99. Perzentil': an ordinal, no number
        body = body[: m.start(1)] + " " * len(m.group(1)) + body[m.end(1):]
    for m in _NUMBER_DOTTED.finditer(body):
        v = m.group(0)
        if v.count(".") == 1 and not re.search(r",\d", v):
            de = _german(text) if de is None else de
            if not de:
                continue
        out.add(_num(v.replace(".", "").replace(",", ".")))
        body = body[: m.start()] + " " * len(v) + body[m.end():]
    return out | {_num(m.group(0)) for m in _NUMBER.finditer(body) if not _YEAR.fullmatch(m.group(0))}


def numbers(text: str) -> set[str]:
    """Numbers a text states (digits outside codes and years, number words), as plain digits."""
    body = _CODE.sub(" ", text)
    out = _digit_numbers(body)
    de = _german(text)
    for m in _WORD.finditer(body.lower()):
        w = m.group(0)
        if w in _NUM_EN:
            out.add(str(_NUM_EN[w]))
        elif de and w in _NUM_DE:
            out.add(str(_NUM_DE[w]))
        elif _CYR.search(w):
            for stem, n in _NUM_RU:
                if w == stem or (len(stem) >= 4 and w.startswith(stem) and len(w) <= len(stem) + 3):
                    out.add(str(n))
                    break
    return out


_AT_IDIOM = frozenset("least most best worst latest earliest first last".split())
_DETERMINERS = frozenset("the a an its his her their this that these those our your my whose".split())
_SPAN_AFTER_LAST = frozenset("year years decade decades century centuries month months week weeks day days night "
                             "nights time times few several couple hour hours minute minutes".split())


# Any '-est' adjective after a determiner or an ordinal is a superlative ('the quietest', 'the second wettest'), but for
# the nouns and plain adjectives English spells with '-est'.
_EST_NOT = frozenset(
    "rest west test interest protest request behest forest harvest contest honest modest earnest manifest guest chest "
    "nest pest quest vest zest crest arrest suggest digest invest conquest priest unrest southwest northwest midwest "
    "inquest bequest tempest everest budapest bucharest pretest posttest retest attest detest infest molest divest "
    "ingest congest palimpsest armrest headrest footrest biotest subtest".split())


def _est(w: str) -> bool:
    return len(w) >= 6 and w.endswith("est") and w.isalpha() and w not in _EST_NOT


def _super_word(w: str) -> bool:
    return w in _SUPER_EN or _est(w)


def _ranked_compound(w: str) -> list[str]:
    """The superlative a hyphenated compound carries: after an ordinal ('second-largest'), before 'ever'
    ('largest-ever') or a participle ('highest-paid', 'best-selling', 'most-visited', 'best-known'); a compound noun
    ranks nothing ('worst-case', 'first-class', 'last-minute')."""
    parts = w.split("-")
    out = []
    for i, x in enumerate(parts):
        if x in ("first", "last") or not _super_word(x):
            continue
        after = parts[i + 1] if i + 1 < len(parts) else ""
        if (i > 0 and parts[i - 1] in _ORD_EN) or after == "ever" or re.fullmatch(
                r"[a-z]{2,}(?:ed|ing|en|wn)|paid|sold|built|run|held|read|set|made|known|grown", after):
            out.append(x)
    return out


def _adjective_form(cased: Sequence[str], i: int) -> str:
    """A German word as an adjective is written: a text's first word before a noun is one in capitals ('Häufigste
    Herkunftsländer'), read in lower case; any other capitalised word is a noun ('das Beste')."""
    return cased[i].lower() if i == 0 and len(cased) > 1 and cased[1][:1].isupper() else cased[i]


def _superlatives(text: str) -> set[str]:
    out = set()
    found = list(_WORD.finditer(text))
    cased = [m.group(0) for m in found]
    words = [w.lower() for w in cased]
    de = _german(text)
    for i, w in enumerate(words):
        if "-" in w and _ranked_compound(w):
            out.update(_ranked_compound(w))
            continue
        if not de and w not in _SUPER_EN and _est(w) and i > 0 and (words[i - 1] in _DETERMINERS or
                                                                     words[i - 1] in _ORD_EN):
            out.add(w)  # 'the quietest', 'its wettest', 'the second coolest'
            continue
        if w == "last" and ((i + 1 < len(words) and (words[i + 1] in _SPAN_AFTER_LAST or words[i + 1].isdigit())) or
                            (i > 0 and cased[i][:1].isupper())):
            continue  # 'the last 5 years', 'in the last decade' count back in time; 'Last Glacial Maximum' is a name
        if w == "last" and re.match(r"\W*(\?|$|for\b|longer\b|long\b|until\b)", text[found[i].end():]):
            continue  # 'How long did the outage last?', 'Will it last for years?': a verb
        if w == "last" and i > 0 and words[i - 1] not in _DETERMINERS and \
                re.search(r"(?i)\bhow long\b", text[:found[i].start()]):
            continue  # 'How long did the fighting last in ...?': a verb after its subject, no determiner before it
        if w in _AT_IDIOM and i > 0 and (words[i - 1] == "at" or (words[i - 1] == "the" and i > 1 and
                                                               words[i - 2] == "at")):
            continue  # 'at least 18', 'at most', 'at (the) latest', 'at first', 'at last': a bound or an adverb
        if w in _SUPER_EN:
            out.add(w)
        elif de and german.superlative(_adjective_form(cased, i)):  # read in its English form: 'jüngste' is
            # 'youngest'
            out.add(german.superlative(_adjective_form(cased, i)) or "")
        elif _CYR.search(w):
            if _EIS.match(w):
                out.add(w[: w.find("йш") + 2] if "йш" in w else w[:7])
            elif _SAMYJ.match(w) and i + 1 < len(words):
                out.add(_key(words[i + 1])[:5])
            elif w.startswith(("наибольш", "наименьш", "лучш", "худш", "максимальн", "минимальн")):
                out.add(next(s for s in ("наибольш", "наименьш", "лучш", "худш", "максимальн", "минимальн")
                             if w.startswith(s)))
    return out


def _opposite(sup: str) -> set[str]:
    out = set()
    for a, b in _SUPER_PAIRS:
        for x, y in ((a, b), (b, a)):
            if sup == x or (_CYR.search(x) and sup.startswith(x[:5])):
                out.add(y)
    return out


# the C-suite: 'chief <area> officer' is one title, its area is what tells one from another ('the chief financial
# officer' is no 'chief operating officer'), and its initials are the same title ('CFO')
_C_SUITE = {"ceo": "executive", "cfo": "financial", "coo": "operating", "cto": "technology", "cio": "information",
            "cmo": "marketing", "ciso": "information security", "cso": "security", "cpo": "product",
            "chro": "human resources", "cno": "nursing"}
_C_AREA_SAME = {"technical": "technology", "finance": "financial", "operations": "operating"}


# Russian writes the C-suite as '<area> директор' ('финансовый директор' is the CFO, 'генеральный директор' the CEO)
_C_AREA_RU = (("финансов", "financial"), ("операционн", "operating"), ("техническ", "technology"),
              ("исполнительн", "executive"), ("генеральн", "executive"), ("информационн", "information"),
              ("коммерческ", "commercial"))


def _c_suite(words: list[str]) -> tuple[list[tuple[str, tuple[int, ...]]], set[int]]:
    """The C-suite titles of a text's lower-cased words, each as 'chief <area> officer' with the word positions it takes
    ('chief executive' alone is the CEO; 'финансовый директор' the CFO), and all the positions they take."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, w in enumerate(words):
        if w.startswith("директор") and i > 0:
            area = next((en for ru, en in _C_AREA_RU if words[i - 1].startswith(ru)), None)
            if area:
                out.append((f"chief {area} officer", (i - 1, i)))
                continue
        if w in _C_SUITE or (w.endswith("s") and w[:-1] in _C_SUITE):
            out.append((f"chief {_C_SUITE[w if w in _C_SUITE else w[:-1]]} officer", (i,)))
        elif w == "chief":
            for j in range(i + 2, min(i + 5, len(words))):
                if words[j] in ("officer", "officers"):
                    area = [_C_AREA_SAME.get(x, x) for x in words[i + 1:j]]
                    if all(x.isalpha() and x not in _ROLES_EN and x not in _DETERMINERS and x not in ("of", "and")
                           for x in area):
                        out.append((f"chief {' '.join(area)} officer", tuple(range(i, j + 1))))
                    break
            else:
                if i + 1 < len(words) and words[i + 1] == "executive":
                    out.append(("chief executive officer", (i, i + 1)))
    return out, {i for _, ix in out for i in ix}


def _roles(text: str) -> list[str]:
    """Role and title words of a text, with the modifier before them ('vice president', 'chief executive')."""
    out = [r for r, _ in _role_spans(text)]
    out += ["deputy" for _ in _SECOND_IN_COMMAND.finditer(text)]  # English's other word for a deputy
    return out


def _role_spans(text: str) -> list[tuple[str, tuple[int, int]]]:
    """_roles' roles with the span of the text's words (first, last index of _WORD's words) that states each."""
    words = [w.lower() for w in _WORD.findall(text)]
    found, c_suite = _c_suite(words)
    out: list[tuple[str, tuple[int, int]]] = [(r, (min(ix), max(ix))) for r, ix in found]
    de = _german(text)
    for i, w in enumerate(words):
        if i in c_suite:
            continue
        if de and german.role(w):  # a German role in its English form ('Präsidentin' -> 'president'),
            # 'stellvertretend' before it as 'deputy' ('stellvertretender Befehlshaber' -> 'deputy commander')
            dep = i > 0 and words[i - 1].startswith("stellvertretend") and german.role(w) != "deputy"
            out.append((("deputy " if dep else "") + (german.role(w) or ""), (i - dep, i)))
            continue
        if _BOARD_OF.match(" ".join(words[max(0, i - 2):i + 1])):
            continue  # 'the board of directors', 'совет директоров': the board (an organ), not a director
        base = w[:-1] if w.endswith("s") and w[:-1] in _ROLES_EN else w
        if base not in _ROLES_EN and re.fullmatch(r"[a-z]+-(e-?)?mail", base) and base.split("-")[0] in _ROLES_EN:
            base = base.split("-")[0]  # a field key: 'Author-email: …' names the author
        if base in _ROLES_EN:
            mod = words[i - 1] if i > 0 and words[i - 1] in _ROLE_MODIFIERS else ""
            out.append((f"{mod} {base}".strip(), (i - bool(mod), i)))
        elif _CYR.search(w):
            for r in _ROLES_RU:
                if w.startswith(r) and (r not in _ROLE_RU_SHORT or len(w) <= len(r) + 2) and \
                        not w.startswith(_NOT_ROLES_RU) and _RU_ROLE_REST.match(w[len(r):]):
                    out.append((r, (i, i)))
                    break
    return out


def role_words(question: str) -> dict[str, str]:
    """Each role the question asks (its constraint's text) -> the question's own words for it ('Bürgermeister' for
    'mayor', 'генеральным директором' for 'chief executive officer'): what a refusal in the question's language names."""
    words = _WORD.findall(question)
    return {r: " ".join(words[a:b + 1]) for r, (a, b) in reversed(_role_spans(question))}


def _titled_roles(question: str, names: Sequence[str]) -> list[str]:
    """The roles the question writes as a title before a name it asks about ('Queen Victoria', 'President Lincoln',
    'von Königin Victoria', 'Papst Franziskus'): the person is pinned by the name, which the check looks for; the
    title need not be stated beside it. A German role after an article is a role of a place or a body ('der
    Präsident Frankreichs'), as an English role in lower case is ('the president of France')."""
    toks = list(_WORD.finditer(question))
    de = _german(question)
    named = {w for n in names for w in n.split()}
    out = []
    for i, m in enumerate(toks[:-1]):
        w, nxt = m.group(0), toks[i + 1]
        if not w[:1].isupper() or question[m.end():nxt.start()] != " " or \
                re.sub(r"['’]s$", "", nxt.group(0)) not in named:
            continue
        r = (german.role(w) if de else None) or (w.lower() if w.lower() in _ROLES_EN else None)
        if r and not (de and i > 0 and toks[i - 1].group(0).lower() in german.DETERMINERS):
            out.append(r)
    return out


_SECOND_IN_COMMAND = re.compile(r"(?i)\bsecond[- ]in[- ]command\b")


_RU_ADJ = re.compile(r"[а-яё]{3,}(ая|яя|ый|ий|ой|ей|ое|ее|ые|ие|ого|его|ому|ему|ую|юю|ым|им|ых|их|ыми|ими)$")
# a Russian adjective's ending -> the endings of the nouns it agrees with (case, number, gender): 'Семилетней войне',
# 'Ледникового периода'; 'Палатой общин' is a noun and its genitive, no adjective and its noun
_RU_AGREE = {"ая": "аяь", "яя": "аяь", "ый": "бвгджзклмнпрстфхцчшщйь", "ий": "бвгджзклмнпрстфхцчшщйь",
             "ой": "ыиейью", "ей": "ыиейью", "ое": "оеи", "ее": "оеи", "ые": "ыиа", "ие": "ыиа", "ого": "ая",
             "его": "ая", "ому": "ую", "ему": "ую", "ую": "уюь", "юю": "уюь", "ым": "мь", "им": "мь",
             "ых": "вйхбвгджзклмнпрстфцчшщь", "их": "вйхбвгджзклмнпрстфцчшщь", "ыми": "иь", "ими": "иь"}


def _ru_agrees(adjective: str, noun: str) -> bool:
    """Whether a Russian noun's ending agrees with the adjective before it (a rough reading of its case)."""
    m = _RU_ADJ.search(adjective.lower())
    if not m:
        return False
    end = m.group(1)
    if end in ("ой", "ей") and noun.endswith(("ой", "ей", "ью")):
        return True
    return noun[-1:] in _RU_AGREE[end]
# a Russian verb's endings (past, present, infinitive): 'Толстой написал' is a name and its verb, no longer name
_RU_VERB = re.compile(r"(л|ла|ло|ли|лся|лась|лось|лись|ть|ться|ти|ет|ит|ут|ют|ат|ят|ется|ится|ются|ятся)$")
_RU_LOWER = re.compile(r"[а-яё][а-яё\-]+")


def _breaks(text: str, toks: Sequence[re.Match[str]]) -> frozenset[int]:
    """The indices of the tokens that punctuation (a comma, a colon, a bracket, a quote, a dash) stands before."""
    return frozenset(i for i in range(1, len(toks))
                     if re.search(r"[,;:()\"«»„“”–—]", text[toks[i - 1].end():toks[i].start()]))


def _names(question: str) -> list[tuple[str, list[str]]]:
    """Names the question uses: runs of capitalised words that do not open it (and are no role or month; in German, no
    common noun: core.answer.german.common_noun), acronyms and codes, each with its words."""
    out: list[tuple[str, list[str]]] = []
    run: list[str] = []
    toks = list(_WORD.finditer(question))
    de = _german(question)
    words = [m.group(0) for m in toks]
    breaks = _breaks(question, toks)

    head: list[str] = []  # the common noun a Russian name's capitalised adjective opens ('Семилетняя война')

    def flush() -> None:
        if run:
            run[-1] = re.sub(r"['’]s$", "", run[-1])  # 'Jane Doe's project': the name is 'Jane Doe'
            out.append((" ".join(run + head), list(run)))
            run.clear()
        head.clear()

    for i, m in enumerate(toks):
        w = m.group(0)
        before = question[: m.start()].rstrip()
        opens = not before or before[-1] in ".?!:;\"«(" or i == 0
        low = w.lower()
        named = (w[:1].isupper() and not opens) or (len(w) >= 2 and w.isupper() and not w.isdigit()) or \
            bool(_CODE.fullmatch(w))
        if named and i in breaks:
            flush()  # 'alle Wege, Q zu vervollständigen': a comma ends a name
        if named and de and not w.isupper() and german.common_noun(words, i, breaks):
            named = False  # German capitalises nouns: 'die Universität' is no name
        if named and de and len(run) == 1 and run[0].endswith("s") and not german.german_word(run[0]) and \
                german.german_word(w) and not w.isupper():
            flush()  # a name's genitive before its noun ('Victorias Mann', 'Kochs Entdeckung'): the name alone
            named = False
        if named and low not in _NOT_NAMES and low not in _ROLES_EN and low not in _MONTHS_EN and \
                not _MONTH_RU.match(low) and not _YEAR.fullmatch(w) and low not in EN_STOP and low not in RU_STOP:
            if not any(low.startswith(r) for r in _ROLES_RU if r not in _ROLE_RU_SHORT):
                run.append(w)
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                if len(run) == 1 and nxt is not None and _ru_agrees(w, nxt.group(0)) and \
                        question[m.end():nxt.start()] == " " and _RU_LOWER.fullmatch(nxt.group(0)) and \
                        nxt.group(0) not in RU_STOP and not _RU_VERB.search(nxt.group(0)):
                    # Russian capitalises a proper name's first word only: 'Семилетняя война' (the Seven Years'
                    # War), 'Ледникового периода'; the name is read whole (its text, what a check across scripts
                    # looks for) and keyed by its capitalised word (as read in Russian text before)
                    head.append(nxt.group(0))
                    flush()
                    continue
                if re.search(r"['’]s$", w) or re.match(r"['’]s\b", question[m.end():]):
                    flush()  # 'Acme's Plant Division': two names, the owner and what it owns
                continue
        flush()
    flush()
    for m in _OPTION.finditer(question):  # command-line options ('--workers')
        out.append((m.group(0), [m.group(0)]))
    for m in _IDENT.finditer(question):  # config keys and dotted names ('max_age', 'os.path')
        if "_" in m.group(0) or m.group(0)[:1].isupper():
            out.append((m.group(0), [m.group(0)]))
    return out


def _soft_names(question: str) -> list[str]:
    """The capitalised words of a German question read as common nouns only by their place or by letter groups English
    names hold too (core.answer.german.strong_noun): 'das Kelbrin', 'den Sudan', 'von Einstein' may be names."""
    if not _german(question):
        return []
    toks = list(_WORD.finditer(question))
    words = [m.group(0) for m in toks]
    breaks = _breaks(question, toks)
    out = []
    for i, m in enumerate(toks):
        w = m.group(0)
        before = question[: m.start()].rstrip()
        if i == 0 or not before or before[-1] in ".?!:;\"«(" or not w[:1].isupper() or w.isupper() or \
                not german.common_noun(words, i, breaks) or german.strong_noun(words, i, breaks) or \
                w.lower() in EN_STOP:
            continue
        out.append(w)
    return list(dict.fromkeys(out))


def _unplaced_soft(question: str) -> set[str]:
    """The soft names of a German question (_soft_names) read as nouns only by their letters, not by their place after
    an article, determiner, number or adjective (core.answer.german.placed_noun): 'von Einstein' rather than 'das
    Delta'."""
    words = [m.group(0) for m in _WORD.finditer(question)]
    soft = set(_soft_names(question))
    return {w for i, w in enumerate(words) if w in soft and not german.placed_noun(words, i)}


_MIXED_CASE = re.compile(r"(?<![\w.\-`])([a-z]{1,4}[A-Z][A-Za-z0-9]*)(?![\w.\-(`])")


def _period(question: str) -> list[Constraint]:
    out = []
    for m in _REL_PERIOD.finditer(question):
        words = [w.lower() for w in _WORD.findall(m.group(0))]
        shift = next((_PERIOD_SHIFT[w] for w in words if w in _PERIOD_SHIFT), 0)
        unit = next((_PERIOD_UNIT.get(w, w) for w in reversed(words) if w in _PERIOD_UNIT or w in
                     ("year", "quarter", "month", "week", "day", "decade", "season", "semester", "term")), "day")
        out.append(Constraint("period", m.group(0).strip(), (f"{unit}:{shift:+d}",)))
    return out


_LOWER_TITLE = re.compile(r"[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*")


def _lower_names(q: str, known: Iterable[str], found: Sequence[Constraint]) -> list[tuple[str, list[str]]]:
    """Names written in lower case that the workspace's documents title themselves with ('greenlet',
    'python-multipart': a package, a tool, a command), as the question writes them. Only a title its own document
    writes in lower case counts: a capitalised title ('Pricing') is an ordinary word when a question writes it in
    lower case, and capitalised names are read by _names already."""
    forms = {re.sub(r"[-_.]", "-", k.strip()) for k in known if _LOWER_TITLE.fullmatch(k.strip() or "-")}
    forms = {f for f in forms if len(f) >= 3 and f not in EN_STOP}
    if not forms:
        return []
    have = {c.text.lower() for c in found if c.kind == "entity"}
    out = []
    for m in re.finditer(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*(?![\w-])", q):
        w = m.group(0)
        if w == w.lower() and re.sub(r"[-_.]", "-", w) in forms and w not in have:
            have.add(w)
            out.append((w, [p for p in re.split(r"[-_.]", w) if p]))
    return out


_DE_TOKEN = re.compile(r"(?<![\w.\-`])([^\W_][\w.]*(?:-[\w.]+)*)(?![\w\-(`])")


def _head_noun(part: str) -> bool:
    """Whether the last part of a hyphenated word is a capitalised German noun ('-Version', '-Bibliothek')."""
    return part[:1].isupper() and not part.isupper() and german.german_word(part)


def _german_names(q: str, found: Sequence[Constraint]) -> tuple[list[tuple[str, list[str]]], dict[str, str]]:
    """A German question's names that German grammar shows rather than capitals: a word written in lower case that is
    no German word ('Welche Mindestversion von pydantic benötigt jsonschema?': core.answer.german.foreign_word), and
    the name a hyphenated compound qualifies its German head noun with ('pandas-Version', 'h11-Bibliothek',
    'Windows-Terminal': the name is 'pandas', 'h11', 'Windows', as English writes 'the pandas version'). Returns the
    new names and, for names already read whole ('Python-Version'), the shorter text to read instead."""
    if not _german(q):
        return [], {}
    have = {c.text.lower() for c in found if c.kind == "entity"}
    out: list[tuple[str, list[str]]] = []
    renamed: dict[str, str] = {}
    for m in _DE_TOKEN.finditer(q):
        w = m.group(1).rstrip(".")
        parts = w.split("-")
        if len(parts) > 1 and _head_noun(parts[-1]) and not all(german_only(p) for p in parts[:-1]):
            # (a compound of German words only, 'Raum-Zeit-Weg', is no name with its head noun)
            name = "-".join(parts[:-1])
            if w.lower() in have:
                renamed[w] = name
                continue
            w = name
        if not re.search(r"[^\W\d_]", w) or w[:1].isupper() and not any(ch.isdigit() for ch in w) or w.lower() in have or \
                w.lower() in EN_STOP or not german.foreign_word(w):
            continue
        have.add(w.lower())
        out.append((w, [p for p in re.split(r"[-_.]", w) if p]))
    return out, renamed


def question_constraints(question: str, known: Iterable[str] = ()) -> tuple[Constraint, ...]:
    """What the question pins down, in the order it says it: names, roles, years, months, numbers, ordinals,
    superlatives, negation, direction of change, relative periods, and the kind of value asked (a person, a year,
    a number). A public function: the answer cache's guard and golden-set generation read it too. `known`: the
    titles of the workspace's documents the query read (a lower-case title is a name: _lower_names)."""
    out: list[Constraint] = []
    q = question.strip()
    modifiers = _acronym_attributes(q)
    for text, words in _names(q):
        if text in modifiers:  # 'the IP rating of': the acronym says which attribute is asked, no name to look for
            continue
        out.append(Constraint("entity", text, tuple(_key(w) for w in words)))
    for text, words in _lower_names(q, known, out):
        out.append(Constraint("entity", text, tuple(_key(w) for w in words)))
    more, renamed = _german_names(q, out)
    out = [Constraint("entity", renamed[c.text], (_key(renamed[c.text]),)) if c.kind == "entity" and c.text in renamed
           else c for c in out]
    for text, words in more:
        out.append(Constraint("entity", text, tuple(_key(w) for w in words)))
    for w in _soft_names(q):
        out.append(Constraint("entity", w, (_key(w),), soft=True))
    for m in _MIXED_CASE.finditer(q):  # a name that opens in lower case and goes on in capitals ('macOS', 'iPhone')
        if not any(c.kind == "entity" and m.group(1).lower() in c.text.lower() for c in out):
            out.append(Constraint("entity", m.group(1), (_key(m.group(1)),)))
    seen_roles = set()
    vm = _ASKS_ROLE_VERB.search(q)
    verb_role = [_VERB_ROLE[(vm.group("v") or vm.group("v2")).lower()]] if vm else []
    titled = _titled_roles(q, [c.text for c in out if c.kind == "entity" and not c.soft])
    for r in _roles(q) + verb_role:
        if r in titled:
            titled.remove(r)
            continue
        if r not in seen_roles:
            seen_roles.add(r)
            out.append(Constraint("role", r, (r,)))
    ys = years(q)
    for y in sorted(ys):
        out.append(Constraint("year", y.replace("x", "0s"), (y,)))
    for mth in sorted(months(q)):
        name = _MONTHS_EN[int(mth[1:]) - 1]
        out.append(Constraint("month", name.capitalize(), (mth,)))
    digits = _digit_numbers(_CODE.sub(" ", q))
    for n in sorted(digits - {y for y in ys}):
        # only a number written in digits pins one: 'the first three quarters', 'one of the' use words loosely
        label = _label_of(q, n)
        out.append(Constraint("number", f"{label} {n}", (n, label)) if label else Constraint("number", n, (n,)))
    for o in sorted(ordinals(q), key=int):
        out.append(Constraint("ordinal", _ordinal_word(int(o)), (o,)))
    for s in sorted(_superlatives(q)):
        if s in ("first", "last") and any(c.kind == "ordinal" for c in out):
            continue
        out.append(Constraint("superlative", s, (s,)))
    attr = _asked_attribute(q)
    if attr is not None:
        out.append(Constraint("attribute", attr, (attr,)))
    else:
        for acr, phrase in modifiers.items():
            out.append(Constraint("attribute", phrase, (phrase, acr)))
    for ev in sorted(_events(q)):
        opp = {b if a == ev else a for a, b in _EVENT_PAIRS if ev in (a, b)}
        if opp and not any(o in _events(q) for o in opp):
            out.append(Constraint("event", ev, (ev, *sorted(opp))))
    if any(w.lower() in _NEG_Q for w in _WORD.findall(q)) or re.search(r"(?i)n't\b", q):
        out.append(Constraint("negation", "not", ("not",)))
    up, down = bool(_UP.search(q)), bool(_DOWN.search(q))
    if up != down:
        out.append(Constraint("direction", "up" if up else "down", ("up" if up else "down",)))
    out.extend(_period(q))
    out.extend(_attribute_constraints(q, out))
    asks = ("a company" if _ASKS_ORG.search(q) else "a person" if _ASKS_PERSON.search(q) else
            "a month" if _ASKS_MONTH.search(q) else "a year" if _ASKS_YEAR.search(q) else
            "a date or year" if _ASKS_WHEN.search(q) else "a number" if _ASKS_NUMBER.search(q) else "")
    if asks:
        out.append(Constraint("asks", asks, (asks,)))
    return tuple(out)


def constraint_words(question: str, constraints: Sequence[Constraint]) -> str:
    """The question's words that say its constraints (the names, 'born' of a birth, 'directed' of a director, the
    superlative): what is left of the question is what it asks about them."""
    out = [c.text for c in constraints if c.kind not in ("asks", "negation", "direction")]
    for c in constraints:
        if c.kind == "attribute" and c.text in _ATTRS:
            out += [w for w in _ATTRS[c.text] if not _CYR.search(w)]
        if c.kind == "role":
            out += [m.group(0) for r, rx in _ROLE_VERB if r == c.text.split()[-1] for m in rx.finditer(question)]
    return " ".join(out)


def _attribute_constraints(q: str, found: Sequence[Constraint]) -> list[Constraint]:
    """The thing asked about when the question writes it in lower case (a package: 'the author of texttable?'), and
    the attribute asked when an answer must carry a value of it (a license, a version, a default): see
    core.answer.attributes."""
    out = []
    have = {c.text.lower() for c in found if c.kind == "entity"}
    for name in subject_names(q):
        if name.lower() not in have:
            out.append(Constraint("entity", name, (_key(name),)))
    attr = asked_attribute(q)
    if attr is not None and attr.value == "default":
        m = _DEFAULT_OF.search(q)
        setting = (m.group("a") or m.group("b")) if m else None
        if setting and setting.lower() not in _GENERIC_SETTING and setting.lower() not in have and \
                not _IDENT.fullmatch(setting) and not any(setting.lower() == n.lower() for n in subject_names(q)):
            out.append(Constraint("entity", setting, (_key(setting),)))  # the setting asked about ('delta', 'timeout')
    if attr is not None and attr.value in ("license", "version", "default"):
        out.append(Constraint("asks", attr.name, (attr.value,)))
    return out


# the setting a default is asked of: 'the default value of the delta parameter', 'the default timeout of'
_DEFAULT_OF = re.compile(r"(?i)\bdefault\s+(?:value\s+)?(?:of\s+)?(?:the\s+)?(?:(?P<a>[a-z][\w\-]*)\s+(?:parameter|"
                         r"option|setting|argument|flag|field|variable|key|attribute)\b|(?P<b>[a-z][\w\-]*)\s+(?:of|for|in)\b)")
_GENERIC_SETTING = frozenset("value values number size one kind type way setting option parameter argument mode "
                             "behaviour behavior level amount length name".split())


# 'When ...?' is also answered by a time of day, a weekday, a season or a frequency ('every night', 'weekly').
_WHEN_RECURRING = re.compile(
    r"(?i)\b(every|each|daily|nightly|weekly|fortnightly|monthly|quarterly|yearly|annually|hourly|weekends?|"
    r"mornings?|evenings?|nights?|noon|midnight|dawn|dusk|o'clock|\d{1,2}(:\d\d)?\s?(am|pm|a\.m\.|p\.m\.)|"
    r"mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|spring|summer|autumn|fall|winter|"
    r"кажд\w+|ежедневно|еженедельно|ежемесячно|ежегодно|утром|вечером|ночью|днём|днем|по (понедельникам|"
    r"вторникам|средам|четвергам|пятницам|субботам|воскресеньям)|весной|летом|осенью|зимой)\b")


# What states a time beside years and months (the 'When' check): units of time after a number, centuries and decades,
# an event a time is anchored to, and date words.
_TIME_UNIT = re.compile(r"(?i)\b(years?|months?|weeks?|days?|hours?|BP|BC|BCE|AD|CE|ago|later|earlier|afterwards|"
                        r"centur\w+|decades?|millenni\w+|лет|года?|годам|месяц\w*|недел\w+|дн[яей]\w*|дней|час\w*|"
                        r"век\w*|назад|спустя|позже|раньше|тысячелет\w*|н\.\s?э)\b")
_CENTURY = re.compile(r"(?i)\b(centur(y|ies)|decades?|millenni(um|a)|\d{2,4}s|век[а-я]*|веках|десятилети\w*|"
                      r"тысячелети\w*)\b")
_ANCHOR = re.compile(r"(?i)\b(during|after|before|following|until|till|since|by the (end|time|start) of|at the (end|"
                     r"start|beginning|outbreak) of|in the wake of)\s+(the\s+)?([A-Z]\w+|(\w+\s+){0,2}(war|reign|"
                     r"revolution|era|period|age|dynasty|conquest|invasion|crisis|depression|independence|death|"
                     r"birth|election|collapse|fall|rise|treaty|accession|coronation|merger|acquisition|launch|"
                     r"founding|opening|closure))\b|\b(во время|после|до|перед|в период|в эпоху|в ходе|накануне|"
                     r"с момента|к моменту|к концу|в начале|в конце)\s+(\w+\s+){0,2}(войн\w*|правлени\w*|"
                     r"революци\w*|эпох\w*|период\w*|династи\w*|завоевани\w*|вторжени\w*|кризис\w*|"
                     r"независимост\w*|смерт\w*|рождени\w*|выбор\w*|распад\w*|падени\w*|основани\w*|"
                     r"открыти\w*|закрыти\w*|[А-ЯЁ]\w+)")
_YEARS_UNIT = re.compile(r"(?i)\b(years?|BP|BC|BCE|AD|CE|лет|года?|годам|н\.\s?э)\b")
# an event the time is told by, in a clause ('... became supportive when Germany started to build an empire')
_WHEN_CLAUSE = re.compile(r"(?i)\w[\w,]*\s+(when|once|as soon as|after|before|until|когда|как только|после того,? как|"
                          r"до того,? как|пока|sobald|nachdem|bevor)\s+(the\s+|a\s+|der\s+|die\s+|das\s+)?\w+\s+\w+")
# (German 'als' and 'bis' are also 'as' and 'up to': left out)
_DATE_WORD = re.compile(r"(?i)\b(today|yesterday|tomorrow|recently|currently|nowadays|at present|at the time|"
                        r"in the (past|future)|сегодня|вчера|завтра|недавно|сейчас|в настоящее время|в прошлом|"
                        r"в будущем)\b|\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b|\b\d{4}-\d{2}-\d{2}\b")


def _ordinal_word(n: int) -> str:
    inv = {v: k for k, v in _ORD_EN.items()}
    return inv.get(n, f"{n}th")


# -- checking ----------------------------------------------------------------------------------------------------
# 'first' said otherwise: the earliest, the beginning, a debut
_FIRST_SAID = re.compile(r"(?i)\b(earliest|initial(ly)?|original(ly)?|inaugural|maiden|debut\w*|premier(e|ed)|founding|"
                         r"began|begin(s|ning)?|start(ed|s)?|introduc\w+|pioneer\w*|oldest|eldest|впервые|начал\w*)\b")
# a sentence that goes on about its chunk's subject with a definite noun ('The film', 'The couple')
_REFERS = re.compile(r"(?i)^\W*(the|this|that|these|those)\s+[a-z]+")
# A sentence that refers back ('he', 'its', 'the city') is about what its chunk names.
def _outside_items(chunk: str) -> str:
    """A chunk's text without its list items (each with its indented lines): its headings and lead-in sentences."""
    keep: list[str] = []
    in_item = False
    for ln in chunk.split("\n"):
        if ITEM_LINE.match(ln):
            in_item = True
        elif not (in_item and ln[:1] in (" ", "\t") and ln.strip()):
            in_item = False
            keep.append(ln)
    return "\n".join(keep)


_POINTS_BACK = re.compile(r"(?i)\b(he|she|it|they|his|her|its|their|him|them|this|these|those|the same|such|"
                          r"он|она|оно|они|его|её|ее|их|ему|ей|им|этот|эта|это|эти|тот|та)\b")


@dataclass(frozen=True)
class _Read:
    """One evidence text's values, read once."""

    keys: set[str]
    years: set[str]
    months: set[str]
    numbers: set[str]
    ordinals: set[str]
    supers: set[str]
    roles: list[str]
    raw: str = ""
    raw_cased: str = ""


_ROLE_BY = re.compile(r"(?i)\b(directed|produced|composed|edited|photographed|written|designed|founded|invented|"
                      r"painted|illustrated|translated|narrated|choreographed|conducted|hosted|presented) by\b")


def _verb_states(role: str, text: str) -> bool:
    """Whether a text states the role with its verb ('directed by' for the director)."""
    return any(r == role and rx.search(text) for r, rx in _ROLE_VERB)


# a web address: a name inside one ('https://github.com/acme/tool') is where a page lives, no mention of the name
_URL = re.compile(r"(?i)\b(?:https?|ftp)://[^\s<>()\[\]`'\"]+|\bwww\.[^\s<>()\[\]`'\"]+")


@lru_cache(maxsize=1024)
def _read(text: str) -> _Read:  # read once per text: a chunk is the context of each sentence quoted from it
    roles = _roles(text) + [_VERB_ROLE[m.group(1).lower()] for m in _ROLE_BY.finditer(text)]
    return _Read(_keys(_URL.sub(" ", text)), years(text), months(text), numbers(text), ordinals(text),
                 _superlatives(text), roles, text.lower(), text)


def _year_in(y: str, found: set[str]) -> bool:
    if y.endswith("x"):
        return any(f[:3] == y[:3] for f in found)
    return y in found or f"{y[:3]}x" in found


def asked_roles(question: str) -> list[str]:
    """The roles or titles the question asks about, each with its English words when it is written in another language
    ('финансовый директор' -> 'chief financial officer'; core.answer.translit.english_of)."""
    out: list[str] = []
    for c in question_constraints(question):
        if c.kind == "role":
            out += [c.values[0], *english_of("role", c.values[0])]
    return list(dict.fromkeys(out))


def states_role(roles: Sequence[str], text: str) -> bool:
    """Whether a text (English, Russian or German) states one of the roles ('X is the chief financial officer')."""
    found = _read(text).roles
    return bool(found) and any(_role_in(r, found) for r in roles)


_SAME_ROLE = {"writer": "author", "author": "writer"}  # who wrote a package or a book is its author


def _role_in(role: str, found: Sequence[str]) -> bool:
    base = role.split()[-1]
    for f in found:
        fb = f.split()[-1]
        if fb == base or _SAME_ROLE.get(base) == fb:
            # a modifier that changes the role ('vice president' is not 'president') must agree when either has one
            mod, fmod = role.split()[:-1], f.split()[:-1]
            if mod == fmod or (not mod and fmod and fmod[0] in ("first", "senior", "acting", "interim")) or \
                    (mod and not fmod and mod[0] in ("first", "senior", "acting", "interim", "general", "chief")):
                return True
        if role.split()[0] == "deputy" and f == "deputy":
            return True  # a deputy asked ('the deputy commander'), a deputy read ('as his deputy', 'Stellvertreter')
    return False


def _entity_in(c: Constraint, read: _Read, cross: bool) -> bool:
    if _OPTION.fullmatch(c.text):  # an option as written, never inside a longer one ('--work' in '--workers')
        return re.search(re.escape(c.text.lower()) + r"(?![\w-])", read.raw) is not None
    if _IDENT.fullmatch(c.text) or _CODE.fullmatch(c.text):  # a key or a code ('max_age', 'E-ABC-1234') as written
        if c.text.lower() in read.raw:
            return True
        # the plural of a model code is that model ('the ZX-210s', 'A320s': at least two digits, then 's'; 'iPhone 5s'
        # is another product), stated as written and never inside a longer code ('ZX-2100')
        plural = _CODE_PLURAL.fullmatch(c.text)
        return plural is not None and re.search(
            r"(?<![\w-])" + re.escape(plural.group(1).lower()) + r"(?![\w-])", read.raw) is not None
    if re.fullmatch(r"[A-ZА-ЯЁ]{2,6}", c.text) and _acronym_in(c.text, read.raw_cased):
        return True
    if cross and re.fullmatch(r"[А-ЯЁ]{2,6}", c.text) and acronym_stated(c.text, read.raw_cased):  # a Cyrillic
        # acronym over Latin text: a Latin acronym or a capitalised run whose initials are its letters'
        # transliteration or their translated words' ('ОМЦ' is the United Methodist Church:
        # core.answer.translit.acronym_stated); else by its sound or translation below ('США', 'НАТО')
        return True
    keys = [k for k in c.values if k not in EN_STOP and k not in RU_STOP]
    if not keys:
        return True
    de = _german(read.raw_cased)

    def found(k: str) -> bool:
        return k in read.keys or (len(k) >= 5 and any(x.startswith(k) for x in read.keys)) or \
            bool(_CYR.search(k) and len(k) >= 4 and any(x[:4] == k[:4] and len(x) >= 4 for x in read.keys)) or \
            (de and len(k) >= 5 and any(x.endswith(k) or (len(k) >= 7 and x.startswith(k[:-2])) for x in read.keys)) \
            or (de and _de_found(k, read.keys)) or \
            (de and "-" in k and all(german.german_word(p) and found(_key(p)) for p in k.split("-")))
        # (a hyphenated compound of German words, each written in the evidence: 'Tuberkulose-Testes' in a text of
        # 'Tuberkulose' and 'Testverfahren')
        # (German evidence: a name inside a compound, 'Nordwesteuropa', or with another case ending, 'Niederlande',
        # 'Paaren' and 'Paare', 'Hilfe' and 'Wohnraumhilfen')
    # a Latin name of capitalised words is stated with its first word and, of two words, whole ('Chen died' is not
    # 'Wang Chen'; 'Mary Jane Warnes, MBE' is not 'Andrea Jane Corr MBE'); its first word may be clipped ('Lor')
    person = " " in c.text and not any(_CYR.search(k) for k in keys) and all(w[:1].isupper() for w in c.text.split())
    first = bool(keys) and (found(keys[0]) or (person and len(keys[0]) >= 3 and
                                               any(x.startswith(keys[0]) for x in read.keys)))
    hit = sum(1 for k in keys[1:] if found(k)) + int(first)
    need = (len(keys) if len(keys) <= 2 else (len(keys) + 1) // 2) if person else (len(keys) + 1) // 2
    if person and len(keys) >= 3 and not found(keys[-1]):
        return False  # 'Abdel Nasser' is not 'Abdel Nasser Barakat': a long name keeps its last word
    if hit >= need and hit and (not person or first):
        return True
    if cross and _CYR.search(c.text):  # a Russian name over English text: each word by its sound or its known
        # translation (core.answer.translit); a loose letter match passed invented names
        return name_stated(c.text, read.raw_cased)
    if cross and hit < len(keys):  # a German name over English text: the words German writes otherwise
        # ('Frankreich' is 'France') by their English forms, the others as written
        words = [w for w in _WORD.findall(c.text) if w.lower() not in EN_STOP]
        return bool(words) and all(found(_key(w)) or any(re.search(r"(?<!\w)" + re.escape(e), read.raw)
                                                         for e in german.english_names(w))
                                   for w in words) and any(german.english_names(w) for w in words)
    if de and hit < len(keys) and not any(_CYR.search(k) for k in keys):  # German evidence: a people, its country
        # and its adjective are one name ('Franzosen', 'Frankreich', 'französischen': core.answer.german.english_names)
        words = [w for w in _WORD.findall(c.text) if w.lower() not in german.FUNCTION_WORDS]
        said = _german_name_forms(read.raw_cased)
        return bool(words) and any(german.english_names(w) for w in words) and \
            all(found(_key(w)) or set(german.english_names(w)) & said for w in words)
    return False


@lru_cache(maxsize=1024)
def _german_name_forms(text: str) -> frozenset[str]:
    """The English forms of the names a German text writes otherwise than English (core.answer.german.english_names:
    'französischen' -> french, france)."""
    return frozenset(e for w in set(_WORD.findall(text)) if len(w) >= 3 for e in german.english_names(w))


_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(")
_DE_ENDING = re.compile(r"(?<=\w{4})(en|er|es|em|ern|n|s|e)$")


def _de_stem(word: str) -> str:
    """A German word without its case or plural ending ('Paaren' -> 'paar', 'Hilfen' -> 'hilf')."""
    return _DE_ENDING.sub("", word.lower())


def _de_found(key: str, keys: set[str]) -> bool:
    """Whether a German word is in a German text's words with another ending, or as the last or first part of a
    compound ('Hilfe' in 'Wohnraumhilfen', 'Rhein' in 'Rheindelta'): stems of four letters or more."""
    k = _de_stem(key)
    if len(k) < 4:
        return False
    return any(x.startswith(k) or x.endswith(k) for x in map(_de_stem, keys) if len(x) >= len(k))


_SMALL = frozenset("of the and for de la von van der du des и для".split())


_RECORD_KEYS = re.compile(r"(?im)^\s*(?:name|title|package|project|module|program|import-name|command|tool)\s*:\s*(.+)$")


def _names_the_record(c: Constraint, chunk: str) -> bool:
    """Whether a header's own name field ('Name: texttable', 'Title: …') states the asked name; a header with no
    such field (a memo's 'Date:' and 'Prepared by:' lines) is about what its chunk names."""
    named = [m.group(1) for m in _RECORD_KEYS.finditer(chunk)]
    if not named:
        return True
    return any(_entity_in(c, _read(n), False) for n in named)


# acronyms of states and international bodies and how English, German and Russian text write them out (a name, not
# initials: 'USA' is 'the United States', 'die Vereinigten Staaten', 'US-Verfassung')
_ACRONYM_FORMS = {
    "USA": r"United States|U\.S\.|\bUS\b|Vereinigte\w* Staaten|США|Соединённ\w+ Штат|Соединенн\w+ Штат",
    "UK": r"United Kingdom|Vereinigte\w* Königreich|Великобритани|Соединённ\w+ Королевств",
    "EU": r"European Union|Europäische\w* Union|Евросоюз|Европейск\w+ союз",
    "UN": r"United Nations|Vereinte\w* Nationen|ООН|Объединённ\w+ Наци|Объединенн\w+ Наци",
    "USSR": r"Soviet Union|Sowjetunion|СССР|Советск\w+ Союз",
    "NATO": r"North Atlantic Treaty|Nordatlantik|НАТО",
}
_ACRONYM_FORMS.update({"UNO": _ACRONYM_FORMS["UN"], "UdSSR": _ACRONYM_FORMS["USSR"], "СССР": _ACRONYM_FORMS["USSR"],
                       "США": _ACRONYM_FORMS["USA"], "ООН": _ACRONYM_FORMS["UN"], "ЕС": _ACRONYM_FORMS["EU"]})


def _acronym_in(acr: str, raw: str) -> bool:
    """An acronym ('MSP', 'UMC') spelled out in the text: the initials of a run of capitalised words (small words
    between them skipped) hold it; a German compound's words do too ('WM': 'Weltmeisterschaft'); a state's or an
    international body's acronym is also met by its name (_ACRONYM_FORMS)."""
    if acr in _ACRONYM_FORMS and re.search(_ACRONYM_FORMS[acr], raw):
        return True
    words = re.findall(r"[^\W\d_]+", raw)
    if len(acr) <= 4 and _german(raw):
        lex = german.lexicon()
        for w in {w for w in words if w[:1].isupper() and len(w) >= 4 * len(acr) - 1}:
            parts = compound_parts(w.lower(), lex)
            if parts and "".join(p[0] for p in parts) == acr.lower():
                return True
    run = ""
    for w in words:
        if w[:1].isupper():
            run += w[0].upper()
            if acr.upper() in run:
                return True
        elif w.lower() not in _SMALL:
            run = ""
    return False


def _neighbours(text: str, span: tuple[int, int]) -> set[str]:
    de = _german(text)

    def content(w: str) -> bool:  # a possessive's 's' or an article is no neighbour (German: 'den', 'von' neither)
        return len(w) > 2 and w.lower() not in EN_STOP and w.lower() not in RU_STOP and \
            not (de and w.lower() in german.FUNCTION_WORDS)
    before = [w for w in _WORD.findall(text[: span[0]]) if content(w)]
    after = [w for w in _WORD.findall(text[span[1]:]) if content(w)]
    # (English: the two words after, a name's verb and its adverb or object: 'Helio become generally available'
    # beside 'Vireo 1.0 became generally available'; Russian keys are five-letter stems, too loose for a second word)
    return {_key(w) for w in before[-1:] + after[:1 if de or _CYR.search(text) else 2]}


def _series(code: str) -> str:
    """The letters a code opens with when it is a code ('ZX' of 'ZX-210'), else ''."""
    m = re.match(r"[^\W\d_]+", code)
    return m.group(0) if m and _CODE.fullmatch(code) else ""


# a package header's dependency line and the distribution it names ('Requires-Dist: typing-extensions>=4.10.0; ...')
_DEPENDENCY = re.compile(r"^\s*Requires(?:-Dist|-External)?\s*:\s*([A-Za-z0-9][A-Za-z0-9._\-]*)", re.I)


def _dist(name: str) -> str:
    """A distribution name normalised as packaging does (PEP 503): lower case, runs of '-', '_', '.' as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


_LITERALS = frozenset("True False None Null NULL TRUE FALSE NONE".split())


def _parallel_names(c: Constraint, sentence: str, question: str) -> list[str]:
    """Names the sentence states in the slot where the question has the asked name: the same word beside them
    ('the Shelbyville office' asked, 'the Springfield office opened ...' read)."""
    at = question.find(c.text)
    if at < 0:
        return []
    around = _neighbours(question, (at, at + len(c.text)))
    qkeys = _keys(question)
    out = []
    for name, _ in _names(" x " + sentence):
        if _series(c.text) and any(_series(w) == _series(c.text) and w != c.text for w in name.split()) and \
                c.text not in name.split():
            out.append(name)  # a code of the same series ('ZX-340 Rugged' beside the asked 'ZX-210')
            continue
        own = [w for w in name.split() if not _keys(w) & qkeys]
        if (_keys(name) & qkeys and not (len(own) < len(name.split()) and own and all(w.isalpha() for w in own))) or \
                _keys(c.text) & _keys(name) or len(name) < 2 or name in _LITERALS:
            continue  # (a value the sentence states, 'False', 'None', is no name beside the asked one; a name whose
            # words the question all uses, or that holds the asked one, is the asked thing: 'new Windows Terminal'
            # beside the asked 'classic macOS terminal' holds one word of its own, Windows)
        i = sentence.find(name)
        if i >= 0 and _neighbours(sentence, (i, i + len(name))) & around:
            out.append(name)
    if c.text == c.text.lower():  # a lower-case name asked ('the oldest pandas version'): a lower-case word in its
        # slot, before the same noun, is its sibling ('the oldest numpy version ...'), unless it only qualifies it
        noun = re.match(r"(?:\s+|-)(\w+)", question[at + len(c.text):])  # (German joins it: 'pandas-Version')
        for m in re.finditer(r"(?<![\w.`])([a-z][a-z0-9\-]*[a-z0-9])(?=\s+(\w+))", sentence) if noun else ():
            w = m.group(1)
            if len(w) < 3 or w in EN_STOP or w in QUALIFIERS or _key(w) in qkeys or w in out or \
                    m.group(2).lower() != noun.group(1).lower():
                continue
            out.append(w)
    return out


def _check_one(c: Constraint, parts: Sequence[tuple[str, _Read]], sentence_read: _Read, sentence: str,
               question: str, cross: bool, heading: str = "", names: NameCheck | None = None, near: str = "",
               path: str = "") -> Verdict:
    """parts: (where, read) in the order evidence counts: sentence, heading, title, chunk."""
    local = parts[:3]
    if c.kind == "entity" and _OPTION.fullmatch(c.text) and not _entity_in(c, sentence_read, False):
        others = sorted({m.group(0) for m in _OPTION.finditer(sentence)} - {c.text})
        if others:  # asked what --workers does, the sentence is about --reload
            return Verdict(c, "unmet", instead=tuple(others[:3]))
    if c.kind == "entity" and "_" in c.text and _IDENT.fullmatch(c.text) and not _entity_in(c, sentence_read, False):
        said = {m.group(0) for m in _IDENT.finditer(re.sub(r"\w+://\S+", " ", sentence)) if "_" in m.group(0)}
        asked = {m.group(0) for m in _IDENT.finditer(question) if "_" in m.group(0)}
        others = sorted(said - asked)
        if others and len(others) == len(said) and len(asked) == 1:  # asked max_array_len's default, the sentence
            # gives max_buffer_size's (a web address's path aside); a question that names a setting and its function
            # ('float_mode of from_json') leaves the sentence's other parameters to the checks below
            return Verdict(c, "unmet", instead=tuple(others[:3]))
    if c.kind == "entity" and re.search(r"(?<![\w.])" + re.escape(c.text) + r"\(", question):
        calls = {m.group(1) for m in _CALL.finditer(sentence)}
        others = sorted(x for x in calls if x != c.text and x[:1].isupper() == c.text[:1].isupper())
        if others and c.text not in calls:  # asked what Ge(x) means, the sentence is about Gt(1.5)
            return Verdict(c, "unmet", instead=tuple(others[:3]))
    dep = _DEPENDENCY.match(sentence) if c.kind == "entity" and not c.soft else None
    if dep and _dist(dep.group(1)) != _dist(c.text) and not _entity_in(c, parts[2][1], False):
        # a dependency line names the one package it requires ('Requires-Dist: attrs>=22.2.0'): asked about another
        # (not the record's own name, its title), the line is about its sibling
        return Verdict(c, "unmet", instead=(dep.group(1),))
    if c.kind == "entity" and c.soft:  # a German word that may be a name or a noun: stated, or read by the encoder
        # among the words of German evidence ('Spitzname' for 'Rheindelta'); across languages, stated by its sound or
        # the encoder's reading of the question with and without it (core.answer.crosslingual.NameFinder.soft_across)
        for where, r in parts[:4]:
            if _entity_in(c, r, False) or (sum(ch.isupper() for ch in c.text) >= 2 and c.text in "".join(
                    w[0] for w in re.findall(r"[^\W\d_]+", r.raw_cased))):  # 'EmK': Evangelisch-methodistische Kirche
                return Verdict(c, "met", where)
        whole = " / ".join(r.raw_cased for _, r in parts[:4] if r.raw_cased)
        soft = getattr(names, "soft_across", None)
        if cross and soft is not None and sum(ch.isupper() for ch in c.text) < 2:  # (an acronym of German words,
            # 'EmK', is written otherwise in another language: left unchecked)
            title = parts[2][1].raw_cased
            said = soft(c.text, question, f"{title}: {sentence}" if title else sentence, whole)
            if said is not None:
                return Verdict(c, "met", "chunk") if said else Verdict(c, "unmet")
        noun = getattr(names, "noun_stated", None)
        if cross or noun is None or not _german(whole):
            return Verdict(c, "unchecked")
        return Verdict(c, "met", "chunk") if noun(c.text, whole) else Verdict(c, "unmet")
    if c.kind == "entity":
        literal = False  # the name stands in the evidence as written, in a place that does not count
        for where, r in parts[:4]:
            if _entity_in(c, r, cross and not _CYR.search(" ".join(r.keys))):
                literal = True
                head = heading.strip("`*# ")
                if where == "chunk" and _IDENT.fullmatch(c.text) and c.text.lower() in near.lower():
                    return Verdict(c, "met", "chunk")  # the item just before names the setting this one goes on about
                if where == "chunk" and _IDENT.fullmatch(c.text) and head and " " not in head and \
                        head.lower() != c.text.lower() and head.lower() not in _keys(parts[2][1].raw):
                    # a setting's sentence under another setting's heading (the document's own title, a package's
                    # name, heads all its settings)
                    return Verdict(c, "unmet", instead=(head,))
                if where == "chunk" and FIELD_LINE.match(sentence) and not _names_the_record(c, r.raw_cased):
                    continue  # a field of a header ('Author: …') is about the record its Name line names, not about
                    # a package another field lists ('Requires-Dist: numpy')
                if where == "chunk" and ITEM_LINE.match(sentence) and \
                        not _entity_in(c, _read(_outside_items(r.raw_cased)), cross and not _CYR.search(r.raw_cased)):
                    continue  # a list item is about what it names: the name stands only in a sibling item ('- Talk
                    # Python to me Podcast' above '- Python Bytes Podcast / Episode 402')
                if where == "chunk" and not _POINTS_BACK.search(sentence):
                    others = _parallel_names(c, sentence, question)
                    if others:  # the sentence says it of a sibling the chunk names beside it (the Springfield office)
                        return Verdict(c, "unmet", instead=tuple(others[:3]))
                return Verdict(c, "met", where)
        if path and path != heading and _entity_in(c, _read(path), cross and not _CYR.search(path)):
            return Verdict(c, "met", "heading")  # a section above the sentence's own heading names it (an HTML or
            # Markdown page's '<h2>Helio Shipping</h2>' over '<h3>Contract</h3>')
        if cross and names is not None and (_CYR.search(c.text) or _german(question) and not literal and
                                            not (c.text[:1].islower() and german.foreign_word(c.text))):
            # another script or language: the name's transliteration or the encoder's reading (a Latin name of a
            # Russian question is checked as written, above and below; a name the evidence writes as the question
            # does was read above, where it stands; a German question's lower-case word that is no German word,
            # 'pandas', is written so in any language)
            whole = " / ".join(r.raw_cased for _, r in parts[:4] if r.raw_cased)
            title = parts[2][1].raw_cased
            read = f"{title}: {sentence}" if title else sentence
            return Verdict(c, "met", "chunk") if names(c.text, question, read, whole) else Verdict(c, "unmet")
        if cross and _CYR.search(c.text) and not _CYR.search(sentence):
            return Verdict(c, "unchecked")
        # a name the evidence never states: the sibling shown is one the sentence states in the asked name's slot
        return Verdict(c, "unmet", instead=tuple(_parallel_names(c, sentence, question)[:3]))
    if c.kind in ("role", "event", "superlative") and cross and _CYR.search(c.text) and not _CYR.search(sentence):
        return _across(c, parts, sentence_read, sentence, question)
    if c.kind == "role":
        for where, r in local:
            if _role_in(c.text, r.roles) or _verb_states(c.text.split()[-1], r.raw_cased):
                return Verdict(c, "met", where)
        asked = _roles(question)
        other = [x for x in sentence_read.roles if not _role_in(c.text, [x]) and not any(_role_in(a, [x]) for a in asked)]
        if other:
            return Verdict(c, "unmet", instead=tuple(dict.fromkeys(other)))
        if _role_in(c.text, parts[3][1].roles) or _verb_states(c.text.split()[-1], parts[3][1].raw_cased):
            return Verdict(c, "met", "chunk")
        return Verdict(c, "unmet")
    if c.kind == "ordinal" and not _CYR.search(question):
        bound = _ordinal_of(c, question, parts, sentence)
        if bound is not None:
            return bound
    if c.kind == "number" and len(c.values) > 1:  # a label ('phase 3'): met only where the label is stated with it
        return _label_verdict(c, parts, sentence)
    if c.kind in ("year", "month", "number", "ordinal"):
        attr = {"year": "years", "month": "months", "number": "numbers", "ordinal": "ordinals"}[c.kind]
        v = c.values[0]
        for where, r in (parts if c.kind in ("year", "month") else parts[:4]):
            found = getattr(r, attr)
            if (_year_in(v, found) if c.kind == "year" else v in found):
                if where == "chunk" and not _CYR.search(sentence) and not _POINTS_BACK.search(sentence) and \
                        not _names(" x " + sentence) == [] and not _REFERS.search(sentence):
                    continue  # an English sentence about something it names itself: the chunk's value is another's
                if where == "chunk" and c.kind in ("year", "month", "ordinal"):
                    sib = getattr(sentence_read, attr) - {v}
                    if sib and not (c.kind == "year" and any(_year_in(v, {s}) for s in sib)):
                        return Verdict(c, "unmet", instead=tuple(sorted(_show(c.kind, sib))))
                return Verdict(c, "met", where)
            if c.kind == "number" and v in ("1", "2") and where == "chunk":
                pass
        if c.kind == "ordinal" and v == "1":  # 'first' is often said otherwise ('initially', 'began')
            if re.search(r"(?i)\b(last|final|latest|последн\w*)\b", sentence):
                return Verdict(c, "unmet", instead=("last",))
            if any(_FIRST_SAID.search(r.raw_cased) for _, r in local):
                return Verdict(c, "met", "sentence")
            if re.search(r"(?i)\b(last|final|latest)\b", parts[3][1].raw_cased) and not _CYR.search(sentence):
                return Verdict(c, "unmet", instead=("last",))  # the passage speaks of the last one, not the first
            noun = next((w for n, w in _ordinals_before(question) if n == v), "")
            if noun and noun not in _NOT_NOUN and noun not in _NUM_EN and not _CYR.search(question) and \
                    not _german(question) and \
                    not any(_key(noun) in r.keys for _, r in local):
                return Verdict(c, "unmet")  # 'after the first cutover wave': a sentence that never speaks of a
                # wave states no first one
            if not (sentence_read.ordinals - {v}):
                return Verdict(c, "met", "sentence")
        sib = getattr(sentence_read, attr) - {v}
        return Verdict(c, "unmet", instead=tuple(sorted(_show(c.kind, sib))))
    if c.kind == "attribute" and len(c.values) > 1:  # an acronym's attribute ('IP rating'): stated nearby
        if any(_states_acronym_attribute(c, r.raw_cased) for _, r in local):
            return Verdict(c, "met", "sentence")
        return Verdict(c, "unmet")
    if c.kind == "attribute":  # the sentence (its heading, its title) must state the asked attribute
        span = _LIFESPAN.search(sentence) if c.text in ("birth", "death") else None
        if span is not None and not re.search(r"(?i)\b(born|died|death|birth)\b", span.group(0)):
            halves = re.split(r"[–—]|\s-\s|(?<=\d)-(?=\s?\d)|(?<=\d{4})(?=\s?[A-Z])", span.group(0), maxsplit=1)
            if len(halves) == 2:
                mine, theirs = (halves[0], halves[1]) if c.text == "birth" else (halves[1], halves[0])
                asked_y, asked_m = years(question), months(question)
                if (asked_y or asked_m) and not (asked_y <= years(mine) and asked_m <= months(mine)) and \
                        asked_y <= years(theirs) and asked_m <= months(theirs):
                    return Verdict(c, "unmet", instead=("death" if c.text == "birth" else "birth",))
        if any(_states_attribute(c.text, r) for _, r in local):
            return Verdict(c, "met", "sentence")
        other = [a for a in _ATTRS if a != c.text and _states_attribute(a, sentence_read)]
        return Verdict(c, "unmet", instead=tuple(other[:3]))  # (the lexicon holds both languages' words)
    if c.kind == "event":  # asked when it opened, the sentence says when it closed: the opposite event
        said = _events(sentence)
        if c.values[0] in said or not said & set(c.values[1:]):
            return Verdict(c, "met", "sentence")
        return Verdict(c, "unmet", instead=tuple(sorted(said & set(c.values[1:]))))
    if c.kind == "superlative" and c.values[0] in ("minimum", "maximum") and not _CYR.search(question):
        # a bound states the minimum or the maximum: 'Requires-Python: >=3.10', 'at least 2 GB', '<5' ('>=' is no
        # maximum, '<' no minimum)
        lower, upper = _BOUND_LOWER, _BOUND_UPPER
        mine, theirs = (lower, upper) if c.values[0] == "minimum" else (upper, lower)
        for where, r in local:
            if mine.search(r.raw_cased):
                return Verdict(c, "met", where)
        if theirs.search(sentence) and not _has_super(sentence_read, c.values[0]):
            return Verdict(c, "unmet", instead=("maximum" if c.values[0] == "minimum" else "minimum",))
    if c.kind == "superlative" and not _CYR.search(question) and _ranks_quantity(question, c.values[0]) and \
            not (_opposite(c.values[0]) & sentence_read.supers):
        # the longest wait, the highest price: a stated cap of that quantity ('up to 60 s', 'at most 6 W', 'until it
        # reaches 60000 ms') gives it; the shortest, the lowest: a stated floor ('at least 2 s')
        bounds = (_BOUND_UPPER, _CAP_UPPER) if _QTY_SUPER[c.values[0]] else (_BOUND_LOWER, _CAP_LOWER)
        for where, r in local:
            if re.search(r"\d", r.raw) and any(b.search(r.raw_cased) for b in bounds):
                return Verdict(c, "met", where)
    if c.kind == "superlative":
        want = c.values[0]
        opp = _opposite(want)

        def has(r: _Read, s: str) -> bool:
            return s in r.supers or (bool(_CYR.search(s)) and any(x.startswith(s[:5]) for x in r.supers)) or \
                (not _CYR.search(s) and s in r.keys)
        phrase = re.search(rf"(?i)\bthe\s+{want}\s+([a-z]{{3,}})", question) if want in ("most", "least") else None
        if phrase and phrase.group(1).lower() not in ("of", "one", "two", "three", "many", "much", "few"):
            # 'the least malignant': the sentence must say 'least malignant', never 'most malignant' ('at least' is
            # no superlative)
            adj = phrase.group(1).lower()
            other = "most" if want == "least" else "least"
            after_q = re.search(rf"(?i)\b{want}\s+{adj}\s+([a-z][\w\-]*)", question)
            counted_q = _key(after_q.group(1)) if after_q and after_q.group(1).lower() not in _NOT_NOUN else ""
            q_keys = _keys(question)

            def ranks_another(raw: str) -> list[str]:  # 'the least potent antagonist' when the least potent effect
                # is asked: the phrase ranks a noun the question does not use ('the least aggressive one' ranks it)
                nxt = [m.group(1) for m in re.finditer(rf"\b{want}\s+{adj}\s+([a-z][\w\-]*)", raw)]
                if not counted_q or not nxt or any(x in _NOT_NOUN or x in ("one", "ones") or _key(x) in q_keys
                                                   for x in nxt):
                    return []
                return [f"{want} {adj} {x}" for x in nxt]
            for where, r in local:
                if re.search(rf"\b{want}\s+{adj}", r.raw) and not ranks_another(r.raw):
                    return Verdict(c, "met", where)
            if re.search(rf"\b({other}|fewest)\s+{adj}", sentence_read.raw):
                return Verdict(c, "unmet", instead=(f"{other} {adj}",))
            chunk = parts[3][1].raw
            if re.search(rf"\b{want}\s+{adj}", chunk) and not re.search(rf"\b{other}\s+{adj}", chunk) and \
                    not ranks_another(chunk):
                return Verdict(c, "met", "chunk")
            return Verdict(c, "unmet", instead=tuple(ranks_another(sentence_read.raw)[:2]))
        if _CYR.search(want) or want in ("most", "least") or (want == "last" and _REL_PERIOD.search(question)):
            for where, r in parts[:4]:  # a quantifier ('most of'), a period ('last year'), Russian: no contrary
                if has(r, want):
                    return Verdict(c, "met", where)
            inst = [o for o in opp if any(has(r, o) for _, r in parts[:4])]
            if inst:
                return Verdict(c, "unmet", instead=tuple(inst))
            return Verdict(c, "met", "")  # said otherwise ('the largest' as 'the biggest'): no contrary found

        def says(r: _Read, words: Iterable[str]) -> list[str]:  # as words: 'lasted' and 'lastly' say no 'last'
            return [w for w in words if (" " in w and w in r.raw) or (" " not in w and w in r.supers)]
        same = (want, *_SUPER_SYN.get(want, ()))
        contrary = [o for o in dict.fromkeys(x for a in opp for x in (a, *_SUPER_SYN.get(a, ()))) if o not in same]
        noun = re.search(rf"(?i)\b{re.escape(want)}\s+([a-z][\w\-]*)", question)
        counted = _key(noun.group(1)) if noun and noun.group(1).lower() not in _NOT_NOUN else ""

        asked_words = _keys(question)

        def of_another(r: _Read) -> bool:  # 'the oldest grandson' when 'the oldest child' is asked, 'the last phase'
            # when 'the last study' is (though the sentence names a study elsewhere); 'a minimum length' for 'the
            # minimum password length', 'the oldest distributed version' for 'the oldest version of distributed' rank
            # a word the question uses
            after = [m.group(1).lower() for w in same for m in re.finditer(rf"\b{re.escape(w)}\s+([a-z][\w\-]*)", r.raw)]
            return bool(counted) and bool(after) and all(a not in _NOT_NOUN and _key(a) not in asked_words
                                                         for a in after)
        def says_same(r: _Read) -> bool:  # a synonym says the asked superlative of the counted noun only ('the
            # oldest daughter' for 'the earliest daughter'; 'first described' or 'final products' say no 'earliest
            # report' or 'last study')
            return any((w == want and not predicative_only(r)) or not counted or any(
                counted in {_key(x) for x in m.group(1).split()} for m in re.finditer(
                    rf"\b{re.escape(w)}((?:\s+[a-z][\w\-]*){{1,3}})", r.raw)) for w in says(r, same))

        def predicative_only(r: _Read) -> bool:  # 'Ibuprofen ranked lowest for risk', 'were the lowest.': the
            # superlative ranks the sentence's subject, no noun after it; the asked noun ('the lowest sensitivity')
            # unsaid in the text is no ranking of it
            if not counted or counted in r.keys:
                return False
            after = [m.group(1) for m in re.finditer(rf"\b{re.escape(want)}\b\W{{0,3}}([a-z][\w\-]*)?", r.raw)]
            return bool(after) and all(not a or a in _NOT_NOUN or a in ("or", "and", "among", "with", "than")
                                       for a in after)
        q_of = re.search(rf"\b(?i:{re.escape(want)})\s+(?:[a-z][\w\-]*\s+){{1,3}}?of\s+(?:the\s+)?"
                         rf"(?P<n>{_CAP_RUN})", question)
        of_keys = _keys(q_of.group("n")) if q_of else set()

        def of_other_whole(r: _Read) -> list[str]:  # 'the youngest child ... of King Paul' when the youngest child of
            # Constantine is asked: a superlative ranks within the whole its 'of' names; another named whole is the
            # neighbouring fact ('of the king', 'of his parents' name none)
            if not of_keys:
                return []
            wholes = [(m.group(0).split()[0], m.group("n")) for w in same for m in re.finditer(
                rf"\b(?i:{re.escape(w)})\s+(?:[\w\-]+\s+){{1,5}}?of\s+(?:the\s+)?(?P<n>{_CAP_RUN})", r.raw_cased)]
            if not wholes or any(of_keys <= _keys(n) or _keys(n) <= of_keys for _, n in wholes):
                # ('of King Paul' names Paul; 'of Adolf Wilhelm' is no 'of Johann Wilhelm')
                return []
            return [f"{w.lower()} … of {n}" for w, n in wholes]
        for where, r in local:
            if says_same(r) and not of_another(r) and not of_other_whole(r):
                return Verdict(c, "met", where)
        if of_other_whole(sentence_read):
            return Verdict(c, "unmet", instead=tuple(of_other_whole(sentence_read)[:2]))
        inst = says(sentence_read, contrary)
        if inst:
            return Verdict(c, "unmet", instead=tuple(inst))
        chunk = parts[3][1]
        if says_same(chunk) and not of_another(chunk) and not says(chunk, contrary) and not of_other_whole(chunk):
            return Verdict(c, "met", "chunk")
        ranked = [f"{w} {m.group(1).lower()}" for w in same if of_another(sentence_read)
                  for m in re.finditer(rf"\b{re.escape(w)}\s+([a-z][\w\-]*)", sentence_read.raw)]
        # the sentence states no such superlative, or ranks another thing with it ('the oldest numpy version')
        return Verdict(c, "unmet", instead=tuple(says(chunk, contrary)) or tuple(dict.fromkeys(ranked))[:2])
    if c.kind == "negation":
        return Verdict(c, "met", "sentence") if _NEG_EVIDENCE.search(sentence) else Verdict(c, "unmet")
    if c.kind == "direction":
        up, down = bool(_UP.search(sentence)), bool(_DOWN.search(sentence))
        if (c.values[0] == "up" and down and not up) or (c.values[0] == "down" and up and not down):
            return Verdict(c, "unmet", instead=("down" if down else "up",))
        return Verdict(c, "met", "sentence")
    if c.kind == "period":
        return Verdict(c, "unchecked")  # a relative period is resolved against the document's date, not here
    if c.kind == "asks" and c.text == "a company":  # the sentence itself names the maker: a heading or title names
        # a document's publisher ('Acme Systems - Q2 report') more often than what a part is made by
        return Verdict(c, "met", "sentence") if names_company(sentence, question) else Verdict(c, "unmet")
    if c.kind == "asks":
        return _asks(c, sentence, sentence_read, question, heading)
    return Verdict(c, "unchecked")


# How a text names a company (general grammar of company names, English and Russian): a capitalised name ending in
# a legal or trade form ('Arden Instruments Ltd', 'Velo Systems'); a name as the agent of making or supplying ('made
# by Velo', 'Velo supplies ...'), after a word for a company ('the supplier Velo', 'компания «Вело»'), or as the brand
# before a model code ('the Velo VX-20 module'). A name the question holds (the product asked about) names nothing.
_CAP = r"[A-ZА-ЯЁ][\w&'’.\-]*[^\W_]"
_CAPS = rf"{_CAP}(?:\s+(?:&\s+)?{_CAP})*"
_ORG_FORMS = (r"Inc|Ltd|LLC|L\.L\.C|GmbH|AG|SA|S\.A|SE|NV|N\.V|BV|B\.V|plc|PLC|Corp|Corporation|Co|Company|Group|"
              r"Holdings?|Industries|Systems|Technologies|Technology|Electronics|Semiconductors?|Labs?|Laboratories|"
              r"Manufacturing|Networks|Solutions|Wireless|Instruments|Devices|Motors|Communications|Enterprises|"
              r"Limited|Oy|AB|ASA|KK|SpA|S\.p\.A|SAS|Pty|Works|ООО|ОАО|ЗАО|ПАО|АО")
_COMPANY_TEXT = (
    re.compile(rf"(?<![\w-])(?P<n>{_CAPS})\s*,?\s+(?:{_ORG_FORMS})(?![\w])"),
    re.compile(rf"(?<![\w-])(?:ООО|ОАО|ЗАО|ПАО|АО)\s+«?(?P<n>{_CAPS})"),
    re.compile(rf"(?i:\b(?:made|manufactured|built|produced|supplied|sourced|provided|developed|designed|sold|"
               rf"distributed|licensed|owned|acquired|bought|purchased|ordered)\s+(?:from|by)|\bworks?\s+for|"
               rf"\bworked\s+for|\bпроизвод\w*|\bизготовлен\w*|\bпоставля\w*|\bвыпуска\w*)\s+(?:the\s+)?«?"
               rf"(?P<n>{_CAPS})"),
    re.compile(rf"(?<![\w-])(?P<n>{_CAPS})\s+(?:makes|made|manufactures|manufactured|supplies|supplied|produces|"
               rf"produced|builds|built|sells|sold|provides|provided|develops|developed|designs|designed|ships|shipped|"
               rf"производит|выпускает|поставляет|изготавливает)\b"),
    re.compile(rf"(?i:\b(?:company|manufacturer|vendor|supplier|maker|firm|corporation|brand|subsidiary|"
               rf"компани[яиейю]|фирм[аыеуой]*|производител[ьяюем]*|поставщик[аомуи]*|корпораци[яией]))\s*,?\s+"
               rf"(?:called\s+|named\s+)?«?(?P<n>{_CAPS})"),
    re.compile(rf"(?<![\w-])(?P<n>{_CAPS})\s*,\s+(?:an?|the)\s+(?:[\w-]+\s+){{0,3}}(?:company|manufacturer|vendor|"
               rf"supplier|maker|firm|corporation)\b"),
    re.compile(rf"(?<![\w-])(?P<n>{_CAP})\s+(?=[A-Z][A-Z0-9]*-?[A-Z0-9]*\d)[A-Z0-9][\w\-]*\d[\w\-]*(?![\w-])"),
)
_NOT_COMPANY = frozenset(_MONTHS_EN + "monday tuesday wednesday thursday friday saturday sunday the a an this that "
                         "these those it its he she they we our their his her".split())


def names_company(text: str, question: str) -> bool:
    """Whether a text names a company (see _COMPANY_TEXT) other than what the question names."""
    asked = {w.lower() for w in _WORD.findall(question)}
    for rx in _COMPANY_TEXT:
        for m in rx.finditer(text):
            words = [w.lower() for w in _WORD.findall(m.group("n"))]
            if any(w not in asked and w not in _NOT_COMPANY and not any(ch.isdigit() for ch in w) for w in words):
                return True
    return False


# a lower bound ('>=3.10', '≥ 2', 'at least 4 GB', '3.8 or later') states a minimum; an upper bound a maximum
_BOUND_LOWER = re.compile(r"(?i)(?:>=|≥|=>|(?<![<>=\-])>(?![>=]))\s*v?\d|\bat least\b|\d[\w.]*\s*(?:or|and)\s+(?:later|"
                          r"newer|higher|above|greater|more)\b|\d[\w.]*\+(?!\w)")
_BOUND_UPPER = re.compile(r"(?i)(?:<=|≤|=<|(?<![<>=\-])<(?![<=]))\s*v?\d|\bat most\b|\bup to\b|\d[\w.]*\s*(?:or|and)\s+"
                          r"(?:earlier|older|lower|below|less|fewer)\b")


# superlatives that rank a quantity (True: its top, False: its bottom) and the nouns of quantities they may rank (the
# attributes above, and spans of time): 'the longest wait', 'the lowest fee'; 'the longest river' ranks no quantity
_QTY_SUPER = {"longest": True, "highest": True, "largest": True, "biggest": True, "greatest": True, "heaviest": True,
              "shortest": False, "lowest": False, "smallest": False, "lightest": False}
_QTY_NOUNS = frozenset(_ATTRS) | frozenset(
    "wait waiting delay interval timeout time duration period pause gap latency lag backoff retention lifetime term "
    "price cost fee charge rate load size amount value dose distance range current".split())
_QTY_SKIP = frozenset("possible allowed permitted permissible acceptable supported".split())
_CAP_UPPER = re.compile(r"(?i)\bat most\b|\bup to\b|\bno (?:more|longer|higher|greater|larger) than\b|\bnot (?:more|"
                        r"longer|higher) than\b|\bmax(?:imum|imal)?\b|\bcap(?:s|ped)?\b|\bceiling\b|(?<!lower )\blimit"
                        r"(?:s|ed)?\b|\b(?:never|not|does not|doesn't) exceed|\buntil (?:it|they) reach(?:es)?\b|"
                        r"\bpeaks? at\b")
_CAP_LOWER = re.compile(r"(?i)\bat least\b|\bno (?:less|fewer|shorter|lower|smaller) than\b|\bnot (?:less|shorter|"
                        r"lower) than\b|\bmin(?:imum|imal)?\b|\bfloor\b|\bor more\b|\bnever (?:drops|falls) below\b")


def _ranks_quantity(question: str, sup: str) -> bool:
    """Whether the question's superlative ranks a quantity ('the longest possible wait between retries')."""
    if sup not in _QTY_SUPER:
        return False
    m = re.search(rf"(?i)\b{sup}\s+((?:[a-z]+\s+)?)([a-z]+)", question)
    if not m:
        return False
    first = m.group(1).strip().lower()
    noun = m.group(2).lower() if first in _QTY_SKIP else first or m.group(2).lower()
    return noun in _QTY_NOUNS or (noun.endswith("s") and noun[:-1] in _QTY_NOUNS)


def _has_super(r: _Read, s: str) -> bool:
    return s in r.supers or (bool(_CYR.search(s)) and any(x.startswith(s[:5]) for x in r.supers)) or \
        (not _CYR.search(s) and s in r.keys)


def _across(c: Constraint, parts: Sequence[tuple[str, _Read]], sentence_read: _Read, sentence: str,
            question: str = "") -> Verdict:
    """A Russian role, event or superlative against English evidence, through its English words
    (core.answer.translit.english_of); a word the list does not know stays unchecked."""
    want = english_of(c.kind, c.values[0])
    if not want:
        return Verdict(c, "unchecked")
    if c.kind == "role" and re.search(r"(?i)заместител[а-яё]*\s+" + re.escape(c.values[0]), question):
        want = tuple(f"deputy {e}" for e in want)  # 'заместитель командующего' is the deputy commander (English
        # also 'second in command'), as German's 'stellvertretender Befehlshaber'
    if c.kind == "role":  # as the same-language check: stated nearby, else another role in the sentence refutes
        for where, r in parts[:3]:
            if any(_role_in(e, r.roles) for e in want):
                return Verdict(c, "met", where)
        other = [x for x in sentence_read.roles if not any(_role_in(e, [x]) for e in want)]
        if other:
            return Verdict(c, "unmet", instead=tuple(dict.fromkeys(other)))
        return Verdict(c, "met", "chunk") if any(_role_in(e, parts[3][1].roles) for e in want) else Verdict(c, "unmet")
    if c.kind == "event":
        said = _events(sentence)
        opp = {e for v in c.values[1:] for e in english_of("event", v)}
        if said & set(want) or not said & opp:
            return Verdict(c, "met", "sentence")
        return Verdict(c, "unmet", instead=tuple(sorted(said & opp)))
    for where, r in parts[:4]:  # a superlative
        if any(_has_super(r, e) for e in want):
            return Verdict(c, "met", where)
    inst = sorted({o for e in want for o in _opposite(e) if any(_has_super(r, o) for _, r in parts[:4])})
    return Verdict(c, "unmet", instead=tuple(inst)) if inst else Verdict(c, "met", "")


_ORD_TOKEN = re.compile(r"(?i)\b(\d{1,3})(?:st|nd|rd|th)\b|\b(" + "|".join(_ORD_EN) + r")\b")
_CAP_RUN = r"[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|[IVX]+))*"  # a capitalised run: a name ('King Paul', 'Louis XIV')
_NOT_NOUN = frozenset("of and or in to at by for from the a an time times".split())


def _ordinals_before(text: str) -> list[tuple[str, str]]:
    """(ordinal, the word after it) pairs of a text: '6th Lord Maxwell' -> ('6', 'lord')."""
    out = []
    for m in _ORD_TOKEN.finditer(text):
        n = m.group(1) or str(_ORD_EN[m.group(2).lower()])
        nxt = re.match(r"\s+([A-Za-z][\w\-]*)", text[m.end():])
        out.append((n, nxt.group(1).lower() if nxt else ""))
    return out


def _ordinal_of(c: Constraint, question: str, parts: Sequence[tuple[str, _Read]], sentence: str) -> Verdict | None:
    """An English ordinal read with the noun it counts ('the 6th Earl of Morton', 'the ninth son'): met where the text
    counts that noun with it; unmet where the sentence, heading or title counts it with another ordinal ('3rd Earl'),
    or the sentence's only such ordinal counts something else ('6th Lord Maxwell', 'the ninth film'). None: the
    question's ordinal counts no noun, or no text counts one (the plain reading decides)."""
    v = c.values[0]
    noun = next((w for n, w in _ordinals_before(question) if n == v), "")
    if not noun or noun in _NOT_NOUN:
        return None
    key = _key(noun)
    counted = {where: {n for n, w in _ordinals_before(r.raw_cased) if w and _key(w) == key} for where, r in parts[:4]}
    for where in ("sentence", "heading", "title", "chunk"):
        if v in counted.get(where, set()):
            if where == "chunk" and (counted["sentence"] - {v}):
                break
            return Verdict(c, "met", where)
    sib = (counted.get("sentence", set()) | counted.get("heading", set()) | counted.get("title", set())) - {v}
    if sib:
        return Verdict(c, "unmet", instead=tuple(sorted(_show("ordinal", sib))))
    mine = [w for n, w in _ordinals_before(sentence) if n == v]
    if mine and all(w and w not in _NOT_NOUN and _key(w) != key for w in mine):
        return Verdict(c, "unmet", instead=tuple(f"{_ordinal_word(int(v))} {w}" for w in mine[:2]))
    return None


# 'how many <things>' asks a count of things: what follows 'how many' unless it is a time unit or a share
_HOW_MANY = re.compile(r"(?i)\bhow many\s+(?:of\s+the\s+|more\s+|other\s+|different\s+)?([a-z][\w\-]*)")
_NOT_COUNTED = re.compile(r"(?i)^(years?|decades?|centur\w+|millenni\w+|months?|weeks?|days?|hours?|minutes?|"
                          r"seconds?|times?|percent|per|points?|degrees?)$")
_PERCENT = re.compile(r"(\d+(?:[.,]\d+)?)\s*(?:%|percent\b|per cent\b|pct\b)", re.I)


def _counts(question: str) -> bool:
    """Whether the question asks a count of things ('how many containers'), not a time, a share or a measure."""
    m = _HOW_MANY.search(question)
    return m is not None and not _NOT_COUNTED.match(m.group(1)) and not re.search(
        r"(?i)\b(percent|per cent|percentage|share|proportion|fraction|%)", question)


def _percents(sentence: str) -> set[str]:
    """The numbers a sentence states as a share ('40%', '12 percent')."""
    return {_num(m.group(1).replace(",", ".")) for m in _PERCENT.finditer(sentence)}


def _asks(c: Constraint, sentence: str, r: _Read, question: str, heading: str = "") -> Verdict:
    qy, qm, qn = years(question), months(question), numbers(question)
    if c.values[0] in ("license", "version", "default"):  # a field line with the attribute's key, or its value
        attr = asked_attribute(question)
        ok = attr is not None and states_value(sentence, attr, question=question)
        if not ok and attr is not None and attr.value == "version" and not attr.keys and heading:
            # a changelog's item states no version of its own: the release heading it sits under does ('v4.26.0')
            ok = states_value(heading.split(" / ")[-1], attr)
    elif c.text == "a person":
        names = [n for n, _ in _names(" x " + sentence) if not _keys(n) <= _keys(question)]
        ok = bool(names) or bool(r.roles) or bool(re.search(r"(?i)\b(he|she|they|him|her|who|он|она|они)\b", sentence))
    elif c.text == "a month":
        ok = bool(r.months - qm) or bool(r.years - qy)
    elif c.text == "a year":  # 'in which year': a year, a decade or century, or a time counted in years
        ok = bool(r.years - qy) or bool(_CENTURY.search(sentence)) or (bool(r.numbers - qn) and bool(
            _YEARS_UNIT.search(sentence)))
    elif c.text == "a date or year":
        # a time the sentence states: a year, a month, a date, an amount of time ('13,000 BP', '22,000 years ago'),
        # a century or decade, a recurring time, or an event it is anchored to ('during the Cold War'); a conjunction
        # ('when', 'while', 'когда') or a lone 'after' / 'time' / 'age' states none ('members must be over the age
        # of 18' does not say when an act was passed)
        ok = bool(r.years - qy) or bool(r.months - qm) or bool(r.ordinals and _CENTURY.search(sentence)) or (
            bool(r.numbers - qn) and bool(_TIME_UNIT.search(sentence))) or bool(_CENTURY.search(sentence)) or bool(
            _WHEN_RECURRING.search(sentence)) or bool(_ANCHOR.search(sentence)) or bool(_REL_PERIOD.search(sentence)) \
            or bool(_DATE_WORD.search(sentence)) or bool(_WHEN_CLAUSE.search(sentence))
    else:
        counts = _counts(question)
        nums = r.numbers - qn
        if counts:  # 'how many containers': a share ('40%'), a calendar year ('in January 2024') or a label
            # ('section 3', 'phase 2') counts none
            nums = nums - _percents(sentence) - {n for _, n in _labels(sentence)}
        # 'which episode number': a number that labels one thing; 'several', 'many' state no such number
        labelled = bool(_ASKS_LABEL_NUMBER.search(question)) and not _ASKS_AMOUNT.search(question)
        ok = bool(nums) or (not counts and bool(r.years - qy)) or not labelled and bool(re.search(
            r"(?i)\b(several|many|few|dozens|hundreds|thousands|millions|numerous|half|a number of|"
            r"несколько|много|мало|сотни|тысячи|миллионы|половин|большинство)\b", sentence))
    return Verdict(c, "met", "sentence") if ok else Verdict(c, "unmet")


def _show(kind: str, vals: Iterable[str]) -> list[str]:
    if kind == "month":
        return [_MONTHS_EN[int(v[1:]) - 1].capitalize() for v in vals]
    if kind == "ordinal":
        return [_ordinal_word(int(v)) for v in vals]
    if kind == "year":
        return [v.replace("x", "0s") for v in vals]
    return list(vals)


def check(question: str, evidence: Evidence, constraints: Sequence[Constraint] | None = None, *,
          names: NameCheck | None = None) -> Check:
    """Each of the question's constraints against one piece of evidence: met where it is stated (the sentence, its
    heading, its document title, its chunk: a name or year stated only elsewhere in the chunk counts unless the
    sentence states a sibling of the same kind), unmet with the siblings the sentence states instead, or unchecked
    (a name in another script with no transliterated match, a relative period). `names` (name, text) -> stated?:
    how a name in another script than the evidence is looked for (core.answer.crosslingual.NameFinder); without it
    such a name is unchecked unless its transliteration is found."""
    cons = question_constraints(question) if constraints is None else tuple(constraints)
    if not cons:
        return Check(evidence, ())
    sr = _read(evidence.sentence)
    parts = [("sentence", sr), ("heading", _read(evidence.heading)), ("title", _read(evidence.title)),
             ("chunk", _read(evidence.chunk))]
    if evidence.opening:  # read for dates only (a memo's date line), never for names
        parts.append(("document", _read(evidence.opening)))
    cross = bool(_CYR.search(question)) != bool(_CYR.search(evidence.sentence + evidence.chunk)) or \
        _german(question) != _german(evidence.chunk or evidence.sentence)
    verdicts = [_check_one(c, parts, sr, evidence.sentence, question, cross, evidence.heading, names,
                          evidence.near, evidence.path)
                for c in cons]
    if not cross:
        verdicts = _subject_of_the_asked(question, evidence.sentence, verdicts)
    return Check(evidence, _value_of_the_asked(verdicts))


# The question's subject: the name right after its auxiliary ('When did Helio become ...', 'How many staff does
# the Porto office have'; not after 'was' / 'is': a passive's subject is what the act is done to, 'the capture of
# Montreal' says it); a sentence that names it only after a preposition ('the successor to Helio') while
# another name is its own subject speaks of that other thing ('Vireo ... became generally available').
_Q_SUBJECT = re.compile(r"^\W*(?i:when|where|why|what(?:\s+\w+)?|which\s+\w+|how(?:\s+(?:many|much)\s+\w+|\s+long|"
                        r"\s+old)?|in\s+(?:which|what)\s+\w+)\s+(?i:did|does|do|has|have|had|will)\s+"
                        r"(?i:the\s+)?(?P<s>[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*)")
_OBLIQUE = frozenset("to of from with than over for against into onto about like unlike besides beside replacing "
                     "replaced succeeding succeeded toward towards".split())
_OPENING_PHRASE = re.compile(r"^(?:(?:In|On|At|By|After|Before|During|Since|Following|From|Under|Until|As of|"
                             r"Today|Now|Later|Earlier|Meanwhile|Also|However|Then)\b[^,]{0,60},\s*)?(?:(?:The|A|An)\s+)?")


def _sentence_subject(sentence: str) -> str:
    """The name a sentence opens with, after an opening phrase and an article ('In May, the Lisbon office ...'
    -> 'Lisbon'), or ''."""
    rest = sentence[_OPENING_PHRASE.match(sentence).end():]  # type: ignore[union-attr]
    m = re.match(r"([A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*)", rest)
    return re.sub(r"['’]s$", "", m.group(1)) if m else ""


def _subject_of_the_asked(question: str, sentence: str, verdicts: list[Verdict]) -> list[Verdict]:
    """The asked name met in the sentence only as the object of a preposition, with another name the sentence's
    subject that the question never names: the sentence's fact is that other thing's (see _Q_SUBJECT)."""
    m = _Q_SUBJECT.match(question)
    if not m or _german(question):
        return verdicts
    subj = m.group("s")
    hits = list(re.finditer(r"(?<![\w-])" + re.escape(subj) + r"(?![\w-])", sentence))
    if not hits:
        return verdicts
    for h in hits:
        before = sentence[: h.start()].split()
        clause = re.search(r",\s+(?:which|who|whose|that)\b[^,;]*$", sentence[: h.start()])  # ', which preceded X,'
        if not before or (before[-1].lower().strip(",;:") not in _OBLIQUE and clause is None):
            return verdicts
    other = _sentence_subject(sentence)
    if not other or other.split()[0].lower() in EN_STOP | _DETERMINERS or other == subj or \
            other.lower() in question.lower() or _keys(other) <= _keys(question) or other.lower() in _ROLES_EN:
        return verdicts
    return [Verdict(v.constraint, "unmet", instead=(other,)) if v.constraint.kind == "entity" and
            v.constraint.text == subj and v.verdict == "met" else v for v in verdicts]


# the asked kinds whose value belongs to one thing: a number, a year or a date stated of another office, package or
# person is not the asked one's ('employs 310 people across three sites' for 'How many people does the Tarvik site
# employ?')
_VALUE_ASKS = frozenset({"license", "version", "default", "a number", "a year", "a date or year", "a month"})


def _value_of_the_asked(verdicts: list[Verdict]) -> tuple[Verdict, ...]:
    """A sentence states the asked attribute's value (a license, a version, a default) for the thing asked about
    only when it, its chunk or its title names that thing too: 'Requires-Python: >=3.8' of another package meets no
    'Which Python version does sniffio require?', even beside a sentence that names sniffio."""
    names_unmet = any(v.constraint.kind == "entity" and v.verdict == "unmet" for v in verdicts)
    if not names_unmet:
        return tuple(verdicts)
    return tuple(Verdict(v.constraint, "unmet", "elsewhere") if v.verdict == "met" and (
        (v.constraint.kind == "asks" and v.constraint.values[0] in _VALUE_ASKS) or v.constraint.kind == "attribute")
        else v for v in verdicts)


def period_constraints(question: str) -> tuple[Constraint, ...]:
    """Only the relative periods ('this year', 'в прошлом квартале'): what the answer cache's guard compares."""
    return tuple(_period(question))


# -- an answer checked -------------------------------------------------------------------------------------------
_MARK = re.compile(r"\s*\[([^\[\]]{1,80})\]")


def quoted_claims(text: str, citations: Sequence[str]) -> list[tuple[str, str]]:
    """(claim, chunk id) of an answer that quotes sentences each followed by its [chunk-id]; a leading version label
    ('[draft] ') and a quote's surrounding marks are dropped. Text after the last marker is no claim."""
    cited = set(citations)
    out: list[tuple[str, str]] = []
    pos = 0
    pending = ""
    for m in _MARK.finditer(text):
        inner = m.group(1)
        if inner not in cited:
            if m.start() == pos or not text[pos:m.start()].strip():  # a label before the quote: skip it
                pos = m.end()
            continue
        claim = (pending + text[pos:m.start()]).strip().strip('"“”«»').strip()
        pending = ""
        if claim:
            out.append((claim, inner))
        pos = m.end()
    return out


@dataclass(frozen=True)
class ChunkText:
    """What a cited chunk gives the check: its whole text, heading path and document title."""

    text: str
    heading: str = ""
    title: str = ""
    opening: str = ""  # the document's first lines (its date)


@dataclass(frozen=True, eq=False)
class VerifyInfo(StageInfo):
    """The verify stage's record: the question's constraints, each checked claim's verdicts, and what it did
    (passed, kept some claims, refused, flagged a model's answer, or nothing to check)."""

    action: str  # passed | narrowed | refused | flagged | no_constraints | not_checked
    constraints: tuple[Constraint, ...] = ()
    checks: tuple[Check, ...] = ()
    reason: str = ""
    nearest: tuple[str, str] | None = None  # (sentence, chunk id) shown as 'not the answer'

    def verdicts(self) -> tuple[Verdict, ...]:
        """Per constraint, as the check decided it: met in some quoted sentence (its heading, title), else unmet where
        a quoted sentence states a sibling, else met in a chunk, else its verdict on the first sentence."""
        if not self.checks:
            return ()
        if self.action == "refused" and self.nearest is not None:  # the sentence the refusal names, as it read
            return next((ck.verdicts for ck in self.checks
                         if (ck.evidence.sentence, ck.evidence.chunk_id) == self.nearest), self.checks[0].verdicts)
        out = []
        for i, v in enumerate(self.checks[0].verdicts):
            across = [ck.verdicts[i] for ck in self.checks if i < len(ck.verdicts)]
            local = [x for x in across if x.verdict == "met" and x.where != "chunk"]
            sib = [x for x in across if x.verdict == "unmet" and x.instead]
            out.append(local[0] if local else sib[0] if sib else next(
                (x for x in across if x.verdict != "unmet"), v))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "constraints": [v.to_dict() for v in self.verdicts()] or
                [{**c.to_dict(), "verdict": "unchecked"} for c in self.constraints],
                "claims": [{"chunk_id": c.evidence.chunk_id, "sentence": c.evidence.sentence[:200], "ok": c.ok,
                            "unmet": [v.to_dict() for v in c.unmet]} for c in self.checks],
                **({"reason": self.reason} if self.reason else {}),
                **({"nearest": {"sentence": self.nearest[0], "chunk_id": self.nearest[1]}} if self.nearest else {})}


@dataclass(frozen=True)
class Verified:
    """The answer after the check and the stage's record."""

    text: str
    citations: tuple[str, ...]
    refused: bool
    info: VerifyInfo


@lru_cache(maxsize=256)
def _contexts(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(sentence_contexts(text))


def _local_heading(claim: str, ch: ChunkText) -> str:
    """The heading right above the quoted sentence in its chunk ('### timeout' above 'Defaults to 30.'), else the
    chunk's heading path: a sentence's local subject."""
    norm = " ".join(claim.split())
    for sent, ctx in _contexts(ch.text):
        if sent == norm:
            head = ctx.split(" / ")[-1] if ctx else ""
            return head or ch.heading
    return ch.heading


def _near(claim: str, text: str, k: int = 2) -> str:
    """The k units of the chunk just before the quoted one, within its paragraph or list (no blank line between):
    a list item ('- if set to 0, size is unlimited') goes on about the setting the item before it names."""
    norm = " ".join(claim.split())
    us = units(text)
    for i, u in enumerate(us):
        if " ".join(text[u.start:u.end].split()) == norm:
            out: list[str] = []
            j = i
            while j > 0 and len(out) < k and "\n\n" not in text[us[j - 1].end:us[j].start]:
                j -= 1
                out.append(text[us[j].start:us[j].end])
            return " ".join(reversed(out))
    return ""


def _word_keys(text: str) -> set[str]:
    """The keys of a text's whole words, outside web addresses: 'GitHub' is no 'git', a link's path no word."""
    return {_key(w) for w in _WORD.findall(_URL.sub(" ", text))}


def _topic_keys(question: str, cons: Sequence[Constraint]) -> set[str] | None:
    """The question's content words other than its constraints' (names, roles, years...): what a quote must share with
    the question to be about it; None for a question not in English (its quotes may be in another language)."""
    if _CYR.search(question) or _german(question):
        return None
    said = {k for c in cons if c.kind not in ("asks", "negation", "direction") for k in (*c.values, *_keys(c.text))}
    return {k for k in _keys(question) if len(k) > 2 and k not in EN_STOP and k not in said and
            k.lower() not in _QUESTION_OPENERS}


def verify_quotes(question: str, text: str, citations: Sequence[str], chunks: dict[str, ChunkText], *,
                  refusal: str, names: NameCheck | None = None, known: Iterable[str] = ()) -> Verified:
    """An extractive answer checked: each quoted sentence against the question's constraints, read with its chunk.
    Sentences that state a sibling of what is asked (another year, name, role) are dropped; when no quoted sentence
    meets every constraint the answer becomes a refusal saying which constraint failed, with the nearest fact shown
    as not the answer. `known`: the titles of the documents the query read (question_constraints)."""
    cons = question_constraints(question, known)
    claims = quoted_claims(text, citations)
    if not cons:
        return Verified(text, tuple(citations), False, VerifyInfo("no_constraints"))
    if not claims:
        return Verified(text, tuple(citations), False, VerifyInfo("not_checked", cons,
                                                                  reason="no quoted sentence to check"))
    checks = []
    for claim, cid in claims:
        ch = chunks.get(cid, ChunkText(""))
        checks.append(check(question, Evidence(claim, ch.text, _local_heading(claim, ch), ch.title, cid, ch.opening,
                                               _near(claim, ch.text), ch.heading),
                            cons, names=names))
    # the answer as a whole must meet each constraint: one quoted sentence may state the name, another the year
    # (a question of two parts); a sentence that states a sibling of what another quoted sentence meets is the
    # neighbouring fact and is dropped
    def about_another(ck: Check) -> bool:  # a header field ('Author-email: ...') of a record that is not the asked
        # one states nothing of the asked thing: it cannot meet the question's other constraints either
        return bool(FIELD_LINE.match(ck.evidence.sentence)) and any(v.constraint.kind == "entity" for v in ck.unmet)

    lead = checks[0]
    topic = _topic_keys(question, cons)
    german_q = topic is None and _german(question)
    across_q = bool(_CYR.search(question))  # a Russian question (its quotes may be English)

    unplaced = _unplaced_soft(question) if german_q else set()

    def lead_lacks(c: Constraint) -> bool:  # the answer's lead sentence leaves the constraint unmet
        return next(x for x in lead.verdicts if x.constraint == c).verdict == "unmet"

    def meets(ck: Check, c: Constraint, local: bool = False) -> bool:
        if about_another(ck):
            return False
        v = next(x for x in ck.verdicts if x.constraint == c)
        if c.kind == "entity" and ck is not lead and topic is not None and v.verdict == "met" and (
                v.where in ("chunk", "title") or not (_word_keys(ck.evidence.sentence) & topic)):
            return False  # a name the answer's lead sentence lacks is not supplied by a later quote that only sits
            # in a passage (a document) naming it, or that shares no other word with the question
        if c.kind == "entity" and (not c.soft or c.text in unplaced) and ck is not lead and german_q and \
                v.verdict == "met" and ck.evidence.chunk_id != lead.evidence.chunk_id and lead_lacks(c):
            return False  # a German question (its topic words are not read): a name the lead sentence's passage never
            # states is not supplied by a quote from another passage, nor a word read as a noun by its letters alone
            # ('von Einstein': no article before it) rather than by its place ('der einzige Divisor')
        if c.kind == "entity" and ck is not lead and across_q and v.verdict == "met" and \
                not _CYR.search(lead.evidence.sentence) and lead_lacks(c) and \
                (v.where in ("chunk", "title") or (ck.evidence.title or ck.evidence.chunk_id) !=
                 (lead.evidence.title or lead.evidence.chunk_id)):
            return False  # a Cyrillic name the lead sentence (in another script) does not state is not supplied by a
            # later quote that only reads it in its passage (the encoder's reading of one of several quotes) or
            # states it in another document: the answer stands on its lead sentence, which is about something else
        return v.verdict != "unmet" and (not local or v.where in ("sentence", "heading", "title", ""))

    def sibling(c: Constraint) -> bool:
        return any(v.constraint == c and v.instead for ck in checks for v in ck.unmet)

    def covered(c: Constraint) -> bool:
        # met in a quoted sentence, its heading or title; met only somewhere in a chunk counts when no quoted
        # sentence states a sibling of it ('It has 40 staff.' beside 'The Springfield office opened ...')
        return any(meets(ck, c, True) for ck in checks) or (any(meets(ck, c) for ck in checks) and not sibling(c))

    whole = all(covered(c) for c in cons)
    if whole:
        drop = [ck for ck in checks if any(v.instead and any(meets(o, v.constraint, True) for o in checks if o is not ck)
                                           for v in ck.unmet)]
        if len(drop) == len(checks) and len(checks) > 1:
            whole = False  # each quoted sentence states a sibling of what another meets: none answers the question
        elif len(drop) == len(checks):
            drop = []
        kept = [ck for ck in checks if ck not in drop]
        # what the dropped sentences alone met (the date, for the other office) leaves the answer short: refuse
        still = all(any(meets(ck, c, True) for ck in kept) or (any(meets(ck, c) for ck in kept) and not sibling(c))
                    for c in cons)
        if not whole or (drop and not still):
            whole = False
        elif not drop:
            return Verified(text, tuple(citations), False, VerifyInfo("passed", cons, tuple(checks)))
    if whole:
        kept_text = text
        for c in drop:
            kept_text = kept_text.replace(f"{c.evidence.sentence} [{c.evidence.chunk_id}]", "").strip()
        kept_cites = tuple(dict.fromkeys(c.evidence.chunk_id for c in checks if c not in drop))
        why = "; ".join(v.reason() for c in drop for v in c.unmet[:1])
        return Verified(re.sub(r" {2,}", " ", kept_text).strip(), kept_cites, False,
                        VerifyInfo("narrowed", cons, tuple(checks), reason=f"dropped {len(drop)} quoted "
                                   f"sentence(s): {why}"))
    first = checks[0]
    sib_first = next((ck for ck in checks if any(v.instead for v in ck.unmet)), None)
    if sib_first is not None and all(covered(c) for c in cons):  # refused because the answer rests on a sibling
        first = sib_first
        missing = next(v.constraint for v in first.unmet if v.instead)
    else:  # the first uncovered constraint the first quoted sentence itself fails, so the reason names it
        open_ = [c for c in cons if not covered(c)]
        failed = [c for c in open_ if any(v.constraint == c for v in first.unmet)]
        sib = [c for c in failed if any(v.constraint == c and v.instead for v in first.unmet)]  # 'numpy, not pandas'
        sib.sort(key=lambda c: c.kind != "entity")  # a sibling name says most ('gives numpy, not pandas')
        if any(c.kind == "asks" for c in failed):  # the value it states is another thing's: name the thing it lacks
            ent = [v.constraint for v in first.unmet if v.constraint.kind == "entity"]
            sib = sib or [c for c in ent if any(v.constraint == c and v.instead for v in first.unmet)]
            failed = ent + [c for c in failed if c not in ent]
        missing = (sib or failed or open_ or list(cons))[0]
    verdict = next(v for v in first.verdicts if v.constraint == missing)
    why = verdict.reason() or wording.reason("all", "en")  # the trace's words
    lang = wording.language_of(question)  # the answer's: the question's language
    said = verdict.reason(lang, role_words(question) if lang != "en" else None) or wording.reason("all", lang)
    near = (first.evidence.sentence, first.evidence.chunk_id)
    return Verified(f"{wording.lead(refusal, lang)} {said[:1].upper()}{said[1:]}. {wording.NEAREST[lang]}: "
                    f"\"{near[0]}\" [{near[1]}]", (), True,
                    VerifyInfo("refused", cons, tuple(checks), reason=why, nearest=near))


def _shares_value(a: _Read, b: _Read) -> bool:
    return bool(a.years & b.years or a.numbers & b.numbers or a.months & b.months)


def verify_model_answer(question: str, text: str, citations: Sequence[str], chunks: dict[str, ChunkText], *,
                        names: NameCheck | None = None, known: Iterable[str] = ()) -> Verified:
    """A model's answer checked against the passages it cites: each constraint of the question must be stated by
    one of them. The model's wording is its own, so nothing is quoted or dropped: an unmet constraint is flagged at
    the head of the answer, never passed in silence."""
    cons = tuple(c for c in question_constraints(question, known) if c.kind not in ("asks", "negation", "direction"))
    if not cons:
        return Verified(text, tuple(citations), False, VerifyInfo("no_constraints"))
    checks = []
    said = _read(text)
    for cid in citations:
        ch = chunks.get(cid)
        if ch is None:
            continue
        # the chunk's sentences that state a value of the answer (its year, number, month) are what it rests on;
        # else the whole chunk is
        backing = [sent for sent in (" ".join(ch.text[s:e].split()) for s, e in sentence_spans(ch.text))
                   if _shares_value(said, _read(sent))] or [ch.text]
        for sent in backing:
            checks.append(check(question, Evidence(sent, ch.text, ch.heading, ch.title, cid, ch.opening), cons,
                                names=names))
    unmet = [c for c in cons if not any(all(v.verdict != "unmet" for v in ck.verdicts if v.constraint == c)
                                        for ck in checks)]
    if not unmet:
        return Verified(text, tuple(citations), False, VerifyInfo("passed", cons, tuple(checks)))
    names = ", ".join(f"{_LABELS.get(c.kind, c.kind)} '{c.text}'" for c in unmet)
    why = (f"the passages it cites do not state the {names} the question asks about" if checks else
           f"it cites no passage, so the {names} the question asks about is not shown in the corpus")
    return Verified(f"⚠ Not checked against the corpus: {why}.\n\n{text}", tuple(citations), False,
                    VerifyInfo("flagged", cons, tuple(checks), reason=why))
