"""Tests of what the proxy tells its operator (proxy/observability/): metrics, logs, traces."""
