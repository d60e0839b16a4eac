"""FastXML: the L1 solver against LIBLINEAR, routing/prediction against an oracle,
artifacts, and input validation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError
from learners.features import Batch
from learners.registry import load_model
from learners.xml import FastXML, fit_l1_logistic
from learners.xml.l1_logistic import l1_logistic_objective

# --------------------------------------------------------------------------- L1 solver


def _l1_problem(seed=0, n=200, d=30):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=d, n_informative=6, random_state=seed)
    X[np.abs(X) < 0.7] = 0.0  # sparse input, like FastXML's
    return X, np.where(y == 1, 1, -1)


@pytest.mark.parametrize("C", [0.05, 0.5, 5.0])
def test_l1_solver_matches_liblinear(C):
    from sklearn.linear_model import LogisticRegression

    X, y = _l1_problem()
    B = Batch.from_dense(X)
    ours = fit_l1_logistic(B, y, C=C, tol=1e-8, max_newton_iter=300, max_inner_iter=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = LogisticRegression(
            penalty="l1", solver="liblinear", C=C, tol=1e-10, max_iter=100000, intercept_scaling=1.0
        ).fit(X, y)
    ref_obj = l1_logistic_objective(B, y, ref.coef_[0], ref.intercept_[0], C=C)
    assert ours.objective == pytest.approx(ref_obj, rel=1e-7)
    assert ours.objective <= ref_obj * (1 + 1e-9)
    # same support, up to coefficients that are numerically zero in either
    big = 1e-4
    assert np.array_equal(np.abs(ours.coef) > big, np.abs(ref.coef_[0]) > big)
    assert ours.coef == pytest.approx(ref.coef_[0], abs=1e-4)
    # and the FastXML defaults (tol 0.01, 10 Newton steps) land close to the optimum
    quick = fit_l1_logistic(B, y, C=C)
    assert quick.objective <= ref_obj * 1.01


def test_l1_solver_uses_per_example_weights():
    X, y = _l1_problem(1)
    B = Batch.from_dense(X)
    C = np.where(y > 0, 3.0, 0.5)
    fit = fit_l1_logistic(B, y, C=C, tol=1e-8, max_newton_iter=300, max_inner_iter=100)
    # duplicating rows by weight would be the same problem; check stationarity instead:
    # the minimum-norm subgradient of the objective vanishes at the solution.
    s = X @ fit.coef + fit.intercept
    p = 1.0 / (1.0 + np.exp(y * s))
    g = -(X.T @ (C * y * p))
    w = fit.coef
    at_zero = np.maximum(np.abs(g) - 1, 0)
    viol = np.where(w > 0, np.abs(g + 1), np.where(w < 0, np.abs(g - 1), at_zero))
    assert viol.max() < 1e-4


def test_l1_solver_rejects_bad_labels():
    B = Batch.from_dense(np.eye(3))
    with pytest.raises(ValueError, match=r"\+1 and -1"):
        fit_l1_logistic(B, np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="C must be positive"):
        fit_l1_logistic(B, np.array([1, -1, 1]), C=0.0)


# --------------------------------------------------------------------------- data


def _toy(seed=0, n=300, d=20, n_labels=12):
    """Labels determined by which region of feature space a point falls in."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d)) * (rng.random((n, d)) < 0.4)
    centers = rng.random((n_labels, d))
    Y = []
    for x in X:
        dist = ((centers - x) ** 2).sum(axis=1)
        Y.append(sorted(np.argsort(dist)[: rng.integers(1, 4)].tolist()))
    return Batch.from_dense(X), Y


@pytest.fixture(scope="module")
def fitted():
    X, Y = _toy()
    return FastXML(n_trees=6, max_leaf=8, seed=3).fit(X, Y, n_labels=12), X, Y


def _oracle_predict(model, X, k):
    """Route with plain Python over the flat forest; average leaf distributions."""
    f = model.forest_
    dense = X.to_dense()
    labels, scores = [], []
    for x in dense:
        acc = {}
        for root in f["roots"]:
            node = int(root)
            while f["child_pos"][node] >= 0:
                a, b = f["w_ptr"][node], f["w_ptr"][node + 1]
                s = f["intercept"][node] + sum(
                    f["w_val"][q] * x[f["w_idx"][q]] for q in range(a, b)
                )
                node = int(f["child_pos"][node] if s >= 0 else f["child_neg"][node])
            for q in range(f["leaf_ptr"][node], f["leaf_ptr"][node + 1]):
                lab = int(f["leaf_lab"][q])
                acc[lab] = acc.get(lab, 0.0) + f["leaf_val"][q]
        best = sorted(acc, key=lambda lab: (-acc[lab], lab))[:k]
        labels.append(best + [-1] * (k - len(best)))
        scores.append([acc[lab] / len(f["roots"]) for lab in best] + [0.0] * (k - len(best)))
    return np.array(labels), np.array(scores)


