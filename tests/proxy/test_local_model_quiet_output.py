"""The embedded model started quietly (as `contextlift eval` starts it) keeps its output off the terminal,
and still says why it failed when it cannot start."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlift.proxy.embedded_models import LocalModelError
from contextlift.proxy.local_model import LocalModel


def test_a_quiet_model_that_cannot_start_reports_its_own_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model = LocalModel(tmp_path / "missing.gguf", quiet=True, startup_timeout=60)
    with pytest.raises(LocalModelError, match=r"(?s)exited with status \d+: .*Model path does not exist"):
        model.start()
    captured = capfd.readouterr()
    assert "Model path does not exist" not in captured.err + captured.out
