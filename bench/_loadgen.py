"""A small closed-loop HTTP/1.1 load generator (asyncio streams, keep-alive).

``C`` connections each send one request, read the whole answer, and send the
next, for ``duration`` seconds. Much cheaper per request than an HTTP client
library, so the server — not the generator — is what gets measured (it still
shares the machine's cores with the server: compare ratios measured in one run).

>>> build_request("POST", "/predict", b"{}").splitlines()[0]
b'POST /predict HTTP/1.1'
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    # Percentiles given by the generator itself (wrk), when it keeps no latency list.
    fixed_percentiles: dict[float, float] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if q in self.fixed_percentiles:
            return self.fixed_percentiles[q]
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


def build_request(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: bench", f"Content-Length: {len(body)}"]
    if body:
        lines.append("Content-Type: application/json")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length:
        await reader.readexactly(length)
    return status


async def _worker(
    host: str, port: int, requests: Sequence[bytes], offset: int, stop_at: float, res: LoadResult
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    i = offset
    try:
        while time.perf_counter() < stop_at:
            req = requests[i % len(requests)]
            i += 1
            t0 = time.perf_counter()
            writer.write(req)
            status = await _read_response(reader)
            res.latencies.append(time.perf_counter() - t0)
            res.requests += 1
            res.statuses[status] = res.statuses.get(status, 0) + 1
            if status != 200:
                res.errors += 1
    finally:
        writer.close()


async def run_load(
    host: str, port: int, requests: Sequence[bytes], connections: int, duration: float
) -> LoadResult:
    """Cycle through ``requests`` on ``connections`` keep-alive connections."""
    res = LoadResult()
    t0 = time.perf_counter()
    stop_at = t0 + duration
    await asyncio.gather(
        *(_worker(host, port, requests, k * 7919, stop_at, res) for k in range(connections))
    )
    res.seconds = time.perf_counter() - t0
    return res
