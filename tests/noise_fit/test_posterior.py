"""The noise posterior (viboost.noise_fit.posterior, calibration.integrate_noise_posterior,
laplace.nested_posterior) against quadratures written here."""

import numpy as np
import pytest
from scipy.special import expit, log_expit, logit, logsumexp

import viboost.noise_fit.posterior as posterior_module
from viboost.fitting.task import BinaryTask
from viboost.noise_fit.calibration import (
    MAX_FLIP_RATE,
    calibrate_noise,
    integrate_noise_posterior,
)
from viboost.noise_fit.laplace import nested_posterior
from viboost.noise_fit.posterior import no_noise_log_evidence, weighted_quantiles
from viboost.variational.priors import ModelPriors


def _labels(n, noise, seed):
    rng = np.random.default_rng(seed)
    margin = rng.normal(scale=2.0, size=n)
    y = np.where(rng.random(n) < expit(margin), 1.0, -1.0)
    flipped = rng.random(n) < noise
    return np.where(flipped, -y, y), margin, flipped


def test_nested_posterior_evidence_of_a_normal_is_its_closed_form():
    a = np.array([[3.0, -0.4, 0.2], [-0.4, 1.5, 0.1], [0.2, 0.1, 0.8]])

    def objective(x):
        return 0.5 * x @ a @ x, a @ x

    box = lambda u: np.array([[-60.0, 60.0], [-60.0, 60.0]])  # noqa: E731
    post = nested_posterior(objective, np.zeros(3), np.linalg.inv(a), (), box, 1.0, 0.0, 20000,
                            np.random.default_rng(1))  # fmt: skip
    exact = 1.5 * np.log(2 * np.pi) - 0.5 * np.log(np.linalg.det(a))
    assert post.log_evidence == pytest.approx(exact, abs=0.02)
    np.testing.assert_allclose(np.cov(post.params.T), np.linalg.inv(a), atol=0.03)


@pytest.mark.parametrize(
    ("n", "seed", "low", "high", "tol"),
    # 40 rows: a skewed posterior of log b, the hardest case for the trapezoid rule's nodes.
    [(300, 0, -8.0, 6.0, 1e-3), (40, 2, -12.0, 8.0, 1e-4)],
)
def test_no_noise_evidence_matches_a_dense_quadrature(n, seed, low, high, tol):
    y, margin, _ = _labels(n, 0.0, seed)
    weight = np.ones_like(y)
    got = no_noise_log_evidence(lambda b: log_expit(y * b * margin), weight)
    grid = np.linspace(low, high, 40001)
    values = [np.sum(log_expit(y * np.exp(v) * margin)) - 0.5 * (v / 3) ** 2 for v in grid]
    exact = logsumexp(values) + np.log(grid[1] - grid[0]) - 0.5 * np.log(2 * np.pi * 9)
    assert got == pytest.approx(exact, abs=tol)


def _brute_force_evidence(y, margin):
    """log p(y | H) of the identifiable noise model by a 3-D grid (the priors of
    calibration._objective, normalised: Beta(1, 1), v-Log(1), N(0, 3^2))."""
    us = np.linspace(logit(1 - 2 * MAX_FLIP_RATE), 15.0, 141)
    xis = np.linspace(-8.0, 8.0, 57)
    vs = np.linspace(-3.0, 4.0, 50)
    xi, v = np.meshgrid(xis, vs, indexing="ij")
    per_u = []
    for u in us:
        theta = expit(u)
        s = expit(xi)
        allowed = (1 - theta) * np.maximum(s, 1 - s) <= MAX_FLIP_RATE
        p0 = np.clip((0.5 - (1 - theta) * s) / theta, 1e-9, 1 - 1e-9)
        c = logit(p0)
        f = np.exp(v)[..., None] * margin + c[..., None]
        rows = np.logaddexp(np.log(theta) + log_expit(y * f),
                            np.log1p(-theta) + log_expit(y * xi[..., None]))  # fmt: skip
        log_prior = (log_expit(u) + log_expit(-u) + log_expit(xi) + log_expit(-xi)
                     - 0.5 * (v / 3) ** 2 - 0.5 * np.log(2 * np.pi * 9))  # fmt: skip
        joint = np.where(allowed, rows.sum(axis=-1) + log_prior, -np.inf)
        per_u.append(logsumexp(joint) + np.log((xis[1] - xis[0]) * (vs[1] - vs[0])))
    return logsumexp(per_u) + np.log(us[1] - us[0])


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_integrated_posterior_evidence_matches_a_brute_force_grid(noise):
    y, margin, _ = _labels(250, noise, 3)
    weight = np.ones_like(y)
    mode = calibrate_noise(y, margin)
    post = integrate_noise_posterior(mode, y, margin, weight, ModelPriors(), 200, 0)
    assert post.log_evidence == pytest.approx(_brute_force_evidence(y, margin), abs=0.3)
    thetas = np.array([d.theta for d in post.draws])
    assert np.all(thetas >= 1 - 2 * MAX_FLIP_RATE - 1e-9) and np.all(thetas < 1)


