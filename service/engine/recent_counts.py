"""``RecentCounts``: a count (e.g. examples predicted right) for each of the last
``size`` log positions of a model, in two fixed arrays.

A ring indexed by ``position % size``: a position is answered while no later one
has taken its slot (the last ``size`` positions), and memory is fixed from the start:
16 bytes a slot, 64 KB a model for 4096 slots, where a dict of Python ints took about
475 KB once full, which every model reached only after 4096 entries (a worker's memory
then rose for tens of minutes under steady load before settling: issue 20, defect 10).

>>> rc = RecentCounts(4)
>>> rc.put(7, 3); rc.put(8, 0)
>>> rc.get(7), rc.get(8), rc.get(9)
(3, 0, None)
>>> rc.put(11, 5)  # takes position 7's slot
>>> rc.get(7), rc.get(11)
(None, 5)
"""

from __future__ import annotations

import numpy as np


class RecentCounts:
    __slots__ = ("_counts", "_positions", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self._positions = np.full(size, -1, dtype=np.int64)
        self._counts = np.zeros(size, dtype=np.int64)

    def put(self, position: int, count: int) -> None:
        slot = position % self.size
        self._positions[slot] = position
        self._counts[slot] = count

    def get(self, position: int) -> int | None:
        """The count put for ``position``, None when none was or a later one took it."""
        if position < 0:
            return None
        slot = position % self.size
        if int(self._positions[slot]) != position:
            return None
        return int(self._counts[slot])

    @property
    def nbytes(self) -> int:
        return int(self._positions.nbytes + self._counts.nbytes)
