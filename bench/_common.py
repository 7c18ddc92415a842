"""Shared plumbing for the benchmarks: repo path, machine facts, RSS high-water marks, tables and JSON results."""
from __future__ import annotations

import json
import os
import random
import platform
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# The bundled model is loaded by path; a hub lookup would only stall on this offline machine.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# Taken when a bench script imports this module, i.e. before it loads models or data: the "start" of its run.
_STARTED_AT = datetime.now(timezone.utc).isoformat(timespec="seconds")
_LOAD_AT_START = _load_avg()


def datasets_dir(cli_value: str | None) -> Path:
    """--datasets wins, then RAG_DATASETS, then ../shared/datasets next to the repo (same rule as the tests)."""
    if cli_value:
        return Path(cli_value)
    return Path(os.environ.get("RAG_DATASETS", ROOT.parent / "shared" / "datasets"))


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    # Installed versions from package metadata: no import needed, and rank_bm25 has no __version__ attribute.
    from importlib.metadata import PackageNotFoundError, version

    for key, dist in (("torch", "torch"), ("sentence_transformers", "sentence-transformers"), ("duckdb", "duckdb"),
                      ("numpy", "numpy"), ("bm25s", "bm25s"), ("rank_bm25", "rank-bm25")):
        try:
            info[key] = version(dist)
        except PackageNotFoundError:
            continue
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    try:
        info["load_avg_at_start"] = list(os.getloadavg())
    except OSError:
        pass
    return info


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- memory -------------------------------------------------------------------------------------------------------
# We read VmHWM (the same high-water counter getrusage reports as ru_maxrss) and reset it between phases by
# writing 5 to /proc/self/clear_refs, so each phase gets its own peak instead of the process-wide maximum.

def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc), so a phase that reuses memory an earlier phase freed still
    shows its own growth instead of hiding inside the old high-water mark."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakRSS:
    """Peak resident-set growth of one phase in MiB: max(VmHWM during phase) - VmRSS at its start.
    `method` says whether the high-water mark could be reset ('VmHWM reset') or only the process-wide
    ru_maxrss was available ('ru_maxrss delta', which reads 0 when the phase did not set a new maximum)."""

    def __init__(self) -> None:
        self.peak_mib: float = 0.0
        self.retained_mib: float = 0.0
        self.method = ""

    @contextmanager
    def measure(self) -> Iterator["PeakRSS"]:
        import gc
        import resource

        gc.collect()
        _trim_heap()
        reset = _reset_hwm()
        rss0 = _status_kb("VmRSS")
        max0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            yield self
        finally:
            hwm = _status_kb("VmHWM")
            rss1 = _status_kb("VmRSS")
            if reset and hwm is not None and rss0 is not None:
                self.method = "VmHWM reset"
                self.peak_mib = (hwm - rss0) / 1024
            else:
                self.method = "ru_maxrss delta"
                self.peak_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - max0) / 1024
            if rss0 is not None and rss1 is not None:
                self.retained_mib = (rss1 - rss0) / 1024


@contextmanager
def timed() -> Iterator[list[float]]:
    """`with timed() as t: ...` then t[0] is the wall time in seconds."""
    box: list[float] = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = time.perf_counter() - start


# -- output -------------------------------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain Markdown table (prints readably and pastes into the README unchanged)."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)) + " |"
            for r in cells]
    return "\n".join([line, sep, *body])


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        if abs(v) >= 0.1:
            return f"{v:.2f}"
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else str(v)


