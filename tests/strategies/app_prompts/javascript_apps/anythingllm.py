"""AnythingLLM: a workspace chat through its Generic OpenAI provider. Every chunk carries the `<document_metadata>`
header its text splitter prepended when the file was embedded, and is wrapped `[CONTEXT n]:` ... `[END CONTEXT n]`
after `Context:` in the system prompt; the question is the last user turn.

Sources (Mintplex-Labs/anything-llm@72aabbd15481ae405434efd4c83d46026eef1173): the default system prompt
`saneDefaultSystemPrompt` (server/models/systemSettings.js), its `{datetime}` expanded as `moment().format("LLLL")`
(server/models/systemPromptVariables.js); the join mirrors `#appendContext` and `constructPrompt`
(server/utils/AiProviders/genericOpenAi/index.js) and the chunk header of `TextSplitter.buildHeaderMeta` and
`stringifyHeader` (server/utils/TextSplitter/index.js), whose chunks LangChain's `RecursiveCharacterTextSplitter`
cuts (1,000 characters, 20 overlap: the JavaScript port there, the Python one here); the body is
`streamGetChatCompletion`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.strategies.app_prompts.corpus import package_file
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "AnythingLLM"
SOURCE = (
    "Mintplex-Labs/anything-llm@72aabbd15481ae405434efd4c83d46026eef1173: server/models/systemSettings.js "
    "saneDefaultSystemPrompt; server/utils/AiProviders/genericOpenAi/index.js #appendContext, constructPrompt; "
    "server/utils/TextSplitter/index.js stringifyHeader"
)
SANE_DEFAULT_SYSTEM_PROMPT = (
    "Given the following conversation, relevant context, and a follow up question, reply with an answer to the "
    "current question the user is asking. The current date and time is {datetime}. Return only your response to the "
    "question given the above information following the users instructions as needed."
)
DATETIME = "Thursday, August 20, 2026 9:30 AM"
"""`moment().format("LLLL")` on a fixed day."""
PUBLISHED = "8/20/2026, 9:12:44 AM"
"""The upload time the collector stored as the document's `published`."""


def chunk_texts(file_key: str, title: str) -> list[str]:
    """A file as AnythingLLM embeds it: split at 1,000 characters with 20 of overlap, each chunk after the header
    `stringifyHeader` builds from its title and publication time."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    header = f"<document_metadata>\nsourceDocument: {title}\npublished: {PUBLISHED}\n</document_metadata>\n\n"
    splitter = RecursiveCharacterTextSplitter(chunk_size=1_000, chunk_overlap=20)
    return [header + chunk for chunk in splitter.split_text(package_file(file_key))]


def _shape(name: str, context_texts: Sequence[str], question: str, history: Sequence[dict[str, str]]) -> AppShape:
    """`constructPrompt`: the system prompt with the context appended, the workspace's recent turns, the question."""
    units = tuple(f"[CONTEXT {i}]:\n{text}\n[END CONTEXT {i}]" for i, text in enumerate(context_texts))
    system = SANE_DEFAULT_SYSTEM_PROMPT.replace("{datetime}", DATETIME)
    system += "\nContext:\n" + "".join(f"{unit}\n\n" for unit in units)
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    body = {"model": MODEL, "stream": True, "messages": messages, "temperature": 0.7, "max_tokens": 1024}
    return AppShape(name, APP, SOURCE, body, units, question)


def anythingllm() -> AppShape:
    dotprompt = chunk_texts("dotprompt", "dotprompt-README.md")
    guide = chunk_texts("maskedarray", "masked-arrays-guide.rst")
    question = "How do I render a dotprompt template directly to debug a template error?"
    return _shape("anythingllm", [dotprompt[3], guide[5], dotprompt[5], guide[1], dotprompt[1]], question, [])


def anythingllm_follow_up() -> AppShape:
    """A second question in the thread: the earlier exchange between the system prompt and the question."""
    card = chunk_texts("minilm", "all-MiniLM-L6-v2.md")
    history = [
        {"role": "user", "content": "What does all-MiniLM-L6-v2 map sentences to?"},
        {"role": "assistant", "content": "To a 384 dimensional dense vector space, for clustering or semantic search."},
    ]
    question = "And how many training pairs was it fine-tuned on?"
    return _shape("anythingllm-follow-up", [card[5], card[0], card[6], card[2]], question, history)


SHAPES = (anythingllm, anythingllm_follow_up)
