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


# --------------------------------------------------------------- labelled streams
# Drifting classification streams (features as the service takes them, labels, and the
# example indices where the concept changes), for the reaction measurements
# (tests/learners/test_drift_reaction.py) and the HTTP tests
# (tests/service/test_drift_streams.py). Fixed seeds: the same stream every run.


class LabelledStream:
    """``rows`` (dense lists or feature maps), ``labels`` and the change points."""

    def __init__(self, name: str, rows: list[Any], labels: list[int], changes: tuple[int, ...],
                 features: dict[str, Any]) -> None:  # fmt: skip
        self.name, self.rows, self.labels, self.changes = name, rows, labels, changes
        self.features = features  # the service's ``features`` config for the rows


def a9a_flipping(segment: int = 10_000) -> LabelledStream:
    """a9a's training rows in file order, the labels flipped on the middle third."""
    from tests.service.test_delayed_labels import a9a

    _, rows, y = a9a("a9a")
    n = 3 * segment
    labels = [-v if segment <= i < 2 * segment else v for i, v in enumerate(y[:n])]
    return LabelledStream("a9a", rows[:n], labels, (segment, 2 * segment),
                          {"kind": "sparse", "dim": 123})  # fmt: skip


def sea_stream(segment: int = 5000, noise: float = 0.1, width: int = 50) -> LabelledStream:
    """River's SEA, its four thresholds in turn (8, 9, 7, 9.5), ``segment`` examples each,
    joined by ``ConceptDriftStream`` (a change over ``width`` examples); features scaled
    to [0, 1] plus a bias, dense."""
    from river.datasets import synth

    stream: Any = synth.SEA(variant=3, noise=noise, seed=13)
    for k, variant in reversed(list(enumerate((0, 1, 2)))):
        stream = synth.ConceptDriftStream(
            stream=synth.SEA(variant=variant, noise=noise, seed=10 + k),
            drift_stream=stream,
            position=segment,
            width=width,
            seed=20 + k,
        )
    rows, labels = [], []
    for x, y in stream.take(4 * segment):
        rows.append([x[0] / 10.0, x[1] / 10.0, x[2] / 10.0, 1.0])
        labels.append(int(y))
    changes = tuple(segment * k for k in (1, 2, 3))
    return LabelledStream("sea", rows, labels, changes, {"kind": "dense", "dim": 4})


# Function 4 first: none of AROW, CW, SCW-I detects anything while it learns it (with
# function 0 first, the falling error of the learning curve is itself a detection, at 416).
AGRAWAL_FUNCTIONS = (4, 0, 5, 8)


def agrawal_row(x: dict[str, Any]) -> dict[str, float]:
    """Named features of an Agrawal example: the numbers scaled to about [0, 1], and
    one-hot bins (the functions are thresholds on them) and categories."""
    out = {
        "salary": x["salary"] / 150_000,
        "commission": x["commission"] / 75_000,
        "age": x["age"] / 80,
        "hvalue": x["hvalue"] / 1_000_000,
        "loan": x["loan"] / 500_000,
        "bias": 1.0,
    }
    bins = {"salary": 10_000, "commission": 10_000, "age": 5, "hvalue": 100_000,
            "hyears": 5, "loan": 50_000}  # fmt: skip
    for key, width in bins.items():
        out[f"{key}={int(x[key] // width)}"] = 1.0
    for key in ("elevel", "car", "zipcode"):
        out[f"{key}={x[key]}"] = 1.0
    return out


def agrawal_stream(segment: int = 5000, width: int = 50) -> LabelledStream:
    """River's Agrawal generator, functions 4, 0, 5 and 8 in turn (``segment`` examples
    each, ``ConceptDriftStream`` between), hashed features (``agrawal_row``)."""
    from river.datasets import synth

    fs = AGRAWAL_FUNCTIONS
    stream: Any = synth.Agrawal(classification_function=fs[-1], seed=40 + len(fs))
    for k in reversed(range(len(fs) - 1)):
        stream = synth.ConceptDriftStream(
            stream=synth.Agrawal(classification_function=fs[k], seed=40 + k),
            drift_stream=stream,
            position=segment,
            width=width,
            seed=50 + k,
        )
    rows, labels = [], []
    for x, y in stream.take(len(fs) * segment):
        rows.append(agrawal_row(x))
        labels.append(int(y))
    changes = tuple(segment * k for k in range(1, len(fs)))
    return LabelledStream("agrawal", rows, labels, changes, {"kind": "hashed", "bits": 16})
