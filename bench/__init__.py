"""Benchmarks of Intake: `python -m bench` (or `make bench`).

Every figure but one is a ratio against a baseline measured in the same run, interleaved with
the subject where it can be, so that a noisy machine's drift cancels out: the web side against
bare routes served by the same gunicorn process, the pipeline against bare RQ jobs on the same
workers, 4 workers against 1, a batch and a search against one task. See docs/benchmarks.md.
"""
