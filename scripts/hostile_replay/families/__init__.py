"""The families of hostile cases, one module each, in the order they run."""

from __future__ import annotations

from hostile_replay.case import Case
from hostile_replay.families.bodies import body_cases
from hostile_replay.families.http_layer import http_cases
from hostile_replay.families.keys import key_cases
from hostile_replay.families.overrides import override_cases
from hostile_replay.families.paths import path_cases
from hostile_replay.families.pipeline_reports import pipeline_report_cases
from hostile_replay.families.shadow_policy import shadow_policy_cases
from hostile_replay.families.shutdown import shutdown_cases
from hostile_replay.families.strategy import strategy_cases
from hostile_replay.families.upstream import upstream_cases
from hostile_replay.families.upstream_edges import upstream_edge_cases

__all__ = ["all_cases"]


def all_cases() -> list[Case]:
    """Client-side families first; the hostile upstream and the heavy bodies late; shutdown last (it stops the
    proxy)."""
    return [*path_cases(), *override_cases(), *key_cases(), *http_cases(), *strategy_cases(), *pipeline_report_cases(),
            *upstream_cases(), *upstream_edge_cases(), *body_cases(), *shadow_policy_cases(),
            *shutdown_cases()]  # fmt: skip
