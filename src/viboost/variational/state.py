"""The variational state between rounds, and the one definition of phi_n.

The mean-field factors that outlive a round (section 5, eqs. (15)-(16); S.4) are

========  ============================  ==============================================
factor    family                        held in :class:`VariationalState` as
========  ============================  ==============================================
q(theta)  Beta(eta_1, eta_2)            ``eta``; the SNR is ``eta_1 / eta_2``
q(xi)     v-Log([+1,-1], [0,0], omega)  ``omega``; the noise grade is
                                        ``log(omega_2 / omega_1)``
q(w_n)    Bernoulli(phi_n)              ``clean``: a :class:`CleanLogOdds`
========  ============================  ==============================================

(q(c) of a round's weight is summarised by its mode alpha_t once the round ends.)

phi_n, the posterior probability that label n is true, is defined here and nowhere else. By the
type update (S.4.3, eq. (79)), with ``u_n = -y_n H(x_n)`` the knot of row n after the round,

    logit phi_n = a_{y_n} - softplus(u_n),
    a_y = psi(eta_1) - psi(eta_2) + psi(omega_0) - psi(omega_y),

(``omega_0 = omega_1 + omega_2``, ``omega_{+1} = omega_2``, ``omega_{-1} = omega_1``), so q(w)
is a function of the margin and phi_n is recomputed, never stored. Before the first round (and
for the core model, phi = 1) the slope of ``softplus`` is 0 and ``a = logit(init_clean_proba)``.
The same definition is written in three forms, side by side below and tested equal:

- numpy, in log space: :meth:`CleanLogOdds.log_proba` gives ``(log phi_n, log(1 - phi_n))``;
- compiled, logistic: :func:`clean_proba_kernel` (through :meth:`CleanLogOdds.proba`);
- compiled, rational (slope 1): with ``E = exp(u)`` and ``A = exp(-a_y)``,
  ``1 / phi = 1 + A + A E`` (:func:`inverse_clean_proba`) and, for ``E > 1`` with
  ``R = exp(-u)``, ``R / phi = (1 + A) R + A`` (:func:`scaled_inverse_clean_proba`). The
  reweighting kernels (:mod:`viboost.boosting.reweighting`) need ``phi e^u`` per row and get it from
  the cached ``E`` without an exponential.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.special import digamma, log_expit, logit

from viboost._utils.parallel import threaded_kernel
from viboost._utils.special import softplus

__all__ = [
    "CleanLogOdds",
    "VariationalState",
    "clean_proba_kernel",
    "inverse_clean_proba",
    "scaled_inverse_clean_proba",
]


@dataclass(frozen=True)
class CleanLogOdds:
    """q(w) as a function of the ensemble: ``logit phi_n = a_{y_n} - slope softplus(-y_n H_n)``.

    ``offset_neg`` and ``offset_pos`` are ``a_{-1}`` and ``a_{+1}``; ``slope`` is 1 after a type
    update (:meth:`from_posteriors`) and 0 for a constant phi (:meth:`constant`).

    Examples
    --------
    >>> import numpy as np
    >>> clean = CleanLogOdds.from_posteriors(np.array([9.0, 1.0]), np.array([1.0, 1.0]))
    >>> phi = clean.proba(np.array([1.0, 1.0]), np.array([3.0, -3.0]))
    >>> bool(phi[0] > phi[1])  # a label the ensemble disagrees with is less likely true
    True
    """

    offset_neg: float
    offset_pos: float
    slope: float

    @classmethod
    def constant(cls, clean_proba: float) -> CleanLogOdds:
        """phi_n = ``clean_proba`` for every row (``+inf`` log-odds for 1, the core model)."""
        with np.errstate(divide="ignore"):
            logit = float(np.log(clean_proba) - np.log1p(-clean_proba))
        return cls(logit, logit, 0.0)

    @classmethod
    def from_posteriors(cls, eta: np.ndarray, omega: np.ndarray) -> CleanLogOdds:
        """The type update (S.4.3, eq. (79)) under q(theta) = Beta(eta), q(xi) = v-Log(omega)."""
        base = digamma(eta[0]) - digamma(eta[1]) + digamma(omega[0] + omega[1])
        psi_omega = digamma(omega)
        return cls(float(base - psi_omega[0]), float(base - psi_omega[1]), 1.0)

    @classmethod
    def from_point_estimates(cls, theta: float, noise_grade: float) -> CleanLogOdds:
        """The type update (S.4.3, eq. (79)) with point values of theta and xi in place of the
        expectations over q(theta) and q(xi): ``a_y = logit theta - log sigmoid(y xi)``, i.e.
        ``phi_n = theta sigmoid(y F) / (theta sigmoid(y F) + (1 - theta) sigmoid(y xi))``, the
        E-step of EM (used by :mod:`viboost.noise_fit.calibration`)."""
        logit_theta = float(logit(theta))
        return cls(
            float(logit_theta - log_expit(-noise_grade)),
            float(logit_theta - log_expit(noise_grade)),
            1.0,
        )

    def log_proba(self, y: np.ndarray, margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log phi_n, log(1 - phi_n))`` for labels ``y`` in {-1, +1} and ensemble ``margin``.

        Kept in log space so that phi near 0 or 1 keeps its digits.
        """
        positive = y > 0
        if not self.slope:  # phi is one value per label: two of each log, not one per row
            log_clean = log_expit(np.array([self.offset_neg, self.offset_pos]))
            log_noise = log_expit(-np.array([self.offset_neg, self.offset_pos]))
            return np.where(positive, log_clean[1], log_clean[0]), np.where(
                positive, log_noise[1], log_noise[0]
            )
        offset = np.where(positive, self.offset_pos, self.offset_neg)
        log_kappa = offset - self.slope * softplus(-y * margin)
        return log_expit(log_kappa), log_expit(-log_kappa)

    def proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n for labels ``y`` in {-1, +1} and ensemble ``margin`` (one compiled pass)."""
        y, margin = (np.ascontiguousarray(a, dtype=np.float64) for a in (y, margin))
        return clean_proba_kernel(y, margin, self.offset_neg, self.offset_pos, self.slope)


@threaded_kernel(cache=True)
def clean_proba_kernel(y, margin, offset_neg, offset_pos, slope):  # pragma: no cover - compiled
    """phi_n = sigmoid(a_{y_n} - slope softplus(-y_n H_n)), overflow-free (compiled form)."""
    n = y.shape[0]
    out = np.empty(n)
    for i in numba.prange(n):
        knot = -y[i] * margin[i]
        logit = offset_pos if y[i] > 0.0 else offset_neg
        if slope != 0.0:
            logit -= slope * (max(knot, 0.0) + math.log1p(math.exp(-abs(knot))))
        if logit >= 0.0:
            out[i] = 1.0 / (1.0 + math.exp(-logit))
        else:
            e = math.exp(logit)
            out[i] = e / (1.0 + e)
    return out


@numba.njit(cache=True)
def inverse_clean_proba(exp_knot, inverse_odds):  # pragma: no cover - compiled
    """``1 / phi = 1 + A + A E`` from ``E = exp(-y H)`` and ``A = exp(-a_y)`` (slope 1)."""
    return 1.0 + inverse_odds + inverse_odds * exp_knot


@numba.njit(cache=True)
def scaled_inverse_clean_proba(exp_neg_knot, inverse_odds):  # pragma: no cover - compiled
    """``R / phi = (1 + A) R + A`` from ``R = exp(y H)`` and ``A = exp(-a_y)`` (slope 1).

    The form of :func:`inverse_clean_proba` for large knots, where ``E = 1 / R`` would overflow.
    """
    return (1.0 + inverse_odds) * exp_neg_knot + inverse_odds


@dataclass(frozen=True, eq=False)
class VariationalState:
    """q(theta) = Beta(eta), q(xi) = v-Log([+1,-1], [0,0], omega) and q(w) between rounds."""

    eta: np.ndarray
    omega: np.ndarray
    clean: CleanLogOdds

    @property
    def snr(self) -> float:
        """The signal-to-noise ratio ``eta_1 / eta_2`` (section 4, S.2)."""
        return float(self.eta[0] / self.eta[1])

    @property
    def noise_grade(self) -> float:
        """``log(omega_2 / omega_1)``, the mode of q(xi): the log-odds of +1 among noisy labels."""
        return float(np.log(self.omega[1] / self.omega[0]))
