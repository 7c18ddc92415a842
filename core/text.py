"""Text utilities shared by stages: language guess, search tokenisation (code identifiers, Snowball stems), sentences."""
from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
import threading
import unicodedata
from functools import lru_cache
from importlib.resources import files

import Stemmer

_WORD = re.compile(r"[^\W_]+(?:[_'][^\W_]+)*|\w+", re.UNICODE)
# Identifier-ish tokens keep '_', '.', '-' inside so CACHE_TTL and NX-4471-B survive whole.
_IDENT = re.compile(r"[\w][\w.\-]*[\w]|\w", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+", re.UNICODE)
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z]")

EN_STOP = frozenset(
    "a an and are as at be by for from has have how in is it its of on or that the this to was were what when "
    "where which who why will with does do did can".split()
)
RU_STOP = frozenset(
    "и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот "
    "от меня еще нет о из ему теперь когда даже ну ли если уже или ни быть был него до вас нибудь опять уж "
    "вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтобы без "
    "будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один "
    "почти мой тем чтобы нее были куда зачем всех никогда можно при наконец два об другой хоть после над "
    "больше тот через эти нас про всего них какая много разве три эту моя впрочем хорошо свою этой перед "
    "иногда лучше чуть том нельзя такой им более всегда конечно всю между".split()
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def normalise(text: str) -> str:
    """NFC and collapsed whitespace: the form the embedding cache keys on."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def detect_language(text: str) -> str:
    """'ru', 'en' or 'other' from the share of Cyrillic vs Latin letters; enough for our mixed en/ru corpora."""
    cyr = len(_CYRILLIC.findall(text))
    lat = len(_LATIN.findall(text))
    letters = sum(1 for ch in text if ch.isalpha())
    if letters == 0:
        return "en" if text.strip() == "" else "other"
    if cyr >= 0.3 * (cyr + lat) and cyr > 0:
        return "ru"
    if lat >= 0.5 * letters:
        return "en"
    return "other"


@lru_cache(maxsize=4)
def _stemmer(lang: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(lang)


def split_identifier(token: str) -> list[str]:
    """Parts of camelCase / snake_case / dotted identifiers: 'maxRetryCount' -> ['max', 'retry', 'count']."""
    parts: list[str] = []
    for piece in re.split(r"[_.\-]+", token):
        parts.extend(m.group(0) for m in _CAMEL.finditer(piece))
    return [p.lower() for p in parts if p]


def tokenize(text: str, *, split_identifiers: bool = True, stem: bool = True) -> list[str]:
    """Search tokens: lower-cased words, stemmed per script, plus identifier parts as extra tokens."""
    return list(_tokens(text, split_identifiers, stem))


def _plain_word(raw: str) -> bool:
    # An ASCII word, lower-case after its first letter, is one piece for split_identifier: skip its regexes.
    return raw.isascii() and raw.isalpha() and (len(raw) == 1 or raw[1:].islower())


@lru_cache(maxsize=4096)
def _tokens(text: str, split_identifiers: bool, stem: bool) -> tuple[str, ...]:
    # Cached: the agentic loop's grader and the transforms tokenise the same retrieved chunks round after round
    # (a large share of a multi-hop query's time before: bench/results/route_latency_twowiki.json). A tuple, so no caller
    # can change the cached tokens.
    out: list[str] = []
    en, ru = _stemmer("english"), _stemmer("russian")
    for m in _IDENT.finditer(text):
        raw = m.group(0)
        low = raw.lower()
        pieces = ([raw] if _plain_word(raw) else split_identifier(raw)) if split_identifiers else []
        compound = len(pieces) > 1 or any(ch in raw for ch in "_.-")
        if compound:
            # Keep the whole identifier verbatim (exact-id match) and add its parts.
            out.append(low)
            words = pieces if split_identifiers else []
        else:
            words = [low]
        for w in words:
            if w in EN_STOP or w in RU_STOP:
                continue
            if stem:
                w = ru.stemWord(w) if _CYRILLIC.search(w) else en.stemWord(w)
            out.append(w)
    return tuple(out)


# Quotes of every language close and open a sentence as English ones do: «…», „…“, “…”.
_SENT_END = re.compile(r"(?<=[.!?…])[\"')\]»“”]*\s+(?=[\"'(\[«„“]?[A-ZА-ЯЁÄÖÜ0-9])|\n{2,}|\n(?=\s*[-*•]\s)|\n(?=#)")


# A German ordinal is a number with a full stop ('am 1. März 1979', 'im 20. Jahrhundert'): no sentence ends there when a
# month name or a century, millennium or time follows (general German, not read off any corpus)
_ORDINAL_DOT = re.compile(r"(?<![\d.,])\d{1,2}\.$")
_AFTER_ORDINAL = re.compile(r"(Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|"
                            r"Dezember|Jahrhunderts?|Jahrtausends?|Jahrestag|Lebensjahr|Mal|Platz|Stock|Klasse|Auflage|"
                            r"Bundestag|Armee|Division|Regiment)\b")


# The full stop of an abbreviation or an initial ends no sentence: a capital letter after a name or an initial
# ('John F. Kennedy', 'А. С. Пушкин': _INITIAL), any letter before another ('J. R. R.', 'z. B.', 'v. Chr.':
# _ABBREV_NEXT; a small letter alone is a variable: '... for every integer n. It is ...') and the common abbreviations
# of English, German and Russian prose that rarely close one (not 'etc.', 'usw.', 'т. д.', which often do)
_ABBREV_NEXT = re.compile(r"[A-ZÄÖÜА-ЯЁ]\.|Chr\.")
_LETTER_DOT = re.compile(r"(?:^|[\s(\[„“\"'])[^\W\d_]\.$")
# a capital letter is an initial after a name or another initial ('John F. Kennedy', 'J. R. R.', 'z. B.'), not after a
# small word ('Schinzel's hypothesis H. Brocard's conjecture ...')
_INITIAL = re.compile(r"(?:[A-ZÄÖÜА-ЯЁ][^\s.]*\.?|[a-zäöü]\.)\s+[A-ZÄÖÜА-ЯЁ]\.$")
_ABBREV_DOT = re.compile(r"(?:^|[\s(\[„“\"'])(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|e\.g|i\.e|approx|Fig|Gen|Col|Lt|"
                         r"Sgt|Capt|Gov|Sen|Rev|No|bzw|ca|Nr|vgl|sog|ggf|evtl|inkl|bspw|Mio|Mrd|Jh|Chr|Abs|z\.B|d\.h|"
                         r"u\.a|др|им|ул|см|напр|т\.е|т\.н)\.$")


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character spans of sentences in text[start:end]; paragraph breaks and list items also end a sentence (a German
    ordinal's full stop before a month or a century does not: 'am 1. März', 'im 20. Jahrhundert'; nor does an
    abbreviation's: 'bzw.', 'Dr.', 'z. B.')."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    pos = start
    for m in _SENT_END.finditer(text, start, end):
        if text[m.start() - 1: m.start()] == "." and _ORDINAL_DOT.search(text, max(start, m.start() - 4), m.start()) \
                and _AFTER_ORDINAL.match(text, m.end()):
            continue
        if text[m.start() - 1: m.start()] == "." and (
                _ABBREV_DOT.search(text, max(start, m.start() - 8), m.start()) or
                _INITIAL.search(text[max(start, m.start() - 40): m.start()]) or
                (_LETTER_DOT.search(text, max(start, m.start() - 3), m.start()) and _ABBREV_NEXT.match(text, m.end()))):
            continue
        if m.start() > pos:
            spans.append((pos, m.start()))
        pos = m.end()
    if pos < end:
        spans.append((pos, end))
    # Trim surrounding whitespace so offsets point at text.
    trimmed = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


# A `Key: Value` line: a short key of one to three words (letters, digits, '-', '_'), ': ', a value. A URL's 'http:' is
# no key (no space after the colon).
FIELD_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][\w\-]*(?:[ .][A-Za-z][\w\-]*){0,2})\s*:\s+(?P<value>\S.*)$")


def field_blocks(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character ranges of runs of `Key: Value` lines in text[start:end] (two field lines or more; a folded line
    indented under its field belongs to it): package metadata, mail and memo headers, man page fields."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos, first, fields, last = start, -1, 0, start
    for ln in text[start:end].splitlines(keepends=True):
        body = ln.rstrip("\r\n")
        if FIELD_LINE.match(body) and not body.startswith((" ", "\t")):
            if first < 0:
                first, fields = pos, 0
            fields += 1
            last = pos + len(body)
        elif first >= 0 and body.startswith((" ", "\t")) and body.strip():
            last = pos + len(body)
        else:
            if first >= 0 and fields >= 2:
                out.append((first, last))
            first = -1
        pos += len(ln)
    if first >= 0 and fields >= 2:
        out.append((first, last))
    return out


def unit_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """sentence_spans, except that a run of `Key: Value` lines gives one span per field (its folded lines with it):
    a field is never cut inside its value ('Author: Nathaniel J. Smith') nor glued to the next field."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for fs, fe in [*field_blocks(text, start, end), (end, end)]:
        out.extend(sentence_spans(text, pos, fs))
        line_start = fs
        for m in re.finditer(r"\n(?![ \t]+\S)", text[fs:fe] + "\n"):
            a, b = line_start, min(fs + m.start(), fe)
            if text[a:b].strip():
                out.append((a, b))
            line_start = fs + m.end()
        pos = fe
    return out


_TOKEN_SPAN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def token_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Spans of chunking tokens (words and punctuation marks) — a model-free stand-in for subword tokens."""
    end = len(text) if end is None else end
    return [(m.start(), m.end()) for m in _TOKEN_SPAN.finditer(text, start, end)]


def count_tokens(text: str) -> int:
    return len(_TOKEN_SPAN.findall(text))


def _ascii_count(text: str) -> int:
    return len(text.encode("ascii", "ignore"))


def estimate_llm_tokens(text: str) -> int:
    """Rough Claude token estimate (no offline tokenizer exists), per script: ~4 ASCII characters per token, ~2 for
    other scripts (Cyrillic, Greek, CJK), never below the word count. For displays; budgets use the bound below."""
    ascii_chars = _ascii_count(text)
    return max(ascii_chars // 4 + (len(text) - ascii_chars + 1) // 2, len(text.split()))


def llm_tokens_upper_bound(text: str) -> int:
    """A safe ceiling on Claude tokens when the provider's counter cannot be asked: one token per non-ASCII
    character (Cyrillic runs ~1 character per token at worst) and one per two ASCII characters. Estimating
    Russian at 4 characters per token let a budget of $0.009 spend $0.0119; this bound never undercounts."""
    ascii_chars = _ascii_count(text)
    return (ascii_chars + 1) // 2 + (len(text) - ascii_chars)


# -- display helpers every view shares (core.app's frames, core.graph's pictures) ---------------------------------
# A fixed qualitative palette: the same chunk gets the same colour in every column (hash of its id).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def snippet(text: str, n: int = 160) -> str:
    """The text on one line, cut to at most n characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


# -- secret redaction at the boundary: API keys never reach an error text, trace, log, row or export ---------------

# Anthropic keys look like sk-ant-api03-...; anything of that shape is hidden even when we never saw the key, and so
# is the value of any credential header a gateway may quote back (Authorization: Bearer ..., x-api-key: ...), in
# header, JSON or query-string form.
SECRET_PATTERN = re.compile(r"(?i)sk-ant-[A-Za-z0-9_\-]{4,}")
# A credential, not a word: 8+ characters with a digit, or 20+ ("Authorization: required" stays readable).
_CRED = r"(?:(?=[^\s\"',;&}<>]*\d)[^\s\"',;&}<>]{8,}|[^\s\"',;&}<>]{20,})"
_BEARER = re.compile(r"(?i)(\bbearer\s+)" + _CRED)
_HEADER = re.compile(r"(?i)(\b(?:x-api-key|api[-_]?key|authorization|proxy-authorization)[\"']?\s*[:=]\s*[\"']?"
                     r"(?:(?:bearer|basic|token)\s+)?)(?!\[redacted\])" + _CRED)
MASK = "[redacted]"
_known: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a configured key so it is hidden even when it does not look like an Anthropic key."""
    if value and len(value) >= 8:
        with _lock:
            _known.add(value)


# -- disguised echoes of a registered secret (issue #46 item 8) ------------------------------------------------------
# The text is matched in a normalised view (entities decoded, zero-width and spacing dropped, hyphen look-alikes made
# '-', compatibility forms folded, lower case) against the key itself, its reverse, any run of PARTIAL_RUN of its
# characters (a truncated or partly quoted key) and its base64 encodings; each match masks the original characters
# it came from, however spread out they were.
PARTIAL_RUN = 16  # characters of a key (fewer for a short key: all of it) that count as an echo of it
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u034f")
_HYPHENS = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d")
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_needles_cache: dict[frozenset[str], "re.Pattern[str] | None"] = {}


def _b64_cores(secret: str) -> list[str]:
    """The part of the base64 of `secret` that is the same wherever it sits in a longer encoded run, at each of the
    three byte alignments (standard and URL-safe alphabets)."""
    raw = secret.encode("utf-8")
    out = []
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode().rstrip("=")
        lead = 4 if k else 0
        tail = (k + len(raw)) % 3
        core = enc[lead: len(enc) - (4 if tail else 0)] if tail else enc[lead:]
        if len(core) >= 12:
            out += [core, core.replace("+", "-").replace("/", "_")]
    return out


def _needles(known: frozenset[str]) -> "re.Pattern[str] | None":
    hit = _needles_cache.get(known)
    if hit is not None or known in _needles_cache:
        return hit
    forms: set[str] = set()
    for secret in known:
        s = _fold(secret)
        run = min(len(s), PARTIAL_RUN)
        for text in (s, s[::-1]):
            forms.update(text[i:i + run] for i in range(len(text) - run + 1))
        forms.update(c.lower() for c in _b64_cores(secret))
    pat = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))) if forms else None
    if len(_needles_cache) > 64:
        _needles_cache.clear()
    _needles_cache[known] = pat
    return pat


def _fold_char(ch: str) -> str:
    if ch in _HYPHENS:
        return "-"
    if ord(ch) > 127:
        ch = unicodedata.normalize("NFKC", ch)
    return ch.lower()


def _fold(text: str) -> str:
    return "".join(_fold_char(c) for c in text if c not in _ZERO_WIDTH and not c.isspace())


def _normalised_view(text: str) -> tuple[str, list[int], list[int]]:
    """(folded text, start and end in `text` of each folded character)."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        j = i + 1
        if ch == "&" and (m := _ENTITY.match(text, i)):
            dec = html.unescape(m.group(0))
            if dec != m.group(0):
                ch, j = dec, m.end()
        if ch in _ZERO_WIDTH or ch.isspace():
            i = j
            continue
        for f in _fold_char(ch) if len(ch) == 1 else _fold(ch):
            chars.append(f)
            starts.append(i)
            ends.append(j)
        i = j
    return "".join(chars), starts, ends


_QUICK = {**{ord(c): None for c in _ZERO_WIDTH}, **{ord(c): "-" for c in _HYPHENS}}
_SPACE = re.compile(r"\s+")


def _mask_disguised(text: str, known: frozenset[str]) -> str:
    pat = _needles(known)
    if pat is None:
        return text
    # A whole-text fold first (C speed); the per-character view that maps matches back is built only on a hit.
    quick = text
    if "&" in quick:
        quick = html.unescape(quick)
    if not quick.isascii():
        quick = unicodedata.normalize("NFKC", quick.translate(_QUICK))
    quick = _SPACE.sub("", quick).lower().translate(_QUICK)
    if pat.search(quick) is None:
        return text
    view, starts, ends = _normalised_view(text)
    spans: list[list[int]] = []
    pos = 0
    while (m := pat.search(view, pos)) is not None:
        a, b = starts[m.start()], ends[m.end() - 1]
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
        pos = m.start() + 1  # overlapping runs of one echo merge into one span
    for a, b in reversed(spans):
        text = text[:a] + MASK + text[b:]
    return text


def redact(text: str) -> str:
    """text with every registered secret (also disguised: case, zero-width characters, spacing and wrapping, HTML
    entities, hyphen look-alikes, reversed, base64, or a run of PARTIAL_RUN of its characters), every sk-ant-...
    token and every quoted credential header value (Bearer tokens, x-api-key / authorization values) replaced by
    [redacted]."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    if known:
        text = _mask_disguised(text, frozenset(known))
    text = SECRET_PATTERN.sub(MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    return _HEADER.sub(lambda m: m.group(1) + MASK, text)


# -- terminal output: control characters shown, never obeyed (issue #46 item 8) --------------------------------------
# Every C0/C1 control but newline and tab (ESC starts OSC 8 links, concealed text, cursor moves; CR overwrites a
# line) and the bidirectional overrides (text that reads differently from how it is stored).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """text with every control character written as a visible escape (ESC -> \\x1b), newlines and tabs kept."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 256
                       else f"\\u{ord(m.group(0)):04x}", text)


