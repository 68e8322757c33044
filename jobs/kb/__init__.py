"""The knowledge base: a document's chunks, postings and vectors staged and flipped atomically,
search over them and the pipeline version they were made with (its older layouts are
upgraded by jobs.upgrades.kb_layout)."""
