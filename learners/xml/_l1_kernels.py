"""numba kernel: L1-regularised logistic regression by newGLMNET.

Solves ``min_w ||w||_1 + sum_i C_i log(1 + exp(-y_i w^T x_i))`` with the
newGLMNET method of Yuan, Ho & Lin (2012), the solver LIBLINEAR uses for
``-s 6`` and the one the released FastXML code runs at every node:

- outer Newton iterations: a quadratic model of the loss around ``w`` (gradient
  and the generalised Hessian ``X^T D X + nu I``) plus the exact L1 term;
- the model is minimised by randomised cyclic coordinate descent with the
  closed-form one-variable soft-threshold step (inner iterations);
- an Armijo line search on the true objective along the Newton direction;
- outer/inner "shrinking": a coordinate at zero whose gradient lies well inside
  [-1, 1] is dropped from the active set (it cannot become non-zero).

The data come column-major (CSC) because every step of coordinate descent walks
one feature's column. The kernels run without the GIL (``nogil=True``) so trees
can grow on several threads at once.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def rng_next(state: np.ndarray) -> np.uint64:
    """splitmix64 step on a one-element uint64 array (explicit, thread-private RNG)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def rng_below(state: np.ndarray, n: int) -> int:
    """A uniform integer in ``[0, n)`` (modulo bias is irrelevant for n << 2**64)."""
    return int(rng_next(state) % np.uint64(n))


@njit(cache=True, nogil=True)
def log1pexp(z: float) -> float:
    """``log(1 + exp(z))`` without overflow."""
    if z > 0.0:
        return z + np.log1p(np.exp(-z))
    return np.log1p(np.exp(z))


@njit(cache=True, nogil=True)
def l1lr_objective(
    col_ptr: np.ndarray,
    row_idx: np.ndarray,
    vals: np.ndarray,
    y: np.ndarray,
    C: np.ndarray,
    w: np.ndarray,
) -> float:
    n = y.shape[0]
    s = np.zeros(n)
    norm = 0.0
    for j in range(w.shape[0]):
        wj = w[j]
        if wj != 0.0:
            norm += abs(wj)
            for p in range(col_ptr[j], col_ptr[j + 1]):
                s[row_idx[p]] += wj * vals[p]
    loss = 0.0
    for i in range(n):
        loss += C[i] * log1pexp(-y[i] * s[i])
    return norm + loss


