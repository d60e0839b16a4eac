"""FastXML (Prabhu & Varma, KDD 2014): an ensemble of trees for extreme multi-label learning.

Each internal node learns a sparse linear separator ``w`` by alternating
minimisation of an L1-regularised logistic loss and an nDCG@L ranking loss of
the two children (see :mod:`learners.xml._kernels`); points go to the positive
child iff ``w^T x >= 0``. A node with at most ``max_leaf`` points, or whose
split fails (everything on one side), becomes a leaf holding the top
``labels_per_leaf`` entries of its points' mean label vector. Prediction routes a
point to one leaf per tree and ranks labels by the leaf distributions averaged
over the trees.

Defaults and where they come from (paper = Prabhu & Varma 2014; code = the
authors' released C++ FastXML, whose README lists ``-t 50 -b 1.0 -c 1.0 -m 10 -l 100``):

- ``n_trees=50`` (paper and code), ``max_leaf=10`` (code ``-m``; the paper's
  experiments), ``labels_per_leaf=100`` (code ``-l``),
- ``c_delta=1.0`` (code ``-c``, the paper's C_delta), ``balance=True``: as in the
  code, C_delta(+-1) = c_delta / (fraction of the node's points on that side),
  which keeps splits balanced; ``c_rank=1.0`` (the paper's C_r),
- ``bias=1.0``: a constant feature appended to every point (code ``-b``),
- ``ndcg_depth=None``: L of nDCG@L; ``None`` ranks all labels, as the code does,
- ``max_outer_iter=1``: rounds of (r+-, delta) <-> w. The paper alternates
  until delta stops changing; the released code stops after the first ``w``, and
  so do we by default: on Bibtex 5 rounds gave P@1/3/5 0.6354/0.3873/0.2860 vs
  0.6274/0.3907/0.2861 for one round (seed 0; seed 1: 0.6290/0.3841/0.2836 vs
  0.6390/0.3894/0.2840), i.e. no gain, for ~2x the training time,
- solver ``tol=0.01``, ``max_newton_iter=10``, ``max_inner_iter=10``: the code's
  newGLMNET settings (LIBLINEAR's ``-s 6`` algorithm). Solving each node more
  exactly (``tol=0.001``, 50 Newton steps) was worse on Bibtex (P@3 0.3830 and
  0.3844 for seeds 0 and 1): the early stop acts as extra regularisation.

Side by side with a transcription of the released C++ on Bibtex (ten runs each) the
P@1/3/5 means agree within one standard error; see ``tests/learners/test_fastxml_quality.py``.

>>> import numpy as np
>>> from learners.features import Batch
>>> rng = np.random.default_rng(0)
>>> X = Batch.from_dense(rng.random((60, 5)))
>>> Y = [[0] if x[0] > 0.5 else [1, 2] for x in X.to_dense()]
>>> model = FastXML(n_trees=4, max_leaf=5, seed=0).fit(X, Y)
>>> labels, scores = model.predict_topk(X.take([0]), k=2)
>>> labels.shape, bool(scores[0, 0] >= scores[0, 1])
((1, 2), True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from learners import artifact
from learners.features import Batch
from learners.params import EstimatorParams
from learners.xml import _kernels as K
from learners.xml import _predict_kernels as P
from learners.xml._io import TREE_ARRAYS, LabelSets, labels_to_csr, validate_tree_arrays
from learners.xml.fastxml_params import checked_jobs, checked_params

__all__ = ["FastXML"]


class FastXML(EstimatorParams):
    """FastXML multi-label tree ensemble. ``fit(X, Y)``, ``predict_topk(X, k)``."""

    kind = "fastxml"

    def __init__(
        self,
        n_trees: int = 50,
        max_leaf: int = 10,
        labels_per_leaf: int = 100,
        *,
        c_delta: float = 1.0,
        c_rank: float = 1.0,
        balance: bool = True,
        bias: float = 1.0,
        ndcg_depth: int | None = None,
        max_outer_iter: int = 1,
        max_partition_iter: int = 100,
        tol: float = 0.01,
        max_newton_iter: int = 10,
        max_inner_iter: int = 10,
        seed: int = 0,
        n_jobs: int | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        # scikit-learn's rule: store every argument unchanged; check_params() (run by
        # fit and from_bytes) validates them, so set_params and clone behave.
        self.n_trees = n_trees
        self.max_leaf = max_leaf
        self.labels_per_leaf = labels_per_leaf
        self.c_delta = c_delta
        self.c_rank = c_rank
        self.balance = balance
        self.bias = bias
        self.ndcg_depth = ndcg_depth
        self.max_outer_iter = max_outer_iter
        self.max_partition_iter = max_partition_iter
        self.tol = tol
        self.max_newton_iter = max_newton_iter
        self.max_inner_iter = max_inner_iter
        self.seed = seed
        self.n_jobs = n_jobs
        self.label_names = label_names

    # ------------------------------------------------------------------ params

    def check_params(self) -> dict[str, Any]:
        """The hyperparameters, validated (``ValueError`` naming the first bad one) and
        converted to the types the kernels are compiled for."""
        return checked_params(self.get_params(deep=False))

    # ------------------------------------------------------------------ fit

    def fit(
        self,
        X: Batch,
        Y: LabelSets | Batch,
        *,
        n_labels: int | None = None,
        progress: Callable[[int], None] | None = None,
        step_progress: Callable[[int, int, int], None] | None = None,
    ) -> FastXML:
        """Grow ``n_trees`` trees. ``Y[i]`` lists the labels (ints in ``[0, n_labels)``) of
        row ``i``, or ``Y`` is a label matrix as a :class:`Batch` (``dim = n_labels``).

        ``progress(t)`` is called (on the calling thread) as tree ``t`` finishes;
        ``step_progress(settled, total, nodes)`` every ~0.2 s while trees grow, with the
        rows settled in leaves so far over all trees, ``total = n_trees * n_rows``, and
        the nodes grown (a tree takes seconds on a big data set: this moves meanwhile).
        Trees grow on ``n_jobs`` threads (default: all cores); the kernels release
        the GIL, and each tree has its own seed, so the result does not depend on
        ``n_jobs``.
        """
        p = self.check_params()  # before touching the data: a bad value fails fast
        X = Batch.coerce(X)  # scipy.sparse / ndarray rows too (scikit-learn's CV slices those)
        if X.n_rows < 1:
            raise ValueError("X has no rows")
        y_ptr, y_idx, y_val, n_lab = labels_to_csr(Y, X.n_rows, n_labels)
        names = p["label_names"]
        if names is not None and len(names) != n_lab:
            raise ValueError(f"label_names has {len(names)} names but there are {n_lab} labels")
        depth = n_lab if p["ndcg_depth"] is None else min(p["ndcg_depth"], n_lab)
        # I_L(y_i) = 1 / sum_{l <= min(L, |y_i|)} 1/log2(1 + l); 0 for a point without labels
        csum = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, depth + 2)))])
        counts = np.minimum(np.diff(y_ptr), depth)
        pw = np.zeros(X.n_rows)
        pw[counts > 0] = 1.0 / csum[counts[counts > 0]]
        seeds = np.random.SeedSequence(p["seed"]).generate_state(p["n_trees"], dtype=np.uint64)
        done = np.zeros((p["n_trees"], 2), dtype=np.int64)  # per tree: rows in leaves, nodes

        def grow(t: int) -> tuple[np.ndarray, ...]:
            return K.grow_tree(
                X.indptr,
                X.indices,
                X.values,
                X.dim,
                y_ptr,
                y_idx,
                y_val,
                n_lab,
                pw,
                p["max_leaf"],
                p["labels_per_leaf"],
                depth,
                p["c_delta"],
                p["c_rank"],
                p["balance"],
                p["bias"],
                p["max_partition_iter"],
                p["max_outer_iter"],
                p["tol"],
                p["max_newton_iter"],
                p["max_inner_iter"],
                np.uint64(seeds[t]),
                done[t],
            )

        def report() -> None:
            if step_progress is not None:
                totals = done.sum(axis=0)
                step_progress(int(totals[0]), p["n_trees"] * X.n_rows, int(totals[1]))

        jobs = p["n_jobs"] or os.cpu_count() or 1
        trees: list[tuple[np.ndarray, ...]] = []
        if jobs == 1 and step_progress is None:
            for t in range(p["n_trees"]):
                trees.append(grow(t))
                if progress is not None:
                    progress(t)
        else:  # trees on threads; this one reports (step_progress needs it free)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(grow, t) for t in range(p["n_trees"])]
                for t, fut in enumerate(futures):  # in tree order, as each one is ready
                    while step_progress is not None and not wait([fut], timeout=0.2)[0]:
                        report()
                    trees.append(fut.result())
                    if progress is not None:
                        progress(t)
                    report()
        self._set_trees(trees)
        self.n_features_ = X.dim
        self.n_labels_ = n_lab
        if not hasattr(self, "meta_"):
            self.meta_: dict[str, Any] = {}  # free-form JSON facts saved with the model
        return self

    def _set_trees(self, trees: list[tuple[np.ndarray, ...]]) -> None:
        """Concatenate per-tree arrays into one flat forest (global node ids)."""
        node_off = w_off = leaf_off = 0
        parts: dict[str, list[np.ndarray]] = {name: [] for name in TREE_ARRAYS}
        roots = []
        for cp, cn, wp, wi, wv, ic, lp, ll, lv in trees:
            n = cp.shape[0]
            roots.append(node_off)
            parts["child_pos"].append(np.where(cp >= 0, cp + node_off, -1))
            parts["child_neg"].append(np.where(cn >= 0, cn + node_off, -1))
            parts["w_ptr"].append(wp[:-1] + w_off)
            parts["w_idx"].append(wi)
            parts["w_val"].append(wv)
            parts["intercept"].append(ic)
            parts["leaf_ptr"].append(lp[:-1] + leaf_off)
            parts["leaf_lab"].append(ll)
            parts["leaf_val"].append(lv)
            node_off += n
            w_off += wi.shape[0]
            leaf_off += ll.shape[0]
        parts["w_ptr"].append(np.array([w_off], dtype=np.int64))
        parts["leaf_ptr"].append(np.array([leaf_off], dtype=np.int64))
        self.forest_ = {name: np.concatenate(arrs) for name, arrs in parts.items()}
        self.forest_["roots"] = np.asarray(roots, dtype=np.int64)

    # ------------------------------------------------------------------ predict

    def _check_X(self, X: Batch) -> None:
        if not hasattr(self, "forest_"):
            raise RuntimeError("this FastXML model is not fitted yet")
        if not isinstance(X, Batch):
            raise TypeError(f"X must be a learners.features.Batch, got {type(X).__name__}")
        if X.dim != self.n_features_:
            raise ValueError(
                f"X has dimension {X.dim}, but the model was trained on {self.n_features_} features"
            )

    def predict_topk(self, X: Batch, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best labels of each row and their scores (mean leaf probability).

        Returns ``labels`` int64 ``(n, k)`` and ``scores`` float64 ``(n, k)``, best first
        (ties: smaller label id first); padded with -1 / 0.0 when fewer labels are reached.
        """
        self._check_X(X)
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        k = int(k)
        n = X.n_rows
        labels = np.empty((n, k), dtype=np.int64)
        scores = np.empty((n, k), dtype=np.float64)
        f = self.forest_
        jobs = min(checked_jobs(self.n_jobs) or os.cpu_count() or 1, max(1, n // 256))
        if n < self._BATCH_ROUTING_MIN:
            P.predict_rows(
                X.indptr, X.indices, X.values, X.dim, f["roots"], f["child_pos"], f["child_neg"],
                f["w_ptr"], f["w_idx"], f["w_val"], f["intercept"], f["leaf_ptr"], f["leaf_lab"],
                f["leaf_val"], self.n_labels_, k, 0, n, labels, scores,
            )  # fmt: skip
            return labels, scores
        leaves = self._apply_batch(X, jobs)

        def rank(lo: int, hi: int) -> None:
            P.topk_from_leaves(leaves, f["leaf_ptr"], f["leaf_lab"], f["leaf_val"],
                               self.n_labels_, k, lo, hi, labels, scores)  # fmt: skip

        self._run_chunks(rank, n, jobs)
        return labels, scores

    # Below this many rows, route point by point (no per-tree set-up); at or above it,
    # node by node. Both give bit-identical results (see _predict_kernels).
    _BATCH_ROUTING_MIN = 32

    @staticmethod
    def _run_chunks(fn: Callable[[int, int], None], n: int, jobs: int) -> None:
        """``fn(lo, hi)`` over ``jobs`` contiguous chunks of ``range(n)`` on threads."""
        if jobs <= 1:
            fn(0, n)
            return
        bounds = np.linspace(0, n, jobs + 1).astype(int)
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # the kernels release the GIL
            list(pool.map(fn, bounds[:-1], bounds[1:]))

    def _apply_batch(self, X: Batch, jobs: int) -> np.ndarray:
        f = self.forest_
        roots = f["roots"]
        tree_end = np.append(roots[1:], f["child_pos"].shape[0])
        out = np.empty((X.n_rows, roots.shape[0]), dtype=np.int64)

        def route(lo: int, hi: int) -> None:  # trees lo..hi
            P.apply_batch(X.indptr, X.indices, X.values, X.dim, roots, tree_end, f["child_pos"],
                          f["child_neg"], f["w_ptr"], f["w_idx"], f["w_val"], f["intercept"], lo,
                          hi, out)  # fmt: skip

        self._run_chunks(route, roots.shape[0], min(jobs, roots.shape[0]))
        return out

    def apply(self, X: Batch) -> np.ndarray:
        """The leaf (global node id) each row reaches in each tree, ``(n, n_trees)``."""
        self._check_X(X)
        f = self.forest_
        out = np.empty((X.n_rows, f["roots"].shape[0]), dtype=np.int64)
        P.apply_rows(
            X.indptr,
            X.indices,
            X.values,
            X.dim,
            f["roots"],
            f["child_pos"],
            f["child_neg"],
            f["w_ptr"],
            f["w_idx"],
            f["w_val"],
            f["intercept"],
            out,
        )
        return out

    # ------------------------------------------------------------------ artifacts

    def to_bytes(self) -> bytes:
        if not hasattr(self, "forest_"):
            raise RuntimeError("this FastXML model is not fitted yet")
        # The current values (label_names and n_jobs may be set after fit), checked;
        # n_trees is the forest's own.
        params = self.check_params()
        params.update(
            n_trees=int(self.forest_["roots"].shape[0]),
            n_features=self.n_features_,
            n_labels=self.n_labels_,
        )
        return artifact.dumps(self.kind, params, self.forest_, meta=getattr(self, "meta_", {}))

    @classmethod
    def from_bytes(cls, blob: bytes, *, max_bytes: int | None = None) -> FastXML:
        """Read an artifact; a malformed or inconsistent forest is an ArtifactError, one
        whose arrays or scoring scratch would exceed ``max_bytes`` an ArtifactTooLarge."""
        art = artifact.loads(blob, expected_kind=cls.kind, max_bytes=max_bytes)
        p = dict(art.params)
        sizes = {}
        for key in ("n_features", "n_labels"):
            v = p.pop(key, None)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v < 1 << 40:
                raise artifact.ArtifactError(
                    f"fastxml artifact: params.{key} must be an integer in [1, 2**40), got {v!r}"
                )
            sizes[key] = v
        n_features, n_labels = sizes["n_features"], sizes["n_labels"]
        try:
            model = cls(**p)
            checked = model.check_params()
        except (TypeError, ValueError) as exc:
            raise artifact.ArtifactError(f"fastxml artifact has bad params: {exc}") from None
        # Scoring allocates, per thread, a dense row (8 B/feature) and label scratch (17 B/label).
        threads = os.cpu_count() or 1
        need = sum(a.nbytes for a in art.arrays.values())
        need += threads * (8 * n_features + 17 * n_labels)
        artifact.memory_budget(
            f"params.n_features = {n_features} / params.n_labels = {n_labels} "
            f"(scoring scratch for {threads} threads)",
            need,
            max_bytes,
        )
        forest = validate_tree_arrays(art.arrays, n_features, n_labels, checked["n_trees"])
        model.forest_ = forest
        model.n_features_ = n_features
        model.n_labels_ = n_labels
        model.meta_ = dict(art.meta)
        return model

    def save(self, path: str | Path) -> None:
        artifact.save(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int | None = None) -> FastXML:
        return cls.from_bytes(Path(path).read_bytes(), max_bytes=max_bytes)
