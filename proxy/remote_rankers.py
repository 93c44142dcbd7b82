"""Rankers the operator runs as services, named in `CONTEXTLIFT_RANKERS` and used as `ranker=NAME`:

- `rerank`: a rerank API. `api = "cohere"` (the default) speaks the shape Cohere, Jina, Voyage, vLLM and Infinity
  share (`{model, query, documents}` -> `{"results": [{index, relevance_score}]}`); `api = "tei"` speaks Hugging
  Face TEI's (`{query, texts}` -> `[{index, score}]`). Either answer shape is read back.
- `embeddings`: an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, TEI, Ollama, llama.cpp's server):
  the question and the documents embedded in batches, cached by model and text as MiniLM's vectors are, scored by
  cosine.
- `fusion`: reciprocal-rank fusion of named rankers (`members`).

Each service ranker has its own connection pool, timeout (over the whole ranking, the wait for a free slot
included), concurrency limit, response size limit and circuit breaker (the `circuitbreaker` library). It sends
only its own key: nothing of the client's request but the question and the documents' text leaves for it. Any
failure is a `RankerFailure` with a short reason; the step that ranks keeps the client's order.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

import anyio
import httpx
import numpy as np
import numpy.typing as npt
from circuitbreaker import CircuitBreaker, CircuitBreakerError
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from contextlift.strategies.rankers import Ranker, RankerFailure, RankerSet
from contextlift.strategies.rankers.fusion import Fusion
from contextlift.strategies.rankers.minilm import embedding_text
from contextlift.strategies.request import Document

RANKER_NAME = r"^[a-z0-9][a-z0-9_-]{0,39}$"
OFF_LOOP_JSON = 64 * 1024
"""An answer larger than this is parsed in a worker thread: parsing is CPU work in proportion to its size."""
ACCEPT_ENCODING = "gzip, deflate"
"""What the proxy inflates itself (zlib); brotli or zstd, which httpx asks for when their packages are installed,
would need their own bounded decoders."""
MAX_ENCODINGS = 1
"""Content encodings applied one over the other that an answer may carry: a service compresses once, and each
layer more multiplies what a few bytes inflate to (`gzip, gzip`: 980 bytes, 512 MiB)."""


class RankerSetting(BaseModel):
    """One ranker of `CONTEXTLIFT_RANKERS`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: Literal["rerank", "embeddings", "fusion"]
    url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="The endpoint itself (e.g. http://tei:8080/rerank, https://api.openai.com/v1/embeddings).",
    )
    api: Literal["cohere", "tei"] = Field("cohere", description="For `rerank`: the request shape to send.")
    model: str | None = Field(None, max_length=200, description="Sent as `model` where the API takes one.")
    api_key: SecretStr | None = Field(None, description="The service's own key, sent as a bearer token.")
    timeout: float = Field(
        2.0,
        gt=0,
        le=60,
        description="Seconds for one ranking, the wait for a free slot included; past it the client's order stays. "
        "2 s: a GPU reranker answers 20 passages in tens of milliseconds, so this only ends a stuck call.",
    )
    max_concurrency: int = Field(16, ge=1, le=1024, description="Rankings in flight to the service at once.")
    failure_threshold: int = Field(
        5, ge=1, le=1000, description="Consecutive failures that open the circuit: rankings then fall back at once."
    )
    recovery_seconds: float = Field(30.0, gt=0, le=3600, description="How long an open circuit stays open.")
    max_response_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="Largest answer read. 1,000 documents' vectors of 1,536 floats as JSON are ~20 MB: raise it "
        "for embeddings of many long-vector documents.",
    )
    max_document_chars: int = Field(
        8192,
        ge=64,
        le=1_000_000,
        description="Characters of each document (and of the question) sent: rankers read a bounded prefix.",
    )
    batch: int = Field(64, ge=1, le=2048, description="For `embeddings`: texts per request.")
    cache_size: int = Field(20_000, ge=0, description="For `embeddings`: vectors kept (LRU by model and text).")
    cache_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="For `embeddings`: bytes of vectors kept, whichever of this and cache_size is reached first. "
        "20,000 vectors of 1,536 dimensions are 123 MB as float32; the count alone would let a service answering "
        "250,000-dimension vectors fill 20 GB.",
    )
    members: tuple[str, ...] = Field((), description="For `fusion`: the rankers it fuses, two or more.")

    @model_validator(mode="after")
    def _complete(self) -> RankerSetting:
        if self.kind == "fusion":
            if len(self.members) < 2:
                raise ValueError("a fusion ranker names two or more members")
        elif self.url is None:
            raise ValueError(f"a {self.kind} ranker needs its url")
        return self


