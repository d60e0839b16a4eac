"""The online regressors (learners.regression): validation, target scaling, the
predictive variance, all-or-nothing updates and artifacts. The contract they share
with every online learner is in test_conformance.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError
from learners.features import Batch, FeatureError, FeatureSpec
from learners.registry import load_model
from learners.regression import (
    ALGORITHMS,
    LinearRegressor,
    NonFiniteWeightsError,
    RegressionState,
    make_regressor,
)
from learners.regression import _artifact as regression_artifact

CASES = [(a, {}) for a in ALGORITHMS] + [("arow", {"covariance": "full"})]
IDS = [f"{a}-{p.get('covariance', 'default')}" for a, p in CASES]


def _linear_stream(n: int = 200, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, -1] = 1.0  # an intercept column
    y = X @ rng.normal(size=d) + rng.normal(scale=0.1, size=n)
    return X, y


def test_algorithms_and_api_names() -> None:
    assert ALGORITHMS == ("pa", "pa1", "pa2", "arow", "sgd")
    reg = make_regressor("arow", 3, {"r": 2.0, "covariance": "diagonal"})
    assert (reg.kind, reg.algorithm, reg.dim) == ("regression", "arow", 3)
    assert reg.params == {"r": 2.0, "covariance": "diagonal"}
    assert reg.features_ is None and reg.feature_names_ is None
    for algo, params in CASES:
        r = make_regressor(algo, 4, params)
        again = make_regressor(r.algorithm, r.dim, r.params)
        assert again.params == r.params and again.state_digest() == r.state_digest()
    assert make_regressor("pa2", 2).params == {"epsilon": 0.1, "C": 1.0}


@pytest.mark.parametrize(
    ("algo", "params", "match"),
    [
        ("pa", {"C": 1.0}, r"params\.C: unknown hyperparameter for pa"),
        ("pa1", {"C": 0.0}, r"params\.C: must be > 0"),
        ("pa2", {"C": True}, r"params\.C: must be a number"),
        ("pa1", {"epsilon": -0.1}, r"params\.epsilon: must be >= 0"),
        ("pa", {"epsilon": float("nan")}, r"params\.epsilon: must be >= 0"),
        ("pa", {"epsilon": "0.1"}, r"params\.epsilon: must be a number"),
        ("arow", {"r": -1.0}, r"params\.r: must be > 0"),
        ("arow", {"covariance": "dense"}, r"params\.covariance: must be 'diagonal' or 'full'"),
        ("arow", {"eta": 0.9}, r"params\.eta: unknown hyperparameter for arow"),
        ("scw1", {}, r"algorithm: must be one of pa, pa1, pa2, arow"),
    ],
)
def test_bad_params_name_the_parameter(algo: str, params: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_regressor(algo, 4, params)


def test_full_covariance_dimension_limit_and_bad_dim() -> None:
    with pytest.raises(ValueError, match=r"params\.covariance: 'full'.*dim <= 4096"):
        make_regressor("arow", 5000, {"covariance": "full"})
    with pytest.raises(ValueError, match="dim: must be a positive integer"):
        make_regressor("pa", 0)


@pytest.mark.parametrize(
    ("bad", "match"),
    [(True, r"labels\[2\]"), ("1.5", r"labels\[2\]"), (None, r"labels\[2\]"),
     (float("nan"), r"labels\[2\]"), (float("-inf"), r"labels\[2\]"), (10**400, r"labels\[2\]")],
)  # fmt: skip
def test_bad_targets_are_refused_naming_the_row(bad: Any, match: str) -> None:
    reg = make_regressor("arow", 2)
    batch = Batch.from_dense(np.ones((3, 2)))
    before = reg.state_digest()
    with pytest.raises(FeatureError, match=match):
        reg.update(batch, [1.0, 2, bad])
    with pytest.raises(FeatureError, match=match):
        reg.check(batch, [1.0, 2, bad])
    with pytest.raises(ValueError, match=r"labels: expected 3 targets"):
        reg.update(batch, [1.0, 2.0])
    with pytest.raises(FeatureError, match=r"labels\[1\]"):
        reg.update(batch, np.array([1.0, np.nan, 2.0]))
    assert reg.state_digest() == before and reg.n_seen_ == 0


@pytest.mark.parametrize(("algo", "params"), CASES, ids=IDS)
def test_predictions_are_invariant_to_the_scale_of_y(algo: str, params: dict[str, Any]) -> None:
    X, y = _linear_stream()
    batch, probe = Batch.from_dense(X), Batch.from_dense(X[:20] + 0.5)
    a, b = make_regressor(algo, 5, params), make_regressor(algo, 5, params)
    ra = a.update(batch, y)
    rb = b.update(batch, y * 1e6 + 1e9)
    assert ra.predicted is not None and rb.predicted is not None
    # from the second row on (the first is predicted 0.0, the mean of no target)
    assert ra.predicted[0] == rb.predicted[0] == 0.0
    np.testing.assert_allclose((rb.predicted[1:] - 1e9) / 1e6, ra.predicted[1:], rtol=1e-6)
    np.testing.assert_allclose((b.predict(probe) - 1e9) / 1e6, a.predict(probe), rtol=1e-6)
    # the weights of the standardised target; SGD's are in y's units (its coef_)
    unit = 1e6 if algo == "sgd" else 1.0
    wa, wb = a.weights_view()[0], b.weights_view()[0]
    np.testing.assert_allclose(wb / unit, wa, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b.coef_ / 1e6, a.coef_, rtol=1e-6, atol=1e-9)
    assert b.y_mean_ == pytest.approx(a.y_mean_ * 1e6 + 1e9, rel=1e-12)
    assert b.y_std_ == pytest.approx(a.y_std_ * 1e6, rel=1e-9)
    if ra.variance is not None:
        assert rb.variance is not None
        np.testing.assert_allclose(rb.variance / 1e12, ra.variance, rtol=1e-6)


@pytest.mark.parametrize(("algo", "params"), CASES, ids=IDS)
def test_first_example_takes_no_step_and_predictions_are_pre_update(
    algo: str, params: dict[str, Any]
) -> None:
    reg = make_regressor(algo, 2, params)
    one = Batch.from_dense(np.array([[1.0, 3.0]]))
    assert reg.predict(one).tolist() == [0.0]  # nothing learned yet: m = 0
    res = reg.update(one, [1e12])
    assert res.predicted is not None and res.predicted.tolist() == [0.0]
    assert res.errors is not None and res.errors.tolist() == [1e12] and res.loss_sum == 1e12
    assert res.updates == 0 and not reg.weights_view()[0].any()  # s == 0: nothing to learn
    assert reg.predict(one).tolist() == [1e12] and reg.y_std_ == 0.0
    res = reg.update(Batch.from_dense(np.array([[1.0, 3.0], [1.0, -1.0]])), [1e12, 2e12 + 7])
    assert res.predicted is not None and res.predicted.tolist() == [1e12, 1e12]
    assert np.isfinite(reg.predict(one)).all() and reg.n_seen_ == 3


@pytest.mark.parametrize(("algo", "params"), CASES, ids=IDS)
def test_nonfinite_step_restores_everything(algo: str, params: dict[str, Any]) -> None:
    X, y = _linear_stream(n=30)
    for dim_extra in (0, 200):  # nnz >= dim (state copied) and nnz < dim (undo log)
        reg = make_regressor(algo, 5 + dim_extra, params)
        Xd = np.hstack([X, np.zeros((30, dim_extra))])
        reg.update(Batch.from_dense(Xd[:20]), y[:20])
        before, stats = reg.state_digest(), (reg.y_mean_, reg.y_std_, reg.n_seen_)
        bad = Xd[20:].copy()
        bad[6, :2] = 1e300  # x·Σx overflows at row 6, after rows that changed the state
        batch = Batch.from_dense(bad)
        assert reg.first_nonfinite_row(batch, y[20:]) == 6
        assert reg.state_digest() == before
        with pytest.raises(NonFiniteWeightsError, match=r"labels\[6\]") as err:
            reg.update(batch, y[20:])
        assert err.value.row == 6 and isinstance(err.value, FloatingPointError | ValueError)
        assert isinstance(err.value, ValueError) and isinstance(err.value, FloatingPointError)
        assert reg.state_digest() == before and (reg.y_mean_, reg.y_std_, reg.n_seen_) == stats
        # a target whose square overflows the statistics
        huge = list(y[20:])
        huge[3] = 1e300
        assert reg.first_nonfinite_row(Batch.from_dense(Xd[20:]), huge) == 3
        with pytest.raises(NonFiniteWeightsError, match=r"labels\[3\]"):
            reg.update(Batch.from_dense(Xd[20:]), huge)
        assert reg.state_digest() == before
        assert reg.first_nonfinite_row(Batch.from_dense(Xd[20:]), y[20:]) is None
        reg.update(Batch.from_dense(Xd[20:]), y[20:])  # still learns
        assert reg.state_digest() != before


def test_check_then_update_equals_update() -> None:
    X, y = _linear_stream(n=50)
    a, b = make_regressor("arow", 5), make_regressor("arow", 5)
    batch = Batch.from_dense(X)
    checked = a.check(batch, y, np.full(50, 0.5))
    assert a.n_seen_ == 0
    a.update(batch, y, np.full(50, 0.5), checked)
    b.update(batch, y, np.full(50, 0.5))
    assert a.state_digest() == b.state_digest()


def test_arow_full_and_diagonal_agree_on_one_hot_features() -> None:
    rng = np.random.default_rng(3)
    cols = rng.integers(0, 6, size=300)
    X = np.eye(6)[cols]
    y = 100.0 * cols + rng.normal(scale=5.0, size=300)
    diag, full = make_regressor("arow", 6), make_regressor("arow", 6, {"covariance": "full"})
    rd, rf = diag.update(Batch.from_dense(X), y), full.update(Batch.from_dense(X), y)
    assert rd.predicted is not None and rf.predicted is not None
    np.testing.assert_allclose(rd.predicted, rf.predicted, rtol=1e-9)
    assert rd.variance is not None and rf.variance is not None
    np.testing.assert_allclose(rd.variance, rf.variance, rtol=1e-9)
    md, sd = diag.weights_view()
    mf, sf = full.weights_view()
    np.testing.assert_allclose(md, mf, rtol=1e-9)
    np.testing.assert_allclose(sd, sf, rtol=1e-9)
    off_diagonal = full.state().sigma - np.diag(sf)  # type: ignore[operator]
    assert np.abs(off_diagonal).max() < 1e-12


@pytest.mark.parametrize("covariance", ["diagonal", "full"])
def test_variance_is_positive_and_shrinks_for_a_repeated_x(covariance: str) -> None:
    reg = make_regressor("arow", 3, {"covariance": covariance})
    X, y = _linear_stream(n=40, d=3, seed=5)
    reg.update(Batch.from_dense(X), y)
    x = Batch.from_dense(np.array([[0.3, -1.2, 1.0]]))
    variances = []
    for _ in range(30):
        _, var = reg.predict_details(x)
        assert var is not None
        variances.append(float(var[0]) / reg.y_std_**2)  # in units of t: c·(xᵀΣx + r)
        reg.update(x, [float(reg.predict(x)[0])])  # learning x again: Σ shrinks along x
    assert all(v > 0.0 for v in variances)
    # c moves too; the part that is Σ's (c·xᵀΣx) must fall
    assert variances[-1] < variances[0]
    lo, hi = reg.interval(x, level=0.9)
    values, var = reg.predict_details(x)
    assert var is not None and lo[0] < values[0] < hi[0]
    np.testing.assert_allclose(hi - values, 1.6448536269514722 * np.sqrt(var), rtol=1e-12)


def test_pa_has_no_variance_or_interval() -> None:
    reg = make_regressor("pa2", 2)
    res = reg.update(Batch.from_dense(np.eye(2)), [1.0, 2.0])
    assert res.variance is None and reg.predict_details(Batch.from_dense(np.eye(2)))[1] is None
    assert reg.weights_view()[1] is None
    with pytest.raises(ValueError, match="interval: pa2 keeps no variance"):
        reg.interval(Batch.from_dense(np.eye(2)))
    with pytest.raises(ValueError, match="level"):
        make_regressor("arow", 2).interval(Batch.from_dense(np.eye(2)), level=1.0)


def test_intercept_from_the_feature_spec() -> None:
    spec = FeatureSpec.dense(1, intercept=True)
    reg = make_regressor("pa1", spec.dim, {"epsilon": 0.0})
    reg.features_ = spec
    x = [[float(i % 7)] for i in range(700)]
    reg.update(spec.encode(x), [2.0 * r[0] - 40.0 for r in x])
    assert reg.predict(spec.encode([[3.0]]))[0] == pytest.approx(-34.0, abs=0.5)


# ---------------------------------------------------------------- artifacts


@pytest.mark.parametrize(("algo", "params"), CASES, ids=IDS)
def test_artifact_round_trip_and_snapshot(algo: str, params: dict[str, Any]) -> None:
    X, y = _linear_stream(n=60)
    reg = make_regressor(algo, 5, params)
    reg.features_ = FeatureSpec.dense(5)
    reg.update(Batch.from_dense(X[:40]), y[:40])
    blob = reg.to_bytes(meta={"source": "test"})
    assert artifact.loads(blob).meta["source"] == "test"
    clone = LinearRegressor.from_bytes(blob)
    same = load_model(blob)
    snap = LinearRegressor.from_bytes(bytes(reg.snapshot()()))
    # a snapshot holds the state when it was taken, whatever is learned before it is
    # written (PA's one-column weights were once a view of the live ones)
    later = reg.snapshot()
    digest = reg.state_digest()
    reg.update(Batch.from_dense(X[40:41]), [float(y[40]) + 10.0])  # (PA moves: a big loss)
    assert LinearRegressor.from_bytes(bytes(later())).state_digest() == digest
    reg = LinearRegressor.from_bytes(blob)
    reg.features_ = FeatureSpec.dense(5)
    rebuilt = LinearRegressor.from_state(reg.algorithm, reg.dim, reg.params, reg.state())
    for other in (clone, same, snap, rebuilt):
        assert type(other) is type(reg) and other.state_digest() == reg.state_digest()
    assert clone.features_ is not None and clone.features_.to_config() == reg.features_.to_config()
    batch = Batch.from_dense(X[40:])
    reg.update(batch, y[40:])
    clone.update(batch, y[40:])
    assert clone.state_digest() == reg.state_digest()
    assert np.array_equal(clone.predict(batch), reg.predict(batch))


def _bad_blob(change: Any, algo: str = "arow") -> bytes:
    reg = make_regressor(algo, 3)
    reg.update(Batch.from_dense(np.eye(3)), [1.0, 2.0, 4.0])
    params, arrays, meta = regression_artifact.parts(reg, reg.state())
    arrays = {k: np.array(v) for k, v in arrays.items()}
    change(params, arrays)
    return artifact.dumps("regression", params, arrays, meta)


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    d[key] = value


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda p, a: _set(a, "mu", np.zeros(4)), "state.mu: shape"),
        (lambda p, a: _set(a, "mu", np.zeros((3, 1))), "state.mu: shape"),
        (lambda p, a: _set(a, "sigma", np.ones((3, 3))), "state.sigma: shape"),
        (lambda p, a: a.pop("sigma"), "state.sigma: shape None"),
        (lambda p, a: a["mu"].__setitem__(1, np.nan), "non-finite"),
        (lambda p, a: a["sigma"].__setitem__(0, 0.0), "sigma: a diagonal covariance must be > 0"),
        (lambda p, a: _set(a, "y_stats", np.zeros(2)), "state.y_stats: shape"),
        (lambda p, a: a["y_stats"].__setitem__(0, -1.0), "counts and squares must be >= 0"),
        (lambda p, a: a["noise"].__setitem__(1, np.inf), "non-finite"),
        (lambda p, a: a.pop("noise"), "no array 'noise'"),
        (lambda p, a: _set(p, "n_seen", -1), "state.n_seen: must be an integer >= 0"),
        (lambda p, a: _set(p, "n_updates", 1.5), "state.n_updates: must be an integer >= 0"),
        (lambda p, a: _set(p, "algorithm", "cw"), "algorithm: must be one of"),
        (lambda p, a: _set(p, "hyperparameters", {"r": 0}), r"params\.r: must be > 0"),
        (lambda p, a: _set(p, "hyperparameters", {"C": 1}), r"params\.C: unknown"),
        (lambda p, a: p.pop("n_seen"), "n_seen"),
    ],
)
def test_malformed_artifacts_are_refused(change: Any, match: str) -> None:
    blob = _bad_blob(change)
    with pytest.raises(ArtifactError, match=match):
        LinearRegressor.from_bytes(blob)


def test_artifact_kind_is_checked() -> None:
    from learners.linear import make_classifier

    clf = make_classifier("arow", 3)
    with pytest.raises(ArtifactError):
        LinearRegressor.from_bytes(clf.to_bytes())
    with pytest.raises(ValueError, match=r"state\.mu: shape"):
        LinearRegressor.from_state("pa", 3, {}, RegressionState(np.zeros(2), None))


def test_large_sparse_dimension() -> None:
    dim = 2**20
    reg = make_regressor("arow", dim)
    spec = FeatureSpec.sparse(dim)
    rng = np.random.default_rng(0)
    rows = [{str(int(j)): 1.0 for j in rng.integers(0, dim, size=5)} for _ in range(200)]
    y = [float(len(r)) for r in rows]
    reg.update(spec.encode(rows), y)
    assert reg.first_nonfinite_row(spec.encode(rows), y) is None
    assert reg.n_seen_ == 200 and np.isfinite(reg.predict(spec.encode(rows))).all()


def test_a_weight_counts_the_target_that_many_times() -> None:
    """The target statistics are weighted: weight k is k repeats of y (Welford)."""
    y = [3.0, -1.0, 10.0, 4.5]
    x = Batch.from_dense(np.ones((4, 1)))
    weighted = make_regressor("arow", 1)
    weighted.update(x, y, [2, 1, 3, 1])
    repeated = make_regressor("arow", 1)
    reps = [3.0, 3.0, -1.0, 10.0, 10.0, 10.0, 4.5]
    repeated.update(Batch.from_dense(np.ones((7, 1))), reps)
    assert weighted.y_mean_ == pytest.approx(np.mean(reps), rel=1e-12)
    assert weighted.y_std_ == pytest.approx(np.std(reps), rel=1e-12)
    assert repeated.y_std_ == pytest.approx(np.std(reps), rel=1e-12)
    assert weighted.state().y_stats[0] == 7.0 and weighted.n_seen_ == 4


def test_warmup_runs_every_kernel() -> None:
    from learners.regression import warmup

    warmup()  # compiled or loaded: no error, and it changes no shared state
    assert make_regressor("arow", 4).n_seen_ == 0
