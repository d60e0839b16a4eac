"""How wire examples become feature rows: :class:`FeatureSpec`, one per model, encodes
dense lists, sparse ``{index: value}`` maps or named features into a :class:`Batch`
(the CSR form every learner reads, in :mod:`learners.csr_batch`), or raises
:class:`FeatureError` naming the example and field.

Named features are hashed with MurmurHash3 (x86, 32-bit, seed 0) of their UTF-8
bytes, so the same name lands on the same dimension on every machine and in every
run (Python's ``hash()`` is salted per process and never used; see
:mod:`learners.feature_keys`). A string value means a one-hot feature ``name=value``
with value 1.0.

``Batch``, ``FeatureError``, ``concat``, ``murmurhash3_32`` and ``sparse_index`` are
importable from here too, as they always were.

>>> spec = FeatureSpec.sparse(10)
>>> b = spec.encode([{"3": 1.0, "1": 2.0}, {"0": 0.5}])
>>> b.indices.tolist(), b.values.tolist()
([1, 3, 0], [2.0, 1.0, 0.5])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any, Literal

import numpy as np

from learners.csr_batch import Batch, FeatureError, canonical_rows, concat
from learners.feature_keys import (
    hashed_index,
    hashed_indices,
    murmurhash3_32,
    sparse_index,
    sparse_indices,
)
from learners.intercept import INTERCEPT_NAME, with_intercept

__all__ = [
    "Batch",
    "FeatureError",
    "FeatureSpec",
    "concat",
    "murmurhash3_32",
    "sparse_index",
]

FeatureKind = Literal["dense", "sparse", "hashed", "records"]


def _fmt_key(key: Any) -> str:
    return f'"{key}"' if isinstance(key, str) else str(key)


_NUMBER_TYPES = frozenset({int, float})
_HASHED_VALUE_TYPES = frozenset({int, float, str})


def _number(v: Any, location: str) -> float:
    # bool is an int subclass; a JSON true/false is not a feature value.
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FeatureError(location, f"value must be a number, got {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:  # an int beyond the doubles
        raise FeatureError(location, "value is infinite (too large for a double)") from None
    if not math.isfinite(f):
        raise FeatureError(location, "value is NaN" if f != f else "value is infinite")
    return f


@dataclass(frozen=True)
class FeatureSpec:
    """How wire examples become rows of a :class:`Batch` for one model.

    - ``dense``: each example is a list of exactly ``dim`` numbers.
    - ``sparse``: each example is ``{index: value}`` with ``index_base <= index <
      dim + index_base`` (JSON object keys are strings, in canonical decimal:
      :func:`sparse_index`; integer keys are accepted from Python). ``index_base`` 1
      takes SVMlight's 1-based indices as they are in the file: key ``k`` is column
      ``k - 1``, key ``dim`` is valid and key ``0`` is refused.
    - ``hashed``: each example is ``{name: number | string}``; hashed into
      ``2**bits`` dimensions. Sparse-style integer-keyed maps are not special here:
      every key is a name.

    An empty map (sparse, hashed) is the zero vector, as a dense row of zeros is:
    real data sets (LIBSVM's w8a) hold such rows.

    ``intercept`` (dense, sparse, hashed; off unless asked, so a stored config keeps
    its meaning): every row gets the constant feature 1.0 (:mod:`learners.intercept`).
    ``dim`` is the model's dimension, which then counts the extra column of dense and
    sparse rows; :attr:`width` is what the examples hold.

    >>> spec = FeatureSpec.sparse(3, intercept=True)
    >>> b = spec.encode([{"0": 2.0}, {}])
    >>> spec.width, b.dim, b.indices.tolist(), b.values.tolist()
    (3, 4, [0, 3, 3], [2.0, 1.0, 1.0])
    """

    kind: FeatureKind
    dim: int
    bits: int | None = None
    # The first index of sparse keys (0 or 1). Dense rows are lists, read by position:
    # there it only records the base of the model's files (the client shifts by it).
    index_base: int = 0
    # ``records``: the raw-record encoder (learners.records) its config describes.
    encoder: Any = field(default=None, compare=False, repr=False)
    # A constant feature 1.0 in every row (dense, sparse: column ``width``; hashed: the
    # name INTERCEPT_NAME). The records kind has its own (its config's ``intercept``).
    intercept: bool = False

    @classmethod
    def dense(cls, dim: int, index_base: int = 0, intercept: bool = False) -> FeatureSpec:
        extra = int(_check_intercept(intercept))
        return cls("dense", _check_dim(dim) + extra, None, _check_base(index_base), None, intercept)

    @classmethod
    def sparse(cls, dim: int, index_base: int = 0, intercept: bool = False) -> FeatureSpec:
        extra = int(_check_intercept(intercept))
        return cls(
            "sparse", _check_dim(dim) + extra, None, _check_base(index_base), None, intercept
        )

    @classmethod
    def hashed(cls, bits: int, intercept: bool = False) -> FeatureSpec:
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 31:
            raise ValueError(f"bits must be an integer in [1, 31], got {bits!r}")
        return cls("hashed", 1 << bits, bits, 0, None, _check_intercept(intercept))

    @property
    def width(self) -> int:
        """The columns the examples hold: ``dim`` less the intercept's own column."""
        return self.dim - 1 if self.intercept and self.kind != "hashed" else self.dim

    @property
    def intercept_column(self) -> int | None:
        """The column of the constant feature; ``None`` without an intercept."""
        if not self.intercept:
            return None
        if self.kind == "hashed":
            return hashed_index(INTERCEPT_NAME, self.dim - 1)
        return self.width

    def add_intercept(self, batch: Batch) -> Batch:
        """``batch`` (rows of :attr:`width` columns, as a parser read them) with the
        constant feature, or unchanged without an intercept."""
        column = self.intercept_column
        return batch if column is None else with_intercept(batch, column, self.dim)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FeatureSpec:
        """From the service's JSON form: ``{"kind": "dense", "dim": 28}`` etc."""
        kind = config.get("kind")
        base = config.get("index_base", 0)
        intercept = config.get("intercept", False)
        if kind == "dense":
            return cls.dense(config.get("dim"), base, intercept)  # type: ignore[arg-type]
        if kind == "sparse":
            return cls.sparse(config.get("dim"), base, intercept)  # type: ignore[arg-type]
        if kind == "hashed":
            if "index_base" in config:
                raise ValueError("index_base does not apply to hashed features (keys are names)")
            return cls.hashed(config.get("bits"), intercept)  # type: ignore[arg-type]
        if kind == "records":
            return cls.records(config)
        raise ValueError(
            f"features.kind must be 'dense', 'sparse', 'hashed' or 'records', got {kind!r}"
        )

    @classmethod
    def records(cls, config: Mapping[str, Any]) -> FeatureSpec:
        """Raw records (``learners.records``: fields, namespaces, text, interactions),
        hashed into ``2**bits`` columns. Raises ``learners.records.config.ConfigError``
        (a ValueError with the ``path`` of the bad field)."""
        from learners.records.encoder import RecordEncoder

        enc = RecordEncoder(config)
        return cls("records", enc.dim, enc.config.bits, 0, enc)

    @property
    def stateful(self) -> bool:
        """Whether encoding depends on the records seen so far (standardize, idf)."""
        return self.encoder is not None and bool(self.encoder._stateful())

    def to_config(self) -> dict[str, Any]:
        if self.kind == "records":
            out_records: dict[str, Any] = self.encoder.to_config()
            return out_records
        # index_base only when 1, intercept only when on: configs (and digests) of the
        # models made before either existed stay as they were
        out: dict[str, Any]
        if self.kind == "hashed":
            out = {"kind": "hashed", "bits": self.bits}
        else:
            out = {"kind": self.kind, "dim": self.width}
            if self.index_base:
                out["index_base"] = self.index_base
        if self.intercept:
            out["intercept"] = True
        return out

    # ------------------------------------------------------------------ encode

    def encode(
        self,
        rows: Sequence[Any],
        *,
        where: str = "examples",
        field: str = "x",
        max_features: int | None = None,
    ) -> Batch:
        """Turn wire examples into a batch, or raise :class:`FeatureError`.

        ``rows[i]`` is the feature part of example ``i``; errors are reported as
        ``{where}[{i}].{field}...``. Nothing is partially built: an error in any
        row raises before a batch exists.
        """
        n = len(rows)
        if n == 0:
            raise FeatureError(where, "no examples")
        if self.kind == "records":
            batch: Batch = self.encoder.encode(rows, where=where, field=field)
            return batch
        if self.intercept:  # the examples as read without it, then its column
            plain = replace(self, dim=self.width, intercept=False)
            read = plain.encode(rows, where=where, field=field, max_features=max_features)
            return self.add_intercept(read)
        if self.kind == "dense":
            return self._encode_dense(rows, where, field)
        fast = self._encode_maps_fast(rows, max_features)
        if fast is not None:
            return fast
        return self._encode_maps_checked(rows, where, field, max_features)

    def _encode_maps_fast(self, rows: Sequence[Any], max_features: int | None) -> Batch | None:
        """The sparse/hashed batch of plain dicts of finite numbers (hashed: also strings),
        in C-speed passes over all rows at once; ``None`` for anything else, which the
        checked loop (:meth:`_encode_maps_checked`) then reads or names the problem of.
        Gives the checked loop's arrays exactly (tested)."""
        if set(map(type, rows)) != {dict}:
            return None
        lens = list(map(len, rows))
        if max_features is not None and max(lens) > max_features:
            return None
        vals = list(chain.from_iterable(map(dict.values, rows)))
        kinds = set(map(type, vals))  # bool is its own type: never a number here
        try:
            if self.kind == "sparse":
                if not kinds <= _NUMBER_TYPES:
                    return None
                idx = sparse_indices(list(chain.from_iterable(rows)))
                base = self.index_base
                if idx.size and (idx.min() < base or idx.max() >= self.dim + base):
                    return None
                if base:
                    idx -= base
            else:
                if not kinds <= _HASHED_VALUE_TYPES:
                    return None
                names = list(map(str, chain.from_iterable(rows)))
                if str in kinds:  # categorical values: "name=value" with value 1.0
                    names = [
                        f"{k}={v}" if type(v) is str else k
                        for k, v in zip(names, vals, strict=True)
                    ]
                    vals = [1.0 if type(v) is str else v for v in vals]
                idx = hashed_indices(names, self.dim - 1)
            values = np.array(vals, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return None
        if not np.isfinite(values).all():
            return None
        indptr = np.empty(len(rows) + 1, dtype=np.int64)
        indptr[0] = 0
        np.cumsum(lens, out=indptr[1:])
        return Batch(*canonical_rows(indptr, idx, values), self.dim)

    def _encode_maps_checked(
        self, rows: Sequence[Any], where: str, field: str, max_features: int | None
    ) -> Batch:
        n = len(rows)
        indptr = np.empty(n + 1, dtype=np.int64)
        indptr[0] = 0
        idx: list[int] = []
        val: list[float] = []
        hashed = self.kind == "hashed"
        mask = self.dim - 1
        for i, row in enumerate(rows):
            loc = f"{where}[{i}].{field}"
            if not isinstance(row, Mapping):
                raise FeatureError(
                    loc,
                    f"must be an object of {'name' if hashed else 'index'}: value pairs "
                    f"for {self.kind} features, got {type(row).__name__}",
                )
            if max_features is not None and len(row) > max_features:
                raise FeatureError(loc, f"{len(row)} features exceed the limit of {max_features}")
            if hashed:
                self._row_hashed(row, loc, mask, idx, val)
            else:
                self._row_sparse(row, loc, idx, val)
            indptr[i + 1] = len(idx)
        ip, ix, vs = canonical_rows(
            indptr, np.asarray(idx, dtype=np.int64), np.asarray(val, dtype=np.float64)
        )
        return Batch(ip, ix, vs, self.dim)

    def _row_sparse(
        self, row: Mapping[Any, Any], loc: str, idx: list[int], val: list[float]
    ) -> None:
        dim, base = self.dim, self.index_base
        for key, v in row.items():
            try:
                j = sparse_index(key)
            except ValueError:
                raise FeatureError(
                    f"{loc}[{_fmt_key(key)}]",
                    "feature index is not an integer in canonical decimal "
                    "(digits 0-9 only: no sign, space, underscore or leading zero)",
                ) from None
            if not base <= j < dim + base:
                valid = f"[0, {dim})" if base == 0 else f"[{base}, {dim + base - 1}] (1-based)"
                raise FeatureError(
                    f"{loc}[{_fmt_key(key)}]", f"feature index {j} is outside {valid}"
                )
            idx.append(j - base)
            val.append(_number(v, f"{loc}[{_fmt_key(key)}]"))

    @staticmethod
    def _row_hashed(
        row: Mapping[Any, Any], loc: str, mask: int, idx: list[int], val: list[float]
    ) -> None:
        for key, v in row.items():
            name = str(key)
            if isinstance(v, str):
                idx.append(hashed_index(f"{name}={v}", mask))
                val.append(1.0)
            else:
                idx.append(hashed_index(name, mask))
                val.append(_number(v, f"{loc}[{_fmt_key(key)}]"))

    def _encode_dense(self, rows: Sequence[Any], where: str, field: str) -> Batch:
        dim = self.dim
        for i, row in enumerate(rows):
            if not isinstance(row, list | tuple | np.ndarray):
                raise FeatureError(
                    f"{where}[{i}].{field}",
                    f"must be a list of {dim} numbers for dense features, got {type(row).__name__}",
                )
            if len(row) != dim:
                raise FeatureError(
                    f"{where}[{i}].{field}", f"has {len(row)} values, expected {dim}"
                )
        # Without a dtype numpy keeps strings as strings ("3" must not become 3.0)
        # and gives an object array for ragged or mixed rows; only an all-number
        # matrix comes out as float or int.
        try:
            X = np.array(rows)
        except (TypeError, ValueError):
            X = None
        if (
            X is None
            or X.dtype.kind not in "fiu"
            or X.shape != (len(rows), dim)
            or (X.dtype.kind == "f" and not np.all(np.isfinite(X)))
            or _has_bool(rows)
        ):
            # Slow path only to name the offending value precisely.
            for i, row in enumerate(rows):
                for j, v in enumerate(row):
                    _number(v, f"{where}[{i}].{field}[{j}]")
            raise FeatureError(where, "could not read dense examples")  # pragma: no cover
        return Batch.from_dense(X.astype(np.float64, copy=False))


def _has_bool(rows: Sequence[Any]) -> bool:
    # numpy turns [1.0, True] into [1.0, 1.0]; a JSON true is not a feature value.
    return any(v is True or v is False for row in rows for v in row)


def _check_intercept(intercept: Any) -> bool:
    if not isinstance(intercept, bool):
        raise ValueError(f"intercept must be true or false, got {intercept!r}")
    return intercept


def _check_base(base: Any) -> int:
    if isinstance(base, bool) or base not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {base!r}")
    return int(base)


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    return dim
