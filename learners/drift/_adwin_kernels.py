"""Numba kernels of :class:`learners.drift.adwin.ADWIN` (the exponential histogram).

The window is an exponential histogram of buckets: row ``level`` of ``sums`` /
``sqdevs`` holds up to ``max_buckets + 1`` buckets of ``2**level`` values each,
oldest first (column 0); ``fill[level]`` is how many it holds. Each bucket keeps the
sum of its values and the sum of their squared deviations from its own mean. Level 0
holds the newest values; the last level (``n_levels - 1``) the oldest.

Every float operation below is written in the order River's ``AdaptiveWindowing``
(``rust_src/adwin.rs``, River 0.26) performs it, because River is the reference and
its cut test compares two floats that can differ in the last bit when a sum is
associated differently. numba compiles without fast-math, so LLVM neither reorders
nor fuses these (no FMA contraction), exactly as rustc does.

State lives in small arrays so one kernel call can run a whole batch:

- ``window`` float64[3]: ``TOTAL`` (sum of the window), ``SQDEV`` (sum of squared
  deviations from the window mean, River's ``variance``), ``WIDTH`` (count, a float);
- ``counters`` int64[4]: ``N_LEVELS``, ``TICK`` (updates since the last reset),
  ``N_DETECTIONS`` (since construction), ``PENDING_RESET`` (1 when the previous update
  detected a drift: River's ``ADWIN`` starts a fresh window at the next update).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

TOTAL, SQDEV, WIDTH = 0, 1, 2
N_LEVELS, TICK, N_DETECTIONS, PENDING_RESET = 0, 1, 2, 3

# Level L holds buckets of 2**L values, so 64 levels outlast any float64 width.
MAX_LEVELS = 64

# River keeps its tick in an i32 that a release build lets wrap: the same here, so
# ``tick % clock`` agrees even past 2**31 updates without a drift.
_I32_MAX = 2**31 - 1
_I32_SPAN = 2**32


@njit(cache=True)
def _clear(sums, sqdevs, fill, window, counters):  # pragma: no cover - numba
    """An empty window: one empty level, zero statistics, tick 0 (River's reset)."""
    sums[:, :] = 0.0
    sqdevs[:, :] = 0.0
    fill[:] = 0
    window[:] = 0.0
    counters[N_LEVELS] = 1
    counters[TICK] = 0
    counters[PENDING_RESET] = 0


@njit(cache=True)
def _drop_oldest_buckets(sums, sqdevs, fill, level, count):  # pragma: no cover - numba
    """Remove the ``count`` oldest buckets of a level, shifting the rest to column 0."""
    kept = fill[level] - count
    for j in range(kept):
        sums[level, j] = sums[level, j + count]
        sqdevs[level, j] = sqdevs[level, j + count]
    for j in range(kept, fill[level]):
        sums[level, j] = 0.0
        sqdevs[level, j] = 0.0
    fill[level] = kept


@njit(cache=True)
def _append(sums, sqdevs, fill, window, counters, x, max_buckets):  # pragma: no cover - numba
    """Add one value as a level-0 bucket, then merge full levels upwards."""
    sums[0, fill[0]] = x
    sqdevs[0, fill[0]] = 0.0
    fill[0] += 1

    # Streaming update of the window's squared deviations (Welford's increment
    # against the mean before x), with River's operand order.
    width = window[WIDTH] + 1.0
    window[WIDTH] = width
    increment = 0.0
    if width > 1.0:
        dev = x - window[TOTAL] / (width - 1.0)
        increment = (width - 1.0) * dev * dev / width
    window[SQDEV] += increment
    window[TOTAL] += x

    # A level holding max_buckets + 1 buckets merges its two oldest into one bucket
    # of the next level, which may overflow in turn.
    level = 0
    while fill[level] == max_buckets + 1:
        size = float(1 << level)
        older, newer = sums[level, 0], sums[level, 1]
        gap = older / size - newer / size
        merged_sqdev = sqdevs[level, 0] + sqdevs[level, 1] + size * 0.5 * gap * gap
        up = level + 1
        if up == counters[N_LEVELS]:
            if up == MAX_LEVELS:
                raise OverflowError("ADWIN window exceeds 2**64 values")
            counters[N_LEVELS] = up + 1
        sums[up, fill[up]] = older + newer
        sqdevs[up, fill[up]] = merged_sqdev
        fill[up] += 1
        _drop_oldest_buckets(sums, sqdevs, fill, level, 2)
        if fill[up] <= max_buckets:
            break
        level = up


@njit(cache=True)
def _forget_oldest(sums, sqdevs, fill, window, counters):  # pragma: no cover - numba
    """Drop the oldest bucket from the window (after a cut) and from its statistics."""
    last = counters[N_LEVELS] - 1
    size = float(1 << last)
    bucket_sum = sums[last, 0]
    bucket_sqdev = sqdevs[last, 0]
    bucket_mean = bucket_sum / size

    window[WIDTH] -= size
    window[TOTAL] -= bucket_sum
    width = window[WIDTH]
    gap = bucket_mean - window[TOTAL] / width
    window[SQDEV] -= bucket_sqdev + size * width * gap * gap / (size + width)

    _drop_oldest_buckets(sums, sqdevs, fill, last, 1)
    if fill[last] == 0:
        counters[N_LEVELS] = last


@njit(cache=True)
def _shrink_at_one_cut(  # pragma: no cover - numba
    sums, sqdevs, fill, window, counters, delta, min_window_length
):
    """Walk the cuts from oldest to newest; at the first where the two sub-window means
    differ by more than the Hoeffding-style bound, forget the oldest bucket.

    Returns whether a cut was found (then the caller walks again on the shorter window).
    """
    width = window[WIDTH]
    sqdev_per_value = window[SQDEV] / width
    # River recomputes these at every candidate cut; the window does not change
    # during a walk, so computing them once gives the same bits.
    log_term = math.log(2.0 * math.log(width) / delta)
    bound_term = 2.0 / 3.0 * log_term

    n_old, n_new = 0.0, width
    sum_old, sum_new = 0.0, window[TOTAL]
    for level in range(counters[N_LEVELS] - 1, -1, -1):
        size = float(1 << level)
        count = fill[level]
        for k in range(count):
            n_old += size
            n_new -= size
            s = sums[level, k]
            sum_old += s
            sum_new -= s
            if level == 0 and k == count - 1:
                return False  # the newest bucket: no sub-window W1 is left
            if n_new < min_window_length or n_old < min_window_length:
                continue
            mean_gap = sum_old / n_old - sum_new / n_new
            harmonic = 1.0 / (n_old - min_window_length + 1.0) + 1.0 / (
                n_new - min_window_length + 1.0
            )
            epsilon = np.sqrt(2.0 * harmonic * sqdev_per_value * log_term) + bound_term * harmonic
            if abs(mean_gap) > epsilon:
                _forget_oldest(sums, sqdevs, fill, window, counters)
                return True
    return False


@njit(cache=True)
def adwin_run(  # pragma: no cover - numba
    values,
    detected,
    sums,
    sqdevs,
    fill,
    window,
    counters,
    delta,
    clock,
    max_buckets,
    min_window_length,
    grace_period,
):
    """Feed ``values`` in order; ``detected[i]`` is set to whether value i signalled drift.

    ``min_window_length`` and ``grace_period`` come as floats: River compares them with
    the float counts.
    """
    for i in range(values.shape[0]):
        if counters[PENDING_RESET]:
            _clear(sums, sqdevs, fill, window, counters)
        _append(sums, sqdevs, fill, window, counters, values[i], max_buckets)

        tick = counters[TICK] + 1
        if tick > _I32_MAX:
            tick -= _I32_SPAN
        counters[TICK] = tick

        found = False
        if tick % clock == 0 and window[WIDTH] > grace_period:
            while _shrink_at_one_cut(
                sums, sqdevs, fill, window, counters, delta, min_window_length
            ):
                found = True
        detected[i] = found
        if found:
            counters[N_DETECTIONS] += 1
            counters[PENDING_RESET] = 1


def empty_arrays(max_buckets: int) -> tuple[np.ndarray, ...]:
    """Zeroed state arrays for a fresh window: sums, sqdevs, fill, window, counters."""
    sums = np.zeros((MAX_LEVELS, max_buckets + 1), dtype=np.float64)
    sqdevs = np.zeros_like(sums)
    fill = np.zeros(MAX_LEVELS, dtype=np.int64)
    window = np.zeros(3, dtype=np.float64)
    counters = np.zeros(4, dtype=np.int64)
    counters[N_LEVELS] = 1
    return sums, sqdevs, fill, window, counters
