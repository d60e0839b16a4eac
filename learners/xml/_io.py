"""Input checks for FastXML: label sets -> CSR, and validation of a loaded forest.

A forest is flat: ``roots`` (one node id per tree), per node ``child_pos``,
``child_neg`` (-1 at a leaf), ``intercept``, ``w_ptr`` into the sparse weights
``w_idx``/``w_val`` and ``leaf_ptr`` into the leaf distributions
``leaf_lab``/``leaf_val``. Children always have larger ids than their parent,
which is what makes routing terminate; :func:`validate_tree_arrays` checks that
and every index range, so a damaged artifact is refused instead of crashing (or
looping in) a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from learners.artifact import ArtifactError
from learners.features import Batch

TREE_ARRAYS = (
    "child_pos",
    "child_neg",
    "w_ptr",
    "w_idx",
    "w_val",
    "intercept",
    "leaf_ptr",
    "leaf_lab",
    "leaf_val",
)
# one entry per row: the row's label ids (a list or an int array)
LabelSets = Sequence[Sequence[int] | np.ndarray]

_INT = ("roots", "child_pos", "child_neg", "w_ptr", "w_idx", "leaf_ptr", "leaf_lab")


def labels_to_csr(
    Y: LabelSets | Batch, n_rows: int, n_labels: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Label sets, a label-matrix Batch or a dense 2-d indicator array -> sorted unique CSR
    ``(ptr, idx, val, n_labels)``."""
    if isinstance(Y, np.ndarray) and Y.ndim == 2:
        Y = Batch.from_dense(Y)  # a dense (n, n_labels) indicator, as scikit-learn uses
    if isinstance(Y, Batch):
        if Y.n_rows != n_rows:
            raise ValueError(f"Y has {Y.n_rows} rows but X has {n_rows}")
        if np.any(Y.values <= 0):
            raise ValueError("Y: label values must be positive")
        n_lab = Y.dim if n_labels is None else int(n_labels)
        if Y.dim > n_lab:
            raise ValueError(f"Y has {Y.dim} label columns but n_labels is {n_lab}")
        return Y.indptr, Y.indices, Y.values, n_lab
    if isinstance(Y, str | bytes) or not isinstance(Y, Sequence | np.ndarray):
        raise TypeError("Y must be a sequence of label lists (one per row) or a Batch")
    if len(Y) != n_rows:
        raise ValueError(f"Y has {len(Y)} rows but X has {n_rows}")
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    chunks = []
    for i, labs in enumerate(Y):
        try:
            a = np.unique(np.asarray(labs, dtype=np.int64).reshape(-1))
        except (TypeError, ValueError):
            raise ValueError(f"Y[{i}]: labels must be integers, got {labs!r}") from None
        if np.size(labs) and not np.all(np.asarray(labs) == np.asarray(labs, dtype=np.int64)):
            raise ValueError(f"Y[{i}]: labels must be integers, got {labs!r}")
        if a.size and a[0] < 0:
            raise ValueError(f"Y[{i}]: label {a[0]} is negative")
        chunks.append(a)
        ptr[i + 1] = ptr[i] + a.size
    idx = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    top = int(idx.max()) + 1 if idx.size else 0
    if n_labels is None:
        n_lab = top
    else:
        if isinstance(n_labels, bool) or int(n_labels) < 1:
            raise ValueError(f"n_labels must be a positive integer, got {n_labels!r}")
        n_lab = int(n_labels)
        if top > n_lab:
            raise ValueError(f"Y: label {top - 1} is outside [0, {n_lab})")
    if n_lab < 1:
        raise ValueError("Y has no labels at all")
    return ptr, idx, np.ones(idx.shape[0]), n_lab


def _ptr_ok(ptr: np.ndarray, n: int, total: int) -> bool:
    return (
        ptr.shape == (n + 1,)
        and int(ptr[0]) == 0
        and int(ptr[-1]) == total
        and bool(np.all(np.diff(ptr) >= 0))
    )


