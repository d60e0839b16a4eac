"""Numba kernels of the Locally Linear SVM: anchor search, local coordinates, SGD, scoring.

Examples arrive as CSR rows (``indptr``, ``indices``, ``values``), so every loop
touches only the non-zero features (MNIST rows are ~19 % non-zero). Anchors are
kept transposed, ``anchors_t[j, a]``, and the weights as ``W[a, j, c]`` (anchor,
feature, class): both inner loops then run over a contiguous axis (anchors,
resp. classes) and vectorise.

Squared distances use ``|x|^2 - 2 x.a + |a|^2`` (clamped at 0): one sparse dot
product per anchor instead of a dense difference, which is what makes
prediction cheap. The pure-Python twins of these kernels live in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# weighting codes (the Python shell maps names to these)
INVERSE = 0  # gamma_v proportional to 1 / |x - v|       (the paper)
EXPONENTIAL = 1  # gamma_v proportional to exp(-beta |x - v|^2)  (the Shark wrapper)
RELATIVE = 2  # gamma_v proportional to exp(-beta (|x - v|^2 / |x - v_1|^2 - 1)), scale-free

# multiclass codes
OVR = 0  # one-vs-rest: K binary hinge losses
CRAMMER_SINGER = 1  # multiclass hinge: true class against the best wrong class


@njit(cache=True, nogil=True)
def _row_dots(indptr, indices, values, i, anchors_t, out):
    """``out[a] = x_i . anchor_a`` for every anchor; returns ``|x_i|^2``."""
    out[:] = 0.0
    sq = 0.0
    n_anchors = anchors_t.shape[1]
    for p in range(indptr[i], indptr[i + 1]):
        v = values[p]
        sq += v * v
        row = anchors_t[indices[p]]
        for a in range(n_anchors):
            out[a] += v * row[a]
    return sq


@njit(cache=True, nogil=True)
def nearest_anchors(indptr, indices, values, anchors_t, anchor_sq, k, weighting, beta):
    """The ``k`` nearest anchors of every row and their local coordinates gamma.

    Returns ``(idx (n, k) int64, gamma (n, k) float64, dist2 (n, k))``; neighbours
    are sorted by increasing distance, ties by anchor index, and ``gamma`` sums to 1.
    """
    n = indptr.shape[0] - 1
    n_anchors = anchors_t.shape[1]
    idx = np.empty((n, k), dtype=np.int64)
    gam = np.empty((n, k), dtype=np.float64)
    dist = np.empty((n, k), dtype=np.float64)
    dots = np.empty(n_anchors, dtype=np.float64)
    for i in range(n):
        sq = _row_dots(indptr, indices, values, i, anchors_t, dots)
        count = 0
        for a in range(n_anchors):
            d2 = sq - 2.0 * dots[a] + anchor_sq[a]
            if d2 < 0.0:  # rounding of the expanded form
                d2 = 0.0
            # insertion into the sorted top-k (k is small: 5-10)
            if count == k and d2 >= dist[i, k - 1]:
                continue
            pos = count if count < k else k - 1
            while pos > 0 and dist[i, pos - 1] > d2:
                if pos < k:
                    dist[i, pos] = dist[i, pos - 1]
                    idx[i, pos] = idx[i, pos - 1]
                pos -= 1
            dist[i, pos] = d2
            idx[i, pos] = a
            if count < k:
                count += 1
        local_coordinates(dist[i], weighting, beta, gam[i])
    return idx, gam, dist


@njit(cache=True, nogil=True)
def local_coordinates(d2, weighting, beta, out):
    """Weights from sorted squared distances ``d2`` (nearest first), summing to 1."""
    k = d2.shape[0]
    if weighting == INVERSE:
        if d2[0] <= 1e-24:
            # x sits on an anchor: 1/d is infinite there, so that anchor takes all.
            out[:] = 0.0
            out[0] = 1.0
            return
        for m in range(k):
            out[m] = 1.0 / np.sqrt(d2[m])
    elif weighting == EXPONENTIAL:
        # Shift by the smallest distance: the ratios are unchanged, nothing underflows.
        for m in range(k):
            out[m] = np.exp(-beta * (d2[m] - d2[0]))
    else:
        if d2[0] <= 1e-24:
            out[:] = 0.0
            out[0] = 1.0
            return
        for m in range(k):
            out[m] = np.exp(-beta * (d2[m] / d2[0] - 1.0))
    s = 0.0
    for m in range(k):
        s += out[m]
    for m in range(k):
        out[m] /= s


@njit(cache=True, nogil=True)
def _scores(indptr, indices, values, i, nbr, gam, W, b, out):
    """``out[c] = sum_m gamma_m (W[a_m, :, c] . x + b[a_m, c])``."""
    out[:] = 0.0
    n_classes = W.shape[2]
    for m in range(nbr.shape[0]):
        a = nbr[m]
        g = gam[m]
        Wa = W[a]
        for c in range(n_classes):
            out[c] += g * b[a, c]
        for p in range(indptr[i], indptr[i + 1]):
            gv = g * values[p]
            row = Wa[indices[p]]
            for c in range(n_classes):
                out[c] += gv * row[c]


@njit(cache=True, nogil=True)
def decision(indptr, indices, values, nbr, gam, W, b):
    """Scores ``(n, n_classes)`` given each row's anchors and coordinates."""
    n = indptr.shape[0] - 1
    out = np.empty((n, W.shape[2]), dtype=np.float64)
    for i in range(n):
        _scores(indptr, indices, values, i, nbr[i], gam[i], W, b, out[i])
    return out


