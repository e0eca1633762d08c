"""The moments and the distribution function of the v-Log density, integrated around its mode.

``VersatileLogistic`` integrates ``exp(-g~)``, ``g~(d) = g(z* + d) - g(z*)`` in Bregman form
(:class:`~viboost.distributions._vlog_kernels.BregmanKernel`), over panels that double in width
away from the mode (:class:`Panels`, :func:`panels_around_mode`): once with the moment
integrands, for ``mean``, ``var`` and ``entropy`` (:func:`moment_quadrature`, :func:`moments`),
and once into the cached cdf table (:func:`cdf_table`) from which ``cdf`` and ``sf``
(:func:`cdf_sf`), ``ppf`` (:func:`quantiles`) and ``expected_softplus``
(:func:`softplus_expectation`; two terms of equal knots in closed form,
:func:`digamma_difference`) take their integrals. The quadrature rules and the tables are
those of :mod:`viboost.distributions._vlog_quadrature`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from viboost._utils.special import softplus
from viboost.distributions._vlog_kernels import BregmanKernel, check_kernel_dip
from viboost.distributions._vlog_quadrature import (
    CDF_TABLE_CUTOFF,
    CdfTable,
    QuadratureSetup,
    SideTable,
    build_side_table,
    gauss_kronrod_intervals,
    interpolate_side_table,
    invert_side_table,
    partial_masses,
    rise_scale,
    tail_masses,
)


class Panels(NamedTuple):
    """The shifted kernel ``g~`` at the mode ``z_star``, the curvature width ``scale`` there
    (``s0 = 1 / sqrt(g''(z*))``) and the panel edges on each side, in units of ``d = z - z*``
    (:func:`panels_around_mode`)."""

    kernel: BregmanKernel
    z_star: float
    scale: float
    right: NDArray[np.float64]
    left: NDArray[np.float64]


def panels_around_mode(kernel: BregmanKernel, z_star: float, s0: float, what: str) -> Panels:
    """The panels of ``kernel`` (``g~`` at the mode ``z_star``, curvature width ``s0``).

    On each side the panels are ``[0, s], [s, 2s], [2s, 4s], ...`` with ``s`` a width at
    which ``g~`` rises by ``O(1)``, up to where ``g~`` exceeds ``760 + 3 log(u / s)``
    (beyond, the mass is below the smallest double). ``what`` names the density in the error
    raised where ``g~`` dips below its rounding noise
    (:func:`~viboost.distributions._vlog_kernels.check_kernel_dip`).
    """
    edges = []
    for side in (1.0, -1.0):
        s = rise_scale(kernel, side, s0)
        e = [0.0]
        u = s
        # Doubling from s >= 1e-300 passes 1e300 within 2,000 steps.
        for _ in range(2100):
            e.append(u)
            r = float(kernel(np.array([side * u]))[0])
            check_kernel_dip(r, what)
            if r >= CDF_TABLE_CUTOFF + 3.0 * math.log(max(1.0, u / s)) or u > 1e300:
                break
            u *= 2.0
        edges.append(np.asarray(e))
    return Panels(kernel, z_star, s0, edges[0], edges[1])


def moment_quadrature(panels: Panels) -> QuadratureSetup:
    """The panels integrated with the moment integrands.

    Each panel is integrated by adaptive Gauss-Kronrod, together with the moment integrands
    ``|d|``, ``d**2`` and ``g~(d)`` (all nonnegative on a side), to ``1e-13`` relative to
    the panel plus the central mass (about 1).  The integration variable is ``t = d / s0``
    (``s0``: the curvature width), so that a peak 1e-150 wide or 1e150 wide is integrated
    without its moments (``s0**2``, ``s0**3`` in ``d``) underflowing or overflowing; all
    masses and moments of ``QuadratureSetup`` are in these units.
    """
    kernel, z_star, s0, right_edges, left_edges = panels
    sides = []
    for side, e in ((1.0, right_edges), (-1.0, left_edges)):
        n_panels = e.shape[0] - 1
        t_edges = e / s0

        def integrand(t: NDArray, side: float = side) -> NDArray:
            gt = kernel(side * s0 * t)
            f = np.exp(-np.maximum(gt, -700.0))
            # Tails that reach t ~ 1e160 give moments beyond the float range: the
            # quadrature then raises FloatingPointError.
            with np.errstate(over="ignore", invalid="ignore"):
                return np.stack([f, t * f, t * t * f, gt * f])

        vals = gauss_kronrod_intervals(
            integrand, t_edges[:-1], t_edges[1:], np.ones(n_panels)
        )
        # Masses beyond each edge: tails[i] = sum of panels i, i+1, ...
        tails = tail_masses(vals[0])
        sides.append((e, tails, vals.sum(axis=1)))
    mass = sides[0][2][0] + sides[1][2][0]
    return QuadratureSetup(kernel, z_star, s0, sides[0], sides[1], mass)


def moments(q: QuadratureSetup) -> tuple[float, float, float]:
    """``(mean, var, entropy)`` from the moment quadrature (:func:`moment_quadrature`)."""
    right, left = q.right[2], q.left[2]
    m1 = (right[1] - left[1]) / q.mass  # E[(Z - z*) / s0]
    m2 = (right[2] + left[2]) / q.mass  # E[((Z - z*) / s0)^2]
    eg = (right[3] + left[3]) / q.mass  # E[g~(Z - z*)]
    mean = q.z_star + q.scale * m1
    # Python floats: a variance beyond the float range is inf, as IEEE rounding gives.
    var = float(max(m2 - m1 * m1, 0.0)) * float(q.scale) * float(q.scale)
    # Entropy = log B + E[g] = (log B + g(z*)) + E[g~]; log B + g(z*) = log(s0 mass).
    entropy = math.log(q.scale) + math.log(q.mass) + eg
    return (mean, var, entropy)


def cdf_table(panels: Panels) -> CdfTable:
    """Piecewise Chebyshev interpolant of ``g~`` on both sides of the mode.

    The panels are bisected until the degree-16 Chebyshev interpolant of ``g~`` on each cell
    has converged (last coefficients below ``1e-13 (1 + |g~|)``, so the density ``exp(-g~)``
    is reproduced to ~1e-13 relative, in the tails too).  The mass of every cell (and the mass
    beyond each cell edge, summed outwards from the far end) is integrated once from the
    interpolant; ``cdf``, ``sf`` and ``ppf`` then only integrate the cheap interpolant from a
    point to the nearest edge, never the ``K``-term kernel.
    """
    kernel, z_star, s0, right_edges, left_edges = panels
    # In units of t = (z - z*) / s0 (see build_side_table).
    right = build_side_table(kernel, 1.0, right_edges / s0, s0)
    left = build_side_table(kernel, -1.0, left_edges / s0, s0)
    mass = float(right.tails[0] + left.tails[0])
    return CdfTable(right, left, mass, z_star, s0)


def cdf_sf(t: CdfTable, flat: NDArray[np.float64], upper: bool) -> NDArray[np.float64]:
    """``P(Z > z)`` (``upper``) or ``P(Z <= z)`` at the points ``flat`` (1-D, no NaN) from the
    table ``t``: below the mode from the lower tail's mass, above it from the upper tail's,
    each normalised by the table's total mass."""
    d = (flat - t.z_star) / t.scale
    below = d <= 0.0
    mass_lo = np.zeros(d.shape[0])
    mass_up = np.zeros(d.shape[0])
    mass_lo[below] = partial_masses(t.left, -d[below])
    mass_up[~below] = partial_masses(t.right, d[~below])
    low_p = mass_lo / t.mass
    up_p = mass_up / t.mass
    if upper:
        out = np.where(below, 1.0 - low_p, up_p)
    else:
        out = np.where(below, low_p, 1.0 - up_p)
    out = np.clip(out, 0.0, 1.0)
    return out


