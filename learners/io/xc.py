"""Extreme Classification Repository text format (Bibtex, EUR-Lex, ...).

Line 1 is ``N D L`` (points, features, labels). Each following line is one point:
``l1,l2,... f:v f:v ...`` with 0-based label and feature ids; a point without
labels starts its line with a space. Malformed input raises ``ValueError``
naming the line.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "toy.txt")
>>> _ = open(p, "w").write("2 4 3\\n0,2 1:0.5 3:1\\n 0:2\\n")
>>> X, Y, n_labels = read_xc(p)
>>> X.to_dense().tolist(), [y.tolist() for y in Y], n_labels
([[0.0, 0.5, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0]], [[0, 2], []], 3)
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from learners.features import Batch

__all__ = ["XCData", "read_xc"]


class XCData(NamedTuple):
    X: Batch
    Y: list[np.ndarray]  # sorted unique int64 label ids per point
    n_labels: int


def read_xc(path: str | Path) -> XCData:
    """Read a whole XC-format file into features, label sets and the label count."""
    with open(path, encoding="utf-8") as fh:
        header = fh.readline()
        parts = header.split()
        if len(parts) != 3:
            raise ValueError(f"{path}:1: header must be 'N D L', got {header.strip()!r}")
        try:
            n, d, n_labels = (int(v) for v in parts)
        except ValueError:
            raise ValueError(f"{path}:1: header must be three integers, got {header!r}") from None
        if n < 0 or d < 1 or n_labels < 1:
            raise ValueError(f"{path}:1: bad header values N={n} D={d} L={n_labels}")
        indptr = [0]
        idx: list[int] = []
        val: list[float] = []
        Y: list[np.ndarray] = []
        lineno = 1
        for lineno, raw in enumerate(fh, start=2):
            line = raw.rstrip("\r\n")
            if not line.strip() and lineno - 1 > n:
                continue  # tolerate trailing blank lines
            toks = line.split()
            labels: list[int] = []
            if toks and not line[:1].isspace() and ":" not in toks[0]:
                try:
                    labels = [int(v) for v in toks[0].split(",") if v != ""]
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: bad label list {toks[0]!r}") from None
                toks = toks[1:]
            for lab in labels:
                if not 0 <= lab < n_labels:
                    raise ValueError(f"{path}:{lineno}: label {lab} is outside [0, {n_labels})")
            for tok in toks:
                f, sep, v = tok.partition(":")
                try:
                    j, x = int(f), float(v)
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: bad feature {tok!r}") from None
                if not sep or not 0 <= j < d:
                    raise ValueError(f"{path}:{lineno}: feature {tok!r} is outside [0, {d})")
                if not np.isfinite(x):
                    raise ValueError(f"{path}:{lineno}: feature {tok!r} is not finite")
                idx.append(j)
                val.append(x)
            indptr.append(len(idx))
            Y.append(np.unique(np.asarray(labels, dtype=np.int64)))
    if len(Y) != n:
        raise ValueError(f"{path}: header says {n} points but the file has {len(Y)}")
    X = Batch.from_csr(np.asarray(indptr), np.asarray(idx, dtype=np.int64), np.asarray(val), d)
    return XCData(X, Y, n_labels)
