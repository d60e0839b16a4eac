"""numba kernels for the online pairwise RankSVM (Pegasos steps with a scaled weight vector).

The weight vector is ``w = s * v``: the Pegasos shrink ``w <- (1 - eta*lam) w`` is
``s <- (1 - eta*lam) s`` in O(1), and a sparse step ``w += c d`` is ``v += (c/s) d``.
``state = [s, ||w||^2]`` (float64) and ``counters = [t, rng_counter]`` (int64) are the
rest of the learner state, so the kernel is a pure function of (state, input).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from learners.ranking._ndcg_kernels import group_ndcg

_RENORM = 1e-9  # fold s into v below this, before v's entries grow large

# --------------------------------------------------------------------------- RNG


@njit(cache=True)
def splitmix64(seed: int, counter: int) -> np.uint64:
    """Counter-based 64-bit draw: SplitMix64's finaliser of ``seed * phi + counter * gamma``.

    The draw depends only on (seed, counter); the counter is learner state, so a
    saved model continues the same stream after loading.
    """
    z = (
        np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        + np.uint64(counter) * np.uint64(0xBF58476D1CE4E5B9)
        + np.uint64(0x94D049BB133111EB)
    )
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def draw_below(seed: int, counters: np.ndarray, m: int) -> int:
    """Uniform integer in [0, m) from the next counter value (multiply-shift on the top 32 bits)."""
    u = splitmix64(seed, counters[1])
    counters[1] += 1
    return int(((u >> np.uint64(32)) * np.uint64(m)) >> np.uint64(32))


# --------------------------------------------------------------------------- linear algebra


@njit(cache=True)
def row_dot(
    v: np.ndarray, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, r: int
) -> float:
    acc = 0.0
    for t in range(indptr[r], indptr[r + 1]):
        acc += v[indices[t]] * values[t]
    return acc


@njit(cache=True)
def diff_sqnorm(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, a: int, b: int
) -> float:
    """||x_a - x_b||^2 by merging the two sorted rows."""
    i, ie = indptr[a], indptr[a + 1]
    j, je = indptr[b], indptr[b + 1]
    acc = 0.0
    while i < ie or j < je:
        if j >= je or (i < ie and indices[i] < indices[j]):
            acc += values[i] * values[i]
            i += 1
        elif i >= ie or indices[j] < indices[i]:
            acc += values[j] * values[j]
            j += 1
        else:
            d = values[i] - values[j]
            acc += d * d
            i += 1
            j += 1
    return acc


@njit(cache=True)
def scores(
    v: np.ndarray, s: float, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> np.ndarray:
    n = indptr.shape[0] - 1
    out = np.empty(n)
    for r in range(n):
        out[r] = s * row_dot(v, indptr, indices, values, r)
    return out


# --------------------------------------------------------------------------- progressive metric

MAX_GRADED = 30.0  # 2**r - 1 gains stay exact float64 sums up to here (LightGBM's limit too)


@njit(cache=True)
def progressive_ndcg(scores: np.ndarray, rel: np.ndarray, k: int) -> float:
    """NDCG@k of one query: LightGBM's exponential gain ``2**r - 1`` when every relevance
    is an integer in [0, 30] (graded labels), else the linear gain ``r - min(r)``.

    Real-valued relevance (e.g. 25..346) would make ``2**r`` overflow or let one item
    swamp the rest; shifting by the query's minimum keeps the gain >= 0 and leaves the
    figure unchanged by adding a constant to every relevance, as the pairs are.
    """
    n = rel.shape[0]
    lo = rel[0]
    graded = True
    for i in range(n):
        r = rel[i]
        lo = min(lo, r)
        if r < 0.0 or r > MAX_GRADED or r != np.floor(r):
            graded = False
    if graded:
        return group_ndcg(scores, rel, 0, n, k)
    kk = min(k, n)
    order = np.argsort(-scores, kind="mergesort")  # stable: ties in input order
    ideal = np.sort(rel)[::-1]
    dcg = 0.0
    idcg = 0.0
    for i in range(kk):
        disc = np.log2(i + 2.0)
        dcg += (rel[order[i]] - lo) / disc
        idcg += (ideal[i] - lo) / disc
    if idcg <= 0.0:
        return 1.0  # all relevances equal: any order is ideal (as LightGBM's all-zero case)
    return dcg / idcg


# --------------------------------------------------------------------------- Pegasos


@njit(cache=True)
def pegasos_pair(
    v: np.ndarray,
    state: np.ndarray,
    counters: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    a: int,
    b: int,
    y: float,
    lam: float,
    projection: bool,
    h: float,
) -> int:
    """One Pegasos step on d = x_a - x_b with sign y and importance weight h (the
    pair's loss counts h times, so its subgradient step is h times as long; the
    regularisation shrink is not weighted); returns 1 if the hinge was active."""
    counters[0] += 1
    t = counters[0]
    eta = 1.0 / (lam * t)
    s = state[0]
    vd = row_dot(v, indptr, indices, values, a) - row_dot(v, indptr, indices, values, b)
    margin = y * s * vd  # y <w_t, d>, before the shrink
    shrink = 1.0 - eta * lam
    if shrink <= 0.0:
        # t = 1: the shrink zeroes w; reset explicitly (s = 0 cannot be divided by)
        v[:] = 0.0
        state[0] = 1.0
        state[1] = 0.0
        vd = 0.0
    else:
        state[0] = s * shrink
        state[1] = state[1] * shrink * shrink
    active = 0
    if margin < 1.0:
        active = 1
        s = state[0]
        c = eta * y * h
        wd = s * vd  # <w, d> after the shrink
        dd = diff_sqnorm(indptr, indices, values, a, b)
        state[1] = max(state[1] + 2.0 * c * wd + c * c * dd, 0.0)
        k = c / s
        for p in range(indptr[a], indptr[a + 1]):
            v[indices[p]] += k * values[p]
        for p in range(indptr[b], indptr[b + 1]):
            v[indices[p]] -= k * values[p]
    if projection and state[1] > 1.0 / lam:
        state[0] *= 1.0 / np.sqrt(lam * state[1])
        state[1] = 1.0 / lam
    if state[0] < _RENORM:
        # fold the scale into v (O(d), rare) and recompute ||w||^2 exactly
        v *= state[0]
        state[0] = 1.0
        # a loop, not np.dot: numba's np.dot needs SciPy's BLAS, which the runtime install
        # (`pip install .`, the Docker image) does not have
        sq = 0.0
        for i in range(v.shape[0]):
            sq += v[i] * v[i]
        state[1] = sq
    return active


@njit(cache=True)
def update_groups(
    v: np.ndarray,
    state: np.ndarray,
    counters: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray,
    rel: np.ndarray,
    offsets: np.ndarray,
    lam: float,
    pairs_per_group: int,
    projection: bool,
    seed: int,
    metric_k: int,
    ndcg_out: np.ndarray,
    gw: np.ndarray,
) -> int:
    """Learn from each query group in order; ndcg_out[q] = NDCG@k of the pre-update scores
    (``progressive_ndcg``: exponential gain for graded relevance, else linear).

    Pairs: all pairs (i < j, lexicographic) with different relevance when
    ``pairs_per_group < 0`` or the group has at most that many; otherwise
    ``pairs_per_group`` draws of (a uniform item a, a uniform item b among those
    whose relevance differs from a's). ``gw``: per-group importance weights (empty:
    1.0 for every group). Returns the number of active (updating) pairs.
    """
    n_active = 0
    weighted = gw.shape[0] > 0
    for q in range(offsets.shape[0] - 1):
        h = gw[q] if weighted else 1.0
        lo = offsets[q]
        hi = offsets[q + 1]
        n = hi - lo
        sc = np.empty(n)
        for i in range(n):
            sc[i] = state[0] * row_dot(v, indptr, indices, values, lo + i)
        ndcg_out[q] = progressive_ndcg(sc, rel[lo:hi], metric_k)
        n_pairs = 0
        for i in range(n):
            for j in range(i + 1, n):
                if rel[lo + i] != rel[lo + j]:
                    n_pairs += 1
        if n_pairs == 0:
            continue
        if pairs_per_group < 0 or n_pairs <= pairs_per_group:
            for i in range(n):
                for j in range(i + 1, n):
                    if rel[lo + i] != rel[lo + j]:
                        y = 1.0 if rel[lo + i] > rel[lo + j] else -1.0
                        n_active += pegasos_pair(
                            v, state, counters, indptr, indices, values,
                            lo + i, lo + j, y, lam, projection, h,
                        )  # fmt: skip
        else:
            for _ in range(pairs_per_group):
                a = draw_below(seed, counters, n)
                m = 0
                for j in range(n):
                    if rel[lo + j] != rel[lo + a]:
                        m += 1
                k = draw_below(seed, counters, m)
                b = -1
                for j in range(n):
                    if rel[lo + j] != rel[lo + a]:
                        if k == 0:
                            b = j
                            break
                        k -= 1
                y = 1.0 if rel[lo + a] > rel[lo + b] else -1.0
                n_active += pegasos_pair(
                    v, state, counters, indptr, indices, values,
                    lo + a, lo + b, y, lam, projection, h,
                )  # fmt: skip
    return n_active
