"""The ground floor: settings, Redis keys and connections, queues, ids, clocks, logs, metrics,
health, and the errors every layer raises. It imports no other package of jobs."""
