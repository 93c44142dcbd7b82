"""`auto`: the pipeline chosen per request by a policy written from measured lift.

A policy file (TOML) lists rules in order; the first whose conditions match the request applies its pipeline.
Conditions are what the proxy sees cheaply once documents are detected: the model (a glob), the number of
documents, their tokens, the detected format, streaming. Every rule carries the evidence it was chosen on
(lift, 95% interval, n, report, date), which the response names in `X-Context-Policy`. A policy is validated
whole before it replaces the one in force: every pipeline must resolve within the operator's caps, so a rule can
never raise a request's cost above them. `contextlift policy --example` prints a commented example.

Whatever sits at the policy path is read as untrusted: only a regular file (a FIFO or a device would block the
reader), at most `max_bytes`, and text that reaches `X-Context-Policy` is printable ASCII (a header value that
cannot be encoded fails every response that carries it). Reading and parsing are blocking work: the proxy runs
`load_policy` in a worker thread.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from contextlift.strategies import DECLINED, ChatRequest, DocumentFormat, Pipeline
from contextlift.strategies.rankers import ranker_margin as ranker_margin  # read here by the routes and the tests

AUTO = "auto"
"""The selection that asks for the policy's choice."""
BUILT_IN = "built-in"
"""`policy_file` value (the default) for the policy shipped with contextlift, measured on the embedded model."""
MAX_BYTES = 1024 * 1024
"""Default bound on a policy file (`policy_max_bytes`): a thousand rules with their evidence are ~400 KB."""
_HEADER_TEXT = r"^[\x20-\x7e]*$"
"""Printable ASCII: what a header value can carry as it is (no control character, nothing past Latin-1)."""


class PolicyError(Exception):
    """A policy file that cannot be read, parsed or resolved; the policy in force stays."""


class PolicyMissing(PolicyError):
    """No file at the policy path (yet): at start-up the proxy applies the built-in policy until one is written."""


class Evidence(BaseModel):
    """What a rule was chosen on: the paired lift over `none` and its 95% interval, from one report."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(
        max_length=200,
        pattern=_HEADER_TEXT,
        description="Names the row of the report the rule came from; printable ASCII (it is sent in a header).",
    )
    lift: float
    ci95: tuple[float, float]
    n: int = Field(ge=1)
    report: str = Field(max_length=500)
    date: str = Field(max_length=40)
    test: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]{1,40}$",
        description="The paired test behind the verdict (`mcnemar-exact`, `sign-exact`); absent in older files.",
    )
    p: float | None = Field(None, ge=0, le=1, description="The test's p-value, after the correction.")
    correction: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._/-]{1,40}$",
        description="The correction for picking among several pipelines: `holm/6` is Holm's over six.",
    )


FORMATS = frozenset({*(f.value for f in DocumentFormat), "none", *(f"none: {reason}" for reason in DECLINED)})
"""What a rule's `formats` may name: a detected format (`X-Context-Format`'s first word), `none` (any request whose
documents were not read) or a declined reading with its reason."""


class Rule(BaseModel):
    """One rule: conditions (all optional; an absent one matches anything) and the pipeline to apply."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    model: str = Field("*", max_length=200, description="fnmatch pattern of the request's model.")
    documents: tuple[int, int] | None = Field(None, description="Inclusive range of detected documents.")
    document_tokens: tuple[int, int] | None = Field(None, description="Inclusive range of the documents' tokens.")
    formats: tuple[str, ...] | None = Field(
        None,
        description="Detected formats (`X-Context-Format` shapes: `litm`, `paragraphs` ...); `none` matches every "
        "request whose documents were not read, `none: ambiguous-chunks` (a reading with its reason) only those "
        "declined for that reason. A name no request can have refuses the file.",
    )
    stream: bool | None = None
    ranker_margin: tuple[float, float] | None = Field(
        None,
        description="Inclusive range of the ranker's confidence: the top document's lead over the second, as a "
        "share of its lead over the last (0: the top two tie; 1: one document stands out, the rest tie below). "
        "Computed only when a rule names it, by `margin_ranker`.",
    )
    margin_ranker: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$",
        description="The ranker whose margin `ranker_margin` reads; unset: the operator's default ranker.",
    )
    strategy: str = Field(max_length=500, description="The pipeline, as `X-Context-Strategy` would name it.")
    evidence: Evidence | None = Field(None, description="Absent only for a rule that applies `none`.")

    @model_validator(mode="after")
    def _evidence_unless_none(self) -> Rule:
        if self.evidence is None and self.strategy.strip() != "none":
            raise ValueError(f"rule {self.id!r}: a rule that applies a strategy carries its evidence")
        for bounds in (self.documents, self.document_tokens):
            if bounds is not None and not 0 <= bounds[0] <= bounds[1]:
                raise ValueError(f"rule {self.id!r}: a range is [low, high] with 0 <= low <= high")
        if self.ranker_margin is not None and not 0 <= self.ranker_margin[0] <= self.ranker_margin[1] <= 1:
            raise ValueError(f"rule {self.id!r}: ranker_margin is [low, high] with 0 <= low <= high <= 1")
        if self.margin_ranker is not None and self.ranker_margin is None:
            raise ValueError(f"rule {self.id!r}: margin_ranker without ranker_margin")
        unknown = [f for f in self.formats or () if f not in FORMATS]
        if unknown:
            raise ValueError(
                f"rule {self.id!r}: formats {unknown} never match a request; a format is one of "
                f"{', '.join(sorted({f.value for f in DocumentFormat}))}, `none`, or `none: REASON` with REASON one "
                f"of {', '.join(DECLINED)}"
            )
        return self


class PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: Literal[1] = 1
    description: str = Field("", max_length=2000)
    rule: tuple[Rule, ...] = Field((), max_length=1000)


@dataclass(frozen=True, slots=True)
class Auto:
    """The selection `auto`: the pipeline is the policy's choice, made once the request's documents are known."""

    param: str
    """Where the selection came from (the header, the body field, a default), for errors."""


@dataclass(frozen=True, slots=True)
class RequestFeatures:
    """What a rule may look at."""

    model: str | None
    documents: int
    document_tokens: int
    format: str
    """The detected shape without its details (`litm`, `xml` ...), or `none`."""
    stream: bool
    reading: str = ""
    """For a request whose documents were not read, the reading with its reason (`none: ambiguous-chunks`), which a
    rule's `formats` may name instead of `none`; empty otherwise."""
    margins: Mapping[str | None, float] = field(default_factory=dict)
    """The ranker margins the policy asked for (`Policy.margin_rankers`), by ranker name (None: the default);
    a ranker that could not rank the request (fewer than two documents, a fallback) is absent."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The outcome of `auto` for one request: the pipeline and what `X-Context-Policy` says about it."""

    pipeline: Pipeline
    rule: str
    """The rule's id, or `none` when no rule matched."""
    header: str


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy, each rule with its pipeline resolved."""

    source: str
    rules: tuple[tuple[Rule, Pipeline], ...]

    def margin_rankers(self, features: RequestFeatures) -> frozenset[str | None]:
        """The rankers whose margin a rule could still fire on for these features (None: the default ranker):
        the margin rules whose other conditions match, before the first rule that matches without a margin.
        Empty: no ranking needed, so a request no margin rule can reach is never ranked for the policy."""
        names: set[str | None] = set()
        for rule, _ in self.rules:
            if not _matches(rule, features, margin=False):
                continue
            if rule.ranker_margin is None:
                break
            names.add(rule.margin_ranker)
        return frozenset(names)

    def choose(self, features: RequestFeatures) -> Choice:
        for rule, pipeline in self.rules:
            if _matches(rule, features):
                header = f"rule={rule.id}"
                if rule.ranker_margin is not None:
                    header += f"; margin={features.margins[rule.margin_ranker]:.3f}"
                if rule.evidence is not None:
                    e = rule.evidence
                    header += f"; evidence={e.id}; lift={e.lift:+.3f} [{e.ci95[0]:+.3f}, {e.ci95[1]:+.3f}]; n={e.n}"
                    if e.test is not None and e.p is not None:
                        header += f"; test={e.test}; p={e.p:.2g}"
                    if e.correction is not None:
                        header += f"; correction={e.correction}"
                return Choice(pipeline, rule.id, header)
        return Choice(
            Pipeline(), "none", f"none; reason=no-rule-matched{self._nearest(features)}; policy={self.source}"
        )

    def _nearest(self, features: RequestFeatures) -> str:
        """`; nearest=ID; failed=...`: the rule that missed on the fewest conditions (the first of those), and each
        condition it missed on with the request's value, so a miss can be told from the response alone."""
        misses = [(_misses(rule, features), rule.id) for rule, _ in self.rules]
        if not misses:
            return ""
        failed, rule_id = min(misses, key=lambda m: len(m[0]))
        return f"; nearest={rule_id}; failed={', '.join(failed)}"


