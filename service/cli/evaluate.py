"""``learnserve evaluate MODEL --test FILE``: metrics of a saved batch model.

Every kind reports its metrics under the same key style: lower case, ``name@k`` for a
cut-off (``ndcg@10``, ``p@1``, ``accuracy``). The default display rounds to 4 digits;
``--json`` prints the full-precision values as one JSON object.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from learners.artifact import ArtifactError, load
from learners.registry import class_for

# artifact kind -> "module:function(model_path, test, test_query) -> dict"
EVALUATORS: dict[str, str] = {
    "lambdamart": "service.cli.train_lambdamart:evaluate_file",
    "fastxml": "service.cli.train_fastxml:evaluate_file",
    "llsvm": "service.cli.train_llsvm:evaluate_file",
}


def evaluate(
    model: Annotated[Path, typer.Argument(help="A model artifact written by `learnserve train`.")],
    test: Annotated[Path, typer.Option(help="Test data file.")],
    test_query: Annotated[
        Path | None, typer.Option(help="LightGBM-style .query file (ranking only).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print full-precision metrics as one JSON object.")
    ] = False,
) -> None:
    """Evaluate a trained model on a test file; prints its metrics (rounded, or --json)."""
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
    raw: dict[str, Any] = getattr(importlib.import_module(module), fn)(model, test, test_query)
    metrics = {key.lower(): value for key, value in raw.items()}
    if as_json:
        sys.stdout.write(orjson.dumps(metrics).decode() + "\n")
        return
    sys.stdout.write(display(kind, metrics))


def display(kind: str, metrics: dict[str, Any]) -> str:
    """One ``key  value`` line per metric, floats rounded to 4 digits, keys aligned."""
    width = max([len("kind"), *map(len, metrics)])
    lines = [f"{'kind':<{width}}  {kind}"]
    for key, value in metrics.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines) + "\n"
