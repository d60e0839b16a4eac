"""``learnserve warmup``: compile the numba kernels the service runs, with progress.

The service compiles a kind's kernels itself when the first model of that kind is
created or restored (in a process of its own, off the event loop; the model answers 503
with ``Retry-After`` meanwhile). Running this ahead (an image build, a deploy step, CI)
means no model ever waits. Safe to run any time: a family already in numba's cache for
this code just loads (about a second each). Each family runs in a process of its own;
its CPU time and peak memory are printed with it.
"""

from __future__ import annotations

import os
from typing import Any

import typer

from service.models.warmup import Family


def warmup(
    jobs: int = typer.Option(
        os.cpu_count() or 1,
        help="Families compiled at once, each in its own process (default: the CPU count)",
        min=1,
    ),
    family: list[str] = typer.Option(
        None, "--family", help="Only this family (repeatable); default: every family"
    ),
) -> None:
    """Compile (or load from numba's disk cache) every online kernel family, with progress."""
    from service.models.warmup import families, warm_parallel

    known = [f.name for f in families()]
    unknown = sorted(set(family or ()) - set(known))
    if unknown:
        typer.echo(f"error: --family: unknown {unknown}; families: {known}", err=True)
        raise typer.Exit(2)
    totals = {"cpu_s": 0.0, "peak_rss_mb": 0.0}

    def before(i: int, n: int, fam: Family) -> None:
        typer.echo(f"warmup {i}/{n}: {fam.name}: {fam.what} ...", err=True)

    def after(i: int, n: int, fam: Family, figures: dict[str, Any]) -> None:
        state = "compiled" if figures["compiled"] else "loaded from cache"
        totals["cpu_s"] += figures["cpu_s"]
        totals["peak_rss_mb"] = max(totals["peak_rss_mb"], figures["peak_rss_mb"])
        typer.echo(
            f"warmup {i}/{n}: {fam.name} {state} in {figures['seconds']:.1f}s "
            f"(CPU {figures['cpu_s']:.1f}s, peak {figures['peak_rss_mb']:.0f} MB)",
            err=True,
        )

    typer.echo(f"warmup: {jobs} families at a time, one process each", err=True)
    total = warm_parallel(jobs, before, after, family or None)
    typer.echo(
        f"warmup done in {total:.1f}s (CPU {totals['cpu_s']:.1f}s, largest process "
        f"{totals['peak_rss_mb']:.0f} MB); kernels are cached for `learnserve serve`",
        err=True,
    )