def load_policy(path: Path | str, resolve: Callable[[str, str], Pipeline], max_bytes: int = MAX_BYTES) -> Policy:
    """Read and validate a policy; `resolve` turns a rule's strategy text into a pipeline within the caps.
    Blocking (file I/O, parsing): call it from a worker thread once the proxy serves.

    Raises:
        PolicyMissing: no file at `path`.
        PolicyError: not a regular file, larger than `max_bytes`, unreadable, not TOML (nested past the parser's
            recursion limit included), empty of any setting (blank or comments only: a torn write, not a policy
            of no rules, which says `version = 1`), not a policy, or a rule whose pipeline does not resolve.
    """
    try:
        if str(path) == BUILT_IN:
            text, source = (
                resources.files("contextlift.proxy.policies").joinpath("reference.toml").read_text(),
                BUILT_IN,
            )
        else:
            # The file name is the policy's name in `X-Context-Policy`: percent-encoded, any name is a valid header.
            text, source = _read_regular(Path(path), max_bytes), quote(Path(path).name, safe="")
        document = tomllib.loads(text)
        if not document:
            # Caught here, not by the schema, where every field has a default: an empty file is what a reader sees
            # mid-write by an editor or a copy, and taking it would drop every rule in force. A policy of no rules
            # says so with `version = 1`.
            raise PolicyError(f"policy {path}: holds no setting (empty, or only comments); a policy of no rules "
                              "is written `version = 1`")  # fmt: skip
        parsed = PolicyFile.model_validate(document)
    except FileNotFoundError:
        raise PolicyMissing(f"policy {path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError) as error:
        raise PolicyError(f"policy {path}: {error}") from None
    except RecursionError:
        raise PolicyError(f"policy {path}: nested too deep to parse") from None
    ids = [rule.id for rule in parsed.rule]
    if len(set(ids)) != len(ids):
        raise PolicyError(f"policy {path}: rule ids repeat")
    rules = []
    for rule in parsed.rule:
        try:
            rules.append((rule, resolve(rule.strategy, f"policy rule {rule.id}")))
            if rule.margin_ranker is not None:  # an unknown ranker is refused as a step naming it would be
                resolve(f"reorder; ranker={rule.margin_ranker}", f"policy rule {rule.id} margin_ranker")
        except Exception as error:  # the resolver's own error, whatever it is, refuses the file
            raise PolicyError(f"policy {path}: rule {rule.id!r}: {getattr(error, 'message', error)}") from None
    return Policy(source, tuple(rules))


def _read_regular(path: Path, max_bytes: int) -> str:
    """The file's text, if it is a regular file of at most `max_bytes`. Opened without blocking, so a FIFO (or a
    device) at the path is refused by `fstat` instead of waiting for a writer that never comes."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(descriptor, "rb") as file:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise PolicyError(f"policy {path}: not a regular file")
        if info.st_size > max_bytes:
            raise PolicyError(f"policy {path}: {info.st_size} bytes, more than policy_max_bytes ({max_bytes})")
        data = file.read(max_bytes + 1)  # a file growing after fstat is still bounded
    if len(data) > max_bytes:
        raise PolicyError(f"policy {path}: more than policy_max_bytes ({max_bytes})")
    return data.decode("utf-8")


def example_policy() -> str:
    """A small valid policy file with comments (`contextlift policy --example`)."""
    return resources.files("contextlift.proxy.policies").joinpath("example.toml").read_text()


def _misses(rule: Rule, features: RequestFeatures) -> list[str]:
    """Each condition of `rule` the request fails, as `X-Context-Policy` says it (printable ASCII: what came from
    the request or the file is the detected format, numbers, or left out, as the model is)."""
    failed = []
    if not fnmatch.fnmatchcase(features.model or "", rule.model):
        failed.append("model")
    for name, bounds, value in (
        ("documents", rule.documents, features.documents),
        ("document_tokens", rule.document_tokens, features.document_tokens),
    ):
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            failed.append(f"{name} {value} not in [{bounds[0]}, {bounds[1]}]")
    if rule.formats is not None and not _format_matches(rule, features):
        listed = ", ".join(quote(f, safe=" -_.:") for f in rule.formats)
        said = features.reading or features.format
        failed.append(f"format {quote(said, safe=' -_.:')} not in [{listed}]")
    if rule.ranker_margin is not None:
        margin = features.margins.get(rule.margin_ranker)
        low, high = rule.ranker_margin
        if margin is None:
            failed.append("ranker_margin not known (fewer than two documents ranked)")
        elif not low <= margin <= high:
            failed.append(f"ranker_margin {margin:.3f} not in [{low:g}, {high:g}]")
    if rule.stream is not None and rule.stream != features.stream:
        failed.append(f"stream {str(features.stream).lower()}")
    return failed


def _matches(rule: Rule, features: RequestFeatures, *, margin: bool = True) -> bool:
    if not fnmatch.fnmatchcase(features.model or "", rule.model):
        return False
    if rule.documents is not None and not rule.documents[0] <= features.documents <= rule.documents[1]:
        return False
    tokens = rule.document_tokens
    if tokens is not None and not tokens[0] <= features.document_tokens <= tokens[1]:
        return False
    if not _format_matches(rule, features):
        return False
    if margin and rule.ranker_margin is not None:
        value = features.margins.get(rule.margin_ranker)
        if value is None or not rule.ranker_margin[0] <= value <= rule.ranker_margin[1]:
            return False
    return rule.stream is None or rule.stream == features.stream


def _format_matches(rule: Rule, features: RequestFeatures) -> bool:
    formats = rule.formats
    return formats is None or features.format in formats or (bool(features.reading) and features.reading in formats)


def detected_reading(request: ChatRequest) -> str:
    """A declined reading with its reason (`none: ambiguous-chunks; ...` -> `none: ambiguous-chunks`), or ""."""
    reading = request.detection.split(";", 1)[0].strip()
    return reading if reading.startswith("none:") else ""


def detected_format(request: ChatRequest) -> str:
    """The detected format's name, as a rule's `formats` reads it (`paragraphs; region=fence` -> `paragraphs`)."""
    return request.detection.split(";", 1)[0].split(":", 1)[0].strip()
