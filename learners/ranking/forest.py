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


def check_trees(T: dict[str, np.ndarray], n_features: int) -> None:
    """Refuse structurally impossible trees so scoring can never index out of bounds."""
    no, lo = T["node_off"], T["leaf_off"]
    nn, nl = T["feature"].shape[0], T["leaf_value"].shape[0]
    ok = (
        no.ndim == lo.ndim == 1 and no.shape == lo.shape and no.shape[0] >= 1
        and no[0] == 0 and lo[0] == 0 and no[-1] == nn and lo[-1] == nl
        and T["threshold"].shape[0] == T["left"].shape[0] == T["right"].shape[0] == nn
        and np.all(np.diff(no) >= 0) and np.all(np.diff(lo) == np.diff(no) + 1)
        and (nn == 0 or (T["feature"].min() >= 0 and T["feature"].max() < n_features))
    )  # fmt: skip
    if ok:
        for t in range(no.shape[0] - 1):
            k = int(no[t + 1] - no[t])
            for child in (T["left"][no[t] : no[t + 1]], T["right"][no[t] : no[t + 1]]):
                # internal children must point forward (no cycles), leaves must exist
                internal = child >= 0
                nodes = np.arange(k)
                if np.any(child[internal] >= k) or np.any(child[internal] <= nodes[internal]):
                    ok = False
                if np.any(~child[~internal] > k):
                    ok = False
    if not ok:
        raise artifact.ArtifactError("lambdamart artifact holds malformed trees")
