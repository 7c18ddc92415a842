"""The one checked reader for every path a user names (ingest, `--history`, golden sets, grids, configs, synonyms).

A path is opened non-blocking (a FIFO put there cannot hang the reader), checked on the open descriptor (`fstat`:
a regular file, its size under the caller's bound before a byte is read), read to at most that bound even if it
grows, and, when the caller gives a folder, not followed by a link out of it. JSON (and TOML) is checked for
nesting depth before it is parsed, so a deeply nested file is a message, not a RecursionError. Every problem is one
FileProblem whose message names the path; nothing here raises a traceback at a user.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_JSON_DEPTH = 64  # deeper than any file this product reads; json and tomllib recurse per level


class FileProblem(ValueError):
    """A named file that cannot be read as asked; the message names it and says why."""


def human_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def kind_of_mode(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def resolve(path: Path) -> Path | None:
    """The path with every link followed, or None when that cannot be done (a link loop, a dangling link): Python
    raises RuntimeError for a loop, which must never abort a whole run."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def read_checked(path: str | Path, *, max_bytes: int, what: str = "file", root: str | Path | None = None,
                 name: str | None = None, limit_name: str = "") -> bytes:
    """The bytes of a regular file of at most `max_bytes`, or FileProblem naming it (`name`, else the path).
    `root`: the file must resolve inside this folder (a link out of it is refused). `limit_name` names the bound
    in the message (default "limit for a <what>")."""
    p = Path(path)
    label = name or str(p)
    limit = limit_name or f"limit for a {what}"
    if root is not None:
        target = resolve(p)
        if target is None:
            raise FileProblem(f"{label}: a link loop or a dangling link; cannot read this {what}")
        if not inside(target, Path(root).resolve()):
            raise FileProblem(f"{label}: a link to a file outside {root}; not followed")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        why = "a link loop" if exc.errno == 40 else (exc.strerror or str(exc))
        raise FileProblem(f"{label}: cannot be read ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileProblem(f"{label}: {kind_of_mode(st.st_mode)}, not a regular file; only regular files are "
                              "read")
        if st.st_size > max_bytes:
            raise FileProblem(f"{label}: {human_bytes(st.st_size)} is over the {limit} of {human_bytes(max_bytes)}")
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            piece = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not piece:
                break
            chunks.append(piece)
            got += len(piece)
    except OSError as exc:
        raise FileProblem(f"{label}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if got > max_bytes:
        raise FileProblem(f"{label}: over the {limit} of {human_bytes(max_bytes)} (it grew while being read)")
    return b"".join(chunks)


def read_text_checked(path: str | Path, *, max_bytes: int, what: str = "file") -> str:
    data = read_checked(path, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileProblem(f"{path}: not UTF-8 text; a {what} must be UTF-8") from None


def check_depth(text: str, *, name: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """FileProblem when brackets ([ and {) nest deeper than `max_depth` outside strings (JSON and TOML)."""
    depth = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise FileProblem(f"{name}: nested deeper than {max_depth} levels (MAX_JSON_DEPTH); not read")
        elif ch in "]}":
            depth = max(0, depth - 1)

