"""The popular RAG apps' own templates: units a request proves by the app's words around them and the labels in them.

An app that writes its retrieved chunks with a label of its own (RAGFlow's `ID: n` nodes, Quivr's `Filename:` /
`Source: n` lines, QAnything's `<reference>[n]` elements ...) and puts them between two fixed sentences of its
template proves where each chunk begins and ends, although no general format says so: the sentences bound the
context (each must occur exactly once, where the template puts it), and inside it every unit opens with the app's
label, is written the way the app writes one, and the labels run as the app numbers them (0, 1, 2 ... or 1, 2, 3
...; distinct where they are ids, not positions). A template the user changed, a label out of order, a chunk that
holds the app's own join or label line where the app would not write one: the reading fails, and nothing else in
that text is read as units either (what would read so sits in the app's chunks): `none: unproven-template`.

Each entry cites the template it was read from, as `tests/strategies/app_prompts/` builds the same apps' requests;
numbers are never rewritten when a unit moves (the apps map `[ID:n]`-style citations back to them).

Every check is a `find`, a `count` or a pattern anchored at a line start that cannot run past its line, plus one
anchored full match per unit (`.*` at most once): linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextlift.strategies.spans import DocumentSpan

_MAX_UNITS = 10_000
"""More labels than any app retrieves: past it the text is read as no template (the limits refuse it later)."""


class TemplateMismatch(ValueError):
    """The template's sentences are there, and what lies between them is not the units it writes."""


@dataclass(frozen=True)
class AppTemplate:
    """How one app writes its retrieved chunks into a prompt."""

    name: str
    """The app, as `X-Context-Format` names it (`app; template=ragflow`)."""
    source: str
    """Where the template and the join were read: `repository@commit: path NAME`."""
    start: str
    """The template's text just before the chunks; it must occur exactly once."""
    label: re.Pattern[str]
    """What opens each unit, matched at a line start of the context (or the context's start). Group `n`: the unit's
    number or id; group `title`: a file name or title the app wrote. Where a group `unit` is given, the unit starts
    there (what comes before it on the line closes the unit above)."""
    end: str = ""
    """The template's text just after the chunks, once after `start`; empty: the text's end."""
    lead: re.Pattern[str] = re.compile(r"\s*")
    """What the template writes between `start` and the first unit (full match)."""
    gap: str = "\n"
    """Exactly what the app writes between the end of one unit's text and the next unit's label: a label line
    anywhere else (a chunk quoting the label, or holding its own list) is not a unit."""
    unit: re.Pattern[str] | None = None
    """How each whole unit reads (full match): the label lines the app always writes."""
    numbering: str = ""
    """`consecutive`: the numbers run 0, 1, 2 ... or 1, 2, 3 ...; `distinct`: ids (or titles) never repeat."""
    column_zero: bool = False
    """Every line of the context that starts at column 0 opens a unit (a YAML list: an item's own lines are
    indented, so no chunk can start one)."""
    forbidden: re.Pattern[str] | None = None
    """A line the app writes only outside the units (another section's header): the reading fails where one is."""
    question: re.Pattern[str] | None = None
    """Where the template puts the question in the same text (group `q`), when not in a later turn."""

    def scan(self, text: str) -> list[DocumentSpan]:
        """The units of `text` written in this template; [] when its sentences are not there.

        Raises:
            TemplateMismatch: the sentences are there, the units between them are not as the app writes them.
        """
        begin = _once(text, self.start, 0)
        if begin is None:
            return []
        begin += len(self.start)
        finish = len(text)
        if self.end:
            found = _once(text, self.end, begin)
            if found is None:
                return []
            finish = found
        context = text[begin:finish]
        labels = []
        for match in self.label.finditer(context):
            labels.append(match)
            if len(labels) > _MAX_UNITS:
                raise TemplateMismatch("more units than any app retrieves")
        if len(labels) < 2:
            raise TemplateMismatch("fewer than two units")
        starts = [m.start("unit") if "unit" in m.re.groupindex else m.start() for m in labels]
        if not self.lead.fullmatch(context, 0, starts[0]):
            raise TemplateMismatch("text of its own before the first unit")
        if self.column_zero and any(_column_zero_lines(context, starts)):
            raise TemplateMismatch("a line at column 0 that opens no unit")
        if self.forbidden is not None and self.forbidden.search(context, starts[0]):
            raise TemplateMismatch("another section inside the units")
        self._check_numbering(labels)
        spans = []
        for i, (match, start) in enumerate(zip(labels, starts, strict=True)):
            stop = starts[i + 1] if i + 1 < len(starts) else len(context)
            piece = context[start:stop]
            if i + 1 < len(starts):
                if not piece.endswith(self.gap):
                    raise TemplateMismatch("a label line where the app writes none")
                piece = piece[: len(piece) - len(self.gap)]
            piece = piece.rstrip()
            if self.unit is not None and not self.unit.fullmatch(piece):
                raise TemplateMismatch("a unit not written as the app writes one")
            title = match.group("title") if "title" in match.re.groupindex else None
            spans.append(
                DocumentSpan(
                    start=begin + start,
                    end=begin + start + len(piece),
                    text=piece[match.end() - start :].strip() or piece,
                    title=title.strip() if title else None,
                )
            )
        return spans

    def asked(self, text: str) -> str:
        """The question where the template puts it in `text`, or ""."""
        if self.question is None:
            return ""
        found = self.question.search(text)
        return found.group("q").strip() if found else ""

    def _check_numbering(self, labels: list[re.Match[str]]) -> None:
        if self.numbering == "consecutive":
            numbers = [int(m.group("n")) for m in labels]
            if numbers != list(range(numbers[0], numbers[0] + len(numbers))) or numbers[0] not in (0, 1):
                raise TemplateMismatch("numbers that do not run in order")
        elif self.numbering == "distinct":
            key = "n" if "n" in labels[0].re.groupindex else "title"
            ids = [m.group(key) for m in labels]
            if len(set(ids)) != len(ids):
                raise TemplateMismatch("an id written twice")


