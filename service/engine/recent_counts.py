"""``RecentCounts``: a count (e.g. examples predicted right) for each of the last
``size`` log positions of a model, in two arrays.

A ring indexed by ``position % capacity``: a position is answered while no later one
has taken its slot (the last ``size`` positions once the ring is full). The ring
starts small and doubles as entries come, up to ``size`` slots: 12 bytes a slot,
48 KB a model at 4096, where a dict of Python ints took about 475 KB once full — which
every busy model reached only after 4096 entries, so a worker's memory rose for tens
of minutes under steady load before settling (issue 20, defect 10). A model that
learns little holds little.

>>> rc = RecentCounts(4)
>>> rc.put(7, 3); rc.put(8, 0)
>>> rc.get(7), rc.get(8), rc.get(9)
(3, 0, None)
>>> for p in range(9, 12): rc.put(p, 1)
>>> rc.get(7), rc.get(8), rc.get(11)  # the last 4 positions are kept
(None, 0, 1)
"""

from __future__ import annotations

import numpy as np

_FIRST = 16  # slots to start with


class RecentCounts:
    __slots__ = ("_counts", "_positions", "_puts", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self._puts = 0
        self._positions, self._counts = self._arrays(min(size, _FIRST))

    @staticmethod
    def _arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int32)

    def put(self, position: int, count: int) -> None:
        cap = len(self._positions)
        self._puts += 1
        if self._puts > cap < self.size:  # full: double, the positions kept in place
            old_p, old_c = self._positions, self._counts
            self._positions, self._counts = self._arrays(min(2 * cap, self.size))
            live = old_p >= 0
            slots = old_p[live] % len(self._positions)
            self._positions[slots] = old_p[live]
            self._counts[slots] = old_c[live]
            cap = len(self._positions)
        slot = position % cap
        self._positions[slot] = position
        self._counts[slot] = count

    def get(self, position: int) -> int | None:
        """The count put for ``position``, None when none was or a later one took it."""
        if position < 0:
            return None
        slot = position % len(self._positions)
        if int(self._positions[slot]) != position:
            return None
        return int(self._counts[slot])

    @property
    def nbytes(self) -> int:
        return int(self._positions.nbytes + self._counts.nbytes)
