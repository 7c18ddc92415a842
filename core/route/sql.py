"""The sql route: whether a question is about the workspace's tables (text | table | mixed) and the SQL that answers
it: offline a deterministic template translator matched against the tables' own column names and values, with a
key Claude writing one read-only query from the schema (JSON output). The SQL sandbox (core/store/sql.py) runs it."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from core.models.llm import LLM, LLMError, LLMRequest, TextBlock
from core.types import DEFAULT_WORKSPACE, SqlResult, StageInfo, TableInfo, Usage

NUMERIC = frozenset({"BIGINT", "DOUBLE"})
# Distinct values per text column the translator matches against a question (the most frequent first).
MAX_VALUES = 500
Values = Callable[[str, str], Sequence[Any]]  # (table, column) -> distinct values

# Question cues, generic English (no corpus words): what asks for an aggregate, a list or a ranking, and what asks
# for the documents' prose.
_COUNT = re.compile(r"\b(how many|number of|count)\b")
_SUM = re.compile(r"\b(total|sum|altogether|combined|overall|in all|how much)\b")
_AVG = re.compile(r"\b(average|avg|the mean)\b")  # not the verb: "what does X mean"
_MAX = re.compile(r"\b(highest|maximum|max|largest|biggest|greatest|most|latest|top)\b")
_MIN = re.compile(r"\b(lowest|minimum|min|smallest|least|fewest|earliest|bottom)\b")
_LIST = re.compile(r"^\s*(which|list|show|name|what are the|who are)\b|\blist (all|the)\b")
_TOPK = re.compile(r"\b(?:top|which|first)\s+(\d+|two|three|four|five|ten)\b")
_GROUP = re.compile(r"\b(?:per|by|for each|for every|each|broken down by)\s+([a-z_][a-z0-9_ ]*)")
_TEXTUAL = re.compile(r"\b(why|explain|describe|what does .{0,40} mean|how (do|should|to|can)|what happened|"
                      r"according to|what should|summari[sz]e|in what way|what is the (first|recommended) action|"
                      r"first action|where is it|what (temperature|products?) |recommend\w*|fix\b|fixed\b)")
# "the code with the most tickets": the row's key is asked for, not the aggregate.
_ENTITY = re.compile(r"\b(with|that had|that has|having|which had|which has) the (most|highest|lowest|largest|"
                     r"smallest|fewest|least|biggest|greatest)\b")
_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "ten": 10}
_STOP = frozenset({"the", "a", "an", "of", "in", "for", "by", "per", "to", "and", "or", "is", "are", "was", "were",
                   "what", "which", "who", "how", "many", "much", "any", "all", "each", "every", "with", "our", "we",
                   "do", "does", "did", "have", "has", "had", "there", "this", "that", "it", "its", "from", "on", "at"})


@dataclass(frozen=True)
class SqlPlan:
    """A query for the sandbox, or the reason there is none (`sql` empty): who wrote it and why."""

    sql: str
    translator: str  # template | llm | user
    reason: str
    table: str = ""
    usage: Usage = Usage()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableRoute:
    """The question's kind: text (the documents), table (SQL answers it) or mixed (SQL, then the documents)."""

    kind: str
    reason: str
    tables: tuple[str, ...] = ()


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


_ABBREVIATIONS = {"max": "maximum", "min": "minimum", "avg": "average", "qty": "quantity", "amt": "amount"}


def _words(name: str) -> list[str]:
    """A column or table name's words, without numbers and unit suffixes (revenue_keur -> revenue), abbreviations
    spelled out (max_temp_c -> maximum, temp)."""
    return [_ABBREVIATIONS.get(w, w) for w in name.lower().split("_") if w and not w.isdigit() and len(w) > 1 and w
            not in {"keur", "eur", "usd", "kg", "km", "pct", "id", "c", "f", "no", "num"}]


