"""What the app holds for its whole life: settings, the strategy registry, the upstream pool, the embedder's load."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from litestar import Request

from contextlift.proxy.edge.admission import Admission
from contextlift.proxy.errors import InvalidStrategy, NotReady
from contextlift.proxy.observability.metrics import ProxyMetrics
from contextlift.proxy.policy import AUTO, Auto, Policy, PolicyError, load_policy
from contextlift.proxy.request_log import RequestLog, RequestRecord
from contextlift.proxy.settings import Settings
from contextlift.proxy.upstream.client import UpstreamClient
from contextlift.strategies import (
    SHAPES,
    DeclaredFormat,
    DocumentLimits,
    Pipeline,
    Services,
    StrategyRegistry,
    StrategySelectionError,
    Tokenizer,
    parse_selection,
)
from contextlift.strategies.selection import NotAStrategyName

if TYPE_CHECKING:  # imported by the app only where shadow_rate > 0
    from contextlift.proxy.shadow.evaluation import Shadow

STRATEGY_HEADER = "X-Context-Strategy"
log = structlog.get_logger("contextlift.policy")
embedder_log = structlog.get_logger("contextlift")
STRATEGY_FIELD = "context_strategy"


@dataclass(slots=True, eq=False)
class EmbedderLoad:
    """The in-process embedder's one load: started by the first request (or policy rule) that needs it, or at
    start-up where a setting does (`preloaded_for`), run in a worker thread so that the event loop never waits on it,
    and awaited by every request that needs it meanwhile: concurrent first requests share the one load.

    A failed load is final: each request that needs the embedder is answered 503 (`not_ready`) with the error,
    every other request is served. Where it was loaded at start-up, /startupz reports the failure too.
    """

    load: Callable[[], None] | None = None
    """Loads the embedder, blocking; None: nothing to load (no embedder, or one handed in ready)."""
    preloaded_for: str | None = None
    """The setting that has it loaded at start-up (/startupz then waits for it); None: loaded when first needed."""
    wait_seconds: float = 180.0
    """How long a request waits for the load before it is answered 503 with Retry-After (the load goes on)."""
    on_loaded: Callable[[float], None] | None = None
    """Told the load's seconds once it succeeded (the app freezes the model's objects out of the collector's way)."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.load is None:
            self.ready.set()

    @property
    def state(self) -> str:
        """`off`, `on-demand` (not asked for yet), `loading`, `loaded` or `failed`: what the logs say."""
        if self.error is not None:
            return "failed"
        if self.load is None:
            return "off"
        if self.ready.is_set():
            return "loaded"
        return "loading" if self._task is not None else "on-demand"

    def start(self) -> None:
        """Start the load unless it is started or over. Call it on the event loop."""
        if self._task is None and self.load is not None and not self.ready.is_set():
            self._task = asyncio.get_running_loop().create_task(self._loading(self.load))

    async def wait(self) -> None:
        """Start the load if nothing has, and wait for it, at most `wait_seconds`. Cancelling the caller (a
        client that left) leaves the load running for the others.

        Raises:
            NotReady: the load failed, or is still running after `wait_seconds`.
        """
        if self.ready.is_set():
            return
        self.start()
        assert self._task is not None
        try:
            async with asyncio.timeout(self.wait_seconds):
                await asyncio.shield(self._task)
        except TimeoutError:
            raise NotReady("the embedder is still loading", headers={"retry-after": "5"}) from None
        if self.error is not None:
            raise NotReady(self.error)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loading(self, load: Callable[[], None]) -> None:
        started = time.perf_counter()
        embedder_log.info("embedder loading", preloaded_for=self.preloaded_for)
        try:
            await anyio.to_thread.run_sync(load)
        except Exception as error:  # the proxy still serves the requests that need no embedder
            self.error = f"embedder failed to load: {type(error).__name__}: {error}"
            embedder_log.error("embedder failed to load", error=f"{type(error).__name__}: {error}")
            return
        self.ready.set()
        if self.on_loaded is not None:
            self.on_loaded(time.perf_counter() - started)


