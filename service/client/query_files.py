"""Query groups of a ranking file, for ``learnserve update`` and ``predict`` of rankers.

A ranker (RankSVM, LambdaMART) learns and scores whole queries, so the rows of a
file (:class:`~service.client.files.ExampleFile`) are grouped, as ``learnserve train
lambdamart`` groups them:

- a LightGBM ``.query`` file (one positive integer per line: the number of
  consecutive rows of each query, in file order); ``rank.train.query`` beside
  ``rank.train`` is found by name (:func:`sidecar_beside`), as LightGBM finds it;
- else SVMlight ``qid:`` tokens: consecutive rows with the same qid are one query
  (a qid that comes back after other queries starts another query).

The sizes win when a file has both. JSON lines for a ranker are queries as the
service takes them (``{"qid", "items": [{"x", "relevance"}]}``), one per line.

>>> from service.client.files import Row
>>> rows = [Row({"1": 1.0}, 2, qid=7), Row({"2": 1.0}, 0, qid=7), Row({"1": 0.5}, 1, qid=9)]
>>> [(q.qid, q.relevance) for q in group_rows(rows, None, "")]
[(7, [2, 0]), (9, [1])]
>>> [(q.qid, len(q)) for q in group_rows(rows, [1, 2], "f.query")]
[(7, 1), (7, 2)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from service.client.files import FileFormatError, Row

Relevance = int | float


@dataclass(frozen=True)
class Query:
    """One query: its items' features ``xs`` and ``relevance`` (``None``: the file gives
    none, it can be scored but not learned); ``obj`` is a JSON line's query as written."""

    qid: str | int | None
    xs: list[Any]
    relevance: list[Relevance] | None
    where: str
    obj: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.xs)

    def update_body(self) -> dict[str, Any]:
        """The ``/update`` query (a JSON line's object as written)."""
        if self.obj is not None:
            return self.obj
        if self.relevance is None:
            raise FileFormatError(f"{self.where}: no relevance labels; a ranker learns from them")
        items = [{"x": x, "relevance": r} for x, r in zip(self.xs, self.relevance, strict=True)]
        return {"items": items} if self.qid is None else {"qid": self.qid, "items": items}

    def rank_body(self) -> dict[str, Any]:
        """The ``/predict`` query: the items' features only."""
        items = [{"x": x} for x in self.xs]
        return {"items": items} if self.qid is None else {"qid": self.qid, "items": items}


def sidecar_beside(path: Path) -> Path | None:
    """LightGBM's convention: ``rank.train.query`` beside ``rank.train`` (also for
    ``rank.train.gz``), when it exists."""
    candidates = [path.with_name(path.name + ".query")]
    if path.suffix == ".gz":
        candidates.append(path.with_name(path.name[: -len(".gz")] + ".query"))
    return next((c for c in candidates if c.is_file()), None)


def read_query_sizes(path: Path) -> list[int]:
    """A ``.query`` file: one positive integer per line (blank lines skipped)."""
    sizes: list[int] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s:
                continue
            if not s.isdigit() or int(s) < 1:
                raise FileFormatError(
                    f"{path}:{lineno}: {s!r} is not a query size (a positive integer: "
                    "the number of consecutive rows of one query)"
                )
            sizes.append(int(s))
    if not sizes:
        raise FileFormatError(f"{path}: no query sizes")
    return sizes


def relevance_of(row: Row) -> Relevance:
    """A row's label as a relevance: a finite number."""
    y = row.y
    if isinstance(y, int) and not isinstance(y, bool):
        return y
    try:
        v = float(y)  # parse_label keeps "0.5" as written
    except (TypeError, ValueError):
        raise FileFormatError(f"{row.where}: relevance {y!r} is not a number") from None
    if not math.isfinite(v):
        raise FileFormatError(f"{row.where}: relevance {y!r} is not finite")
    return v


def _query(rows: list[Row], qid: str | int | None) -> Query:
    labelled = all(r.y is not None for r in rows)
    rel = [relevance_of(r) for r in rows] if labelled else None
    return Query(qid, [r.x for r in rows], rel, rows[0].where)


def group_rows(rows: Iterable[Row], sizes: list[int] | None, sizes_name: str) -> Iterator[Query]:
    """The queries of ``rows``: by ``sizes`` (from ``sizes_name``) when given, else by
    ``qid``. A file that does not match its sizes, or a row without a qid, is a
    :class:`FileFormatError` when it is reached."""
    it = iter(rows)
    if sizes is not None:
        total = sum(sizes)
        seen = 0
        for q, n in enumerate(sizes):
            chunk = list(islice(it, n))
            seen += len(chunk)
            if len(chunk) < n:
                raise FileFormatError(
                    f"{sizes_name}: the query sizes add up to {total} rows, but the file "
                    f"ends after {seen} (query {q} of {len(sizes)} needs {n})"
                )
            yield _query(chunk, chunk[0].qid if chunk[0].qid is not None else q)
        extra = next(it, None)
        if extra is not None:
            raise FileFormatError(
                f"{extra.where}: the file has more rows than the query sizes in "
                f"{sizes_name} add up to ({total})"
            )
        return
    current: list[Row] = []
    for row in it:
        if row.qid is None:
            raise FileFormatError(
                f"{row.where}: no qid: a ranker takes query groups: give every line a "
                "qid: token, or the query sizes with --query FILE (LightGBM's .query file)"
            )
        if current and row.qid != current[0].qid:
            yield _query(current, current[0].qid)
            current = []
        current.append(row)
    if current:
        yield _query(current, current[0].qid)


def query_of_line(row: Row) -> Query:
    """A JSON line's query (``{"qid", "items": [{"x", "relevance"?}], "weight"?}``)."""
    obj = row.obj
    items = obj.get("items") if obj is not None else None
    if obj is None or not isinstance(items, list) or not items:
        raise FileFormatError(
            f'{row.where}: a ranker\'s JSON line is a query: {{"qid": ..., "items": '
            '[{"x": ..., "relevance": ...}, ...]}'
        )
    xs: list[Any] = []
    rel: list[Relevance] | None = []
    for j, item in enumerate(items):
        if not isinstance(item, dict) or "x" not in item:
            raise FileFormatError(f'{row.where}: items[{j}] must be an object with "x"')
        xs.append(item["x"])
        r = item.get("relevance")
        if isinstance(r, bool) or not isinstance(r, int | float):
            rel = None  # scored, not measured
        elif rel is not None:
            rel.append(r)
    qid = obj.get("qid")
    return Query(qid if isinstance(qid, str | int) else None, xs, rel, row.where, obj)
