"""``/healthz`` latency while ``/metrics`` and ``GET /models`` are scraped, with many models.

One ``learnserve serve`` (``--workers``, default 1; SQLite store in a temp dir) with
``--models`` (2,000) small AROW models, each with one ``/update``, one ``/predict`` and
one ``GET /models/{name}`` so that every per-model series exists. Then a probe sends
``GET /healthz`` back to back on one keep-alive connection:

- ``idle``: for ``--seconds`` with nothing else going on;
- ``metrics``: while another connection scrapes ``GET /metrics`` back to back, ``--seconds``;
- ``models``: the same with ``GET /models``.

p50/p99/max of the probe, how many scrapes ran and their size and mean duration go to
``bench/results/metrics_scrape[-<label>].json``. Run it once on the old code and once on
the new to compare (the server imports ``service`` from ``PYTHONPATH``)::

    PYTHONPATH=/path/to/old/checkout .venv/bin/python bench/metrics_scrape.py --label before
    PYTHONPATH=$PWD .venv/bin/python bench/metrics_scrape.py --label after
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's ``http``: put the repo root there instead (as bench/http.py does).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from bench._common import print_table, write_results  # noqa: E402
from bench._loadgen import _read_response, build_request  # noqa: E402
from tests.service.procs import free_port, stop_process  # noqa: E402
from tests.service.serving import dense_model, start_learnserve  # noqa: E402

HOST = "127.0.0.1"


async def populate(url: str, n: int, concurrency: int = 8) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            name = f"model-{i}"
            async with sem:
                r = await c.put(f"/models/{name}", json=dense_model(4))
                r.raise_for_status()
                ex = {"x": [1.0, 0.5, -0.5, 0.25], "y": "+1"}
                (await c.post("/update", json={"model": name, "examples": [ex]})).raise_for_status()
                body = {"model": name, "instances": [{"x": ex["x"]}]}
                (await c.post("/predict", json=body)).raise_for_status()
                (await c.get(f"/models/{name}")).raise_for_status()

        await asyncio.gather(*(one(i) for i in range(n)))


async def probe(port: int, seconds: float, scrape_path: str | None) -> dict[str, Any]:
    """Back-to-back ``GET /healthz`` for ``seconds`` while ``scrape_path`` is fetched
    back to back on another connection (none: idle)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    req = build_request("GET", "/healthz")
    stop = asyncio.Event()
    scrapes: list[tuple[float, int]] = []

    async def scraper() -> None:
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=120) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                r = await c.get(scrape_path)  # type: ignore[arg-type]
                r.raise_for_status()
                scrapes.append((time.perf_counter() - t0, len(r.content)))

    task = asyncio.create_task(scraper()) if scrape_path else None
    await asyncio.sleep(0.2 if task else 0)  # the first scrape is under way
    lat: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        writer.write(req)
        await _read_response(reader)
        lat.append(time.perf_counter() - t0)
    stop.set()
    writer.close()
    if task:
        await task
    lat.sort()
    return {
        "probes": len(lat),
        "p50_ms": lat[len(lat) // 2] * 1e3,
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3,
        "max_ms": lat[-1] * 1e3,
        "scrapes": len(scrapes),
        "scrape_mean_ms": sum(s for s, _ in scrapes) / len(scrapes) * 1e3 if scrapes else None,
        "scrape_bytes": scrapes[-1][1] if scrapes else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="per scenario")
    ap.add_argument("--label", default="", help="suffix of the result file, e.g. before/after")
    args = ap.parse_args()

    port = free_port()
    url = f"http://{HOST}:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as data:
        env = {"LEARNSERVE_DATA_DIR": data, "LEARNSERVE_LOG_LEVEL": "warning"}
        proc = start_learnserve(port, env, workers=args.workers)
        try:
            t0 = time.perf_counter()
            asyncio.run(populate(url, args.models))
            populate_s = time.perf_counter() - t0
            results = {
                name: asyncio.run(probe(port, args.seconds, path))
                for name, path in (("idle", None), ("metrics", "/metrics"), ("models", "/models"))
            }
        finally:
            stop_process(proc)

    print_table(
        f"GET /healthz while scraping, {args.models} models, {args.workers} worker(s)",
        ["scenario", "probes", "p50 ms", "p99 ms", "max ms", "scrapes", "scrape ms", "bytes"],
        [
            [
                name,
                str(r["probes"]),
                f"{r['p50_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                f"{r['max_ms']:.1f}",
                str(r["scrapes"]),
                "-" if r["scrape_mean_ms"] is None else f"{r['scrape_mean_ms']:.0f}",
                "-" if r["scrape_bytes"] is None else f"{r['scrape_bytes']:,}",
            ]
            for name, r in results.items()
        ],
    )
    name = "metrics_scrape" + (f"-{args.label}" if args.label else "")
    path = write_results(
        name,
        {
            "models": args.models,
            "workers": args.workers,
            "seconds": args.seconds,
            "populate_seconds": populate_s,
            "scenarios": results,
        },
        extra_packages=("prometheus-client", "fastapi", "uvicorn"),
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
