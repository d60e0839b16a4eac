"""DSJSON decision logs (learners.decisions.dsjson), and that Vowpal Wabbit reads them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from learners.decisions.dsjson import (
    DecisionRecord,
    DSJSONError,
    from_dsjson,
    read_dsjson,
    to_dsjson,
    write_dsjson,
)
from learners.decisions.explore import SquareCB, decide


def _record(i: int, reward: float | None = 1.0, **kw) -> DecisionRecord:
    actions = [{"item": {"id": f"it{j}", "price": float(j)}} for j in range(5)]
    d = decide(SquareCB(10.0), np.array([0.1, 0.4, 0.3, 0.9, 0.2]), event_id=f"ev-{i}", seed=1)
    return DecisionRecord(
        f"ev-{i}",
        {"user": {"city": "Zürich", "age": 30 + i}},
        actions,
        d.action,
        d.probabilities.tolist(),
        reward,
        "2024-05-01T10:00:00.000Z",
        ranking=d.ranking,
        **kw,
    )


def test_round_trip(tmp_path):
    recs = [
        _record(0),
        _record(1, None),
        _record(2, 0.0, version="v7", skip_learn=True),
        _record(3, -0.5),
    ]
    for rec in recs:
        assert from_dsjson(to_dsjson(rec)) == rec
    assert write_dsjson(tmp_path / "log.json", recs) == 4
    assert list(read_dsjson(tmp_path / "log.json")) == recs


def test_line_layout():
    rec = _record(0, 0.75, version="m1")
    obj = json.loads(to_dsjson(rec))
    k = rec.chosen
    assert obj["_label_cost"] == -0.75 and obj["_labelIndex"] == k and obj["_label_Action"] == k + 1
    assert obj["_label_probability"] == rec.probabilities[k]
    assert obj["a"][0] == k + 1 and sorted(obj["a"]) == [1, 2, 3, 4, 5]
    assert obj["p"] == [rec.probabilities[a - 1] for a in obj["a"]]
    assert obj["o"] == [{"v": 0.75, "EventId": "ev-0"}]
    assert obj["c"]["_multi"][2] == {"item": {"id": "it2", "price": 2.0}}
    assert obj["Version"] == "1" and obj["VWState"] == {"m": "m1"} and obj["EventId"] == "ev-0"
    unrewarded = json.loads(to_dsjson(_record(0, None)))
    assert not any(key.startswith("_label") for key in unrewarded) and "o" not in unrewarded


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda o: o.update(p=o["p"][:-1]), "a, p"),
        (lambda o: o.update(p=[0.5] * 5), "sum"),
        (lambda o: o.update(_labelIndex=7), "_labelIndex"),
        (lambda o: o.update(_label_probability=0.001), "_label_probability"),
        (lambda o: o["c"].pop("_multi"), "_multi"),
        (lambda o: o.update(a=[1, 1, 2, 3, 4]), "a: must list"),
        (lambda o: o.pop("EventId"), "EventId"),
    ],
)
def test_bad_lines_name_the_field(change, field):
    obj = json.loads(to_dsjson(_record(0)))
    change(obj)
    with pytest.raises(DSJSONError, match=field):
        from_dsjson(json.dumps(obj))


def test_vowpalwabbit_reads_what_we_write():
    vw = pytest.importorskip("vowpalwabbit")
    ws = vw.Workspace("--cb_explore_adf --dsjson --quiet --random_seed 1")
    try:
        rec = _record(0, 1.0)
        examples = ws.parse(to_dsjson(rec))
        assert len(examples) == 1 + len(rec.actions)  # the shared example, then one per action
        costs = [[(c.cost, c.probability) for c in ex.get_label().costs] for ex in examples[1:]]
        for j, c in enumerate(costs):
            if j == rec.chosen:
                assert c == [pytest.approx((-1.0, rec.probability), rel=1e-6)]
            else:
                assert c == []
        ws.finish_example(examples)
        # and learns from them: action 3 always pays, the others never
        for i in range(300):
            r = _record(i, None)
            r.reward = 1.0 if r.chosen == 3 else 0.0
            ex = ws.parse(to_dsjson(r))
            ws.learn(ex)
            ws.finish_example(ex)
        ex = ws.parse(to_dsjson(_record(999, None)))
        pmf = ws.predict(ex)
        ws.finish_example(ex)
        assert int(np.argmax(pmf)) == 3
    finally:
        ws.finish()
