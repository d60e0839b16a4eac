"""How ``--help`` reads: the command and group classes of every ``learnserve`` command.

Typer's own help shows a type after every option, ``<bool>`` after a plain flag too
(``--json <bool>``, as if it took a value), and a required argument as ``{model}`` in
the usage line. Here a flag (``--json``, ``--no-progress``, ``--help``) shows no type,
and the usage line names arguments as click and the CLI reference do:
``learnserve update [OPTIONS] MODEL``, ``learnserve models create [OPTIONS] NAME
[ALGORITHM]`` (an optional one in brackets). :func:`plain_help` sets these classes on an
app and its sub-apps (``service.cli.main`` calls it once every command is registered).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def _flags_plain(params: list[Any]) -> list[Any]:
    """A flag's type shown as nothing (its metavar "": typer prints the metavar given)."""
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


def argument_usage(param: Any) -> str:
    """``MODEL``, ``[ALGORITHM]``, ``FILES...``: as click's usage lines name arguments."""
    name = (param.metavar or param.name or "").upper()
    if param.nargs != 1:
        name += "..."
    return name if param.required else f"[{name}]"


class PlainCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_plain(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        args = [p for p in self.get_params(ctx) if p.param_type_name == "argument"]
        return pieces + [argument_usage(p) for p in args]


class PlainGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_plain(super().get_params(ctx))


def _own(cls: object, default: type) -> bool:
    """A class of its own (not unset, typer's default placeholder, or ``default``)."""
    return isinstance(cls, type) and cls is not default


def plain_help(app: typer.Typer) -> None:
    """Every command of ``app`` and of its sub-apps with the classes above (where a
    command names no class of its own)."""
    if not _own(app.info.cls, TyperGroup):
        app.info.cls = PlainGroup
    for command in app.registered_commands:
        if not _own(command.cls, TyperCommand):
            command.cls = PlainCommand
    for group in app.registered_groups:
        if not _own(group.cls, TyperGroup):
            group.cls = PlainGroup
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
