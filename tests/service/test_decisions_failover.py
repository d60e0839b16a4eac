"""Decisions (rank + reward) through Redis failures and over a sharded fleet, with real
processes (issue 34, exactness; the client and the checks are those of
:mod:`tests.service.test_decisions_durability`: every acknowledged reward learned once,
the decision log and the state those of the in-process model fed the acknowledged
decisions in order, a rank again answers the first decision).

- Failover: a master and two replicas, the service acknowledging only what one replica
  has (``LEARNSERVE_REDIS_WAIT_REPLICAS=1``) and reaching Redis through one address (a
  TCP forwarder here, a virtual IP or a Sentinel-aware proxy in production). The master
  gets SIGKILL mid-traffic; the replica furthest ahead is promoted (as Sentinel picks
  it), the other follows it, the address moves to it. A service started fresh from the
  promoted replica holds the same state.
- Redis (``appendfsync always``) SIGKILLed twice and restarted from its AOF.
- Sharded ownership (R = 1 of 3 processes): rank and reward sent to the non-owners and
  retried on another process (the owner applies each entry once); then the owner gets
  SIGKILL mid-traffic and the client moves to another process.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.procs import RedisServer, find_redis_server, free_port, stop_process
from tests.service.serving import start_learnserve
from tests.service.test_decisions_durability import (
    ACTIONS,
    KEY,
    PATIENCE,
    Event,
    Traffic,
    check_exactly_once,
    context,
    put_model,
    store_env,
    true_reward,
    wait_events,
)
from tests.service.test_sharded_fleet import wait_members


class Forwarder:
    """One TCP address for Redis that forwards each connection to ``target`` (a port);
    ``switch`` points it elsewhere and cuts the connections open (as a moved VIP does)."""

    def __init__(self, target: int | None) -> None:
        self.target = target
        self.port = free_port()
        self.server = socket.create_server(("127.0.0.1", self.port))
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            try:
                if self.target is None:  # cut off
                    raise OSError("partitioned")
                up = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            with self.lock:
                self.open += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def switch(self, target: int | None) -> None:
        self.target = target
        with self.lock:
            cut, self.open = self.open, []
        for s in cut:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.server.close()
        self.switch(self.target)


NODE_ARGS = ["--repl-diskless-sync-delay", "0"]  # a resync starts at once


def synced(replica: RedisServer) -> None:
    for _ in range(600):
        with replica.client() as c:
            if c.info("replication").get("master_link_status") == "up":
                return
        time.sleep(0.05)
    raise RuntimeError(f"replica {replica.port} never synced")


@pytest.fixture
def master_and_two_replicas(tmp_path: Path) -> Iterator[tuple[list[RedisServer], Forwarder]]:
    """A master, two replicas and the link of the replicas to the master (a forwarder:
    ``link.switch(None)`` cuts them off, as a network partition would)."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server binary found")
    master = RedisServer(binary, tmp_path / "master", extra_args=NODE_ARGS)
    nodes = [master]
    link = Forwarder(None)
    try:
        master.start()
        link.switch(master.port)
        for k in (1, 2):
            of = ["--replicaof", "127.0.0.1", str(link.port)]
            nodes.append(RedisServer(binary, tmp_path / f"replica{k}", extra_args=NODE_ARGS + of))
            nodes[-1].start()
            synced(nodes[-1])
        yield nodes, link
    finally:
        link.close()
        for node in nodes:
            node.kill()


def offset(replica: RedisServer) -> int:
    with replica.client() as c:
        return int(c.info("replication")["slave_repl_offset"])


def fail_over(master: RedisServer, replicas: list[RedisServer], fwd: Forwarder) -> RedisServer:
    """SIGKILL the master, promote the replica furthest ahead, the other follows it, the
    service's address moves to it; the new master."""
    master.kill()
    new, other = sorted(replicas, key=offset, reverse=True)
    with new.client() as c:
        c.execute_command("REPLICAOF", "NO", "ONE")
    with other.client() as c:
        c.execute_command("REPLICAOF", "127.0.0.1", str(new.port))
    synced(other)
    fwd.switch(new.port)
    return new


