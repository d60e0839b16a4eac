"""Rankers' files for ``learnserve update`` and ``predict`` (RankSVM, LambdaMART).

Query groups come as ``learnserve train lambdamart`` reads them: a LightGBM ``.query``
file (``--query FILE``; ``rank.test.query`` beside ``rank.test`` is used when there is
no ``--query``, as LightGBM does), else ``qid:`` tokens in the SVMlight lines; JSON lines
are queries already. ``update`` (RankSVM) sends the queries with their relevance
labels, never splitting one, at most ``--batch`` items per request. ``predict`` ranks
each query (one JSON line per query: ``qid``, ``y``, ``scores`` in the file's order,
``order`` best first) and prints NDCG@1/3/5/10 as ``learnserve evaluate`` does; without
query groups each line is scored alone (``{"score"}``).

A LambdaMART model reads the file with its artifact's ``index_base`` (the training
file's); features past the model's last are dropped, as ``evaluate`` ignores them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import typer

from service.cli import file_metrics
from service.cli.file_options import csv_delimiter
from service.cli.phases import say
from service.cli.prediction_output import query_writer
from service.client import Client, ModelInfo, UpdateSummary
from service.client._core import pack_queries
from service.client.files import FORMATS, ExampleFile, FileFormatError, Target, guess_format
from service.client.query_files import (
    Query,
    group_rows,
    query_of_line,
    read_query_sizes,
    sidecar_beside,
)
from service.client.sync import OnBatch

RANKERS = frozenset({"ranksvm", "lambdamart"})


def target(info: ModelInfo, index_base: int | None) -> Target:
    if info.kind != "lambdamart":
        return Target.of_model(info.features, index_base)
    n = info.raw.get("n_features")
    if not isinstance(n, int):
        raise typer.BadParameter(f"model {info.name!r} has no artifact deployed yet")
    base = int(info.raw.get("index_base", 0))
    file_base = base if index_base is None else index_base
    return Target("sparse", n, base, file_base, ignore_beyond=True)


@dataclass(frozen=True)
class RankingFile:
    examples: ExampleFile
    sizes: list[int] | None  # from the .query file
    sizes_name: str

    def queries(self) -> Iterator[Query]:
        if self.examples.fmt == "jsonl":
            return (query_of_line(row) for row in self.examples)
        return group_rows(self.examples, self.sizes, self.sizes_name)

    def grouped(self) -> bool:
        """Query groups: JSON lines, a .query file, or a first row with a ``qid:``."""
        if self.examples.fmt == "jsonl" or self.sizes is not None:
            return True
        rows = iter(self.examples)
        try:
            first = next(rows, None)
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()  # the generator closes the file
        return first is not None and first.qid is not None


def open_ranking(
    info: ModelInfo,
    file: Path,
    fmt: str | None,
    index_base: int | None,
    label_column: str | None,
    query: Path | None,
    command: str,
    delimiter: str | None = None,
) -> RankingFile:
    fmt = fmt or guess_format(file)
    if fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    sep = csv_delimiter(delimiter, file, fmt)
    if info.kind == "lambdamart" and fmt == "csv":
        raise typer.BadParameter(
            "a lambdamart model reads SVMlight/LETOR files (as `train lambdamart`) or JSON "
            "lines of queries, not CSV",
            param_hint="--format",
        )
    if query is not None and fmt == "jsonl":
        raise typer.BadParameter("JSON lines are queries already", param_hint="--query")
    sidecar = query if query is not None else None if fmt == "jsonl" else sidecar_beside(file)
    if query is None and sidecar is not None:
        say(command, f"query groups from {sidecar.name} (found beside {file.name})")
    examples = ExampleFile(file, fmt, target(info, index_base), label_column=label_column,
                           queries=True, delimiter=sep)  # fmt: skip
    sizes = read_query_sizes(sidecar) if sidecar is not None else None
    if sizes is not None:
        rows = examples.count_rows()  # before anything is sent: a wrong .query file
        if rows != sum(sizes):
            raise FileFormatError(
                f"{sidecar}: the query sizes add up to {sum(sizes)} rows, but {file} has {rows}"
            )
    return RankingFile(examples, sizes, str(sidecar or ""))


def update(c: Client, model: str, rf: RankingFile, batch: int, on_batch: OnBatch) -> UpdateSummary:
    """Learn the file's queries, at most ``batch`` items per request (a bigger query
    alone): the service's limit counts items."""
    bodies = (q.update_body() for q in rf.queries())
    return c.update_queries(model, bodies, batch_size=batch, max_items=batch, on_batch=on_batch)


def predict(
    c: Client,
    model: str,
    kind: str,
    rf: RankingFile,
    fh: IO[str],
    out_fmt: str,
    batch: int,
    min_version: int | None,
) -> str:
    """Rank every query of the file; the report for stderr (NDCG when it can be measured)."""
    write = query_writer(fh, out_fmt)
    scores: list[float] = []
    relevance: list[Any] = []
    sizes: list[int] = []
    unlabelled = 0
    items = 0
    for group in pack_queries(rf.queries(), batch, batch, len):
        res = c.rank(model, [q.rank_body() for q in group], min_version=min_version)
        for q, ranking in zip(group, res.rankings, strict=True):
            write(q, ranking)
            items += len(q)
            if q.relevance is None:
                unlabelled += 1
                continue
            scores += ranking.scores
            relevance += q.relevance
            sizes.append(len(q))
    n_queries = len(sizes) + unlabelled
    report = f"predicted {items} items in {n_queries} queries\n"
    if unlabelled:
        return report + f"no NDCG: {unlabelled} queries have no relevance labels\n"
    problem = file_metrics.ndcg_gain_problem(relevance)
    if problem is not None:
        return report + f"no NDCG: {problem}\n"
    if not sizes:
        return report
    return report + file_metrics.display(kind, file_metrics.ranking(scores, relevance, sizes))
