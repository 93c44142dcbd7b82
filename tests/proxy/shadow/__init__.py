"""Tests of shadow evaluation (proxy/shadow/): the client's response untouched, records and billing, positional probes."""
