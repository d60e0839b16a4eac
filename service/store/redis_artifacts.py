"""The Redis store's artifacts: a batch model's stored versions and its active one.

The keys ``art`` and ``artmeta`` of the model (layout: see :mod:`service.store.redis`).
Every change of the active version bumps the catalog epoch, so workers switch.
"""

from __future__ import annotations

import json
import time
from typing import Any

from service.store import redis_scripts as scripts
from service.store.base import ActiveVersionChanged, ArtifactActive, ArtifactVersion, ModelNotFound
from service.store.redis_connection import RedisConnection
from service.store.redis_keys import _check_size, _keys


def _meta(blob: bytes, kind: str, checksum: str) -> str:
    """A version's entry in ``artmeta`` (what ``list_artifacts`` answers)."""
    return json.dumps(
        {"size": len(blob), "checksum": checksum, "created_at": time.time(), "kind": kind}
    )


class RedisArtifacts(RedisConnection):
    async def add_artifact(self, name: str, blob: bytes, kind: str, checksum: str) -> int:
        _check_size("artifact", blob)
        k = _keys(name)
        meta = _meta(blob, kind, checksum)
        v = await self._script(
            scripts.ADD_ART, [k["config"], k["art"], k["artmeta"]], [bytes(blob), meta]
        )
        if v == -1:
            raise ModelNotFound(name)
        await self._bump_epoch()
        return int(v)

    async def put_artifact(
        self, name: str, blob: bytes, kind: str, checksum: str
    ) -> tuple[int, bool]:
        _check_size("artifact", blob)
        k = _keys(name)
        meta = _meta(blob, kind, checksum)
        res = await self._script(
            scripts.PUT_ART,
            [k["config"], k["art"], k["artmeta"]],
            [bytes(blob), meta, checksum],
        )
        if res == -1:
            raise ModelNotFound(name)
        version, how = int(res[0]), int(res[1])
        if how:  # 1 stored, 2 an existing version made active: other workers switch
            await self._bump_epoch()
        return version, how == 1

    async def delete_artifact(self, name: str, version: int) -> bool:
        k = _keys(name)
        res = await self._script(
            scripts.DEL_ART, [k["config"], k["art"], k["artmeta"]], [str(int(version))]
        )
        if res == -1:
            raise ModelNotFound(name)
        if res == -3:
            raise ArtifactActive(name, version)
        return bool(res)

    async def list_artifacts(self, name: str) -> list[ArtifactVersion]:
        h: Any = await self._call(lambda: self.r.hgetall(_keys(name)["artmeta"]))
        out = []
        for f, raw in h.items():
            if f.isdigit():
                m = json.loads(raw)
                out.append(
                    ArtifactVersion(int(f), m["size"], m["checksum"], m["created_at"], m["kind"])
                )
        return sorted(out, key=lambda a: a.version)

    async def get_artifact(self, name: str, version: int) -> bytes | None:
        b: Any = await self._call(lambda: self.r.hget(_keys(name)["art"], str(int(version))))
        return None if b is None else bytes(b)

    async def get_active_version(self, name: str) -> int | None:
        v = await self._call(lambda: self.r.hget(_keys(name)["artmeta"], "active"))
        return None if v is None else int(v)

    async def set_active_version(
        self, name: str, version: int, *, expected: int | None = None
    ) -> None:
        k = _keys(name)
        want = "" if expected is None else str(int(expected))
        res = await self._script(
            scripts.SET_ACTIVE, [k["config"], k["artmeta"]], [int(version), want]
        )
        if isinstance(res, list):  # [-3, active]: the compare-and-set lost
            assert expected is not None
            raise ActiveVersionChanged(name, expected, None if res[1] is None else int(res[1]))
        if res == -1:
            raise ModelNotFound(name)
        if res == -2:
            raise ValueError(f"model {name!r} has no artifact version {version}")
        await self._bump_epoch()
