"""SQuAD 2.0 (its dev JSON, found in `--data`), read once per file: the Wikipedia articles, their paragraphs and
each paragraph's answerable questions. `swim` asks a question of its paragraph alone; `litm-qa` puts the
paragraph among other paragraphs of the same article (`same_article_questions`): distractors on the question's
own topic, as a retriever returns them, that do not hold its answer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from contextlift.eval.metrics import normalize_answer
from contextlift.eval.tasks.litm import Passage


@dataclass(frozen=True, slots=True)
class SquadQuestion:
    question: str
    answers: tuple[str, ...]
    """The annotators' answers, each once, in their order."""


@dataclass(frozen=True, slots=True)
class SquadParagraph:
    text: str
    """Whitespace runs collapsed to one space: a line break or a blank line inside a paragraph would split it into
    two documents in some prompt shapes."""
    questions: tuple[SquadQuestion, ...]
    """The answerable ones only."""


@dataclass(frozen=True, slots=True)
class SquadArticle:
    title: str
    """As Wikipedia shows it: spaces for the file's underscores."""
    paragraphs: tuple[SquadParagraph, ...]


@dataclass(frozen=True, slots=True)
class SameArticleQuestion:
    """An answerable question, its paragraph, and the other paragraphs of its article that hold none of its
    answers."""

    question: str
    answers: tuple[str, ...]
    gold: Passage
    others: tuple[Passage, ...]
    """In the article's order."""


class _Answer(BaseModel):
    text: str


class _Question(BaseModel):
    question: str
    answers: list[_Answer]
    is_impossible: bool = False


class _Paragraph(BaseModel):
    context: str
    qas: list[_Question]


class _Article(BaseModel):
    title: str
    paragraphs: list[_Paragraph]


class _SquadFile(BaseModel):
    """What is read of SQuAD 2.0's dev file; anything else in it is left alone."""

    data: list[_Article]


@functools.cache
def load_squad(path: Path) -> tuple[SquadArticle, ...]:
    """Every article of the file, every paragraph of each (with or without answerable questions).

    Raises:
        ValueError: the file is not JSON of SQuAD 2.0's shape (nested deeper than any such file included: the
            parser stops at its own depth limit rather than the interpreter's recursion limit).
        OSError: the file cannot be read.
    """
    try:
        squad = _SquadFile.model_validate_json(path.read_bytes())
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        raise ValueError(f"{path}: not SQuAD 2.0's dev file ({where}: {problem['msg']})") from None
    return tuple(
        SquadArticle(
            article.title.replace("_", " "),
            tuple(
                SquadParagraph(
                    " ".join(paragraph.context.split()),
                    tuple(
                        SquadQuestion(qa.question, tuple(dict.fromkeys(a.text for a in qa.answers)))
                        for qa in paragraph.qas
                        if not qa.is_impossible and qa.answers
                    ),
                )
                for paragraph in article.paragraphs
            ),
        )
        for article in squad.data
    )


@functools.cache
def same_article_questions(path: Path) -> tuple[SameArticleQuestion, ...]:
    """Each answerable question that the metric can score fairly, with every other paragraph of its article that
    holds none of its answers, normalised as `best_subspan_em` normalises (the title included, since the
    documents carry it).

    Left out: a question with an answer that normalises to nothing (it would match any reply), one whose answers
    are not in its own paragraph once normalised, and one whose answer is in the article's title (every document
    of the article would then hold it).
    """
    found = []
    for article in load_squad(path):
        title = normalize_answer(article.title)
        documents = [Passage(article.title, p.text) for p in article.paragraphs]
        # Normalised once per article: every question of it is checked against every paragraph.
        texts = [normalize_answer(p.text) for p in article.paragraphs]
        for index, paragraph in enumerate(article.paragraphs):
            for qa in paragraph.questions:
                answers = [normalize_answer(a) for a in qa.answers]
                if not all(answers) or any(a in title for a in answers) or not any(a in texts[index] for a in answers):
                    continue
                others = tuple(
                    document
                    for i, document in enumerate(documents)
                    if document.text != paragraph.text and not any(a in texts[i] for a in answers)
                )
                found.append(SameArticleQuestion(qa.question, qa.answers, documents[index], others))
    return tuple(found)
