"""``LinearClassifier.reopen_confidence``: Σ back towards its prior, μ kept (issue #23).

Learned on a9a (binary) and on a 3-label stream, diagonal and full covariance:
amount 0 changes nothing, amount 1 gives the prior exactly (I binary; I/2 for the
first two labels' rows of a multiclass model, I for the others), amounts between move
each entry by that fraction; coordinates never touched keep their value bit for bit;
PA has no Σ (a no-op); the state round-trips through an artifact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners.features import Batch, FeatureSpec
from learners.linear import LinearClassifier, make_classifier
from learners.linear.confidence import prior_scale
from tests.service.test_delayed_labels import a9a


@pytest.fixture(scope="module")
def a9a_head() -> tuple[Batch, list[int]]:
    _, rows, y = a9a("a9a")
    return FeatureSpec.sparse(123).encode(rows[:2000]), y[:2000]


def three_labels(dim: int = 20, n: int = 600) -> tuple[Batch, list[str]]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, dim))
    X[:, dim // 2 :] = 0.0  # the second half of the coordinates is never touched
    y = [("a", "b", "c")[k] for k in np.argmax(X[:, :3], axis=1).tolist()]
    return Batch.from_dense(X), y


def learned(algo: str, cov: str, binary: bool, a9a_head: Any) -> LinearClassifier:
    X, y = a9a_head if binary else three_labels()
    params = {} if algo.startswith("pa") else {"covariance": cov}
    if cov == "full" and binary:  # a9a's 123 coordinates: a small full Σ
        X, y = X.take(np.arange(500)), y[:500]
    clf = make_classifier(algo, X.dim, params)
    clf.update(X, y)
    return clf


@pytest.mark.parametrize("algo", ["arow", "cw", "scw1"])
@pytest.mark.parametrize("cov", ["diagonal", "full"])
@pytest.mark.parametrize("binary", [True, False])
def test_reopen_moves_sigma_to_the_prior_and_keeps_mu(
    algo: str, cov: str, binary: bool, a9a_head: Any
) -> None:
    clf = learned(algo, cov, binary, a9a_head)
    before = clf.state()
    assert before.sigma is not None
    R = before.mu.shape[0]
    assert R == (1 if binary else 3)
    p = prior_scale(R, len(clf.labels_))
    assert p.tolist() == ([1.0] if binary else [0.5, 0.5, 1.0])
    eye = np.eye(clf.dim)
    if cov == "diagonal":
        prior = np.broadcast_to(p[:, None], before.sigma.shape)
    else:
        prior = p[:, None, None] * eye[None]
    assert not np.array_equal(before.sigma, prior)  # it learned something

    clf.reopen_confidence(0.0)
    assert (
        clf.state_digest()
        == LinearClassifier.from_state(algo, clf.dim, clf.params, before).state_digest()
    )

    clf.reopen_confidence(0.25)
    st = clf.state()
    assert np.array_equal(st.mu, before.mu)  # the mean is kept, bit for bit
    assert st.sigma is not None
    assert np.allclose(st.sigma, before.sigma + 0.25 * (prior - before.sigma), rtol=0, atol=1e-15)
    untouched = before.sigma == prior
    assert untouched.any() and np.array_equal(st.sigma[untouched], before.sigma[untouched])
    if cov == "full":
        assert np.array_equal(st.sigma, np.swapaxes(st.sigma, 1, 2))  # still symmetric

    clf.reopen_confidence(1)
    st = clf.state()
    assert (
        st.sigma is not None
        and np.array_equal(st.sigma, prior)
        and np.array_equal(st.mu, before.mu)
    )
    assert clf.n_seen_ == before.n_seen and clf.n_updates_ == before.n_updates
    clone = LinearClassifier.from_bytes(clf.to_bytes())
    assert clone.state_digest() == clf.state_digest()


def test_reopened_model_learns_with_bigger_steps(a9a_head: Any) -> None:
    """After the re-open an example moves μ more than it would have: the point of it."""
    X, y = a9a_head
    one, flipped = X.take(np.arange(1)), [-y[0]]  # the first example, its label flipped
    a = learned("arow", "diagonal", True, a9a_head)
    b = LinearClassifier.from_bytes(a.to_bytes())
    b.reopen_confidence(1.0)
    mu0 = a.state().mu
    a.update(one, flipped)
    b.update(one, flipped)
    step_a = np.abs(a.state().mu - mu0).sum()
    step_b = np.abs(b.state().mu - mu0).sum()
    assert step_b > 5 * step_a > 0


@pytest.mark.parametrize("algo", ["pa", "pa1", "pa2"])
def test_pa_has_nothing_to_reopen(algo: str, a9a_head: Any) -> None:
    clf = learned(algo, "diagonal", True, a9a_head)
    before = clf.state_digest()
    clf.reopen_confidence(1.0)
    assert clf.state_digest() == before
    with pytest.raises(ValueError, match="amount"):
        clf.reopen_confidence(2.0)


@pytest.mark.parametrize("amount", [-0.1, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_bad_amounts_are_refused_before_anything_changes(amount: Any, a9a_head: Any) -> None:
    clf = learned("arow", "diagonal", True, a9a_head)
    before = clf.state_digest()
    with pytest.raises(ValueError, match="amount"):
        clf.reopen_confidence(amount)
    assert clf.state_digest() == before


def test_a_fresh_model_is_at_its_prior() -> None:
    clf = make_classifier("arow", 8)
    digest = clf.state_digest()
    clf.reopen_confidence(0.7)
    assert clf.state_digest() == digest
