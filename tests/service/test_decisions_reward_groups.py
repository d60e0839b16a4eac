"""Group commit of rewards (service.engine.reward_groups): concurrent unkeyed rewards to
one decision model share log entries, and nothing about what each client is told or
what each replica learns changes.

Two workers on one Redis; 96 decisions ranked, then their rewards sent by 32 clients
at once, some events twice (the same reward: answered as the first time, learned
once). Each reward is answered 200 once durable; the log holds fewer entries than
rewards; the log read back from Redis, applied in its order to a new model of the
same config in process, gives the state both workers serve, and a restart replays it
to the same state.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from service.models.decision_follower import DecisionKind
from service.models.payload import GROUP_MAGIC, split_group
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve
from tests.service.test_group_commit import _log  # (model "g"'s log read back)

N = 96
BODY = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 12}}
ACTIONS = [{"id": f"a{j}", "features": {"t": f"t{j % 3}"}} for j in range(6)]


def _context(i: int) -> dict[str, Any]:
    return {"u": f"u{i % 5}", "h": i % 7}


def _reward(i: int, action: str) -> float:
    return float(int(action[1:]) % 5 == i % 5)


def _twice(i: int) -> bool:
    return i % 16 == 5  # six events rewarded twice, amid the others


def _send(url: str, i: int, action: str) -> tuple[int, dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/models/g/reward", json={"event_id": f"e{i}", "reward": _reward(i, action)})
    return r.status_code, r.json()


def test_concurrent_rewards_share_entries_and_every_replica_learns_them_alike(
    redis_url: str, tmp_path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path)}
    proc = start_learnserve(port, env, workers=2)
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            assert c.put("/models/g", json=BODY).status_code == 201
            chosen = []
            for i in range(N):
                body = {"context": _context(i), "actions": ACTIONS, "event_id": f"e{i}"}
                r = c.post("/models/g/rank", json=body)
                assert r.status_code == 200, r.text
                chosen.append(r.json()["action"])
            config = c.get("/models/g").json()["config"]
        sends = [(i, chosen[i]) for i in range(N)] + [(i, chosen[i]) for i in range(N) if _twice(i)]
        with ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(lambda s: _send(url, *s), sends))
        learned: dict[int, int] = {}
        for (i, _), (status, body) in zip(sends, answers, strict=True):
            assert status == 200, body
            learned[i] = learned.get(i, 0) + int(body["events"][0]["learned"])
        assert all(learned[i] == 1 for i in range(N)), learned  # each event once
        versions = {body["version"] for _, body in answers}

        log = asyncio.run(_log(redis_url))
        last = max(versions)
        assert len(log) == last  # one log, one order
        assert [p for p in log if p[:4] == GROUP_MAGIC], "no two of 32 rewards shared an entry"
        assert len(log) < N
        rows = [e for p in log for e in (split_group(p) if p[:4] == GROUP_MAGIC else [p])]
        assert len(rows) == N  # every reward in one request's entry, none twice

        # a new model of the same config, fed the log's requests in its order
        ref = DecisionKind.create(config)
        for entry in rows:
            ref.apply(entry)
        digests = _digests(url, last)
        assert set(digests.values()) == {ref.state_digest()}, digests  # both workers
    finally:
        stop_process(proc)

    proc = start_learnserve(port, env, workers=1)  # a restart replays the same entries
    try:
        assert set(_digests(url, last, workers=1).values()) == set(digests.values())
    finally:
        stop_process(proc)


def _digests(url: str, version: int, workers: int = 2) -> dict[str, str]:
    out: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(out) < workers:
        with httpx.Client(base_url=url, timeout=60, headers={"Connection": "close"}) as c:
            r = c.get("/models/g")
            if r.json()["version"] >= version:
                out[r.headers["x-worker"]] = r.json()["state_digest"]
    return out
