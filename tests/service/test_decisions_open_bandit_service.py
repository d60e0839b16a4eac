"""The Open Bandit Dataset sample through the CLI and the service (issue 34): the BTS log
as DSJSON (:func:`learners.decisions.open_bandit.dsjson_records`), then

- ``learnserve evaluate-policy`` on it: the uniform policy's IPS, SNIPS and DR equal the
  in-process estimates (:func:`learners.decisions.open_bandit.estimate` with the CLI's
  reward model, ``item_mean``) exactly;
- ``POST /models/{name}/decisions`` (warm start) of a decision model in a
  ``learnserve serve`` process, read back from ``GET /models/{name}``: the uniform
  policy's IPS and SNIPS equal the in-process ones, and its DR (the model's own reward
  model, AROW on the hashed features) equals the same DSJSON learned by an in-process
  :class:`~service.models.decision.DecisionAdapter`;

and each of these 95 % intervals holds the random log's own click rate (0.0038).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from learners.decisions import open_bandit as obd
from learners.decisions.dsjson import to_dsjson
from service.engine.decision_import import _events
from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.settings import Settings
from tests.service.procs import free_port, stop_process
from tests.service.serving import learnserve_cmd, start_learnserve

DATA = obd.data_dir()
pytestmark = pytest.mark.skipif(
    DATA is None,
    reason="Open Bandit Dataset sample absent (../shared/data/open-bandit or "
    "$LEARNSERVE_SHARED_DATA/open-bandit)",
)
# the reward model named, not the default: the figures in the docs are AROW's
BODY = {
    "algorithm": "decision",
    "features": {"kind": "hashed", "bits": 18},
    "reward_model": {"algorithm": "arow_regression"},
}
CHUNK = 500  # lines a POST: ~9.4 MB, under the default 16 MiB body limit
KINDS = ("ips", "snips", "dr")


@pytest.fixture(scope="module")
def logs() -> dict[str, Any]:
    assert DATA is not None
    bts = obd.load_log(DATA / "bts" / "all.csv")
    items = obd.load_items(DATA / "bts" / "item_context.csv")
    lines = [to_dsjson(r) for r in obd.dsjson_records(bts, items, "obd-bts")]
    random_rate = obd.on_policy(obd.load_log(DATA / "random" / "all.csv")).estimate
    return {"bts": bts, "lines": lines, "random_rate": random_rate}


def _holds(fig: dict[str, float], value: float) -> bool:
    return fig["lo"] <= value <= fig["hi"]


def test_evaluate_policy_cli_equals_in_process(logs: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "bts.dsjson"
    path.write_text("\n".join(logs["lines"]) + "\n", encoding="utf-8")
    out = subprocess.run(
        [*learnserve_cmd(), "evaluate-policy", str(path)], capture_output=True, check=True,
        timeout=300,
    )  # fmt: skip
    got = orjson.loads(out.stdout)["policies"]["uniform"]
    want = obd.estimate(logs["bts"], reward_model="item_mean").summary(0.95)
    for kind in KINDS:
        assert got[kind] == pytest.approx(want[kind], rel=1e-12, abs=0.0), kind
        assert _holds(got[kind], logs["random_rate"]), (kind, got[kind])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    env = {"LEARNSERVE_DATA_DIR": str(tmp_path_factory.mktemp("obd"))}
    port = free_port()
    proc = start_learnserve(port, env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as c:
            yield c
    finally:
        stop_process(proc)


def test_warm_start_through_the_service(
    logs: dict[str, Any], service: httpx.Client, tmp_path: Path
) -> None:
    assert service.put("/models/obd", json=BODY).status_code == 201
    chunks = [logs["lines"][i : i + CHUNK] for i in range(0, len(logs["lines"]), CHUNK)]
    for chunk in chunks:
        r = service.post(
            "/models/obd/decisions",
            content="\n".join(chunk).encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["applied"] == len(chunk)
    info = service.get("/models/obd").json()
    assert info["rewards_learned"] == 10000
    got = info["evaluation"]["uniform"]
    rate = logs["random_rate"]
    for kind in KINDS:
        assert _holds(got[kind], rate), (kind, got[kind], rate)
    # IPS and SNIPS take only the logged probability: the in-process figures
    want = obd.estimate(logs["bts"]).summary(0.95)
    for kind in ("ips", "snips"):
        assert got[kind] == pytest.approx(want[kind], rel=1e-12, abs=0.0), kind
    # DR scores with the model's reward model: the same chunks learned in process
    s = Settings(data_dir=str(tmp_path))
    model = DecisionAdapter.create(DecisionAdapter.normalize_config(BODY, s))
    for chunk in chunks:
        events, rewards, _ = _events(model, s, "\n".join(chunk).encode())
        model.apply(df.reward_entry(events, rewards))
    mine = model.describe()["evaluation"]["uniform"]
    for kind in KINDS:
        assert got[kind] == pytest.approx(mine[kind], rel=1e-12, abs=0.0), kind
    assert info["state_digest"] == model.state_digest()
