"""German words the constraint check reads: months, ordinals, superlatives and role titles with their English forms,
which capitalised words of a German question are common nouns rather than names, and the names German writes
otherwise than English (countries, peoples, cities).

Why: German capitalises every noun, so a check that reads capitalised words as names read 'Universität' in 'Wann wurde
die Universität gegründet?' as a name English evidence never states, and refused every German question over English
documents. A German noun is told by its place (after an article, a determiner, a number or an inflected adjective) and
its shape (-ung, -heit, -keit, -schaft, ...); a capitalised word elsewhere ('von Zorvath', 'Harvard') stays a name.
Everything here is general German, written from general knowledge (no corpus read); pure text in, values out."""
from __future__ import annotations

import re

from core.text import compound_of
from core.text import lexicon as text_lexicon

MONTHS_DE = ("januar", "februar", "märz", "april", "mai", "juni", "juli", "august", "september", "oktober",
             "november", "dezember")
_MONTH_ALIASES = {"jänner": 1, "maerz": 3}

# ordinal stems; an ordinal carries an adjective ending ('erste', 'zweiten'): 'erst' alone is an adverb
# ('acht' is left out: 'achten' is also a verb)
_ORD_DE = {"erst": 1, "zweit": 2, "dritt": 3, "viert": 4, "fünft": 5, "sechst": 6, "siebt": 7, "siebent": 7,
           "neunt": 9, "zehnt": 10, "elft": 11, "zwölft": 12, "zwanzigst": 20, "hundertst": 100}
_ORD_DE_RX = re.compile(r"^(" + "|".join(sorted(_ORD_DE, key=len, reverse=True)) + r")(e|en|er|es|em)$")

# superlative stems -> the English superlative (the check compares English forms on both sides)
_SUPER_DE = {"größt": "largest", "grösst": "largest", "kleinst": "smallest", "ältest": "oldest", "jüngst": "youngest",
             "höchst": "highest", "niedrigst": "lowest", "tiefst": "deepest", "längst": "longest",
             "kürzest": "shortest", "frühest": "earliest", "spätest": "latest", "meist": "most", "wenigst": "least",
             "best": "best", "schlechtest": "worst", "reichst": "richest", "ärmst": "poorest", "stärkst": "strongest",
             "schwächst": "weakest", "schwerst": "heaviest", "leichtest": "lightest", "schnellst": "fastest",
             "langsamst": "slowest", "neuest": "newest", "neust": "newest", "heißest": "hottest",
             "kältest": "coldest", "wärmst": "warmest", "breitest": "widest", "teuerst": "dearest",
             "billigst": "cheapest", "nördlichst": "northernmost", "südlichst": "southernmost",
             "östlichst": "easternmost", "westlichst": "westernmost", "häufigst": "most", "seltenst": "rarest"}
# ('häufigste' is English's 'most common', 'am häufigsten' its 'most often': read as 'most', whose opposite is 'least')
# ('letzte' is left out: 'die letzte Eiszeit' is the previous one, which English rarely calls the last)
_SUPER_DE_RX = re.compile(r"^(" + "|".join(sorted(_SUPER_DE, key=len, reverse=True))
                          + r")(e|en|er|es|em)$")

# role and title nouns (stem, feminine -in and plural/genitive endings read off) -> the English role word
_ROLE_DE = {"präsident": "president", "vizepräsident": "vice-president", "vorsitzend": "chairman",
            "direktor": "director", "leiter": "head", "chef": "chief", "gründer": "founder", "besitzer": "owner",
            "eigentümer": "owner", "herausgeber": "editor", "redakteur": "editor", "sekretär": "secretary",
            "schatzmeister": "treasurer", "gouverneur": "governor", "bürgermeister": "mayor", "senator": "senator",
            "minister": "minister", "premierminister": "premier", "kanzler": "chancellor",
            "bundeskanzler": "chancellor", "könig": "king", "kaiser": "emperor", "prinz": "prince",
            "prinzessin": "princess", "papst": "pope", "bischof": "bishop", "erzbischof": "archbishop",
            "kardinal": "cardinal", "general": "general", "admiral": "admiral", "kapitän": "captain",
            "kommandant": "commander", "befehlshaber": "commander", "oberst": "colonel", "trainer": "coach",
            "dekan": "dean", "professor": "professor", "rektor": "rector", "architekt": "architect",
            "ingenieur": "engineer", "erfinder": "inventor", "autor": "author", "komponist": "composer",
            "dirigent": "conductor", "produzent": "producer", "richter": "judge", "botschafter": "ambassador",
            "konsul": "consul", "sultan": "sultan", "kalif": "caliph", "schah": "shah", "zar": "tsar",
            "herzog": "duke", "baron": "baron", "sprecher": "speaker", "regisseur": "director",
            "schriftsteller": "writer", "dichter": "poet", "maler": "painter", "bildhauer": "sculptor",
            "abt": "abbot", "priester": "priest", "pfarrer": "pastor", "kurator": "curator",
            "verwalter": "administrator", "stellvertreter": "deputy", "lehrer": "teacher"}
