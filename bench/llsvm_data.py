"""The data sets LL-SVM's defaults are checked on, each with a fixed train/test split.

Every loader returns ``(X_train, y_train, X_test, y_test)`` as float64 features in
about [0, 1] and integer labels, or raises :class:`DataAbsent` naming the missing
file (tests turn that into a skip, the bench into a ``"skipped"`` row).

- ``mnist``: the official 60,000 / 10,000 split, pixels / 255 (``shared/data/mnist``).
- ``usps``: the official 7,291 / 2,007 split of Hastie et al.'s ``zip.{train,test}.gz``
  (``shared/data/usps``); grey values in [-1, 1] mapped to [0, 1] so the background
  is 0, as in MNIST.
- ``letter``: UCI letter recognition, the usual first 16,000 rows for training and
  the last 4,000 for testing (``shared/data/letter``); the 16 integer features
  (0..15) divided by 15.
- ``digits``: scikit-learn's 8x8 digits, 70/30 stratified split (seed 0), pixels / 16.
- ``segments``: River's bundled ImageSegments (UCI image segmentation, 18 features,
  7 classes), 70/30 stratified split (seed 0), features min-max scaled on the
  training part (their raw ranges differ by 1000x).
- ``bananas``: River's bundled Bananas (2-d, 2 classes, not linearly separable),
  70/30 stratified split (seed 0), min-max scaled on the training part.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import shared_data_dir
from learners.io.idx import read_mnist

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

__all__ = ["DATASETS", "PAPER_ERROR", "DataAbsent", "load"]

# Test error of LL-SVM in Ladicky & Torr (ICML 2011), Table 1 (MNIST, USPS, LETTER).
PAPER_ERROR = {"mnist": 0.0185, "usps": 0.0578, "letter": 0.0532}


class DataAbsent(FileNotFoundError):
    """A data file the loader needs is not on this machine."""


def _need(*parts: str) -> Path:
    p = shared_data_dir().joinpath(*parts)
    if not p.exists():
        raise DataAbsent(f"data file {p} is absent (see shared/data/PROVENANCE.md)")
    return p


def mnist() -> Split:
    d = _need("mnist", "train-images-idx3-ubyte.gz").parent
    (X, y), (Xt, yt) = read_mnist(d, "train"), read_mnist(d, "test")
    return X, y, Xt, yt


def _zip_digits(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(path, "rt") as fh:
        data = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    return (data[:, 1:] + 1.0) / 2.0, data[:, 0].astype(np.int64)


def usps() -> Split:
    X, y = _zip_digits(_need("usps", "zip.train.gz"))
    Xt, yt = _zip_digits(_need("usps", "zip.test.gz"))
    return X, y, Xt, yt


def letter() -> Split:
    path = _need("letter", "letter-recognition.data")
    rows = [line.split(",") for line in path.read_text().split()]
    if rows and len(rows[0][0]) != 1:  # this copy carries a header line ("Letter,1,2,...")
        rows = rows[1:]
    y = np.array([ord(r[0]) - ord("A") for r in rows], dtype=np.int64)
    X = np.array([[float(v) for v in r[1:]] for r in rows]) / 15.0
    return X[:16000], y[:16000], X[16000:], y[16000:]


def _split_scaled(X: np.ndarray, y: np.ndarray, *, minmax: bool) -> Split:
    from sklearn.model_selection import train_test_split

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    if minmax:
        lo, span = Xtr.min(axis=0), np.ptp(Xtr, axis=0)
        span[span == 0] = 1.0
        Xtr, Xte = (Xtr - lo) / span, (Xte - lo) / span
    return Xtr, ytr, Xte, yte


def digits() -> Split:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return _split_scaled(X / 16.0, y, minmax=False)


def _river(name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        from river import datasets
    except ImportError as exc:  # the bench extra is not installed
        raise DataAbsent(f"river is not installed ({exc})") from None
    rows = list(getattr(datasets, name)())
    X = np.array([list(x.values()) for x, _ in rows], dtype=np.float64)
    labels = [str(lab) for _, lab in rows]
    _, y = np.unique(labels, return_inverse=True)
    return X, y.astype(np.int64)


def segments() -> Split:
    return _split_scaled(*_river("ImageSegments"), minmax=True)


def bananas() -> Split:
    return _split_scaled(*_river("Bananas"), minmax=True)


DATASETS: dict[str, Callable[[], Split]] = {
    "mnist": mnist,
    "usps": usps,
    "letter": letter,
    "digits": digits,
    "segments": segments,
    "bananas": bananas,
}


def load(name: str) -> Split:
    """The split of data set ``name`` (one of :data:`DATASETS`)."""
    return DATASETS[name]()
