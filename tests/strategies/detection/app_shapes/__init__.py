"""Tests of reading the popular RAG apps' request bodies (tests/strategies/app_prompts/): never wrong, their own
templates' proofs, round trips and linear time."""
