"""Deployment artefacts: every kustomize overlay renders and validates against the Kubernetes schemas, with the
probes, grace and scaling the proxy needs; the pod's environment loads as the settings it means; the policy file and
the shadow sink are mounted where the settings point; the Dockerfile passes hadolint."""

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
from tests.deploy.kustomize import (
    DEPLOY,
    PROXY_OVERLAYS,
    ROOT,
    SHADOW_OVERLAYS,
    STORE_OVERLAYS,
    Documents,
    by_kind,
    config_map,
    named,
    pod_environment,
    proxy_container,
    render,
)

BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.32.0"
PROXY_KINDS = {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor"}
STORE_KINDS = {"StatefulSet", "NetworkPolicy"}
"""What components/shadow-redis adds: Redis and who may reach it (its Service is a Service)."""
REDIS_PASSWORD = "0123456789abcdef"
"""The `contextlift-redis` Secret's password, as a test gives it (the operator creates the Secret)."""


def mounted_at(documents: Documents, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proxy container's volume mount holding `path`, and the pod's volume behind it."""
    pod = named(documents, "Deployment", "contextlift")["spec"]["template"]["spec"]
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
    kinds = {d["kind"] for d in documents}
    assert kinds >= PROXY_KINDS
    assert kinds - PROXY_KINDS <= (STORE_KINDS if overlay in STORE_OVERLAYS else {"PersistentVolumeClaim"})


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_deployment_probes_grace_and_config(overlay: str) -> None:
    documents = by_kind(overlay)
    pod = named(documents, "Deployment", "contextlift")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/startupz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = config_map(documents, container["envFrom"][0]["configMapRef"]["name"])["data"]
    assert pod["terminationGracePeriodSeconds"] > float(config["CONTEXTLIFT_SHUTDOWN_GRACE"])
    secrets = {v["name"]: v["valueFrom"]["secretKeyRef"]["name"] for v in container["env"] if "secretKeyRef" in
               v.get("valueFrom", {})}  # fmt: skip
    store = {"REDIS_PASSWORD": "contextlift-redis"} if overlay in STORE_OVERLAYS else {}
    assert secrets == {"CONTEXTLIFT_UPSTREAM_API_KEY": "contextlift-upstream", **store}
    device = config["CONTEXTLIFT_EMBEDDING_DEVICE"]
    assert device == ("cuda" if overlay == "gpu" else "cpu")
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == (overlay == "gpu")
    monitor = documents["ServiceMonitor"][0]["spec"]
    selected = [s["metadata"]["name"] for s in documents["Service"] if
                monitor["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]  # fmt: skip
    assert selected == ["contextlift"]
    assert monitor["endpoints"][0]["path"] == "/metrics"
    assert documents["HorizontalPodAutoscaler"][0]["spec"]["scaleTargetRef"]["name"] == "contextlift"


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_pod_environment_loads_as_settings(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlift.proxy import Settings

    secrets = {("contextlift-redis", "password"): REDIS_PASSWORD}
    for name, value in pod_environment(by_kind(overlay), "contextlift-7d9f-x2x4q", secrets).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.shadow_rate == (0.05 if overlay in SHADOW_OVERLAYS else 0)
    assert settings.shadow_strategies == ["reorder; order=promote", "medoid; k=3"]
    assert settings.policy_file == "/etc/contextlift/policy/policy.toml"
    if overlay in STORE_OVERLAYS:
        assert settings.shadow_store is not None
        assert settings.shadow_store.get_secret_value() == f"redis://:{REDIS_PASSWORD}@contextlift-redis:6379/0"
        assert settings.shadow_sink is None, "the stream is the one copy of the records"
    else:
        assert settings.shadow_store is None
        assert settings.shadow_sink == Path("/var/lib/contextlift/shadow/contextlift-7d9f-x2x4q.jsonl")


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_every_contextlift_variable_of_the_pod_is_a_setting(overlay: str) -> None:
    # Settings ignores a CONTEXTLIFT_ variable it has no field for: a misspelt one would be dropped in silence.
    from contextlift.proxy import Settings

    documents = by_kind(overlay)
    known = {f"CONTEXTLIFT_{name.upper()}" for name in Settings.model_fields}
    names = {v["name"] for v in proxy_container(documents)["env"]} | set(pod_environment(documents, "pod"))
    assert {n for n in names if n.startswith("CONTEXTLIFT_")} - known == set()


def test_the_store_overlays_are_those_whose_replicas_name_a_store() -> None:
    naming = {o for o in PROXY_OVERLAYS if "CONTEXTLIFT_SHADOW_STORE" in pod_environment(by_kind(o), "pod")}
    assert naming == STORE_OVERLAYS
    assert set(PROXY_OVERLAYS) >= SHADOW_OVERLAYS


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


@pytest.mark.parametrize("overlay", [o for o in PROXY_OVERLAYS if o not in STORE_OVERLAYS])
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
        pod = named(documents, "Deployment", "contextlift")["spec"]["template"]["spec"]
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    else:
        assert volume == {"name": "shadow", "emptyDir": {}}


def test_the_deploy_page_lists_every_overlay() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    assert set(re.findall(r"^\| `deploy/overlays/([\w-]+)` \|", page, re.MULTILINE)) == set(PROXY_OVERLAYS)


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([str(BIN / "hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_entrypoint_is_the_cli_and_healthcheck_is_a_command_we_test() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["contextlift"]' in text
    assert 'CMD ["contextlift", "healthcheck"]' in text
    assert "USER 10001" in text
