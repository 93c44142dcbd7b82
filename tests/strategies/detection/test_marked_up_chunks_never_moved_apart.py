"""Chunks of Markdown, as documentation sites give them, are never cut apart or moved out of their place.

Each case is real text cut by LangChain's RecursiveCharacterTextSplitter (Markdown's separators, chunk size 600)
from a Markdown file an installed package ships, joined into a prompt by LangChain's own
`create_stuff_documents_chain` (tests/strategies/real_chunks.py) with the separator the docs recommend
(`\\n\\n---\\n\\n`), or by the legacy chain's and a numbered app's templates. The chunk that holds the case is put
among plain prose chunks, so that the join is a real one. Before the change each case was read as more documents
than it holds, and `reorder` moved the pieces apart; now the context's boundaries are unproven: the reading is kept
for the steps that only add (`ChatRequest.unmovable`), and the body goes upstream as it came.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable

import pytest

from contextlift.strategies import parse_request
from tests.strategies.app_prompts.corpus import shipped_text
from tests.strategies.real_chunks import FAMILIES, pydoc_texts

CHUNK_CHARACTERS = 600


def _package_file(package: str, *parts: str) -> str:
    try:
        return shipped_text(package, "/".join(parts))
    except FileNotFoundError as missing:
        pytest.skip(str(missing))


@functools.cache
def _markdown_chunks(text: str) -> tuple[str, ...]:
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_language(
        Language.MARKDOWN, chunk_size=CHUNK_CHARACTERS, chunk_overlap=0
    )
    return tuple(splitter.split_text(text))


def _prose_chunks() -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARACTERS, chunk_overlap=0)
    chunks = [c for text in pydoc_texts() for c in splitter.split_text(text)]
    # Paragraphs of prose: no grammar block, no title underline, no list.
    return [c for c in chunks if len(c) > 300 and not re.search(r"(?m)^(?:[ \t]|\*|-|=)", c)][:4]


def _holding(text: str, has: Callable[[str], bool]) -> str:
    chunk = next((c for c in _markdown_chunks(text) if has(c)), None)
    if chunk is None:
        pytest.skip("no chunk of the shipped file holds the case in this version")
    return chunk


FENCE_WITH_RULES = re.compile(r"```[^\n]*\n(?:(?!```)[^\n]*\n)*?---\n")


def fenced_yaml() -> str:
    """A code fence holding `---` lines: a `.prompt` file's front matter, shown in the dotprompt integration's docs."""
    page = _package_file("litellm", "integrations", "dotprompt", "README.md")
    return _holding(page, lambda c: FENCE_WITH_RULES.search(c) is not None)


def front_matter() -> str:
    """YAML front matter at the top of a chunk: FastAPI's agent skill page opens with its `name:`/`description:`."""
    page = _package_file("fastapi", ".agents", "skills", "fastapi", "SKILL.md")
    return _holding(page, lambda c: c.startswith("---\n"))


def own_rule() -> str:
    """A chunk that holds its own `---` horizontal rule between two of its paragraphs."""
    page = _package_file("litellm", "containers", "README.md")
    return _holding(page, lambda c: "\n\n---\n\n" in c)


def setext_title() -> str:
    """A Markdown title underlined with `---` (setext) not as long as the title, inside a chunk."""
    page = _package_file("litellm", "containers", "README.md")
    chunk = _holding(page, lambda c: c.lstrip().startswith("#"))
    # The same page's heading written the other way Markdown allows: the text and paragraphs stay the page's own.
    title, _, rest = chunk.lstrip().partition("\n")
    return f"{title.lstrip('# ')}\n---\n{rest}"


def nested_documents() -> str:
    """A chunk quoting a prompt of `Document [1]` / `Document [2]` lines (the papers' format, as a docs page
    shows it) between two of its own paragraphs."""
    chunk = _prose_chunks()[3]
    quoted = "Document [1](Title: Asian Americans in science) Chen Ning Yang shared the prize in 1957.\n"
    quoted += "Document [2](Title: Nobel Prize in Physics) The prize is awarded by the Royal Swedish Academy.\n"
    return f"{chunk}\n\nA prompt of two search results reads:\n{quoted}\nThe model then answers from them."


def nested_elements() -> str:
    """A chunk quoting two `<doc>` elements, as a page about prompt formats does."""
    chunk = _prose_chunks()[3]
    return f"{chunk}\n\nWrap each passage:\n<doc>first passage</doc>\n<doc>second passage</doc>\nThen ask."


CASES = {
    "code-fence-holding-rules": fenced_yaml,
    "front-matter": front_matter,
    "chunk-own-rule": own_rule,
    "setext-title": setext_title,
    "nested-litm-lines": nested_documents,
    "nested-doc-elements": nested_elements,
}
JOINS = ("langchain-dashes-spaced", "langchain-legacy-dashes", "langchain-dashes")


def _prompt(case: str, family: str) -> tuple[dict[str, object], list[str]]:
    marked_up = CASES[case]()
    prose = _prose_chunks()
    chunks = [prose[0], marked_up, prose[1], prose[2]]
    body, _ = FAMILIES[family](chunks)
    return body, chunks


@pytest.mark.parametrize("family", JOINS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_marked_up_chunk_is_never_split_and_nothing_moves(case: str, family: str) -> None:
    body, chunks = _prompt(case, family)
    request = parse_request(copy.deepcopy(body))
    if request.documents:
        # Read as proven: then every document is one whole chunk, and a move keeps each one whole.
        assert [d.raw.strip() for d in request.documents] == [c.strip() for c in chunks]
        moved = request.with_documents(request.documents[::-1]).render()
        sent = "".join(str(m["content"]) for m in moved["messages"])
        assert all(chunk.strip() in sent for chunk in chunks)
    else:
        assert request.detection in ("none: unproven-boundaries", "none: ambiguous-chunks")
        assert request.render() == body


MARKUP = ("code-fence-holding-rules", "front-matter", "chunk-own-rule", "setext-title")


@pytest.mark.parametrize("case", MARKUP)
def test_the_unproven_reading_is_kept_for_the_steps_that_only_add(case: str) -> None:
    body, _ = _prompt(case, "langchain-dashes-spaced")
    request = parse_request(copy.deepcopy(body))
    assert not request.documents
    assert request.unmovable is not None
    assert request.unmovable.render() == body


@pytest.mark.parametrize("case", ["nested-litm-lines", "nested-doc-elements"])
def test_documents_quoted_inside_a_chunk_stay_inside_it(case: str) -> None:
    body, chunks = _prompt(case, "langchain-dashes-spaced")
    request = parse_request(copy.deepcopy(body))
    assert [d.raw.strip() for d in request.documents] == [c.strip() for c in chunks]


def test_prose_chunks_joined_by_a_rule_are_still_moved_whole() -> None:
    chunks = _prose_chunks()
    body, _ = FAMILIES["langchain-dashes-spaced"](chunks[:3])
    request = parse_request(copy.deepcopy(body))
    assert request.detection.startswith("separated")
    assert [d.raw.strip() for d in request.documents] == [c.strip() for c in chunks[:3]]


def test_detect_says_what_made_the_reading_a_guess_and_the_declaration_that_moves_it() -> None:
    from contextlift.strategies import explain_detection

    body, _ = _prompt("code-fence-holding-rules", "langchain-dashes-spaced")
    found = explain_detection(copy.deepcopy(body))
    assert found["format"] == "none: unproven-boundaries"
    assert "(a code fence or front matter)" in found["hint"]
    assert "format=separated" in found["hint"]
    declared = parse_request(copy.deepcopy(body), shape="separated")
    assert len(declared.documents) == 4
