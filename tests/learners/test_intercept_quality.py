"""The intercept (``FeatureSpec(..., intercept=True)``, a constant feature) on a9a, next
to River's ``PAClassifier(C=1, mode=1)``, which learns an intercept of its own, on the
same order (issue #22).

One pass over a9a (32,561 rows), accuracy on a9a.t (16,281 rows); in file order and in
the order of ``np.random.default_rng(0).permutation``. "rare" is a9a restricted to its
83 features present in fewer than 10% of the training rows (the rule fixed before
any accuracy was measured), which leaves 21.6% of the training rows and 21.4% of the
test rows empty: the case where an intercept matters most. Numbers were measured with
this code (River 0.26.1); the tolerance absorbs floating-point differences only.

PA-I's last iterate swings with the order (a9a, seeds 1-5: 0.76-0.83), so these two
orders are not a verdict. Over seeds 1-5 PA-I with the intercept averages 0.8037 on a9a
against River's 0.8007 (ahead on 4 of 5), but 0.7358 on "rare" against River's 0.7609
(ahead on 2 of 5). The updates differ in two ways (reproduced exactly by a
re-implementation of both, seeds 0-5 on "rare", mean 0.7433 ours, 0.7616 River's):
River leaves the intercept out of the step's norm, ``min(C, loss / |x|^2)``, and does
not learn from an empty row at all (its norm is 0), where the constant feature makes it
``min(C, loss / (|x|^2 + 1))`` and moves the intercept by up to C on every empty row
it gets wrong. Skipping empty rows alone gives 0.7501; River's norm with a step on
empty rows gives 0.7534. The constant feature is kept (it is what CW, AROW and SCW
need, and what VW and LIBLINEAR do); PA-I is not tuned to these numbers.

Reproduce: ``.venv/bin/python -m pytest tests/learners/test_intercept_quality.py -q``
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners.csr_batch import Batch
from learners.features import FeatureSpec
from learners.io.svmlight import read_svmlight
from learners.linear import make_classifier
from tests.conftest import require_data

TOL = 0.002
ALGOS = {"pa1": {"C": 1.0}, "arow": {}, "scw1": {}}

# (data, order) -> algorithm -> (without, with the intercept); and River's PA-I
MEASURED: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    ("a9a", "file"): {"pa1": (0.7577, 0.7492), "arow": (0.8489, 0.8490),
                      "scw1": (0.8494, 0.8494)},
    ("a9a", "shuffled"): {"pa1": (0.8190, 0.8222), "arow": (0.8505, 0.8507),
                          "scw1": (0.8503, 0.8502)},
    ("rare", "file"): {"pa1": (0.7732, 0.7806), "arow": (0.7937, 0.8007),
                       "scw1": (0.7937, 0.7977)},
    ("rare", "shuffled"): {"pa1": (0.7628, 0.7807), "arow": (0.7918, 0.8014),
                           "scw1": (0.7928, 0.7976)},
}  # fmt: skip
RIVER = {
    ("a9a", "file"): 0.7382,
    ("a9a", "shuffled"): 0.8190,
    ("rare", "file"): 0.7542,
    ("rare", "shuffled"): 0.7651,
}

Rows = list[dict[int, float]]


def _rows(X: Batch) -> Rows:
    return [
        dict(zip(X.indices[a:b].tolist(), X.values[a:b].tolist(), strict=True))
        for a, b in zip(X.indptr[:-1], X.indptr[1:], strict=True)
    ]


@pytest.fixture(scope="module")
def data() -> dict[str, tuple[Rows, np.ndarray, Rows, np.ndarray]]:
    train = read_svmlight(require_data("a9a", "a9a"), n_features=123)
    test = read_svmlight(require_data("a9a", "a9a.t"), n_features=123)
    tr, te = _rows(train.X), _rows(test.X)
    ytr, yte = train.y.astype(np.int64), test.y.astype(np.int64)
    rare = np.bincount(train.X.indices, minlength=123) / train.X.n_rows < 0.10
    assert int(rare.sum()) == 83

    def keep(rs: Rows) -> Rows:
        return [{j: v for j, v in r.items() if rare[j]} for r in rs]

    out = {"a9a": (tr, ytr, te, yte), "rare": (keep(tr), ytr, keep(te), yte)}
    empty = np.mean([not r for r in out["rare"][0]]), np.mean([not r for r in out["rare"][2]])
    assert np.round(empty, 3).tolist() == [0.216, 0.214]
    return out


def _ordered(
    data: dict[str, Any], name: str, order: str
) -> tuple[Rows, np.ndarray, Rows, np.ndarray]:
    tr, ytr, te, yte = data[name]
    if order == "shuffled":
        perm = np.random.default_rng(0).permutation(len(tr))
        tr, ytr = [tr[i] for i in perm], ytr[perm]
    return tr, ytr, te, yte


def _encode(spec: FeatureSpec, rs: Rows) -> Batch:
    return spec.encode([{str(j): v for j, v in r.items()} for r in rs])


@pytest.mark.parametrize(("name", "order"), list(MEASURED))
def test_with_and_without_the_intercept(data: dict[str, Any], name: str, order: str) -> None:
    tr, ytr, te, yte = _ordered(data, name, order)
    for algo, params in ALGOS.items():
        got = []
        for intercept in (False, True):
            spec = FeatureSpec.sparse(123, intercept=intercept)
            clf = make_classifier(algo, spec.dim, params)
            clf.update(_encode(spec, tr), ytr)
            got.append(float(np.mean(np.asarray(clf.predict(_encode(spec, te))) == yte)))
        assert got == pytest.approx(MEASURED[(name, order)][algo], abs=TOL), algo
    # the bar: PA-I with the intercept at least River's PA-I (with its own)
    assert MEASURED[(name, order)]["pa1"][1] >= RIVER[(name, order)]


@pytest.mark.parametrize(("name", "order"), list(RIVER))
def test_rivers_pa_on_the_same_order(data: dict[str, Any], name: str, order: str) -> None:
    linear_model = pytest.importorskip("river.linear_model")
    tr, ytr, te, yte = _ordered(data, name, order)
    model = linear_model.PAClassifier(C=1, mode=1)
    for x, y in zip(tr, ytr.tolist(), strict=True):
        model.learn_one(x, y == 1)
    predicted = np.array([1 if model.predict_one(x) else -1 for x in te])
    assert float(np.mean(predicted == yte)) == pytest.approx(RIVER[(name, order)], abs=TOL)
