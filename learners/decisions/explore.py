"""Exploration: turn per-action scores (estimated rewards, larger is better, and
optionally their variances) into a probability per action, and draw one action.

Every policy here is a small class: hyperparameters in ``__init__``, no learned state,
one method ``probabilities(scores, variances=None, excluded=(), t=1)``. The result
has a non-negative entry per action, sums to 1 (to within 1e-12), and is 0 exactly on
the ``excluded`` actions; at least one action must stay eligible.

- :class:`EpsilonGreedy`: ε spread uniformly, the rest on the best action.
- :class:`Softmax`: p ∝ exp(ŷ/τ).
- :class:`SquareCB` (Foster & Rakhlin 2020, "Beyond UCB"): with K eligible actions,
  p_a = 1/(K + γ(ŷ_best − ŷ_a)) for a ≠ best, the rest on the best; γ_t =
  ``gamma`` · K^``gamma_action_exponent`` · t^``gamma_exponent`` (exponents 0: a
  constant γ; the paper's γ grows as √(K·T), VW's ``--squarecb`` as 10·√t without K).
- :class:`Thompson`: Thompson sampling from N(ŷ_a, var_a), its probabilities
  estimated by Monte-Carlo with common random numbers (a generator seeded with the
  policy's ``seed`` at every call, so the probabilities are a deterministic function
  of the scores), mixed with a uniform floor ``epsilon`` so no eligible action has
  probability 0 (which off-policy evaluation needs).
- :class:`UCB`: greedy on ŷ + β√var with an ε floor (exact probabilities, O(K)).

Of the two variance-based policies, :class:`Thompson` is the one to prefer in
principle: UCB puts all but ε on one action for a given context and explores the
uncertain actions only through the floor, while Thompson spreads the mass in proportion
to how plausible each action is to be the best; its probabilities are Monte-Carlo
estimates, but they are exactly the probabilities of the draw that is made, so logged
propensities are honest. The variance to pass is that of the *mean* reward: AROW's
predictive variance less its noise part (the predictive variance of an empty row);
with the full predictive variance Thompson over-explores (a9a, 3000 rows: 0.743 against
0.788). Measured on a9a as a 2-action bandit (``bench/decisions_offline.py``, one pass,
progressive reward): SquareCB(γ=10·√t) 0.836, softmax(τ=0.05) 0.836, UCB 0.825,
Thompson 0.822, ε-greedy(0.05) 0.822; so :class:`SquareCB` is the default to propose
(softmax at τ=0.05 leaves so little mass on the other actions that off-policy estimates
from its log are unreliable).

The draw (:func:`event_uniform`, :func:`draw`) is a function of the event id and the
model seed only: a retried event draws the same action.

>>> import numpy as np
>>> p = SquareCB(gamma=10.0).probabilities(np.array([1.0, 0.5, 0.0]))
>>> [round(float(x), 4) for x in p]  # 1/(3+5), 1/(3+10), the rest
[0.7981, 0.125, 0.0769]
>>> d = decide(EpsilonGreedy(0.1), np.array([0.2, 0.9, 0.1]), event_id="ev-1", seed=7)
>>> d == decide(EpsilonGreedy(0.1), np.array([0.2, 0.9, 0.1]), event_id="ev-1", seed=7)
True
>>> float(d.probabilities.sum()), d.probability == d.probabilities[d.action]
(1.0, np.True_)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "POLICIES",
    "UCB",
    "Decision",
    "EpsilonGreedy",
    "Policy",
    "Softmax",
    "SquareCB",
    "Thompson",
    "decide",
    "draw",
    "event_uniform",
    "make_policy",
]


def _finite_nonneg(
    name: str, value: float, *, positive: bool = False, upper: float | None = None
) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0) or (upper is not None and v > upper):
        bound = f" and <= {upper}" if upper is not None else ""
        raise ValueError(f"{name}: must be {'> 0' if positive else '>= 0'}{bound}, got {value!r}")
    return v


def _eligible(n: int, excluded: Iterable[int]) -> np.ndarray:
    mask = np.ones(n, dtype=bool)
    for a in excluded:
        if not 0 <= int(a) < n:
            raise ValueError(f"excluded: action {a} is not in 0..{n - 1}")
        mask[int(a)] = False
    if not mask.any():
        raise ValueError("excluded: every action is excluded")
    return mask


def _check_scores(scores: np.ndarray, variances: np.ndarray | None) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("scores: must be a non-empty 1-d array")
    if not np.isfinite(s).all():
        raise ValueError("scores: must be finite")
    if variances is not None:
        v = np.asarray(variances, dtype=np.float64)
        if v.shape != s.shape or not np.isfinite(v).all() or (v < 0).any():
            raise ValueError("variances: must be finite, >= 0, one per score")
    return s


def _best(s: np.ndarray, mask: np.ndarray) -> int:
    # the first eligible argmax (ties go to the lowest index, deterministically)
    return int(np.flatnonzero(mask)[np.argmax(s[mask])])


def _finish(p: np.ndarray, mask: np.ndarray, best: int) -> np.ndarray:
    """Zero the excluded, give the best action 1 − (the others' sum), exactly."""
    p = np.where(mask, p, 0.0)
    p[best] = 0.0
    p[best] = max(0.0, 1.0 - math.fsum(p.tolist()))
    return p


class Policy:
    """An exploration policy; subclasses define :meth:`_probs`."""

    name = ""

    def probabilities(
        self,
        scores: np.ndarray,
        variances: np.ndarray | None = None,
        excluded: Iterable[int] = (),
        t: int = 1,
    ) -> np.ndarray:
        """A probability per action (``t`` counts decisions so far, from 1)."""
        s = _check_scores(scores, variances)
        mask = _eligible(s.size, excluded)
        v = None if variances is None else np.asarray(variances, dtype=np.float64)
        return self._probs(s, v, mask, max(int(t), 1))

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def params(self) -> dict[str, float | int]:
        return dict(vars(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"


class EpsilonGreedy(Policy):
    """ε/K to every eligible action, 1 − ε + ε/K to the best."""

    name = "epsilon_greedy"

    def __init__(self, epsilon: float = 0.05) -> None:
        self.epsilon = _finite_nonneg("epsilon", epsilon, upper=1.0)

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        p = np.full(s.size, self.epsilon / int(mask.sum()))
        return _finish(p, mask, _best(s, mask))


class Softmax(Policy):
    """p_a ∝ exp(ŷ_a / temperature) over the eligible actions."""

    name = "softmax"

    def __init__(self, temperature: float = 0.1) -> None:
        self.temperature = _finite_nonneg("temperature", temperature, positive=True)

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        best = _best(s, mask)
        z = np.exp(np.where(mask, s - s[best], -np.inf) / self.temperature)
        return _finish(z / z.sum(), mask, best)


class SquareCB(Policy):
    """Inverse-gap weighting: p_a = 1/(K + γ_t(ŷ_best − ŷ_a)) over the K eligible
    actions, γ_t = gamma·K^gamma_action_exponent·t^gamma_exponent."""

    name = "squarecb"

    def __init__(
        self, gamma: float = 10.0, gamma_exponent: float = 0.0, gamma_action_exponent: float = 0.0
    ) -> None:
        self.gamma = _finite_nonneg("gamma", gamma)
        self.gamma_exponent = _finite_nonneg("gamma_exponent", gamma_exponent, upper=1.0)
        self.gamma_action_exponent = _finite_nonneg(
            "gamma_action_exponent", gamma_action_exponent, upper=1.0
        )

    @property
    def params(self) -> dict[str, float | int]:
        out = dict(vars(self))
        if not self.gamma_action_exponent:  # as before it existed (stored configs, digests)
            del out["gamma_action_exponent"]
        return out

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        best = _best(s, mask)
        k = int(mask.sum())
        gamma = self.gamma * float(t) ** self.gamma_exponent
        if self.gamma_action_exponent:
            gamma *= float(k) ** self.gamma_action_exponent
        p = 1.0 / (k + gamma * (s[best] - s))
        return _finish(p, mask, best)


class UCB(Policy):
    """Greedy on ŷ + beta·√var, with ε spread uniformly (needs variances)."""

    name = "ucb"

    def __init__(self, beta: float = 1.0, epsilon: float = 0.05) -> None:
        self.beta = _finite_nonneg("beta", beta)
        self.epsilon = _finite_nonneg("epsilon", epsilon, upper=1.0)

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        if v is None:
            raise ValueError("variances: ucb needs a variance per action (an AROW reward model)")
        p = np.full(s.size, self.epsilon / int(mask.sum()))
        return _finish(p, mask, _best(s + self.beta * np.sqrt(v), mask))


class Thompson(Policy):
    """P(a is the argmax of ŷ + scale·√var·z), z ~ N(0, 1) per action, over ``samples``
    draws of a generator seeded with ``seed``; then (1 − ε)·that + ε uniform."""

    name = "thompson"

    def __init__(
        self, scale: float = 1.0, epsilon: float = 0.01, samples: int = 256, seed: int = 0
    ) -> None:
        self.scale = _finite_nonneg("scale", scale)
        self.epsilon = _finite_nonneg("epsilon", epsilon, upper=1.0)
        if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 100_000:
            raise ValueError(f"samples: must be an integer in 1..100000, got {samples!r}")
        self.samples = samples
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        self.seed = seed

    def _probs(self, s: np.ndarray, v: np.ndarray | None, mask: np.ndarray, t: int) -> np.ndarray:
        if v is None:
            raise ValueError(
                "variances: thompson needs a variance per action (an AROW reward model)"
            )
        z = np.random.default_rng(self.seed).standard_normal((self.samples, s.size))
        draws = np.where(mask, s + self.scale * np.sqrt(v) * z, -np.inf)
        wins = np.bincount(np.argmax(draws, axis=1), minlength=s.size).astype(np.float64)
        k = int(mask.sum())
        p = (1.0 - self.epsilon) * wins / self.samples + self.epsilon / k
        return _finish(p, mask, _best(wins, mask))


POLICIES: dict[str, type[Policy]] = {
    c.name: c for c in (EpsilonGreedy, Softmax, SquareCB, Thompson, UCB)
}


def make_policy(name: str, params: dict[str, float | int] | None = None) -> Policy:
    """A policy by name; an unknown name or hyperparameter raises ``ValueError``."""
    try:
        cls = POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {name!r}") from None
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        raise ValueError(f"params: {exc}") from None


def event_uniform(event_id: str, seed: int) -> float:
    """A number in [0, 1) from SHA-256 of ``"<seed>:<event_id>"`` (its first 53 bits):
    the same event id and seed give the same number on every machine and run."""
    digest = hashlib.sha256(f"{int(seed)}:{event_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)


def draw(probabilities: np.ndarray, u: float) -> int:
    """The action whose slice of the cumulative probabilities holds ``u``; never an
    action of probability 0 (rounding past the last slice goes to the last non-zero)."""
    p = np.asarray(probabilities, dtype=np.float64)
    i = int(np.searchsorted(np.cumsum(p), u, side="right"))
    if i >= p.size or p[i] <= 0.0:
        i = int(np.flatnonzero(p > 0.0)[-1])
    return i


@dataclass(frozen=True, eq=False)
class Decision:
    """The chosen action, its probability, every action's probability, and the
    ranking (the chosen action first, then by probability, then by score)."""

    action: int
    probability: float
    probabilities: np.ndarray
    ranking: list[int] = field(default_factory=list)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Decision)
            and (self.action, self.probability, self.ranking)
            == (other.action, other.probability, other.ranking)
            and np.array_equal(self.probabilities, other.probabilities)
        )


def decide(
    policy: Policy,
    scores: np.ndarray,
    variances: np.ndarray | None = None,
    *,
    event_id: str,
    seed: int,
    excluded: Iterable[int] = (),
    t: int = 1,
) -> Decision:
    """Probabilities from ``policy``, then the draw of ``event_uniform(event_id, seed)``."""
    p = policy.probabilities(scores, variances, excluded, t)
    a = draw(p, event_uniform(event_id, seed))
    s = np.asarray(scores, dtype=np.float64)
    rest = sorted((i for i in range(p.size) if i != a), key=lambda i: (-p[i], -s[i], i))
    return Decision(a, float(p[a]), p, [a, *rest])
