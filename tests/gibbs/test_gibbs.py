"""Tests of the Gibbs sampler (Algorithm 2): its compiled kernels against references written
here, the no-classifier posterior against 2-D quadrature, simulation-based calibration, and the
estimator API."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit
from oracles import compiled_log_gamma_draws
from scipy import stats
from scipy.special import expit, log_expit
from sklearn.exceptions import ConvergenceWarning

from viboost import GibbsSampler, VIBoostClassifier
from viboost.boosting.stumps import DecisionStump
from viboost.boosting.trees import HistogramTree
from viboost.distributions import VersatileLogistic
from viboost.gibbs.base_classifiers import LeafIndicator, base_outputs, leaf_regions
from viboost.gibbs.generative import sample_model
from viboost.gibbs.kernels import HULL_SIZE, draw_weight, weight_log_density
from viboost.gibbs.sampler import weight_conditional


# ---------------------------------------------------------------------- kernels
def reference_log_density(c, a, b, mu0):
    """h(c) written directly from S.3 with mpmath-free float64 softplus."""
    return -mu0 * (np.logaddexp(0.0, c) + np.logaddexp(0.0, -c)) + np.sum(log_expit(a * c + b))


@pytest.mark.parametrize("c", [-800.0, -30.0, -1.5, 0.0, 0.3, 12.0, 701.0, 5e3])
def test_weight_log_density_against_reference(c):
    rng = np.random.default_rng(0)
    n = 1500  # crosses a product block of 512
    a = rng.choice([-1.0, 1.0], n)
    b = np.concatenate([rng.normal(0, 5, n - 4), [0.0, -800.0, 800.0, 40.0]])
    h, dh, d2h = weight_log_density(c, a, b, np.exp(-np.abs(b)), n, 0.7)
    assert h == pytest.approx(reference_log_density(c, a, b, 0.7), rel=1e-12, abs=1e-9)
    # Derivatives in closed form: sum a sigmoid(-(a c + b)) and -sum sigmoid * sigmoid(-.)
    u = a * c + b
    ref_dh = -0.7 * np.tanh(c / 2) + np.sum(a * expit(-u))
    ref_d2h = -2 * 0.7 * expit(c) * expit(-c) - np.sum(expit(u) * expit(-u))
    assert dh == pytest.approx(ref_dh, rel=1e-12, abs=1e-12)
    assert d2h == pytest.approx(ref_d2h, rel=1e-10, abs=1e-300)


@njit
def _draws(x0, a, b, mu0, n, rng, restart):
    xs = np.empty(HULL_SIZE)
    hs = np.empty(HULL_SIZE)
    dhs = np.empty(HULL_SIZE)
    zs = np.empty(HULL_SIZE)
    cum = np.empty(HULL_SIZE)
    eb = np.exp(-np.abs(b))
    out = np.empty(n)
    evals = 0
    x = x0
    for t in range(n):
        start = x0 if restart else x
        x, used = draw_weight(start, a, b, eb, a.shape[0], mu0, xs, hs, dhs, zs, cum, rng)
        out[t] = x
        evals += used
    return out, evals


def _conditional(a, b, mu0):
    """The weight conditional as a VersatileLogistic: log sigmoid(a c + b) is the term of slope
    -a and knot -b / a (a = +-1)."""
    return VersatileLogistic(
        np.r_[1.0, -1.0, -a], np.r_[0.0, 0.0, -b / a], np.r_[mu0, mu0, np.ones(a.size)]
    )


@pytest.mark.parametrize(
    "n_terms, spread, mu0, x0, restart",
    [
        (0, 0.0, 1.0, 5.0, False),  # the prior alone: a logistic
        (3, 0.0, 1e-3, 0.0, False),  # a nearly flat prior
        (40, 2.0, 1.0, 0.0, False),
        (40, 2.0, 1.0, 1e3, True),  # every draw starts far in a tail
        (40, 2.0, 1.0, -1e300, True),
        (1000, 10.0, 1.0, 0.0, False),
        (600, 50.0, 0.5, -40.0, True),
    ],
)
def test_draw_weight_kolmogorov_smirnov(n_terms, spread, mu0, x0, restart):
    rng = np.random.default_rng(n_terms)
    a = rng.choice([-1.0, 1.0], n_terms)
    b = rng.normal(0.0, spread, n_terms)
    if n_terms:
        b[0] = 3 * spread  # some terms all on one side
    draws, evals = _draws(x0, a, b, mu0, 3000, np.random.default_rng(7), restart)
    dist = _conditional(a, b, mu0)
    assert stats.kstest(draws, dist.cdf).pvalue > 1e-3
    assert evals / draws.size < (8.0 if restart else 5.0)


def test_draw_weight_is_reproducible():
    a = np.array([1.0, -1.0, 1.0])
    b = np.array([0.5, 1.0, -2.0])
    first, _ = _draws(0.0, a, b, 1.0, 50, np.random.default_rng(3), False)
    second, _ = _draws(0.0, a, b, 1.0, 50, np.random.default_rng(3), False)
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("n_pos, n_neg, mu0", [(0, 0, 1.0), (3, 11, 1.0), (40, 2, 0.2)])
def test_noise_grade_step_is_the_two_term_vlog(n_pos, n_neg, mu0):
    # xi | w, y ~ v-Log([+1, -1], [0, 0], [mu0' + #noisy -1, mu0' + #noisy +1]) (S.3).
    draws = compiled_log_gamma_draws(mu0 + n_pos, 3000, 2) - compiled_log_gamma_draws(
        mu0 + n_neg, 3000, 3
    )
    exact = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [mu0 + n_neg, mu0 + n_pos])
    assert stats.kstest(draws, exact.cdf).pvalue > 1e-3


def test_clean_rate_step_is_beta():
    # theta | w ~ Beta(zeta1 + sum w, zeta2 + sum(1 - w)), drawn as expit(log G1 - log G2).
    theta = expit(
        compiled_log_gamma_draws(2.0 + 17, 3000, 4) - compiled_log_gamma_draws(1.5 + 5, 3000, 5)
    )
    assert stats.kstest(theta, stats.beta(19.0, 6.5).cdf).pvalue > 1e-3


# ---------------------------------------------------------------------- whole sampler
def _exact_no_classifier_marginals(n_pos, n_neg, mu0_noise, zeta):
    """Marginal posterior CDFs of theta and xi with M = 0 (F = 0), by 2-D quadrature of
    p(theta, xi | y) ~ Beta(theta) p(xi) (theta/2 + (1-theta) s(xi))^n+ (. s(-xi))^n-."""
    theta = np.linspace(0.0, 1.0, 2001)[1:-1]
    xi = np.linspace(-40.0, 40.0, 4001)
    t, x = np.meshgrid(theta, xi, indexing="ij")
    log_p = (
        stats.beta(*zeta).logpdf(t)
        - mu0_noise * (np.logaddexp(0, x) + np.logaddexp(0, -x))
        + n_pos * np.log(t / 2 + (1 - t) * expit(x))
        + n_neg * np.log(t / 2 + (1 - t) * expit(-x))
    )
    p = np.exp(log_p - log_p.max())
    p_theta = p.sum(axis=1)
    p_xi = p.sum(axis=0)
    cdf_theta = np.cumsum(p_theta) / p_theta.sum()
    cdf_xi = np.cumsum(p_xi) / p_xi.sum()
    return (
        lambda v: np.interp(v, theta, cdf_theta),
        lambda v: np.interp(v, xi, cdf_xi),
    )


def test_no_classifiers_reproduces_the_exact_posterior():
    y = np.array([1.0] * 30 + [-1.0] * 10)
    outputs = np.empty((y.size, 0))
    gibbs = GibbsSampler(
        n_draws=2000, n_burnin=200, thin=10, n_chains=2, clean_prior=(2.0, 2.0), random_state=0
    ).fit(outputs, y)
    assert gibbs.weight_draws_.shape == (2, 2000, 0)
    cdf_theta, cdf_xi = _exact_no_classifier_marginals(30, 10, 1.0, (2.0, 2.0))
    assert stats.kstest(gibbs.clean_rate_draws_.ravel(), cdf_theta).pvalue > 1e-3
    assert stats.kstest(gibbs.noise_grade_draws_.ravel(), cdf_xi).pvalue > 1e-3
    # Without base classifiers F = 0 for every row, so all rows of a class are alike.
    assert np.ptp(gibbs.clean_proba_[:30]) < 1e-12


def test_simulation_based_calibration():
    """Talts et al. (2018): with parameters drawn from the prior and data from the model, the
    rank of the true value among posterior draws is uniform. Chi-square over 10 bins."""
    rng = np.random.default_rng(20261123)
    outputs = rng.choice([-1.0, 1.0], size=(12, 2))
    n_sims, n_draws = 300, 99
    ranks = {"theta": [], "xi": [], "c0": []}
    for sim in range(n_sims):
        truth = sample_model(outputs, clean_prior=(2.0, 2.0), random_state=rng)
        gibbs = GibbsSampler(
            n_draws=n_draws, n_burnin=50, thin=4, n_chains=1, clean_prior=(2.0, 2.0),
            store_row_draws=False, random_state=sim,
        ).fit(outputs, truth.y)  # fmt: skip
        ranks["theta"].append(np.sum(gibbs.clean_rate_draws_ < truth.clean_proba))
        ranks["xi"].append(np.sum(gibbs.noise_grade_draws_ < truth.noise_grade))
        ranks["c0"].append(np.sum(gibbs.weight_draws_[..., 0] < truth.weights[0]))
    for name, values in ranks.items():
        counts = np.bincount(np.asarray(values) // 10, minlength=10)
        assert counts.sum() == n_sims
        p = stats.chisquare(counts).pvalue
        assert p > 1e-3, (name, counts, p)


def _noisy_outputs(seed=0, n=400, m=4, flip=0.15):
    rng = np.random.default_rng(seed)
    outputs = rng.choice([-1.0, 1.0], size=(n, m))
    truth = np.where(outputs[:, 0] + 0.5 * outputs[:, 1] > 0, 1, 0)
    flipped = rng.random(n) < flip
    labels = np.where(flipped, 1 - truth, truth)
    return outputs, labels, flipped


def test_fit_shapes_summaries_and_reproducibility():
    outputs, labels, flipped = _noisy_outputs()
    kwargs = dict(n_draws=300, n_burnin=100, n_chains=3, random_state=5)
    gibbs = GibbsSampler(**kwargs).fit(outputs, labels)
    assert gibbs.weight_draws_.shape == (3, 300, 4)
    assert gibbs.noise_grade_draws_.shape == gibbs.clean_rate_draws_.shape == (3, 300)
    assert gibbs.clean_proba_draws_.shape == (3, 300, 400)
    assert gibbs.clean_proba_draws_.dtype == np.float32
    np.testing.assert_allclose(
        gibbs.clean_proba_, gibbs.clean_proba_draws_.mean(axis=(0, 1)), rtol=1e-5
    )
    theta = gibbs.clean_rate_draws_
    assert gibbs.snr_ == pytest.approx(theta.mean() / (1 - theta).mean(), rel=1e-12)
    assert gibbs.noise_grade_ == pytest.approx(gibbs.noise_grade_draws_.mean())
    # The flipped labels are the ones the posterior doubts.
    assert gibbs.clean_proba_[flipped].mean() < gibbs.clean_proba_[~flipped].mean() - 0.2
    # Same seed, same draws -- whatever the number of threads.
    again = GibbsSampler(**kwargs, n_jobs=2).fit(outputs, labels)
    np.testing.assert_array_equal(gibbs.weight_draws_, again.weight_draws_)
    np.testing.assert_array_equal(gibbs.clean_proba_, again.clean_proba_)
    other = GibbsSampler(**{**kwargs, "random_state": 6}).fit(outputs, labels)
    assert not np.array_equal(gibbs.weight_draws_, other.weight_draws_)
    lean = GibbsSampler(**kwargs, store_row_draws=False).fit(outputs, labels)
    assert lean.clean_proba_draws_ is None
    np.testing.assert_allclose(lean.clean_proba_, gibbs.clean_proba_, rtol=1e-12)
    restored = pickle.loads(pickle.dumps(gibbs))
    np.testing.assert_array_equal(restored.predict_proba(outputs), gibbs.predict_proba(outputs))


def test_prediction_is_the_posterior_mean():
    outputs, labels, _ = _noisy_outputs(seed=1)
    gibbs = GibbsSampler(n_draws=200, n_burnin=100, random_state=0).fit(outputs, labels)
    new = np.array([[1.0, 1.0, -1.0, 1.0], [-1.0, -1.0, 1.0, 1.0]])
    draws = gibbs.weight_draws_.reshape(-1, 4)
    expected = expit(new @ draws.T).mean(axis=1)
    proba = gibbs.predict_proba(new)
    np.testing.assert_allclose(proba[:, 1], expected, rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(gibbs.predict(new), [1, 0])
    np.testing.assert_allclose(gibbs.decision_function(new), new @ draws.mean(axis=0))
    assert gibbs.score(outputs, labels) > 0.8


def _arviz_major() -> int:
    from importlib import metadata

    try:
        return int(metadata.version("arviz").split(".", 1)[0])
    except metadata.PackageNotFoundError:
        return -1


# ArviZ 0.23's trace plot calls a matplotlib API deprecated in 3.11 (not ours to fix).
@pytest.mark.filterwarnings("ignore::matplotlib.MatplotlibDeprecationWarning")
@pytest.mark.skipif(
    _arviz_major() >= 1, reason="ArviZ 0.2x API; tests/gibbs/test_gibbs_arviz.py tests ArviZ 1.x"
)
def test_arviz_summary_and_trace_plot():
    import arviz
    import matplotlib

    matplotlib.use("Agg")
    outputs, labels, _ = _noisy_outputs(seed=2, n=200, m=3)
    gibbs = GibbsSampler(n_draws=200, n_burnin=100, random_state=0).fit(outputs, labels)
    idata = gibbs.to_inference_data()
    summary = arviz.summary(idata, var_names=["c", "xi", "theta", "snr"])
    assert list(summary.index) == ["c[0]", "c[1]", "c[2]", "xi", "theta", "snr"]
    assert summary.loc["theta", "mean"] == pytest.approx(gibbs.clean_rate_draws_.mean(), 1e-3)
    assert np.isfinite(summary[["r_hat", "ess_bulk", "ess_tail"]].to_numpy()).all()
    rows = arviz.summary(idata, var_names=["clean_proba"], kind="stats")
    assert rows.shape[0] == 200
    np.testing.assert_allclose(rows["mean"], gibbs.clean_proba_, atol=6e-3)  # rounded to 3 dp
    axes = arviz.plot_trace(idata, var_names=["xi", "theta"])
    assert axes.shape == (2, 2)
    matplotlib.pyplot.close("all")
    without_rows = gibbs.to_inference_data(include_rows=False)
    assert "clean_proba" not in without_rows.posterior


def test_from_a_fitted_viboost_classifier():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, "spam", "ham")
    flip = rng.random(300) < 0.1
    y[flip] = np.where(y[flip] == "spam", "ham", "spam")
    clf = VIBoostClassifier(n_estimators=15, preset="paper").fit(X, y)
    gibbs = GibbsSampler(n_draws=200, n_burnin=100, n_chains=2, classifier=clf, random_state=0)
    gibbs.fit(X, y)
    stumps = gibbs.base_classifiers_
    assert all(isinstance(s, DecisionStump) for s in stumps)
    assert gibbs.base_classifier_names_[0] == "stump0"
    keys = {(s.feature, s.threshold, s.missing_right) for s in stumps}
    assert len(keys) == len(stumps) <= len(clf.estimators_)
    assert gibbs.weight_draws_.shape == (2, 200, len(stumps))
    np.testing.assert_array_equal(gibbs.classes_, clf.classes_)
    assert gibbs.n_features_in_ == 3
    assert gibbs.score(X, y) > 0.8
    assert np.mean(gibbs.predict(X) == clf.predict(X)) > 0.9
    with pytest.raises(ValueError, match="expecting 3 features"):
        gibbs.predict(X[:, :2])
    with pytest.raises(ValueError, match="not fitted on"):
        GibbsSampler(classifier=clf).fit(X, np.where(y == "spam", "eggs", y))
    # Cloned (as cross-validation does) through FrozenEstimator, the classifier stays fitted.
    from sklearn.base import clone
    from sklearn.frozen import FrozenEstimator

    frozen = clone(GibbsSampler(n_draws=50, n_burnin=20, classifier=FrozenEstimator(clf)))
    assert len(frozen.fit(X, y).base_classifiers_) == len(stumps)
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(TypeError, match="fitted VIBoostClassifier"):
        GibbsSampler(classifier=LogisticRegression().fit(X, y)).fit(X, y)


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[1.0, 0.5], [-1.0, 1.0]]), [0, 1], "every entry -1, 0 or \\+1; found 0.5"),
        (np.ones((3, 2)), [0, 1], "3 rows but y has 2"),
        (np.ones((3, 2)), [0, 1, 2], "binary model of Algorithm 2 .*y has 3 classes \\(0, 1, 2\\)"),
        (np.ones((3, 2)), [2, 2, 2], "exactly 2 classes"),
        (np.array([[1.0, np.nan]]), [1], "NaN"),
    ],
)
def test_bad_input(X, y, match):
    with pytest.raises(ValueError, match=match):
        GibbsSampler(n_draws=5, n_burnin=0).fit(X, y)


def test_k_classes_are_refused_clearly():
    """Issue 23: the sampler draws the binary model; K classes give a clear error, before any
    chain runs, for a K-class classifier (also frozen) and for K-class labels alike."""
    from sklearn.frozen import FrozenEstimator

    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 2))
    y = np.array(["ant", "bee", "cat"])[np.digitize(X[:, 0], [-0.4, 0.4])]
    clf = VIBoostClassifier(random_state=0).fit(X, y)
    assert clf.classes_.size == 3
    for classifier in (clf, FrozenEstimator(clf)):
        with pytest.raises(ValueError) as info:
            GibbsSampler(n_draws=5, n_burnin=0, classifier=classifier).fit(X, y)
        message = str(info.value)
        assert "binary model of Algorithm 2" in message and "not sampled yet" in message
        assert "the classifier was fitted on 3 classes (ant, bee, cat)" in message
    outputs = np.where(X[:, :1] > 0, 1.0, -1.0)
    with pytest.raises(ValueError, match=r"y has 3 classes \(ant, bee, cat\); K classes are not"):
        GibbsSampler(n_draws=5, n_burnin=0).fit(outputs, y)
    many = np.arange(90) % 7
    with pytest.raises(ValueError, match=r"y has 7 classes \(0, 1, 2, 3, 4, \.\.\.\)"):
        GibbsSampler(n_draws=5, n_burnin=0).fit(outputs, many)


def test_bad_parameters_and_unfitted():
    X, y = np.ones((4, 1)), [0, 1, 0, 1]
    with pytest.raises(ValueError, match="clean_prior must be a pair"):
        GibbsSampler(clean_prior=(1.0, -1.0)).fit(X, y)
    with pytest.raises(ValueError, match="n_draws"):
        GibbsSampler(n_draws=0).fit(X, y)
    with pytest.raises(ValueError, match="weight_prior"):
        GibbsSampler(weight_prior=0.0).fit(X, y)
    gibbs = GibbsSampler(n_draws=5, n_burnin=0).fit(X, y)
    with pytest.raises(ValueError, match="expecting 1 base-classifier outputs"):
        gibbs.predict(np.ones((2, 2)))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        GibbsSampler().predict(X)
    with pytest.raises(NotFittedError):
        GibbsSampler(classifier=VIBoostClassifier()).fit(X, y)


def test_extreme_margins_do_not_overflow():
    # Perfectly separable labels with a weak prior push the weights far out; nothing overflows.
    outputs = np.tile([[1.0], [-1.0]], (200, 1))
    y = outputs[:, 0].copy()
    gibbs = GibbsSampler(n_draws=100, n_burnin=50, weight_prior=1e-6, random_state=0)
    gibbs.fit(outputs, y)
    assert np.all(np.isfinite(gibbs.weight_draws_))
    assert gibbs.weights_[0] > 5.0
    assert np.all(np.isfinite(gibbs.predict_proba(outputs)))
    assert math.isfinite(gibbs.snr_)


def test_two_term_marginal_posterior_of_the_weight_alone():
    # One classifier, every label clean with certainty (zeta heavily on theta = 1): the weight
    # posterior is the conjugate v-Log of section 3 (prior conditioned on the b-Log labels).
    outputs = np.array([[1.0]] * 25 + [[-1.0]] * 15)
    y = np.array([1.0] * 20 + [-1.0] * 5 + [-1.0] * 12 + [1.0] * 3)
    gibbs = GibbsSampler(
        n_draws=1500, n_burnin=100, thin=2, n_chains=2, clean_prior=(1e6, 1e-3), random_state=1
    ).fit(outputs, y)
    assert gibbs.clean_rate_draws_.min() > 0.999
    # y f = +1 for 32 rows and -1 for 8: v-Log([+1, -1], [0, 0], [mu0 + 8, mu0 + 32]).
    exact = VersatileLogistic([1.0, -1.0], [0.0, 0.0], [1.0 + 8, 1.0 + 32])
    assert stats.kstest(gibbs.weight_draws_.ravel(), exact.cdf).pvalue > 1e-3


def test_one_classifier_many_rows_against_3d_quadrature():
    """Large margins and N = 2,000 rows: with one base classifier the data reduce to the counts
    of (f, y), and the posterior of (c, xi, theta) is integrated on a 3-D grid."""
    rng = np.random.default_rng(11)
    n = 2000
    f = rng.choice([-1.0, 1.0], n)
    clean = rng.random(n) < 0.8
    y = np.where(
        clean,
        np.where(rng.random(n) < expit(2.0 * f), 1.0, -1.0),
        np.where(rng.random(n) < expit(np.log(3.0)), 1.0, -1.0),
    )
    # theta, c and the 2,000 type selectors are strongly coupled: Algorithm 2 mixes slowly here
    # (bulk ESS ~ 250 of these 40,000 draws), hence the long chains.
    gibbs = GibbsSampler(
        n_draws=10000, n_burnin=500, n_chains=4, store_row_draws=False, n_jobs=2, random_state=0
    ).fit(f[:, None], y)
    import arviz

    summary = arviz.summary(
        gibbs.to_inference_data(include_rows=False),
        var_names=["c", "xi", "theta"],
        round_to="none",  # ArviZ 1.x rounds to 2 decimals by default, mcse_mean included
    )

    c = np.linspace(0.0, 16.0, 321)
    xi = np.linspace(-12.0, 14.0, 321)
    theta = np.linspace(0.0, 1.0, 242)[1:-1]
    log_post = np.empty((theta.size, c.size, xi.size))
    cc, xx = np.meshgrid(c, xi, indexing="ij")
    prior = -(
        np.logaddexp(0, cc) + np.logaddexp(0, -cc) + np.logaddexp(0, xx) + np.logaddexp(0, -xx)
    )
    for k, t in enumerate(theta):
        total = prior.copy()
        for fv in (-1.0, 1.0):
            for yv in (-1.0, 1.0):
                count = np.sum((f == fv) & (y == yv))
                total += count * np.log(t * expit(yv * fv * cc) + (1 - t) * expit(yv * xx))
        log_post[k] = total
    p = np.exp(log_post - log_post.max())
    p /= p.sum()
    # The grid holds the posterior: no mass at its edges.
    assert p.sum(axis=(0, 2))[[0, -1]].max() < 1e-6 and p.sum(axis=(0, 1))[[0, -1]].max() < 1e-5
    for draws, grid, axes, name in (
        (gibbs.clean_rate_draws_, theta, (1, 2), "theta"),
        (gibbs.weight_draws_[..., 0], c, (0, 2), "c[0]"),
        (gibbs.noise_grade_draws_, xi, (0, 1), "xi"),
    ):
        marginal = p.sum(axis=axes)
        mean = np.sum(marginal * grid)
        sd = np.sqrt(np.sum(marginal * (grid - mean) ** 2))
        mcse, ess = summary.loc[name, "mcse_mean"], summary.loc[name, "ess_bulk"]
        assert ess > 100, (name, ess)
        # Within 4 Monte Carlo standard errors (plus the grid's resolution).
        assert abs(draws.mean() - mean) < 4 * mcse + 0.01 * sd, (name, draws.mean(), mean, mcse)
        assert draws.std() == pytest.approx(sd, rel=0.15)


# ---------------------------------------------------------------------- trees
def _route(nodes, x):
    """The node a row reaches, walking the node arrays here (x <= threshold: left; NaN: the
    missing side)."""
    node = 0
    while not nodes["is_leaf"][node]:
        v = x[nodes["feature"][node]]
        go_left = nodes["missing_left"][node] if np.isnan(v) else v <= nodes["threshold"][node]
        node = nodes["left"][node] if go_left else nodes["right"][node]
    return node


def _leaf_of_rows(tree, X):
    """Each row's leaf number (in leaf order), by :func:`_route`."""
    number = {int(node): k for k, node in enumerate(np.flatnonzero(tree.nodes["is_leaf"]))}
    return np.array([number[_route(tree.nodes, x)] for x in X])


