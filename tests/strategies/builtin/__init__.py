"""Tests of the built-in strategies (strategies/builtin/) and the rankers: reorder and filter, recite and fact on real
recitations, medoid, chain, the executors' prompts."""
