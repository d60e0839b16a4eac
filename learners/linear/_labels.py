"""Label validation and coding for the linear classifiers.

Labels are strings or integers (``learners.base.check_label``; a float that is a
whole number, as files give labels, is that integer); a model numbers them in
order of first appearance. Three paths, all giving the same codes:

- a short list (≤ ``SMALL`` labels, e.g. one HTTP request) of known labels is one
  dict lookup per label: converting it to an array costs more;
- an integer array (or an all-int list, converted once) is coded by one numba pass
  against the model's cached table of known integer labels;
- anything else (strings) is validated at C speed (``set(map(type, ...))``) and
  coded through a dict; a per-label loop runs only to name a bad label.

>>> y, new = label_codes(["b", "a", "b"], 3, {"a": 0})
>>> y.tolist(), new
([1, 0, 1], [(0, 'b')])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from learners.base import MAX_FLOAT_LABEL, Label, check_label
from learners.linear import _kernels as K

SMALL = 16  # up to this many listed labels, dict lookups beat converting to an array
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_PLAIN = {int, str}
IntTable = tuple[np.ndarray, np.ndarray]  # (sorted int64 keys, their codes)


def int_table(index: dict[Label, int]) -> IntTable:
    """The known integer labels as sorted int64 keys and their codes (for ``code_labels``)."""
    pairs = sorted(
        (int(lab), k)
        for lab, k in index.items()
        if isinstance(lab, int) and _INT64_MIN <= lab <= _INT64_MAX
    )
    keys = np.array([p[0] for p in pairs], dtype=np.int64)
    return keys, np.array([p[1] for p in pairs], dtype=np.int64)


def label_codes(
    labels: Any,
    n: int,
    index: dict[Label, int],
    table: Callable[[], IntTable] | None = None,
) -> tuple[np.ndarray, list[tuple[int, Label]]]:
    """Label indices (new labels numbered after the known ones) and [(first row, new label)].

    ``table`` returns ``int_table(index)``, typically cached by the model (it only
    changes when a label is added).
    """
    arr: np.ndarray | None = None
    if isinstance(labels, np.ndarray):
        if labels.ndim != 1:
            raise ValueError(f"labels: must be 1-dimensional, got shape {labels.shape}")
        if labels.dtype.kind in "iu":
            arr = labels
        elif labels.dtype.kind == "f":
            arr = _integral_floats(labels)
        elif labels.dtype.kind in "bc" and len(labels):
            check_label(labels[0].item(), "labels[0]")  # names the first (bool/complex) value
        else:
            labels = labels.tolist()
    elif not isinstance(labels, Sequence) or isinstance(labels, str | bytes):
        raise ValueError(f"labels: expected a sequence of labels, got {type(labels).__name__}")
    if len(labels) != n:
        raise ValueError(f"labels: got {len(labels)} labels for a batch of {n} examples")
    if n <= SMALL and arr is None:
        y = _known_codes(labels, index)
        if y is not None:
            return y, []
    if arr is None:
        types = set(map(type, labels))
        if types == {int}:
            try:  # all-int lists take the vectorised path below (fromiter: no dtype guess)
                arr = np.fromiter(labels, dtype=np.int64, count=n)
            except OverflowError:
                arr = None
        if arr is None and (not types <= {str, int} or "" in set(labels)):
            # slow path: names the culprit, or turns integral floats (1.0) and numpy
            # integers into the ints they are
            labels = [check_label(lab, f"labels[{i}]") for i, lab in enumerate(labels)]
    if arr is not None:
        if arr.dtype == np.int64 or np.can_cast(arr.dtype, np.int64):
            return _int64_codes(
                arr.astype(np.int64, copy=False), index, table() if table else int_table(index)
            )
        return int_codes(arr, index)  # uint64: values may exceed int64
    new: list[tuple[int, Label]] = []
    for lab in set(labels) - index.keys():
        new.append((labels.index(lab), lab))
    new.sort(key=lambda t: t[0])
    codes = dict(index)
    for j, (_, lab) in enumerate(new):
        codes[lab] = len(index) + j
    y = np.fromiter(map(codes.__getitem__, labels), dtype=np.int64, count=n)
    return y, new


def _integral_floats(labels: np.ndarray) -> np.ndarray:
    """A float label array (``load_svmlight_file``'s ``y``) as int64 when every value is
    a whole number below 2**53 in magnitude (``check_label``'s rule); else raises
    naming the first value that is not."""
    ok = np.isfinite(labels) & (np.abs(labels) < MAX_FLOAT_LABEL)
    ok[ok] = labels[ok] == np.trunc(labels[ok])
    if not ok.all():
        i = int(np.argmin(ok))
        check_label(labels[i].item(), f"labels[{i}]")
    return labels.astype(np.int64)


def _known_codes(labels: Sequence[Any], index: dict[Label, int]) -> np.ndarray | None:
    """Codes if every label is a plain int/str the model already knows, else None.

    Known labels passed ``check_label`` when they were added; the type test keeps
    ``True`` and ``1.0`` (equal to, and hashing like, the key ``1``) off this path.
    """
    if not set(map(type, labels)) <= _PLAIN:
        return None
    out = list(map(index.get, labels))
    if None in out:
        return None
    return np.array(out, dtype=np.int64)


def _int64_codes(
    arr: np.ndarray, index: dict[Label, int], table: IntTable
) -> tuple[np.ndarray, list[tuple[int, Label]]]:
    """``label_codes`` for an int64 array: one numba pass, a second only if labels are new."""
    keys, codes = table
    y, n_unknown = K.code_labels(arr, keys, codes)
    if not n_unknown:
        return y, []
    rest = np.flatnonzero(y < 0)
    vals, first = np.unique(arr[rest], return_index=True)
    new: list[tuple[int, Label]] = sorted(
        (int(rest[f]), int(v)) for v, f in zip(vals.tolist(), first.tolist(), strict=True)
    )
    # number new labels by first appearance, then code the rows that hold them
    extra = {lab: len(index) + j for j, (_, lab) in enumerate(new)}
    new_keys = np.array(sorted(extra), dtype=np.int64)
    new_codes = np.array([extra[v] for v in new_keys.tolist()], dtype=np.int64)
    y[rest] = K.code_labels(arr[rest], new_keys, new_codes)[0]
    return y, new


def int_codes(
    arr: np.ndarray, index: dict[Label, int]
) -> tuple[np.ndarray, list[tuple[int, Label]]]:
    """``label_codes`` for any integer array (here: uint64), without a Python loop over examples."""
    n = arr.shape[0]
    info = np.iinfo(arr.dtype)
    known = [(lab, k) for lab, k in index.items() if isinstance(lab, int)]
    new: list[tuple[int, Label]] = []
    y = np.full(n, -1, dtype=np.int64)
    for lab, k in known:
        if info.min <= lab <= info.max:
            y[arr == lab] = k
    rest = np.flatnonzero(y < 0)
    if rest.size:
        vals, first = np.unique(arr[rest], return_index=True)
        new = sorted((int(rest[f]), int(v)) for v, f in zip(vals, first, strict=True))
    for j, (_, new_lab) in enumerate(new):  # number new labels by first appearance
        y[arr == new_lab] = len(index) + j
    return y, new
