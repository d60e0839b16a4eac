"""Delayed labels, the codec side: the record kept for a prediction served with an id,
and the log entry that learns such predictions once their labels arrive.

A **record** is a one-row log entry (:mod:`service.models.payload`): the instance's
features exactly as the model learns them (encoded, hashed), with the prediction
that was served as its label and every score in ``"s"`` (labels, scores)::

    {"y": ["+1"], "s": [["+1", "-1"], [0.83, -0.83]]}

An **entry** with such rows is an ordinary entry plus ``"fb"``: for each row learned
from a record, ``[row, correct, loss]`` of the prediction that was served (figured
when the entry is built, so every replica counts the same). Progressive metrics take
those instead of the model's own pre-update prediction: true online evaluation.

>>> import numpy as np
>>> from learners.features import Batch
>>> b = Batch.from_dense(np.array([[0.0, 2.0]]))
>>> rec = encode_record(b, 0, {"label": "a", "scores": {"a": 0.5, "b": -0.5}})
>>> r = decode_record(rec, dim=2)
>>> r.indices.tolist(), r.values.tolist(), r.label, served_outcome(r, "b")
([1], [2.0], 'a', (0, 1.5))
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from learners.base import UpdateResult
from learners.features import Batch
from service.models.example_weights import weights_meta
from service.models.payload import PayloadError, decode_payload, encode_payload


class Record(NamedTuple):
    indices: np.ndarray
    values: np.ndarray
    label: Any  # the label served
    labels: list[Any]  # every label the model knew then, with its score
    scores: list[float]


def encode_record(batch: Batch, row: int, prediction: dict[str, Any]) -> bytes:
    scores = prediction["scores"]
    one = batch.take([row])
    return encode_payload(one, [prediction["label"]], s=[list(scores), list(scores.values())])


def decode_record(blob: bytes, dim: int) -> Record:
    batch, meta = decode_payload(blob, dim)
    if batch.n_rows != 1 or "s" not in meta:
        raise PayloadError("not a feedback record")
    labels, scores = meta["s"]
    return Record(batch.indices, batch.values, meta["y"][0], list(labels), list(scores))


def served_outcome(rec: Record, y: Any) -> tuple[int, float]:
    """``(correct, hinge loss)`` of the prediction served, for the true label ``y``, with
    the margin the learners use: ``score(y)`` on a binary model (its scores are μ·x and
    −μ·x), else ``score(y)`` minus the best other score; a label the model did not know
    when it served scored 0. Labels compare with their type (``1`` is not ``"1"``)."""
    scores = dict(zip(map(_key, rec.labels), rec.scores, strict=True))
    mine = scores.pop(_key(y), None)
    if mine is not None and len(rec.labels) == 2:
        margin = mine
    else:
        margin = (mine or 0.0) - (max(scores.values()) if scores else 0.0)
    return int(_key(rec.label) == _key(y)), max(0.0, 1.0 - margin)


def _key(label: Any) -> tuple[type, Any]:
    return (type(label), label)


def build_entry(
    batch: Batch,
    labels: list[Any],
    rows: list[int | tuple[Record, int, float]],
    dense: bool,
    weights: list[float] | None = None,
) -> bytes:
    """The entry learning ``rows`` in order: an int is that row of ``batch`` (an example
    sent with ``x``), a ``(record, correct, loss)`` the features of that record;
    ``labels`` has one label per row, ``weights`` (if any) one importance weight per row."""
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    fb: list[list[Any]] = []
    for k, r in enumerate(rows):
        if isinstance(r, int):
            parts.append(batch.row(r))
        else:
            rec, correct, loss = r
            parts.append((rec.indices, rec.values))
            fb.append([k, correct, loss])
    counts = np.array([len(ix) for ix, _ in parts], dtype=np.int64)
    indptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    empty = np.zeros(0)
    indices = np.concatenate([ix for ix, _ in parts] or [empty]).astype(np.int64)
    values = np.concatenate([vs for _, vs in parts] or [empty]).astype(np.float64)
    merged = Batch(indptr, indices, values, batch.dim)
    return encode_payload(merged, labels, dense=dense, fb=fb, **weights_meta(weights))


def update_with_served(
    model: Any,
    batch: Batch,
    labels: list[Any],
    fb: list[list[Any]],
    weights: list[float] | None = None,
) -> UpdateResult:
    """Learn an entry with ``"fb"`` rows (with the entry's importance ``weights``, if
    any): the state as one ``update`` gives, the progressive figures of the other rows
    from the model, of these from ``fb``. (Log loss and AUC count the other rows only:
    a served prediction keeps no margin.)"""
    served = {int(r): (int(c), float(loss)) for r, c, loss in fb}
    n = batch.n_rows
    cuts = [0] + [k for k in range(1, n) if (k in served) != (k - 1 in served)] + [n]
    parts = model.update_parts(batch, labels, cuts, weights)
    correct, loss_sum, updates = 0, 0.0, 0
    for a, r in zip(cuts[:-1], parts, strict=True):
        updates += r.updates
        if a not in served:
            correct += r.correct
            loss_sum += r.loss_sum
    for c, loss in served.values():
        correct += c
        loss_sum += loss
    # the calibrated scores of the rows the model scored itself (see UpdateResult)
    own = [r for a, r in zip(cuts[:-1], parts, strict=True) if a not in served]
    zs = [r.z for r in own if r.z is not None]
    pos = [r.positive for r in own if r.positive is not None]
    return UpdateResult(
        applied=n, correct=correct, loss_sum=loss_sum, updates=updates,
        z=np.concatenate(zs) if zs else None, positive=np.concatenate(pos) if pos else None,
        probit=any(r.probit for r in parts), errors=_errors(cuts, parts, served),
    )  # fmt: skip


def _errors(
    cuts: list[int], parts: list[UpdateResult], served: dict[int, tuple[int, float]]
) -> np.ndarray | None:
    """Each row's progressive 0/1 error in order: a served row's from the prediction
    that was served (as its figures), the others' from the model."""
    out = []
    for a, b, r in zip(cuts[:-1], cuts[1:], parts, strict=True):
        if a in served:
            out.append(np.array([1.0 - served[k][0] for k in range(a, b)]))
        elif r.errors is None:
            return None
        else:
            out.append(r.errors)
    return np.concatenate(out) if out else None
