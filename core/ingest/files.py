"""Local files for ingest: regular files only, keyed by their path relative to the ingest root, size checked before
a byte is read, and no symbolic link followed out of a folder.

A folder named on the command line is the ingest root of the files under it: `docs/a/report.md` and
`docs/b/report.md` are the documents `a/report.md` and `b/report.md`. A file named on its own is keyed by its base
name (its folder is its root). A FIFO, a device or a socket is refused by name (reading one would block forever or
never end), as is a link that leaves the folder; a file is opened non-blocking and checked again on the open
descriptor, so one swapped for a FIFO between the scan and the read is refused too, not waited on.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from core.safeio.files import FileProblem, kind_of_mode, read_checked, resolve
from core.ingest.parse import MAX_KEY_CHARS, SUPPORTED, ParseError


@dataclass(frozen=True)
class LocalFile:
    """One file to ingest: `key` is the document's name in the store, `path` where it is read from; `problem` is
    set when the scan already refused it (the message names the file), so it is reported in its place in order."""

    key: str
    path: Path
    problem: str = ""


def _not_regular(key: str, mode: int, *, via_link: bool = False) -> str:
    link = "a link to " if via_link else ""
    return f"{key}: {link}{kind_of_mode(mode)}, not a regular file; only regular files are read; skipped"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _hidden(rel: Path) -> bool:
    return any(part.startswith((".", "_")) for part in rel.parts)


def _scan_folder(folder: Path) -> list[LocalFile]:
    """The supported files under `folder` (hidden and underscore paths skipped), sorted by key. Links are not
    followed out of the folder: a linked folder is never descended (its files inside the root are reached at their
    own place), a linked file is read only when it resolves inside the root."""
    root = folder.resolve()
    out: list[LocalFile] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
        for d in dirnames:
            p = here / d
            if p.is_symlink():
                target = resolve(p)  # None: a link loop (Python raises RuntimeError for one) or a dangling link
                rel = p.relative_to(folder).as_posix()
                if target is None:
                    out.append(LocalFile(rel + "/", p, f"{rel}: a link loop or a dangling link; not followed"))
                elif not _inside(target, root):
                    out.append(LocalFile(rel + "/", p, f"{rel}: a link to a folder outside {folder}; not followed"))
        for f in filenames:
            p = here / f
            rel_path = p.relative_to(folder)
            if _hidden(rel_path) or p.suffix.lower() not in SUPPORTED:
                continue
            key = rel_path.as_posix()
            try:
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    target = resolve(p)
                    if target is None:
                        out.append(LocalFile(key, p, f"{key}: a link loop or a dangling link; skipped"))
                        continue
                    if not _inside(target, root):
                        out.append(LocalFile(key, p, f"{key}: a link to a file outside {folder}; not followed"))
                        continue
                    st = target.stat()
                    if not stat.S_ISREG(st.st_mode):
                        out.append(LocalFile(key, p, _not_regular(key, st.st_mode, via_link=True)))
                        continue
                elif not stat.S_ISREG(st.st_mode):
                    out.append(LocalFile(key, p, _not_regular(key, st.st_mode)))
                    continue
            except OSError as exc:  # a dangling link, a link loop, a file gone since the walk
                out.append(LocalFile(key, p, f"{key}: cannot be read ({exc.strerror or exc})"))
                continue
            out.append(LocalFile(key, p))
    return sorted(out, key=lambda f: f.key)


def scan_paths(paths: Iterable[str | Path]) -> list[LocalFile]:
    """The files named on the command line; folders are walked (see _scan_folder). A named path that does not
    exist raises OSError (the command line is wrong); every other problem is a LocalFile with its `problem`.
    Two different files given the same key (`x/report.md` and `y/report.md` named as two folders) are not allowed
    to replace each other: the second is refused, and the message says how to keep both."""
    out: list[LocalFile] = []
    for raw in paths:
        p = Path(raw)
        try:
            st = p.stat()  # follows a named link (the user named it); OSError when missing
        except OSError as exc:
            if exc.errno != 40:  # ELOOP: a named link loop is this file's problem, not the run's
                raise
            out.append(LocalFile(p.name, p, f"{p.name}: a link loop; skipped"))
            continue
        if stat.S_ISDIR(st.st_mode):
            out.extend(_scan_folder(p))
        elif not stat.S_ISREG(st.st_mode):
            out.append(LocalFile(p.name, p, _not_regular(p.name, st.st_mode, via_link=p.is_symlink())))
        else:
            out.append(LocalFile(p.name, p))
    seen: dict[str, Path] = {}
    checked: list[LocalFile] = []
    for f in out:
        first = seen.get(f.key)
        if f.problem or first is None:
            seen.setdefault(f.key, f.path)
            checked.append(f)
        elif resolve(first) != resolve(f.path):
            checked.append(LocalFile(f.key, f.path, f"{f.key}: {f.path} has the same key as {first}, which this run "
                                     "already ingests; ingest their common parent folder to keep both; skipped"))
        # the same file named twice is read once
    return checked


def read_file(f: LocalFile, max_bytes: int | None = None) -> bytes:
    """The file's bytes, or a ParseError naming it: refused by the scan, not a regular file when opened (opened
    non-blocking, so a FIFO put in its place cannot block), over `max_bytes` by its size before a byte is read, or
    unreadable. At most max_bytes + 1 bytes are read even if the file grows meanwhile."""
    if f.problem:
        raise ParseError(f.problem)
    if len(f.key) > MAX_KEY_CHARS:
        raise ParseError(f"{f.key[:60]}…: the path is {len(f.key):,} characters long (at most {MAX_KEY_CHARS:,})")
    try:
        return read_checked(f.path, max_bytes=max_bytes if max_bytes is not None else 1 << 62, what="file to ingest",
                            name=f.key, limit_name="upload limit")
    except FileProblem as exc:
        raise ParseError(f"{exc}; skipped" if "regular file" in str(exc) else str(exc)) from None
