"""numba kernels of the online linear classifiers (called from :mod:`._learning`, :mod:`._scoring`).

Every kernel processes a whole range of CSR rows in one call (no Python per
example). Diagonal state is ``w`` (R × d × 2): the mean μ and the variance σ of a
coordinate side by side, so a sparse update touches one cache line per coordinate
(PA: R × d × 1, the mean only). Full-covariance state (:mod:`._kernels_full`) is
``mu`` (R × d) and ``S`` (R × d × d). ``R == 1`` while the model is binary (≤ 2
labels: row 0 is ``labels_[0]``'s side, ``y = +1``; ``labels_[1]`` is ``y = -1``),
otherwise ``R`` is the number of labels.

Atomicity: an update that would make the state non-finite is undone *inside*
the kernel, which returns the failing row. The diagonal kernel logs the old
(μ, σ) of every coordinate it changes plus one (row, class, offset) record per
class update — O(nnz) sequential writes, so the fast path never copies the
(possibly 2**20-wide) state; the log buffers are reused between calls.

Step sizes follow the papers:

- PA / PA-I / PA-II (Crammer et al. 2006): τ = ℓ/‖x‖², min(C, ℓ/‖x‖²), ℓ/(‖x‖² + 1/(2C)).
- CW, exact convex form (Crammer, Dredze, Pereira 2008) and SCW-I / SCW-II
  (Wang, Zhao, Hoi 2012): α from (m, v, φ, C); u = ¼(−αvφ + √(α²v²φ² + 4v))²,
  computed as √u = 2v / (αvφ + √(α²v²φ² + 4v)) to avoid cancellation;
  β = αφ / (√u + vαφ).
- AROW (Crammer, Kulesza, Dredze 2009): β = 1/(v + r), α = (1 − m)β.

Importance weights h > 0 (``sw``, one per row; an empty array means 1 for every
row, and h = 1 gives the unweighted step bit for bit) enter ``step`` as the
learners' docstrings state: C → hC (PA-I, PA-II, SCW-I, SCW-II), r → r/h (AROW),
α → min(h, 1)·α (PA, CW).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# algorithm codes (the order of learners.linear.ALGORITHMS)
PA, PA1, PA2, CW, AROW, SCW1, SCW2 = 0, 1, 2, 3, 4, 5, 6

# rows ahead whose coordinates are prefetched: random reads into a 2**20-wide
# state are cache misses, and issuing them early overlaps them (about 2x faster)
PREFETCH_ROWS = 4


@intrinsic
def _prefetch(typingctx, arr, idx):  # pragma: no cover - compiled
    """Hint the CPU to fetch ``arr[idx]`` into cache (``llvm.prefetch``; results unchanged)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ary, ind = args
        aryty = signature.args[0]
        a = context.make_array(aryty)(context, builder, ary)
        ptr = cgutils.get_item_pointer(context, builder, aryty, a, [ind], wraparound=False)
        _emit_prefetch(builder, ptr)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _prefetch_2d(typingctx, arr, i, j):  # pragma: no cover - compiled
    """``_prefetch`` of ``arr[i, j]`` for a 2-d array of any layout (e.g. a strided view)."""
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        ary, ii, jj = args
        aryty = signature.args[0]
        a = context.make_array(aryty)(context, builder, ary)
        ptr = cgutils.get_item_pointer(context, builder, aryty, a, [ii, jj], wraparound=False)
        _emit_prefetch(builder, ptr)
        return context.get_dummy_value()

    return sig, codegen


def _emit_prefetch(builder, ptr):  # pragma: no cover - compiled
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    # (address, rw, locality=3: keep in all cache levels, cache type=1: data)
    builder.call(
        fn,
        [builder.bitcast(ptr, i8p), ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)],
    )


# validate_batch problem codes
BAD_INDEX, UNSORTED, NONFINITE, BAD_INDPTR = 1, 2, 3, 4