# the titles whose feminine English writes with a word of its own ('Königin' is a queen, not a king)
_FEMININE_DE = {"könig": "queen", "kaiser": "empress", "zar": "tsarina", "prinz": "princess"}
_ROLE_DE_RX = re.compile(r"^(" + "|".join(sorted(_ROLE_DE, key=len, reverse=True)) + r")(in|innen|en|e|er|s|es|n)?$")

# words before a noun in a German noun phrase: articles, determiners, quantifiers, contractions of a preposition
# with an article, possessives, question determiners and number words
_DETERMINERS = frozenset((
    "der die das den dem des ein eine einen einem einer eines kein keine keinen keinem keiner keines welche welcher "
    "welches welchen welchem dieser diese dieses diesen diesem jener jene jenes jenen jenem jede jeder jedes jeden "
    "jedem alle allen aller viele vielen vieler wenige wenigen weniger einige einigen einiger mehrere mehreren manche "
    "manchen mancher beide beiden sein seine seinen seinem seiner seines ihr ihre ihren ihrem ihrer ihres unser unsere "
    "unseren unserem unserer dessen deren im am zum zur beim vom ins ans aufs durchs fürs ums übers unterm "
    "zwei drei vier fünf sechs sieben acht neun zehn elf zwölf zwanzig hundert tausend million millionen "
    "solche solchen solcher etwas wieviel wieviele".split()))
DETERMINERS = _DETERMINERS
# German function words (articles and determiners above, prepositions, conjunctions, pronouns, auxiliaries): no word
# beside them tells which thing a sentence is about
FUNCTION_WORDS = _DETERMINERS | frozenset((
    "und oder aber doch sondern denn dass daß als wie wenn weil ob von vom mit für auf aus bei nach über unter vor "
    "hinter neben zwischen durch gegen ohne um bis seit während wegen trotz innerhalb außerhalb gemäß laut in an zu "
    "sich er sie es wir ihr ihm ihn man wer was wo wann warum wieso welche welcher welches wie ist sind war waren "
    "wird werden wurde wurden worden hat haben hatte hatten sein gewesen kann können konnte konnten muss müssen "
    "soll sollen sollte darf dürfen will wollen nicht auch noch nur schon sehr mehr dann dort hier so".split()))
# an inflected adjective by its shape: a dative '-em' or an adjective suffix with its ending ('elektrische')
_ADJECTIVE = re.compile(r"^[a-zäöüß\-]{3,}(em|(isch|lich|ig|bar|sam|haft|los|al|iv|ell|ent|ant|är)(e|en|er|es|em))$")
_ADJ_ENDING = re.compile(r"^[a-zäöüß][a-zäöüß\-]*(e|en|er|es|em|sten|ste|ster)$")
# shapes only German common nouns take (abstract and collective suffixes, diminutives)
_NOUN_SUFFIX = re.compile(r"(ung|ungen|heit|heiten|keit|keiten|schaft|schaften|tät|täten|ismus|ismen|nis|nisse|"
                          r"nissen|tum|tümer|chen|lein|ling|linge|lingen|ität|itäten|ation|ationen|ierung|ierungen|"
                          r"zahl|zahlen|jahr|jahre|jahren|jahres|stadt|städte|land|länder|ländern|krieg|kriege|"
                          r"gebiet|gebiete|gebieten|werk|werke|teil|teile|teilen|zeit|zeiten|art|arten|form|formen)$")

