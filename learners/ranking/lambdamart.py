"""LambdaMART: gradient-boosted regression trees on LambdaRank gradients (Burges 2010).

Each iteration computes, per query, LightGBM's ``lambdarank`` gradients of the
NDCG-weighted pairwise logistic loss (sigmoid ``sigma``, |ΔNDCG| from the current
ranking, pairs with one document in the top ``truncation_level``, ideal DCG taken
at the truncation level, ``lambdarank_norm``), then fits one leaf-wise histogram
tree (:mod:`learners.ranking.tree`) with Newton leaf values ``-ΣG/(ΣH+λ)``.
Features are binned once by quantiles (:mod:`learners.ranking.binning`); a
feature absent from a sparse row is 0.0, as in LightGBM.

Defaults follow LightGBM's; the CLI (``learnserve train lambdamart``) uses the
configuration of LightGBM's ``examples/lambdarank``.

Compatibility with LightGBM 4.x is deliberate, down to its numerics, so that a
seed gives LightGBM's model (on LightGBM's lambdarank example, NDCG@1/3/5/10 are
LightGBM's to 4 decimals for seeds 0-4):

- bagging uses LightGBM's sampler: its LCG ``Random``, one generator per block of
  1,024 rows seeded ``bagging_seed + block``, ``bagging_seed`` derived from
  ``seed`` as ``Config::Set`` does; a row is in the bag when its draw < fraction;
- ``lightgbm_numerics`` (default on): the sigmoid is read from LightGBM's 2**20-entry
  table and lambdas/hessians are accumulated in float32 (its ``score_t``); off,
  the exact sigmoid and float64 are used (not better, just not bit-compatible);
- ``hessian_counts`` (default on): ``min_data_in_leaf`` is checked on LightGBM's
  estimate of the per-bin row counts, ``round(hess * n / H)``; off, on exact counts;
- features whose bins cannot leave ``min_data_in_leaf`` rows on both sides are
  dropped before training (LightGBM's ``feature_pre_filter``);
- child sums, default-bin fill, kEpsilon, kZeroThreshold and bin upper bounds
  follow LightGBM's order of operations and constants.

A remaining source of difference is an exact tie between two features whose
partitions of a node's rows coincide: the gains then differ in the last bit and
the tie can break the other way (seen once in 100 trees without bagging).

Models trained by LightGBM itself are imported from its model text by
:mod:`learners.ranking.lightgbm_import`; their nodes also carry LightGBM's
``decision_type`` (missing-value rules, :mod:`learners.ranking.lightgbm_semantics`).

Hyperparameters follow scikit-learn's rules (:mod:`learners.params`): ``__init__``
stores them unchanged, ``fit``/``check_params`` validate them; ``fit`` takes the
query groups as ``group_sizes`` or as one ``qid`` per row, and ``score`` is NDCG@10.

Artifacts (kind ``"lambdamart"``) hold the trees as flat arrays (feature,
threshold, left, right, leaf values, per-tree offsets); ``meta`` carries
``n_features`` and, from the CLI, ``index_base`` (1 when trained from 1-based
SVMlight files), so a service can accept sparse keys as written in the file.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.random((60, 3)); y = (X[:, 0] * 3).astype(int); g = [20, 20, 20]
>>> m = LambdaMART(n_estimators=5, min_data_in_leaf=5).fit(X, y, g)
>>> m.predict(X).shape
(60,)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from learners import artifact
from learners.features import Batch, FeatureError
from learners.params import EstimatorParams
from learners.ranking import _lambdamart_kernels as K
from learners.ranking._ndcg_kernels import per_query_ndcg
from learners.ranking.binning import BinMapper
from learners.ranking.forest import check_trees, exit_leaf_tables
from learners.ranking.lambdamart_params import checked_params
from learners.ranking.lightgbm_semantics import (
    RuleColumns,
    check_decision_type,
    check_output_meta,
    predict_rule_columns,
)
from learners.ranking.ndcg import check_groups, groups_from_qid, ndcg_at_k
from learners.ranking.tree import TreeParams, grow_tree

__all__ = ["LambdaMART", "forest_need"]

_ARRAYS = ("feature", "threshold", "left", "right", "leaf_value", "node_off", "leaf_off")
_LGB = "decision_type"  # per node, LightGBM's byte: present only in imported trees
_CHUNK = 1 << 15
_BLOCK = 64  # rows scored together: a 64-row column block of the used features stays in L2
# Largest direct feature -> column table (8 bytes an entry: 512 KiB); models whose trees
# test a feature beyond it map features by binary search in the sorted used features.
_DENSE_REMAP = 1 << 16


def _as_batch(X: Any, name: str = "X") -> Batch:
    if isinstance(X, Batch) or hasattr(X, "tocsr"):  # scipy.sparse, as sklearn's CV slices it
        return Batch.coerce(X, name)
    a = np.asarray(X, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name}: must be a Batch or a 2-d array, got shape {a.shape}")
    return Batch.from_dense(a)


_BAG_BLOCK = 1024  # LightGBM's bagging_rand_block_
_SIGMOID_BINS = 1 << 20  # LightGBM's _sigmoid_bins


def _bagging_states(seed: int, n: int) -> np.ndarray:
    """Initial LCG states of LightGBM's bagging generators for ``seed``.

    LightGBM's ``Config::Set`` draws data_random_seed then bagging_seed from
    ``Random(seed)`` with ``NextShort(0, 32767)``; block ``b`` uses ``bagging_seed + b``.
    """
    st = np.array([seed & 0xFFFFFFFF], dtype=np.uint32)
    K.lcg_next16(st, 0)  # data_random_seed (unused here)
    bagging_seed = K.lcg_next16(st, 0) % 32767
    n_blocks = max(1, (n + _BAG_BLOCK - 1) // _BAG_BLOCK)
    return (np.arange(n_blocks, dtype=np.int64) + bagging_seed).astype(np.uint32)


def _check_labels(y: Any, n: int, name: str = "y") -> np.ndarray:
    a = np.asarray(y, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected {n} relevance labels, got shape {a.shape}")
    bad = ~np.isfinite(a) | (a < 0) | (a != np.round(a)) | (a > 30)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}]: relevance must be an integer in [0, 30], got {a[i]!r}")
    return a


def forest_need(arrays_nbytes: int, n_nodes: int, n_leaves: int, n_features: int) -> int:
    """Bytes a forest takes to serve: its arrays (``arrays_nbytes``) and what
    :meth:`LambdaMART._compact` derives from them (per node: the used features, the
    node's column, its QuickScorer mask; per leaf: the in-order values; the direct
    feature table, at most ``_DENSE_REMAP`` entries). Nothing per declared feature."""
    return arrays_nbytes + 20 * n_nodes + 8 * n_leaves + 8 * min(n_features, _DENSE_REMAP)


class LambdaMART(EstimatorParams):
    """LambdaMART ranker (see the module docstring). Hyperparameters as in LightGBM."""

    kind = "lambdamart"

    def __init__(
        self,
        n_estimators: int = 100,
        learning_rate: float = 0.1,
        num_leaves: int = 31,
        min_data_in_leaf: int = 20,
        min_sum_hessian_in_leaf: float = 1e-3,
        lambda_l2: float = 0.0,
        bagging_fraction: float = 1.0,
        bagging_freq: int = 0,
        max_bin: int = 255,
        min_data_in_bin: int = 3,
        sigma: float = 1.0,
        truncation_level: int = 30,
        lambdarank_norm: bool = True,
        early_stopping_rounds: int | None = None,
        eval_at: Sequence[int] = (1, 3, 5, 10),
        hessian_counts: bool = True,
        lightgbm_numerics: bool = True,
        seed: int = 0,
    ) -> None:
        # scikit-learn's rule: store every argument unchanged; check_params() (run by
        # fit and from_bytes) validates them, so set_params and clone behave.
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_data_in_leaf = min_data_in_leaf
        self.min_sum_hessian_in_leaf = min_sum_hessian_in_leaf
        self.lambda_l2 = lambda_l2
        self.bagging_fraction = bagging_fraction
        self.bagging_freq = bagging_freq
        self.max_bin = max_bin
        self.min_data_in_bin = min_data_in_bin
        self.sigma = sigma
        self.truncation_level = truncation_level
        self.lambdarank_norm = lambdarank_norm
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_at = eval_at
        self.hessian_counts = hessian_counts
        self.lightgbm_numerics = lightgbm_numerics
        self.seed = seed

    def check_params(self) -> dict[str, Any]:
        """The hyperparameters, validated (``ValueError`` naming the first bad one) and
        converted to the types the kernels are compiled for."""
        return checked_params(self.get_params(deep=False))

    def get_metadata_routing(self) -> Any:
        """For scikit-learn's metadata routing: ``fit`` and ``score`` take ``qid``.
        (Only scikit-learn calls this, so only then is it imported.)"""
        from sklearn.utils.metadata_routing import MetadataRequest

        req = MetadataRequest(owner=type(self).__name__)
        req.fit.add_request(param="qid", alias=True)
        req.score.add_request(param="qid", alias=True)
        return req

    # ------------------------------------------------------------------ training

    def fit(
        self,
        X: Any,
        y: Any,
        group_sizes: Any = None,
        valid: tuple[Any, Any, Any] | None = None,
        progress: Callable[[int, dict[str, float]], None] | None = None,
        *,
        qid: Any = None,
    ) -> LambdaMART:
        """Train on query groups of consecutive rows, given as ``group_sizes`` or as one
        query id per row (``qid``, the form scikit-learn's cross-validation can split).
        ``valid=(Xv, yv, gv)`` enables per-iteration validation NDCG (``evals_result_``)
        and early stopping; ``progress(iteration, metrics)`` is called after every tree."""
        p = SimpleNamespace(**self.check_params())
        Xb = _as_batch(X)
        n = Xb.n_rows
        yv = _check_labels(y, n)
        if (group_sizes is None) == (qid is None):
            raise ValueError("give the query groups as either group_sizes or qid (one of them)")
        g = groups_from_qid(qid, n) if qid is not None else check_groups(group_sizes, n)
        offsets = np.concatenate([[0], np.cumsum(g)]).astype(np.int64)
        mapper = BinMapper(
            p.max_bin, p.min_data_in_bin, seed=p.seed, min_split_data=p.min_data_in_leaf
        ).fit(Xb)
        data = mapper.transform(Xb)
        if valid is not None:
            Xv = _as_batch(valid[0], "valid X")
            v_y = _check_labels(valid[1], Xv.n_rows, "valid y")
            v_off = np.concatenate(
                [[0], np.cumsum(check_groups(valid[2], Xv.n_rows, "valid groups"))]
            )
            v_data = mapper.transform(Xv)
            v_scores = np.zeros(Xv.n_rows)
        imd = K.inverse_max_dcg(yv, offsets, p.truncation_level)
        sig_table = K.sigmoid_table(p.sigma, _SIGMOID_BINS) if p.lightgbm_numerics else np.zeros(0)
        params = TreeParams(
            p.num_leaves, p.min_data_in_leaf, p.min_sum_hessian_in_leaf,
            p.lambda_l2, p.learning_rate, p.hessian_counts,
        )  # fmt: skip
        bag_states = _bagging_states(p.seed, n)
        scores = np.zeros(n)
        grad = np.zeros(n)
        hess = np.zeros(n)
        all_rows = np.arange(n, dtype=np.int64)
        bag = all_rows
        trees: list[tuple[np.ndarray, ...]] = []
        self.evals_result_: list[dict[str, float]] = []
        best, best_it = -np.inf, 0
        for it in range(p.n_estimators):
            K.lambda_gradients(
                scores, yv, offsets, imd, p.sigma, p.truncation_level,
                p.lambdarank_norm, grad, hess, sig_table, p.lightgbm_numerics,
            )  # fmt: skip
            if p.bagging_freq > 0 and p.bagging_fraction < 1.0 and it % p.bagging_freq == 0:
                bag = K.bernoulli_bag(bag_states, n, p.bagging_fraction, _BAG_BLOCK)
            t = grow_tree(bag, data, mapper, grad, hess, params)
            if t.n_leaves <= 1:
                break  # as LightGBM: no leaf meets the split requirements any more
            K.add_leaf_values(t.rows, t.leaf_begin, t.leaf_count, t.leaf_value, scores)
            if bag.shape[0] < n:
                oob = np.setdiff1d(all_rows, bag, assume_unique=True)
                self._add_binned(t, data, mapper, oob, scores)
            raw_f = mapper.used_features_[t.feature].astype(np.int32)
            thr = mapper.flat_bounds_[mapper.bound_off_[t.feature] + t.bin]
            trees.append((raw_f, thr, t.left, t.right, t.leaf_value))
            metrics: dict[str, float] = {}
            if valid is not None:
                self._add_binned(t, v_data, mapper, np.arange(Xv.n_rows), v_scores)
                for k in p.eval_at:
                    metrics[f"ndcg@{k}"] = float(np.mean(per_query_ndcg(v_scores, v_y, v_off, k)))
                self.evals_result_.append(metrics)
            if progress is not None:
                progress(it + 1, metrics)
            if valid is not None and p.early_stopping_rounds is not None:
                m = metrics[f"ndcg@{p.eval_at[-1]}"]
                if m > best:
                    best, best_it = m, it + 1
                elif it + 1 - best_it >= p.early_stopping_rounds:
                    break
        if valid is not None and p.early_stopping_rounds is not None and best_it > 0:
            trees = trees[:best_it]
        self.best_iteration_ = len(trees)
        self.n_features_ = int(Xb.dim)
        if not hasattr(self, "meta_"):
            self.meta_: dict[str, Any] = {}  # free-form facts saved with the model
        self._set_trees(trees)
        return self

    @staticmethod
    def _add_binned(
        t: Any, data: Any, mapper: BinMapper, rows: np.ndarray, scores: np.ndarray
    ) -> None:
        K.add_tree_binned(
            data.indptr, data.feature, data.bin, mapper.default_bin_, t.feature, t.bin,
            t.left, t.right, t.leaf_value, np.ascontiguousarray(rows, dtype=np.int64), scores,
        )  # fmt: skip

    def _set_trees(self, trees: list[tuple[np.ndarray, ...]]) -> None:
        cat = [np.concatenate([t[i] for t in trees]) if trees else np.zeros(0) for i in range(5)]
        node_off = np.zeros(len(trees) + 1, dtype=np.int64)
        leaf_off = np.zeros(len(trees) + 1, dtype=np.int64)
        np.cumsum([t[0].shape[0] for t in trees], out=node_off[1:])
        np.cumsum([t[4].shape[0] for t in trees], out=leaf_off[1:])
        self.trees_: dict[str, np.ndarray] = {
            "feature": cat[0].astype(np.int32), "threshold": cat[1].astype(np.float64),
            "left": cat[2].astype(np.int32), "right": cat[3].astype(np.int32),
            "leaf_value": cat[4].astype(np.float64), "node_off": node_off, "leaf_off": leaf_off,
        }  # fmt: skip
        self._compact()

    def _compact(self) -> None:
        # Scoring densifies rows; only the features some tree tests need a column.
        T = self.trees_
        # Imported LightGBM trees: each node reads a rule column (its feature with NaN
        # and 0.0 mapped as LightGBM's missing-value rules say), see lightgbm_semantics.
        self._rules = RuleColumns(T["feature"], T["decision_type"]) if _LGB in T else None
        used = np.unique(T["feature"]) if self._rules is None else self._rules.used
        # feature -> block column: a map of the used features only (sorted ``_used``,
        # looked up by binary search), so nothing is allocated per declared feature; a
        # direct table over features 0..max used (a gather) when that table is small.
        self._used = used.astype(np.int64)
        self._n_used = int(used.shape[0])
        top = int(used[-1]) + 1 if used.shape[0] else 1
        self._remap: np.ndarray | None = None
        if top <= _DENSE_REMAP:
            self._remap = np.full(top, -1, dtype=np.int64)
            self._remap[used] = np.arange(used.shape[0])
        if self._rules is not None:
            self._local_feature = self._rules.node_column
        else:  # every tested feature is in `used`: its rank there is its column
            self._local_feature = np.searchsorted(self._used, T["feature"]).astype(np.int32)
        self._elim, self._inorder = exit_leaf_tables(T)

    def _columns(self, indices: np.ndarray, absent: int = -1) -> np.ndarray:
        """The block column of each sparse entry (feature ``indices[t]``), ``absent``
        for a feature no tree tests (features beyond the model's included)."""
        if self._remap is not None:
            r = self._remap
            inside = indices < r.shape[0]
            cols = np.where(inside, r[np.where(inside, indices, 0)], -1)
        else:
            pos = np.searchsorted(self._used, indices)
            hit = pos < self._n_used
            hit[hit] = self._used[pos[hit]] == indices[hit]
            cols = np.where(hit, pos, -1)
        if absent != -1:
            cols[cols < 0] = absent
        return cols

    # ------------------------------------------------------------------ scoring

    @property
    def n_trees_(self) -> int:
        return int(self.trees_["node_off"].shape[0] - 1)

    def predict(self, X: Any) -> np.ndarray:
        """Scores (higher = more relevant) for a Batch (absent feature = 0.0) or a 2-d array.

        Trees of at most 64 leaves are scored QuickScorer-style on blocks of rows
        (branch-free, vectorised); larger trees by plain root-to-leaf traversal.
        """
        if not hasattr(self, "trees_"):
            raise RuntimeError("LambdaMART is not fitted: call fit() or from_bytes() first")
        T = self.trees_
        if hasattr(X, "tocsr"):  # scipy.sparse
            X = Batch.coerce(X)
        if isinstance(X, Batch):
            n = X.n_rows
        else:
            A = np.ascontiguousarray(X, dtype=np.float64)
            if A.ndim != 2 or A.shape[1] != self.n_features_:
                raise ValueError(
                    f"X: expected a Batch or a 2-d array with {self.n_features_} columns, "
                    f"got shape {A.shape}"
                )
            n = A.shape[0]
        out = np.empty(n)
        if self._rules is not None:  # LightGBM's trees define where NaN goes
            predict_rule_columns(self, X if isinstance(X, Batch) else A, out)
            return out
        # Native trees were trained on finite values only (fit refuses NaN), and the two
        # scorers below would route a NaN differently (QuickScorer left, traversal right).
        if isinstance(X, Batch):
            bad = np.flatnonzero(~np.isfinite(X.values))
            if bad.size:
                row = int(np.searchsorted(X.indptr, bad[0], side="right")) - 1
                raise FeatureError(f"X[{row}]", "value is not finite")
        elif not np.all(np.isfinite(A)):
            row = int(np.argwhere(~np.isfinite(A))[0][0])
            raise FeatureError(f"X[{row}]", "value is not finite")
        if self._elim is not None:
            qs = (self._local_feature, T["threshold"], self._elim, T["node_off"], T["leaf_off"])
            if isinstance(X, Batch):
                if self._remap is not None:
                    indices, remap = X.indices, self._remap
                else:  # entries as their columns (unused: n_used, which the kernel skips)
                    indices = self._columns(X.indices, absent=self._n_used)
                    remap = np.arange(self._n_used, dtype=np.int64)
                K.predict_csr_qs(
                    X.indptr, indices, X.values, remap, self._n_used,
                    *qs, self._inorder, out, _BLOCK,
                )  # fmt: skip
            else:
                K.predict_dense_qs(A, self._used, *qs, self._inorder, out, _BLOCK)
            return out
        args = (self._local_feature, T["threshold"], T["left"], T["right"], T["leaf_value"])
        offs = (T["node_off"], T["leaf_off"])
        if isinstance(X, Batch):
            cols = self._columns(X.indices)
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            if isinstance(X, Batch):
                block = K.csr_to_dense_mapped(X.indptr, cols, X.values, a, b, self._n_used)
            else:
                block = np.ascontiguousarray(A[a:b][:, self._used])
            K.predict_dense(block, *args, *offs, out[a:b])
        return out

    def score(self, X: Any, y: Any, qid: Any = None, group_sizes: Any = None) -> float:
        """Mean NDCG@10 (LightGBM's definition) on query groups given by ``qid`` (one id
        per row) or ``group_sizes``: the default score of scikit-learn's model selection."""
        s = self.predict(X)
        if (group_sizes is None) == (qid is None):
            raise ValueError("give the query groups as either group_sizes or qid (one of them)")
        g = groups_from_qid(qid, s.shape[0]) if qid is not None else group_sizes
        return ndcg_at_k(s, np.asarray(y, dtype=np.float64), g, 10)

    def rank(self, X: Any, group_sizes: Any) -> list[np.ndarray]:
        """Per query group, row indices (within the group) best first; ties keep input order."""
        s = self.predict(X)
        g = check_groups(group_sizes, s.shape[0])
        bounds = np.concatenate([[0], np.cumsum(g)])
        return [np.argsort(-s[a:b], kind="stable") for a, b in itertools.pairwise(bounds)]

    # ------------------------------------------------------------------ artifacts

    def to_bytes(self) -> bytes:
        meta = {
            "n_features": self.n_features_,
            "best_iteration": self.best_iteration_,
            **getattr(self, "meta_", {}),
        }
        return artifact.dumps(self.kind, self.check_params(), self.trees_, meta)

    @classmethod
    def from_bytes(cls, blob: bytes, *, max_bytes: int | None = None) -> LambdaMART:
        """Read an artifact; anything malformed is an :class:`~learners.artifact.ArtifactError`,
        a model that would take more than ``max_bytes`` to load an ``ArtifactTooLarge``."""
        art = artifact.loads(blob, expected_kind=cls.kind, max_bytes=max_bytes)
        try:
            m = cls(**art.params)
            m.check_params()
        except (TypeError, ValueError) as exc:
            raise artifact.ArtifactError(f"lambdamart artifact has bad params: {exc}") from None
        n_features = art.meta.get("n_features")
        if isinstance(n_features, bool) or not isinstance(n_features, int):
            raise artifact.ArtifactError(
                f"lambdamart artifact: meta.n_features must be an integer, got {n_features!r}"
            )
        if not 1 <= n_features < 1 << 31:  # feature ids are int32
            raise artifact.ArtifactError(
                f"lambdamart artifact: meta.n_features = {n_features} is outside [1, 2**31)"
            )
        best = art.meta.get("best_iteration", 0)
        if isinstance(best, bool) or not isinstance(best, int):
            raise artifact.ArtifactError(
                f"lambdamart artifact: meta.best_iteration must be an integer, got {best!r}"
            )
        m.n_features_, m.best_iteration_ = n_features, best
        m.meta_ = {k: v for k, v in art.meta.items() if k not in ("n_features", "best_iteration")}
        m.trees_ = {k: art.array(k) for k in _ARRAYS}
        check_trees(m.trees_, m.n_features_)
        if _LGB in art.arrays:
            dt = art.arrays[_LGB]
            if dt.dtype != np.uint8 or dt.shape != m.trees_["feature"].shape:
                raise artifact.ArtifactError(
                    f"lambdamart artifact: array {_LGB!r} must be uint8 with one entry per "
                    f"node, got {dt.dtype} shape {dt.shape}"
                )
            why = check_decision_type(dt)
            if why is not None:
                raise artifact.ArtifactError(f"lambdamart artifact: {_LGB}: {why}")
            m.trees_[_LGB] = dt
        why = check_output_meta(m.meta_)
        if why is not None:
            raise artifact.ArtifactError(f"lambdamart artifact: {why}")
        nn, nl = m.trees_["feature"].shape[0], m.trees_["leaf_value"].shape[0]
        need = forest_need(sum(a.nbytes for a in m.trees_.values()), nn, nl, n_features)
        artifact.memory_budget(f"trees ({nn} nodes, {nl} leaves)", need, max_bytes)
        m._compact()
        return m

    def save(self, path: str | Path) -> None:
        artifact.save(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int | None = None) -> LambdaMART:
        return cls.from_bytes(Path(path).read_bytes(), max_bytes=max_bytes)
