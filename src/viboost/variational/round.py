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

import numba
import numpy as np

from viboost.variational.compression import compress_round
from viboost.variational.elbo import core_elbo, elbo, leaf_log_normalizer, log_normalizer_c
from viboost.variational.priors import ModelPriors
from viboost.variational.state import CleanLogOdds, VariationalState
from viboost.variational.updates import (
    approx_alpha,
    exact_alpha,
    leaf_approx_alphas,
    leaf_exact_alphas,
    update_clean_proba,
    update_eta,
    update_omega,
)

__all__ = ["RoundResult", "RoundRows", "RoundSettings", "initial_state", "run_round"]


@dataclass(frozen=True, eq=False)
class RoundRows:
    """The rows of one round: labels and base-learner outputs in {-1, +1}, the ensemble ``H``
    before the round, and positive multiplicities (sample weights).

    For a tree with per-leaf weights (each leaf a base classifier, section 4's prior on each
    weight), ``leaf_offsets`` is set: the rows are sorted by leaf, leaf ``l`` holding
    ``[leaf_offsets[l], leaf_offsets[l + 1])``, and ``h = +1`` (the leaf's indicator).
    """

    y: np.ndarray
    h: np.ndarray
    margin: np.ndarray
    sample_weight: np.ndarray
    leaf_offsets: np.ndarray | None = None

    @property
    def per_leaf(self) -> bool:
        """Whether the round's weights are one per leaf."""
        return self.leaf_offsets is not None

    @property
    def leaf(self) -> np.ndarray:
        """Each row's leaf (rows sorted by leaf)."""
        offsets = self.leaf_offsets
        assert offsets is not None, "rows without leaf offsets have no leaves"
        return np.repeat(np.arange(offsets.size - 1), np.diff(offsets))

    @classmethod
    def weighted(
        cls,
        y: np.ndarray,
        h: np.ndarray | None,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        leaf: np.ndarray | None = None,
        n_leaves: int = 1,
    ) -> RoundRows:
        """The rows of positive weight themselves (sorted by ``leaf`` when given; ``h`` is
        then unused, None for a tree with per-leaf weights)."""
        if leaf is None:
            assert h is not None, "rows without leaves need the learner's outputs h"
            act = sample_weight > 0
            return cls(y[act], h[act], margin[act], sample_weight[act])
        # One compiled counting sort of the rows of positive weight by leaf (stable, so the
        # order of numpy's stable argsort; a few numpy calls a round cost more at small data).
        y_s, margin_s, weight_s, offsets = _rows_by_leaf(
            np.ascontiguousarray(y, dtype=np.float64),
            np.ascontiguousarray(margin, dtype=np.float64),
            np.ascontiguousarray(sample_weight, dtype=np.float64),
            np.ascontiguousarray(leaf, dtype=np.int64),
            int(n_leaves),
        )
        return cls(y_s, np.ones(y_s.size), margin_s, weight_s, offsets)

    @classmethod
    def pseudo(
        cls,
        y: np.ndarray,
        h: np.ndarray | None,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        knot_range: tuple[float, float] | None = None,
        leaf: np.ndarray | None = None,
        n_leaves: int = 1,
    ) -> RoundRows:
        """The pseudo-rows of knot aggregation
        (:func:`~viboost.variational.compression.compress_round`, per leaf when ``leaf`` is
        given, ``h`` then unused): every sum of the round within ~1e-9 relative, ``O(bins)`` of
        them."""
        if leaf is None:
            assert h is not None, "rows without leaves need the learner's outputs h"
            return cls(*compress_round(y, h, margin, sample_weight, knot_range=knot_range))
        y_p, h_p, margin_p, weight_p, leaf_p = compress_round(
            y, np.ones_like(y), margin, sample_weight, knot_range=knot_range, leaf=leaf,
            n_leaves=n_leaves,
        )  # fmt: skip
        return cls(y_p, h_p, margin_p, weight_p, _offsets(leaf_p, n_leaves))


