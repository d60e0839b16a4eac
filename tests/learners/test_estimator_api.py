"""LambdaMART, FastXML and LL-SVM follow scikit-learn's estimator rules (learners.params):
get_params/set_params/clone round trips, scikit-learn's API checks, and a GridSearchCV
over two values of one hyperparameter on real data for each (small subsets)."""

from __future__ import annotations

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
sp = pytest.importorskip("scipy.sparse")

from sklearn.base import clone  # noqa: E402
from sklearn.metrics import make_scorer  # noqa: E402
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold  # noqa: E402
from sklearn.utils import estimator_checks as ec  # noqa: E402

from learners.features import Batch  # noqa: E402
from learners.io.svmlight import read_svmlight  # noqa: E402
from learners.io.xc import read_xc  # noqa: E402
from learners.llsvm import LLSVM  # noqa: E402
from learners.ranking.lambdamart import LambdaMART  # noqa: E402
from learners.ranking.ndcg import ndcg_at_k, ndcg_by_qid  # noqa: E402
from learners.xml import FastXML  # noqa: E402
from learners.xml.metrics import precision_at_k  # noqa: E402
from learners.xml.scoring import PrecisionAtK  # noqa: E402
from tests.conftest import require_data  # noqa: E402

ESTIMATORS = [
    LambdaMART(n_estimators=7, num_leaves=5, eval_at=[3, 10]),
    FastXML(n_trees=3, max_leaf=4, c_delta=2.0),
    LLSVM(n_anchors=6, n_neighbours=2, passes=2, lam=1e-4),
]
IDS = ["LambdaMART", "FastXML", "LLSVM"]


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_params_round_trip_and_clone(est):
    params = est.get_params(deep=True)
    assert params == est.get_params(deep=False)  # no nested estimators
    twin = clone(est)
    assert twin is not est and type(twin) is type(est)
    assert twin.get_params() == params
    for k, v in params.items():  # stored unchanged (a copy for mutable values)
        assert twin.get_params()[k] == v
    assert type(est)(**params).get_params() == params
    name = "passes" if isinstance(est, LLSVM) else "seed"
    assert est.set_params(**{name: 3}) is est and est.get_params()[name] == 3
    with pytest.raises(ValueError, match="Invalid parameter 'bogus'"):
        est.set_params(bogus=1)


@pytest.mark.parametrize(
    ("make", "bad", "fix", "message"),
    [
        (lambda: LambdaMART(num_leaves=1), {}, {"num_leaves": 4}, "num_leaves"),
        (lambda: FastXML(n_trees=0), {}, {"n_trees": 2}, "n_trees"),
        (lambda: LLSVM(n_anchors=2, n_neighbours=7), {}, {"n_neighbours": 2}, "n_neighbours"),
        (lambda: LLSVM(n_anchors=2, n_neighbours=2), {"lam": -1.0}, {"lam": 1e-4}, "lam"),
    ],
    ids=["LambdaMART", "FastXML", "LLSVM-cross", "LLSVM-set_params"],
)
def test_stores_parameters_unchanged_and_validates_in_fit(make, bad, fix, message):
    """scikit-learn's rule: __init__ and set_params store a bad value as given; fit and
    check_params() refuse it naming the parameter; a fixed value then fits."""
    m = make().set_params(**bad)
    X = np.random.default_rng(0).random((40, 3))
    if isinstance(m, LambdaMART):
        args: tuple = (X, np.arange(40) % 3, [20, 20])
    elif isinstance(m, FastXML):
        args = (X, [[i % 3] for i in range(40)])
    else:
        args = (X, np.arange(40) % 2)
    with pytest.raises(ValueError, match=message):
        m.check_params()
    with pytest.raises(ValueError, match=message):
        m.fit(*args)
    assert not any(k.endswith("_") and not k.startswith("_") for k in vars(m))  # not fitted
    assert m.set_params(**fix).fit(*args) is m


def test_lambdamart_eval_at_stored_unchanged():
    eval_at = (1, 5)
    assert LambdaMART(eval_at=eval_at).get_params()["eval_at"] is eval_at


