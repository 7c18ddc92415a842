"""The answer check on German questions nobody here wrote: GermanQuAD's test paragraphs and their annotators' questions.

Data: bench/sets/germanquad/ (the first 57 test paragraphs of GermanQuAD, deepset, CC BY 4.0, as normalised by
butburg/dense-retrieval-germanquad; README there). GermanQuAD's questions were written in German by annotators over
German Wikipedia, not translated from English (as XQuAD's were), so they test the German reading of the check on
other phrasings. The normalised files carry no answer spans, so:
- answerable: each question over the paragraphs (BM25 top 5, the question's own words); 'answered' = not refused and
  citing the gold paragraph, 'refused' = refused. Whether an answered text is right is read by hand: a label file
  (--labels, JSON lines {"id", "text_sha", "verdict": "right"|"wrong"}) holds a person's verdict for an exact answer
  text; an answer whose text changed is unlabelled until read again;
- omitted: the question with its gold paragraph left out (refused is right);
- near misses, made as bench/verify_nearmiss.py makes German ones (a year, a number, a month, an ordinal, a
  superlative), and a name: a run of two or more capitalised words, or the paragraph's title after 'in', 'von', 'aus'
  or 'nach', replaced by an invented name or by a real one the whole sample never writes (REAL_NAMES).
Split by paragraph position: even = dev (may be read to choose rules), odd = report (never read item by item before a
figure is taken from it).

  nice -n 10 .venv/bin/python bench/verify_germanquad.py [--out bench/results/verify_germanquad.json]
      [--rows /tmp/gq_rows.jsonl] [--labels bench/sets/germanquad/labels.jsonl] [--split dev]
      [--before bench/results/verify_germanquad_before.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Table, jsonl, machine_info, write_result  # noqa: E402
from verify_nearmiss import INVENTED_EN, near_misses, run_items  # noqa: E402

from core.answer.crosslingual import NameFinder  # noqa: E402
from core.answer.e5_scorer import E5Reader  # noqa: E402
from core.answer.e5_scorer import available as e5_available  # noqa: E402
from core.retrieve.bm25 import BM25Index  # noqa: E402

SETS = ROOT / "bench" / "sets" / "germanquad"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# real names for the swapped-name near misses, written before any run; each is used only where the whole sample never
# writes its first five letters, so the corpus cannot hold the swapped question's answer
REAL_NAMES = ["Johannes Kepler", "Marie Curie", "Heinrich Heine", "Clara Schumann", "Konrad Adenauer",
              "Rosa Luxemburg", "Paraguay", "Lissabon", "Tasmanien", "Helsinki", "Kasachstan", "Bolivien", "Bratislava",
              "Real Madrid", "Ajax Amsterdam", "Salvador Dalí", "Montevideo", "Neuseeland"]


def _names(q: str, title: str) -> list[re.Match[str]]:
    """The question's names: runs of two or more capitalised words not opening it ('FC Barcelona', 'Robert Koch'),
    and its paragraph's title after a place's preposition ('in Sichuan', 'von Zypern')."""
    out = list(re.finditer(r"(?<=[\w,] )([A-ZÄÖÜ][\w\-]+(?: [A-ZÄÖÜ][\w\-]+)+)", q))
    out += list(re.finditer(r"(?:(?<=\bin )|(?<=\bvon )|(?<=\baus )|(?<=\bnach ))(" + re.escape(title) + r")(?!\w)", q))
    return out


def build(seed: int = 0) -> dict[str, Any]:
    docs = jsonl(SETS / "docs.jsonl")
    queries = {q["query_id"]: q for q in jsonl(SETS / "queries.jsonl")}
    gold = {r["query_id"]: r["doc_id"] for r in jsonl(SETS / "qrels.jsonl")}
    corp = {d["doc_id"]: {"id": d["doc_id"], "title": d["text"].split("\n", 1)[0].replace("_", " "),
                          "text": d["text"].split("\n", 1)[1].strip() if "\n" in d["text"] else d["text"]}
            for d in docs}
    split = {d["doc_id"]: ("dev" if i % 2 == 0 else "report") for i, d in enumerate(docs)}
    everything = "\n".join(c["title"] + "\n" + c["text"] for c in corp.values())
    pool = [n for n in REAL_NAMES if re.search(r"(?i)" + re.escape(n[:5]), everything) is None]
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for qid, q in queries.items():
        g = gold.get(qid)
        if g not in corp:
            continue
        text = " ".join(q["query_text"].split())
        art = corp[g]["title"] + "\n" + corp[g]["text"]
        variants = {"answerable": text, **{k: v for k, v in near_misses(text, art, [], rng, "de", "").items()
                                           if not k.startswith("entity")}}
        for m in _names(text, corp[g]["title"])[:1]:
            variants["entity_invented"] = text[: m.start()] + rng.choice(INVENTED_EN) + text[m.end():]
            variants["entity_swap"] = text[: m.start()] + rng.choice(pool) + text[m.end():]
        for kind, v in variants.items():
            items.append({"id": qid, "setting": "de", "kind": kind, "question": v, "answer": "", "gold": g,
                          "gold_sentence": "", "split": split[g], "doc_lang": "de", "retrieve": v})
        items.append({**items[-len(variants)], "kind": "omitted"})
    index = {"de": BM25Index(list(corp), [c["title"] + "\n" + c["text"] for c in corp.values()])}
    return {"items": items, "corp": {"de": corp}, "index": index}


def rates(rows: list[dict[str, Any]], labels: dict[tuple[str, str], str]) -> dict[str, Any]:
    ans = [r for r in rows if r["kind"] == "answerable"]
    om = [r for r in rows if r["kind"] == "omitted"]
    nm = [r for r in rows if r["kind"] not in ("answerable", "omitted")]
    out: dict[str, Any] = {"answerable": len(ans), "near_miss": len(nm), "omitted": len(om)}
    if ans:
        answered = [r for r in ans if not r["after"]["refused"]]
        out["answered_citing_gold"] = round(sum(r["after"]["correct"] for r in ans) / len(ans), 3)
        out["answered_other_paragraph"] = round(sum(not r["after"]["correct"] for r in answered) / len(ans), 3)
        out["refused"] = round(sum(r["after"]["refused"] for r in ans) / len(ans), 3)
        out["refused_before_check"] = round(sum(r["before"]["refused"] for r in ans) / len(ans), 3)
        read = [labels.get((r["id"], _sha(r["after"]["text"]))) for r in answered]
        out["answered_read"] = sum(v is not None for v in read)
        out["answered_read_right"] = sum(v == "right" for v in read)
        out["answered_read_wrong"] = sum(v == "wrong" for v in read)
    if om:
        out["omitted_refused"] = round(sum(r["after"]["refused"] for r in om) / len(om), 3)
    if nm:
        out["nearmiss_refused"] = round(sum(r["after"]["refused"] for r in nm) / len(nm), 3)
        kinds = Counter(r["kind"] for r in nm)
        out["by_kind"] = {k: {"n": n, "refused": round(sum(r["after"]["refused"] for r in nm if r["kind"] == k) / n, 3)}
                          for k, n in sorted(kinds.items())}
    return out


def measured_verify_germanquad(d: dict[str, Any], file: str) -> list[Any]:
    """German questions written in German (bench/verify_germanquad.py): answered from the gold paragraph, refused, read
    by hand, near misses and left-out paragraphs refused; beside the code before this check's German rules when the
    run carries it."""
    from _common import CAPTION, grid, num

    def pct(v: Any) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"
    rows = []
    for sp in ("report", "dev"):
        for label, x in (("before", (d.get("before") or {}).get(sp)), ("after", (d.get("summary") or {}).get(sp))):
            if not x:
                continue
            read = x.get("answered_read") or 0
            rows.append([sp, label, num(x.get("answerable")), pct(x.get("answered_citing_gold")), pct(x.get("refused")),
                         f"{x.get('answered_read_right', 0)}/{read}" if read else "–", num(x.get("near_miss")),
                         pct(x.get("nearmiss_refused")), pct(x.get("omitted_refused"))])
    return ["### The answer check on German questions written in German (GermanQuAD test sample)", "",
            "57 German Wikipedia paragraphs and their annotators' 232 questions (no answer spans: 'answered' cites the "
            "gold paragraph; 'read right' is a person's verdict on the exact answer text). Rules read on the dev split "
            "(even paragraphs); 'before' is the code before them, run on the same items.", "", CAPTION, "",
            grid(["split", "code", "answerable", "answered (gold cited)", "refused", "read right", "near misses",
                  "refused", "omitted refused"], rows)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rows", type=Path, help="write every row (question, kind, answer text, its sha) as JSON lines")
    ap.add_argument("--labels", type=Path, default=SETS / "labels.jsonl")
    ap.add_argument("--split", choices=("dev", "report", "both"), default="both")
    ap.add_argument("--before", type=Path, help="a results file of the same bench on earlier code: its summary is kept "
                    "beside this run's as 'before'")
    args = ap.parse_args()
    data = build()
    if args.split != "both":
        data["items"] = [it for it in data["items"] if it["split"] == args.split]
    reader = E5Reader() if e5_available() else None
    finder = NameFinder(reader) if reader is not None else None
    t0 = time.perf_counter()
    rows = run_items(data["items"], data, reader, finder)
    ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
    for r in rows:
        r["text_sha"] = _sha(r["after"]["text"])
    labels = {(x["id"], x["text_sha"]): x["verdict"] for x in jsonl(args.labels)} if args.labels.exists() else {}
    summary = {sp: rates([r for r in rows if r["split"] == sp], labels) for sp in ("dev", "report")
               if any(r["split"] == sp for r in rows)}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if args.rows:
        args.rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    if args.out:
        before = json.loads(args.before.read_text()) if args.before else None
        write_result(args.out.stem, {"what": __doc__.split("\n")[0], "summary": summary, "ms_per_question": ms,
                                     "machine": machine_info(), "rows": rows,
                                     **({"before": before["summary"], "before_run": before["run"]} if before else {})},
                     args.out, table=Table(measured_verify_germanquad, "Offline answer and answer cache"))


if __name__ == "__main__":
    main()
