"""A run on an embedded model says how long it will take before its first request, at the speed docs/performance.md
measured for that model (its row in `proxy.embedded_models`), and sends nothing to time it; the progress line then
corrects the time left from the answers. An upstream of unknown speed is timed first, as before."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextlift.eval import local_proxy
from contextlift.eval.cost import job_costs
from contextlift.eval.local_proxy import embedded_speed
from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.runner import jobs
from contextlift.eval.sources import find_sources
from contextlift.eval.timing import Speed, estimate_time
from contextlift.proxy import Settings
from contextlift.proxy.cli import main
from contextlift.proxy.embedded_models import MODELS
from tests.eval.test_eval_says_its_time import scripted_upstream, small_run
from tests.serving import fake_upstream_url

PERFORMANCE = Path(__file__).parents[2] / "docs" / "performance.md"


def test_each_embedded_models_speed_is_the_one_docs_performance_md_measured() -> None:
    section = PERFORMANCE.read_text(encoding="utf-8").split("## The embedded models' speed", 1)[1].split("\n## ")[0]
    rows = {m[0]: (float(m[1]), float(m[2])) for m in re.findall(r"^\| `([^`]+)` \| [^|]+\| ([\d.]+) \| ([\d.]+) \|",
                                                                   section, re.M)}  # fmt: skip
    assert rows == {m.name: (m.prompt_tokens_per_s, m.generated_tokens_per_s) for m in MODELS.values()}


def test_the_speed_is_known_for_the_embedded_model_the_settings_start_and_for_no_other_upstream(tmp_path: Path) -> None:
    speed = embedded_speed(Settings(upstream_url=None, local_model_path=None))
    assert speed is not None
    assert speed.per_prompt_token_s == pytest.approx(1 / 262)
    assert speed.per_completion_token_s == pytest.approx(1 / 88.7)
    assert speed.describe() == (
        "prompt tokens 262/s, completion tokens 89/s, measured for smollm2-135m on 2 idle CPU cores "
        "(docs/performance.md)"
    )
    qwen = embedded_speed(Settings(upstream_url=None, local_model_path=None, local_model="qwen2.5-coder-1.5b"))
    assert qwen is not None
    assert qwen.per_prompt_token_s == pytest.approx(1 / 56)
    assert embedded_speed(Settings(upstream_url="http://vllm:8000/v1")) is None
    assert embedded_speed(Settings(upstream_url=None, local_model_path=tmp_path / "mine.gguf")) is None


def test_a_dry_run_on_the_embedded_model_says_its_time_at_the_models_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTEXTLIFT_UPSTREAM_URL", raising=False)
    assert main(["eval", "--dry-run", "--profile", "quick", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    said = (
        r"^time: about \d+ min at the upstream's speed \(prompt tokens 262/s, completion tokens 89/s, "
        r"measured for smollm2-135m on 2 idle CPU cores \(docs/performance.md\)\)$"
    )
    assert re.search(said, out, re.M)
    assert "(high)" not in out  # every pipeline priced alike, and one line says how
    assert "each pipeline priced from its estimated calls and tokens" in out
    assert not (tmp_path / "r").exists()


def test_the_quick_profile_is_priced_within_twelve_minutes_on_the_embedded_model() -> None:
    # The estimate came within 25% of the run it priced (docs/eval.md): twelve minutes priced keep the run within
    # the fifteen that docs/eval.md promises on 2 idle cores.
    plan = make_plan("quick")
    cases, _ = build_cases(plan, find_sources(None, None))
    speed = embedded_speed(Settings(upstream_url=None, local_model_path=None))
    assert speed is not None
    priced = estimate_time([(job, False) for job in job_costs(jobs(cases, plan.strategies, reasked=30))], speed, {})
    assert priced.seconds <= 12 * 60


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[str]]]:
    sent: list[str] = []
    with fake_upstream_url(scripted_upstream(sent)) as url:
        yield url, sent


def test_a_run_at_a_known_speed_says_its_time_before_its_first_request_and_times_nothing(
    upstream: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sent = upstream
    monkeypatch.setattr(local_proxy, "embedded_speed", lambda _: Speed.known(1000.0, 100.0, "measured here"))
    argv = small_run(url, tmp_path / "r", "0%,100%", "none", "recite")
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "timing the upstream" not in err
    said = err.index("time: about")
    assert "prompt tokens 1,000/s, completion tokens 100/s, measured here)" in err[said:].splitlines()[0]
    assert said < err.index("contextlift eval: 1 of ")
    answered = [json.loads(line) for line in (tmp_path / "r" / "responses.jsonl").read_text().splitlines()]
    assert len(sent) == sum(2 if a["strategy"] == "recite" else 1 for a in answered)  # recite calls twice
