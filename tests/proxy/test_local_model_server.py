"""How the embedded model's server is made to reproduce its answers, on a stand-in for llama-cpp-python's `Llama`
(tests/e2e/test_local_model_reproduces.py checks the effect on the real model)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from contextlift.proxy.local_model_server import _options, make_reproducible, reused_prefix


class _Llama:
    """Records what the wrapped methods are called with: a stand-in, not the model. Like llama-cpp-python 0.3's,
    `_create_completion` is a generator whose last chunk carries the usage, and the cache is `_input_ids` up to
    `n_tokens`."""

    def __init__(self) -> None:
        self.n_tokens = 3
        self._input_ids = [1, 2, 3, 0, 0]
        self.seen: list[Any] = []

    def _create_completion(self, prompt: list[int], **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.seen.append(("seed", kwargs.get("seed")))
        text = list(self.generate(prompt))
        yield {"choices": [{"text": str(text)}], "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1}}

    def generate(self, tokens: list[int], **kwargs: Any) -> Iterator[int]:
        self.seen.append(("cached tokens", self.n_tokens))
        yield from tokens


def _reproducible(**options: Any) -> type[_Llama]:
    llama = type("Llama", (_Llama,), {})
    make_reproducible(llama, **options)
    return llama


def test_a_request_without_a_seed_samples_with_the_servers_and_one_with_a_seed_keeps_it() -> None:
    model = _reproducible(seed=7, reuse_prompt=False)()
    list(model._create_completion([1], seed=None))
    list(model._create_completion([1]))
    list(model._create_completion([1], seed=3))
    assert [s for s in model.seen if s[0] == "seed"] == [("seed", 7), ("seed", 7), ("seed", 3)]


def test_every_prompt_is_evaluated_from_its_first_token_unless_reuse_is_asked_for() -> None:
    fresh = _reproducible(seed=0, reuse_prompt=False)()
    [chunk] = fresh._create_completion([1, 2, 4])
    assert chunk["choices"] == [{"text": "[1, 2, 4]"}]
    assert ("cached tokens", 0) in fresh.seen
    assert "prompt_tokens_details" not in chunk["usage"]  # nothing reused, nothing said
    reusing = _reproducible(seed=0, reuse_prompt=True)()
    [chunk] = reusing._create_completion([1, 2, 4, 5])
    assert ("cached tokens", 3) in reusing.seen
    # The usage says what was taken from the cache, as OpenAI's does: the common prefix [1, 2].
    assert chunk["usage"] == {"prompt_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 2}}


@pytest.mark.parametrize(
    ("cached", "prompt", "live", "reused"),
    [
        ([1, 2, 3], [1, 2, 3], True, 3),  # the same prompt, its logits at hand: nothing evaluated
        ([1, 2, 3], [1, 2, 3], False, 2),  # the same prompt after a restored state: the last token again
        ([1, 2, 3], [1, 2], True, 1),  # a prefix of the cache: its last token evaluated again for the logits
        ([1, 2, 3], [1, 2, 7, 8], True, 2),
        ([5, 2, 3], [1, 2, 3], True, 0),
        ([], [1, 2], True, 0),
    ],
)
def test_the_reused_prefix_is_what_llama_cpp_python_skips(
    cached: list[int], prompt: list[int], live: bool, reused: int
) -> None:
    assert reused_prefix(cached, prompt, logits_live=live) == reused


def test_the_identity_reads_the_servers_own_arguments() -> None:
    options = _options(["--model", "/m/x.gguf", "--model_alias", "a", "--verbose", "False", "--flag", "--n_ctx", "9"])
    assert options == {"model": "/m/x.gguf", "model_alias": "a", "verbose": "False", "n_ctx": "9"}


def test_the_servers_answer_keeps_the_cached_tokens_where_reuse_is_on() -> None:
    """llama-cpp-python's server validates its answer against its TypedDicts, which drop undeclared keys: with reuse
    on, the usage's `prompt_tokens_details` is declared before the server is built, and survives validation."""
    if importlib.util.find_spec("llama_cpp") is None:  # not imported here: it leaves files open at exit
        pytest.skip("the local-model extra is not installed")
    code = (
        "import pydantic, llama_cpp\n"
        "from contextlift.proxy.local_model_server import _keep_cached_tokens_in_usage\n"
        "usage = {'prompt_tokens': 9, 'completion_tokens': 1, 'total_tokens': 10,\n"
        "         'prompt_tokens_details': {'cached_tokens': 8}}\n"
        "adapter = lambda: pydantic.TypeAdapter(llama_cpp.llama_types.CompletionUsage)\n"
        "before = adapter().dump_python(adapter().validate_python(usage))\n"
        "_keep_cached_tokens_in_usage()\n"
        "after = adapter().dump_python(adapter().validate_python(usage))\n"
        "assert 'prompt_tokens_details' not in before, before\n"
        "assert after == usage, after\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
