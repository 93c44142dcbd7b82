"""`parse_request` refuses a request carrying more documents, or more bytes of them, than its limits allow,
whether they were detected in the messages or given in the `documents` field, before building them all."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from contextlift.strategies import DocumentLimitError, DocumentLimits, parse_request
from tests.cpu_time import cpu_clock

LIMITS = DocumentLimits(max_documents=3, max_document_bytes=100)


def body(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def litm(count: int, text: str = "x") -> str:
    return "\n".join(f"Document [{i}](Title: T) {text}" for i in range(1, count + 1)) + "\n\nQuestion: q?"


def parts(count: int, text: str = "x") -> list[dict[str, str]]:
    return [{"type": "text", "text": text}] * count + [{"type": "text", "text": "q?"}]


WITHIN = {
    "detected": body(litm(3)),
    "content-parts": body(parts(3)),
    "documents-field": body("q?", documents=["a", "b", {"title": "t", "text": "c"}]),
}
TOO_MANY = {
    "detected": body(litm(4)),
    "content-parts": body(parts(4)),
    "documents-field": body("q?", documents=["a", "b", "c", "d"]),
}
TOO_LARGE = {
    "detected": body(litm(2, "x" * 80)),
    "content-parts": body(parts(2, "x" * 60)),
    "documents-field": body("q?", documents=["x" * 60, "y" * 60]),
    # 34 characters of three bytes each: 102 bytes in UTF-8, though only 34 characters.
    "documents-field-utf8": body("q?", documents=["€" * 34]),
    "documents-field-title": body("q?", documents=[{"title": "t" * 99, "text": "xy"}]),
}


@pytest.mark.parametrize("request_body", WITHIN.values(), ids=WITHIN.keys())
def test_documents_within_the_limits_are_parsed(request_body: dict[str, Any]) -> None:
    assert len(parse_request(request_body, limits=LIMITS).documents) == 3


@pytest.mark.parametrize("request_body", TOO_MANY.values(), ids=TOO_MANY.keys())
def test_more_documents_than_allowed_are_refused(request_body: dict[str, Any]) -> None:
    with pytest.raises(DocumentLimitError, match="more than 3 documents"):
        parse_request(request_body, limits=LIMITS)


@pytest.mark.parametrize("request_body", TOO_LARGE.values(), ids=TOO_LARGE.keys())
def test_more_document_bytes_than_allowed_are_refused(request_body: dict[str, Any]) -> None:
    with pytest.raises(DocumentLimitError, match="more than 100 bytes"):
        parse_request(request_body, limits=LIMITS)


@pytest.mark.parametrize("request_body", [*TOO_MANY.values(), *TOO_LARGE.values()])
def test_without_limits_every_document_is_parsed(request_body: dict[str, Any]) -> None:
    assert parse_request(request_body).documents


def test_a_million_documents_are_refused_before_any_is_built() -> None:
    # Used to build a million objects first: 7.5 s and 1.66 GB for three million.
    request_body = body("q?", documents=["x"] * 1_000_000)
    tracemalloc.start()
    try:
        with cpu_clock() as elapsed, pytest.raises(DocumentLimitError):
            parse_request(request_body, limits=DocumentLimits(max_documents=2_000, max_document_bytes=8 << 20))
        seconds = elapsed()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seconds < 0.5
    assert peak < 1 << 20


def test_detection_stops_scanning_one_document_past_the_limit() -> None:
    # 200,000 elements in the prompt; the scan builds no more than the limit's worth of them before refusing.
    request_body = body("<doc>x</doc>" * 200_000)
    limits = DocumentLimits(max_documents=10, max_document_bytes=8 << 20, max_scanned_chars=8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(DocumentLimitError):
            parse_request(request_body, limits=limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_message_of_more_text_parts_than_documents_allowed_is_refused_before_they_are_scanned() -> None:
    request_body = body(parts(400_000))
    with cpu_clock() as elapsed, pytest.raises(DocumentLimitError):
        parse_request(request_body, limits=DocumentLimits(max_documents=2_000, max_document_bytes=8 << 20))
    assert elapsed() < 0.5


def test_limits_are_a_frozen_value() -> None:
    limits = DocumentLimits(2_000, 8 << 20)
    assert limits == DocumentLimits(max_documents=2_000, max_document_bytes=8 << 20)
    with pytest.raises(AttributeError):
        limits.max_documents = 1  # type: ignore[misc]


def test_a_text_past_the_scanned_length_goes_as_it_came_without_a_scan() -> None:
    # Issue 50, item 1: a 5 MB context of blank-line runs, whose scan held the interpreter's lock 2.0-2.6 s.
    request_body = body("Context:\n" + "a\n\n\n" * 1_250_000 + "Question: q?")
    with cpu_clock() as elapsed:
        request = parse_request(request_body, limits=DocumentLimits(2_000, 8 << 20))
    assert elapsed() < 0.1
    assert request.detection == "none: over-limit"
    assert request.documents == ()
    assert request.render() == request_body


def test_a_text_at_the_scanned_length_is_read() -> None:
    context = "\n\n---\n\n".join(["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."])
    text = f"Context:\n{context}\n\nQuestion: where do gamma rays come from?"
    request = parse_request(body(text), limits=DocumentLimits(2_000, 8 << 20, max_scanned_chars=len(text)))
    assert len(request.documents) == 3
    over = parse_request(body(text), limits=DocumentLimits(2_000, 8 << 20, max_scanned_chars=len(text) - 1))
    assert over.detection == "none: over-limit"
