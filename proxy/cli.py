"""`contextlift` command line: `serve` runs the proxy, `local-model` runs the embedded model alone, `eval`
replays the benchmarks through a proxy (one started here unless `--proxy`), `eval-merge` joins shards, `detect`
shows what the proxy finds in a request body."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import structlog
from pydantic import ValidationError

from eval.command import EvalError, add_eval_arguments, add_merge_arguments, run_eval, run_merge
from proxy.local_model import LocalModel, LocalModelError
from proxy.logs import configure_logging
from proxy.server import ProxyServer, build_server
from proxy.settings import Settings, SettingsError, load_settings
from proxy.telemetry import configure_tracing

log = structlog.get_logger("contextlift")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contextlift", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the proxy (in front of the embedded model unless --upstream)")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8080)")
    serve.add_argument("--upstream", dest="upstream_url", help="OpenAI-compatible base URL, e.g. http://vllm:8000/v1")
    serve.add_argument("--config", type=Path, help="TOML file of settings (environment variables override it)")

    local = commands.add_parser("local-model", help="run the embedded SmolLM2 llama.cpp server alone")
    local.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    local.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    local.add_argument("--config", type=Path, help="TOML file of settings")

    evaluate = commands.add_parser("eval", help="replay the papers' benchmarks through the proxy and report lifts")
    add_eval_arguments(evaluate)
    merge = commands.add_parser("eval-merge", help="one report from the parts of a sharded eval")
    add_merge_arguments(merge)

    detect = commands.add_parser("detect", help="show the documents, format and question found in a request body")
    detect.add_argument("body", nargs="?", type=Path, help="a chat-completions JSON body (default: standard input)")
    detect.add_argument("--format", dest="shape", help="read the documents in this shape, as `format=` would")
    detect.add_argument("--json", action="store_true", help="print the findings as JSON (with document offsets)")
    detect.add_argument("--config", type=Path, help="TOML file of settings (its declared document_formats apply)")
    health = commands.add_parser("healthcheck", help="exit 0 if the proxy's /healthz answers (container probes)")
    health.add_argument("--url", help="default: http://127.0.0.1:<port>/healthz from the settings")
    health.add_argument("--config", type=Path, help="TOML file of settings")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "eval-merge":
        return _reporting_eval_errors(lambda: run_merge(args))
    try:
        settings = load_settings(args.config, **_overrides(args))
    except (SettingsError, ValidationError) as error:
        print(f"contextlift: invalid settings: {error}", file=sys.stderr)
        return 2
    if args.command == "detect":
        return _detect(args, settings)
    if args.command == "healthcheck":
        return _healthcheck(args.url or f"http://127.0.0.1:{settings.port}/healthz")
    configure_logging(settings.log_format, settings.log_level)
    if configure_tracing(settings.otel_endpoint, settings.otel_service_name):
        log.info("exporting traces", endpoint=settings.otel_endpoint)
    try:
        if args.command == "eval":
            return _eval(args, settings)
        if args.command == "serve":
            return _serve(settings)
        return _local_model(settings, args.host, args.port)
    except (LocalModelError, SettingsError) as error:
        log.error("cannot start", error=str(error))
        return 1


def _detect(args: argparse.Namespace, settings: Settings) -> int:
    from proxy.detect_command import detect_command

    return detect_command(args.body, args.shape, as_json=args.json, settings=settings)


def _healthcheck(url: str) -> int:
    import httpx

    try:
        return 0 if httpx.get(url, timeout=3).status_code == 200 else 1
    except httpx.HTTPError as error:
        print(f"contextlift: {url} unreachable: {error}", file=sys.stderr)
        return 1


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "eval":
        # The proxy started for an eval logs warnings only: the progress bar is the output.
        return {"upstream_url": args.upstream, "log_level": "warning"}
    if args.command != "serve":
        return {}
    return {"host": args.host, "port": args.port, "upstream_url": args.upstream_url}


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    if args.proxy:
        return _reporting_eval_errors(lambda: run_eval(args, args.proxy))
    with _upstream(settings, quiet=True) as upstream_url, _proxy_in_process(settings, upstream_url) as proxy_url:
        return _reporting_eval_errors(lambda: run_eval(args, proxy_url))


def _reporting_eval_errors(run: Callable[[], int]) -> int:
    try:
        return run()
    except EvalError as error:
        print(f"contextlift eval: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("contextlift eval: interrupted; answers so far are cached, run again to resume", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _proxy_in_process(settings: Settings, upstream_url: str) -> Iterator[str]:
    """The proxy on a free loopback port in a thread of this process, ready (embedder loaded) when yielded."""
    from proxy.app import create_app

    settings = settings.model_copy(update={"upstream_url": upstream_url})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = build_server(create_app(settings), settings)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="eval-proxy", daemon=True)
    thread.start()
    try:
        _wait_started(server, thread, f"http://127.0.0.1:{port}/startupz", settings.local_model_startup_timeout)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=settings.shutdown_grace + 5)
        listener.close()


def _wait_started(server: ProxyServer, thread: threading.Thread, url: str, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive():
        if server.started:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code == 200:
                    return
        time.sleep(0.2)
    raise LocalModelError(f"the proxy started for the eval did not become ready within {timeout:.0f} s")


def _serve(settings: Settings) -> NoReturn:
    from proxy.app import create_app

    with _upstream(settings) as upstream_url:
        settings = settings.model_copy(update={"upstream_url": upstream_url})
        app = create_app(settings)
        server = build_server(app, settings, on_drain=app.state["proxy"].begin_shutdown)
        log.info("listening", url=f"http://{settings.host}:{settings.port}/v1")
        server.run()
    _exit_now(0)


def _exit_now(code: int) -> NoReturn:
    """End the process once the server is down, skipping the interpreter's own teardown: unloading torch and the
    embedding model alone takes 1.5 s, and a worker thread still busy with CPU work for a request that was cut off
    (threads cannot be cancelled) would hold the exit until it finished, both past `shutdown_grace` + 1 s. Exit
    handlers (flushing logs and traces) still run."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@contextlib.contextmanager
def _upstream(settings: Settings, *, quiet: bool = False) -> Iterator[str]:
    """The configured upstream, or the embedded model started for the life of the block."""
    if settings.upstream_url:
        yield settings.upstream_url
        return
    with _local(settings, quiet=quiet) as model:
        yield model.base_url


def _local(settings: Settings, host: str = "127.0.0.1", port: int | None = None, *, quiet: bool = False) -> LocalModel:
    return LocalModel(
        settings.local_model_path,
        host=host,
        port=settings.local_model_port if port is None else port,
        alias=settings.local_model_alias,
        context=settings.local_model_context,
        threads=settings.local_model_threads,
        startup_timeout=settings.local_model_startup_timeout,
        quiet=quiet,
    )


def _local_model(settings: Settings, host: str, port: int) -> int:
    model = _local(settings, host, port)
    signal.signal(signal.SIGTERM, lambda *_: model.stop())
    with model:
        print(f"local model ready: {model.base_url}", flush=True)
        try:
            return model.wait()
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
