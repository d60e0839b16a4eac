"""``learnserve decisions MODEL -o FILE``: a decision model's log as DSJSON lines.

Pages through ``GET {url}/models/{name}/decisions`` (each page's ``X-Next-After`` is the
next page's ``after``) and writes every decision with its reward, one DSJSON line each
(VW ``--dsjson``, Personalizer and learning-loop read them), to FILE (``-`` for stdout).
Prints ``{"model", "decisions", "next_after", "file"}`` on stderr; ``--after`` resumes
an earlier export from its ``next_after``. Log entries covered by a checkpoint are
trimmed from the store: only the rewards since the last checkpoint are still there.

    learnserve decisions front -o front.dsjson --url http://127.0.0.1:8000 --api-key $KEY
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from service.cli.service_options import DEFAULT, Token, Url, reporting_to
from service.client import Client


def decisions(
    model: Annotated[str, typer.Argument(help="Name of a decision model on the server.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write ('-': stdout).")],
    after: Annotated[int, typer.Option(min=0, help="Log position to start after.")] = 0,
    url: Url = DEFAULT,
    api_key: Token = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 60.0,
) -> None:
    """Write MODEL's decisions and their rewards as DSJSON lines."""
    target = f"{url.rstrip('/')}/models/{model}/decisions"
    lines: list[str] = []
    with reporting_to(target), Client(url, token=api_key, timeout=timeout) as client:
        while True:
            page, nxt = client.decision_log(model, after=after)
            lines += page
            if nxt == after:
                break
            after = nxt
    text = "".join(line + "\n" for line in lines)
    if str(output) == "-":
        sys.stdout.write(text)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            typer.echo(f"error: cannot write {output}: {exc}", err=True)
            raise typer.Exit(2) from None
    summary = {"model": model, "decisions": len(lines), "next_after": after, "file": str(output)}
    sys.stderr.write(orjson.dumps(summary).decode() + "\n")
