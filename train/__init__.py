"""One-command recipes that fit the artefacts shipped in core/models/data/ on public data, each with provenance."""