@numba.njit(cache=True)
def _rows_by_leaf(y, margin, sample_weight, leaf, n_leaves):  # pragma: no cover - compiled
    """The rows of positive weight, sorted by ``leaf`` (stably), and each leaf's offsets."""
    offsets = np.zeros(n_leaves + 1, dtype=np.int64)
    for i in range(leaf.shape[0]):
        if leaf[i] < 0 or leaf[i] >= n_leaves:
            raise ValueError("a row's leaf is outside 0..n_leaves - 1")
        if sample_weight[i] > 0:
            offsets[leaf[i] + 1] += 1
    for k in range(n_leaves):
        offsets[k + 1] += offsets[k]
    n = offsets[n_leaves]
    y_s, margin_s, weight_s = np.empty(n), np.empty(n), np.empty(n)
    at = offsets[:n_leaves].copy()
    for i in range(leaf.shape[0]):
        if sample_weight[i] > 0:
            k = at[leaf[i]]
            at[leaf[i]] = k + 1
            y_s[k], margin_s[k], weight_s[k] = y[i], margin[i], sample_weight[i]
    return y_s, margin_s, weight_s, offsets


def _offsets(sorted_or_not: np.ndarray, n_leaves: int) -> np.ndarray:
    """Start of each leaf's rows once sorted by leaf, and the end: ``n_leaves + 1`` offsets."""
    counts = np.bincount(sorted_or_not, minlength=n_leaves)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


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
    """What a round returns: alpha_t (one per leaf for per-leaf rows), the state after it, its
    ELBO trace and iterations run."""

    alpha: float | np.ndarray
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
    # Per-leaf weights: q(c) factorises over the leaves; each leaf's factor is S.4.1 on its rows.
    offsets = rows.leaf_offsets
    leaf = rows.leaf if offsets is not None else None

    def alpha_now() -> float | np.ndarray:
        if exact_mode:
            multiplicity = weight * np.exp(log_clean)
            if offsets is not None:
                return leaf_exact_alphas(offsets, y, margin, multiplicity, priors.weight)
            return exact_alpha(y, margin, h, multiplicity, priors.weight)
        # log(s_n phi_n) - tau y_n H(x_n): the weights of the approximate mode (S.6).
        log_w = log_weight + log_clean - tau * y * margin
        if offsets is not None:
            return leaf_approx_alphas(offsets, y, log_w, priors.weight, tau)
        return approx_alpha(y, h, log_w, priors.weight, tau)

    def step(alpha: float | np.ndarray) -> np.ndarray:
        """The round's base learners times their weights at each row."""
        return np.asarray(alpha)[leaf] if offsets is not None else alpha * h

    def elbo_now(alpha: float | np.ndarray) -> float:
        multiplicity = weight * np.exp(log_clean)
        if offsets is not None:
            log_b = leaf_log_normalizer(
                offsets, y, margin, multiplicity, priors.weight, np.asarray(alpha)
            )
        else:
            log_b = log_normalizer_c(y, margin, h, multiplicity, priors.weight, float(alpha))
        if not settings.noise_model:
            return core_elbo(log_b, priors.weight)
        return elbo(log_b, y, weight, log_clean, log_noise, eta, omega, priors)

    if not settings.noise_model:  # core model: phi = 1, the weight update alone
        alpha = alpha_now()
        # As with the noise model, fixed_vi_iter means: compute no ELBO.
        trace = [] if settings.fixed_vi_iter is not None else [elbo_now(alpha)]
        return RoundResult(alpha, state, np.array(trace), 0)

    track = settings.fixed_vi_iter is None
    n_iter = settings.max_vi_iter if settings.fixed_vi_iter is None else settings.fixed_vi_iter
    alpha = 0.0 if offsets is None else np.zeros(offsets.size - 1)
    trace = [elbo_now(alpha)] if track else []
    it = 0
    for it in range(n_iter):
        if it == 0 or not settings.update_alpha_once:
            alpha = alpha_now()
        omega = update_omega(y, weight, np.exp(log_noise), priors.noise_grade)
        # phi from (alpha, omega, the previous eta); the same q(w) holds between rounds.
        clean, log_clean, log_noise = update_clean_proba(y, margin + step(alpha), eta, omega)
        eta = update_eta(weight, np.exp(log_clean), np.exp(log_noise), priors.clean)
        if track:
            trace.append(elbo_now(alpha))
            if trace[-1] - trace[-2] <= settings.tol * abs(trace[-2]):
                break
    new_state = VariationalState(eta=eta, omega=omega, clean=clean)
    return RoundResult(alpha, new_state, np.array(trace), it + 1)