@njit(cache=True)
def validate_batch(indptr, indices, values, dim):  # pragma: no cover - numba
    """First (row, problem) of a CSR batch, or (-1, 0): row pointer, index range and
    order, finiteness. The row pointer is checked first so no read goes out of bounds."""
    n = indptr.shape[0] - 1
    nnz = indices.shape[0]
    if n < 0 or indptr[0] != 0 or indptr[n] != nnz or values.shape[0] != nnz:
        return 0, BAD_INDPTR
    for i in range(n):
        if indptr[i + 1] < indptr[i]:
            return i, BAD_INDPTR
    for i in range(n):
        prev = -1
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if j < 0 or j >= dim:
                return i, BAD_INDEX
            if j <= prev:
                return i, UNSORTED
            prev = j
            if not math.isfinite(values[p]):
                return i, NONFINITE
    return -1, 0


# error_model numpy: x/0 (an underflowed 0) gives inf/nan, which update_diag refuses
# (undoing its changes), instead of a ZeroDivisionError mid-batch with the state changed.
@njit(cache=True, error_model="numpy")
def _cw_alpha(m, v, phi):  # pragma: no cover - numba
    """α of exact CW / SCW-I before clipping: (−mψ + √(m²φ⁴/4 + vφ²ξ)) / (vξ).

    For m > 0 the numerator cancels; multiplying by its conjugate gives the
    equivalent (vφ² − m²) / (v(√(...) + mψ)), which has no cancellation.
    """
    phi2 = phi * phi
    psi = 1.0 + phi2 / 2.0
    xi = 1.0 + phi2
    root = math.sqrt(m * m * phi2 * phi2 / 4.0 + v * phi2 * xi)
    if m > 0.0:
        return (v * phi2 - m * m) / (v * (root + m * psi))
    return (-m * psi + root) / (v * xi)


@njit(cache=True, error_model="numpy")
def step(algo, m, v, c, phi, h):  # pragma: no cover - numba
    """(α, β, κ) for margin ``m``, variance ``v`` (PA: ``v`` is the scaled ‖x‖²) and
    importance weight ``h`` (> 0; 1.0 is the unweighted step, bit for bit).

    ``α <= 0`` means "no update". β is the rank-1 shrink of the covariance,
    Σ ← Σ − β Σxxᵀ Σ; κ = 2αφ is the precision increment of the diagonal CW
    update Σ⁻¹ ← Σ⁻¹ + κ diag(x²) (see :mod:`learners.linear.cw` for why).
    The weight scales the aggressiveness (C·h, r/h) or, for the hard-constraint PA
    and CW, takes the fraction min(h, 1) of the step (see the learners' docstrings).
    """
    if algo <= PA2:
        loss = 1.0 - m
        if loss <= 0.0 or v <= 0.0:
            return 0.0, 0.0, 0.0
        if algo == PA:
            return min(h, 1.0) * (loss / v), 0.0, 0.0
        if algo == PA1:
            return min(c * h, loss / v), 0.0, 0.0
        return loss / (v + 1.0 / (2.0 * (c * h))), 0.0, 0.0
    if v <= 0.0:  # x == 0: nothing can change
        return 0.0, 0.0, 0.0
    if algo == AROW:
        if m >= 1.0:
            return 0.0, 0.0, 0.0
        beta = 1.0 / (v + c / h)
        return (1.0 - m) * beta, beta, 0.0
    if phi * math.sqrt(v) - m <= 0.0:  # loss max(0, φ√v − m) is zero
        return 0.0, 0.0, 0.0
    if algo == SCW2:
        phi2 = phi * phi
        n = v + 1.0 / (2.0 * (c * h))
        gamma = phi * math.sqrt(phi2 * m * m * v * v + 4.0 * n * v * (n + v * phi2))
        alpha = (-(2.0 * m * n + phi2 * m * v) + gamma) / (2.0 * (n * n + n * v * phi2))
    else:
        alpha = _cw_alpha(m, v, phi)
        # SCW-I caps at hC; CW takes a partial step along its exact solution path
        # (β and κ below follow the scaled α)
        alpha = min(c * h, alpha) if algo == SCW1 else min(h, 1.0) * alpha
    if not alpha > 0.0:
        return 0.0, 0.0, 0.0
    t = alpha * v * phi
    sqrt_u = 2.0 * v / (t + math.sqrt(t * t + 4.0 * v))
    return alpha, alpha * phi / (sqrt_u + t), 2.0 * alpha * phi


