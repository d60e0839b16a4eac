"""numba kernels of the online regressors (called from :mod:`._model`).

One call runs a whole range of CSR rows (no Python per example). Diagonal state is
``w`` (d × 2: the mean μ and the variance σ of a coordinate side by side, so a sparse
update touches one cache line per coordinate; PA: d × 1, the mean only); the full
covariance is ``mu`` (d) and ``S`` (d × d). ``stats`` holds the scalars, in place:
``[n_y, m, M2, n_c, c_mean]`` (the weighted Welford statistics of y, then the
weighted mean of the squared standardised residuals, AROW's noise scale c).

Each row, in order: (1) the pre-update prediction ŷ = m + s·(μ·x) with
s = sqrt(M2/n_y) (0 before the second distinct y) and, for AROW, its variance
s²·c·(xᵀΣx + r); (2) y joins (n_y, m, M2); (3) t = (y − m)/s with the updated
statistics (t = 0 while s == 0: nothing to learn yet); (4) the algorithm's step
on t. Working on the standardised target makes epsilon, C and r unit-free.

A row fails when its prediction, its xᵀΣx (or ‖x‖²), the statistics or a new weight
is not finite. The diagonal kernel then undoes its changes from a log of the old
(μ, σ) of every coordinate it wrote (O(nnz)); the full one leaves that to the caller,
which copied the state (one copy costs what one row's O(d²) update costs).

>>> y_scale(4.0, 16.0), y_scale(1.0, 0.0)
(2.0, 0.0)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# algorithm codes (the order of learners.regression.ALGORITHMS)
PA, PA1, PA2, AROW, SGD = 0, 1, 2, 3, 4
N_STATS = 5  # n_y, m, M2, n_c, c_mean
TINY = np.finfo(np.float64).tiny  # a variance that underflowed is put back to this


@njit(cache=True)
def y_scale(n_y, m2):  # pragma: no cover - numba
    """s = sqrt(M2 / n_y), 0.0 while there is no spread (or no example) yet."""
    if n_y > 0.0 and m2 > 0.0:
        return math.sqrt(m2 / n_y)
    return 0.0


@njit(cache=True, error_model="numpy")
def _observe(stats, y, h):  # pragma: no cover - numba
    """Add y with weight h to (n_y, m, M2) (weighted Welford, West 1979); the
    standardised target t under the updated statistics (0.0 while s == 0)."""
    n_new = stats[0] + h
    delta = y - stats[1]
    m_new = stats[1] + delta * (h / n_new)
    stats[0] = n_new
    stats[1] = m_new
    # delta and y − m_new share a sign (m_new lies between m and y): M2 never decreases
    stats[2] = stats[2] + h * delta * (y - m_new)
    s = y_scale(n_new, stats[2])
    return (y - m_new) / s if s > 0.0 else 0.0


@njit(cache=True, error_model="numpy")
def _learn_noise(stats, e, v_r, h):  # pragma: no cover - numba
    """Add e²/(v + r/h) with weight h to the running mean c of the squared
    standardised residuals (their expected value is c under the model)."""
    q = e * e / v_r
    n_c = stats[3] + h
    stats[4] = q if stats[3] == 0.0 else stats[4] + (h / n_c) * (q - stats[4])
    stats[3] = n_c


@njit(cache=True)
def _stats_finite(stats):  # pragma: no cover - numba
    for k in range(stats.shape[0]):  # noqa: SIM110 - numba compiles no generator in all()
        if not math.isfinite(stats[k]):
            return False
    return True


@njit(cache=True, error_model="numpy")
def pa_tau(algo, loss, sq, c, h):  # pragma: no cover - numba
    """PA step size for the ε-insensitive loss ``loss`` > 0 and ‖x‖² ``sq`` > 0."""
    if algo == PA:
        return min(h, 1.0) * (loss / sq)
    if algo == PA1:
        return min(c * h, loss / sq)
    return loss / (sq + 1.0 / (2.0 * (c * h)))


@njit(cache=True, error_model="numpy")
def _dot_quad(w, has_cov, ix, vs, a, b):  # pragma: no cover - numba
    """(μ·x, xᵀΣx) of one row (PA: (μ·x, ‖x‖²))."""
    p = 0.0
    v = 0.0
    for k in range(a, b):
        j = ix[k]
        x = vs[k]
        p += w[j, 0] * x
        v += (w[j, 1] * x * x) if has_cov else (x * x)
    return p, v


@njit(cache=True, error_model="numpy")
def scores_diag(ip, ix, vs, w, has_cov):  # pragma: no cover - numba
    """(μ·x, xᵀΣx) of every row, as ``update_diag`` computes them."""
    n = ip.shape[0] - 1
    p = np.empty(n)
    v = np.empty(n)
    for i in range(n):
        p[i], v[i] = _dot_quad(w, has_cov, ix, vs, ip[i], ip[i + 1])
    return p, v


@njit(cache=True)
def _undo(w, has_cov, log_ix, log_w, n_log):  # pragma: no cover - numba
    for k in range(n_log - 1, -1, -1):  # newest first: a coordinate written twice ends oldest
        j = log_ix[k]
        w[j, 0] = log_w[k, 0]
        if has_cov:
            w[j, 1] = log_w[k, 1]


@njit(cache=True, error_model="numpy")
def update_diag(
    ip, ix, vs, y, sw, w, has_cov, algo, eps, c, r, stats, pred, var, log_ix, log_w, logging
):  # pragma: no cover - numba
    """Learn rows [0, n) in order. Returns (failing row or -1, rows that changed μ).
    ``pred``/``var``: out, the pre-update ŷ and (AROW) its variance per row. With
    ``logging`` the changes are undone on failure (``stats`` is the caller's to put
    back); ``log_ix``/``log_w`` hold at least nnz entries then."""
    n = ip.shape[0] - 1
    n_log = 0
    updates = 0
    for i in range(n):
        a, b = ip[i], ip[i + 1]
        h = sw[i] if sw.shape[0] > 0 else 1.0
        p, v = _dot_quad(w, has_cov, ix, vs, a, b)
        s = y_scale(stats[0], stats[2])
        pred[i] = stats[1] + s * p
        var[i] = s * s * stats[4] * (v + r) if has_cov else 0.0
        t = _observe(stats, y[i], h)
        ok = math.isfinite(p) and math.isfinite(v) and math.isfinite(pred[i])
        ok = ok and math.isfinite(var[i]) and _stats_finite(stats)
        if ok and y_scale(stats[0], stats[2]) > 0.0:
            e = t - p
            if has_cov:  # AROW: the Kalman / RLS step with noise r/h
                v_r = v + r / h
                _learn_noise(stats, e, v_r, h)
                ok = _stats_finite(stats)
                if ok and v > 0.0:
                    beta = 1.0 / v_r
                    alpha = e * beta
                    for k in range(a, b):
                        j = ix[k]
                        x = vs[k]
                        sj = w[j, 1]
                        if logging:
                            log_ix[n_log] = j
                            log_w[n_log, 0] = w[j, 0]
                            log_w[n_log, 1] = sj
                            n_log += 1
                        w[j, 0] += alpha * sj * x
                        # σ − βσ²x² written as σ(v + r/h − σx²)β: v >= σx², so the
                        # factor stays >= (r/h)β > 0 (the other form can round to 0)
                        w[j, 1] = max(sj * ((v_r - sj * x * x) * beta), TINY)
                        ok = ok and math.isfinite(w[j, 0]) and math.isfinite(w[j, 1])
                    updates += 1 if e != 0.0 else 0
            else:  # PA: ε-insensitive loss of the standardised target
                loss = abs(e) - eps
                if loss > 0.0 and v > 0.0:
                    tau = pa_tau(algo, loss, v, c, h)
                    step = tau if e > 0.0 else -tau
                    for k in range(a, b):
                        j = ix[k]
                        if logging:
                            log_ix[n_log] = j
                            log_w[n_log, 0] = w[j, 0]
                            n_log += 1
                        w[j, 0] += step * vs[k]
                        ok = ok and math.isfinite(w[j, 0])
                    updates += 1
        if not ok:
            if logging:
                _undo(w, has_cov, log_ix, log_w, n_log)
            return i, updates
    return -1, updates


@njit(cache=True, error_model="numpy")
def _full_row(S, ix, vs, a, b, k):  # pragma: no cover - numba
    """(Σx)ⱼ for j = ix[k], summed over the row's features in order."""
    g = 0.0
    for q in range(a, b):
        g += S[ix[q], ix[k]] * vs[q]
    return g


