"""numba kernel of normalised adaptive SGD regression (called from :mod:`._model`).

State ``w`` is d × 3: the weight wⱼ, the adaptive sum Gⱼ of squared gradients (in the
normalised coordinates) and the scale nⱼ = max |xⱼ| seen so far, side by side (a sparse
update touches one cache line per coordinate). ``stats`` is the regressors' scalars
(:mod:`._kernels`) and three more: ``[n_y, m, M2, H, N, lo, hi]`` with H = Σh,
N = Σ h·‖x̃‖² the global normaliser's sums (x̃ⱼ = xⱼ/nⱼ; AROW keeps its noise scale in
those two slots) and [lo, hi] the range of the targets seen.

The weights predict the centred target in its own units, ŷ = m + μ·x clipped to
[lo, hi] (not the standardised target: a scale s that moves as rewards arrive would
rescale every weight learned before, and a bandit's importance weights move it a lot).
The clip, as Vowpal Wabbit's, keeps a bandit's reward estimates in the range rewards
have (a decision model with this reward model and 1/p weights, progressive reward on
MNIST's first 2,000 rows as a 10-action bandit: 0.5455, 0.3305 without the clip; a9a's
first 10,000 rows: 0.8351, 0.8287). Each row,
after the prediction and the target's statistics (as in ``update_diag``; lo and hi take
y in): the error e = y − ŷ and its standardised size eₛ = e/s, then

1. nⱼ ← max(nⱼ, |xⱼ|); H += h; N += h‖x̃‖²;
2. Gⱼ += h·eₛ²·x̃ⱼ² (AdaGrad on the normalised coordinates, in units of s: the rates
   scale as 1/s, the steps as s, so a target in dollars or in cents learns alike);
3. the rate of coordinate j is ρⱼ = 1/(√Gⱼ·nⱼ²) (a step of wⱼ·nⱼ in the normalised
   coordinates is ρⱼ·nⱼ²: the AdaGrad rate), the global rate η·√(H/N) (a row with many
   features takes no larger a step; the square root as VW's default) and
   u = Σ xⱼ²ρⱼ, the prediction's change per unit of step;
4. the importance-invariant step: the gradient flow of the weighted loss h·½(ŷ − y)²
   along x∘ρ for a time η·√(H/N) moves ŷ to y + (ŷ − y)·exp(−h·η·√(H/N)·u), in closed
   form, so a weight h is h repeats of an infinitely small step, never an overshoot:
   wⱼ += e·(1 − exp(−h·η·√(H/N)·u))/u · xⱼ·ρⱼ (the fraction of the error a row takes
   does not depend on y's scale).

A row fails as ``update_diag``'s do (a non-finite prediction, statistic or weight);
with ``logging`` the changed coordinates are put back from the log of their old
(w, G, n).
"""

from __future__ import annotations

import math

from numba import njit

from learners.regression._kernels import _observe, _stats_finite, y_scale


@njit(cache=True)
def _undo3(w, log_ix, log_w, n_log):  # pragma: no cover - numba
    for k in range(n_log - 1, -1, -1):  # newest first: a coordinate written twice ends oldest
        j = log_ix[k]
        w[j, 0] = log_w[k, 0]
        w[j, 1] = log_w[k, 1]
        w[j, 2] = log_w[k, 2]


@njit(cache=True, error_model="numpy")
def _step(ix, vs, a, b, w, e, es, h, eta, stats):  # pragma: no cover - numba
    """Steps 1-4 of the module docstring for one row; True when μ changed."""
    sq = 0.0
    for k in range(a, b):
        j = ix[k]
        ax = abs(vs[k])
        if ax > w[j, 2]:
            w[j, 2] = ax
        if ax > 0.0:
            xt = vs[k] / w[j, 2]
            sq += xt * xt
    stats[3] += h
    stats[4] += h * sq
    u = 0.0
    for k in range(a, b):
        j = ix[k]
        x = vs[k]
        if x != 0.0:
            xt = x / w[j, 2]
            w[j, 1] += h * (es * es) * (xt * xt)
            if w[j, 1] > 0.0:
                u += x * x / (math.sqrt(w[j, 1]) * (w[j, 2] * w[j, 2]))
    if u <= 0.0 or stats[4] <= 0.0 or e == 0.0:
        return False
    rate = eta * math.sqrt(stats[3] / stats[4])
    size = e * (-math.expm1(-h * rate * u)) / u
    for k in range(a, b):
        j = ix[k]
        x = vs[k]
        if x != 0.0 and w[j, 1] > 0.0:
            w[j, 0] += size * x / (math.sqrt(w[j, 1]) * (w[j, 2] * w[j, 2]))
    return True


@njit(cache=True, error_model="numpy")
def update_sgd(
    ip, ix, vs, y, sw, w, eta, stats, pred, log_ix, log_w, logging
):  # pragma: no cover - numba
    """Learn rows [0, n) in order. Returns (failing row or -1, rows that changed μ).
    ``pred``: out, the pre-update ŷ per row. With ``logging`` the changes are undone on
    failure (``stats`` is the caller's to put back); ``log_ix``/``log_w`` (nnz × 3)
    hold at least nnz entries then."""
    n = ip.shape[0] - 1
    n_log = 0
    updates = 0
    for i in range(n):
        a, b = ip[i], ip[i + 1]
        h = sw[i] if sw.shape[0] > 0 else 1.0
        p = 0.0
        for k in range(a, b):
            p += w[ix[k], 0] * vs[k]
        ok = math.isfinite(p)
        if stats[0] > 0.0:
            p = min(max(stats[1] + p, stats[5]), stats[6])
        else:  # the first target: the range starts at it
            stats[5] = y[i]
            stats[6] = y[i]
        pred[i] = p
        stats[5] = min(stats[5], y[i])
        stats[6] = max(stats[6], y[i])
        _observe(stats, y[i], h)
        s = y_scale(stats[0], stats[2])
        ok = ok and _stats_finite(stats)
        if ok and s > 0.0:
            e = y[i] - p  # μ·x learns y − m: ŷ moves by e as μ·x does (m is fixed here)
            if logging:
                for k in range(a, b):
                    j = ix[k]
                    log_ix[n_log] = j
                    log_w[n_log, 0] = w[j, 0]
                    log_w[n_log, 1] = w[j, 1]
                    log_w[n_log, 2] = w[j, 2]
                    n_log += 1
            if _step(ix, vs, a, b, w, e, e / s, h, eta, stats):
                updates += 1
            ok = _stats_finite(stats)
            for k in range(a, b):
                j = ix[k]
                ok = ok and math.isfinite(w[j, 0]) and math.isfinite(w[j, 1])
        if not ok:
            if logging:
                _undo3(w, log_ix, log_w, n_log)
            return i, updates
    return -1, updates
