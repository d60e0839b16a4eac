"""Locally Linear SVM (Ladicky & Torr, ICML 2011), multiclass, trained by SGD.

The classifier is linear in a *local* coordinate system: anchor points ``v`` are
placed by k-means, every example gets fixed local coordinates ``gamma(x)`` over its
``n_neighbours`` nearest anchors (weights decrease with distance and sum to 1),
and the score of class ``c`` is ``H_c(x) = gamma(x)^T W_c x + gamma(x)^T b_c``:
a smooth blend of per-anchor linear models. ``W`` and ``b`` are learned by SGD
on the hinge loss with step ``1 / (lam (t + t0))`` and the regulariser applied
every ``skip`` steps (the SVMSGD2 scheme the paper uses, eqs. 11-13).

Choices beyond the paper, each measured on MNIST (60k train / 10k test, 100
anchors, 8 neighbours, 10 passes; test error) and switchable:

- ``weighting="relative"``: gamma ~ exp(-beta (d^2 / d_1^2 - 1)), d_1 the nearest
  anchor's distance. Scale-free (the same ``beta`` for any feature scale). On raw
  pixels: 2.63 % with the paper's inverse distance, 2.28 % with the Shark wrapper's
  exp(-0.1 d^2), 2.23 % relative (beta=3).
- ``fit_bias=False``: the per-anchor bias b, unregularised with the full step as
  in eq. 12, made it 5.28 % (vs 2.81 %); the Shark wrapper also drops it.
- ``normalize=True``: rows scaled to unit length (2.22 % -> 2.02 % with averaging).
  For low-dimensional data whose vector length carries information (2-d points,
  say) set it to False. ``lam`` is per unit-norm row: 3e-7 here ~ 3e-5 on raw pixels.
- ``average=True``: the model is the mean of the end-of-pass iterates of the
  second half of the passes (2.25 % -> 2.02 %).
- ``multiclass="ovr"``: 2.02 % vs 2.10 % for the multiclass (Crammer-Singer) hinge.
- ``anchors="kmeans_per_class"``: as the Shark wrapper (2.02 % vs 2.01 % global).
- More neighbours help: 1.95 % with 10, 1.89 % with 12, 1.88 % with 16 (the
  paper reports 1.85 %); 8 stays the default for prediction speed.

These constructor defaults are the MNIST-tuned ones; ``learnserve train llsvm``
instead sizes ``n_anchors``, ``n_neighbours``, ``passes`` and ``normalize`` from the
data by the rule of :mod:`learners.llsvm.defaults` (``resolve``), which gives
exactly these values for MNIST and generalises to letter, USPS and smaller sets.

W is trained in float64 and kept in float32 once fitted: scoring reads W rows
of random anchors, and halving the bytes made scoring 1.5x faster; no argmax
changed on the MNIST test set (score differences ~1e-6).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.random((400, 2))
>>> y = np.where((X[:, 0] - 0.5) ** 2 + (X[:, 1] - 0.5) ** 2 < 0.1, "in", "out")
>>> model = LLSVM(n_anchors=16, n_neighbours=4, passes=5, normalize=False).fit(X, y)
>>> bool((model.predict(X) == y).mean() > 0.9)
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from learners import artifact
from learners.features import Batch, FeatureError
from learners.llsvm import _kernels as K
from learners.llsvm.kmeans import kmeans
from learners.llsvm.llsvm_params import checked_params
from learners.params import EstimatorParams

__all__ = ["LLSVM"]

_WEIGHTINGS = {"inverse": K.INVERSE, "exponential": K.EXPONENTIAL, "relative": K.RELATIVE}
_MULTICLASS = {"ovr": K.OVR, "crammer_singer": K.CRAMMER_SINGER}

Progress = Callable[[int, dict[str, float]], None]
AnchorProgress = Callable[[int, int], None]


def _shifted(progress: AnchorProgress, offset: int, total: int) -> AnchorProgress:
    """One k-means run's ``(done, its total)`` as a share of all the runs."""
    return lambda done, _own_total: progress(offset + done, total)


