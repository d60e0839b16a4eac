"""``learnserve deploy MODEL --name NAME``: upload a trained artifact to a running service.

The artifact bytes are the body of ``PUT {url}/models/{name}/artifact``
(``Content-Type: application/octet-stream``); the server validates the artifact,
stores it as the model's next version and swaps it in atomically. The server's
JSON answer (the new version) is printed on stdout. Deploying the same file again
stores nothing: the server answers its stored version (200), made active again. The
file is checked locally first (magic, version, checksum, and the kind's structure),
so a corrupted file is never sent.

    learnserve deploy ranker.lsart --name web-ranker --url http://127.0.0.1:8000 --api-key $KEY
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import httpx
import orjson
import typer

from learners.artifact import ArtifactError, ArtifactTooLarge, loads
from learners.registry import BATCH_KINDS, class_for
from service.cli import app
from service.cli.service_options import DEFAULT, Token, Url


def _server_message(resp: httpx.Response) -> str:
    """The service's error message ({"detail": {"error", "message", "field"}}), else the body."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:500] or resp.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict) and "message" in detail:
        field = f" ({detail['field']})" if detail.get("field") else ""
        return f"{detail.get('error', 'error')}: {detail['message']}{field}"
    return orjson.dumps(detail).decode()


def _check_locally(kind: str, blob: bytes) -> None:
    """The kind's own checks (structure, finite scores). The server applies its own
    memory limit: one over this machine's default is left for it to judge."""
    with contextlib.suppress(ArtifactTooLarge):
        class_for(kind).from_bytes(blob)


@app.command()
def deploy(
    model: Annotated[Path, typer.Argument(help="Artifact written by `learnserve train ...`.")],
    name: Annotated[str, typer.Option(help="Model name on the server.")],
    url: Url = DEFAULT,
    api_key: Token = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 60.0,
) -> None:
    """Upload a batch-model artifact as the next version of NAME; prints the server's answer."""
    try:
        blob = model.read_bytes()
        kind = loads(blob).kind
        if kind in BATCH_KINDS:
            _check_locally(kind, blob)
    except OSError as exc:
        typer.echo(f"error: cannot read {model}: {exc}", err=True)
        raise typer.Exit(2) from None
    except ArtifactError as exc:
        typer.echo(f"error: {model} is not a valid artifact: {exc}", err=True)
        raise typer.Exit(2) from None
    headers = {"Content-Type": "application/octet-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    target = f"{url.rstrip('/')}/models/{name}/artifact"
    try:
        resp = httpx.put(target, content=blob, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        typer.echo(f"error: cannot reach {target}: {exc}", err=True)
        raise typer.Exit(1) from None
    if resp.status_code >= 400:
        typer.echo(
            f"error: HTTP {resp.status_code} from {target}: {_server_message(resp)}", err=True
        )
        raise typer.Exit(1)
    if resp.status_code == 200:  # the same bytes as a stored version: nothing stored
        version = resp.json().get("version")
        typer.echo(
            f"{name!r} already has this {kind} artifact as version {version}; it is active",
            err=True,
        )
    else:
        typer.echo(f"deployed {kind} artifact ({len(blob)} bytes) as {name!r}", err=True)
    sys.stdout.write(resp.text.strip() + "\n")
