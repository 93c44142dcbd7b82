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
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.types import (
    ASGIApp,
    HTTPScope,
    LifeSpanReceive,
    LifeSpanScope,
    LifeSpanSend,
    Message,
    Receive,
    Scope,
    Send,
)
from litestar.utils import get_enum_string_value

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
from contextlift.proxy.routes import CHAT_ROUTE_NAME, ROUTES
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
        transport=transport
        or build_transport(
            settings.upstream_transport, settings.upstream_max_connections, plain_calls=settings.upstream_plain_calls
        ),
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
        max_header_count=settings.max_header_count,
        max_header_bytes=settings.max_header_bytes,
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
        transport=transport
        or build_transport(
            settings.upstream_transport, settings.shadow_max_in_flight, plain_calls=settings.upstream_plain_calls
        ),
    )
    sink = ShadowSink(sink_path(settings.shadow_sink), settings.shadow_sink_max_bytes) if settings.shadow_sink else None
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
        budget=ShadowBudget(settings.shadow_calls_per_minute, settings.shadow_tokens_per_minute),
        workers=settings.shadow_max_in_flight,
        queue_size=settings.shadow_queue,
        sink=sink,
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


class ProxyApp(Litestar):
    """The Litestar app, given one canonical path per request before it routes: a path that is not plain
    (see `contextlift.proxy.edge.paths`) gets a 400 envelope here and never reaches a route or the upstream. Every
    response it routes carries the request record's headers (`RequestLog.stamped`).

    `POST /v1/chat/completions`, the request every client sends, goes to its handler directly, under the same
    middleware and exception handlers litestar composes for a route: litestar's router, signature model and
    response handler cost ~75 us of a pass-through request's proxy CPU when its caches are cold (a peer ran on the
    core between two requests; `scripts/bench.py --cpu`), 5% of it. litestar's composition of a route's stack
    (`build_route_middleware_stack`) is private, so the stack is built here as litestar builds it: exceptions
    answered around the handler (inside the middleware, so their send wrappers see the answer) and around the
    middleware. Every other method and path is routed by litestar (OPTIONS, 405 and the OpenAPI schema included)."""

    CHAT_PATH = "/v1/chat/completions"

    def __init__(self, *, request_log: RequestLog, **options: Any) -> None:
        super().__init__(**options)
        self.request_log = request_log
        index = self.get_handler_index_by_name(CHAT_ROUTE_NAME)
        assert index is not None
        handler = index["handler"]
        assert isinstance(handler, HTTPRouteHandler)
        self._chat_handler = handler  # the copy litestar registered, with the app's settings resolved
        # Nothing of the route's own (headers, cookies, a background task, an after-request hook, a DTO) that
        # litestar's response handler would add to a plain answer: `_plain_answer` then writes what it writes.
        self._plain_answers = not (
            handler.resolve_response_headers()
            or handler.resolve_response_cookies()
            or handler.background
            or any(layer.after_request for layer in handler.ownership_layers)
            or handler.resolve_return_dto()
        )
        stack: ASGIApp = self._answering_exceptions(self._chat)
        for middleware in reversed(options.get("middleware") or []):
            stack = middleware(stack)
        self._chat_stack = self._answering_exceptions(stack)

    async def __call__(
        self, scope: Scope | LifeSpanScope, receive: Receive | LifeSpanReceive, send: Send | LifeSpanSend
    ) -> None:
        if scope["type"] == ScopeType.HTTP:
            http = cast(HTTPScope, scope)
            try:
                # Some servers and test clients leave the query on raw_path; the query is query_string's.
                raw = (http.get("raw_path") or http["path"].encode()).split(b"?", 1)[0]
                http["path"], http["raw_path"] = canonical_and_encoded(raw)
            except InvalidPath as error:
                log.warning("request path refused", reason=error.message)
                await send_error(cast(Send, send), error)
                return
            send = self.request_log.stamped(http, cast(Send, send))
            if http["path"] == self.CHAT_PATH and http["method"] == "POST":
                # What litestar and its router set in the scope for a route.
                http["app"] = http["litestar_app"] = self
                http.setdefault("state", {})
                http.setdefault("path_params", {})
                http["route_handler"] = self._chat_handler
                http["path_template"] = self.CHAT_PATH
                await self._chat_stack(http, cast(Receive, receive), send)
                return
        await super().__call__(scope, receive, send)

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        request: Request[Any, Any, Any] = Request(scope, receive, send)
        answer = await self._chat_handler.fn(request)
        handler = self._chat_handler
        plain = _plain_answer(answer, handler.media_type, handler.status_code) if self._plain_answers else None
        if plain is not None:
            status, headers, body = plain
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        # The route's own response handler: its status code, media type and encoders, as litestar's route applies.
        await (await handler.to_response(app=self, data=answer, request=request))(scope, receive, send)

    def _answering_exceptions(self, app: ASGIApp) -> ASGIApp:
        """`app`, an exception it raises before its response starts answered by the app's exception handler for
        its class, as litestar's exception middleware answers (the proxy's handlers are keyed by class only);
        after the response started it goes on up, and the server ends the connection."""

        async def answering(scope: Scope, receive: Receive, send: Send) -> None:
            started = False

            async def tracked(message: Message) -> None:
                nonlocal started
                started = started or message["type"] == "http.response.start"
                await send(message)

            try:
                await app(scope, receive, tracked)
            except Exception as error:
                if started:
                    raise
                handler = next(self.exception_handlers[c] for c in type(error).__mro__ if c in self.exception_handlers)
                request: Request[Any, Any, Any] = Request(scope, receive, send)
                response = handler(request, error)
                await response.to_asgi_response(app=None, request=request)(scope, receive, send)

        return answering


def _plain_answer(
    answer: Any, media_type: MediaType | str, status_code: int
) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
    """The status, head and body litestar sends for `answer` from a route answering `media_type` with
    `status_code`, where `answer` is a plain `Response` of bytes (no cookie, no background task, a status with a
    body); None for any other. litestar's way there (`to_response`, `to_asgi_response`, `ASGIResponse`) was 2 to 3%
    of a pass-through request's CPU in the proxy (its CPU per request alternating with another proxy on the core);
    tests/proxy/test_plain_answers.py holds the two to the same bytes."""
    if not (
        type(answer) is Response
        and isinstance(answer.content, bytes)
        and not answer.cookies
        and answer.background is None
        and answer.encoding == "utf-8"
    ):
        return None
    status = answer.status_code or status_code
    if status < 200 or status in (204, 304):
        return None
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers.items()]
    named = {name for name, _ in headers}
    if b"content-type" not in named:
        media = get_enum_string_value(answer.media_type or media_type or MediaType.JSON)
        headers.append((b"content-type", (f"{media}; charset=utf-8" if media.startswith("text/") else media).encode()))
    if b"content-length" not in named:
        headers.append((b"content-length", str(len(answer.content)).encode()))
    return status, headers, answer.content


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
        mapped = MethodNotAllowed(f"method {request.method} not allowed on {request.url.path}")
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
