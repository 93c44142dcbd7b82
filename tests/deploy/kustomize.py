"""Rendering deploy/ as a cluster would receive it: `kubectl kustomize` of one kustomization, parsed, and the
environment a rendered container starts with.

Without kubectl the calling test is skipped with the reason; under `CONTEXTLIFT_REQUIRE_DATA=1` (CI, .ci/run) it
fails instead, so CI cannot go green by skipping the manifests' tests."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.benchmark_data import unavailable

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROXY_OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
"""Every overlay that deploys the proxy (cpu, gpu, cpu-shadow ...): found, so a new one is checked too."""
SHADOW_OVERLAYS = {"cpu-shadow", "cpu-shadow-redis"}
"""The overlays that turn shadow evaluation on."""
STORE_OVERLAYS = {"cpu-shadow-redis"}
"""The overlays whose replicas share a shadow store (`CONTEXTLIFT_SHADOW_STORE`, components/shadow-redis)."""
_REFERENCE = re.compile(r"\$\((\w+)\)")

Documents = dict[str, list[dict[str, Any]]]
"""Rendered documents by kind."""
Secrets = Mapping[tuple[str, str], str]
"""Values for a test to give Secrets that the operator creates: (Secret name, key) to value."""


def kustomize(folder: Path) -> str:
    """The YAML `kubectl kustomize folder` renders."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        reason = "kubectl (it carries kustomize) is not on PATH: deploy/ cannot be rendered"
        unavailable(reason)
    return subprocess.run([kubectl, "kustomize", str(folder)], check=True, capture_output=True, text=True).stdout


def render(folder: Path) -> list[dict[str, Any]]:
    """The documents `folder` renders to."""
    return [d for d in yaml.safe_load_all(kustomize(folder)) if d]


def by_kind(overlay: str) -> Documents:
    """The documents of `deploy/overlays/<overlay>`, by kind."""
    documents: Documents = {}
    for document in render(DEPLOY / "overlays" / overlay):
        documents.setdefault(document["kind"], []).append(document)
    return documents


def named(documents: Documents, kind: str, name: str) -> dict[str, Any]:
    """The one document of `kind` called `name`."""
    (found,) = [d for d in documents.get(kind, []) if d["metadata"]["name"] == name]
    return found


def config_map(documents: Documents, name: str) -> dict[str, Any]:
    return named(documents, "ConfigMap", name)


def expand(text: str, environment: Mapping[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion: a reference to a variable that is not defined is left as written."""
    return _REFERENCE.sub(lambda m: environment.get(m[1], m[0]), text)


def container_environment(
    documents: Documents, container: dict[str, Any], pod_name: str, secrets: Secrets | None = None
) -> dict[str, str]:
    """The environment `container` starts with, as the kubelet builds it: its ConfigMaps, then its own `env` in order,
    each value's `$(VAR)` expanded from the variables before it, the pod's name from the downward API, and a Secret's
    key from `secrets` where given (otherwise the variable is not set, as an optional Secret that does not exist
    leaves it)."""
    environment: dict[str, str] = {}
    for source in container.get("envFrom", []):
        environment.update(config_map(documents, source["configMapRef"]["name"])["data"])
    for variable in container.get("env", []):
        source = variable.get("valueFrom", {})
        if "value" in variable:
            environment[variable["name"]] = expand(variable["value"], environment)
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            environment[variable["name"]] = pod_name
        elif "secretKeyRef" in source:
            reference = source["secretKeyRef"]
            value = (secrets or {}).get((reference["name"], reference["key"]))
            if value is not None:
                environment[variable["name"]] = value
    return environment


def proxy_container(documents: Documents) -> dict[str, Any]:
    return named(documents, "Deployment", "contextlift")["spec"]["template"]["spec"]["containers"][0]


def pod_environment(documents: Documents, pod_name: str, secrets: Secrets | None = None) -> dict[str, str]:
    """The environment the proxy's container starts with (`container_environment`)."""
    return container_environment(documents, proxy_container(documents), pod_name, secrets)
