"""The hostile replay behind `scripts/hostile.py`: the attacks of hardening issues #12, #20 and #50 against a
proxy, one line per case.

- `knobs`: the proxy's limits the cases judge against, and the local proxy's environment.
- `payloads`: strict JSON checks, OpenAI-shaped answers and stream frames, the gzip bomb.
- `fake_upstream`: the scripted upstream that records what it receives and misbehaves on command.
- `local_proxy`: the fake upstream and a real proxy process, on loopback.
- `reply`, `http_client`, `raw_http`: what the client received; sending through httpx or by hand on a socket.
- `context`, `case`, `probes`: what every case can use, the case type, `/healthz` and memory probes.
- `families`: the cases, one module per family; `runner` and `report` run them and print the lines.
"""

from hostile_replay.runner import run_deployment, run_local

__all__ = ["run_deployment", "run_local"]
