"""Tasks and batches: the task record and its state machine, submit (idempotency, limits,
uploads), the lifecycle a person drives (retry, cancel, delete), dead letters, ETAs, the events
recorded for webhooks and the announcements live pages follow."""
