"""Recompute the `measured` section of existing results files from their bench's Table declaration, without
re-running the bench (the numbers stay those of the stored run; only their rendering is refreshed). For a merge
that brings a results file written before its bench declared its table, or a renderer change.

    .venv/bin/python bench/remeasure.py bench.tables:MEASURED_TABLES bench/results/tables.json [...]
"""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench._common import table_section  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    module, _, name = argv[0].partition(":")
    table = getattr(importlib.import_module(module), name)
    for file in argv[1:]:
        path = Path(file)
        payload = json.loads(path.read_text())
        payload["measured"] = table_section(table, payload, path.name, payload)
        path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
        print(f"{path}: measured section from {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
