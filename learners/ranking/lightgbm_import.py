"""LightGBM model text (``Booster.save_model``) -> a servable :class:`LambdaMART`.

The text format (read from LightGBM's ``gbdt_model_text.cpp`` and ``tree.cpp``):
a header of ``key=value`` lines (``num_class``, ``num_tree_per_iteration``,
``max_feature_idx``, ``objective``, an ``average_output`` flag for random-forest
mode, ``feature_names``, ...), then one block per tree starting ``Tree=<i>`` with
``num_leaves``, ``num_cat``, ``split_feature``, ``threshold``, ``decision_type``,
``left_child``, ``right_child``, ``leaf_value`` (``shrinkage`` is already folded
into the leaf values, and so is the initial score ``boost_from_average`` starts
from: it is added to the first tree's leaves), then ``end of trees``, feature
importances and a ``parameters:`` block. Only this text is read: no pickle, and
LightGBM itself is not imported.

Predictions of the imported model equal ``Booster.predict(X, raw_score=True)``
(the trees decide exactly as LightGBM's, missing values included: see
:mod:`learners.ranking.lightgbm_semantics`). A random-forest model
(``average_output``) is stored with its leaf values divided by the number of trees,
so its score is LightGBM's raw score divided by the number of trees: what
``Booster.predict`` returns for regression, and the margin of its probability for
binary.

Refused, each with a message naming the line and field: ``num_class`` > 1
(multiclass), linear trees, categorical splits (naming the feature), objectives
other than ``lambdarank``, ``rank_xendcg``, ``regression`` (L2) and ``binary``;
and text LightGBM does not write: numbers are read as it writes them (integers
``-?(0|[1-9][0-9]*)``, doubles as fmt's ``{:.17g}`` with ``inf``/``nan``; no ``+``,
no ``1_0``, no other script's digits), tree ``i`` must be headed ``Tree=i``, and an
integer must fit the 32-bit integers LightGBM stores (an ``OverflowError`` no more).
A model trained with ``tree_learner=data``/``feature``/``voting`` on several
machines is saved by the one Booster in this same format, so it imports the same.

Nothing is allocated per declared feature (``max_feature_idx`` may be up to
2**31 - 2): the model keeps a sorted map of the features its trees test. A model
whose trees would take more memory to serve than ``max_bytes`` (default: the
service's ``max_model_bytes``; the limit a deploy applies) is refused with an
:class:`~learners.artifact.ArtifactTooLarge` before its forest is built.

>>> m = from_lightgbm_text(open(path).read())  # doctest: +SKIP
>>> m.save("rank.lsart")  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np

from learners import artifact
from learners.ranking.forest import check_trees
from learners.ranking.lambdamart import LambdaMART, forest_need
from learners.ranking.lightgbm_semantics import (
    BIG,
    CATEGORICAL,
    OBJECTIVES,
    check_decision_type,
)

__all__ = ["LightGBMFormatError", "from_lightgbm_text", "load_lightgbm_model"]


class LightGBMFormatError(ValueError):
    """The text is not a LightGBM model this importer accepts; says where and why."""

    def __init__(self, line: int | None, field: str, problem: str) -> None:
        self.line, self.field = line, field
        where = f"line {line}, " if line is not None else ""
        super().__init__(f"{where}{field}: {problem}")


_TREE_INT_FIELDS = ("split_feature", "left_child", "right_child", "decision_type")
# Numbers as LightGBM writes them (fmt's "{}" for integers, "{:.17g}" for doubles,
# which gives inf and nan too); [0-9], not \d: no other script's digits.
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|inf|nan)")
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _parse_block(lines: list[str], start: int, stop: int) -> dict[str, tuple[int, str]]:
    """``key=value`` lines ``[start, stop)`` as ``{key: (1-based line, value)}``."""
    out: dict[str, tuple[int, str]] = {}
    for i in range(start, stop):
        line = lines[i].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        out[key] = (i + 1, value if sep else "")
    return out


def _numbers(
    block: dict[str, tuple[int, str]], key: str, n: int, tree: str, dtype: Any, inf: bool = False
) -> np.ndarray:
    if key not in block:
        raise LightGBMFormatError(None, f"{tree} {key}", "the field is missing")
    line, text = block[key]
    words = text.split()
    if len(words) != n:
        raise LightGBMFormatError(line, f"{tree} {key}", f"expected {n} values, got {len(words)}")
    grammar = _FLOAT if dtype is np.float64 else _INT
    if not all(map(grammar.fullmatch, words)):
        bad = next(w for w in words if not grammar.fullmatch(w))
        what = "a number" if dtype is np.float64 else "an integer"
        raise LightGBMFormatError(line, f"{tree} {key}", f"{bad[:40]!r} is not {what}")
    if dtype is np.float64:
        a = np.array([float(w) for w in words], dtype=np.float64)
    else:
        wide = [i for i, w in enumerate(words) if len(w) > 9 and not _fits_int32_text(w)]
        if wide:
            i = wide[0]
            raise LightGBMFormatError(
                line, f"{tree} {key}",
                f"value {i} is {words[i][:40]}; it must be in [{_INT32[0]}, {_INT32[1]}]",
            )  # fmt: skip
        a = np.array([int(w) for w in words], dtype=np.int64)
    ok = ~np.isnan(a) if inf else np.isfinite(a)
    if dtype is np.float64 and not np.all(ok):
        bad_i = int(np.argmin(ok))
        must = "a number" if inf else "finite"
        raise LightGBMFormatError(
            line, f"{tree} {key}", f"value {bad_i} is {words[bad_i]}; it must be {must}"
        )
    return a


def _fits_int32_text(w: str) -> bool:
    """Whether the integer written ``w`` (matching ``_INT``) is a 32-bit integer."""
    return len(w) <= 11 and _INT32[0] <= int(w) <= _INT32[1]


def _int_field(block: dict[str, tuple[int, str]], key: str, label: str = "") -> tuple[int, int]:
    """``(line, value)`` of an integer ``key=value`` line (a 32-bit integer, as LightGBM
    stores every one of them); ``label`` prefixes the field name."""
    field = f"{label} {key}".strip()
    if key not in block:
        raise LightGBMFormatError(None, field, "the line is missing")
    line, text = block[key]
    if not _INT.fullmatch(text):
        raise LightGBMFormatError(line, field, f"{text[:40]!r} is not an integer")
    if not _fits_int32_text(text):
        raise LightGBMFormatError(line, field, f"{text[:40]} is outside [{_INT32[0]}, {_INT32[1]}]")
    return line, int(text)


def _objective(header: dict[str, tuple[int, str]]) -> tuple[str, dict[str, Any]]:
    if "objective" not in header:
        raise LightGBMFormatError(
            None, "objective", "the header has no objective (a custom objective?); "
            f"supported: {', '.join(OBJECTIVES)}"
        )  # fmt: skip
    line, text = header["objective"]
    words = text.split()
    name = words[0] if words else ""
    if name not in OBJECTIVES:
        raise LightGBMFormatError(
            line, "objective", f"{text!r} is not supported; supported: {', '.join(OBJECTIVES)}"
        )
    opts = dict(w.partition(":")[::2] for w in words[1:])
    meta: dict[str, Any] = {"objective": name}
    if name == "regression" and "sqrt" in words[1:]:
        raise LightGBMFormatError(
            line, "objective", "regression with reg_sqrt is not supported (its output is squared)"
        )
    if name == "binary":
        sigmoid = opts.get("sigmoid", "1")
        sig = float(sigmoid) if _FLOAT.fullmatch(sigmoid) else float("nan")
        if not 0 < sig < float("inf"):
            raise LightGBMFormatError(line, "objective", f"bad sigmoid in {text!r}")
        meta["sigmoid"] = sig
    return name, meta


def _tree(
    lines: list[str], start: int, stop: int, t: int, n_features: int, names: _Names
) -> tuple[np.ndarray, ...]:
    tree = f"Tree={t}"
    block = _parse_block(lines, start, stop)
    _, n_leaves = _int_field(block, "num_leaves", tree)
    cat_line, num_cat = _int_field(block, "num_cat", tree)
    if n_leaves < 1:
        raise LightGBMFormatError(block["num_leaves"][0], f"{tree} num_leaves", "must be >= 1")
    if "is_linear" in block and block["is_linear"][1].strip() not in ("", "0"):
        raise LightGBMFormatError(
            block["is_linear"][0], f"{tree} is_linear",
            "linear trees (linear_tree=true) are not supported",
        )  # fmt: skip
    leaf_value = _numbers(block, "leaf_value", n_leaves, tree, np.float64)
    k = n_leaves - 1
    if k == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, np.zeros(0), empty, empty, leaf_value, empty
    ints = {key: _numbers(block, key, k, tree, np.int64) for key in _TREE_INT_FIELDS[:3]}
    dt = (
        _numbers(block, "decision_type", k, tree, np.int64)
        if "decision_type" in block
        else np.zeros(k, dtype=np.int64)
    )
    feature = ints["split_feature"]
    bad = (feature < 0) | (feature >= n_features)
    if bad.any():
        raise LightGBMFormatError(
            block["split_feature"][0], f"{tree} split_feature",
            f"feature {int(feature[np.argmax(bad)])} is outside [0, {n_features}) "
            "(max_feature_idx + 1)",
        )  # fmt: skip
    line_dt = block["decision_type"][0] if "decision_type" in block else None
    if np.any((dt < 0) | (dt > 255)):
        raise LightGBMFormatError(line_dt, f"{tree} decision_type", "values must be in [0, 255]")
    cat = (dt & CATEGORICAL) != 0
    if num_cat > 0 or cat.any():
        node = int(np.argmax(cat)) if cat.any() else 0
        f = int(feature[node])
        raise LightGBMFormatError(
            line_dt if cat.any() else cat_line, f"{tree} decision_type",
            f"node {node} splits on categorical feature {names(f)!r} (column {f}); "
            "categorical splits are not supported: retrain with that feature numerical "
            "(e.g. one-hot) or without categorical_feature",
        )  # fmt: skip
    why = check_decision_type(dt.astype(np.uint8))
    if why is not None:
        raise LightGBMFormatError(line_dt, f"{tree} decision_type", why)
    # LightGBM's last bin ends at +inf, so a split can have threshold inf ("every
    # number goes left"); stored as the largest double, inputs are clipped likewise.
    threshold = np.clip(_numbers(block, "threshold", k, tree, np.float64, inf=True), -BIG, BIG)
    return feature, threshold, ints["left_child"], ints["right_child"], leaf_value, dt


class _Names:
    """Feature ``j``'s name: ``feature_names``' word ``j`` when the line names every
    feature, else LightGBM's default ``Column_j``; read only when a message needs one
    (nothing is built per declared feature)."""

    def __init__(self, header: dict[str, tuple[int, str]], n_features: int) -> None:
        self.line = header.get("feature_names", (0, ""))[1]
        self.n_features = n_features

    def __call__(self, j: int) -> str:
        words = self.line.split()
        return words[j] if len(words) == self.n_features else f"Column_{j}"


def _check_tree_numbers(lines: list[str], starts: list[int]) -> None:
    """Tree ``t`` starts with the line ``Tree=t`` (LightGBM numbers them 0, 1, ... in order)."""
    for t, i in enumerate(starts):
        value = lines[i][len("Tree=") :].rstrip()
        if value != str(t):
            got = "" if not _INT.fullmatch(value) else " (each tree once, in order)"
            raise LightGBMFormatError(
                i + 1, "Tree", f"expected Tree={t}, got {lines[i][:40]!r}{got}"
            )


def from_lightgbm_text(text: str, *, max_bytes: int | None = None) -> LambdaMART:
    """Parse a LightGBM model text into a fitted :class:`LambdaMART` (module docstring).

    ``max_bytes``: the memory the model may take to serve (default
    :data:`~learners.artifact.DEFAULT_MAX_MODEL_BYTES`, the service's default
    ``max_model_bytes``); a larger one is an :class:`~learners.artifact.ArtifactTooLarge`.
    """
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Tree=")]
    end = next((i for i, ln in enumerate(lines) if ln.strip() == "end of trees"), None)
    if not lines or lines[0].strip() != "tree":
        raise LightGBMFormatError(1, "header", "a LightGBM model text starts with the line 'tree'")
    if not starts:
        raise LightGBMFormatError(None, "Tree=", "the model has no trees")
    if end is None or end < starts[-1]:
        raise LightGBMFormatError(None, "end of trees", "the line is missing (truncated file?)")
    _check_tree_numbers(lines, starts)
    header = _parse_block(lines, 0, starts[0])
    for key in ("num_class", "num_tree_per_iteration"):
        if key in header or key == "num_class":  # num_tree_per_iteration defaults to num_class
            line, v = _int_field(header, key)
            if v != 1:
                raise LightGBMFormatError(
                    line, key, f"is {v}: multiclass models (one tree per class) are not supported"
                )
    _, max_idx = _int_field(header, "max_feature_idx")
    if not 0 <= max_idx < (1 << 31) - 1:
        raise LightGBMFormatError(header["max_feature_idx"][0], "max_feature_idx", "out of range")
    n_features = max_idx + 1
    names = _Names(header, n_features)
    objective, meta = _objective(header)
    params = _parameters(lines, end)
    if params.get("linear_tree", "0") not in ("0", "false"):
        raise LightGBMFormatError(None, "parameters linear_tree", "linear trees are not supported")
    bounds = [*starts, end]
    trees: list[tuple[np.ndarray, ...]] = []
    for t, (a, b) in enumerate(itertools.pairwise(bounds)):
        tr = _tree(lines, a + 1, b, t, n_features, names)
        try:  # the node layout: a proper binary tree whose children point forward
            check_trees(_single(tr), n_features)
        except artifact.ArtifactError as exc:
            why = str(exc).split("tree 0: ", 1)[-1]  # check_trees saw this tree alone
            raise LightGBMFormatError(a + 1, f"Tree={t} left_child/right_child", why) from None
        trees.append(tr)
    # the limit a deploy applies (LambdaMART.from_bytes), checked before the forest is built
    nn, nl = sum(t[0].shape[0] for t in trees), sum(t[4].shape[0] for t in trees)
    arrays = 21 * nn + 8 * nl + 16 * (len(trees) + 1)  # as the artifact stores them
    artifact.memory_budget(
        f"{len(trees)} trees ({nn} nodes, {nl} leaves)",
        forest_need(arrays, nn, nl, n_features),
        max_bytes,
    )
    average = "average_output" in header
    return _model(trees, n_features, objective, meta, params, average)


def _parameters(lines: list[str], end: int) -> dict[str, str]:
    """The ``[key: value]`` lines of the ``parameters:`` block."""
    out: dict[str, str] = {}
    for ln in lines[end:]:
        if ln.strip() == "end of parameters":
            break
        m = re.fullmatch(r"\[([A-Za-z0-9_]+): ?(.*)\]", ln.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _single(tr: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
    k = tr[0].shape[0]
    return {
        "feature": tr[0].astype(np.int32), "threshold": tr[1].astype(np.float64),
        "left": tr[2].astype(np.int32), "right": tr[3].astype(np.int32),
        "leaf_value": tr[4], "node_off": np.array([0, k], dtype=np.int64),
        "leaf_off": np.array([0, k + 1], dtype=np.int64),
    }  # fmt: skip


def _model(
    trees: list[tuple[np.ndarray, ...]],
    n_features: int,
    objective: str,
    meta: dict[str, Any],
    params: dict[str, str],
    average: bool,
) -> LambdaMART:
    cat = [np.concatenate([t[i] for t in trees]) for i in range(6)]
    leaf_value = cat[4] / len(trees) if average else cat[4]
    node_off = np.concatenate([[0], np.cumsum([t[0].shape[0] for t in trees])]).astype(np.int64)
    leaf_off = np.concatenate([[0], np.cumsum([t[4].shape[0] for t in trees])]).astype(np.int64)
    m = LambdaMART(n_estimators=len(trees))
    m.n_features_, m.best_iteration_ = n_features, len(trees)
    m.trees_ = {
        "feature": cat[0].astype(np.int32), "threshold": cat[1].astype(np.float64),
        "left": cat[2].astype(np.int32), "right": cat[3].astype(np.int32),
        "leaf_value": leaf_value.astype(np.float64), "node_off": node_off, "leaf_off": leaf_off,
        "decision_type": cat[5].astype(np.uint8),
    }  # fmt: skip
    try:
        check_trees(m.trees_, n_features)
    except artifact.ArtifactError as exc:  # e.g. leaf values whose sum overflows
        raise LightGBMFormatError(None, "leaf_value", str(exc)) from None
    m.meta_ = {
        **meta,
        "source": "lightgbm",
        "average_output": average,
        "lightgbm_boosting": params.get("boosting", "gbdt"),
        "lightgbm_tree_learner": params.get("tree_learner", "serial"),
        "index_base": 0,  # LightGBM's column j is feature j (also as written in its files)
    }
    m._compact()
    return m


def load_lightgbm_model(path: str | Path, *, max_bytes: int | None = None) -> LambdaMART:
    """:func:`from_lightgbm_text` on a file (UTF-8; LightGBM writes ASCII)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LightGBMFormatError(None, "file", f"not a text file ({exc.reason})") from None
    return from_lightgbm_text(text, max_bytes=max_bytes)
