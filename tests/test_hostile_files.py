"""A fast slice of the hostile-input bench (bench/hostile.py, archived) in `make test`: one file of every hostile class (small sizes) goes through
ingest; nothing escapes as an exception, each bad file gets its own message, the good ones ingest, and the database
stays consistent (every document has its chunks, every chunk its vector, no orphans)."""
from __future__ import annotations

from pathlib import Path

from core.config import PipelineConfig
from core.ingest.pipeline import ingest_files
from core.ingest.sandbox import ParseSandbox
from core.store import Store
from tests.fakes import HashEmbedder
from tests.hostile_inputs import consistency, hostile_files

MUST_INGEST = {"encoding", "huge_heading", "many_headings", "pdf_object_stream"}
MUST_FAIL = {"docx_bomb", "truncated_pdf", "encrypted_pdf", "garbage_pdf", "fake_docx", "empty", "nul_bytes"}


def test_one_file_per_hostile_class(tmp_path: Path) -> None:
    files = hostile_files(scale=0.02)
    assert len(files) >= 300
    picked: dict[str, tuple[str, bytes, str]] = {}
    for f in files:
        picked[f[2]] = f  # the last of each class: for docx_bomb that is the 2,500-entry zip
    odd = [f for f in files if f[2] == "odd_name"][:8]
    chosen = list(picked.values()) + odd
    store, emb, sandbox = Store(tmp_path / "h.duckdb"), HashEmbedder(), ParseSandbox(timeout_s=10)
    try:
        results = {}
        for name, data, cls in chosen:
            rep = ingest_files([(name, data)], store=store, embedder=emb, config=PipelineConfig(), sandbox=sandbox)
            results[name] = (cls, rep.results[0])
        for name, (cls, r) in results.items():
            if cls in MUST_INGEST:
                assert r.status == "ingested", (name, r.message)
            if cls in MUST_FAIL:
                assert r.status == "error" and r.message.startswith(name), (name, r.message)
        assert all(v == 0 for v in consistency(store, emb.model_id).values())
        names = {d.name for d in store.corpus.documents()}
        assert "'; DROP TABLE documents;--.md" in names and "../../x.txt" in names  # data, not SQL or paths
    finally:
        sandbox.close()
        store.close()
