"""The overlays with a shadow store (cpu-shadow-redis, from components/shadow-redis): every replica names the Redis
Service in CONTEXTLIFT_SHADOW_STORE with the password of the `contextlift-redis` Secret, never written in a
manifest; only the proxy's pods may reach Redis; Redis runs as non-root on a read-only root, keeps its records on a
ReadWriteOnce claim sized for the stream's bound, and its probes pass against a real redis-server started with the
manifest's own arguments."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.kustomize import (
    DEPLOY,
    STORE_OVERLAYS,
    Documents,
    by_kind,
    container_environment,
    expand,
    named,
    pod_environment,
    proxy_container,
    render,
)
from tests.redis_server import require_redis

REDIS = "contextlift-redis"
"""The name of Redis's StatefulSet, Service, NetworkPolicy and Secret."""
PASSWORD = "0123456789abcdef0123456789abcdef"
"""The Secret's `password`, as a test gives it; the docs create it with `openssl rand -hex 32`."""
SECRETS = {(REDIS, "password"): PASSWORD}
RECORD_BYTES = 2048
"""A record's size without capture, at most (the `shadow_stream_max_records` setting's description)."""
STARTUP_SECONDS = 10.0

pytestmark = pytest.mark.parametrize("overlay", sorted(STORE_OVERLAYS))


def redis_pod(documents: Documents) -> dict[str, Any]:
    return named(documents, "StatefulSet", REDIS)["spec"]["template"]


def redis_container(documents: Documents) -> dict[str, Any]:
    (container,) = redis_pod(documents)["spec"]["containers"]
    return container


def proxy_pod_labels(documents: Documents) -> dict[str, str]:
    labels: dict[str, str] = named(documents, "Deployment", "contextlift")["spec"]["template"]["metadata"]["labels"]
    return labels


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def options(container: dict[str, Any], environment: dict[str, str]) -> dict[str, str]:
    """redis-server's `--name value` arguments, expanded as the kubelet expands them."""
    arguments = [expand(a, environment) for a in container["args"]]
    assert all(a.startswith("--") for a in arguments[::2]), arguments
    return dict(zip((a.removeprefix("--") for a in arguments[::2]), arguments[1::2], strict=True))


def redis_bytes(value: str) -> int:
    """A size as redis.conf writes it: `1k` is 1000 bytes, `1kb` 1024 (and m, mb, g, gb)."""
    match = re.fullmatch(r"(\d+)(?:([kmg])(b?))?", value.lower())
    assert match is not None, value
    number, power, binary = match.groups()
    return int(number) * ((1024 if binary else 1000) ** " kmg".index(power) if power else 1)


def quantity_bytes(value: str) -> int:
    """A Kubernetes quantity in bytes (`1Gi`, `512Mi`, `2G`)."""
    match = re.fullmatch(r"(\d+)(?:([KMGT])(i?))?", value)
    assert match is not None, value
    number, power, binary = match.groups()
    return int(number) * ((1024 if binary else 1000) ** " KMGT".index(power) if power else 1)


def test_the_proxy_names_the_redis_service_and_a_port_it_exposes(overlay: str) -> None:
    documents = by_kind(overlay)
    url = urlsplit(pod_environment(documents, "pod", SECRETS)["CONTEXTLIFT_SHADOW_STORE"])
    assert (url.scheme, url.hostname, url.path) == ("redis", REDIS, "/0")
    service = named(documents, "Service", REDIS)["spec"]
    (port,) = [p for p in service["ports"] if p["port"] == url.port]
    (container_port,) = [p for p in redis_container(documents)["ports"] if p["name"] == port["targetPort"]]
    assert container_port["containerPort"] == 6379
    statefulset = named(documents, "StatefulSet", REDIS)["spec"]
    assert statefulset["serviceName"] == REDIS
    assert statefulset["replicas"] == 1, "one budget: a second Redis would be a second budget"
    assert selects(service["selector"], redis_pod(documents)["metadata"]["labels"])
    assert not selects(service["selector"], proxy_pod_labels(documents))
    proxy_service = named(documents, "Service", "contextlift")["spec"]
    assert not selects(proxy_service["selector"], redis_pod(documents)["metadata"]["labels"])


def test_the_password_comes_from_the_secret_and_is_written_nowhere(overlay: str) -> None:
    documents = by_kind(overlay)
    proxy = {v["name"]: v for v in proxy_container(documents)["env"]}
    redis = {v["name"]: v for v in redis_container(documents)["env"]}
    reference = {"name": REDIS, "key": "password"}
    assert proxy["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {**reference, "optional": True}
    assert redis["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == reference, "Redis never starts without one"
    names = list(proxy)
    assert names.index("REDIS_PASSWORD") < names.index("CONTEXTLIFT_SHADOW_STORE"), "$(VAR) sees only those above"
    assert urlsplit(proxy["CONTEXTLIFT_SHADOW_STORE"]["value"]).password == "$(REDIS_PASSWORD)"
    assert "Secret" not in documents, "the operator creates it, as contextlift-upstream"
    for config in documents["ConfigMap"]:
        assert not [v for v in config["data"].values() if "redis://" in v or "rediss://" in v], config["metadata"]
    # The one password reaches the server, its probes and the proxy's URL.
    url = urlsplit(pod_environment(documents, "pod", SECRETS)["CONTEXTLIFT_SHADOW_STORE"])
    environment = container_environment(documents, redis_container(documents), f"{REDIS}-0", SECRETS)
    assert url.password == options(redis_container(documents), environment)["requirepass"] == PASSWORD
    assert environment["REDISCLI_AUTH"] == PASSWORD


def test_only_the_proxy_pods_reach_redis(overlay: str) -> None:
    documents = by_kind(overlay)
    policy = named(documents, "NetworkPolicy", REDIS)["spec"]
    assert selects(policy["podSelector"]["matchLabels"], redis_pod(documents)["metadata"]["labels"])
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}, "pods of this namespace only"
    assert selects(source["podSelector"]["matchLabels"], proxy_pod_labels(documents))
    jobs = [d["spec"]["template"] for d in render(DEPLOY / "eval") if d["kind"] == "Job"]
    assert jobs
    assert [
        j for j in jobs if selects(source["podSelector"]["matchLabels"], j.get("metadata", {}).get("labels", {}))
    ] == []
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]


