"""Online pairwise RankSVM (Sculley 2009, "Large Scale Learning to Rank") with Pegasos steps.

For each query group, pairs of items with different relevance give a difference
vector ``d = x_a - x_b`` with sign ``y = +1`` if ``a`` is more relevant, else -1
(ties are skipped). Each pair is one Pegasos step (Shalev-Shwartz et al. 2007)::

    t += 1;  eta = 1 / (lam * t)
    hinge active iff y <w, d> < 1        (w before the step)
    w <- (1 - eta * lam) w  [+ eta * y * d if active]
    optionally project w onto the ball of radius 1 / sqrt(lam)

``w = s * v`` makes the shrink O(1), so ``dim`` can be 2**20 (kernels in
:mod:`learners.ranking._ranksvm_kernels`). Pairs: every differing pair of a group
(lexicographic order) when ``pairs_per_group`` is None or the group has at most
that many; otherwise ``pairs_per_group`` sampled pairs drawn with a counter-based
SplitMix64 generator whose counter is part of the state: save -> load -> continue
is bit-exact, and an ``update`` on many groups equals a loop of single-group updates.

Importance weights: a query group may carry a weight h > 0 (``group_weight``). Its
pairs' hinge losses count h times in the Pegasos objective
λ/2‖w‖² + Σ h·max(0, 1 − y⟨w, d⟩), so each active pair's subgradient step is
``eta * h * y * d``; the shrink (the regulariser's step) and the step counter t are
not weighted. For an integer h = k this is the first-order (one subgradient, k times
as long) version of k copies of the pair, as Pegasos' mini-batch step weighs k equal
examples; h = 1 (or none) is the unweighted learner bit for bit.

>>> import numpy as np
>>> from learners.features import Batch
>>> m = RankSVM(dim=2, lam=0.01, seed=0)
>>> X = Batch.from_dense(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.2, 1.0]]))
>>> r = m.update(X, [2, 0, 1, 0], groups=[2, 2])
>>> r.applied, r.n_groups
(4, 2)
>>> m.rank(X, [2, 2])[0].tolist()
[0, 1]
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from learners import artifact
from learners.base import UpdateResult, digest_arrays
from learners.feature_names import FeatureNames, artifact_extras, read_extras
from learners.features import Batch, FeatureError, FeatureSpec
from learners.ranking import _ranksvm_kernels as K
from learners.ranking.ndcg import check_groups
from learners.weights import check_sample_weight

__all__ = ["RankSVM", "make_ranker"]

_METRIC_K = 10
_PARAMS = ("lam", "pairs_per_group", "projection", "seed")


def _check_relevance(relevance: Any, n: int) -> np.ndarray:
    """Relevance as float64: any finite real number (only the order within a query
    matters to pairwise learning, so 25..346 or -1.5 are as good as graded 0..4)."""
    if isinstance(relevance, np.ndarray):
        items: Sequence[Any] = relevance.tolist()
    else:
        items = list(relevance)
    if len(items) != n:
        raise FeatureError(
            "relevance", f"expected {n} relevance values (one per row), got {len(items)}"
        )
    out = np.empty(n, dtype=np.float64)
    for i, r in enumerate(items):
        ok = not isinstance(r, bool) and isinstance(r, int | float | np.integer | np.floating)
        try:
            v = float(r) if ok else math.nan
        except OverflowError:  # an int beyond float64
            v = math.inf
        if not math.isfinite(v):
            raise FeatureError(f"relevance[{i}]", f"must be a finite number, got {r!r}")
        out[i] = v
    return out


class RankSVM:
    """Online pairwise ranking SVM. ``lam`` is the L2 regularisation of Pegasos."""

    kind = "ranksvm"

    def __init__(
        self,
        dim: int,
        lam: float = 1e-2,
        pairs_per_group: int | None = 100,
        projection: bool = False,
        seed: int = 0,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"dim: must be a positive integer, got {dim!r}")
        if (
            isinstance(lam, bool)
            or not isinstance(lam, int | float)
            or not lam > 0
            or not np.isfinite(lam)
        ):
            raise ValueError(f"lam: must be > 0, got {lam!r}")
        if pairs_per_group is not None and (
            isinstance(pairs_per_group, bool)
            or not isinstance(pairs_per_group, int)
            or pairs_per_group < 1
        ):
            raise ValueError(
                f"pairs_per_group: must be None or an integer >= 1, got {pairs_per_group!r}"
            )
        if not isinstance(projection, bool):
            raise ValueError(f"projection: must be true or false, got {projection!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ValueError(f"seed: must be an integer in [0, 2**63), got {seed!r}")
        self.dim = int(dim)
        self.lam = float(lam)
        self.pairs_per_group = pairs_per_group
        self.projection = projection
        self.seed = seed
        self.v_ = np.zeros(self.dim)
        self.state_ = np.array([1.0, 0.0])  # [scale s, ||w||^2]
        self.counters_ = np.zeros(2, dtype=np.int64)  # [Pegasos step t, RNG counter]
        # what the examples were (kept in artifacts, not part of the learned state)
        self.features_: FeatureSpec | None = None
        self.feature_names_: FeatureNames | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {"lam": self.lam, "pairs_per_group": self.pairs_per_group,
                "projection": self.projection, "seed": self.seed}  # fmt: skip

    @property
    def coef_(self) -> np.ndarray:
        """The weight vector w (a copy)."""
        return self.state_[0] * self.v_

    # ------------------------------------------------------------------ online

    def _check_batch(self, batch: Batch) -> None:
        if not isinstance(batch, Batch):
            raise FeatureError("batch", f"must be a Batch, got {type(batch).__name__}")
        if batch.dim != self.dim:
            raise FeatureError("batch", f"has dimension {batch.dim}, the model has {self.dim}")
        if batch.nnz and (batch.indices.min() < 0 or batch.indices.max() >= self.dim):
            raise FeatureError("batch", f"a feature index is outside [0, {self.dim})")
        if not np.all(np.isfinite(batch.values)):
            row = int(
                np.searchsorted(batch.indptr, np.argmax(~np.isfinite(batch.values)), "right") - 1
            )
            raise FeatureError(f"examples[{row}].x", "value is not finite")

    def update(
        self, batch: Batch, relevance: Any, groups: Any = None, group_weight: Any = None
    ) -> UpdateResult:
        """Learn from consecutive query groups (``groups`` = their sizes; default: one group;
        ``group_weight``: an optional importance weight per group, finite and > 0).

        Everything is validated first; on error nothing changes. ``metric_sum`` is
        the sum of the per-group NDCG@10 of the scores *before* learning from the
        group (gain ``2**r - 1`` when the group's relevances are all integers in
        [0, 30], else ``r - min(r)``: see ``K.progressive_ndcg``); ``updates``
        counts the pairs whose hinge was active.
        """
        self._check_batch(batch)
        n = batch.n_rows
        rel = _check_relevance(relevance, n)
        try:
            g = check_groups([n] if groups is None else groups, n, "groups")
        except ValueError as exc:
            raise FeatureError("groups", str(exc).partition(": ")[2] or str(exc)) from None
        try:
            gw = check_sample_weight(group_weight, int(g.shape[0]), "group_weight")
        except ValueError as exc:
            loc, _, problem = str(exc).partition(": ")
            raise FeatureError(loc, problem) from None
        offsets = np.zeros(g.shape[0] + 1, dtype=np.int64)
        np.cumsum(g, out=offsets[1:])
        ndcg = np.zeros(g.shape[0])
        # Huge (finite) feature values or a tiny lam can overflow the weights; keep
        # the previous state so such a batch is refused and changes nothing. The
        # copy is O(dim), small next to the pair updates of a realistic batch.
        saved = (self.v_.copy(), self.state_.copy(), self.counters_.copy())
        active = K.update_groups(
            self.v_, self.state_, self.counters_, batch.indptr, batch.indices, batch.values,
            rel, offsets, self.lam, -1 if self.pairs_per_group is None else self.pairs_per_group,
            self.projection, self.seed, _METRIC_K, ndcg, gw,
        )  # fmt: skip
        if not (np.all(np.isfinite(self.state_)) and np.all(np.isfinite(self.v_))):
            self.v_, self.state_, self.counters_ = saved
            raise FloatingPointError(
                "weights became non-finite (feature values too large for lam="
                f"{self.lam}); the batch was refused and the model left unchanged"
            )
        # left-to-right sum, so a batch reports what a loop of single groups adds up to
        metric = float(sum(ndcg.tolist()))
        return UpdateResult(
            applied=n, updates=int(active), metric_sum=metric, n_groups=int(g.shape[0]),
            errors=1.0 - ndcg,
        )  # fmt: skip

    def first_nonfinite_group(
        self, batch: Batch, relevance: Any, groups: Any = None, group_weight: Any = None
    ) -> int | None:
        """A dry run of ``update`` on a copy of the state (this model is not changed):
        the index of the first group whose learning would make the weights non-finite,
        or None when the whole batch can be learned. Malformed input raises as ``update``.

        The copy is O(dim), as ``update``'s own rollback copy; a failing batch is
        replayed group by group (``update`` on many groups equals a loop of single
        groups) to find the group.
        """
        try:
            self._copy().update(batch, relevance, groups, group_weight)
            return None
        except FloatingPointError:
            pass
        n = batch.n_rows
        rel = _check_relevance(relevance, n)
        g = check_groups([n] if groups is None else groups, n, "groups")
        gw = check_sample_weight(group_weight, int(g.shape[0]), "group_weight")
        trial = self._copy()
        start = 0
        for q, size in enumerate(g.tolist()):
            rows = np.arange(start, start + size)
            try:
                trial.update(
                    batch.take(rows), rel[rows], None, None if gw.size == 0 else gw[q : q + 1]
                )
            except FloatingPointError:
                return q
            start += size
        return int(g.shape[0]) - 1  # not reached: the whole batch failed, so a group does

    def _copy(self) -> RankSVM:
        twin = copy.copy(self)  # shares nothing below: every array is replaced
        twin.v_ = self.v_.copy()
        twin.state_ = self.state_.copy()
        twin.counters_ = self.counters_.copy()
        return twin

    def decision_function(self, batch: Batch) -> np.ndarray:
        self._check_batch(batch)
        return K.scores(self.v_, float(self.state_[0]), batch.indptr, batch.indices, batch.values)

    def rank(self, batch: Batch, groups: Any) -> list[np.ndarray]:
        """Per group, row indices within the group, best first (ties: input order)."""
        s = self.decision_function(batch)
        g = check_groups(groups, s.shape[0], "groups")
        b = np.concatenate([[0], np.cumsum(g)])
        return [np.argsort(-s[i:j], kind="stable") for i, j in itertools.pairwise(b)]

    # ------------------------------------------------------------------ offline (sklearn style)

    def fit(self, X: Any, y: Any, qid: Any, n_epochs: int = 5) -> RankSVM:
        """Continue training for ``n_epochs`` passes over the query groups (``qid`` per row).

        Each epoch visits the groups in a permutation drawn from ``(seed, t)``,
        a function of the state, so fitting is deterministic and resumable.
        """
        Xb = X if isinstance(X, Batch) else Batch.from_dense(np.asarray(X, dtype=np.float64))
        q = np.asarray(qid)
        if q.shape != (Xb.n_rows,):
            raise ValueError(f"qid: expected {Xb.n_rows} query ids, got shape {q.shape}")
        if isinstance(n_epochs, bool) or not isinstance(n_epochs, int) or n_epochs < 1:
            raise ValueError(f"n_epochs: must be an integer >= 1, got {n_epochs!r}")
        rel = _check_relevance(np.asarray(y, dtype=np.float64), Xb.n_rows)
        change = np.flatnonzero(q[1:] != q[:-1]) + 1
        bounds = np.concatenate([[0], change, [q.shape[0]]])
        for _ in range(n_epochs):
            perm = np.random.default_rng([self.seed, int(self.counters_[0])]).permutation(
                bounds.shape[0] - 1
            )
            rows = np.concatenate([np.arange(bounds[p], bounds[p + 1]) for p in perm])
            self.update(Xb.take(rows), rel[rows], groups=np.diff(bounds)[perm])
        return self

    def partial_fit(self, X: Any, y: Any, qid: Any) -> RankSVM:
        """One pass over the query groups in file order (``update`` on consecutive qid runs)."""
        Xb = X if isinstance(X, Batch) else Batch.from_dense(np.asarray(X, dtype=np.float64))
        q = np.asarray(qid)
        if q.shape != (Xb.n_rows,):
            raise ValueError(f"qid: expected {Xb.n_rows} query ids, got shape {q.shape}")
        change = np.flatnonzero(q[1:] != q[:-1]) + 1
        sizes = np.diff(np.concatenate([[0], change, [q.shape[0]]]))
        self.update(Xb, np.asarray(y, dtype=np.float64), groups=sizes)
        return self

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"dim": self.dim, **self.params}

    def predict(self, X: Any) -> np.ndarray:
        Xb = X if isinstance(X, Batch) else Batch.from_dense(np.asarray(X, dtype=np.float64))
        return self.decision_function(Xb)

    # ------------------------------------------------------------------ state

    def state_digest(self) -> str:
        return digest_arrays(self.v_, self.state_, self.counters_, self.dim, self.params)

    def to_bytes(self, meta: dict[str, Any] | None = None) -> bytes:
        """The model as an artifact (kind ``"ranksvm"``), with ``features_`` and
        ``feature_names_`` when set; ``meta`` adds JSON fields to its ``meta``."""
        return self._dumps(meta, artifact_extras(self.features_, self.feature_names_))

    def snapshot(self, meta: dict[str, Any] | None = None) -> Any:
        """Copy the state now; the returned function serialises the copy (``to_bytes``'
        bytes of this moment), e.g. in a worker thread while updates go on."""
        twin = self._copy()
        extras = artifact_extras(self.features_, self.feature_names_)  # replaced, not mutated
        return lambda: twin._dumps(meta, extras)

    def _dumps(
        self,
        meta: dict[str, Any] | None,
        extras: tuple[dict[str, Any], dict[str, np.ndarray]],
    ) -> bytes:
        # v is stored sparsely (bit-pattern non-zeros, so -0.0 survives) to keep
        # checkpoints of 2**20-dim models small.
        nz = np.flatnonzero(self.v_.view(np.uint64) != 0)
        arrays = {"v_index": nz.astype(np.int64), "v_value": self.v_[nz],
                  "state": self.state_, "counters": self.counters_}  # fmt: skip
        own_meta, own_arrays = extras
        return artifact.dumps(
            self.kind,
            {"dim": self.dim, **self.params},
            {**arrays, **own_arrays},
            {**own_meta, **(meta or {})},
        )

    @classmethod
    def from_bytes(cls, blob: bytes, *, max_bytes: int | None = None) -> RankSVM:
        art = artifact.loads(blob, expected_kind=cls.kind, max_bytes=max_bytes)
        return cls.from_artifact(art, max_bytes=max_bytes)

    @classmethod
    def from_artifact(cls, art: artifact.Artifact, *, max_bytes: int | None = None) -> RankSVM:
        """The model an :class:`~learners.artifact.Artifact` of kind ``"ranksvm"`` holds
        (``max_bytes``: the memory its weight vector may take, checked first)."""
        if art.kind != cls.kind:
            raise artifact.ArtifactError(f"artifact holds a {art.kind!r} model, expected 'ranksvm'")
        try:
            dim = art.params.get("dim")
            if isinstance(dim, int) and not isinstance(dim, bool):  # checked before allocating
                artifact.memory_budget("params.dim", 8 * dim, max_bytes)
            m = cls(**art.params)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, artifact.ArtifactError):
                raise
            raise artifact.ArtifactError(f"ranksvm artifact has bad params: {exc}") from None
        idx, val = art.array("v_index"), art.array("v_value")
        state, counters = art.array("state"), art.array("counters")
        if (
            idx.dtype.kind not in "iu"
            or counters.dtype.kind not in "iu"
            or not (val.dtype.kind == "f" and state.dtype.kind == "f")
        ):
            raise artifact.ArtifactError(
                "ranksvm artifact arrays have wrong dtypes (v_index, counters: integers; "
                "v_value, state: floats)"
            )
        if (
            idx.shape != val.shape or idx.ndim != 1 or state.shape != (2,) or counters.shape != (2,)
            or (idx.size and (idx.min() < 0 or idx.max() >= m.dim))
        ):  # fmt: skip
            raise artifact.ArtifactError("ranksvm artifact arrays have inconsistent shapes")
        with np.errstate(over="ignore", invalid="ignore"):
            w = float(state[0]) * val.astype(np.float64)
        if not (np.isfinite(w).all() and np.isfinite(state).all()) or not (
            state[0] > 0 and state[1] >= 0
        ):
            raise artifact.ArtifactError(
                "ranksvm artifact holds non-finite weights or a bad state (scale > 0, |w|^2 >= 0)"
            )
        try:
            m.features_, m.feature_names_ = read_extras(art.meta, art.arrays, m.dim)
        except ValueError as exc:
            raise artifact.ArtifactError(f"ranksvm artifact: {exc}") from None
        m.v_[idx] = val
        m.state_ = state.astype(np.float64)
        m.counters_ = counters.astype(np.int64)
        return m


def make_ranker(dim: int, params: Mapping[str, Any] | None = None) -> RankSVM:
    """Build a RankSVM from the service's JSON params; errors name ``params.<key>``."""
    params = dict(params or {})
    for key in params:
        if key not in _PARAMS:
            raise ValueError(f"params.{key}: unknown parameter (known: {', '.join(_PARAMS)})")
    try:
        return RankSVM(dim, **params)
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith("dim") else f"params.{msg}") from None
