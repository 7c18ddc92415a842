"""Golden sets: JSONL loading with per-line problems, the sample set, and the anthropic_codebase / beir_scifact loaders.

A golden set is a list of questions, each with gold items (document + span, exact passage, or document id with a
grade) and, for the public sets, the corpus that goes with it. Every problem in the file is reported with its line
number, and the rest of the set still loads. Public corpora are written to the store *as given* (no re-chunking) in
their own workspace, so their numbers compare with the published ones; a second run finds them already stored.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

from core.config import PipelineConfig
from core.deps import datasets_root, db_path
from core.eval.golden_io import item_json, usable
from core.safeio.files import FileProblem, check_depth, read_checked
from core.eval.metrics import DEFAULT_KS, Gold, MatchMode, Unit
from core.ingest.context import build_heuristic
from core.ingest.pipeline import ingest_files, read_paths, token_sink
from core.models.embed import Embedder, embed_with_cache
from core.store import Store, StoreError
from core.text import count_tokens, detect_language
from core.types import Chunk, Document

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = ROOT / "sample_corpus"
SAMPLE_SET = SAMPLE_DIR / "eval.jsonl"
PUBLIC = ("anthropic_codebase", "beir_scifact", "twowiki_multihop")

Progress = Callable[[int, int, str], None]


class DatasetError(ValueError):
    """A golden set or corpus that cannot be used at all; the message is fit for the user."""


@dataclass(frozen=True)
class Problem:
    line: int  # 1-based line in the file; 0 when the problem is not tied to a line
    qid: str
    message: str
    severity: Literal["error", "warning"] = "error"  # error: the question is left out; warning: kept

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "set"
        return f"{where}{f' ({self.qid})' if self.qid else ''}: {self.message}"


@dataclass(frozen=True)
class GoldenQuery:
    qid: str
    query: str
    qtype: str = "factoid"
    answerable: bool = True
    gold: tuple[Gold, ...] = ()
    reference: str = ""  # the reference answer, for answer-level metrics
    line: int = 0


@dataclass(frozen=True)
class PreDoc:
    """A document whose chunks are given by the data set (written to the store without re-chunking)."""

    doc: Document
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class CorpusReport:
    documents: int
    added: int
    present: int
    embedded: int
    cache_hits: int
    errors: tuple[str, ...] = ()


@dataclass
class GoldenSet:
    name: str
    queries: list[GoldenQuery]
    problems: list[Problem] = field(default_factory=list)
    unit: Unit = "chunk"
    ks: tuple[int, ...] = DEFAULT_KS
    ndcg_ks: tuple[int, ...] = (10,)
    pass_k: bool = False  # also report the cookbook's Pass@k (0-100)
    workspace: str | None = None  # a public set's own workspace; None: evaluate the caller's workspace
    overrides: dict[str, Any] = field(default_factory=dict)  # settings the set needs (e.g. depth for recall@100)
    doc_key: Literal["name", "id", "none"] = "name"  # how gold `doc` maps to store documents
    source: str = ""
    corpus_dir: Path | None = None  # files to ingest when the workspace lacks the gold documents
    predocs: Callable[[], list[PreDoc]] | None = None  # or: documents given pre-chunked
    builds: tuple[str, ...] = ()  # builds the set's questions need beyond ingest ('multilingual': e5 vectors)
    generator: str = ""  # who wrote a stored set's items ('' hand-written): generated sets are gated (validity)
    generation: dict[str, Any] = field(default_factory=dict)  # what the generator reported (overlap, dropped)

    @property
    def scorable(self) -> list[GoldenQuery]:
        return [q for q in self.queries if q.gold]


# -- JSONL ---------------------------------------------------------------------------------------------------------
def _gold_item(raw: Any, where: str) -> Gold:
    if isinstance(raw, str):
        return Gold(text=raw)
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object like {{\"doc\": ..., \"span\": ...}}")
    doc = raw.get("doc", raw.get("document", ""))
    span = raw.get("span", raw.get("text", ""))
    grade = raw.get("grade", 1)
    chunk = raw.get("chunk_id", "")
    if not isinstance(grade, int) or isinstance(grade, bool) or grade < 0:
        raise ValueError(f"{where}: grade must be a non-negative integer")
    if chunk:
        if not isinstance(chunk, str):
            raise ValueError(f"{where}: chunk_id must be a string")
        return Gold(text=chunk.strip(), grade=grade, match="chunk")
    if not isinstance(doc, str) or not isinstance(span, str):
        raise ValueError(f"{where}: doc and span must be strings")
    if not doc.strip() and not span.strip():
        raise ValueError(f"{where} names neither a document nor a span")
    match: MatchMode = "span" if span.strip() else "doc"
    return Gold(doc=doc.strip(), text=span, grade=grade, match=match)


def parse_line(obj: Any, line: int) -> GoldenQuery:
    """One JSON object -> GoldenQuery; raises ValueError with a message naming the field."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    query = obj.get("query", obj.get("question"))
    if not isinstance(query, str) or not query.strip():
        raise ValueError("empty query")
    qid = obj.get("id", f"line{line}")
    qtype = obj.get("type", "factoid")
    answerable = obj.get("answerable", True)
    gold_raw = obj.get("gold", [])
    if not isinstance(qtype, str) or not qtype:
        raise ValueError("type must be a non-empty string")
    if not isinstance(answerable, bool):
        raise ValueError("answerable must be true or false")
    if not isinstance(gold_raw, list):
        raise ValueError("gold must be a list")
    gold = tuple(_gold_item(g, f"gold[{i}]") for i, g in enumerate(gold_raw))
    # Shorthands: "gold_docs": [document names], "gold_ids": [chunk ids].
    for key, make in (("gold_docs", lambda v: {"doc": v}), ("gold_ids", lambda v: {"chunk_id": v})):
        extra = obj.get(key, [])
        if not isinstance(extra, list) or not all(isinstance(v, str) and v.strip() for v in extra):
            raise ValueError(f"{key} must be a list of non-empty strings")
        gold += tuple(_gold_item(make(v), f"{key}[{i}]") for i, v in enumerate(extra))
    reference = obj.get("answer", "")
    return GoldenQuery(str(qid), " ".join(query.split()), qtype, answerable, gold,
                       reference if isinstance(reference, str) else json.dumps(reference), line)


