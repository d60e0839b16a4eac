"""LLSVM: API, artifacts, input validation, and pinned quality on real data."""

from __future__ import annotations

import numpy as np
import pytest

from learners.artifact import ArtifactError, dumps, loads
from learners.features import Batch, FeatureError
from learners.llsvm import LLSVM
from learners.registry import load_model
from tests.conftest import require_data


def _rings(n=600, seed=0):
    """Two concentric rings plus a blob: not linearly separable, easy locally."""
    rng = np.random.default_rng(seed)
    r = np.concatenate([rng.uniform(0, 0.3, n // 3), rng.uniform(0.6, 0.8, n // 3),
                        rng.uniform(1.1, 1.3, n - 2 * (n // 3))])  # fmt: skip
    a = rng.uniform(0, 2 * np.pi, n)
    X = np.c_[r * np.cos(a), r * np.sin(a)] + 1.5
    y = np.repeat(np.array(["inner", "middle", "outer"]), [n // 3, n // 3, n - 2 * (n // 3)])
    return X, y


@pytest.fixture(scope="module")
def rings_model():
    X, y = _rings()
    # Row normalisation would map every 2-d point onto the unit circle: off here.
    model = LLSVM(n_anchors=20, n_neighbours=4, passes=8, seed=1, normalize=False)
    return model.fit(X, y), X, y


@pytest.fixture(scope="module")
def digits():
    sk = pytest.importorskip("sklearn.datasets")
    ms = pytest.importorskip("sklearn.model_selection")
    X, y = sk.load_digits(return_X_y=True)
    return ms.train_test_split(X / 16.0, y, test_size=0.3, random_state=0, stratify=y)


# --------------------------------------------------------------------------- behaviour


def test_learns_a_nonlinear_problem_with_string_labels(rings_model):
    model, X, y = rings_model
    pred = model.predict(X)
    assert pred.dtype.kind == "U" and set(pred) <= {"inner", "middle", "outer"}
    assert np.mean(pred == y) > 0.95
    assert model.classes_.tolist() == ["inner", "middle", "outer"]
    assert model.n_features_ == 2
    assert model.decision_function(X[:5]).shape == (5, 3)
    # A linear model cannot separate rings: the local models are doing the work.
    assert len(model.history_) == 8 and model.history_[-1]["train_error"] < 0.1


def test_int_labels_come_back_as_ints_and_batch_input_matches_dense(rings_model):
    _, X, y = rings_model
    yi = np.searchsorted(np.unique(y), y) * 7 - 3  # -3, 4, 11
    m = LLSVM(n_anchors=12, n_neighbours=3, passes=3, normalize=False).fit(X, yi)
    pred = m.predict(X)
    assert pred.dtype == np.int64 and set(pred.tolist()) <= {-3, 4, 11}
    np.testing.assert_array_equal(m.decision_function(Batch.from_dense(X)), m.decision_function(X))


def test_same_seed_same_model_and_progress_called(rings_model):
    X, y = _rings(300, seed=5)
    calls = []
    a = LLSVM(n_anchors=10, n_neighbours=3, passes=3, seed=3).fit(
        X, y, progress=lambda p, m: calls.append((p, sorted(m)))
    )
    b = LLSVM(n_anchors=10, n_neighbours=3, passes=3, seed=3).fit(X, y)
    c = LLSVM(n_anchors=10, n_neighbours=3, passes=3, seed=4).fit(X, y)
    np.testing.assert_array_equal(a.W_, b.W_)
    assert not np.array_equal(a.anchors_, c.anchors_)
    assert calls == [(p, ["hinge_loss", "seconds", "train_error"]) for p in range(3)]


def test_local_coordinates_sum_to_one(rings_model):
    model, X, _ = rings_model
    idx, gam = model.local_coordinates(X[:50])
    assert idx.shape == gam.shape == (50, 4)
    np.testing.assert_allclose(gam.sum(axis=1), 1.0)
    assert np.all(idx < model.anchors_.shape[0])


@pytest.mark.parametrize("opts", [
    {"weighting": "inverse", "anchors": "kmeans", "multiclass": "crammer_singer"},
    {"weighting": "exponential", "beta": 2.0, "fit_bias": True, "average": False},
])  # fmt: skip
def test_every_option_learns(opts):
    X, y = _rings(450, seed=2)
    m = LLSVM(n_anchors=15, n_neighbours=3, passes=6, normalize=False, **opts).fit(X, y)
    assert m.score(X, y) > 0.9


# --------------------------------------------------------------------------- artifacts


def test_artifact_round_trip_identical(rings_model, tmp_path):
    model, X, _ = rings_model
    model.meta_ = {"input_scale": 1.0}
    path = tmp_path / "m.lsart"
    model.save(path)
    back = LLSVM.load(path)
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    assert back.get_params() == model.get_params()
    assert back.meta_ == {"input_scale": 1.0}
    via_registry = load_model(path.read_bytes())
    assert isinstance(via_registry, LLSVM) and via_registry.kind == "llsvm"
    assert loads(path.read_bytes()).params["classes"] == ["inner", "middle", "outer"]


def test_int_classes_round_trip(rings_model):
    _, X, y = rings_model
    m = LLSVM(n_anchors=6, n_neighbours=2, passes=1, normalize=False)
    m.fit(X, (y == "inner").astype(int))
    back = LLSVM.from_bytes(m.to_bytes())
    assert back.classes_.dtype == np.int64 and back.classes_.tolist() == [0, 1]
    np.testing.assert_array_equal(back.predict(X), m.predict(X))


def test_truncated_corrupt_and_wrong_kind_refused(rings_model):
    model, _, _ = rings_model
    blob = model.to_bytes()
    with pytest.raises(ArtifactError, match="truncated"):
        LLSVM.from_bytes(blob[:-100])
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(ArtifactError, match="checksum"):
        LLSVM.from_bytes(bytes(bad))
    with pytest.raises(ArtifactError, match="expected 'llsvm'"):
        LLSVM.from_bytes(dumps("fastxml", {}, {}))


def test_inconsistent_artifact_contents_refused(rings_model):
    model, _, _ = rings_model
    art = loads(model.to_bytes())
    arrays = dict(art.arrays)
    arrays["W"] = arrays["W"][:, :1]  # wrong feature count
    with pytest.raises(ArtifactError, match="inconsistent shapes"):
        LLSVM.from_bytes(dumps("llsvm", art.params, arrays))
    params = {**art.params, "classes": ["inner", 2, "outer"]}
    with pytest.raises(ArtifactError, match="classes"):
        LLSVM.from_bytes(dumps("llsvm", params, art.arrays))
    params = {k: v for k, v in art.params.items() if k != "n_features"}
    with pytest.raises(ArtifactError, match="bad params"):
        LLSVM.from_bytes(dumps("llsvm", params, art.arrays))
    params = {**art.params, "n_neighbours": 0}
    with pytest.raises(ArtifactError, match="bad params"):
        LLSVM.from_bytes(dumps("llsvm", params, art.arrays))


# --------------------------------------------------------------------------- validation


def test_bad_inputs_raise_clear_errors(rings_model):
    model, X, _ = rings_model
    with pytest.raises(FeatureError, match="has 3 features, the model expects 2"):
        model.predict(np.ones((4, 3)))
    Xn = X[:5].copy()
    Xn[3, 1] = np.nan
    with pytest.raises(FeatureError, match=r"X\[3\].*NaN"):
        model.predict(Xn)
    with pytest.raises(FeatureError, match="2-dimensional"):
        model.predict(X[0])
    with pytest.raises(FeatureError, match="no examples"):
        model.predict(np.zeros((0, 2)))
    with pytest.raises(FeatureError, match="has 5 features"):
        model.predict(Batch.from_dense(np.ones((2, 5))))
    with pytest.raises(FeatureError, match=r"X\[1\]"):
        LLSVM(n_anchors=2, n_neighbours=1).fit([[1.0, 2.0], [np.inf, 1.0], [0.0, 1.0]], [0, 1, 0])
    with pytest.raises(RuntimeError, match="not fitted"):
        LLSVM().predict(X)


def test_bad_labels_and_sizes():
    X = np.random.default_rng(0).random((20, 2))
    with pytest.raises(ValueError, match="20 labels"):
        LLSVM(n_anchors=2, n_neighbours=1).fit(X, [0, 1])
    with pytest.raises(ValueError, match="non-integer"):
        LLSVM(n_anchors=2, n_neighbours=1).fit(X, np.linspace(0, 1, 20))
    with pytest.raises(ValueError, match="at least 2 classes"):
        LLSVM(n_anchors=2, n_neighbours=1).fit(X, np.zeros(20, int))
    with pytest.raises(ValueError, match="exceeds the 20 examples"):
        LLSVM(n_anchors=30, n_neighbours=1).fit(X, np.arange(20) % 2)
    tiny = np.r_[np.zeros(19, int), 1]  # per-class k-means: class 1 has one row
    with pytest.raises(ValueError, match="only 3 anchors could be placed"):
        LLSVM(n_anchors=4, n_neighbours=4).fit(X, tiny)
    y = np.arange(20) % 2
    assert LLSVM(n_anchors=4, n_neighbours=2, passes=1).fit(
        X, y.astype(float)
    ).classes_.tolist() == [0, 1]


@pytest.mark.parametrize(("kw", "msg"), [
    ({"n_anchors": 0}, "n_anchors"), ({"n_neighbours": 9, "n_anchors": 8}, "must not exceed"),
    ({"lam": 0.0}, "lam"), ({"lam": float("nan")}, "lam"), ({"t0": -1.0}, "t0"),
    ({"skip": 0}, "skip"), ({"passes": 1.5}, "passes"), ({"weighting": "gauss"}, "weighting"),
    ({"multiclass": "ovo"}, "multiclass"), ({"anchors": "random"}, "anchors"),
    ({"beta": -1.0}, "beta"), ({"fit_bias": 1}, "fit_bias"), ({"normalize": "yes"}, "normalize"),
])  # fmt: skip
def test_hyperparameters_validated(kw, msg):
    """Stored unchanged by __init__ (scikit-learn's rule); check_params() and fit refuse
    them, naming the parameter."""
    model = LLSVM(**kw)
    assert all(model.get_params()[k] is v for k, v in kw.items())
    with pytest.raises(ValueError, match=msg):
        model.check_params()
    with pytest.raises(ValueError, match=msg):
        model.fit(np.eye(20), np.arange(20) % 2)


# --------------------------------------------------------------------------- quality


def test_digits_defaults_beat_linear(digits):
    """scikit-learn digits (pixels/16), 70/30 stratified split, all defaults.

    Measured: 0.9796 (LinearSVC 0.9704, RBF SVC C=10 0.9944 on the same split).
    """
    Xtr, Xte, ytr, yte = digits
    acc = LLSVM().fit(Xtr, ytr).score(Xte, yte)
    assert acc == pytest.approx(0.9796, abs=0.006)
    assert acc >= 0.975


def _river_split(name):
    """A dataset shipped inside river, 70/30 stratified split, min-max scaled on train."""
    datasets = pytest.importorskip("river.datasets")
    ms = pytest.importorskip("sklearn.model_selection")
    rows = list(getattr(datasets, name)())
    keys = list(rows[0][0])
    X = np.array([[x[k] for k in keys] for x, _ in rows], dtype=float)
    y = np.array([str(label) for _, label in rows])
    Xtr, Xte, ytr, yte = ms.train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    lo, hi = Xtr.min(axis=0), Xtr.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (Xtr - lo) / span, np.clip((Xte - lo) / span, 0, 1), ytr, yte


def test_image_segments_defaults_beat_linear():
    """UCI image segmentation (river's ImageSegments: 2,310 x 18, 7 classes), a
    letters-like data set. Measured: 0.9394 (LinearSVC 0.9062, RBF SVC 0.9639)."""
    Xtr, Xte, ytr, yte = _river_split("ImageSegments")
    acc = LLSVM().fit(Xtr, ytr).score(Xte, yte)
    assert acc == pytest.approx(0.9394, abs=0.006)
    assert acc >= 0.925


def test_bananas_needs_normalize_off():
    """2-d bananas (5,300 points): the row length is information here, so unit-norm
    rows (the default, best on images) must be switched off. Measured: 0.8855 with
    normalize=False (RBF SVC 0.8962, LinearSVC 0.5358), 0.6189 with the default."""
    Xtr, Xte, ytr, yte = _river_split("Bananas")
    acc = LLSVM(normalize=False).fit(Xtr, ytr).score(Xte, yte)
    assert acc == pytest.approx(0.8855, abs=0.006)
    assert LLSVM().fit(Xtr, ytr).score(Xte, yte) < 0.7


def _mnist():
    require_data("mnist", "train-images-idx3-ubyte.gz")
    from learners.io.idx import read_mnist

    d = require_data("mnist")
    return read_mnist(d, "train"), read_mnist(d, "test")


def test_mnist_subset_defaults():
    """First 20,000 MNIST training images, defaults, full test set. Measured: 3.26 % error."""
    (X, y), (Xt, yt) = _mnist()
    err = 1.0 - LLSVM().fit(X[:20000], y[:20000]).score(Xt, yt)
    assert err == pytest.approx(0.0326, abs=0.003)
    assert err <= 0.036


@pytest.mark.slow
@pytest.mark.parametrize(("k", "pinned", "floor"), [(12, 0.0189, 0.020), (8, 0.0202, 0.0215)])
def test_mnist_full(k, pinned, floor):
    """All 60,000 images, 100 anchors, 10 passes; the paper reports 1.85 %.

    Measured: 1.89 % with 12 neighbours (meets the 2.0 % bar), 2.02 % with the
    default 8.
    """
    (X, y), (Xt, yt) = _mnist()
    err = 1.0 - LLSVM(n_neighbours=k).fit(X, y).score(Xt, yt)
    assert err == pytest.approx(pinned, abs=0.0015)
    assert err <= floor


@pytest.mark.parametrize(
    "module", ["learners.llsvm", "learners.llsvm.model", "learners.llsvm.kmeans"]
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_rows_of_huge_or_tiny_values_are_still_scaled_to_unit_norm() -> None:
    """A sum of squares that overflows (1e200) or underflows (1e-200) must not turn a row
    into zeros or leave it unscaled: it scores as the same row at an ordinary scale."""
    from learners.features import Batch
    from learners.llsvm.model import _unit_rows

    v = np.array([1e200, 0.0, 1.0, 3.0, 4.0, 1e-200, 2e-200, 0.0])
    b = Batch(np.array([0, 3, 5, 7, 8]), np.array([0, 1, 2, 0, 1, 0, 1, 0]), v, 3)
    out = _unit_rows(b).values
    np.testing.assert_allclose(out[:3], [1.0, 0.0, 1e-200])
    np.testing.assert_allclose(out[3:5], [0.6, 0.8])
    np.testing.assert_allclose(out[5:7], [1 / np.sqrt(5), 2 / np.sqrt(5)])
    assert out[7] == 0.0
    assert np.all(np.isfinite(out))
