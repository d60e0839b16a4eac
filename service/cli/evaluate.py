"""``learnserve evaluate MODEL --test FILE``: metrics of a saved batch model as JSON."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from learners.artifact import ArtifactError, load
from learners.registry import class_for
from service.cli import app

# artifact kind -> "module:function(model_path, test, test_query) -> dict"
EVALUATORS: dict[str, str] = {
    "lambdamart": "service.cli.train_lambdamart:evaluate_file",
    "fastxml": "service.cli.train_fastxml:evaluate_file",
    "llsvm": "service.cli.train_llsvm:evaluate_file",
}


@app.command()
def evaluate(
    model: Annotated[Path, typer.Argument(help="A model artifact written by `learnserve train`.")],
    test: Annotated[Path, typer.Option(help="Test data file.")],
    test_query: Annotated[
        Path | None, typer.Option(help="LightGBM-style .query file (ranking only).")
    ] = None,
) -> None:
    """Evaluate a trained model on a test file; prints the metrics as JSON on stdout."""
    try:
        kind = load(model).kind
        if kind not in EVALUATORS:
            typer.echo(f"error: no evaluator for model kind {kind!r}", err=True)
            raise typer.Exit(2)
        class_for(kind).load(model)  # the kind's own checks (structure, finite scores, size)
    except (OSError, ArtifactError) as exc:
        typer.echo(f"error: cannot read {model}: {exc}", err=True)
        raise typer.Exit(2) from None
    module, _, fn = EVALUATORS[kind].partition(":")
    metrics: dict[str, Any] = getattr(importlib.import_module(module), fn)(model, test, test_query)
    sys.stdout.write(orjson.dumps(metrics).decode() + "\n")