def parse_jsonl(data: str | bytes, name: str = "upload") -> GoldenSet:
    """Read a golden set; every bad line becomes a Problem and the other lines still load."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    queries: list[GoldenQuery] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for n, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            check_depth(raw, name=f"line {n}")
            obj = json.loads(raw)
        except FileProblem as exc:
            problems.append(Problem(n, "", str(exc)))
            continue
        except json.JSONDecodeError as exc:
            problems.append(Problem(n, "", f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        qid = str(obj.get("id", "")) if isinstance(obj, dict) else ""
        try:
            q = parse_line(obj, n)
        except ValueError as exc:
            problems.append(Problem(n, qid, str(exc)))
            continue
        if q.qid in seen:
            problems.append(Problem(n, q.qid, "duplicate id; this line is left out"))
            continue
        seen.add(q.qid)
        if q.answerable and not q.gold:
            problems.append(Problem(n, q.qid, "answerable but has no gold; retrieval metrics skip it", "warning"))
        queries.append(q)
    if not queries and not problems:
        raise DatasetError(f"{name}: no questions in the file")
    return GoldenSet(name=name, queries=queries, problems=problems, source=name)


MAX_GOLDEN_BYTES = 64 << 20  # a golden set larger than this is refused before it is read


def load_jsonl_file(path: str | Path) -> GoldenSet:
    """A .jsonl golden set, or a .csv one (parse_csv)."""
    p = Path(path)
    try:
        data = read_checked(p, max_bytes=MAX_GOLDEN_BYTES, what="golden set")
    except FileProblem as exc:
        raise DatasetError(str(exc)) from None
    gs = parse_csv(data, p.name) if p.suffix.lower() == ".csv" else parse_jsonl(data, p.name)
    gs.source = str(p)
    return gs


# CSV columns (case-insensitive): question (or query), optional id, type, answerable; gold as document names
# (gold_docs / gold_doc / gold / doc), chunk text spans (gold_spans / gold_span / span) and chunk ids (gold_ids /
# gold_id / chunk_id). Several values in one cell are separated by '|'. Spans pair with documents when the counts
# match (the span is looked for in that document); otherwise each is a gold item of its own.
_CSV_COLUMNS = {"docs": ("gold_docs", "gold_doc", "gold", "doc", "docs", "document"),
                "spans": ("gold_spans", "gold_span", "span", "spans", "gold_text"),
                "ids": ("gold_ids", "gold_id", "chunk_id", "chunk_ids")}


def _cells(row: Mapping[str, str], names: Sequence[str]) -> list[str]:
    raw = next((row[n] for n in names if row.get(n)), "")
    return [v.strip() for v in raw.split("|") if v.strip()]


def parse_csv(data: str | bytes, name: str = "upload.csv") -> GoldenSet:
    """A golden set from CSV (see _CSV_COLUMNS); every row becomes the JSON object parse_line reads, so problems
    are reported per line the same way (line 1 is the header)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    reader = csv.DictReader(io.StringIO(data))
    if not reader.fieldnames or not {"question", "query"} & {f.strip().lower() for f in reader.fieldnames}:
        raise DatasetError(f"{name}: the header needs a 'question' (or 'query') column; found "
                           f"{', '.join(reader.fieldnames or []) or 'nothing'}")
    lines = []
    for row in reader:
        r = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items() if isinstance(v, str)}
        docs, spans, ids = (_cells(r, _CSV_COLUMNS[k]) for k in ("docs", "spans", "ids"))
        if spans and len(spans) == len(docs):
            gold: list[dict[str, str]] = [{"doc": d, "span": sp} for d, sp in zip(docs, spans)]
        else:
            gold = [{"doc": d} for d in docs] + [{"span": sp} for sp in spans]
        gold += [{"chunk_id": i} for i in ids]
        obj: dict[str, Any] = {"query": r.get("question") or r.get("query", ""), "gold": gold}
        if r.get("id"):
            obj["id"] = r["id"]
        if r.get("type"):
            obj["type"] = r["type"]
        if r.get("answerable"):
            obj["answerable"] = r["answerable"].lower() not in ("false", "no", "0")
        lines.append(json.dumps(obj, ensure_ascii=False))
    # Line n of the CSV is line n-1 of this JSONL: a blank first line keeps the numbers equal.
    gs = parse_jsonl("\n" + "\n".join(lines) if lines else "", name)
    return gs


