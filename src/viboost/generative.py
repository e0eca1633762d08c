"""The generative process of section 4 and the label inversions of S.2 (public path).

Defined in :mod:`viboost.gibbs.generative`, beside the Gibbs sampler that draws from the same
model; this module is its public import path.
"""

from viboost.gibbs.generative import (
    ModelDraw,
    binary_asymmetric_channel,
    inversion_to_noise,
    sample_model,
    sample_two_term_vlog,
    true_to_noisy_ratio,
)

__all__ = [
    "ModelDraw",
    "binary_asymmetric_channel",
    "inversion_to_noise",
    "sample_model",
    "sample_two_term_vlog",
    "true_to_noisy_ratio",
]
