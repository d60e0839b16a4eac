"""What a records encoder learns from the records it observes, and its JSON form.

- ``standardize`` numeric fields: the running count, mean and sum of squared
  deviations of the field's present values (Welford's update, in record order).
  A value is encoded as ``(x - mean) / sqrt(m2 / n)`` with the statistics of the
  records observed before it; 0 (no feature) while ``n < 2`` or ``m2 == 0``.
- ``idf`` text fields: the number of documents (records where the field is present)
  and, per hashed column, how many of them hold a feature on that column;
  ``idf = log((1 + N) / (1 + df)) + 1`` (scikit-learn's smoothed idf).

:class:`EncoderState` is immutable in use: an update builds a new one, so a reader
holding the old one sees it whole. Its JSON form (:meth:`EncoderState.to_json`)
writes floats as ``float.hex`` strings, exact bit for bit whatever reads the JSON,
and columns as sorted lists; :func:`canonical_bytes` is that form with sorted keys
and no spaces (what a state digest hashes).

>>> import numpy as np
>>> z, st = standardize(np.array([1.0, 2.0, 3.0, 4.0]), 0, 0.0, 0.0, True)
>>> z.tolist(), st
([0.0, 0.0, 3.0, 2.449489742783178], (4, 2.5, 5.0))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from learners.records._unicode import UNICODE_VERSION
from learners.records.config import NumericField, RecordsConfig, TextField

__all__ = ["STATE_VERSION", "EncoderState", "canonical_bytes", "standardize"]

STATE_VERSION = 1
Welford = tuple[int, float, float]  # n, mean, m2


@numba.njit(cache=True)
def standardize(x: np.ndarray, n: int, mean: float, m2: float, update: bool) -> Any:
    """z-scores of ``x`` with the statistics ``(n, mean, m2)``; with ``update`` each value
    is scored with the statistics of the values before it and then added (Welford).
    Returns (z, (n, mean, m2) after)."""
    z = np.zeros(x.shape[0], dtype=np.float64)
    for k in range(x.shape[0]):
        if n >= 2 and m2 > 0.0:
            z[k] = (x[k] - mean) / np.sqrt(m2 / n)
        if update:
            n += 1
            d = x[k] - mean
            mean += d / n
            m2 += d * (x[k] - mean)
    return z, (n, mean, m2)


@dataclass(frozen=True)
class EncoderState:
    """Welford statistics per standardised field; document counts per idf field
    (``docs[slot]``, ``df[slot, column]``, slots in field order)."""

    welford: Mapping[str, Welford]
    docs: np.ndarray  # int64 (n_idf,)
    df: np.ndarray  # int32 (n_idf, dim), or (0, 0) without idf fields

    @staticmethod
    def empty(cfg: RecordsConfig) -> EncoderState:
        idf = idf_fields(cfg)
        df = np.zeros((len(idf), cfg.dim if idf else 0), dtype=np.int32)
        return EncoderState(
            {f: (0, 0.0, 0.0) for f in standardized_fields(cfg)},
            np.zeros(len(idf), dtype=np.int64),
            df,
        )

    def to_json(self, cfg: RecordsConfig) -> dict[str, Any]:
        idf = {}
        for slot, name in enumerate(idf_fields(cfg)):
            cols = np.flatnonzero(self.df[slot])
            idf[name] = {
                "documents": int(self.docs[slot]),
                "columns": cols.tolist(),
                "df": self.df[slot, cols].tolist(),
            }
        std = {
            name: {"n": n, "mean": float(mean).hex(), "m2": float(m2).hex()}
            for name, (n, mean, m2) in self.welford.items()
        }
        return {
            "version": STATE_VERSION,
            "unicode": UNICODE_VERSION,
            "standardize": std,
            "idf": idf,
        }

    @staticmethod
    def from_json(cfg: RecordsConfig, state: Any) -> EncoderState:
        """Read :meth:`to_json`'s form for ``cfg``; ``ValueError`` naming what is wrong."""
        _keys(state, "state", {"version", "unicode", "standardize", "idf"})
        if state["version"] != STATE_VERSION:
            raise ValueError(f"state.version: must be {STATE_VERSION}, got {state['version']!r}")
        if not isinstance(state["unicode"], str):
            raise ValueError("state.unicode: must be a string (a Unicode version)")
        welford = {}
        std = state["standardize"]
        _keys(std, "state.standardize", set(standardized_fields(cfg)))
        for name in standardized_fields(cfg):
            p = f"state.standardize.{name}"
            w = _keys(std[name], p, {"n", "mean", "m2"})
            n = _count(w["n"], f"{p}.n")
            mean, m2 = _hexfloat(w["mean"], f"{p}.mean"), _hexfloat(w["m2"], f"{p}.m2")
            if m2 < 0.0 or (n == 0 and (mean != 0.0 or m2 != 0.0)):
                raise ValueError(f"{p}: m2 is negative, or n is 0 with a mean or m2")
            welford[name] = (n, mean, m2)
        empty = EncoderState.empty(cfg)
        df, docs = empty.df, empty.docs
        idf = state["idf"]
        _keys(idf, "state.idf", set(idf_fields(cfg)))
        for slot, name in enumerate(idf_fields(cfg)):
            p = f"state.idf.{name}"
            d = _keys(idf[name], p, {"documents", "columns", "df"})
            docs[slot] = _count(d["documents"], f"{p}.documents")
            cols, counts = d["columns"], d["df"]
            if (
                not isinstance(cols, list)
                or not isinstance(counts, list)
                or len(cols) != len(counts)
            ):
                raise ValueError(f"{p}: columns and df must be lists of the same length")
            for v, what in ((cols, "columns"), (counts, "df")):
                if not all(type(c) is int for c in v):
                    raise ValueError(f"{p}.{what}: must hold integers")
            c = np.array(cols, dtype=np.int64)
            k = np.array(counts, dtype=np.int64)
            if c.size and (c[0] < 0 or c[-1] >= cfg.dim or np.any(np.diff(c) <= 0)):
                raise ValueError(f"{p}.columns: must be increasing columns in [0, {cfg.dim})")
            if k.size and (k.min() < 1 or k.max() > min(int(docs[slot]), 2**31 - 1)):
                raise ValueError(f"{p}.df: counts must be in [1, documents]")
            df[slot, c] = k
        return EncoderState(welford, docs, df)


def standardized_fields(cfg: RecordsConfig) -> list[str]:
    return [
        f.name for f in cfg.fields if isinstance(f, NumericField) and f.transform == "standardize"
    ]


def idf_fields(cfg: RecordsConfig) -> list[str]:
    return [f.name for f in cfg.fields if isinstance(f, TextField) and f.idf]


def canonical_bytes(state_json: Mapping[str, Any]) -> bytes:
    """One byte form per state: sorted keys, no spaces, ASCII."""
    return json.dumps(state_json, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _keys(v: Any, path: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{path}: must be an object")
    if set(v) != keys:
        missing, extra = sorted(keys - set(v)), sorted(set(v) - keys)
        raise ValueError(f"{path}: missing keys {missing}, unexpected keys {extra}")
    return v


def _count(v: Any, path: str) -> int:
    if type(v) is not int or v < 0 or v > 2**62:
        raise ValueError(f"{path}: must be an integer >= 0, got {v!r}")
    return v


def _hexfloat(v: Any, path: str) -> float:
    try:
        f = float.fromhex(v)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: must be a float in float.hex form, got {v!r}") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{path}: must be finite, got {v!r}")
    return f
