"""numba helpers compiled once and called, not inlined: the cure for kernels whose
compile took minutes and gigabytes (issue 30).

Every ``inline="always"`` copy of a helper re-types its body inside its caller's, so a
kernel that inlines large helpers pays for each copy; a plain ``@numba.njit`` helper is
compiled once and called (LLVM still inlines what it finds worth it). Called from another
kernel, numba types the call with the arguments' literal types when it can (a constant
``0`` or ``False``, a counter's first value) and compiles a second copy of the helper for
each literal, never called from Python: :func:`called` types every call with the plain
types instead. Used by the records encoder (``learners.records``) and the service's JSON
scanners (``service.models.json_scan_bytes``). (No doctest: numba cannot cache a
function a doctest defines; the kernels that use it are tested with their modules.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
from numba.core import types

__all__ = ["called"]


def called(func: Any = None, /, **options: Any) -> Any:
    """``@numba.njit(cache=True, **options)`` whose calls from other kernels compile for
    plain (non-literal) argument types; ``@called`` or ``@called(nogil=True)``."""
    if func is None:
        decorate: Callable[[Any], Any] = lambda f: called(f, **options)  # noqa: E731
        return decorate
    disp: Any = numba.njit(cache=True, **options)(func)
    template = disp.get_call_template

    def get_call_template(args: Any, kws: Any) -> Any:
        return template(
            tuple(types.unliteral(a) for a in args),
            {k: types.unliteral(v) for k, v in kws.items()},
        )

    disp.get_call_template = get_call_template
    return disp