def test_no_readwritemany_claim_and_no_file_sink(overlay: str) -> None:
    documents = by_kind(overlay)
    assert "PersistentVolumeClaim" not in documents
    (claim,) = named(documents, "StatefulSet", REDIS)["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "CONTEXTLIFT_SHADOW_SINK" not in pod_environment(documents, "pod", SECRETS)
    pod = named(documents, "Deployment", "contextlift")["spec"]["template"]["spec"]
    assert "shadow" not in {v["name"] for v in pod["volumes"]}
    assert "shadow" not in {m["name"] for m in pod["containers"][0]["volumeMounts"]}


def test_redis_runs_as_non_root_on_a_read_only_root(overlay: str) -> None:
    documents = by_kind(overlay)
    pod = redis_pod(documents)["spec"]
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] != 0
    assert security["fsGroup"] == security["runAsGroup"] != 0, "the fresh claim is writable by redis"
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    container = redis_container(documents)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # Where Redis writes (its append-only file, and the file a rewrite makes) is the claim.
    directory = options(container, {})["dir"]
    (mount,) = [m for m in container["volumeMounts"] if Path(directory).is_relative_to(m["mountPath"])]
    (claim,) = named(documents, "StatefulSet", REDIS)["spec"]["volumeClaimTemplates"]
    assert mount["name"] == claim["metadata"]["name"]
    assert not mount.get("readOnly")


def test_redis_memory_holds_the_stream_and_refuses_rather_than_evicts(overlay: str) -> None:
    from contextlift.proxy import Settings

    documents = by_kind(overlay)
    container = redis_container(documents)
    settings = options(container, {})
    maxmemory = redis_bytes(settings["maxmemory"])
    # Eviction is per key and the stream is one key: every record would go at once.
    assert settings["maxmemory-policy"] == "noeviction"
    records = Settings.model_fields["shadow_stream_max_records"].default
    assert maxmemory >= 2 * records * RECORD_BYTES, "the stream's default bound fits twice over"
    resources = container["resources"]
    assert quantity_bytes(resources["limits"]["memory"]) >= 1.5 * maxmemory, "Redis's overhead and a rewrite's fork"
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert resources["requests"]["cpu"]
    assert (settings["appendonly"], settings["appendfsync"], settings["save"]) == ("yes", "everysec", "")
    (claim,) = named(documents, "StatefulSet", REDIS)["spec"]["volumeClaimTemplates"]
    # The append-only file grows to twice its last rewrite before the next, which writes a new one beside it.
    assert quantity_bytes(claim["spec"]["resources"]["requests"]["storage"]) >= 3 * maxmemory


@contextlib.contextmanager
def redis_as_deployed(documents: Documents, folder: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """redis-server with the manifest's own arguments (the password expanded, the claim's folder and a free loopback
    port in place of /data and 6379), and the container's environment; killed at the end."""
    require_redis()
    container = redis_container(documents)
    environment = container_environment(documents, container, f"{REDIS}-0", SECRETS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = {**options(container, environment), "dir": str(folder), "port": str(port), "bind": "127.0.0.1"}
    arguments = [part for name, value in settings.items() for part in (f"--{name}", value)]
    server = subprocess.Popen(
        [str(shutil.which("redis-server")), *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not ping(port, PASSWORD):
            assert server.poll() is None, "redis-server refused the manifest's arguments"
            assert time.monotonic() < deadline, "redis-server did not answer"
            time.sleep(0.05)
        yield port, environment
    finally:
        server.kill()
        server.wait(10)


def ping(port: int, password: str) -> bool:
    import redis

    client = redis.Redis(port=port, password=password, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def probe_passes(command: list[str], port: int, environment: dict[str, str], folder: Path) -> bool:
    """Whether `command` exits 0 as the kubelet runs it in the container, with redis-cli's port pointed at `port`."""
    shim = folder / "bin"
    shim.mkdir(exist_ok=True)
    cli = shim / "redis-cli"
    cli.write_text(f'#!/bin/sh\nexec {shutil.which("redis-cli")} -p {port} "$@"\n')
    cli.chmod(0o755)
    path = f"{shim}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(command, env={**environment, "PATH": path}, capture_output=True, timeout=10).returncode == 0


def test_redis_starts_with_the_manifests_arguments_and_its_probes_pass(overlay: str, tmp_path: Path) -> None:
    documents = by_kind(overlay)
    container = redis_container(documents)
    readiness = container["readinessProbe"]["exec"]["command"]
    liveness = container["livenessProbe"]["exec"]["command"]
    data = tmp_path / "data"
    data.mkdir()
    with redis_as_deployed(documents, data) as (port, environment):
        assert probe_passes(readiness, port, environment, tmp_path)
        assert probe_passes(liveness, port, environment, tmp_path)
        wrong = {**environment, "REDISCLI_AUTH": "not-the-password"}
        assert not probe_passes(readiness, port, wrong, tmp_path), "redis-cli exits 0 on NOAUTH: the probe must not"
        assert not probe_passes(liveness, port, wrong, tmp_path)
        assert not ping(port, "not-the-password")
    assert (data / "appendonlydir").is_dir(), "the records outlive a restart"
