"""``learnserve export MODEL -o FILE``: save an online model's state from a running service.

Writes the body of ``GET {url}/models/{name}/state`` (an artifact: ``learners.load``
reads it, ``PUT /models/{name}`` with it as the body starts a model from it; fetched
by :meth:`service.client.Client.export_state`, retried like every GET) to FILE,
after checking it locally (magic, version, checksum, structure), atomically (a
temporary file, then a rename). Prints ``{"model", "version", "state_digest",
"size", "file"}`` on stdout.

    learnserve export adult -o adult.lsrn --url http://127.0.0.1:8000 --api-key $KEY
    curl -X PUT --data-binary @adult.lsrn -H 'Content-Type: application/octet-stream' \\
         http://other:8000/models/adult-copy
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from learners.artifact import ArtifactError, save
from learners.registry import load_model
from service.cli.service_options import DEFAULT, Token, Url, reporting_to
from service.client import Client


def export(
    model: Annotated[str, typer.Argument(help="Name of an online model on the server.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
    url: Url = DEFAULT,
    api_key: Token = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 60.0,
) -> None:
    """Save MODEL's state (an artifact) to a file; prints its version and state digest."""
    target = f"{url.rstrip('/')}/models/{model}/state"
    with reporting_to(target), Client(url, token=api_key, timeout=timeout) as client:
        state = client.export_state(model)
    blob = state.artifact
    try:
        load_model(blob)
    except ArtifactError as exc:
        typer.echo(f"error: the server sent an invalid artifact: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        save(output, blob)
    except OSError as exc:
        typer.echo(f"error: cannot write {output}: {exc}", err=True)
        raise typer.Exit(2) from None
    answer = {
        "model": model,
        "version": state.version,
        "state_digest": state.state_digest,
        "size": len(blob),
        "file": str(output),
    }
    sys.stdout.write(orjson.dumps(answer).decode() + "\n")
