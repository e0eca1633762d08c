"""viboost.variational.state: the one definition of phi_n (CleanLogOdds in numpy, compiled
logistic and compiled rational forms) against S.4.3 eq. (79) written out here and an mpmath
oracle at 50 digits; VariationalState's SNR and noise grade against their definitions."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.special import digamma, expit

from viboost.variational import CleanLogOdds, VariationalState, update_clean_proba
from viboost.variational.state import (
    clean_proba_kernel,
    inverse_clean_proba,
    scaled_inverse_clean_proba,
)

# (eta, omega): balanced, mostly clean, mostly noisy, lopsided noise grade, large counts.
POSTERIORS = [
    (np.array([1.0, 1.0]), np.array([1.0, 1.0])),
    (np.array([40.0, 7.0]), np.array([3.0, 5.5])),
    (np.array([0.6, 25.0]), np.array([12.0, 0.4])),
    (np.array([3.0, 1.5]), np.array([0.2, 80.0])),
    (np.array([9000.0, 1200.0]), np.array([700.0, 500.0])),
]


def _rows(n, spread, seed=0):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = np.where(rng.random(n) < 0.7, y, -y)
    margin = rng.normal(0.0, spread, n)
    return y, h, margin


def _grid():
    """Margins in [-30, 30] (0 and +-1e-3 included) for both labels."""
    margin = np.concatenate([np.linspace(-30.0, 30.0, 241), [0.0, 1e-3, -1e-3, 1e-12]])
    y = np.concatenate([np.ones(margin.size), -np.ones(margin.size)])
    return y, np.concatenate([margin, margin])


def _kappa(y, margin, eta, omega):
    """logit phi_n of S.4.3 eq. (79): psi(eta_1) - psi(eta_2) + psi(omega_0) - psi(omega_y)
    - softplus(-y_n H_n), with omega_{+1} = omega_2 and omega_{-1} = omega_1."""
    omega_y = np.where(y > 0, omega[1], omega[0])
    return (
        digamma(eta[0])
        - digamma(eta[1])
        + digamma(omega[0] + omega[1])
        - digamma(omega_y)
        - np.logaddexp(0.0, -y * margin)
    )


def _mp_phi(y, margin, eta, omega):
    """phi = 1 / (1 + exp(-(a_y - log(1 + exp(-y H))))) at 50 digits, a_y by mpmath's digamma;
    returns (phi, 1 - phi), each rounded to float from 50 digits."""
    with mpmath.workdps(50):
        eta1, eta2, om1, om2 = (mpmath.mpf(float(v)) for v in (*eta, *omega))
        base = mpmath.digamma(eta1) - mpmath.digamma(eta2) + mpmath.digamma(om1 + om2)
        offset = {1.0: base - mpmath.digamma(om2), -1.0: base - mpmath.digamma(om1)}
        phi, noise = [], []
        for yn, hn in zip(y, margin, strict=True):
            a = offset[float(yn)]
            knot = -mpmath.mpf(float(yn)) * mpmath.mpf(float(hn))
            value = 1 / (1 + mpmath.exp(-(a - mpmath.log(1 + mpmath.exp(knot)))))
            phi.append(float(value))
            noise.append(float(1 - value))
    return np.array(phi), np.array(noise)


def test_clean_log_odds_is_the_phi_update():
    y, h, margin = _rows(1_000, 3.0, seed=8)
    eta, omega = np.array([40.0, 7.0]), np.array([3.0, 5.5])
    clean, log_clean, log_noise = update_clean_proba(y, margin + 0.8 * h, eta, omega)
    assert clean == CleanLogOdds.from_posteriors(eta, omega)
    got_clean, got_noise = CleanLogOdds.from_posteriors(eta, omega).log_proba(y, margin + 0.8 * h)
    np.testing.assert_allclose(got_clean, log_clean, rtol=1e-14)
    np.testing.assert_allclose(got_noise, log_noise, rtol=1e-14)
    clean, noise = CleanLogOdds.constant(1.0).log_proba(y, margin)
    assert np.all(clean == 0.0) and np.all(noise == -np.inf)
    for odds in (CleanLogOdds.from_posteriors(eta, omega), CleanLogOdds.constant(0.3)):
        np.testing.assert_allclose(
            odds.proba(y, margin * 100), np.exp(odds.log_proba(y, margin * 100)[0]), rtol=1e-14
        )


@pytest.mark.parametrize(("eta", "omega"), POSTERIORS)
def test_phi_update_is_the_digamma_formula_of_eq_79(eta, omega):
    y, h, margin = _rows(2_000, 4.0, seed=9)
    margin = margin + 0.6 * h
    kappa = _kappa(y, margin, eta, omega)
    clean, log_clean, log_noise = update_clean_proba(y, margin, eta, omega)
    np.testing.assert_allclose(np.exp(log_clean), expit(kappa), rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_noise), expit(-kappa), rtol=1e-12)
    np.testing.assert_allclose(clean.proba(y, margin), expit(kappa), rtol=1e-12)
    # The offsets a_{-1}, a_{+1} are kappa without the softplus term.
    assert clean.slope == 1.0
    base = digamma(eta[0]) - digamma(eta[1]) + digamma(omega.sum())
    assert clean.offset_neg == pytest.approx(base - digamma(omega[0]), rel=1e-14, abs=1e-14)
    assert clean.offset_pos == pytest.approx(base - digamma(omega[1]), rel=1e-14, abs=1e-14)


@pytest.mark.parametrize(("eta", "omega"), POSTERIORS)
def test_the_three_forms_of_phi_agree_and_match_mpmath(eta, omega):
    y, margin = _grid()
    clean = CleanLogOdds.from_posteriors(eta, omega)
    oracle, oracle_noise = _mp_phi(y, margin, eta, omega)
    # numpy, log space.
    log_phi, log_1m_phi = clean.log_proba(y, margin)
    from_logs = np.exp(log_phi)
    # compiled, logistic: through proba and the kernel itself.
    compiled = clean.proba(y, margin)
    kernel = clean_proba_kernel(y, margin, clean.offset_neg, clean.offset_pos, clean.slope)
    np.testing.assert_array_equal(compiled, kernel)
    # compiled, rational: 1/phi = 1 + A + A E for -yH <= 0, R/phi = (1 + A) R + A for -yH > 0.
    knot = -y * margin
    inverse_odds = np.exp(-np.where(y > 0, clean.offset_pos, clean.offset_neg))
    low = knot <= 0.0
    rational = np.empty_like(margin)
    rational[low] = 1.0 / inverse_clean_proba(np.exp(knot[low]), inverse_odds[low])
    r = np.exp(-knot[~low])  # exp(y H) < 1
    rational[~low] = r / scaled_inverse_clean_proba(r, inverse_odds[~low])
    assert low.any() and (~low).any()
    for form in (from_logs, compiled, rational):
        np.testing.assert_allclose(form, oracle, rtol=1e-13, atol=0)
    np.testing.assert_allclose(from_logs, compiled, rtol=1e-13, atol=0)
    np.testing.assert_allclose(rational, compiled, rtol=1e-13, atol=0)
    np.testing.assert_allclose(np.exp(log_1m_phi), oracle_noise, rtol=1e-13, atol=0)


@pytest.mark.parametrize("p", [1.0, 0.3, 1e-9])
def test_constant_clean_log_odds_gives_the_same_phi_to_every_row(p):
    y, margin = _grid()
    clean = CleanLogOdds.constant(p)
    assert clean.slope == 0.0
    np.testing.assert_allclose(clean.proba(y, margin), p, rtol=1e-14)
    np.testing.assert_allclose(np.exp(clean.log_proba(y, margin)[0]), p, rtol=1e-14)


def test_variational_state_snr_and_noise_grade_are_their_definitions():
    eta, omega = np.array([40.0, 7.0]), np.array([3.0, 5.5])
    state = VariationalState(eta=eta, omega=omega, clean=CleanLogOdds.from_posteriors(eta, omega))
    assert state.snr == pytest.approx(40.0 / 7.0, rel=1e-15)
    assert state.noise_grade == pytest.approx(np.log(5.5 / 3.0), rel=1e-15)
