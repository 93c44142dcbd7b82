"""What a newcomer copies from the front page works as printed. Its Python snippet runs with no `OPENAI_API_KEY` in the
environment (in front of the embedded model, or of a proxy that holds the upstream's key, a client has none, and the
openai SDK will not start without one), only the proxy's address replaced by the test proxy's, and the upstream
reads its documents reordered. Every SDK client the docs build is given a key the same way. The answer headers the
front page and the getting-started page print for the same request are the same run's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import structlog.testing

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import build_server
from tests.fakes import FakeEmbedder, FakeUpstream, completion
from tests.serving import UPSTREAM, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
PRINTED_URL = "http://127.0.0.1:8080/v1"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_the_front_pages_python_snippet_runs_without_an_api_key(
    monkeypatch: pytest.MonkeyPatch, fake: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    [snippet] = python_blocks(README)
    assert PRINTED_URL in snippet
    fake.queue(httpx.Response(200, json=completion("Mont Blanc.")))
    settings = Settings(upstream_url=UPSTREAM, retry_backoff=0.0)
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    # The proxy's log lines are kept out of standard output, where the snippet prints its answer.
    with structlog.testing.capture_logs(), serve_in_thread(build_server(app, settings)) as (port, _):
        code = snippet.replace(PRINTED_URL, f"http://127.0.0.1:{port}/v1")
        exec(compile(code, str(README), "exec"), {"__name__": "readme_snippet"})
    assert capsys.readouterr().out == "Mont Blanc.\n"
    [sent] = fake.requests
    lines = json.loads(sent.content)["messages"][0]["content"].splitlines()
    assert lines[2] == "Document [1](Title: Mont Blanc) Mont Blanc is the highest mountain in the Alps."


@pytest.mark.parametrize("page", [README, GETTING_STARTED], ids=lambda page: page.name)
def test_every_sdk_client_the_docs_build_is_given_a_key(page: Path) -> None:
    calls = [
        call
        for block in python_blocks(page)
        for call in re.findall(r"\b(?:openai\.OpenAI|ChatOpenAI)\((.*?)\n?\)", block, flags=re.S)
    ]
    assert calls
    for call in calls:
        assert "api_key=" in call, call


def answer_headers(page: Path) -> str:
    """The paragraph that introduces the quick start's answer headers, and the headers."""
    text = page.read_text(encoding="utf-8")
    start = text.index("The proxy's own headers in the answer")
    return text[start : text.index("```\n\n", text.index("```\n", start) + 4)]


def test_the_front_page_and_getting_started_print_the_same_runs_headers() -> None:
    assert answer_headers(README) == answer_headers(GETTING_STARTED)
    assert "x-context-overhead-ms: " in answer_headers(README)
