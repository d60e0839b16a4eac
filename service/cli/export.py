"""``learnserve export MODEL -o FILE``: save an online model's state from a running service.

Writes the body of ``GET {url}/models/{name}/state`` (an artifact: ``learners.load``
reads it, ``PUT /models/{name}`` with it as the body starts a model from it) to FILE,
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

import httpx
import orjson
import typer

from learners.artifact import ArtifactError, save
from learners.registry import load_model
from service.cli import app
from service.cli.deploy import _server_message
from service.cli.service_options import DEFAULT, Token, Url


@app.command()
def export(
    model: Annotated[str, typer.Argument(help="Name of an online model on the server.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
    url: Url = DEFAULT,
    api_key: Token = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 60.0,
) -> None:
    """Save MODEL's state (an artifact) to a file; prints its version and state digest."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    target = f"{url.rstrip('/')}/models/{model}/state"
    try:
        resp = httpx.get(target, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        typer.echo(f"error: cannot reach {target}: {exc}", err=True)
        raise typer.Exit(1) from None
    if resp.status_code >= 400:
        typer.echo(
            f"error: HTTP {resp.status_code} from {target}: {_server_message(resp)}", err=True
        )
        raise typer.Exit(1)
    blob = resp.content
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
        "version": int(resp.headers.get("x-model-version", "0")),
        "state_digest": resp.headers.get("x-state-digest"),
        "size": len(blob),
        "file": str(output),
    }
    sys.stdout.write(orjson.dumps(answer).decode() + "\n")