@dataclass(slots=True)
class ProxyState:
    settings: Settings
    registry: StrategyRegistry
    upstream: UpstreamClient
    default_pipelines: dict[str, Pipeline | Auto] = field(default_factory=dict)
    """`settings.default_strategies`, resolved once at start-up so a bad one fails there, not per request."""
    services: Services = field(default_factory=Services)
    embedder: EmbedderLoad = field(default_factory=EmbedderLoad)
    """The in-process embedder's load; a request whose strategies need the embedder waits for it."""
    admission: Admission | None = None
    metrics: ProxyMetrics = field(default_factory=ProxyMetrics)
    request_log: RequestLog = field(init=False)
    """Every request's record; each completed one goes to `metrics`, and a sampled one to `shadow`."""
    shadow: Shadow | None = None
    """Shadow evaluation, when `shadow_rate` > 0."""
    policy: Policy = field(default_factory=lambda: Policy("none", ()))
    """What `auto` applies; replaced whole by `reload_policy`, never edited."""
    shutting_down: bool = False
    drain_deadline: float | None = None
    """Monotonic time after which open streams end with an error event rather than be cut off."""
    _drained: asyncio.Future[None] | None = None
    _drain_waiters: set[asyncio.Future[None]] = field(default_factory=set, init=False, repr=False)
    declared_formats: tuple[DeclaredFormat, ...] = field(init=False)
    """The operator's declared prompt templates, built once from the settings."""
    document_limits: DocumentLimits = field(init=False)

    def __post_init__(self) -> None:
        self.request_log = RequestLog(on_complete=self._completed)
        self.declared_formats = tuple(f.declared() for f in self.settings.document_formats)
        self.document_limits = DocumentLimits(
            self.settings.max_documents, self.settings.max_document_bytes, self.settings.max_scanned_chars
        )

    @property
    def startup_error(self) -> str | None:
        """What failed of what start-up loads: the embedder, where a setting has it loaded at start-up."""
        return self.embedder.error if self.embedder.preloaded_for else None

    def _completed(self, record: RequestRecord, seconds: float) -> None:
        self.metrics.observe_request(record, seconds)
        if record.shadow is not None and self.shadow is not None:
            # A response that ended in an error (an error event in a 200 stream included) is no answer to compare.
            status = record.status if record.error is None else None
            tokens = record.ledger.usage.get("total_tokens", 0)
            self.shadow.submit(record.shadow, status, record.ledger.calls, tokens, seconds)

    def begin_shutdown(self, grace: float) -> None:
        """Refuse new work from now on; streams still open at the end of `grace` get an error event, and
        requests still waiting a 503. Call it on the event loop's thread (signal handlers run there)."""
        self.shutting_down = True
        # Half a second before the server's own cut-off, so the error event still reaches the client.
        self.drain_deadline = time.monotonic() + max(0.0, grace - 0.5)
        if self._drained is not None:
            self._schedule_drain(self._drained)

    def draining_expired(self) -> bool:
        return self.drain_deadline is not None and time.monotonic() >= self.drain_deadline

    def drain_started(self) -> asyncio.Future[None]:
        """A future done once the drain deadline has passed: what every waiting request and open stream
        waits on beside its own work, so none outlives the grace period without an answer."""
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
            self._drained.add_done_callback(self._wake_drain_waiters)
            if self.drain_deadline is not None:
                self._schedule_drain(self._drained)
        return self._drained

    def drain_signal(self) -> DrainSignal:
        """A future of the caller's own (what `with` gives), done once the drain deadline has passed, to wait on
        beside its work.

        Its own rather than `drain_started()`'s shared one: `asyncio.wait` takes its callback off every future
        it waited on, a scan of that future's callbacks, so a future shared by every request and stream in
        flight made each wait cost O(in flight)."""
        return DrainSignal(self.drain_started(), self._drain_waiters)

    def _wake_drain_waiters(self, _: asyncio.Future[None]) -> None:
        for waiter in self._drain_waiters:
            _finish(waiter)

    def _schedule_drain(self, drained: asyncio.Future[None]) -> None:
        assert self.drain_deadline is not None
        loop = drained.get_loop()
        delay = max(0.0, self.drain_deadline - time.monotonic())
        loop.call_soon_threadsafe(loop.call_later, delay, _finish, drained)

    def check_shape(self, shape: str | None, param: str) -> None:
        """Raises InvalidStrategy when `shape` names neither a built-in shape nor a declared format."""
        names = [f.name for f in self.declared_formats]
        if shape is not None and shape not in SHAPES and shape not in names:
            raise InvalidStrategy(
                f"unknown format {shape!r}; known formats: {', '.join([*SHAPES, *names])}", param=param
            )

    @property
    def tokenizer(self) -> Tokenizer:
        return self.services.tokenizer

    def select(self, text: str, param: str) -> Pipeline | Auto:
        """`resolve`, or `Auto` for the selection `auto` (alone: the policy's choice is a whole pipeline)."""
        return Auto(param) if text.strip().lower() == AUTO else self.resolve(text, param)

    def reload_policy(self) -> bool:
        """Read the policy file again; a file that does not validate is refused, logged, and the policy in force
        stays. Returns whether the policy was replaced. Blocking: the watcher runs it in a worker thread."""
        try:
            self.policy = load_policy(self.settings.policy_file, self.resolve, self.settings.policy_max_bytes)
        except Exception as error:  # PolicyError, or whatever else a hostile file finds: refused all the same
            reason = str(error) if isinstance(error, PolicyError) else f"{type(error).__name__}: {error}"
            log.error("policy refused; the one in force stays", error=reason[:500])
            self.metrics.policy_reloads.labels("refused").inc()
            return False
        log.info("policy loaded", source=self.policy.source, rules=len(self.policy.rules))
        self.metrics.policy_reloads.labels("loaded").inc()
        return True

    def resolve(self, text: str, param: str) -> Pipeline:
        """The pipeline a selection asks for.

        Raises:
            InvalidStrategy: the selection is malformed or not allowed; `param` names where it came from.
        """
        try:
            pipeline = self.registry.resolve(parse_selection(text), self.settings.strategy_caps)
        except NotAStrategyName as error:  # said as an unknown name is: with the names there are
            known = ", ".join(self.registry.names())
            raise InvalidStrategy(f"{error}; known strategies: {known}", param=param) from None
        except StrategySelectionError as error:
            raise InvalidStrategy(str(error), param=param) from None
        self.check_shape(pipeline.shape, param)
        calls = pipeline.max_upstream_calls()
        # Retries are drawn from one budget per request (retry_budget), each call retried at most max_retries.
        worst = calls + min(self.settings.retry_budget, calls * self.settings.max_retries)
        if worst > self.settings.max_upstream_calls:
            raise InvalidStrategy(
                f"'{pipeline.label}' could make {worst} upstream calls with retries, over the limit of "
                f"{self.settings.max_upstream_calls}",
                param=param,
            )
        return pipeline

    def select_pipeline(self, headers: Mapping[str, str], body: dict[str, Any]) -> Pipeline | Auto:
        """The pipeline for a request: its header, else its body field, else the model's default; `Auto` where
        that says `auto` (the policy chooses once the documents are found).

        The body field is removed from `body`, so it never reaches the upstream.
        """
        from_field = body.pop(STRATEGY_FIELD, None)
        from_header = headers.get(STRATEGY_HEADER.lower())
        if from_header is not None:
            return self.select(from_header, STRATEGY_HEADER)
        if from_field is not None:
            if not isinstance(from_field, str):
                raise InvalidStrategy(f"'{STRATEGY_FIELD}' must be a string", param=STRATEGY_FIELD)
            return self.select(from_field, STRATEGY_FIELD)
        model = body.get("model")
        default = self.default_pipelines.get(model) if isinstance(model, str) else None
        return default or self.default_pipelines.get("*") or Pipeline()


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def proxy_state(request: Request[Any, Any, Any]) -> ProxyState:
    state: ProxyState = request.app.state["proxy"]
    return state


class DrainSignal:
    """`ProxyState.drain_signal()`'s context: the caller's future, registered with the waiters the drain wakes
    while the block runs. A class, where a generator context manager cost a generator and its wrapper on every
    request's way."""

    __slots__ = ("_drained", "_own", "_waiters")

    def __init__(self, drained: asyncio.Future[None], waiters: set[asyncio.Future[None]]) -> None:
        self._drained = drained
        self._waiters = waiters
        self._own: asyncio.Future[None] | None = None

    def __enter__(self) -> asyncio.Future[None]:
        own: asyncio.Future[None] = self._drained.get_loop().create_future()
        if self._drained.done():
            own.set_result(None)
        self._waiters.add(own)
        self._own = own
        return own

    def __exit__(self, *_: object) -> None:
        if self._own is not None:
            self._waiters.discard(self._own)
