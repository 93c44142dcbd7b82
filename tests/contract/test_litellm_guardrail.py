"""contextlift as a LiteLLM guardrail, in a real LiteLLM proxy process (`.venv-litellm`, scripts/litellm-venv) in
front of a scripted upstream, configured in LiteLLM's own config file as its docs show for a custom guardrail: a
`reorder` request reaches the upstream with the best document first, its response says so in `X-Context-*` headers
and its metadata (as a LiteLLM logging callback sees it) names it; a request without a strategy goes as it came; an
unknown strategy is LiteLLM's 400; a step that calls the upstream itself declines; and a sampled request is evaluated
in the background, its record in the shadow sink."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy.local_model import free_port
from tests.benchmark_data import unavailable
from tests.fakes import completion
from tests.serving import MOUNTAINS as PROMPT
from tests.serving import fake_upstream_url, request_body

ROOT = Path(__file__).resolve().parents[2]
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
MASTER_KEY = "sk-master-test-0123456789abcdef0123"
SHADOW_KEY = "sk-shadow-fake"
CONFIG = """model_list:
  - model_name: fake-model
    litellm_params:
      model: openai/fake-model
      api_base: {upstream}
      api_key: sk-provider-fake
litellm_settings:
  callbacks: recorder.recorder
guardrails:
  - guardrail_name: contextlift
    litellm_params:
      guardrail: contextlift.proxy.litellm_guardrail.ContextLift
      mode: [pre_call, post_call]
      default_on: true
"""
RECORDER = '''"""A LiteLLM logging callback: what each call's metadata says of contextlift, one JSON line per call."""
import json, os
from litellm.integrations.custom_logger import CustomLogger

class Recorder(CustomLogger):
    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        with open(os.environ["RECORDED"], "a") as out:
            out.write(json.dumps(metadata.get("contextlift")) + "\\n")

recorder = Recorder()
'''


class ScriptedUpstream:
    """A fake provider: every chat call answered; the bodies of LiteLLM's calls kept apart from shadow calls' (each
    comes with a key of its own)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.shadow_calls = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        if scope["path"].endswith("/chat/completions"):
            if (b"authorization", f"Bearer {SHADOW_KEY}".encode()) in scope["headers"]:
                self.shadow_calls += 1
            else:
                self.bodies.append(json.loads(body))
        payload = json.dumps(completion("Mont Blanc.")).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


class LiteLLM:
    def __init__(self, url: str, folder: Path, upstream: ScriptedUpstream) -> None:
        self.url, self.folder, self.upstream = url, folder, upstream

    def chat(self, strategy: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {MASTER_KEY}", **({"X-Context-Strategy": strategy} if strategy else {})}
        body = {"model": "fake-model", "messages": [{"role": "user", "content": PROMPT}]}
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, headers=headers, timeout=60)

    def recorded(self, calls: int) -> list[Any]:
        """What the logging callback saw of the first `calls` answered calls: it writes after the client has its
        answer, so this waits for its lines (whole ones) to be there."""
        deadline = time.monotonic() + 10
        path = self.folder / "recorded.jsonl"
        lines: list[str] = []
        while len(lines) < calls and time.monotonic() < deadline:
            time.sleep(0.1)
            text = path.read_text() if path.exists() else ""
            lines = text[: text.rfind("\n") + 1].splitlines()
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiteLLM]:
    if not LITELLM.exists():
        reason = "no LiteLLM proxy in .venv-litellm (scripts/litellm-venv installs it; scripts/test runs it)"
        unavailable(reason)
    folder = tmp_path_factory.mktemp("litellm")
    upstream = ScriptedUpstream()
    with fake_upstream_url(upstream) as upstream_url:
        (folder / "config.yaml").write_text(CONFIG.format(upstream=upstream_url))
        (folder / "recorder.py").write_text(RECORDER)
        port = free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CONTEXTLIFT_")},
            "LITELLM_MASTER_KEY": MASTER_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "RECORDED": str(folder / "recorded.jsonl"),
            # Shadow evaluation in LiteLLM's process: its calls go to the provider itself.
            "CONTEXTLIFT_SHADOW_RATE": "1",
            "CONTEXTLIFT_SHADOW_STRATEGIES": '["reorder"]',
            "CONTEXTLIFT_UPSTREAM_URL": upstream_url,
            "CONTEXTLIFT_UPSTREAM_API_KEY": SHADOW_KEY,
            "CONTEXTLIFT_SHADOW_SINK": str(folder / "shadow.jsonl"),
        }
        with (folder / "litellm.log").open("wb") as log:
            process = subprocess.Popen(
                [str(LITELLM), "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)],
                cwd=folder, env=env, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                assert process.poll() is None, (folder / "litellm.log").read_text()[-3000:]
                try:
                    if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, (folder / "litellm.log").read_text()[-3000:]
                time.sleep(0.5)
            yield LiteLLM(url, folder, upstream)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def test_a_reorder_through_litellm_moves_the_documents_and_says_so(litellm: LiteLLM) -> None:
    before = len(litellm.upstream.bodies)
    response = litellm.chat("reorder")
    assert response.status_code == 200, response.text
    sent = litellm.upstream.bodies[before]["messages"][0]["content"]
    assert sent.index("Mont Blanc is the highest") < sent.index("K2 lies")
    assert sent.startswith("Answer from the documents.\n\nDocument [1](Title: Mont Blanc)")
    assert response.headers["x-context-strategy"] == "reorder"
    assert response.headers["x-context-order"] == "3,1,2"
    assert response.headers["x-context-format"] == "litm"
    assert response.json()["choices"][0]["message"]["content"] == "Mont Blanc."
    said = litellm.recorded(1)[0]
    assert said == {"x-context-strategy": "reorder", "x-context-documents": "3", "x-context-format": "litm",
                    "x-context-order": "3,1,2"}  # fmt: skip


def test_without_a_strategy_the_request_goes_as_it_came(litellm: LiteLLM) -> None:
    before = len(litellm.upstream.bodies)
    response = litellm.chat(None)
    assert response.status_code == 200
    assert litellm.upstream.bodies[before]["messages"] == [{"role": "user", "content": PROMPT}]
    assert response.headers["x-context-strategy"] == "none"


def test_an_unknown_strategy_is_litellms_400(litellm: LiteLLM) -> None:
    before = len(litellm.upstream.bodies)
    response = litellm.chat("reodrer")
    assert response.status_code == 400
    assert "contextlift: unknown strategy 'reodrer'" in response.text
    assert len(litellm.upstream.bodies) == before


def test_a_step_that_calls_the_upstream_itself_declines(litellm: LiteLLM) -> None:
    before = len(litellm.upstream.bodies)
    response = litellm.chat("medoid")
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "medoid -> none: chat-only"
    assert litellm.upstream.bodies[before]["messages"] == [{"role": "user", "content": PROMPT}]


def test_a_sampled_request_is_evaluated_in_the_background(litellm: LiteLLM) -> None:
    assert litellm.chat("reorder").status_code == 200
    sink = litellm.folder / "shadow.jsonl"
    deadline = time.monotonic() + 30
    records: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not any(r.get("served") == "reorder" for r in records):
        time.sleep(0.2)
        lines = sink.read_text().splitlines() if sink.exists() else []
        records = [json.loads(line) for line in lines]
    [served] = [r for r in records if r.get("served") == "reorder"][:1]
    assert litellm.upstream.shadow_calls >= 3  # the control and the two other orders
    assert served["documents"] == 3
    assert served["format"] == "litm"
    assert served["control"]["agrees"] is True