@njit(cache=True, error_model="numpy")
def scores_full(ip, ix, vs, mu, S):  # pragma: no cover - numba
    """(μ·x, xᵀΣx) of every row, as ``update_full`` computes them."""
    n = ip.shape[0] - 1
    p = np.zeros(n)
    v = np.zeros(n)
    for i in range(n):
        a, b = ip[i], ip[i + 1]
        for k in range(a, b):
            p[i] += mu[ix[k]] * vs[k]
            v[i] += vs[k] * _full_row(S, ix, vs, a, b, k)
    return p, v


@njit(cache=True, error_model="numpy")
def update_full(ip, ix, vs, y, sw, mu, S, r, stats, pred, var, g):  # pragma: no cover - numba
    """``update_diag`` for AROW with a full Σ (``g``: d scratch). No undo: on failure
    the caller restores its copy of (mu, S, stats)."""
    n = ip.shape[0] - 1
    d = mu.shape[0]
    updates = 0
    for i in range(n):
        a, b = ip[i], ip[i + 1]
        h = sw[i] if sw.shape[0] > 0 else 1.0
        p = 0.0
        v = 0.0
        for k in range(a, b):
            p += mu[ix[k]] * vs[k]
            v += vs[k] * _full_row(S, ix, vs, a, b, k)
        s = y_scale(stats[0], stats[2])
        pred[i] = stats[1] + s * p
        var[i] = s * s * stats[4] * (v + r)
        t = _observe(stats, y[i], h)
        ok = math.isfinite(p) and math.isfinite(v) and math.isfinite(pred[i])
        ok = ok and math.isfinite(var[i]) and _stats_finite(stats)
        if ok and y_scale(stats[0], stats[2]) > 0.0:
            e = t - p
            v_r = v + r / h
            _learn_noise(stats, e, v_r, h)
            ok = _stats_finite(stats)
            if ok and v > 0.0:
                # g = Σx from the rows of Σ at the features (Σ is symmetric)
                g[:] = 0.0
                for k in range(a, b):
                    j = ix[k]
                    x = vs[k]
                    for col in range(d):
                        g[col] += S[j, col] * x
                beta = 1.0 / v_r
                alpha = e * beta
                for row in range(d):
                    mu[row] += alpha * g[row]
                    ok = ok and math.isfinite(mu[row])
                    for col in range(d):
                        # (g_r g_c)β is the same for (r, c) and (c, r): Σ stays symmetric
                        S[row, col] -= (g[row] * g[col]) * beta
                        ok = ok and math.isfinite(S[row, col])
                updates += 1 if e != 0.0 else 0
        if not ok:
            return i, updates
    return -1, updates