def test_prediction_matches_plain_routing(fitted):
    model, X, _ = fitted
    labels, scores = model.predict_topk(X, k=5)
    want_l, want_s = _oracle_predict(model, X, 5)
    assert labels.dtype == np.int64 and scores.dtype == np.float64
    assert np.array_equal(labels, want_l)
    np.testing.assert_allclose(scores, want_s, rtol=1e-12)
    leaves = model.apply(X)
    assert leaves.shape == (X.n_rows, 6)
    assert np.all(model.forest_["child_pos"][leaves] == -1)


def test_batch_and_point_by_point_routing_agree_bit_for_bit(fitted):
    model, X, _ = fitted
    assert X.n_rows >= model._BATCH_ROUTING_MIN  # one call takes the node-by-node path
    lb, sb = model.predict_topk(X, k=7)
    for i in range(0, X.n_rows, 7):  # one-row calls take the point-by-point path
        li, si = model.predict_topk(X.take([i]), k=7)
        assert np.array_equal(li[0], lb[i]) and np.array_equal(si[0], sb[i])
    assert np.array_equal(model._apply_batch(X, 2), model.apply(X))


def test_model_fits_its_training_data(fitted):
    model, X, Y = fitted
    labels, _ = model.predict_topk(X, k=1)
    hit = np.mean([labels[i, 0] in Y[i] for i in range(len(Y))])
    assert hit > 0.8  # leaves of <= 8 points: training points mostly recover a true label


def test_tree_structure_invariants(fitted):
    model = fitted[0]
    f = model.forest_
    inner = f["child_pos"] >= 0
    assert np.all(f["child_pos"][inner] > np.flatnonzero(inner))
    assert np.all(np.diff(f["leaf_ptr"])[inner] == 0)  # inner nodes carry no distribution
    assert np.all(np.diff(f["w_ptr"])[~inner] == 0)
    sizes = np.diff(f["leaf_ptr"])[~inner]
    assert sizes.min() >= 1 and sizes.max() <= model.labels_per_leaf
    # a leaf's scores are label frequencies among its points
    assert np.all((f["leaf_val"] > 0) & (f["leaf_val"] <= 1.0))


def test_padding_when_fewer_labels_than_k():
    rng = np.random.default_rng(0)
    X = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 1.0]] * 10) + rng.random((20, 2)) * 0.1)
    Y = [[0], [1]] * 10
    model = FastXML(n_trees=2, max_leaf=5).fit(X, Y)
    labels, scores = model.predict_topk(X.take([0, 1]), k=4)
    assert labels[:, 2:].tolist() == [[-1, -1], [-1, -1]]
    assert scores[:, 2:].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert labels[0, 0] == 0 and labels[1, 0] == 1
    # one label per point: every leaf distribution, hence every score row, sums to 1
    assert scores.sum(axis=1) == pytest.approx([1.0, 1.0])
    assert scores[0, 0] > 0.5


def test_result_does_not_depend_on_threads_and_is_seeded():
    X, Y = _toy(1, n=200)
    a = FastXML(n_trees=4, max_leaf=6, seed=7, n_jobs=1).fit(X, Y)
    b = FastXML(n_trees=4, max_leaf=6, seed=7, n_jobs=2).fit(X, Y)
    c = FastXML(n_trees=4, max_leaf=6, seed=8, n_jobs=2).fit(X, Y)
    assert a.to_bytes()[:0] == b""
    for name in a.forest_:
        assert np.array_equal(a.forest_[name], b.forest_[name]), name
    assert not all(
        a.forest_[n].shape == c.forest_[n].shape and np.array_equal(a.forest_[n], c.forest_[n])
        for n in a.forest_
    )


def test_label_matrix_forms_give_the_same_model():
    X, Y = _toy(5, n=120)
    ind = np.zeros((120, 12))
    for i, y in enumerate(Y):
        ind[i, y] = 1.0
    a = FastXML(n_trees=2, max_leaf=8).fit(X, Y, n_labels=12)
    b = FastXML(n_trees=2, max_leaf=8).fit(X, ind)
    c = FastXML(n_trees=2, max_leaf=8).fit(X, Batch.from_dense(ind))
    for name in a.forest_:
        assert np.array_equal(a.forest_[name], b.forest_[name])
        assert np.array_equal(a.forest_[name], c.forest_[name])
    assert a.n_labels_ == b.n_labels_ == c.n_labels_ == 12


