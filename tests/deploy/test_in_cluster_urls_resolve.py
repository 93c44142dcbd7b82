"""Every in-cluster URL in what deploy/ renders (`http://NAME[.NAMESPACE.svc[.cluster.local]][:PORT]`, and
`redis://`) names a Service that the manifests define and a port that Service exposes: the eval Job reaches the proxy
it measures, the proxy the Redis its replicas share.

The one URL left out is `CONTEXTLIFT_UPSTREAM_URL`: it names the operator's own model server, which deploy/ does
not define."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.kustomize import DEPLOY, PROXY_OVERLAYS, render

OUTSIDE = {"CONTEXTLIFT_UPSTREAM_URL"}
"""ConfigMap keys whose URL names a server deployed apart from these manifests."""
_URL = re.compile(r"(?:https?|rediss?)://[^\s\"'`]+")
_DEFAULT_PORTS = {"http": 80, "https": 443, "redis": 6379, "rediss": 6379}
_CLUSTER_HOST = re.compile(
    r"^(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.(?P<namespace>[a-z0-9-]+)\.svc(\.cluster\.local)?)?$"
)


def in_cluster(url: str) -> tuple[str, str | None, int] | None:
    """(Service name, namespace or None, port) of a URL that names a Service; None for any other host."""
    parts = urlsplit(url)
    match = _CLUSTER_HOST.match(parts.hostname or "")
    if match is None or match["name"] == "localhost":
        return None
    return match["name"], match["namespace"], parts.port or _DEFAULT_PORTS[parts.scheme]


def strings(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string in a rendered document, with the keys that lead to it."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, (*path, str(key)))
    elif isinstance(node, list):
        for value in node:
            yield from strings(value, path)


def urls(documents: list[dict[str, Any]]) -> list[str]:
    """The in-cluster URLs the documents hold, the operator's upstream left out."""
    return [
        url
        for document in documents
        for path, text in strings(document)
        if not (document["kind"] == "ConfigMap" and path[-1] in OUTSIDE)
        for url in _URL.findall(text)
        if in_cluster(url) is not None
    ]


def services(documents: list[dict[str, Any]]) -> dict[str, set[int]]:
    return {d["metadata"]["name"]: {p["port"] for p in d["spec"]["ports"]} for d in documents if d["kind"] == "Service"}


def unresolved(found: list[str], defined: dict[str, set[int]]) -> list[str]:
    """The URLs whose Service is not defined, or does not expose their port."""
    wrong = []
    for url in found:
        target = in_cluster(url)
        assert target is not None
        name, _, port = target
        if port not in defined.get(name, set()):
            wrong.append(f"{url}: Services and their ports are {defined}")
    return wrong


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://contextlift:8080/v1", ("contextlift", None, 8080)),
        ("http://contextlift/v1", ("contextlift", None, 80)),
        ("http://vllm.ml.svc.cluster.local:8000/v1", ("vllm", "ml", 8000)),
        ("https://vllm.ml.svc/v1", ("vllm", "ml", 443)),
        ("redis://:$(REDIS_PASSWORD)@contextlift-redis:6379/0", ("contextlift-redis", None, 6379)),
        ("rediss://contextlift-redis.ml.svc/0", ("contextlift-redis", "ml", 6379)),
        ("https://api.openai.com/v1", None),
        ("http://127.0.0.1:8080/v1", None),
        ("http://localhost:8080/v1", None),
    ],
)
def test_a_url_names_a_service_only_by_a_cluster_name(url: str, target: tuple[str, str | None, int] | None) -> None:
    assert in_cluster(url) == target


def test_a_url_to_a_port_the_service_does_not_expose_is_unresolved() -> None:
    defined = {"contextlift": {80}}
    assert unresolved(["http://contextlift/v1", "http://contextlift:80/v1"], defined) == []
    assert len(unresolved(["http://contextlift:8080/v1", "http://other/v1"], defined)) == 2


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_proxy_overlay_urls_name_its_services(overlay: str) -> None:
    documents = render(DEPLOY / "overlays" / overlay)
    assert unresolved(urls(documents), services(documents)) == []


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_eval_job_reaches_the_proxy_service_of_each_overlay(overlay: str) -> None:
    evaluation = render(DEPLOY / "eval")
    found = urls(evaluation)
    assert found, "the eval Job names the proxy it measures"
    assert unresolved(found, services(render(DEPLOY / "overlays" / overlay)) | services(evaluation)) == []
