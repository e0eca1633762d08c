"""One round of Algorithm 1 after its stump is chosen: the inner variational loop.

The round's model (section 5, Figure 4) fixes the ensemble ``H`` and the new stump ``h``; what
the inner loop needs of the data are per-row sums over ``(y_n, h_n, H_n, s_n)``, so it runs on
the weighted rows or, for large data, on the pseudo-rows of :mod:`viboost.variational.compression`
(both are a :class:`RoundRows`). :func:`run_round` iterates the updates of
:mod:`viboost.variational.updates` (alpha, omega, phi, eta, in the order of Algorithm 1) and owns
the stopping rule: the dynamic ELBO (:mod:`viboost.variational.elbo`) rising by at most ``tol``
relative, a fixed number of iterations (the paper's modification (a)), and alpha set once
(modification (b)). It returns alpha_t, the new :class:`VariationalState`, the ELBO trace and the
iteration count; nothing is mutated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from viboost.variational.compression import compress_round
from viboost.variational.elbo import core_elbo, elbo, log_normalizer_c
from viboost.variational.priors import ModelPriors
from viboost.variational.state import CleanLogOdds, VariationalState
from viboost.variational.updates import (
    approx_alpha,
    exact_alpha,
    update_clean_proba,
    update_eta,
    update_omega,
)

__all__ = ["RoundResult", "RoundRows", "RoundSettings", "initial_state", "run_round"]


@dataclass(frozen=True, eq=False)
class RoundRows:
    """The rows of one round: labels and stump outputs in {-1, +1}, the ensemble ``H`` before
    the round, and positive multiplicities (sample weights)."""

    y: np.ndarray
    h: np.ndarray
    margin: np.ndarray
    sample_weight: np.ndarray

    @classmethod
    def weighted(
        cls, y: np.ndarray, h: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> RoundRows:
        """The rows of positive weight themselves."""
        act = sample_weight > 0
        return cls(y[act], h[act], margin[act], sample_weight[act])

    @classmethod
    def pseudo(
        cls,
        y: np.ndarray,
        h: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        knot_range: tuple[float, float] | None = None,
    ) -> RoundRows:
        """The pseudo-rows of knot aggregation
        (:func:`~viboost.variational.compression.compress_round`):
        every sum of the round within ~1e-9 relative, ``O(bins)`` of them."""
        return cls(*compress_round(y, h, margin, sample_weight, knot_range=knot_range))


@dataclass(frozen=True)
class RoundSettings:
    """How a round is run; the estimator's hyperparameters of the same names."""

    tau: float = 1.0
    alpha: str = "approx"  # "approx" (section 5 eq. (17)) or "exact" (the mode of q(c))
    noise_model: bool = True
    tol: float = 1e-8
    max_vi_iter: int = 100
    fixed_vi_iter: int | None = None
    update_alpha_once: bool = False

    @property
    def exact_mode(self) -> bool:
        """Whether alpha is the exact mode of q(c) (then stumps are ranked by logistic-loss
        weights, :mod:`viboost.boosting.reweighting`)."""
        return self.alpha == "exact"


class RoundResult(NamedTuple):
    """What a round returns: alpha_t, the state after it, its ELBO trace and iterations run."""

    alpha: float
    state: VariationalState
    elbo_trace: np.ndarray
    n_iter: int


def initial_state(
    y: np.ndarray,
    sample_weight: np.ndarray,
    init_clean_proba: float,
    init_eta: tuple[float, float],
    priors: ModelPriors,
) -> VariationalState:
    """The state before the first round: phi_n = ``init_clean_proba`` for every row, eta =
    ``init_eta``, and omega from that phi (S.4.2) so the first ELBO is defined."""
    omega = update_omega(
        y, sample_weight, np.full(y.shape[0], 1.0 - init_clean_proba), priors.noise_grade
    )
    return VariationalState(
        eta=np.array(init_eta), omega=omega, clean=CleanLogOdds.constant(init_clean_proba)
    )


