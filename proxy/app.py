"""The app factory: everything the proxy needs is built here from one `Settings`, nothing at import time."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx
import structlog
from litestar import Litestar, MediaType, Request, Response
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.types import (
    HTTPScope,
    LifeSpanReceive,
    LifeSpanScope,
    LifeSpanSend,
    Receive,
    Scope,
    Send,
)

from contextlift.proxy.budget import MemoryBudget
from contextlift.proxy.edge.admission import Admission, AdmissionMiddleware, send_error
from contextlift.proxy.edge.paths import canonical_and_encoded
from contextlift.proxy.errors import (
    InvalidPath,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    ProxyError,
    UpstreamStatusError,
)
from contextlift.proxy.observability.telemetry import ServerSpanMiddleware
from contextlift.proxy.policy import BUILT_IN, Auto, PolicyError, PolicyMissing, load_policy
from contextlift.proxy.remote_rankers import ServiceRanker, build_rankers
from contextlift.proxy.request_log import RequestLog
from contextlift.proxy.routes import ROUTES
from contextlift.proxy.settings import Settings, SettingsError
from contextlift.proxy.state import EmbedderLoad, ProxyState, proxy_state
from contextlift.proxy.upstream.client import StreamLimits, UpstreamClient
from contextlift.proxy.upstream.retry import RetryPolicy
from contextlift.proxy.upstream.transport import build_transport
from contextlift.strategies import (
    Embedder,
    Params,
    SentenceTransformerEmbedder,
    Services,
    StrategyRegistry,
    StrategySelectionError,
    Transform,
    build_registry,
    parse_request,
)
from contextlift.strategies.embedder import EXTRA as EMBEDDINGS_EXTRA
from contextlift.strategies.embedder import embeddings_installed
from contextlift.strategies.rankers import Ranker, RankerSet, published_rankers
from contextlift.strategies.rankers.gate import merged as merged_gates

if TYPE_CHECKING:  # imported only where shadow_rate > 0: a proxy without shadow never loads it
    from contextlift.proxy.shadow.evaluation import Shadow
    from contextlift.proxy.shadow.otlp import OtlpSink

YOUNG_COLLECTION_EVERY = 10_000
log = structlog.get_logger("contextlift")


def create_app(
    settings: Settings,
    *,
    registry: StrategyRegistry | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    embedder: Embedder | None = None,
) -> Litestar:
    """Build the proxy app.

    Args:
        settings: the configuration; `upstream_url` must be set (the CLI sets it to the embedded model's).
        registry: the strategies to offer; default: the built-ins and those published as entry points.
        transport: an httpx transport for the upstream, for tests that fake it.
        embedder: the embedder strategies use, ready as given; default: all-MiniLM-L6-v2 where the embeddings extra
            is installed, loaded when a request or rule first needs it, or at start-up where a setting does
            (`_preloaded_for`; /startupz then waits for it).

    Raises:
        SettingsError: no upstream, or a default strategy that does not resolve.
    """
    if not settings.upstream_url:
        raise SettingsError("no upstream_url: set CONTEXTLIFT_UPSTREAM_URL or start through `contextlift serve`")
    key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
    upstream = UpstreamClient(
        settings.upstream_url,
        api_key=key,
        key_header=settings.upstream_api_key_header,
        timeout=settings.upstream_timeout,
        connect_timeout=settings.upstream_connect_timeout,
        max_connections=settings.upstream_max_connections,
        pool_wait=settings.upstream_pool_wait,
        retry=RetryPolicy(
            max_retries=settings.max_retries,
            backoff=settings.retry_backoff,
            max_retry_after=settings.retry_max_wait,
        ),
        stream_limits=StreamLimits(
            stall_seconds=settings.upstream_timeout,
            max_event_bytes=settings.max_event_bytes,
            max_stream_bytes=settings.max_stream_bytes,
            deadline_seconds=settings.upstream_deadline,
            max_body_bytes=settings.max_upstream_body_bytes,
        ),
        transport=transport or build_transport(settings.upstream_max_connections),
    )
    real_embedder = None
    if embedder is None and settings.embedder != "off" and embeddings_installed():
        device = None if settings.embedding_device == "auto" else settings.embedding_device
        embedder = real_embedder = SentenceTransformerEmbedder(device=device, cache_size=settings.embedding_cache_size)
    state = ProxyState(settings, registry or build_registry(), upstream)
    _check_caps(state.registry, settings.strategy_caps)
    try:
        rankers = build_rankers(settings.rankers, published_rankers(), settings.default_ranker)
    except ValueError as error:
        raise SettingsError(f"rankers: {error}") from None
    unknown = sorted(set(settings.ranker_gates) - set(rankers))
    if unknown:
        raise SettingsError(f"ranker_gates names no ranker of this proxy: {', '.join(unknown)}")
    unavailable = {} if embedder is not None else _needing_the_embedder(rankers, settings)
    if settings.default_ranker in unavailable:
        raise SettingsError(f"default_ranker {settings.default_ranker!r} {unavailable[settings.default_ranker]}")
    state.registry.rankers = frozenset(rankers) - frozenset(unavailable)
    state.registry.unavailable_rankers = unavailable
    state.services = Services(
        embedder=embedder,
        seed=settings.strategy_seed,
        observe_step=state.metrics.observe_step,
        rankers=RankerSet(
            rankers,
            settings.default_ranker,
            embedder,
            state.metrics.observe_ranking,
            settings.lexical_language,
            merged_gates(settings.ranker_gates),
        ),
        unproven_fallback=unproven_fallback_step(state.registry, settings),
    )
    # The file's time before it is read: a change made while the app starts is then seen by the watcher, which
    # otherwise took its first reading only once running and missed an edit made in between.
    policy_seen = _mtime(Path(settings.policy_file)) if settings.policy_file != BUILT_IN else None
    try:
        state.policy = load_policy(settings.policy_file, state.resolve, settings.policy_max_bytes)
    except PolicyMissing:
        # The loop's first run: shadow measures, `contextlift policy` writes the file, the watcher picks it up.
        log.warning(
            "policy file not written yet: auto applies the built-in policy until it is", path=settings.policy_file
        )
        state.policy = load_policy(BUILT_IN, state.resolve)
    except PolicyError as error:
        raise SettingsError(str(error)) from None
    for model, text in settings.default_strategies.items():
        try:
            state.default_pipelines[model] = state.select(text, "default_strategies")
        except ProxyError as error:
            raise SettingsError(f"default_strategies[{model!r}]: {error.message}") from None
    if real_embedder is not None:
        state.embedder = _embedder_load(real_embedder, settings, state, rankers)
    if settings.shadow_rate > 0:
        state.shadow = _shadow(settings, state, key, transport)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        state.tokenizer.count("warm-up")  # load the encoding now, not inside the first request
        _freeze_startup_objects(settings)
        if state.embedder.preloaded_for:
            state.embedder.start()
        # on-demand (loaded when a request or rule first needs it), loading (a setting needs it: /startupz waits),
        # off (embedder = off, or the extra not installed), or given (handed to create_app ready).
        told = state.embedder.state if real_embedder is not None else ("given" if embedder is not None else "off")
        log.info(
            "proxy started",
            upstream=upstream.base_url,
            strategies=state.registry.names(),
            policy=state.policy.source,
            policy_rules=len(state.policy.rules),
            rankers=sorted(state.registry.ranker_names()),
            rankers_unavailable=sorted(unavailable),
            default_ranker=settings.default_ranker,
            embedder=told,
            embedder_preloaded_for=state.embedder.preloaded_for,
            # What bounds a client's wait: the silence allowed per call, the whole call, and the retries after it.
            upstream_timeout_s=settings.upstream_timeout,
            upstream_deadline_s=settings.upstream_deadline,
            max_retries=settings.max_retries,
        )
        if state.shadow is not None:
            state.shadow.start()
        watching = asyncio.create_task(_watch_policy(state, policy_seen)) if settings.policy_file != BUILT_IN else None
        try:
            yield
        finally:
            if watching is not None:
                watching.cancel()
            state.shutting_down = True
            state.embedder.cancel()
            if state.shadow is not None:
                await state.shadow.aclose()
            await upstream.aclose()
            for ranker in rankers.values():
                if isinstance(ranker, ServiceRanker):
                    await ranker.aclose()

    admission = Admission(
        max_in_flight=settings.max_in_flight,
        budget=MemoryBudget(settings.max_buffered_bytes),
        max_body_bytes=settings.max_body_bytes,
        body_read_timeout=settings.body_read_timeout,
        gauge=state.metrics.in_flight,
    )
    if real_embedder is not None:
        state.metrics.watch_cache(lambda: (real_embedder.hits, real_embedder.misses))
    state.admission = admission
    return ProxyApp(
        request_log=state.request_log,
        route_handlers=ROUTES,
        middleware=[ServerSpanMiddleware, DefineMiddleware(AdmissionMiddleware, admission=admission)],
        state=State({"proxy": state}),
        lifespan=[lifespan],
        exception_handlers={ProxyError: _proxy_error, HTTPException: _http_exception, Exception: _unexpected},
        request_max_body_size=None,  # enforced by the routes themselves, with the OpenAI envelope
        openapi_config=OpenAPIConfig(title="contextlift", version="0.1.0", path="/openapi"),
        logging_config=None,  # structlog is configured by the CLI (contextlift.proxy.observability.logs), not per app
        debug=False,
    )


def _check_caps(registry: StrategyRegistry, caps: dict[str, float]) -> None:
    """Refuse, at start-up, a cap that no request could meet: one below its parameter's minimum (every request
    using the strategy would get a 400), or one naming no numeric parameter of a registered strategy (a typo
    that would leave the built-in cap in force unseen)."""
    for key, cap in caps.items():
        name, _, param_name = key.partition(".")
        if name not in registry:
            raise SettingsError(f"strategy_caps[{key!r}]: no strategy {name!r}; known: {', '.join(registry.names())}")
        numeric = {p.name: p for p in registry.get(name).params if p.kind is not str}
        param = numeric.get(param_name)
        if param is None:
            accepted = ", ".join(numeric) or "none"
            raise SettingsError(
                f"strategy_caps[{key!r}]: {name} has no numeric parameter {param_name!r}; it has: {accepted}"
            )
        if param.minimum is not None and cap < param.minimum:
            raise SettingsError(
                f"strategy_caps[{key!r}] is {cap:g}, below the parameter's minimum of {param.minimum:g}: "
                f"no request could use {name}"
            )


def _shadow(
    settings: Settings, state: ProxyState, key: str | None, transport: httpx.AsyncBaseTransport | None
) -> Shadow:
    from contextlift.proxy.shadow.budget import ShadowBudget
    from contextlift.proxy.shadow.evaluation import Shadow
    from contextlift.proxy.shadow.sink import ShadowSink, sink_path
    from contextlift.proxy.shadow.store import ShadowStore

    candidates = []
    for index, text in enumerate(settings.shadow_strategies):
        try:
            pipeline = state.resolve(text, "shadow_strategies")
        except ProxyError as error:
            raise SettingsError(f"shadow_strategies[{index}]: {error.message}") from None
        candidates.append((pipeline.label, pipeline))
    # A pool of its own, as large as the shadow work may use: shadow calls never wait for a client's connection,
    # nor a client for theirs.
    upstream = UpstreamClient(
        str(settings.upstream_url),
        api_key=key,
        key_header=settings.upstream_api_key_header,
        timeout=settings.upstream_timeout,
        connect_timeout=settings.upstream_connect_timeout,
        max_connections=settings.shadow_max_in_flight,
        retry=RetryPolicy(max_retries=0),
        stream_limits=state.upstream.stream_limits,
        transport=transport or build_transport(settings.shadow_max_in_flight),
    )
    sink = ShadowSink(sink_path(settings.shadow_sink), settings.shadow_sink_max_bytes) if settings.shadow_sink else None
    budget = ShadowBudget(settings.shadow_calls_per_minute, settings.shadow_tokens_per_minute)
    store = None
    if settings.shadow_store is not None:
        store = ShadowStore(
            settings.shadow_store.get_secret_value(),
            settings.shadow_store_prefix,
            budget,
            max_records=settings.shadow_stream_max_records,
            # A worker holds one connection at a time; one more for the tally.
            max_connections=settings.shadow_max_in_flight + 1,
        )
    # Without an operator key a shadow call carries the client's own credentials: the operator's evaluation
    # billed to the client (about four calls per sample, ten with probes), only where the operator says so. Not
    # even for an upstream on this machine: a local gateway (LiteLLM, a company proxy) may bill a paid API per call.
    may_call = key is not None or settings.shadow_use_client_key
    if not may_call:
        log.warning("shadow evaluation samples nothing: no upstream_api_key, and shadow_use_client_key is off")
    return Shadow(
        rate=settings.shadow_rate,
        candidates=candidates,
        upstream=upstream,
        services=state.services,
        metrics=state.metrics,
        budget=store or budget,
        otlp=_otlp_sink(settings),
        workers=settings.shadow_max_in_flight,
        queue_size=settings.shadow_queue,
        sink=sink,
        store=store,
        capture=settings.shadow_capture,
        redact=settings.shadow_capture_redact,
        embedder_ready=state.embedder.ready.is_set,
        detect=lambda body, shape: parse_request(
            body, limits=state.document_limits, declared=state.declared_formats, shape=shape
        ),
        may_call=may_call,
        probes=settings.shadow_probes,
        probe_min_documents=settings.shadow_probe_min_documents,
    )


def _otlp_sink(settings: Settings) -> OtlpSink | None:
    """The OTLP exporter of shadow records, where shadow_otlp_logs asks for one.

    Raises:
        SettingsError: it is asked for without a collector to export to.
    """
    if not settings.shadow_otlp_logs:
        return None
    if not settings.otel_logs_endpoint:
        raise SettingsError(
            "shadow_otlp_logs: no collector to export to; set OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or "
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
    from contextlift.proxy.shadow.otlp import OtlpSink

    return OtlpSink(settings.otel_service_name)


class ProxyApp(Litestar):
    """The Litestar app, given one canonical path per request before it routes: a path that is not plain
    (see `contextlift.proxy.edge.paths`) gets a 400 envelope here and never reaches a route or the upstream. Every
    response it routes carries the request record's headers (`RequestLog.stamped`), and every request it routes is
    logged once: one whose answer never ended as a 499."""

    def __init__(self, *, request_log: RequestLog, **options: Any) -> None:
        super().__init__(**options)
        self.request_log = request_log

    async def __call__(
        self, scope: Scope | LifeSpanScope, receive: Receive | LifeSpanReceive, send: Send | LifeSpanSend
    ) -> None:
        if scope["type"] != ScopeType.HTTP:
            await super().__call__(scope, receive, send)
            return
        http = cast(HTTPScope, scope)
        try:
            # Some servers and test clients leave the query on raw_path; the query is query_string's.
            raw = (http.get("raw_path") or http["path"].encode()).split(b"?", 1)[0]
            http["path"], http["raw_path"] = canonical_and_encoded(raw)
            if b"#" in http.get("query_string", b""):
                raise InvalidPath("the request target holds a fragment ('#'), which a request never carries")
        except InvalidPath as error:
            log.warning("request path refused", reason=error.message)
            await send_error(cast(Send, send), error)
            return
        try:
            await super().__call__(scope, receive, self.request_log.stamped(http, cast(Send, send)))
        finally:
            self.request_log.cut(http)


_READ_AT_START = -1.0
"""`_watch_policy`'s `seen` when the caller has no reading of its own: the watcher takes one when it starts."""


