"""Decisions (rank + reward) through process deaths, with real processes: ``learnserve
serve`` subprocesses, a real redis-server, real HTTP (issue 34, exactness).

The client is a user that ranks an event, rewards the chosen action and moves on, and
retries every request (a broken connection or a 503) with the same ``Idempotency-Key``
and the same ``event_id`` until it gets an answer. Meanwhile the service is killed with
SIGKILL and started again (one process), or one worker of ``--workers 2`` is killed (the
supervisor starts another). Afterwards:

- every acknowledged reward is learned once: ``rewards_learned`` is the number
  acknowledged, the decision log (DSJSON) holds each event once, in the order
  acknowledged, with the decision the client was answered and its reward;
- the service's ``state_digest`` is that of an in-process model fed exactly those
  decisions and rewards in that order (and, on one process, that model decides each
  event as the service answered it);
- a rank of any event again, after it all, answers the first decision.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from learners.decisions.dsjson import from_dsjson
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve, wait_ready

BODY = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 14}}
ACTIONS = [{"id": f"a{i}", "features": {"topic": f"t{i % 3}", "len": (i % 5) / 5}}
           for i in range(8)]  # fmt: skip
IDS = [a["id"] for a in ACTIONS]
DEFAULTS = {**BODY, "default_reward": 0.0, "reward_wait_seconds": 2}
KEY = "Idempotency-Key"
PATIENCE = 120.0  # seconds a request is retried before the test gives up on the service


def context(i: int) -> dict[str, Any]:
    return {"country": i % 3, "device": "m" if i % 2 else "d"}


def true_reward(ctx: dict[str, Any], action: str) -> float:
    return float(int(action[1:]) % 3 == ctx["country"])


@dataclass
class Event:
    event_id: str
    context: dict[str, Any]
    answer: dict[str, Any]  # rank's answer
    reward: float | None  # None: not sent (the default reward's)
    version: int | None  # the version the reward was acknowledged with


@dataclass
class Traffic:
    """One client's rank + reward stream on one model over a kept-alive connection (a new
    one after a broken one), retrying each request until it is answered."""

    url: str
    name: str
    events: list[Event] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    workers: set[str] = field(default_factory=set)  # the x-worker of every answer
    last_worker: str = ""
    rewarding: int = -1  # the event whose reward is being sent
    skip_every: int = 0  # with k, every k-th event gets no reward
    others: list[str] = field(default_factory=list)  # where to go when url breaks
    cut: list[str] = field(default_factory=list)  # requests answered after a retry
    client: httpx.Client | None = None

    def post(self, path: str, body: dict[str, Any], key: str) -> httpx.Response | None:
        if self.client is None:
            self.client = httpx.Client(base_url=self.url, timeout=10)
        try:
            return self.client.post(path, json=body, headers={KEY: key})
        except httpx.TransportError:
            self.client.close()
            self.client = None
            if self.others:  # another process (as a load balancer would)
                self.others.append(self.url)
                self.url = self.others.pop(0)
            return None

    def send(self, path: str, body: dict[str, Any], key: str) -> httpx.Response | None:
        deadline = time.monotonic() + PATIENCE
        tries = 0
        while time.monotonic() < deadline:
            r = self.post(path, body, key)
            tries += 1
            if r is not None and r.status_code != 503:
                self.last_worker = r.headers.get("x-worker", "")
                self.workers.add(self.last_worker)
                if tries > 1:
                    replayed = " replayed" if r.headers.get("idempotent-replayed") else ""
                    self.cut.append(f"{path.rsplit('/', 1)[1]} {body['event_id']}{replayed}")
                if r.status_code != 200:
                    self.failures.append(f"{path} {body}: {r.status_code} {r.text}")
                    return None
                return r
            time.sleep(0.05)
        self.failures.append(f"{path} {body}: no answer in {PATIENCE:g} s")
        return None

    def run(self, start: int, n: int) -> None:
        for i in range(start, start + n):
            eid = f"{self.name}-e{i}"
            ctx = context(i)
            body = {"context": ctx, "actions": ACTIONS, "event_id": eid}
            r = self.send(f"/models/{self.name}/rank", body, f"rank-{eid}")
            if r is None:
                return
            answer = r.json()
            if self.skip_every and i % self.skip_every == self.skip_every - 1:
                self.events.append(Event(eid, ctx, answer, None, None))
                continue
            reward = true_reward(ctx, answer["action"])
            body = {"event_id": eid, "reward": reward}
            self.rewarding = i
            r = self.send(f"/models/{self.name}/reward", body, f"reward-{eid}")
            if r is None:
                return
            self.events.append(Event(eid, ctx, answer, reward, r.json()["version"]))
        if self.client is not None:
            self.client.close()
            self.client = None

    def start(self, start: int, n: int) -> threading.Thread:
        t = threading.Thread(target=self.run, args=(start, n), daemon=True)
        t.start()
        return t


def put_model(url: str, name: str, body: dict[str, Any] = BODY) -> None:
    r = httpx.put(f"{url}/models/{name}", json=body, timeout=30)
    assert r.status_code == 201, r.text


def twin(
    events: list[Event], check_ranks: bool = False, body: dict[str, Any] = BODY
) -> DecisionAdapter:
    """The in-process model fed the acknowledged decisions and rewards in order; with
    ``check_ranks``, each event is first ranked in process, as the service answered it."""
    s = Settings(data_dir="/tmp/unused")
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(body, s))
    for e in events:
        if check_ranks:
            mine, _ = model.rank({"context": e.context, "actions": ACTIONS}, s, e.event_id, 0)
            assert mine["ranking"] == e.answer["ranking"], e.event_id  # the chosen first
        p = {x["id"]: x["probability"] for x in e.answer["ranking"]}
        ev = {"id": e.event_id, "ids": IDS, "p": [p[i] for i in IDS],
              "a": IDS.index(e.answer["action"]), "v": 0, "ctx": e.context, "feat": []}  # fmt: skip
        rows = model.encode_rank({"context": e.context, "actions": ACTIONS}, s).batch
        model.apply(df.reward_entry([(rows, ev)], [e.reward]))
    return model


def decision_log(url: str, name: str) -> list[Any]:
    r = httpx.get(f"{url}/models/{name}/decisions", timeout=30)
    assert r.status_code == 200, r.text
    return [from_dsjson(line) for line in r.text.splitlines()]


def learned(url: str, name: str, n: int) -> dict[str, Any]:
    """``GET /models/{name}`` once it has learned ``n`` rewards (defaults come from a
    sweep about once a second)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        info = dict(httpx.get(f"{url}/models/{name}", timeout=30).json())
        if info["rewards_learned"] >= n or time.monotonic() > deadline:
            return info
        time.sleep(0.1)


