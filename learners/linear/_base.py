"""``LinearClassifier``, the base of every online linear classifier (PA, PA1, PA2, CW,
AROW, SCW1, SCW2): a learner (:mod:`learners.linear._learning`) and a scorer
(:mod:`learners.linear._scoring`) of one learned state (:mod:`learners.linear._state`),
built from a state or an artifact and written as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from learners import artifact
from learners.base import digest_arrays
from learners.feature_names import artifact_extras
from learners.linear import _artifact
from learners.linear._learning import LinearLearner
from learners.linear._normal import normal_ppf
from learners.linear._scoring import LinearScorer
from learners.linear._state import LinearState

ALGORITHMS: tuple[str, ...] = ("pa", "pa1", "pa2", "cw", "arow", "scw1", "scw2")
KIND = _artifact.KIND


class LinearClassifier(LinearLearner, LinearScorer):
    """Base of PA, PA1, PA2, CW, AROW, SCW1, SCW2; use a subclass or ``make_classifier``."""

    kind: ClassVar[str] = KIND

    @classmethod
    def from_state(
        cls, algorithm: str, dim: int, params: dict[str, Any], state: LinearState
    ) -> LinearClassifier:
        """A model with the given hyperparameters and learned state (arrays are copied)."""
        from learners.linear import make_classifier

        clf = make_classifier(algorithm, dim, params)
        clf._check_state(state)
        clf._restore(
            LinearState(
                list(state.labels),
                np.array(state.mu, dtype=np.float64),
                None if state.sigma is None else np.array(state.sigma, dtype=np.float64),
                int(state.n_seen),
                int(state.n_updates),
            )
        )
        return clf

    # ------------------------------------------------------------------ persistence

    def state_digest(self) -> str:
        st = self.state()
        arrays = [st.mu] + ([] if st.sigma is None else [st.sigma])
        meta = [self.algorithm, self.dim, self.params, self.labels_, self.n_seen_, self.n_updates_]
        return digest_arrays(*meta, *arrays)

    def to_bytes(self, meta: dict[str, Any] | None = None) -> bytes:
        """The model as an artifact (kind ``"linear"``): hyperparameters, labels, counts,
        ``mu`` (and ``sigma``), plus ``features_`` and ``feature_names_`` when set.
        ``meta`` adds JSON fields to the artifact's ``meta`` (e.g. where it came from)."""
        return artifact.dumps(KIND, *self._artifact_parts(self.state(), meta))

    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], memoryview]:
        """Copy the learned state now and return a function that serialises the copy.

        The copy is one memcpy of the (interleaved) weights; the slow part, splitting
        and serialising, can then run in a worker thread while updates go on (the
        service's checkpoints do this). ``snapshot()()`` holds the same bytes as
        ``to_bytes()`` taken at the moment of the snapshot (up to the artifact's
        creation time), in a buffer written by :func:`learners.artifact.dumps_buffer`
        (numpy copies and hashlib, which release the GIL: the event loop thread keeps
        running while a worker serialises a 2**20-dimension model).
        """
        # taken now, with the weights (the names' arrays are replaced on an add, never
        # changed in place, so they need no copy)
        extras = artifact_extras(self.features_, self.feature_names_)
        if self.covariance == "full":
            st = self.state()
            return lambda: artifact.dumps_buffer(KIND, *self._artifact_parts(st, meta, extras))
        w = self._w.copy()  # numpy releases the GIL for the copy
        labels, n_seen, n_updates = list(self.labels_), self.n_seen_, self.n_updates_
        has_cov = self._has_cov

        def dump() -> memoryview:
            # strided views of the copy: dumps_buffer copies each column straight into place
            sigma = w[:, :, 1] if has_cov else None
            st = LinearState(labels, w[:, :, 0], sigma, n_seen, n_updates)
            return artifact.dumps_buffer(KIND, *self._artifact_parts(st, meta, extras))

        return dump

    def _artifact_parts(
        self,
        st: LinearState,
        meta: dict[str, Any] | None = None,
        extras: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None,
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
        return _artifact.parts(self, st, meta, extras)

    @classmethod
    def from_bytes(
        cls, blob: bytes | bytearray | memoryview, *, max_bytes: int | None = None
    ) -> LinearClassifier:
        """Read a model written by :meth:`to_bytes` (any algorithm), validated."""
        art = artifact.loads(blob, expected_kind=KIND, max_bytes=max_bytes)
        return cls.from_artifact(art)

    @classmethod
    def from_artifact(cls, art: artifact.Artifact) -> LinearClassifier:
        """The model an :class:`~learners.artifact.Artifact` of kind ``"linear"`` holds
        (with its ``features_`` and ``feature_names_`` when it carries them), validated
        (:func:`learners.linear._artifact.read`)."""
        return _artifact.read(cls, art)


def phi_of(eta: float) -> float:
    """φ = Φ⁻¹(η), the confidence threshold of CW and SCW."""
    return normal_ppf(eta)
