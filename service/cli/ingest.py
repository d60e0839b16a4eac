"""``learnserve update`` and ``learnserve predict``: files of any size through a running
service.

    learnserve models create a9a arow --kind sparse --dim 123 --index-base 1
    learnserve update a9a --file a9a.svm --format svmlight --batch 1000
    learnserve predict a9a --file a9a.t -o predictions.jsonl
    learnserve update adult --file adult.data --format csv --label class --missing '?'
    learnserve update sms --file SMSSpamCollection --format csv --delimiter tab --label Label

``update`` sends batches of ``--batch`` examples, each with its own Idempotency-Key (a
retried batch is learned once), shows the bytes read, and prints the model's
progressive (predict-then-learn) metrics from ``GET /models/{name}`` at the end.
``predict`` writes one prediction per instance, in file order (JSON lines, or CSV when
``-o`` ends in ``.csv``), and the accuracy on stderr when the file has labels.

Online models read the file as a stream (constant memory; ``.gz`` by name).
``--index-base`` is the first feature index of the file (SVMlight files are usually
1-based); it defaults to the model's ``index_base``, and indices are shifted
client-side when the two differ. A records model (``features.kind = "records"``) takes
CSV rows as raw records, numbers where its config says numeric (``--missing`` names the
missing-value token, ``--columns`` the columns of a file without a header) and JSON
lines that are flat records holding their ``--label`` field
(:mod:`service.client.record_files`). ``--delimiter`` is the character between a CSV
row's cells (``tab`` or ``'\\t'`` for TSV, the default for a ``.tsv`` name; a tab-delimited file has
no quoting: a quote is text).

Rankers (RankSVM, LambdaMART) take query groups (``--query`` FILE or ``qid:``; see
:mod:`service.cli.ranking_files`): ``update`` learns whole queries and ``predict``
writes one line per query and prints NDCG. FastXML and LL-SVM models read what their
``learnserve train`` reads (:mod:`service.cli.batch_files`). For every batch kind
``predict`` prints the metrics ``learnserve evaluate`` prints.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from service.cli import batch_files, ranking_files
from service.cli.file_options import Delimiter, csv_delimiter
from service.cli.prediction_output import sink
from service.cli.row_predictions import predict_rows
from service.cli.service_options import DEFAULT, Timeout, Token, Url, service_client
from service.client import LearnserveError, ModelInfo, UpdateResult, UpdateSummary
from service.client.files import (
    FORMATS,
    ExampleFile,
    FileFormatError,
    Target,
    guess_format,
)

FileArg = Annotated[Path, typer.Option("--file", "-f", help="Examples file (.gz: gzip).",
                                       exists=True, dir_okay=False, readable=True)]  # fmt: skip
Format = Annotated[
    str | None,
    typer.Option("--format", help=f"One of {', '.join(FORMATS)} (default: from the file name)."),
]
Batch = Annotated[int, typer.Option("--batch", min=1, help="Examples per request.")]
IndexBase = Annotated[
    int | None,
    typer.Option(min=0, max=1, help="First feature index of the file (default: the model's)."),
]
QueryFile = Annotated[
    Path | None,
    typer.Option(
        "--query",
        help="Rankers: LightGBM .query file of query sizes (default: FILE.query when it "
        "exists; else qid: tokens).",
        exists=True, dir_okay=False, readable=True,
    ),
]  # fmt: skip
Columns = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="CSV without a header row: its column names, comma-separated (a,b,c).",
    ),
]
Missing = Annotated[
    str | None,
    typer.Option(
        "--missing",
        help="Records models: a cell (or JSON string) equal to this is a missing value "
        "(null); an empty cell always is.",
    ),
]
Label = Annotated[str | None, typer.Option("--label", help="The same as --label-column.")]
BATCH_KINDS = ("lambdamart", "fastxml", "llsvm")


def one_label(label_column: str | None, label: str | None) -> str | None:
    if label is not None and label_column is not None and label != label_column:
        raise typer.BadParameter("--label and --label-column name different columns",
                                 param_hint="--label")  # fmt: skip
    return label if label is not None else label_column


def open_examples(
    info: ModelInfo,
    file: Path,
    fmt: str | None,
    index_base: int | None,
    label_column: str | None,
    id_column: str | None = None,
    columns: str | None = None,
    missing: str | None = None,
    delimiter: str | None = None,
) -> ExampleFile:
    fmt = fmt or guess_format(file)
    if fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    sep = csv_delimiter(delimiter, file, fmt)
    if missing is not None and info.features.get("kind") != "records":
        raise typer.BadParameter("only records models take a missing-value token",
                                 param_hint="--missing")  # fmt: skip
    names = None
    if columns is not None:
        names = [c.strip() for c in columns.split(",")]
        if fmt != "csv":
            raise typer.BadParameter("only CSV files take column names", param_hint="--columns")
        if not all(names) or len(set(names)) != len(names):
            raise typer.BadParameter(f"names must be distinct and non-empty, got {columns!r}",
                                     param_hint="--columns")  # fmt: skip
    target = Target.of_model(info.features, index_base, missing, info.kind == "regression")
    return ExampleFile(file, fmt, target, label_column=label_column, id_column=id_column,
                       columns=names, delimiter=sep)  # fmt: skip


def bytes_progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def update(
    model: Annotated[str, typer.Argument(help="Model name (create it with `models create`).")],
    file: FileArg,
    fmt: Format = None,
    batch: Batch = 1000,
    index_base: IndexBase = None,
    label_column: Annotated[
        str | None,
        typer.Option(
            help="CSV: the label column's name (default: the last); JSON lines of a "
            "records model: the field of each record holding its label."
        ),
    ] = None,
    label: Label = None,
    columns: Columns = None,
    missing: Missing = None,
    delimiter: Delimiter = None,
    query: QueryFile = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress bar (it goes to stderr).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """Learn from a file, in batches; prints the model's progressive metrics at the end."""
    t0 = time.perf_counter()
    label_column = one_label(label_column, label)
    with service_client(url, token, timeout) as c:
        info = c.describe(model)
        if info.kind in BATCH_KINDS:
            typer.echo(
                f"error: {model!r} is a {info.kind} model: a batch model learns only from "
                f"`learnserve train {info.kind}` (then `learnserve deploy`)",
                err=True,
            )
            raise typer.Exit(2)
        ranker = info.kind in ranking_files.RANKERS
        if query is not None and not ranker:
            raise typer.BadParameter("only rankers take query groups", param_hint="--query")
        if ranker:
            rf = ranking_files.open_ranking(info, file, fmt, index_base, label_column or "",
                                            query, "update", delimiter)  # fmt: skip
            examples = rf.examples
        else:
            examples = open_examples(info, file, fmt, index_base, label_column or "", None,
                                     columns, missing, delimiter)  # fmt: skip
        with bytes_progress(not no_progress) as bar:
            task = bar.add_task(f"learning {model}", total=examples.size)
            sent = 0

            def on_batch(result: UpdateResult, items: list[Any]) -> None:
                nonlocal sent
                sent += sum(len(q["items"]) for q in items) if ranker else len(items)
                bar.update(task, completed=examples.position(),
                           description=f"learning {model}: {sent} examples")  # fmt: skip

            try:
                summary: UpdateSummary
                if ranker:
                    summary = ranking_files.update(c, model, rf, batch, on_batch)
                else:
                    rows = (row.example() for row in examples)
                    summary = c.update(model, rows, batch_size=batch, on_batch=on_batch)
            except (FileFormatError, LearnserveError):
                # The batches before the failing one are learned (each once): say so.
                bar.stop()
                typer.echo(f"stopped: the {sent} examples before the error were learned", err=True)
                raise
            bar.update(task, completed=examples.size)
        info = c.describe(model)
    seconds = time.perf_counter() - t0
    om = info.online_metrics
    report = {
        "model": model,
        "examples": summary.examples,
        "batches": summary.batches,
        "retries": summary.retries,
        "replayed_batches": summary.replayed_batches,
        "version": info.version,
        "examples_learned": info.examples_learned,
        "online_metrics": info.raw.get("online_metrics"),
        "seconds": round(seconds, 3),
    }
    if as_json:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
        return
    out = Console(soft_wrap=True)
    rate = summary.examples / seconds if seconds > 0 else 0.0
    out.print(f"learned {summary.examples} examples in {summary.batches} batches "
              f"({summary.retries} retries, {summary.replayed_batches} replayed) "
              f"in {seconds:.1f} s, {rate:,.0f} examples/s")  # fmt: skip
    out.print(f"model {model}: version {info.version}, {info.examples_learned} examples learned")
    if om.accuracy is not None:
        loss = f", mean loss {om.loss:.4f}" if om.loss is not None else ""
        out.print(f"progressive accuracy {om.accuracy:.4f} over the last "
                  f"{om.window_examples} examples{loss}")  # fmt: skip
    if om.ndcg_at_10 is not None:
        out.print(f"progressive NDCG@10 {om.ndcg_at_10:.4f} over the last "
                  f"{om.window_examples} items")  # fmt: skip
    if om.mae is not None:
        r2 = "n/a" if om.r2 is None else f"{om.r2:.4f}"
        out.print(f"progressive MAE {om.mae:.6g}, RMSE {om.rmse:.6g}, R² {r2} over the last "
                  f"{om.window_examples} examples")  # fmt: skip


