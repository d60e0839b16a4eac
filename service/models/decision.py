"""Adapter for decision models (contextual bandits): rank actions for a context with an
exploration policy, learn the chosen action's reward later.

Config (``PUT /models/{name}``)::

    {"algorithm": "decision",
     "features": {"kind": "hashed", "bits": 20},
     "reward_model": {"algorithm": "auto"},
     "exploration": {"policy": "squarecb",
                     "params": {"gamma": 10, "gamma_exponent": 0.5, "gamma_action_exponent": 0.5}},
     "seed": 0, "max_actions": 256, "reward_range": [-1e6, 1e6], "weighting": "none",
     "crossing": "hash"}

The reward model is an online regressor (:mod:`service.models.regression`'s algorithms)
shared over every action, on the rows of :mod:`service.models.decision_features`
(action id, action features, context x action id, context x action features), hashed,
the crosses' columns combined from the two sides' hashes
(:mod:`service.models.decision_crossing`; ``"crossing": "names"`` hashes their names);
with ``"features": {"kind": "records", ...}`` the context is a raw record, encoded and
crossed as :mod:`service.models.decision_records` says.
The default is ``auto`` (:mod:`service.models.decision_candidates`): AROW and SGD
regression both learn every reward, and the other takes over when its policy's value
on the model's own logged decisions is over the serving one's by a standard error;
neither is the better on every problem (bench/README.md, issue 34). With ``thompson``
or ``ucb`` (they need a variance) the default is AROW regression. The policy is one of
:mod:`learners.decisions.explore` (``epsilon_greedy``, ``softmax``, ``squarecb``,
``thompson``, ``ucb``); the default is SquareCB with γ_t = 10·√(K·t) (K: the eligible
actions, t: rewards learned + 1): Foster & Rakhlin's γ grows as √(K·T); VW's default,
10·√t without K, was level or lower on each of the four bake-off sets over seeds
(bench/README.md, issue 34). SquareCB was the best of ours on a9a as a 2-action bandit
(softmax at τ = 0.05 leaves almost no mass off the best action and so makes poor
off-policy estimates). The draw is :func:`~learners.decisions.explore.event_uniform` of the event
id and ``seed``.

A reward learns the chosen action's row with the reward as target and weight 1
(``"weighting": "none"``, the default: SquareCB's oracle is plain square-loss
regression) or importance weight 1/p (``"ips"``, VW's ``mtr``), or with weight 1 towards
the doubly robust estimate of its reward (``"dr"``, VW's ``dr``). Each
applied reward also updates, before the reward model learns it, the progressive
off-policy estimates (IPS, SNIPS, DR with 95 % intervals,
:class:`learners.decisions.estimators.Evaluation`) of four policies on the logged
decisions: ``served`` (the logging policy itself: its value is the mean reward),
``learned`` (greedy on the reward model as it is at that point), ``first`` (the first
eligible action) and ``uniform``. They are model state: applied in log order, kept in
checkpoints, part of the state digest.

A decision model with ``"follows": "<leader>"`` is a challenger
(:mod:`service.models.decision_follower`): it learns the leader's decisions and rewards
and estimates its own policy on them; it does not rank.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np
import orjson

from learners.base import UpdateResult
from learners.decisions.dsjson import format_timestamp
from learners.decisions.estimators import Evaluation
from learners.decisions.explore import Policy, decide, make_policy
from learners.features import Batch
from service.errors import ServiceError, conflict, invalid
from service.models import decision_features as df
from service.models import decision_names as dn
from service.models import decision_records as dr
from service.models import decision_rewards as rewards
from service.models import record_entries
from service.models.decision_candidates import AUTO, AUTO_CANDIDATES, Candidates
from service.models.decision_config import (
    VARIANCE_POLICIES,
    check_reward,
    decision_config,
    default_config,
    reward_model,
)
from service.models.regression import ALGORITHMS as REWARD_ALGORITHMS
from service.models.regression import RegressionAdapter, _with_targets, merge_results

if TYPE_CHECKING:
    from service.settings import Settings

DECISION_KEYS = ("reward_model", "exploration", "seed", "max_actions", "reward_range",
                 "weighting", "default_reward", "reward_wait_seconds", "mode",
                 "crossing")  # fmt: skip
TARGETS = ("served", "learned", "first", "uniform")


class RankInput(NamedTuple):
    """A rank body checked and encoded: action ids, excluded rows, every action's row,
    the context and actions' features as sent."""

    ids: list[str]
    excluded: list[int]
    batch: Batch
    context: dict[str, Any]
    features: list[dict[str, Any]]


