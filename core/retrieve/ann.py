"""Approximate nearest neighbours for large corpora: an HNSW graph (hnswlib) over one model's vectors, persisted beside
the database with the model id, updated in place when chunks come and go, rebuilt when its model or file is wrong.

Why: the exact scan (core.retrieve.dense) reads every vector per query, linear in the corpus. Above a size threshold
the dense list asks the graph for the k nearest keys and scores those exactly against the stored vectors, so its scores
stay the exact cosines and only recall can differ (bench/results/ann.json: recall@50 against the exact scan, latency
and memory; bench/results/ann_compare.json: hnswlib against usearch (f16) at the same settings on 100k vectors
anchored on real embeddings, both built in one run: hnswlib recalled more and searched faster, usearch's process
grew less; at 1M the graph's recall is the binding target, so hnswlib ships)."""
from __future__ import annotations

import hashlib
import json
import math
import threading
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.store.workspaces import workspace_tag

# Below this many vectors the exact scan is fast enough and exact: no graph is built. The threshold is where the scan
# takes half the dense-search budget on this machine (scan costs per size: bench/results/ann_sweep_tune.json and
# ann_sweep_tune_1m.json), so a busy machine still fits.
ANN_MIN_CHUNKS = 30_000
# HNSW settings, chosen on bench/ann.py's vectors anchored on real MiniLM passage embeddings and queried with real
# questions, 'tune' half (ann_calibrate.json for the generator; ann_sweep_tune.json at 100k, ann_sweep_tune_1m.json and
# the build comparison in docs/measured.md at 1M); reported on the 'report' half (ann.json). Links per node (M) 32 and
# build width 256: at 1M on the tune half a sparser graph left some questions at recall 0 whatever the query width
# (ann_sweep_tune_1m_m24.json: real questions lie far from every passage and the greedy walk can end in the wrong
# neighbourhood). The query side: the graph returns CANDIDATES_PER_K x k keys (more than k
# added no recall at any width: hnswlib's inner products are already exact) and walks with a query width of EF_PER_K x k
# at EF_REFERENCE_SIZE vectors, times (n / EF_REFERENCE_SIZE) ** EF_GROWTH above it. The rule: the smallest widths with
# recall@50 >= 0.995 on the tune half at both sizes, in the bench's own runs of the shipped build (ann_sweep_tune.json,
# ann_sweep_tune_1m.json): the width grows about linearly with n, still far fewer vectors read than the exact scan.
CONNECTIVITY = 32
EXPANSION_ADD = 256
EF_PER_K = 8
CANDIDATES_PER_K = 1
EF_REFERENCE_SIZE = 100_000
EF_GROWTH = 1.05  # log10 of the widths chosen at 1M and 100k (4,500 / 400) over one decade of vectors
FORMAT = 3  # bumped when the file layout or the build settings change: an older file is rebuilt


def candidates(k: int) -> int:
    """Keys the graph proposes for a top-k, rescored exactly (CANDIDATES_PER_K x k: k since the tune-half sweep found
    no recall in asking for more at the same width)."""
    return max(1, CANDIDATES_PER_K * k)


def expansion(n: int, k: int) -> int:
    """hnswlib's query width (ef) for `k` keys from a graph of `n` vectors: EF_PER_K per result of the list the
    caller wants (k / CANDIDATES_PER_K) at EF_REFERENCE_SIZE vectors, times (n / that) ** EF_GROWTH above it."""
    grow = max(1.0, (max(n, 1) / EF_REFERENCE_SIZE) ** EF_GROWTH)
    return max(k, math.ceil(EF_PER_K * k / CANDIDATES_PER_K * grow))


@dataclass(frozen=True)
class AnnMeta:
    """What the file beside the graph records: whose vectors it holds and which chunk each key is."""

    model_id: str
    dim: int
    library: str
    connectivity: int
    expansion_add: int
    format: int = FORMAT


def _library() -> str:
    return f"hnswlib {version('hnswlib')}"


