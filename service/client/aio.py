"""``AsyncClient``: :class:`service.client.Client` for asyncio, method for method.

    from service.client import AsyncClient

    async with AsyncClient("http://127.0.0.1:8000") as c:
        summary = await c.update("adult", examples, batch_size=1000)  # sync or async iterable
        await c.predict("adult", [{"age": 39, "job": "clerk"}], min_version=summary.version)

Every method raises a :class:`~service.client.errors.LearnserveError` subclass on an
error answer; 502/503/504 and broken connections are retried first (see
:mod:`service.client._core` for which calls are retried and how long it waits).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from service.client._core import (
    DEFAULT_URL,
    Call,
    QueryPacker,
    RetryPolicy,
    artifact_source,
    auth_headers,
    batched,
    create_body,
    decode,
    error_of,
    example_dict,
    feedback_examples,
    instances_body,
    json_call,
    may_retry_status,
    may_retry_transport,
    model_path,
    transport_failure,
    update_call,
)
from service.client.decisions import (
    Decision,
    RewardResult,
    choose_call,
    decision_of,
    log_call,
    reward_call,
    reward_result,
)
from service.client.results import (
    ActivateResult,
    CheckpointResult,
    DeployResult,
    ModelInfo,
    ModelState,
    PredictResult,
    RankResult,
    UpdateResult,
    UpdateSummary,
    Versions,
    checkpoint_result,
    deploy_result,
    model_state,
    predict_result,
    rank_result,
    update_result,
    versions_result,
)

OnBatch = Callable[[UpdateResult, list[Any]], None]


class AsyncClient:
    """``url``: the service's base URL; ``token``: an API key (sent as a Bearer token);
    ``retry``: the retry policy; ``transport``: an httpx transport (tests, proxies)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=auth_headers(token), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------ sending
    async def _send(self, call: Call) -> tuple[httpx.Response, int]:
        """The answer (2xx) and how many retries it took; raises the error otherwise."""
        retry = 0
        while True:
            try:
                r = await self._http.request(
                    call.method, call.path, content=call.body, headers=call.request_headers()
                )
            except httpx.TransportError as exc:
                if retry + 1 >= self.retry.attempts or not may_retry_transport(call, exc):
                    raise transport_failure(call, exc, retry + 1) from exc
                await asyncio.sleep(self.retry.delay(retry, None))
                retry += 1
                continue
            if r.status_code < 400:
                return r, retry
            err = error_of(r)
            if retry + 1 >= self.retry.attempts or not may_retry_status(call, err):
                raise err
            await asyncio.sleep(self.retry.delay(retry, err.retry_after))
            retry += 1

    async def _json(self, call: Call) -> Any:
        return decode((await self._send(call))[0])

    # ------------------------------------------------------------ models
    async def create_model(
        self,
        name: str,
        algorithm: str,
        features: dict[str, Any],
        params: dict[str, Any] | None = None,
    ) -> ModelInfo:
        """``PUT /models/{name}``: created, or the same config already there (else 409)."""
        call = json_call("PUT", model_path(name), create_body(algorithm, features, params))
        return ModelInfo.from_json(await self._json(call))

    async def create_model_from_config(self, name: str, config: dict[str, Any]) -> ModelInfo:
        """``PUT /models/{name}`` with the whole config (any model kind, e.g. a records
        model): created, or the same config already there (else 409)."""
        return ModelInfo.from_json(await self._json(json_call("PUT", model_path(name), config)))

    async def describe(self, name: str) -> ModelInfo:
        return ModelInfo.from_json(await self._json(Call("GET", model_path(name))))

    async def list_models(self) -> list[ModelInfo]:
        listed = await self._json(Call("GET", "/models"))
        return [ModelInfo.from_json(m) for m in listed["models"]]

    async def delete_model(self, name: str) -> None:
        await self._send(Call("DELETE", model_path(name)))

    async def export_state(self, name: str) -> ModelState:
        """``GET /models/{name}/state``: an online model's state as an artifact (its
        bytes, version and state digest); retried like every GET."""
        r, _ = await self._send(Call("GET", model_path(name, "/state")))
        return model_state(name, r.content, r.headers)

    async def checkpoint(self, name: str) -> CheckpointResult:
        return checkpoint_result(await self._json(Call("POST", model_path(name, "/checkpoint"))))

    # ------------------------------------------------------------ learning
    async def update_batch(
        self, model: str, examples: list[Any], *, idempotency_key: str | None = None
    ) -> UpdateResult:
        """One ``/update`` request (a fresh Idempotency-Key unless one is given)."""
        return (await self._update(model, "examples", [example_dict(e) for e in examples],
                            idempotency_key))[0]  # fmt: skip

    async def update(
        self,
        model: str,
        examples: Iterable[Any] | AsyncIterable[Any],
        *,
        batch_size: int = 1000,
        on_batch: OnBatch | None = None,
    ) -> UpdateSummary:
        """Learn from a stream of examples (``{"x", "y"}``, ``{"id", "y"}`` or ``(x, y)``)
        sent in batches of ``batch_size``, in order, each with its own Idempotency-Key:
        a retried batch is learned once. ``on_batch(result, batch)`` after each."""
        summary = UpdateSummary(model)
        async for batch in _abatched(examples, batch_size):
            result, retries = await self._update(model, "examples", batch, None)
            summary.add(result, retries)
            if on_batch is not None:
                on_batch(result, batch)
        return summary

    async def update_queries(
        self,
        model: str,
        queries: Iterable[dict[str, Any]] | AsyncIterable[dict[str, Any]],
        *,
        batch_size: int = 100,
        max_items: int | None = None,
        on_batch: OnBatch | None = None,
    ) -> UpdateSummary:
        """Rankers: ``{"qid", "items": [{"x", "relevance"}]}`` queries, in requests of at
        most ``batch_size`` queries and (``max_items``) that many items; a query is never
        split (a bigger one goes alone). Each request has its own Idempotency-Key;
        ``on_batch(result, batch)`` after each."""
        summary = UpdateSummary(model)
        async for batch in _apacked(queries, QueryPacker(batch_size, max_items)):
            result, retries = await self._update(model, "queries", batch, None)
            summary.add(result, retries)
            if on_batch is not None:
                on_batch(result, batch)
        return summary

    async def label(
        self, model: str, pairs: Iterable[tuple[str, Any]], *, batch_size: int = 1000
    ) -> UpdateSummary:
        """Feedback by id: the label ``y`` of each instance predicted earlier with that
        ``id`` (sent as ``{"id": id, "y": y}`` examples)."""
        return await self.update(model, feedback_examples(pairs), batch_size=batch_size)

    async def _update(
        self, model: str, field: str, items: list[Any], key: str | None
    ) -> tuple[UpdateResult, int]:
        call = update_call(model, field, items, key or uuid.uuid4().hex)
        r, retries = await self._send(call)
        return update_result(decode(r), r.headers.get("idempotent-replayed")), retries

    # ------------------------------------------------------------ scoring
    async def predict(
        self,
        model: str,
        instances: Iterable[Any],
        *,
        ids: Iterable[str | None] | None = None,
        min_version: int | None = None,
        k: int | None = None,
    ) -> PredictResult:
        """Score feature rows (a dense list, ``{index: value}`` or ``{name: value}``);
        ``ids`` names each instance for later feedback (:meth:`label`);
        ``min_version``: wait until the answering worker has applied that version."""
        body = instances_body(model, instances, ids, min_version, k)
        return predict_result(
            await self._json(json_call("POST", model_path(model, "/predict"), body))
        )

    async def rank(
        self, model: str, queries: Iterable[dict[str, Any]], *, min_version: int | None = None
    ) -> RankResult:
        """Rankers: ``{"qid", "items": [{"x": ...}]}`` queries, each ranked."""
        body: dict[str, Any] = {"model": model, "queries": list(queries)}
        if min_version is not None:
            body["min_version"] = min_version
        return rank_result(await self._json(json_call("POST", model_path(model, "/predict"), body)))

    # ------------------------------------------------------------ decisions
    async def choose(
        self,
        model: str,
        actions: Iterable[dict[str, Any]],
        *,
        context: dict[str, Any] | None = None,
        excluded: Iterable[str] | None = None,
        event_id: str | None = None,
    ) -> Decision:
        """A decision model chooses one of ``actions`` (``{"id", "features"}``) for
        ``context`` (``POST /models/{name}/rank``; :meth:`rank` is the rankers'). A
        fresh ``event_id`` unless given: a retry answers the same decision."""
        call = choose_call(model, context, actions, excluded, event_id)
        return decision_of(await self._json(call))

    async def reward(
        self, model: str, event_id: str, reward: float, *, idempotency_key: str | None = None
    ) -> RewardResult:
        """Learn the reward of one decision (``POST /models/{name}/reward``), once."""
        return await self.rewards(model, [(event_id, reward)], idempotency_key=idempotency_key)

    async def rewards(
        self,
        model: str,
        pairs: Iterable[tuple[str, float]],
        *,
        idempotency_key: str | None = None,
    ) -> RewardResult:
        """Learn the rewards of many decisions, ``(event_id, reward)`` pairs, each once."""
        r, _ = await self._send(reward_call(model, pairs, idempotency_key))
        return reward_result(decode(r), r.headers.get("idempotent-replayed"))

    async def decision_log(
        self, model: str, *, after: int = 0, limit: int = 10_000
    ) -> tuple[list[str], int]:
        """DSJSON lines of the decisions rewarded past log position ``after``, and the
        position to ask from next (``GET /models/{name}/decisions``)."""
        r, _ = await self._send(log_call(model, after, limit))
        return r.text.splitlines(), int(r.headers.get("x-next-after", after))

    # ------------------------------------------------------------ batch models
    async def deploy(
        self, name: str, artifact: str | os.PathLike[str] | bytes | bytearray | memoryview
    ) -> DeployResult:
        """Upload an artifact (``learnserve train ...``) as the model's next version:
        ``artifact`` is the file's path (``str`` or ``pathlib.Path``, read off the event
        loop) or its bytes."""
        source = artifact_source(artifact)
        blob = await asyncio.to_thread(source.read_bytes) if isinstance(source, Path) else source
        call = Call("PUT", model_path(name, "/artifact"), blob, "application/octet-stream",
                    idempotent=False)  # fmt: skip
        return deploy_result(await self._json(call))

    async def delete_version(self, name: str, version: int) -> None:
        """Delete a stored artifact version (the active one is refused: Conflict)."""
        await self._send(Call("DELETE", model_path(name, f"/versions/{int(version)}")))

    async def versions(self, name: str) -> Versions:
        return versions_result(await self._json(Call("GET", model_path(name, "/versions"))))

    async def activate(self, name: str, version: int) -> ActivateResult:
        """Serve a stored version (setting the same version twice is harmless)."""
        body = await self._json(json_call("PUT", model_path(name, "/active"), {"version": version}))
        return ActivateResult(body["model"], body["version"], body["checksum"])

    async def rollback(self, name: str) -> ActivateResult:
        """Serve the stored version before the active one."""
        body = await self._json(Call("POST", model_path(name, "/rollback"), idempotent=False))
        return ActivateResult(body["model"], body["version"], body["checksum"], body["previous"])

    # ------------------------------------------------------------ operations
    async def ready(self) -> bool:
        try:
            return (await self._http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not await self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.url} not ready within {timeout}s")
            await asyncio.sleep(0.1)


async def _abatched(
    items: Iterable[Any] | AsyncIterable[Any], size: int
) -> AsyncIterator[list[Any]]:
    """:func:`batched` over a sync or async iterable (examples as ``example_dict``)."""
    if not isinstance(items, AsyncIterable):
        for chunk in batched(map(example_dict, items), size):
            yield chunk
        return
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    batch: list[Any] = []
    async for item in items:
        batch.append(example_dict(item))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _apacked(
    queries: Iterable[Any] | AsyncIterable[Any], packer: QueryPacker
) -> AsyncIterator[list[Any]]:
    """:class:`QueryPacker` over a sync or async iterable of queries."""
    if isinstance(queries, AsyncIterable):
        async for q in queries:
            full = packer.add(q)
            if full:
                yield full
    else:
        for q in queries:
            full = packer.add(q)
            if full:
                yield full
    last = packer.flush()
    if last:
        yield last
