"""Options of the commands that read example files (``update``, ``predict``): the CSV
delimiter (``--delimiter``), checked here for every kind of model that reads CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.client.files import guess_delimiter

Delimiter = Annotated[
    str | None,
    typer.Option(
        "--delimiter",
        help="CSV: the one character between cells; tab (or '\\t') for TSV, whose "
        "quotes are text (default: a tab for .tsv, else a comma).",
    ),
]
_NAMED = {"tab": "\t", "\\t": "\t"}


def csv_delimiter(value: str | None, file: Path, fmt: str) -> str:
    """``--delimiter`` as the one character it names (``tab`` and ``\\t``: a tab); by
    the file's name when not given; refused, naming the option, otherwise.

    >>> csv_delimiter("tab", Path("sms.txt"), "csv"), csv_delimiter(None, Path("a.tsv"), "csv")
    ('\\t', '\\t')
    >>> csv_delimiter(";", Path("a.csv"), "csv")
    ';'
    """
    if value is None:
        return guess_delimiter(file)
    if fmt != "csv":
        raise typer.BadParameter(f"only CSV files take a delimiter (this one is {fmt})",
                                 param_hint="--delimiter")  # fmt: skip
    text = _NAMED.get(value, value)
    if len(text) != 1 or text in '"\r\n':
        raise typer.BadParameter(
            "one character other than a quote or a line break (tab or '\\t' for a tab), "
            f"got {value!r}", param_hint="--delimiter",
        )  # fmt: skip
    return text
