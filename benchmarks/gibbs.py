"""Speed of the Gibbs sampler (Algorithm 2): viboost's compiled sweep against the same sweep with
scipy's generic exact sampler for the weights.

The problem is the issue's: N = 1,000 rows, M = 50 base classifiers (random +-1 outputs), labels
drawn from the model of section 4 (``viboost.gibbs.generative.sample_model``, a fixed seed). Both
samplers run Algorithm 2 in the same order (c_1..c_M, xi, w, theta); they differ in how a
weight is drawn from its v-Log conditional:

* viboost: compiled adaptive rejection sampling (``viboost.gibbs.kernels``);
* baseline: ``scipy.stats.sampling.TransformedDensityRejection`` (UNU.RAN's TDR, exact for
  log-concave densities) built for each conditional from a vectorised NumPy log density and
  its derivative; the other steps in NumPy.

Reported: wall time of 1,000 sweeps (one chain, compile time excluded), sweeps per second,
effective sample sizes (ArviZ, bulk) of theta and xi and their rate per second, and for the
baseline the time of ``--baseline-sweeps`` sweeps, extrapolated per sweep, with the ratio.
Run: ``python benchmarks/gibbs.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import numpy as np
from scipy.special import expit, log_expit
from scipy.stats.sampling import TransformedDensityRejection

from viboost import GibbsSampler
from viboost.gibbs.generative import sample_model, sample_two_term_vlog
from viboost.gibbs.sampler import import_arviz


def make_problem(n_rows: int, n_classifiers: int, seed: int):
    rng = np.random.default_rng(seed)
    outputs = rng.choice([-1.0, 1.0], size=(n_rows, n_classifiers))
    truth = sample_model(outputs, clean_prior=(8.0, 2.0), random_state=rng)
    return outputs, truth


class _Conditional:
    """Unnormalised density of one weight's conditional (S.3), for UNU.RAN, shifted by its
    value at the centre so that it neither overflows nor underflows there."""

    def __init__(self, a, b, mu0, center):
        self.a, self.b, self.mu0 = a, b, mu0
        self.offset = 0.0
        self.offset = self.log_density(center)

    def log_density(self, c):
        prior = -self.mu0 * (np.logaddexp(0.0, c) + np.logaddexp(0.0, -c))
        return prior + np.sum(log_expit(self.a * c + self.b)) - self.offset

    def pdf(self, c):
        return float(np.exp(min(self.log_density(c), 700.0)))

    def dpdf(self, c):
        grad = -self.mu0 * np.tanh(0.5 * c) + np.sum(self.a * expit(-(self.a * c + self.b)))
        return float(grad * self.pdf(c))


def baseline_chain(outputs, y, n_sweeps, seed, mu0=1.0, mu0_noise=1.0, zeta=(1.0, 1.0)):
    """Algorithm 2 in NumPy with TDR weight draws; returns (theta draws, xi draws, seconds)."""
    rng = np.random.default_rng(seed)
    n_rows, n_classifiers = outputs.shape
    c = np.zeros(n_classifiers)
    margin = np.zeros(n_rows)
    clean = np.ones(n_rows, dtype=bool)
    logit_theta = 0.0
    thetas, xis = [], []
    start = time.perf_counter()
    for _ in range(n_sweeps):
        for m in range(n_classifiers):
            f = outputs[clean, m]
            yc = y[clean]
            a = yc * f
            b = yc * (margin[clean] - c[m] * f)
            dist = _Conditional(a, b, mu0, c[m])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # UNU.RAN set-up notes
                gen = TransformedDensityRejection(dist, center=c[m], random_state=rng)
            new = float(gen.rvs())
            margin += (new - c[m]) * outputs[:, m]
            c[m] = new
        noisy_pos = np.sum(~clean & (y > 0))
        noisy_neg = np.sum(~clean & (y < 0))
        # sigmoid(xi) ~ Beta(mu0' + noisy +1, mu0' + noisy -1): a two-term v-Log (S.3).
        xi = sample_two_term_vlog(mu0_noise + noisy_neg, mu0_noise + noisy_pos, random_state=rng)
        log_odds = logit_theta + log_expit(y * margin) - log_expit(y * xi)
        clean = rng.random(n_rows) < expit(log_odds)
        n_clean = clean.sum()
        # theta ~ Beta(zeta_1 + n_clean, zeta_2 + N - n_clean), drawn as its log-odds.
        logit_theta = sample_two_term_vlog(
            zeta[1] + n_rows - n_clean, zeta[0] + n_clean, random_state=rng
        )
        thetas.append(expit(logit_theta))
        xis.append(xi)
    return np.array(thetas), np.array(xis), time.perf_counter() - start


def _ess(draws):
    return float(import_arviz().ess(np.asarray(draws)[None, :], method="bulk"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--classifiers", type=int, default=50)
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--baseline-sweeps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import_arviz()  # once, outside the timings

    outputs, truth = make_problem(args.rows, args.classifiers, args.seed)
    y = truth.y
    print(f"# Gibbs sampler benchmark ({platform.processor() or platform.machine()})")
    print(
        f"N = {args.rows} rows, M = {args.classifiers} base classifiers; true theta = "
        f"{truth.clean_proba:.3f}, true xi = {truth.noise_grade:.3f}\n"
    )
    GibbsSampler(n_draws=5, n_burnin=0, n_chains=1).fit(outputs[:20, :2], y[:20])  # compile

    times, results = [], []
    for r in range(args.repeats):
        gibbs = GibbsSampler(
            n_draws=args.sweeps, n_burnin=0, n_chains=1, store_row_draws=False, random_state=r
        )
        start = time.perf_counter()
        gibbs.fit(outputs, y)
        times.append(time.perf_counter() - start)
        results.append(gibbs)
    best = int(np.argmin(times))
    ours = results[best]
    t_ours = times[best]
    theta = ours.clean_rate_draws_[0, 100:]  # the first 100 sweeps as burn-in for the ESS
    xi = ours.noise_grade_draws_[0, 100:]
    ess_theta, ess_xi = _ess(theta), _ess(xi)
    base_theta, base_xi, t_base = baseline_chain(outputs, y, args.baseline_sweeps, args.seed)
    per_sweep_base = t_base / args.baseline_sweeps
    per_sweep_ours = t_ours / args.sweeps
    print("| sampler | sweeps | seconds | sweeps/s | ESS theta | ESS xi | ESS/s theta | ESS/s xi |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| viboost (compiled ARS) | {args.sweeps} | {t_ours:.2f} (best of {args.repeats}; "
        f"all: {', '.join(f'{t:.2f}' for t in times)}) | {args.sweeps / t_ours:.0f} | "
        f"{ess_theta:.0f} | {ess_xi:.0f} | {ess_theta / t_ours:.0f} | {ess_xi / t_ours:.0f} |"
    )
    print(
        f"| baseline (scipy TDR per conditional) | {args.baseline_sweeps} | {t_base:.2f} | "
        f"{1 / per_sweep_base:.1f} | - | - | {ess_theta / args.sweeps / per_sweep_base:.2f}* "
        f"| {ess_xi / args.sweeps / per_sweep_base:.2f}* |"
    )
    print(
        f"\nper sweep: viboost {per_sweep_ours * 1e3:.2f} ms, baseline {per_sweep_base * 1e3:.0f} "
        f"ms; ratio baseline / viboost = {per_sweep_base / per_sweep_ours:.0f}x"
    )
    print(
        "* the baseline runs the same chain (same conditionals, exact draws), so its ESS per "
        "sweep is taken as viboost's; its ESS/s is that times its sweeps/s.\n"
        f"1,000 sweeps with the baseline would take about {per_sweep_base * 1000:.0f} s."
    )
    print(
        f"\nviboost: {ours.evaluations_per_draw_:.2f} log-density evaluations per weight draw; "
        f"posterior mean theta {theta.mean():.3f} (baseline's {args.baseline_sweeps} sweeps: "
        f"{base_theta.mean():.3f}), xi {xi.mean():.3f} (baseline: {base_xi.mean():.3f})"
    )


if __name__ == "__main__":
    main()
