"""Load from ``wrk`` (the Debian package) for ``bench/http.py --load wrk`` and
``bench/update_path.py``: a C load generator on a core of its own, so the server's
core does nothing else.

- :func:`wrk_load` runs ``wrk`` once over a list of raw HTTP/1.1 requests (as built by
  :func:`bench._loadgen.build_request`): their bodies are written to a file that a
  generated Lua script reads at start-up (``wrk.format`` per body; the requests are
  cycled, each connection from its own offset), and the Lua ``done`` hook prints the
  summary as one JSON line. Returns a :class:`bench._loadgen.LoadResult` (the
  percentiles are wrk's own, not a list of latencies).
- :func:`pin` sets the CPU affinity of every thread of a process (``taskset -a -p``
  without the subprocess); :func:`two_cores` picks the load generator's core and the
  servers' core.

``wrk`` counts responses with a status >= 400 as ``errors.status``; socket errors and
timeouts apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench._baseline import child_pids
from bench._loadgen import LoadResult

_LUA = r"""
local bodies_path = %(bodies)s
local method = %(method)s
local path = %(path)s
local reqs = {}
local i = 0
local counter = 0

setup = function(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end

init = function(args)
  local f = assert(io.open(bodies_path, "rb"))
  local data = f:read("*a")
  f:close()
  local headers = {["Content-Type"] = "application/json", ["Host"] = "bench"}
  for line in data:gmatch("[^\n]+") do
    -- " " stands for an empty body (a GET): no body, no Content-Length
    reqs[#reqs + 1] = wrk.format(method, path, headers, line ~= " " and line or nil)
  end
  i = (offset or 0) %% #reqs
end

request = function()
  i = i + 1
  if i > #reqs then i = 1 end
  return reqs[i]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %%d, "duration_us": %%d, "connect": %%d, "read": %%d, '
    .. '"write": %%d, "status": %%d, "timeout": %%d, "p50_us": %%d, "p99_us": %%d, '
    .. '"mean_us": %%.1f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.mean))
end
"""


def find_wrk() -> str | None:
    return shutil.which("wrk")


def _lua_string(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid Lua string literal for these (ASCII)


def _split(request: bytes) -> tuple[str, str, bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    method, path, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
    return method, path, body


def wrk_load(
    host: str,
    port: int,
    requests: Sequence[bytes],
    connections: int,
    duration: float,
    cpu: int | None = None,
    threads: int = 1,
    timeout: float = 30.0,
) -> LoadResult:
    """``wrk -t threads -c connections -d duration`` cycling ``requests`` (one method and
    path for all; bodies without newlines), pinned to ``cpu`` if given."""
    wrk = find_wrk()
    if wrk is None:
        raise RuntimeError("wrk not found: apt-get install -y wrk")
    splits = [_split(r) for r in requests]
    methods = {(m, p) for m, p, _ in splits}
    if len(methods) != 1:
        raise ValueError(f"wrk_load: one method and path per run, got {sorted(methods)}")
    method, path = methods.pop()
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as d:
        bodies = Path(d) / "bodies"
        if any(b"\n" in b for _, _, b in splits):
            raise ValueError("wrk_load: bodies must not contain newlines")
        bodies.write_bytes(b"\n".join(b or b" " for _, _, b in splits) + b"\n")
        script = Path(d) / "bodies.lua"
        script.write_text(
            _LUA % {"bodies": _lua_string(str(bodies)), "method": _lua_string(method),
                    "path": _lua_string(path)}
        )  # fmt: skip
        secs = max(1, round(duration))
        url = f"http://{host}:{port}{path}"
        cmd = [wrk, "-t", str(threads), "-c", str(connections), "-d", f"{secs}s",
               "--timeout", f"{timeout:g}s", "-s", str(script), url]  # fmt: skip
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + timeout + 30)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-2000:]}"
        )
    s = json.loads(line[len("WRKJSON ") :])
    errors = s["connect"] + s["read"] + s["write"] + s["status"] + s["timeout"]
    res = LoadResult(
        requests=int(s["requests"]),
        errors=int(errors),
        statuses={200: int(s["requests"]) - int(s["status"])} if s["requests"] else {},
        seconds=s["duration_us"] / 1e6,
        fixed_percentiles={0.5: s["p50_us"] / 1e6, 0.99: s["p99_us"] / 1e6},
    )
    if s["status"]:
        res.statuses[0] = int(s["status"])  # wrk does not say which: ">= 400"
    return res


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` and of its child processes (uvicorn's workers), and the
    threads they start later, on ``cpus``."""
    for p in [pid, *child_pids(pid)]:
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), cpus)


def two_cores() -> tuple[int, int]:
    """(the load generator's core, the servers' core): the first two usable CPUs."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        raise SystemExit(f"--load wrk pins wrk and the servers to two cores; usable: {usable}")
    return usable[0], usable[1]
