"""Evaluation: the papers' metrics and benchmark data (Lost in the Middle's files and prompts). The runner
that replays them through the proxy and writes the report is still to come."""

__all__: list[str] = []
