"""Contextual bandits (issue 34), the library half: exploration policies and the
deterministic draw (:mod:`.explore`), progressive off-policy estimators
(:mod:`.estimators`), DSJSON decision logs (:mod:`.dsjson`) and the Open Bandit
Dataset reader and DSJSON writer (:mod:`.open_bandit`; BTS's published Beta prior in
:mod:`.open_bandit_prior`)."""

from learners.decisions.estimators import DR, IPS, SNIPS, Evaluation, dr_parts
from learners.decisions.explore import (
    POLICIES,
    UCB,
    Decision,
    EpsilonGreedy,
    Policy,
    Softmax,
    SquareCB,
    Thompson,
    decide,
    draw,
    event_uniform,
    make_policy,
)

__all__ = [
    "DR",
    "IPS",
    "POLICIES",
    "SNIPS",
    "UCB",
    "Decision",
    "EpsilonGreedy",
    "Evaluation",
    "Policy",
    "Softmax",
    "SquareCB",
    "Thompson",
    "decide",
    "dr_parts",
    "draw",
    "event_uniform",
    "make_policy",
]