def test_weighted_quantiles_match_repeated_values():
    values = np.array([[3.0], [1.0], [2.0], [np.nan]])
    weights = np.array([0.25, 0.5, 0.25, 1.0])
    repeated = np.array([1.0, 1.0, 2.0, 3.0])  # the same distribution, NaN left out
    got = weighted_quantiles(values, weights, [0.25, 0.5, 0.75, 1.0])
    expected = [repeated[int(np.ceil(q * 4)) - 1] for q in (0.25, 0.5, 0.75, 1.0)]
    np.testing.assert_array_equal(got[0], expected)


def test_clean_labels_give_no_noise_and_noisy_ones_do_not():
    from viboost import VIBoostClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    clean = (rng.random(3000) < expit(8.0 * X[:, 0])).astype(int)
    model = VIBoostClassifier(random_state=0).fit(X, clean)
    assert model.no_noise_proba_ > 0.5
    assert model.noise_rate_interval_[0] == 0.0
    flipped = rng.random(3000) < 0.3
    noisy = np.where(flipped, 1 - clean, clean)
    model = VIBoostClassifier(random_state=0).fit(X, noisy)
    # 30% flips: "no noise" keeps some mass (0.17 with the robust leaf prior, mu_0 = 10; 0.09
    # with the paper's mu_0 = 1, whose sharper out-of-fold margins identify the noise better
    # but predict worse: docs/label_noise.md, "The leaf prior"). A near-step signal drowned
    # in noise is the hard case: other fold draws (random_state 1-3) give 0.09-0.42, and the
    # bags, which reweight the folds, carry that spread (0.09 and 0.01 with the rows' bags
    # alone, which did not).
    assert model.no_noise_proba_ < 0.25
    low, high = model.noise_rate_interval_
    assert low <= flipped.mean() <= high and model.noise_rate_ > 0.2
    sharp = VIBoostClassifier(random_state=0, weight_prior=1.0).fit(X, noisy)
    assert sharp.no_noise_proba_ < model.no_noise_proba_
    low, high = sharp.noise_rate_interval_
    assert low <= flipped.mean() <= high and sharp.noise_rate_ > model.noise_rate_
    assert model.noise_matrix_interval_.shape == (2, 2, 2)


def _posterior(n=1500, noise=0.2, seed=3):
    """The two-class noise posterior of synthetic out-of-fold margins."""
    y, margin, flipped = _labels(n, noise, seed)
    weight = np.ones_like(y)
    mode = calibrate_noise(y, margin, weight, ModelPriors())
    posterior = BinaryTask().posterior(mode, y, margin[:, None], weight, ModelPriors(), 0)
    return posterior, y, margin, flipped