def quantiles(t: CdfTable, flat: NDArray[np.float64]) -> NDArray[np.float64]:
    """The quantiles of the probabilities ``flat`` (1-D, in [0, 1]) from the table ``t``:
    those below ``cdf(mode)`` through the lower tail, the others through the upper one."""
    c_mode = t.left.tails[0] / t.mass
    out = np.full(flat.shape[0], t.z_star)
    out[flat == 0.0] = -math.inf
    out[flat == 1.0] = math.inf
    lower = (flat > 0.0) & (flat < c_mode)
    upper = (flat > c_mode) & (flat < 1.0)
    if np.any(lower):
        target = np.minimum(flat[lower] * t.mass, t.left.tails[0])
        out[lower] = t.z_star - t.scale * invert_side_table(t.left, target)
    if np.any(upper):
        target = np.minimum((1.0 - flat[upper]) * t.mass, t.right.tails[0])
        out[upper] = t.z_star + t.scale * invert_side_table(t.right, target)
    return out


def softplus_expectation(t: CdfTable, sign: float, shift: float) -> float:
    """``E[log(1 + exp(sign (Z - shift)))]`` by adaptive Gauss-Kronrod over the cdf table
    ``t`` (``VersatileLogistic.expected_softplus``)."""
    total = 0.0
    for side, table in ((1.0, t.right), (-1.0, t.left)):
        edges = table.edges

        def integrand(u: NDArray, side: float = side, table: SideTable = table) -> NDArray:
            f = np.exp(-np.maximum(interpolate_side_table(table, u), -700.0))
            sp = softplus(sign * (t.z_star + side * t.scale * u - shift))
            return np.stack([f, sp * f])

        vals = gauss_kronrod_intervals(
            integrand, edges[:-1], edges[1:], np.zeros(edges.shape[0] - 1)
        )
        total += math.fsum(vals[1].tolist())
    return total / t.mass


_DIGAMMA_SERIES = (
    (1, 0.5),
    (2, 1.0 / 12.0),
    (4, -1.0 / 120.0),
    (6, 1.0 / 252.0),
    (8, -1.0 / 240.0),
    (10, 1.0 / 132.0),
    (12, -691.0 / 32760.0),
)


def digamma_difference(x: float, y: float) -> float:
    """``digamma(x + y) - digamma(x)`` for ``x, y > 0`` without cancellation.

    For ``x >= 10`` the asymptotic series ``psi(t) = log t - 1/(2t) - 1/(12t^2) + ...`` is
    differenced term by term, ``t^-n`` differences as ``x^-n (1 - (1 + r)^-n)`` with
    ``r = y / x``; below, ``psi(t) = psi(t + 1) - 1/t`` shifts ``x`` up, adding the positive
    terms ``y / ((x + j)(x + y + j))``.
    """
    acc = 0.0
    while x < 12.0:
        acc += 1.0 / (x * (1.0 + x / y))  # y / (x (x + y)), without overflow
        x += 1.0
    r = y / x
    lr = math.log1p(r)
    # psi(t) ~ log t - 1/(2t) - sum_k B_2k / (2k t^2k)
    series = 0.0
    for n, c in _DIGAMMA_SERIES:
        series += c * x**-n * -math.expm1(-n * lr)
    return acc + lr + series