_GERMAN_LETTERS = re.compile(r"[äöüß]|sch|tz|chs|cht|pf|ei|ie|kt$")
_UMLAUTS = re.compile(r"[äöüß]")
_PLACE = re.compile(r"\w{3,}(land|stadt)$")  # the endings of places' names that are also common nouns' endings

# names German writes otherwise than English: countries, peoples, regions and cities (stem -> English stems)
_NAMES_DE_EN: dict[str, tuple[str, ...]] = {
    "deutschland": ("germany", "german"), "deutsch": ("german", "germany"), "frankreich": ("france", "french"),
    "französisch": ("french", "france"), "franzose": ("french", "france"), "england": ("england", "english"),
    "englisch": ("english", "england"), "engländer": ("english",), "schotte": ("scottish", "scots"),
    "großbritannien": ("britain", "british"),
    "britisch": ("british", "britain"), "brite": ("british", "britain"), "spanien": ("spain", "spanish"),
    "spanisch": ("spanish", "spain"), "italien": ("italy", "italian"), "italienisch": ("italian", "italy"),
    "russland": ("russia", "russian"), "russisch": ("russian", "russia"), "russe": ("russian", "russia"),
    "österreich": ("austria", "austrian"), "schweiz": ("switzerland", "swiss"), "niederlande": ("netherlands",
                                                                                                   "dutch"),
    "niederländisch": ("dutch", "netherlands"), "holland": ("holland", "dutch"), "belgien": ("belgium", "belgian"),
    "polen": ("poland", "polish"), "polnisch": ("polish", "poland"), "schweden": ("sweden", "swedish"),
    "schwedisch": ("swedish", "sweden"), "norwegen": ("norway", "norwegian"), "dänemark": ("denmark", "danish"),
    "dänisch": ("danish", "denmark"), "finnland": ("finland", "finnish"), "griechenland": ("greece", "greek"),
    "griechisch": ("greek", "greece"), "türkei": ("turkey", "turkish", "ottoman"), "türkisch": ("turkish", "turkey"),
    "osmanisch": ("ottoman",), "ägypten": ("egypt", "egyptian"), "ägyptisch": ("egyptian", "egypt"),
    "europa": ("europe", "european"), "europäisch": ("european", "europe"), "afrika": ("africa", "african"),
    "afrikanisch": ("african", "africa"), "asien": ("asia", "asian"), "asiatisch": ("asian", "asia"),
    "amerika": ("america", "american"), "amerikanisch": ("american", "america"), "amerikaner": ("american",),
    "vereinigte": ("united",), "vereinigten": ("united",), "staaten": ("states",), "königreich": ("kingdom",),
    "indien": ("india", "indian"), "indisch": ("indian", "india"), "japan": ("japan", "japanese"),
    "japanisch": ("japanese", "japan"), "chinesisch": ("chinese", "china"), "china": ("china", "chinese"),
    "australien": ("australia", "australian"), "kanada": ("canada", "canadian"), "mexiko": ("mexico", "mexican"),
    "brasilien": ("brazil", "brazilian"), "argentinien": ("argentina",), "irland": ("ireland", "irish"),
    "irisch": ("irish", "ireland"), "schottland": ("scotland", "scottish"), "schottisch": ("scottish", "scotland"),
    "wales": ("wales", "welsh"), "walisisch": ("welsh", "wales"), "portugal": ("portugal", "portuguese"),
    "portugiesisch": ("portuguese", "portugal"), "ungarn": ("hungary", "hungarian"), "tschechien": ("czech",),
    "preußen": ("prussia", "prussian"), "preußisch": ("prussian", "prussia"), "bayern": ("bavaria", "bavarian"),
    "römisch": ("roman", "rome"), "römer": ("roman", "romans"), "rom": ("rome", "roman"), "wien": ("vienna",),
    "münchen": ("munich",), "köln": ("cologne",), "moskau": ("moscow",), "warschau": ("warsaw",),
    "prag": ("prague",), "venedig": ("venice",), "mailand": ("milan",), "neapel": ("naples",),
    "florenz": ("florence",), "athen": ("athens",), "lissabon": ("lisbon",), "kopenhagen": ("copenhagen",),
    "brüssel": ("brussels",), "genf": ("geneva",), "nordamerika": ("north america",),
    "südamerika": ("south america",), "mittelmeer": ("mediterranean",), "nordsee": ("north sea",),
    "ostsee": ("baltic",), "alpen": ("alps",), "donau": ("danube",), "rhein": ("rhine",), "arabisch": ("arab",
                                                                                                      "arabic"),
    "araber": ("arab", "arabs"), "islamisch": ("islamic", "islam"), "christlich": ("christian",),
    "katholisch": ("catholic",), "evangelisch": ("protestant", "evangelical"), "protestantisch": ("protestant",),
    "jüdisch": ("jewish",), "juden": ("jews", "jewish"), "byzantinisch": ("byzantine",),
    "sowjetunion": ("soviet union",), "sowjetisch": ("soviet",), "kalifornien": ("california",),
    "florida": ("florida",), "virginia": ("virginia",), "pennsylvanien": ("pennsylvania",),
    # peoples and faiths as German names their members (capitalised as English capitalises them, spelt otherwise)
    "spanier": ("spanish", "spaniards", "spain"), "italiener": ("italian", "italians", "italy"),
    "niederländer": ("dutch", "netherlands"), "holländer": ("dutch", "holland"),
    "österreicher": ("austrian", "austria"), "schweizer": ("swiss", "switzerland"), "kanadier": ("canadian", "canada"),
    "indianer": ("indian", "native american"), "europäer": ("european", "europe"), "afrikaner": ("african", "africa"),
    "asiate": ("asian", "asia"), "chinese": ("chinese", "china"), "japaner": ("japanese", "japan"),
    "inder": ("indian", "india"), "perser": ("persian", "persia"), "grieche": ("greek", "greece"),
    "türke": ("turkish", "turks", "turkey"), "däne": ("danish", "danes", "denmark"), "norweger": ("norwegian",),
    "ire": ("irish", "ireland"), "portugiese": ("portuguese", "portugal"), "mexikaner": ("mexican", "mexico"),
    "australier": ("australian", "australia"), "osmane": ("ottoman",), "mongole": ("mongol", "mongolian"),
    "wikinger": ("viking",), "normanne": ("norman",), "kelte": ("celt", "celtic"), "germane": ("germanic",),
    "christen": ("christian", "christians"), "christus": ("christ",), "gott": ("god",), "muslim": ("muslim", "islam"),
    "katholik": ("catholic",), "protestant": ("protestant",), "jude": ("jew", "jewish"),
}


