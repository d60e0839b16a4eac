"""Export and import of decision models through real HTTP (``GET /models/{name}/state``,
``PUT /models/{other}`` with the artifact).

The copy holds the exported state bit-exact (same ``state_digest``: reward model, ``t``,
mode, agreement, off-policy estimates), ranks as the exported model does (same
``event_id`` and context: the same answer), and both learn the same rewards to the same
digest again; with a hashed and with a records context. Decisions awaiting a reward are
not carried. A challenger's export imports as a standalone decision model. A malformed
decision artifact is a 422 naming the problem, and creates nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from learners.artifact import dumps, loads
from service.settings import Settings
from tests.service.serving import ServerThread
from tests.service.test_decisions_api import actions, ok, rank

OCTETS = {"content-type": "application/octet-stream"}
HASHED = {"algorithm": "decision", "features": {"kind": "hashed", "bits": 12}}
RECORDS = {
    "algorithm": "decision",
    "features": {
        "kind": "records",
        "bits": 12,
        "fields": {
            "age": {"type": "numeric", "transform": {"bins": [25, 40, 60]}},
            "country": {"type": "categorical"},
        },
    },
    "exploration": {"policy": "thompson", "params": {}},
    "seed": 7,
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(data_dir=str(tmp_path_factory.mktemp("decisions-export")))
    with ServerThread(settings) as srv, srv.client() as c:
        yield c


def context(i: int) -> dict[str, Any]:
    return {"country": f"c{i % 2}", "age": 20 + (i * 7) % 50}


def true_reward(ctx: dict[str, Any], action: str) -> float:
    """Users of country c like actions whose number has c's parity."""
    return float(int(action[1:]) % 2 == int(ctx["country"][1:]))


def play(c: httpx.Client, name: str, events: range, rewarded: int, tag: str = "e") -> None:
    """Rank ``events`` (ids ``tag<i>``); reward the first ``rewarded`` of them."""
    acts = actions(6)
    for n, i in enumerate(events):
        a = ok(rank(c, name, context=context(i), actions=acts, event_id=f"{tag}{i}"))
        if n < rewarded:
            r = c.post(
                f"/models/{name}/reward",
                json={"event_id": f"{tag}{i}", "reward": true_reward(context(i), a["action"])},
            )
            assert r.status_code == 200, r.text


def described(c: httpx.Client, name: str) -> dict[str, Any]:
    return ok(c.get(f"/models/{name}"))


def export(c: httpx.Client, name: str) -> bytes:
    r = c.get(f"/models/{name}/state")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["x-state-digest"] == described(c, name)["state_digest"]
    return r.content


def put_artifact(c: httpx.Client, name: str, blob: bytes) -> httpx.Response:
    return c.put(f"/models/{name}", content=blob, headers=OCTETS)


def answers(c: httpx.Client, name: str, ids: range) -> list[dict[str, Any]]:
    """Rank answers (less the model's name, and its version: the copy's log starts at 0)."""
    out = []
    for i in ids:
        a = ok(rank(c, name, context=context(i), actions=actions(6), event_id=f"q{i}"))
        assert a.pop("model") == name and a.pop("version") >= 0
        out.append(a)
    return out


def round_trip(c: httpx.Client, body: dict[str, Any], src: str, copy: str) -> None:
    assert c.put(f"/models/{src}", json=body).status_code == 201
    play(c, src, range(40), rewarded=34)  # 6 decisions left awaiting their reward
    blob = export(c, src)
    before = described(c, src)
    meta = loads(blob).meta
    assert meta["decisions"]["t"] == 34 and meta["service"]["config"]["kind"] == "decision"
    r = put_artifact(c, copy, blob)
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["state_digest"] == before["state_digest"]
    for key in ("rewards_learned", "evaluation", "agreement", "mode", "policy"):
        assert got[key] == before[key], key
    assert got["config"]["decision"] == before["config"]["decision"]
    assert got["config"]["features"] == before["config"]["features"]
    assert put_artifact(c, copy, blob).status_code == 200  # the same artifact: idempotent
    # the same event ids and contexts: the same decisions (same seed, t, scores)
    assert answers(c, src, range(100, 110)) == answers(c, copy, range(100, 110))
    # the awaited decisions stay with the exported model
    r = c.post(f"/models/{copy}/reward", json={"event_id": "e39", "reward": 1.0})
    assert r.status_code == 404, r.text
    # the same rewards learned on both: the same state again
    for i in range(100, 110):
        reward = {"event_id": f"q{i}", "reward": float(i % 3 == 0)}
        for name in (src, copy):
            assert c.post(f"/models/{name}/reward", json=reward).status_code == 200
    after = described(c, src)
    assert after["rewards_learned"] == 44 and after["state_digest"] != before["state_digest"]
    assert described(c, copy)["state_digest"] == after["state_digest"]
    assert answers(c, src, range(200, 205)) == answers(c, copy, range(200, 205))
    # the exported model still takes the rewards of its awaited decisions
    assert c.post(f"/models/{src}/reward", json={"event_id": "e39", "reward": 1.0}).is_success


