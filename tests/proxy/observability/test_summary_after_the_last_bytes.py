"""A request's record is completed (its summary line logged, its metrics counted) once the response's last bytes
have been handed to the server, not before them; its headers are set on the response head as it starts, each one
replacing any header of its name."""

from __future__ import annotations

from typing import Any

from contextlift.proxy.request_log import RequestLog, RequestRecord


async def sent_through_the_log(*messages: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    events: list[str] = []
    sent: list[dict[str, Any]] = []

    def completed(record: RequestRecord, seconds: float) -> None:
        events.append("completed")

    async def send(message: Any) -> None:
        sent.append(message)
        events.append(f"sent {message['type']}{' (more)' if message.get('more_body') else ''}")

    scope: Any = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], "state": {}}
    stamped = RequestLog(on_complete=completed).stamped(scope, send)
    for message in messages:
        await stamped(message)
    return events, sent


async def test_the_record_completes_after_the_last_body_is_sent() -> None:
    events, _ = await sent_through_the_log(
        {"type": "http.response.start", "status": 200, "headers": []},
        {"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True},
        {"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False},
    )
    assert events == [
        "sent http.response.start",
        "sent http.response.body (more)",
        "sent http.response.body",
        "completed",
    ]


async def test_the_records_headers_replace_their_namesakes_in_place() -> None:
    head = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"X-Context-Strategy", b"forged"), (b"a", b"1"), (b"x-context-strategy", b"again")],
    }
    _, sent = await sent_through_the_log(head, {"type": "http.response.body", "body": b""})
    headers = sent[0]["headers"]
    assert headers[:2] == [(b"x-context-strategy", b"none"), (b"a", b"1")]
    names = [name for name, _ in headers]
    assert names.count(b"x-context-strategy") == 1
    assert {b"x-context-overhead-ms", b"x-contextlift-request-id", b"x-request-id"} <= set(names)


async def test_an_upstream_request_id_stays() -> None:
    head = {"type": "http.response.start", "status": 200, "headers": [(b"X-Request-Id", b"req_upstream")]}
    _, sent = await sent_through_the_log(head, {"type": "http.response.body", "body": b""})
    ids = [value for name, value in sent[0]["headers"] if name.lower() == b"x-request-id"]
    assert ids == [b"req_upstream"]


def test_request_ids_are_32_hex_digits_that_a_seeded_global_generator_does_not_repeat() -> None:
    import random

    def new_id() -> str:
        scope: Any = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], "state": {}}
        return RequestLog().record_of(scope).request_id

    random.seed(7)
    first = [new_id() for _ in range(3)]
    random.seed(7)  # an eval's shuffle in the same process
    again = [new_id() for _ in range(3)]
    assert len(set(first + again)) == 6
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in first + again)
