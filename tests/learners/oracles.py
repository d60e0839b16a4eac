"""Pure-Python oracles of the online linear classifiers, written from the papers.

Deliberately naive (lists and dicts, one example at a time, the formulas as
printed) so that the numba kernels in ``learners.linear._kernels`` can be checked
against an independent reading of the papers:

- PA / PA-I / PA-II: Crammer, Dekel, Keshet, Shalev-Shwartz, Singer (JMLR 2006), Fig. 1.
- CW: Crammer, Dredze, Pereira, "Exact Convex Confidence-Weighted Learning" (NIPS 2008);
  diagonal: Σ⁻¹ += 2αφ diag(x²).
- AROW: Crammer, Kulesza, Dredze (NIPS 2009), Fig. 1; diagonal: σᵢ −= βσᵢ²xᵢ².
- SCW-I / SCW-II: Wang, Zhao, Hoi (ICML 2012), Eqs. for α and u, β.

Multiclass: Jubatus-style single-constraint update against the best wrong label,
binary → multiclass embedding μ₀ = μ/2, μ₁ = −μ/2, Σ₀ = Σ₁ = Σ/2.
φ comes from scipy (independent of the package's own Φ⁻¹).
"""

from __future__ import annotations

import math
from typing import Any

from scipy.stats import norm

Row = dict[int, float]


