"""The variational machinery against oracles written here: a brute-force ELBO, plain AdaBoost,
eq. 1oz, the exact v-Log mode, and the generative model of section 4."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from scipy.special import digamma, expit, log_expit

from viboost import VIBoostClassifier
from viboost.inference import (
    ModelPriors,
    approx_alpha,
    elbo,
    update_clean_proba,
    update_noise_grade,
    update_snr,
    weight_posterior,
)


# ---------------------------------------------------------------------------- brute-force ELBO
def _log_sigmoid(x: float) -> float:
    return float(log_expit(x))


def _normalised(log_kernel):
    """(pdf, logpdf) from an unnormalised log density on the real line, by direct quadrature."""
    z = integrate.quad(
        lambda t: np.exp(log_kernel(t)), -np.inf, np.inf, epsabs=0, epsrel=1e-12, limit=500
    )[0]
    return (lambda t: np.exp(log_kernel(t)) / z), (lambda t: log_kernel(t) - np.log(z))


def _expect(pdf, f) -> float:
    return integrate.quad(
        lambda t: pdf(t) * f(t), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12, limit=500
    )[0]


def brute_force_elbo(y, margin, h, phi, omega, eta, priors: ModelPriors) -> float:
    """E_q log p(joint) - E_q log q by quadrature over c, xi, theta and exact sums over w."""
    mu0, mu0p, zeta = priors.weight, priors.noise_grade, priors.clean
    # Normalised priors of section 4.
    _, log_prior_c = _normalised(lambda c: mu0 * (_log_sigmoid(c) + _log_sigmoid(-c)))
    _, log_prior_xi = _normalised(lambda x: mu0p * (_log_sigmoid(x) + _log_sigmoid(-x)))
    # The variational factors.
    log_qc_kernel = lambda c: (  # noqa: E731
        mu0 * (_log_sigmoid(c) + _log_sigmoid(-c))
        + sum(
            p * _log_sigmoid(yn * (m + c * hn))
            for p, yn, m, hn in zip(phi, y, margin, h, strict=True)
        )
    )
    q_c, log_q_c = _normalised(log_qc_kernel)
    q_xi, log_q_xi = _normalised(lambda x: omega[0] * _log_sigmoid(-x) + omega[1] * _log_sigmoid(x))
    q_theta = stats.beta(eta[0], eta[1])

    def e_theta(f):
        return integrate.quad(
            lambda t: q_theta.pdf(t) * f(t), 0, 1, epsabs=1e-11, epsrel=1e-11, limit=500
        )[0]

    e_log_prior_c = _expect(q_c, log_prior_c)
    e_log_prior_xi = _expect(q_xi, log_prior_xi)
    e_log_prior_theta = e_theta(lambda t: stats.beta(*zeta).logpdf(t))
    e_log_theta = e_theta(np.log)
    e_log_1m_theta = e_theta(lambda t: np.log1p(-t))
    e_lik_clean = [
        _expect(q_c, lambda c, yn=yn, m=m, hn=hn: _log_sigmoid(yn * (m + c * hn)))
        for yn, m, hn in zip(y, margin, h, strict=True)
    ]
    e_lik_noise = [_expect(q_xi, lambda x, yn=yn: _log_sigmoid(yn * x)) for yn in y]

    e_log_joint = e_log_prior_c + e_log_prior_xi + e_log_prior_theta
    e_log_q_w = 0.0
    for w in itertools.product([0, 1], repeat=len(y)):
        q_w = np.prod([p if wn else 1 - p for p, wn in zip(phi, w, strict=True)])
        term = sum(
            e_log_theta + e_lik_clean[n] if wn else e_log_1m_theta + e_lik_noise[n]
            for n, wn in enumerate(w)
        )
        e_log_joint += q_w * term
        e_log_q_w += q_w * np.log(q_w)
    e_log_q = _expect(q_c, log_q_c) + _expect(q_xi, log_q_xi) + e_theta(q_theta.logpdf) + e_log_q_w
    return e_log_joint - e_log_q


def test_closed_form_elbo_matches_brute_force():
    rng = np.random.default_rng(7)
    y = np.array([1.0, 1.0, -1.0, -1.0])
    margin = np.array([0.3, -1.2, 0.5, 2.0])
    h = np.array([1.0, -1.0, -1.0, 1.0])
    priors = ModelPriors(weight=1.3, noise_grade=0.7, clean=(1.5, 2.0))
    differences = []
    for _ in range(4):
        phi = rng.uniform(0.05, 0.95, size=4)
        omega = rng.uniform(0.5, 5.0, size=2)
        eta = rng.uniform(0.5, 5.0, size=2)
        log_b = weight_posterior(y, margin, h, phi, priors.weight).log_normalizer()
        closed = elbo(log_b, y, np.ones(4), np.log(phi), np.log1p(-phi), eta, omega, priors)
        brute = brute_force_elbo(y, margin, h, phi, omega, eta, priors)
        differences.append(closed - brute)
    # One constant across variational parameters; here it is zero because the closed form
    # includes the priors' log normalisers.
    assert np.ptp(differences) < 1e-7
    assert abs(np.mean(differences)) < 1e-7


def test_elbo_weights_are_multiplicities():
    rng = np.random.default_rng(3)
    y = np.array([1.0, -1.0, 1.0])
    margin = np.array([0.4, 0.1, -0.7])
    h = np.array([1.0, 1.0, -1.0])
    phi = rng.uniform(0.1, 0.9, size=3)
    omega, eta, priors = np.array([1.5, 2.5]), np.array([3.0, 1.2]), ModelPriors()
    weights = np.array([2.0, 1.0, 3.0])
    log_b = weight_posterior(y, margin, h, weights * phi, 1.0).log_normalizer()
    weighted = elbo(log_b, y, weights, np.log(phi), np.log1p(-phi), eta, omega, priors)
    rep = np.repeat(np.arange(3), weights.astype(int))
    log_b_rep = weight_posterior(y[rep], margin[rep], h[rep], phi[rep], 1.0).log_normalizer()
    repeated = elbo(
        log_b_rep,
        y[rep],
        np.ones(rep.size),
        np.log(phi[rep]),
        np.log1p(-phi[rep]),
        eta,
        omega,
        priors,
    )
    assert weighted == pytest.approx(repeated, rel=1e-10)


def test_updates_stay_finite_at_huge_margins():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    margin = np.array([5000.0, -4000.0, -3000.0, 6000.0])  # y H = 5000, 4000, -3000, -6000
    eta, omega = np.array([2.0, 3.0]), np.array([1.5, 2.5])
    log_clean, log_noise = update_clean_proba(y, margin, eta, omega)
    # Rows that H gets badly wrong are noise for sure (log phi ~ -|H|); rows it gets right keep
    # the prior odds times the noise likelihood ratio of eq. supp:eq:kappa.
    assert log_clean[2] == pytest.approx(-3000, rel=1e-3)
    assert log_clean[3] == pytest.approx(-6000, rel=1e-3)
    prior_log_odds = digamma(eta[0]) - digamma(eta[1]) + digamma(omega.sum())
    expected = expit(prior_log_odds - digamma(np.array([omega[1], omega[0]])))
    np.testing.assert_allclose(np.exp(log_clean[:2]), expected, rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_noise[:2]), 1 - expected, rtol=1e-12)
    # alpha = 1/2 log[(mu0 + sum_right w) / (mu0 + sum_wrong w)] with w = exp(-y H) up to e^6000.
    h = np.ones(4)
    alpha = approx_alpha(y, h, -y * margin, 1.0, 1.0)
    assert alpha == pytest.approx(0.5 * (3000.0 - 6000.0), rel=1e-12)
    log_b = weight_posterior(y, margin, h, np.exp(log_clean), 1.0).log_normalizer()
    value = elbo(log_b, y, np.ones(4), log_clean, log_noise, eta, omega, ModelPriors())
    assert np.isfinite(log_b) and np.isfinite(value)


# ---------------------------------------------------------------------------- the updates
@pytest.fixture
def small_state():
    rng = np.random.default_rng(11)
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    margin = rng.normal(size=5)
    h = np.array([1.0, -1.0, -1.0, 1.0, 1.0])
    phi = rng.uniform(0.1, 0.9, size=5)
    weights = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    priors = ModelPriors(weight=1.0, noise_grade=0.8, clean=(1.2, 0.7))
    log_b = weight_posterior(y, margin, h, weights * phi, priors.weight).log_normalizer()
    return y, weights, phi, priors, log_b, margin, h


def _argmax_elbo(objective, start):
    """Maximise over positive parameters with a generic optimiser, in log coordinates."""
    res = optimize.minimize(
        lambda v: -objective(np.exp(v)),
        np.log(start),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000},
    )
    return np.exp(res.x)


def test_omega_and_eta_updates_maximise_the_elbo(small_state):
    """The omega (S.3.2) and eta (S.3.4) updates are the coordinate-ascent maximisers."""
    y, weights, phi, priors, log_b, _, _ = small_state
    eta, omega = np.array([2.0, 1.5]), np.array([1.3, 2.2])

    def value(eta, omega):
        return elbo(log_b, y, weights, np.log(phi), np.log1p(-phi), eta, omega, priors)

    omega_star = update_noise_grade(y, weights, 1 - phi, priors.noise_grade)
    np.testing.assert_allclose(omega_star, _argmax_elbo(lambda o: value(eta, o), omega), rtol=1e-6)
    eta_star = update_snr(weights, phi, 1 - phi, priors.clean)
    np.testing.assert_allclose(eta_star, _argmax_elbo(lambda e: value(e, omega), eta), rtol=1e-6)


def test_phi_update_is_the_bernoulli_posterior_of_the_type(small_state):
    """kappa_n of eq. supp:eq:kappa against expectations taken by quadrature here."""
    y, _, _, _, _, margin, h = small_state
    eta, omega, alpha = np.array([3.0, 1.5]), np.array([1.3, 2.2]), 0.7
    log_clean, log_noise = update_clean_proba(y, margin + alpha * h, eta, omega)
    q_theta = stats.beta(*eta)
    e_log_theta = integrate.quad(lambda t: q_theta.pdf(t) * np.log(t), 0, 1)[0]
    e_log_1m_theta = integrate.quad(lambda t: q_theta.pdf(t) * np.log1p(-t), 0, 1)[0]
    q_xi, _ = _normalised(lambda x: omega[0] * _log_sigmoid(-x) + omega[1] * _log_sigmoid(x))
    for n in range(len(y)):
        clean = e_log_theta + _log_sigmoid(y[n] * (margin[n] + alpha * h[n]))  # c -> alpha
        noisy = e_log_1m_theta + _expect(q_xi, lambda x, yn=y[n]: _log_sigmoid(yn * x))
        assert np.exp(log_clean[n]) == pytest.approx(expit(clean - noisy), rel=1e-8)
        assert np.exp(log_noise[n]) == pytest.approx(expit(noisy - clean), rel=1e-8)


# ---------------------------------------------------------------------------- AdaBoost relation
def _all_stumps(X):
    """Every (feature, threshold, polarity), in the search's tie-breaking order."""
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        thresholds = np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2])
        for thr in thresholds:
            for polarity in (1, -1):
                yield j, thr, polarity