def redact_value(value: object) -> object:
    """A parsed JSON value (or tool input) with `redact` applied to every string in it, keys included: a reply's
    structured data reaches the graph and the answer as text too."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


# Function words of Latin-script languages other than English: detect_language calls every Latin text 'en', which
# hides a German question over English documents from the multilingual channel. A short closed list per language.
_LATIN_STOP = {
    "en": EN_STOP | frozenset("there their they been but not which into than then also".split()),
    "de": frozenset("der die das und ist nicht ein eine einer eines dem den des mit von zu auf für im sich wie "
                    "wer was wann wo warum welche welcher welches wurde wurden hat haben sind auch bei aus nach "
                    "oder als noch durch über vom zum zur dass welchem welchen worauf wohin woher man unter in".split()),
    "fr": frozenset("le la les et est une des du dans pour qui que quel quelle quels pas par sur avec sont au aux "
                    "ce cette il elle ont été comment pourquoi où".split()),
    "es": frozenset("el la los las y es una del en por que qué cuál cuándo dónde quién con para se su sus al "
                    "como fue son está".split()),
}


_LATIN_MARKS = {"de": "äöüß", "es": "ñ¿¡", "fr": "çœ"}


def guess_language(text: str) -> str:
    """detect_language, with Latin-script text told apart by its function words ('en', 'de', 'fr', 'es'): the
    language with the most function words wins; English keeps ties and texts with none (names, numbers, code)."""
    lang = detect_language(text)
    if lang != "en":
        return lang
    words = [w.lower() for w in _WORD.findall(text)]
    counts = {k: sum(1 for w in words if w in stop) for k, stop in _LATIN_STOP.items()}
    for lang, letters in _LATIN_MARKS.items():  # letters English never writes count as one function word
        counts[lang] += any(ch in letters for ch in text.lower())
    best = max(counts, key=lambda k: (counts[k], k == "en"))
    if counts["de"] == counts["en"] > 0 and counts["de"] >= counts[best]:
        # a tie of German and English ('Was bedeutet Ge(x) in annotated-types?': 'was', 'in'): the words only one of
        # the two languages' word lists holds decide
        de, en = lexicon("de"), lexicon("en")
        plain = [w.lower() for w in re.findall(r"(?<!\S)[^\W\d_]+(?=[\s,.;:?!]|$)", text)]  # not a name's parts
        only_de = sum(1 for w in plain if w in de and w not in en)  # ('annotated-types', 'Ge(x)')
        only_en = sum(1 for w in plain if w in en and w not in de)
        return "de" if only_de > only_en else "en"
    return best if counts[best] > counts["en"] else "en"


@lru_cache(maxsize=4)
def lexicon(lang: str) -> frozenset[str]:
    """A language's word forms, lower-cased: pyspellchecker's word lists (German about 339,000 forms, English about
    160,000; MIT, read as data, its spelling API unused). Loaded once per language (about 0.4 s)."""
    raw = files("spellchecker").joinpath("resources", f"{lang}.json.gz").read_bytes()
    return frozenset(json.loads(gzip.decompress(raw)))


def compound_of(word: str, lex: frozenset[str], depth: int = 0) -> bool:
    """Whether a lower-case word is words of a word list (lexicon), four letters or more each, joined (a linking 's'
    allowed): German's 'aufeinanderfolgender', 'mindestversion'."""
    return compound_parts(word, lex, depth) is not None


def compound_parts(word: str, lex: frozenset[str], depth: int = 0) -> tuple[str, ...] | None:
    """The words of a word list a lower-case compound joins, first split first ('weltmeisterschaft' -> ('welt',
    'meisterschaft')); None when it is no such compound (compound_of)."""
    if depth and word in lex and len(word) >= 4:
        return (word,)
    if depth > 2:
        return None
    for i in range(4, len(word) - 3):
        head, rest = word[:i], word[i:]
        if head in lex or (head.endswith("s") and len(head) > 4 and head[:-1] in lex):
            tail = compound_parts(rest, lex, depth + 1)
            if tail is not None:
                return (head, *tail)
    return None


def german_only(word: str) -> bool:
    """Whether a word is German and not English: a German word form the English list lacks ('Autor', 'Raum'), or
    German words joined ('Mindestversion'). An acronym or a word with a digit is neither ('AES', 'h11')."""
    low = word.lower()
    if word.isupper() or any(ch.isdigit() for ch in word):
        return False
    de = lexicon("de")
    return (low in de or compound_of(low, de)) and low not in lexicon("en")
