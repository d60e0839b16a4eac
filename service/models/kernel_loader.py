"""Kernel families brought in when a model first needs them, never on the event loop.

:class:`KernelLoader` is the server's side of :mod:`service.models.kernel_families`:
``request`` starts a family (once); a family whose marker is valid is loaded from
numba's cache in a thread (about a second); any other is compiled first by a child
process, then loaded. Compiles take a core for minutes: one at a time for the families
models wait for, one for the optional scanners, each child at a lower CPU priority than
the server (``nice``), so requests keep their core. ``wait`` awaits families;
``describe`` says in words what is still compiling, for ``/readyz`` and the 503s of the
models that wait for it; the log says when a compile starts, every 15 s while it runs,
and what it cost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from service.models import kernel_families
from service.models.kernel_families import READY, child_command, marker_valid
from service.models.warmup import SCANNERS, family

log = logging.getLogger("learnserve.kernels")
_PROGRESS_EVERY = 15.0  # seconds between two "still compiling" lines in the log


class KernelLoader:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # One compile at a time for the families models wait for, and one for the
        # optional scanners (so a model never queues behind a scanner's compile).
        self._slots: dict[bool, asyncio.Semaphore] = {}
        self.phase: dict[str, str] = {}  # family -> "loading" | "compiling" | "failed: ..."
        self.since: dict[str, float] = {}  # family -> time.monotonic() it was requested
        self.figures: dict[str, dict[str, Any]] = {}  # family -> its child's figures
        self._gating = False  # counted in kernel_families.GATES (until close)

    @staticmethod
    def ready(names: list[str] | tuple[str, ...]) -> bool:
        return all(n in READY for n in names)

    def request(self, names: list[str] | tuple[str, ...]) -> None:
        """Start bringing in each family not ready nor on its way (a failed one anew)."""
        if not self._gating:
            self._gating = True
            kernel_families.GATES += 1
        for name in names:
            task = self._tasks.get(name)
            if name in READY or (task is not None and not task.done()):
                continue
            self.since[name] = time.monotonic()
            self._tasks[name] = asyncio.get_running_loop().create_task(self._bring(name))

    async def wait(
        self,
        names: list[str] | tuple[str, ...],
        timeout: float | None,
        check: list[str] | None = None,
    ) -> bool:
        """Request ``names`` and wait up to ``timeout`` s; whether all are ready. A family
        of ``check`` (default: all of ``names``) that failed raises its ``RuntimeError``."""
        self.request(names)
        tasks = [self._tasks[n] for n in names if n not in READY]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for name in names if check is None else check:
            task = self._tasks.get(name)
            if name not in READY and task is not None and task.done() and task.exception():
                raise RuntimeError(self.phase.get(name, f"kernel family {name} failed"))
        return self.ready(names)

    def describe(self, names: list[str] | tuple[str, ...]) -> str:
        """What of ``names`` is not ready yet, in words ("" when all are)."""
        now = time.monotonic()
        parts = []
        for name in names:
            if name in READY:
                continue
            phase = self.phase.get(name, "waiting to compile")
            parts.append(
                f"{name} ({family(name).what}): {phase}, "
                f"{now - self.since.get(name, now):.0f} s so far"
            )
        if not parts:
            return ""
        return (
            "numba kernels: " + "; ".join(parts) + " (first use of these kernels on this "
            "machine only; `learnserve warmup` compiles them ahead)"
        )

    async def _bring(self, name: str) -> None:
        try:
            if not await asyncio.to_thread(marker_valid, name):
                await self._compile(name)
            self.phase[name] = "loading from the cache"
            t0 = time.perf_counter()
            await asyncio.to_thread(family(name).run)
            READY.add(name)
            self.phase.pop(name, None)
            log.info("kernels %s ready in %.1fs", name, time.perf_counter() - t0)
        except asyncio.CancelledError:
            self.phase.pop(name, None)
            raise
        except Exception as e:
            self.phase[name] = f"failed: {e}"
            level = logging.WARNING if name in SCANNERS else logging.ERROR
            log.log(level, "kernels %s could not be compiled: %s", name, e)
            raise

    async def _compile(self, name: str) -> None:
        slot = self._slots.setdefault(name in SCANNERS, asyncio.Semaphore(1))
        self.phase[name] = "waiting for another family's compile"
        async with slot:
            self.phase[name] = "compiling in a process of its own"
            log.info("kernels %s: compiling (%s) in a child process", name, family(name).what)
            proc = await asyncio.create_subprocess_exec(
                *child_command(name, behind=True),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            t0 = time.monotonic()
            talk = asyncio.ensure_future(proc.communicate())
            try:
                while not (await asyncio.wait({talk}, timeout=_PROGRESS_EVERY))[0]:
                    log.info("kernels %s: compiling, %.0f s so far", name, time.monotonic() - t0)
                out, err = talk.result()
            except asyncio.CancelledError:
                talk.cancel()
                proc.kill()  # shutting down: the compile is not ours to finish
                await proc.wait()
                raise
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"compile exited with {proc.returncode}: {tail[0]}")
        figures: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        self.figures[name] = figures
        log.info(
            "kernels %s: %s in %.1fs (CPU %.1fs, peak %.0f MB)",
            name,
            "compiled" if figures["compiled"] else "loaded from cache",
            figures["seconds"],
            figures["cpu_s"],
            figures["peak_rss_mb"],
        )

    async def close(self) -> None:
        """Cancel what is on its way (a compile's child is killed)."""
        if self._gating:
            self._gating = False
            kernel_families.GATES -= 1
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