@njit(cache=True, nogil=True)
def sgd_epoch(
    indptr, indices, values, nbr, gam, y, order, W, b, t, lam, t0, skip, multiclass, fit_bias
):
    """One pass of SGD on the hinge loss over ``order`` (Ladicky & Torr, eqs. 11-13).

    Step ``t`` (1-based, counted over all passes) uses ``eta = 1 / (lam (t + t0))``.
    A violated margin moves ``W[a_m]`` by ``eta * coef_c * gamma_m * x`` (and ``b`` by
    ``eta * coef_c * gamma_m``); then, every ``skip`` steps, the regulariser is applied
    at once: ``W *= 1 - skip / (t + t0)`` (SVMSGD2, Bordes et al. 2009). The bias is
    not regularised. Returns ``(t, mistakes, hinge_sum)`` where mistakes and hinge
    losses are progressive (measured before each update).
    """
    n_classes = W.shape[2]
    k = nbr.shape[1]
    scores = np.empty(n_classes, dtype=np.float64)
    coef = np.empty(n_classes, dtype=np.float64)
    mistakes = 0
    hinge_sum = 0.0
    for i in order:
        t += 1
        eta = 1.0 / (lam * (t + t0))
        _scores(indptr, indices, values, i, nbr[i], gam[i], W, b, scores)
        yi = y[i]
        best = 0
        for c in range(1, n_classes):
            if scores[c] > scores[best]:
                best = c
        if best != yi:
            mistakes += 1
        coef[:] = 0.0
        update = False
        if multiclass == OVR:
            for c in range(n_classes):
                s = 1.0 if c == yi else -1.0
                loss = 1.0 - s * scores[c]
                if loss > 0.0:
                    hinge_sum += loss
                    coef[c] = eta * s
                    update = True
        else:
            rival = -1
            for c in range(n_classes):
                if c != yi and (rival < 0 or scores[c] > scores[rival]):
                    rival = c
            loss = 1.0 - scores[yi] + scores[rival]
            if loss > 0.0:
                hinge_sum += loss
                coef[yi] = eta
                coef[rival] = -eta
                update = True
        if update:
            for m in range(k):
                a = nbr[i, m]
                g = gam[i, m]
                Wa = W[a]
                if fit_bias:
                    for c in range(n_classes):
                        b[a, c] += g * coef[c]
                for p in range(indptr[i], indptr[i + 1]):
                    gv = g * values[p]
                    row = Wa[indices[p]]
                    for c in range(n_classes):
                        row[c] += gv * coef[c]
        if t % skip == 0:
            shrink = 1.0 - skip / (t + t0)
            flat = W.reshape(-1)
            for q in range(flat.shape[0]):
                flat[q] *= shrink
    return t, mistakes, hinge_sum


# --------------------------------------------------------------------------- k-means


@njit(cache=True, nogil=True)
def kmeans_assign(indptr, indices, values, centres_t, centre_sq):
    """Nearest centre of every row (ties: lowest index) and its squared distance."""
    n = indptr.shape[0] - 1
    n_centres = centres_t.shape[1]
    labels = np.empty(n, dtype=np.int64)
    best_d = np.empty(n, dtype=np.float64)
    dots = np.empty(n_centres, dtype=np.float64)
    for i in range(n):
        sq = _row_dots(indptr, indices, values, i, centres_t, dots)
        best = 0
        bd = np.inf
        for a in range(n_centres):
            d2 = sq - 2.0 * dots[a] + centre_sq[a]
            if d2 < bd:
                bd = d2
                best = a
        labels[i] = best
        best_d[i] = max(bd, 0.0)
    return labels, best_d


@njit(cache=True, nogil=True)
def min_sq_dist_update(indptr, indices, values, centre, centre_sq, mind):
    """``mind[i] = min(mind[i], |x_i - centre|^2)`` (k-means++ seeding)."""
    n = indptr.shape[0] - 1
    for i in range(n):
        dot = 0.0
        sq = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            v = values[p]
            sq += v * v
            dot += v * centre[indices[p]]
        d2 = max(sq - 2.0 * dot + centre_sq, 0.0)
        if d2 < mind[i]:
            mind[i] = d2


@njit(cache=True, nogil=True)
def centre_sums(indptr, indices, values, labels, n_centres, dim):
    """Per-centre feature sums and member counts."""
    sums = np.zeros((n_centres, dim), dtype=np.float64)
    counts = np.zeros(n_centres, dtype=np.int64)
    for i in range(indptr.shape[0] - 1):
        c = labels[i]
        counts[c] += 1
        for p in range(indptr[i], indptr[i + 1]):
            sums[c, indices[p]] += values[p]
    return sums, counts


# --------------------------------------------------------------------------- input


@njit(cache=True, nogil=True)
def dense_to_rows(X, unit_norm):
    """CSR arrays of the non-zeros of a dense float64 matrix, rows optionally scaled
    to unit Euclidean norm. Returns ``(indptr, indices, values, bad_row)``;
    ``bad_row`` is the first row holding a NaN/inf (then the arrays are empty), or -1.
    """
    n, d = X.shape
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(d):
            v = X[i, j]
            if not np.isfinite(v):
                return indptr, np.empty(0, np.int64), np.empty(0, np.float64), i
            if v != 0.0:
                c += 1
        indptr[i + 1] = indptr[i] + c
    indices = np.empty(indptr[n], dtype=np.int64)
    values = np.empty(indptr[n], dtype=np.float64)
    for i in range(n):
        p = indptr[i]
        sq = 0.0
        for j in range(d):
            v = X[i, j]
            if v != 0.0:
                indices[p] = j
                values[p] = v
                sq += v * v
                p += 1
        if unit_norm and sq > 0.0:
            inv = 1.0 / np.sqrt(sq)
            for q in range(indptr[i], indptr[i + 1]):
                values[q] *= inv
    return indptr, indices, values, -1
