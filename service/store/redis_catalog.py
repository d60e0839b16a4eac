"""The Redis store's catalog: models (configs and generations), created and deleted.

A model is its ``ls:{NAME}:config`` key (with ``gen``, a random id given at creation);
``ls:{catalog}:models`` is an index of the names and ``ls:{catalog}:epoch`` counts
every change of the catalog (and of a model's active artifact). The index and epoch
live in another slot than the model's keys: they are updated right after the
per-model script, and a name without a config (a delete that crashed before
un-indexing) is skipped.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from service.store import redis_scripts as scripts
from service.store.base import ConfigConflict, StoreUnavailable, canonical_config, validate_name
from service.store.redis_checkpoints import RedisCheckpoints, _chunks
from service.store.redis_keys import EPOCH_KEY, MODELS_KEY, _check_size, _keys


class RedisCatalog(RedisCheckpoints):
    """Also creates a model with its starting checkpoint (an import), whose chunks are
    written as the checkpoints' are."""

    async def create_model(self, name: str, config: dict[str, Any]) -> bool:
        text = canonical_config(config)
        k = _keys(validate_name(name))
        res = await self._script(
            scripts.CREATE, [k["config"], k["gen"]], [text, secrets.token_hex(8)]
        )
        return await self._created(name, res)

    async def _created(self, name: str, res: Any) -> bool:
        """The answer of CREATE (or CREATE_FROM_CKPT): 1 created, 0 there with this
        config, else the config it has."""
        if res == 1 or res == 0:
            await self._index(name, bump_epoch=res == 1)
            return res == 1
        cur = res.decode() if isinstance(res, bytes) else res
        raise ConfigConflict(f"model {name!r} exists with a different config: {cur}")

    async def _index(self, name: str, bump_epoch: bool, *, remove: bool = False) -> None:
        """Add ``name`` to the index (or ``remove`` it), then bump the epoch if the model
        was created (or deleted). Indexed after the config: a crash in between leaves
        a model missing from the index, which the next create_model (equal config)
        repairs."""

        async def index() -> None:
            async with self.r.pipeline(transaction=False) as p:
                if remove:
                    p.srem(MODELS_KEY, name)
                else:
                    p.sadd(MODELS_KEY, name)
                if bump_epoch:
                    p.incr(EPOCH_KEY)
                await p.execute()

        await self._call(index)

    async def create_model_from_checkpoint(
        self, name: str, config: dict[str, Any], blob: bytes | memoryview
    ) -> bool:
        text = canonical_config(config)
        data = memoryview(blob).cast("B")
        _check_size("checkpoint", data)
        k = _keys(validate_name(name))
        token = f"0.{secrets.token_hex(6)}"  # position 0: a later switch sweeps it if left
        chunks = _chunks(data)
        res: Any = None
        try:
            await self._put_chunks(k["ckptdata"], token, chunks)
            keys = [k["config"], k["gen"], k["ckpt"], k["ckptdata"]]
            args = [text, secrets.token_hex(8), token, len(chunks), repr(time.time())]
            res = await self._script(scripts.CREATE_FROM_CKPT, keys, args)
        finally:
            if res != 1:
                await self._drop_chunks(k["ckptdata"], token, len(chunks))
        if res == -3:
            raise StoreUnavailable(f"redis {self._where()}: the import of {name!r} lost a chunk")
        return await self._created(name, res)

    async def get_config(self, name: str) -> dict[str, Any] | None:
        text = await self._call(lambda: self.r.get(_keys(name)["config"]))
        return None if text is None else json.loads(text)

    async def list_models(self) -> dict[str, dict[str, Any]]:
        names = await self._indexed_names()
        if not names:
            return {}

        async def configs() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                for n in names:
                    p.get(_keys(n)["config"])
                return await p.execute()

        texts = await self._call(configs)
        # A name without a config is a delete that crashed before un-indexing: skip it.
        return {n: json.loads(t) for n, t in zip(names, texts, strict=True) if t is not None}

    async def _indexed_names(self) -> list[str]:
        members: Any = await self._call(lambda: self.r.smembers(MODELS_KEY))
        return sorted(n.decode() for n in members)

    async def get_generation(self, name: str) -> str | None:
        k = _keys(name)

        async def q() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                p.exists(k["config"])
                p.get(k["gen"])
                return await p.execute()

        exists, gen = await self._call(q)
        if not exists:
            return None
        return "" if gen is None else gen.decode()

    async def list_generations(self) -> dict[str, str]:
        names = await self._indexed_names()
        if not names:
            return {}

        async def q() -> list[Any]:
            async with self.r.pipeline(transaction=False) as p:
                for n in names:
                    p.exists(_keys(n)["config"])
                    p.get(_keys(n)["gen"])
                return await p.execute()

        res = await self._call(q)
        out = {}
        for i, n in enumerate(names):
            if res[2 * i]:
                gen = res[2 * i + 1]
                out[n] = "" if gen is None else gen.decode()
        return out

    async def delete_model(self, name: str) -> bool:
        k = _keys(name)
        existed = await self._script(scripts.DELETE, list(k.values()), []) == 1
        await self._index(name, bump_epoch=existed, remove=True)
        return existed

    async def catalog_epoch(self) -> int:
        return int(await self._call(lambda: self.r.get(EPOCH_KEY)) or 0)
