"""What an operator watches: logs (text or JSON), request ids, the access log, Prometheus
metrics, and CORS for browser callers. Nothing here is on the request's path except
cheap reads of what the pipeline already recorded."""
