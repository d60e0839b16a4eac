"""A decision model's reward model chosen online among candidates: ``"reward_model":
{"algorithm": "auto"}`` (the default of a model created with an exploration policy
that needs no variance).

Each candidate (AROW regression and normalised adaptive SGD regression, default
hyperparameters) learns every reward the model learns, the same rows, targets and
weights. Before each event is learned, each candidate's own policy (the model's
exploration policy over that candidate's scores, with the event's eligible actions
and ``t``, as a rank would have drawn it) is evaluated off the logged decision, as a
challenger's is (:mod:`service.models.decision_follower`): IPS, SNIPS and DR, DR's
reward model the candidates' mean score (one for all, so it favours none of them).
After each event, a candidate replaces the one serving when its DR estimate is over
the serving one's by more than ``SWITCH_Z`` standard errors of their paired
difference (the per-event differences of their DR terms; the first candidate serves
until then). The one serving is the model's reward model: its scores rank,
``/explain`` and ``/weights`` read it, its greedy policy is ``learned``.

Why a choice, and why by the policy's value: neither regressor is the better reward
model on every problem (measured in bench/README.md, issue 34: AROW ranks MNIST's
10 actions far better, SGD a9a's 2 a little), and the squared loss does not tell which
is (on MNIST, SGD's is the lower and its policy the worse). The value of each
candidate's policy on the model's own logged decisions is what a rank is for, and it
is estimated without bias whichever candidate served (every decision's probability
is logged). Why a margin: with none, noise in the first estimates put SGD to serve on
MNIST for long stretches. The cost: each reward is learned and evaluated twice.

The candidate serving is the reward model proper (``adapter.model``: its artifact is
the checkpoint's, so everything that reads the reward model reads it); the others'
states ride in the same checkpoint as arrays ``candidates.<i>.<name>``, with their
counts and every candidate's estimates in ``meta.decisions.candidates``.

>>> from learners.regression import make_regressor
>>> c = Candidates(["arow_regression", "sgd_regression"], make_regressor("arow", 4), 0)
>>> [type(m).__name__ for m in c.models], c.names[c.serving]
(['AROW', 'SGD'], 'arow_regression')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.decisions.estimators import Difference, Evaluation, dr_parts
from learners.decisions.explore import Policy
from learners.features import Batch
from service.models.regression import learner_algorithm

AUTO = "auto"
AUTO_CANDIDATES = ("arow_regression", "sgd_regression")  # the first serves at first
# a candidate replaces the one serving when its value is over it by this many standard
# errors of the paired difference (measured in bench/README.md, issue 34: 1.96 kept AROW
# serving on a9a, where SGD is the better by little; with no margin, noise on MNIST's 10
# actions put SGD, far the worse there, to serve)
SWITCH_Z = 1.0
REWARD_ARRAYS = ("mu", "sigma", "y_stats", "noise")  # a regressor's state, as arrays


class Candidates:
    """The candidate reward models of an ``auto`` decision model (see the module's doc).

    ``model``: the candidate serving now (a checkpoint's reward model, or a new one),
    the candidate ``serving`` of ``names``; the others are built new."""

    def __init__(self, names: list[str], model: Any, serving: int) -> None:
        from learners.regression import make_regressor

        if learner_algorithm(names[serving]) != model.algorithm:
            raise ValueError(
                f"the reward model is {model.algorithm!r}, not the candidate "
                f"{names[serving]!r} said to serve"
            )
        self.names = list(names)
        self.models = [
            model if i == serving else make_regressor(learner_algorithm(n), model.dim)
            for i, n in enumerate(self.names)
        ]
        for m in self.models:  # one spec and one names map: every candidate's columns
            m.features_, m.feature_names_ = model.features_, model.feature_names_
        self.serving = serving
        self.values = [Evaluation() for _ in self.names]
        # (i, j), i < j: the paired difference of candidate i's and j's DR terms
        self.gaps = {pair: Difference() for pair in _pairs(len(self.names))}

    @classmethod
    def of(cls, names: list[str], model: Any) -> Candidates:
        """Candidates whose serving one is ``model`` (by its algorithm)."""
        serving = [learner_algorithm(n) for n in names].index(model.algorithm)
        return cls(names, model, serving)

    # ------------------------------------------------------------ learning
    def observe(
        self,
        policy: Policy,
        ev: dict[str, Any],
        reward: float,
        rows: Batch,
        t: int,
        serving_scores: np.ndarray,
    ) -> None:
        """One logged event's off-policy terms for each candidate's policy, from each
        candidate as it is before it learns the event (``serving_scores``: the serving
        one's scores of ``rows``, computed already). DR's reward model is the mean of
        the candidates' scores: one for all, so it favours none of them."""
        p = [float(v) for v in ev["p"]]
        a = int(ev["a"])
        excluded = [j for j, v in enumerate(p) if v <= 0.0]
        scores = [
            serving_scores if i == self.serving else m.predict_details(rows)[0]
            for i, m in enumerate(self.models)
        ]  # (no variance policy)
        shared = [float(v) for v in np.mean(scores, axis=0).tolist()]
        terms = []
        for s, value in zip(scores, self.values, strict=True):
            q = [float(v) for v in policy.probabilities(s, None, excluded, t).tolist()]
            terms.append(value.update(p[a], reward, *dr_parts(q, shared, a)))
        for (i, j), gap in self.gaps.items():
            gap.add(terms[i] - terms[j])

    def others(self) -> list[Any]:
        """The candidates not serving (they learn what the serving one learns)."""
        return [m for i, m in enumerate(self.models) if i != self.serving]

    def gap(self, i: int, j: int) -> tuple[float, float]:
        """Candidate i's DR estimate less j's, and its standard error (paired)."""
        d = self.gaps[(min(i, j), max(i, j))]
        sign = 1.0 if i < j else -1.0
        return sign * d.estimate, d.stderr

    def choose(self) -> Any:
        """The candidate to serve now: of those whose value is over the serving one's
        by more than ``SWITCH_Z`` standard errors, the furthest over; else the same."""
        over = []
        for c in range(len(self.names)):
            if c != self.serving:
                mean, se = self.gap(c, self.serving)
                if mean > SWITCH_Z * se:
                    over.append((mean, -c))
        if over:
            self.serving = -max(over)[1]
        return self.models[self.serving]

    # ------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """What ``meta.decisions.candidates`` keeps (JSON)."""
        return {
            "names": self.names,
            "serving": self.serving,
            "values": [v.to_dict() for v in self.values],
            "gaps": [g.to_dict() for g in self.gaps.values()],
            "counts": [[m.n_seen_, m.n_updates_] for m in self.models],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The candidates not serving, as arrays (copies, taken now)."""
        out = {}
        for i, m in enumerate(self.models):
            if i == self.serving:
                continue
            st = m.state()
            for name in REWARD_ARRAYS:
                a = getattr(st, name)
                if a is not None:
                    out[f"candidates.{i}.{name}"] = a
        return out

    def digests(self) -> list[str]:
        return [m.state_digest() for m in self.models]

    def restore(self, saved: Any, arrays: dict[str, np.ndarray]) -> None:
        """The state ``state`` and ``arrays`` wrote; ``ValueError`` naming what is off."""
        from learners.regression import LinearRegressor, RegressionState

        loc = "meta.decisions.candidates"
        keys = {"names", "serving", "values", "gaps", "counts"}
        if not isinstance(saved, dict) or set(saved) != keys:
            raise ValueError(f"{loc}: must hold names, serving, values, gaps and counts")
        same = type(saved["serving"]) is int and saved["serving"] == self.serving
        if saved["names"] != self.names or not same:
            raise ValueError(
                f"{loc}: names {saved['names']!r} serving {saved['serving']!r} do not match "
                f"the model's candidates {self.names!r} with {self.names[self.serving]!r} serving"
            )
        counts, values = saved["counts"], saved["values"]
        n = len(self.names)
        if not (isinstance(counts, list) and isinstance(values, list)) or not (
            len(counts) == len(values) == n
        ):
            raise ValueError(f"{loc}: counts and values must hold one item per candidate")
        restored = [Evaluation.from_dict(v) for v in values]
        gaps = saved["gaps"]
        if not isinstance(gaps, list) or len(gaps) != len(self.gaps):
            raise ValueError(f"{loc}.gaps: must hold one item per pair of candidates")
        for i, m in enumerate(self.models):
            if i == self.serving:
                continue
            c = counts[i]
            ok = isinstance(c, list) and len(c) == 2 and all(type(v) is int and v >= 0 for v in c)
            if not ok:
                raise ValueError(f"{loc}.counts[{i}]: must be [seen, updates], integers >= 0")
            got = {k: arrays.get(f"candidates.{i}.{k}") for k in REWARD_ARRAYS}
            if got["mu"] is None or got["y_stats"] is None or got["noise"] is None:
                raise ValueError(f"array candidates.{i}.mu, y_stats or noise is missing")
            st = RegressionState(got["mu"], got["sigma"], c[0], c[1], got["y_stats"], got["noise"])
            try:
                restored_model = LinearRegressor.from_state(m.algorithm, m.dim, m.params, st)
            except ValueError as e:
                raise ValueError(f"array candidates.{i}: {e}") from None
            restored_model.features_, restored_model.feature_names_ = m.features_, m.feature_names_
            self.models[i] = restored_model
        self.values = restored
        self.gaps = {pair: Difference.from_dict(g) for pair, g in zip(self.gaps, gaps, strict=True)}

    def describe(self) -> dict[str, Any]:
        gaps = {}
        for i, j in self.gaps:
            mean, se = self.gap(i, j)
            gaps[f"{self.names[i]} - {self.names[j]}"] = {"estimate": mean, "stderr": se}
        return {
            "serving": self.names[self.serving],
            "candidates": {n: v.summary() for n, v in zip(self.names, self.values, strict=True)},
            "differences": gaps,
        }


def _pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]
