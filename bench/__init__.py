"""Benchmarks of Intake's web side: `python -m bench` (or `make bench`).

Every figure is a ratio against a bare baseline served by the same gunicorn process and measured
in the same run, interleaved with the subject, so that a noisy machine's drift cancels out.
"""