def sample_set(path: Path = SAMPLE_SET) -> GoldenSet:
    """The shipped questions; their documents sit in sample_corpus/docs (what `make run` ingests)."""
    gs = load_jsonl_file(path)
    docs = path.parent / "docs"
    gs.name, gs.corpus_dir = "sample", docs if docs.is_dir() else path.parent
    return gs


# -- anthropic_codebase --------------------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Code has no headings, but its definitions play their part: a file's types are its "title" and the definitions
# enclosing a chunk are its "heading path". Language-agnostic on purpose (Rust, C++, Java, Python, Go, ...):
# optional modifiers, then a definition keyword, then the rest of the line up to a body or signature opener.
_MODIFIERS = r"(?:(?:pub(?:\([\w:]+\))?|public|private|protected|internal|static|final|abstract|sealed|export|" \
             r"default|async|unsafe|inline|virtual|template\s*<[^>\n]*>)\s+)*"
_TYPE_DEF = re.compile(r"^[ \t]*" + _MODIFIERS + r"(class|struct|enum|trait|interface|impl|namespace|object|union)"
                       r"\b[ \t]*([^\n{;(]*)", re.M)
_FUNC_DEF = re.compile(r"^[ \t]*" + _MODIFIERS + r"(fn|def|func|function)\b[ \t]+([A-Za-z_]\w*)", re.M)
OUTLINE_VERSION = "as-given+outline1"  # the chunker label: a change to the outline rules re-writes stored docs


def _clean_def(kind: str, rest: str) -> str:
    sep = "" if rest.startswith("<") else " "  # impl<T> Foo stays as written
    return " ".join(f"{kind}{sep}{rest}".split())[:100].rstrip(" :<")


def code_outline(text: str, limit: int = 6) -> list[str]:
    """The type-level definitions of a source file, in order, without repeats (at most `limit`)."""
    out: list[str] = []
    for m in _TYPE_DEF.finditer(text):
        d = _clean_def(m.group(1), m.group(2))
        if d not in out and len(d) > len(m.group(1)):
            out.append(d)
        if len(out) >= limit:
            break
    return out


def enclosing_definitions(text: str, pos: int) -> tuple[str, ...]:
    """The last type definition and the last function definition that start before `pos` (the chunk's scope as
    far as a regex can tell), outermost first."""
    last_type = next(reversed([m for m in _TYPE_DEF.finditer(text, 0, pos)]), None)
    last_fn = next(reversed([m for m in _FUNC_DEF.finditer(text, 0, pos)]), None)
    path = []
    if last_type is not None:
        path.append(_clean_def(last_type.group(1), last_type.group(2)))
    if last_fn is not None and (last_type is None or last_fn.start() > last_type.start()):
        path.append(f"{last_fn.group(1)} {last_fn.group(2)}")
    return tuple(path)


def anthropic_predocs(path: Path, workspace: str) -> list[PreDoc]:
    """The cookbook's 90 documents with their 737 chunks exactly as given; ids stay the cookbook's
    (doc_id 'doc_N', chunk_id 'doc_N_chunk_M', ordinal = original_index)."""
    raw = json.loads((path / "codebase_chunks.json").read_text(encoding="utf-8"))
    out = []
    for d in raw:
        content = d["content"]
        chunks = []
        for c in d["chunks"]:
            text = c["content"]
            start = content.find(text)
            s0 = max(start, 0)
            chunks.append(Chunk(c["chunk_id"], d["doc_id"], int(c["original_index"]), text, s0,
                                s0 + len(text) if start >= 0 else 0, enclosing_definitions(content, s0),
                                count_tokens(text), "en"))
        # The corpus side has no file path, so the title is what the file defines (what a reader would call it).
        doc = Document(d["doc_id"], d["doc_id"], "txt", len(content.encode()), _sha(content),
                       detect_language(content), content, OUTLINE_VERSION, workspace,
                       ", ".join(code_outline(content)), len(chunks))
        out.append(PreDoc(doc, tuple(sorted(chunks, key=lambda c: c.ordinal))))
    return out


