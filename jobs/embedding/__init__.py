"""Chunks to dense vectors: the `Embedder` protocol, the local embedder (no dense model) and the
HTTP one, and the embedding budget every worker of the fleet shares. A chunk's search terms are
no embedding: jobs.text.terms counts them."""
