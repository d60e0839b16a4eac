"""First start on a fresh clone (issue 14): ``make serve`` until the README's first
``PUT /models/adult`` and ``POST /update`` both succeed.

Prints every line of ``make serve`` with its time, then when the install ended (the
``learnserve warmup`` line), when the warmup was done and when the first update was
answered, and the time beyond the install (the issue's target: <= 60 s)::

    git clone . /tmp/fresh && python3 bench/first_start.py /tmp/fresh
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def main() -> None:
    repo = sys.argv[1]
    port = 18000 + os.getpid() % 1000
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    proc = subprocess.Popen(
        ["make", "serve", f"PORT={port}"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.monotonic() - t0
            if "learnserve warmup" in line and "install" not in marks:
                marks["install"] = t
            if "warmup done" in line:
                marks["warmup"] = t
            sys.stdout.write(f"[{t:7.1f}] {line}")

    threading.Thread(target=reader, daemon=True).start()

    def call(method: str, path: str, body: dict[str, object]) -> int | None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except OSError:
            return None

    model = {"algorithm": "arow", "params": {"r": 1.0}, "features": {"kind": "hashed", "bits": 20}}
    update = {
        "model": "adult",
        "examples": [
            {"x": {"age": 39, "job": "clerk"}, "y": "+1"},
            {"x": {"age": 50, "job": "exec"}, "y": "-1"},
        ],
    }
    try:
        while time.monotonic() - t0 < 900:
            if (
                call("PUT", "/models/adult", model) in (200, 201)
                and call("POST", "/update", update) == 200
            ):
                marks["first_update"] = time.monotonic() - t0
                break
            time.sleep(0.2)
    finally:
        proc.terminate()
    beyond = marks.get("first_update", float("nan")) - marks.get("install", float("nan"))
    print(f"marks (s since `make serve`): {marks}; first update {beyond:.1f} s beyond the install")


if __name__ == "__main__":
    main()