def _jsonl_questions(file: Path, make: Callable[[int, dict[str, Any]], GoldenQuery]
                     ) -> tuple[list[GoldenQuery], list[Problem]]:
    """One question per JSON line (numbered from 1, blank lines skipped): a line that does not parse, lacks a field
    or that `make` rejects becomes a Problem with its line number, never an exception, so one bad line loses nothing
    else."""
    queries: list[GoldenQuery] = []
    problems: list[Problem] = []
    for n, raw in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            queries.append(make(n, json.loads(raw)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(Problem(n, "", f"unreadable line ({type(exc).__name__}: {exc})"))
    return queries, problems


def anthropic_set(root: Path) -> GoldenSet:
    """248 questions; gold = the golden chunks' text, matched by stripped equality as the cookbook does.
    The set has no question types, so the type is the source repository (per-repo breakdown)."""
    path = root / "anthropic_codebase"
    if not (path / "evaluation_set.jsonl").is_file() or not (path / "codebase_chunks.json").is_file():
        raise DatasetError(f"anthropic_codebase not found under {root} (set RAG_DATASETS to its parent folder)")
    def question(n: int, obj: dict[str, Any]) -> GoldenQuery:
        gold = tuple(Gold(doc=obj["meta"].get("relative_path", g["doc_uuid"]), text=g["content"], match="exact")
                     for g in obj["golden_chunks"])
        if not obj["query"].strip() or not gold:
            raise ValueError("empty query or no golden chunks")
        return GoldenQuery(f"ac{n:03d}", obj["query"], obj["meta"].get("repo_name", "codebase"), True, gold,
                           obj.get("answer", ""), n)

    queries, problems = _jsonl_questions(path / "evaluation_set.jsonl", question)
    ws = "anthropic_codebase"
    # Pass@20 needs 20 whole chunks at the end: later stages hand on 20, and sentence pruning stays off.
    needs = {"rerank.k": 20, "mmr.k": 20, "prune.enabled": False}
    return GoldenSet("anthropic_codebase", queries, problems, unit="chunk", ks=(5, 10, 20), pass_k=True,
                     workspace=ws, overrides=needs, doc_key="none", source=str(path),
                     predocs=lambda: anthropic_predocs(path, ws))


# -- BEIR folders (beir_scifact, or any corpus.jsonl + queries.jsonl + qrels/<split>.tsv) -------------------------
def _jsonl_objects(file: Path) -> Iterator[dict[str, Any]]:
    """The non-blank lines of a JSON-lines file, parsed, in file order."""
    with file.open(encoding="utf-8") as fh:
        for raw in fh:
            if raw.strip():
                yield json.loads(raw)


def passage_predoc(did: str, name: str, title: str, text: str, lang: str, workspace: str) -> PreDoc:
    """A passage that is its own document and its own single chunk (BEIR abstracts, twowiki paragraphs)."""
    chunk = Chunk(f"{did}#0", did, 0, text, 0, len(text), (), count_tokens(text), lang)
    return PreDoc(Document(did, name, "txt", len(text.encode()), _sha(text), lang, text, "as-given", workspace,
                           title[:200], 1), (chunk,))


def beir_predocs(path: Path, workspace: str) -> list[PreDoc]:
    """Each corpus entry as one chunk (title + text), the standard BEIR way; doc_id is the corpus _id."""
    out = []
    for d in _jsonl_objects(path / "corpus.jsonl"):
        title, body = str(d.get("title") or "").strip(), str(d.get("text") or "").strip()
        text = f"{title}\n{body}" if title else body
        did = str(d["_id"])
        out.append(passage_predoc(did, did, title, text, detect_language(text), workspace))
    return out


def scifact_predocs(path: Path, workspace: str) -> list[PreDoc]:
    return beir_predocs(path, workspace)


def _workspace_name(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")[:60] or "beir"


def beir_set(path: Path, name: str | None = None, *, split: str | None = None) -> GoldenSet:
    """A BEIR folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv (split: test, else dev, else the only one).
    Document-level, graded; questions with no relevant document are reported and left out."""
    name = name or f"beir:{path.name}"
    qdir = path / "qrels"
    splits = sorted(p.stem for p in qdir.glob("*.tsv")) if qdir.is_dir() else []
    if not (path / "corpus.jsonl").is_file() or not (path / "queries.jsonl").is_file() or not splits:
        raise DatasetError(f"{path} is not a BEIR folder: it needs corpus.jsonl, queries.jsonl and qrels/*.tsv")
    split = split or next((s for s in ("test", "dev") if s in splits), splits[0])
    if split not in splits:
        raise DatasetError(f"{path}: no qrels/{split}.tsv (have {', '.join(splits)})")
    qrels: dict[str, list[tuple[str, int]]] = {}
    problems: list[Problem] = []
    for n, raw in enumerate((qdir / f"{split}.tsv").read_text(encoding="utf-8").splitlines(), start=1):
        parts = raw.split("\t")
        if n == 1 and parts[0] == "query-id":
            continue
        try:
            qrels.setdefault(parts[0], []).append((parts[1], int(parts[2])))
        except (IndexError, ValueError):
            problems.append(Problem(n, "", f"qrels/{split}.tsv: unreadable row {raw!r}"))
    queries = []
    for n, raw in enumerate((path / "queries.jsonl").read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
            qid, text = str(d["_id"]), str(d["text"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            problems.append(Problem(n, "", f"queries.jsonl: unreadable line ({type(exc).__name__})"))
            continue
        if qid not in qrels:
            continue  # a query of another split
        gold = tuple(Gold(doc=doc, grade=g, match="doc") for doc, g in qrels[qid] if g > 0)
        if not gold:
            problems.append(Problem(n, qid, "no relevant documents in the qrels; left out"))
            continue
        queries.append(GoldenQuery(qid, text, "claim" if path.name.endswith("scifact") else "query", True, gold, "", n))
    ws = "beir_scifact" if name == "beir_scifact" else _workspace_name(f"beir_{path.name}")
    # recall@100 needs 100 documents at the end: every stage hands on 100, pruning stays off.
    needs = {"bm25.k": 100, "dense.k": 100, "fusion.k": 100, "rerank.top_n": 100, "rerank.k": 100, "mmr.k": 100,
             "prune.enabled": False}
    return GoldenSet(name, queries, problems, unit="doc", ks=(5, 10, 20, 100), ndcg_ks=(10,),
                     workspace=ws, overrides=needs, doc_key="id",
                     source=str(path), predocs=lambda: beir_predocs(path, ws))


def scifact_set(root: Path) -> GoldenSet:
    """300 test claims with BEIR qrels (doc-level, graded); nDCG@10 and recall@100 as BEIR reports them."""
    path = root / "beir_scifact"
    if not (path / "queries.jsonl").is_file() or not (path / "qrels" / "test.tsv").is_file():
        raise DatasetError(f"beir_scifact not found under {root} (set RAG_DATASETS to its parent folder)")
    return beir_set(path, "beir_scifact", split="test")


# -- twowiki_multihop ------------------------------------------------------------------------------------------------
def twowiki_predocs(path: Path, workspace: str) -> list[PreDoc]:
    """Each passage as one document and one chunk ('title\ntext'); the document name is the Wikipedia title."""
    out = []
    for d in _jsonl_objects(path / "corpus.jsonl"):
        title, body, did = d["title"].strip(), d["text"].strip(), str(d["id"])
        out.append(passage_predoc(did, title, title, f"{title}\n{body}", "en", workspace))
    return out


def twowiki_set(root: Path) -> GoldenSet:
    """2WikiMultihopQA dev sample: 300 multi-hop questions over 2,086 passages; gold = the supporting passages'
    titles (2 or 4 per question), scored at document (passage) level like HippoRAG's passage recall@k."""
    path = root / "twowiki_multihop"
    if not (path / "questions.jsonl").is_file() or not (path / "corpus.jsonl").is_file():
        raise DatasetError(f"twowiki_multihop not found under {root} (set RAG_DATASETS to its parent folder)")
    queries, problems = _jsonl_questions(path / "questions.jsonl", lambda n, d: GoldenQuery(
        str(d["id"]), d["question"], d.get("type", "multi-hop"), True, tuple(Gold(doc=t, match="doc")
                                                                              for t in d["gold_titles"]),
        str(d.get("answer", "")), n))
    ws = "twowiki_multihop"
    return GoldenSet("twowiki_multihop", queries, problems, unit="doc", ks=(1, 2, 5, 10), workspace=ws,
                     doc_key="name", source=str(path), predocs=lambda: twowiki_predocs(path, ws))


# -- xquad_crosslingual --------------------------------------------------------------------------------------------
XQUAD = "xquad_crosslingual"
XQUAD_LANGS = ("en", "ru", "de")


def xquad_predocs(path: Path, corpus_lang: str, workspace: str) -> list[PreDoc]:
    """One paragraph per document and chunk. The English titles head the English paragraphs only: in the Russian or
    German corpus they would be text in another language than the paragraph (they stay the document's title)."""
    out = []
    for d in _jsonl_objects(path / f"corpus_{corpus_lang}.jsonl"):
        title, body, did = str(d["title"]).replace("_", " ").strip(), str(d["text"]).strip(), str(d["id"])
        text = f"{title}\n{body}" if corpus_lang == "en" else body
        out.append(passage_predoc(did, did, title, text, detect_language(text), workspace))
    return out


def xquad_set(root: Path, spec: str) -> GoldenSet:
    """'xquad:Q-C' (questions in Q over the paragraphs in C, e.g. ru-en) or 'xquad:L' (L over L): XQuAD articles
    40-47, 177 questions per language, document-level gold. The reference answer is the one in the corpus's
    language (a cross-lingual answer quotes the corpus's paragraph; the set's README)."""
    q_lang, _, c_lang = spec.partition("-")
    c_lang = c_lang or q_lang
    if q_lang not in XQUAD_LANGS or c_lang not in XQUAD_LANGS:
        raise DatasetError(f"xquad:{spec}: use xquad:Q-C or xquad:L with languages {', '.join(XQUAD_LANGS)} "
                           "(e.g. xquad:ru-en, xquad:en)")
    path = root / XQUAD
    if not (path / "questions.jsonl").is_file() or not (path / f"corpus_{c_lang}.jsonl").is_file():
        raise DatasetError(f"{XQUAD} not found under {root} (set RAG_DATASETS to its parent folder)")
    rows = list(_jsonl_objects(path / "questions.jsonl"))
    answers = {str(d["id"]): str(d.get("answer", "")) for d in rows}
    queries = []
    for n, d in enumerate(rows, start=1):
        if d.get("lang") != q_lang:
            continue
        qid = str(d["id"])
        ref = answers.get(qid.rsplit("-", 1)[0] + f"-{c_lang}", str(d.get("answer", "")))
        queries.append(GoldenQuery(qid, str(d["question"]), "factoid", True,
                                   tuple(Gold(doc=g, match="doc") for g in d["gold"]), ref, n))
    ws = f"xquad_{c_lang}"
    return GoldenSet(f"xquad:{q_lang}-{c_lang}", queries, [], unit="doc", ks=(1, 5, 10), workspace=ws, doc_key="id",
                     source=str(path), predocs=lambda: xquad_predocs(path, c_lang, ws), builds=("multilingual",))


# -- shaping a set: subsample, level, k ------------------------------------------------------------------------------
def subsample(gs: GoldenSet, *, max_docs: int | None = None, max_questions: int | None = None,
              seed: int = 0) -> GoldenSet:
    """A smaller copy of a set with a pre-chunked corpus: `max_questions` questions drawn with `seed`, and a corpus
    of the documents their gold names plus random distractors up to `max_docs` (fixed seed). It gets a workspace
    of its own, named after the cut, so it never mixes with the full corpus."""
    rng = random.Random(seed)
    queries = list(gs.queries)
    if max_questions is not None and max_questions < len(queries):
        queries = sorted(rng.sample(queries, max_questions), key=lambda q: q.line)
    tag = f"q{max_questions or 'all'}_d{max_docs or 'all'}_s{seed}"
    cut_corpus = max_docs is not None and gs.predocs is not None
    # Fewer questions over the whole corpus share the set's workspace (its vectors are reused); a cut corpus is
    # a different corpus and gets a workspace of its own.
    out = replace(gs, name=f"{gs.name}[{tag}]", queries=queries,
                  workspace=f"{gs.workspace}__{tag}" if gs.workspace and cut_corpus else gs.workspace)
    if not cut_corpus:
        return out
    full, ws = gs.predocs, out.workspace
    key = (lambda p: p.doc.doc_id) if gs.doc_key == "id" else (lambda p: p.doc.name)
    wanted = {g.doc for q in queries for g in q.gold if g.doc}

    def cut() -> list[PreDoc]:
        docs = full()
        gold = [p for p in docs if key(p) in wanted]
        others = [p for p in docs if key(p) not in wanted]
        extra = random.Random(seed).sample(others, max(0, min(len(others), max_docs - len(gold))))
        keep = {id(p) for p in gold + extra}
        return [replace(p, doc=replace(p.doc, workspace=ws or p.doc.workspace)) for p in docs if id(p) in keep]

    out.predocs = cut
    return out


def at_level(gs: GoldenSet, level: str | None = None, ks: Sequence[int] | None = None) -> GoldenSet:
    """The set scored at `level` ('document' or 'chunk') and/or at cutoffs `ks`. At document level a gold item that
    names a document counts any chunk of it (its span is not asked for), so a set written as spans scores documents."""
    out = gs
    if ks:
        if any(k < 1 for k in ks):
            raise DatasetError("every k must be 1 or more")
        out = replace(out, ks=tuple(sorted(set(int(k) for k in ks))))
    if level is None:
        return out
    unit = {"document": "doc", "doc": "doc", "chunk": "chunk"}.get(level)
    if unit is None:
        raise DatasetError(f"unknown level {level!r}: use document or chunk")
    return replace(out, unit=unit)  # type: ignore[arg-type]


# -- a golden set stored in a workspace (core/store/golden.py) ------------------------------------------------------
def golden_set(name: str, store: Any = None, workspace: str | None = None) -> GoldenSet:
    """The stored set `name` ('WORKSPACE/NAME' names the workspace) as a GoldenSet over its own workspace; rejected
    items are left out. Each item goes through the JSONL reader (parse_line), so a stored set and its export read
    back alike. Without `store` the database at RAG_DB (core.deps) is opened read-only for the read and closed."""
    if "/" in name and workspace is None:
        workspace, name = name.split("/", 1)
    if store is None:
        path = db_path()
        if not Path(path).is_file():
            raise DatasetError(f"golden:{name}: no database at {path} (set RAG_DB or pass --db)")
        try:
            own = Store(path, read_only=True)
        except StoreError as exc:
            raise DatasetError(f"golden:{name}: {exc}") from exc
        try:
            return golden_set(name, own, workspace)
        finally:
            own.close()
    if workspace is None:
        where = store.golden.find_set(name)
        if not where:
            raise DatasetError(f"no golden set named {name!r} in any workspace (python -m core golden generate)")
        if len(where) > 1:
            raise DatasetError(f"golden set {name!r} exists in workspaces {', '.join(where)}: name one as "
                               f"golden:WORKSPACE/{name}")
        workspace = where[0]
    items = store.golden.items(workspace, name)
    if not items and name not in {s.name for s in store.golden.sets(workspace)}:
        raise DatasetError(f"no golden set named {name!r} in workspace {workspace!r}")
    queries: list[GoldenQuery] = []
    problems: list[Problem] = []
    for n, it in enumerate(usable(items), start=1):
        try:
            queries.append(parse_line(item_json(it), n))
        except ValueError as exc:
            problems.append(Problem(n, it.item_id, str(exc)))
    row = next((s for s in store.golden.sets(workspace) if s.name == name), None)
    kept = usable(items)
    writers = Counter(it.generator for it in kept if it.generator and it.status != "edited")
    generation = _generation_notes(row.notes if row is not None else "")
    overlaps = [float(it.meta["overlap"]) for it in kept if it.answerable and "overlap" in (it.meta or {})]
    if overlaps:
        generation["mean_overlap"] = sum(overlaps) / len(overlaps)
    return GoldenSet(name, queries, problems, workspace=workspace, source=f"golden:{workspace}/{name}",
                     generator=writers.most_common(1)[0][0] if writers else "", generation=generation)


def _generation_notes(notes: str) -> dict[str, Any]:
    """A generated set's notes hold the generator's report as JSON (dropped items by reason, ...); else free text."""
    try:
        got = json.loads(notes) if notes.strip().startswith("{") else {}
    except ValueError:
        return {}
    return dict(got) if isinstance(got, dict) else {}


# -- resolving a name or path -------------------------------------------------------------------------------------
def load_dataset(name_or_path: str, root: Path | None = None, *, store: Any = None) -> GoldenSet:
    """'sample', 'anthropic_codebase', 'beir_scifact', 'twowiki_multihop' (under root), 'beir:PATH' (a BEIR folder),
    'golden:NAME' or 'golden:WORKSPACE/NAME' (a set stored in the database: `store`, else RAG_DB read-only),
    or a path to a .jsonl / .csv golden set (or to a BEIR folder)."""
    if name_or_path.startswith("golden:"):
        return golden_set(name_or_path[7:], store)
    root = datasets_root() if root is None else root
    if name_or_path == "sample":
        return sample_set()
    if name_or_path == "anthropic_codebase":
        return anthropic_set(root)
    if name_or_path == "beir_scifact":
        return scifact_set(root)
    if name_or_path == "twowiki_multihop":
        return twowiki_set(root)
    if name_or_path.startswith("xquad:"):
        return xquad_set(root, name_or_path[6:])
    if name_or_path.startswith("beir:"):
        p = Path(name_or_path[5:]).expanduser()
        if not p.is_dir():
            raise DatasetError(f"{name_or_path}: no such folder")
        return beir_set(p)
    p = Path(name_or_path)
    if p.is_file():
        return load_jsonl_file(p)
    if p.is_dir() and (p / "corpus.jsonl").is_file():
        return beir_set(p)
    raise DatasetError(f"unknown dataset {name_or_path!r}: use sample, anthropic_codebase, beir_scifact, "
                       "twowiki_multihop, xquad:ru-en (Q-C or L), beir:FOLDER or a path to a .jsonl or .csv golden set")


def default_root() -> Path:
    """Where the public sets live (RAG_DATASETS or ../shared/datasets), as core.deps decides."""
    return datasets_root()


def available_datasets(root: Path) -> list[str]:
    names = ["sample"] if SAMPLE_SET.is_file() else []
    names += [n for n in PUBLIC if (root / n).is_dir()]
    return names


# -- corpus and gold resolution against a store -------------------------------------------------------------------
def _batches(items: Sequence[PreDoc], max_chunks: int) -> Iterator[list[PreDoc]]:
    batch: list[PreDoc] = []
    n = 0
    for p in items:
        batch.append(p)
        n += len(p.chunks)
        if n >= max_chunks:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def ingest_predocs(
    predocs: Sequence[PreDoc], *, store: Any, embedder: Embedder, workspace: str, progress: Progress | None = None,
    batch_chunks: int = 256, tokens: Any = None,
) -> CorpusReport:
    """Write pre-chunked documents with their raw vectors; documents already stored with the same content hash
    are left alone, so a second run costs nothing. Texts are embedded in batches across documents (cache first)
    and each document is still written in its own transaction. `tokens`: as core.ingest.pipeline.token_sink."""
    store.ensure_workspace(workspace)
    existing = {d.doc_id: (d.content_hash, d.chunker) for d in store.corpus.documents(workspace)}
    todo = [p for p in predocs if existing.get(p.doc.doc_id) != (p.doc.content_hash, p.doc.chunker)]
    present = len(predocs) - len(todo)
    embedded = hits = done = 0
    errors: list[str] = []
    stored: list[str] = []
    for batch in _batches(todo, batch_chunks):
        texts = [c.text for p in batch for c in p.chunks]
        vecs, stats = embed_with_cache(texts, embedder, store.caches, workspace, tokens=tokens)
        embedded += stats.computed
        hits += stats.cache_hits
        i = 0
        for p in batch:
            n = len(p.chunks)
            try:
                store.corpus.put_document(replace(p.doc, workspace=workspace), p.chunks, vecs[i : i + n], embedder.model_id,
                                   replace_doc_id=p.doc.doc_id if p.doc.doc_id in existing else None)
                stored.append(p.doc.doc_id)
            except Exception as exc:  # one bad document is reported; the others still go in
                errors.append(f"{p.doc.name}: {type(exc).__name__}: {exc}")
            i += n
            done += 1
        if progress:
            progress(present + done, len(predocs), f"embedded {embedded}, cached {hits}")
    if embedded or hits:
        store.caches.record_cache_event("embedding", hits, embedded, "eval corpus", workspace)
    if stored:  # heuristic contexts at ingest, as core/ingest does: a heuristic-variant query then writes nothing
        build_heuristic(store, workspace=workspace, doc_ids=stored)
    return CorpusReport(len(predocs), done - len(errors), present, embedded, hits, tuple(errors))


def gold_documents_present(gs: GoldenSet, store: Any, workspace: str) -> tuple[int, int, int]:
    """(gold documents the workspace holds, gold documents the set names, documents in the workspace), matched by
    name; the first two are 0 for a set that names no document by name (pre-chunked public sets, text-matched sets)."""
    docs = store.corpus.documents(workspace)
    if gs.doc_key != "name" or gs.predocs is not None:
        return 0, 0, len(docs)
    wanted = {g.doc for q in gs.queries for g in q.gold if g.doc}
    return len(wanted & {d.name for d in docs}), len(wanted), len(docs)


def ensure_corpus(
    gs: GoldenSet, *, store: Any, embedder: Embedder, workspace: str, config: Any = None,
    progress: Progress | None = None,
) -> CorpusReport | None:
    """Make sure the set's corpus is in the workspace: pre-chunked documents as given, or the sample files that
    the gold names but the workspace lacks (ingested with the given config's chunker). None: nothing to do."""
    if gs.predocs is not None:
        return ingest_predocs(gs.predocs(), store=store, embedder=embedder, workspace=workspace, progress=progress,
                              tokens=token_sink(store, config or PipelineConfig()))
    if gs.corpus_dir is None:
        return None
    have = {d.name for d in store.corpus.documents(workspace)}
    wanted = {g.doc for q in gs.queries for g in q.gold if g.doc}
    if wanted <= have:
        return None
    available = read_paths([gs.corpus_dir])
    if have - {n for n, _ in available}:
        # The workspace holds someone's own corpus: never mix the sample files into it behind their back.
        return CorpusReport(0, 0, len(have), 0, 0, (
            f"workspace '{workspace}' holds other documents, so the {gs.name} corpus was not added; questions whose "
            "documents are missing are left out (ingest the corpus or use an empty workspace)",))
    files = [(n, b) for n, b in available if n not in have]
    report = ingest_files(files, store=store, embedder=embedder, config=config or PipelineConfig(),
                          workspace=workspace, progress=progress)
    return CorpusReport(len(files), len(report.ok), len(have), report.embedded, report.cache_hits,
                        tuple(r.message for r in report.errors))


def resolve_gold(gs: GoldenSet, store: Any, workspace: str) -> GoldenSet:
    """Map each gold item's document to store ids (a name, or the store's own document id), and each gold chunk id
    to its chunk. A question whose gold names a document or chunk the workspace does not hold is reported (with its
    line) and left out, so one stale line never spoils the rest. At document level (unit 'doc') every item that
    names a document, or a chunk, counts any chunk of that document."""
    corpus = store.corpus
    chunk_ids = sorted({g.text for q in gs.queries for g in q.gold if g.match == "chunk"})
    chunk_doc = {cid: ch.doc_id for cid, ch in corpus.chunks_by_id(chunk_ids, workspace).items()} if chunk_ids else {}
    if gs.doc_key == "none" and not chunk_ids:
        return gs
    by_key: dict[str, set[str]] = {}
    if gs.doc_key != "none":
        for d in corpus.documents(workspace):
            by_key.setdefault(d.name if gs.doc_key == "name" else d.doc_id, set()).add(d.doc_id)
        if gs.doc_key == "name":  # a user's set may name a document by its store id too
            for d in corpus.documents(workspace):
                by_key.setdefault(d.doc_id, {d.doc_id})
    kept: list[GoldenQuery] = []
    problems = list(gs.problems)
    for q in gs.queries:
        missing_docs = sorted({g.doc for g in q.gold if g.doc and gs.doc_key != "none" and g.doc not in by_key})
        missing_chunks = sorted({g.text for g in q.gold if g.match == "chunk" and g.text not in chunk_doc})
        if missing_docs or missing_chunks:
            what = "; ".join(f"unknown {kind} {', '.join(repr(m) for m in names)}"
                             for kind, names in (("document", missing_docs), ("chunk", missing_chunks)) if names)
            problems.append(Problem(q.line, q.qid, f"{what} (not in workspace '{workspace}'); question left out"))
            continue
        gold = []
        for g in q.gold:
            if g.match == "chunk":
                g = replace(g, doc_ids=frozenset({chunk_doc[g.text]}))
                g = replace(g, match="doc", doc=chunk_doc[g.text]) if gs.unit == "doc" else g
            elif g.doc and gs.doc_key != "none":
                g = replace(g, doc_ids=frozenset(by_key[g.doc]))
                g = replace(g, match="doc") if gs.unit == "doc" and g.match in ("span", "exact") else g
            gold.append(g)
        kept.append(replace(q, gold=tuple(gold)))
    return replace(gs, queries=kept, problems=problems)


def describe(gs: GoldenSet) -> dict[str, Any]:
    """Counts for the page and the CLI: questions, per type, answerable, problems."""
    types: dict[str, int] = {}
    for q in gs.queries:
        types[q.qtype] = types.get(q.qtype, 0) + 1
    return {"name": gs.name, "questions": len(gs.queries), "with_gold": len(gs.scorable),
            "unanswerable": sum(1 for q in gs.queries if not q.answerable), "types": types,
            "problems": len(gs.problems)}


def problems_as_rows(problems: Sequence[Problem]) -> list[Mapping[str, Any]]:
    return [{"line": p.line, "id": p.qid, "severity": p.severity, "problem": p.message} for p in problems]
