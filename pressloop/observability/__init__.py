"""Metrics (Prometheus, `metrics.py`), structured logs (`logs.py`), traces (OpenTelemetry,
`tracing.py`) and how metrics are served (`exposition.py`). Below the store and everything
else: the runtime and the API call it, it calls nothing of Pressloop's but its configuration
(docs/operations.md, "Metrics and logs")."""
