"""SVMlight / LIBSVM / LETOR text files, with optional ``qid:`` and ``.query`` sidecars.

Each line is ``label [qid:Q] idx:val idx:val ... [# comment]``. Indices are
1-based by default (``zero_based=False``) and shifted to 0-based columns.
LightGBM-style sidecar query files hold one integer per line: the number of
consecutive rows belonging to each query.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from learners.features import Batch


@dataclass(frozen=True)
class SvmlightData:
    X: Batch
    y: np.ndarray  # float64 labels as written
    qid: np.ndarray | None  # int64 query id per row, if any

    @property
    def group_sizes(self) -> np.ndarray | None:
        """Sizes of consecutive runs of equal ``qid`` (file order)."""
        if self.qid is None:
            return None
        return group_sizes_from_qid(self.qid)


def group_sizes_from_qid(qid: np.ndarray) -> np.ndarray:
    if qid.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(np.diff(qid) != 0) + 1
    bounds = np.concatenate([[0], change, [qid.shape[0]]])
    return np.diff(bounds).astype(np.int64)


def read_svmlight(
    path: str | Path,
    *,
    n_features: int | None = None,
    zero_based: bool = False,
    query_file: str | Path | None = None,
) -> SvmlightData:
    """Read a whole file. ``n_features`` fixes the dimension (else max index + 1).

    Raises ``ValueError`` naming the line on malformed input.
    """
    labels: list[float] = []
    qids: list[int] = []
    indptr = [0]
    idx: list[int] = []
    val: list[float] = []
    shift = 0 if zero_based else 1
    has_qid = False
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                labels.append(float(parts[0]))
                start = 1
                if len(parts) > 1 and parts[1].startswith("qid:"):
                    qids.append(int(parts[1][4:]))
                    has_qid = True
                    start = 2
                elif has_qid:
                    raise ValueError("missing qid")
                for tok in parts[start:]:
                    k, _, v = tok.partition(":")
                    j = int(k) - shift
                    if j < 0:
                        raise ValueError(f"feature index {k} below the first index {shift}")
                    idx.append(j)
                    val.append(float(v))
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: malformed line ({exc})") from None
            indptr.append(len(idx))
    ix = np.asarray(idx, dtype=np.int64)
    dim = n_features if n_features is not None else (int(ix.max()) + 1 if ix.size else 1)
    X = Batch.from_csr(np.asarray(indptr), ix, np.asarray(val), dim)
    y = np.asarray(labels, dtype=np.float64)
    qid = np.asarray(qids, dtype=np.int64) if has_qid else None
    if query_file is not None:
        sizes = read_query_file(query_file)
        if int(sizes.sum()) != y.shape[0]:
            raise ValueError(
                f"{query_file}: query sizes add up to {int(sizes.sum())}, "
                f"but {path} has {y.shape[0]} rows"
            )
        qid = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
    return SvmlightData(X, y, qid)


def read_query_file(path: str | Path) -> np.ndarray:
    sizes = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            s = raw.strip()
            if not s:
                continue
            try:
                n = int(s)
            except ValueError:
                raise ValueError(f"{path}:{lineno}: not an integer query size") from None
            if n <= 0:
                raise ValueError(f"{path}:{lineno}: query size must be positive")
            sizes.append(n)
    return np.asarray(sizes, dtype=np.int64)