def _numeric(s: str) -> bool:
    return bool(s) and s.replace(",", "").replace(".", "").replace("-", "").replace("x", "").isdigit()


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """The commit the numbers were measured at, and whether tracked files differed from it (the tree is shared by
    several people, so a dirty tree is recorded with the paths that differed rather than hidden)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        # Porcelain lines are "XY path": the status letters take the first two columns, a space the third.
        changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines() if line]
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "dirty_paths": []}
    return {"commit": commit, "dirty": bool(changed), "dirty_paths": changed[:50]}


def command_line(argv: Sequence[str] | None = None, script: str | None = None) -> str:
    """The command as it was typed from the repo root: interpreter, script and arguments. `argv` (without the
    script) is what a bench's main() was called with; by default the process's own arguments."""
    exe = Path(os.path.abspath(sys.executable))  # not resolved: .venv/bin/python is a symlink to the base python
    exe_s = str(exe.relative_to(ROOT)) if exe.is_relative_to(ROOT) else str(exe)
    script_path = Path(os.path.abspath(ROOT / script if script else sys.argv[0]))
    script_s = str(script_path.relative_to(ROOT)) if script_path.is_relative_to(ROOT) else str(script_path)
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join([exe_s, script_s, *args])


def run_record(argv: Sequence[str] | None = None, script: str | None = None) -> dict[str, Any]:
    """What ties a results file to its run: the commit the code was loaded from (+ dirty flag and paths, at the
    start), UTC start/end, load average at start and end, and the exact command line. In a shared tree HEAD can move
    during a long run: `commit_at_end` says so when it did."""
    end = git_state()
    return {
        **_GIT_AT_START,
        **({"commit_at_end": end["commit"]} if end["commit"] != _GIT_AT_START["commit"] else {}),
        "started_at": _STARTED_AT,
        "finished_at": utc_now(),
        "load_avg_start": _LOAD_AT_START,
        "load_avg_end": _load_avg(),
        "command": command_line(argv, script),
    }


_GIT_AT_START = git_state()  # at import, i.e. when the bench started and loaded the code it measures


# -- a results file's own table ---------------------------------------------------------------------------------------
# A bench renders its section of docs/measured.md (and, for a headline, its README row) from its own payload, and
# write_result stores it under "measured"; bench/readme_tables.py only lays the stored sections out.
CAPTION: dict[str, Any] = {"caption": True}  # where the renderer puts the run's provenance line


@dataclass(frozen=True)
class Table:
    """How a bench's results file shows: `render(payload, file)` returns the section's lines, a `### ` title first,
    then text lines, grid(...) tables and CAPTION; `part` is its part of docs/measured.md; `headline(payload, file)`
    returns (what, figure) for a README row, or None (a None figure shows as "not recorded"); `figure_run` are the keys
    to the figure's own run record when it is not the file's (a merged file)."""

    render: Callable[[dict[str, Any], str], list[Any]]
    part: str
    headline: Callable[[dict[str, Any], str], tuple[str, str | None] | None] | None = None
    figure_run: tuple[str, ...] = ()


def grid(headers: Sequence[Any], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """A markdown table inside a section, every cell already formatted."""
    return {"columns": [str(h) for h in headers], "rows": [[str(c) for c in row] for row in rows]}


def num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def pct(v: Any, digits: int = 1) -> str:
    """A 0-1 share as a percentage ("–" when absent)."""
    return "–" if v is None else f"{v * 100:.{digits}f}%"


def met(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "**not met**")


def loss(points: float) -> str:
    """A recall drop in points, signed as a change ("−1.29"; exactly 0 carries no sign)."""
    return "0.00" if round(points, 2) == 0 else f"−{points:.2f}"


def row_time(r: dict[str, Any]) -> str:
    t = r.get("measured_at")
    return str(t).replace("+00:00", "")[:16].replace("T", " ") if t else "–"


def dig(d: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(d, dict):
            d = d.get(k)
        elif isinstance(d, list) and isinstance(k, int) and -len(d) <= k < len(d):
            d = d[k]
        else:
            return None
    return d


def table_section(table: Table, payload: dict[str, Any], file: str, previous: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The stored "table" record; a re-run keeps its place (`order`) in docs/measured.md and in the README."""
    prev = (previous or {}).get("measured") or {}
    section: dict[str, Any] = {"part": table.part, "order": prev.get("order", 1e6),
                               "lines": table.render(payload, file)}
    shown = table.headline(payload, file) if table.headline else None
    if shown:
        what, figure = shown
        section["headline"] = {"what": what, "figure": figure if figure is not None else "not recorded",
                               "order": (prev.get("headline") or {}).get("order", 1e6)}
        if table.figure_run:
            section["headline"]["run"] = list(table.figure_run)
    return section


def write_result(name: str, payload: dict[str, Any], out: Path | None = None, *, argv: Sequence[str] | None = None,
                 script: str | None = None, table: Table | None = None) -> Path:
    """Write one run's results. Every file gets a `run` record (see run_record): a results file holds one run, so
    every number in it traces to one commit, one time window and one command. With `table` the file carries its own
    section of docs/measured.md under "measured" (bench/readme_tables.py); without, one a merged payload carried is
    dropped (it would be stale)."""
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"run": run_record(argv, script), **{k: v for k, v in payload.items() if k not in ("run", "measured")}}
    if table is not None:
        previous = json.loads(path.read_text()) if path.exists() else None
        payload["measured"] = table_section(table, payload, path.name, previous)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


BOOT = 2000  # bootstrap resamples of a paired difference


def paired_ci(a: Sequence[float], b: Sequence[float], seed: int = 0, counts: bool = False) -> dict[str, float]:
    """Mean of a - b (points) and its paired bootstrap 95% interval; `counts` adds the questions each side won."""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    rng = random.Random(seed)
    means = sorted(sum(d[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOT))
    out: dict[str, float] = {"diff": round(100 * sum(d) / n, 2), "lo": round(100 * means[int(0.025 * BOOT)], 2),
                             "hi": round(100 * means[int(0.975 * BOOT) - 1], 2)}
    if counts:
        out |= {"wins": sum(x > 0 for x in d), "losses": sum(x < 0 for x in d)}
    return out


def jsonl(p: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (blank lines skipped)."""
    return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
