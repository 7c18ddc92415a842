"""The compression cascade after fusion: rerank, prune, MMR, expand."""