def run_round(
    rows: RoundRows, state: VariationalState, priors: ModelPriors, settings: RoundSettings
) -> RoundResult:
    """Run the inner loop of Algorithm 1 for one round; return alpha_t and the new state.

    Each iteration updates, in turn, alpha (the mode of q(c): approximate, eq. (17), or exact),
    omega (S.4.2), phi (S.4.3, at ``H + alpha h``, with the previous eta) and eta (S.4.4). With
    ``settings.fixed_vi_iter`` it runs that many iterations and computes no ELBO; otherwise it
    stops once an iteration raises the dynamic ELBO by at most ``tol * |ELBO|`` (a fall stops it
    too) or after ``max_vi_iter``. The trace holds the ELBO before the first iteration and after
    each. Without the noise model (phi = 1) there is no loop: alpha is the mode of q(c) and the
    trace is the round's exact log evidence (empty with ``fixed_vi_iter``: no ELBO is computed).

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.variational import (
    ...     ModelPriors, RoundRows, RoundSettings, initial_state, run_round)
    >>> y = np.array([1.0, 1.0, -1.0, -1.0, 1.0])
    >>> h = np.array([1.0, 1.0, -1.0, -1.0, -1.0])  # the stump is wrong on the last row
    >>> rows = RoundRows.weighted(y, h, np.zeros(5), np.ones(5))
    >>> state = initial_state(y, np.ones(5), 1.0, (1.0, 1.0), ModelPriors())
    >>> result = run_round(rows, state, ModelPriors(), RoundSettings())
    >>> bool(result.alpha > 0), bool(np.all(np.diff(result.elbo_trace)[:-1] > 0))
    (True, True)
    """
    y, h, margin, weight = rows.y, rows.h, rows.margin, rows.sample_weight
    tau = float(settings.tau)
    exact_mode = settings.exact_mode
    log_weight = np.log(weight)
    log_clean, log_noise = state.clean.log_proba(y, margin)
    eta, omega, clean = state.eta, state.omega, state.clean

    def alpha_now() -> float:
        if exact_mode:
            return exact_alpha(y, margin, h, weight * np.exp(log_clean), priors.weight)
        # log(s_n phi_n) - tau y_n H(x_n): the weights of the approximate mode (S.6).
        return approx_alpha(y, h, log_weight + log_clean - tau * y * margin, priors.weight, tau)

    def elbo_now(alpha: float) -> float:
        log_b = log_normalizer_c(y, margin, h, weight * np.exp(log_clean), priors.weight, alpha)
        if not settings.noise_model:
            return core_elbo(log_b, priors.weight)
        return elbo(log_b, y, weight, log_clean, log_noise, eta, omega, priors)

    if not settings.noise_model:  # core model: phi = 1, the weight update alone
        alpha = alpha_now()
        # As with the noise model, fixed_vi_iter means: compute no ELBO.
        trace = [] if settings.fixed_vi_iter is not None else [elbo_now(alpha)]
        return RoundResult(alpha, state, np.array(trace), 0)

    track = settings.fixed_vi_iter is None
    n_iter = settings.max_vi_iter if track else settings.fixed_vi_iter
    trace = [elbo_now(0.0)] if track else []
    alpha, it = 0.0, 0
    for it in range(n_iter):
        if it == 0 or not settings.update_alpha_once:
            alpha = alpha_now()
        omega = update_omega(y, weight, np.exp(log_noise), priors.noise_grade)
        # phi from (alpha, omega, the previous eta); the same q(w) holds between rounds.
        clean, log_clean, log_noise = update_clean_proba(y, margin + alpha * h, eta, omega)
        eta = update_eta(weight, np.exp(log_clean), np.exp(log_noise), priors.clean)
        if track:
            trace.append(elbo_now(alpha))
            if trace[-1] - trace[-2] <= settings.tol * abs(trace[-2]):
                break
    new_state = VariationalState(eta=eta, omega=omega, clean=clean)
    return RoundResult(alpha, new_state, np.array(trace), it + 1)
