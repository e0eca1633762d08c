"""The hyperparameters of the generative model of section 4, as one value object."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelPriors"]


@dataclass(frozen=True)
class ModelPriors:
    """Hyperparameters of the generative model of section 4.

    ``weight`` is mu_0 (prior v-Log(u, 0, mu_0 1) on each weight c_m), ``noise_grade`` is mu_0'
    (prior v-Log(u, 0, mu_0' 1) on xi) and ``clean`` is zeta (prior Beta(zeta_1, zeta_2) on theta).
    """

    weight: float = 1.0
    noise_grade: float = 1.0
    clean: tuple[float, float] = (1.0, 1.0)
