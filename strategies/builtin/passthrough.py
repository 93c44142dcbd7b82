"""`none`: the request goes upstream untouched."""

from __future__ import annotations

from typing import ClassVar

from contextlift.strategies.plugin import ChatRequest, Params, StepContext, Transform


class PassThrough(Transform):
    """Selects no strategy. It cannot be combined with others; a pipeline of it alone is empty."""

    name: ClassVar[str] = "none"
    needs_documents: ClassVar[bool] = False
    passes_through: ClassVar[bool] = True

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        return request
