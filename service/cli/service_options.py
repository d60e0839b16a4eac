"""Options and error reporting shared by the commands that talk to a running service
(``learnserve models ...``, ``update``, ``predict``, ``deploy``, ``export``): one
``--url`` (``LEARNSERVE_URL``) and one ``--token`` / ``--api-key`` for all of them, and
one :class:`~service.client.Client` (its retries and typed errors) behind each."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import orjson
import typer

from service.client import DEFAULT_URL, Client, ConnectionFailed, LearnserveError
from service.client.files import FileFormatError

Url = Annotated[
    str,
    typer.Option("--url", envvar="LEARNSERVE_URL", help="The service's base URL."),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        "--api-key",
        envvar=["LEARNSERVE_TOKEN", "LEARNSERVE_API_KEY"],
        help="API key, when the service has LEARNSERVE_API_KEYS (sent as a Bearer token).",
        show_default=False,
    ),
]
Timeout = Annotated[float, typer.Option(help="Seconds to wait for each answer.")]

DEFAULT = DEFAULT_URL


@contextlib.contextmanager
def service_client(url: str, token: str | None, timeout: float = 60.0) -> Iterator[Client]:
    """A :class:`Client`; a service error, an unreadable file or a bad option ends the
    command with its message on stderr and exit code 1 (2 for the file's content)."""
    try:
        with Client(url, token=token, timeout=timeout) as client:
            yield client
    except LearnserveError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    except FileFormatError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def server_message(err: LearnserveError) -> str:
    """The service's refusal as ``deploy`` and ``export`` print it: ``error: message
    (field)`` from ``{"detail": {...}}``, another JSON answer whole, else its text."""
    if err.body is None:  # not JSON: the client kept the answer's text (or its reason)
        return err.message
    body = err.body
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict) and "message" in detail:
        field = f" ({detail['field']})" if detail.get("field") else ""
        return f"{detail.get('error', 'error')}: {detail['message']}{field}"
    return orjson.dumps(detail).decode()


@contextlib.contextmanager
def reporting_to(target: str) -> Iterator[None]:
    """``deploy`` and ``export``: a service error ends the command with exit code 1 and
    ``error: HTTP {status} from {target}: ...`` on stderr; no answer (after the client's
    retries) with ``error: cannot reach {target}: ...``."""
    try:
        yield
    except LearnserveError as e:
        if isinstance(e, ConnectionFailed) or e.status is None:
            typer.echo(f"error: cannot reach {target}: {e.__cause__ or e}", err=True)
        else:
            typer.echo(f"error: HTTP {e.status} from {target}: {server_message(e)}", err=True)
        raise typer.Exit(1) from None
