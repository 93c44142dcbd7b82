"""Tests of shadow evaluation (proxy/shadow/): the response untouched, records and billing, positional probes."""
