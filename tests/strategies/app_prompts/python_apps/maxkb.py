"""MaxKB: a simple (non-workflow) application with a knowledge base. Each retrieved paragraph is written
`<data>{title}:{content}</data>`, the paragraphs joined by single line breaks into `{data}` of the application's
prompt, and `{question}` replaced by the question: the whole prompt is the last human message. A system message
comes first when the application has a role setting; the last `dialogue_number` exchanges sit between them.

Sources (1Panel-dev/MaxKB@121614fb81c0a72387974f3ebcb86cbf756a84af): the default prompt
`Application.get_default_model_prompt` (apps/application/models/application.py), which the model's default setting
and `to_base_pipeline_manage_params` (apps/application/serializers/common.py) fall back on, and the prompt and role
setting that the console's create dialog fills in (ui/src/views/application/component/CreateApplicationDialog.vue,
from `defaultPrompt` and `roleSettings.placeholder` of ui/src/locales/lang/zh-CN/views/application.ts), all verbatim
(the prompts in templates/maxkb_default_model_prompt.txt and templates/maxkb_console_prompt.txt).
The join mirrors `BaseGenerateHumanMessageStep.execute` and `to_human_message`
(apps/application/chat_pipeline/step/generate_human_message_step/impl/base_generate_human_message_step.py) and
`ChatRecord.get_human_message` / `get_ai_message` (apps/application/models/application_chat.py). `{question}` is
replaced after `{data}`, so a paragraph that holds `{question}` is sent with the question in its place. A Markdown
paragraph's title is the chain of headings above it, `#` removed, as `SplitModel` (apps/common/utils/split_model.py)
titles the paragraphs of an uploaded Markdown file; the other files' paragraphs have no title here (`<data>:...`).
The messages go through `langchain_openai`'s `ChatOpenAI`, streaming with usage (`BaseChatOpenAI._stream`,
apps/models_provider/impl/base_chat_open_ai.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tests.strategies.app_prompts.corpus import Chunk, picked, uploaded_file
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "MaxKB"
SOURCE = (
    "1Panel-dev/MaxKB@121614fb81c0a72387974f3ebcb86cbf756a84af: apps/application/models/application.py "
    "get_default_model_prompt; ui/src/locales/lang/zh-CN/views/application.ts defaultPrompt; "
    "ui/src/views/application/component/CreateApplicationDialog.vue; "
    "apps/application/chat_pipeline/step/generate_human_message_step/impl/base_generate_human_message_step.py "
    "execute, to_human_message; apps/common/utils/split_model.py result_tree_to_paragraph"
)
DEFAULT_PROMPT_FILE = "maxkb_default_model_prompt.txt"
"""Holds `Application.get_default_model_prompt()`, its string literals joined."""
CONSOLE_PROMPT_FILE = "maxkb_console_prompt.txt"
"""Holds `views.application.form.prompt.defaultPrompt` (zh-CN), as the create dialog fills it in."""
CONSOLE_SYSTEM = "你是 xxx 小助手"
"""`views.application.form.roleSettings.placeholder` (zh-CN): the create dialog's `model_setting.system`."""
MAX_PARAGRAPH_CHAR_NUMBER = 5000
"""The knowledge setting's default `max_paragraph_char_number`."""
HEADING = re.compile(r"^(#{1,6}) (?!#).*$")


def paragraph_title(chunk: Chunk) -> str:
    """The title `SplitModel` gives a paragraph: the headings above it, each a deeper level, joined by spaces with
    every `#` removed (its patterns match heading lines anywhere, code fences included). Empty for other files."""
    if not chunk.file.endswith(".md"):
        return ""
    text = uploaded_file(chunk.file)
    chain: list[tuple[int, str]] = []
    for line in text[: text.index(chunk.text)].splitlines():
        match = HEADING.match(line)
        if match:
            level = len(match.group(1))
            chain = [*(item for item in chain if item[0] < level), (level, line)]
    return " ".join(line for _, line in chain).replace("#", "")


def data_units(chunks: Sequence[Chunk]) -> list[str]:
    """`to_human_message`'s loop: each paragraph `<data>{title}:{content}</data>`, the one that passes the character
    limit cut short (its slice end is negative) and the rest dropped."""
    temp_data = ""
    data_list = []
    for chunk in chunks:
        content = f"{paragraph_title(chunk)}:{chunk.text}"
        temp_data += content
        if len(temp_data) > MAX_PARAGRAPH_CHAR_NUMBER:
            row_data = content[0 : MAX_PARAGRAPH_CHAR_NUMBER - len(temp_data)]
            data_list.append(f"<data>{row_data}</data>")
            break
        data_list.append(f"<data>{content}</data>")
    return data_list


def _shape(
    name: str, chunks: Sequence[Chunk], question: str, prompt_file: str, system: str, history: Sequence[tuple[str, str]]
) -> AppShape:
    """`BaseGenerateHumanMessageStep.execute`: the role setting as a system message when there is one, the earlier
    questions and answers, then the prompt with `{data}` and `{question}` replaced, as ChatOpenAI streams them."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, convert_to_openai_messages

    written = data_units(chunks)
    prompt = template(prompt_file)
    human = HumanMessage(content=prompt.replace("{data}", "\n".join(written)).replace("{question}", question))
    units = tuple(unit.replace("{question}", question) for unit in written)
    earlier: list[BaseMessage] = []
    for asked, answered in history:
        earlier.extend((HumanMessage(content=asked), AIMessage(content=answered)))
    messages = [SystemMessage(system)] if system else []
    openai_messages = convert_to_openai_messages([*messages, *earlier, human])
    body = {"model": MODEL, "messages": openai_messages, "stream": True, "stream_options": {"include_usage": True}}
    return AppShape(name, APP, SOURCE, body, units, question)


def maxkb() -> AppShape:
    """An application made through the API with the default model setting (no role setting), top_n raised to 5."""
    chunks = [*picked("minilm", 2, 4, 5), *picked("dotprompt", 3), *picked("minilm", 8)]
    question = "如何用 sentence-transformers 加载 all-MiniLM-L6-v2 并计算句子向量？"  # noqa: RUF001 - Chinese punctuation
    return _shape("maxkb", chunks, question, DEFAULT_PROMPT_FILE, "", [])


def maxkb_follow_up() -> AppShape:
    """An application made in the console (its prompt and role setting), one earlier exchange
    (`dialogue_number` 1), top_n raised to 4."""
    history = [
        (
            "GraphCypherQAChain 的提示词模板在哪个文件里？",  # noqa: RUF001 - Chinese punctuation
            "在 graph_qa_prompts.py 中，CYPHER_QA_TEMPLATE 定义了回答步骤的提示词。",  # noqa: RUF001 - Chinese punctuation
        )
    ]
    question = "CYPHER_QA_TEMPLATE 里的示例问题是什么？它期望怎样的回答？"  # noqa: RUF001 - Chinese punctuation
    chunks = picked("graphqa", 6, 2, 31, 5)
    return _shape("maxkb-follow-up", chunks, question, CONSOLE_PROMPT_FILE, CONSOLE_SYSTEM, history)


SHAPES = (maxkb, maxkb_follow_up)
