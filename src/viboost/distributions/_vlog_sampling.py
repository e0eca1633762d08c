"""Adaptive rejection sampling of the v-Log distribution (supplement S.1).

This module owns the sampler behind ``VersatileLogistic.rvs``:
:class:`AdaptiveRejectionSampler` and its :class:`SamplingError`.
``VersatileLogistic.rvs`` draws exactly from the log-concave density ``exp(-g~)`` with the
adaptive rejection sampler of Gilks & Wild (1992): a tangent hull and chord squeeze of
``h = -g~`` (:class:`_Envelope`, :func:`_make_envelope`), refined deterministically
(:func:`_ars_excess`) and then frozen in :class:`AdaptiveRejectionSampler`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_expit

from viboost._utils.special import log1mexp
from viboost.distributions._vlog_kernels import (
    BREGMAN_CHUNK_ELEMENTS,
    KERNEL_DIP_LIMIT,
    BregmanKernel,
    chunk_rows,
)

# ---------------------------------------------------------------------- adaptive rejection
_ARS_EFFICIENCY = 0.99  # refine the envelope until (squeeze mass) / (hull mass) reaches this
_ARS_MAX_POINTS = 200
_ARS_MAX_ROUNDS = 40
_ARS_ADD_PER_ROUND = 24
# Batches of proposals before ``sample`` gives up.  A refined envelope accepts >= 99% (at least
# ``_ARS_MIN_EFFICIENCY`` when the refinement is cut short), so a batch sized for the draws
# still needed fills them with probability near 1; 200 batches are never needed by a valid one.
_ARS_MAX_BATCHES = 200
# Below this squeeze/hull mass ratio the envelope is not usable (see ``_check_envelope``).
_ARS_MIN_EFFICIENCY = 0.05


class SamplingError(RuntimeError):
    """A v-Log density could not be sampled: its log-density is not resolved in float64."""


def _kernel_slope(kernel: BregmanKernel, d: NDArray) -> NDArray:
    """``g~'(d)`` in true units for a 1-D array ``d``, consistent with ``kernel`` (Bregman form).

    ``g~'(d) = gamma + sum_k mu_k beta_k (expit(a_k + beta_k d) - expit(a_k))``; each
    difference is formed as ``expit(a + delta) expit(-a) (1 - e^-delta)`` (``delta >= 0``) or
    ``-expit(a) expit(-a - delta) (1 - e^delta)`` (``delta < 0``), without cancellation, and the
    products with ``mu`` in log space, so that multiplicities up to 1e300 cause no noise.
    """
    out = np.empty(d.shape[0])
    a, b = kernel.a, kernel.slopes
    log_w = np.log(kernel.weights)
    lp_a, lq_a = log_expit(a), log_expit(-a)
    rows = chunk_rows(b.shape[0], BREGMAN_CHUNK_ELEMENTS)
    for start in range(0, d.shape[0], rows):
        delta = np.multiply.outer(d[start : start + rows], b)
        t = delta + a
        up = delta >= 0.0
        log_mag = log_w + np.where(up, log_expit(t) + lq_a, lp_a + log_expit(-t))
        factor = np.where(up, -np.expm1(-np.abs(delta)), np.expm1(-np.abs(delta)))
        out[start : start + rows] = (np.exp(log_mag) * factor) @ b
    return (out + kernel.gamma) * kernel.scale


class _Envelope(NamedTuple):
    """Tangent hull and chord squeeze of a concave ``h`` (Gilks & Wild 1992), frozen."""

    x: NDArray  # abscissae, increasing
    h: NDArray  # h(x)
    dh: NDArray  # h'(x), decreasing (positive first, negative last)
    z: NDArray  # piece boundaries: -inf, tangent intersections, +inf
    log_mass: NDArray  # log mass of each hull piece
    cum: NDArray  # cumulative normalised masses of the pieces
    efficiency: float  # squeeze mass / hull mass: the fraction accepted without evaluating h


def _log_exp_piece(u_left: NDArray, slope: NDArray, width: NDArray) -> NDArray:
    """``log integral_0^width exp(u_left + slope t) dt`` (``width`` may be inf if slope < 0)."""
    with np.errstate(over="ignore"):  # y = inf: the piece's mass is exp(top) / |slope|
        y = np.abs(slope) * width
    top = np.where(slope > 0.0, u_left + slope * np.where(np.isfinite(width), width, 0.0), u_left)
    out = np.empty(u_left.shape[0])
    flat = (y == 0.0) | (slope == 0.0)
    with np.errstate(divide="ignore"):  # a zero-width piece has mass 0 (log -inf)
        out[flat] = u_left[flat] + np.log(width[flat])
    nf = ~flat
    # integral = exp(top) (1 - e^-y) / |slope|
    out[nf] = top[nf] + log1mexp(y[nf]) - np.log(np.abs(slope[nf]))
    return out


def _make_envelope(x: NDArray, h: NDArray, dh: NDArray) -> _Envelope:
    m = x.shape[0]
    gap = np.diff(x)
    den = dh[:-1] - dh[1:]
    # Parallel tangents or an overflow give a non-finite intersection: the midpoint, below.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        zi = x[:-1] + (h[1:] - h[:-1] - dh[1:] * gap) / den
    zi = np.where(np.isfinite(zi) & (den > 0.0), zi, x[:-1] + 0.5 * gap)
    zi = np.clip(zi, x[:-1], x[1:])
    z = np.concatenate([[-np.inf], zi, [np.inf]])
    # Piece j: line h_j + dh_j (x - x_j) on [z_j, z_{j+1}]; integrate from its left end
    # (or, for the first piece, from the right end backwards with the reflected slope).
    left_end = np.where(np.isfinite(z[:-1]), z[:-1], z[1:])
    with np.errstate(over="ignore"):  # a steep tangent far from its abscissa: -inf, no mass
        u_left = h + dh * (left_end - x)
    width = z[1:] - z[:-1]
    slope = np.where(np.isfinite(z[:-1]), dh, -dh)
    log_mass = _log_exp_piece(u_left, slope, width)
    if not np.all(log_mass < math.inf):  # +inf or NaN: a piece holds more than a float
        raise SamplingError(
            "adaptive rejection sampling: the hull of the v-Log density has a piece of "
            "infinite mass (tails or slopes beyond the float range)"
        )
    top = float(np.max(log_mass))
    w = np.exp(log_mass - top)
    total = float(np.sum(w))
    cum = np.cumsum(w) / total
    cum[-1] = 1.0
    # Squeeze mass: chords between consecutive abscissae.
    dh_chord = (h[1:] - h[:-1]) / gap if m > 1 else np.zeros(0)
    sq = _log_exp_piece(h[:-1], dh_chord, gap) if m > 1 else np.zeros(0)
    efficiency = float(np.sum(np.exp(sq - top)) / total)
    return _Envelope(x, h, dh, z, log_mass, cum, efficiency)


def _ars_excess(env: _Envelope) -> tuple[NDArray, NDArray]:
    """Candidate new abscissae and the hull-minus-squeeze mass each would reduce."""
    x, h, dh, z = env.x, env.h, env.dh, env.z
    top = float(np.max(env.log_mass))
    gap = np.diff(x)
    # Hull mass on [x_i, x_{i+1}]: right part of piece i plus left part of piece i+1.
    right = _log_exp_piece(h[:-1], dh[:-1], z[1:-1] - x[:-1])
    left = _log_exp_piece(h[1:] + dh[1:] * (z[1:-1] - x[1:]), dh[1:], x[1:] - z[1:-1])
    chord = _log_exp_piece(h[:-1], (h[1:] - h[:-1]) / gap, gap)
    inner = np.exp(right - top) + np.exp(left - top) - np.exp(chord - top)
    inner_pts = np.where((z[1:-1] > x[:-1]) & (z[1:-1] < x[1:]), z[1:-1], x[:-1] + 0.5 * gap)
    ends = np.exp(env.log_mass[[0, -1]] - top)
    # One e-fold further out (inf for a flat end: such candidates are dropped by the caller).
    with np.errstate(over="ignore", divide="ignore"):
        end_pts = np.array([x[0] - 1.0 / dh[0], x[-1] - 1.0 / dh[-1]])
    return np.concatenate([inner_pts, end_pts]), np.concatenate([inner, ends])


class AdaptiveRejectionSampler:
    """Adaptive rejection sampler of ``x = (Z - z*) / s`` with ``h(x) = -g~(s x)``.

    The envelope is refined deterministically when built (see ``VersatileLogistic.rvs``) and
    then frozen, so that draws depend only on the random stream.
    """

    def __init__(self, kernel: BregmanKernel, z_star: float, s: float) -> None:
        self.kernel = kernel
        self.z_star = z_star
        self.s = s
        self.n_evals = 0
        # Densities whose tails reach beyond the float range overflow while the envelope is
        # built; every abscissa, slope and piece mass is checked (``_check_envelope``,
        # ``_make_envelope``), so an overflow ends in SamplingError, never in a silent inf.
        with np.errstate(over="ignore", invalid="ignore"):
            self.env = self._build_envelope()

    def _build_envelope(self) -> _Envelope:
        # Initial abscissae: c on each side with h'(c) of the right sign and h(c) >= -40.
        pts = [0.0]
        for side in (1.0, -1.0):
            c = 1.0
            for _ in range(2000):
                h, dh = self._eval(np.array([side * c]))
                if side * dh[0] >= 0.0:  # still rising towards the tail: go further out
                    if c > 1e300:
                        break  # never decays in float range: _check_envelope raises
                    c *= 2.0
                elif h[0] < -40.0 and c > 1e-300:
                    c *= 0.25
                else:
                    break
            pts.append(side * c)
        x = np.unique(np.asarray(pts))
        h, dh = self._eval(x)
        _check_envelope(x, h, dh)
        env = _make_envelope(x, h, dh)
        for _ in range(_ARS_MAX_ROUNDS):
            if env.efficiency >= _ARS_EFFICIENCY or env.x.shape[0] >= _ARS_MAX_POINTS:
                break
            cand, excess = _ars_excess(env)
            pick = np.argsort(-excess, kind="stable")[:_ARS_ADD_PER_ROUND]
            pick = pick[excess[pick] >= 0.05 * excess[pick[0]]]
            new = cand[pick]
            new = new[np.isfinite(new)]
            # Skip abscissae that (nearly) coincide with existing ones.
            pos = np.clip(np.searchsorted(env.x, new), 1, env.x.shape[0] - 1)
            near = np.minimum(np.abs(new - env.x[pos - 1]), np.abs(new - env.x[pos]))
            new = np.unique(new[near > 1e-12 * np.maximum(1.0, np.abs(new))])
            if new.shape[0] == 0:
                break
            h_new, dh_new = self._eval(new)
            x = np.concatenate([env.x, new])
            order = np.argsort(x, kind="stable")
            h = np.concatenate([env.h, h_new])[order]
            dh = np.concatenate([env.dh, dh_new])[order]
            _check_envelope(x[order], h, dh)
            env = _make_envelope(x[order], h, dh)
        if not env.efficiency >= _ARS_MIN_EFFICIENCY:
            raise SamplingError(
                "adaptive rejection sampling: the envelope of the v-Log density accepts only "
                f"{env.efficiency:.3g} of its mass after {env.x.shape[0]} tangents; the density "
                "is not resolved in float64 (multiplicities or slopes too extreme)"
            )
        return env

    def _h(self, x: NDArray) -> NDArray:
        self.n_evals += x.shape[0]
        return -self.kernel(self.s * x)

    def _eval(self, x: NDArray) -> tuple[NDArray, NDArray]:
        h = self._h(x)
        dh = -self.s * _kernel_slope(self.kernel, self.s * x)
        return h, dh

    def sample(self, n: int, rng: np.random.Generator | np.random.RandomState) -> NDArray:
        """``n`` exact draws of ``Z``, in generation order."""
        env = self.env
        x_k, h_k, dh_k, z = env.x, env.h, env.dh, env.z
        m = x_k.shape[0]
        out: list[NDArray] = []
        need = n
        for _ in range(_ARS_MAX_BATCHES):
            if need <= 0:
                break
            batch = int(need / env.efficiency * 1.05) + 4
            u1, u2, u3 = rng.random(batch), rng.random(batch), rng.random(batch)
            j = np.minimum(np.searchsorted(env.cum, u1, side="right"), m - 1)
            lam = dh_k[j]
            lo, hi = z[j], z[j + 1]
            width = hi - lo
            # Inverse cdf of the truncated exponential exp(lam x) on [lo, hi], measured from
            # its higher end: y = -log(1 - U (1 - e^(-|lam| w))) / |lam|  (w may be inf).
            rate = np.abs(lam)
            with np.errstate(divide="ignore", invalid="ignore"):
                y = -np.log1p(-u2 * -np.expm1(-rate * width)) / rate
            y = np.where(rate * np.where(np.isfinite(width), width, np.inf) > 1e-300, y, u2 * width)
            y = np.minimum(np.where(np.isfinite(y), y, 0.0), np.where(np.isfinite(width), width, y))
            xs = np.where(lam > 0.0, hi - y, lo + y)
            xs = np.clip(xs, lo, hi)
            upper = h_k[j] + lam * (xs - x_k[j])
            # Squeeze: chord between the abscissae around xs (-inf outside [x_0, x_{m-1}]).
            i = np.clip(np.searchsorted(x_k, xs, side="right") - 1, 0, max(m - 2, 0))
            inside = (xs >= x_k[0]) & (xs <= x_k[-1]) & (m > 1)
            if m > 1:
                frac = (xs - x_k[i]) / (x_k[i + 1] - x_k[i])
                chord = h_k[i] + frac * (h_k[i + 1] - h_k[i])
            else:  # pragma: no cover - the envelope has at least 2 abscissae
                chord = np.full(batch, -np.inf)
            log_u = np.log(u3)  # u3 = 0 gives -inf: accepted, as it should be
            accept = inside & (log_u <= chord - upper)
            rest = np.flatnonzero(~accept)
            if rest.shape[0]:
                h_rest = self._h(xs[rest])
                accept[rest] = log_u[rest] <= h_rest - upper[rest]
            got = xs[accept][:need]
            out.append(got)
            need -= got.shape[0]
        else:
            if need > 0:
                raise SamplingError(
                    f"adaptive rejection sampling accepted {n - need} of {n} draws in "
                    f"{_ARS_MAX_BATCHES} batches of proposals (envelope efficiency "
                    f"{env.efficiency:.3g}); the v-Log density is not resolved in float64"
                )
        return self.z_star + self.s * (np.concatenate(out) if out else np.zeros(0))


def _check_envelope(x: NDArray, h: NDArray, dh: NDArray) -> None:
    """Raise :class:`SamplingError` unless ``(x, h, dh)`` can bound a log-concave density.

    ``h`` must be finite and at most ``KERNEL_DIP_LIMIT`` (it is 0 at the centre ``x = 0``),
    rising at the leftmost abscissa and falling at the rightmost; otherwise the kernel is
    rounding noise (for example a tilt far above the density's own scale) and no envelope
    built from it bounds the density.
    """
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(dh))):
        raise SamplingError(
            "adaptive rejection sampling: the v-Log log-density is not finite near its mode"
        )
    top = float(np.max(h))
    if top > KERNEL_DIP_LIMIT or not (dh[0] > 0.0 and dh[-1] < 0.0):
        raise SamplingError(
            "adaptive rejection sampling: the v-Log log-density is not resolved in float64 "
            f"(it rises by {top:.3g} from its computed mode, or does not decay in both "
            "directions); the multiplicities or slopes are too extreme"
        )
