"""The reaction to a drift detection, run in process exactly as the service runs it.

A model learns a stream in entries (``/update`` batches) of ``batch`` examples; its
ADWIN (the service's default detector, :mod:`learners.drift.adwin`) reads each entry's
progressive 0/1 errors in order; after an entry in which it detected a change, the
model re-opens its confidence (:meth:`LinearClassifier.reopen_confidence`) by
``amount`` (None: no reaction). ``python -m tests.learners.drift_reaction`` prints the
table of ``docs/guides/drift-detection.md`` (React).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from learners.drift.adwin import ADWIN
from learners.features import FeatureSpec
from learners.linear import make_classifier
from tests.learners.drift_streams import LabelledStream

ALGORITHMS = ("arow", "cw", "scw1")
AFTER = (500, 1000, 2000)  # examples after each change the accuracy is read over
BATCH = 100


@dataclass
class Run:
    errors: np.ndarray  # progressive 0/1 error of each example
    detections: list[int]  # 1-based example index of each detection
    state_digest: str

    def accuracy_after(self, changes: tuple[int, ...], n: int) -> float:
        """Progressive accuracy over the ``n`` examples after each change, pooled."""
        return 1.0 - float(np.mean(np.concatenate([self.errors[c : c + n] for c in changes])))

    @property
    def accuracy(self) -> float:
        return 1.0 - float(self.errors.mean())


def run(stream: LabelledStream, algorithm: str, amount: float | None, batch: int = BATCH,
        params: dict[str, Any] | None = None) -> Run:  # fmt: skip
    spec = FeatureSpec.from_config(stream.features)
    clf = make_classifier(algorithm, spec.dim, params or {})
    detector = ADWIN()
    errors, detections = [], []
    seen = 0
    for s in range(0, len(stream.rows), batch):
        r = clf.update(spec.encode(stream.rows[s : s + batch]), stream.labels[s : s + batch])
        assert r.errors is not None
        hits = np.flatnonzero(detector.update_many(r.errors))
        detections += (seen + hits + 1).tolist()
        seen += r.errors.shape[0]
        errors.append(r.errors)
        if hits.shape[0] and amount is not None:
            clf.reopen_confidence(amount)  # after the entry, as the service does
    return Run(np.concatenate(errors), detections, clf.state_digest())


def table(streams: list[LabelledStream], amounts: tuple[float | None, ...]) -> list[str]:
    head = " | ".join(f"after {n}" for n in AFTER)
    out = [f"| stream | algorithm | reaction | {head} | overall | detections |",
           "| --- " * (5 + len(AFTER)) + "|"]  # fmt: skip
    for s in streams:
        for algo in ALGORITHMS:
            for amount in amounts:
                r = run(s, algo, amount)
                cells = " | ".join(f"{r.accuracy_after(s.changes, n):.4f}" for n in AFTER)
                what = "none" if amount is None else f"reopen {amount:g}"
                out.append(f"| {s.name} | {algo} | {what} | {cells} | {r.accuracy:.4f} | "
                           f"{len(r.detections)} |")  # fmt: skip
    return out


if __name__ == "__main__":
    from tests.learners.drift_streams import a9a_flipping, agrawal_stream, sea_stream

    amounts = tuple(None if a == "none" else float(a) for a in sys.argv[1:]) or (None, 1.0)
    print("\n".join(table([a9a_flipping(), sea_stream(), agrawal_stream()], amounts)))
