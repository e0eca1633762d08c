"""The interface every noise model gives the fit driver: :class:`NoiseModel`.

A noise model is fitted to out-of-fold margins by its marginal likelihood (the robust preset's
cross-fit, :mod:`viboost.fitting.cross_fit`) and answers, for the rows it is given, the same
questions whatever the number of classes and whatever its channel, so the driver never asks
which one it holds:

- :class:`~viboost.noise_fit.calibration.NoiseCalibration`: two classes, the paper's model
  (section 4: a label is true with probability theta, else drawn with log-odds xi);
- :class:`~viboost.noise_fit.class_calibration.ClassNoiseCalibration`: K classes, the paper's
  channel (a noisy label drawn from pi whatever the true class);
- :class:`~viboost.noise_fit.channel_calibration.ClassChannelCalibration`: K classes, a full
  class-conditional noise matrix.

Labels ``y`` are the engine's: ``-1 / +1`` for two classes, class indices for K; ``margin`` is
``H`` (shape ``(n,)``) for two classes and ``F`` (shape ``(n, K)``) for K.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from viboost._utils.validation import RandomStateLike
from viboost.variational.priors import ModelPriors

__all__ = ["NoiseModel"]


class NoiseModel(Protocol):
    """What a calibrated noise model gives (see the module docstring)."""

    # Read-only: a calibration is frozen, and its channel's name is its class's.
    @property
    def channel_name(self) -> str:
        """``"independent"`` (the paper's channel) or ``"class-conditional"`` (a noise
        matrix)."""
        ...

    @property
    def log_likelihood(self) -> float:
        """The weighted marginal log-likelihood ``sum_n s_n log p(y_n | H_n)`` at the
        optimum."""
        ...

    def row_log_likelihood(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """``log p(y_n | H_n)`` of each row (the terms of :attr:`log_likelihood`)."""
        ...

    def clean_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """phi_n: the probability that each label is right (the refit's multiplicity)."""
        ...

    def mislabel_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The posterior probability that each label differs from its row's true class."""
        ...

    def true_class_proba(self, y: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The posterior of each row's true class given its label, shape (n, K)."""
        ...

    def joint(self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray) -> np.ndarray:
        """The expected joint of given (rows) and true (columns) labels, as shares of the
        weight, shape (K, K)."""
        ...

    def flip_rates(
        self, y: np.ndarray, margin: np.ndarray, sample_weight: np.ndarray
    ) -> np.ndarray:
        """``[share of wrong labels, flip rate of each true class]``, shape (K + 1,)."""
        ...

    def flip_rate_interval(
        self,
        y: np.ndarray,
        margin: np.ndarray,
        sample_weight: np.ndarray,
        level: float = 0.9,
        n_draws: int = 400,
        random_state: RandomStateLike = None,
    ) -> np.ndarray:
        """Equal-tailed ``level`` credible intervals of :meth:`flip_rates`, shape (K + 1, 2)."""
        ...

    def label_posteriors(
        self,
        y: np.ndarray,
        sample_weight: np.ndarray,
        clean_proba: np.ndarray,
        priors: ModelPriors,
    ) -> tuple[np.ndarray, np.ndarray]:
        """q(theta) = Beta(eta) and the noisy labels' posterior (omega: q(xi) for two classes,
        q(pi) = Dirichlet(omega) for K) given each label's phi_n (S.4.4 and S.4.2)."""
        ...