# nouns German writes bare after a preposition in set phrases ('in Bezug auf', 'mit Hilfe', 'zu Beginn', 'an Bord'):
# common nouns there, whatever their shape
_PREPOSITIONS = frozenset("in an auf aus bei mit nach von vor zu unter über durch ohne seit um".split())
_SET_PHRASE_NOUNS = frozenset("bezug hinsicht hilfe grund gunsten kraft beginn ende bord ort hause folge fuß betrieb "
                              "frage druck anspruch recht rücksicht sicht land see zeit teil".split())


def month(word: str) -> int | None:
    """1..12 for a German month name ('März' -> 3); 'Mai' only capitalised (lower-case 'mai' is no German word)."""
    low = word.lower()
    if low in MONTHS_DE:
        return MONTHS_DE.index(low) + 1
    return _MONTH_ALIASES.get(low)


def ordinal(word: str) -> int | None:
    """The number of a German ordinal ('zweiten' -> 2); None for other words ('erst', 'achtzig')."""
    m = _ORD_DE_RX.match(word.lower())
    return _ORD_DE[m.group(1)] if m else None


def superlative(word: str) -> str | None:
    """The English superlative of a lower-case German one ('jüngste' -> 'youngest'); a capitalised word is a noun
    ('Meister', 'Beste')."""
    if not word.islower():
        return None
    m = _SUPER_DE_RX.match(word)
    return _SUPER_DE[m.group(1)] if m else None


def role(word: str) -> str | None:
    """The English role word of a German role or title ('Präsidentin' -> 'president', 'Königs' -> 'king'; a feminine
    title English writes otherwise in its own word: 'Königin' -> 'queen')."""
    m = _ROLE_DE_RX.match(word.lower())
    if m and m.group(2) in ("in", "innen") and m.group(1) in _FEMININE_DE:
        return _FEMININE_DE[m.group(1)]
    return _ROLE_DE[m.group(1)] if m else None


