"""Tests of talking to the upstream (proxy/upstream/): bounds, failures and their mapping, retries and budgets, the
pool, streams' faults, the key guard, remote rankers."""
