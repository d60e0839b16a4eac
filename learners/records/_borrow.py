"""A numba intrinsic for the records kernels' hot loops: :func:`borrowed`, a view of an
array that holds no reference to its memory.

Why: numba counts references to an array's memory with atomic operations (a ``lock``
instruction each). It copies an inlined helper's array arguments, and in a function as
large as the row kernel its pruning pass leaves most of those copies' counts in place:
about 20 increments and 20 decrements per text, a tenth of a text's cost. A borrowed view
has no meminfo (as an array made from a raw pointer), so counting it is a null test.

The caller keeps the array itself alive for as long as it uses the view: the kernels
borrow their own arguments, which their caller holds until they return, and never return
or store a borrowed view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _borrowed(typingctx: Any, arr: Any) -> Any:  # pragma: no cover - compiled
    """``arr``'s data, shape and strides, without its meminfo (see the module)."""
    if not isinstance(arr, types.Array):
        return None
    sig = arr(arr)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        src = context.make_array(arr)(context, builder, value=args[0])
        out = context.make_array(arr)(context, builder)
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        out.nitems = src.nitems
        out.itemsize = src.itemsize
        out.data = src.data
        out.shape = src.shape
        out.strides = src.strides
        return out._getvalue()

    return sig, codegen


# (typed for the callers: numba calls the intrinsic with the array alone)
borrowed = cast("Callable[[np.ndarray], np.ndarray]", _borrowed)
