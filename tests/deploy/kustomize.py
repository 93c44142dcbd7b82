"""Rendering deploy/ as a cluster would receive it: `kubectl kustomize` of one kustomization, parsed.

Without kubectl the calling test is skipped with the reason; under `CONTEXTLIFT_REQUIRE_DATA=1` (CI, .ci/run) it
fails instead, so CI cannot go green by skipping the manifests' tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.benchmark_data import REQUIRE_ENV

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROXY_OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
"""Every overlay that deploys the proxy (cpu, gpu, cpu-shadow ...): found, so a new one is checked too."""


def kustomize(folder: Path) -> str:
    """The YAML `kubectl kustomize folder` renders."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        reason = "kubectl (it carries kustomize) is not on PATH: deploy/ cannot be rendered"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes that a failure", pytrace=False)
        pytest.skip(reason)
    return subprocess.run([kubectl, "kustomize", str(folder)], check=True, capture_output=True, text=True).stdout


def render(folder: Path) -> list[dict[str, Any]]:
    """The documents `folder` renders to."""
    return [d for d in yaml.safe_load_all(kustomize(folder)) if d]
