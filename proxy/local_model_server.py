"""The embedded model's server process: llama-cpp-python's OpenAI-compatible server, made to give the same prompt
the same answer whatever was asked before it.

Two things in llama-cpp-python 0.3 make an answer depend on the requests before it. It keeps the previous prompt's
key-value cache and evaluates only the part of a new prompt after the longest common prefix: the same prompt then
goes through the model in other batch splits, whose floating-point sums differ in their last bits, enough to flip
a greedy choice now and then (5 of 90 identical prompts answered differently within one eval run). And a request
without a seed draws its sampling seed from the previous request's seed, so a sampled answer depends on how many
requests came first. The server has no option for either, so this module wraps the two methods before it starts
the server: every prompt is evaluated from its first token (unless `--contextlift-reuse-prompt`), and a request that
names no seed samples with `--contextlift-seed`. llama-cpp-python is pinned in the `local-model` extra, and
tests/e2e/test_local_model_reproduces.py checks the effect on the real model.

A third: the server computes a whole answer that is not streamed even when its client has left (a proxy's deadline
passed, a user closed the tab), and the next request waits behind it. `stop_when_the_client_leaves` makes the model
stop between two batches of the prompt, or two generated tokens, once the client has hung up.

Run as `python -m contextlift.proxy.local_model_server [--contextlift-...] <llama_cpp.server arguments>`; with
`--contextlift-identity PATH` it writes what the answers depend on (server version, build, model file, settings)
there as JSON before the server starts, for the eval's cache key and reports.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import functools
import hashlib
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

_PREFIX = "--contextlift-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(f"{_PREFIX}seed", dest="seed", type=int, default=0)
    parser.add_argument(f"{_PREFIX}reuse-prompt", dest="reuse_prompt", action="store_true")
    parser.add_argument(f"{_PREFIX}identity", dest="identity", type=Path)
    ours, server_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)

    from llama_cpp import Llama

    if ours.reuse_prompt:
        _keep_cached_tokens_in_usage()
    from llama_cpp.server import __main__ as server

    make_reproducible(Llama, seed=ours.seed, reuse_prompt=ours.reuse_prompt)
    stop_when_the_client_leaves(Llama)
    launcher: Any = server  # its module, which imported `create_app` from llama_cpp.server.app
    build = launcher.create_app

    @functools.wraps(build)
    def watched_app(*args: Any, **kwargs: Any) -> Any:
        app = build(*args, **kwargs)
        app.add_exception_handler(ClientLeft, _nothing_to_answer)
        return WatchTheClient(app)

    launcher.create_app = watched_app
    if ours.identity is not None:
        _write_identity(ours.identity, server_args, seed=ours.seed, reuse_prompt=ours.reuse_prompt)
    sys.argv = [sys.argv[0], *server_args]
    server.main()  # type: ignore[no-untyped-call]


_LEFT: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("contextlift_client_left", default=None)
"""Set for a request whose answer is not streamed: the event is set when its client hangs up. The model's work runs
in a worker thread, which copies the request's context."""


class ClientLeft(Exception):
    """The request's client hung up: the model stopped computing its answer."""


def stop_when_the_client_leaves(llama: type[Any]) -> None:
    """Wrap `llama`'s evaluation so that it stops, raising `ClientLeft`, before its next batch of prompt tokens or
    its next generated token once the request's client has left (`_LEFT`). A prompt is evaluated in the batches
    `eval` itself cuts it into (`n_batch` tokens), so the sums, and the answers, are the same."""
    evaluate = llama.eval

    @functools.wraps(evaluate)
    def in_batches(self: Any, tokens: Any) -> None:
        left = _LEFT.get()
        if left is None:
            evaluate(self, tokens)
            return
        for start in range(0, len(tokens), self.n_batch):
            if left.is_set():
                raise ClientLeft
            evaluate(self, tokens[start : start + self.n_batch])

    llama.eval = in_batches