def test_hashed_round_trip(service: httpx.Client) -> None:
    round_trip(service, HASHED, "dx-src", "dx-copy")


def test_records_round_trip(service: httpx.Client) -> None:
    round_trip(service, RECORDS, "dxr-src", "dxr-copy")


def test_a_challenger_imports_as_a_standalone_model(service: httpx.Client) -> None:
    c = service
    assert c.put("/models/dxl", json=HASHED).status_code == 201
    challenger = {
        **HASHED,
        "follows": "dxl",
        "exploration": {"policy": "epsilon_greedy", "params": {"epsilon": 0.1}},
    }
    assert c.put("/models/dxl-ch", json=challenger).status_code == 201
    play(c, "dxl", range(30), rewarded=30)
    src = described(c, "dxl-ch")
    assert src["rewards_learned"] == 30 and "challenger" in src["evaluation"]
    blob = export(c, "dxl-ch")
    r = put_artifact(c, "dxl-solo", blob)
    assert r.status_code == 201, r.text
    got = r.json()
    assert "follows" not in got["config"] and "challenger" not in got
    assert got["config"]["decision"] == src["config"]["decision"]
    assert got["rewards_learned"] == 30 and got["agreement"] == src["agreement"]
    assert got["evaluation"] == {k: v for k, v in src["evaluation"].items() if k != "challenger"}
    assert got["state_digest"] != src["state_digest"]  # its own estimate is not carried
    # a standalone model: it ranks and learns (a challenger does neither)
    play(c, "dxl-solo", range(30, 33), rewarded=3)
    assert described(c, "dxl-solo")["rewards_learned"] == 33
    # a second import of the same export is the same standalone state
    assert put_artifact(c, "dxl-solo2", blob).json()["state_digest"] == got["state_digest"]


def recrafted(blob: bytes, change: Callable[[dict[str, Any], dict[str, Any]], Any]) -> bytes:
    """The artifact with ``change(arrays, meta)`` applied, written anew (valid checksum)."""
    art = loads(blob)
    arrays = {k: np.array(v) for k, v in art.arrays.items()}
    meta = dict(art.meta)
    kind = change(arrays, meta) or art.kind
    return dumps(kind, art.params, arrays, meta)


def _set(path: str, value: Any) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    """A change setting ``meta[a][b]...`` (the dicts on the way copied)."""

    def change(arrays: dict[str, Any], meta: dict[str, Any]) -> None:
        *way, last = path.split(".")
        d = meta
        for k in way:
            d[k] = dict(d[k])
            d = d[k]
        if value is _DROP:
            del d[last]
        else:
            d[last] = value

    return change


_DROP = object()


def _array(name: str, make: Callable[[np.ndarray], np.ndarray]) -> Callable[..., None]:
    def change(arrays: dict[str, Any], meta: dict[str, Any]) -> None:
        arrays[name] = make(arrays[name])

    return change