async def _watch_policy(state: ProxyState, seen: float | None = _READ_AT_START) -> None:
    """Re-read the policy file on SIGHUP and when its modification time changes (checked every
    `policy_poll_seconds`); a file that does not validate leaves the policy in force. The file is read and parsed
    in a worker thread (a large or deep one costs seconds of CPU), and nothing a file holds ends the watcher: once
    it ended, SIGHUP would be back to its default, which ends the process."""
    loop = asyncio.get_running_loop()
    hangup = asyncio.Event()
    # Not possible off the main thread (an app under test) or without SIGHUP: the file's time still counts.
    installed = False
    with contextlib.suppress(RuntimeError, ValueError, NotImplementedError):
        loop.add_signal_handler(signal.SIGHUP, hangup.set)
        installed = True
    path = Path(state.settings.policy_file)
    if seen == _READ_AT_START:
        seen = await _modified(path)
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(state.settings.policy_poll_seconds):
                    await hangup.wait()
            try:
                modified = await _modified(path)
                if hangup.is_set() or modified != seen:
                    hangup.clear()
                    seen = modified
                    # Abandoned at shutdown rather than waited for: the thread ends on its own (the file is bounded).
                    await anyio.to_thread.run_sync(state.reload_policy, abandon_on_cancel=True)
            except Exception as error:  # reload_policy refuses and logs; this is for what nothing foresaw
                log.error("policy watcher: reload failed; the policy in force stays", error=f"{type(error).__name__}")
    finally:
        if installed:
            with contextlib.suppress(RuntimeError, ValueError, NotImplementedError):
                loop.remove_signal_handler(signal.SIGHUP)
                # Shutting down: a late SIGHUP must not end the process with 129 in the middle of the drain.
                signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


