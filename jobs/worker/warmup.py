"""Run the pipeline's steps on a few tiny documents, in memory, before a worker forks its first
work-horse.

RQ forks a work-horse per job from the worker process. What a first run of the pipeline does
once (lazy imports, compiled regular expressions, first-call set-up in numpy, json and the
other libraries the job uses), a fork of a parent that never ran it does again for every job;
done once in the parent, every fork inherits it (docs/benchmarks.md has what it saves).

The steps that cost a first call run here without Redis: parsing (every parser's library
imported; the text read in this process, as the sandbox's child would), chunking, the local
embedder (never a configured service: a worker's start calls nothing) and the postings the
index step writes. A warm-up that fails is reported and otherwise ignored: the worker starts
either way.
"""
from __future__ import annotations

import logging

WARM_UP_DOCUMENTS = 3
_TEXT = b"A few words to warm the pipeline up. They are parsed, chunked, embedded and indexed.\n"


def warm_up() -> int:
    """Take WARM_UP_DOCUMENTS tiny documents through every step but Redis; how many made it."""
    from jobs.embedding.embedders import LocalEmbedder
    from jobs.kb import postings
    from jobs.text.chunking import chunk_blocks
    from jobs.text.parsers import import_parsers, parse_document

    import_parsers()
    embedder, done = LocalEmbedder(), 0
    for n in range(WARM_UP_DOCUMENTS):
        parsed = parse_document(_TEXT * (n + 1), "md" if n % 2 else "txt")
        chunks = chunk_blocks(parsed.blocks, 1000, 150)
        rows = embedder.embed([chunk.text for chunk in chunks])
        done += bool(postings.encode(rows, 0).rows)
    return done


def warm_up_or_warn(log: logging.Logger) -> None:
    """`warm_up`, never failing the caller: a worker without it is only slower."""
    try:
        done = warm_up()
    except Exception:
        log.warning("pipeline warm-up failed; jobs will start cold", exc_info=True)
        return
    if done != WARM_UP_DOCUMENTS:
        log.warning("pipeline warm-up: %d of %d documents succeeded", done, WARM_UP_DOCUMENTS)