def german_shaped(word: str) -> bool:
    """Whether a word is spelt as only German spells it: umlauts and ß, letter groups English names rarely hold
    ('sch', 'tz', 'chs', 'cht', 'pf', 'ei', 'ie'), a final 'kt', or a common noun's suffix ('-ung', '-heit', ...).
    A name German shares with English ('Harvard', 'Chicago', 'Edinburgh') has none of them."""
    low = word.lower()
    return bool(_GERMAN_LETTERS.search(low)) or bool(_NOUN_SUFFIX.fullmatch(low)) or \
        (len(low) >= 7 and bool(_NOUN_SUFFIX.search(low)))


def _in_name_run(words: list[str], i: int, breaks: frozenset[int] = frozenset()) -> bool:
    """Whether words[i] belongs to a run of capitalised words that reads as a name of several words ('Friedrich
    Ratzel', 'William Trent'): no word of it is a role, a month or of a common noun's suffix, and its first word
    carries no adjective ending ('Kalten Krieges', 'Vereinigten Staaten' are an adjective and a noun). `breaks`: the
    indices of words a comma or other punctuation stands before ('alle Wege, Q zu ...' is no name 'Wege Q')."""
    a = b = i
    while a > 0 and a not in breaks and words[a - 1][:1].isupper() and words[a - 1].lower() not in _DETERMINERS:
        a -= 1
    while b + 1 < len(words) and b + 1 not in breaks and words[b + 1][:1].isupper() and \
            words[b + 1].lower() not in _DETERMINERS:
        b += 1
    run = words[a:b + 1]
    if len(run) < 2 or a == 0:  # (the question's first word is capitalised as any first word is)
        return False
    if re.search(r"(e|en|er|es|em)$", run[0].lower()) and len(run[0]) > 4:
        return False
    return not any(role(w) or month(w) or ordinal(w) or (len(w) >= 7 and _NOUN_SUFFIX.search(w.lower())) or
                   _UMLAUTS.search(w.lower()) for w in run)


# the particles of surnames from other languages, as written inside a name ('Gaafar al-Nimeiry', 'Vasco da Gama',
# 'Ludwig van Beethoven', 'Osama bin Laden'): none is a German word ('von' and 'zu' are German prepositions too, and
# left out)
_PARTICLES = frozenset("al el ad ud ul as at ar an az ibn bin bint abu ben van da de di du del della dos le la".split())


def _before_particle(words: list[str], i: int) -> bool:
    """Whether words[i] is the first name before a surname particle: the particle hyphenated to a capitalised name
    ('al-Nimeiry') or standing before one ('da Gama'), in lower case. German nouns stand before no such word."""
    if i + 1 >= len(words):
        return False
    nxt = words[i + 1]
    if "-" in nxt:
        head, _, rest = nxt.partition("-")
        return head in _PARTICLES and rest[:1].isupper()
    return nxt in _PARTICLES and i + 2 < len(words) and words[i + 2][:1].isupper()


def _noun_or_name(words: list[str], i: int, breaks: frozenset[int] = frozenset()) -> bool | None:
    """What common_noun and strong_noun agree on: True for a role, month, ordinal or determiner, the bare noun of a
    set prepositional phrase ('in Bezug auf') or the noun an interrogative determiner asks for ('Welche Religion');
    False for a name German writes otherwise, a hyphenated name or part of a name of several words; None when neither
    settles it."""
    w = words[i]
    low = w.lower()
    if role(w) or month(w) or ordinal(w) or low in _DETERMINERS or \
            (low in _SET_PHRASE_NOUNS and i > 0 and words[i - 1].lower() in _PREPOSITIONS):
        return True
    if english_names(w) or (w.count("-") and all(p[:1].isupper() for p in w.split("-") if p)) or \
            _in_name_run(words, i, breaks) or _before_particle(words, i):
        return False
    if _asked_noun(words, i):
        return True
    return None