async def _modified(path: Path) -> float | None:
    """The file's modification time, from a worker thread (a stat on a network file system can block)."""
    return await anyio.to_thread.run_sync(_mtime, path, abandon_on_cancel=True)


def _freeze_startup_objects(settings: Settings) -> None:
    """Put every object alive now in the collector's permanent generation (`gc.freeze`), and collect the youngest
    generation every `YOUNG_COLLECTION_EVERY` allocations instead of Python's 700.

    What start-up leaves (modules, torch's and the model's objects: ~476k with the embedder loaded) lives as long
    as the process, but a full collection walks all of it, holding the event loop for ~240 ms on this project's
    machine each time enough request objects survive into the oldest generation. Frozen, they are never walked.
    A request allocates a few thousand objects, nearly all gone when it ends; at 700 the young collections ran
    several times per request. Measured side by side (scripts/bench.py, docs/results/perf/2026-11-24-gc.md).
    """
    if settings.gc_tuned:
        gc.freeze()
        gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])


def _needing_the_embedder(rankers: Mapping[str, Ranker], settings: Settings) -> dict[str, str]:
    """The rankers that cannot run without the embedder, each with what would make it run."""
    why = (
        "is off (embedder = off)"
        if settings.embedder == "off"
        else f"needs the {EMBEDDINGS_EXTRA} extra: pip install 'contextlift[{EMBEDDINGS_EXTRA}]'"
    )
    return {name: f"uses all-MiniLM-L6-v2, which {why}" for name, ranker in rankers.items() if ranker.needs_embedder}


