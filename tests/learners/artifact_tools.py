"""Small valid artifacts of every batch kind, and tools to damage them in controlled ways.

The models are trained once per test session (``functools.cache``) and are tiny, so
the validation and fuzz tests (here and in tests/service) stay fast. ``reseal`` puts a
header/body back together with a fresh checksum, so a damage reaches the loaders
instead of stopping at the checksum.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from learners import artifact
from learners.features import Batch
from learners.llsvm.model import LLSVM
from learners.ranking.lambdamart import LambdaMART
from learners.xml.fastxml import FastXML

_PREFIX = struct.Struct("<8sHIQ")
KINDS = ("lambdamart", "fastxml", "llsvm")
LOADERS: dict[str, Callable[..., Any]] = {
    "lambdamart": LambdaMART.from_bytes,
    "fastxml": FastXML.from_bytes,
    "llsvm": LLSVM.from_bytes,
}


@functools.cache
def valid_blobs() -> dict[str, bytes]:
    """One small trained artifact per batch kind (5 features)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = np.clip((X[:, 0] * 2 + X[:, 1] + 2).round(), 0, 4).astype(int)
    ranker = LambdaMART(n_estimators=4, num_leaves=5, min_data_in_leaf=4).fit(X, y, [10] * 8)
    Y = [[0] if row[0] > 0 else [1, 2] for row in X]
    xml = FastXML(n_trees=3, max_leaf=8, labels_per_leaf=3, seed=0).fit(Batch.from_dense(X), Y)
    labels = np.where(X[:, 0] + X[:, 2] > 0, "yes", "no")
    loc = LLSVM(n_anchors=4, n_neighbours=2, passes=2).fit(X, labels)
    return {"lambdamart": ranker.to_bytes(), "fastxml": xml.to_bytes(), "llsvm": loc.to_bytes()}


def split(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(header, body) of a valid artifact."""
    _, _, hlen, blen = _PREFIX.unpack_from(blob, 0)
    start = _PREFIX.size
    header = json.loads(blob[start : start + hlen])
    return header, blob[start + hlen : start + hlen + blen]


def reseal(header: dict[str, Any] | bytes, body: bytes) -> bytes:
    """Prefix + header + body + a correct SHA-256 (the header may be raw JSON bytes)."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    head = _PREFIX.pack(artifact.MAGIC, artifact.FORMAT_VERSION, len(h), len(body)) + h + body
    return head + hashlib.sha256(head).digest()


def edit_header(blob: bytes, fn: Callable[[dict[str, Any]], None]) -> bytes:
    header, body = split(blob)
    fn(header)
    return reseal(header, body)


def with_arrays(blob: bytes, **changes: Any) -> bytes:
    """The same artifact with some arrays replaced (dtype and shape as given)."""
    art = artifact.loads(blob)
    arrays = {**art.arrays, **changes}
    return artifact.dumps(art.kind, art.params, arrays, art.meta, created_at=art.created_at)


def with_params(blob: bytes, section: str = "params", **changes: Any) -> bytes:
    return edit_header(blob, lambda h: h[section].update(changes))


def small_batch(model: Any, rng: np.random.Generator, rows: int = 4) -> Batch:
    """A few sparse rows valid for ``model`` (indices below its n_features)."""
    dim = int(model.n_features_)
    per = min(dim, 3)
    indptr = np.arange(rows + 1, dtype=np.int64) * per
    indices = np.concatenate(
        [np.sort(rng.choice(min(dim, 50), per, replace=False)) for _ in range(rows)]
    ).astype(np.int64)
    values = rng.uniform(-1, 1, rows * per)
    return Batch(indptr, indices, values, dim)


def scores(kind: str, model: Any, batch: Batch) -> np.ndarray:
    """What the service answers with, as one float array."""
    if kind == "lambdamart":
        return np.asarray(model.predict(batch))
    if kind == "fastxml":
        return np.asarray(model.predict_topk(batch, k=3)[1])
    return np.asarray(model.decision_function(batch))