class AnnIndex:
    """An HNSW graph over unit vectors whose keys index `ids` (chunk ids, in the order they were added); removed
    chunks keep their key slot as None."""

    def __init__(self, meta: AnnMeta, ids: list[str | None], graph: object) -> None:
        self.meta = meta
        self.ids = ids
        self._live = sum(1 for cid in ids if cid is not None)  # kept by add and remove: len() is on every search
        self._graph = graph
        self._lock = threading.Lock()  # adds and removes; searches run concurrently
        self._ef = 0  # the query width the graph was last set to (set_ef is the graph's, not a search's)

    @staticmethod
    def _new_graph(dim: int, capacity: int) -> object:
        import hnswlib  # lazy: only corpora above the threshold need it

        g = hnswlib.Index(space="ip", dim=dim)
        g.init_index(max_elements=max(1, capacity), ef_construction=EXPANSION_ADD, M=CONNECTIVITY, random_seed=100)
        return g

    @classmethod
    def build(cls, model_id: str, ids: Sequence[str], unit_vectors: np.ndarray, *, threads: int = 0,
              progress: Callable[[int, int], None] | None = None, batch: int = 50_000) -> "AnnIndex":
        dim = int(unit_vectors.shape[1])
        meta = AnnMeta(model_id, dim, _library(), CONNECTIVITY, EXPANSION_ADD)
        idx = cls(meta, [], cls._new_graph(dim, len(ids)))
        idx.add(ids, unit_vectors, threads=threads, progress=progress, batch=batch)
        return idx

    def __len__(self) -> int:
        return self._live

    @property
    def holes(self) -> int:
        """Slots of removed vectors still in the graph (marked deleted)."""
        return len(self.ids) - self._live

    def add(self, ids: Sequence[str], unit_vectors: np.ndarray, *, threads: int = 0,
            progress: Callable[[int, int], None] | None = None, batch: int = 50_000) -> None:
        g = self._graph
        with self._lock:
            start = len(self.ids)
            cap = g.get_max_elements()  # type: ignore[attr-defined]
            if start + len(ids) > cap:  # grown by half at least: small incremental adds do not reallocate each time
                g.resize_index(max(start + len(ids), int(1.5 * cap)))  # type: ignore[attr-defined]
            self.ids.extend(ids)
            self._live += len(ids)
            for at in range(0, len(ids), batch):
                part = np.ascontiguousarray(unit_vectors[at: at + batch], dtype=np.float32)
                keys = np.arange(start + at, start + at + len(part), dtype=np.int64)
                g.add_items(part, keys, num_threads=threads or -1)  # type: ignore[attr-defined]
                if progress:
                    progress(min(at + batch, len(ids)), len(ids))

    def remove(self, chunk_ids: Sequence[str]) -> int:
        gone = set(chunk_ids)
        with self._lock:
            keys = [k for k, cid in enumerate(self.ids) if cid in gone]
            for k in keys:
                self._graph.mark_deleted(k)  # type: ignore[attr-defined]
                self.ids[k] = None
            self._live -= len(keys)
        return len(keys)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """Keys of (about) the k nearest vectors, best first."""
        n = len(self)
        if n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64)
        g = self._graph
        ef = expansion(n, k)
        if ef != self._ef:  # the width follows the graph's size and k; one list size per corpus in practice
            with self._lock:
                g.set_ef(ef)  # type: ignore[attr-defined]
                self._ef = ef
        labels, _ = g.knn_query(np.asarray(query, dtype=np.float32).reshape(1, -1), k=min(k, n),  # type: ignore[attr-defined]
                                num_threads=1)
        return np.asarray(labels[0], dtype=np.int64)

    def memory_bytes(self) -> int:
        """Vectors (float32) and level-0 links of every slot: the bulk of hnswlib's memory."""
        g = self._graph
        return int(g.get_max_elements() * (g.dim * 4 + 2 * g.M * 4 + 16))  # type: ignore[attr-defined]

    # -- persistence -------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """The graph to `path`, its meta and key -> chunk id list to `path`.json (written last: a file without its
        json is never read)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            part = path.with_suffix(".hnsw.tmp")
            self._graph.save_index(str(part))  # type: ignore[attr-defined]
            part.replace(path)  # a reader in another process sees the old file or the new one, never half of one
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps({"meta": asdict(self.meta), "ids": self.ids}))
            tmp.replace(path.with_suffix(".json"))

    @classmethod
    def load(cls, path: Path, model_id: str, dim: int) -> "AnnIndex | None":
        """The saved graph when it exists and holds `model_id`'s vectors of width `dim` in this format; else None."""
        side = path.with_suffix(".json")
        if not path.is_file() or not side.is_file():
            return None
        try:
            data = json.loads(side.read_text())
            meta = AnnMeta(**data["meta"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if (meta.model_id, meta.dim, meta.format, meta.connectivity) != (model_id, dim, FORMAT, CONNECTIVITY):
            return None
        import hnswlib

        graph = hnswlib.Index(space="ip", dim=dim)
        try:
            graph.load_index(str(path))
        except Exception:  # noqa: BLE001 - a damaged file is rebuilt, never trusted
            return None
        if graph.element_count != len(data["ids"]):  # the graph and its id list were not saved together
            return None
        return cls(meta, list(data["ids"]), graph)


@dataclass(frozen=True)
class Sync:
    """What bringing a saved graph in step with the store did."""

    built: bool  # from scratch (missing, another model, damaged or too many removals)
    added: int
    removed: int


def synced(path: Path | None, model_id: str, ids: Sequence[str], unit_vectors: np.ndarray, *,
           save: bool = True) -> tuple[AnnIndex, Sync]:
    """The graph for these vectors: the saved one at `path` brought in step (new chunks added, gone ones removed)
    or a new build; written back when anything changed, unless `save` is false (a read-only database's reader)."""
    dim = int(unit_vectors.shape[1])
    old = AnnIndex.load(path, model_id, dim) if path is not None else None
    if old is not None:
        live = {cid for cid in old.ids if cid is not None}
        now = set(ids)
        gone = live - now
        # Removals leave holes (marked-deleted slots) that add up across syncs: past a fifth of the graph, rebuild.
        if old.holes + len(gone) <= 0.2 * max(1, len(old.ids)):
            row = {cid: i for i, cid in enumerate(ids)}
            new = [cid for cid in ids if cid not in live]
            removed = old.remove(sorted(gone)) if gone else 0
            if new:
                old.add(new, unit_vectors[[row[c] for c in new]])
            if (new or removed) and path is not None and save:
                old.save(path)
            return old, Sync(False, len(new), removed)
    idx = AnnIndex.build(model_id, ids, unit_vectors)
    if path is not None and save:
        idx.save(path)
    return idx, Sync(True, len(ids), 0)


def ann_path(folder: Path, workspace: str, model_id: str, variant: str) -> Path:
    """One file per (workspace, model, text variant), its name safe for any model id."""
    tag = hashlib.sha256(f"{workspace}\x1f{model_id}\x1f{variant}".encode()).hexdigest()[:16]
    return folder / f"dense-{workspace_tag(workspace)}-{tag}.hnsw"  # the workspace tag: a delete finds its files
