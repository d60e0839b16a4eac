"""Feature batches: one CSR-like in-memory form for every wire format.

A :class:`Batch` holds ``n`` examples as ``indptr`` (int64, ``n + 1``), ``indices``
(int64, sorted and unique within each row) and ``values`` (float64), plus the
dimension ``dim``. Learners only ever see a ``Batch``; how the examples arrived
(dense lists, sparse ``{index: value}`` maps, or named features) is decided here
by a :class:`FeatureSpec`.

Named features are hashed with MurmurHash3 (x86, 32-bit, seed 0) of their UTF-8
bytes, so the same name lands on the same dimension on every machine and in every
run (Python's ``hash()`` is salted per process and never used). A string value
means a one-hot feature ``name=value`` with value 1.0.

>>> spec = FeatureSpec.sparse(10)
>>> b = spec.encode([{"3": 1.0, "1": 2.0}, {"0": 0.5}])
>>> b.indices.tolist(), b.values.tolist()
([1, 3, 0], [2.0, 1.0, 0.5])
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any, Literal

import numpy as np

__all__ = [
    "Batch",
    "FeatureError",
    "FeatureSpec",
    "murmurhash3_32",
    "sparse_index",
]

FeatureKind = Literal["dense", "sparse", "hashed"]


class FeatureError(ValueError):
    """An example that cannot become a feature row.

    ``location`` names the example and field (``examples[3].x["17"]``) and
    ``problem`` says what is wrong (``value is NaN``).
    """

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(f"{location}: {problem}")
        self.location = location
        self.problem = problem


@dataclass(frozen=True)
class Batch:
    """``n`` examples in CSR form. Rows have sorted, unique indices."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    dim: int

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @classmethod
    def from_dense(cls, X: np.ndarray, *, keep_zeros: bool = False) -> Batch:
        """Build from a 2-d array; zeros are dropped unless ``keep_zeros``."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            row = int(np.argwhere(~np.isfinite(X))[0][0])
            raise FeatureError(f"X[{row}]", "value is not finite")
        n, d = X.shape
        if keep_zeros:
            indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
            indices = np.tile(np.arange(d, dtype=np.int64), n)
            return cls(indptr, indices, X.ravel().copy(), d)
        mask = X != 0.0
        counts = mask.sum(axis=1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows, cols = np.nonzero(mask)
        del rows
        return cls(indptr, cols.astype(np.int64), X[mask].astype(np.float64), d)

    @classmethod
    def from_csr(
        cls, indptr: Any, indices: Any, values: Any, dim: int, *, check: bool = True
    ) -> Batch:
        """Wrap CSR arrays (e.g. a ``scipy.sparse.csr_matrix``'s) after checking them."""
        ip = np.ascontiguousarray(indptr, dtype=np.int64)
        ix = np.ascontiguousarray(indices, dtype=np.int64)
        vs = np.ascontiguousarray(values, dtype=np.float64)
        if check:
            if ip.ndim != 1 or ip.shape[0] < 1 or ip[0] != 0 or ip[-1] != ix.shape[0]:
                raise ValueError("indptr is not a valid CSR row pointer")
            if np.any(np.diff(ip) < 0):
                raise ValueError("indptr must be non-decreasing")
            if ix.shape != vs.shape:
                raise ValueError("indices and values must have the same length")
            if ix.size and (ix.min() < 0 or ix.max() >= dim):
                raise ValueError(f"a feature index is outside [0, {dim})")
            if not np.all(np.isfinite(vs)):
                raise ValueError("a feature value is not finite")
            ip, ix, vs = _canonical_rows(ip, ix, vs)
        return cls(ip, ix, vs, int(dim))

    @classmethod
    def coerce(cls, X: Any, name: str = "X") -> Batch:
        """``X`` as a Batch: a Batch as is, a ``scipy.sparse`` matrix (any format) by its
        CSR arrays, a 2-d array dense (zeros dropped). What scikit-learn's model selection
        passes a model after slicing its rows."""
        if isinstance(X, cls):
            return X
        if hasattr(X, "tocsr") and hasattr(X, "shape"):
            m = X.tocsr()
            return cls.from_csr(m.indptr, m.indices, m.data, int(m.shape[1]))
        a = np.asarray(X, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"{name}: must be a Batch, a scipy.sparse matrix or a 2-d array")
        return cls.from_dense(a)

    def to_dense(self, dtype: Any = np.float64) -> np.ndarray:
        out = np.zeros((self.n_rows, self.dim), dtype=dtype)
        rows = np.repeat(np.arange(self.n_rows), np.diff(self.indptr))
        out[rows, self.indices] = self.values
        return out

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.indices[a:b], self.values[a:b]

    def take(self, rows: Sequence[int] | np.ndarray) -> Batch:
        """A new batch with the given rows, in the given order."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        if counts.sum() == 0:
            sel = np.zeros(0, dtype=np.int64)
        else:
            sel = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
        return Batch(indptr, self.indices[sel], self.values[sel], self.dim)


def _canonical_rows(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort each row by index and sum duplicates (deterministically, in sorted order)."""
    n = indptr.shape[0] - 1
    if indices.size == 0:
        return indptr, indices, values
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    # Usually no row repeats an index: one stable sort by (row, index) then gives the
    # same arrays as the three-key sort below (whose value key only orders duplicates).
    key = rows * (int(indices.max()) + 1) + indices
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    if sorted_key.size < 2 or bool((sorted_key[1:] != sorted_key[:-1]).all()):
        return indptr, indices[order], values[order]
    # lexsort by (row, index, value): identical input multisets give identical sums.
    order = np.lexsort((values, indices, rows))
    r, ix, vs = rows[order], indices[order], values[order]
    new = np.ones(ix.shape[0], dtype=bool)
    new[1:] = (r[1:] != r[:-1]) | (ix[1:] != ix[:-1])
    if new.all():
        return indptr, ix, vs
    starts = np.flatnonzero(new)
    summed = np.add.reduceat(vs, starts)
    r2 = r[starts]
    counts = np.bincount(r2, minlength=n)
    ip = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ip[1:])
    return ip, ix[starts], summed


