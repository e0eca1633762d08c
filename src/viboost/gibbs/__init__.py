"""The Gibbs side of viboost: Algorithm 2 and the generative model it samples.

- :mod:`viboost.gibbs.sampler`: :class:`GibbsSampler`, Algorithm 2 (the exact conditionals of
  the model over fixed base classifiers), with ArviZ output, and :func:`weight_conditional`;
- :mod:`viboost.gibbs.base_classifiers`: the base classifiers of a fitted VIBoost classifier
  (stumps, tied trees, the leaf indicators of per-leaf trees), deduplicated, and their outputs;
- :mod:`viboost.gibbs.kernels`: the compiled sweep of one chain;
- :mod:`viboost.gibbs.generative`: the generative process of section 4 and the label inversions
  of S.2 (public as :mod:`viboost.generative`).
"""

from viboost.gibbs.sampler import (
    GibbsSampler,
    arviz_uses_datatree,
    import_arviz,
    weight_conditional,
)

__all__ = ["GibbsSampler", "arviz_uses_datatree", "import_arviz", "weight_conditional"]
