"""A hashed decision model's rows crossed by combining hashes (``"crossing": "hash"``, the
default of a model created now): what :mod:`service.models.decision_features` builds as
names (``c:<name>|id=<action>``, ``c:<name>|a:<name>``), made from the two sides' hashes
instead, as the raw-record context is crossed (:mod:`service.models.decision_records`).

With ``mask = 2**bits - 1``, ``h`` MurmurHash3 (32-bit, seed 0, UTF-8) and ``c_j = h(name_j)
& mask`` the column of context feature ``j`` (value ``x_j``; a string value ``v`` of ``k``
is the name ``k=v``, 1.0), an action's row is

- ``h("id=<action id>") & mask``: 1.0, the action's own bias;
- ``h("a:<name>") & mask``: each action feature's value ``v``;
- ``((16777619 * c_j) ^ h("id=<action id>")) & mask``: ``x_j`` (the context by the id);
- ``((16777619 * c_j) ^ h("a:<name>")) & mask``: ``x_j * v`` (context x action features);
- ``h("^constant") & mask``: 1.0 (the intercept).

Values landing in one column are summed. The rows are the same as with names but for
the crosses' columns; what costs is what differs: the names crossing builds and hashes
a string for every context feature of every action (``K * C * (1 + F)`` of them), this
crossing hashes each name once (cached) and crosses whole arrays at once, so a rank's
encoding no longer grows with the number of actions in Python. A model created before
this crossing existed keeps its rows (its stored config has no ``crossing``: names).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.csr_batch import Batch, canonical_rows
from learners.feature_keys import hashed_indices
from learners.intercept import INTERCEPT_NAME
from service.errors import too_large
from service.models import decision_features as df

FNV_PRIME = 16777619
CROSSINGS = ("hash", "names")
_FULL = 0xFFFFFFFF


def hashed_context(context: Any) -> tuple[np.ndarray, np.ndarray]:
    """A hashed context's full 32-bit name hashes and values (a 422 naming
    ``context.<name>`` for a value that is no finite number or string)."""
    named = df.named_values(context, "context")
    cols = hashed_indices([n for n, _ in named], _FULL)
    return cols, np.fromiter((v for _, v in named), np.float64, count=len(named))


def crossed_batch(
    dim: int,
    ctx: tuple[np.ndarray, np.ndarray],
    actions: list[dict[str, Any]],
    max_features: int,
    intercept: bool,
) -> Batch:
    """Every action's row (the module's doc) for the context's columns ``ctx`` (already
    masked to ``dim``, as the records encoder gives them, or full hashes), all actions
    at once: the arrays of every part concatenated, then sorted by (row, column) and
    summed (:func:`learners.csr_batch.canonical_rows`)."""
    mask = dim - 1
    cols, vals = ctx
    cols = cols & mask
    k, c = len(actions), cols.size
    feats = [df.named_values(a.get("features"), f"actions[{i}].features")
             for i, a in enumerate(actions)]  # fmt: skip
    nf = np.fromiter(map(len, feats), np.int64, count=k)
    sizes = 1 + nf + c * (1 + nf)
    over = np.flatnonzero(sizes > max_features)
    if over.size:
        i = int(over[0])
        loc = f"actions[{i}].features"
        raise too_large(
            f"{loc}: with the context's {c} features this action makes {int(sizes[i])} "
            f"features (its own, the context's by the action id, and context x action), "
            f"more than max_features_per_example ({max_features})",
            loc,
        )
    h_id = hashed_indices([f"id={a['id']}" for a in actions], _FULL)
    h_f = hashed_indices(["a:" + n for f in feats for n, _ in f], _FULL)
    fv = np.fromiter((v for f in feats for _, v in f), np.float64, count=h_f.size)
    owner = np.repeat(np.arange(k, dtype=np.int64), nf)
    spread = FNV_PRIME * cols
    rows = [np.arange(k, dtype=np.int64), owner, np.repeat(np.arange(k, dtype=np.int64), c),
            np.repeat(owner, c)]  # fmt: skip
    columns = [h_id & mask, h_f & mask, ((spread[None, :] ^ h_id[:, None]) & mask).ravel(),
               ((spread[None, :] ^ h_f[:, None]) & mask).ravel()]  # fmt: skip
    values = [np.ones(k), fv, np.tile(vals, k), (fv[:, None] * vals[None, :]).ravel()]
    if intercept:
        rows.append(np.arange(k, dtype=np.int64))
        columns.append(np.full(k, int(hashed_indices([INTERCEPT_NAME], mask)[0])))
        values.append(np.ones(k))
    row = np.concatenate(rows)
    order = np.argsort(row, kind="stable")
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=k), out=indptr[1:])
    ip, ix, vs = canonical_rows(
        indptr, np.concatenate(columns)[order], np.concatenate(values)[order]
    )
    return Batch(ip, ix.astype(np.int64, copy=False), vs.astype(np.float64, copy=False), dim)
