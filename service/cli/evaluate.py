"""``learnserve evaluate MODEL --test FILE``: metrics of a saved batch model.

Every kind reports its metrics under the same key style: lower case, ``name@k`` for a
cut-off (``ndcg@10``, ``p@1``, ``accuracy``). The default display rounds to 4 digits;
``--json`` prints the full-precision values as one JSON object. The test file is read
as ``learnserve train`` reads the kind's training file. What it is doing (loading the
model, reading the file, scoring: the first run compiles the kernels) goes to stderr,
one line per phase.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from learners.artifact import ArtifactError, read_header
from learners.registry import class_for
from service.cli.file_metrics import display
from service.cli.phases import phase

__all__ = ["EVALUATORS", "display", "evaluate"]

# artifact kind -> "module:function(model, test, test_query, test_labels) -> dict"
EVALUATORS: dict[str, str] = {
    "lambdamart": "service.cli.train_lambdamart:evaluate_model",
    "fastxml": "service.cli.train_fastxml:evaluate_model",
    "llsvm": "service.cli.train_llsvm:evaluate_model",
}


def evaluate(
    model: Annotated[Path, typer.Argument(help="A model artifact written by `learnserve train`.")],
    test: Annotated[Path, typer.Option(help="Test data file.")],
    test_query: Annotated[
        Path | None, typer.Option(help="LightGBM-style .query file (ranking only).")
    ] = None,
    test_labels: Annotated[
        Path | None,
        typer.Option(help="idx labels file for idx images (llsvm; default: found beside them)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print full-precision metrics as one JSON object.")
    ] = False,
) -> None:
    """Evaluate a trained model on a test file; prints its metrics (rounded, or --json)."""
    phase("evaluate", f"loading model {model.name}")
    try:
        blob = model.read_bytes()
        kind = str(read_header(blob).get("kind"))
        if kind not in EVALUATORS:
            typer.echo(f"error: no evaluator for model kind {kind!r}", err=True)
            raise typer.Exit(2)
        # the kind's own checks (checksum, structure, finite scores, size)
        loaded = class_for(kind).from_bytes(blob)
    except (OSError, ArtifactError) as exc:
        typer.echo(f"error: cannot read {model}: {exc}", err=True)
        raise typer.Exit(2) from None
    module, _, fn = EVALUATORS[kind].partition(":")
    evaluator = getattr(importlib.import_module(module), fn)
    raw: dict[str, Any] = evaluator(loaded, test, test_query, test_labels)
    metrics = {key.lower(): value for key, value in raw.items()}
    if as_json:
        sys.stdout.write(orjson.dumps(metrics).decode() + "\n")
        return
    sys.stdout.write(display(kind, metrics))