def test_row_averages_are_the_mixture_of_no_noise_and_the_draws():
    posterior, y, margin, _ = _posterior()
    averages = posterior.row_averages(y, margin)
    draws = posterior.draws[: posterior_module.AVERAGE_DRAWS]
    none = posterior.no_noise_proba
    assert 0.0 <= none <= 1.0
    wrong = np.mean([d.mislabel_proba(y, margin) for d in draws], axis=0)
    clean = np.mean([d.clean_proba(y, margin) for d in draws], axis=0)
    np.testing.assert_allclose(averages.mislabel_proba, (1 - none) * wrong, rtol=1e-12)
    np.testing.assert_allclose(averages.clean_proba, none + (1 - none) * clean, rtol=1e-12)
    # The true class: the label's with probability 1 - P(wrong), the other one otherwise.
    positive = np.where(y > 0, 1 - averages.mislabel_proba, averages.mislabel_proba)
    np.testing.assert_allclose(averages.true_class_proba[:, 1], positive, rtol=1e-12)
    np.testing.assert_allclose(averages.true_class_proba.sum(axis=1), 1.0, rtol=1e-12)
    weight = np.ones_like(y)
    rate = averages.flip_rates(weight)[0]
    assert rate == pytest.approx(averages.mislabel_proba.mean(), rel=1e-12)
    np.testing.assert_allclose(posterior.flip_rates(y, margin, weight), averages.flip_rates(weight))


def test_intervals_from_a_row_subset_are_centred_on_all_rows(monkeypatch):
    """Above INTERVAL_ROWS rows the draws' spread comes from a subset of rows; the interval
    must still be about the estimate over all rows, not the subset's own."""
    posterior, y, margin, _ = _posterior(n=4000, noise=0.15, seed=5)
    weight = np.ones_like(y)
    whole, _ = posterior.intervals(y, margin, weight)
    monkeypatch.setattr(posterior_module, "INTERVAL_ROWS", 300)
    subset, matrix = posterior.intervals(y, margin, weight)
    estimate = posterior.flip_rates(y, margin, weight)
    # Every interval holds its estimate, and the subset's are close to all rows' (an uncentred
    # subset of 300 rows is off by ~0.02 in the share).
    assert np.all(subset[:, 0] <= estimate) and np.all(estimate <= subset[:, 1])
    np.testing.assert_allclose(subset, whole, atol=0.01)
    assert np.all((matrix >= 0) & (matrix <= 1))


def test_k_class_noise_matrix_intervals_follow_the_posterior():
    """K classes: every entry of the noise matrix has an interval from the same posterior
    (no noise at the identity, weight no_noise_proba_), holding the posterior mean."""
    from viboost import VIBoostClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(900, 3))
    y = np.argmax(3.0 * X, axis=1)
    moved = (y == 0) & (rng.random(900) < 0.3)  # pairwise: class 0 labelled 1
    model = VIBoostClassifier(random_state=0).fit(X, np.where(moved, 1, y))
    low, high = model.noise_matrix_interval_[..., 0], model.noise_matrix_interval_[..., 1]
    assert model.noise_matrix_interval_.shape == (3, 3, 2)
    assert np.all((0.0 <= low) & (low <= high) & (high <= 1.0))
    estimate = model.noise_matrix_
    assert np.all(low <= estimate + 1e-12) and np.all(estimate <= high + 1e-12)
    # The moved entry is the widest off the diagonal, and no noise is at the identity: with
    # its posterior probability above 5%, every off-diagonal interval starts at 0.
    off = ~np.eye(3, dtype=bool)
    assert np.argmax(np.where(off, high - low, -1.0)) == np.ravel_multi_index((1, 0), (3, 3))
    if model.no_noise_proba_ > 0.05:
        assert np.all(low[off] == 0.0) and np.all(high[np.eye(3, dtype=bool)] == 1.0)
    draws = model.noise_rate_draws_
    assert draws[0, 1] == model.no_noise_proba_ and draws[:, 1].sum() == pytest.approx(1.0)


def test_nested_posterior_starts_at_its_lowest_node_when_the_mode_is_below():
    """A mode outside the identifiable model (logit theta below ``lowest``, where the box of
    the others is empty) starts the grid at ``lowest``: no node below it, no empty box."""
    a = np.array([[1.0, 0.2], [0.2, 1.0]])

    def objective(x):
        return 0.5 * x @ a @ x, a @ x

    def box(u):
        if u < -1.0:  # below lowest: reversed bounds, as the identifiable model's would be
            return np.array([[1.0, -1.0]])
        return np.array([[-50.0, 50.0]])

    post = nested_posterior(objective, np.array([-3.0, 0.0]), np.linalg.inv(a), (), box, 1.0,
                            0.0, 500, np.random.default_rng(0), -1.0)  # fmt: skip
    assert post.grid[:, 0].min() >= -1.0
    assert np.all(post.params[:, 0] >= -1.0 - 1e-12) and np.isfinite(post.log_evidence)


