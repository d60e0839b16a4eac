"""The ``learnserve`` command: the Typer app, and every sub-command registered on it.

The command modules of this package define plain functions (or, for a group, their
own ``typer.Typer``) and never import this module; the order of registration below is
the order of ``learnserve --help``. ``[project.scripts]`` points at :func:`main`, and
``python -m service.cli`` runs it too.
"""

from __future__ import annotations

import typer

from service.cli import (
    decisions,
    deploy,
    evaluate,
    evaluate_policy,
    export,
    import_model,
    ingest,
    models,
    serve,
    train_fastxml,
    train_lambdamart,
    train_llsvm,
    warmup,
)
from service.cli.help_format import plain_help

app = typer.Typer(
    name="learnserve",
    help="Online-learning service: serve models that learn while they serve; "
    "train, evaluate and deploy batch models.",
    no_args_is_help=True,
    add_completion=False,
)


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


# Commands (Typer lists them before the groups, each in the order registered).
app.command("decisions")(decisions.decisions)
app.command("deploy")(deploy.deploy)
app.command("evaluate")(evaluate.evaluate)
app.command("evaluate-policy")(evaluate_policy.evaluate_policy)
app.command("export")(export.export)
app.command("update")(ingest.update)
app.command("predict")(ingest.predict)
app.command("serve")(serve.serve)
app.command("warmup")(warmup.warmup)

# Groups.
train_app = typer.Typer(help="Train a batch model from files.", no_args_is_help=True)
train_app.command("fastxml")(train_fastxml.train_fastxml)
train_app.command("lambdamart")(train_lambdamart.train_lambdamart)
train_app.command("llsvm", help=train_llsvm.COMMAND_HELP)(train_llsvm.train_llsvm)
app.add_typer(train_app, name="train")
app.add_typer(import_model.import_app, name="import")
app.add_typer(models.models_app, name="models")
plain_help(app)  # flags without a type, usage lines as `learnserve update [OPTIONS] MODEL`


def main() -> None:
    app()