def build_rankers(
    settings: Mapping[str, RankerSetting], built_in: Mapping[str, Ranker], default: str
) -> dict[str, Ranker]:
    """The built-in rankers and the operator's, by name.

    Raises:
        ValueError: a name that is malformed or taken by a built-in, a fusion member or default that is no ranker.
    """
    rankers: dict[str, Ranker] = dict(built_in)
    for name, setting in settings.items():
        if not re.match(RANKER_NAME, name):
            raise ValueError(f"ranker name {name!r}: lowercase letters, digits, - and _, at most 40")
        if name in built_in:
            raise ValueError(f"ranker name {name!r} is a built-in ranker's")
        rankers[name] = Fusion(setting.members, name=name) if setting.kind == "fusion" else ServiceRanker(name, setting)
    for name, setting in settings.items():
        for member in setting.members:
            if member not in rankers or member == name:
                raise ValueError(f"ranker {name!r}: member {member!r} is not another ranker")
    if default not in rankers:
        raise ValueError(f"default_ranker {default!r} is not a ranker; rankers: {', '.join(sorted(rankers))}")
    return rankers


class _Breaker(CircuitBreaker):  # type: ignore[misc]  # the library is untyped
    """The library's breaker, except that a call ended by cancellation (the client left; the request's own work
    was cancelled) counts neither as a failure nor as a success. The library counts every ending that is not a
    failure as a success, which closes an open circuit and resets the failure count: a service failing every
    call would never be cut off while its rankings were cancelled first."""

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc_type is not None and not issubclass(exc_type, Exception):
            return False
        return bool(super().__exit__(exc_type, exc, tb))