def _asked_noun(words: list[str], i: int) -> bool:
    """Whether words[i] is the noun an interrogative determiner asks for ('Welche Religion', 'welchen zeitlichen
    Rahmen', 'was für ein Gesetz', 'wie viele Männer'): the kind of the answer, not a thing the answer must name
    ('Katholizismus' answers
    'Welche Religion ...?' without the word 'Religion'), as English writes it in lower case ('Which religion')."""
    j = i - 1
    while j >= 0 and words[j].islower() and _ADJ_ENDING.match(words[j]) and not words[j].startswith("welch") and \
            words[j] not in ("viele", "vielen"):
        j -= 1
    if j < 0:
        return False
    prev = words[j].lower()
    if re.fullmatch(r"welch(e|er|es|en|em)", prev):
        return True
    if prev in ("viel", "viele", "vielen") and j >= 1 and words[j - 1].lower() == "wie":
        return True  # 'Wie viel Prozent', 'Wie viele Männer': the unit or the things counted ('how many men')
    return prev in ("ein", "eine", "einen", "einem", "einer") and j >= 2 and words[j - 1].lower() == "für" and \
        words[j - 2].lower() == "was"


def common_noun(words: list[str], i: int, breaks: frozenset[int] = frozenset()) -> bool:
    """Whether the capitalised word words[i] of a German text is a common noun, not a name: a role, month, ordinal;
    a word spelt as only German spells it (german_shaped), unless it is a name German writes otherwise ('Frankreich',
    looked for in its English forms), a hyphenated name ('Saint-Pierre') or part of a name of several words
    ('Friedrich Ratzel'); or a word after an article, a determiner, a number or an inflected adjective that follows
    one ('die größte Stadt')."""
    settled = _noun_or_name(words, i, breaks)
    if settled is not None:
        return settled
    w = words[i]
    if _PLACE.search(w.lower()) and not placed_noun(words, i):
        return False  # a country's or a city's name without an article ('in Neuseeland', 'nach Mexiko-Stadt')
    # a word read as a noun only by its place or by letter groups English names hold too, but no German word ('das
    # Kelbrin', 'zu Brakkenfield'; foreign_word: the word list, its compounds, typos and inflections) is a name
    if _strong_letters(w.lower()):
        return True
    if w[1:].islower() and foreign_word(w):  # (a word of mixed case, 'EmK', may be German words' initials)
        return False
    return german_shaped(w) or placed_noun(words, i)


def placed_noun(words: list[str], i: int) -> bool:
    """Whether words[i] stands where German puts a noun: after an article, a determiner or a number, with inflected
    adjectives between ('die älteste bekannte Stadt'), or after an adjective of an adjective's shape ('bei gefrorenem
    Untergrund'). A capitalised word elsewhere ('von Einstein', 'hat Brakkenfield') is read as a noun only by its
    letters."""
    j = i - 1
    while j >= 0 and (words[j].islower() and _ADJ_ENDING.match(words[j]) and words[j] not in _DETERMINERS):
        j -= 1  # inflected adjectives between the determiner and the noun ('die älteste bekannte Stadt')
    if j < i - 1 and any(_ADJECTIVE.search(words[k]) for k in range(j + 1, i)):
        return True  # an adjective of an adjective's shape before it ('bei gefrorenem Untergrund'): a noun
    return j >= 0 and (words[j].lower() in _DETERMINERS or words[j].isdigit())


def strong_noun(words: list[str], i: int, breaks: frozenset[int] = frozenset()) -> bool:
    """Whether the capitalised word words[i] is a common noun by what only nouns are (common_noun's strong half): a
    role, month, ordinal, determiner or set phrase's noun, an umlaut or a common noun's suffix. A word read as a noun
    only by its place (after an article: 'das Delta', 'im Sudan') or by letter groups English names hold too ('ei',
    'ie': 'Einstein', 'Brakkenfield') may be a name."""
    settled = _noun_or_name(words, i, breaks)
    if settled is not None:
        return settled
    return _strong_letters(words[i].lower())


def _strong_letters(low: str) -> bool:
    """An umlaut or a common noun's suffix: letters English names do not hold."""
    return bool(_UMLAUTS.search(low)) or bool(_NOUN_SUFFIX.fullmatch(low)) or \
        (len(low) >= 7 and bool(_NOUN_SUFFIX.search(low)))


