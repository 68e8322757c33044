"""batch_poll_ratio: GET /api/batches/<id> of a 200-task batch against GET /api/tasks/<id>.

Both are what a page or a script polls; the batch answers every task in ONE response
(docs/architecture.md §5), so it costs more than one task, and the goal bounds how much more. The
batch is the 200 documents of the last 4-worker scaling run, all succeeded, so every record carries
its steps, result and timings (the largest a task record gets); the single task is one of them.
Sequential requests without If-None-Match on one keep-alive session each; rounds of each side
alternate AB, BA, …; the figure is the ratio of the pooled medians (per-round ratios printed).
"""

from __future__ import annotations

from typing import Any

from bench import measure
from bench.servers import Services

WARMUP = 10
ROUNDS = 16
PER_ROUND = 8


def run(svc: Services, batch_id: str, task_id: str) -> dict[str, Any]:
    batch_url, task_url = f"{svc.base}/api/batches/{batch_id}", f"{svc.base}/api/tasks/{task_id}"
    sb, st = measure.session(), measure.session()
    first = sb.get(batch_url, timeout=30)
    size, tasks = len(first.content), len(first.json()["tasks"])
    task_size = len(st.get(task_url, timeout=30).content)
    figures = measure.latency_ratio(
        (sb, batch_url), (st, task_url), warmup=WARMUP, rounds=ROUNDS, per_round=PER_ROUND
    )
    sb.close()
    st.close()
    return {
        **figures,
        "tasks": tasks,
        "batch_bytes": size,
        "task_bytes": task_size,
    }
