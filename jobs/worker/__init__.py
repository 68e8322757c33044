"""What runs in an RQ worker: the pipeline and its parts, attempts and their fence, progress,
checkpoints, the worker classes (fair share, crash recovery), maintenance, reconciliation and
housekeeping."""
