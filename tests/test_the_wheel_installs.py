"""The wheel runs on its own: installed into a fresh environment, its `contextlift` command serves, its package data
reads and its entry points load, all from the wheel's copy and not from this checkout. What the wheel holds is
tests/test_installed_names.py's part; this module checks that what it holds runs.

No network: the wheel is built without build isolation, installed with `--no-index --no-deps`, and the environment
sees the dependencies already installed here through a `.pth` line. That line does not run this checkout's editable
install (a `.pth` file in a folder named by a `.pth` line is not read), so `contextlift` comes from the wheel alone."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy.local_model import free_port
from tests.fakes import completion
from tests.serving import MOUNTAINS as PROMPT
from tests.serving import fake_upstream_url, request_body

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("proxy", "strategies", "eval")


@dataclass(frozen=True)
class Installed:
    """A fresh environment with the wheel installed into it."""

    prefix: Path
    site_packages: Path
    added: frozenset[str]
    """What the install put into site-packages."""

    def bin(self, name: str) -> Path:
        return self.prefix / "bin" / name

    def run(self, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        # Run outside the checkout, so that nothing of it is on the path through the working directory.
        return subprocess.run(
            [str(a) for a in args], cwd=self.prefix, env=clean_env(), input=stdin, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip


def clean_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_HUB_OFFLINE": "1"}


def build_wheel(out: Path, source: Path) -> Path:
    """The wheel of the files git would commit that a build reads (a stale build/ folder in the tree stays out)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "pyproject.toml", "README.md", *FOLDERS],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.returncode != 0:
        pytest.skip("not a git checkout: which files a build takes is unknown")
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out)]
    env = {**clean_env(), "PYTHONWARNINGS": "ignore", "PIP_CONFIG_FILE": os.devnull}
    subprocess.run([*command, str(source)], check=True, capture_output=True, env=env, timeout=120)
    [wheel] = out.glob("contextlift-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed here: the wheel cannot be built without the network")
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source"))
    prefix = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(prefix)
    python = prefix / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    site_packages = Path(purelib.stdout.strip())
    before = set(os.listdir(site_packages))
    # pip from this environment installs into the fresh one (`--python`), which has no pip of its own.
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet"]
    env = {**clean_env(), "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([*command, str(wheel)], check=True, capture_output=True, env=env, timeout=120)
    added = frozenset(set(os.listdir(site_packages)) - before)
    # Written after the install: pip would otherwise take this checkout's editable contextlift for one to replace.
    here = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site_packages / "dependencies_from_the_test_env.pth").write_text("".join(f"{path}\n" for path in here))
    return Installed(prefix, site_packages, added)


def test_the_install_adds_contextlift_and_its_metadata_alone_and_the_command(installed: Installed) -> None:
    assert installed.added == {"contextlift", "contextlift-0.1.0.dist-info"}
    assert installed.bin("contextlift").is_file()


PROBE = """
import importlib, json
from importlib import metadata, resources
files = [importlib.import_module(f"contextlift.{name}").__file__ for name in ("proxy", "strategies", "eval")]
groups = {}
for entry in metadata.distribution("contextlift").entry_points:
    groups.setdefault(entry.group, {})[entry.name] = entry.value
    entry.load()
    files.append(importlib.import_module(entry.module).__file__)
policies = resources.files("contextlift.proxy.policies")
print(json.dumps({
    "files": files,
    "distribution": str(metadata.distribution("contextlift").locate_file("")),
    "groups": groups,
    "data": {name: len(policies.joinpath(name).read_text()) for name in ("example.toml", "reference.toml")},
}))
"""


@pytest.fixture(scope="module")
def probed(installed: Installed) -> dict[str, Any]:
    result = installed.run(installed.bin("python"), "-c", PROBE)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_the_modules_and_the_metadata_that_run_are_the_wheels(installed: Installed, probed: dict[str, Any]) -> None:
    assert len(probed["files"]) > 3
    outside = [name for name in probed["files"] if not Path(name).is_relative_to(installed.site_packages)]
    assert outside == []
    assert Path(probed["distribution"]) == installed.site_packages


def test_every_entry_point_of_pyproject_is_installed_and_loads(probed: dict[str, Any]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {**project["entry-points"], "console_scripts": project["scripts"]}
    assert probed["groups"] == declared


def test_the_policy_files_are_packaged(installed: Installed, probed: dict[str, Any]) -> None:
    assert all(size > 0 for size in probed["data"].values())
    result = installed.run(installed.bin("contextlift"), "policy", "--example")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (ROOT / "proxy" / "policies" / "example.toml").read_text()


def test_the_command_lists_the_evaluation_commands_its_entry_point_adds(installed: Installed) -> None:
    result = installed.run(installed.bin("contextlift"), "--help")
    assert result.returncode == 0, result.stderr
    for command in ("serve", "detect", "policy", "eval", "shadow-report"):
        assert re.search(rf"^ +{command} ", result.stdout, flags=re.M), command


def test_detect_finds_the_documents(installed: Installed) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}]})
    result = installed.run(installed.bin("contextlift"), "detect", "--json", stdin=body)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["format"] == "litm"
    assert [document["title"] for document in found["documents"]] == ["K2", "Danube", "Mont Blanc"]


ANSWER = completion("Mont Blanc.")


@pytest.fixture
def fake_upstream() -> Iterator[tuple[str, list[bytes]]]:
    """A scripted upstream on loopback that answers every chat completion with ANSWER and records the bodies."""
    received: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        received.append(await request_body(receive))
        body = {"object": "list", "data": []} if scope["path"].endswith("/models") else ANSWER
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    with fake_upstream_url(app) as url:
        yield url, received


def test_the_installed_command_serves_a_reorder(
    installed: Installed, fake_upstream: tuple[str, list[bytes]], tmp_path: Path
) -> None:
    upstream, received = fake_upstream
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(installed.bin("contextlift")), "serve", "--upstream", upstream, "--port", str(port)]
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=installed.prefix, env=clean_env(), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the proxy did not answer /healthz"
            try:
                health = httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
        answer = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"X-Context-Strategy": "reorder"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Mont Blanc."
        assert answer.headers["x-context-order"] == "3,1,2"
        [sent] = [json.loads(b) for b in received if b]
        assert sent["messages"][0]["content"].index("Mont Blanc") < sent["messages"][0]["content"].index("K2")
        assert 'contextlift_requests_total{model="m",route="/v1/chat/completions"' in httpx.get(f"{url}/metrics").text
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
