"""The serving install (`pip install .`, no extras) leaves the evaluation's plotting out, and the eval Job runs the
image that has it."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def pulled_by(distribution: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """Every distribution `distribution` installs, walked through the installed packages' own metadata."""
    seen: set[str] = set()
    todo = [(distribution, extras)]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            lines = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in lines:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in wanted or {""}):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return seen


def test_serving_install_does_not_pull_matplotlib() -> None:
    assert "torch" in pulled_by("contextlift")
    assert "matplotlib" not in pulled_by("contextlift")
    assert "matplotlib" in pulled_by("contextlift", frozenset({"eval"}))


def test_eval_jobs_run_the_image_with_the_eval_extra() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r'^FROM build AS build-eval\n(?:#.*\n)*RUN pip install "\.\[eval\]"$', dockerfile, re.M)
    assert "COPY --from=build-eval /opt/contextlift /opt/contextlift" in dockerfile
    for job in ("job.yaml", "merge-job.yaml"):
        images = re.findall(r"image: (\S+)", (ROOT / "deploy" / "eval" / job).read_text())
        assert images
        assert all(image.endswith("-eval") for image in images)
    serving = re.findall(r"image: (\S+)", (ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    assert serving
    assert not any(image.endswith("-eval") for image in serving)