def _embedder_load(
    embedder: SentenceTransformerEmbedder, settings: Settings, state: ProxyState, rankers: Mapping[str, Ranker]
) -> EmbedderLoad:
    def loaded(seconds: float) -> None:
        # The model's objects too, now they are in memory (loaded on demand: with the few requests then in flight).
        _freeze_startup_objects(settings)
        log.info("embedder loaded", device=embedder.device, seconds=round(seconds, 2))

    return EmbedderLoad(
        embedder.load,
        preloaded_for=_preloaded_for(settings, state, rankers),
        wait_seconds=settings.local_model_startup_timeout,
        on_loaded=loaded,
    )


def _preloaded_for(settings: Settings, state: ProxyState, rankers: Mapping[str, Ranker]) -> str | None:
    """The setting that has the embedder loaded at start-up, or None: it loads when a request first needs it.

    Loaded at start-up where the operator says so (`embedder = preload`), where every ranking needs it (the default
    ranker), where every request of a model may (a default pipeline), and for shadow evaluation, which compares
    answers with it only once it is loaded and never loads it itself."""
    if settings.embedder == "preload":
        return "embedder"
    default = rankers.get(settings.default_ranker)
    if default is not None and default.needs_embedder:
        return "default_ranker"
    ranker_set = state.services.ranker_set()
    for pipeline in state.default_pipelines.values():
        if not isinstance(pipeline, Auto) and pipeline.waits_for_embedder(ranker_set):
            return "default_strategies"
    if settings.shadow_rate > 0:
        return "shadow_rate"
    return None


