"""A LambdaMART forest as flat arrays: structural validation and QuickScorer tables.

Trees are stored as in LightGBM: per tree, internal nodes ``[node_off[t], node_off[t+1])``
with ``feature``, ``threshold``, ``left``, ``right`` (a child >= 0 is an internal node
of the same tree, a negative child ``c`` is the leaf ``~c``) and leaves
``[leaf_off[t], leaf_off[t+1])``. A tree without a split has no nodes and one leaf.
"""

from __future__ import annotations

import numpy as np

from learners import artifact

__all__ = ["check_trees", "exit_leaf_tables"]


def exit_leaf_tables(T: dict[str, np.ndarray]) -> tuple[np.ndarray | None, np.ndarray]:
    """Per internal node, the mask of leaves *not* in its left subtree (leaves numbered
    in order, left to right), and the leaf values in that order (QuickScorer).
    ``None`` when some tree has more than 64 leaves (masks are 64-bit)."""
    no, lo = T["node_off"], T["leaf_off"]
    if no.shape[0] > 1 and int(np.max(np.diff(lo))) > 64:
        return None, T["leaf_value"]
    elim = np.zeros(T["feature"].shape[0], dtype=np.uint64)
    inorder = np.zeros(T["leaf_value"].shape[0])
    for t in range(no.shape[0] - 1):
        a, b, la = int(no[t]), int(no[t + 1]), int(lo[t])
        if b == a:
            inorder[la] = T["leaf_value"][la]
            continue
        e, order = _tree_inorder(T["left"][a:b], T["right"][a:b])
        elim[a:b] = e
        inorder[la : la + order.shape[0]] = T["leaf_value"][la + order]
    return elim, inorder


def _tree_inorder(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In-order leaf sequence of one tree and each node's elimination mask."""
    n = left.shape[0]
    leaves: list[int] = []
    lmask = [0] * n  # leaves of each node's left subtree
    # iterative in-order walk: (child pointer, phase)
    stack: list[tuple[int, int]] = [(0, 0)]
    under: list[list[int]] = [[] for _ in range(n)]
    while stack:
        c, phase = stack.pop()
        if c < 0:
            leaves.append(~c)
            continue
        if phase == 0:
            stack.append((c, 1))
            stack.append((int(left[c]), 0))
            under[c] = [len(leaves)]
        else:
            start = under[c][0]
            lmask[c] = sum(1 << i for i in range(start, len(leaves)))
            stack.append((int(right[c]), 0))
    elim = np.array([~m & 0xFFFFFFFFFFFFFFFF for m in lmask], dtype=np.uint64)
    return elim, np.asarray(leaves, dtype=np.int64)


_DTYPES = {
    "feature": np.int32, "threshold": np.float64, "left": np.int32, "right": np.int32,
    "leaf_value": np.float64, "node_off": np.int64, "leaf_off": np.int64,
}  # fmt: skip


def _bad(message: str) -> artifact.ArtifactError:
    return artifact.ArtifactError(f"lambdamart artifact holds malformed trees: {message}")


def check_trees(T: dict[str, np.ndarray], n_features: int) -> None:
    """Refuse structurally impossible trees so scoring can never index out of bounds
    (or read a wrong-typed array, or loop): every check names the array at fault."""
    for name, dt in _DTYPES.items():
        a = T[name]
        if a.ndim != 1 or a.dtype != dt:
            raise _bad(
                f"array {name!r} must be 1-d {np.dtype(dt).name}, got {a.dtype} shape {a.shape}"
            )
    for name in ("threshold", "leaf_value"):
        if not np.all(np.isfinite(T[name])):
            i = int(np.argmin(np.isfinite(T[name])))
            raise _bad(f"{name}[{i}] is {T[name][i]!r}; scores must be finite numbers")
    with np.errstate(over="ignore"):  # a score sums one leaf per tree: bounded by this
        total = np.sum(np.abs(T["leaf_value"]))
    if not np.isfinite(total):
        raise _bad("leaf_value is so large that scores would overflow")
    no, lo = T["node_off"], T["leaf_off"]
    nn, nl = T["feature"].shape[0], T["leaf_value"].shape[0]
    if no.shape[0] < 1 or no.shape != lo.shape:
        raise _bad(
            f"node_off ({no.shape[0]}) and leaf_off ({lo.shape[0]}) must both be n_trees + 1 long"
        )
    if no[0] != 0 or lo[0] != 0 or no[-1] != nn or lo[-1] != nl:
        raise _bad(
            f"node_off must run from 0 to {nn} nodes and leaf_off from 0 to {nl} leaves, "
            f"got {no[0]}..{no[-1]} and {lo[0]}..{lo[-1]}"
        )
    if not T["threshold"].shape[0] == T["left"].shape[0] == T["right"].shape[0] == nn:
        raise _bad("threshold, left and right must have one entry per node of 'feature'")
    if np.any(np.diff(no) < 0):
        raise _bad("node_off is not monotonic")
    if np.any(np.diff(lo) != np.diff(no) + 1):
        raise _bad("every tree must have one more leaf than it has nodes (leaf_off vs node_off)")
    if nn and (T["feature"].min() < 0 or T["feature"].max() >= n_features):
        bad = int(np.argmax((T["feature"] < 0) | (T["feature"] >= n_features)))
        raise _bad(
            f"feature[{bad}] = {T['feature'][bad]} is outside [0, {n_features}) (meta.n_features)"
        )
    for t in range(no.shape[0] - 1):
        first, end = int(no[t]), int(no[t + 1])
        k = end - first
        if k == 0:
            continue
        left, right = T["left"][first:end], T["right"][first:end]
        parents = np.arange(k)
        for side, child in (("left", left), ("right", right)):
            internal = child >= 0
            # internal children point forward (no cycles) within the tree
            if np.any(child[internal] >= k) or np.any(child[internal] <= parents[internal]):
                raise _bad(f"tree {t}: a {side} child points outside the tree or backwards")
        kids = np.concatenate([left, right]).astype(np.int64)
        # a proper binary tree: nodes 1..k-1 and leaves 0..k each reached exactly once
        if not (
            np.array_equal(np.sort(kids[kids >= 0]), np.arange(1, k))
            and np.array_equal(np.sort(~kids[kids < 0]), np.arange(k + 1))
        ):
            raise _bad(f"tree {t}: its nodes do not form a tree (a node or leaf is shared or lost)")