class WatchTheClient:
    """The server's app, with each POST whose answer is not streamed watched for its client hanging up (`_LEFT`).
    A streamed answer is the server's own to stop: it checks for a disconnect at every chunk."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # gone before its body was whole
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        left = threading.Event()
        watcher = None if _asks_to_stream(bytes(body)) else asyncio.ensure_future(_until_disconnected(receive, left))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return dict(await receive())
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        token = _LEFT.set(left if watcher is not None else None)
        try:
            await self.app(scope, replay, send)
        finally:
            _LEFT.reset(token)
            if watcher is not None:
                watcher.cancel()


async def _until_disconnected(receive: Any, left: threading.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    left.set()


def _asks_to_stream(body: bytes) -> bool:
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


async def _nothing_to_answer(request: Any, error: ClientLeft) -> Any:
    from starlette.responses import Response

    return Response(status_code=499)  # nobody reads it: the client has gone


def make_reproducible(llama: type[Any], *, seed: int, reuse_prompt: bool) -> None:
    """Wrap `llama`'s generation so that a prompt's answer depends on the prompt, its parameters and `seed` only;
    with `reuse_prompt` the previous prompt's cache is kept, and each completion's usage says how many of its prompt
    tokens came from it, as OpenAI's does (`prompt_tokens_details.cached_tokens`)."""
    create = llama._create_completion
    generate = llama.generate

    @functools.wraps(create)
    def seeded(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if kwargs.get("seed") is None:
            kwargs["seed"] = seed
        self._contextlift_cached_tokens = 0
        for chunk in create(self, *args, **kwargs):
            usage = chunk.get("usage") if reuse_prompt and isinstance(chunk, dict) else None
            if isinstance(usage, dict):
                usage["prompt_tokens_details"] = {"cached_tokens": self._contextlift_cached_tokens}
            yield chunk

    @functools.wraps(generate)
    def from_the_first_token(self: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        # No cached tokens: generate() then skips its prefix match and resets the context.
        self.n_tokens = 0
        yield from generate(self, *args, **kwargs)

    @functools.wraps(generate)
    def counting_the_prefix(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        cached = list(self._input_ids[: self.n_tokens])
        live = not getattr(self, "_requires_eval", False)
        self._contextlift_cached_tokens = reused_prefix(cached, list(tokens), logits_live=live)
        yield from generate(self, tokens, *args, **kwargs)

    llama._create_completion = seeded
    llama.generate = counting_the_prefix if reuse_prompt else from_the_first_token


def reused_prefix(cached: list[int], prompt: list[int], *, logits_live: bool = True) -> int:
    """The prompt tokens llama-cpp-python 0.3's generate() takes from the previous prompt's cache rather than
    evaluating: their longest common prefix, less the last token where the whole prompt matched (it is evaluated
    again to refresh the logits) unless the cache holds exactly this prompt with its logits still live."""
    common = 0
    for a, b in zip(cached, prompt, strict=False):
        if a != b:
            break
        common += 1
    if common == len(prompt) and len(cached) == len(prompt) and logits_live:
        return common
    return common - 1 if common == len(prompt) else common


def _keep_cached_tokens_in_usage() -> None:
    """The server validates its answers against llama-cpp-python's TypedDicts, which drop a key they do not declare:
    `usage.prompt_tokens_details` is declared here, before the server's routes are built from them."""
    from typing import NotRequired

    from llama_cpp import llama_types

    usage: Any = llama_types.CompletionUsage
    usage.__annotations__["prompt_tokens_details"] = NotRequired[dict[str, int]]
    usage.__optional_keys__ = frozenset({*usage.__optional_keys__, "prompt_tokens_details"})


def _write_identity(path: Path, server_args: list[str], *, seed: int, reuse_prompt: bool) -> None:
    import llama_cpp

    options = _options(server_args)
    model = Path(options.get("model", ""))
    identity = {
        "server": f"llama-cpp-python {version('llama_cpp_python')}",
        "build": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "model": options.get("model_alias", model.name),
        "model_file": model.name,
        "model_sha256": _sha256(model) if model.is_file() else None,
        "settings": {
            "n_ctx": int(options.get("n_ctx", 0)) or None,
            "n_threads": int(options.get("n_threads", 0)) or None,
            "seed": seed,
            "reuse_prompt": reuse_prompt,
            # Named only where set: the identity of a server on llama.cpp's default batch stays what it was.
            **({"n_batch": int(options["n_batch"])} if "n_batch" in options else {}),
        },
    }
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(identity, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def _options(arguments: list[str]) -> dict[str, str]:
    """`--name value` pairs of the server's command line."""
    pairs = zip(arguments, [*arguments[1:], ""], strict=True)
    return {name[2:]: value for name, value in pairs if name.startswith("--") and not value.startswith("--")}


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


if __name__ == "__main__":
    main()