def check_exactly_once(
    url: str, t: Traffic, n: int, check_ranks: bool, body: dict[str, Any] = BODY
) -> dict[str, Any]:
    """Every one of the ``n`` events acknowledged, learned once (its reward, or else the
    model's default) in the log's order; the state of the twin fed them in that order."""
    assert t.failures == [], t.failures
    assert [e.event_id for e in t.events] == [f"{t.name}-e{i}" for i in range(n)]
    acked = [e for e in t.events if e.version is not None]
    versions = [e.version for e in acked]
    assert versions == sorted(set(versions)), versions  # each reward its own entry, in order
    info = learned(url, t.name, n)
    assert info["rewards_learned"] == n, (info["rewards_learned"], n)
    assert info["evaluation"]["served"]["ips"]["n"] == n
    log = decision_log(url, t.name)
    assert sorted(x.event_id for x in log) == sorted(e.event_id for e in t.events)  # once each
    sent = {e.event_id: e for e in t.events}
    default = body.get("default_reward")
    in_log = [replace(sent[x.event_id], reward=default) if sent[x.event_id].reward is None
              else sent[x.event_id] for x in log]  # fmt: skip
    assert [e for e in in_log if e.version is not None] == acked  # in the order acknowledged
    for x, e in zip(log, in_log, strict=True):
        assert x.reward == e.reward, e.event_id
        assert x.actions[x.chosen]["_id"] == e.answer["action"], e.event_id
        assert x.probability == e.answer["probability"], e.event_id
    assert info["state_digest"] == twin(in_log, check_ranks, body).state_digest()
    for e in t.events:  # any event ranked again: the first decision
        probe = {"context": {}, "actions": ACTIONS[:2], "event_id": e.event_id}
        r = httpx.post(f"{url}/models/{t.name}/rank", json=probe, timeout=30)
        assert r.status_code == 200, r.text
        again = r.json()
        assert again.get("rewarded") is True, again
        assert (again["action"], again["ranking"]) == (e.answer["action"], e.answer["ranking"])
    return dict(info)


