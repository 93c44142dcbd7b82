"""Hostile replay: the attacks of the hardening issues (#12, #20 and #50's request path), one line per case.

By default the script starts its own scripted fake upstream (an ASGI app on 127.0.0.1 that records every
request it receives and misbehaves on command) and a real proxy process in front of it, with short timeouts
so the timing cases finish in seconds. Each case prints `family  case  expected=...  observed=...  OK|DEFECT`;
the last line is the total and the worst `/healthz` latency measured while a hostile request ran. Exits 1 if
any case is a DEFECT, 2 if the proxy could not be started.

    .venv/bin/python scripts/hostile.py                                  # what CI runs (about 2 minutes)
    .venv/bin/python scripts/hostile.py --proxy https://staging.example  # client-side families only

With `--proxy` only the families a client can check alone run (paths, overrides, bodies, http); key
secrecy, forwarded headers, strategy parameters, the hostile upstream and shutdown need the fake upstream and
run in the default mode only. Against a deployment the bodies family sends a few large prompts upstream
(`max_tokens` 8) and the http family holds `--max-in-flight` + 2 connections open for a few seconds.
"""

from __future__ import annotations

import argparse
import sys

# Run as a script, Python puts this file's folder (scripts/) first on sys.path: the package beside it imports.
from hostile_replay import run_deployment, run_local
from hostile_replay.knobs import Knobs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxy", help="base URL of a running proxy (no /v1); default: start a local one")
    parser.add_argument("--model", default="gpt-4o-mini", help="model of the requests sent with --proxy")
    parser.add_argument("--api-key", help="sent as the bearer token with --proxy, if the deployment needs one")
    parser.add_argument("--header-read-timeout", type=float, default=10.0, help="the deployment's setting")
    parser.add_argument("--body-read-timeout", type=float, default=60.0, help="the deployment's setting")
    parser.add_argument("--keepalive-timeout", type=float, default=5.0, help="the deployment's setting")
    parser.add_argument("--max-in-flight", type=int, default=256, help="the deployment's setting")
    args = parser.parse_args()

    if args.proxy:
        knobs = Knobs(header_read_timeout=args.header_read_timeout, body_read_timeout=args.body_read_timeout,
                      keepalive_timeout=args.keepalive_timeout, max_in_flight=args.max_in_flight)  # fmt: skip
        auth = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
        return run_deployment(args.proxy, knobs, model=args.model, auth=auth)

    return run_local()


if __name__ == "__main__":
    sys.exit(main())
