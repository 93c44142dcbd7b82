"""Shadow evaluation on live traffic: the sampled case kept while the response is sent, the background workers that run
candidates, other document orders and positional probes on it, their budget, and the sink the records go to.

It may import upstream/ (its own pool), observability/ and the shared modules; nothing of routes/ or edge/."""
