"""The apps' templates, copied verbatim from their sources (each app's module names the file it came from): read
exactly as written, trailing spaces and final line breaks included."""

from __future__ import annotations

import functools
from pathlib import Path

FOLDER = Path(__file__).resolve().parent


@functools.cache
def template(name: str) -> str:
    """The text of one template file in this folder, byte for byte."""
    return (FOLDER / name).read_text(encoding="utf-8")