def test_tree_growth_releases_the_gil():
    # Trees grow on a thread pool; that only helps if the kernel lets other threads run.
    # While one tree grows on a worker thread, the main thread must keep running: its
    # longest pause stays far below the kernel's run time (with the GIL held, the main
    # thread would stall for the whole call).
    import threading
    import time

    X, Y = _toy(6, n=3000, d=40)
    FastXML(n_trees=1, max_leaf=4).fit(X.take(range(50)), Y[:50])  # compile first
    model = FastXML(n_trees=1, max_leaf=1, n_jobs=1)
    worker = threading.Thread(target=model.fit, args=(X, Y))
    last = t0 = time.perf_counter()
    longest = 0.0
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    took = time.perf_counter() - t0
    assert hasattr(model, "forest_")
    assert took > 0.1, "the tree grew too fast for the check to mean anything"
    assert longest < 0.5 * took


def test_progress_is_called_once_per_tree():
    X, Y = _toy(2, n=100)
    seen = []
    FastXML(n_trees=5, max_leaf=10).fit(X, Y, progress=seen.append)
    assert seen == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("jobs", [1, 2])
def test_step_progress_counts_rows_and_nodes_inside_trees(jobs):
    X, Y = _toy(2, n=300)
    steps: list[tuple[int, int, int]] = []
    trees: list[int] = []
    model = FastXML(n_trees=4, max_leaf=10, seed=3, n_jobs=jobs)
    model.fit(X, Y, progress=trees.append, step_progress=lambda *a: steps.append(a))
    assert trees == [0, 1, 2, 3]
    assert len(steps) >= 4  # at least once per finished tree
    settled = [s for s, _, _ in steps]
    nodes = [n for _, _, n in steps]
    assert settled == sorted(settled) and nodes == sorted(nodes)  # never backwards
    assert all(total == 4 * 300 for _, total, _ in steps)
    # at the end: every row of every tree sits in a leaf, every node was grown
    assert steps[-1] == (4 * 300, 4 * 300, model.forest_["child_pos"].shape[0])
    # reporting does not change the model
    plain = FastXML(n_trees=4, max_leaf=10, seed=3, n_jobs=jobs).fit(X, Y)
    for name, arr in plain.forest_.items():
        assert np.array_equal(arr, model.forest_[name]), name


def test_max_outer_iter_runs_the_full_alternation():
    X, Y = _toy(4, n=200)
    one = FastXML(n_trees=2, max_leaf=10, seed=1).fit(X, Y)
    more = FastXML(n_trees=2, max_leaf=10, seed=1, max_outer_iter=5).fit(X, Y)
    l1, _ = one.predict_topk(X, 3)
    l5, _ = more.predict_topk(X, 3)
    assert l1.shape == l5.shape
    assert not np.array_equal(one.forest_["w_val"], more.forest_["w_val"])


# --------------------------------------------------------------------------- artifacts


def test_round_trip_gives_identical_predictions(fitted, tmp_path):
    model, X, _ = fitted
    model.label_names = [f"tag{i}" for i in range(12)]
    model.meta_["index_base"] = 0
    path = tmp_path / "m.lsart"
    model.save(path)
    back = FastXML.load(path)
    via_registry = load_model(path.read_bytes())
    assert isinstance(via_registry, FastXML)
    for other in (back, via_registry):
        assert other.n_features_ == model.n_features_ and other.n_labels_ == 12
        assert other.label_names == model.label_names
        assert other.meta_["index_base"] == 0
        la, sa = model.predict_topk(X, k=5)
        lb, sb = other.predict_topk(X, k=5)
        assert np.array_equal(la, lb) and np.array_equal(sa, sb)
    assert artifact.loads(path.read_bytes()).kind == "fastxml"


def _rewrite(model, **changes):
    art = artifact.loads(model.to_bytes())
    arrays = dict(art.arrays)
    params = dict(art.params)
    for k, v in changes.items():
        if k in arrays:
            arrays[k] = v
        else:
            params[k] = v
    return artifact.dumps("fastxml", params, arrays)