@njit(cache=True)
def _argmax2(scores, y):  # pragma: no cover - numba
    """(argmax over all labels, argmax over labels != y); ties go to the lower index."""
    best = 0
    for k in range(1, scores.shape[0]):
        if scores[k] > scores[best]:
            best = k
    r = 1 if y == 0 else 0
    for k in range(scores.shape[0]):
        if k != y and scores[k] > scores[r]:
            r = k
    return best, r


@njit(cache=True)
def _dot(w, k, indices, values, a, b):  # pragma: no cover - numba
    s = 0.0
    for p in range(a, b):
        s += w[k, indices[p], 0] * values[p]
    return s


@njit(cache=True)
def _quad(w, k, has_cov, indices, values, a, b):  # pragma: no cover - numba
    """xᵀ diag(σ_k) x, or ‖x‖² when there is no covariance (PA)."""
    v = 0.0
    if has_cov:
        for p in range(a, b):
            x = values[p]
            v += w[k, indices[p], 1] * x * x
    else:
        for p in range(a, b):
            v += values[p] * values[p]
    return v


@njit(cache=True)
def _dot_quad(w, k, has_cov, indices, values, a, b):  # pragma: no cover - numba
    """(μ_k·x, xᵀ diag(σ_k) x) in one pass: μ and σ share a cache line."""
    s = 0.0
    v = 0.0
    if has_cov:
        for p in range(a, b):
            j = indices[p]
            x = values[p]
            s += w[k, j, 0] * x
            v += w[k, j, 1] * x * x
    else:
        for p in range(a, b):
            x = values[p]
            s += w[k, indices[p], 0] * x
            v += x * x
    return s, v


@njit(cache=True)
def _apply(
    w, k, a_sgn, beta, kappa, algo, indices, values, a, b, log_w, n, do_log
):  # pragma: no cover - numba
    """μ_k += a_sgn σ_k x and shrink σ_k (PA: σ ≡ 1), saving the old (μ, σ) pairs
    at ``log_w[n:]`` if ``do_log``. Returns True iff a value became inf or NaN."""
    bad = False  # a boolean OR keeps the loop free of a floating-point dependency chain
    if algo >= CW:
        is_cw = algo == CW
        for p in range(a, b):
            j = indices[p]
            x = values[p]
            m_old = w[k, j, 0]
            s_old = w[k, j, 1]
            if do_log:
                log_w[n, 0] = m_old
                log_w[n, 1] = s_old
                n += 1
            m_new = m_old + a_sgn * s_old * x
            if is_cw:
                s_new = s_old / (1.0 + kappa * s_old * x * x)
            else:
                s_new = s_old - beta * s_old * s_old * x * x
            w[k, j, 0] = m_new
            w[k, j, 1] = s_new
            bad |= (m_new - m_new) != 0.0 or (s_new - s_new) != 0.0
    else:
        for p in range(a, b):
            j = indices[p]
            m_old = w[k, j, 0]
            if do_log:
                log_w[n, 0] = m_old
                n += 1
            m_new = m_old + a_sgn * values[p]
            w[k, j, 0] = m_new
            bad |= (m_new - m_new) != 0.0
    return bad