class DecisionAdapter(RegressionAdapter):
    kind: ClassVar[str] = "decision"
    tensor_task: ClassVar[str | None] = None

    def __init__(self, config: dict[str, Any], model: Any) -> None:
        super().__init__(config, model)
        d = config["decision"]
        self.policy: Policy = make_policy(d["policy"], d["policy_params"])
        self.rewards_learned = 0
        self.evaluations = {t: Evaluation() for t in TARGETS}
        # "apprentice": serve the first eligible action (the caller's own choice) while
        # learning; "learning": explore. Model state, switched by a log entry.
        self.mode: str = d.get("mode", "learning")
        self.agreement = [0, 0]  # rewards evaluated, of which the learned greedy = served
        # how a hashed context is crossed with the actions (decision_crossing): names for
        # a model created before the hash crossing, whose stored config has none
        self.crossing: str = d.get("crossing", "names")
        dn.set_limit(model, d.get("max_feature_names", 100_000))  # (configs made before it)
        # "auto": the reward model serving is chosen among candidates
        # (decision_candidates); self.model is the one serving
        names = d.get("candidates")
        self.candidates = Candidates.of(names, model) if names else None

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def normalize_config(cls, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
        rest = {k: v for k, v in body.items() if k not in DECISION_KEYS and k != "algorithm"}
        if "params" in rest:
            raise invalid("params: a decision model's regressor takes its params under "
                          "reward_model.params", "params")  # fmt: skip
        features = rest.get("features")
        if isinstance(features, dict) and features.get("kind") == "records":
            rest["features"] = dr.context_features(features, settings)  # a raw-record context
        elif not isinstance(features, dict) or features.get("kind") != "hashed":
            raise invalid('features: a decision model takes {"kind": "hashed", "bits": n} '
                          '(named context and action features) or {"kind": "records", '
                          '"bits": n, "fields": {...}} (a raw-record context)',
                          "features")  # fmt: skip
        algorithm, learner, params = reward_model(body, REWARD_ALGORITHMS)
        reg_body = {**rest, "algorithm": learner, "params": params}
        try:
            config = super().normalize_config(reg_body, settings)
        except ServiceError as e:
            if e.field and e.field.startswith("params"):
                e.field = f"reward_model.{e.field}"
            raise
        config["decision"] = decision_config(body, algorithm)
        if algorithm == AUTO:  # (decision_candidates)
            config["decision"]["candidates"] = list(AUTO_CANDIDATES)
        config["decision"].update(default_config(body, config["decision"], settings))
        return config

    @classmethod
    def create(cls, config: dict[str, Any]) -> DecisionAdapter:
        adapter = super().create(config)
        assert isinstance(adapter, DecisionAdapter)
        return adapter

    @classmethod
    def from_checkpoint(cls, config: dict[str, Any], blob: bytes) -> DecisionAdapter:
        from learners import artifact
        from learners.regression import LinearRegressor

        art = artifact.loads(blob, expected_kind="regression")  # read once: candidates' too
        adapter = cls(config, LinearRegressor.from_artifact(art))
        if adapter.spec.stateful:
            record_entries.restore_statistics(adapter.spec, art.meta)
        saved = art.meta.get("decisions") or {}
        adapter.rewards_learned = int(saved.get("t", 0))
        adapter.mode = str(saved.get("mode", adapter.mode))
        adapter.agreement = [int(v) for v in saved.get("agree", [0, 0])]
        for t, d in (saved.get("ope") or {}).items():
            adapter.evaluations[t] = Evaluation.from_dict(d)
        if adapter.candidates is not None:
            adapter.candidates.restore(saved.get("candidates"), art.arrays)
        return adapter

    def snapshot(self, meta: dict[str, Any] | None = None) -> Callable[[], bytes | memoryview]:
        return super().snapshot({**(meta or {}), "decisions": self._state()})

    def snapshot_arrays(self) -> dict[str, np.ndarray] | None:
        return None if self.candidates is None else self.candidates.arrays()

    def _state(self) -> dict[str, Any]:
        ope = {t: e.to_dict() for t, e in self.evaluations.items()}
        state = {
            "t": self.rewards_learned,
            "ope": ope,
            "mode": self.mode,
            "agree": list(self.agreement),
        }
        if self.candidates is not None:
            state["candidates"] = self.candidates.state()
        return state

    def state_digest(self) -> str:
        both = super().state_digest().encode() + orjson.dumps(
            self._state(), option=orjson.OPT_SORT_KEYS
        )
        if self.candidates is not None:  # every candidate's learned state
            both += ":".join(self.candidates.digests()).encode()
        return hashlib.sha256(both).hexdigest()

    @property
    def reward_model_name(self) -> str:
        """The reward model serving: the config's, or ``auto``'s candidate serving now."""
        if self.candidates is not None:
            return self.candidates.names[self.candidates.serving]
        return str(self.settings_of["reward_algorithm"])

    @property
    def reward_models(self) -> list[Any]:
        """Every reward model that learns a reward: the one serving, then the others."""
        return [self.model] + ([] if self.candidates is None else self.candidates.others())

    @classmethod
    def warmup(cls) -> None:
        RegressionAdapter.warmup()

    # ------------------------------------------------------------ not for this kind
    def parse_update(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> tuple[bytes, int]:
        raise conflict("decision_model", "a decision model learns from POST "
                       "/models/{name}/reward, not from /update", "model")  # fmt: skip

    def parse_update_raw(self, raw: bytes, settings: Settings) -> Any:
        return None

    def predict(
        self, body: dict[str, Any], settings: Settings, raw: bytes = b""
    ) -> list[dict[str, Any]]:
        raise conflict("decision_model", "a decision model answers POST "
                       "/models/{name}/rank, not /predict", "model")  # fmt: skip

    def predict_batch(self, batch: Batch) -> list[dict[str, Any]]:
        raise conflict("decision_model", "a decision model answers POST /models/{name}/rank")

    # ------------------------------------------------------------ rank
    @property
    def settings_of(self) -> dict[str, Any]:
        d: dict[str, Any] = self.config["decision"]
        return d

    def encode_rank(self, body: dict[str, Any], settings: Settings) -> RankInput:
        """A rank body checked and encoded (its actions' rows): reads nothing of the
        learned state, so it may run in a thread while the model learns."""
        actions = df.check_actions(body, int(self.settings_of["max_actions"]))
        ids = [str(a["id"]) for a in actions]
        excluded = df.excluded_rows(body, ids)
        limit = settings.max_features_per_example
        batch = dr.rank_rows(self.spec, body.get("context"), actions, limit, self.crossing)
        feats = [a.get("features") or {} for a in actions]
        return RankInput(ids, excluded, batch, body.get("context") or {}, feats)

    def scores(self, batch: Batch) -> tuple[np.ndarray, np.ndarray | None]:
        """The reward model's score of each row, and the variance of its mean (AROW)."""
        scores, variances = self.model.predict_details(batch)
        if variances is not None:  # the mean's variance: less the noise part (empty row)
            empty = Batch(np.zeros(2, np.int64), np.zeros(0, np.int64), np.zeros(0), batch.dim)
            _, noise = self.model.predict_details(empty)
            variances = np.maximum(variances - float(noise[0]), 0.0)
        return scores, variances

    def rank(
        self,
        body: dict[str, Any] | RankInput,
        settings: Settings,
        event_id: str,
        version: int,
        log_as: DecisionAdapter | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """The decision for ``body`` (context, actions, excluded; or its ``encode_rank``)
        and the record to keep for its reward. Reads the model, changes nothing.
        ``log_as``: the leader whose log takes the record, when a promoted challenger
        decides (the record holds the rows as the leader encodes them)."""
        x = body if isinstance(body, RankInput) else self.encode_rank(body, settings)
        d = self.settings_of
        scores, variances = self.scores(x.batch)
        if d["policy"] in VARIANCE_POLICIES and variances is None:
            raise conflict("no_variance", f"{d['policy']} needs a reward model with a "
                           "variance (arow_regression)", "exploration")  # fmt: skip
        if not np.isfinite(scores).all():
            raise conflict("nonfinite_scores", "the reward model scores an action non-finite")
        if self.mode == "apprentice":  # the first eligible action, surely
            dec = df.first_eligible(scores, x.excluded)
        else:
            dec = decide(self.policy, scores, variances, event_id=event_id, seed=int(d["seed"]),
                         excluded=x.excluded, t=self.rewards_learned + 1)  # fmt: skip
        probs = [float(p) for p in dec.probabilities.tolist()]
        event = {
            "id": event_id, "ids": x.ids, "p": probs, "a": dec.action, "v": version,
            "ts": format_timestamp(datetime.now(UTC)), "ctx": x.context, "feat": x.features,
        }  # fmt: skip
        listed = [float(v) for v in scores.tolist()]
        rows = x.batch
        if log_as is not None and (
            log_as.spec.to_config() != self.spec.to_config() or log_as.crossing != self.crossing
        ):
            ev = {"ids": x.ids, "ctx": x.context, "feat": x.features}
            limit = settings.max_features_per_example
            rows = dr.event_rows(log_as.spec, ev, limit, log_as.crossing)
        record = df.encode_event(rows, {**event, "s": listed, "rank": dec.ranking})
        return df.answer_of(event, listed, dec.ranking), record

    def record_seconds(self, settings: Settings) -> float:
        """How long an event's decision is kept for its reward: with a default reward,
        the wait and then a grace (the time the sweep has to learn the default: see
        :mod:`service.engine.decision_defaults`); else ``feedback_ttl_seconds``."""
        d = self.settings_of
        if d.get("default_reward") is None:
            return float(settings.feedback_ttl_seconds)
        wait = float(d["reward_wait_seconds"])
        return wait + default_grace(wait)

    def check_reward(self, r: Any, loc: str) -> float:
        return check_reward(self.settings_of["reward_range"], r, loc)

    # ------------------------------------------------------------ learn
    def check_update(self, payload: bytes) -> None:
        x, y, w, (_, events) = rewards.learned_rows(self, payload)
        t = rewards.targets(self, x, y, events)
        row = rewards.first_nonfinite_row(self.reward_models, x, t, w)
        if row is not None:
            loc = f"rewards[{row}].reward"
            raise invalid(f"{loc}: learning it would make the reward model's weights "
                          "non-finite", loc)  # fmt: skip

    def forget_checked(self, payload: bytes) -> None:
        return None

    def apply(self, payload: bytes) -> UpdateResult:
        """Each event in order: its off-policy estimates from the reward model as it is,
        then the chosen action's row learned. Refused whole (the state unchanged) when
        it would make the weights non-finite."""
        mode = df.mode_of(payload, self.spec.dim)
        if mode is not None:  # a switch of mode (POST /models/{name}/mode)
            self.mode = mode
            return UpdateResult(applied=0)
        x, y, w, (batch, events) = rewards.learned_rows(self, payload)
        t = rewards.targets(self, x, y, events)
        if rewards.first_nonfinite_row(self.reward_models, x, t, w) is not None:
            raise ValueError("rewards: learning them would make the weights non-finite")
        results, start = [], 0
        for i, ev in enumerate(events):
            k = len(ev["ids"])
            rows = batch.take(list(range(start, start + k)))
            scores = rewards.evaluate(self, ev, y[i], rows)
            if self.candidates is not None:
                t_i = self.rewards_learned + 1
                self.candidates.observe(self.policy, ev, y[i], rows, t_i, scores)
            serving, *others = self.reward_models
            results.append(serving.update(x.take([i]), [t[i]], [w[i]]))
            for other in others:
                other.update(x.take([i]), [t[i]], [w[i]])
            if self.candidates is not None:  # after each event, whatever the entries
                self.model = self.candidates.choose()  # (by the policies' values)
            self.rewards_learned += 1
            start += k
        dn.record(
            self.model, self.spec, self.crossing, events, x
        )  # the learned rows' names (/weights)
        result = merge_results(results)
        return _with_targets(result, y, None, self.model.y_std_)

    def own_rows(self, batch: Batch, events: list[dict[str, Any]]) -> Batch:
        """A reward entry's rows as this model reads them (a challenger: its own)."""
        return batch

    def own_targets(
        self, p: list[float], scores: np.ndarray, rows: Batch
    ) -> dict[str, list[float]]:
        """More policies to evaluate on an event (a challenger: its own policy)."""
        return {}

    # ------------------------------------------------------------ reading
    def policy_values(self) -> dict[tuple[str, str], float]:
        """Each (policy, estimator)'s estimate, for the gauges (after an applied entry);
        ``auto``'s candidates' policies as ``candidate:<reward model>``."""
        out = {}
        evaluations = dict(self.evaluations)
        if self.candidates is not None:
            for name, value in zip(self.candidates.names, self.candidates.values, strict=True):
                evaluations[f"candidate:{name}"] = value
        for t, e in evaluations.items():
            for est in (e.ips, e.snips, e.dr):
                if est.n:
                    out[(t, est.kind)] = float(est.estimate)
        return out

    def describe(self) -> dict[str, Any]:
        d = self.settings_of
        return {
            **super().describe(),
            "policy": {"name": d["policy"], "params": d["policy_params"]},
            "reward_model": d["reward_algorithm"],
            **({} if self.candidates is None else {"reward_models": self.candidates.describe()}),
            "rewards_learned": self.rewards_learned,
            "mode": self.mode,
            "agreement": {
                "n": self.agreement[0],
                "rate": self.agreement[1] / self.agreement[0] if self.agreement[0] else None,
            },
            "evaluation": {t: e.summary() for t, e in self.evaluations.items()},
        }


def default_grace(wait: float) -> float:
    """How late the default-reward sweep may be before an unrewarded event expires."""
    return max(60.0, wait)
