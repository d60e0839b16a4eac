"""``learnserve predict`` of an online classifier or regressor: one prediction per row
of a file (a stream), the accuracy (MAE for a regressor) when the rows have labels, and
a warning on stderr naming the labels of the file that the model has never seen (UCI's
``adult.test`` writes ``>50K.`` where ``adult.data`` and so the model have ``>50K``):
every such row counts as wrong, so an accuracy of 0 would otherwise say nothing of why.
"""

from __future__ import annotations

from typing import IO, Any

import typer

from service.cli.prediction_output import row_writer
from service.client import Client
from service.client._core import batched
from service.client.files import ExampleFile

SHOWN = 5  # unseen labels named in the warning (then "and N more")


def unseen_warning(unseen: dict[Any, int], known: list[Any]) -> str:
    """The warning for the rows whose label the model has never seen.

    >>> print(unseen_warning({">50K.": 3, "<=50K.": 9}, ["<=50K", ">50K"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    warning: 12 rows have labels the model has never seen: '>50K.', '<=50K.'
    (the model's: '<=50K', '>50K'); they count as wrong
    """
    names = ", ".join(repr(label) for label in list(unseen)[:SHOWN])
    if len(unseen) > SHOWN:
        names += f" and {len(unseen) - SHOWN} more"
    theirs = ", ".join(repr(label) for label in known[:SHOWN]) or "none yet"
    if len(known) > SHOWN:
        theirs += f" and {len(known) - SHOWN} more"
    return (f"warning: {sum(unseen.values())} rows have labels the model has never seen: "
            f"{names} (the model's: {theirs}); they count as wrong")  # fmt: skip


def predict_rows(
    c: Client,
    model: str,
    examples: ExampleFile,
    fh: IO[str],
    out_fmt: str,
    batch: int,
    with_scores: bool,
    min_version: int | None,
    k: int | None,
    known: list[Any] | None = None,
) -> str:
    """One prediction per row (a stream); the accuracy when rows have labels (``known``:
    the model's labels, to warn of the rows' labels it has never seen)."""
    n = correct = labelled = 0
    abs_err = 0.0  # a regressor's, against the rows' targets
    regression = examples.target.numeric_labels
    write = row_writer(fh, out_fmt, with_scores, regression)
    seen = set(known or [])
    unseen: dict[Any, int] = {}
    for rows in batched(examples, batch):
        ids = [r.id for r in rows] if any(r.id for r in rows) else None
        res = c.predict(model, [r.instance()["x"] for r in rows], ids=ids,
                        min_version=min_version, k=k)  # fmt: skip
        for row, p in zip(rows, res.predictions, strict=True):
            write(row, p)
            n += 1
            if row.y is not None and regression and p.value is not None:
                labelled += 1
                abs_err += abs(float(row.y) - p.value)
            elif row.y is not None and p.label is not None:
                labelled += 1
                correct += int(p.label == row.y)
                if known is not None and row.y not in seen:
                    unseen[row.y] = unseen.get(row.y, 0) + 1
    if unseen:
        typer.echo(unseen_warning(unseen, list(known or [])), err=True)
    message = f"predicted {n} instances"
    if labelled and regression:
        message += f"; MAE {abs_err / labelled:.6g} ({labelled} labelled)"
    elif labelled:
        message += f"; accuracy {correct / labelled:.4f} ({correct}/{labelled} labelled)"
    return message