@njit(cache=True)
def update_diag(
    indptr, indices, values, y, start, stop, n_labels, w, algo, c, phi, sw, out_mv, log_w, log_u
):  # pragma: no cover - numba
    """Predict-then-learn rows [start, stop) with diagonal covariance (or none: PA).

    ``sw``: per-row importance weights (empty: 1.0 for every row). ``out_mv`` (n × 3,
    or empty for none) receives each binary row's pre-update (margin m, variance v)
    for the progressive log loss and AUC (:mod:`learners.linear.calibration`), and
    every row's pre-update 0/1 "predicted right" in column 2 (the error stream of the
    drift detectors).

    ``w`` is (R, d, 2) holding (μ, σ) side by side — one cache line per touched
    coordinate — or (R, d, 1) for PA. ``log_w`` (≥ 2·nnz × 2) receives the old
    values of every updated coordinate, ``log_u`` (≥ 2·rows × 3) one
    (row, class, offset) record per class update. Returns (failed_row or -1,
    correct, loss_sum, updates); on failure every change of this call is undone.
    An empty ``log_u`` turns logging off: the caller holds a copy of ``w`` (cheaper
    than the log when a batch has more non-zeros than the state has coordinates)
    and restores it itself on failure.
    """
    do_log = log_u.shape[0] > 0
    weighted = sw.shape[0] > 0
    record = out_mv.shape[0] > 0
    has_cov = algo >= CW
    binary = n_labels <= 2
    R = w.shape[0]
    scores = np.zeros(R)
    n_log = 0
    n_rec = 0
    correct = 0
    loss_sum = 0.0
    n_upd = 0
    flat = w.reshape(w.size)
    C = w.shape[2]
    d = w.shape[1]
    for i in range(start, stop):
        a = indptr[i]
        b = indptr[i + 1]
        yi = y[i]
        ahead = i + PREFETCH_ROWS
        if ahead < stop:
            for p in range(indptr[ahead], indptr[ahead + 1]):
                for k in range(R):
                    _prefetch(flat, (k * d + indices[p]) * C)  # type: ignore[call-arg]
        if binary:
            s, v = _dot_quad(w, 0, has_cov, indices, values, a, b)
            sgn = 1.0 if yi == 0 else -1.0
            pred = 0 if (s >= 0.0 or n_labels == 1) else 1
            m = sgn * s
            ky = 0
            kr = -1
        else:
            for k in range(R):
                scores[k] = _dot(w, k, indices, values, a, b)
            pred, kr = _argmax2(scores, yi)
            m = scores[yi] - scores[kr]
            ky = yi
            sgn = 1.0
            v = _quad(w, ky, has_cov, indices, values, a, b)
            # PA: the joint feature map has squared norm 2‖x‖²
            v += _quad(w, kr, has_cov, indices, values, a, b)
        if not (math.isfinite(m) and math.isfinite(v)):
            if do_log:
                _undo_diag(w, indices, indptr, n_rec, log_w, log_u)
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
        alpha, beta, kappa = step(algo, m, v, c, phi, sw[i] if weighted else 1.0)
        if alpha <= 0.0:
            continue
        n_upd += 1
        bad = False
        for side in range(2):
            k = ky if side == 0 else kr
            if k < 0:
                break
            if do_log:
                log_u[n_rec, 0] = i
                log_u[n_rec, 1] = k
                log_u[n_rec, 2] = n_log
                n_rec += 1
            bad |= _apply(
                w, k, sgn * alpha if side == 0 else -alpha, beta, kappa, algo,
                indices, values, a, b, log_w, n_log, do_log,
            )  # fmt: skip
            if do_log:
                n_log += b - a
        if bad:
            if do_log:
                _undo_diag(w, indices, indptr, n_rec, log_w, log_u)
            return i, correct, loss_sum, n_upd
    return -1, correct, loss_sum, n_upd


@njit(cache=True)
def _undo_diag(w, indices, indptr, n_rec, log_w, log_u):  # pragma: no cover - numba
    # Newest first, so each coordinate ends at its value from before the call.
    C = w.shape[2]
    for t in range(n_rec - 1, -1, -1):
        i = log_u[t, 0]
        k = log_u[t, 1]
        o = log_u[t, 2]
        for p in range(indptr[i], indptr[i + 1]):
            for c in range(C):
                w[k, indices[p], c] = log_w[o + p - indptr[i], c]


