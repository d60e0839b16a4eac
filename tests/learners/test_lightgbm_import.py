"""LightGBM model text -> LambdaMART: scores equal ``Booster.predict(raw_score=True)``.

Models are trained here by LightGBM (the test extra) on real data: its lambdarank
example (lambdarank, rank_xendcg), a9a (binary), scikit-learn's bundled diabetes set
(regression; with NaNs injected for the missing-value rules), then imported from
``model_to_string()`` and compared on held-out rows. The import never imports lightgbm.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from learners.features import Batch
from learners.io.svmlight import read_svmlight
from learners.ranking.lambdamart import LambdaMART
from learners.ranking.lightgbm_import import LightGBMFormatError, from_lightgbm_text
from learners.ranking.ndcg import ndcg_at_k
from tests.conftest import require_data

lgb = pytest.importorskip("lightgbm")
sp = pytest.importorskip("scipy.sparse")

TOL = 1e-9


def csr(X: Batch, dim: int) -> object:
    return sp.csr_matrix((X.values, X.indices, X.indptr), shape=(X.n_rows, dim))


def widen(X: Batch, dim: int) -> Batch:
    return Batch(X.indptr, X.indices, X.values, dim)


def train(params: dict, X: object, y: np.ndarray, rounds: int, **kw: object) -> object:
    return lgb.train({"verbose": -1, "num_threads": 1, **params}, lgb.Dataset(X, y, **kw), rounds)


def imported(booster: object) -> LambdaMART:
    """Through the artifact bytes, as the service would load it."""
    return LambdaMART.from_bytes(from_lightgbm_text(booster.model_to_string()).to_bytes())


@pytest.fixture(scope="module")
def rank_data():
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", query_file=d / "rank.train.query")
    te = read_svmlight(d / "rank.test", query_file=d / "rank.test.query")
    return tr, te, max(tr.X.dim, te.X.dim)


@pytest.mark.parametrize("objective", ["lambdarank", "rank_xendcg"])
def test_ranking_models_score_and_ndcg_as_lightgbm(rank_data, objective):
    tr, te, dim = rank_data
    ds_params = {"group": tr.group_sizes}
    evals: dict = {}
    params = {
        "objective": objective, "metric": "ndcg", "eval_at": [1, 3, 5, 10],
        "num_leaves": 31, "min_data_in_leaf": 50, "min_sum_hessian_in_leaf": 5.0,
        "learning_rate": 0.1, "bagging_fraction": 0.9, "bagging_freq": 1,
    }  # fmt: skip
    dtrain = lgb.Dataset(csr(tr.X, dim), tr.y, **ds_params)
    dvalid = lgb.Dataset(csr(te.X, dim), te.y, group=te.group_sizes, reference=dtrain)
    b = lgb.train(
        {"verbose": -1, "num_threads": 1, **params}, dtrain, 60, valid_sets=[dvalid],
        callbacks=[lgb.record_evaluation(evals)],
    )  # fmt: skip
    m = imported(b)
    ours = m.predict(widen(te.X, dim))
    ref = b.predict(csr(te.X, dim), raw_score=True)
    assert np.max(np.abs(ours - ref)) <= TOL
    # dense input too (same rows, zeros written out)
    dense = csr(te.X, dim).toarray()
    assert np.max(np.abs(m.predict(dense) - b.predict(dense, raw_score=True))) <= TOL
    for k in (1, 3, 5, 10):
        ndcg = ndcg_at_k(ours, te.y, te.group_sizes, k)
        assert ndcg == ndcg_at_k(ref, te.y, te.group_sizes, k)
        # LightGBM's own metric on the same rows, at the last iteration
        assert ndcg == pytest.approx(evals["valid_0"][f"ndcg@{k}"][-1], abs=1e-12)
    assert m.meta_["objective"] == objective and m.meta_["index_base"] == 0


def test_binary_a9a_scores_and_probabilities():
    path = require_data("a9a", "a9a")
    tr = read_svmlight(path)
    te = read_svmlight(path.with_name("a9a.t"))
    dim = max(tr.X.dim, te.X.dim)
    Xtr, ytr = csr(tr.X, dim)[:6000], (tr.y[:6000] > 0).astype(int)
    b = train({"objective": "binary", "num_leaves": 31}, Xtr, ytr, 50)
    m = imported(b)
    Xte = csr(te.X, dim)[:4000]
    ours = m.predict(widen(te.X.take(np.arange(4000)), dim))
    assert np.max(np.abs(ours - b.predict(Xte, raw_score=True))) <= TOL
    prob = 1.0 / (1.0 + np.exp(-m.meta_["sigmoid"] * ours))
    assert np.max(np.abs(prob - b.predict(Xte))) <= 1e-12
    assert m.meta_["objective"] == "binary" and m.meta_["sigmoid"] == 1.0


def _diabetes_with_missing(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(seed)
    X = X.copy()
    X[rng.random(X.shape) < 0.1] = np.nan  # missing values in every column
    X[:, 1] = np.where(X[:, 1] > 0, 1.0, 0.0)  # sex as 0/1: zeros matter for zero_as_missing
    return X, y


@pytest.mark.parametrize(
    "extra",
    [
        {},  # NaN missing type, default left and right both occur
        {"zero_as_missing": True},  # Zero missing type
        {"use_missing": False},  # missing type None: NaN is read as 0.0
        {"boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.7},  # average_output
        {"boosting": "dart", "drop_rate": 0.2},
        {"boosting": "goss", "learning_rate": 0.3},
    ],
    ids=["nan", "zero_as_missing", "no_missing", "rf", "dart", "goss"],
)
def test_regression_with_missing_values(extra):
    X, y = _diabetes_with_missing()
    b = train({"objective": "regression", "num_leaves": 8, "min_data_in_leaf": 5, **extra},
              X[:300], y[:300], 40)  # fmt: skip
    m = imported(b)
    held = X[300:]
    ref = b.predict(held, raw_score=True)
    if extra.get("boosting") == "rf":  # stored averaged: LightGBM's predict(), not the sum
        assert m.meta_["average_output"] is True
        ref = ref / b.num_trees()
        assert np.max(np.abs(m.predict(held) - b.predict(held))) <= TOL
    assert np.max(np.abs(m.predict(held) - ref)) <= TOL
    text = b.model_to_string()
    kinds = {int(v) for ln in text.splitlines() if ln.startswith("decision_type=")
             for v in ln.split("=")[1].split()}  # fmt: skip
    if extra == {}:
        assert {8, 10} <= kinds  # NaN missing type, default right (8) and left (10)
    if "zero_as_missing" in extra:
        assert kinds & {4, 6}
    # NaN in columns the training data had none of (missing type None there), and zeros
    Xz = held.copy()
    Xz[:, 1] = np.nan
    Xz[::3, 2] = 0.0
    Xz[::5, 3] = 1e-40  # |x| <= kZeroThreshold: LightGBM reads 0.0
    ref = b.predict(Xz, raw_score=True)
    if extra.get("boosting") == "rf":
        ref = ref / b.num_trees()
    assert np.max(np.abs(m.predict(Xz) - ref)) <= TOL


def test_single_leaf_trees_and_many_leaves():
    X, y = _diabetes_with_missing(1)
    # > 64 leaves: the root-to-leaf scorer instead of the 64-bit QuickScorer masks
    b = train({"objective": "regression", "num_leaves": 100, "min_data_in_leaf": 1,
               "min_sum_hessian_in_leaf": 0.0}, X, y, 5)  # fmt: skip
    assert imported(b)._elim is None
    assert np.max(np.abs(imported(b).predict(X) - b.predict(X, raw_score=True))) <= TOL
    # a constant target: every tree is one leaf
    b = train({"objective": "regression"}, X, np.full(X.shape[0], 3.0), 3)
    m = imported(b)
    assert m.trees_["feature"].shape[0] == 0
    assert np.max(np.abs(m.predict(X) - b.predict(X, raw_score=True))) <= TOL


def test_distributed_parameters_import_the_same():
    """LightGBM resets tree_learner to serial when num_machines is 1, so a data-parallel
    model cannot be trained here; its text differs only in the parameters block."""
    X, y = _diabetes_with_missing(2)
    b = train({"objective": "regression", "tree_learner": "data"}, X, y, 10)
    text = b.model_to_string()
    assert "[tree_learner: serial]" in text  # what LightGBM did with one machine
    distributed = text.replace("[tree_learner: serial]", "[tree_learner: data]").replace(
        "[num_machines: 1]", "[num_machines: 4]"
    )
    m = from_lightgbm_text(distributed)
    assert m.meta_["lightgbm_tree_learner"] == "data"
    assert np.max(np.abs(m.predict(X) - b.predict(X, raw_score=True))) <= TOL


def _refused(text: str) -> LightGBMFormatError:
    with pytest.raises(LightGBMFormatError) as info:
        from_lightgbm_text(text)
    return info.value


def test_refusals_name_the_line_and_field():
    X, y = _diabetes_with_missing(3)
    ok = train({"objective": "regression", "num_leaves": 4}, X, y, 3).model_to_string()
    lines = ok.splitlines()

    def edit(prefix: str, new: str) -> str:
        i = next(i for i, ln in enumerate(lines) if ln.startswith(prefix))
        return "\n".join([*lines[:i], new, *lines[i + 1 :]])

    i_thr = next(i for i, ln in enumerate(lines) if ln.startswith("threshold="))
    e = _refused(edit("threshold=", "threshold=0.5 abc 1"))
    assert e.line == i_thr + 1 and e.field == "Tree=0 threshold" and "'abc'" in str(e)
    e = _refused(edit("threshold=", "threshold=0.5"))
    assert "expected 3 values, got 1" in str(e)
    e = _refused(edit("leaf_value=", "leaf_value=1 2 nan 4"))
    assert e.field == "Tree=0 leaf_value" and "finite" in str(e)
    e = _refused(edit("left_child=", "left_child=1 -1 -1"))
    assert e.field == "Tree=0 left_child/right_child"
    e = _refused(edit("split_feature=", "split_feature=0 99 1"))
    assert "outside [0, 10)" in str(e)
    e = _refused(edit("objective=", "objective=huber"))
    assert e.field == "objective" and "lambdarank" in str(e)
    e = _refused(edit("num_class=", "num_class=3"))
    assert e.field == "num_class" and "multiclass" in str(e)
    e = _refused(edit("is_linear=", "is_linear=1"))
    assert "linear trees" in str(e)
    e = _refused(ok[: ok.index("end of trees")])
    assert e.field == "end of trees"
    e = _refused("not a model\n")
    assert e.line == 1


def test_categorical_split_refused_naming_the_feature():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=600), rng.integers(0, 6, size=600)]).astype(float)
    y = X[:, 0] + (X[:, 1] % 2) * 3
    b = lgb.train({"verbose": -1, "objective": "regression", "min_data_per_group": 5,
                   "cat_smooth": 1}, lgb.Dataset(X, y, feature_name=["num", "colour"],
                   categorical_feature=["colour"]), 5)  # fmt: skip
    e = _refused(b.model_to_string())
    assert "'colour'" in str(e) and "column 1" in str(e) and "categorical" in str(e)


def test_multiclass_refused():
    X, y = _diabetes_with_missing(4)
    b = train({"objective": "multiclass", "num_class": 3}, X, (y > 100).astype(int) + (y > 200), 2)
    e = _refused(b.model_to_string())
    assert e.field == "num_class" and "is 3" in str(e)


def test_infinite_thresholds_as_lightgbm():
    """LightGBM writes ``inf`` for a split after its last bin (seen on the lambdarank
    example at 100 trees); LightGBM itself loads the edited text for the reference."""
    X, y = _diabetes_with_missing(5)
    text = train({"objective": "regression", "num_leaves": 8}, X, y, 10).model_to_string()
    lines = [ln for ln in text.splitlines() if not ln.startswith("tree_sizes=")]
    edited = 0
    for i, ln in enumerate(lines):
        if ln.startswith("threshold=") and len(ln.split()) >= 3:
            v = ln.split("=")[1].split()
            v[1], v[2] = "inf", "-inf"
            lines[i] = "threshold=" + " ".join(v)
            edited += 1
    assert edited >= 5
    text = "\n".join(lines) + "\n"
    ref = lgb.Booster(model_str=text)
    m = from_lightgbm_text(text)
    Xe = X.copy()
    Xe[::7, 0] = 1e300  # huge but finite inputs stay exact
    assert np.max(np.abs(m.predict(Xe) - ref.predict(Xe, raw_score=True))) <= TOL
    e = _refused(re.sub(r"threshold=\S+", "threshold=nan", text, count=1))
    assert "must be a number" in str(e)
