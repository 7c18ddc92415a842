"""Retrieval stages: BM25, dense cosine, and rank fusion."""
