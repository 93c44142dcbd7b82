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

Run as `python -m contextlift.proxy.local_model_server [--contextlift-...] <llama_cpp.server arguments>`; with
`--contextlift-identity PATH` it writes what the answers depend on (server version, build, model file, settings)
there as JSON before the server starts, for the eval's cache key and reports.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterator
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
    if ours.identity is not None:
        _write_identity(ours.identity, server_args, seed=ours.seed, reuse_prompt=ours.reuse_prompt)
    sys.argv = [sys.argv[0], *server_args]
    server.main()  # type: ignore[no-untyped-call]


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
