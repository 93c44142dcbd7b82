"""Deployment artefacts: both kustomize overlays render and validate against the Kubernetes schemas, with
the probes, grace and scaling the proxy needs; the Dockerfile passes hadolint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.32.0"


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render deploy/"
    out = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy" / "overlays" / overlay)],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_overlay_renders_and_validates(overlay: str, tmp_path: Path) -> None:
    documents = render(overlay)
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(yaml.safe_dump_all(documents))
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(rendered)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = {d["kind"] for d in documents}
    assert kinds == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler",
                     "ServiceMonitor"}  # fmt: skip


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_deployment_probes_grace_and_config(overlay: str) -> None:
    documents = {d["kind"]: d for d in render(overlay)}
    pod = documents["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/startupz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = documents["ConfigMap"]["data"]
    assert pod["terminationGracePeriodSeconds"] > float(config["CONTEXTLIFT_SHUTDOWN_GRACE"])
    assert container["envFrom"][0]["configMapRef"]["name"] == documents["ConfigMap"]["metadata"]["name"]
    assert container["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "contextlift-upstream"
    device = config["CONTEXTLIFT_EMBEDDING_DEVICE"]
    assert device == ("cuda" if overlay == "gpu" else "cpu")
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == (overlay == "gpu")
    monitor = documents["ServiceMonitor"]["spec"]
    labels = documents["Service"]["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["endpoints"][0]["path"] == "/metrics"
    assert documents["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] == "contextlift"


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_the_configmap_loads_as_settings_with_shadow_off(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from proxy import Settings

    config = {d["kind"]: d for d in render(overlay)}["ConfigMap"]["data"]
    for name, value in config.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.shadow_rate == 0
    assert settings.shadow_strategies == ["reorder", "medoid; k=3"]
    assert str(settings.shadow_sink).startswith("/tmp/")


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([str(BIN / "hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_entrypoint_is_the_cli_and_healthcheck_is_a_command_we_test() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["contextlift"]' in text
    assert 'CMD ["contextlift", "healthcheck"]' in text
    assert "USER 10001" in text
