"""Python function calls per request: a cost figure that machine load cannot disturb.

Wall-clock and even CPU-time figures swing by 2-3x on a shared 2-core machine; the
number of Python function calls (and C calls) the server makes to answer one request
does not. For this tree and each ``--baseline REF`` (exported with ``git archive``,
run in its own process with its own code on ``sys.path``), the app is driven in
process (Starlette's TestClient: the whole ASGI stack, hot path, pipeline, engine,
SQLite store; no sockets), a model created and warmed, then ``--n`` requests of each
scenario are counted with a profile hook that counts only calls made on behalf of a
request (a context variable set around each HTTP call; background tasks started
before, such as the apply loop, are not counted). Calls made in the store's worker
threads are counted too (``asyncio.to_thread`` copies the context).

    .venv/bin/python bench/request_calls.py --baseline b395f0d
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = ("update x1", "update x100", "predict x1")


def _child(n: int) -> dict[str, dict[str, float]]:
    """Runs inside the code's own process (its tree first on sys.path)."""
    import contextvars
    import random
    import threading

    from starlette.testclient import TestClient

    from service.app import create_app
    from service.settings import Settings

    counting: contextvars.ContextVar[bool] = contextvars.ContextVar("counting", default=False)
    counts = {"py": 0, "c": 0}

    def hook(frame: object, event: str, arg: object) -> None:
        if counting.get():
            if event == "call":
                counts["py"] += 1
            elif event == "c_call":
                counts["c"] += 1

    data = tempfile.mkdtemp(prefix="request-calls-")
    app = create_app(Settings(data_dir=data, checkpoint_every_updates=10**9))

    async def counted(scope: dict, receive: object, send: object) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)  # type: ignore[arg-type]
            return
        token = counting.set(True)
        try:
            await app(scope, receive, send)  # type: ignore[arg-type]
        finally:
            counting.reset(token)

    rng = random.Random(7)
    row = lambda: [round(rng.uniform(-1, 1), 4) for _ in range(28)]  # noqa: E731
    many = [{"x": row(), "y": rng.choice([-1, 1])} for _ in range(100)]
    bodies = {
        "update x1": ("/update", {"model": "m", "examples": [{"x": row(), "y": 1}]}),
        "update x100": ("/update", {"model": "m", "examples": many}),
        "predict x1": ("/predict", {"model": "m", "instances": [{"x": row()}]}),
    }
    out: dict[str, dict[str, float]] = {}
    # Hooked before the app's threads start (the event loop's, the thread pool's): the
    # hook counts only while a request's context says so.
    threading.setprofile(hook)
    with TestClient(counted) as c:
        # Restored and warm (a baseline's export compiles its numba kernels cold).
        for _ in range(18000):
            if c.get("/readyz").status_code == 200:
                break
            threading.Event().wait(0.1)
        body = {"algorithm": "arow", "features": {"kind": "dense", "dim": 28}}
        r = c.put("/models/m", json=body)
        assert r.status_code in (200, 201), r.text
        for path, b in bodies.values():  # warm every path once (kernels compiled)
            for _ in range(3):
                assert c.post(path, json=b).status_code == 200, c.post(path, json=b).text
        try:
            for name, (path, b) in bodies.items():
                counts["py"] = counts["c"] = 0
                for _ in range(n):
                    r = c.post(path, json=b)
                    assert r.status_code == 200, r.text
                out[name] = {"python_calls": counts["py"] / n, "c_calls": counts["c"] / n}
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", action="append", default=[], help="git ref (repeatable)")
    ap.add_argument("--n", type=int, default=200, help="requests counted per scenario")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "request_calls.json"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.n)))
        return
    # The code under test comes from PYTHONPATH in the child: only the parent puts
    # this checkout on sys.path (for the export helpers).
    sys.path.insert(0, str(REPO))
    from bench._baseline import baseline_codes, remove_exports

    codes = baseline_codes(args.baseline)
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for label, code in codes.items():
            env = {**os.environ, "PYTHONPATH": str(code), "LEARNSERVE_LOG_LEVEL": "WARNING"}
            # This script (not the export's copy, which may not exist), run with -P so
            # that only PYTHONPATH (the code under test) is on sys.path.
            me = str(Path(__file__).resolve())
            r = subprocess.run(
                [sys.executable, "-P", me, "--child", "--n", str(args.n)],
                env=env, cwd=code, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if r.returncode != 0:
                raise SystemExit(f"{label}: {r.stderr[-3000:]}")
            results[label] = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        remove_exports(codes)
    cur = results["current"]
    head = f"{'code':22s} {'scenario':12s} {'py calls/req':>13s} {'C calls/req':>12s}"
    print(head + f" {'py vs current':>14s}")
    for label, res in results.items():
        for s in SCENARIOS:
            ratio = res[s]["python_calls"] / cur[s]["python_calls"]
            py, cc = res[s]["python_calls"], res[s]["c_calls"]
            print(f"{label:22s} {s:12s} {py:13.0f} {cc:12.0f} {ratio:13.2f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"n": args.n, "results": results}, indent=2))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
