"""The embedded default upstream: llama.cpp's OpenAI-compatible server on loopback, serving one of the embedded
models (`proxy.embedded_models`: SmolLM2-135M by default, or a Qwen2.5-Coder model by `local_model`).

`LocalModel` starts the server as a child process, waits until the model answers a real request, and stops
it with itself. The weights come from the model's packages, checked (and assembled where they come in slices)
before first use.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx
import structlog

from contextlift.proxy.embedded_models import (
    DEFAULT,
    LocalModelError,
    checked,
    embedded_model,
    missing_packages,
    model_file,
)
from contextlift.proxy.settings import Settings, default_model_cache

_POLL_SECONDS = 0.25

log = structlog.get_logger("contextlift.local_model")


def bundled_model_path(name: str = DEFAULT, cache: Path | None = None) -> Path:
    """The checked GGUF file of the embedded model `name` (assembled into `cache` where it comes in slices; default:
    the settings' folder).

    Raises:
        LocalModelError: its packages are not installed, or one of them is not the release's.
    """
    model = embedded_model(name)
    if missing_packages(model) and len(model.parts) == 1:
        raise LocalModelError(
            f"the embedded model needs the package {model.parts[0].package}: pip install 'contextlift[{model.extra}]'"
        )
    if cache is None:
        with contextlib.suppress(RuntimeError):  # no home folder: a whole file is then checked at every start
            cache = default_model_cache()
    if not checked(model, cache):
        log.info("checking the model file once", model=model.name, size_mb=round(model.size / 1e6))
    return model_file(model, cache)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def server_command(
    model_path: Path,
    *,
    host: str,
    port: int,
    alias: str,
    context: int,
    threads: int | None,
    seed: int = 0,
    reuse_prompt: bool = False,
    identity: Path | None = None,
    batch: int | None = None,
) -> list[str]:
    """The command line of llama-cpp-python's OpenAI-compatible server, started through `proxy.local_model_server`
    so that its answers reproduce (see there)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(
            "the embedded model needs llama-cpp-python[server]: pip install 'contextlift[local-model]'"
        )
    command = [
        sys.executable, "-m", "contextlift.proxy.local_model_server",
        "--contextlift-seed", str(seed),
        "--model", str(model_path),
        "--model_alias", alias,
        "--host", host,
        "--port", str(port),
        "--n_ctx", str(context),
        "--verbose", "False",
        # It would cut a streamed answer short whenever another request queued behind it.
        "--interrupt_requests", "False",
    ]  # fmt: skip
    # llama-cpp-python generates on half the CPUs unless told (its `n_threads` default is cpu_count // 2);
    # "unset" means all the CPUs this process may run on, for generation and prompt processing alike.
    threads = threads or len(os.sched_getaffinity(0))
    command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    if batch is not None:  # prompt tokens evaluated per step (llama-cpp-python's default: 512)
        command += ["--n_batch", str(batch), "--n_ubatch", str(batch)]
    if reuse_prompt:
        command.append("--contextlift-reuse-prompt")
    if identity is not None:
        command += ["--contextlift-identity", str(identity)]
    return command


class LocalModel:
    """A running llama.cpp server; a context manager that starts it and stops it."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        alias: str | None = None,
        context: int = 8192,
        threads: int | None = None,
        seed: int = 0,
        reuse_prompt: bool = False,
        batch: int | None = None,
        startup_timeout: float = 180.0,
        quiet: bool = False,
    ) -> None:
        self.model_path = model_path or bundled_model_path()
        self.host = host
        self.port = port or free_port(host)
        self.alias = alias or (embedded_model(DEFAULT).alias if model_path is None else self.model_path.stem)
        self.context = context
        self.threads = threads
        self.seed = seed
        self.reuse_prompt = reuse_prompt
        self.batch = batch
        self.identity: dict[str, Any] | None = None
        """What its answers depend on (server version and build, model file and hash, settings), read from the
        server once it answers; None before, or where the server did not write it."""
        self.startup_timeout = startup_timeout
        self.quiet = quiet
        """Send the server's own output (an access line per request) to a temporary file, not this terminal."""
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the server (ends in `/v1`)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> str:
        """Start the server and wait until the model completes a one-token request; returns the base URL.

        Raises:
            LocalModelError: the server exited or did not answer within the start-up timeout.
        """
        self._scratch = tempfile.TemporaryDirectory(prefix="contextlift-model-")
        identity = Path(self._scratch.name) / "identity.json"
        command = server_command(
            self.model_path,
            host=self.host,
            port=self.port,
            alias=self.alias,
            context=self.context,
            threads=self.threads,
            seed=self.seed,
            reuse_prompt=self.reuse_prompt,
            identity=identity,
            batch=self.batch,
        )
        log.info("starting local model", model=self.model_path.name, url=self.base_url)
        self._output = tempfile.TemporaryFile() if self.quiet else None  # noqa: SIM115 - closed by stop()
        self._process = subprocess.Popen(
            command,
            stdout=self._output,
            stderr=subprocess.STDOUT if self._output else None,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        try:
            self._wait_until_answering()
        except BaseException:
            self.stop()
            raise
        with contextlib.suppress(OSError, ValueError):
            self.identity = json.loads(identity.read_text(encoding="utf-8"))
        log.info("local model ready", url=self.base_url)
        return self.base_url

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        probe = {"model": self.alias, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        with httpx.Client(timeout=10.0) as client:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise LocalModelError(
                        f"local model server exited with status {self._process.returncode}{self._output_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.post(f"{self.base_url}/chat/completions", json=probe).status_code == 200:
                        return
                time.sleep(_POLL_SECONDS)
        raise LocalModelError(f"local model did not answer within {self.startup_timeout:g} s")

    def _output_tail(self) -> str:
        if self._output is None:
            return ""
        self._output.seek(0)
        return ": " + self._output.read()[-2000:].decode(errors="replace")

    def wait(self) -> int:
        """Block until the server exits; returns its exit status."""
        assert self._process is not None
        return self._process.wait()

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 10 s."""
        process, self._process = self._process, None
        output, self._output = self._output, None
        scratch, self._scratch = self._scratch, None
        with contextlib.ExitStack() as stack:
            if output is not None:
                stack.callback(output.close)
            if scratch is not None:
                stack.callback(scratch.cleanup)
            if process is not None and process.poll() is None:
                _terminate(process)

    def __enter__(self) -> LocalModel:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the parent dies, so a killed proxy leaves no orphan server."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    os.setpgrp()


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def local_model_for(
    settings: Settings, host: str = "127.0.0.1", port: int | None = None, *, quiet: bool = False
) -> LocalModel:
    """The embedded model as the settings configure it (not started; its file checked, or assembled on first use).

    Raises:
        LocalModelError: the model's packages are missing or not its release's.
    """
    model = embedded_model(settings.local_model)
    if importlib.util.find_spec("llama_cpp") is None:  # said before a model file is assembled for nothing
        raise LocalModelError(
            "the embedded model needs llama-cpp-python[server]: pip install 'contextlift[local-model]'"
        )
    path = settings.local_model_path or bundled_model_path(model.name, settings.local_model_cache)
    return LocalModel(
        path,
        host=host,
        port=settings.local_model_port if port is None else port,
        alias=settings.local_model_alias or (model.alias if settings.local_model_path is None else None),
        context=settings.local_model_context,
        threads=settings.local_model_threads,
        seed=settings.local_model_seed,
        reuse_prompt=settings.local_model_reuse_prompt,
        startup_timeout=settings.local_model_startup_timeout,
        quiet=quiet,
    )


@dataclass(frozen=True, slots=True)
class Upstream:
    url: str
    """The OpenAI base URL."""
    identity: dict[str, Any] | None = None
    """The embedded model's `LocalModel.identity`; None for an upstream this process did not start."""


@contextlib.contextmanager
def upstream_for(settings: Settings, *, quiet: bool = False) -> Iterator[Upstream]:
    """The configured upstream, or the embedded model, started for the life of the block."""
    if settings.upstream_url:
        yield Upstream(settings.upstream_url)
        return
    with local_model_for(settings, quiet=quiet) as model:
        yield Upstream(model.base_url, model.identity)
