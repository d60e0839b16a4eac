"""Ranking bodies (``queries`` of ``items``), shared by the ranking adapters.

Wire format::

    {"queries": [{"qid": "q1", "items": [{"x": <features>, "relevance": 2}, ...]}, ...]}

``qid`` is optional (a string or an integer, echoed back as sent); ``relevance``
(any finite number: RankSVM learns the order within a query) and a query's optional
importance ``weight`` (finite, > 0: it scales the steps of the query's pairs; see
:mod:`service.models.example_weights`) are read only by ``/update``. The items of all queries
become one batch, rows in query order, and errors name the query and item, e.g.
``queries[0].items[3].relevance: must be a finite number, got str``. The items of one
request count against the same limit as ``examples`` (``max_batch_examples``).

>>> import numpy as np
>>> a, b = ranked(np.array([0.5, 2.0, 0.5, 1.0]), ["a", 7], [3, 1])
>>> a
{'qid': 'a', 'scores': [0.5, 2.0, 0.5], 'order': [1, 0, 2]}
>>> b
{'qid': 7, 'scores': [1.0], 'order': [0]}
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from learners.features import Batch, FeatureError, FeatureSpec, sparse_index
from service.errors import invalid
from service.models.example_weights import WEIGHT_FIELD, check_weight
from service.models.json_fields import require_list, too_large, type_name
from service.models.linear_inputs import dense_matrix
from service.models.payload import dense_batch

if TYPE_CHECKING:
    from service.settings import Settings

_ROW = re.compile(r"^rows\[(\d+)\]")
_OUTSIDE = re.compile(r"^feature index (-?\d+) is outside")


@dataclass(frozen=True)
class Queries:
    qids: list[Any]
    sizes: list[int]
    xs: list[Any]  # the items' features, all queries in order
    relevance: list[int | float]  # empty unless asked for
    weights: list[float] | None = None  # one per query when any query has a weight

    def locate(self) -> Callable[[int], str]:
        """Flat item row -> ``queries[q].items[j]``."""
        starts = np.cumsum([0, *self.sizes])

        def where(i: int) -> str:
            q = int(np.searchsorted(starts, i, "right") - 1)
            return f"queries[{q}].items[{i - int(starts[q])}]"

        return where


def parse_queries(body: dict[str, Any], settings: Settings, relevance: bool) -> Queries:
    """Check the shape of ``body["queries"]`` (every item; features are encoded later)."""
    limit = settings.max_batch_examples
    queries = require_list(body, "queries", limit)
    qids: list[Any] = []
    sizes: list[int] = []
    xs: list[Any] = []
    rels: list[int | float] = []
    weights: list[float] | None = None
    known = ("qid", "items", WEIGHT_FIELD) if relevance else ("qid", "items")
    for q, query in enumerate(queries):
        at = f"queries[{q}]"
        if type(query) is not dict:
            raise invalid(f"{at}: must be an object, got {type_name(query)}", at)
        _refuse_unknown(query, known, at)
        if relevance and WEIGHT_FIELD in query:
            if weights is None:
                weights = [1.0] * q
            weights.append(check_weight(query[WEIGHT_FIELD], f"{at}.{WEIGHT_FIELD}"))
        elif weights is not None:
            weights.append(1.0)
        qid = query.get("qid")
        if qid is not None and (isinstance(qid, bool) or not isinstance(qid, str | int)):
            raise invalid(
                f"{at}.qid: must be a string or an integer, got {type_name(qid)}", f"{at}.qid"
            )
        items = query.get("items")
        if items is None:
            raise invalid(f"{at}.items: field required", f"{at}.items")
        if not isinstance(items, list):
            raise invalid(f"{at}.items: must be an array, got {type_name(items)}", f"{at}.items")
        if not items:
            raise invalid(f"{at}.items: must not be empty (a query needs items)", f"{at}.items")
        if len(xs) + len(items) > limit:
            n = len(xs) + len(items)
            raise too_large(
                f"queries: {n} or more items exceed the limit of {limit} per request", "queries"
            )
        for j, item in enumerate(items):
            loc = f"{at}.items[{j}]"
            if type(item) is not dict:
                raise invalid(f"{loc}: must be an object, got {type_name(item)}", loc)
            if "x" not in item:
                raise invalid(f"{loc}.x: field required", f"{loc}.x")
            _refuse_unknown(item, ("x", "relevance") if relevance else ("x",), loc)
            xs.append(item["x"])
            if relevance:
                rels.append(check_relevance(item.get("relevance"), f"{loc}.relevance"))
        qids.append(qid)
        sizes.append(len(items))
    return Queries(qids, sizes, xs, rels, weights)


def _refuse_unknown(obj: dict[str, Any], known: tuple[str, ...], loc: str) -> None:
    """A field the service does not read is an error, not silently ignored."""
    for k in obj:
        if k not in known:
            raise invalid(f"{loc}.{k}: unknown field (expected {', '.join(known)})", f"{loc}.{k}")


def check_relevance(r: Any, loc: str) -> int | float:
    """Any finite real number (an integer stays an integer in the log entry)."""
    if r is None:
        raise invalid(f"{loc}: field required", loc)
    if isinstance(r, bool) or not isinstance(r, int | float):
        raise invalid(f"{loc}: must be a finite number, got {type_name(r)}", loc)
    try:
        finite = math.isfinite(r)
    except OverflowError:  # an integer beyond float64
        finite = False
    if not finite:
        raise invalid(f"{loc}: must be a finite number, got {r!r}", loc)
    # the log entry's JSON holds 64-bit integers only; the learner reads float64 anyway
    return r if isinstance(r, float) or -(2**53) <= r <= 2**53 else float(r)


def encode_rows(
    spec: FeatureSpec,
    xs: list[Any],
    settings: Settings,
    raw: bytes,
    locate: Callable[[int], str],
    index_base: int = 0,
) -> tuple[Batch, np.ndarray | None]:
    """The batch of feature rows ``xs`` (and the dense matrix when the fast path built it).

    Errors name the row through ``locate`` (``queries[1].items[0].x["17"]: value is
    NaN``). ``index_base`` 1: sparse keys are 1-based (``spec.dim`` then includes the
    unused index 0) and are shifted to 0-based columns.
    """
    X = dense_matrix(spec, xs, raw)
    if X is not None:
        return dense_batch(X), X
    fast = sparse_rows(spec, xs, settings.max_features_per_example)
    if fast is not None:
        return (_shift(fast, index_base, locate) if index_base else fast), None
    try:
        if spec.kind == "dense":
            _reject_strings(xs)
        batch = spec.encode(
            xs, where="rows", field="x", max_features=settings.max_features_per_example
        )
    except FeatureError as e:
        loc = _ROW.sub(lambda m: locate(int(m.group(1))), e.location)
        problem = e.problem
        m = _OUTSIDE.match(problem)
        if m and index_base:
            problem = f"feature index {m.group(1)} is outside [{index_base}, {spec.dim - 1}]"
        if "exceed the limit" in problem:
            raise too_large(f"{loc}: {problem}", loc) from None
        raise invalid(f"{loc}: {problem}", loc) from None
    if index_base:
        batch = _shift(batch, index_base, locate)
    return batch, None


_NUMBERS = frozenset({int, float})


def sparse_rows(spec: FeatureSpec, xs: list[Any], max_features: int) -> Batch | None:
    """``spec.encode(xs)`` for sparse ``{index: number}`` rows, without a Python call per
    value (most of a large /predict otherwise); ``None`` when anything is unusual, and
    the checked path then names the problem. Same idx/value lists, same canonical form
    (:meth:`Batch.from_csr`), so the same batch bit for bit (tested).
    """
    if spec.kind != "sparse":
        return None
    keys: list[Any] = []
    vals: list[Any] = []
    lens: list[int] = []
    for row in xs:
        if type(row) is not dict or not row or len(row) > max_features:
            return None
        keys += row
        vals += row.values()
        lens.append(len(row))
    if not set(map(type, vals)) <= _NUMBERS:  # bool, str, None...: the checked path
        return None
    try:
        idx = np.array(list(map(sparse_index, keys)), dtype=np.int64)  # as spec.encode
        val = np.array(vals, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return None
    if (idx.size and (idx.min() < 0 or idx.max() >= spec.dim)) or not np.isfinite(val).all():
        return None
    indptr = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    rising = np.diff(idx) > 0
    rising[indptr[1:-1] - 1] = True  # a row may start below the previous row's end
    if rising.all():  # keys sent in increasing order: already canonical, skip the sort
        return Batch(indptr, idx, val, spec.dim)
    return Batch.from_csr(indptr, idx, val, spec.dim)


def _reject_strings(xs: list[Any]) -> None:
    # numpy reads "3" as 3.0 when asked for floats; a feature value must be a number.
    for i, row in enumerate(xs):
        if isinstance(row, list):
            for j, v in enumerate(row):
                if isinstance(v, str):
                    raise FeatureError(f"rows[{i}].x[{j}]", "value must be a number, got str")


def _shift(batch: Batch, base: int, locate: Callable[[int], str]) -> Batch:
    # Indices are sorted within a row, so a key below the base is a row's first index.
    # Rows without features (``{"x": {}}``, all of them possibly) have no first index.
    nonempty = np.diff(batch.indptr) > 0
    first = np.zeros(batch.n_rows, dtype=batch.indices.dtype)
    first[nonempty] = batch.indices[batch.indptr[:-1][nonempty]]
    low = nonempty & (first < base)
    if low.any():
        i = int(np.argmax(low))
        loc = f'{locate(i)}.x["{int(first[i])}"]'
        raise invalid(
            f"{loc}: feature index {int(first[i])} is outside [{base}, {batch.dim - 1}] "
            f"(this model's sparse keys are {base}-based, as in its training file)",
            loc,
        )
    return Batch(batch.indptr, batch.indices - base, batch.values, batch.dim - base)


def ranked(scores: np.ndarray, qids: list[Any], sizes: list[int]) -> list[dict[str, Any]]:
    """Per query: the scores in the order sent and the item indices best first (ties:
    the earlier item first, a stable sort)."""
    out = []
    start = 0
    for qid, n in zip(qids, sizes, strict=True):
        s = scores[start : start + n]
        order = np.argsort(-s, kind="stable")
        out.append({"qid": qid, "scores": s.tolist(), "order": order.tolist()})
        start += n
    return out


def scored(scores: np.ndarray) -> list[dict[str, Any]]:
    return [{"score": s} for s in scores.tolist()]


def ranking_or_instances(body: dict[str, Any]) -> bool:
    """True for a ``queries`` body, False for ``instances``; 422 for both or neither."""
    has_q, has_i = "queries" in body, "instances" in body
    if has_q and has_i:
        raise invalid("queries: send either queries or instances, not both", "queries")
    if not has_q and not has_i:
        raise invalid(
            "queries: field required (queries of items to rank, or instances to score)",
            "queries",
        )
    return has_q