def _stump_output(X, j, thr, polarity):
    return np.where(X[:, j] > thr, polarity, -polarity).astype(float)


def reference_adaboost(X, y, n_rounds):
    """Discrete AdaBoost with exhaustive stumps, written independently of viboost."""
    d = np.full(len(y), 1.0 / len(y))
    stumps, alphas = [], []
    for _ in range(n_rounds):
        best = None
        for j, thr, polarity in _all_stumps(X):
            err = d[_stump_output(X, j, thr, polarity) != y].sum()
            if best is None or err < best[0] - 1e-12:
                best = (err, j, thr, polarity)
        err, j, thr, polarity = best
        alpha = 0.5 * np.log((1 - err) / err)
        h = _stump_output(X, j, thr, polarity)
        d = d * np.exp(-alpha * y * h)
        d /= d.sum()
        stumps.append((j, thr, polarity))
        alphas.append(alpha)
    return stumps, np.array(alphas)


@pytest.fixture
def noisy_linear():
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(60, 3)), 2)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.7, size=60) > 0, 1.0, -1.0)
    return X, y


def test_core_model_with_vanishing_prior_is_discrete_adaboost(noisy_linear):
    X, y = noisy_linear
    ref_stumps, ref_alphas = reference_adaboost(X, y, 15)
    clf = VIBoostClassifier(15, noise_model=False, tau=1.0, weight_prior=1e-12).fit(X, y)
    got = [(s.feature, s.threshold, s.polarity) for s in clf.estimators_]
    assert [(j, p) for j, _, p in got] == [(j, p) for j, _, p in ref_stumps]
    np.testing.assert_allclose([t for _, t, _ in got], [t for _, t, _ in ref_stumps])
    np.testing.assert_allclose(clf.alphas_, ref_alphas, rtol=1e-8)