def _stem(w: str) -> str:
    for suf in ("ies", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def _q_stems(q: str) -> list[str]:
    return [_stem(w) for w in re.findall(r"[a-z0-9]+", q) if w not in _STOP]


def _mentions(words: Sequence[str], stems: Sequence[str]) -> bool:
    """All of a name's words occur in the question (as a question word's stem, or a 4+ letter start of one: temp
    in temperature)."""
    if not words:
        return False
    have = set(stems)
    for w in words:
        s = _stem(w)
        if s not in have and not (len(s) >= 4 and any(t.startswith(s) for t in have)):
            return False
    return True


@dataclass
class _Match:
    table: TableInfo
    filters: list[tuple[str, Any, int, int]] = field(default_factory=list)  # (column, value, start, end)
    columns: list[str] = field(default_factory=list)  # columns the question names
    named: bool = False  # the question names the table

    @property
    def score(self) -> float:
        return 2 * len(self.filters) + len(self.columns) + 1.5 * self.named


def _value_hits(q: str, table: TableInfo, values: Values) -> list[tuple[str, Any, int, int]]:
    """(column, value, start, end) for each text value of the table that occurs in the question as whole words;
    longer values first, no two overlapping."""
    found: list[tuple[str, Any, int, int]] = []
    for col, typ in table.columns:
        if typ != "VARCHAR":
            continue
        for v in values(table.name, col):
            s = _norm(str(v))
            if len(s) < 2 or s in _STOP:
                continue
            # A plural in the question matches the singular value ("sensors" -> sensor).
            for m in re.finditer(r"(?<![a-z0-9])" + re.escape(s) + r"(?:s|es)?(?![a-z0-9])", q):
                found.append((col, v, m.start(), m.end()))
    found.sort(key=lambda f: -(f[3] - f[2]))
    kept: list[tuple[str, Any, int, int]] = []
    for f in found:
        if all(f[3] <= k[2] or f[2] >= k[3] for k in kept):
            kept.append(f)
    return kept


def match_tables(question: str, tables: Sequence[TableInfo], values: Values) -> list[_Match]:
    """Each table with the values and columns of it the question mentions, best first."""
    q = _norm(question)
    stems = _q_stems(q)
    out = []
    for t in tables:
        m = _Match(t, _value_hits(q, t, values))
        m.columns = [c for c, _ in t.columns if _mentions(_words(c), stems)]
        m.named = _mentions(_words(t.name), stems)
        out.append(m)
    return sorted(out, key=lambda m: -m.score)


def classify(question: str, tables: Sequence[TableInfo], values: Values) -> TableRoute:
    """text | table | mixed: an aggregate, list or ranking cue grounded in a table (its name, a column or a value
    the question mentions) goes to SQL; with a cue for the documents' prose as well, to both."""
    if not tables:
        return TableRoute("text", "no tables in this workspace")
    q = _norm(question)
    matches = [m for m in match_tables(question, tables, values) if m.score > 0]
    cue = next((c.pattern for c in (_COUNT, _SUM, _AVG, _MAX, _MIN, _TOPK, _GROUP) if c.search(q)), "")
    listing = bool(_LIST.search(q)) and any(m.filters and (m.named or m.columns) for m in matches)
    if not matches or not (cue or listing):
        why = "no table, column or value of a table named" if not matches else "no aggregate, list or ranking asked"
        return TableRoute("text", why)
    names = tuple(m.table.name for m in matches[:2])
    grounded = [m for m in matches if m.named or m.columns or len(m.filters) > 0]
    if not grounded:
        return TableRoute("text", "the question names no table or column")
    textual = _TEXTUAL.search(q)
    if textual:
        return TableRoute("mixed", f"asks for an aggregate over table(s) {', '.join(names)} and for prose "
                                   f"('{textual.group(0).strip()}')", names)
    return TableRoute("table", f"asks for an aggregate, list or ranking over table(s) {', '.join(names)}", names)


def _lit(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _numeric_target(m: _Match, q: str) -> str | None:
    """The numeric column the question is about: the first one it names (in the table's column order), or None."""
    named = [c for c in m.columns if dict(m.table.columns)[c] in NUMERIC]
    return named[0] if named else None


def _counts_column(q: str, column: str) -> bool:
    """'how many tickets ...' counts a column's quantity (a sum), 'how many error codes ...' counts rows."""
    m = re.search(r"\b(?:how many|number of|count(?: of| the)?)\s+((?:[a-z0-9-]+\s*){1,3})", q)
    return bool(m) and _mentions(_words(column)[:1], _q_stems(m.group(1)))


def _group_column(m: _Match, q: str) -> str | None:
    g = _GROUP.search(q)
    if not g:
        return None
    tail = _q_stems(g.group(1))
    for col, typ in m.table.columns:
        if typ not in NUMERIC and _mentions(_words(col), tail[: max(1, len(_words(col)))]):
            return col
    return None


def _evidence(m: _Match) -> set[tuple[str, str]]:
    return {("value", _norm(str(v))) for _, v, _, _ in m.filters} | {("column", c) for c in m.columns}


_POSSESSIVE = re.compile(r"(?:'s|\bits|\btheir)\s+([a-z][a-z_-]+)")


def _explained(word: str, table: TableInfo) -> bool:
    """A word the table accounts for: its name, a column, or an aggregate / ranking cue."""
    stems = _q_stems(word)
    if not stems or any(c.search(word) for c in (_COUNT, _SUM, _AVG, _MAX, _MIN)):
        return True
    return _mentions(_words(table.name)[:1], stems) or any(_mentions(_words(c)[:1], stems) for c, _ in table.columns)


def _join_needed(best: _Match, matches: Sequence[_Match]) -> str:
    """What the question names outside the best table ("" when that table holds all of it): a value or a column
    of another table that the best one lacks."""
    have = _evidence(best)
    for o in matches:
        if o is best:
            continue
        for kind, item in sorted(_evidence(o) - have):
            if kind == "column" and item in dict(best.table.columns):
                continue
            what = f"column {item}" if kind == "column" else f"'{item}'"
            return f"{what} is in table {o.table.name}, the rest in {best.table.name}"
    return ""


def _asked_column(q: str, table: TableInfo, *, exclude: set[str]) -> str | None:
    """A text column the question asks for by a word sharing its first five letters ('operates' for operator,
    'located' for location), other than the row key, the ranked column and the filtered ones; None otherwise."""
    words = [w for w in re.findall(r"[a-z]+", q) if w not in _STOP and len(w) >= 5]
    for col, typ in table.columns:
        if col in exclude or typ != "VARCHAR":
            continue
        if any(len(cw) >= 5 and any(w[:5] == cw[:5] for w in words) for cw in _words(col)):
            return col
    return None


_WHICH = re.compile(r"^\s*(?:(?:and|but|so|then|also)\s+)?(?:which|what)\s+((?:[a-z0-9_-]+\s+){1,3}?)"
                    r"(?:has|had|have|is|was|were|are|with|shows|gets|got|scores|spends|earns)\b")


def _which_column(q: str, table: TableInfo, *, exclude: set[str]) -> str | None:
    """The text column a 'which <noun> has ...' question ranks (its noun names the column: 'region', 'sales rep'),
    other than the row key; None when the noun names no such column."""
    m = _WHICH.match(q)
    if not m:
        return None
    stems = _q_stems(m.group(1))
    for col, typ in table.columns:
        if col in exclude or typ != "VARCHAR":
            continue
        if _mentions(_words(col), stems[: max(1, len(_words(col)))]):
            return col
    return None


# "the <asked> of the <noun> with the most <measure>": the row a ranking picks, and a column of it. Generic English.
_RANKED_ROW = re.compile(
    r"\bthe ((?:[a-z0-9][a-z0-9_-]* ){0,2}?[a-z0-9][a-z0-9_-]*) (?:with|that had|that has|having|which had|which "
    r"has) the (most|highest|lowest|largest|smallest|fewest|least|biggest|greatest|latest|earliest) "
    r"((?:[a-z0-9][a-z0-9_-]* ?){1,4})")
_ASCENDING = frozenset({"lowest", "smallest", "fewest", "least", "earliest"})


@dataclass(frozen=True)
class Chain:
    """'What is the population of the country with the highest income?': the row of `table` that ranks first by
    `ranked` (its `ident` column names it), then its `asked` column, read from `asked_table` (the same table, or
    another one holding the `ident` column). `grouped`: the ranking table holds several rows per ident (summed)."""

    table: TableInfo
    ident: str
    ranked: str
    order: str  # ASC | DESC
    asked: str
    asked_table: TableInfo
    grouped: bool
    where: tuple[str, ...] = ()

    def rank_sql(self) -> str:
        """Step 1: the ident of the first row (or group) by the ranked column."""
        where = f" WHERE {' AND '.join(self.where)}" if self.where else ""
        if self.grouped:
            return (f"SELECT {_ident(self.ident)} FROM {_ident(self.table.name)}{where} GROUP BY {_ident(self.ident)} "
                    f"ORDER BY sum({_ident(self.ranked)}) {self.order} LIMIT 1")
        return (f"SELECT {_ident(self.ident)} FROM {_ident(self.table.name)}{where} ORDER BY {_ident(self.ranked)} "
                f"{self.order} LIMIT 1")

    def asked_sql(self, value: Any) -> str:
        """Step 2: the asked column of the row step 1 named."""
        return (f"SELECT {_ident(self.ident)}, {_ident(self.asked)} FROM {_ident(self.asked_table.name)} WHERE "
                f"{_ident(self.ident)} = {_lit(value)}")

    def one_query(self) -> str:
        """Both steps as one query, when one table holds both columns and one row per ident."""
        where = f" WHERE {' AND '.join(self.where)}" if self.where else ""
        return (f"SELECT {_ident(self.ident)}, {_ident(self.asked)} FROM {_ident(self.table.name)}{where} ORDER BY "
                f"{_ident(self.ranked)} {self.order} LIMIT 1")

    @property
    def steps(self) -> int:
        return 1 if self.asked_table is self.table and not self.grouped else 2

    def describe(self) -> str:
        how = f"sum({self.ranked}) per {self.ident}" if self.grouped else self.ranked
        return (f"the {self.ident} first by {how} ({'lowest' if self.order == 'ASC' else 'highest'}) in "
                f"{self.table.name}, then its {self.asked}" + (f" from {self.asked_table.name}"
                                                              if self.asked_table is not self.table else ""))


def find_chain(question: str, tables: Sequence[TableInfo], values: Values) -> Chain | None:
    """The ranked-row question's parts, or None: the noun names a text column of a table (or the table: its first
    column), the measure after the superlative names a numeric column of that table, and the words before the noun
    name another column of that table or of a table holding the same text column."""
    q = _norm(question)
    m = _RANKED_ROW.search(q)
    if not m:
        return None
    noun, head = _q_stems(m.group(1)), _q_stems(q[: m.start()])
    measure = _q_stems(m.group(3))
    if not noun or not head or not measure:
        return None
    for t in tables:
        cols = dict(t.columns)
        ident = next((c for c, typ in t.columns if typ == "VARCHAR" and _mentions(_words(c), noun[-2:])), None)
        if ident is None and _mentions(_words(t.name)[:1], noun[-1:]) and t.columns[0][1] == "VARCHAR":
            ident = t.columns[0][0]
        if ident is None:
            continue
        ranked = next((c for c, typ in t.columns if typ in NUMERIC and _mentions(_words(c), measure)), None)
        if ranked is None:
            continue
        others = [t, *[o for o in tables if o is not t and dict(o.columns).get(ident) == "VARCHAR"]]
        found = next(((o, c) for o in others for c, _ in o.columns
                      if c not in (ident, ranked) and _mentions(_words(c), head)), None)
        if found is None:
            continue
        hits = [h for h in _value_hits(q, t, values) if h[2] < m.start()]  # "... of the gateway product with ..."
        where = tuple(f"{_ident(c)} = {_lit(v)}" for c, v, _, _ in hits if c != ident)
        grouped = cols[ident] == "VARCHAR" and len(set(values(t.name, ident))) < t.n_rows
        return Chain(t, ident, ranked, "ASC" if m.group(2) in _ASCENDING else "DESC", found[1], found[0], grouped,
                     where)
    return None


# Words of a table question that ask how, not what: cues, ranking words and filler (generic English).
_ASKING = frozenset({"highest", "lowest", "average", "avg", "mean", "total", "sum", "most", "least", "maximum",
                     "minimum", "max", "min", "largest", "smallest", "biggest", "greatest", "fewest", "top", "number",
                     "count", "much", "show", "list", "give", "tell", "me", "value", "values", "overall", "altogether",
                     "combined", "be", "been", "can", "could", "would", "should", "will", "us", "you", "i", "your",
                     "belong", "belongs", "get", "gets", "got", "one", "ones", "their", "them", "they", "than",
                     "as", "into", "over", "about", "across", "between", "among", "out", "up"})


def _unknown_phrase(q: str, table: TableInfo, values: Values) -> str:
    """The first run of the question's words that neither the table (its name, a column, a value) nor a question
    cue accounts for: 'life expectancy' in 'which region has the highest average life expectancy' over a table
    whose columns are country, region, health, population and income; "" when every word is accounted for."""
    covered = [(s, e) for _, _, s, e in _value_hits(q, table, values)]
    run: list[str] = []
    for w in re.finditer(r"[a-z][a-z0-9-]*", q):
        word = w.group(0)
        known = (word in _STOP or word in _ASKING or any(s <= w.start() < e for s, e in covered)
                 or _explained(word, table) or any(c.search(word) for c in (_COUNT, _SUM, _AVG, _MAX, _MIN)))
        if not known:
            run.append(word)
        elif run:
            break
    return " ".join(run)


def _order(q: str, target: str, hi: Any, lo: Any) -> str:
    """The ranking's direction. With both a high and a low cue, the one that is not a word of the ranked column's
    name decides: 'the lowest average maximum temperature' ranks max_temp_c ascending."""
    if hi and lo:
        own = {w for w in _words(target)}
        rest = " ".join(w for w in q.split() if _ABBREVIATIONS.get(w, w) not in own)
        hi, lo = _MAX.search(rest), _MIN.search(rest)
    return "ASC" if lo and not hi else "DESC"


def template_sql(question: str, tables: Sequence[TableInfo], values: Values) -> SqlPlan:
    """Offline: count / sum / average / min / max of a column, optionally grouped by a column and filtered by values
    that occur in the table, a top-k by a column, or the rows a filter selects. Anything else (a join, a comparison
    of two aggregates, a column the question does not name) is declined with the reason."""
    q = _norm(question)
    matches = [m for m in match_tables(question, tables, values) if m.score > 0]
    if not matches:
        return SqlPlan("", "template", "no table, column or value of the workspace's tables is named")
    m = matches[0]
    owned = _POSSESSIVE.search(q)
    if owned and not _explained(owned.group(1), m.table):
        return SqlPlan("", "template", f"'{owned.group(0)}' names something table {m.table.name} has no column for "
                                       "(a relation: an LLM writes the join)", m.table.name)
    missing = _join_needed(m, matches)
    if missing:
        return SqlPlan("", "template", f"needs a join: {missing} (an LLM writes joins)", m.table.name)
    chain = find_chain(question, tables, values)
    if chain is not None and chain.steps == 1:  # "the population of the country with the highest income"
        return SqlPlan(chain.one_query(), "template", chain.describe(), chain.table.name)
    if chain is not None:
        return SqlPlan("", "template", f"two steps: {chain.describe()} (the agent's tools run them: agent.tools)",
                       chain.table.name)
    t, cols = m.table, dict(m.table.columns)
    # Two values of one column are alternatives (x = a OR x = b), different columns all apply.
    by_col: dict[str, list[str]] = {}
    for c, v, _, _ in m.filters:
        by_col.setdefault(c, []).append(f"{_ident(c)} = {_lit(v)}")
    where = [w[0] if len(w) == 1 else "(" + " OR ".join(w) + ")" for w in by_col.values()]
    where_sql = f" WHERE {' AND '.join(where)}" if where else ""
    target = _numeric_target(m, q)
    group = _group_column(m, q)
    key = t.columns[0][0]
    src = _ident(t.name)
    topk = _TOPK.search(q)
    agg = ("avg" if _AVG.search(q) else "sum" if _SUM.search(q) else "")
    hi, lo = _MAX.search(q), _MIN.search(q)
    if target is None and (agg or hi or lo) and not _COUNT.search(q) and (unknown := _unknown_phrase(q, t, values)):
        # "the highest average life expectancy" over a table without such a column: say so, never count rows
        return SqlPlan("", "template", f"'{unknown}' names no column of table {t.name}", t.name)
    # A follow-up condensed from a conversation may open with a conjunction ("and who operates ...").
    asks_entity = bool(re.match(r"\s*(?:(?:and|but|so|then|also)\s+)?(which|who|top|list|name)\b", q)
                       or _ENTITY.search(q))
    # not "which system has the fault code with the most reports": that ranks rows (the entity after "with the")
    named_group = (_which_column(q, t, exclude={key, target or "", *by_col})
                   if asks_entity and not _ENTITY.search(q) else None)
    if named_group and (hi or lo or topk) and target:
        # "which region has the highest average health": rank the groups of the column the question names, not
        # the rows (the row key would give one country)
        k = int(topk.group(1)) if topk and topk.group(1).isdigit() else _WORDS.get(topk.group(1), 1) if topk else 1
        order = _order(q, target, hi, lo)
        fn = f"{agg or 'sum'}({_ident(target)})"
        sql = (f"SELECT {_ident(named_group)} FROM {src}{where_sql} GROUP BY {_ident(named_group)} "
               f"ORDER BY {fn} {order} LIMIT {k}")
        return SqlPlan(sql, "template", f"top {k} {named_group} by {fn}", t.name)
    if asks_entity and (hi or lo or topk) and target:
        k = int(topk.group(1)) if topk and topk.group(1).isdigit() else _WORDS.get(topk.group(1), 1) if topk else 1
        order = _order(q, target, hi, lo)
        unique = len(set(values(t.name, key))) >= t.n_rows if cols[key] == "VARCHAR" else True
        shown = _asked_column(q, t, exclude={key, target, *by_col}) if unique and not agg else None
        if shown:  # "who operates the rig with the highest pressure": the operator column of that row
            sql = (f"SELECT {_ident(key)}, {_ident(shown)} FROM {src}{where_sql} ORDER BY {_ident(target)} {order} "
                   f"LIMIT {k}")
            return SqlPlan(sql, "template", f"top {k} {key} by {target}, with its {shown}", t.name)
        if unique and not agg:
            sql = f"SELECT {_ident(key)} FROM {src}{where_sql} ORDER BY {_ident(target)} {order} LIMIT {k}"
        else:
            sql = (f"SELECT {_ident(key)} FROM {src}{where_sql} GROUP BY {_ident(key)} ORDER BY "
                   f"{agg or 'sum'}({_ident(target)}) {order} LIMIT {k}")
        return SqlPlan(sql, "template", f"top {k} {key} by {target}", t.name)
    if _AVG.search(q) and target:
        fn = f"avg({_ident(target)})"
    elif (hi and not lo) and target and not asks_entity:
        fn = f"max({_ident(target)})"
    elif (lo and not hi) and target and not asks_entity:
        fn = f"min({_ident(target)})"
    elif _COUNT.search(q):
        fn = f"sum({_ident(target)})" if target and _counts_column(q, target) else "count(*)"
    elif _SUM.search(q) and target:
        fn = f"sum({_ident(target)})"
    elif _SUM.search(q):
        fn = "count(*)"
    elif group:  # "revenue for each quarter", "clients per health rating": a quantity is summed, rows counted
        fn = f"sum({_ident(target)})" if target else "count(*)"
    elif _LIST.search(q) and m.filters and not group:
        return SqlPlan(f"SELECT {_ident(key)} FROM {src}{where_sql}", "template",
                       f"the {key} of the rows where {' and '.join(where)}", t.name)
    else:
        return SqlPlan("", "template", "no aggregate (count, total, average, highest, lowest), ranking or filtered "
                                       "list the template translator knows; an LLM writes other queries", t.name)
    if group:
        sql = f"SELECT {_ident(group)}, {fn} FROM {src}{where_sql} GROUP BY {_ident(group)} ORDER BY {_ident(group)}"
        return SqlPlan(sql, "template", f"{fn} per {group}", t.name)
    return SqlPlan(f"SELECT {fn} FROM {src}{where_sql}", "template", fn + (f" where {' and '.join(where)}"
                                                                          if where else ""), t.name)


SQL_INSTRUCTIONS = (
    "You write one read-only DuckDB SQL query that answers the user's question from the tables below. Only SELECT "
    "(WITH ... SELECT is fine); only these tables; no table functions, no files, no settings. Use the exact column "
    "names and the exact spelling of values shown. If the tables cannot answer the question, set sql to \"\" and say "
    "why in reason.")
SQL_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["sql", "reason"],
    "properties": {"sql": {"type": "string"}, "reason": {"type": "string"}},
}


def schema_text(tables: Sequence[TableInfo], values: Values, per_column: int = 12) -> str:
    """The tables as the LLM reads them: name, typed columns, row count and a few values of each text column."""
    lines = []
    for t in tables:
        lines.append(t.schema_line())
        for c, typ in t.columns:
            if typ == "VARCHAR":
                vals = [str(v)[:40] for v in list(values(t.name, c))[:per_column]]
                lines.append(f"  {c}: e.g. {', '.join(vals)}")
    return "\n".join(lines)


def llm_sql(question: str, tables: Sequence[TableInfo], values: Values, llm: LLM, *, model: str,
            workspace: str = DEFAULT_WORKSPACE) -> SqlPlan:
    """Claude writes the query (JSON {sql, reason}); a failed call or a malformed reply says so, never raises."""
    req = LLMRequest(model, (TextBlock(SQL_INSTRUCTIONS),),
                     (TextBlock(f"Tables:\n{schema_text(tables, values)}\n\nQuestion: {question}"),),
                     max_tokens=600, json_schema=SQL_SCHEMA, purpose="sql", ref_id=question[:80])
    start = time.perf_counter()
    try:
        resp = llm.complete(req, workspace=workspace)
    except LLMError as exc:
        return SqlPlan("", "llm", f"the LLM call failed: {str(exc)[:200]}")
    data = resp.data
    ms = (time.perf_counter() - start) * 1000
    if not isinstance(data, Mapping) or not isinstance(data.get("sql"), str):
        return SqlPlan("", "llm", "the LLM's reply was not the JSON asked for ({sql, reason})", usage=resp.usage)
    sql = data["sql"].strip()
    reason = str(data.get("reason", ""))[:300]
    if not sql:
        return SqlPlan("", "llm", f"the LLM wrote no query: {reason or 'no reason given'}", usage=resp.usage)
    return SqlPlan(sql, "llm", reason or "written by the LLM", usage=resp.usage, notes=(f"{ms:.0f} ms",))


def format_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = 20) -> str:
    """A result as a short answer: one value, a list of values, or 'key: value' pairs."""
    def show(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.2f}".rstrip("0").rstrip(".") if not v.is_integer() else f"{int(v):,}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return "NULL" if v is None else str(v)
    if not rows:
        return "no rows"
    if len(rows) == 1 and len(rows[0]) == 1:
        return show(rows[0][0])
    head = rows[:limit]
    more = f" … ({len(rows) - limit} more)" if len(rows) > limit else ""
    if all(len(r) == 1 for r in head):
        return ", ".join(show(r[0]) for r in head) + more
    if all(len(r) == 2 for r in head):
        return "; ".join(f"{show(r[0])}: {show(r[1])}" for r in head) + more
    return "; ".join(", ".join(f"{c} {show(v)}" for c, v in zip(columns, r)) for r in head) + more


