"""bench/ and train/ use only core's public names: no `from core.x import _private`, no `module._private` on a core
module they imported (a private name may change with no notice; what a bench needs is made public)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    core_modules: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("core"):
            for a in node.names:
                if a.name.startswith("_"):
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {a.name}")
                else:
                    core_modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            core_modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("core")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in core_modules):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    return out


def test_the_scan_sees_a_private_import(tmp_path: Path) -> None:
    f = ROOT / "bench" / "_scan_probe_tmp.py"
    try:
        f.write_text("from core.text import _tokens, tokenize\nfrom core.route import router\nrouter._term('x')\n")
        assert [u.split(": ", 1)[1] for u in private_uses(f)] == ["from core.text import _tokens", "router._term"]
    finally:
        f.unlink()


def test_bench_and_train_use_only_public_core_names() -> None:
    files = sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "train").glob("*.py"))
    found = [u for f in files for u in private_uses(f)]
    assert not found, "private core names used outside core (make them public):\n" + "\n".join(found)
