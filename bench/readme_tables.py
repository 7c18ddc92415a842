"""Lay out docs/measured.md and the README's headline table from the `measured` sections the benches wrote into
bench/results/*.json, so no number in either is typed by hand and no schema is restated here.

    .venv/bin/python bench/readme_tables.py           # rewrite docs/measured.md and the README's headline region
    .venv/bin/python bench/readme_tables.py --check   # exit 1 when either differs (tests/test_readme.py does this)

A bench declares its table with `write_result(..., table=Table(render, part, headline))` (bench/_common.py): the
section's lines, its part of measured.md and, for a headline, the README row, all computed from its own payload.
This file only adds each run's provenance line (file, command, UTC time, commit, load average) and each headline
row's age in commits. A results file without a `measured` section is listed at the end, with a note printed. Pure
JSON reading.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
MEASURED = ROOT / "docs" / "measured.md"


class MarkerError(ValueError):
    """README.md lacks the pair of markers that delimit the generated section."""


# -- provenance -----------------------------------------------------------------------------------------------------
def _when(d: dict[str, Any]) -> str | None:
    run = d.get("run") or {}
    for v in (run.get("finished_at"), d.get("measured_at"), d.get("when"), d.get("timestamp")):
        if v:
            return str(v).replace("+00:00", "")[:16].replace("T", " ")
    return None


def _load(d: dict[str, Any]) -> str:
    run = d.get("run") or {}
    start = run.get("load_avg_start") or (d.get("machine") or {}).get("load_avg_at_start")
    end = run.get("load_avg_end") or d.get("load_avg_at_end")
    if not start:
        return "load average not recorded"
    text = f"load average {start[0]:.1f} at start"
    return text + (f", {end[0]:.1f} at end" if end else "")


def caption(file: str, d: dict[str, Any]) -> str:
    """One line naming where a table's numbers come from: file, command, time, commit, machine load."""
    run = d.get("run") or {}
    command = run.get("command") or d.get("command") or "command not recorded"
    commit = run.get("commit")
    if commit:
        commit_s = f"commit `{commit[:12]}`" + (" (tree had uncommitted changes)" if run.get("dirty") else "")
        if run.get("commit_at_end"):
            commit_s += f", HEAD at `{run['commit_at_end'][:12]}` by its end"
    else:
        commit_s = "commit not recorded"
    when = _when(d) or "time not recorded"
    return f"*`bench/results/{file}` · `{command.strip()}` · {when} UTC · {commit_s} · {_load(d)}*"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(title: str) -> str:
    """GitHub's heading anchor for a plain title (lower case, spaces to hyphens, punctuation dropped)."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


# -- the stored sections --------------------------------------------------------------------------------------------
_PARSED: dict[Path, tuple[bytes, dict[str, Any]]] = {}


def load(results: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every results file, parsed (a file whose bytes are those last read is not parsed again: one run reads each
    file in several places). Read only: callers never change what it returns."""
    out = {}
    for p in sorted(results.glob("*.json")):
        raw = p.read_bytes()
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        if p not in _PARSED or _PARSED[p][0] != digest:
            _PARSED[p] = (digest, json.loads(raw))
        out[p.name] = _PARSED[p][1]
    return out


def sections(results: Path = RESULTS) -> list[tuple[str, dict[str, Any]]]:
    """(file, results) of every file that carries its own section, in the order the sections were placed."""
    files = [(f, d) for f, d in load(results).items()
             if isinstance(d.get("measured"), dict) and "lines" in d["measured"]]
    return sorted(files, key=lambda fd: (float(fd[1]["measured"].get("order", 1e6)), fd[0]))


def parts(results: Path = RESULTS) -> list[str]:
    """The parts of docs/measured.md, each where its first section is."""
    return list(dict.fromkeys(d["measured"]["part"] for _, d in sections(results)))


def unshown(results: Path = RESULTS) -> list[str]:
    """Results files with no section of their own nor a note saying whose section reads them."""
    return [f for f, d in load(results).items() if not isinstance(d.get("measured"), dict)
            or not ("lines" in d["measured"] or "shown_in" in d["measured"])]