class LinearOracle:
    def __init__(
        self,
        algorithm: str,
        dim: int,
        covariance: str = "diagonal",
        C: float = 1.0,
        eta: float = 0.9,
        r: float = 1.0,
    ) -> None:
        self.algorithm = algorithm
        self.dim = dim
        self.has_cov = algorithm not in ("pa", "pa1", "pa2")
        self.full = self.has_cov and covariance == "full"
        self.C = C
        self.r = r
        self.phi = float(norm.ppf(eta))
        self.labels: list[Any] = []
        self.mu: list[list[float]] = [[0.0] * dim]
        self.cov: list[Any] = [self._eye()] if self.has_cov else []

    # ------------------------------------------------------------- state

    def _eye(self) -> Any:
        if self.full:
            return [[1.0 if a == b else 0.0 for b in range(self.dim)] for a in range(self.dim)]
        return [1.0] * self.dim

    def _add_label(self, label: Any) -> None:
        self.labels.append(label)
        if len(self.labels) == 3:
            mu = self.mu[0]
            self.mu = [[w / 2 for w in mu], [-w / 2 for w in mu], [0.0] * self.dim]
            if self.has_cov:
                if self.full:
                    half = [[s / 2 for s in row] for row in self.cov[0]]
                    self.cov = [half, [list(row) for row in half], self._eye()]
                else:
                    half = [s / 2 for s in self.cov[0]]
                    self.cov = [half, list(half), self._eye()]
        elif len(self.labels) > 3:
            self.mu.append([0.0] * self.dim)
            if self.has_cov:
                self.cov.append(self._eye())

    # ------------------------------------------------------------- algebra

    def _dot(self, k: int, x: Row) -> float:
        return sum(self.mu[k][j] * v for j, v in x.items())

    def _sigma_x(self, k: int, x: Row) -> list[float]:
        if self.full:
            return [sum(self.cov[k][a][j] * v for j, v in x.items()) for a in range(self.dim)]
        out = [0.0] * self.dim
        for j, v in x.items():
            out[j] = self.cov[k][j] * v
        return out

    def _var(self, k: int, x: Row) -> float:
        sx = self._sigma_x(k, x)
        return sum(v * sx[j] for j, v in x.items())

    def scores(self, x: Row) -> dict[Any, float]:
        if len(self.labels) <= 2:
            s = self._dot(0, x)
            return dict(zip(self.labels, [s, -s][: len(self.labels)], strict=True))
        return {lab: self._dot(k, x) for k, lab in enumerate(self.labels)}

    # ------------------------------------------------------------- step sizes

    def _coefficients(self, m: float, v: float, sq_norm: float) -> tuple[float, float, float]:
        """(α, β, κ): κ is the CW diagonal precision increment 2αφ."""
        a = self.algorithm
        phi = self.phi
        if a in ("pa", "pa1", "pa2"):
            loss = max(0.0, 1.0 - m)
            if loss == 0.0 or sq_norm == 0.0:
                return 0.0, 0.0, 0.0
            if a == "pa":
                return loss / sq_norm, 0.0, 0.0
            if a == "pa1":
                return min(self.C, loss / sq_norm), 0.0, 0.0
            return loss / (sq_norm + 1.0 / (2.0 * self.C)), 0.0, 0.0
        if v <= 0.0:
            return 0.0, 0.0, 0.0
        if a == "arow":
            if m >= 1.0:
                return 0.0, 0.0, 0.0
            beta = 1.0 / (v + self.r)
            return max(0.0, 1.0 - m) * beta, beta, 0.0
        if phi * math.sqrt(v) - m <= 0.0:
            return 0.0, 0.0, 0.0
        psi = 1.0 + phi**2 / 2.0
        xi = 1.0 + phi**2
        if a in ("cw", "scw1"):
            alpha = max(
                0.0, (-m * psi + math.sqrt(m**2 * phi**4 / 4.0 + v * phi**2 * xi)) / (v * xi)
            )
            if a == "scw1":
                alpha = min(self.C, alpha)
        else:  # scw2
            n = v + 1.0 / (2.0 * self.C)
            gamma = phi * math.sqrt(phi**2 * m**2 * v**2 + 4.0 * n * v * (n + v * phi**2))
            alpha = max(
                0.0, (-(2.0 * m * n + phi**2 * m * v) + gamma) / (2.0 * (n**2 + n * v * phi**2))
            )
        if alpha <= 0.0:
            return 0.0, 0.0, 0.0
        u = 0.25 * (-alpha * v * phi + math.sqrt(alpha**2 * v**2 * phi**2 + 4.0 * v)) ** 2
        beta = alpha * phi / (math.sqrt(u) + v * alpha * phi)
        return alpha, beta, 2.0 * alpha * phi

    # ------------------------------------------------------------- update

    def _move(self, k: int, x: Row, coef: float, beta: float, kappa: float) -> None:
        if not self.has_cov:
            for j, v in x.items():
                self.mu[k][j] += coef * v
            return
        sx = self._sigma_x(k, x)
        for j in range(self.dim):
            self.mu[k][j] += coef * sx[j]
        if self.full:
            S = self.cov[k]
            for a in range(self.dim):
                for b in range(self.dim):
                    S[a][b] -= beta * sx[a] * sx[b]
        elif self.algorithm == "cw":
            for j, v in x.items():
                self.cov[k][j] = 1.0 / (1.0 / self.cov[k][j] + kappa * v * v)
        else:
            for j, v in x.items():
                s = self.cov[k][j]
                self.cov[k][j] = s - beta * s * s * v * v

    def update(self, x: Row, label: Any) -> tuple[Any, float, bool]:
        """Learn one example; returns (pre-update prediction, hinge loss, model changed)."""
        if label not in self.labels:
            self._add_label(label)
        sc = self.scores(x)
        pred = max(self.labels, key=lambda lab: (sc[lab], -self.labels.index(lab)))
        sq_norm = sum(v * v for v in x.values())
        if len(self.labels) <= 2:
            y = 1.0 if label == self.labels[0] else -1.0
            m = y * self._dot(0, x)
            v = self._var(0, x) if self.has_cov else 0.0
            alpha, beta, kappa = self._coefficients(m, v, sq_norm)
            if alpha > 0.0:
                self._move(0, x, y * alpha, beta, kappa)
        else:
            ky = self.labels.index(label)
            wrong = [k for k in range(len(self.labels)) if k != ky]
            kr = max(wrong, key=lambda k: (sc[self.labels[k]], -k))
            m = sc[label] - sc[self.labels[kr]]
            v = self._var(ky, x) + self._var(kr, x) if self.has_cov else 0.0
            alpha, beta, kappa = self._coefficients(m, v, 2.0 * sq_norm)
            if alpha > 0.0:
                self._move(ky, x, alpha, beta, kappa)
                self._move(kr, x, -alpha, beta, kappa)
        return pred, max(0.0, 1.0 - m), alpha > 0.0
