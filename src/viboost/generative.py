"""The generative process of section 4 and the label inversions of S.2 (public path).

Defined in :mod:`viboost.gibbs.generative`, beside the Gibbs sampler that draws from the same
model; this module is its public import path and exports the same names.
"""

from viboost.gibbs.generative import *  # noqa: F403 - re-exported: the names of __all__
from viboost.gibbs.generative import __all__  # noqa: F401
