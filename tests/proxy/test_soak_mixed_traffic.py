"""About a minute of the soak script: mixed traffic with injected upstream faults ends with no proxy 500, no
hung request, no unterminated stream and no descriptor leak (the script's own exit status)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_a_minute_of_faulty_mixed_traffic() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "45", "--concurrency", "8"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    print(result.stdout)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert summary["requests"] > 200
    assert summary["outcomes"]["ok"] > summary["requests"] * 0.8
    assert any(kind != "ok" for kind in summary["outcomes"])  # the faults really happened
