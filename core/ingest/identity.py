"""Stable chunk identity across edits: content-defined chunk ids under the document's lineage id, and what a new
version of a document keeps, changes, adds and removes against the stored one.

Which and why: chunk ids are content-defined, not aligned. A chunk's id is its document's id and a hash of its
heading path and text (a repeat of the same text in the same document gets an occurrence suffix), so:
- the same content always gets the same id, whichever engine cut it (the local engine, the sandbox worker, Ray
  workers) and whatever happened before: an incremental path and a fresh build of the same files agree, and nothing
  has to read the old chunks to name the new ones;
- a chunk that did not change keeps its id, so the rows keyed by the id (vectors, contexts, graph mentions) stay.
A document keeps its id across edits (the new version inherits the stored version's id; a new file gets
`doc_id_for(name, content hash)` as before), so its unchanged chunks' ids are the same strings after the edit.
The one alignment kept is for chunks stored before this scheme (positional ids `doc-0000`): a new chunk whose content
key equals an old chunk's takes the old id (`adopt_ids`), so an existing database keeps its vectors, contexts and
graph rows on the first edit too. Classifying a version's chunks (`diff_chunks`) aligns the id sequences (difflib):
equal ids are unchanged, a replaced run counts changed (pairs) and new or removed (the excess)."""
from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, replace
from typing import Sequence

from core.types import Chunk

KEY_CHARS = 12  # hex digits of the content hash in a chunk id: 48 bits, per document


def content_key(text: str, heading_path: Sequence[str]) -> str:
    """The content address of a chunk: its heading path and its text (a heading change changes its context)."""
    raw = "\x1f".join(heading_path) + "\x1e" + text
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_CHARS]


def content_ids(doc_id: str, keys: Sequence[str]) -> list[str]:
    """Chunk ids from content keys, in document order: `doc-key`, and `doc-key.k` for the k-th repeat (k >= 1) of
    the same key in the document, so repeated boilerplate still gets distinct, stable ids."""
    seen: dict[str, int] = {}
    out = []
    for k in keys:
        n = seen.get(k, 0)
        seen[k] = n + 1
        out.append(f"{doc_id}-{k}" if n == 0 else f"{doc_id}-{k}.{n}")
    return out


def _occurrence_keys(chunks: Sequence[Chunk]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for c in chunks:
        k = content_key(c.text, c.heading_path)
        out.append((k, seen.get(k, 0)))
        seen[k] = seen.get(k, 0) + 1
    return out


def adopt_ids(chunks: Sequence[Chunk], doc_id: str, previous: Sequence[Chunk]) -> list[Chunk]:
    """The new version's chunks under the lineage id `doc_id`; a chunk whose content (and occurrence) matches a
    stored chunk takes that chunk's id, so ids made before content-defined ids (positional) carry over too."""
    old = dict(zip(_occurrence_keys(previous), (c.chunk_id for c in previous)))
    keys = _occurrence_keys(chunks)
    fresh = content_ids(doc_id, [k for k, _ in keys])
    return [replace(c, chunk_id=old.get(key, fid), doc_id=doc_id) for c, key, fid in zip(chunks, keys, fresh)]


@dataclass(frozen=True)
class ChunkDiff:
    """A new version's chunks against the stored version's: unchanged ids (kept with their vectors, contexts and
    graph rows), changed (an old chunk's place taken by a different one), new and removed."""

    unchanged: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # ids of the new chunks that took a changed chunk's place
    new: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()  # old ids that left without a new chunk in their place

    @property
    def rewritten(self) -> int:
        """New chunk rows that need their own vectors and contexts (changed + new)."""
        return len(self.changed) + len(self.new)

    @property
    def changed_share(self) -> float:
        """The share of the new version that is not an unchanged chunk (0 for an untouched document)."""
        total = len(self.unchanged) + self.rewritten
        return self.rewritten / total if total else 0.0

    def counts(self) -> dict[str, int]:
        return {"unchanged": len(self.unchanged), "changed": len(self.changed), "new": len(self.new),
                "removed": len(self.removed)}


def diff_chunks(old_ids: Sequence[str], new_ids: Sequence[str]) -> ChunkDiff:
    """Align the stored and the new id sequences: equal runs are unchanged, a replaced run pairs old and new chunks
    (changed) and its excess is new or removed; an id kept but moved still counts unchanged."""
    old_ids, new_ids = list(old_ids), list(new_ids)
    kept = set(old_ids) & set(new_ids)
    changed: list[str] = []
    new: list[str] = []
    removed: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_ids, new_ids, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        # An id kept but moved shows up inside a block: it is unchanged, not paired with anything.
        a = [i for i in old_ids[i1:i2] if i not in kept]
        b = [i for i in new_ids[j1:j2] if i not in kept]
        pairs = min(len(a), len(b))
        changed += b[:pairs]
        new += b[pairs:]
        removed += a[pairs:]
    return ChunkDiff(tuple(i for i in new_ids if i in kept), tuple(changed), tuple(new), tuple(removed))