def lines_of(file: str, d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for line in d["measured"]["lines"]:
        if isinstance(line, str):
            out.append(line)
        elif line.get("caption"):
            out.append(caption(file, d))
        else:
            out.append(md_table(line["columns"], line["rows"]))
    return out


INTRO = ("Generated by `bench/readme_tables.py` from `bench/results/*.json`: edit the results (by running a bench), "
         "never this text. Each caption names the results file, the command, the UTC time and the commit of its run "
         "(\"commit not recorded\": the file predates run records) and the 1-minute load average; the machine has 2 "
         "cores shared with other jobs, so absolute milliseconds are pessimistic and ratios measured side by side in "
         "one run are the steadier numbers. The bundled MiniLM is the embedder throughout. Notes inside a results "
         "file may name modules by their paths at the time of the run (before core/ was grouped into packages).")

MEASURED_NOTE = "<!-- generated by bench/readme_tables.py from bench/results/*.json; do not edit by hand -->"


def render(results: Path = RESULTS) -> str:
    """docs/measured.md: every results file's own section, grouped by part, with a contents list."""
    all_parts = parts(results)
    out = ["# Measured", "", MEASURED_NOTE, "", INTRO, "", "Contents: " + " · ".join(
        f"[{title}](#{anchor(title)})" for title in all_parts) + "."]
    titles: set[str] = set()
    placed = sections(results)
    for part in all_parts:
        out += ["", f"## {part}"]
        for file, d in (fd for fd in placed if fd[1]["measured"]["part"] == part):
            lines = lines_of(file, d)
            if lines and lines[0].startswith("### "):
                if lines[0] in titles:  # a second run of the same bench: name its file in the heading
                    lines = [f"{lines[0]} · `{file}`", *lines[1:]]
                titles.add(lines[0])
            out += ["", *lines]
    rest = unshown(results)
    if rest:
        out += ["", "## Results files not shown here", "",
                "Kept for the record, not rendered (side runs of the benches above): "
                + ", ".join(f"`bench/results/{f}`" for f in rest) + "."]
    return "\n".join(out) + "\n"


# -- the README's headline table --------------------------------------------------------------------------------------
BEGIN = "<!-- headline:begin (generated by bench/readme_tables.py from bench/results/*.json; do not edit by hand) -->"
END = "<!-- headline:end -->"
AGE = re.compile(r"\d[\d,]* commits? old")


def headline_files(results: Path = RESULTS) -> list[tuple[str, dict[str, Any]]]:
    """(file, results) of the files whose section carries a README row, in row order."""
    rows = [(f, d) for f, d in sections(results) if isinstance(d["measured"].get("headline"), dict)]
    return sorted(rows, key=lambda fd: float(fd[1]["measured"]["headline"].get("order", 1e6)))


def figure_run(results: Path, file: str) -> dict[str, Any]:
    """The run record of a headline's figure: the file's own, or the part's a merged file names in `headline.run`."""
    path = results / file
    d = json.loads(path.read_text()) if path.exists() else {}
    run: Any = d
    for key in ((d.get("measured") or {}).get("headline") or {}).get("run") or ["run"]:
        run = run.get(key) if isinstance(run, dict) else None
    return run if isinstance(run, dict) else {}


def commits_since(commit: str | None) -> int | None:
    """Commits on HEAD since `commit` (None: unknown here, e.g. not in this clone's history)."""
    if not commit:
        return None
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count", f"{commit}..HEAD"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout) if out.returncode == 0 and out.stdout.strip().isdigit() else None


def age(results: Path, file: str) -> str:
    n = commits_since(figure_run(results, file).get("commit"))
    return "age not recorded" if n is None else f"{n:,} commit{'s' if n != 1 else ''} old"


def headline(results: Path = RESULTS) -> str:
    """The README's headline region, markers included: one table, each row naming its results file, its part of
    docs/measured.md and how many commits old its figure was when the README was generated."""
    rows = []
    for file, d in headline_files(results):
        h, part = d["measured"]["headline"], d["measured"]["part"]
        rows.append([h["what"], h["figure"], f"[`{file}`](bench/results/{file}) · [{part}](docs/measured.md#"
                     f"{anchor(part)}) · {age(results, file)}"])
    return "\n".join([BEGIN, md_table(["measured", "figure", "results file · section · age"], rows), END])


def headline_commands(results: Path = RESULTS) -> list[str]:
    """The commands that made the headline's figures, in row order: the figure's own run, then the file's when it
    differs (a merge)."""
    out: list[str] = []
    for file, d in headline_files(results):
        for run in (figure_run(results, file), d.get("run") or {}):
            cmd = (run.get("command") or "").strip()
            if cmd and cmd not in out:
                out.append(cmd)
    return out


def unaged(text: str) -> str:
    """The text with every headline age masked: the age moves with each commit, the figures do not."""
    return AGE.sub("N commits old", text)


def splice(readme: str, section: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise MarkerError(f"README.md needs exactly one {BEGIN!r} … {END!r} pair, in that order")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + section + tail


def expected(readme: str, results: Path = RESULTS) -> dict[str, str]:
    """What each generated file should hold: README.md (its headline region spliced) and docs/measured.md."""
    return {"README.md": splice(readme, headline(results)), "docs/measured.md": render(results)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md or docs/measured.md is out of date")
    ap.add_argument("--headline-commands", action="store_true",
                    help="print the commands behind the README's headline rows, one a line (make bench-headline)")
    args = ap.parse_args(argv)
    if args.headline_commands:
        print("\n".join(headline_commands(RESULTS)))
        return 0
    for file in unshown(RESULTS):
        print(f"note: bench/results/{file} has no `measured` section (bench/_common.Table): listed, not rendered",
              file=sys.stderr)
    targets = {"README.md": README, "docs/measured.md": MEASURED}
    want = expected(README.read_text(), RESULTS)
    # --check ignores the headline's ages (they move with every commit); a rewrite refreshes them
    same = (lambda a, b: unaged(a) == unaged(b)) if args.check else (lambda a, b: a == b)
    stale = [name for name, path in targets.items() if not path.exists() or not same(path.read_text(), want[name])]
    if args.check:
        for name in stale:
            print(f"{name} is out of date: run .venv/bin/python bench/readme_tables.py", file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        targets[name].parent.mkdir(parents=True, exist_ok=True)
        targets[name].write_text(want[name])
        print(f"rewrote {name}")
    if not stale:
        print("README.md and docs/measured.md are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
