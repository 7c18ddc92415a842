"""What every fitted artefact records about its fitting: the recipe, the source data and its hash, the split, the
commit the code was at and the date."""
from __future__ import annotations

import hashlib
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """HEAD of the repo, with '+dirty' when tracked files differ from it (the artefact then came from unsaved code)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def provenance(recipe: str, source: str, split: str, source_sha: str, **more: str) -> dict[str, str]:
    return {"recipe": recipe, "source": source, "split": split, "source_sha": source_sha, "commit": commit(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), **more}


def datasets_dir(cli_value: str | None) -> Path:
    """The shared public datasets: --datasets wins, then RAG_DATASETS, then ../shared/datasets next to the repo."""
    if cli_value:
        return Path(cli_value)
    return Path(os.environ.get("RAG_DATASETS", ROOT.parent / "shared" / "datasets"))