def test_unit_prior_follows_eq_1oz(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(20, noise_model=False, tau=1.0, weight_prior=1.0).fit(X, y)
    H = np.zeros(len(y))
    for stump, alpha in zip(clf.estimators_, clf.alphas_, strict=True):
        h = stump.predict(X)
        Z = np.exp(-y * H).sum()
        d = np.exp(-y * H) / Z
        eps = d[h != y].sum()
        assert alpha == pytest.approx(0.5 * np.log((1 / Z + 1 - eps) / (1 / Z + eps)), rel=1e-10)
        H += alpha * h
        # The 1/Z term shrinks alpha below AdaBoost's for the same weighted error.
        assert alpha < 0.5 * np.log((1 - eps) / eps)


def test_exact_alpha_is_the_vlog_mode(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(5, alpha="exact", fixed_vi_iter=1).fit(X, y)
    # Round 1 with phi = 1 and H = 0: alpha minimises
    # mu0 softplus(c) + mu0 softplus(-c) + sum_n softplus(-y_n c h_n).
    h = clf.estimators_[0].predict(X)

    def neg_log_density(c):
        return np.logaddexp(0, c) + np.logaddexp(0, -c) + np.logaddexp(0, -y * c * h).sum()

    res = optimize.minimize_scalar(
        neg_log_density, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12}
    )
    assert clf.alphas_[0] == pytest.approx(res.x, abs=1e-7)


# ---------------------------------------------------------------------------- generative model
def draw_step_data(theta, noise_grade, rng):
    """Section 6's step data by the process of section 4: F = +-inf, w ~ Bern(theta)."""
    x = np.arange(-99, 100, 2, dtype=float)
    true = np.sign(x)
    clean = rng.random(x.size) < theta
    noisy = np.where(rng.random(x.size) < expit(noise_grade), 1.0, -1.0)
    return x[:, None], np.where(clean, true, noisy)


def _mean_statistics(theta, noise_grade, seeds=6):
    snr, grade = [], []
    for seed in range(seeds):
        X, y = draw_step_data(theta, noise_grade, np.random.default_rng(seed))
        clf = VIBoostClassifier(50).fit(X, y)
        snr.append(clf.snr_)
        grade.append(clf.noise_grade_)
    return np.mean(snr), np.mean(grade)


def test_snr_rises_with_theta():
    snrs = [_mean_statistics(theta, np.log(3))[0] for theta in (0.1, 0.5, 0.9)]
    assert snrs[0] < snrs[1] < snrs[2]


def test_noise_grade_follows_xi():
    grades = [_mean_statistics(0.2, xi)[1] for xi in (-2.0, 0.0, 2.0)]
    assert grades[0] < grades[1] < grades[2]
    assert grades[0] < 0 < grades[2]


def test_exact_alpha_ranks_stumps_by_the_newton_step(noisy_linear):
    X, y = noisy_linear
    clf = VIBoostClassifier(3, alpha="exact", noise_model=False).fit(X, y)
    H = clf.alphas_[0] * clf.estimators_[0].predict(X)
    h_chosen = clf.estimators_[1].predict(X)

    # Newton step from c = 0 on g(c) = softplus(c) + softplus(-c) + sum softplus(-y (H + c h)).
    def newton_step(h):
        grad = -(y * h * expit(-y * H)).sum()
        hess = 0.5 + (expit(y * H) * expit(-y * H)).sum()
        return -grad / hess

    best = max(abs(newton_step(_stump_output(X, *s))) for s in _all_stumps(X))
    assert abs(newton_step(h_chosen)) == pytest.approx(best, rel=1e-12)
    assert clf.alphas_[1] > 0.1  # the exact step along the chosen stump is not stalled at zero
