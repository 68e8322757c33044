"""The settings module of the Procfile's `rq worker -c jobs.rq_settings`.

Why a module and not `--url $REDIS_URL`: with Sentinel (REDIS_SENTINELS, REDIS_SENTINEL_MASTER)
there is no REDIS_URL to expand; RQ reads REDIS_URL from this module instead, computed as every
Intake process computes it (jobs.core.settings), and builds its client with the worker's
`--connection-class` (jobs.redis_client.WorkerRedis), which understands the Sentinel address.
"""

from jobs.core.settings import Settings

REDIS_URL = Settings.from_env().redis_url