class RunsSql(Protocol):
    """What runs a checked query (core/store/sql.py's SqlSandbox); it raises ValueError (SqlRefused) with the reason."""

    def run(self, sql: str, *, max_rows: int = ..., timeout_s: float = ...) -> SqlResult: ...


@dataclass(frozen=True)
class SqlOutcome:
    """The sql stage for one question: its route, the plan (who wrote the query, or why none), and the result or
    the sandbox's refusal."""

    route: TableRoute
    plan: SqlPlan
    result: SqlResult | None = None
    error: str = ""
    notes: tuple[str, ...] = ()
    table: str = ""  # a question no query was written for: the table it is about, and that table's columns
    columns: tuple[str, ...] = ()

    def untranslated(self) -> str:
        """What to tell a person whose table question got no query: that the SQL stage recognised it, why no query,
        and the columns to ask by ("" when a query ran, or the question was not a table question)."""
        if self.route.kind != "table" or self.result is not None or not self.table:
            return ""
        return (f"This looks like a question about table {self.table}, but no SQL query for it could be written "
                f"({self.plan.reason}). Its columns: {', '.join(self.columns)}. Ask with a column's name, or type a "
                "query in the SQL box.")

    @property
    def answered(self) -> bool:
        return self.result is not None and bool(self.result.rows)

    def answer_text(self) -> str:
        assert self.result is not None
        return format_rows(self.result.columns, self.result.rows)

    def info(self) -> "SqlInfo":
        r = self.result
        return SqlInfo(self.route.kind, self.route.reason, self.plan.translator,
                       r.sql if r is not None else self.plan.sql, self.plan.reason,
                       tuple(r.columns) if r is not None else (),
                       tuple(tuple(json_safe(v) for v in row) for row in r.rows[:ROWS_IN_TRACE]) if r is not None
                       else (), len(r.rows) if r is not None else 0, bool(r and r.truncated), self.error)


