"""Issue 31 item 12: ``--help`` reads naturally. A plain flag (``--json``, ``--help``,
``--version``) shows no type (typer's default printed ``<bool>``, as if it took a
value), and usage lines name arguments as the CLI reference does (``MODEL``, an optional
one as ``[ALGORITHM]``; typer's default printed ``{model}``): every command's usage line
is the one ``docs/reference/cli.md`` prints for it."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from service.cli.main import app
from tests.test_cli_polish import NARROW, _commands

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"


def help_of(*path: str) -> str:
    r = CliRunner().invoke(app, [*path, "--help"], env=NARROW, prog_name="learnserve")
    assert r.exit_code == 0, r.output
    return r.output


def usage(text: str) -> str:
    found = re.search(r"Usage: (.*)", text)
    assert found is not None, text
    return " ".join(found.group(1).split())


def test_flags_show_no_type_and_usage_lines_read_naturally() -> None:
    assert usage(help_of("update")) == "learnserve update [OPTIONS] MODEL"
    assert usage(help_of("predict")) == "learnserve predict [OPTIONS] MODEL"
    assert (
        usage(help_of("models", "create")) == "learnserve models create [OPTIONS] NAME [ALGORITHM]"
    )
    for path in [*map(str.split, _commands()), []]:
        text = help_of(*path)
        assert "<bool>" not in text, (path, text)
        assert "{" not in usage(text), (path, usage(text))
        for flag in ("--help", "--json", "--no-progress", "--scores", "--version"):
            row = re.search(rf"│\s+{flag}\s+(\S+)", text)
            assert row is None or not row.group(1).startswith("<"), (path, flag, text)


def test_the_reference_prints_each_commands_usage_line() -> None:
    page = REFERENCE.read_text()
    wrong = []
    for path in _commands():
        block = re.search(
            rf"### `learnserve {re.escape(path)}`\n.*?```text\n(.*?)\n```", page, re.S
        )
        assert block is not None, path
        if " ".join(block.group(1).split()) != usage(help_of(*path.split())):
            wrong.append((path, block.group(1), usage(help_of(*path.split()))))
    assert not wrong, wrong
