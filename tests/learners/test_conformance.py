"""One contract, every online learner.

Each learner is one :class:`ConformanceCase` in ``ONLINE_LEARNER_CASES`` below
(add new online learners there). The suite checks, for every case:

- a batch is a transport: ``update(batch)`` equals a loop of single-unit updates
  (a unit is one example, or one query group for rankers), bit for bit;
- to_bytes/from_bytes round trip: identical predictions and identical further updates;
- a bad example (NaN value, wrong dimension, bad target) rejects the whole batch and
  leaves the state unchanged;
- same seed and stream -> same state;
- unseen features (and, for classifiers, new labels) are learned;
- an example with no features (the zero vector) is learned without NaN/inf, and
  leaves a classifier's or regressor's weights unchanged (a regressor still learns
  the target's mean from it, and predicts that mean for it);
- the order of features within an example does not matter;
- importance weights (one per unit): all ones is the unweighted update bit for bit,
  a weighted batch equals the loop of weighted units, a weight changes the model,
  and a bad weight (0, negative, NaN, inf, not a number, wrong count) rejects the
  batch and leaves the state unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from learners.base import UpdateResult
from learners.features import Batch, FeatureSpec
from learners.linear import ALGORITHMS, LinearClassifier, make_classifier
from learners.regression import ALGORITHMS as REGRESSION_ALGORITHMS
from learners.regression import LinearRegressor, make_regressor

DIM = 16


@dataclass(frozen=True)
class Stream:
    """Wire-form examples (sparse ``{index: value}`` maps) and their targets.

    ``groups`` (rankers) are the sizes of consecutive query groups; a classifier
    stream has none and its units are single examples.
    """

    rows: list[dict[int, float]]
    targets: list[Any]
    groups: list[int] | None = None

    def units(self) -> list[Stream]:
        """The smallest pieces an update can be split into (examples or query groups)."""
        if self.groups is None:
            return [Stream([r], [t]) for r, t in zip(self.rows, self.targets, strict=True)]
        out, start = [], 0
        for g in self.groups:
            out.append(Stream(self.rows[start : start + g], self.targets[start : start + g], [g]))
            start += g
        return out


@dataclass(frozen=True)
class ConformanceCase:
    """How to build, feed and query one online learner for the shared suite.

    - ``make(dim)``: a fresh learner;
    - ``stream(rng, phase)``: a random stream; phase 1 uses features [0, DIM/2) and
      the first targets, phase 2 features [DIM/2, DIM) and (classifiers) new labels;
    - ``bad_targets``: target values the learner must reject (with their position);
    - ``update(model, batch, stream)`` and ``predict(model, batch)``;
    - ``weighted(model, batch, stream, weights)``: ``update`` with one importance
      weight per unit (example, or query group).
    """

    name: str
    make: Callable[[int], Any]
    stream: Callable[[np.random.Generator, int], Stream]
    bad_targets: list[Any]
    update: Callable[[Any, Batch, Stream], UpdateResult] = field(
        default=lambda m, b, s: m.update(b, s.targets)
    )
    predict: Callable[[Any, Batch], np.ndarray] = field(
        default=lambda m, b: np.asarray(m.decision_function(b))
    )
    load: Callable[[bytes], Any] = field(default=LinearClassifier.from_bytes)
    weighted: Callable[[Any, Batch, Stream, Any], UpdateResult] = field(
        default=lambda m, b, s, w: m.update(b, s.targets, w)
    )
    # real-valued targets: errors are |y - ŷ|, not 0/1 hits
    regression: bool = False


def _rows(rng: np.random.Generator, n: int, phase: int) -> list[dict[int, float]]:
    lo = 0 if phase == 1 else DIM // 2
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 5))
        idx = rng.choice(np.arange(lo, lo + DIM // 2), size=k, replace=False)
        out.append({int(j): float(np.round(rng.normal(), 3)) for j in idx})
    return out


def _classifier_stream(rng: np.random.Generator, phase: int) -> Stream:
    rows = _rows(rng, 40, phase)
    pool: list[Any] = ["+1", 1, "-1"] if phase == 1 else ["x", 2, "+1"]
    # labels start binary ("+1" then 1, distinct) and become multiclass mid-stream
    targets = [pool[0] if i < 5 else pool[int(rng.integers(2 if i < 15 else 3))] for i in range(40)]
    targets[5] = pool[1]
    return Stream(rows, targets)


def _linear_case(algo: str, cov: str | None) -> ConformanceCase:
    params = {} if cov is None else {"covariance": cov}
    return ConformanceCase(
        name=f"{algo}-{cov or 'nocov'}",
        make=lambda dim: make_classifier(algo, dim, params),
        stream=_classifier_stream,
        bad_targets=[True, 1.5, "", None],
    )


def _regression_stream(rng: np.random.Generator, phase: int) -> Stream:
    """y = 1e3·(w·x) + 5e4 + noise: a scale far from 1 (the learner standardises it)."""
    rows = _rows(rng, 40, phase)
    w_true = np.linspace(-2.0, 3.0, DIM)
    targets = [
        float(np.round(1e3 * sum(w_true[j] * v for j, v in row.items()) + 5e4, 3))
        + float(np.round(rng.normal(0.0, 50.0), 3))
        for row in rows
    ]
    targets[3] = round(targets[3])  # an integer target is a number too
    return Stream(rows, targets)


def _regression_case(algo: str, cov: str | None) -> ConformanceCase:
    params = {} if cov is None else {"covariance": cov}
    return ConformanceCase(
        name=f"regression-{algo}-{cov or 'nocov'}",
        make=lambda dim: make_regressor(algo, dim, params),
        stream=_regression_stream,
        bad_targets=[True, "1.5", None, float("nan"), float("inf")],
        predict=lambda m, b: m.predict(b),
        load=LinearRegressor.from_bytes,
        regression=True,
    )


def _ranksvm_case() -> ConformanceCase | None:
    try:
        from learners.ranking.ranksvm import RankSVM
    except ImportError:  # pragma: no cover - the ranker is optional for this suite
        return None

    def stream(rng: np.random.Generator, phase: int) -> Stream:
        groups = [int(g) for g in rng.integers(2, 7, size=6)]
        rows = _rows(rng, sum(groups), phase)
        return Stream(rows, [int(r) for r in rng.integers(0, 4, size=len(rows))], groups)

    return ConformanceCase(
        name="ranksvm",
        make=lambda dim: RankSVM(dim, seed=3),
        stream=stream,
        bad_targets=[True, "2", float("nan"), float("inf")],  # any finite real is a relevance
        update=lambda m, b, s: m.update(b, s.targets, groups=s.groups),
        load=RankSVM.from_bytes,
        weighted=lambda m, b, s, w: m.update(b, s.targets, groups=s.groups, group_weight=w),
    )


# ---------------------------------------------------------------- the case list
# Every online learner of learnserve, one entry each. Add new online learners here.
ONLINE_LEARNER_CASES: list[ConformanceCase] = [
    *(_linear_case(a, None) for a in ALGORITHMS if a.startswith("pa")),
    *(
        _linear_case(a, c)
        for a in ALGORITHMS
        if not a.startswith("pa")
        for c in ("diagonal", "full")
    ),
    *(c for c in [_ranksvm_case()] if c is not None),
    *(_regression_case(a, None) for a in REGRESSION_ALGORITHMS if a.startswith("pa")),
    *(_regression_case("arow", c) for c in ("diagonal", "full")),
]

SPEC = FeatureSpec.sparse(DIM)


def _encode(s: Stream) -> Batch:
    return SPEC.encode(s.rows)


def _concat(a: Stream, b: Stream) -> Stream:
    groups = None if a.groups is None else [*a.groups, *(b.groups or [])]
    return Stream(a.rows + b.rows, a.targets + b.targets, groups)


@pytest.fixture(params=ONLINE_LEARNER_CASES, ids=lambda c: c.name)
def case(request: pytest.FixtureRequest) -> ConformanceCase:
    return request.param


def _trained(case: ConformanceCase, seed: int = 0) -> tuple[Any, Stream]:
    rng = np.random.default_rng(seed)
    s = case.stream(rng, 1)
    m = case.make(DIM)
    case.update(m, _encode(s), s)
    return m, s


def test_batch_equals_loop(case: ConformanceCase) -> None:
    rng = np.random.default_rng(1)
    s = _concat(case.stream(rng, 1), case.stream(rng, 2))
    whole = case.make(DIM)
    res = case.update(whole, _encode(s), s)
    looped = case.make(DIM)
    parts = [case.update(looped, _encode(u), u) for u in s.units()]
    assert whole.state_digest() == looped.state_digest()
    assert res.applied == sum(p.applied for p in parts) == len(s.rows)
    assert res.correct == sum(p.correct for p in parts)
    assert res.updates == sum(p.updates for p in parts)
    assert res.loss_sum == pytest.approx(sum(p.loss_sum for p in parts), rel=1e-12, abs=1e-12)
    assert res.metric_sum == pytest.approx(sum(p.metric_sum for p in parts), rel=1e-12)
    # and the split is not trivially "nothing happened"
    assert whole.state_digest() != case.make(DIM).state_digest()


def test_errors_are_the_progressive_loss_of_each_unit(case: ConformanceCase) -> None:
    """``UpdateResult.errors`` (the drift detectors' stream): one value per example
    (classifiers: 0/1, summing to the examples predicted wrong) or per query group
    (rankers: 1 - NDCG@10), the same in one batch as in a loop of single units."""
    rng = np.random.default_rng(5)
    s = _concat(case.stream(rng, 1), case.stream(rng, 2))
    res = case.update(case.make(DIM), _encode(s), s)
    looped = case.make(DIM)
    parts = [case.update(looped, _encode(u), u) for u in s.units()]
    assert res.errors is not None and all(p.errors is not None for p in parts)
    assert res.errors.tolist() == np.concatenate([p.errors for p in parts]).tolist()
    assert res.errors.shape[0] == len(s.units())
    if case.regression:  # |y - ŷ| of each example, summing to the loss
        assert (res.errors >= 0.0).all() and np.isfinite(res.errors).all()
        assert float(res.errors.sum()) == pytest.approx(res.loss_sum, rel=1e-12)
        assert float(res.errors.mean()) > 0.0
        return
    if s.groups is None:
        assert set(res.errors.tolist()) <= {0.0, 1.0}
        assert int(res.errors.sum()) == res.applied - res.correct
    else:
        assert float(res.errors.sum()) == pytest.approx(res.n_groups - res.metric_sum, abs=1e-9)
    assert 0.0 < float(res.errors.mean()) < 1.0  # a stream with mistakes and hits


def test_round_trip_is_bit_exact(case: ConformanceCase) -> None:
    m, _ = _trained(case)
    clone = case.load(m.to_bytes())
    assert type(clone) is type(m)
    assert clone.state_digest() == m.state_digest()
    probe = _encode(case.stream(np.random.default_rng(7), 1))
    assert np.array_equal(case.predict(clone, probe), case.predict(m, probe))
    more = case.stream(np.random.default_rng(8), 2)
    case.update(m, _encode(more), more)
    case.update(clone, _encode(more), more)
    assert clone.state_digest() == m.state_digest()
    assert np.array_equal(case.predict(clone, probe), case.predict(m, probe))


def _rejects(case: ConformanceCase, m: Any, batch: Any, s: Stream, exc: type = ValueError) -> None:
    before = m.state_digest()
    with pytest.raises(exc):
        case.update(m, batch, s)
    assert m.state_digest() == before


def test_bad_example_rejects_batch_and_leaves_state(case: ConformanceCase) -> None:
    m, _ = _trained(case)
    s = case.stream(np.random.default_rng(2), 2)
    good = _encode(s)
    # a NaN value, built by hand (the encoders refuse it earlier)
    vals = good.values.copy()
    vals[-1] = np.nan
    _rejects(case, m, Batch(good.indptr, good.indices, vals, DIM), s)
    vals[-1] = np.inf
    _rejects(case, m, Batch(good.indptr, good.indices, vals, DIM), s)
    # wrong dimension
    _rejects(case, m, FeatureSpec.sparse(DIM + 1).encode(s.rows), s)
    # bad target in the last position (all earlier examples are fine)
    for bad in case.bad_targets:
        t = list(s.targets)
        t[-1] = bad
        _rejects(case, m, good, Stream(s.rows, t, s.groups))
    # wrong number of targets
    _rejects(case, m, good, Stream(s.rows, s.targets[:-1], s.groups))
    # the model still learns afterwards
    before = m.state_digest()
    case.update(m, good, s)
    assert m.state_digest() != before


def test_same_seed_and_stream_same_state(case: ConformanceCase) -> None:
    a, _ = _trained(case, seed=4)
    b, _ = _trained(case, seed=4)
    c, _ = _trained(case, seed=5)
    assert a.state_digest() == b.state_digest()
    assert a.state_digest() != c.state_digest()


def test_unseen_features_and_new_targets(case: ConformanceCase) -> None:
    m, _ = _trained(case)
    probe = _encode(case.stream(np.random.default_rng(9), 2))
    before = case.predict(m, probe)
    s2 = case.stream(np.random.default_rng(3), 2)  # other features; classifiers: new labels
    res = case.update(m, _encode(s2), s2)
    assert res.applied == len(s2.rows)
    after = case.predict(m, probe)
    assert after.shape[0] == before.shape[0]
    assert not np.array_equal(_first_column(after), _first_column(before))
    assert np.all(np.isfinite(after))


def _first_column(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    return a.reshape(a.shape[0], -1)[:, 0]


def test_feature_order_does_not_matter(case: ConformanceCase) -> None:
    s = case.stream(np.random.default_rng(6), 1)
    rng = np.random.default_rng(0)
    shuffled = []
    for row in s.rows:
        items = list(row.items())
        rng.shuffle(items)
        shuffled.append({k: v for k, v in items})
    s2 = Stream(shuffled, s.targets, s.groups)
    a, b = case.make(DIM), case.make(DIM)
    case.update(a, _encode(s), s)
    case.update(b, _encode(s2), s2)
    assert a.state_digest() == b.state_digest()


def test_examples_with_no_features(case: ConformanceCase) -> None:
    """LIBSVM's w8a holds thousands of all-zero rows: ||x||^2 = 0 must not divide."""
    m, s = _trained(case)
    probe = _encode(s)
    classifier = isinstance(m, LinearClassifier | LinearRegressor)
    before = (
        [a.copy() for a in (m.state().mu, m.state().sigma) if a is not None] if classifier else []
    )
    units = s.units()[:3]
    zs = Stream([{} for u in units for _ in u.rows], [t for u in units for t in u.targets],
                None if s.groups is None else [len(u.rows) for u in units])  # fmt: skip
    r = case.update(m, _encode(zs), zs)
    assert r.applied == len(zs.rows) and np.isfinite(r.loss_sum) and np.isfinite(r.metric_sum)
    assert np.isfinite(case.predict(m, probe)).all()
    zero_scores = case.predict(m, _encode(Stream([{}], [s.targets[0]])))
    assert np.isfinite(zero_scores).all()
    if case.regression:  # a regressor predicts the target's mean for the zero vector
        assert zero_scores.tolist() == [m.y_mean_]
    else:
        assert not np.any(zero_scores)
    if classifier:
        after = [a for a in (m.state().mu, m.state().sigma) if a is not None]
        assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    # a zero vector among others: the batch still equals the loop
    mixed = Stream([{}, *s.rows[:3], {}], [s.targets[0], *s.targets[:3], s.targets[1]],
                   None if s.groups is None else [2, 3])  # fmt: skip
    a, b = case.make(DIM), case.make(DIM)
    case.update(a, _encode(mixed), mixed)
    for u in mixed.units():
        case.update(b, _encode(u), u)
    assert np.array_equal(case.predict(a, probe), case.predict(b, probe))


# ---------------------------------------------------------------- importance weights


def test_weight_one_is_unweighted_bit_exact(case: ConformanceCase) -> None:
    rng = np.random.default_rng(11)
    s = _concat(case.stream(rng, 1), case.stream(rng, 2))
    plain, ones = case.make(DIM), case.make(DIM)
    r0 = case.update(plain, _encode(s), s)
    r1 = case.weighted(ones, _encode(s), s, np.ones(len(s.units())))
    assert plain.state_digest() == ones.state_digest()
    assert (r0.correct, r0.loss_sum, r0.updates, r0.metric_sum) == (
        r1.correct, r1.loss_sum, r1.updates, r1.metric_sum,
    )  # fmt: skip
    listed = case.make(DIM)  # a list of ints is read as the same weights
    case.weighted(listed, _encode(s), s, [1] * len(s.units()))
    assert listed.state_digest() == plain.state_digest()


def test_weighted_batch_equals_loop_and_weights_matter(case: ConformanceCase) -> None:
    rng = np.random.default_rng(12)
    s = _concat(case.stream(rng, 1), case.stream(rng, 2))
    units = s.units()
    # below 1 every learner takes a smaller step (PA and CW ignore weights above 1)
    w = np.round(rng.uniform(0.05, 0.6, size=len(units)), 3)
    whole, looped = case.make(DIM), case.make(DIM)
    case.weighted(whole, _encode(s), s, w)
    for u, h in zip(units, w.tolist(), strict=True):
        case.weighted(looped, _encode(u), u, [h])
    assert whole.state_digest() == looped.state_digest()
    plain = case.make(DIM)
    case.update(plain, _encode(s), s)
    assert whole.state_digest() != plain.state_digest()


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "2", True, None])
def test_bad_weight_rejects_batch(case: ConformanceCase, bad: Any) -> None:
    m, _ = _trained(case)
    s = case.stream(np.random.default_rng(13), 2)
    w: list[Any] = [1.0] * len(s.units())
    w[-1] = bad
    before = m.state_digest()
    with pytest.raises((ValueError, TypeError), match=rf"\[{len(w) - 1}\]"):
        case.weighted(m, _encode(s), s, w)
    with pytest.raises(ValueError, match="expected"):  # one weight too few
        case.weighted(m, _encode(s), s, w[:-1])
    assert m.state_digest() == before
