"""``first_nonfinite_row``: the O(nnz) dry run on the batch's support agrees with a real
``update`` (on a copy) about whether, and at which row, the weights would overflow;
and it never changes the model."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from learners.features import Batch
from learners.linear import (
    ALGORITHMS,
    LinearClassifier,
    NonFiniteWeightsError,
    first_nonfinite_row,
    make_classifier,
)

DIM = 40


def _batch(rng: np.random.Generator, n: int, dense: bool = False) -> Batch:
    X = np.zeros((n, DIM))
    for i in range(n):
        k = DIM if dense else int(rng.integers(1, 6))
        cols = rng.choice(DIM, size=k, replace=False)
        mags = 10.0 ** rng.uniform(-300, 308, size=cols.size) if rng.random() < 0.3 else 1.0
        X[i, cols] = rng.choice([-1.0, 1.0], size=cols.size) * mags * rng.random(cols.size)
    return Batch.from_dense(X)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse-rows", "dense-rows"])
@pytest.mark.parametrize("covariance", ["diagonal", "full"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_dry_run_predicts_update_exactly(algorithm: str, covariance: str, dense: bool) -> None:
    """Sparse rows take the support projection; dense rows (a batch touching every
    coordinate) the whole-state copy."""
    rng = np.random.default_rng(zlib.crc32(f"{algorithm}/{covariance}/{dense}".encode()))
    params = {} if algorithm.startswith("pa") else {"covariance": covariance}
    if algorithm.startswith("pa") and covariance == "full":
        pytest.skip("PA keeps no covariance")
    clf = make_classifier(algorithm, DIM, params)
    refused = accepted = 0
    for _ in range(40):
        batch = _batch(rng, int(rng.integers(1, 6)), dense)
        labels = rng.choice(["a", "b", "c", 7], size=batch.n_rows).tolist()
        labels = [int(v) if v == "7" else v for v in labels]
        # importance weights from 1e-3 to 1e300 on half the batches: the dry run runs them too
        w = 10.0 ** rng.uniform(-3, 300, batch.n_rows) if rng.random() < 0.5 else None
        before = clf.state_digest()
        predicted = first_nonfinite_row(clf, batch, labels, w)
        assert clf.state_digest() == before  # the dry run changes nothing
        twin = LinearClassifier.from_bytes(clf.to_bytes())
        try:
            twin.update(batch, labels, w)
            actual = None
        except NonFiniteWeightsError as e:
            actual = e.row
        assert predicted == actual
        if actual is None:
            clf.update(batch, labels, w)
            accepted += 1
        else:
            refused += 1
    assert accepted and refused  # both outcomes were exercised
