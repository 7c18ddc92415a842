"""One-time migration (issue #41 item 3), kept in history only: each results file gains the `measured` section its
hand-written renderer produced, so the generic bench/readme_tables.py shows the same figures.

    git show dca6ed5:bench/readme_tables.py > bench/_old_rt.py
    .venv/bin/python bench/migrate_measured.py bench/_old_rt.py && rm bench/_old_rt.py
"""
import importlib.util, json, sys
from pathlib import Path


ROOT = Path.cwd()
sys.path.insert(0, str(ROOT / "bench"))
from _common import CAPTION, grid  # noqa: E402

spec = importlib.util.spec_from_file_location("old_rt", sys.argv[1])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
RES = ROOT / "bench" / "results"

current = {}
old.md_table = lambda headers, rows: grid(headers, rows)


def cap(file, d):
    f, top = current["file"], current["d"]
    if file == f and d is top:
        return CAPTION
    return old_caption(file, d)


old_caption = old.caption
old.caption = cap

heads = {}
for i, (what, fig, part, file) in enumerate(old._headline_rows(RES)):
    heads[file] = {"what": what, "figure": fig, "order": i + 1}
    if file in old.FIGURE_RUN:
        heads[file]["run"] = list(old.FIGURE_RUN[file])

order = 0
for part, sections in old.PARTS:
    for file, fn in sections:
        order += 1
        path = RES / file
        d = json.loads(path.read_text())
        d.pop("measured", None)
        current.update(file=file, d=d)
        lines = fn(d, file)
        for ln in lines:
            assert isinstance(ln, (str, dict)), (file, type(ln))
        t = {"part": part, "order": order, "lines": lines}
        if file in heads:
            t["headline"] = heads.pop(file)
        d["measured"] = t
        path.write_text(json.dumps(d, indent=2, sort_keys=False) + "\n")
for file in old.READ_BY_OTHERS:
    path = RES / file
    d = json.loads(path.read_text())
    owner = {"ingest_b16.json": "ingest.json", "answer_scorer_latency.json": "answer_scorer.json"}[file]
    d["measured"] = {"shown_in": owner}
    path.write_text(json.dumps(d, indent=2, sort_keys=False) + "\n")
assert not heads, heads
print("migrated", order, "files")
