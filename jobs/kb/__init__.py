"""The knowledge base: a document's chunks, postings and vectors staged and flipped atomically,
search over them, the pipeline version they were made with, and migrations of its layout."""
