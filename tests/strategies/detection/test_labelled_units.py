"""One grammar of labelled units, general over the names apps choose (strategies/detection/elements.py, the JSON
readers of message_documents.py, the labels of chunks.py): what proves units, what a forged unit breaks, labels
that stay with their units, and the question where the template puts it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextlift.strategies import parse_request
from tests.cpu_time import cpu_clock

QUESTION = "What does the second passage say about fences?"
FENCED = "Install it:\n\n```bash\npip install tool\n---\n```\n\nThen run it."
PROSE = "Mont Blanc is the highest mountain in the Alps.\n\nIt rises 4,806 metres."
SHORT = "K2 is the second highest mountain on Earth."
TEXTS = (FENCED, PROSE, SHORT)


def _user(content: str, *later: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}, *later]}


def _chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": role, "content": content} for role, content in turns]}


def _moved(body: dict[str, Any]) -> tuple[str, str]:
    request = parse_request(body)
    sent = request.with_documents(request.documents[::-1]).render()
    return request.detection, sent["messages"][0]["content"]


def test_sibling_elements_of_any_name_are_units_and_keep_their_ids() -> None:
    units = [f'<chunk fileId="file_{i}" fileName="f{i}.md">{t}</chunk>' for i, t in enumerate(TEXTS, start=4)]
    body = _user("Answer from these chunks.\n<chunks>\n" + "\n".join(units) + f"\n</chunks>\n{QUESTION}")
    detection, sent = _moved(body)
    assert detection == "xml; tag=chunk"
    assert sent.index(units[2]) < sent.index(units[1]) < sent.index(units[0])
    assert parse_request(body).question == QUESTION


def test_an_element_that_quotes_the_next_units_tag_proves_nothing() -> None:
    forged = "Quoted: <data>a forged unit</data> inside."
    text = "Known:<data>" + PROSE + "\n<data>" + forged + "</data>\n<data>" + SHORT + "</data>\nQuestion: " + QUESTION
    assert not parse_request(_user(text)).documents or "tag=data" not in parse_request(_user(text)).detection


def test_two_runs_of_one_name_are_a_guess() -> None:
    run = "\n".join(f"<item>{t}</item>" for t in TEXTS)
    body = _user(f"First list:\n{run}\n\nSecond list:\n{run}\n\n{QUESTION}")
    assert "tag=item" not in parse_request(body).detection


def test_html_elements_are_a_chunks_markup_not_units() -> None:
    body = _user("<p>One paragraph here.</p>\n<p>Another paragraph here.</p>\n" + QUESTION)
    assert parse_request(body).documents == ()


def test_flowise_doc_ids_stay_with_their_text() -> None:
    units = [f"<doc id='{i}'>{t}</doc>" for i, t in enumerate(TEXTS, start=4)]
    system = "Use the context.\n------------\n" + "\n".join(units) + "\n------------\nREMEMBER: be brief."
    body = _chat(("system", system), ("user", QUESTION))
    _, sent = _moved(body)
    assert "<doc id='6'>" + SHORT in sent
    assert "<doc id='4'>" + FENCED in sent
    assert sent.index("id='6'") < sent.index("id='4'")


def test_json_lines_are_units_and_the_run_naming_a_text_field_holds_the_documents() -> None:
    entities = [json.dumps({"entity": e, "type": "peak", "description": f"{e} is a peak."}) for e in ("K2", "Blanc")]
    chunks = [json.dumps({"reference_id": str(i % 2 + 1), "content": t}) for i, t in enumerate(TEXTS)]
    system = (
        "Entities:\n```json\n"
        + "\n".join(entities)
        + "\n```\n\nDocument Chunks:\n```json\n"
        + "\n".join(chunks)
        + "\n```"
    )
    body = _chat(("system", system), ("user", QUESTION))
    request = parse_request(body)
    assert request.detection == "json-list; lines"
    assert [d.text for d in request.documents] == list(TEXTS)


LONG = (
    f"{PROSE} It was first climbed in 1786 by Jacques Balmat and Michel-Gabriel Paccard.",
    f"{SHORT} Its summit was first reached in 1954 by an Italian expedition led by Ardito Desio.",
)


def test_a_json_list_whose_text_field_has_another_name_reads_its_longest_shared_field() -> None:
    items = [{"ref": i, "passage_text": t, "url": f"https://x/{i}"} for i, t in enumerate(LONG)]
    body = _user("Search results:\n" + json.dumps(items, indent=2) + f"\nQuestion: {QUESTION}")
    assert [d.text for d in parse_request(body).documents] == list(LONG)


def test_records_of_short_values_are_data_not_passages() -> None:
    steps = [{"step": i, "instruction": text} for i, text in enumerate(("Boil the water", "Add the pasta"), 1)]
    body = _user("Here:\n" + json.dumps(steps, indent=2) + "\nWhat do I do after adding the pasta?")
    assert parse_request(body).documents == ()


def test_units_each_closed_by_a_source_line_are_proven_whatever_their_markup() -> None:
    units = [f"Content: {t}\nSource: {name}" for t, name in zip(TEXTS, ("a.md", "b.md", "c.md"), strict=True)]
    text = f"QUESTION: {QUESTION}\n=========\n" + "\n\n".join(units) + "\n=========\nFINAL ANSWER:"
    examples = "QUESTION: Example?\n=========\nContent: x\nSource: 1-pl\n=========\nFINAL ANSWER: x\nSOURCES: 1-pl\n\n"
    request = parse_request(_user(examples + text))
    assert request.detection.endswith("region=fence") or request.detection.endswith("labels=closed")
    assert [d.raw for d in request.documents] == units
    assert request.question == QUESTION


def test_a_chunk_that_quotes_the_closing_label_elsewhere_proves_nothing() -> None:
    units = [f"Content: {t}\nSource: {n}" for t, n in zip(TEXTS, ("a.md", "b.md", "c.md"), strict=True)]
    units[1] = "Content: Source: quoted inside\nmore text\nSource: b.md"
    text = f"QUESTION: {QUESTION}\n=========\n" + "\n\n".join(units) + "\n=========\nFINAL ANSWER:"
    request = parse_request(_user(text))
    # Not read as three units: at most a coarser reading, each document one or more whole units, none cut.
    assert [d.raw for d in request.documents] != units
    for document in request.documents:
        assert document.raw in ("\n\n".join(units[i:j]) for i in range(3) for j in range(i + 1, 4))


def test_numbered_headings_that_run_are_labels() -> None:
    units = [f"### {i}. Part {i}\n{t}" for i, t in enumerate(TEXTS, start=1)]
    body = _user("Use the following context:\n\n" + "\n\n".join(units) + f"\n\nQuestion: {QUESTION}")
    request = parse_request(body)
    assert [d.raw for d in request.documents] == units


def test_a_setext_title_of_any_length_is_part_of_its_chunk() -> None:
    chunks = [
        "Masked arrays\n=====\n\nA masked array pairs data and a mask.",
        SHORT,
        "Usage\n--------------\n\nCall it.",
    ]
    body = _user("Use the following context:\n" + "\n\n\n".join(chunks) + f"\n\nQuestion: {QUESTION}")
    request = parse_request(body)
    assert not request.documents or [d.text for d in request.documents] == chunks


def test_a_reminder_turn_after_the_question_is_not_the_question() -> None:
    reminder = "<system-reminder>\nRemember to provide inline citations in the format [1], [2].\n</system-reminder>"
    results = json.dumps({"results": [{"document": i, "content": t} for i, t in enumerate(TEXTS, start=1)]})
    messages = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": "c1", "content": results},
        {"role": "user", "content": reminder},
    ]
    assert parse_request({"model": "m", "messages": messages}).question == QUESTION


def test_an_instruction_about_the_question_is_not_the_question() -> None:
    items = [{"id": i, "content": t, "sourceUrl": f"[f{i}.md](http://file/{i}.md)"} for i, t in enumerate(TEXTS)]
    text = (
        f"## My question is:\n\n{QUESTION}\n\n## Reference Materials:\n\n"
        f"```json\n{json.dumps(items, indent=2)}\n```\n\n"
        "Please respond in the same language as the user's question.\n"
    )
    assert parse_request(_user(text)).question == QUESTION


_WORD = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=12).map(str.strip).filter(bool)
_LINE = st.lists(_WORD, min_size=1, max_size=4).map(" ".join)
_TEXT = (
    st.lists(st.one_of(_LINE, st.just(""), st.just("```"), st.just("---")), min_size=1, max_size=6)
    .map(lambda lines: "\n".join(lines).strip())
    .filter(lambda t: any(c.isalpha() for c in t))
)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(_TEXT, min_size=2, max_size=6),
    grammar=st.sampled_from(("elements", "json-lines", "closing-label", "numbered-headings")),
)
def test_every_grammar_round_trips_and_moves_units_whole(texts: list[str], grammar: str) -> None:
    if grammar == "elements":
        units = [f'<passage ref="r{i}">\n{t}\n</passage>' for i, t in enumerate(texts)]
        context, join = "Passages:\n", "\n"
    elif grammar == "json-lines":
        units = [json.dumps({"id": f"u{i}", "content": t}) for i, t in enumerate(texts)]
        context, join = "Chunks:\n", "\n"
    elif grammar == "closing-label":
        units = [f"Content: {t}\nSource: s{i}" for i, t in enumerate(texts)]
        context, join = f"QUESTION: {QUESTION}\n=========\n", "\n\n"
    else:
        units = [f"### {i}. Title {i}\n{t}" for i, t in enumerate(texts, start=1)]
        context, join = "Use the following context:\n\n", "\n\n"
    tail = "\n=========\nFINAL ANSWER:" if grammar == "closing-label" else f"\n\nQuestion: {QUESTION}"
    body = _user(context + join.join(units) + tail)
    request = parse_request(body)
    assert request.render() == body
    if not request.documents:
        return  # declined: the body goes as it came
    # Each document is one unit, or a coarser reading's run of whole units (never a unit cut): in order, all of them.
    raws = [(d.raw or d.text).strip() for d in request.documents]
    assert join.join(raws) == join.join(units)
    assert all(
        raw in {join.join(units[i:j]) for i in range(len(units)) for j in range(i + 1, len(units) + 1)} for raw in raws
    )
    sent = request.with_documents(request.documents[::-1]).render()["messages"][0]["content"]
    positions = [sent.find(raw) for raw in raws[::-1]]
    assert all(p >= 0 for p in positions)
    assert positions == sorted(positions)


def test_a_chunks_own_question_line_is_never_taken_for_the_templates() -> None:
    # The last chunk quotes a worked example: the context read to end at its `Question:` line would put the
    # question, and a step's block before it, inside that chunk. Two question lines below the context: declined.
    example = "Question: Which managers own Neo4j stocks?\nHelpful Answer: CTL LLC."
    text = (
        f"Use the following pieces of context to answer.\n\n{SHORT}\n---\n{PROSE}\n---\n{example}\n\n"
        f"Question: {QUESTION}\nAnswer:"
    )
    request = parse_request(_user(text))
    assert request.documents == ()
    assert request.unmovable is None
    assert request.detection == "none: ambiguous"


def test_a_label_whose_value_counts_proves_marked_up_chunks() -> None:
    units = [f"Source ID: {i}\n{t}" for i, t in enumerate(TEXTS)]
    body = _user("Use the following search results:\n\n" + "\n\n".join(units) + f"\n\nQuestion: {QUESTION}")
    request = parse_request(body)
    assert request.detection == "separated; region=cue; labels=counted"
    assert [d.raw for d in request.documents] == units


def test_a_count_that_skips_proves_nothing() -> None:
    units = [f"Source ID: {i}\n{t}" for i, t in zip((0, 2, 3), TEXTS, strict=True)]
    body = _user("Use the following search results:\n\n" + "\n\n".join(units) + f"\n\nQuestion: {QUESTION}")
    assert parse_request(body).documents == ()


# What a hostile probe of the grammar found, each pinned.


def test_a_prompts_own_parts_are_no_retrieved_units() -> None:
    examples = "Classify.\n" + "\n".join(
        f"<example>\nIn: {said}\nOut: {label}\n</example>" for said, label in (("I loved it", "+"), ("Awful", "-"))
    )
    body = {"model": "m", "messages": [{"role": "system", "content": examples}, {"role": "user", "content": "Cold."}]}
    assert parse_request(body).documents == ()
    steps = "<steps>\n<step>Download</step>\n<step>Run setup</step>\n<step>Reboot</step>\n</steps>\nThe second step?"
    assert parse_request(_user(steps)).documents == ()


def test_elements_whose_name_says_nothing_of_retrieval_are_a_prompts_own_whatever_their_attributes() -> None:
    events = '<event time="1" source="api">Gateway timed out</event>\n<event time="2" source="db">DB restarted</event>'
    assert parse_request(_user(f"{events}\nWhat came first?")).documents == ()
    files = '<file path="src/a.py">a = 1</file>\n<file path="src/b.py">b = 2</file>'
    assert parse_request(_user(f"{files}\nRename b in the second file.")).documents == ()


def test_an_attribute_built_to_backtrack_is_read_in_linear_time() -> None:
    with cpu_clock() as elapsed:
        parse_request(_user("<item " + "file-" * 800 + ">a b</item>\n<item x>c d</item>\n<item y>e f</item>"))
    assert elapsed() < 1.0


def test_a_chunk_that_quotes_its_own_closing_tag_proves_nothing() -> None:
    text = (
        '<chunk fileName="a">Close with a tag.</chunk>\n<chunk fileName="b">Each unit ends with </chunk> and the'
        " next\nstarts on a new line.</chunk>\nQuestion: how?"
    )
    assert parse_request(_user(text)).documents == ()


def test_an_instruction_naming_the_tag_after_the_units_is_prose() -> None:
    units = "\n".join(f"<data>{t}</data>" for t in TEXTS)
    text = f"Known:\n{units}\nRules:\n- Never mention <data></data> in the answer.\nQuestion: {QUESTION}"
    assert parse_request(_user(text)).detection == "xml; tag=data"


def test_numbered_sections_of_a_page_that_go_on_past_them_are_not_units() -> None:
    doc = (
        "Please tighten this design doc.\n\n# RFC\n\n## Context\n\n### 1. Current state\nWorkers retry.\n\n"
        "### 2. Problem\nPoison msgs.\n\n### 3. Proposal\nCap at 5.\n\n## Decision\nAdopt 3."
    )
    messages = [
        {"role": "user", "content": doc},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Now merge sections 2 and 3."},
    ]
    assert parse_request({"model": "m", "messages": messages}).documents == ()


def test_json_lines_of_a_transcript_or_a_log_are_data() -> None:
    said = "My order has not arrived yet at all."
    transcript = "\n".join(json.dumps({"role": "user", "content": said}) for _ in range(3))
    assert parse_request(_user(f"{transcript}\nQuestion: Summarize the conversation.")).documents == ()
    log = "\n".join(json.dumps({"ts": f"2024-01-0{i}", "msg": "service started on port 8080"}) for i in (1, 2, 3))
    assert parse_request(_user(f"{log}\nWhat happened first?")).documents == ()


def test_a_request_in_the_imperative_is_the_question() -> None:
    system = "Docs:\n<document>Acme sells anvils.</document>\n<document>Acme was founded by Wile.</document>"
    asked = "Use the documents to answer who founded Acme and provide citations"
    body = _chat(("system", system), ("user", "What does Acme sell?"), ("assistant", "Anvils."), ("user", asked))
    assert parse_request(body).question == asked


def test_labels_that_number_a_texts_own_parts_are_no_proof() -> None:
    guide = (
        "Context:\n\nStep 1: Install\n```bash\npip install acme\n```\n\nStep 2: Configure\nEdit acme.toml.\n\n"
        "Step 3: Deploy\nRun it.\n\nQuestion: What do I edit?"
    )
    assert parse_request(_user(guide)).documents == ()


def test_json_lines_and_lists_without_a_source_are_data() -> None:
    said = ("the deploy failed again", "I will roll back now", "thanks, rollback worked")
    thread = "\n".join(json.dumps({"user": "a", "ts": str(i), "text": t}) for i, t in enumerate(said))
    assert parse_request(_user(f"{thread}\n\nWhat happened first in this thread?")).documents == ()
    history = [{"date": f"2024-01-0{i}", "description": t} for i, t in enumerate(LONG, start=1)]
    body = _user("Here is the ticket history:\n" + json.dumps(history, indent=2) + "\n\nWhat happened first?")
    assert parse_request(body).documents == ()


def test_a_last_turn_that_asks_in_the_imperative_with_a_question_named_is_still_the_question() -> None:
    system = "Documents:\n\n[1] Refunds take 5 days.\n\n[2] Damaged items are replaced."
    asked = "Write a reply to this request from a customer: my blender arrived damaged, I want it replaced."
    body = _chat(("system", system), ("user", "How long do refunds take?"), ("assistant", "5 days."), ("user", asked))
    assert parse_request(body).question == asked


# What a third probe found, each pinned.


def test_a_name_that_joins_a_retrieval_word_to_another_is_a_prompts_own() -> None:
    for name in ("source_code", "code_snippet", "test_result", "input_data"):
        units = "\n".join(f"<{name}>{t}</{name}>" for t in ("a = 1\nprint(a)", "b = 2\nprint(b)"))
        assert parse_request(_user(f"{units}\nRename b in the second one.")).documents == (), name


def test_a_retrieval_word_joined_to_item_or_entry_is_still_read() -> None:
    units = "\n".join(f"<contextItem>{t}</contextItem>" for t in TEXTS)
    assert parse_request(_user(f"Context:\n{units}\nQuestion: {QUESTION}")).detection == "xml; tag=contextItem"


def test_a_bare_id_names_no_origin() -> None:
    said = ("the deploy failed again on staging", "I will roll back now", "thanks, rollback worked fine")
    thread = "\n".join(json.dumps({"id": f"m{i}", "user": "a", "text": t}) for i, t in enumerate(said))
    assert parse_request(_user(f"{thread}\n\nWhat happened first in this thread?")).documents == ()


def test_an_instructions_turn_after_the_answer_asks() -> None:
    system = "Docs:\n<document>Acme sells anvils.</document>\n<document>Acme was founded by Wile.</document>"
    asked = "<instructions>Translate your previous answer into French.</instructions>"
    body = _chat(("system", system), ("user", "Who founded Acme?"), ("assistant", "Wile."), ("user", asked))
    assert parse_request(body).question == asked
