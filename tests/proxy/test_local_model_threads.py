"""The embedded model's server runs on the CPUs it is given: llama-cpp-python's own default generates on half."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextlift.proxy import local_model


@pytest.fixture(autouse=True)
def _llama_cpp_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model.importlib.util, "find_spec", lambda name: object())


def _threads(command: list[str]) -> tuple[str, str]:
    return command[command.index("--n_threads") + 1], command[command.index("--n_threads_batch") + 1]


def test_unset_threads_mean_every_cpu_this_process_may_use() -> None:
    command = local_model.server_command(Path("m.gguf"), host="127.0.0.1", port=1, alias="a", context=512, threads=None)
    every = str(len(os.sched_getaffinity(0)))
    assert _threads(command) == (every, every)


def test_set_threads_are_used_for_generation_and_prompt_processing() -> None:
    command = local_model.server_command(Path("m.gguf"), host="127.0.0.1", port=1, alias="a", context=512, threads=3)
    assert _threads(command) == ("3", "3")
