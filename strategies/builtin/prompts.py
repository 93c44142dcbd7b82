"""The prompts of the multi-call strategies, in one place.

Placeholders: `{documents}` is the documents as the request wrote them (each with its number where the
format numbers them), `{question}` the question detected in the request.
"""

from __future__ import annotations

RECITE_PROMPT = (
    "Read the question based on the given documents. Choose the documents most relevant to the question and copy "
    "them fully WORD BY WORD.\n\n"
    "The following are given documents.\n\n"
    "{documents}\n\n"
    "Read the question. Choose the documents most relevant to the question and copy them fully WORD BY WORD. Only "
    "give me the relevant documents and do not output any other words. Do not make up documents. Do not repeat "
    'documents. Use "# Document <number>" at the start of each document, then copy its full content.\n\n'
    "Question:\n{question}"
)
"""Call 1 of `recite`: the first step of Du et al. 2025's retrieve-then-solve on RULER's QA tasks (fig. 12),
verbatim. Our earlier prompt asked for `Document [3]: <copied text>` lines; SmolLM2-135M copied the placeholder
and the last document's header, and on 36 litm-qa questions gave the gold document 15 times (24 with this one)
and another document 19 times (7), `contextlift.strategies.copied_text.MIN_CONTAINMENT` in force."""

FACT_RETRIEVAL_PROMPT = (
    "Please retrieve all the sentences in the given documents that are important and relevant to answer the "
    "question.\n\n"
    "Question: {question}\n\n"
    "The following are given documents.\n\n"
    "{documents}\n\n"
    "Please retrieve the sentences from the given documents that are relevant to answer the question. "
    "Do not repeat your generation. The question is highlighted again at below.\n\n"
    "Question: {question}\n\n"
    "Retrieved sentences:\n\n"
    '(For each retrieved sentence, please start from the bullet symbol "-", if no results, just return a '
    'single "-")'
)
"""Each retrieval round of `fact`: the FACT paper's prompt for the QA tasks (Wang et al., appendix B),
verbatim. The documents shown shrink each round as the facts already found are removed."""

CHAIN_WORKER_PROMPT = (
    "{documents}\n\n"
    "Here is the summary of the previous source text: {notes}\n\n"
    "Question: {question}\n\n"
    "You need to read the current source text and the summary of the previous source text (if any) and generate "
    "a summary to include them both. Later, this summary will be used for other agents to answer the question. "
    "So please write the summary that can include the evidence for answering the question:"
)
"""Each worker call of `chain`, with `{notes}` the previous worker's summary (empty for the first): the worker
prompt of Chain of Agents for query-based tasks (Zhang et al. 2024, appendix). Adapted: the paper's
"Worker {i}:" line is dropped (the number tells the model nothing it can use), the chunk's documents keep the
numbers they have in the request, and "the Query" is called "the question", as the line above names it."""

CHAIN_MANAGER_PROMPT = (
    "The source text is too long and has been summarized. You need to answer based on the summary:\n{notes}"
)
"""What `chain`'s last call has in place of the documents, with `{notes}` the last worker's summary: the middle
of the paper's manager prompt. The paper writes "{task requirement} The following are given passages. However,
the source text is too long ... {summary} Question: {question} Answer:"; here the client's own instructions and
question stay where they were around the documents, so only the sentence that says what the summary is, and
the summary, are ours."""

PICK_PROMPT = (
    "The following are given passages, each with its number.\n\n"
    "{passages}\n\n"
    "Question: {question}\n\n"
    "Which passages above answer the question? Give only their numbers, the most relevant first, separated by "
    "commas."
)
"""The picking call of `pick`: in-context retrieval as R&R asks for it (Agrawal et al. 2024, sec. 3.2: the model
names the passage numbers most relevant to the question, which a second prompt then answers from). Our wording: the
paper's prompt is written for its own document chunking and gives no verbatim text to copy; the question comes
after the passages, as R&R found it best to sit near where the model answers."""
