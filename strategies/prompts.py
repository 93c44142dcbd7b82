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
