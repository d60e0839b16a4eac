"""The Redis store's rules between leaders and followers (``Store.create_follower``).

Each rule is one Lua script over the follower's and its leader's keys
(:mod:`service.store.redis_follower_scripts`): creating a follower checks and registers
it in its leader's ``followers`` set; deleting a model refuses a leader whose set is
not empty and a follower its leader's ``serving`` names, and unregisters a follower;
a promotion appends its control entry only while the follower follows the leader, and
sets ``serving`` with it; a trim never cuts past what a registered follower needs.

A script reads the keys the caller named: the caller reads the follower's config (or
the leader's set) first, and the script refuses (-9) when what it finds is not what
the caller read; the caller then reads again.

On a Redis Cluster a leader's and a follower's keys are in two slots, which one
script cannot touch: ``followers_atomic`` is False there, and these fall back to the
single-model steps (the service's own checks, not atomic against each other).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from service.store import redis_follower_scripts as fscripts
from service.store.base import (
    ConfigConflict,
    LeaderGone,
    ModelInUse,
    ModelNotFound,
    NotAFollower,
    canonical_config,
    check_payload,
    payload_digest,
    validate_name,
)
from service.store.redis_catalog import RedisCatalog
from service.store.redis_keys import _keys, _text
from service.store.redis_log import RedisLog
from service.store.redis_wakes import wake_key

_RETRIES = 10  # reads again when a model changed between the read and the script


def _leader_of(text: Any) -> str:
    if text is None:
        return ""
    f = json.loads(text).get("follows")
    return str(f["model"]) if isinstance(f, dict) else ""


class RedisFollowers(RedisCatalog, RedisLog):
    followers_atomic = True  # False on a cluster: two slots

    async def create_follower(
        self, name: str, config: dict[str, Any], leader_generation: str
    ) -> bool:
        if not self.followers_atomic:
            return await self.create_model(name, config)
        text = canonical_config(config)
        f, lead = config["follows"], str(config["follows"]["model"])
        k, lk = _keys(validate_name(name)), _keys(lead)
        keys = [k["config"], k["gen"], lk["config"], lk["gen"], lk["followers"]]
        keys += [lk["seq"], lk["log"]]
        args = [text, secrets.token_hex(8), leader_generation, name, int(f["from_version"])]
        res = await self._script(fscripts.CREATE_FOLLOWER, keys, args)
        if res == -5 or res == -8:
            raise LeaderGone(lead, trimmed=res == -8)
        return await self._created(name, res)

    async def delete_model(self, name: str) -> bool:
        if not self.followers_atomic:
            return await super().delete_model(name)
        k = _keys(name)
        own = list(k.values())
        for _ in range(_RETRIES):
            lead = _leader_of(await self._call(lambda: self.r.get(k["config"])))
            keys = own + ([_keys(lead)["followers"], _keys(lead)["serving"]] if lead else [])
            args = [lead, name, own.index(k["followers"]) + 1, len(own)]
            res = await self._script(fscripts.DELETE_MODEL, keys, args)
            if isinstance(res, list):
                raise ModelInUse(name, "has_followers", sorted(_text(f) for f in res[1:]))
            if res == -6:
                raise ModelInUse(name, "promoted", [lead])
            if res != -9:
                existed = res == 1
                await self._index(name, bump_epoch=existed, remove=True)
                return existed
        raise ConfigConflict(f"model {name!r} kept changing while being deleted")

    async def append_serving(
        self, name: str, payload: bytes, serving: str | None
    ) -> tuple[int, str]:
        if not self.followers_atomic:
            return await self.append_entry(name, payload)
        check_payload(payload)
        await self._ready_to_append()
        k = _keys(name)
        other = _keys(serving)["config"] if serving else k["config"]
        keys = [k["config"], k["seq"], k["log"], k["head"], k["serving"], other]
        args: list[Any] = [bytes(payload), payload_digest(payload), serving or "", name]
        if self.wake_in_script:
            keys.append(wake_key(name))
            args.append(self.wakes.token)
        res = await self._eval_acked(fscripts.APPEND_SERVING, keys, args)
        if res == -1:
            raise ModelNotFound(name)
        if res == -7:
            raise NotAFollower(f"model {serving!r} does not follow {name!r}")
        if not self.wake_in_script:
            self.wakes.publish(self.r, {name: int(res[0])})
        return int(res[0]), _text(res[1])

    async def trim_log(self, name: str, upto: int) -> None:
        if upto < 1:
            return
        if not self.followers_atomic:
            return await super().trim_log(name, upto)
        k = _keys(name)
        for _ in range(_RETRIES):
            members: Any = await self._call(lambda: self.r.smembers(k["followers"]))
            fs = sorted(_text(m) for m in members)
            keys = [k["log"], k["followers"]]
            for f in fs:
                keys += [_keys(f)["config"], _keys(f)["ckpt"]]
            if await self._script(fscripts.TRIM, keys, [upto, len(fs), *fs]) != -9:
                return
        # followers kept coming and going: trim nothing this time (a later one will)
