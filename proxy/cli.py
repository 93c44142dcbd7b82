"""`contextlift` command line: `serve` runs the proxy, `local-model` runs the embedded model alone, `detect` shows
what the proxy finds in a request body, `healthcheck` probes a running proxy.

Other packages add subcommands the way plugins do: a function registered under the entry-point group
`contextlift.commands` receives the subparsers and sets, on each parser it adds, `run=` (called with the parsed
arguments and the loaded settings, returns the exit code), and optionally `settings_overrides=` (the settings its
flags set), `settings=False` (a command that reads none) or `logs=False` (one that prints for a person and
configures neither logging nor tracing). The evaluation adds `eval` and `eval-merge` that way,
so serving never imports it.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

import structlog
from pydantic import ValidationError
from pydantic_settings import SettingsError as SourceError

from contextlift.proxy.edge.server import PortUnavailable, bind_sockets, build_server, listen
from contextlift.proxy.embedded_models import DEFAULT as DEFAULT_MODEL
from contextlift.proxy.embedded_models import MODELS, LocalModelError
from contextlift.proxy.local_model import local_model_for, upstream_for
from contextlift.proxy.observability.logs import configure_logging
from contextlift.proxy.observability.telemetry import configure_tracing
from contextlift.proxy.settings import Settings, SettingsError, invalid_settings_text, load_settings

COMMANDS_GROUP = "contextlift.commands"

log = structlog.get_logger("contextlift")


BUILT_IN = ("serve", "local-model", "detect", "healthcheck")


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; the plugin commands (the evaluation's) only where `argv` names no built-in
    command: loading them imports their modules, time a `serve`'s start would spend on what serving never uses."""
    parser = argparse.ArgumentParser(prog="contextlift", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the proxy (in front of the embedded model unless --upstream)",
        description="Run the proxy: in front of --upstream, else in front of an embedded model (--model).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_MODELS_HELP
        + "\n\n"
        + textwrap.fill(
            "--host, --port, --upstream and --model set four of its settings. Every setting is an environment "
            "variable CONTEXTLIFT_<NAME> (the traces' exporter reads the standard OTEL_* ones) and a key of the "
            "--config file; flags override variables, which override the file. Each CONTEXTLIFT_* setting, with its "
            "default and meaning, is described in the repository's docs/reference/settings.md (how settings are "
            "given: docs/configuration.md).",
            100,
        ),
    )
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8080)")
    serve.add_argument("--upstream", dest="upstream_url", help="OpenAI-compatible base URL, e.g. http://vllm:8000/v1")
    serve.add_argument("--config", type=Path, help="TOML file of settings (environment variables override it)")
    _model_argument(serve)
    serve.set_defaults(run=_serve, settings_overrides=_serve_overrides)

    local = commands.add_parser(
        "local-model",
        help="run an embedded model's llama.cpp server alone",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_MODELS_HELP,
    )
    local.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    local.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    local.add_argument("--config", type=Path, help="TOML file of settings")
    _model_argument(local)
    local.set_defaults(run=_local_model, settings_overrides=_model_override)

    detect = commands.add_parser("detect", help="show the documents, format and question found in a request body")
    detect.add_argument("body", nargs="?", type=Path, help="a chat-completions JSON body (default: standard input)")
    detect.add_argument("--format", dest="shape", help="read the documents in this shape, as `format=` would")
    detect.add_argument("--json", action="store_true", help="print the findings as JSON (with document offsets)")
    detect.add_argument("--config", type=Path, help="TOML file of settings (its declared document_formats apply)")
    detect.add_argument(
        "--strategy",
        help='preview the body that strategy\'s transforms would send upstream (e.g. "reorder; order=promote"), '
        "calling no model",
    )
    detect.set_defaults(run=_detect, logs=False)
    health = commands.add_parser("healthcheck", help="exit 0 if the proxy's /healthz answers (container probes)")
    health.add_argument("--url", help="default: http://127.0.0.1:<port>/healthz from the settings")
    health.add_argument("--config", type=Path, help="TOML file of settings")
    health.set_defaults(run=_healthcheck, logs=False)
    words = list(sys.argv[1:] if argv is None else argv)
    if not (words and words[0] in BUILT_IN):
        _plugin_commands(commands)
    return parser


