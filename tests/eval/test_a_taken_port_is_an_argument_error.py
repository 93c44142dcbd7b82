"""`contextlift eval --port N` where N is taken, or is no port, is refused like any other argument: one line on
standard error and exit status 2, before an upstream is started; not a log line and exit 1."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from contextlift.proxy.cli import main
from tests.serving import fake_upstream_url


async def _fake_upstream_never_asked(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raise AssertionError("the eval asked the upstream before its port was checked")


@pytest.mark.parametrize("taken", [True, False], ids=["taken", "not-a-port"])
def test_a_port_the_proxy_cannot_listen_on_exits_2_with_one_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], taken: bool
) -> None:
    with socket.socket() as holder, fake_upstream_url(_fake_upstream_never_asked) as url:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1] if taken else 70000
        argv = ["eval", "--upstream", url, "--port", str(port), "--tasks", "litm-qa", "--samples", "1",
                "--strategies", "none", "--out", str(tmp_path / "out"), "--yes"]  # fmt: skip
        capsys.readouterr()
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"contextlift eval: --port {port}: ")
    assert err.count("\n") == 1