def english_names(word: str) -> tuple[str, ...]:
    """The English forms of a name German writes otherwise ('Frankreichs' -> ('france', 'french')); () if unknown."""
    low = word.lower()
    for cut in (low, *(low[: -len(e)] for e in ("s", "es", "n", "en", "e", "er", "em", "ern") if low.endswith(e))):
        if cut in _NAMES_DE_EN:
            return _NAMES_DE_EN[cut]
    for stem, eng in _NAMES_DE_EN.items():
        if len(stem) >= 5 and low.startswith(stem) and len(low) <= len(stem) + 3:
            return eng
    return ()


# A German word list (core.text.lexicon: pyspellchecker's German dictionary, about 339,000 word forms, lower-cased,
# names among them). German writes every noun capitalised, so a lower-case word of a German question that is no German
# word is a name written in lower case: a package, a program, a command ('Welche Python-Version benötigt
# cloudpickle?'). Capitalised words are not read through it: the list holds 'berlin' and 'python' as it holds 'haus'.
def lexicon() -> frozenset[str]:
    """The German word forms, loaded once (about 0.4 s)."""
    return text_lexicon("de")


_ALPHABET = "abcdefghijklmnopqrstuvwxyzäöüß"


def _one_edit(word: str, lex: frozenset[str]) -> bool:
    """Whether a word of six letters or more is one letter dropped, changed or added from a German word (a typo:
    'werdem')."""
    if len(word) < 6:
        return False
    cuts = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return any(a + b[1:] in lex for a, b in cuts if b) or \
        any(a + c + b[1:] in lex for a, b in cuts if b for c in _ALPHABET) or \
        any(a + c + b in lex for a, b in cuts for c in _ALPHABET)


_INFLECTIONS = ("ierten", "iertes", "ierter", "iertem", "ierte", "iert", "ten", "tes", "ter", "tem", "te", "tet", "test",
                "en", "er", "es", "em", "e", "t", "st", "n")
_VERB_PREFIXES = ("ge", "ver", "be", "er", "zer", "ent", "ein", "aus", "auf", "an", "ab", "mit", "nach", "vor", "zu",
                  "über", "unter", "um", "miss", "durch", "wieder", "zurück", "weg", "fest", "her", "hin")


def _inflected(word: str, lex: frozenset[str]) -> bool:
    """Whether a word is an inflected form of a German word the list lacks: a verb's past or participle, an
    adjective's ending, with the verb's prefixes read off ('ordinierte' -> 'ordinieren', 'eingezäunten' ->
    'zäunen', 'elektroschwachen' -> 'elektro' + 'schwach')."""
    stems = {word} | {word[: -len(e)] for e in _INFLECTIONS if word.endswith(e) and len(word) - len(e) >= 3}
    for _ in range(2):  # a separable prefix and the participle's 'ge' ('ein-ge-zäunt')
        stems |= {st[len(p):] for st in stems for p in _VERB_PREFIXES if st.startswith(p) and len(st) - len(p) >= 3}
    forms = {f for st in stems for f in (st, st + "en", st + "n", st + "ieren", st + "e")}
    return any(f in lex or (len(f) >= 8 and compound_of(f, lex)) for f in forms)


def foreign_word(word: str) -> bool:
    """Whether a lower-case word of a German text is no German word: not in the word list, no compound of its words,
    no typo of one and not of an inflected adjective's shape ('p-adischen'). A word with a digit ('h11') or capitals
    inside ('macOS') is never German."""
    if any(ch.isdigit() for ch in word) or any(ch.isupper() for ch in word[1:]):
        return True
    low = word.lower()
    if len(low) < 3 or low in FUNCTION_WORDS or not re.fullmatch(r"[a-zäöüß][a-zäöüß\-]*", low) or \
            _ADJECTIVE.match(low):
        return False
    lex = lexicon()
    parts = [p for p in low.split("-") if len(p) >= 3]
    return any(p not in lex and not compound_of(p, lex) and not _one_edit(p, lex) and not _inflected(p, lex)
               for p in parts)


def german_word(word: str) -> bool:
    """Whether a word (any case) is a German word form or a compound of German words ('Bibliothek', 'Codezeilen')."""
    low = word.lower()
    lex = lexicon()
    return low in lex or compound_of(low, lex)
