"""The ``learnserve`` command line: serve, train, evaluate, deploy, export; and, against
a running service, ``models``, ``update`` and ``predict`` (through :mod:`service.client`).

Each sub-command lives in its own module and registers itself on ``app`` or
``train_app`` when imported below.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="learnserve",
    help="Online-learning service: serve models that learn while they serve; "
    "train, evaluate and deploy batch models.",
    no_args_is_help=True,
    add_completion=False,
)
train_app = typer.Typer(help="Train a batch model from files.", no_args_is_help=True)
app.add_typer(train_app, name="train")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"learnserve {version('learnserve')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("learnserve (not installed: no package metadata)")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Online-learning service: serve models that learn while they serve; train, evaluate
    and deploy batch models."""


# Sub-command modules register on import (order = order in --help).
from service.cli import deploy as _deploy  # noqa: E402,F401
from service.cli import evaluate as _evaluate  # noqa: E402,F401
from service.cli import export as _export  # noqa: E402,F401
from service.cli import import_model as _import_model  # noqa: E402,F401
from service.cli import ingest as _ingest  # noqa: E402,F401
from service.cli import models as _models  # noqa: E402,F401
from service.cli import serve as _serve  # noqa: E402,F401
from service.cli import train_fastxml as _train_fastxml  # noqa: E402,F401
from service.cli import train_lambdamart as _train_lambdamart  # noqa: E402,F401
from service.cli import train_llsvm as _train_llsvm  # noqa: E402,F401
from service.cli import warmup as _warmup  # noqa: E402,F401


def main() -> None:
    app()
