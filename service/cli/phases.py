"""What a command is doing while it shows nothing else: one line per phase on stderr
(``evaluate: loading model ranker.lsart...``), where the progress bars go too. The
phases that take seconds are reading files, loading models and the first use of the
numba kernels (compiled once, then loaded from numba's disk cache)."""

from __future__ import annotations

from pathlib import Path

import typer


def say(command: str, text: str) -> None:
    typer.echo(f"{command}: {text}", err=True)


def phase(command: str, text: str) -> None:
    """A phase that starts now (the line ends in ``...``)."""
    say(command, f"{text}...")


def size_of(path: Path) -> str:
    """``1.1 MB``: a file's size, for a "reading FILE (size)" phase."""
    try:
        n = path.stat().st_size
    except OSError:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def reading(command: str, path: Path) -> None:
    phase(command, f"reading {path.name} ({size_of(path)})")


KERNELS = "compiling kernels (first run only; later runs load them from cache)"
COMPILE_NOTE = "a first run also compiles the kernels"