def test_malformed_artifacts_are_refused(fitted):
    model, _, _ = fitted
    f = model.forest_
    cp = f["child_pos"].copy()
    inner = int(np.flatnonzero(cp >= 0)[0])
    loop = cp.copy()
    loop[inner] = inner  # a child pointing at itself would route forever
    half = f["child_neg"].copy()
    half[inner] = -1
    bad_w = f["w_idx"].copy()
    bad_w[0] = model.n_features_
    other_tree = cp.copy()
    other_tree[inner] = int(f["roots"][1])  # a child inside the next tree
    unsorted = f["w_idx"].copy()
    seg = int(np.flatnonzero(np.diff(f["w_ptr"]) >= 2)[0])
    a = int(f["w_ptr"][seg])
    unsorted[a], unsorted[a + 1] = unsorted[a + 1], unsorted[a]
    bad_lab = f["leaf_lab"].copy()
    bad_lab[0] = 12
    cases = {
        "not after its parent": dict(child_pos=loop),
        "exactly one child": dict(child_neg=half),
        "feature id": dict(w_idx=bad_w),
        "another tree": dict(child_pos=other_tree),
        "not increasing": dict(w_idx=unsorted),
        "roots must start": dict(roots=f["roots"][::-1].copy()),
        "leaf label": dict(leaf_lab=bad_lab),
        "roots": dict(roots=f["roots"][:-1]),
        "non-finite": dict(leaf_val=np.full_like(f["leaf_val"], np.nan)),
        "inconsistent": dict(w_ptr=f["w_ptr"][:-1]),
        "must be 1-d int64": dict(child_pos=cp.astype(np.float64)),
        "bad params": dict(n_trees=0),
    }
    for message, change in cases.items():
        with pytest.raises(ArtifactError, match=message):
            FastXML.from_bytes(_rewrite(model, **change))
    missing = artifact.loads(model.to_bytes())
    arrays = {k: v for k, v in missing.arrays.items() if k != "leaf_val"}
    with pytest.raises(ArtifactError, match="missing"):
        FastXML.from_bytes(artifact.dumps("fastxml", missing.params, arrays))
    with pytest.raises(ArtifactError, match="expected 'fastxml'"):
        FastXML.from_bytes(artifact.dumps("linear", {}, {}))
    blob = bytearray(model.to_bytes())
    blob[-40] ^= 1
    with pytest.raises(ArtifactError, match="checksum"):
        FastXML.from_bytes(bytes(blob))


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors(fitted):
    model, X, Y = fitted
    wrong = Batch(X.indptr, X.indices, X.values, X.dim + 1)
    with pytest.raises(ValueError, match=r"dimension 21.*20 features"):
        model.predict_topk(wrong)
    for k in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            model.predict_topk(X, k=k)
    with pytest.raises(TypeError, match="Batch"):
        model.predict_topk(X.to_dense())
    with pytest.raises(RuntimeError, match="not fitted"):
        FastXML().predict_topk(X)
    with pytest.raises(ValueError, match="Y has 3 rows but X has 300"):
        FastXML(n_trees=1).fit(X, Y[:3])
    with pytest.raises(ValueError, match=r"Y\[1\]: label -2 is negative"):
        FastXML(n_trees=1).fit(X.take([0, 1]), [[0], [-2]])
    with pytest.raises(ValueError, match=r"Y\[0\]: labels must be integers"):
        FastXML(n_trees=1).fit(X.take([0, 1]), [[0.5], [1]])
    with pytest.raises(ValueError, match=r"label 12 is outside \[0, 5\)"):
        FastXML(n_trees=1).fit(X.take([0]), [[12]], n_labels=5)
    with pytest.raises(ValueError, match="label_names has 2 names"):
        FastXML(n_trees=1, label_names=["a", "b"]).fit(X, Y)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(n_trees=0), "n_trees"),
        (dict(max_leaf=-1), "max_leaf"),
        (dict(labels_per_leaf=1.5), "labels_per_leaf"),
        (dict(c_delta=0.0), "c_delta"),
        (dict(c_rank=-1.0), "c_rank"),
        (dict(bias=float("nan")), "bias"),
        (dict(ndcg_depth=0), "ndcg_depth"),
        (dict(max_outer_iter=0), "max_outer_iter"),
        (dict(tol=0.0), "tol"),
        (dict(seed=-1), "seed"),
        (dict(n_jobs=0), "n_jobs"),
        (dict(balance="yes"), "balance"),
        (dict(label_names=[1, 2]), "label_names"),
    ],
)
def test_hyperparameters_are_validated(kw, message):
    """Stored unchanged by __init__ (scikit-learn's rule); check_params() and fit refuse
    them, naming the parameter, before reading the data."""
    model = FastXML(**kw)
    assert all(model.get_params()[k] is v for k, v in kw.items())
    with pytest.raises(ValueError, match=message):
        model.check_params()
    with pytest.raises(ValueError, match=message):
        model.fit(Batch.from_dense(np.ones((3, 2))), [[0], [1], [0]])
