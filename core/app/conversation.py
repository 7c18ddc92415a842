"""A conversation's turns as the Search Lab and the command line keep them: read, written and made from a trace."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

from core.safeio.files import FileProblem, check_depth, read_text_checked
from core.route.condense import CondenseInfo
from core.store.workspaces import workspace_dir
from core.types import Stage, Trace, Turn


class ConversationError(ValueError):
    """A history file or session that cannot be read; the message is fit for the user."""


MAX_TURNS = 50  # a conversation keeps its newest turns; condensing reads only the last few anyway
MAX_TURN_CHARS = 4_000  # a turn's question and answer are each cut here: condensing reads them on every follow-up
MAX_HISTORY_BYTES = 4 << 20  # a history file larger than this is refused before it is read


def turn_of(question: str, trace: Trace) -> Turn:
    """The turn a query adds: the question as asked, the standalone question it ran as (when condensed), the answer."""
    cond = trace.stage(Stage.CONDENSE)
    condensed = cond.info.condensed if cond is not None and isinstance(cond.info, CondenseInfo) else ""
    return Turn(question, trace.answer.text if trace.answer is not None else "",
                condensed if condensed and condensed != question else "")


def _cut(text: str, where: str, what: str, notes: list[str] | None) -> str:
    if len(text) <= MAX_TURN_CHARS:
        return text
    if notes is not None:
        notes.append(f"{where}: the {what} was cut at {MAX_TURN_CHARS:,} characters (MAX_TURN_CHARS); it had "
                     f"{len(text):,}")
    return text[:MAX_TURN_CHARS]


def _turn(obj: object, where: str, notes: list[str] | None = None) -> Turn:
    if isinstance(obj, str):
        return Turn(_cut(obj, where, "question", notes))
    if isinstance(obj, dict) and isinstance(obj.get("question"), str):
        return Turn(_cut(obj["question"], where, "question", notes), _cut(str(obj.get("answer", "")), where,
                                                                          "answer", notes),
                    _cut(str(obj.get("condensed", "")), where, "condensed question", notes))
    raise ConversationError(f"{where}: a turn is a question string or an object with a \"question\"")


def parse_turns(text: str, name: str = "history", notes: list[str] | None = None) -> list[Turn]:
    """A JSON list of turns, JSONL (one turn per line), or plain text (one question per line). Each question and
    answer is cut at MAX_TURN_CHARS; `notes` hears each cut."""
    body = text.strip()
    if not body:
        return []
    if body.startswith("["):
        try:
            check_depth(body, name=name)
            data = json.loads(body)
        except FileProblem as exc:
            raise ConversationError(str(exc)) from None
        except json.JSONDecodeError as exc:
            raise ConversationError(f"{name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, list):
            raise ConversationError(f"{name}: a JSON history is a list of turns")
        return [_turn(o, f"{name} item {i}", notes) for i, o in enumerate(data, 1)][-MAX_TURNS:]
    out = []
    for n, line in enumerate(body.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                check_depth(line, name=f"{name} line {n}")
                out.append(_turn(json.loads(line), f"{name} line {n}", notes))
            except FileProblem as exc:
                raise ConversationError(str(exc)) from None
            except json.JSONDecodeError as exc:
                raise ConversationError(f"{name} line {n}: not valid JSON ({exc.msg})") from None
        else:
            out.append(Turn(_cut(line, f"{name} line {n}", "question", notes)))
    return out[-MAX_TURNS:]


def load_turns(path: str | Path, notes: list[str] | None = None) -> list[Turn]:
    """A history file through the checked reader (a regular file of at most MAX_HISTORY_BYTES, opened
    non-blocking: a FIFO or the zero device is a message, not a hang or a MemoryError)."""
    p = Path(path)
    try:
        return parse_turns(read_text_checked(p, max_bytes=MAX_HISTORY_BYTES, what="history file"), p.name, notes)
    except FileProblem as exc:
        raise ConversationError(f"{exc} (a history file is a JSON list, JSON lines or plain questions, one per "
                                "line)") from None


def dump_turns(turns: Sequence[Turn]) -> str:
    return json.dumps([{"question": t.question, "answer": t.answer, **({"condensed": t.condensed} if t.condensed
                                                                       else {})} for t in turns[-MAX_TURNS:]],
                      ensure_ascii=False, indent=1)


def save_turns(path: Path, turns: Sequence[Turn]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_turns(turns) + "\n", encoding="utf-8")


_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def session_path(db: str | Path, session: str, workspace: str) -> Path:
    """Where a named CLI conversation lives: in its workspace's folder beside the database (an in-memory database:
    under the working directory), so one workspace's follow-ups never read another's turns and a workspace delete
    removes its sessions."""
    if not _ID.fullmatch(session):
        raise ConversationError("a session id is 1-64 letters, digits, '-' or '_'")
    return workspace_dir(db, workspace) / "sessions" / f"{session}.json"
