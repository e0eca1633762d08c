"""Probability distributions of the Bayesian boosting model (section 3 of the paper).

* :class:`VersatileLogistic` -- the v-Log prior/posterior over a real weight;
* :class:`BinaryLogistic` -- the b-Log label likelihood, conjugate to v-Log.
"""

from viboost.distributions.binary_logistic import BinaryLogistic
from viboost.distributions.versatile_logistic import VersatileLogistic

__all__ = ["BinaryLogistic", "VersatileLogistic"]
