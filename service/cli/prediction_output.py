"""Where ``learnserve predict`` writes: JSON lines (one object per instance, or per query
for a ranker given query groups) or CSV (one row per instance, or per item of a query),
to ``-o FILE`` or stdout."""

from __future__ import annotations

import contextlib
import csv
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from service.client import Prediction, Ranking
from service.client.files import Row
from service.client.query_files import Query

CSV_COLUMNS = ("id", "y", "label", "score", "confidence", "labels")
REGRESSION_CSV_COLUMNS = ("id", "y", "value", "variance", "low", "high")
QUERY_CSV_COLUMNS = ("qid", "y", "score", "rank")

RowWriter = Callable[[Row, Prediction], None]
QueryWriter = Callable[[Query, Ranking], None]


@contextlib.contextmanager
def sink(path: Path | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8", newline="") as fh:
        yield fh


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, list):  # a label set (FastXML): ids joined by spaces
        return " ".join(map(str, v))
    return v


def row_writer(fh: IO[str], fmt: str, with_scores: bool, regression: bool = False) -> RowWriter:
    if fmt == "csv":
        w = csv.writer(fh)
        w.writerow(REGRESSION_CSV_COLUMNS if regression else CSV_COLUMNS)

        def write_csv(row: Row, p: Prediction) -> None:
            cells: tuple[Any, ...]
            if regression:
                lo, hi = p.interval or (None, None)
                cells = (row.id, row.y, p.value, p.variance, lo, hi)
            else:
                cells = (row.id, row.y, p.label, p.score, p.confidence, p.labels)
            w.writerow([_cell(v) for v in cells])

        return write_csv

    def write_jsonl(row: Row, p: Prediction) -> None:
        fh.write(orjson.dumps(dict(_fields(row, p, with_scores))).decode() + "\n")

    return write_jsonl


def _fields(row: Row, p: Prediction, with_scores: bool) -> Iterator[tuple[str, Any]]:
    for key, value in (("id", row.id), ("y", row.y), ("label", p.label), ("score", p.score),
                       ("confidence", p.confidence), ("labels", p.labels), ("value", p.value),
                       ("variance", p.variance), ("interval", p.interval)):  # fmt: skip
        if value is not None:
            yield key, value
    if with_scores and p.scores is not None:
        if p.ids is not None:
            yield "ids", p.ids
        yield "scores", p.scores


def query_writer(fh: IO[str], fmt: str) -> QueryWriter:
    """JSON lines: ``{"qid", "y": [relevance...], "scores": [...], "order": [...]}`` per
    query (scores in the file's order, ``order`` best first); CSV: ``qid, y, score,
    rank`` per item (rank 1 is the best of its query)."""
    if fmt == "csv":
        w = csv.writer(fh)
        w.writerow(QUERY_CSV_COLUMNS)

        def write_csv(q: Query, r: Ranking) -> None:
            rank = [0] * len(r.order)
            for position, item in enumerate(r.order, 1):
                rank[item] = position
            ys = q.relevance if q.relevance is not None else [None] * len(q)
            for y, score, pos in zip(ys, r.scores, rank, strict=True):
                w.writerow([_cell(q.qid), _cell(y), score, pos])

        return write_csv

    def write_jsonl(q: Query, r: Ranking) -> None:
        out: dict[str, Any] = {} if q.qid is None else {"qid": q.qid}
        if q.relevance is not None:
            out["y"] = q.relevance
        out["scores"] = r.scores
        out["order"] = r.order
        fh.write(orjson.dumps(out).decode() + "\n")

    return write_jsonl
