"""`query-aware`: the question both before and after the documents (Lost in the Middle, sec. 5.2), so a
decoder-only model reads the documents already knowing what to look for."""

from __future__ import annotations

from typing import ClassVar

from contextlift.strategies.plugin import ChatRequest, Params, StepContext, Transform, text_fits


class QueryAware(Transform):
    """Repeats the question on the other side of the documents from where the request put it."""

    name: ClassVar[str] = "query-aware"

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        assert request.block is not None
        if not text_fits(request, context):
            return request
        line = f"Question: {request.question}"
        if request.question in request.block.head and request.question not in request.block.tail:
            return request.with_block_text(tail=f"\n\n{line}{request.block.tail}")
        head = request.block.head
        separator = "" if not head or head.endswith("\n\n") else ("\n" if head.endswith("\n") else "\n\n")
        return request.with_block_text(head=f"{head}{separator}{line}\n\n")