def _unit_rows(b: Batch) -> Batch:
    """Rows scaled to unit Euclidean norm (all-zero rows stay zero).

    A row whose sum of squares overflows (values past ~1e154) or underflows to 0 (values
    below ~1e-162) is measured scaled by its largest magnitude first, so it is still
    scaled to unit norm instead of collapsing to zeros (or staying tiny)."""
    counts = np.diff(b.indptr)
    rows = np.repeat(np.arange(b.n_rows), counts)
    with np.errstate(over="ignore", under="ignore"):  # such rows are measured again below
        sq = np.bincount(rows, b.values * b.values, b.n_rows)
    norm = np.sqrt(sq)
    nonzero = np.bincount(rows, b.values != 0.0, b.n_rows) > 0
    odd = ~np.isfinite(norm) | ((norm == 0.0) & nonzero)
    for r in np.flatnonzero(odd):
        v = b.values[b.indptr[r] : b.indptr[r + 1]]
        top = np.max(np.abs(v))
        norm[r] = top * np.sqrt(np.sum((v / top) ** 2))
    norm[norm == 0.0] = 1.0
    return Batch(b.indptr, b.indices, b.values / np.repeat(norm, counts), b.dim)


class LLSVM(EstimatorParams):
    """Locally Linear SVM classifier (dense features, any number of classes).

    Parameters
    ----------
    n_anchors: anchor points (k-means centres).
    n_neighbours: nearest anchors that carry an example's local coordinates.
    lam: regularisation strength lambda (per-example objective).
    t0: step offset; the first step is ``1 / (lam (1 + t0))``.
    skip: the regulariser is applied (scaled by ``skip``) every ``skip`` steps.
    passes: epochs over the shuffled training set.
    weighting: ``"relative"`` (gamma ~ exp(-beta (d^2/d_1^2 - 1)), scale-free),
        ``"inverse"`` (gamma ~ 1/d, the paper) or ``"exponential"``
        (gamma ~ exp(-beta d^2), the Shark wrapper's distCoef).
    beta: sharpness of the relative/exponential weights (unused for ``"inverse"``).
    multiclass: ``"ovr"`` (one binary hinge per class) or ``"crammer_singer"``
        (true class against the best-scoring wrong class).
    anchors: ``"kmeans"`` over all rows, or ``"kmeans_per_class"`` (anchors split
        evenly between classes, clustered within each class).
    kmeans_iter: Lloyd iterations after k-means++ seeding.
    fit_bias: learn the per-anchor bias ``b`` (not regularised).
    normalize: scale every row to unit length (in fit and predict).
    average: the model is the mean of the end-of-pass iterates of the second half
        of the passes (otherwise the last iterate).
    seed: seeds k-means++ and the shuffles; the same seed gives the same model.
    """

    kind = "llsvm"
    _estimator_type = "classifier"  # for scikit-learn (learners.params)

    def __init__(
        self,
        n_anchors: int = 100,
        n_neighbours: int = 8,
        lam: float = 3e-7,
        t0: float = 100.0,
        skip: int = 200,
        passes: int = 10,
        *,
        weighting: str = "relative",
        beta: float = 3.0,
        multiclass: str = "ovr",
        anchors: str = "kmeans_per_class",
        kmeans_iter: int = 20,
        fit_bias: bool = False,
        normalize: bool = True,
        average: bool = True,
        seed: int = 0,
    ) -> None:
        # scikit-learn's rule: store every argument unchanged; check_params() (run by
        # fit and from_bytes) validates them, so set_params and clone behave.
        self.n_anchors = n_anchors
        self.n_neighbours = n_neighbours
        self.lam = lam
        self.t0 = t0
        self.skip = skip
        self.passes = passes
        self.weighting = weighting
        self.beta = beta
        self.multiclass = multiclass
        self.anchors = anchors
        self.kmeans_iter = kmeans_iter
        self.fit_bias = fit_bias
        self.normalize = normalize
        self.average = average
        self.seed = seed

    # ------------------------------------------------------------------ params

    def check_params(self) -> dict[str, Any]:
        """The hyperparameters, validated (``ValueError`` naming the first bad one) and
        converted to the types the kernels are compiled for."""
        return checked_params(self.get_params(deep=False))

    # ------------------------------------------------------------------ inputs

    def _rows(self, X: Any, dim: int | None, p: dict[str, Any]) -> Batch:
        """CSR rows of ``X`` (ndarray, nested lists or Batch), checked for shape and finiteness."""
        if isinstance(X, Batch):
            b = X
            if not np.all(np.isfinite(b.values)):
                raise FeatureError("X", "a feature value is not finite")
        else:
            try:
                arr = np.asarray(X, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise FeatureError("X", f"cannot be read as a numeric array ({exc})") from None
            if arr.ndim != 2:
                raise FeatureError("X", f"must be 2-dimensional (n, d), got shape {arr.shape}")
            if arr.shape[0] == 0:
                raise FeatureError("X", "no examples")
            if dim is not None and arr.shape[1] != dim:
                raise FeatureError("X", f"has {arr.shape[1]} features, the model expects {dim}")
            ip, ix, vs, bad = K.dense_to_rows(np.ascontiguousarray(arr), p["normalize"])
            if bad >= 0:
                raise FeatureError(f"X[{bad}]", "a feature value is NaN or infinite")
            return Batch(ip, ix, vs, arr.shape[1])
        if b.n_rows == 0:
            raise FeatureError("X", "no examples")
        if dim is not None and b.dim != dim:
            raise FeatureError("X", f"has {b.dim} features, the model expects {dim}")
        return _unit_rows(b) if p["normalize"] else b

    @staticmethod
    def _labels(y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(classes, index of each label)``; labels are all ints or all strings."""
        arr = np.asarray(y)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(f"y must be 1-dimensional with {n} labels, got shape {arr.shape}")
        if arr.dtype.kind == "b":
            raise ValueError("y must hold integer or string labels, got booleans")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
                raise ValueError("y holds non-integer numbers; labels must be integers or strings")
            arr = arr.astype(np.int64)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "U":
            pass
        elif arr.dtype.kind == "O" and all(isinstance(v, str) for v in arr.tolist()):
            arr = arr.astype(str)
        else:
            raise ValueError(f"y must hold integer or string labels, got dtype {arr.dtype}")
        classes, yi = np.unique(arr, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(f"y must hold at least 2 classes, got {classes.tolist()!r}")
        return classes, yi.astype(np.int64)

    # ------------------------------------------------------------------ fit

    def _place_anchors(
        self,
        X: Batch,
        yi: np.ndarray,
        rng: np.random.Generator,
        progress: AnchorProgress | None,
        p: dict[str, Any],
    ) -> np.ndarray:
        """k-means centres; ``progress(done, total)`` counts seeding + Lloyd iterations
        over all the k-means runs (one per class with ``"kmeans_per_class"``)."""
        if p["anchors"] == "kmeans":
            return kmeans(X, p["n_anchors"], seed=rng, max_iter=p["kmeans_iter"], progress=progress)
        n_classes = int(yi.max()) + 1
        if p["n_anchors"] < n_classes:
            raise ValueError(
                f"anchors='kmeans_per_class' needs n_anchors >= the {n_classes} classes"
            )
        # Even split; the first (n_anchors mod K) classes get one more.
        per = np.full(n_classes, p["n_anchors"] // n_classes)
        per[: p["n_anchors"] % n_classes] += 1
        unit = p["kmeans_iter"] + 1
        parts = []
        for c in range(n_classes):
            rows = np.flatnonzero(yi == c)
            m = min(int(per[c]), rows.shape[0])
            step = None if progress is None else _shifted(progress, c * unit, n_classes * unit)
            parts.append(
                kmeans(X.take(rows), m, seed=rng, max_iter=p["kmeans_iter"], progress=step)
            )
        return np.vstack(parts)

    def fit(
        self,
        X: Any,
        y: Any,
        progress: Progress | None = None,
        anchor_progress: AnchorProgress | None = None,
    ) -> LLSVM:
        """Train on ``X`` (``(n, d)`` array or :class:`Batch`) and labels ``y``.

        ``progress(pass_index, metrics)`` is called after each pass with the
        progressive ``train_error`` and ``hinge_loss`` of that pass and ``seconds``;
        ``anchor_progress(done, total)`` during the k-means that places the anchors.
        """
        p = self.check_params()  # before touching the data: a bad value fails fast
        Xb = self._rows(X, None, p)
        classes, yi = self._labels(y, Xb.n_rows)
        n_anchors, n_neighbours = p["n_anchors"], p["n_neighbours"]
        if Xb.n_rows < n_anchors:
            raise ValueError(f"n_anchors ({n_anchors}) exceeds the {Xb.n_rows} examples")
        rng = np.random.default_rng(p["seed"])
        start = time.perf_counter()
        anchors = np.ascontiguousarray(self._place_anchors(Xb, yi, rng, anchor_progress, p))
        if anchors.shape[0] < n_neighbours:  # per-class k-means on tiny classes
            raise ValueError(
                f"only {anchors.shape[0]} anchors could be placed, fewer than "
                f"n_neighbours ({n_neighbours})"
            )
        layout = self._anchor_layout(anchors)
        nbr, gam = self._coordinates(Xb, layout, p)
        W = np.zeros((anchors.shape[0], Xb.dim, classes.shape[0]), dtype=np.float64)
        b = np.zeros((anchors.shape[0], classes.shape[0]), dtype=np.float64)
        t = 0
        self.history_: list[dict[str, float]] = []
        # Tail average: the mean of the end-of-pass iterates of the second half.
        first_avg = p["passes"] // 2 if p["average"] else p["passes"] - 1
        W_sum, b_sum = np.zeros_like(W), np.zeros_like(b)
        for it in range(p["passes"]):
            order = rng.permutation(Xb.n_rows).astype(np.int64)
            t, mistakes, hinge = K.sgd_epoch(
                Xb.indptr, Xb.indices, Xb.values, nbr, gam, yi, order, W, b,
                t, p["lam"], p["t0"], p["skip"], _MULTICLASS[p["multiclass"]], int(p["fit_bias"]),
            )  # fmt: skip
            metrics = {
                "train_error": mistakes / Xb.n_rows,
                "hinge_loss": hinge / Xb.n_rows,
                "seconds": time.perf_counter() - start,
            }
            if it >= first_avg:
                W_sum += W
                b_sum += b
            self.history_.append(metrics)
            if progress is not None:
                progress(it, metrics)
        n_avg = p["passes"] - first_avg
        # Served in float32 (see the module doc): scoring reads W rows at random
        # anchors, so halving the bytes speeds prediction up; scores move by ~1e-6.
        self.anchors_ = anchors
        # Kept so that each predict call does not redo the transpose (~0.1 ms on MNIST).
        self._layout = layout
        self.W_ = (W_sum / n_avg).astype(np.float32)
        self.b_ = (b_sum / n_avg).astype(np.float32)
        self.t_ = int(t)
        self._checked = p  # what the model was trained with (predict and to_bytes use these)
        if not hasattr(self, "meta_"):
            self.meta_: dict[str, Any] = {}  # free JSON notes saved with the model
        self.classes_ = classes
        self.n_features_ = Xb.dim
        return self

    # ------------------------------------------------------------------ predict

    def _check_fitted(self) -> None:
        if not hasattr(self, "W_"):
            raise RuntimeError("this LLSVM is not fitted yet; call fit() or load a model")

    @staticmethod
    def _anchor_layout(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Anchors transposed (feature-major, as the kernels read them) and their |a|^2."""
        return np.ascontiguousarray(a.T), np.einsum("ij,ij->i", a, a)

    def _coordinates(
        self, Xb: Batch, layout: tuple[np.ndarray, np.ndarray], p: dict[str, Any]
    ) -> tuple[np.ndarray, np.ndarray]:
        nbr, gam, _ = K.nearest_anchors(
            Xb.indptr, Xb.indices, Xb.values, layout[0], layout[1], p["n_neighbours"],
            _WEIGHTINGS[p["weighting"]], p["beta"],
        )  # fmt: skip
        return nbr, gam

    def local_coordinates(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(anchor indices (n, k), gamma (n, k))`` of each row, nearest anchor first."""
        self._check_fitted()
        p = self._checked
        return self._coordinates(self._rows(X, self.n_features_, p), self._layout, p)

    def decision_function(self, X: Any) -> np.ndarray:
        """Class scores ``(n, n_classes)`` in the order of ``classes_``."""
        self._check_fitted()
        p = self._checked
        Xb = self._rows(X, self.n_features_, p)
        nbr, gam = self._coordinates(Xb, self._layout, p)
        return K.decision(Xb.indptr, Xb.indices, Xb.values, nbr, gam, self.W_, self.b_)

    def predict(self, X: Any) -> np.ndarray:
        """The highest-scoring label of each row (ints or strings, as in training)."""
        self._check_fitted()
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # ------------------------------------------------------------------ artifact

    def to_bytes(self) -> bytes:
        self._check_fitted()
        is_str = self.classes_.dtype.kind == "U"
        params = {
            **self._checked,
            "classes": self.classes_.tolist(),
            "label_type": "str" if is_str else "int",
            "n_features": int(self.n_features_),
            "steps": self.t_,
        }
        arrays = {"anchors": self.anchors_, "W": self.W_, "b": self.b_}
        meta = {**getattr(self, "meta_", {}), "history": self.history_}
        return artifact.dumps(self.kind, params, arrays, meta=meta)

    @classmethod
    def from_bytes(cls, blob: bytes, *, max_bytes: int | None = None) -> LLSVM:
        """Read an artifact; anything malformed is an :class:`~learners.artifact.ArtifactError`
        (non-finite weights included), one too big for ``max_bytes`` an ``ArtifactTooLarge``."""
        art = artifact.loads(blob, expected_kind=cls.kind, max_bytes=max_bytes)
        p = dict(art.params)
        try:
            classes = p.pop("classes")
            label_type = p.pop("label_type")
            n_features = p.pop("n_features")
            steps = p.pop("steps")
            model = cls(**p)
            checked = model.check_params()
        except (KeyError, TypeError, ValueError) as exc:
            raise artifact.ArtifactError(f"llsvm artifact has bad params: {exc}") from None
        for key, v, lo in (("n_features", n_features, 1), ("steps", steps, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise artifact.ArtifactError(
                    f"llsvm artifact: params.{key} must be an integer >= {lo}, got {v!r}"
                )
        if label_type not in ("int", "str") or not isinstance(classes, list) or len(classes) < 2:
            raise artifact.ArtifactError(
                "llsvm artifact: params.classes must list at least 2 classes and "
                "params.label_type be 'int' or 'str'"
            )
        want = int if label_type == "int" else str
        if not all(isinstance(c, want) and not isinstance(c, bool) for c in classes):
            raise artifact.ArtifactError(f"llsvm artifact classes are not all {label_type}")
        if want is int and not all(-(1 << 63) <= c < 1 << 63 for c in classes):
            raise artifact.ArtifactError("llsvm artifact: params.classes has an int beyond int64")
        if len(set(classes)) != len(classes):
            raise artifact.ArtifactError("llsvm artifact: params.classes has duplicates")
        anchors, W, b = art.array("anchors"), art.array("W"), art.array("b")
        n_a, n_c = anchors.shape[0] if anchors.ndim == 2 else -1, len(classes)
        if (
            anchors.shape != (n_a, n_features)
            or W.shape != (n_a, n_features, n_c)
            or b.shape != (n_a, n_c)
            or n_a < checked["n_neighbours"]
            or anchors.dtype != np.float64
            or W.dtype != np.float32
            or b.dtype != np.float32
        ):
            raise artifact.ArtifactError(
                f"llsvm artifact arrays have inconsistent shapes: anchors {anchors.shape}, "
                f"W {W.shape}, b {b.shape} for {n_features} features and {n_c} classes"
            )
        for name, a in (("anchors", anchors), ("W", W), ("b", b)):
            with np.errstate(over="ignore"):
                # |score| <= sum |W| * |x| (+ sum |b|): the sums must be finite numbers too
                finite = np.isfinite(np.sum(np.abs(a), dtype=np.float64))
            if not finite:
                raise artifact.ArtifactError(
                    f"llsvm artifact: array {name!r} has non-finite (or overflowing) values"
                )
        # the transposed anchors (_anchor_layout) are a second copy of them
        need = anchors.nbytes * 2 + W.nbytes + b.nbytes
        artifact.memory_budget("arrays 'anchors', 'W' and 'b'", need, max_bytes)
        layout = cls._anchor_layout(anchors)
        with np.errstate(over="ignore"):
            if not np.all(np.isfinite(layout[1])):  # distances to it would overflow
                raise artifact.ArtifactError(
                    "llsvm artifact: array 'anchors' has an anchor too large to measure "
                    "distances to (its squared norm overflows)"
                )
        model.anchors_, model.W_, model.b_, model.t_ = anchors, W, b, steps
        model._layout = layout
        model._checked = checked
        model.classes_ = np.asarray(classes, dtype=np.int64 if want is int else str)
        model.n_features_ = n_features
        meta = dict(art.meta)
        hist = meta.pop("history", [])
        model.history_ = hist if isinstance(hist, list) else []
        model.meta_ = meta
        return model

    def save(self, path: str | Path) -> None:
        artifact.save(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int | None = None) -> LLSVM:
        return cls.from_bytes(Path(path).read_bytes(), max_bytes=max_bytes)
