"""The byte-level pieces of the numba JSON scanners (:mod:`service.models.fast_json`,
:mod:`service.models.fast_json_maps`): the jit decorators both use, reading a byte,
whitespace, an escape-free string, an object member's key and the step past a member or
an array element. The small helpers are inlined into the kernels at numba IR level
(``_inline``); the large ones a kernel calls only now and then are compiled once and
called (``_kernel``): inlining them made one function so large that numba took minutes
and gigabytes to compile it (issue 30).

numba's on-disk cache of a kernel follows every module it inlines
(``learners._kernel_cache``): a change here recompiles the kernels that use it.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from learners._numba_calls import called

# Kernels allocate nothing, so they run without numba's reference counting (NRT):
# with it, every call of a helper increfs and decrefs the buffers (atomic
# operations, a good part of the time per number). The hot helpers are inlined into
# the kernel at numba IR level. ``_nrt`` is a private numba option (present from
# 0.59 to at least 0.68): where a numba lacks it, the kernels run with NRT, slower.
try:
    from numba.core.options import DefaultOptions

    _NO_NRT: dict[str, Any] = {"_nrt": False} if hasattr(DefaultOptions, "_nrt") else {}
except ImportError:  # pragma: no cover - a numba without the options module
    _NO_NRT = {}
_inline: Any = numba.njit(cache=True, nogil=True, inline="always", **_NO_NRT)


# A kernel, or a helper compiled once and called (learners._numba_calls.called: not
# inlined at numba IR level, each call typed for plain argument types).
_kernel: Any = called(nogil=True, **_NO_NRT)


# the kernels read a bytes object (the service) or a uint8 array (tests)
_Buf = np.ndarray | bytes

# key codes
_K_OTHER = 0
_K_MODEL = 1
_K_EXAMPLES = 2
_K_X = 3
_K_Y = 4
_K_WEIGHT = 6  # an example's optional importance weight (service.models.example_weights)


@_inline
def _at(buf: _Buf, i: int) -> int:
    """``buf[i]`` for ``0 <= i < len(buf)``: an unsigned index spares the test for
    a negative index (wraparound) that numba adds to every signed one."""
    return buf[np.uint64(i)]


@_inline
def _ws(buf: _Buf, i: int, n: int) -> int:
    while i < n:
        c = _at(buf, i)
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
        else:
            break
    return i


@_inline
def _string_end(buf: _Buf, i: int, n: int) -> int:
    """``_at(buf, i)`` is just after an opening quote: the index of the closing quote,
    or -1 (end of input, a backslash escape or a control character)."""
    while i < n:
        c = _at(buf, i)
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        i += 1
    return -1


@_inline
def _key(buf: _Buf, s: int, e: int) -> int:
    ln = e - s
    if ln == 1:
        if _at(buf, s) == 120:  # x
            return _K_X
        if _at(buf, s) == 121:  # y
            return _K_Y
        return _K_OTHER
    if (  # weight
        ln == 6
        and _at(buf, s) == 119
        and _at(buf, s + 1) == 101
        and _at(buf, s + 2) == 105
        and _at(buf, s + 3) == 103
        and _at(buf, s + 4) == 104
        and _at(buf, s + 5) == 116
    ):
        return _K_WEIGHT
    if ln == 5:  # model
        if (
            _at(buf, s) == 109
            and _at(buf, s + 1) == 111
            and _at(buf, s + 2) == 100
            and _at(buf, s + 3) == 101
            and _at(buf, s + 4) == 108
        ):
            return _K_MODEL
        return _K_OTHER
    if (  # examples
        ln == 8
        and _at(buf, s) == 101
        and _at(buf, s + 1) == 120
        and _at(buf, s + 2) == 97
        and _at(buf, s + 3) == 109
        and _at(buf, s + 4) == 112
        and _at(buf, s + 5) == 108
        and _at(buf, s + 6) == 101
        and _at(buf, s + 7) == 115
    ):
        return _K_EXAMPLES
    return _K_OTHER


@_inline
def _same_bytes(buf: _Buf, a: int, b: int, ln: int) -> bool:
    for t in range(ln):  # noqa: SIM110 - a loop numba compiles well
        if _at(buf, a + t) != _at(buf, b + t):
            return False
    return True


@_inline
def _member(buf: _Buf, i: int, n: int) -> tuple[int, int]:
    """At an object member (after whitespace): (its key's code, the index of its value,
    past the colon and whitespace), or (0, -1) when malformed or cut short."""
    if i >= n or _at(buf, i) != 34:
        return 0, -1
    ke = _string_end(buf, i + 1, n)
    if ke < 0:
        return 0, -1
    key = _key(buf, i + 1, ke)
    i = _ws(buf, ke + 1, n)
    if i >= n or _at(buf, i) != 58:
        return 0, -1
    i = _ws(buf, i + 1, n)
    if i >= n:
        return 0, -1
    return key, i


@_inline
def _after_member(buf: _Buf, i: int, n: int) -> tuple[int, bool]:
    """After a member's value: (the index past the ``,`` or ``}``, whether it was the
    closing brace), or (-1, False)."""
    i = _ws(buf, i, n)
    if i >= n:
        return -1, False
    c = _at(buf, i)
    if c == 125:  # }
        return i + 1, True
    if c != 44:
        return -1, False
    return i + 1, False


@_inline
def _after_element(buf: _Buf, i: int, n: int) -> tuple[int, bool]:
    """After an array element: (the index of the next element, past the ``,`` and
    whitespace, or past the ``]``; whether it was the closing bracket), or (-1, False)."""
    i = _ws(buf, i, n)
    if i >= n:
        return -1, False
    c = _at(buf, i)
    if c == 93:  # ]
        return i + 1, True
    if c != 44:
        return -1, False
    return _ws(buf, i + 1, n), False
