"""The bake-off's data sets as bandit problems (``bench/decisions.py``, the decision
quality tests): each loader gives ``(contexts, classes, K)``: each example's features as
hashed named features (``{"name": value}``), its class in 0..K-1 (an action per class),
or ``None`` (a message on stderr) when the file is absent from ``../shared/data``.

- ``a9a``: LIBSVM's Adult, 123 binary features, 2 classes;
- ``mnist``: the pixels (scaled to [0, 1] by ``read_mnist``), 10 classes;
- ``sms``: SMS Spam Collection, each distinct lower-case word a binary feature, 2
  classes (not one of the issue's sets);
- ``adult``: the raw Adult census records, each category ``column=value``, ages and
  hours / 100, capital gains and losses log1p / 10 (fnlwgt left out), 2 classes (not
  one of the issue's sets).
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Callable

import numpy as np

from bench._common import shared_data_dir

Loaded = tuple[list[dict[str, float]], np.ndarray, int]


def a9a(rows: int) -> tuple[list[dict[str, float]], np.ndarray, int] | None:
    from learners.io.svmlight import read_svmlight

    path = shared_data_dir() / "a9a" / "a9a"
    if not path.exists():
        print(f"skipping a9a: {path} not found", file=sys.stderr)
        return None
    data = read_svmlight(path, n_features=123)
    n = data.X.n_rows if rows <= 0 else min(rows, data.X.n_rows)
    X, y = data.X, np.where(data.y[:n] > 0, 1, 0)
    ctx = [
        {str(j): v for j, v in zip(X.indices[a:b].tolist(), X.values[a:b].tolist(), strict=True)}
        for a, b in zip(X.indptr[:n].tolist(), X.indptr[1 : n + 1].tolist(), strict=True)
    ]
    return ctx, y, 2


def mnist(rows: int) -> tuple[list[dict[str, float]], np.ndarray, int] | None:
    from learners.io.idx import read_mnist

    root = shared_data_dir() / "mnist"
    if not root.exists():
        print(f"skipping MNIST: {root} not found", file=sys.stderr)
        return None
    X, y = read_mnist(root, "train")
    n = len(y) if rows <= 0 else min(rows, len(y))
    X = X.reshape(len(X), -1)[:n]  # read_mnist scales the pixels to [0, 1]
    ctx = []
    for row in X:
        nz = np.flatnonzero(row)
        ctx.append(dict(zip(map(str, nz.tolist()), row[nz].round(6).tolist(), strict=True)))
    return ctx, np.asarray(y[:n], dtype=np.int64), 10


def sms(rows: int) -> Loaded | None:
    path = shared_data_dir() / "sms-spam" / "SMSSpamCollection"
    if not path.exists():
        print(f"skipping SMS spam: {path} not found", file=sys.stderr)
        return None
    ctx, y = [], []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # a header line
        label, text = line.split("\t", 1)
        words = sorted(set(re.findall(r"[a-z0-9]+", text.lower())))
        ctx.append({f"w_{w}": 1.0 for w in words})
        y.append(1 if label == "spam" else 0)
    n = len(y) if rows <= 0 else min(rows, len(y))
    return ctx[:n], np.array(y[:n]), 2


ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education_num", "marital",
                 "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
                 "hours", "country")  # fmt: skip


def adult(rows: int) -> Loaded | None:
    path = shared_data_dir() / "adult-raw" / "adult.data"
    if not path.exists():
        print(f"skipping Adult: {path} not found", file=sys.stderr)
        return None
    ctx, y = [], []
    with path.open(newline="") as f:
        for row in csv.reader(f):
            cells = [c.strip() for c in row]
            if len(cells) < 15 or cells[0] == "age":  # a blank line, a header
                continue
            x: dict[str, float] = {}
            for col, v in zip(ADULT_COLUMNS, cells[:14], strict=True):
                if col in ("age", "education_num", "hours"):
                    x[col] = float(v) / 100.0
                elif col in ("capital_gain", "capital_loss"):
                    x[col] = float(np.log1p(float(v))) / 10.0
                elif col != "fnlwgt":
                    x[f"{col}={v}"] = 1.0
            ctx.append(x)
            y.append(1 if cells[14].startswith(">50K") else 0)
    n = len(y) if rows <= 0 else min(rows, len(y))
    return ctx[:n], np.array(y[:n]), 2


def vw_lines(ctx: list[dict[str, float]], y: np.ndarray) -> list[str]:
    """VW text lines of the same rows: the class (1-based), the features by name (VW's
    separators in a name replaced)."""

    def name(k: str) -> str:
        return re.sub(r"[|: ]", "_", k)

    return [f"{int(c) + 1} | " + " ".join(f"f{name(k)}:{v}" for k, v in x.items())
            for x, c in zip(ctx, y.tolist(), strict=True)]  # fmt: skip


SETS: dict[str, Callable[[int], Loaded | None]] = {
    "a9a": a9a, "mnist": mnist, "sms": sms, "adult": adult,
}  # fmt: skip