def test_bootstrap_reweightings_of_all_rows_are_exponential():
    n = 4000
    y, margin, _ = _labels(n, 0.1, 3)
    weight = np.random.default_rng(4).uniform(0.5, 2.0, n)
    rows_y, _, weights = posterior_module.bootstrap_reweightings(y, margin, weight, 300, 7)
    assert rows_y is y  # every row, none left out below INTERVAL_ROWS
    ratio = np.array(weights) / weight  # each row's factor: Exp(1), independent of the rest
    assert ratio.min() > 0
    assert ratio.mean() == pytest.approx(1.0, abs=0.01)
    assert ratio.var() == pytest.approx(1.0, abs=0.03)
    assert abs(np.corrcoef(ratio[:, 0], ratio[:, 1])[0, 1]) < 0.15


def test_bootstrap_reweightings_of_a_subset_vary_as_those_of_all_rows(monkeypatch):
    # On a subset standing for all rows, the reweighted log-likelihood must vary as the
    # Bayesian bootstrap of all rows would: Var(sum_n s_n alpha_n l_n) = sum_n s_n^2 l_n^2.
    monkeypatch.setattr(posterior_module, "INTERVAL_ROWS", 2000)
    import viboost.noise_fit.calibration as calibration_module

    monkeypatch.setattr(calibration_module, "INTERVAL_ROWS", 2000)
    n = 32_000
    y, margin, _ = _labels(n, 0.1, 5)
    weight = np.random.default_rng(6).uniform(0.5, 2.0, n)
    row_ll = log_expit(y * margin)
    rows_y, rows_h, weights = posterior_module.bootstrap_reweightings(y, margin, weight, 2000, 8)
    assert rows_y.size == 2000
    sub_ll = log_expit(rows_y * rows_h)
    sums = np.array([np.dot(w, sub_ll) for w in weights])
    exact_var = float(np.sum(weight**2 * row_ll**2))
    # The mean is the subset's estimate of all rows' sum (its own sampling error aside); the
    # spread is that of all rows' bootstrap (the subset's rows reweighted by alpha itself
    # would spread n / 2000 = 16 times as much).
    assert sums.mean() == pytest.approx(np.dot(weight, row_ll), rel=0.05)
    assert sums.var() == pytest.approx(exact_var, rel=0.15)


def test_bootstrap_reweightings_by_group_share_one_factor_per_group():
    # A cluster bootstrap on top of the rows' own: every row of a group (a cross-fit's
    # validation fold) is also weighted by its group's share of a Bayesian bootstrap over the
    # groups, Dirichlet(1, ..., 1) times the number of groups.
    n, n_groups, n_bags = 5000, 5, 3000
    y, margin, _ = _labels(n, 0.1, 3)
    weight = np.ones(n)
    groups = np.arange(n) % n_groups
    _, _, weights = posterior_module.bootstrap_reweightings(y, margin, weight, n_bags, 7, groups)
    factors = np.array(weights)  # (bags, rows)
    by_group = np.column_stack([factors[:, groups == g].mean(axis=1) for g in range(n_groups)])
    # Each group's factor averages 1 over the groups (up to the rows' own exponentials, whose
    # mean over 1,000 rows is 1 within a few per cent), and varies across the bags as a
    # Dirichlet(1, ..., 1) share times K: variance (K - 1) / (K + 1).
    assert np.abs(by_group.mean(axis=1) - 1.0).max() < 0.1
    assert by_group.var(axis=0).mean() == pytest.approx((n_groups - 1) / (n_groups + 1), rel=0.1)
    # Within a group the rows' own factors are independent Exp(1) draws around it.
    within = factors[:, groups == 0] / by_group[:, :1]
    assert within.var() == pytest.approx(1.0, abs=0.05)
    # Rows of one group move together, rows of two groups apart (the shares sum to K).
    assert np.corrcoef(factors[:, 0], factors[:, n_groups])[0, 1] > 0.2
    assert np.corrcoef(factors[:, 0], factors[:, 1])[0, 1] < 0.0
    # Without groups the rows' factors are the rows' own alone.
    _, _, plain = posterior_module.bootstrap_reweightings(y, margin, weight, 2, 7)
    assert not np.allclose(plain[0], weights[0])


