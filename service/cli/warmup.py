"""``learnserve warmup``: compile the numba kernels the service runs, with progress.

``make serve`` and the Docker image run it before serving, so the service is ready
seconds after it starts instead of answering 503 while it compiles. Safe to run any
time: with a warm cache every family just loads (well under a second each).
"""

from __future__ import annotations

import os

import typer

from service.models.warmup import Family


def warmup(
    jobs: int = typer.Option(
        os.cpu_count() or 1,
        help="Families compiled at once, each in its own process (default: the CPU count; "
        "1: one after the other, in this process)",
        min=1,
    ),
) -> None:
    """Compile (or load from numba's disk cache) every online kernel family, with progress."""
    from service.models.warmup import warm_all, warm_parallel

    def before(i: int, n: int, fam: Family) -> None:
        typer.echo(f"warmup {i}/{n}: {fam.name}: {fam.what} ...", err=True)

    def after(i: int, n: int, fam: Family, seconds: float) -> None:
        state = "loaded from cache" if seconds < 2 else "compiled"
        typer.echo(f"warmup {i}/{n}: {fam.name} {state} in {seconds:.1f}s", err=True)

    if jobs > 1:
        typer.echo(f"warmup: {jobs} families at a time, one process each", err=True)
        total = warm_parallel(jobs, before, after)
    else:
        total = warm_all(before, after)
    typer.echo(f"warmup done in {total:.1f}s; kernels are cached for `learnserve serve`", err=True)
