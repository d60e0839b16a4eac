"""ProbabilityMap.learn's one-kernel bookkeeping keeps exactly what the numpy form kept
(the form it replaced, written out here as the reference): the same scores, in the same
places, the same fits, bit for bit, through wrap-arounds, batches larger than the window
and non-finite scores."""

from __future__ import annotations

import numpy as np
import pytest

from learners.linear.probability_map import MAX_Z, ProbabilityMap


class _Reference(ProbabilityMap):
    def learn(self, z: np.ndarray, positive: np.ndarray) -> np.ndarray:
        served = self.logits(z)
        zs = np.asarray(z, dtype=np.float64)
        ys = np.asarray(positive, dtype=np.bool_)
        keep = np.isfinite(zs)
        if not keep.all():
            zs, ys = zs[keep], ys[keep]
        zs = np.clip(zs, -MAX_Z, MAX_Z)
        n, size = zs.shape[0], self.size
        if not n:
            return served
        self.examples += n
        self.pending += n
        if n > size:
            zs, ys, n = zs[-size:], ys[-size:], size
        end = self.start + self.count
        if end + n > 2 * size:
            keep_n = min(self.count, size - n)
            self.z[:keep_n] = self.z[end - keep_n : end]
            self.y[:keep_n] = self.y[end - keep_n : end]
            self.start, self.count, end = 0, keep_n, keep_n
        self.z[end : end + n], self.y[end : end + n] = zs, ys
        self.count += n
        if self.count > size:
            self.start += self.count - size
            self.count = size
        if self.pending >= max(1, self.count // 100):
            self._fit()
        return served


@pytest.mark.parametrize("algorithm", ["arow", "pa1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_same_state_as_the_numpy_form(algorithm: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = 50
    ours, ref = ProbabilityMap(algorithm, size), _Reference(algorithm, size)
    for _ in range(400):
        n = int(rng.choice([0, 1, 1, 1, 3, 17, 49, 50, 51, 130]))
        z = rng.normal(scale=3.0, size=n)
        z[rng.random(n) < 0.05] = np.nan
        z[rng.random(n) < 0.03] = np.inf * rng.choice([-1, 1])
        z[rng.random(n) < 0.03] = 2e4 * rng.choice([-1, 1])  # beyond ±MAX_Z: clipped
        z[rng.random(n) < 0.03] = -0.0
        y = rng.random(n) < 0.5
        a = ours.learn(z, y)
        b = ref.learn(z, y)
        assert a.tobytes() == b.tobytes()
        assert (ours.start, ours.count, ours.pending, ours.examples) == (
            ref.start,
            ref.count,
            ref.pending,
            ref.examples,
        )
        kept = slice(ours.start, ours.start + ours.count)
        assert ours.z[kept].tobytes() == ref.z[kept].tobytes()
        assert ours.y[kept].tobytes() == ref.y[kept].tobytes()
        assert (ours.a, ours.b) == (ref.a, ref.b)
    assert ours.to_json() == ref.to_json()