@dataclass(frozen=True, eq=False)
class SqlInfo(StageInfo):
    """The sql stage's record: the question's route and why, who wrote the query and why, the query, the rows (the
    first ROWS_IN_TRACE) and their count, and the sandbox's error when it refused."""

    route: str
    reason: str
    translator: str
    sql: str | None
    plan: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    row_count: int
    truncated: bool
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"route": self.route, "reason": self.reason, "translator": self.translator, "sql": self.sql,
                "plan": self.plan, "columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "row_count": self.row_count, "truncated": self.truncated,
                **({"error": self.error} if self.error else {})}


ROWS_IN_TRACE = 50


def json_safe(v: Any) -> Any:
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def sql_route(question: str, tables: Sequence[TableInfo], values: Values, sandbox: RunsSql, *, llm: LLM | None,
              model: str, route: TableRoute | None = None, workspace: str = DEFAULT_WORKSPACE,
              max_rows: int = 200, timeout_s: float = 5.0) -> SqlOutcome:
    """The sql stage: Claude writes the query when `llm` is given and available (the template translator when its
    call fails or its query is refused), else the template translator; the sandbox runs it."""
    route = route or classify(question, tables, values)
    notes: list[str] = []
    plans: list[SqlPlan] = []
    if llm is not None and llm.available:
        plans.append(llm_sql(question, tables, values, llm, model=model, workspace=workspace))
    plans.append(template_sql(question, tables, values))
    last = plans[-1]
    for plan in plans:
        if not plan.sql:
            notes.append(f"{plan.translator}: {plan.reason}")
            continue
        try:
            result = sandbox.run(plan.sql, max_rows=max_rows, timeout_s=timeout_s)
        except ValueError as exc:
            notes.append(f"{plan.translator} query refused by the sandbox: {exc}")
            last = plan
            continue
        usage = sum((p.usage for p in plans if p.translator == "llm"), Usage())
        return SqlOutcome(route, SqlPlan(plan.sql, plan.translator, plan.reason, plan.table, usage, plan.notes),
                          result, notes=(*notes, *result.notes))
    usage = sum((p.usage for p in plans if p.translator == "llm"), Usage())
    err = notes[-1] if notes else "no query"
    name = last.table or (route.tables[0] if route.tables else "")
    table = next((t for t in tables if t.name == name), None)
    columns = tuple(f"{c} ({typ.lower()})" for c, typ in table.columns) if table is not None else ()
    return SqlOutcome(route, SqlPlan("", last.translator, last.reason, last.table, usage), None, err,
                      (*notes, *([f"table {name}'s columns: {', '.join(columns)}"] if columns else []),
                       "type your own query in the SQL box (Search Lab) or `python -m core sql`"), name, columns)


