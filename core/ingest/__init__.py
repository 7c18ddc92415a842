"""Ingestion: parse -> chunk -> embed -> store, one transaction per document."""