def validate_tree_arrays(
    arrays: Mapping[str, Any], n_features: int, n_labels: int, n_trees: int
) -> dict[str, np.ndarray]:
    """Check a forest read from an artifact; returns it or raises :class:`ArtifactError`."""
    bad = "fastxml artifact: "
    missing = [k for k in ("roots", *TREE_ARRAYS) if k not in arrays]
    if missing:
        raise ArtifactError(bad + f"missing arrays {missing}")
    f: dict[str, np.ndarray] = {}
    for name in ("roots", *TREE_ARRAYS):
        a = np.asarray(arrays[name])
        want = np.int64 if name in _INT else np.float64
        if a.dtype != want or a.ndim != 1:
            raise ArtifactError(bad + f"array {name!r} must be 1-d {np.dtype(want).name}")
        if want == np.float64 and not np.all(np.isfinite(a)):
            raise ArtifactError(bad + f"array {name!r} has non-finite values")
        f[name] = np.ascontiguousarray(a)
    if n_features < 1 or n_labels < 1:
        raise ArtifactError(bad + "n_features and n_labels must be positive")
    n = f["child_pos"].shape[0]
    if n < 1 or any(f[k].shape[0] != n for k in ("child_neg", "intercept")):
        raise ArtifactError(bad + "per-node arrays have inconsistent lengths")
    if f["roots"].shape[0] != n_trees:
        raise ArtifactError(bad + f"{f['roots'].shape[0]} roots for {n_trees} trees")
    if np.any((f["roots"] < 0) | (f["roots"] >= n)):
        raise ArtifactError(bad + "a root is outside the node range")
    roots = f["roots"]
    if roots[0] != 0 or np.any(np.diff(roots) <= 0):
        raise ArtifactError(bad + "roots must start at node 0 and increase")
    ids = np.arange(n)
    tree_of = np.searchsorted(roots, ids, side="right") - 1
    cp, cn = f["child_pos"], f["child_neg"]
    leaf = cp < 0
    if np.any(leaf != (cn < 0)) or np.any(cp[leaf] != -1) or np.any(cn[leaf] != -1):
        raise ArtifactError(bad + "a node has exactly one child")
    inner = ~leaf
    if np.any(
        (cp[inner] <= ids[inner]) | (cn[inner] <= ids[inner]) | (cp[inner] >= n) | (cn[inner] >= n)
    ):
        raise ArtifactError(bad + "a child id is not after its parent or is out of range")
    if np.any(tree_of[cp[inner]] != tree_of[inner]) or np.any(tree_of[cn[inner]] != tree_of[inner]):
        raise ArtifactError(bad + "a child lies in another tree")
    if not _ptr_ok(f["w_ptr"], n, f["w_idx"].shape[0]) or f["w_val"].shape != f["w_idx"].shape:
        raise ArtifactError(bad + "w_ptr/w_idx/w_val are inconsistent")
    if f["w_idx"].size and (f["w_idx"].min() < 0 or f["w_idx"].max() >= n_features):
        raise ArtifactError(bad + f"a weight's feature id is outside [0, {n_features})")
    # within a node, feature ids strictly increase (both routing kernels sum in that order)
    step = np.diff(f["w_idx"])
    starts = np.zeros(f["w_idx"].shape[0], dtype=bool)
    starts[f["w_ptr"][:-1][np.diff(f["w_ptr"]) > 0]] = True
    if np.any((step <= 0) & ~starts[1:]):
        raise ArtifactError(bad + "a node's feature ids are not increasing")
    if not _ptr_ok(f["leaf_ptr"], n, f["leaf_lab"].shape[0]) or (
        f["leaf_val"].shape != f["leaf_lab"].shape
    ):
        raise ArtifactError(bad + "leaf_ptr/leaf_lab/leaf_val are inconsistent")
    if f["leaf_lab"].size and (f["leaf_lab"].min() < 0 or f["leaf_lab"].max() >= n_labels):
        raise ArtifactError(bad + f"a leaf label is outside [0, {n_labels})")
    # a score sums one leaf per tree: bounded by the sum of all, which must be finite too
    with np.errstate(over="ignore"):
        total = np.sum(np.abs(f["leaf_val"]))
    if not np.isfinite(total):
        raise ArtifactError(bad + "leaf_val is so large that scores would overflow")
    return f
