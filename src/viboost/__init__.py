"""viboost: Bayesian boosting with a model of label noise.

The reference implementation of "A Bayesian Boosting Model" (Lorbert, Blei, Schapire, Ramadge):

- :class:`VIBoostClassifier` (:mod:`viboost.estimator`): Algorithm 1 as a scikit-learn classifier;
- :class:`GibbsSampler` (:mod:`viboost.gibbs`): Algorithm 2, posterior draws for ArviZ;
- :mod:`viboost.generative`: the generative process of section 4 and the label inversions of S.2;
- :mod:`viboost.noise`, :mod:`viboost.explain`, :mod:`viboost.plotting`: label issues, SHAP
  values and plots of a fit; :mod:`viboost.dask`: the same fit on a Dask cluster;
- :mod:`viboost.boosting`: the engine (binning, base learners and their search, reweighting,
  prediction, the booster); :mod:`viboost.variational`: one round of Algorithm 1 (the updates,
  the state, the ELBO, the pseudo-rows); :mod:`viboost.noise_fit`: the cross-fitted noise fit;
- :mod:`viboost.distributions`: the versatile logistic (v-Log) and binary logistic (b-Log);
- :mod:`viboost.datasets`: bundled data; :mod:`viboost.cli`: the ``viboost`` command.
"""

from viboost._utils import compile as _compile
from viboost._utils import legacy as _legacy
from viboost._version import __version__
from viboost.estimator import VIBoostClassifier, ViboostVersionWarning
from viboost.gibbs import GibbsSampler

# The kernels compile on first use (nothing compiles at import); when one really compiles (not
# loaded from numba's cache), one line on stderr says so. VIBOOST_QUIET_COMPILE=1 silences it.
_compile.install()
# Models pickled by viboost 0.1.0 name modules that have moved since.
_legacy.install()

__all__ = ["GibbsSampler", "VIBoostClassifier", "ViboostVersionWarning", "__version__"]
