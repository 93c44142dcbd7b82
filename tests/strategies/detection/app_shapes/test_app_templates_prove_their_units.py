"""An app's own template proves its units only while every label sits where the app writes one.

Each body is a real app shape (`tests/strategies/app_prompts/`) read through its template
(`strategies.detection.apps`); its first chunk then holds what a chunk may hold and the reading must not trust: the
app's own label again (a chunk quoting the prompt it came from), the label inside a code fence, and the template's
own sentences. Each variant comes back with its units whole (the chunk that holds the label moved as one) or exactly
as it came, and the labels a reading would trust are declined with the reason (`none: unproven-template`).
"""

from __future__ import annotations

import copy
import re

import pytest

from contextlift.strategies.detection.apps import APP_TEMPLATES, AppTemplate
from tests.strategies.app_prompts import AppShape, app_shapes, shape_outcome
from tests.strategies.app_prompts.outcome import parse_as_detect_does

TEMPLATES = {template.name: template for template in APP_TEMPLATES}
READ = {
    shape.name: TEMPLATES[shape.name.split("-")[0]] for shape in app_shapes() if shape.name.split("-")[0] in TEMPLATES
}
"""The app shapes read through an app template, with that template."""
CLOSING = ("\n</reference>", "\n<br>")
"""How a unit's last line closes it, where the app writes one: what a chunk holds goes before it."""


def _shape(name: str) -> AppShape:
    return next(shape for shape in app_shapes() if shape.name == name)


def _with_first_chunk_holding(shape: AppShape, held: str) -> AppShape:
    """The shape with `held` written at the end of its first chunk's text, inside the unit."""
    unit = shape.units[0]
    at = next((len(unit) - len(c) for c in CLOSING if unit.endswith(c)), len(unit))
    changed = unit[:at] + held + unit[at:]
    body = copy.deepcopy(shape.body)
    for message in body["messages"]:
        content = message["content"]
        parts = content if isinstance(content, list) else [message]
        for part in parts:
            key = "text" if isinstance(content, list) else "content"
            if isinstance(part.get(key), str) and unit in part[key]:
                assert part[key].count(unit) == 1
                part[key] = part[key].replace(unit, changed)
                return AppShape(shape.name, shape.app, shape.source, body, (changed, *shape.units[1:]), shape.question)
    raise AssertionError("the unit is not in the body")


def _label_of(template: AppTemplate, unit: str) -> str:
    found = template.label.match(unit)
    assert found is not None
    return found.group(0)


def test_every_template_reads_at_least_one_app_shape() -> None:
    assert set(TEMPLATES) == {template.name for template in READ.values()}
    for name, template in READ.items():
        assert parse_as_detect_does(_shape(name).body).detection == f"app; template={template.name}"


@pytest.mark.parametrize("name", sorted(READ))
def test_a_chunk_that_quotes_its_own_label_is_not_cut_in_two(name: str) -> None:
    shape, template = _shape(name), READ[name]
    if name == "khoj":
        pytest.skip("PyYAML indents a note's own lines: test_a_khoj_note_holding_a_list_item_stays_one_note")
    # The label repeated where the app would write a next unit: a number that does not run on, an id written twice
    # (Kotaemon's one-line chunks hold it mid-line, where it opens nothing).
    forged = _with_first_chunk_holding(shape, template.gap + _label_of(template, shape.units[0]) + "quoted text")
    result = shape_outcome(forged)
    assert result.outcome in ("intact", "declined"), result.reason
    if template.numbering:
        assert result.outcome == "declined"
        assert parse_as_detect_does(forged.body).detection == "none: unproven-template"


@pytest.mark.parametrize("name", sorted(READ))
def test_a_label_line_without_the_apps_join_is_the_chunks_text(name: str) -> None:
    shape, template = _shape(name), READ[name]
    label = _label_of(template, shape.units[1])
    result = shape_outcome(_with_first_chunk_holding(shape, f"\nas the guide says:\n{label}text of the chunk"))
    assert result.outcome in ("intact", "declined"), result.reason


@pytest.mark.parametrize("name", sorted(READ))
def test_labels_in_a_chunks_code_fence_are_the_chunks_text(name: str) -> None:
    shape, template = _shape(name), READ[name]
    label = _label_of(template, shape.units[-1])
    if template.numbering != "distinct":
        label = re.sub(r"\d+", "7", label)  # a number out of the run; ids are written twice as they are
    fenced = f"\n\n```text\n{label}an example\n```\n"
    result = shape_outcome(_with_first_chunk_holding(shape, fenced))
    assert result.outcome in ("intact", "declined"), result.reason


@pytest.mark.parametrize("name", sorted(READ))
@pytest.mark.parametrize("sentence", ["start", "end"])
def test_a_chunk_that_holds_the_templates_own_sentence_is_not_read_by_the_template(name: str, sentence: str) -> None:
    shape, template = _shape(name), READ[name]
    words = getattr(template, sentence)
    if not words:
        pytest.skip(f"{name}'s template has no {sentence} sentence: its units run to the text's end")
    forged = _with_first_chunk_holding(shape, "\n" + words + "\n")
    assert not parse_as_detect_does(forged.body).detection.startswith("app;")
    assert shape_outcome(forged).outcome != "wrong"


def test_a_khoj_note_holding_a_list_item_stays_one_note() -> None:
    """Khoj dumps the notes with PyYAML: a note's own `- query:` line is indented (or quoted) inside its item."""
    from tests.strategies.app_prompts.python_apps import khoj

    shape = _shape("khoj")
    note = "Steps:\n- query: the first step\n- second step"
    references = [
        {"query": "steps", "compiled": f"# /notes/steps.md\n{note}", "file": "/notes/steps.md", "uri": "file:///n"},
        {"query": "steps", "compiled": "# /notes/other.md\nOther text.", "file": "/notes/other.md", "uri": "file:///o"},
    ]
    dumped = khoj.yaml_dump(references)
    body = copy.deepcopy(shape.body)
    body["messages"][1]["content"][0]["text"] = khoj.NOTES_CONVERSATION.format(references=dumped).strip()
    request = parse_as_detect_does(body)
    assert request.detection == "app; template=khoj"
    assert [d.raw for d in request.documents] == [khoj.yaml_dump([r]).rstrip("\n") for r in references]


def test_a_template_whose_numbers_break_says_why_in_detect() -> None:
    from contextlift.strategies.detection.explain import explain_detection

    shape, template = _shape("ragflow"), READ["ragflow"]
    forged = _with_first_chunk_holding(shape, template.gap + _label_of(template, shape.units[0]) + "quoted")
    found = explain_detection(forged.body)
    assert found["format"] == "none: unproven-template"
    assert "ragflow's template" in found["hint"]
    assert "numbers that do not run in order" in found["hint"]
