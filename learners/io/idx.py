"""MNIST-style idx files (optionally gzipped) and labelled CSV for dense data."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}


def read_idx(path: str | Path) -> np.ndarray:
    """Read an idx array (``.gz`` is decompressed)."""
    p = Path(path)
    raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{p}: not an idx file (bad magic)")
    code, ndim = raw[2], raw[3]
    if code not in _DTYPES:
        raise ValueError(f"{p}: unknown idx element type 0x{code:02x}")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dt = np.dtype(_DTYPES[code])
    offset = 4 + 4 * ndim
    need = int(np.prod(shape)) * dt.itemsize
    if len(raw) - offset != need:
        raise ValueError(f"{p}: idx body has {len(raw) - offset} bytes, expected {need}")
    return np.frombuffer(raw, dtype=dt, offset=offset).reshape(shape).astype(dt.newbyteorder("="))


def read_mnist(directory: str | Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST images as float64 rows scaled to [0, 1], and integer labels."""
    d = Path(directory)
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(d / f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(d / f"{prefix}-labels-idx1-ubyte.gz")
    X = images.reshape(images.shape[0], -1).astype(np.float64) / 255.0
    return X, labels.astype(np.int64)


def read_labelled_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """CSV with the label in the first column and numeric features after it."""
    data = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    if data.shape[1] < 2:
        raise ValueError(f"{path}: need a label column and at least one feature column")
    return data[:, 1:], data[:, 0]
