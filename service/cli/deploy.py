"""``learnserve deploy MODEL --name NAME``: upload a trained artifact to a running service.

The artifact bytes are the body of ``PUT {url}/models/{name}/artifact``
(``Content-Type: application/octet-stream``), sent by :meth:`service.client.Client.deploy`
(retried only when the server cannot have acted: a refused connection, a 503
``not_ready``); the server validates the artifact,
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

import orjson
import typer

from learners.artifact import ArtifactError, ArtifactTooLarge, loads
from learners.registry import BATCH_KINDS, class_for
from service.cli.service_options import DEFAULT, Token, Url, reporting_to
from service.client import Client


def _check_locally(kind: str, blob: bytes) -> None:
    """The kind's own checks (structure, finite scores). The server applies its own
    memory limit: one over this machine's default is left for it to judge."""
    with contextlib.suppress(ArtifactTooLarge):
        class_for(kind).from_bytes(blob)


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
    target = f"{url.rstrip('/')}/models/{name}/artifact"
    with reporting_to(target), Client(url, token=api_key, timeout=timeout) as client:
        result = client.deploy(name, blob)
    if not result.stored:  # the same bytes as a stored version (HTTP 200): nothing stored
        typer.echo(
            f"{name!r} already has this {kind} artifact as version {result.version}; it is active",
            err=True,
        )
    else:
        typer.echo(f"deployed {kind} artifact ({len(blob)} bytes) as {name!r}", err=True)
    sys.stdout.write(orjson.dumps(result.raw).decode() + "\n")
