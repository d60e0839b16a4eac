"""A decision challenger: a decision model that follows another (``"follows": "<leader>"``,
:mod:`service.engine.followers`) learns the leader's logged decisions and rewards, and
estimates its own policy's value on them, without serving.

Each reward entry of the leader's log (``/reward``, a default reward, a DSJSON import)
is applied to the challenger in log order, once (lockstep with the leader, restored from
its checkpoints and the leader's log like every follower), by
:meth:`DecisionAdapter.apply`:

- for each event, before learning it, the off-policy terms of the base targets
  (``served``: the leader's logging policy, whose value is the mean reward of these
  events; ``learned``: the challenger's greedy policy; ``first``; ``uniform``) and of
  ``challenger``: the challenger's own exploration policy (its ``exploration`` and
  reward model), its probabilities computed as a rank would at that point (its scores,
  variances and ``t``; the exploration policy whatever the mode). An action the leader
  gave probability 0 is excluded for every target: the log tells nothing of it;
- then its reward model learns the chosen action's row as its own ``weighting`` says,
  with p the **leader's** logged probability (that policy chose it).

The leader's entries hold the rows in the leader's features. A challenger with other
features (``bits`` of the ``hashed`` kind) encodes the rows again from the context and
actions as sent, which every event keeps; with the same features it reads the leader's
rows as they are. A challenger of a leader with a raw-record context (``records``) must
have the leader's features exactly (refused otherwise when it is created: a record
another config reads may be refused, or make too many features, long after it was
decided), so it always reads the leader's rows. Which features the leader's log has is
stored with the follower (``config.follows.features``) when it is created.

A challenger answers no ``rank`` and takes no ``reward`` (409: send them to the
leader). Promoted (``POST /models/{leader}/promote``), it ranks under the leader's
name with its own state; the records it keeps hold the rows in the leader's features,
so the leader's log stays one encoding and both keep learning it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from learners.decisions.estimators import Evaluation
from learners.features import Batch
from service.models import decision_features as df
from service.models import decision_records as dr
from service.models.decision import DecisionAdapter
from service.models.decision_config import VARIANCE_POLICIES

CHALLENGER = "challenger"  # the target policy of a challenger's own estimate
_NO_LIMIT = 1 << 30  # the leader checked max_features_per_example when it ranked


class ChallengerAdapter(DecisionAdapter):
    """A decision model that follows another (see the module's doc)."""

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        super().__init__(config, model)
        self.evaluations[CHALLENGER] = Evaluation()
        follows = config.get("follows")
        logged = follows.get("features") if isinstance(follows, dict) else None
        self.leader = follows.get("model") if isinstance(follows, dict) else follows
        # the leader's rows are ours only when its log has our features (known) and
        # crossing (its stored config's; names for one stored before crossings existed)
        crossing = follows.get("crossing", "names") if isinstance(follows, dict) else None
        self.reencode = logged != config["features"] or crossing != self.crossing

    def own_rows(self, batch: Batch, events: list[dict[str, Any]]) -> Batch:
        if not self.reencode:
            return batch
        rows = [dr.event_rows(self.spec, ev, _NO_LIMIT, self.crossing) for ev in events]
        return df.concat_rows(rows)

    def own_targets(
        self, p: list[float], scores: np.ndarray, rows: Batch
    ) -> dict[str, list[float]]:
        excluded = [j for j, v in enumerate(p) if v <= 0.0]
        variances = self.scores(rows)[1] if self.policy.name in VARIANCE_POLICIES else None
        q = self.policy.probabilities(scores, variances, excluded, self.rewards_learned + 1)
        return {CHALLENGER: [float(v) for v in q.tolist()]}

    def side_by_side(self) -> dict[str, Any]:
        """What its leader's ``GET`` lists of it, beside the other followers' figures."""
        d = self.settings_of
        return {
            "policy": {"name": d["policy"], "params": d["policy_params"]},
            "rewards_learned": self.rewards_learned,
            "evaluation": {t: e.summary() for t, e in self.evaluations.items()},
        }

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "challenger": {"follows": self.leader, "features_reencoded": self.reencode},
        }


class DecisionKind(DecisionAdapter):
    """The ``decision`` kind's adapter class (:mod:`service.models.kinds`): builds a
    :class:`DecisionAdapter`, or a :class:`ChallengerAdapter` from a follower's config.
    (Here, not in :mod:`service.models.decision`, which this module imports.)"""

    @classmethod
    def _class_for(cls, config: dict[str, Any]) -> type[DecisionAdapter]:
        return ChallengerAdapter if config.get("follows") is not None else DecisionAdapter

    @classmethod
    def create(cls, config: dict[str, Any]) -> DecisionAdapter:
        return cls._class_for(config).create(config)

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> DecisionAdapter:
        return cls._class_for(config).from_checkpoint(config, blob)
