"""Accuracy of the online linear classifiers on real data, pinned to measured values.

Every run is one pass in file order (deterministic), then accuracy on the test
file. Numbers were measured with this code; the tolerance only absorbs
floating-point differences between platforms. Floors are the issue's targets.

Reproduce: ``.venv/bin/python -m pytest tests/learners/test_quality_linear.py -q -rA``
"""

from __future__ import annotations

import numpy as np
import pytest

from learners.features import Batch
from learners.io.idx import read_mnist
from learners.io.svmlight import read_svmlight
from learners.linear import make_classifier
from tests.conftest import require_data

TOL = 0.002

# one pass over a9a (32,561 rows, 123 binary features), accuracy on a9a.t (16,281 rows)
A9A = {
    ("pa", None): 0.7577,
    ("pa1", None): 0.7577,
    ("pa2", None): 0.7619,
    ("cw", "diagonal"): 0.8030,
    ("arow", "diagonal"): 0.8489,
    ("scw1", "diagonal"): 0.8494,
    ("scw2", "diagonal"): 0.8468,
    ("arow", "full"): 0.8501,
    ("scw1", "full"): 0.8491,
    ("scw2", "full"): 0.8499,
}
A9A_FLOOR = 0.84
A9A_FLOORED = {"cw", "arow", "scw1", "scw2"}


@pytest.fixture(scope="module")
def a9a() -> tuple[Batch, np.ndarray, Batch, np.ndarray]:
    train = read_svmlight(require_data("a9a", "a9a"), n_features=123)
    test = read_svmlight(require_data("a9a", "a9a.t"), n_features=123)
    return train.X, train.y.astype(np.int64), test.X, test.y.astype(np.int64)


def _accuracy(clf, X: Batch, y: np.ndarray) -> float:
    return float(np.mean(np.asarray(clf.predict(X)) == y))


@pytest.mark.parametrize(("algo", "cov"), list(A9A), ids=lambda v: str(v))
def test_a9a_one_pass(a9a, algo: str, cov: str | None) -> None:
    Xtr, ytr, Xte, yte = a9a
    clf = make_classifier(algo, 123, {} if cov is None else {"covariance": cov})
    res = clf.update(Xtr, ytr)
    acc = _accuracy(clf, Xte, yte)
    assert acc == pytest.approx(A9A[(algo, cov)], abs=TOL)
    # the progressive (predict-then-learn) accuracy is in the same range
    assert abs(res.correct / res.applied - acc) < 0.05
    if algo in A9A_FLOORED and algo != "cw":
        assert acc >= A9A_FLOOR


@pytest.mark.xfail(
    strict=True,
    reason=(
        "issue floor not met by any faithful CW: exact full-covariance CW peaks at 0.7985 "
        "(eta 0.53), the diagonal variants at 0.8087 (eta, initial variance, bias, label "
        "sign all tried); CW has no slack and a9a is ~15% inseparable. SCW-I/II, its "
        "soft-margin fix, reach 0.849/0.847. Evidence and reproduction: docs/cw-a9a.md"
    ),
)
def test_a9a_cw_meets_issue_floor(a9a) -> None:
    Xtr, ytr, Xte, yte = a9a
    clf = make_classifier("cw", 123)
    clf.update(Xtr, ytr)
    assert _accuracy(clf, Xte, yte) >= A9A_FLOOR


# MNIST: pixels / 255, one pass over the 60k training images in file order, 10k test
MNIST = {"arow": 0.9007, "scw1": 0.9163, "scw2": 0.9018}


@pytest.fixture(scope="module")
def mnist() -> tuple[Batch, np.ndarray, Batch, np.ndarray]:
    d = require_data("mnist")
    X, y = read_mnist(d, "train")
    Xt, yt = read_mnist(d, "test")
    return Batch.from_dense(X), y, Batch.from_dense(Xt), yt


@pytest.mark.parametrize("algo", list(MNIST))
def test_mnist_one_pass_diagonal(mnist, algo: str) -> None:
    X, y, Xt, yt = mnist
    clf = make_classifier(algo, 784)
    res = clf.update(X, y)
    assert clf.labels_ == [5, 0, 4, 1, 9, 2, 3, 6, 7, 8]  # order of first appearance
    acc = _accuracy(clf, Xt, yt)
    assert acc == pytest.approx(MNIST[algo], abs=TOL)
    assert acc >= 0.90
    assert res.applied == 60_000 and 0.88 < res.correct / res.applied < 0.90


# scikit-learn digits (X / 16), fixed shuffled split: 2/3 train, 1/3 test, seed 0
DIGITS = {
    ("arow", "full"): 0.9666,
    ("scw1", "full"): 0.9132,
    ("scw2", "full"): 0.9482,
    ("cw", "full"): 0.9683,
    ("arow", "diagonal"): 0.9132,
}


@pytest.fixture(scope="module")
def digits() -> tuple[Batch, np.ndarray, Batch, np.ndarray]:
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_digits(return_X_y=True)
    X = X / 16.0
    perm = np.random.default_rng(0).permutation(len(y))
    n_train = 2 * len(y) // 3
    tr, te = perm[:n_train], perm[n_train:]
    return Batch.from_dense(X[tr]), y[tr], Batch.from_dense(X[te]), y[te]


@pytest.mark.parametrize(("algo", "cov"), list(DIGITS), ids=lambda v: str(v))
def test_digits(digits, algo: str, cov: str) -> None:
    Xtr, ytr, Xte, yte = digits
    clf = make_classifier(algo, 64, {"covariance": cov})
    clf.update(Xtr, ytr)
    acc = _accuracy(clf, Xte, yte)
    assert acc == pytest.approx(DIGITS[(algo, cov)], abs=TOL)
    assert acc >= 0.90


def test_full_covariance_helps_arow_on_digits(digits) -> None:
    Xtr, ytr, Xte, yte = digits
    full = make_classifier("arow", 64, {"covariance": "full"})
    diag = make_classifier("arow", 64, {"covariance": "diagonal"})
    full.update(Xtr, ytr)
    diag.update(Xtr, ytr)
    assert _accuracy(full, Xte, yte) > _accuracy(diag, Xte, yte) + 0.03