@njit(cache=True, nogil=True)
def l1lr_solve(
    col_ptr: np.ndarray,
    row_idx: np.ndarray,
    vals: np.ndarray,
    y: np.ndarray,
    C: np.ndarray,
    w: np.ndarray,
    eps: float,
    max_newton: int,
    max_inner: int,
    rng: np.ndarray,
    margins: np.ndarray,
) -> int:
    """Minimise the objective in place in ``w`` (a warm start); returns Newton steps.

    ``y`` holds +-1.0, ``C`` the per-example loss weights. Stops when the
    L1 norm of the minimum-norm sub-gradient falls below ``eps`` times its value
    at the start, or after ``max_newton`` steps. ``margins`` receives ``X w``.
    """
    n = y.shape[0]
    d = w.shape[0]
    nu = 1e-12  # keeps the diagonal Hessian positive for empty/constant columns
    sigma = 0.01  # Armijo sufficient-decrease constant
    max_linesearch = 20

    s = margins
    s[:] = 0.0
    w_norm = 0.0
    for j in range(d):
        wj = w[j]
        if wj != 0.0:
            w_norm += abs(wj)
            for p in range(col_ptr[j], col_ptr[j + 1]):
                s[row_idx[p]] += wj * vals[p]
    loss = 0.0
    for i in range(n):
        loss += C[i] * log1pexp(-y[i] * s[i])

    tau = np.empty(n)  # C_i y_i sigma(-y_i s_i): grad_j = -sum_i x_ij tau_i
    D = np.empty(n)  # C_i p_i (1 - p_i): the loss's second derivative in s_i
    xd = np.zeros(n)  # X d for the current Newton direction d = wpd - w
    index = np.arange(d)
    hdiag = np.empty(d)
    grad = np.empty(d)
    wpd = np.empty(d)
    gmax_old = np.inf
    gnorm1_init = 0.0
    inner_eps = 1.0
    newton = 0
    while newton < max_newton:
        for i in range(n):
            m = y[i] * s[i]
            if m >= 0.0:
                e = np.exp(-m)
                p = e / (1.0 + e)
            else:
                p = 1.0 / (1.0 + np.exp(m))
            tau[i] = C[i] * y[i] * p
            D[i] = C[i] * p * (1.0 - p)

        # Gradient, Hessian diagonal and optimality violation; outer shrinking.
        active = d
        gmax_new = 0.0
        gnorm1_new = 0.0
        k = 0
        while k < active:
            j = index[k]
            h = nu
            g = 0.0
            for p in range(col_ptr[j], col_ptr[j + 1]):
                i = row_idx[p]
                v = vals[p]
                h += v * v * D[i]
                g -= v * tau[i]
            hdiag[j] = h
            grad[j] = g
            gp = g + 1.0
            gn = g - 1.0
            viol = 0.0
            if w[j] == 0.0:
                if gp < 0.0:
                    viol = -gp
                elif gn > 0.0:
                    viol = gn
                elif gp > gmax_old / n and gn < -gmax_old / n:
                    active -= 1
                    index[k], index[active] = index[active], index[k]
                    continue
            elif w[j] > 0.0:
                viol = abs(gp)
            else:
                viol = abs(gn)
            gmax_new = max(gmax_new, viol)
            gnorm1_new += viol
            k += 1
        if newton == 0:
            gnorm1_init = gnorm1_new
        if gnorm1_new <= eps * gnorm1_init or gnorm1_new == 0.0:
            break

        # Coordinate descent on the quadratic model, with inner shrinking.
        for j in range(d):
            wpd[j] = w[j]
        for i in range(n):
            xd[i] = 0.0
        qp_active = active
        qp_gmax_old = np.inf
        it = 0
        while it < max_inner:
            qp_gmax_new = 0.0
            qp_gnorm1_new = 0.0
            for k in range(qp_active):
                r = k + rng_below(rng, qp_active - k)
                index[k], index[r] = index[r], index[k]
            k = 0
            while k < qp_active:
                j = index[k]
                H = hdiag[j]
                G = grad[j] + (wpd[j] - w[j]) * nu
                for p in range(col_ptr[j], col_ptr[j + 1]):
                    i = row_idx[p]
                    G += vals[p] * D[i] * xd[i]
                gp = G + 1.0
                gn = G - 1.0
                viol = 0.0
                if wpd[j] == 0.0:
                    if gp < 0.0:
                        viol = -gp
                    elif gn > 0.0:
                        viol = gn
                    elif gp > qp_gmax_old / n and gn < -qp_gmax_old / n:
                        qp_active -= 1
                        index[k], index[qp_active] = index[qp_active], index[k]
                        continue
                elif wpd[j] > 0.0:
                    viol = abs(gp)
                else:
                    viol = abs(gn)
                qp_gmax_new = max(qp_gmax_new, viol)
                qp_gnorm1_new += viol
                # closed-form minimiser of G z + H z^2 / 2 + |wpd_j + z|
                if gp < H * wpd[j]:
                    z = -gp / H
                elif gn > H * wpd[j]:
                    z = -gn / H
                else:
                    z = -wpd[j]
                k += 1
                if abs(z) < 1.0e-12:
                    continue
                z = min(max(z, -10.0), 10.0)
                wpd[j] += z
                for p in range(col_ptr[j], col_ptr[j + 1]):
                    xd[row_idx[p]] += vals[p] * z
            it += 1
            if qp_gnorm1_new <= inner_eps * gnorm1_init:
                if qp_active == active:
                    break
                qp_active = active  # re-check the shrunk coordinates once
                qp_gmax_old = np.inf
                continue
            qp_gmax_old = qp_gmax_new

        # Armijo line search along d on the true objective.
        # Tseng-Yun decrease measure at the full step: g^T d + ||w + d||_1 - ||w||_1
        delta = -w_norm
        for j in range(d):
            delta += grad[j] * (wpd[j] - w[j]) + abs(wpd[j])
        step = 1.0
        accepted = False
        for _ in range(max_linesearch):
            norm_new = 0.0
            for j in range(d):
                norm_new += abs(w[j] + step * (wpd[j] - w[j]))
            loss_new = 0.0
            for i in range(n):
                loss_new += C[i] * log1pexp(-y[i] * (s[i] + step * xd[i]))
            if loss_new - loss + norm_new - w_norm <= sigma * step * delta:
                for j in range(d):
                    w[j] = w[j] + step * (wpd[j] - w[j])
                for i in range(n):
                    s[i] += step * xd[i]
                loss = loss_new
                w_norm = norm_new
                accepted = True
                break
            step *= 0.5
        newton += 1
        if not accepted:
            break  # no decrease possible at working precision
        if it == 1:
            inner_eps *= 0.25  # the model was solved at once: ask more of it
        gmax_old = gmax_new
    for j in range(d):
        if abs(w[j]) <= 1e-16:
            w[j] = 0.0
    return newton
