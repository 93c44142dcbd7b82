"""What the proxy tells its operator: Prometheus metrics, structured logs and OpenTelemetry traces.

It imports nothing of the proxy but for type hints of the request record; everything else may import it."""
