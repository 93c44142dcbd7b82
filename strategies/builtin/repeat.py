"""`repeat`: the prompt sent twice (Leviathan et al. 2025, "Prompt Repetition Improves Non-Reasoning LLMs",
arXiv:2512.14982: `<QUERY>` becomes `<QUERY><QUERY>`; only prefill tokens are added, no call). A causal model
reads the second copy knowing the whole first one, question included: the paper's reason, and Lost in the
Middle's for `query-aware`.

What is repeated, decided here where the paper is silent about chat requests:

- the last message, which must be the user's: its text once more after a blank line. A system message is the
  app's instructions, not the query, and stays once (with LangChain's stuff prompt, whose documents sit in the
  system message, only the question repeats: the step says `repeated=user-turn` either way);
- a request whose last message is not the user's (a tool result, an assistant prefill) is left alone
  (`skipped=not-user-last`): repeating an earlier turn would change what the model is answering;
- a user turn holding an image or audio part is left alone (`skipped=non-text`): repeating only its text would
  change what the text refers to, and repeating the image doubles its cost;
- past `limit` prompt tokens (cl100k, all messages, after repetition) it is left alone (`skipped=over-limit`):
  the proxy does not know the upstream's window, and a doubled long prompt is the likeliest to pass it.

It rewrites the body as rendered so far, so it goes after every step that needs documents (a pipeline that puts one
after it is refused: that step would find none), and the request it returns keeps the documents it wrote only as a
record of where they went (`ChatRequest.written`). It reports what it added: `tokens=+N` (cl100k) beside the doubled
turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import anyio

from contextlift.strategies.plugin import ChatRequest, Param, Params, StepContext, Tokenizer, Transform

SEPARATOR = "\n\n"
"""Between the two copies: the paper concatenates them; a blank line keeps the last word of the first copy and the
first word of the second from reading as one."""
DEFAULT_LIMIT = 32_000


class Repeat(Transform):
    """Sends the user's last turn twice."""

    name: ClassVar[str] = "repeat"
    needs_documents: ClassVar[bool] = False
    keeps_documents: ClassVar[bool] = False
    prompt_copies: ClassVar[int] = 2
    params: ClassVar[tuple[Param, ...]] = (
        Param("limit", int, DEFAULT_LIMIT, "the most prompt tokens (cl100k) the repeated request may hold; past it "
              "the request goes as it came", minimum=1, maximum=1_000_000),
    )  # fmt: skip

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        body = request.render()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not _is_user(messages[-1]):
            context.note("skipped=not-user-last")
            return request
        content = messages[-1].get("content")
        if isinstance(content, list) and any(not _text_part(p) for p in content):
            context.note("skipped=non-text")
            return request
        if not isinstance(content, (str, list)) or not content:
            context.note("skipped=empty")
            return request
        repeated = _repeated(content)
        tokenizer = context.services.tokenizer
        # Counting tokens is CPU work in proportion to the prompt: not on the event loop.
        before, turn = await anyio.to_thread.run_sync(_counts, messages, _text(content), tokenizer)
        added = turn + tokenizer.count(SEPARATOR)
        if before + added > int(params["limit"]):
            context.note("skipped=over-limit")
            return request
        context.note("repeated=user-turn")
        context.note(f"tokens=+{added}")
        new_body = {**body, "messages": [*messages[:-1], {**messages[-1], "content": repeated}]}
        return ChatRequest(
            body=new_body, question=request.question, detection=request.detection, written=request.sent_documents
        )


def _is_user(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "user"


def _text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _text(content: str | list[Any]) -> str:
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def _repeated(content: str | list[Any]) -> str | list[Any]:
    if isinstance(content, str):
        return f"{content}{SEPARATOR}{content}"
    parts = [dict(p) for p in content]
    return [*parts, {"type": "text", "text": SEPARATOR}, *(dict(p) for p in content)]


def _counts(messages: list[Any], turn: str, tokenizer: Tokenizer) -> tuple[int, int]:
    """The prompt's tokens now (every message's text), and the repeated turn's."""
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            total += tokenizer.count(content)
        elif isinstance(content, list):
            total += sum(tokenizer.count(p["text"]) for p in content if _text_part(p))
    return total, tokenizer.count(turn)
