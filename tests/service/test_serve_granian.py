"""``learnserve serve --server granian``: the same service as under uvicorn.

Both servers started by the CLI, each on a store of its own, get the same requests:
their answers are equal byte for byte (learning, scoring, a refusal, a body over the
limit, an unknown route), and each stops cleanly on SIGTERM. bench/servers.py measures
the two (and checks deadlines and a graceful shutdown with a body half sent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.service.procs import free_port, stop_process
from tests.service.serving import dense_model, start_learnserve

pytest.importorskip("granian")


def _sequence(base: str) -> list[tuple[int, bytes]]:
    rng = np.random.default_rng(3)
    out = []
    with httpx.Client(base_url=base, timeout=120) as c:
        for _ in range(300):  # kernels compile in the background: 503 until ready
            r = c.put("/models/m", json=dense_model(dim=5))
            if r.status_code != 503:
                break
            c.get("/healthz")
        out.append((r.status_code, _without_worker(r.content)))
        for n in (1, 7, 100):
            X = rng.normal(size=(n, 5))
            y = np.where(X[:, 0] > 0, "pos", "neg").tolist()
            examples = [{"x": x, "y": t} for x, t in zip(X.tolist(), y, strict=True)]
            r = c.post("/update", json={"model": "m", "examples": examples})
            out.append((r.status_code, r.content))
            r = c.post("/models/m/predict", json={"instances": [{"x": x} for x in X.tolist()]})
            out.append((r.status_code, r.content))
        bad = c.post("/update", json={"model": "m", "examples": [{"x": [1.0], "y": "pos"}]})
        out.append((bad.status_code, bad.content))
        with httpx.Client(base_url=base, timeout=120) as once:  # the server closes it after
            big = once.post("/update", content=b"[" + b" " * (1 << 16) + b"]",
                            headers={"content-type": "application/json"})  # fmt: skip
        out.append((big.status_code, big.content))
        out.append((c.get("/nowhere").status_code, b""))
        state = c.get("/models/m").json()
        out.append((200, state["state_digest"].encode()))
    return out


def _without_worker(body: bytes) -> bytes:
    """The answer without ``worker`` (the answering process's pid)."""
    doc = json.loads(body)
    doc.pop("worker", None)
    return json.dumps(doc, sort_keys=True).encode()


def _serve(server: str, tmp: Path) -> tuple[Any, int]:
    port = free_port()
    env = {"LEARNSERVE_DATA_DIR": str(tmp / server), "LEARNSERVE_MAX_BODY_BYTES": "4096"}
    return start_learnserve(port, env, extra=["--server", server]), port


def test_granian_answers_as_uvicorn_does_and_stops_on_sigterm(tmp_path: Path) -> None:
    runs = {}
    for server in ("uvicorn", "granian"):
        proc, port = _serve(server, tmp_path)
        try:
            base = f"http://127.0.0.1:{port}"
            assert httpx.get(f"{base}/healthz").headers["server"] == server  # what answers
            runs[server] = _sequence(base)
        finally:
            code = stop_process(proc, timeout=20)
        log = Path(proc.log_path).read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
        assert code is not None and code in (0, -15), (server, code, log[-2000:])
    statuses = [s for s, _ in runs["granian"]]
    assert statuses[0] == 201 and statuses[-4:-1] == [422, 413, 404], statuses
    assert runs["granian"] == runs["uvicorn"]


def test_the_server_setting_refuses_an_unknown_server(tmp_path: Path) -> None:
    from service.settings import Settings

    with pytest.raises(ValueError, match="server"):
        Settings(server="gunicorn")  # type: ignore[arg-type]
    assert Settings().server == "uvicorn"