def _proxy_error(request: Request[Any, Any, Any], error: ProxyError) -> Response[Any]:
    if isinstance(error, UpstreamStatusError):
        headers = dict(error.headers)
        media_type = headers.pop("content-type", MediaType.JSON)
        return Response(error.content, status_code=error.upstream_status, media_type=media_type, headers=headers)
    proxy_state(request).request_log.record_of(request.scope).error = error.code
    return Response(error.envelope(), status_code=error.status, headers=error.headers)


def _http_exception(request: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
    if isinstance(error, NotFoundException):
        mapped: ProxyError = NotFound(f"no route for {request.method} {request.url.path}")
    elif isinstance(error, MethodNotAllowedException):
        # The router names the methods the path serves (RFC 9110 15.5.6: a 405 carries Allow).
        allowed = {name: value for name, value in (error.headers or {}).items() if name.lower() == "allow"}
        mapped = MethodNotAllowed(f"method {request.method} not allowed on {request.url.path}", headers=allowed)
    elif error.status_code == 413:
        mapped = PayloadTooLarge("request body too large")
    else:
        mapped = InvalidRequest(str(error.detail))
        mapped.status = error.status_code  # type: ignore[misc]
    return _proxy_error(request, mapped)


def _unexpected(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    log.exception("unhandled error", path=request.url.path)
    return _proxy_error(request, ProxyError("internal error in the proxy; see its logs"))


def unproven_fallback_step(registry: StrategyRegistry, settings: Settings) -> tuple[Transform, Params] | None:
    """The step `unproven_fallback` names, resolved with the configured caps; None for `none`. `contextlift detect`
    previews with it too.

    Raises:
        SettingsError: `unproven_fallback` names no step that only adds beside an unmovable context.
    """
    try:
        return registry.step_that_adds(settings.unproven_fallback, settings.strategy_caps)
    except StrategySelectionError as error:
        raise SettingsError(f"unproven_fallback: {error}") from None
