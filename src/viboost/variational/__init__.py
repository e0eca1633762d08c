"""Stagewise variational inference for the noise model: the inner loop of Algorithm 1.

Each boosting round fixes the ensemble ``H`` and a new stump ``h`` and runs mean-field
variational inference on the round's model (section 5, Figure 4; the updates in supplement
S.4, the ELBO in S.5). This package owns all of it; the estimator
(:class:`viboost.VIBoostClassifier`) only picks the stump, calls :func:`run_round` and reweights.

==============================  ===========================================================
module                          owns
==============================  ===========================================================
:mod:`.priors`                  :class:`ModelPriors`, the hyperparameters mu_0, mu_0', zeta
:mod:`.state`                   :class:`VariationalState` (q(theta), q(xi), q(w)) and the
                                one definition of phi_n, :class:`CleanLogOdds`, in numpy
                                and compiled forms
:mod:`.updates`                 the coordinate updates of S.4 as pure functions
:mod:`.elbo`                    the dynamic ELBO of S.5 and ``log B_c`` (S.5.1)
:mod:`.round`                   :func:`run_round`: the loop and its stopping rule, on rows or
                                pseudo-rows (:class:`RoundRows`)
==============================  ===========================================================
"""

from viboost.variational.elbo import core_elbo, elbo, log_normalizer_c
from viboost.variational.priors import ModelPriors
from viboost.variational.round import (
    RoundResult,
    RoundRows,
    RoundSettings,
    initial_state,
    run_round,
)
from viboost.variational.state import CleanLogOdds, VariationalState
from viboost.variational.updates import (
    approx_alpha,
    exact_alpha,
    update_clean_proba,
    update_eta,
    update_omega,
    weight_posterior,
)

__all__ = [
    "CleanLogOdds",
    "ModelPriors",
    "RoundResult",
    "RoundRows",
    "RoundSettings",
    "VariationalState",
    "approx_alpha",
    "core_elbo",
    "elbo",
    "exact_alpha",
    "initial_state",
    "log_normalizer_c",
    "run_round",
    "update_clean_proba",
    "update_eta",
    "update_omega",
    "weight_posterior",
]
