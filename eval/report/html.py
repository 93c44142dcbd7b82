"""`report.html`: the markdown report as one self-contained page, the plots inlined as data URIs. Only the
markdown the report itself writes is understood: headings, list items, tables, images and paragraphs. An image is
inlined only where the run wrote it (`images`): any other image line is shown as the text it is, so a report never
reads a file its run did not write, whatever a line names."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td:first-child,th:first-child,td:nth-child(2){text-align:left}th{background:#f3f3f3}code{background:#f3f3f3;
padding:0 .2em}img{max-width:100%;display:block;margin:1em 0}h2{border-bottom:1px solid #ddd;margin-top:2em}
.wide{overflow-x:auto;max-width:100%}"""
"""A table wider than the page (the verdict table has ten columns) scrolls in its own box rather than being cut
off at the page's edge."""


def render_html(markdown: str, *, images: Mapping[str, Path] | None = None) -> str:
    """The page for `markdown`; `images` maps each image path the run wrote, as its lines name it, to its file."""
    written = images or {}
    body: list[str] = []
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if table:
            head, *rest = table
            body.append(
                '<div class="wide"><table><thead><tr>'
                + "".join(f"<th>{c}</th>" for c in head)
                + "</tr></thead><tbody>"
                + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rest)
                + "</tbody></table></div>"
            )
            table.clear()
        if items:
            body.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
            items.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                table.append([_inline(c) for c in cells])
            continue
        if line.startswith("- "):
            items.append(_inline(line[2:]))
            continue
        flush()
        if match := re.match(r"^(#{1,6}) (.*)$", line):
            level = len(match[1])
            body.append(f"<h{level}>{_inline(match[2])}</h{level}>")
        elif (match := _IMAGE.match(line)) and match["src"] in written:
            body.append(f'<img alt="{html.escape(match["alt"])}" src="{_data_uri(written[match["src"]])}">')
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    flush()
    title = "contextlift evaluation report"
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style>'
        f"</head><body>{''.join(body)}</body></html>\n"
    )


def image_sources(lines: Iterable[str]) -> list[str]:
    """The image paths these lines name, lines the report wrote itself (a section's plots)."""
    return [match["src"] for line in lines if (match := _IMAGE.match(line))]


def _inline(text: str) -> str:
    """Code spans and bold; nothing inside a code span is read as either (its text may be an upstream's)."""
    out, at = [], 0
    for match in _CODE.finditer(text):
        out.append(_BOLD.sub(r"<strong>\1</strong>", html.escape(text[at : match.start()], quote=False)))
        out.append(f"<code>{html.escape(match[1], quote=False)}</code>")
        at = match.end()
    out.append(_BOLD.sub(r"<strong>\1</strong>", html.escape(text[at:], quote=False)))
    return "".join(out)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
