"""Empirical Bayes for the noise model: (theta, xi, the scale of H) by the marginal likelihood.

Under the paper's model (section 4) an observed label is true with probability theta, drawn from
the logistic model of the ensemble, or noise, drawn with log-odds xi whatever ``x`` is, so

    p(y_n | x_n) = theta sigmoid(y_n F(x_n)) + (1 - theta) sigmoid(y_n xi)

once the type ``w_n`` is summed out (section 4, the display after step 6). Given margins ``H``
that were *not* fitted to the labels they are scored on (out-of-fold margins of cross-fitting),
this module maximises that marginal likelihood over ``theta``, ``xi`` and a scale ``b`` with
``F = b H``, under the model's own priors: Beta(zeta) on theta and v-Log([+1,-1], [0,0], mu_0')
on xi (S.1). The scale is needed because a booster fitted to noisy labels estimates the log-odds
of a *noisy* label, which the noise squeezes towards ``xi``; ``b`` stretches it back to the
log-odds of a true label. (In-sample margins cannot be used: the ensemble has partly fitted the
flipped labels, so they look true and theta runs to 1.)

At the optimum the type posterior is the type update of S.4.3 with point estimates in place of
the expectations, i.e. :meth:`~viboost.variational.CleanLogOdds.from_point_estimates` evaluated
at ``b H``: phi_n is defined there and only there. The curvature at the optimum gives a Laplace
approximation to the posterior of ``(logit theta, xi, log b)``, from which
:meth:`NoiseCalibration.flip_rate_interval` draws a credible interval for the share of wrong
labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit, logit

from viboost._utils.validation import RandomStateLike, spawn_generator
from viboost.variational.priors import ModelPriors
from viboost.variational.state import CleanLogOdds

__all__ = [
    "NoiseCalibration",
    "calibrate_noise",
    "equal_tailed_interval",
    "flip_rate_sums",
    "flip_rates_from_mislabel",
    "flip_rates_from_sums",
    "mislabel_proba_in_sample",
]

# A weakly informative N(0, 3^2) prior on log b keeps b finite when the margins carry no signal
# (b is then not identified by the likelihood); it moves a fitted b by well under 1% otherwise.
_LOG_SCALE_PRIOR_SD = 3.0
# The search box of (logit theta, xi, log b): wide enough for any data (theta within 1e-13 of 0
# or 1, noise log-odds of +-50, scales from 2e-9 to 5e8), narrow enough that nothing overflows.
_P0_MIN = 1e-9
_BOUNDS = [(-30.0, 30.0), (-50.0, 50.0), (-20.0, 20.0)]


@dataclass(frozen=True)
class NoiseCalibration:
    """The noise model's parameters fitted to out-of-fold margins, with their Laplace posterior.

    Attributes
    ----------
    theta : float
        Probability that a label is true (drawn from the signal model).
    noise_grade : float
        xi, the log-odds of a +1 among noisy labels.
    scale : float
        b: the log-odds of a true label is ``b * H``.
    covariance : ndarray of shape (3, 3)
        Laplace covariance of ``(logit theta, xi, log b)`` at the optimum.
    log_likelihood : float
        The weighted marginal log-likelihood ``sum_n s_n log p(y_n | H_n)`` at the optimum.
    """

    theta: float
    noise_grade: float
    scale: float
    covariance: np.ndarray
    log_likelihood: float

    def log_odds(self, margin: np.ndarray) -> np.ndarray:
        """F = b H + c: the log-odds of a true +1 label at ensemble margin ``H``.

        ``c`` is not a free parameter: a booster fitted to noisy labels puts ``H = 0`` where a
        *noisy* label is +1 with probability 1/2, which is where a true label is +1 with
        probability ``p0 = (1/2 - (1 - theta) sigmoid(xi)) / theta``; so ``c = logit p0``,
        which is 0 for symmetric noise (xi = 0) and shifts the boundary for class-dependent
        noise (S.2).
        """
        return self.scale * margin + _intercept(logit(self.theta), self.noise_grade)[0]

    @property
    def clean(self) -> CleanLogOdds:
        """q(w) at these point estimates, as a function of the (scaled) margin ``b H``."""
        return CleanLogOdds.from_point_estimates(self.theta, self.noise_grade)

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n: posterior probability that label ``y_n`` is true, given ``H_n = margin_n``."""
        log_clean, _ = self.clean.log_proba(y, self.log_odds(margin))
        return np.exp(log_clean)

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """Posterior probability that label ``y_n`` differs from the true class of row ``n``.

        A noisy label is drawn whatever the true class is, so it is wrong with the model's
        probability of the other class: ``P(wrong) = (1 - phi_n) sigmoid(-y_n b H_n)``.
        """
        log_odds = self.log_odds(margin)
        _, log_noise = self.clean.log_proba(y, log_odds)
        return np.exp(log_noise + log_expit(-y * log_odds))

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` on these rows.

        The last two are the binary channel of S.2 (``b`` and ``a`` there), each the expected
        number of wrong labels of a true class over the expected size of that class.
        """
        return flip_rates_from_mislabel(self.mislabel_proba(y, margin), y, sample_weight)

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: RandomStateLike = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of the three :meth:`flip_rates`, shape (3, 2).

        Parameters are drawn from the Laplace approximation (a normal on ``(logit theta, xi,
        log b)``) and the rates recomputed for each draw on the same rows.
        """
        rates = np.array(
            [
                draw.flip_rates(y, margin, sample_weight)
                for draw in self.posterior_draws(n_draws, random_state)
            ]
        )
        return equal_tailed_interval(rates, level)

    def posterior_draws(
        self, n_draws: int = 400, random_state: RandomStateLike = None
    ) -> list[NoiseCalibration]:
        """Parameter draws from the Laplace approximation (a normal on ``(logit theta, xi,
        log b)``), clipped to the search box, as calibrations (with this covariance)."""
        rng = spawn_generator(random_state)
        mean = np.array([logit(self.theta), self.noise_grade, np.log(self.scale)])
        draws = rng.multivariate_normal(mean, self.covariance, size=n_draws, method="eigh")
        # The posterior lives on the search box (a flat direction can have a huge variance).
        draws = np.clip(draws, *np.array(_BOUNDS).T)
        return [
            NoiseCalibration(expit(logit_theta), xi, np.exp(log_b), self.covariance, 0.0)
            for logit_theta, xi, log_b in draws
        ]


def equal_tailed_interval(draws: np.ndarray, level: float = 0.9) -> np.ndarray:
    """Equal-tailed ``level`` interval of each column of ``draws``, shape (n_columns, 2)."""
    tail = (1.0 - level) / 2.0
    return np.quantile(draws, [tail, 1.0 - tail], axis=0).T


def mislabel_proba_in_sample(
    clean_proba: np.ndarray, y: np.ndarray, margin: np.ndarray
) -> np.ndarray:
    """``(1 - phi_n) sigmoid(-y_n H_n)``: the probability that label ``y_n`` differs from the
    row's true class under Algorithm 1's in-sample q(w) (phi_n) and the training margins (a
    ranking, not calibrated: :meth:`NoiseCalibration.mislabel_proba` is the calibrated one)."""
    return (1.0 - clean_proba) * expit(-y * margin)


def flip_rate_sums(wrong: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
    """The six weighted sums behind :func:`flip_rates_from_sums`: the total weight, the
    expected wrong labels, those among -1 labels and among +1 labels, and the expected weights
    of true +1 and true -1 rows. Sums over disjoint sets of rows add up."""
    label = (y >= 0).astype(np.intp)  # 0: a -1 label, 1: a +1 label
    wrong_neg, wrong_pos = np.bincount(label, weights=sample_weight * wrong, minlength=2)
    weight_neg, weight_pos = np.bincount(label, weights=sample_weight, minlength=2)
    # A true +1 row is a +1 label that is right or a -1 label that is wrong (and vice versa).
    return np.array(
        [
            weight_neg + weight_pos,
            wrong_neg + wrong_pos,
            wrong_neg,
            wrong_pos,
            (weight_pos - wrong_pos) + wrong_neg,
            (weight_neg - wrong_neg) + wrong_pos,
        ]
    )


def flip_rates_from_sums(sums: np.ndarray) -> np.ndarray:
    """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` from
    :func:`flip_rate_sums` (the binary channel of S.2: expected wrong labels of a true class over
    the expected size of that class)."""
    total, wrong, pos_flipped, neg_flipped, true_pos, true_neg = sums
    with np.errstate(divide="ignore", invalid="ignore"):  # a class expected empty: NaN
        return np.array([wrong / total, neg_flipped / true_neg, pos_flipped / true_pos])


def flip_rates_from_mislabel(
    wrong: np.ndarray, y: np.ndarray, sample_weight: np.ndarray
) -> np.ndarray:
    """``[share of wrong labels, P(y=+1 | true -1), P(y=-1 | true +1)]`` from per-row
    probabilities ``wrong`` that a label differs from its row's true class."""
    return flip_rates_from_sums(flip_rate_sums(wrong, y, sample_weight))


