"""Time ``VersatileLogistic.rvs`` (adaptive rejection, ARS) against scipy's TDR, same run.

Run ``python benchmarks/vlog_rvs.py``.  Each timing builds a fresh distribution, so it includes
the sampler's one-off set-up (for TDR: the UNU.RAN generator on the same standardised kernel
that ``rvs`` used before ARS).  Prints seconds and the ratio TDR / ARS.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.special import expit
from scipy.stats.sampling import TransformedDensityRejection

from viboost.distributions import VersatileLogistic
from viboost.distributions._vlog_kernels import BregmanKernel


def _make(n_terms: int, seed: int = 0, mult: float | None = None) -> VersatileLogistic:
    if n_terms == 2:
        m = [0.3, 4.0] if mult is None else [mult, 2.0 * mult]
        return VersatileLogistic([1.0, -1.0], 0.0, m)
    rng = np.random.default_rng(seed)
    slopes = rng.choice([-1.0, 1.0], n_terms) * rng.uniform(0.5, 2.0, n_terms)
    knots = rng.uniform(-50.0, 50.0, n_terms)
    return VersatileLogistic(slopes, knots, rng.uniform(0.2, 3.0, n_terms))


def _shifted_kernel(d: VersatileLogistic) -> tuple[BregmanKernel, float, float]:
    """The kernel ``g~(x) = g(z* + x) - g(z*)`` that ``rvs`` samples, ``z*`` and the curvature
    width ``s = 1 / sqrt(g''(z*))``, built as VersatileLogistic builds them (multiplicities above
    2**600 stored as weights ``mu / 2**e``; the cases here have distinct terms)."""
    z_star = d.mode()
    mults = d.multiplicities
    e = max(0, math.frexp(float(np.max(mults)))[1] - 600)
    kernel = BregmanKernel(d.slopes, d.knots, np.ldexp(mults, -e), e, z_star)
    kernel.center(kernel.g0 * kernel.scale)
    t = d.slopes * (z_star - d.knots)
    curvature = float(np.sum(mults * d.slopes**2 * expit(t) * expit(-t)))
    return kernel, z_star, 1.0 / math.sqrt(curvature)


def _tdr_rvs(d: VersatileLogistic, size: int, seed: int) -> np.ndarray:
    kernel, z_star, s = _shifted_kernel(d)

    class _Std:
        def pdf(self, x: float) -> float:
            gt = float(kernel(np.array([s * x]))[0])
            return math.exp(-gt) if gt < 745.0 else 0.0

        def dpdf(self, x: float) -> float:
            f = self.pdf(x)
            if f == 0.0:
                return 0.0
            return -s * kernel.derivatives(s * x)[0] * kernel.scale * f

    gen = TransformedDensityRejection(_Std(), center=0.0, random_state=seed)
    return z_star + s * np.asarray(gen.rvs(size))


def _time(fn) -> float | str:
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # UNU.RAN errors: report, do not abort the table
        return f"fails ({type(exc).__name__})"
    return time.perf_counter() - t0


def main() -> None:
    print(f"{'case':<22}{'size':>7}{'ARS [s]':>12}{'TDR [s]':>26}{'TDR/ARS':>10}")
    cases = [("2 terms", 2, None), ("100 terms", 100, None), ("10^4 terms", 10_000, None)]
    cases.append(("2 terms, mu ~ 1e200", 2, 1e200))
    for name, n_terms, mult in cases:
        for size in (1, 10_000):
            d_tdr = _make(n_terms, mult=mult)
            d_tdr.mode()
            t_tdr = _time(lambda d=d_tdr, n=size: _tdr_rvs(d, n, 1))
            d_ars = _make(n_terms, mult=mult)
            d_ars.mode()
            t_ars = _time(lambda d=d_ars, n=size: d.rvs(size=n, random_state=1))
            ratio = f"{t_tdr / t_ars:10.1f}" if isinstance(t_tdr, float) else f"{'-':>10}"
            tdr = f"{t_tdr:26.4f}" if isinstance(t_tdr, float) else f"{t_tdr:>26}"
            print(f"{name:<22}{size:>7}{t_ars:12.4f}{tdr}{ratio}")


if __name__ == "__main__":
    main()