def predict(
    model: Annotated[str, typer.Argument(help="Model name.")],
    file: FileArg,
    fmt: Format = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    output_format: Annotated[
        str | None, typer.Option(help="jsonl or csv (default: from --output's name, else jsonl).")
    ] = None,
    batch: Batch = 1000,
    index_base: IndexBase = None,
    label_column: Annotated[
        str | None,
        typer.Option(
            help="CSV: a label column to leave out of the features (accuracy is printed "
            "against it); JSON lines of a records model: the field holding the label."
        ),
    ] = None,
    label: Label = None,
    columns: Columns = None,
    missing: Missing = None,
    delimiter: Delimiter = None,
    id_column: Annotated[
        str | None, typer.Option(help="CSV: a column of instance ids (for feedback by id).")
    ] = None,
    query: QueryFile = None,
    labels: Annotated[
        Path | None,
        typer.Option(help="LL-SVM: idx labels of idx images (default: found beside them)."),
    ] = None,
    scores: Annotated[
        bool, typer.Option("--scores", help="Also write each label's score (jsonl).")
    ] = False,
    min_version: Annotated[
        int | None, typer.Option(help="Answer from a worker at this version or later.")
    ] = None,
    k: Annotated[int | None, typer.Option(help="FastXML: labels per instance.")] = None,
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """Predict every instance of a file: one line per instance (per query for a ranker
    given query groups), in file order; the metrics on stderr when the file has labels."""
    label_column = one_label(label_column, label)
    out_fmt = output_format or ("csv" if output and output.suffix.lower() == ".csv" else "jsonl")
    if out_fmt not in ("jsonl", "csv"):
        raise typer.BadParameter(f"--output-format must be jsonl or csv, got {out_fmt!r}")
    with service_client(url, token, timeout) as c:
        info = c.describe(model)
        kind = info.kind
        if query is not None and kind not in ranking_files.RANKERS:
            raise typer.BadParameter("only rankers take query groups", param_hint="--query")
        if labels is not None and kind != "llsvm":
            raise typer.BadParameter("only llsvm models read idx labels", param_hint="--labels")
        if kind in ranking_files.RANKERS:
            rf = ranking_files.open_ranking(info, file, fmt, index_base, label_column, query,
                                            "predict", delimiter)  # fmt: skip
            if rf.grouped():
                with sink(output) as fh:
                    report = ranking_files.predict(c, model, kind, rf, fh, out_fmt, batch,
                                                   min_version)  # fmt: skip
                typer.echo(report, err=True, nl=False)
                return
            typer.echo("predict: no query groups (no --query file, no qid:): each line is "
                       "scored alone", err=True)  # fmt: skip
            examples = rf.examples
        elif kind == "fastxml":
            with sink(output) as fh:
                report = batch_files.predict_fastxml(c, model, info, file, fmt, fh, out_fmt,
                                                     batch, k, scores, min_version)  # fmt: skip
            typer.echo(report, err=True, nl=False)
            return
        elif kind == "llsvm":
            with sink(output) as fh:
                report = batch_files.predict_llsvm(c, model, info, file, fmt, labels, fh,
                                                   out_fmt, batch, scores, min_version)  # fmt: skip
            typer.echo(report, err=True, nl=False)
            return
        else:
            examples = open_examples(info, file, fmt, index_base, label_column, id_column,
                                     columns, missing, delimiter)  # fmt: skip
        with sink(output) as fh:
            known = None if kind == "regression" else info.labels
            message = predict_rows(c, model, examples, fh, out_fmt, batch, scores,
                                   min_version, k, known)  # fmt: skip
    typer.echo(message, err=True)
