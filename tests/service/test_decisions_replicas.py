"""Decisions on two service processes over one Redis: ranked on one, rewarded on the
other (and the default reward swept by whichever holds the lease); both hold the same
state, which equals the in-process model fed the same decisions and rewards."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx

from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve_all

BODY = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 14},
        "default_reward": 0.0, "reward_wait_seconds": 1}  # fmt: skip
ACTIONS = [{"id": f"a{i}", "features": {"t": f"t{i % 3}"}} for i in range(12)]


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_two_processes_agree(redis_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "LEARNSERVE_REDIS_URL": redis_url, "LEARNSERVE_DATA_DIR": str(tmp_path)}
    ports = [free_port(), free_port()]
    procs = start_learnserve_all(ports, env)
    try:
        a = httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=60)
        b = httpx.Client(base_url=f"http://127.0.0.1:{ports[1]}", timeout=60)
        assert a.put("/models/dec2", json=BODY).status_code == 201
        rewards: dict[str, float] = {}
        for i in range(30):
            p, q = (a, b) if i % 2 else (b, a)  # alternate who ranks, who rewards
            ctx = {"country": i % 3}
            d = ok(p.post("/models/dec2/rank", json={"context": ctx, "actions": ACTIONS,
                                                      "event_id": f"e{i}"}))  # fmt: skip
            if i % 5 != 4:  # every fifth gets the default reward (0) after a second
                r = float(int(d["action"][1:]) % 3 == i % 3)
                ok(q.post("/models/dec2/reward", json={"event_id": f"e{i}", "reward": r}))
                rewards[f"e{i}"] = r
        infos: list[dict[str, Any]] = []
        for _ in range(100):
            infos = [ok(c.get("/models/dec2")) for c in (a, b)]
            if all(x["rewards_learned"] == 30 for x in infos):
                break
            time.sleep(0.1)
        assert [x["rewards_learned"] for x in infos] == [30, 30]
        assert infos[0]["state_digest"] == infos[1]["state_digest"]
        # the log, as DSJSON, replayed in process: the same state
        log = a.get("/models/dec2/decisions", headers={})
        assert log.status_code == 200, log.text
        a.close()
        b.close()
    finally:
        for proc in procs:
            stop_process(proc)
    from learners.decisions.dsjson import from_dsjson

    recs = [from_dsjson(line) for line in log.text.splitlines()]
    assert len(recs) == 30 and sum(1 for r in recs if r.event_id not in rewards) == 6
    s = Settings(data_dir=str(tmp_path / "unused"))
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(BODY, s))
    for rec in recs:  # one reward per entry: as the service learned them (defaults too)
        ev = {"id": rec.event_id, "ids": [x["_id"] for x in rec.actions], "p": rec.probabilities,
              "a": rec.chosen, "v": 0, "ctx": rec.context, "feat": []}  # fmt: skip
        acts = [{"id": x["_id"], "features": {k: v for k, v in x.items() if k != "_id"}}
                for x in rec.actions]  # fmt: skip
        rows = model.encode_rank({"context": rec.context, "actions": acts}, s).batch
        model.apply(df.reward_entry([(rows, ev)], [float(rec.reward or 0.0)]))
    assert model.state_digest() == infos[0]["state_digest"]
