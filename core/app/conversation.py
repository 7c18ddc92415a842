"""A conversation's turns as the Search Lab and the command line keep them: read, written and made from a trace."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

from core.store.workspaces import workspace_dir
from core.types import Stage, Trace, Turn


class ConversationError(ValueError):
    """A history file or session that cannot be read; the message is fit for the user."""


MAX_TURNS = 50  # a conversation keeps its newest turns; condensing reads only the last few anyway


def turn_of(question: str, trace: Trace) -> Turn:
    """The turn a query adds: the question as asked, the standalone question it ran as (when condensed), the answer."""
    cond = trace.stage(Stage.CONDENSE)
    condensed = str(cond.info.get("condensed", "")) if cond is not None and cond.skipped is None else ""
    return Turn(question, trace.answer.text if trace.answer is not None else "",
                condensed if condensed and condensed != question else "")


def _turn(obj: object, where: str) -> Turn:
    if isinstance(obj, str):
        return Turn(obj)
    if isinstance(obj, dict) and isinstance(obj.get("question"), str):
        return Turn(obj["question"], str(obj.get("answer", "")), str(obj.get("condensed", "")))
    raise ConversationError(f"{where}: a turn is a question string or an object with a \"question\"")


def parse_turns(text: str, name: str = "history") -> list[Turn]:
    """A JSON list of turns, JSONL (one turn per line), or plain text (one question per line)."""
    body = text.strip()
    if not body:
        return []
    if body.startswith("["):
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ConversationError(f"{name}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        return [_turn(o, f"{name} item {i}") for i, o in enumerate(data, 1)][-MAX_TURNS:]
    out = []
    for n, line in enumerate(body.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                out.append(_turn(json.loads(line), f"{name} line {n}"))
            except json.JSONDecodeError as exc:
                raise ConversationError(f"{name} line {n}: not valid JSON ({exc.msg})") from None
        else:
            out.append(Turn(line))
    return out[-MAX_TURNS:]


def load_turns(path: str | Path) -> list[Turn]:
    p = Path(path)
    try:
        return parse_turns(p.read_text(encoding="utf-8"), p.name)
    except OSError as exc:
        raise ConversationError(f"cannot read {p}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConversationError(f"cannot read {p}: not UTF-8 text (a history file is JSON lines or plain questions, "
                                "one per line)") from None


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
