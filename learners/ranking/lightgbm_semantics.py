"""LightGBM's split semantics for imported trees: missing values and default directions.

A tree trained here sends a row left when ``x <= threshold``. A tree imported from
LightGBM (:mod:`learners.ranking.lightgbm_import`) carries, per node, LightGBM's
``decision_type`` byte (bit 1: default left; bits 2-3: missing type None/Zero/NaN)
and must decide exactly as LightGBM's ``Tree::NumericalDecision`` does:

- every input value ``|x| <= kZeroThreshold`` (``1e-35f``) is 0.0 — LightGBM's
  prediction API drops such values from a row before the trees see it, and a
  feature absent from a sparse row is 0.0 as well;
- missing type None: NaN is read as 0.0, then ``x <= threshold``;
- missing type Zero: NaN and 0.0 go the default direction;
- missing type NaN: NaN goes the default direction, 0.0 is compared normally.

LightGBM writes a threshold of ``inf`` for a split after its last bin (every
number goes left). Thresholds and inputs are both clipped to the largest finite
double, which keeps every comparison of finite inputs exact (and ±inf inputs too,
unless a threshold is exactly ``±1.797...e308``); ``±inf`` then only stand for the
default directions below.

The scorer stays the plain ``x <= threshold`` one: each node reads a *rule column*,
its feature with NaN and 0.0 replaced by what the node's rule makes of them
(``-inf`` goes left of any finite threshold, ``+inf`` right, 0.0 is compared).
A feature gets one column per distinct rule (at most five), so the transform is
exact and costs a few numpy passes per batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.features import Batch
from learners.ranking import _lambdamart_kernels as K

__all__ = [
    "BIG",
    "CATEGORICAL",
    "DEFAULT_LEFT",
    "K_ZERO_THRESHOLD",
    "OBJECTIVES",
    "RuleColumns",
    "check_decision_type",
    "check_output_meta",
    "predict_rule_columns",
]

CATEGORICAL = 1  # kCategoricalMask
DEFAULT_LEFT = 2  # kDefaultLeftMask
MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2
BIG = float(np.finfo(np.float64).max)  # stands for ±inf in thresholds and inputs
K_ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's `const double kZeroThreshold = 1e-35f`

# Objectives an imported artifact may carry: what the service does with the score.
OBJECTIVES = ("lambdarank", "rank_xendcg", "regression", "binary")
_CHUNK = 1 << 15  # rows densified at a time
_BLOCK = 64  # rows per QuickScorer block, as LambdaMART's


def check_decision_type(dt: np.ndarray) -> str | None:
    """Why ``dt`` (uint8 per node) is not a numerical LightGBM decision, or ``None``."""
    if np.any(dt & CATEGORICAL):
        return f"node {int(np.argmax(dt & CATEGORICAL))} is a categorical split"
    missing = (dt >> 2) & 3
    if np.any(missing > MISSING_NAN):
        return f"node {int(np.argmax(missing > MISSING_NAN))} has missing type 3 (only 0-2 exist)"
    if np.any(dt & 0xF0):
        return f"node {int(np.argmax(dt & 0xF0))} sets unknown decision_type bits 4-7"
    return None


def check_output_meta(meta: dict[str, Any]) -> str | None:
    """Why the ``objective``/``sigmoid`` facts of an artifact's meta are unusable, or ``None``."""
    obj = meta.get("objective")
    if obj is None:
        return None
    if obj not in OBJECTIVES:
        return f"meta.objective must be one of {', '.join(OBJECTIVES)}, got {obj!r}"
    if obj == "binary":
        s = meta.get("sigmoid")
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 < s < float("inf"):
            return f"meta.sigmoid must be a positive finite number for a binary model, got {s!r}"
    return None


class RuleColumns:
    """The rule columns of a forest: ``feature[j]``, ``nan_to[j]``, ``zero_to[j]`` for
    column ``j``, and ``node_column[k]``, the column node ``k`` reads."""

    def __init__(self, feature: np.ndarray, decision_type: np.ndarray) -> None:
        default = np.where(decision_type & DEFAULT_LEFT, -np.inf, np.inf)
        missing = (decision_type >> 2) & 3
        nan_to = np.where(missing == MISSING_NONE, 0.0, default)
        zero_to = np.where(missing == MISSING_ZERO, default, 0.0)
        keys = np.stack([feature.astype(np.float64), nan_to, zero_to], axis=1)
        uniq, inverse = (
            np.unique(keys, axis=0, return_inverse=True) if keys.shape[0] else (keys, keys[:, 0])
        )
        self.feature = uniq[:, 0].astype(np.int64)
        self.nan_to = np.ascontiguousarray(uniq[:, 1])
        self.zero_to = np.ascontiguousarray(uniq[:, 2])
        self.node_column = np.asarray(inverse, dtype=np.int32).reshape(-1)
        # the distinct features the columns read, and each column's index among them
        self.used, self.source = np.unique(self.feature, return_inverse=True)

    @property
    def n_columns(self) -> int:
        return int(self.feature.shape[0])

    def apply(self, base: np.ndarray) -> np.ndarray:
        """Rule columns from ``base`` (rows x ``used`` features, as LightGBM would read them)."""
        out = np.ascontiguousarray(base[:, self.source], dtype=np.float64)
        if out.size == 0:
            return out
        out = np.clip(out, -BIG, BIG)  # as the thresholds: ±inf are kept for the rules
        nan = np.isnan(out)
        with np.errstate(invalid="ignore"):
            zero = np.abs(out) <= K_ZERO_THRESHOLD
        out = np.where(zero, self.zero_to, out)
        return np.where(nan, self.nan_to, out)


def predict_rule_columns(model: Any, X: Batch | np.ndarray, out: np.ndarray) -> None:
    """Scores of an imported LambdaMART (``model._rules`` set): per chunk, the used
    features as LightGBM reads them (absent = 0.0), turned into rule columns, scored by
    the plain ``x <= threshold`` kernels (QuickScorer up to 64 leaves, else traversal)."""
    T, rules = model.trees_, model._rules
    cols = np.arange(rules.n_columns, dtype=np.int64)
    offs = (T["node_off"], T["leaf_off"])
    if isinstance(X, Batch):
        mapped = model._columns(X.indices)
    for a in range(0, out.shape[0], _CHUNK):
        b = min(out.shape[0], a + _CHUNK)
        if isinstance(X, Batch):
            base = K.csr_to_dense_mapped(X.indptr, mapped, X.values, a, b, model._n_used)
        else:
            base = X[a:b][:, model._used]
        block = rules.apply(base)
        if model._elim is not None:
            K.predict_dense_qs(
                block, cols, model._local_feature, T["threshold"], model._elim, *offs,
                model._inorder, out[a:b], _BLOCK,
            )  # fmt: skip
        else:
            K.predict_dense(
                block, model._local_feature, T["threshold"], T["left"], T["right"],
                T["leaf_value"], *offs, out[a:b],
            )  # fmt: skip
