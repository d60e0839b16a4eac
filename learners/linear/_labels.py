"""Label validation and coding for the linear classifiers.

Labels are strings or integers (``learners.base.check_label``); a model numbers
them in order of first appearance. Validation of a whole batch of labels runs at
C speed in the common cases (one ``set(map(type, ...))``, integer arrays compared
vectorially) and falls back to a per-label loop only to name the culprit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from learners.base import Label, check_label


def label_codes(
    labels: Any, n: int, index: dict[Label, int]
) -> tuple[np.ndarray, list[tuple[int, Label]]]:
    """Label indices (new labels numbered after the known ones) and [(first row, new label)]."""
    arr: np.ndarray | None = None
    if isinstance(labels, np.ndarray):
        if labels.ndim != 1:
            raise ValueError(f"labels: must be 1-dimensional, got shape {labels.shape}")
        if labels.dtype.kind in "iu":
            arr = labels
        elif labels.dtype.kind in "bfc" and len(labels):
            check_label(labels[0].item(), "labels[0]")  # names the first (float/bool) value
        else:
            labels = labels.tolist()
    elif not isinstance(labels, Sequence) or isinstance(labels, str | bytes):
        raise ValueError(f"labels: expected a sequence of labels, got {type(labels).__name__}")
    if len(labels) != n:
        raise ValueError(f"labels: got {len(labels)} labels for a batch of {n} examples")
    if arr is None:
        types = set(map(type, labels))
        if types == {int}:
            try:  # all-int lists take the vectorised path below
                arr = np.array(labels, dtype=np.int64)
            except OverflowError:
                arr = None
        if arr is None and (not types <= {str, int} or "" in set(labels)):
            for i, lab in enumerate(labels):  # slow path, only to name the culprit
                check_label(lab, f"labels[{i}]")
    if arr is not None:
        return int_codes(arr, index)
    new: list[tuple[int, Label]] = []
    for lab in set(labels) - index.keys():
        new.append((labels.index(lab), lab))
    new.sort(key=lambda t: t[0])
    codes = dict(index)
    for j, (_, lab) in enumerate(new):
        codes[lab] = len(index) + j
    y = np.fromiter(map(codes.__getitem__, labels), dtype=np.int64, count=n)
    return y, new


def int_codes(
    arr: np.ndarray, index: dict[Label, int]
) -> tuple[np.ndarray, list[tuple[int, Label]]]:
    """``label_codes`` for an integer array, without a Python loop over examples."""
    n = arr.shape[0]
    known = [(lab, k) for lab, k in index.items() if isinstance(lab, int)]
    new: list[tuple[int, Label]] = []
    if len(known) <= 16:  # a few vectorised comparisons beat a sort
        y = np.full(n, -1, dtype=np.int64)
        for lab, k in known:
            if np.iinfo(arr.dtype).min <= lab <= np.iinfo(arr.dtype).max:
                y[arr == lab] = k
        rest = np.flatnonzero(y < 0)
        if rest.size:
            vals, first = np.unique(arr[rest], return_index=True)
            new = sorted((int(rest[f]), int(v)) for v, f in zip(vals, first, strict=True))
    else:
        vals, first, inv = np.unique(arr, return_index=True, return_inverse=True)
        lut = np.empty(vals.shape[0], dtype=np.int64)
        for u, (v, f) in enumerate(zip(vals.tolist(), first.tolist(), strict=True)):
            if v in index:
                lut[u] = index[v]
            else:
                new.append((f, v))
        new.sort(key=lambda t: t[0])
        y = np.empty(0, dtype=np.int64)
        if not new:
            return lut[inv], new
    for j, (_, new_lab) in enumerate(new):  # number new labels by first appearance
        code = len(index) + j
        if len(known) <= 16:
            y[arr == new_lab] = code
        else:
            lut[np.searchsorted(vals, new_lab)] = code
    return (y if len(known) <= 16 else lut[inv]), new