@pytest.mark.parametrize("stalled", [False, True], ids=["replicas-up", "replicas-stalled"])
def test_a_redis_failover_under_decisions_loses_and_doubles_no_reward(
    stalled: bool, master_and_two_replicas: tuple[list[RedisServer], Forwarder], tmp_path: Path
) -> None:
    """``stalled``: the replicas are cut off from the master as a reward goes, so what the
    master stores meanwhile is on no replica (answered 503, retried) when it dies."""
    (master, *replicas), link = master_and_two_replicas
    fwd = Forwarder(master.port)
    env = {**store_env(tmp_path, fwd.url), "LEARNSERVE_REDIS_WAIT_REPLICAS": "1"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name, n = f"df-failover-{int(stalled)}", 40
    proc = start_learnserve(port, env)
    try:
        put_model(url, name)
        t = Traffic(url, name)
        thread = t.start(0, n)
        wait_events(t, 15, thread, 0.001)  # as event 15's reward goes
        if stalled:
            link.switch(None)
            time.sleep(2.5)  # WAIT times out (1 s): 503, retried
        new = fail_over(master, replicas, fwd)
        thread.join(PATIENCE)
        print("cut by the failover, then answered:", t.cut)
        assert t.cut, "no request met the failover: nothing tested"
        info = check_exactly_once(url, t, n, check_ranks=False)
    finally:
        stop_process(proc)
        fwd.close()
    fwd = Forwarder(new.port)  # a service started fresh from the promoted replica
    proc = start_learnserve(port, {**env, "LEARNSERVE_REDIS_URL": fwd.url})
    try:
        again = check_exactly_once(url, t, n, check_ranks=False)
        assert again["state_digest"] == info["state_digest"]
    finally:
        stop_process(proc)
        fwd.close()


def test_redis_killed_and_restarted_from_its_aof_under_decisions(tmp_path: Path) -> None:
    """Redis (``appendfsync always``: a write is on disk before Redis answers) gets
    SIGKILL mid-traffic and comes back from its AOF on the same address: the service
    answers 503 meanwhile, the client retries, nothing acknowledged is lost or doubled."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server binary found")
    redis = RedisServer(binary, tmp_path / "redis", extra_args=["--appendfsync", "always"])
    redis.start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name, n = "df-aof", 30
    proc = start_learnserve(port, store_env(tmp_path, redis.url))
    try:
        put_model(url, name)
        t = Traffic(url, name)
        thread = t.start(0, n)
        for k, then in ((8, 0.0), (19, 0.002)):
            wait_events(t, k, thread, then)
            redis.kill()
            time.sleep(0.5)  # requests meanwhile: 503, retried
            redis.start()
        thread.join(PATIENCE)
        print("cut by the Redis restarts, then answered:", t.cut)
        assert len(t.cut) >= 2, "no request met a Redis restart: nothing tested"
        check_exactly_once(url, t, n, check_ranks=True)
    finally:
        stop_process(proc)
        redis.kill()


def sharded_fleet(
    procs: list[Any], tmp_path: Path, redis_url: str, extra: dict[str, str]
) -> tuple[list[str], list[httpx.Client]]:
    """Three members p0..p2, one owner a model, on one Redis (``procs`` gets each process
    as it starts, for the caller to stop); their URLs and clients once all are members."""
    ports = [free_port() for _ in range(3)]
    for i, port in enumerate(ports):
        env = {
            **store_env(tmp_path / f"p{i}", redis_url),
            "LEARNSERVE_OWNERSHIP": "sharded",
            "LEARNSERVE_REPLICAS_PER_MODEL": "1",
            "LEARNSERVE_MEMBER_ID": f"p{i}",
            **extra,
        }
        procs.append(start_learnserve(port, env))
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    clients = [httpx.Client(base_url=u, timeout=30) for u in urls]
    assert wait_members(clients, 3) == ["p0", "p1", "p2"]
    return urls, clients


def post(url: str, path: str, body: dict[str, Any], key: str) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, headers={KEY: key}, timeout=30)


def test_a_sharded_decision_model_learns_each_reward_once_wherever_it_is_sent(
    redis_url: str, tmp_path: Path
) -> None:
    """Three processes, one owner per model (R = 1): each rank and reward goes to a
    process that does not own the model, then again (a retry whose answer was lost) to
    the next process: one decision an event, one reward learned, by the owner once."""
    name, n = "ds-sharded", 18
    procs: list[Any] = []
    try:
        # no checkpoint: the owner applies the whole log, counted below
        never = {"LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "100000",
                 "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "100000"}  # fmt: skip
        urls, clients = sharded_fleet(procs, tmp_path, redis_url, never)
        for c in clients:
            c.close()
        put_model(urls[0], name)
        owners = [httpx.get(f"{u}/models/{name}", timeout=30).json()["ownership"]["owners"]
                  for u in urls]  # fmt: skip
        assert owners[0] == owners[1] == owners[2] and len(owners[0]) == 1, owners
        owner = int(owners[0][0][1:])
        guests = [k for k in range(3) if k != owner]
        t = Traffic(urls[guests[0]], name)
        for i in range(n):
            eid, ctx = f"{name}-e{i}", context(i)
            first, retry = urls[guests[i % 2]], urls[(guests[i % 2] + 1) % 3]
            body = {"context": ctx, "actions": ACTIONS, "event_id": eid}
            ranks = [post(u, f"/models/{name}/rank", body, f"rank-{eid}") for u in (first, retry)]
            assert [r.status_code for r in ranks] == [200, 200], [r.text for r in ranks]
            answer = ranks[0].json()
            assert {k: v for k, v in ranks[1].json().items() if k != "rewarded"} == answer
            body = {"event_id": eid, "reward": true_reward(ctx, answer["action"])}
            key = f"reward-{eid}"
            rewards = [post(u, f"/models/{name}/reward", body, key) for u in (first, retry)]
            assert [r.status_code for r in rewards] == [200, 200], [r.text for r in rewards]
            version = rewards[0].json()["version"]
            assert rewards[1].json()["version"] == version, [r.text for r in rewards]
            t.events.append(Event(eid, ctx, answer, body["reward"], version))
        info = check_exactly_once(urls[owner], t, n, check_ranks=False)
        assert info["ownership"]["owned_here"] is True
        applied = [httpx.get(f"{u}/models/{name}", timeout=30).json()["ownership"]
                   for u in urls]  # fmt: skip
        print("entries applied:", [a["entries_applied"] for a in applied])
        # the log holds the n rewards: the owner applied each once, the guests none as owners
        assert applied[owner]["entries_applied"]["owner"] == n
        for k in guests:
            assert applied[k]["owned_here"] is False
            assert applied[k]["entries_applied"]["owner"] == 0
            guest = httpx.get(f"{urls[k]}/models/{name}", timeout=30).json()
            assert guest["rewards_learned"] == n
            assert guest["state_digest"] == info["state_digest"]
    finally:
        for proc in procs:
            stop_process(proc)


def test_the_owner_of_a_sharded_decision_model_killed_under_traffic(
    redis_url: str, tmp_path: Path
) -> None:
    """The client talks to the owner (R = 1) and goes to another process when its
    connection breaks; the owner gets SIGKILL mid-reward, another process takes the
    model over once the lease runs out: every acknowledged reward learned once."""
    name, n = "ds-owner-killed", 30
    procs: list[Any] = []
    try:
        urls, clients = sharded_fleet(
            procs, tmp_path, redis_url, {"LEARNSERVE_MEMBER_LEASE_SECONDS": "2"}
        )
        put_model(urls[0], name)
        info = clients[0].get(f"/models/{name}").json()
        owner = int(info["ownership"]["owners"][0][1:])
        rest = [k for k in range(3) if k != owner]
        t = Traffic(urls[owner], name, others=[urls[k] for k in rest])
        thread = t.start(0, n)
        wait_events(t, 10, thread, 0.001)
        procs[owner].kill()
        procs[owner].wait(10)
        thread.join(PATIENCE)
        print("cut by the owner's death, then answered:", t.cut)
        assert t.cut, "no request met the owner's death: nothing tested"
        alive = [clients[k] for k in rest]
        assert wait_members(alive, 2) == [f"p{k}" for k in rest]
        digests = []
        for k in rest:
            got = check_exactly_once(urls[k], t, n, check_ranks=False)
            assert got["ownership"]["owners"][0] in [f"p{k}" for k in rest], got["ownership"]
            digests.append(got["state_digest"])
        assert len(set(digests)) == 1
        for c in clients:
            c.close()
    finally:
        for proc in procs:
            stop_process(proc)


def test_a_delayed_label_retried_across_a_failover_is_not_lost(
    master_and_two_replicas: tuple[list[RedisServer], Forwarder], tmp_path: Path
) -> None:
    """The same hole as a rank's or reward's, for /update with delayed labels: a label
    stored on the master while the replicas are cut off is answered 503 (its WAIT timed
    out); a retry must not answer 200 from the master's mark until a replica has it."""
    (master, *replicas), link = master_and_two_replicas
    fwd = Forwarder(master.port)
    env = {**store_env(tmp_path, fwd.url), "LEARNSERVE_REDIS_WAIT_REPLICAS": "1"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_learnserve(port, env)
    answers: dict[int, httpx.Response] = {}

    def label(i: int) -> None:  # retried with its key until it is not a 503
        body = {"model": "dl", "examples": [{"id": f"p{i}", "y": "a" if i % 2 else "b"}]}
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                answers[i] = post(url, "/update", body, f"label-{i}")
                if answers[i].status_code != 503:
                    return
            time.sleep(0.05)

    try:
        body = {"algorithm": "arow", "features": {"kind": "dense", "dim": 3}}
        assert httpx.put(f"{url}/models/dl", json=body, timeout=30).status_code == 201
        warm = {"model": "dl", "examples": [{"x": [1.0, 0.0, 0.0], "y": "a"},
                                            {"x": [0.0, 1.0, 0.0], "y": "b"}]}  # fmt: skip
        assert post(url, "/update", warm, "warm").status_code == 200  # its labels known
        pred = {"model": "dl", "instances": [{"id": f"p{i}", "x": [float(i), 1.0, -1.0]}
                                            for i in range(8)]}  # fmt: skip
        assert post(url, "/predict", pred, "predict").status_code == 200
        for i in range(4):
            label(i)
        link.switch(None)  # the replicas cut off: label 4's WAIT times out, retried
        thread = threading.Thread(target=label, args=(4,))
        thread.start()
        time.sleep(2.5)
        fail_over(master, replicas, fwd)
        thread.join(PATIENCE)
        for i in range(5, 8):
            label(i)
        versions = [answers[i].json()["version"] for i in range(8)]
        assert all(answers[i].status_code == 200 for i in range(8))
        # each acknowledged label an entry of its own, kept through the failover
        assert versions == list(range(2, 10)), versions  # (the warm-up is entry 1)
        assert httpx.get(f"{url}/models/dl", timeout=30).json()["version"] == 9
    finally:
        stop_process(proc)
        fwd.close()
