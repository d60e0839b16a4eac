"""A decision model's reward model chosen online among candidates: ``"reward_model":
{"algorithm": "auto"}`` (the default of a model created with an exploration policy
that needs no variance).

Each candidate (AROW regression and normalised adaptive SGD regression, default
hyperparameters) learns every reward the model learns, the same rows, targets and
weights. Before each event is learned, each candidate's own policy (the model's
exploration policy over that candidate's scores, with the event's eligible actions
and ``t``, as a rank would have drawn it) is evaluated off the logged decision, as a
challenger's is (:mod:`service.models.decision_follower`): IPS, SNIPS and DR. After
each reward entry the candidate whose policy has the highest IPS estimate serves
(ties keep the one serving; the first candidate serves until a reward is learned):
its scores rank, ``/explain`` and ``/weights`` read it, its greedy policy is
``learned``.

Why a choice, and why by the policy's value: neither regressor is the better reward
model on every problem (measured in bench/README.md, issue 34: AROW ranks MNIST's
10 actions far better, SGD a9a's 2 a little), and the squared loss does not tell which
is (on MNIST, SGD's loss is the lower and its policy the worse). The value of each
candidate's policy on the model's own logged decisions is what a rank is for, and
IPS estimates it without bias whichever candidate served (every decision's
probability is logged). The cost: each reward is learned and evaluated twice.

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

from learners.decisions.estimators import Evaluation, dr_parts
from learners.decisions.explore import Policy
from learners.features import Batch

AUTO = "auto"
AUTO_CANDIDATES = ("arow_regression", "sgd_regression")  # the first serves at first
_SUFFIX = "_regression"
_ARRAYS = ("mu", "sigma", "y_stats", "noise")


def _learner(name: str) -> str:
    return name.removesuffix(_SUFFIX)


class Candidates:
    """The candidate reward models of an ``auto`` decision model (see the module's doc).

    ``model``: the candidate serving now (a checkpoint's reward model, or a new one),
    the candidate ``serving`` of ``names``; the others are built new."""

    def __init__(self, names: list[str], model: Any, serving: int) -> None:
        from learners.regression import make_regressor

        if _learner(names[serving]) != model.algorithm:
            raise ValueError(
                f"the reward model is {model.algorithm!r}, not the candidate "
                f"{names[serving]!r} said to serve"
            )
        self.names = list(names)
        self.models = [
            model if i == serving else make_regressor(_learner(n), model.dim)
            for i, n in enumerate(self.names)
        ]
        for m in self.models:  # one spec and one names map: every candidate's columns
            m.features_, m.feature_names_ = model.features_, model.feature_names_
        self.serving = serving
        self.values = [Evaluation() for _ in self.names]

    @classmethod
    def of(cls, names: list[str], model: Any) -> Candidates:
        """Candidates whose serving one is ``model`` (by its algorithm)."""
        serving = [_learner(n) for n in names].index(model.algorithm)
        return cls(names, model, serving)

    # ------------------------------------------------------------ learning
    def observe(
        self, policy: Policy, ev: dict[str, Any], reward: float, rows: Batch, t: int
    ) -> None:
        """One logged event's off-policy terms for each candidate's policy, from each
        candidate as it is before it learns the event."""
        p = [float(v) for v in ev["p"]]
        a = int(ev["a"])
        excluded = [j for j, v in enumerate(p) if v <= 0.0]
        for model, value in zip(self.models, self.values, strict=True):
            scores, _ = model.predict_details(rows)  # (auto takes no variance policy)
            q = policy.probabilities(scores, None, excluded, t)
            s = [float(v) for v in scores.tolist()]
            value.update(p[a], reward, *dr_parts([float(v) for v in q.tolist()], s, a))

    def others(self) -> list[Any]:
        """The candidates not serving (they learn what the serving one learns)."""
        return [m for i, m in enumerate(self.models) if i != self.serving]

    def choose(self) -> Any:
        """The candidate to serve now (highest IPS estimate; ties keep the serving one)."""
        est = [v.ips.estimate if v.ips.n else 0.0 for v in self.values]
        best = max(range(len(est)), key=lambda i: (est[i], i == self.serving, -i))
        self.serving = best
        return self.models[best]

    # ------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """What ``meta.decisions.candidates`` keeps (JSON)."""
        return {
            "names": self.names,
            "serving": self.serving,
            "values": [v.to_dict() for v in self.values],
            "counts": [[m.n_seen_, m.n_updates_] for m in self.models],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The candidates not serving, as arrays (copies, taken now)."""
        out = {}
        for i, m in enumerate(self.models):
            if i == self.serving:
                continue
            st = m.state()
            for name in _ARRAYS:
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
        if not isinstance(saved, dict) or set(saved) != {"names", "serving", "values", "counts"}:
            raise ValueError(f"{loc}: must hold names, serving, values and counts")
        if saved["names"] != self.names or saved["serving"] != self.serving:
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
        for i, m in enumerate(self.models):
            if i == self.serving:
                continue
            c = counts[i]
            ok = isinstance(c, list) and len(c) == 2 and all(type(v) is int and v >= 0 for v in c)
            if not ok:
                raise ValueError(f"{loc}.counts[{i}]: must be [seen, updates], integers >= 0")
            got = {k: arrays.get(f"candidates.{i}.{k}") for k in _ARRAYS}
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

    def describe(self) -> dict[str, Any]:
        return {
            "serving": self.names[self.serving],
            "candidates": {n: v.summary() for n, v in zip(self.names, self.values, strict=True)},
        }