# --------------------------------------------------------------------------- hashing


def murmurhash3_32(data: bytes | str, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` (UTF-8 for ``str``), as an unsigned int."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    c1, c2 = 0xCC9E2D51, 0x1B873593
    length = len(data)
    h = seed & 0xFFFFFFFF
    nblocks = length // 4
    for block_start in range(0, nblocks * 4, 4):
        k = int.from_bytes(data[block_start : block_start + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[nblocks * 4 :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


@lru_cache(maxsize=1 << 18)
def _hashed_index(name: str, mask: int) -> int:
    # Feature vocabularies are small and repetitive; the cache makes hashing cheap.
    return murmurhash3_32(name) & mask


# --------------------------------------------------------------------------- specs


def _fmt_key(key: Any) -> str:
    return f'"{key}"' if isinstance(key, str) else str(key)


_NUMBER_TYPES = frozenset({int, float})
_HASHED_VALUE_TYPES = frozenset({int, float, str})


# index key (a JSON object key is a string) -> sparse_index(key): vocabularies repeat,
# and a dict lookup is a fraction of the parse. Cleared when it grows past the bound.
_INDEX_OF: dict[Any, int] = {}
_INDEX_CACHE_MAX = 1 << 18


def sparse_index(key: Any) -> int:
    """The feature index a sparse key names: an ``int`` (not a bool) as is, or a string
    in canonical decimal (ASCII digits, no sign, space, underscore or leading zero but
    ``"0"``); ``ValueError`` for anything else. Stricter than ``int()``, which reads
    ``" 1"``, ``"+1"``, ``"01"``, ``"1_0"`` and ``"٣"`` as numbers: two spellings of one
    index would be two keys of one JSON object, and a client sending them has a bug."""
    if type(key) is str:
        if key.isascii() and key.isdigit() and (key[0] != "0" or len(key) == 1):
            return int(key)
    elif isinstance(key, int | np.integer) and not isinstance(key, bool):
        return int(key)
    raise ValueError(f"not a canonical feature index: {key!r}")


def _sparse_indices(keys: list[Any]) -> np.ndarray:
    """``[sparse_index(k) for k in keys]`` as int64 (raises as it does, or OverflowError)."""
    try:
        return np.fromiter(map(_INDEX_OF.__getitem__, keys), np.int64, count=len(keys))
    except KeyError:  # a new key: parse them all, then remember them
        idx = np.fromiter(map(sparse_index, keys), np.int64, count=len(keys))
    if len(_INDEX_OF) > _INDEX_CACHE_MAX:
        _INDEX_OF.clear()
    # string keys only: an int key would also answer for True and 1.0 (equal, same hash)
    _INDEX_OF.update((k, j) for k, j in zip(keys, idx.tolist(), strict=True) if type(k) is str)
    return idx


# feature name -> its full 32-bit hash (masked per model), as _INDEX_OF: an lru_cache
# call costs ~3x a dict lookup. One table for every model, whatever its bits.
_HASH_OF: dict[str, int] = {}


def _hashed_indices(names: list[str], mask: int) -> np.ndarray:
    """``[_hashed_index(name, mask) for name in names]`` as int64."""
    try:
        full = np.fromiter(map(_HASH_OF.__getitem__, names), np.int64, count=len(names))
    except KeyError:  # a new name: hash them all, then remember them
        full = np.fromiter(map(murmurhash3_32, names), np.int64, count=len(names))
        if len(_HASH_OF) > _INDEX_CACHE_MAX:
            _HASH_OF.clear()
        _HASH_OF.update(zip(names, full.tolist(), strict=True))
    return full & mask


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
    """

    kind: FeatureKind
    dim: int
    bits: int | None = None
    # The first index of sparse keys (0 or 1). Dense rows are lists, read by position:
    # there it only records the base of the model's files (the client shifts by it).
    index_base: int = 0

    @classmethod
    def dense(cls, dim: int, index_base: int = 0) -> FeatureSpec:
        return cls("dense", _check_dim(dim), None, _check_base(index_base))

    @classmethod
    def sparse(cls, dim: int, index_base: int = 0) -> FeatureSpec:
        return cls("sparse", _check_dim(dim), None, _check_base(index_base))

    @classmethod
    def hashed(cls, bits: int) -> FeatureSpec:
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 31:
            raise ValueError(f"bits must be an integer in [1, 31], got {bits!r}")
        return cls("hashed", 1 << bits, bits)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FeatureSpec:
        """From the service's JSON form: ``{"kind": "dense", "dim": 28}`` etc."""
        kind = config.get("kind")
        base = config.get("index_base", 0)
        if kind == "dense":
            return cls.dense(config.get("dim"), base)  # type: ignore[arg-type]
        if kind == "sparse":
            return cls.sparse(config.get("dim"), base)  # type: ignore[arg-type]
        if kind == "hashed":
            if "index_base" in config:
                raise ValueError("index_base does not apply to hashed features (keys are names)")
            return cls.hashed(config.get("bits"))  # type: ignore[arg-type]
        raise ValueError(f"features.kind must be 'dense', 'sparse' or 'hashed', got {kind!r}")

    def to_config(self) -> dict[str, Any]:
        if self.kind == "hashed":
            return {"kind": "hashed", "bits": self.bits}
        # index_base only when 1: configs (and digests) of 0-based models stay as they were
        out: dict[str, Any] = {"kind": self.kind, "dim": self.dim}
        if self.index_base:
            out["index_base"] = self.index_base
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
                idx = _sparse_indices(list(chain.from_iterable(rows)))
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
                idx = _hashed_indices(names, self.dim - 1)
            values = np.array(vals, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return None
        if not np.isfinite(values).all():
            return None
        indptr = np.empty(len(rows) + 1, dtype=np.int64)
        indptr[0] = 0
        np.cumsum(lens, out=indptr[1:])
        return Batch(*_canonical_rows(indptr, idx, values), self.dim)

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
        ip, ix, vs = _canonical_rows(
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
                idx.append(_hashed_index(f"{name}={v}", mask))
                val.append(1.0)
            else:
                idx.append(_hashed_index(name, mask))
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


def _check_base(base: Any) -> int:
    if isinstance(base, bool) or base not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {base!r}")
    return int(base)


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    return dim


def concat(batches: Iterable[Batch]) -> Batch:
    """Stack batches of the same dimension into one."""
    bs = list(batches)
    if not bs:
        raise ValueError("no batches to concatenate")
    dim = bs[0].dim
    if any(b.dim != dim for b in bs):
        raise ValueError("batches have different dimensions")
    offsets = np.cumsum([0] + [b.nnz for b in bs[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + o for b, o in zip(bs, offsets, strict=True)])
    return Batch(
        indptr.astype(np.int64),
        np.concatenate([b.indices for b in bs]),
        np.concatenate([b.values for b in bs]),
        dim,
    )
