"""Runtime observability: the Prometheus metrics the serving process exports."""