def test_malformed_decision_artifacts_are_422s(service: httpx.Client) -> None:
    c = service
    assert c.put("/models/dxm", json=HASHED).status_code == 201
    play(c, "dxm", range(12), rewarded=12)
    blob = export(c, "dxm")
    ope = loads(blob).meta["decisions"]["ope"]
    cases: dict[str, tuple[bytes, str]] = {
        "truncated": (blob[:-10], "truncated"),
        "kind": (recrafted(blob, lambda a, m: "linear"), "kind is 'linear'"),
        "mu-shape": (recrafted(blob, _array("mu", lambda v: v[:-1])), "mu"),
        "mu-2d": (recrafted(blob, _array("mu", lambda v: v.reshape(1, -1))), "mu"),
        "mu-dtype": (
            recrafted(blob, _array("mu", lambda v: v.astype(np.int64))),
            "array 'mu' has dtype int64",
        ),
        "noise-dtype": (
            recrafted(blob, _array("noise", lambda v: v.astype(np.float32))),
            "array 'noise' has dtype float32",
        ),
        "sigma-shape": (recrafted(blob, _array("sigma", lambda v: v[:5])), "sigma"),
        "bits": (recrafted(blob, _set("service.config.features.bits", 14)), "features"),
        "meta-bits": (recrafted(blob, _set("features.bits", 14)), "features"),
        "no-decisions": (recrafted(blob, _set("decisions", _DROP)), "meta.decisions"),
        "no-config": (recrafted(blob, _set("service.config", _DROP)), "meta.service.config"),
        "no-digest": (
            recrafted(blob, _set("service.state_digest", _DROP)),
            "meta.service.state_digest is missing",
        ),
        "reward-algo": (
            recrafted(blob, _set("service.config.decision.reward_algorithm", "pa_regression")),
            "reward_algorithm",
        ),
        "policy": (
            recrafted(blob, _set("service.config.decision.policy", "greedy")),
            "exploration.policy",
        ),
        "t": (recrafted(blob, _set("decisions.t", -1)), "meta.decisions.t"),
        "t-float": (recrafted(blob, _set("decisions.t", 12.0)), "meta.decisions.t"),
        "mode": (recrafted(blob, _set("decisions.mode", "sleeping")), "meta.decisions.mode"),
        "agree": (recrafted(blob, _set("decisions.agree", [3, 5])), "meta.decisions.agree"),
        "ope-missing": (
            recrafted(blob, _set("decisions.ope", {"served": ope["served"]})),
            "meta.decisions.ope",
        ),
        "ope-extra": (
            recrafted(blob, _set("decisions.ope.challenger", ope["served"])),
            "meta.decisions.ope",
        ),
        "ope-type": (
            recrafted(blob, _set("decisions.ope.learned.ips.mean", "0.5")),
            "meta.decisions.ope.learned.ips.mean",
        ),
        "ope-negative": (
            recrafted(blob, _set("decisions.ope.uniform.snips.sw", -1.0)),
            "meta.decisions.ope.uniform.snips.sw",
        ),
        "digest-t": (recrafted(blob, _set("decisions.t", 13)), "meta.service.state_digest"),
        "digest-mu": (
            recrafted(blob, _array("mu", lambda v: v + 1.0)),
            "meta.service.state_digest",
        ),
    }
    for case, (bad, words) in cases.items():
        name = f"dxm-bad-{case}"
        r = put_artifact(c, name, bad)
        assert r.status_code == 422, (case, r.text)
        detail = r.json()["detail"]
        assert detail["field"] == "artifact" and words in detail["message"], (case, detail)
        assert c.get(f"/models/{name}").status_code == 404, case
    # an odd value anywhere: a 422 naming the artifact (or a valid config), never a 500
    odd: list[Any] = ["x", None, -1, [1], {"a": 1}, 1e300, True]
    fields = [
        "policy_params",
        "seed",
        "max_actions",
        "reward_range",
        "weighting",
        "default_reward",
        "reward_wait_seconds",
        "mode",
        "policy",
    ]
    paths = [f"service.config.decision.{f}" for f in fields]
    paths += [
        "service.config.features",
        "service.config.metrics",
        "service.config.drift",
        "service.config.decision",
        "service.config.decision.reward_algorithm",
        "service.config",
        "service",
        "decisions",
        "decisions.ope",
        "decisions.agree",
        "decisions.ope.first",
        "decisions.ope.first.dr",
        "features",
    ]
    for i, (path, value) in enumerate((p, v) for p in paths for v in odd):
        r = put_artifact(c, f"dxm-odd-{i}", recrafted(blob, _set(path, value)))
        assert r.status_code in (201, 422), (path, value, r.text)  # (None: a default)
        if r.status_code == 422:
            assert r.json()["detail"]["field"] == "artifact", (path, value, r.text)
    assert put_artifact(c, "dxm-good", blob).status_code == 201  # the export itself imports