def _once(text: str, needle: str, at: int) -> int | None:
    """Where `needle` occurs in `text` from `at`, when it occurs there exactly once."""
    found = text.find(needle, at)
    if found == -1 or text.find(needle, found + 1) != -1:
        return None
    return found


def _column_zero_lines(context: str, starts: list[int]) -> list[int]:
    """Line starts at column 0 holding text, other than where a unit opens."""
    opened = set(starts)
    lines = []
    at = 0
    while at < len(context):
        if at not in opened and context[at] not in " \t\r\n":
            lines.append(at)
        newline = context.find("\n", at)
        if newline == -1:
            break
        at = newline + 1
    return lines


APP_TEMPLATES = (
    AppTemplate(
        name="ragflow",
        source=(
            "infiniflow/ragflow@b1b8cd623520b97b2526ffb1514bd812bdcc7eaf: api/apps/restful_apis/chat_api.py "
            "_DEFAULT_PROMPT_CONFIG; rag/prompts/generator.py kb_prompt"
        ),
        start="Here is the knowledge base:",
        end="The above is the knowledge base.",
        lead=re.compile(r"\s*------\s*"),
        label=re.compile(r"(?m)^ID: (?P<n>\d{1,9})\n(?:├── Title: (?P<title>[^\n]*)\n)?(?:├── [^\n]*\n)*└── Content:"),
        gap="\n\n------\n\n\n",
        unit=re.compile(r"ID: \d+\n(?:├── [^\n]*\n)*└── Content:(?:\n.*)?", re.DOTALL),
        numbering="consecutive",
    ),
    AppTemplate(
        name="quivr",
        source=(
            "QuivrHQ/quivr@947a785415c6c35ab2ae8157222b4720b0710b4d: core/quivr_core/rag/prompts.py "
            "RAG_ANSWER_PROMPT, DEFAULT_DOCUMENT_PROMPT; core/quivr_core/rag/utils.py combine_documents"
        ),
        start="- You have access to the following context to complete the task: ",
        end="\n- Follow these user instruction when crafting the answer: ",
        label=re.compile(r"(?m)^Filename: (?P<title>[^\n]*)\nSource: (?P<n>\d{1,9}) \n"),
        gap="\n\n",
        numbering="consecutive",
        question=re.compile(r"(?m)^(?:Human: )?Original task: (?P<q>[^\n]+)$"),
    ),
    AppTemplate(
        name="verba",
        source=(
            "weaviate/Verba@6fb7c98d729bca91efe6be7d835dc9d36a53905f: goldenverba/components/retriever/"
            "WindowRetriever.py combine_context; goldenverba/components/generation/OpenAIGenerator.py"
        ),
        start="' with this provided context: ",
        label=re.compile(r"(?m)^Document Title: (?P<title>[^\n]*)\nChunk: \d{1,9}\n"),
        gap="\n\n\n",
        unit=re.compile(r"Document Title: [^\n]*\nChunk: \d+\n.*", re.DOTALL),
        numbering="distinct",
        question=re.compile(r"\AAnswer this query: '(?P<q>[^\n]*)' with this provided context: "),
    ),
    AppTemplate(
        name="r2r",
        source=(
            "SciPhi-AI/R2R@9c5a94d151f90876bd7eb860f300a8fd662dc481: py/core/providers/database/prompts/rag.yaml; "
            "py/shared/utils/base_utils.py format_search_results_for_llm"
        ),
        start="### Context:\n",
        end="\n\n### Query:\n",
        lead=re.compile(r"Vector Search Results:\n"),
        label=re.compile(r"(?m)^Source ID \[(?P<n>[0-9a-f-]{7,36})\]:\n"),
        numbering="distinct",
        forbidden=re.compile(r"(?m)^[A-Z][A-Za-z ]{0,40} Results:$"),
    ),
    AppTemplate(
        name="kotaemon",
        source=(
            "Cinnamon/kotaemon@4015bb0f7cebd59d474624c4a570a4c119cdd826: libs/kotaemon/kotaemon/indices/qa/"
            "citation_qa.py DEFAULT_QA_TEXT_PROMPT; libs/kotaemon/kotaemon/indices/qa/format_context.py"
        ),
        start="don't try to make up an answer. Give answer in ",
        end="\nQuestion: ",
        lead=re.compile(r"[^\n]{0,64}\.\n\n"),
        label=re.compile(r"(?m)^(?:<br>)?(?P<unit><br><b>Content from (?P<title>[^\n]*?): </b> )"),
        gap="",
        # The app writes each chunk on one line (its line breaks made spaces), closed by a `<br>` line.
        unit=re.compile(r"<br><b>Content from [^\n]*\n<br>"),
    ),
    AppTemplate(
        name="khoj",
        source=(
            "khoj-ai/khoj@ae229ca894c0b80ad84664afcfdde523b5e87057: src/khoj/processor/conversation/prompts.py "
            "notes_conversation; src/khoj/utils/yaml.py yaml_dump"
        ),
        start="User's Notes:\n-----\n",
        label=re.compile(r"(?m)^- query: [^\n]*\n"),
        column_zero=True,
    ),
    AppTemplate(
        name="qanything",
        source=(
            "netease-youdao/QAnything@974f9337f9b9c56c12005b86fe9409dc86c9b520: qanything_kernel/configs/"
            "model_config.py PROMPT_TEMPLATE; qanything_kernel/core/local_doc_qa.py"
        ),
        start="\n<DOCUMENTS>\n",
        end="\n</DOCUMENTS>",
        label=re.compile(r"(?m)^<reference>\[(?P<n>\d{1,9})\]\n"),
        unit=re.compile(r"<reference>\[\d+\]\n.*\n</reference>", re.DOTALL),
        numbering="consecutive",
        question=re.compile(
            r"(?m)^- Now, answer the following question based on the above retrieved documents:\n(?P<q>[^\n]+)$"
        ),
    ),
)
"""The apps whose own templates prove their units, each read from the app's repository at the commit cited."""
