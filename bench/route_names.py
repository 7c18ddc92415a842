"""The router's name guard: chitchat / out-of-scope overruled when the question names something the corpus knows.

Seen as a user: "Какой максимальный размер пакета в Tidewater?" on the sample corpus was sent to out-of-scope (its
Russian words are not the English corpus's, so term coverage was low). core.route.router.known_names finds the
names a question uses that the corpus's index has ("Tidewater"); route_offline then runs the default pipeline
instead of refusing. A rule, not a fitted threshold, so nothing is chosen here: this bench reports what it changes on
both splits of train/sets/routing.jsonl (each question against the vocabulary of the corpus it was asked
about, as its stored coverage is), with the shipped router and the configured thresholds, and on the Russian
questions among them.

    .venv/bin/python bench/route_names.py [--datasets ../shared/datasets]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import CAPTION, Table, datasets_dir, grid, num, write_result  # noqa: E402
from core.config import PipelineConfig  # noqa: E402
from core.route.router import (  # noqa: E402
    ABSTAIN,
    CORPUS_CLASSES,
    NO_RETRIEVAL,
    ROUTING_FILE,
    decide,
    known_names,
    refusal_guard,
    trained_router,
)
from train.route_data import CORPORA, vocabulary  # noqa: E402


def stats(rows: list[dict[str, Any]], decided: list[str]) -> dict[str, Any]:
    corpus = [(r, d) for r, d in zip(rows, decided) if r["label"] in CORPUS_CLASSES]
    refuse = [(r, d) for r, d in zip(rows, decided) if r["label"] in NO_RETRIEVAL]
    return {"questions": len(rows), "corpus_questions": len(corpus),
            "costly": sum(d in NO_RETRIEVAL for _, d in corpus),
            "no_retrieval_questions": len(refuse),
            "no_retrieval_kept": sum(d == r["label"] for r, d in refuse),
            "no_retrieval_to_pipeline": sum(d not in NO_RETRIEVAL for _, d in refuse),
            "abstain_rate": round(sum(d == ABSTAIN for d in decided) / max(1, len(rows)), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=None)
    args = ap.parse_args(argv)
    root = datasets_dir(args.datasets)
    vocabs = {name: vocabulary(name, root) for name in CORPORA}
    rc = PipelineConfig().router
    r = trained_router()
    rows = [json.loads(x) for x in ROUTING_FILE.read_text(encoding="utf-8").splitlines() if x.strip()]
    probs = r.probabilities([x["text"] for x in rows], [float(x["coverage"]) for x in rows])
    before, after, overruled = [], [], []
    for x, p in zip(rows, probs):
        pd = dict(zip(r.classes, (float(v) for v in p)))
        cls = decide(pd, min_confidence=rc.min_confidence, refuse_confidence=rc.refuse_confidence)[0]
        if cls in NO_RETRIEVAL and refusal_guard(x["text"], float(x["coverage"])):
            cls = ABSTAIN
        before.append(cls)
        names = known_names(x["text"], vocabs[x["corpus"]]) if cls in NO_RETRIEVAL else []
        after.append(ABSTAIN if names else cls)
        if names:
            overruled.append({"text": x["text"], "label": x["label"], "split": x["split"], "corpus": x["corpus"],
                              "was": cls, "names": names})
    out: dict[str, Any] = {"benchmark": "route_names", "parameters": {
        "router": "shipped (core/models/data/router_model.npz)", "min_confidence": rc.min_confidence,
        "refuse_confidence": rc.refuse_confidence, "file": str(ROUTING_FILE.relative_to(ROOT)),
        "vocabularies": {k: len(v) for k, v in vocabs.items()}}}
    for split in ("train", "test"):
        idx = [i for i, x in enumerate(rows) if x["split"] == split]
        out[split] = {"without": stats([rows[i] for i in idx], [before[i] for i in idx]),
                      "with": stats([rows[i] for i in idx], [after[i] for i in idx])}
    ru = [i for i, x in enumerate(rows) if re.search("[\u0400-\u04ff]", x["text"])]
    out["russian"] = {"without": stats([rows[i] for i in ru], [before[i] for i in ru]),
                      "with": stats([rows[i] for i in ru], [after[i] for i in ru])}
    out["overruled"] = overruled
    path = write_result("route_names", out, table=MEASURED_ROUTE_NAMES)
    print(json.dumps({k: out[k] for k in ("train", "test", "russian")}, indent=1))
    print(f"{len(overruled)} overruled; wrote {path}")
    return 0


# -- its section of docs/measured.md (bench/_common.Table; bench/readme_tables.py lays it out)
def measured_route_names(d: dict[str, Any], file: str) -> list[str]:
    """The router's name guard (bench/route_names.py): what it changes on the routing set, per split and in Russian."""
    p = d.get("parameters") or {}
    out = ["### Router name guard (chitchat / out-of-scope overruled when the question names a corpus term)", "",
           CAPTION, "",
           f"Every question of `{p.get('file')}` against the vocabulary of the corpus it was asked about, the shipped "
           f"router at min_confidence {p.get('min_confidence')} / refuse_confidence {p.get('refuse_confidence')}. A "
           "rule, not a fitted threshold: nothing was chosen on these questions. *costly*: corpus questions sent to "
           "chitchat or out-of-scope; *refusals kept*: chitchat / out-of-scope questions given their own route.", ""]
    rows = []
    for part in ("train", "test", "russian"):
        for k in ("without", "with"):
            r = (d.get(part) or {}).get(k) or {}
            rows.append([part, k, num(r.get("questions")), f"{num(r.get('costly'))}/{num(r.get('corpus_questions'))}",
                         f"{num(r.get('no_retrieval_kept'))}/{num(r.get('no_retrieval_questions'))}",
                         num(r.get("abstain_rate"), 4)])
    out.append(grid(["questions", "guard", "n", "costly", "refusals kept", "abstain rate"], rows))
    out += ["", f"Decisions the guard overruled: {len(d.get('overruled') or [])} (listed in the file). It was added "
            "for a question seen in the browser, not in this set: \"Какой максимальный размер пакета в Tidewater?\" "
            "on the sample corpus went to out-of-scope; with the guard it runs the default pipeline "
            "(tests/test_router.py)."]
    return out


MEASURED_ROUTE_NAMES = Table(measured_route_names, 'Routing and query transforms')


if __name__ == "__main__":
    raise SystemExit(main())
