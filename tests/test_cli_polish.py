"""The command line as a user meets it at 80 columns: every option has help text that
survives rich's rendering (``(env ...; default ...)`` intact), ``--version``, progress
bars that keep bar, count, metric and time on one line, and ``evaluate`` output that is
rounded by default and full precision with ``--json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer.main
from typer.testing import CliRunner

from service.cli.main import app

REPO = Path(__file__).resolve().parents[1]
NARROW = {"COLUMNS": "80", "TERMINAL_WIDTH": "80", "NO_COLOR": "1"}


def _commands() -> dict[str, Any]:
    """Every leaf command by its path (``serve``, ``train lambdamart``...)."""
    root = typer.main.get_command(app)
    found: dict[str, Any] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        if hasattr(cmd, "commands"):  # a group (typer may vendor its own click)
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = cmd

    walk(root, [])
    return found


def _flat(text: str) -> str:
    """Help output without the box drawing, whitespace collapsed (wrapped lines join)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_every_option_of_every_command_has_help_that_survives_rendering() -> None:
    commands = _commands()
    assert {"serve", "warmup", "evaluate", "deploy", "train lambdamart"} <= set(commands)
    runner = CliRunner()
    for path, cmd in commands.items():
        result = runner.invoke(app, [*path.split(), "--help"], env=NARROW)
        assert result.exit_code == 0, (path, result.output)
        shown = _flat(result.output)
        for param in cmd.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            assert param.help, f"`learnserve {path}` option {param.opts[0]} has no help"
            assert _flat(param.help) in shown, (path, param.help, result.output)
        for line in result.output.splitlines():
            assert len(line) <= 80, (path, line)


def test_every_command_that_talks_to_a_service_has_the_same_url_and_key_options() -> None:
    # export and deploy had their own --url without LEARNSERVE_URL: with only the env
    # var set, `learnserve export` went to 127.0.0.1:8000 while `update` did not.
    talking = {p: c for p, c in _commands().items() if any("--url" in o.opts for o in c.params)}
    assert {"deploy", "export", "update", "predict", "models create"} <= set(talking)
    for path, cmd in talking.items():
        opts = {o.opts[0]: o for o in cmd.params if o.param_type_name == "option"}
        assert opts["--url"].envvar == "LEARNSERVE_URL", path
        token = opts["--token"]
        assert "--api-key" in token.opts, path
        assert list(token.envvar) == ["LEARNSERVE_TOKEN", "LEARNSERVE_API_KEY"], path


def test_serve_help_names_every_env_var_and_default() -> None:
    out = _flat(CliRunner().invoke(app, ["serve", "--help"], env=NARROW).output)
    for env, default in [
        ("LEARNSERVE_HOST", "127.0.0.1"),
        ("LEARNSERVE_PORT", "8000"),
        ("LEARNSERVE_WORKERS", "1"),
        ("LEARNSERVE_DATA_DIR", "./data"),
    ]:
        assert f"(env {env}; default {default})" in out, out
    assert "env LEARNSERVE_REDIS_URL" in out and "env LEARNSERVE_REDIS_CLUSTER" in out


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"learnserve {version('learnserve')}"


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **NARROW}
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *map(str, args)],
        capture_output=True, text=True, timeout=900, cwd=REPO, env=env,
    )  # fmt: skip


def test_lambdamart_progress_fits_80_columns_and_evaluate_rounds(tmp_path: Path) -> None:
    lines = [
        f"{(i + q) % 3} qid:{q} 1:{(i + q) % 3 + 0.1 * i} 2:{(i * 7 % 5) / 5}"
        for q in range(12)
        for i in range(8)
    ]
    data = tmp_path / "train.letor"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.lsart"
    r = _cli(
        "train", "lambdamart", "--train", data, "--valid", data, "--trees", 6,
        "--min-data-in-leaf", 5, "--min-sum-hessian-in-leaf", 0, "-o", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    bar = [line for line in r.stderr.splitlines() if line.startswith("lambdamart")]
    assert bar, r.stderr
    # one line: name, bar, count, the validation metric and the elapsed time
    assert re.search(r"^lambdamart .* 6/6 valid ndcg@10 \d\.\d{4} \d+:\d\d:\d\d\s*$", bar[-1]), bar
    assert all(len(line) <= 80 for line in r.stderr.splitlines()), r.stderr

    r = _cli("evaluate", out, "--test", data)
    assert r.returncode == 0, r.stderr
    rows = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert rows["kind"] == "lambdamart"
    assert set(rows) == {"kind", "ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10"}
    assert all(re.fullmatch(r"\d\.\d{4}", rows[k]) for k in rows if k != "kind"), rows

    r = _cli("evaluate", out, "--test", data, "--json")
    full = json.loads(r.stdout)
    assert set(full) == set(rows) - {"kind"}
    for key, value in full.items():
        assert f"{value:.4f}" == rows[key]  # the display is the full value, rounded
