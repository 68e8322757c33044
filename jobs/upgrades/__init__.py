"""Code that only moves data an older release left into today's layout, and goes once none is
left: the knowledge base before chunk ids and before BM25 (`kb_layout`), upload sizes kept in
one table for all tenants (`upload_sizes`), documents uploaded before each tenant's library
existed (`library_backfill`).

Why a floor of its own, above tasks: an upgrade imports what it migrates (the knowledge base's
index, the library's scripts), while the layers it upgrades never import it; housekeeping
(jobs.worker) runs every one about once a minute, and `python -m jobs.upgrades.kb_layout` the
knowledge base's before a deploy. Reads that still accept an old format inline (an original an
older release kept in Redis, an old checkpoint) stay with their readers: they are no pass of
their own.
"""
