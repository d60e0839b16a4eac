"""Concept-drift detectors: feed them a model's per-example errors (0/1) or losses, in
the order the model saw the examples, and they signal when the stream's mean changed.

- :class:`ADWIN`: adaptive windowing (Bifet & Gavaldà 2007);
- :class:`PageHinkley`: the Page-Hinkley cumulative-sum test.

Both signal at exactly the updates River's ``drift.ADWIN`` / ``drift.PageHinkley``
do with the same parameters, run a batch in one compiled loop (``update_many``) and
save their state as JSON-ready data (``to_state`` / ``from_state``) that restores bit
for bit. Pure numpy/numba: nothing here imports the service or River.
"""

from __future__ import annotations

from learners.drift.adwin import ADWIN
from learners.drift.page_hinkley import PageHinkley

__all__ = ["ADWIN", "PageHinkley"]