def _posterior_of(theta, none, n_draws=200):
    from viboost.noise_fit.calibration import NoiseCalibration

    draws = [NoiseCalibration(t, 0.0, 1.0, np.eye(3), 0.0) for t in np.full(n_draws, theta)]
    return posterior_module.model_average(
        draws[0], draws, 0.0, float(logit(none)) if 0 < none < 1 else np.inf, 2
    )


def test_bagged_posterior_is_the_average_of_the_bags_mixtures():
    full = _posterior_of(0.95, 0.5)
    bags = [_posterior_of(0.9, 0.2), _posterior_of(0.8, 0.5), _posterior_of(0.7, 0.9)]
    bagged = posterior_module.bag_posteriors(full, bags, 0)
    assert bagged.no_noise_proba == pytest.approx(np.mean([0.2, 0.5, 0.9]))
    # The average of the bags' mixtures gives bag b's noise model the mass (1 - P_b) / 3.
    thetas = np.array([d.theta for d in bagged.draws])
    assert thetas.size == len(full.draws)
    noise_mass = np.array([0.8, 0.5, 0.1]) / 3
    for theta, mass in zip((0.9, 0.8, 0.7), noise_mass, strict=True):
        share = np.mean(np.isclose(thetas, theta)) * (1 - bagged.no_noise_proba)
        assert share == pytest.approx(mass, abs=1.0 / thetas.size)
    # Every prefix is a draw from the mixture (the per-row averages use the first ones).
    assert len(set(np.round(thetas[: posterior_module.AVERAGE_DRAWS], 3))) == 3
    # The mode, the refit's model and the evidence stay the full posterior's.
    assert bagged.mode is full.mode and bagged.refit_model is full.refit_model
    np.testing.assert_array_equal(bagged.log_evidence, full.log_evidence)


def test_bagged_posterior_of_bags_sure_of_no_noise():
    bags = [_posterior_of(0.9, 1.0), _posterior_of(0.8, 1.0)]
    bagged = posterior_module.bag_posteriors(_posterior_of(0.9, 0.3), bags, 0)
    assert bagged.no_noise_proba == 1.0
    assert len(bagged.draws) == 200  # the draws carry no mass, but are kept


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_guided_posterior_of_reweighted_rows_matches_a_brute_force_grid(noise):
    # A bag's posterior (the rows reweighted, its grid and searches guided by the posterior
    # of the rows as they are) against the brute-force evidence of the rows repeated as often
    # as their integer weight (a bootstrap resample), and against the unguided search.
    y, margin, _ = _labels(250, noise, 3)
    full = integrate_noise_posterior(
        calibrate_noise(y, margin), y, margin, np.ones_like(y), ModelPriors(), 200, 0
    )
    counts = np.random.default_rng(9).multinomial(y.size, np.full(y.size, 1.0 / y.size))
    weight = counts.astype(float)
    mode = calibrate_noise(y, margin, weight)
    guided = integrate_noise_posterior(mode, y, margin, weight, ModelPriors(), 200, 0, full.nodes)
    exact = _brute_force_evidence(np.repeat(y, counts), np.repeat(margin, counts))
    assert guided.log_evidence == pytest.approx(exact, abs=0.3)
    unguided = integrate_noise_posterior(mode, y, margin, weight, ModelPriors(), 200, 0)
    # (The guided nodes keep the guide's curvature: a resample of 250 rows changes it by a
    # few per cent, the evidence by a few hundredths of a nat.)
    assert guided.log_evidence == pytest.approx(unguided.log_evidence, abs=0.1)
    assert np.mean([d.theta for d in guided.draws]) == pytest.approx(
        np.mean([d.theta for d in unguided.draws]), abs=0.02
    )
    np.testing.assert_array_equal(guided.grid[:, 0], full.grid[:, 0])
