"""A short headless Locust run of every scenario against a real service: no request may fail."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from tests.deploy.conftest import REPO, running_service

LOCUSTFILE = REPO / "loadtest" / "locustfile.py"


def run_locust(url: str, csv_prefix: Path, *args: str, env: dict[str, str] | None = None) -> str:
    import os

    cmd = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
        "--host", url, "--csv", str(csv_prefix), "--only-summary",
        "--exit-code-on-error", "3", "--stop-timeout", "5", "--loglevel", "WARNING",
        *args,
    ]  # fmt: skip
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"locust exited {run.returncode}:\n{out[-4000:]}"
    return out


def read_stats(csv_prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{csv_prefix}_stats.csv", newline="") as f:
        return {f"{r['Type']} {r['Name']}".strip(): r for r in csv.DictReader(f)}


def test_all_scenarios_run_without_failures(tmp_path: Path) -> None:
    # With API keys on, so the locustfile's key handling is exercised too.
    env = {"LEARNSERVE_API_KEYS": "lt=predict+update+admin"}
    with running_service(tmp_path / "data", env=env) as url:
        prefix = tmp_path / "smoke"
        run_locust(
            url, prefix, "-u", "8", "-r", "8", "-t", "10s", "--mix-models", "2",
            "--model-prefix", "smoke", "--batch-size", "16",
            env={"LEARNSERVE_API_KEY": "lt"},
        )  # fmt: skip
        stats = read_stats(prefix)
        # Every scenario's traffic is there (weights: 3/1/1/1 users of 8).
        for name in (
            "POST POST /predict",
            "POST POST /update [8]",
            "POST POST /update [16]",
            "POST POST /predict [ranking]",
            "POST POST /update [ranking]",
        ):
            assert name in stats, f"no {name!r} in {sorted(stats)}"
        total = stats["Aggregated"]
        assert int(total["Request Count"]) > 100
        assert int(total["Failure Count"]) == 0
        # The models the run created exist and learned something.
        import httpx

        models = httpx.get(f"{url}/models", headers={"Authorization": "Bearer lt"}).json()
        learned = {m["name"]: m["version"] for m in models["models"]}
        for name in ("smoke-clf", "smoke-stream", "smoke-rank", "smoke-mix-0", "smoke-mix-1"):
            assert learned.get(name, 0) > 0, (name, learned)


def test_failed_requests_fail_the_run(tmp_path: Path) -> None:
    """The zero-failure check can fail: batches over the service's limit are rejected."""
    import os

    env = {"LEARNSERVE_MAX_BATCH_EXAMPLES": "10"}  # the 8-example seed fits, 32 do not
    with running_service(tmp_path / "data", env=env) as url:
        prefix = tmp_path / "denied"
        cmd = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
            "--host", url, "-u", "1", "-r", "1", "-t", "3s", "--only-summary",
            "--csv", str(prefix), "--loglevel", "ERROR", "UpdateHeavyUser",
        ]  # fmt: skip
        run = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=60,
            env=os.environ.copy(),
        )
    assert run.returncode != 0
    total = read_stats(prefix)["Aggregated"]
    assert int(total["Failure Count"]) > 0
