"""The hostile script, as CI runs it: every attack of the hardening issues, replayed against a real proxy
process in front of a scripted loopback upstream, ends with no DEFECT (the script's own exit status and
total line)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hostile.py"
TOTAL = re.compile(r"^hostile: (?P<cases>\d+) cases, (?P<ok>\d+) OK, (?P<defects>\d+) DEFECT, worst /healthz ")


def test_no_hostile_client_or_upstream_finds_a_defect() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    print(result.stdout)
    lines = result.stdout.strip().splitlines()
    total = TOTAL.match(lines[-1]) if lines else None
    assert total is not None, result.stdout[-3000:] + result.stderr[-3000:]
    defects = [line for line in lines if line.endswith("  DEFECT")]
    assert int(total["defects"]) == 0, "\n".join(defects)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert int(total["cases"]) == int(total["ok"]) >= 100  # every family ran, in the local mode