class ServiceRanker(Ranker):
    """A `rerank` or `embeddings` service."""

    def __init__(self, name: str, setting: RankerSetting) -> None:
        self.name = name
        self.setting = setting
        self.bounded = setting.kind == "embeddings"  # cosine similarity; a reranker's scores have no fixed scale
        self._slots = asyncio.Semaphore(setting.max_concurrency)
        self._breaker = _Breaker(
            failure_threshold=setting.failure_threshold,
            recovery_timeout=setting.recovery_seconds,
            # Every error, not only RankerFailure: one the reading code did not foresee is still the service's
            # answer failing, never a success that closes the circuit.
            expected_exception=Exception,
            name=name,
        )
        # The library's decorator is what checks the state before a call (its `call_async` only counts outcomes).
        self._guarded = self._breaker.decorate(self._scores)
        self._client: httpx.AsyncClient | None = None
        # float32 rows: 20,000 vectors of 1,536 dimensions are 123 MB, against ~1 GB as lists of Python floats.
        self._vectors: OrderedDict[bytes, npt.NDArray[np.float32]] = OrderedDict()
        self._cached_bytes = 0

    def client(self) -> httpx.AsyncClient:
        # Made on first use, inside the running loop; its own pool, sized to the concurrency limit. Redirects
        # are not followed: an answer from elsewhere is no answer, and the key must not travel with it.
        if self._client is None:
            limit = self.setting.max_concurrency
            self._client = httpx.AsyncClient(
                timeout=self.setting.timeout,
                limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        try:
            return await self._guarded(question, documents)  # type: ignore[no-any-return]
        except CircuitBreakerError:
            raise RankerFailure("circuit-open") from None

    async def _scores(self, question: str, documents: Sequence[Document]) -> list[float]:
        cut = self.setting.max_document_chars
        texts = [embedding_text(d)[:cut] for d in documents]
        try:
            with anyio.fail_after(self.setting.timeout):
                async with self._slots:
                    if self.setting.kind == "rerank":
                        return await self._rerank(question[:cut], texts)
                    return await self._embed_and_score(question[:cut], texts)
        except TimeoutError:
            raise RankerFailure("timeout") from None

    async def _rerank(self, question: str, texts: list[str]) -> list[float]:
        body: dict[str, Any]
        if self.setting.api == "tei":
            body = {"query": question, "texts": texts, "truncate": True}
        else:
            body = {"query": question, "documents": texts, "top_n": len(texts)}
            if self.setting.model:
                body["model"] = self.setting.model
        return read_rerank(await self._post(body), len(texts))

    async def _embed_and_score(self, question: str, texts: list[str]) -> list[float]:
        wanted = [question, *texts]
        keys = [self._key(t) for t in wanted]
        by_key = dict(zip(keys, wanted, strict=True))
        # This ranking's own copy: a concurrent ranking may evict from the shared cache while this one awaits.
        found = {k: self._vectors[k] for k in keys if k in self._vectors}
        fetched = await self._embed([k for k in by_key if k not in found], by_key, None)
        lengths = {len(v) for v in fetched.values()} or {len(v) for v in found.values()}
        if len(lengths) == 1:
            stale = [k for k, v in found.items() if len(v) not in lengths]
        else:  # all were cached, in lengths of two models: none can be trusted
            stale, lengths = list(found), set()
        if stale:
            # The service's vectors changed length (a new model behind the same URL): what was cached under the
            # old one is dropped and asked for again, rather than failing every ranking that touches it.
            for key in stale:
                found.pop(key)
                self._forget(key)
            fetched.update(await self._embed(stale, by_key, next(iter(lengths), None)))
        self._remember(fetched, touched=found)
        vectors = {**found, **fetched}
        matrix = np.asarray([vectors[k] for k in keys], dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        unit = matrix / norms[:, None]
        return [float(s) for s in unit[1:] @ unit[0]]

    async def _embed(
        self, keys: list[bytes], by_key: Mapping[bytes, str], length: int | None
    ) -> dict[bytes, npt.NDArray[np.float32]]:
        """The vectors of `keys`' texts, in batches, checked before anything is cached: finite as float32 and all
        of one length (`length`, when given).

        Raises:
            RankerFailure: the service failed, or answered vectors that are not one length of finite numbers.
        """
        vectors: dict[bytes, npt.NDArray[np.float32]] = {}
        for start in range(0, len(keys), self.setting.batch):
            batch = keys[start : start + self.setting.batch]
            body: dict[str, Any] = {"input": [by_key[k] for k in batch]}
            if self.setting.model:
                body["model"] = self.setting.model
            rows = read_embeddings(await self._post(body), len(batch))
            with np.errstate(over="ignore"):  # a value past float32's range becomes inf, refused just below
                vectors.update((k, np.asarray(v, dtype=np.float32)) for k, v in zip(batch, rows, strict=True))
        lengths = {len(v) for v in vectors.values()} | ({length} if length is not None else set())
        if len(lengths) > 1:
            raise RankerFailure("bad-answer", "vectors of different lengths")
        if not all(np.isfinite(v).all() for v in vectors.values()):
            raise RankerFailure("bad-answer", "a vector past float32's range")
        return vectors

    def _remember(
        self, fetched: Mapping[bytes, npt.NDArray[np.float32]], touched: Mapping[bytes, npt.NDArray[np.float32]]
    ) -> None:
        """Cache the new vectors and mark the used ones recent; evict the least recent past either bound."""
        for key in touched:
            if key in self._vectors:
                self._vectors.move_to_end(key)
        for key, vector in fetched.items():
            if vector.nbytes > self.setting.cache_bytes:
                continue
            self._forget(key)
            self._vectors[key] = vector
            self._cached_bytes += vector.nbytes
        while len(self._vectors) > self.setting.cache_size or self._cached_bytes > self.setting.cache_bytes:
            _, evicted = self._vectors.popitem(last=False)
            self._cached_bytes -= evicted.nbytes

    def _forget(self, key: bytes) -> None:
        vector = self._vectors.pop(key, None)
        if vector is not None:
            self._cached_bytes -= vector.nbytes

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(f"{self.setting.model}\0{text}".encode("utf-8", "surrogatepass")).digest()

    async def _post(self, body: dict[str, Any]) -> Any:
        """The service's JSON answer, read within `max_response_bytes`.

        Raises:
            RankerFailure: unreachable, a status other than 2xx, an oversized or malformed answer.
        """
        assert self.setting.url is not None  # checked by RankerSetting
        headers = {"content-type": "application/json", "accept": "application/json", "accept-encoding": ACCEPT_ENCODING}
        if self.setting.api_key is not None:
            headers["authorization"] = f"Bearer {self.setting.api_key.get_secret_value()}"
        limit = self.setting.max_response_bytes
        try:
            async with self.client().stream("POST", self.setting.url, json=body, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    raise RankerFailure(f"http-{response.status_code // 100}xx", str(response.status_code))
                encodings = _encodings(response.headers)
                # The bytes as sent, not httpx's decoded ones: httpx inflates each network chunk whole, with no
                # bound, on the event loop, so 980 bytes of `gzip, gzip` became 512 MiB before any size check.
                raw = bytearray()
                async for chunk in response.aiter_raw():
                    raw += chunk
                    if len(raw) > limit:
                        raise RankerFailure("oversized")
        except httpx.TimeoutException:
            raise RankerFailure("timeout") from None
        except httpx.HTTPError as error:
            raise RankerFailure("unreachable", type(error).__name__) from None
        if encodings or len(raw) > OFF_LOOP_JSON:
            return await anyio.to_thread.run_sync(_answer, bytes(raw), encodings, limit)
        return _answer(bytes(raw), encodings, limit)


def _encodings(headers: httpx.Headers) -> list[str]:
    """The answer's content encodings, in the order they were applied, each one this module inflates.

    Raises:
        RankerFailure: `bad-answer`, for an encoding not asked for or more layers than MAX_ENCODINGS.
    """
    found = [e for e in headers.get_list("content-encoding", split_commas=True) if e.lower() not in ("", "identity")]
    if len(found) > MAX_ENCODINGS:
        raise RankerFailure("bad-answer", f"{len(found)} content encodings stacked")
    if any(e.lower() not in ("gzip", "x-gzip", "deflate") for e in found):
        raise RankerFailure("bad-answer", "a content encoding not asked for")
    return [e.lower() for e in found]


def _answer(raw: bytes, encodings: list[str], limit: int) -> Any:
    """The JSON of an answer, each encoding undone within `limit` bytes. CPU work: a worker thread runs it.

    Raises:
        RankerFailure: `oversized` past `limit` once inflated, `bad-answer` for a stream or JSON that is broken.
    """
    for _ in reversed(encodings):
        raw = _inflated(raw, limit)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise RankerFailure("bad-answer", "not JSON") from None


def _inflated(data: bytes, limit: int) -> bytes:
    """`data` inflated (gzip, or deflate with or without its zlib header), never past `limit` bytes.

    httpx's decoders take no bound, hence zlib directly: `max_length` stops the output at `limit` + 1 bytes,
    however much more the input would inflate to.

    Raises:
        RankerFailure: `oversized` past `limit`; `bad-answer` for a stream zlib cannot read.
    """
    for wbits in (32 + zlib.MAX_WBITS, -zlib.MAX_WBITS):  # gzip or zlib (detected from the header); raw deflate
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit:
            raise RankerFailure("oversized")
        return out
    raise RankerFailure("bad-answer", "a compressed answer zlib cannot read")


def _finite(value: Any) -> TypeGuard[int | float]:
    """A JSON number a float can hold: not a bool, not NaN or infinite, and no integer past a float's range
    (`10**400` is valid JSON, and `float()` of it raises OverflowError rather than answering inf)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _finite_numbers(values: list[Any]) -> bool:
    return all(_finite(x) for x in values)


def _mean_pooled(rows: list[Any]) -> list[float] | None:
    """One vector from per-token vectors, their mean. llama.cpp's server answers so for a model without a pooling
    layer (a chat model served with `--embedding`): one vector per token, where OpenAI's API gives one per input.

    None when the rows are not equally long lists of finite numbers."""
    if not rows or not all(isinstance(r, list) and r and _finite_numbers(r) for r in rows):
        return None
    if len({len(r) for r in rows}) != 1:
        return None
    return [float(x) for x in np.asarray(rows, dtype=np.float64).mean(axis=0)]


def read_rerank(answer: Any, count: int) -> list[float]:
    """Scores by document index from either rerank answer shape; every document scored once, finite.

    Raises:
        RankerFailure: `bad-answer`, for anything else.
    """
    rows = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(rows, list) or len(rows) != count:
        raise RankerFailure("bad-answer", "wrong number of results")
    scores: list[float | None] = [None] * count
    for row in rows:
        if not isinstance(row, dict):
            raise RankerFailure("bad-answer", "a result is not an object")
        index, score = row.get("index"), row.get("relevance_score", row.get("score"))
        if type(index) is not int or not 0 <= index < count or scores[index] is not None:
            raise RankerFailure("bad-answer", "an index out of range or repeated")
        if not _finite(score):
            raise RankerFailure("bad-answer", "a score that is not a finite number")
        scores[index] = float(score)
    return [s for s in scores if s is not None]


def read_embeddings(answer: Any, count: int) -> list[list[float]]:
    """The vectors of an OpenAI embeddings answer, in input order.

    Raises:
        RankerFailure: `bad-answer`, for a wrong count, index, or a vector that is not finite numbers.
    """
    rows = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(rows, list) or len(rows) != count:
        raise RankerFailure("bad-answer", "wrong number of embeddings")
    vectors: list[list[float] | None] = [None] * count
    for position, row in enumerate(rows):
        if not isinstance(row, dict):
            raise RankerFailure("bad-answer", "an embedding is not an object")
        index = row.get("index", position)
        vector = row.get("embedding")
        if type(index) is not int or not 0 <= index < count or vectors[index] is not None:
            raise RankerFailure("bad-answer", "an index out of range or repeated")
        if isinstance(vector, list) and vector and all(isinstance(token, list) for token in vector):
            vector = _mean_pooled(vector)
        if not isinstance(vector, list) or not vector or not _finite_numbers(vector):
            raise RankerFailure("bad-answer", "an embedding is not a list of finite numbers")
        vectors[index] = [float(x) for x in vector]
    return [v for v in vectors if v is not None]