def _tree_data(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X[rng.random(n) < 0.05, 1] = np.nan
    score = X[:, 0] * np.nan_to_num(X[:, 1]) + 0.5 * X[:, 2]
    y = np.where(score + 0.3 * rng.normal(size=n) > 0, "yes", "no")
    return X, y


@pytest.fixture(scope="module")
def tree_fit():
    X, y = _tree_data()
    with warnings.catch_warnings():  # "more rounds would likely fit better": not the point here
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = VIBoostClassifier(20, max_leaf_nodes=4, min_samples_leaf=5, random_state=0)
        clf.fit(X, y)
    return X, y, clf


def test_leaf_weight_conditional_against_an_oracle(tree_fit):
    """The conditional of a leaf's weight is the v-Log over the rows of that leaf: the sum of
    log sigmoid(y_n (F_n - c h_n + c')) over its clean rows plus the prior, up to a constant."""
    X, y, clf = tree_fit
    gibbs = GibbsSampler(n_draws=5, n_burnin=0, n_chains=1, classifier=clf, random_state=0)
    gibbs.fit(X, y)
    outputs = gibbs._base_outputs(X, fitting=False)
    n, m_count = outputs.shape
    rng = np.random.default_rng(1)
    c = rng.normal(0.0, 2.0, m_count)
    clean = rng.random(n) < 0.8
    y_signed = np.where(y == "yes", 1.0, -1.0)
    # The margin and each leaf's rows, written here from the node arrays.
    learners = gibbs.base_classifiers_
    h = np.column_stack([_leaf_of_rows(leaf.tree, X) == leaf.leaf for leaf in learners]).astype(
        float
    )
    np.testing.assert_array_equal(outputs.toarray(), h)
    margin = h @ c
    grid = np.linspace(-8.0, 8.0, 41)
    for m in (0, 1, 5, m_count - 1):  # the intercept and some leaves
        mu0 = 0.7
        rows = (h[:, m] == 1.0) & clean
        rest = margin[rows] - c[m]
        oracle = np.array([np.sum(log_expit(y_signed[rows] * (rest + z))) for z in grid]) - mu0 * (
            np.logaddexp(0.0, grid) + np.logaddexp(0.0, -grid)
        )
        dist = weight_conditional(outputs, y_signed, c, clean, m, weight_prior=mu0)
        assert dist.n_terms == 2 + rows.sum()  # the prior and the leaf's clean rows only
        diff = dist.unnormalized_logpdf(grid) - oracle
        assert np.ptp(diff) < 1e-9 * (1.0 + np.abs(oracle).max()), (learners[m].name, np.ptp(diff))
        # A KS check of the compiled draw from these terms.
        # h = 1 on the leaf: log sigmoid(a c + b) with a = y_n and b = y_n (rest of F_n).
        a, b = y_signed[rows], y_signed[rows] * rest
        draws, _ = _draws(0.0, a, b, mu0, 1500, np.random.default_rng(m), False)
        assert stats.kstest(draws, dist.cdf).pvalue > 1e-3


def test_plus_minus_one_columns_keep_their_conditional():
    # A +-1 column (stump, tied tree) beside leaf indicators: all rows, slopes -y f.
    rng = np.random.default_rng(2)
    n = 60
    f = rng.choice([-1.0, 1.0], n)
    leaf = (rng.random(n) < 0.4).astype(float)
    outputs = np.column_stack([f, leaf, np.ones(n)])
    y = rng.choice([-1.0, 1.0], n)
    c = np.array([0.8, -1.2, 0.3])
    clean = rng.random(n) < 0.7
    grid = np.linspace(-6.0, 6.0, 25)
    margin = outputs @ c
    rest = margin - c[0] * f
    oracle = np.array([np.sum(log_expit(y * (rest + z * f))[clean]) for z in grid])
    oracle -= np.logaddexp(0.0, grid) + np.logaddexp(0.0, -grid)
    for matrix in (outputs, sp.csr_matrix(outputs)):
        dist = weight_conditional(matrix, y, c, clean, 0)
        assert np.ptp(dist.unnormalized_logpdf(grid) - oracle) < 1e-9


def test_simulation_based_calibration_of_leaf_weights():
    """Talts et al. (2018) on an intercept and two leaf indicators (0/1 outputs), data drawn from
    the model of section 4 written here."""
    rng = np.random.default_rng(20261125)
    n_rows = 12
    leaf = rng.random(n_rows) < 0.5
    outputs = np.column_stack([np.ones(n_rows), leaf, ~leaf]).astype(float)
    outputs[:3, 1] = 1.0  # rows 0-2 in both "leaves"
    n_sims, n_draws = 200, 99
    ranks = {"theta": [], "c0": [], "c1": []}
    for sim in range(n_sims):
        c = np.log(rng.gamma(1.0, size=3)) - np.log(rng.gamma(1.0, size=3))
        xi = math.log(rng.gamma(1.0)) - math.log(rng.gamma(1.0))
        theta = rng.beta(2.0, 2.0)
        clean = rng.random(n_rows) < theta
        y = np.where(rng.random(n_rows) < expit(np.where(clean, outputs @ c, xi)), 1.0, -1.0)
        gibbs = GibbsSampler(
            n_draws=n_draws, n_burnin=50, thin=4, n_chains=1, clean_prior=(2.0, 2.0),
            store_row_draws=False, random_state=sim,
        ).fit(outputs, y)  # fmt: skip
        ranks["theta"].append(np.sum(gibbs.clean_rate_draws_ < theta))
        ranks["c0"].append(np.sum(gibbs.weight_draws_[..., 0] < c[0]))
        ranks["c1"].append(np.sum(gibbs.weight_draws_[..., 1] < c[1]))
    for name, values in ranks.items():
        counts = np.bincount(np.asarray(values) // 10, minlength=10)
        p = stats.chisquare(counts).pvalue
        assert p > 1e-3, (name, counts, p)


def test_sparse_and_dense_zero_one_outputs_give_the_same_draws():
    rng = np.random.default_rng(4)
    leaves = rng.integers(0, 3, 150)
    outputs = np.column_stack([np.ones(150)] + [leaves == k for k in range(3)]).astype(float)
    y = np.where(rng.random(150) < expit(2.0 * (leaves - 1)), 1, -1)
    kwargs = dict(n_draws=50, n_burnin=20, n_chains=2, random_state=3)
    dense = GibbsSampler(**kwargs).fit(outputs, y)
    sparse = GibbsSampler(**kwargs).fit(sp.csr_matrix(outputs), y)
    np.testing.assert_array_equal(dense.weight_draws_, sparse.weight_draws_)
    np.testing.assert_array_equal(dense.clean_proba_, sparse.clean_proba_)
    np.testing.assert_allclose(
        dense.predict_proba(outputs), sparse.predict_proba(sp.csc_matrix(outputs)), rtol=1e-12
    )


def test_from_a_fitted_tree_classifier(tree_fit):
    X, y, clf = tree_fit
    assert all(isinstance(t, HistogramTree) and t.per_leaf for t in clf.estimators_)
    kwargs = dict(n_draws=150, n_burnin=100, n_chains=2, classifier=clf, random_state=0)
    gibbs = GibbsSampler(**kwargs).fit(X, y)
    learners, names = gibbs.base_classifiers_, gibbs.base_classifier_names_
    assert all(isinstance(leaf, LeafIndicator) for leaf in learners)
    assert names[0] == "intercept" and names[1] == "tree1_leaf0"
    assert names == [leaf.name for leaf in learners]
    n_leaves = sum(t.n_leaves for t in clf.estimators_)
    assert len(learners) < n_leaves  # some leaves recur in later trees
    assert gibbs.weight_draws_.shape == (2, 150, len(learners))
    # Merged leaves are the same indicator as a kept one, wherever x is (NaN included); kept
    # leaves are distinct regions.
    rng = np.random.default_rng(9)
    wide = rng.normal(0.0, 2.0, size=(3000, 3))
    wide[rng.random(3000) < 0.1, 1] = np.nan
    kept = {(leaf.estimator, leaf.leaf) for leaf in learners}
    columns = base_outputs(learners, wide).toarray()
    regions = [leaf_regions(leaf.tree)[leaf.leaf] for leaf in learners]
    assert len(set(regions)) == len(regions)
    for t, tree in enumerate(clf.estimators_):
        for leaf in range(tree.n_leaves):
            if (t, leaf) not in kept:
                column = (_leaf_of_rows(tree, wide) == leaf).astype(float)
                assert (columns == column[:, None]).all(axis=0).any(), (t, leaf)
    # Reproducible for a seed, different for another.
    again = GibbsSampler(**kwargs).fit(X, y)
    np.testing.assert_array_equal(gibbs.weight_draws_, again.weight_draws_)
    other = GibbsSampler(**{**kwargs, "random_state": 1}).fit(X, y)
    assert not np.array_equal(gibbs.weight_draws_, other.weight_draws_)
    # The posterior mean margin agrees in sign with the fit on most training rows.
    assert np.mean(np.sign(gibbs.decision_function(X)) == np.sign(clf.decision_function(X))) > 0.8
    assert gibbs.score(X, y) > 0.8
    new = X[:7].copy()
    new[0] = np.nan
    proba = gibbs.predict_proba(new)
    assert proba.shape == (7, 2) and np.all(np.isfinite(proba))
    draws = gibbs.weight_draws_.reshape(-1, len(learners))
    leaf_columns = base_outputs(learners, new).toarray()
    np.testing.assert_allclose(proba[:, 1], expit(leaf_columns @ draws.T).mean(axis=1))
    # ArviZ: the weights are named by tree and leaf.
    idata = gibbs.to_inference_data(include_rows=False)
    assert list(idata.posterior["classifier"].values) == names
    restored = pickle.loads(pickle.dumps(gibbs))
    np.testing.assert_array_equal(restored.predict_proba(new), proba)
    from sklearn.frozen import FrozenEstimator

    frozen = GibbsSampler(n_draws=5, n_burnin=0, n_chains=1, classifier=FrozenEstimator(clf))
    assert frozen.fit(X, y).base_classifier_names_ == names


def test_from_a_fitted_tied_tree_classifier():
    X, y = _tree_data(seed=3, n=150)
    clf = VIBoostClassifier(
        8, max_leaf_nodes=4, min_samples_leaf=5, leaf_weights="tied", random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    gibbs = GibbsSampler(n_draws=100, n_burnin=50, n_chains=2, classifier=clf, random_state=0).fit(
        X, y
    )
    trees = gibbs.base_classifiers_
    assert all(isinstance(t, HistogramTree) and not t.per_leaf for t in trees)
    assert gibbs.base_classifier_names_[0] == "tree0"
    outputs = gibbs._base_outputs(X, fitting=False)
    assert isinstance(outputs, np.ndarray) and set(np.unique(outputs)) <= {-1.0, 1.0}
    assert np.mean(gibbs.predict(X) == clf.predict(X)) > 0.8
    # A tree and its negation are one base classifier up to the sign of its weight.
    from viboost.gibbs.base_classifiers import distinct_base_classifiers

    negated = trees[0].with_leaf_values(-trees[0].leaf_values)
    learners, names = distinct_base_classifiers([trees[0], negated, trees[0]])
    assert learners == [trees[0]] and names == ["tree0"]


def test_unique_stumps_tells_categorical_stumps_apart_by_their_sets():
    from viboost.boosting.stumps import DecisionStump
    from viboost.gibbs.base_classifiers import unique_stumps

    def stump(words, polarity):
        return DecisionStump(0, float("nan"), polarity, True, -1, 0.1, left_categories=words)

    a, neg_a, b = stump((5, 0, 0, 0), 1), stump((5, 0, 0, 0), -1), stump((6, 0, 0, 0), 1)
    assert unique_stumps([a, neg_a, b]) == [a, b]


def test_leaf_regions_of_category_set_splits_are_sets_of_codes():
    import pandas as pd

    from viboost import VIBoostClassifier
    from viboost.gibbs.base_classifiers import leaf_regions

    rng = np.random.default_rng(2)
    colour = rng.choice(list("abcdefg"), size=300)
    y = np.isin(colour, list("aceg")).astype(int)
    clf = VIBoostClassifier(random_state=0, n_estimators=10).fit(pd.DataFrame({"c": colour}), y)
    tree = next(t for t in clf.estimators_ if t.nodes.size > 1 and t.nodes["is_categorical"][0])
    regions = leaf_regions(tree)
    assert len(set(regions)) == len(regions)  # the leaves partition the rows
    words = np.asarray(tree.nodes[0]["left_categories"], dtype="<u8")
    left_set = sum(int(w) << (64 * k) for k, w in enumerate(words))
    for region in regions:
        (entry,) = [e for e in region if e[0] == 0]
        assert entry[1] == "in"
        codes = entry[2]
        # Every leaf's codes are within the root's left set or within its complement.
        assert (codes & left_set) in (0, codes)