def _intercept(logit_theta: float, xi: float) -> tuple[float, float, float]:
    """``c = logit p0`` of :meth:`NoiseCalibration.log_odds` and its derivatives in
    ``logit theta`` and ``xi``; ``p0`` is kept within [1e-9, 1 - 1e-9] (beyond, a class would be
    flipped more often than not)."""
    theta, s = expit(logit_theta), expit(xi)
    p0 = (0.5 - (1.0 - theta) * s) / theta
    if not _P0_MIN < p0 < 1.0 - _P0_MIN:
        p0 = min(max(p0, _P0_MIN), 1.0 - _P0_MIN)
        return float(logit(p0)), 0.0, 0.0
    dc_dp0 = 1.0 / (p0 * (1.0 - p0))
    dp0_du = (s - 0.5) * (1.0 - theta) / theta
    dp0_dxi = -(1.0 - theta) * s * (1.0 - s) / theta
    return float(logit(p0)), dc_dp0 * dp0_du, dc_dp0 * dp0_dxi


def _row_log_likelihood(
    params: np.ndarray, y: np.ndarray, margin: np.ndarray, intercept: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(log theta sigmoid(y F), log p(y | H))`` per row at ``(logit theta, xi, log b)``, with
    ``F = b H + c`` and ``c = intercept`` (:meth:`NoiseCalibration.log_odds`)."""
    logit_theta, xi, log_b = params
    log_signal = log_expit(logit_theta) + log_expit(y * (np.exp(log_b) * margin + intercept))
    log_noise = log_expit(-logit_theta) + log_expit(y * xi)
    return log_signal, np.logaddexp(log_signal, log_noise)


def _objective(
    params: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
) -> tuple[float, np.ndarray]:
    """Minus the log posterior of ``(logit theta, xi, log b)`` and its gradient, both divided by
    the total weight ``total`` (``weight`` sums to 1), so that no sum overflows whatever the
    scale of the sample weights."""
    logit_theta, xi, log_b = params
    theta = expit(logit_theta)
    c, dc_du, dc_dxi = _intercept(logit_theta, xi)
    ybh = y * np.exp(log_b) * margin
    yf = ybh + y * c
    log_signal, row = _row_log_likelihood(params, y, margin, c)
    clean = np.exp(log_signal - row)  # phi_n at these parameters
    # theta ~ Beta(zeta) in logit coordinates (Jacobian theta (1 - theta) included); xi under
    # its v-Log prior mu_0' (log sigmoid(xi) + log sigmoid(-xi)); log b ~ N(0, sd^2).
    zeta1, zeta2 = priors.clean
    mu = priors.noise_grade
    log_prior = (
        zeta1 * log_expit(logit_theta)
        + zeta2 * log_expit(-logit_theta)
        + mu * (log_expit(xi) + log_expit(-xi))
        - 0.5 * (log_b / _LOG_SCALE_PRIOR_SD) ** 2
    )
    value = float(np.dot(weight, row) + log_prior / total)
    # d row / dF = phi_n y_n sigmoid(-y_n F_n); F depends on (logit theta, xi) through c.
    d_f = np.dot(weight, clean * y * expit(-yf))
    grad = np.array(
        [
            np.dot(weight, clean - theta)
            + d_f * dc_du
            + (zeta1 * (1.0 - theta) - zeta2 * theta) / total,
            np.dot(weight, (1.0 - clean) * y * expit(-y * xi))
            + d_f * dc_dxi
            + mu * (expit(-xi) - expit(xi)) / total,
            np.dot(weight, clean * ybh * expit(-yf)) - log_b / _LOG_SCALE_PRIOR_SD**2 / total,
        ]
    )
    return -value, -grad


def calibrate_noise(
    y: np.ndarray,
    margin: np.ndarray,
    sample_weight: np.ndarray | None = None,
    priors: ModelPriors | None = None,
) -> NoiseCalibration:
    """Fit theta, xi and the scale of ``H`` by the marginal likelihood of the labels.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    margin : ndarray of shape (n_samples,)
        Ensemble margins ``H`` not fitted to these labels (out-of-fold).
    sample_weight : ndarray of shape (n_samples,), default=None
        Multiplicities of the rows.
    priors : ModelPriors, default=None
        The model's priors (zeta on theta, mu_0' on xi); the paper's defaults if None.

    Returns
    -------
    NoiseCalibration
        The posterior mode and its Laplace covariance.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import expit
    >>> rng = np.random.default_rng(0)
    >>> margin = rng.normal(scale=4.0, size=20000)
    >>> true = np.where(rng.random(20000) < expit(margin), 1.0, -1.0)
    >>> noisy = rng.random(20000) < 0.4  # 40% noise labels, +1 or -1 at random
    >>> y = np.where(noisy, rng.choice([-1.0, 1.0], size=20000), true)
    >>> fit = calibrate_noise(y, margin / 2)  # margins on half the true scale
    >>> round(fit.theta, 1), round(fit.scale, 1)
    (0.6, 2.0)
    """
    y = np.asarray(y, dtype=np.float64)
    margin = np.asarray(margin, dtype=np.float64)
    weight = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
    priors = ModelPriors() if priors is None else priors
    total = float(weight.sum())
    share = weight / total
    start = np.array([1.0, 0.0, 0.0])
    result = minimize(
        _objective,
        start,
        args=(y, margin, share, total, priors),
        jac=True,
        method="L-BFGS-B",
        bounds=_BOUNDS,
        options={"maxiter": 500, "gtol": 1e-12, "ftol": 1e-15},
    )
    hessian = _hessian(result.x, y, margin, share, total, priors)
    params = _newton_polish(result.x, hessian, y, margin, share, total, priors)
    covariance = _laplace_covariance(hessian, total)
    return NoiseCalibration(
        theta=float(expit(params[0])),
        noise_grade=float(params[1]),
        scale=float(np.exp(params[2])),
        covariance=covariance,
        log_likelihood=total
        * float(
            np.dot(share, _row_log_likelihood(params, y, margin, _intercept(*params[:2])[0])[1])
        ),
    )


def _hessian(
    params: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
) -> np.ndarray:
    """Hessian of the (normalised) objective by central differences of its gradient."""
    step = 1e-5
    hessian = np.empty((3, 3))
    for j in range(3):
        delta = np.zeros(3)
        delta[j] = step
        upper = _objective(params + delta, y, margin, weight, total, priors)[1]
        lower = _objective(params - delta, y, margin, weight, total, priors)[1]
        hessian[:, j] = (upper - lower) / (2.0 * step)
    return 0.5 * (hessian + hessian.T)


def _newton_polish(
    params: np.ndarray,
    hessian: np.ndarray,
    y: np.ndarray,
    margin: np.ndarray,
    weight: np.ndarray,
    total: float,
    priors: ModelPriors,
    max_steps: int = 4,
) -> np.ndarray:
    """Newton steps (with the Hessian at L-BFGS's answer) to the optimum itself.

    L-BFGS stops once the objective barely changes, which on a flat ridge leaves the
    parameters up to ~1e-8 from the optimum, by an amount that the rounding of the sums can
    change; after these steps the gradient is at rounding level and the answer moves with the
    data only, so fits that sum the same rows in another order (a distributed fit) get the same
    calibration to ~1e-12. Skipped at a bound of the search box or where the Hessian is not
    positive definite; a step is kept only if it shrinks the gradient."""
    bounds = np.array(_BOUNDS)
    if np.any(np.abs(params - bounds[:, 0]) < 1e-6) or np.any(np.abs(params - bounds[:, 1]) < 1e-6):
        return params
    try:
        factor = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return params
    grad = _objective(params, y, margin, weight, total, priors)[1]
    for _ in range(max_steps):
        size = np.max(np.abs(grad))
        if size < 1e-15:
            break
        step = np.linalg.solve(factor.T, np.linalg.solve(factor, grad))
        candidate = np.clip(params - step, bounds[:, 0], bounds[:, 1])
        new_grad = _objective(candidate, y, margin, weight, total, priors)[1]
        if not np.max(np.abs(new_grad)) < size:
            break
        params, grad = candidate, new_grad
    return params


def _laplace_covariance(hessian: np.ndarray, total: float) -> np.ndarray:
    """Inverse of the Hessian of minus the log posterior (:func:`_hessian`, of the objective
    divided by the total weight); eigenvalues are floored so the result is a valid covariance
    even on a flat ridge."""
    values, vectors = np.linalg.eigh(hessian)
    values = np.maximum(values, 1e-6) * total  # the objective was divided by the total weight
    return (vectors / values) @ vectors.T
