"""One app shape: a chat-completions body as an app builds it, and each document as the app wrote it there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MODEL = "fake-model"


@dataclass(frozen=True)
class AppShape:
    """A request body one app really sends. Shapes are built once per process and shared: copy `body`
    (`copy.deepcopy`) before changing it."""

    name: str
    """`open-webui-user`, `ragflow`, ..."""
    app: str
    source: str
    """Where the template and the join came from: `repository@commit: path NAME`, several joined by `; `."""
    body: dict[str, Any]
    units: tuple[str, ...]
    """Each document exactly as the app wrote it into the prompt (label, tags and all), in order."""
    question: str
    """The user's question, as the user typed it."""
