"""``learnserve models create|list|show|delete``: online models on a running service.

learnserve models create a9a arow --kind sparse --dim 123 --index-base 1 -p r=1.0
learnserve models create sms --config sms.json      # any model: the PUT body's JSON
learnserve models create sms --config - < sms.json  # (- : from stdin)
learnserve models list
learnserve models show a9a
learnserve models delete a9a
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from service.cli.service_options import DEFAULT, Timeout, Token, Url, service_client
from service.client import ModelInfo

models_app = typer.Typer(help="Create, list, show and delete models on a running service.",
                         no_args_is_help=True)  # fmt: skip


def parse_params(values: list[str]) -> dict[str, Any]:
    """``-p`` values: each a JSON object or ``key=value`` (the value read as JSON when it
    is JSON: ``r=1`` is 1, ``covariance=full`` the string, ``pairs_per_group=null`` None).

    >>> parse_params(['{"r": 0.5}', "covariance=full", "seed=3"])
    {'r': 0.5, 'covariance': 'full', 'seed': 3}
    """
    params: dict[str, Any] = {}
    for v in values:
        text = v.strip()
        if text.startswith("{"):
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as e:
                raise typer.BadParameter(f"{v!r} is not a JSON object ({e})") from None
            if not isinstance(obj, dict):
                raise typer.BadParameter(f"{v!r} is not a JSON object")
            params.update(obj)
            continue
        key, sep, raw = text.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{v!r}: expected key=value or a JSON object")
        try:
            params[key] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            params[key] = raw
    return params


def features_config(
    kind: str, dim: int | None, bits: int | None, index_base: int
) -> dict[str, Any]:
    if kind == "hashed":
        if bits is None:
            raise typer.BadParameter("--bits is required for hashed features")
        return {"kind": "hashed", "bits": bits}
    if kind not in ("dense", "sparse"):
        raise typer.BadParameter(f"--kind must be dense, sparse or hashed, got {kind!r}")
    if dim is None:
        raise typer.BadParameter(f"--dim is required for {kind} features")
    out: dict[str, Any] = {"kind": kind, "dim": dim}
    if index_base:
        out["index_base"] = index_base
    return out


def read_config(source: str) -> dict[str, Any]:
    """``--config``: a JSON object read from the file named, or from stdin for ``-``."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as e:
        raise typer.BadParameter(f"cannot read {source!r}: {e.strerror or e}",
                                 param_hint="--config") from None  # fmt: skip
    where = "stdin" if source == "-" else repr(source)
    try:
        config = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise typer.BadParameter(f"{where} is not JSON ({e})", param_hint="--config") from None
    if not isinstance(config, dict):
        raise typer.BadParameter(f"{where} holds no JSON object (a model config)",
                                 param_hint="--config")  # fmt: skip
    return config


_BUILT = ("param", "kind", "dim", "bits", "index_base")  # what --config replaces


def _given(ctx: typer.Context, param: str) -> bool:
    """Whether the option was on the command line (or in the environment), not defaulted."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


@models_app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Model name (1-64 of A-Z a-z 0-9 . _ -).")],
    algorithm: Annotated[
        str | None,
        typer.Argument(help="pa, pa1, pa2, cw, arow, scw1, scw2, ranksvm (not with --config)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help='Hyperparameter key=value, or a JSON object {"r": 1}.'),
    ] = None,
    kind: Annotated[str, typer.Option(help="Features: dense, sparse or hashed.")] = "sparse",
    dim: Annotated[int | None, typer.Option(help="Number of features (dense, sparse).")] = None,
    bits: Annotated[int | None, typer.Option(help="2**bits dimensions (hashed).")] = None,
    index_base: Annotated[
        int, typer.Option(min=0, max=1, help="First sparse index: 1 for SVMlight's 1-based files.")
    ] = 0,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="The model's whole config as JSON (the body of PUT /models/NAME), from "
            "FILE or - for stdin: any model, e.g. raw records; instead of ALGORITHM and "
            "the options above.",
        ),
    ] = None,
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """Create an online model (same config again: no change; another config: an error)."""
    if config is not None:
        given = [p for p in _BUILT if _given(ctx, p)]
        if algorithm is not None or given:
            what = "ALGORITHM" if algorithm is not None else "--" + given[0].replace("_", "-")
            raise typer.BadParameter(f"the config file gives the whole model: no {what} with it",
                                     param_hint="--config")  # fmt: skip
        body = read_config(config)
        with service_client(url, token, timeout) as c:
            info = c.create_model_from_config(name, body)
        sys.stdout.write(orjson.dumps(info.raw, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if algorithm is None:
        raise typer.BadParameter("give ALGORITHM (or the whole config with --config)",
                                 param_hint="ALGORITHM")  # fmt: skip
    features = features_config(kind, dim, bits, index_base)
    with service_client(url, token, timeout) as c:
        info = c.create_model(name, algorithm, features, parse_params(param or []))
    sys.stdout.write(orjson.dumps(info.raw, option=orjson.OPT_INDENT_2).decode() + "\n")


@models_app.command("list")
def list_models(
    as_json: Annotated[bool, typer.Option("--json", help="The service's JSON answer.")] = False,
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """List the models: kind, algorithm, version, examples learned, progressive accuracy."""
    with service_client(url, token, timeout) as c:
        models = c.list_models()
    if as_json:
        sys.stdout.write(orjson.dumps([m.raw for m in models]).decode() + "\n")
        return
    table = Table("name", "kind", "algorithm", "version", "examples", "accuracy", "ndcg@10")
    for m in sorted(models, key=lambda m: m.name):
        om = m.online_metrics
        table.add_row(
            m.name,
            m.kind,
            str(m.config.get("algorithm", "")),
            str(m.version),
            str(m.examples_learned),
            _fmt(om.accuracy),
            _fmt(om.ndcg_at_10),
        )
    Console().print(table)


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.4f}"


@models_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Model name.")],
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """Describe a model (the service's JSON: config, version, labels, metrics, digest)."""
    with service_client(url, token, timeout) as c:
        info: ModelInfo = c.describe(name)
    sys.stdout.write(orjson.dumps(info.raw, option=orjson.OPT_INDENT_2).decode() + "\n")


@models_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Model name.")],
    url: Url = DEFAULT,
    token: Token = None,
    timeout: Timeout = 60.0,
) -> None:
    """Delete a model and everything stored for it."""
    with service_client(url, token, timeout) as c:
        c.delete_model(name)
    typer.echo(f"deleted {name!r}", err=True)