# scikit-learn's API checks that need no generic fit(X, y) and no estimator tags:
# LambdaMART needs query groups and FastXML label sets, so check_estimator's fitting
# checks do not apply to them, and the full suite needs __sklearn_tags__, which only
# sklearn.base.BaseEstimator provides (the core does not import scikit-learn).
API_CHECKS = [
    ec.check_parameters_default_constructible,
    ec.check_get_params_invariance,
    ec.check_set_params,
    ec.check_estimator_cloneable,
    ec.check_estimator_repr,
    ec.check_no_attributes_set_in_init,
    ec.check_do_not_raise_errors_in_init_or_set_params,
]


@pytest.mark.parametrize("check", API_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_sklearn_api_checks(est, check):
    check(type(est).__name__, clone(est))


# ------------------------------------------------------------------ GridSearchCV


def test_lambdamart_grid_search_with_qid_and_ndcg():
    d = require_data("lightgbm-lambdarank")
    tr = read_svmlight(d / "rank.train", query_file=d / "rank.train.query")
    n = int(np.cumsum(tr.group_sizes)[59])  # the first 60 queries
    X = sp.csr_matrix((tr.X.values, tr.X.indices, tr.X.indptr), shape=(tr.X.n_rows, tr.X.dim))[:n]
    y = tr.y[:n]
    qid = np.repeat(np.arange(60), tr.group_sizes[:60])
    est = LambdaMART(n_estimators=10, min_data_in_leaf=20)
    cv = GroupKFold(n_splits=3)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(ndcg_by_qid, k=10).set_score_request(qid=True)
        gs = GridSearchCV(est, {"num_leaves": [4, 16]}, cv=cv, scoring=scorer)
        gs.fit(X, y, qid=qid, groups=qid)
        # scoring=None: LambdaMART.score (NDCG@10) with qid routed to it
        gs2 = GridSearchCV(est, {"num_leaves": [4, 16]}, cv=cv).fit(X, y, qid=qid, groups=qid)
    np.testing.assert_array_equal(gs.cv_results_["mean_test_score"],
                                  gs2.cv_results_["mean_test_score"])  # fmt: skip
    # every fold's score is the NDCG@10 of a model fitted on that fold's training queries
    for i, (a, b) in enumerate(cv.split(X, y, groups=qid)):
        for j, leaves in enumerate((4, 16)):
            m = clone(est).set_params(num_leaves=leaves).fit(X[a], y[a], qid=qid[a])
            want = ndcg_at_k(m.predict(X[b]), y[b], np.bincount(qid[b])[np.unique(qid[b])], 10)
            assert gs.cv_results_[f"split{i}_test_score"][j] == want
    assert gs.best_params_["num_leaves"] in (4, 16)
    assert 0.4 < gs.best_score_ < 1.0
    assert gs.best_estimator_.n_trees_ == 10


def test_fastxml_grid_search_with_precision_at_k():
    train = read_xc(require_data("bibtex", "bibtex_train.txt"))
    X = sp.csr_matrix(
        (train.X.values, train.X.indices, train.X.indptr), shape=(train.X.n_rows, train.X.dim)
    )[:1200]
    Y = list(train.Y[:1200])
    est = FastXML(n_trees=4, max_leaf=10, seed=1)
    cv = KFold(n_splits=3, shuffle=True, random_state=0)
    gs = GridSearchCV(est, {"max_leaf": [10, 50]}, cv=cv, scoring=PrecisionAtK(1))
    gs.fit(X, Y, n_labels=train.n_labels)
    a, b = next(iter(cv.split(X)))
    m = clone(est).fit(X[a], [Y[i] for i in a], n_labels=train.n_labels)
    labels, _ = m.predict_topk(Batch.coerce(X[b]), 1)
    assert gs.cv_results_["split0_test_score"][0] == precision_at_k(labels, [Y[i] for i in b], 1)
    assert 0.2 < gs.best_score_ < 0.8


def test_llsvm_grid_search_accuracy():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)  # bundled with scikit-learn (real data)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    est = LLSVM(n_anchors=8, n_neighbours=2, passes=3, lam=1e-4, normalize=False)
    gs = GridSearchCV(est, {"n_anchors": [2, 8]}, cv=KFold(3, shuffle=True, random_state=0))
    gs.fit(X, y)
    assert gs.best_score_ > 0.9
    assert set(gs.cv_results_["param_n_anchors"]) == {2, 8}
