"""One image name and tag scheme everywhere: `ghcr.io/contextlift/contextlift:VERSION[-cuda|-demo|-eval]`, the
package's version, in every rendered manifest, the Dockerfile's build commands and the docs (`$REGISTRY` standing
for a registry of the reader's own). The one other image the manifests run, Redis, is pinned to a patch release."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.kustomize import DEPLOY, PROXY_OVERLAYS, ROOT, render

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SCHEME = re.compile(rf"^(ghcr\.io/contextlift|\$REGISTRY)/contextlift:{re.escape(VERSION)}(-cuda|-demo|-eval)?$")
OTHER = re.compile(r"^redis:\d+\.\d+\.\d+$")
"""The official Redis of components/shadow-redis, at a patch release: a floating `7.2` or `latest` would change what
a cluster runs when a node pulls it again."""
_REFERENCE = re.compile(r"(?<![/\w.$-])(\$?(?:[\w.-]+/)*contextlift:(?!shadow\b)[\w.-]+)")
"""A `[registry/]contextlift:tag` token in prose or a command; not a URL's `//contextlift:port`, nor the shadow
store's keys (`contextlift:shadow:records`)."""


def images(documents: list[dict[str, Any]]) -> list[str]:
    found = []
    for document in documents:
        pod = document.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("initContainers", []) + pod.get("containers", []):
            found.append(container["image"])
    return found


def texts() -> list[Path]:
    return [ROOT / "Dockerfile", ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def references(text: str) -> list[str]:
    return [m.rstrip(".") for m in _REFERENCE.findall(text)]


def test_the_scheme_takes_the_version_and_a_variant_only() -> None:
    assert SCHEME.match(f"ghcr.io/contextlift/contextlift:{VERSION}-eval")
    assert SCHEME.match(f"$REGISTRY/contextlift:{VERSION}")
    wrong = [
        "contextlift:eval",
        f"contextlift:{VERSION}-eval",
        "ghcr.io/contextlift/contextlift:latest",
        f"ghcr.io/other/contextlift:{VERSION}",
        f"ghcr.io/contextlift/contextlift:{VERSION}-gpu",
    ]
    assert [w for w in wrong if SCHEME.match(w)] == []


def test_the_other_image_is_redis_at_a_patch_release() -> None:
    assert OTHER.match("redis:7.2.11")
    wrong = ["redis", "redis:7.2", "redis:latest", "redis:7.2.11-alpine", "bitnami/redis:7.2.11"]
    assert [w for w in wrong if OTHER.match(w)] == []


def test_references_are_found_in_commands_and_prose_but_not_in_urls() -> None:
    text = (
        "docker build --target eval -t contextlift:eval . and `docker run -p 8080:8080 contextlift:demo`; "
        "docker push $REGISTRY/contextlift:0.1.0. Clients call http://contextlift:80/v1; records go to "
        "contextlift:shadow:records, not to contextlift:shadowy"
    )
    expected = ["contextlift:eval", "contextlift:demo", "$REGISTRY/contextlift:0.1.0", "contextlift:shadowy"]
    assert references(text) == expected


@pytest.mark.parametrize("kustomization", [*(f"overlays/{o}" for o in PROXY_OVERLAYS), "eval"])
def test_rendered_manifests_run_images_of_the_scheme(kustomization: str) -> None:
    found = images(render(DEPLOY / kustomization))
    assert [i for i in found if SCHEME.match(i)]
    assert [i for i in found if not SCHEME.match(i) and not OTHER.match(i)] == []


def test_the_docs_and_the_dockerfile_name_images_of_the_scheme() -> None:
    found = {path.relative_to(ROOT).as_posix(): references(path.read_text()) for path in texts() if path.exists()}
    assert found["Dockerfile"]
    assert found["docs/deploy.md"]
    assert {path: [r for r in refs if not SCHEME.match(r)] for path, refs in found.items()} == {p: [] for p in found}
