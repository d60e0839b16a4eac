"""The Redis Cluster settings the README's "Durability on Redis" asks for, checked at
startup so an operator hears about a missing one before a failover shows it.

- ``cluster-require-full-coverage yes`` (Redis's default): while one master is failed,
  every master answers CLUSTERDOWN, so models on live masters get 503 too.
- With ``WAIT N``: a master needs N + 1 replicas, or after its failover the promoted
  replica has fewer than N and its models' updates get 503 until one is added; and
  ``repl-diskless-sync-delay`` > 0 holds a replica's full resync back that many seconds
  after a failover, with 503s for as long.

Managed services often refuse ``CONFIG`` (renamed or disabled): a setting that cannot
be read is reported once as unknown, not as wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

log = logging.getLogger("learnserve.store")

# One master: (its address, an async function sending one command to it).
Master = tuple[str, Callable[..., Awaitable[Any]]]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


async def _config(send: Callable[..., Awaitable[Any]], name: str) -> str | None:
    try:
        reply = await send("CONFIG", "GET", name)
    except Exception:  # CONFIG renamed / disabled (managed Redis), or an old server
        return None
    if isinstance(reply, dict):
        values = [_text(v) for v in reply.values()]
    else:
        values = [_text(v) for v in list(reply)[1::2]]
    return values[0] if values else None


async def _replicas(send: Callable[..., Awaitable[Any]]) -> int | None:
    try:
        info = await send("INFO", "replication")
    except Exception:
        return None
    if isinstance(info, dict):
        n = info.get("connected_slaves")
        return None if n is None else int(n)
    for line in _text(info).splitlines():
        if line.startswith("connected_slaves:"):
            return int(line.split(":", 1)[1])
    return None


async def cluster_config_warnings(masters: Iterable[Master], wait_replicas: int) -> list[str]:
    """What on these masters goes against the README's cluster settings, one message each
    (empty when all is well or nothing could be read)."""
    out: list[str] = []
    unknown: list[str] = []
    for where, send in masters:
        coverage = await _config(send, "cluster-require-full-coverage")
        if coverage is None:
            unknown.append(where)
        elif coverage == "yes":
            out.append(
                f"redis {where}: cluster-require-full-coverage is yes: while any master is "
                "failed, every master answers CLUSTERDOWN and all models get 503 (set it to no)"
            )
        if wait_replicas <= 0:
            continue
        delay = await _config(send, "repl-diskless-sync-delay")
        if delay is not None and delay != "0":
            out.append(
                f"redis {where}: repl-diskless-sync-delay is {delay}: after a failover, "
                f"WAIT {wait_replicas} can be short of replicas for {delay} s more (503s); "
                "set it to 0"
            )
        replicas = await _replicas(send)
        if replicas is not None and replicas < wait_replicas + 1:
            out.append(
                f"redis {where}: {replicas} replica(s) with LEARNSERVE_REDIS_WAIT_REPLICAS="
                f"{wait_replicas}: after this master's failover the promoted replica has "
                f"fewer than {wait_replicas} and its models get 503 until one is added "
                f"(run {wait_replicas + 1} replicas per master)"
            )
    if unknown:
        log.info("redis %s: CONFIG GET refused; cluster settings not checked", ", ".join(unknown))
    return out
