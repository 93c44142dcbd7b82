"""How the embedded model's server is made to reproduce its answers, on a stand-in for llama-cpp-python's `Llama`
(tests/e2e/test_local_model_reproduces.py checks the effect on the real model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from contextlift.proxy.local_model_server import _options, make_reproducible


class _Llama:
    """Records what the wrapped methods are called with: a stand-in, not the model."""

    def __init__(self) -> None:
        self.n_tokens = 57
        self.seen: list[Any] = []

    def _create_completion(self, prompt: str, **kwargs: Any) -> Any:
        self.seen.append(("seed", kwargs.get("seed")))
        return list(self.generate([1, 2, 3]))

    def generate(self, tokens: list[int], **kwargs: Any) -> Iterator[int]:
        self.seen.append(("cached tokens", self.n_tokens))
        yield from tokens


def _reproducible(**options: Any) -> type[_Llama]:
    llama = type("Llama", (_Llama,), {})
    make_reproducible(llama, **options)
    return llama


def test_a_request_without_a_seed_samples_with_the_servers_and_one_with_a_seed_keeps_it() -> None:
    model = _reproducible(seed=7, reuse_prompt=False)()
    model._create_completion("p", seed=None)
    model._create_completion("p")
    model._create_completion("p", seed=3)
    assert [s for s in model.seen if s[0] == "seed"] == [("seed", 7), ("seed", 7), ("seed", 3)]


def test_every_prompt_is_evaluated_from_its_first_token_unless_reuse_is_asked_for() -> None:
    fresh = _reproducible(seed=0, reuse_prompt=False)()
    assert fresh._create_completion("p") == [1, 2, 3]
    assert ("cached tokens", 0) in fresh.seen
    reusing = _reproducible(seed=0, reuse_prompt=True)()
    reusing._create_completion("p")
    assert ("cached tokens", 57) in reusing.seen


def test_the_identity_reads_the_servers_own_arguments() -> None:
    options = _options(["--model", "/m/x.gguf", "--model_alias", "a", "--verbose", "False", "--flag", "--n_ctx", "9"])
    assert options == {"model": "/m/x.gguf", "model_alias": "a", "verbose": "False", "n_ctx": "9"}
