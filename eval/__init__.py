"""Evaluation: replays the positional benchmarks of the papers through the proxy (see issue "Evaluation")."""

__all__: list[str] = []