_NOUN_WORD = r"(?!(?:of|the|for|in|to|a|an|and|with)\b)[a-z0-9-]+"
# "the <noun, 1-3 words> with the most <measure, up to 3 words>", ending before punctuation, "and" or a common verb.
_SUPERLATIVE_PHRASE = re.compile(
    rf"\bthe ((?:{_NOUN_WORD} ){{0,2}}{_NOUN_WORD}) (?:with|that had|that has|having|which had|which has|that "
    r"shipped|that received) the (?:most|highest|lowest|largest|smallest|fewest|least|biggest|greatest)"
    r"(?: [a-z0-9-]+){0,3}?(?=,| and\b| (?:use|uses|used|cover|covers|mean|means|have|has|had|is|are|was|were|do|"
    r"does|get|gets|got)\b|\?|\.|;|$)", re.IGNORECASE)


def with_values(question: str, found: Sequence[str]) -> str:
    """A mixed question with what SQL found put in place of the phrase that asked for it ("the first action for the
    error code with the most tickets" -> "... for error code E-1"), else appended, so retrieval and the answer look
    for the thing itself."""
    if not found:
        return question
    value = " and ".join(found[:5])
    out, n = _SUPERLATIVE_PHRASE.subn(lambda m: f"{m.group(1)} {value}", question, count=1)
    return out if n else f"{question} {' '.join(found[:5])}"
