"""Streams for the drift-detector tests, and River (the reference) run on them.

River is only the oracle here: ``learners.drift`` never imports it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

SEA_DRIFTS = (3000, 6000)  # where the concept of the SEA stream changes
SEA_LENGTH = 9000


@functools.lru_cache(maxsize=1)
def sea_errors() -> np.ndarray:
    """0/1 errors of our AROW, predicting then learning each example of a SEA stream
    whose concept changes twice (fixed seeds): threshold 8 -> 9.5 at 3000 (5% label
    noise), then threshold 9 with 25% noise at 6000."""
    from river.datasets import synth

    from learners.features import Batch
    from learners.linear.arow import AROW

    late = synth.ConceptDriftStream(
        stream=synth.SEA(variant=3, noise=0.05, seed=2),
        drift_stream=synth.SEA(variant=1, noise=0.25, seed=3),
        position=SEA_DRIFTS[1] - SEA_DRIFTS[0],
        width=50,
        seed=5,
    )
    stream = synth.ConceptDriftStream(
        stream=synth.SEA(variant=0, noise=0.05, seed=1),
        drift_stream=late,
        position=SEA_DRIFTS[0],
        width=50,
        seed=4,
    )
    rows, labels = [], []
    for x, y in stream.take(SEA_LENGTH):
        rows.append([x[0] / 10.0, x[1] / 10.0, x[2] / 10.0, 1.0])  # scaled, with a bias
        labels.append(int(y))
    X, y_all = np.array(rows), np.array(labels, dtype=np.int64)
    clf = AROW(dim=4)
    errors = np.empty(len(y_all))
    for i in range(len(y_all)):
        result = clf.update(Batch.from_dense(X[i : i + 1]), y_all[i : i + 1])
        errors[i] = 1.0 - result.correct
    return errors


def bernoulli_shift(seed: int, n: int = 6000, p0: float = 0.2, p1: float = 0.45) -> np.ndarray:
    """0/1 values with mean p0 for the first half and p1 after."""
    rng = np.random.default_rng(seed)
    p = np.where(np.arange(n) < n // 2, p0, p1)
    return (rng.random(n) < p).astype(np.float64)


def losses_with_shifts(seed: int, n: int = 8000) -> np.ndarray:
    """Real-valued losses in [0, 1] (clipped Gaussians) whose mean changes 3 times."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.1, 0.9, size=4)
    mean = np.repeat(means, n // 4)
    return np.clip(mean + 0.25 * rng.standard_normal(n), 0.0, 1.0)


def river_run(detector: Any, values: np.ndarray) -> list[int]:
    """Indices where a River detector signals drift when fed ``values`` in order."""
    found = []
    for i, x in enumerate(values.tolist()):
        detector.update(x)
        if detector.drift_detected:
            found.append(i)
    return found
