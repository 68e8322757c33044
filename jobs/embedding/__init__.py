"""Chunks to vectors: the local and HTTP embedders, and the embedding budget every worker of
the fleet shares."""
