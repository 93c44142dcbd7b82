"""Talking to the upstream: the connection pool and its transport, one request's calls with retries and backoff, the
ledger of calls and tokens, response bodies and streams read within bounds, SSE framing, the headers sent and
relayed, the operator's key kept out of every answer, and the mapping of transport errors.

It may import the shared modules (errors, json_text, budget) and nothing of edge/, routes/ or shadow/."""
