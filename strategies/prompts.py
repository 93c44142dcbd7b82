"""The prompts of the multi-call strategies, in one place.

Placeholders: `{documents}` is the documents as the request wrote them (each with its number where the
format numbers them), `{question}` the question detected in the request.
"""

from __future__ import annotations

RECITE_PROMPT = (
    "{documents}\n\n"
    "Question: {question}\n\n"
    "Do not answer the question yet. First recite, word by word, the documents or sentences above that are "
    "relevant to the question. Copy each one exactly as it appears, without altering the original text, on its "
    'own line starting with its document number, like "Document [3]: <copied text>". '
    'If nothing above is relevant, write only "NONE".'
)
"""Call 1 of `recite` (Du et al. 2025, "retrieve then solve"): the model copies the evidence verbatim. The
paper's own prompts ask to "recite ... word by word ... When reciting, do not alter the original text"; we
add document numbers so each recited line can be checked against the document it claims to come from."""

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
