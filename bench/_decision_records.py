"""The ``adult-records`` set of ``bench/decisions.py``: the raw Adult census rows as a
2-action bandit with a raw-record context (``"features": {"kind": "records", ...}``,
:mod:`service.models.decision_records`), through HTTP, with its in-process twin.

The rows, the fields and the model are those of
``tests/service/test_decisions_records.py::test_adult_as_a_two_action_bandit_beats_the_majority_class``
(ages, years of education and hours binned, capital gain and loss log1p, every other
column categorical, fnlwgt left out; ``bits`` 18, ``reward_range`` [0, 1]; the actions
``"<=50K"`` and ``">50K"`` without features; event ids ``e<i>``): row ``i`` is ranked,
then rewarded 1 if the chosen action is the row's class (else 0), before row ``i + 1``.
The twin is a :class:`~service.models.decision.DecisionAdapter` of the config the
server reports, fed the same rows in process as the test does: its progressive reward and
``state_digest`` must equal the server's (an ``AssertionError`` otherwise). VW gets the
same rows in the same order as the ``adult`` set's named features.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from service.models import decision_features as df
from service.models.decision import DecisionAdapter
from service.settings import Settings
from tests.service.test_decisions_records import ADULT_FIELDS, adult_records

ACTIONS = [{"id": "<=50K"}, {"id": ">50K"}]


def body(exploration: dict[str, Any], reward_model: str) -> dict[str, Any]:
    out: dict[str, Any] = {"algorithm": "decision", "reward_range": [0, 1],
                           "features": {"kind": "records", "bits": 18, "fields": ADULT_FIELDS},
                           "reward_model": {"algorithm": reward_model}}  # fmt: skip
    if exploration:
        out["exploration"] = exploration
    return out


def through_http(c: httpx.Client, name: str, rows: list[tuple[dict[str, Any], bool]]) -> float:
    total = 0.0
    for i, (rec, rich) in enumerate(rows):
        r = c.post(f"/models/{name}/rank",
                   json={"context": rec, "actions": ACTIONS, "event_id": f"e{i}"})  # fmt: skip
        assert r.status_code == 200, r.text
        reward = float((r.json()["action"] == ">50K") == rich)
        total += reward
        r = c.post(f"/models/{name}/reward", json={"event_id": f"e{i}", "reward": reward})
        assert r.status_code == 200, r.text
    return total / len(rows)


def in_process(
    config: dict[str, Any], rows: list[tuple[dict[str, Any], bool]]
) -> tuple[float, str]:
    """The twin: the progressive reward and the state digest of the same rows in process."""
    settings = Settings(data_dir="/tmp/unused")
    model = DecisionAdapter.create(config)
    total = 0.0
    for i, (rec, rich) in enumerate(rows):
        answer, record = model.rank({"context": rec, "actions": ACTIONS}, settings, f"e{i}", 0)
        r = float((answer["action"] == ">50K") == rich)
        total += r
        model.apply(df.reward_entry([df.decode_event(record, model.spec.dim)], [r]))
    return total / len(rows), model.state_digest()


def bakeoff(
    c: httpx.Client,
    put: Callable[[httpx.Client, str, dict[str, Any]], None],
    n: int,
    runs: list[tuple[str, dict[str, Any], str]],
) -> tuple[int, dict[str, float]] | None:
    """``(rows, figures)`` of each ``(label, exploration, reward model)`` run, each
    checked against its twin; None without the data."""
    rows = adult_records(n if n > 0 else -1)
    if rows is None:
        print("skipping adult-records: adult-raw/adult.data not found", file=sys.stderr)
        return None
    figures: dict[str, float] = {}
    for label, exploration, rm in runs:
        name = f"adult-records-{len(figures)}"
        put(c, name, body(exploration, rm))
        t0 = time.perf_counter()
        ours = through_http(c, name, rows)
        info = c.get(f"/models/{name}").json()
        twin, digest = in_process(info["config"], rows)
        assert ours == twin and info["state_digest"] == digest, (label, ours, twin)
        figures[f"learnserve {label}"] = ours
        print(f"adult-records {label}: {ours:.4f} = in process ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr)  # fmt: skip
    return len(rows), figures
