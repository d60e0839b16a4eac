"""numba kernels of the full-covariance mode (Σ is R × d × d; see :mod:`._kernels`).

Cost per example is O(d·nnz) for Σx and O(d²) for the rank-1 update
Σ ← Σ − β(Σx)(Σx)ᵀ, so this mode is for d up to a few thousand. Atomicity: the
first time a call modifies a class, its μ and Σ are saved (≤ R copies per call,
each no larger than one update) and restored if the state would become non-finite.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from learners.linear._kernels import _argmax2, step


@njit(cache=True)
def _sigma_x(S, k, indices, values, a, b, out):  # pragma: no cover - numba
    """out = Σ_k x, reading rows of Σ_k (it is kept exactly symmetric)."""
    d = out.shape[0]
    for t in range(d):
        out[t] = 0.0
    for p in range(a, b):
        j = indices[p]
        x = values[p]
        for t in range(d):
            out[t] += S[k, j, t] * x


@njit(cache=True)
def _save(k, mu, S, saved, undo_mu, undo_S):  # pragma: no cover - numba
    if not saved[k]:
        undo_mu[k, :] = mu[k, :]
        undo_S[k, :, :] = S[k, :, :]
        saved[k] = True


@njit(cache=True)
def _shrink_full(S, k, u, beta, mu, alpha_sgn):  # pragma: no cover - numba
    """μ_k += α·sgn·u; Σ_k −= β u uᵀ (β(u_a u_b) keeps Σ exactly symmetric). Returns NaN-probe."""
    d = u.shape[0]
    bad = 0  # an integer OR-reduction keeps the inner loop vectorisable
    for t in range(d):
        m_new = mu[k, t] + alpha_sgn * u[t]
        mu[k, t] = m_new
        bad |= (m_new - m_new) != 0.0  # true iff inf or NaN
    for s in range(d):
        us = u[s]
        row = S[k, s]
        for t in range(d):
            v = row[t] - beta * (us * u[t])
            row[t] = v
            bad |= (v - v) != 0.0
    return 1.0 if bad else 0.0


# error_model numpy: a division by an underflowed 0 gives inf/nan, which the finite
# checks below refuse (undoing the call), instead of raising mid-batch with state changed.
@njit(cache=True, error_model="numpy")
def update_full(
    indptr,
    indices,
    values,
    y,
    start,
    stop,
    n_labels,
    mu,
    S,
    algo,
    c,
    phi,
    saved,
    undo_mu,
    undo_S,
    sw,
    out_mv,
):  # pragma: no cover - numba
    """Predict-then-learn rows [start, stop) with full covariance (CW family only);
    ``sw`` and ``out_mv`` as in :func:`learners.linear._kernels.update_diag`."""
    weighted = sw.shape[0] > 0
    record = out_mv.shape[0] > 0
    binary = n_labels <= 2
    R = mu.shape[0]
    d = mu.shape[1]
    scores = np.zeros(R)
    uy = np.zeros(d)
    ur = np.zeros(d)
    correct = 0
    loss_sum = 0.0
    n_upd = 0
    for i in range(start, stop):
        a = indptr[i]
        b = indptr[i + 1]
        yi = y[i]
        for k in range(R):
            s = 0.0
            for p in range(a, b):
                s += mu[k, indices[p]] * values[p]
            scores[k] = s
        if binary:
            sgn = 1.0 if yi == 0 else -1.0
            pred = 0 if (scores[0] >= 0.0 or n_labels == 1) else 1
            m = sgn * scores[0]
            ky = 0
            kr = -1
        else:
            pred, kr = _argmax2(scores, yi)
            m = scores[yi] - scores[kr]
            ky = yi
            sgn = 1.0
        _sigma_x(S, ky, indices, values, a, b, uy)
        v = 0.0
        for p in range(a, b):
            v += values[p] * uy[indices[p]]
        if kr >= 0:
            _sigma_x(S, kr, indices, values, a, b, ur)
            for p in range(a, b):
                v += values[p] * ur[indices[p]]
        if not (math.isfinite(m) and math.isfinite(v)):
            _undo_full(mu, S, saved, undo_mu, undo_S)
            return i, correct, loss_sum, n_upd
        right = pred == yi
        if right:
            correct += 1
        loss_sum += max(0.0, 1.0 - m)
        if record:
            out_mv[i, 2] = 1.0 if right else 0.0
            if binary:
                out_mv[i, 0] = m
                out_mv[i, 1] = v
        alpha, beta, _kappa = step(algo, m, v, c, phi, sw[i] if weighted else 1.0)
        if alpha <= 0.0:
            continue
        n_upd += 1
        _save(ky, mu, S, saved, undo_mu, undo_S)
        bad = _shrink_full(S, ky, uy, beta, mu, sgn * alpha)
        if kr >= 0:
            _save(kr, mu, S, saved, undo_mu, undo_S)
            bad += _shrink_full(S, kr, ur, beta, mu, -alpha)
        if bad != 0.0 or not math.isfinite(bad):
            _undo_full(mu, S, saved, undo_mu, undo_S)
            return i, correct, loss_sum, n_upd
    return -1, correct, loss_sum, n_upd


@njit(cache=True)
def _undo_full(mu, S, saved, undo_mu, undo_S):  # pragma: no cover - numba
    for k in range(saved.shape[0]):
        if saved[k]:
            mu[k, :] = undo_mu[k, :]
            S[k, :, :] = undo_S[k, :, :]


@njit(cache=True)
def pair_variance_full(indptr, indices, values, S, ka, kb):  # pragma: no cover - numba
    """xᵀ(Σ_a + Σ_b)x per row for full covariances."""
    n = indptr.shape[0] - 1
    out = np.zeros(n)
    for i in range(n):
        v = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            for q in range(indptr[i], indptr[i + 1]):
                xx = values[p] * values[q]
                v += S[ka[i], indices[p], indices[q]] * xx
                if kb[i] >= 0:
                    v += S[kb[i], indices[p], indices[q]] * xx
        out[i] = v
    return out
