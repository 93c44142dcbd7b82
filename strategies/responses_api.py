"""The Responses API's request (`POST /v1/responses`) as the chat request detection reads, and back.

`as_chat` gives the body's `instructions` and `input` as chat messages: `instructions` a system message, a string
`input` a user message, each message item a message with its text parts (`input_text`, `output_text`) as `text`
parts, consecutive `function_call` items one assistant message calling the tools, and each `function_call_output`
a tool message. Detection then finds documents there as in any chat request: in a message's text, in its text parts
(file-search-style chunks, one part each), or in tool results. `responses_body` writes the rendered messages back
into the client's body: every field and item keeps what the client sent but for the text a step changed and the order
of what it moved.

Each message of the chat view names where it came from (`ORIGIN`), so nothing is matched by position or content on
the way back. An input the view cannot say exactly (an item of another type: reasoning, a built-in tool's call, an
item reference; content that is neither text nor a list of parts) gives no view: the request is relayed as sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORIGIN = "_contextlift_origin"
"""A chat-view message's key naming what it stands for: `instructions`, `input` (a string input), an item's index,
or the indices of the function calls it groups. Never sent: `responses_body` reads it off."""
PART_TYPE = "_contextlift_type"
"""A chat-view text part's key holding the Responses part type it stands for (`input_text`, `output_text`)."""
_TEXT_PARTS = ("input_text", "output_text")
_PRIVATE = "_contextlift_"
_ROLES = ("user", "system", "developer", "assistant")


@dataclass(frozen=True, slots=True)
class ChatView:
    """A Responses request seen as chat messages."""

    body: dict[str, Any]
    """A chat-completions body (`model`, `stream`, `messages`) for detection."""
    decline: str | None = None
    """Why there is no view (`none: <reason>`), where there is none."""


def as_chat(body: Mapping[str, Any]) -> ChatView:
    """The chat view of a Responses body, or one that says why there is none."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions, ORIGIN: "instructions"})
    elif instructions is not None and not isinstance(instructions, str):
        return _none("unsupported-instructions")
    given = body.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given, ORIGIN: "input"})
    elif isinstance(given, list):
        for index, item in enumerate(given):
            message = _message(index, item, messages)
            if message is None:
                kind = item.get("type", "message") if isinstance(item, dict) else None
                return _none(f"unsupported-input-item={kind if isinstance(kind, str) else 'unknown'}"[:80])
            if message:
                messages.append(message)
    else:
        return _none("no-input")
    if not messages:
        return _none("no-input")
    view: dict[str, Any] = {"messages": messages, "stream": bool(body.get("stream"))}
    if isinstance(body.get("model"), str):
        view["model"] = body["model"]
    return ChatView(view)


def _none(reason: str) -> ChatView:
    return ChatView({}, f"none: {reason}")


def _message(index: int, item: Any, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The chat message for an input item; {} where it joined the message before (a function call following
    another); None where the view cannot say it."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") in _ROLES:
        content = _content(item.get("content"))
        return None if content is None else {"role": item["role"], "content": content, ORIGIN: index}
    if kind == "function_call" and all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
        call = {"id": item["call_id"], "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]}}  # fmt: skip
        previous = messages[-1] if messages else None
        if previous is not None and isinstance(previous.get(ORIGIN), list) and previous[ORIGIN][-1] == index - 1:
            previous["tool_calls"].append(call)
            previous[ORIGIN].append(index)
            return {}
        return {"role": "assistant", "content": None, "tool_calls": [call], ORIGIN: [index]}
    if kind == "function_call_output" and isinstance(item.get("call_id"), str) and isinstance(item.get("output"), str):
        return {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"], ORIGIN: index}
    return None


def _content(content: Any) -> str | list[dict[str, Any]] | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        return None
    parts = []
    for part in content:
        if part.get("type") == "text" or any(str(key).startswith(_PRIVATE) for key in part):
            return None  # not a Responses part (a chat one, or this view's own key sent by a client): not read
        if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({**part, "type": "text", PART_TYPE: part["type"]})
        else:
            parts.append(dict(part))  # an image, a file: kept in its place, never read
    return parts


def responses_body(body: Mapping[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
    """The client's Responses body with the rendered chat messages written back into its `instructions` and
    `input`.

    Raises:
        ValueError: a rendered message the client's body has no place for (a bug, never the client's).
    """
    out = dict(body)
    items: Sequence[Any] = body["input"] if isinstance(body.get("input"), list) else ()
    written: list[Any] = []
    for message in rendered["messages"]:
        origin = message.get(ORIGIN)
        if origin == "instructions":
            out["instructions"] = _text(message)
        elif origin == "input":
            out["input"] = _text(message)
        elif isinstance(origin, list):  # function calls: as the client sent them
            written += [items[i] for i in origin]
        elif isinstance(origin, int):
            written.append(_item(items[origin], message))
        elif message.get("role") in _ROLES:  # one a step made (a document in a run of messages)
            written.append({"type": "message", "role": message["role"], "content": _text(message)})
        else:
            raise ValueError(f"a rendered message of role {message.get('role')!r} has no Responses item")
    if isinstance(body.get("input"), list):
        out["input"] = written
    return out


def _item(item: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
    if item.get("type") == "function_call_output":
        return {**item, "output": _text(message)}
    content = message.get("content")
    if isinstance(content, list):
        default = "output_text" if item.get("role") == "assistant" else "input_text"
        content = [_part(part, default) for part in content]
    return {**item, "content": content}


def _part(part: Mapping[str, Any], default: str) -> dict[str, Any]:
    if part.get("type") != "text":
        return dict(part)
    restored = {k: v for k, v in part.items() if k != PART_TYPE}
    restored["type"] = part.get(PART_TYPE, default)
    return restored


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    raise ValueError("a message written back as text holds parts")
