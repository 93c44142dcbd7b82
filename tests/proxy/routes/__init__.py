"""Tests of the routes (proxy/routes/): chat completions with strategies, streams relayed, the rest of /v1 forwarded,
response headers, detection reported."""