_MODELS_HELP = (
    "embedded models (--model NAME): the GGUF file's size, its speed on 2 CPU cores, its licence\n"
    + "\n".join(
        textwrap.fill(model.describe(), 100, initial_indent="  ", subsequent_indent="      ")
        for model in MODELS.values()
    )
)


def _model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        dest="local_model",
        metavar="NAME",
        help=f"the embedded model to serve when no upstream is set (default {DEFAULT_MODEL}; listed below): "
        "its packages must be installed (scripts/serve --model NAME installs them)",
    )


def _model_override(args: argparse.Namespace) -> dict[str, Any]:
    return {"local_model": args.local_model}


def _plugin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for entry in entry_points(group=COMMANDS_GROUP):
        try:
            entry.load()(commands)
        except Exception as error:  # a broken plugin must not take `serve` down with it
            print(f"contextlift: the {entry.name!r} commands did not load: {error!r}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser(argv).parse_args(argv)
    if not getattr(args, "settings", True):
        return int(args.run(args, None))
    overrides = args.settings_overrides(args) if getattr(args, "settings_overrides", None) else {}
    try:
        settings = load_settings(args.config, **overrides)
    except ValidationError as error:
        print(f"contextlift: invalid settings: {invalid_settings_text(error)}", file=sys.stderr)
        return 2
    except (SettingsError, SourceError) as error:  # an unreadable file, a variable that is not JSON: no value quoted
        print(f"contextlift: invalid settings: {error}", file=sys.stderr)
        return 2
    if getattr(args, "logs", True):
        # Commands that print for a person (detect, healthcheck) leave logging and tracing unconfigured.
        configure_logging(settings.log_format, settings.log_level)
        if configure_tracing(settings.otel_endpoint, settings.otel_service_name):
            log.info("exporting traces", endpoint=settings.otel_endpoint)
    try:
        return int(args.run(args, settings))
    except (LocalModelError, SettingsError) as error:
        log.error("cannot start", error=str(error))
        return 1


def _detect(args: argparse.Namespace, settings: Settings) -> int:
    from contextlift.proxy.detect_command import detect_command

    return detect_command(args.body, args.shape, as_json=args.json, settings=settings, strategy=args.strategy)


def _healthcheck(args: argparse.Namespace, settings: Settings) -> int:
    import httpx

    url = args.url or f"http://127.0.0.1:{settings.port}/healthz"
    try:
        return 0 if httpx.get(url, timeout=3).status_code == 200 else 1
    except httpx.HTTPError as error:
        print(f"contextlift: {url} unreachable: {error}", file=sys.stderr)
        return 1


def _serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {"host": args.host, "port": args.port, "upstream_url": args.upstream_url, **_model_override(args)}


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from contextlift.proxy.app import create_app

    if args.local_model and settings.upstream_url:
        log.error("cannot start", error="--model names an embedded model, which serves only without an upstream")
        return 2
    if args.local_model and settings.local_model_path:
        log.error("cannot start", error="--model and local_model_path both name the embedded model: keep one")
        return 2
    try:
        # Bound before the embedded model starts (minutes): a port that is taken stops the start now, not then.
        sockets = bind_sockets(settings.host, settings.port)
        with contextlib.ExitStack() as held:
            for sock in sockets:
                held.enter_context(sock)
            with upstream_for(settings) as upstream:
                settings = settings.model_copy(update={"upstream_url": upstream.url})
                app = create_app(settings)
                server = build_server(app, settings, on_drain=app.state["proxy"].begin_shutdown)
                listen(sockets, server.config.backlog)
                server.run(sockets=sockets)  # logs `listening` once they take connections
    except PortUnavailable as error:
        log.error("cannot start", error=str(error))
        return 1
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


def _local_model(args: argparse.Namespace, settings: Settings) -> int:
    model = local_model_for(settings, args.host, args.port)
    signal.signal(signal.SIGTERM, lambda *_: model.stop())
    with model:
        print(f"local model ready: {model.base_url}", flush=True)
        try:
            return model.wait()
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
