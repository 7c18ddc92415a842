"""GraphRAG: entity graph with chunk provenance, entity resolution, Leiden communities, local and global search."""
