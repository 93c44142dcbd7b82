"""Deployment artefacts: every kustomize overlay renders and validates against the Kubernetes schemas, with the
probes, grace and scaling the proxy needs; the policy file and the shadow sink are mounted where the settings
point; the Dockerfile passes hadolint."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contextlift.proxy.policy import load_policy
from contextlift.strategies import build_registry, parse_selection
from tests.deploy.kustomize import DEPLOY, PROXY_OVERLAYS, ROOT, render

BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.32.0"
PROXY_KINDS = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor"}


def by_kind(overlay: str) -> dict[str, list[dict[str, Any]]]:
    documents: dict[str, list[dict[str, Any]]] = {}
    for document in render(DEPLOY / "overlays" / overlay):
        documents.setdefault(document["kind"], []).append(document)
    return documents


def pod_environment(documents: dict[str, list[dict[str, Any]]], pod_name: str) -> dict[str, str]:
    """The environment the proxy's container starts with: its ConfigMap, then its own `env` (kubelet's `$(VAR)`
    expansion, the pod's name from the downward API; Secret references left out)."""
    container = documents["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    (source,) = container["envFrom"]
    environment = dict(config_map(documents, source["configMapRef"]["name"])["data"])
    for variable in container["env"]:
        if "value" in variable:
            environment[variable["name"]] = re.sub(r"\$\((\w+)\)", lambda m: environment[m[1]], variable["value"])
        elif variable["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.name":
            environment[variable["name"]] = pod_name
    return environment


def config_map(documents: dict[str, list[dict[str, Any]]], name: str) -> dict[str, Any]:
    (found,) = [d for d in documents["ConfigMap"] if d["metadata"]["name"] == name]
    return found


def mounted_at(documents: dict[str, list[dict[str, Any]]], path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proxy container's volume mount holding `path`, and the pod's volume behind it."""
    pod = documents["Deployment"][0]["spec"]["template"]["spec"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if path.is_relative_to(m["mountPath"])]
    assert mounts, f"{path} is on no volume: the root filesystem is read-only"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return mount, volume


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_overlay_renders_and_validates(overlay: str, tmp_path: Path) -> None:
    documents = render(DEPLOY / "overlays" / overlay)
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(yaml.safe_dump_all(documents))
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(rendered)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert PROXY_KINDS <= {d["kind"] for d in documents} <= PROXY_KINDS | {"PersistentVolumeClaim"}


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_deployment_probes_grace_and_config(overlay: str) -> None:
    documents = by_kind(overlay)
    pod = documents["Deployment"][0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/startupz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = config_map(documents, container["envFrom"][0]["configMapRef"]["name"])["data"]
    assert pod["terminationGracePeriodSeconds"] > float(config["CONTEXTLIFT_SHUTDOWN_GRACE"])
    secrets = {v["name"]: v["valueFrom"]["secretKeyRef"]["name"] for v in container["env"] if "secretKeyRef" in
               v.get("valueFrom", {})}  # fmt: skip
    assert secrets == {"CONTEXTLIFT_UPSTREAM_API_KEY": "contextlift-upstream"}
    device = config["CONTEXTLIFT_EMBEDDING_DEVICE"]
    assert device == ("cuda" if overlay == "gpu" else "cpu")
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == (overlay == "gpu")
    monitor = documents["ServiceMonitor"][0]["spec"]
    labels = documents["Service"][0]["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["endpoints"][0]["path"] == "/metrics"
    assert documents["HorizontalPodAutoscaler"][0]["spec"]["scaleTargetRef"]["name"] == "contextlift"


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_pod_environment_loads_as_settings(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlift.proxy import Settings

    for name, value in pod_environment(by_kind(overlay), "contextlift-7d9f-x2x4q").items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.shadow_rate == (0.05 if overlay == "cpu-shadow" else 0)
    assert settings.shadow_strategies == ["reorder; order=promote", "medoid; k=3"]
    assert settings.shadow_sink == Path("/var/lib/contextlift/shadow/contextlift-7d9f-x2x4q.jsonl")
    assert settings.policy_file == "/etc/contextlift/policy/policy.toml"


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_policy_file_is_the_mounted_configmap_and_validates(overlay: str, tmp_path: Path) -> None:
    documents = by_kind(overlay)
    path = Path(pod_environment(documents, "pod")["CONTEXTLIFT_POLICY_FILE"])
    mount, volume = mounted_at(documents, path)
    assert mount.get("readOnly") is True
    assert "subPath" not in mount, "a subPath mount never sees an edit of its ConfigMap"
    text = config_map(documents, volume["configMap"]["name"])["data"][str(path.relative_to(mount["mountPath"]))]
    written = tmp_path / path.name
    written.write_text(text)
    registry = build_registry()
    policy = load_policy(written, lambda selection, param: registry.resolve(parse_selection(selection), {}))
    assert policy.rules == ()


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_each_replica_writes_its_own_shadow_sink_on_a_writable_volume(overlay: str) -> None:
    documents = by_kind(overlay)
    sinks = {pod: Path(pod_environment(documents, pod)["CONTEXTLIFT_SHADOW_SINK"]) for pod in ("pod-a", "pod-b")}
    assert sinks["pod-a"] != sinks["pod-b"]
    mount, volume = mounted_at(documents, sinks["pod-a"])
    assert not mount.get("readOnly")
    assert mounted_at(documents, sinks["pod-b"])[0] == mount
    if overlay == "cpu-shadow":
        claim = volume["persistentVolumeClaim"]["claimName"]
        (pvc,) = [d for d in documents["PersistentVolumeClaim"] if d["metadata"]["name"] == claim]
        assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
        pod = documents["Deployment"][0]["spec"]["template"]["spec"]
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    else:
        assert volume == {"name": "shadow", "emptyDir": {}}


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([str(BIN / "hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_entrypoint_is_the_cli_and_healthcheck_is_a_command_we_test() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["contextlift"]' in text
    assert 'CMD ["contextlift", "healthcheck"]' in text
    assert "USER 10001" in text