def wait_events(t: Traffic, n: int, thread: threading.Thread, then: float | None = None) -> None:
    """Until the client has ``n`` acknowledged events (or stopped); with ``then``, until
    it sends event ``n``'s reward, and ``then`` seconds more."""
    while len(t.events) < n and thread.is_alive():
        time.sleep(0.001)
    while then is not None and t.rewarding < n and thread.is_alive():
        time.sleep(0.0002)
    time.sleep(then or 0.0)


def store_env(tmp_path: Path, redis_url: str | None = None) -> dict[str, str]:
    env = {
        "LEARNSERVE_DATA_DIR": str(tmp_path / "data"),
        # restores go through a checkpoint + the log after it; the log is kept whole
        "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "7",
        "LEARNSERVE_LOG_RETAIN_ENTRIES": "10000",
    }
    if redis_url is not None:
        env["LEARNSERVE_REDIS_URL"] = redis_url
    return env


N = 36
# After this many acknowledged events (as the next rank goes), or as the next reward
# goes and this long after: the reward cut before or after it is stored.
KILLS = ((5, None), (11, 0.0), (17, 0.001), (23, 0.002), (29, 0.003))


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_kill9_of_the_service_loses_and_doubles_no_reward(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if kind == "redis" else None
    env = store_env(tmp_path, redis_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name = f"dk-{kind}"
    proc = start_learnserve(port, env)
    try:
        put_model(url, name)
        t = Traffic(url, name)
        thread = t.start(0, N)
        for k, then in KILLS:
            wait_events(t, k, thread, then)
            proc.send_signal(signal.SIGKILL)  # a rank or a reward is almost surely in flight
            proc.wait(10)
            proc = start_learnserve(port, env)
        thread.join(PATIENCE)
        print("cut by the kills, then answered:", t.cut)
        assert len(t.cut) >= len(KILLS), "no request was cut by a kill: nothing tested"
        before = check_exactly_once(url, t, N, check_ranks=True)
    finally:
        stop_process(proc)
    proc = start_learnserve(port, env)  # and once more, gracefully: the same state
    try:
        after = httpx.get(f"{url}/models/{name}", timeout=30).json()
        assert after["state_digest"] == before["state_digest"]
        assert after["evaluation"] == before["evaluation"]
    finally:
        stop_process(proc)


@pytest.mark.slow  # 12-90 s: five kills, each waiting for the supervisor's new worker
@pytest.mark.parametrize("defaults", [False, True], ids=["rewards", "default-rewards"])
def test_kill9_of_one_worker_of_two_loses_and_doubles_no_reward(
    defaults: bool, redis_url: str, tmp_path: Path
) -> None:
    """With ``defaults``, every third event gets no reward: the model's default reward
    (swept by whichever worker holds the lease) is learned for it, once."""
    env = store_env(tmp_path, redis_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name, body = ("dk-default", DEFAULTS) if defaults else ("dk-worker", BODY)
    proc = start_learnserve(port, env, workers=2)
    try:
        put_model(url, name, body)
        t = Traffic(url, name, skip_every=3 if defaults else 0)
        killed = []
        for j, (k, then) in enumerate(KILLS):  # the client runs on while a worker is dead:
            end = KILLS[j + 1][0] if j + 1 < len(KILLS) else N  # a kill in each stretch
            thread = t.start(len(t.events), end - len(t.events))
            wait_events(t, k, thread, then)
            pid = int(t.last_worker)  # the worker of the client's connection
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            thread.join(PATIENCE)
            # the supervisor starts another (up to a minute late, when the kill comes
            # while it waits for that worker's answer to its health check)
            wait_ready(url, workers=2, timeout=PATIENCE)
        print("cut by the kills, then answered:", t.cut)
        assert proc.poll() is None
        assert killed[0] in {int(w) for w in t.workers if w}, "the killed worker answered none"
        info = check_exactly_once(url, t, N, check_ranks=False, body=body)
        # every worker (the new ones included) holds that state
        digests = converged(url, name, N)
        assert set(digests.values()) == {info["state_digest"]}
    finally:
        stop_process(proc)


def converged(url: str, name: str, n: int) -> dict[str, str]:
    """Each worker's digest of ``name`` once it has learned ``n`` rewards (asked on new
    connections until two workers answered)."""
    out: dict[str, str] = {}
    deadline = time.monotonic() + PATIENCE
    while len(out) < 2 and time.monotonic() < deadline:
        r = httpx.get(f"{url}/models/{name}", headers={"Connection": "close"}, timeout=30)
        assert r.status_code == 200, r.text
        if r.json()["rewards_learned"] == n:
            out[r.headers["x-worker"]] = r.json()["state_digest"]
        else:
            time.sleep(0.05)
    assert len(out) == 2, out
    return out


def race(url: str, path: str, body: dict[str, Any], key: str, n: int) -> list[httpx.Response]:
    """``n`` copies of one request at once, each on its own connection (a client's retries
    racing its first attempt over both workers)."""
    barrier = threading.Barrier(n)
    out: list[httpx.Response] = []

    def one() -> None:
        barrier.wait()
        out.append(httpx.post(f"{url}{path}", json=body, timeout=30,
                              headers={KEY: key, "Connection": "close"}))  # fmt: skip

    threads = [threading.Thread(target=one) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert len(out) == n
    return out


def test_two_workers_answer_one_decision_per_event_and_end_in_one_state(
    redis_url: str, tmp_path: Path
) -> None:
    """Each event ranked 3 times at once and rewarded 3 times at once (one key) over
    ``--workers 2``: one decision, one reward learned; both workers end in the state of
    one model fed the decisions and rewards in order, and so does a one-worker restart."""
    env = store_env(tmp_path, redis_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name, n = "dw-race", 24
    proc = start_learnserve(port, env, workers=2)
    try:
        put_model(url, name)
        t = Traffic(url, name)
        for i in range(n):
            eid, ctx = f"{name}-e{i}", context(i)
            body = {"context": ctx, "actions": ACTIONS, "event_id": eid}
            ranks = race(url, f"/models/{name}/rank", body, f"rank-{eid}", 3)
            assert [r.status_code for r in ranks] == [200] * 3, [r.text for r in ranks]
            answers = [{k: v for k, v in r.json().items() if k != "rewarded"} for r in ranks]
            assert answers[1] == answers[0] and answers[2] == answers[0], answers
            reward = true_reward(ctx, answers[0]["action"])
            body = {"event_id": eid, "reward": reward}
            rewards = race(url, f"/models/{name}/reward", body, f"reward-{eid}", 3)
            assert [r.status_code for r in rewards] == [200] * 3, [r.text for r in rewards]
            versions = {r.json()["version"] for r in rewards}
            assert len(versions) == 1, [r.text for r in rewards]
            t.workers |= {r.headers["x-worker"] for r in ranks + rewards}
            t.events.append(Event(eid, ctx, answers[0], reward, versions.pop()))
        assert len(t.workers) == 2, "one worker answered everything: nothing raced"
        info = check_exactly_once(url, t, n, check_ranks=False)
        assert set(converged(url, name, n).values()) == {info["state_digest"]}
    finally:
        stop_process(proc)
    proc = start_learnserve(port, env, workers=1)
    try:
        again = check_exactly_once(url, t, n, check_ranks=False)
        assert again["state_digest"] == info["state_digest"]
        assert again["evaluation"] == info["evaluation"]
    finally:
        stop_process(proc)
