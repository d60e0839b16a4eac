"""The Redis store's key names (layout: see :mod:`service.store.redis`) and the small
conversions of what goes in and comes out of them."""

from __future__ import annotations

from service.store.base import ValueTooLarge

MODELS_KEY = "ls:{catalog}:models"
EPOCH_KEY = "ls:{catalog}:epoch"
_MAX_VALUE = 512 << 20  # Redis's default proto-max-bulk-len: larger strings are refused


def _check_size(what: str, blob: bytes | memoryview) -> None:
    # Refused here: Redis would drop the connection mid-write (seen as "unreachable").
    size = memoryview(blob).nbytes
    if size > _MAX_VALUE:
        raise ValueTooLarge(f"{what} of {size} bytes exceeds Redis's {_MAX_VALUE} byte limit")


def _keys(name: str) -> dict[str, str]:
    p = f"ls:{{{name}}}:"
    return {
        k: p + k
        for k in (
            "config",
            "seq",
            "log",
            "ckpt",
            "ckptdata",
            "art",
            "artmeta",
            "gen",
            "idem",
            "idemexp",
            "head",
            "lease:checkpoint",
            "lease:default_reward",
            "idempos",
            "idemout",
            "fb",
            "fbexp",
            "fblab",
            "followers",
            "serving",
        )
    }


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pos(entry_id: bytes | str) -> int:
    s = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(s.split("-", 1)[0])
