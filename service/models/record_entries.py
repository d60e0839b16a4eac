"""Log entries of raw records whose features depend on the records seen before them.

A records model (``features.kind = "records"``, :mod:`learners.records`) whose config
asks for ``standardize`` (a running mean and variance) or ``idf`` (document frequencies)
turns a record into features with statistics of the records learned before it. Those
statistics are model state, so the log keeps the records themselves, and every worker
encodes them when it applies the entry, in log order: each record with the statistics
of every record before it (also those of its own entry), then the statistics take it
in (:meth:`RecordEncoder.learn`). ``/predict`` encodes with the statistics as they are
at the model's version. Every replica, and a worker restored from a checkpoint (which
keeps the statistics: :func:`snapshot_meta`) and the log after it, computes the same
vectors bit for bit.

Entry form: ``b"LSR1"`` + JSON ``{"y": [labels], "r": [records], ...extras}`` (extras
as an update entry's: importance weights ``"w"``).

>>> blob = encode_records_entry([{"age": 39}], ["+1"], w=[2.0])
>>> decode_records_entry(blob)
([{'age': 39}], {'y': ['+1'], 'w': [2.0]})
>>> decode_records_entry(b"LSU1....") is None
True
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "META_KEY",
    "RECORDS_MAGIC",
    "decode_records_entry",
    "encode_records_entry",
    "read_fields",
    "restore_statistics",
    "snapshot_meta",
]

RECORDS_MAGIC = b"LSR1"
META_KEY = "record_statistics"  # in a checkpoint's artifact meta


def encode_records_entry(records: list[Any], labels: list[Any], **extra: Any) -> bytes:
    return RECORDS_MAGIC + orjson.dumps({"y": labels, "r": records, **extra})


def read_fields(records: list[Any], names: frozenset[str]) -> list[Any]:
    """The records (dicts the encoder accepted) with only the fields the config reads,
    as the log keeps them: the encoder ignores the others (``unknown_fields: ignore``),
    so they are not model input, and one of them may be nested deeper than JSON
    encoders go (a 500 when the entry was written)."""
    return [
        r if all(k in names for k in r) else {k: v for k, v in r.items() if k in names}
        for r in records
    ]


def decode_records_entry(payload: bytes) -> tuple[list[Any], dict[str, Any]] | None:
    """(records, meta without them) of a records entry; None for another entry."""
    if payload[:4] != RECORDS_MAGIC:
        return None
    meta = orjson.loads(payload[4:])
    if not isinstance(meta, dict) or not isinstance(meta.get("r"), list):
        raise ValueError("a records log entry without its records")
    records = meta.pop("r")
    return records, meta


def snapshot_meta(encoder: Any) -> dict[str, Any]:
    """The statistics, for a checkpoint's meta (exact: floats as hex)."""
    return {META_KEY: encoder.to_state()}


def restore_statistics(spec: Any, meta: dict[str, Any]) -> None:
    """Put a checkpoint's statistics into the spec's encoder (a checkpoint of a model
    that has learned nothing yet may have none)."""
    state = meta.get(META_KEY)
    if state is None:
        return
    from learners.records.encoder import RecordEncoder

    restored = RecordEncoder.from_state(spec.encoder.to_config(), state)
    spec.encoder._state = restored._state