@njit(cache=True)
def scores(indptr, indices, values, mu, two_sided):  # pragma: no cover - numba
    """(n, R) matrix of μ_k · x; with ``two_sided`` (a binary model) (n, 2) of [μ·x, −μ·x]."""
    n = indptr.shape[0] - 1
    R = mu.shape[0]
    out = np.zeros((n, 2 if two_sided else R))
    for i in range(n):
        ahead = i + PREFETCH_ROWS
        if ahead < n:
            for p in range(indptr[ahead], indptr[ahead + 1]):
                for k in range(R):
                    _prefetch_2d(mu, k, indices[p])  # type: ignore[call-arg]
        for k in range(R):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s += mu[k, indices[p]] * values[p]
            out[i, k] = s
        if two_sided:
            out[i, 1] = -out[i, 0]
    return out


@njit(cache=True)
def best_two(s, binary):  # pragma: no cover - numba
    """Per row: (best label, runner-up, margin between them); binary: (best, -1, |μ·x|).

    The runner-up of a binary model is the other side; -1 tells the variance
    kernels to use the single Σ (its margin and variance are the pair's).
    """
    n = s.shape[0]
    K = s.shape[1]
    best = np.zeros(n, np.int64)
    second = np.full(n, -1, np.int64)
    margin = np.zeros(n)
    for i in range(n):
        b = 0
        for k in range(1, K):
            if s[i, k] > s[i, b]:
                b = k
        best[i] = b
        if binary:
            margin[i] = abs(s[i, 0])
        elif K > 1:
            r = 1 if b == 0 else 0
            for k in range(K):
                if k != b and s[i, k] > s[i, r]:
                    r = k
            second[i] = r
            margin[i] = s[i, b] - s[i, r]
    return best, second, margin


@njit(cache=True)
def pair_variance_diag(indptr, indices, values, sig, ka, kb):  # pragma: no cover - numba
    """xᵀ(Σ_a + Σ_b)x per row (``kb[i] < 0``: Σ_a only)."""
    n = indptr.shape[0] - 1
    out = np.zeros(n)
    for i in range(n):
        v = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x2 = values[p] * values[p]
            v += sig[ka[i], j] * x2
            if kb[i] >= 0:
                v += sig[kb[i], j] * x2
        out[i] = v
    return out


@njit(cache=True)
def code_labels(labels, keys, codes):  # pragma: no cover - numba
    """(``codes[t]`` where ``labels[i] == keys[t]`` (``keys`` sorted) else -1, per label;
    how many were not found).

    One pass over an int64 label array; a linear scan beats a bisection for the
    usual handful of labels.
    """
    n = labels.shape[0]
    nk = keys.shape[0]
    out = np.empty(n, np.int64)
    missing = 0
    for i in range(n):
        v = labels[i]
        c = -1
        if nk <= 8:
            for t in range(nk):
                if keys[t] == v:
                    c = codes[t]
                    break
        else:
            lo = 0
            hi = nk
            while lo < hi:
                mid = (lo + hi) >> 1
                if keys[mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < nk and keys[lo] == v:
                c = codes[lo]
        out[i] = c
        missing += c < 0
    return out, missing


@njit(cache=True)
def details_diag(indptr, indices, values, w, n_labels):  # pragma: no cover - numba
    """``scores``, ``best_two`` and ``pair_variance_diag`` in one call (one dispatch
    instead of three: a 1-row ``predict_details`` is mostly call overhead).

    ``w`` is the (R, d, 2) diagonal state; the same kernels run on its μ and σ
    views, so the results are identical to calling them one by one.
    Returns (scores, best, margin, variance).
    """
    binary = n_labels == 2
    s = scores(indptr, indices, values, w[:, :, 0], binary)
    best, second, margin = best_two(s, binary)
    ka = best if s.shape[1] > 2 else np.zeros(best.shape[0], np.int64)
    return s, best, margin, pair_variance_diag(indptr, indices, values, w[:, :, 1], ka, second)
